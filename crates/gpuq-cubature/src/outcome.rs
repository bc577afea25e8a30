//! What an integration returns.

use serde::Serialize;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The error estimate met max(abs_tol, rel_tol |estimate|).
    Converged,
    /// Not converged: the evaluation cap stopped the run first.
    EvaluationCap,
    /// Not converged: a memory cap (boxes kept, or a thread's heap in the
    /// second phase) stopped the run first.
    MemoryCap,
}

impl Status {
    /// "converged" or "not converged (...)".
    pub fn describe(&self) -> &'static str {
        match self {
            Status::Converged => "converged",
            Status::EvaluationCap => "not converged (evaluation cap)",
            Status::MemoryCap => "not converged (memory cap)",
        }
    }
}

/// Wall-clock seconds of the phases of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Adaptive rounds over all live boxes (the first phase, or all of
    /// breadth-first and sequential CUHRE).
    pub phase1_s: f64,
    /// The second phase (per-box sequential CUHRE), zero for other methods.
    pub phase2_s: f64,
    /// The whole run.
    pub total_s: f64,
    /// Of the rounds, the seconds inside the backend's batch evaluations
    /// (`cub_evaluate`, `cub_tensor`; on the device with the transfers of
    /// boxes and results): the rest of `phase1_s` is the bookkeeping between
    /// rounds (classification, ordering, splitting). Zero for sequential
    /// CUHRE, which makes no batch calls.
    pub evaluate_s: f64,
}

/// The result of one integration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// Estimate of the integral.
    pub estimate: f64,
    /// Error estimate (sum of the final boxes' error estimates; zero for a
    /// tensor rule, which has none).
    pub error: f64,
    /// Integrand evaluations.
    pub evaluations: u64,
    /// Boxes in the final partition.
    pub boxes: u64,
    /// Rounds over all live boxes (first phase / breadth-first) or splits
    /// (sequential CUHRE).
    pub rounds: u64,
    /// How the run ended.
    pub status: Status,
    /// Phase timings.
    pub timings: Timings,
}

impl Outcome {
    /// True when the run met its tolerance.
    pub fn converged(&self) -> bool {
        self.status == Status::Converged
    }
}

/// Tolerances, caps and tuning of the adaptive methods.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Relative tolerance.
    pub rel_tol: f64,
    /// Absolute tolerance.
    pub abs_tol: f64,
    /// Most integrand evaluations.
    pub max_evals: u64,
    /// Which rule.
    pub rule: crate::rules::RuleKind,
    /// Most live boxes a round may hold (the first phase's L_max; the
    /// breadth-first memory bound).
    pub max_boxes: usize,
    /// Boxes of the initial l^n partition (l the largest with l^n at most this).
    pub initial_boxes: usize,
    /// Breadth-first only: a round splits the worst bad boxes until the error
    /// of those left unsplit is within this fraction of the target, in [0, 1);
    /// 0 splits every bad box (fewest rounds), larger values fewer boxes per
    /// round (fewest evaluations, more rounds). Default 0.5.
    pub split_aim: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rel_tol: 1e-6,
            abs_tol: 0.0,
            max_evals: 100_000_000,
            rule: crate::rules::RuleKind::Cuhre,
            max_boxes: 1 << 16,
            initial_boxes: 1 << 10,
            split_aim: 0.5,
        }
    }
}

impl Options {
    /// The error target for an estimate: max(abs_tol, rel_tol |estimate|).
    pub fn target(&self, estimate: f64) -> f64 {
        self.abs_tol.max(self.rel_tol * estimate.abs())
    }

    /// Errors unless the tolerances are non-negative and not both zero, and the
    /// caps are positive.
    pub fn check(&self) -> gpuq_core::Result<()> {
        let ok = self.rel_tol >= 0.0
            && self.abs_tol >= 0.0
            && (self.rel_tol > 0.0 || self.abs_tol > 0.0)
            && self.max_evals > 0
            && self.max_boxes >= 2
            && self.initial_boxes >= 1
            && (0.0..1.0).contains(&self.split_aim);
        if ok {
            Ok(())
        } else {
            Err(gpuq_core::Error::InvalidArgument(format!(
                "cubature options: tolerances must be >= 0 and not both 0, caps positive, split_aim in [0, 1) ({self:?})"
            )))
        }
    }
}
