//! A Monte Carlo solve: batches of histories, the estimate, its standard error
//! and its true residual.

use crate::options::{McMethod, McOptions};
use crate::setup::McSetup;
use crate::spectral::SpectralEstimate;
use crate::walker::{AdjointBatch, ForwardBatch, Source, WalkBackend};
use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Where the time of a Monte Carlo solve went, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct McTiming {
    /// Building H, the walk data and the spectral estimates, and making data
    /// resident on the backend.
    pub setup_s: f64,
    /// Running the histories (all batches, with their downloads).
    pub walks_s: f64,
    /// Combining batches into the estimate and its standard error, and the
    /// residual check.
    pub reduction_s: f64,
}

/// What a Monte Carlo estimate is worth, judged by its true relative residual
/// ||b - A x|| / ||b||.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McStatus {
    /// No tolerance was asked and the residual is at most 1: an estimate, to
    /// be read with its residual and standard error.
    #[default]
    Estimate,
    /// The residual met [`McOptions::tolerance`].
    Converged,
    /// The residual is at most 1 but misses [`McOptions::tolerance`].
    NotConverged,
    /// The residual exceeds 1 or is not finite: the estimate is worse than
    /// x = 0 (too few histories for the walk's variance, or rho(H^) >= 1).
    Inaccurate,
    /// The residual was not computed ([`MonteCarlo::estimate`]).
    Unchecked,
    /// A stop was requested ([`gpuq_core::interrupt`], Ctrl-C in the CLI) before the last
    /// batch: the estimate is that of the batches run.
    Interrupted,
}

impl McStatus {
    /// The status of an estimate with relative residual `residual`, held to
    /// `tolerance` when one was asked.
    pub fn judge(residual: f64, tolerance: Option<f64>) -> Self {
        if residual.is_nan() || residual > 1.0 {
            return McStatus::Inaccurate;
        }
        match tolerance {
            None => McStatus::Estimate,
            Some(t) if residual <= t => McStatus::Converged,
            Some(_) => McStatus::NotConverged,
        }
    }

    /// Whether the estimate is what was asked for: an estimate no worse than
    /// x = 0 without a tolerance, or one that met it.
    pub fn is_success(self) -> bool {
        matches!(self, McStatus::Estimate | McStatus::Converged)
    }

    /// The status's name in reports (`estimate`, `converged`, ...).
    pub fn name(self) -> &'static str {
        match self {
            McStatus::Estimate => "estimate",
            McStatus::Converged => "converged",
            McStatus::NotConverged => "not_converged",
            McStatus::Inaccurate => "inaccurate",
            McStatus::Unchecked => "unchecked",
            McStatus::Interrupted => "interrupted",
        }
    }
}

/// The result of a Monte Carlo solve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct McResult {
    /// `mc-forward` or `mc-adjoint`.
    pub method: String,
    /// `collision` or `expected`.
    pub estimator: String,
    /// `soa` or `aos`.
    pub layout: String,
    /// Forward thread mapping on the GPU (`thread-per-entry`, ...).
    pub mapping: String,
    /// Backend name.
    pub backend: String,
    /// Number of unknowns.
    pub n: usize,
    /// The estimate of x.
    pub x: Vec<f64>,
    /// Per-entry standard error of the estimate from the spread of independent
    /// batches; `None` with fewer than two batches.
    pub std_error: Option<Vec<f64>>,
    /// Batches the histories were split into.
    pub batches: u32,
    /// The true relative residual ||b - A x|| / ||b|| of the estimate.
    pub relative_residual: f64,
    /// What the estimate is worth, from its residual ([`McStatus::judge`]).
    pub status: McStatus,
    /// Histories run.
    pub histories: u64,
    /// Moves made by all histories.
    pub steps: u64,
    /// rho(H).
    pub rho_h: f64,
    /// rho(H^) of the method's walk (variance condition).
    pub rho_hat: f64,
    /// Warnings from the setup (infinite variance).
    pub warnings: Vec<String>,
    /// Time split.
    pub timing: McTiming,
}

impl McResult {
    /// Histories per second of walk time.
    pub fn histories_per_s(&self) -> f64 {
        self.histories as f64 / self.timing.walks_s
    }

    /// Moves per second of walk time.
    pub fn steps_per_s(&self) -> f64 {
        self.steps as f64 / self.timing.walks_s
    }
}

/// A matrix made ready for Monte Carlo solves on one backend: the setup and the
/// resident walk data, reused across right-hand sides (MCSA solves one per
/// iteration).
pub struct MonteCarlo<'a, B: WalkBackend> {
    backend: &'a B,
    a: &'a Csr<f64>,
    setup: McSetup,
    walks: B::Prepared,
    layout: crate::Layout,
    setup_s: f64,
}

