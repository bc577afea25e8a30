//! What an integration returns.

use crate::kernels::CubatureKernels;
use crate::method::Method;
use serde::Serialize;
use std::time::Instant;

/// How a run ended: why it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The error estimate met max(abs_tol, rel_tol |estimate|).
    Converged,
    /// Not converged: the evaluation cap ([`Options::max_evals`]) stopped the
    /// run first.
    EvaluationCap,
    /// Not converged: a memory cap (boxes kept, [`Options::max_boxes`], or a
    /// thread's heap in the second phase: the region cap) stopped the run
    /// first.
    MemoryCap,
    /// Not converged: the time limit ([`Options::max_time`]) stopped the run
    /// first.
    TimeLimit,
    /// Not converged: a stop was requested ([`gpuq_core::interrupt`], Ctrl-C in the CLI);
    /// the estimate is that of the rounds done.
    Interrupted,
}

impl Status {
    /// "converged" or "not converged (...)".
    pub fn describe(&self) -> &'static str {
        match self {
            Status::Converged => "converged",
            Status::EvaluationCap => "not converged (evaluation cap)",
            Status::MemoryCap => "not converged (memory cap)",
            Status::TimeLimit => "not converged (time limit)",
            Status::Interrupted => "not converged (interrupted)",
        }
    }

    /// Why the run stopped, in a few words: "tolerance met", "evaluation
    /// cap", "region cap" or "time limit".
    pub fn reason(&self) -> &'static str {
        match self {
            Status::Converged => "tolerance met",
            Status::EvaluationCap => "evaluation cap",
            Status::MemoryCap => "region cap",
            Status::TimeLimit => "time limit",
            Status::Interrupted => "interrupted",
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
    /// The method that ran (what [`Method::Auto`] chose).
    pub method: Method,
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
    /// Most integrand evaluations; [`Options::BACKEND_CAP`] (0, the default):
    /// about [`DEFAULT_BUDGET_S`] seconds of the backend's work,
    /// [`Options::backend_cap`].
    pub max_evals: u64,
    /// Most seconds of a run (`None`, the default: no limit). The adaptive
    /// methods look at the clock between rounds (sequential CUHRE every
    /// [`CLOCK_EVERY`] splits, the second phase between its passes) and stop
    /// with [`Status::TimeLimit`] and the estimate so far; a round or a pass
    /// under way finishes first, and the first round (the first order of the
    /// Gauss-Legendre sequence) always runs, so a stop has an estimate.
    pub max_time: Option<f64>,
    /// Which rule.
    pub rule: crate::rules::RuleKind,
    /// Most live boxes a round may hold (the first phase's L_max and the
    /// second phase's boxes; the breadth-first memory bound). Default 2^18,
    /// as `gpuq integrate`'s (about 16 n + 24 bytes each on the host).
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
            max_evals: Options::BACKEND_CAP,
            max_time: None,
            rule: crate::rules::RuleKind::Cuhre,
            max_boxes: 1 << 18,
            initial_boxes: 1 << 10,
            split_aim: 0.5,
        }
    }
}

/// The default evaluation cap in seconds of the backend's nominal throughput
/// ([`CubatureKernels::cub_throughput`]): 60 s, the seed's cap of 10^8
/// evaluations being about a minute of its sequential code.
pub const DEFAULT_BUDGET_S: f64 = 60.0;

/// Splits of sequential CUHRE between two looks at the clock.
pub const CLOCK_EVERY: u64 = 256;

impl Options {
    /// [`Options::max_evals`] meaning "the backend's default cap".
    pub const BACKEND_CAP: u64 = 0;

    /// The default evaluation cap of `backend` for `f`: [`DEFAULT_BUDGET_S`]
    /// seconds of its nominal throughput, to two significant digits (on the
    /// CPU backend 1.8 x 10^8 per thread, on the CUDA backend 1.2 x 10^11).
    pub fn backend_cap<B: CubatureKernels>(backend: &B, f: crate::func::Func<'_>) -> u64 {
        round2(backend.cub_throughput(f) * DEFAULT_BUDGET_S) as u64
    }