impl<'a, B: WalkBackend> MonteCarlo<'a, B> {
    /// Builds the setup of `a` ([`McSetup::new`]: errors when rho(H) >= 1) and
    /// makes its walk data resident in `layout`.
    pub fn new(backend: &'a B, a: &'a Csr<f64>, layout: crate::Layout) -> Result<Self> {
        let t = Instant::now();
        let setup = McSetup::new(a)?;
        Self::with_setup(backend, a, setup, layout, t)
    }

    /// As [`MonteCarlo::new`] with a setup already built (its time is not counted).
    pub fn from_setup(
        backend: &'a B,
        a: &'a Csr<f64>,
        setup: McSetup,
        layout: crate::Layout,
    ) -> Result<Self> {
        Self::with_setup(backend, a, setup, layout, Instant::now())
    }

    fn with_setup(
        backend: &'a B,
        a: &'a Csr<f64>,
        setup: McSetup,
        layout: crate::Layout,
        t: Instant,
    ) -> Result<Self> {
        if setup.n() != a.nrows() {
            return Err(Error::shape("monte carlo setup", a.nrows(), setup.n()));
        }
        let walks = backend.prepare(&setup, layout)?;
        Ok(MonteCarlo {
            backend,
            a,
            setup,
            walks,
            layout,
            setup_s: t.elapsed().as_secs_f64(),
        })
    }

    /// Seconds spent building the setup and making it resident.
    pub fn setup_seconds(&self) -> f64 {
        self.setup_s
    }

    /// The backend's name in reports.
    pub fn backend_name(&self) -> String {
        self.backend.walk_backend_name()
    }

    /// b - A x. Cost: one SpMV on the host.
    pub fn residual(&self, x: &[f64], b: &[f64]) -> Result<Vec<f64>> {
        let ax = self.a.mul_vec(x)?;
        Ok(b.iter().zip(&ax).map(|(b, ax)| b - ax).collect())
    }

    /// The layout of the walk data on the backend.
    pub fn layout(&self) -> crate::Layout {
        self.layout
    }

    /// The setup (walk data, spectral radii, warnings).
    pub fn setup(&self) -> &McSetup {
        &self.setup
    }

    /// Estimates the solution of A x = b with `opts` (the walk data stays in the
    /// layout given at construction; `opts.layout` is not consulted). Cost: the
    /// histories' moves, plus O(n) per batch and one SpMV for the residual.
    pub fn solve(&self, b: &[f64], opts: &McOptions) -> Result<McResult> {
        self.run(b, opts, true)
    }

    /// [`MonteCarlo::solve`] without the residual check (its field is left 0):
    /// for callers that compute the residual themselves.
    pub fn estimate(&self, b: &[f64], opts: &McOptions) -> Result<McResult> {
        self.run(b, opts, false)
    }

    fn run(&self, b: &[f64], opts: &McOptions, check: bool) -> Result<McResult> {
        opts.validate()?;
        let n = self.setup.n();
        let t = Instant::now();
        let bhat = self.setup.scaled_rhs(b)?;
        let b_norm = norm2(b);
        let mut result = McResult {
            method: opts.method.name().into(),
            estimator: opts.estimator.name().into(),
            layout: self.layout.name().into(),
            mapping: opts.mapping.name().into(),
            backend: self.backend.walk_backend_name(),
            n,
            rho_h: self.setup.rho_h.value,
            rho_hat: self.rho_hat(opts.method).value,
            warnings: self.setup.warnings.clone(),
            ..Default::default()
        };
        if b_norm == 0.0 || n == 0 {
            result.status = McStatus::judge(0.0, opts.tolerance);
            result.x = vec![0.0; n];
            result.timing.setup_s = self.setup_s;
            return Ok(result);
        }
        let source = self.backend.source(&Source::new(&self.setup, bhat)?)?;
        let setup_s = self.setup_s + t.elapsed().as_secs_f64();

        let t = Instant::now();
        let (batches, histories) = match opts.method {
            McMethod::Forward => self.forward_batches(&source, opts)?,
            McMethod::Adjoint => self.adjoint_batches(&source, opts)?,
        };
        let walks_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let (x, std_error) = combine(&batches.sums, &batches.counts);
        let residual = if check {
            norm2(&self.residual(&x, b)?) / b_norm
        } else {
            0.0
        };
        result.x = x;
        result.std_error = std_error;
        result.batches = batches.sums.len() as u32;
        result.relative_residual = residual;
        result.status = if batches.interrupted {
            McStatus::Interrupted
        } else if check {
            McStatus::judge(residual, opts.tolerance)
        } else {
            McStatus::Unchecked
        };
        result.histories = histories;
        result.steps = batches.steps;
        result.timing = McTiming {
            setup_s,
            walks_s,
            reduction_s: t.elapsed().as_secs_f64(),
        };
        Ok(result)
    }