    /// The default evaluation cap of one host thread (sequential CUHRE on
    /// the host): [`DEFAULT_BUDGET_S`] seconds of
    /// [`crate::kernels::HOST_EVALS_PER_THREAD_S`], 1.8 x 10^8.
    pub fn host_thread_cap() -> u64 {
        round2(crate::kernels::HOST_EVALS_PER_THREAD_S * DEFAULT_BUDGET_S) as u64
    }

    /// These options with [`Options::BACKEND_CAP`] replaced by `backend`'s cap
    /// for `f`.
    pub fn resolved<B: CubatureKernels>(&self, backend: &B, f: crate::func::Func<'_>) -> Options {
        self.with_cap(Options::backend_cap(backend, f))
    }

    /// These options with [`Options::BACKEND_CAP`] replaced by `cap` (at least 1).
    pub fn with_cap(&self, cap: u64) -> Options {
        let mut o = *self;
        if o.max_evals == Options::BACKEND_CAP {
            o.max_evals = cap.max(1);
        }
        o
    }

    /// The error target for an estimate: max(abs_tol, rel_tol |estimate|).
    pub fn target(&self, estimate: f64) -> f64 {
        self.abs_tol.max(self.rel_tol * estimate.abs())
    }

    /// Errors unless the tolerances are non-negative and not both zero, the
    /// caps positive (or the evaluation cap [`Options::BACKEND_CAP`]) and a
    /// time limit positive.
    pub fn check(&self) -> gpuq_core::Result<()> {
        let bad = |what: String| {
            Err(gpuq_core::Error::InvalidArgument(format!(
                "cubature: {what}"
            )))
        };
        if self.rel_tol.is_nan()
            || self.abs_tol.is_nan()
            || self.rel_tol < 0.0
            || self.abs_tol < 0.0
        {
            return bad(format!(
                "tolerances must be >= 0 (relative {}, absolute {})",
                self.rel_tol, self.abs_tol
            ));
        }
        if self.rel_tol == 0.0 && self.abs_tol == 0.0 {
            return bad("the relative and absolute tolerances are both 0".into());
        }
        if let Some(t) = self.max_time.filter(|t| t.is_nan() || *t <= 0.0) {
            return bad(format!("the time limit must be positive (got {t} s)"));
        }
        if self.max_boxes < 2 {
            return bad(format!(
                "max_boxes must be at least 2 (got {})",
                self.max_boxes
            ));
        }
        if self.initial_boxes < 1 {
            return bad("initial_boxes must be at least 1 (got 0)".into());
        }
        if !(0.0..1.0).contains(&self.split_aim) {
            return bad(format!(
                "split_aim must be in [0, 1) (got {})",
                self.split_aim
            ));
        }
        Ok(())
    }
}

/// `x` rounded to two significant digits.
fn round2(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 0.0;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 1);
    (x / scale).round() * scale
}

/// The clock of a run: its start and time limit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: Instant,
    limit: Option<f64>,
}

impl Clock {
    /// Starts now, with `opts.max_time`.
    pub(crate) fn start(opts: &Options) -> Self {
        Clock {
            start: Instant::now(),
            limit: opts.max_time,
        }
    }

    /// Seconds since the start.
    pub(crate) fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Seconds left before the limit (infinite without one).
    pub(crate) fn left(&self) -> f64 {
        self.limit.map_or(f64::INFINITY, |l| l - self.elapsed())
    }

    /// Whether to stop now and why: [`Status::TimeLimit`] when the limit has passed,
    /// [`Status::Interrupted`] when a stop was requested ([`gpuq_core::interrupt`]); agreed
    /// over `backend`'s processes (one collective on a distributed backend; the reason is
    /// each process's own).
    pub(crate) fn stop<B: CubatureKernels>(
        &self,
        backend: &B,
    ) -> gpuq_core::Result<Option<Status>> {
        let here = self.stop_here();
        Ok(backend
            .cub_any(here.is_some())?
            .then(|| here.unwrap_or(Status::TimeLimit)))
    }

    /// [`Clock::stop`] for this process alone (no collective). O(1).
    pub(crate) fn stop_here(&self) -> Option<Status> {
        if gpuq_core::interrupt::requested() {
            Some(Status::Interrupted)
        } else {
            self.limit
                .is_some_and(|l| self.elapsed() >= l)
                .then_some(Status::TimeLimit)
        }
    }
}