    fn rho_hat(&self, method: McMethod) -> SpectralEstimate {
        match method {
            McMethod::Forward => self.setup.rho_hat_forward,
            McMethod::Adjoint => self.setup.rho_hat_adjoint,
        }
    }

    /// Forward batches: each splits every entry's histories; a batch's count
    /// divides its sums into that batch's estimate. Returns the batches and the
    /// histories run.
    fn forward_batches(&self, source: &B::Source, opts: &McOptions) -> Result<(Batches, u64)> {
        let n = self.setup.n() as u64;
        let per_entry = ((opts.histories as f64 / n as f64).round() as u64).max(1);
        let batches = self.run_batches(per_entry, opts.batches, |first, count| {
            let batch = ForwardBatch {
                per_entry,
                first,
                count,
                estimator: opts.estimator,
                stop: opts.stop(),
                seed: opts.seed,
                mapping: opts.mapping,
            };
            self.backend.forward(&self.walks, source, &batch)
        })?;
        let run = batches.counts.iter().sum::<u64>() * n;
        Ok((batches, run))
    }

    /// Adjoint batches of consecutive history ids. Returns the batches and the
    /// histories run.
    fn adjoint_batches(&self, source: &B::Source, opts: &McOptions) -> Result<(Batches, u64)> {
        let batches = self.run_batches(opts.histories, opts.batches, |first, count| {
            let batch = AdjointBatch {
                first,
                count,
                estimator: opts.estimator,
                stop: opts.stop(),
                seed: opts.seed,
            };
            self.backend.adjoint(&self.walks, source, &batch)
        })?;
        let run = batches.counts.iter().sum();
        Ok((batches, run))
    }

    /// Splits `total` histories (of every entry, for the forward method) into
    /// `min(batches, total)` consecutive ranges `first..first + count` of near-equal size and
    /// runs `run` on each, in order, until all have run or a stop is requested
    /// ([`MonteCarlo::stop_requested`], asked between batches).
    fn run_batches(
        &self,
        total: u64,
        batches: u32,
        mut run: impl FnMut(u64, u64) -> Result<crate::walker::BatchSums>,
    ) -> Result<Batches> {
        let b = u64::from(batches).min(total);
        let mut out = Batches {
            sums: vec![],
            counts: vec![],
            steps: 0,
            interrupted: false,
        };
        for k in 0..b {
            if k > 0 && self.stop_requested()? {
                out.interrupted = true;
                break;
            }
            let first = total * k / b;
            let count = total * (k + 1) / b - first;
            let sums = run(first, count)?;
            out.steps += sums.steps;
            out.sums.push(sums.sums);
            out.counts.push(count);
        }
        Ok(out)
    }

    /// Whether a stop was requested ([`gpuq_core::interrupt`]) on any process of the
    /// backend (one collective on a distributed backend, so that all stop together).
    pub fn stop_requested(&self) -> Result<bool> {
        self.backend.walk_any(gpuq_core::interrupt::requested())
    }
}

/// What the batches of one solve gave: per batch the sums and the histories
/// behind them, and the moves of all of them.
struct Batches {
    sums: Vec<Vec<f64>>,
    counts: Vec<u64>,
    steps: u64,
    /// A stop request ended the batches early.
    interrupted: bool,
}

/// The estimate (all sums over all histories) and, with two or more batches, the
/// standard error of the mean of the batch estimates: sqrt(sum_b (x_b - xbar)^2
/// / (B (B - 1))), x_b = sums_b / count_b.
fn combine(sums: &[Vec<f64>], counts: &[u64]) -> (Vec<f64>, Option<Vec<f64>>) {
    let n = sums.first().map_or(0, Vec::len);
    let total: u64 = counts.iter().sum();
    let x: Vec<f64> = (0..n)
        .map(|i| sums.iter().map(|s| s[i]).sum::<f64>() / total as f64)
        .collect();
    let b = sums.len();
    if b < 2 {
        return (x, None);
    }
    let se = (0..n)
        .map(|i| {
            let means: Vec<f64> = sums
                .iter()
                .zip(counts)
                .map(|(s, &c)| s[i] / c as f64)
                .collect();
            let mean = means.iter().sum::<f64>() / b as f64;
            let var = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>();
            (var / (b * (b - 1)) as f64).sqrt()
        })
        .collect();
    (x, Some(se))
}

/// Euclidean norm.
pub(crate) fn norm2(v: &[f64]) -> f64 {
    v.iter().map(|v| v * v).sum::<f64>().sqrt()
}
