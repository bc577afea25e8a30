//! Monte Carlo Synthetic Acceleration: a Jacobi-preconditioned Richardson
//! iteration whose correction solves the residual equation with an adjoint Monte
//! Carlo estimate.

use crate::options::{McMethod, McOptions};
use crate::solve::{norm2, MonteCarlo};
use crate::walker::WalkBackend;
use gpuq_core::interrupt::INTERRUPTED;
use gpuq_core::{Error, Result, SolveReport, SolveStatus};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The quantity named by a stagnation error of MCSA.
pub const MCSA_STAGNATION: &str =
    "stagnation: the residual did not decrease within the stagnation window";

/// Options of [`mcsa`]. `Default`: relative tolerance 1e-8, at most 100 outer
/// iterations, a stagnation window of 10 iterations, and inner adjoint solves
/// with [`McOptions::default`] (10^5 histories, cutoff 1e-9) but the
/// expected-value estimator, whose smaller variance makes each correction more
/// accurate. The correction must be accurate to better than its own size (a
/// relative error below 1) or MCSA diverges: give the inner solve at least about
/// as many histories as unknowns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct McsaOptions {
    /// Stop when ||b - A x|| <= tolerance ||b||.
    pub tolerance: f64,
    /// Most outer iterations.
    pub max_iterations: usize,
    /// Stop with an error when the residual has not decreased for this many
    /// iterations (0: never).
    pub stagnation_window: usize,
    /// The Monte Carlo correction (its method is forced to the adjoint method;
    /// iteration k uses seed `inner.seed + k`).
    pub inner: McOptions,
}

impl Default for McsaOptions {
    fn default() -> Self {
        McsaOptions {
            tolerance: 1e-8,
            max_iterations: 100,
            stagnation_window: 10,
            inner: McOptions {
                estimator: crate::Estimator::Expected,
                ..McOptions::default()
            },
        }
    }
}

/// Solves A x = b by MCSA from x = 0. Each iteration: r = b - A x; x += D^-1 r
/// (a Jacobi step); r = b - A x; δ = adjoint Monte Carlo estimate of A δ = r;
/// x += δ. The Monte Carlo error of δ only slows the iteration down, it does not
/// limit the accuracy, so MCSA reaches tolerances far below the statistical error
/// of a single Monte Carlo solve. Cost per iteration: 2 SpMVs and one Monte Carlo
/// solve of `inner.histories` histories.
///
/// Returns x and the report (true residual, residual history), as the Krylov
/// solvers do: at the iteration cap the report says `converged: false`. Errors:
/// [`Error::Breakdown`] when the residual turns non-finite or stagnates (quantity
/// [`MCSA_STAGNATION`]), carrying the partial report; bad options or input.
pub fn mcsa<B: WalkBackend>(
    mc: &MonteCarlo<'_, B>,
    b: &[f64],
    opts: &McsaOptions,
) -> Result<(Vec<f64>, SolveReport)> {
    if !(opts.tolerance.is_finite() && opts.tolerance > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "tolerance {} is not positive",
            opts.tolerance
        )));
    }
    let setup = mc.setup();
    let n = setup.n();
    setup.scaled_rhs(b)?; // checks b's length and finiteness
    let t = Instant::now();
    let mut inner = opts.inner;
    inner.method = McMethod::Adjoint;
    let b_norm = norm2(b);
    let scale = if b_norm > 0.0 { b_norm } else { 1.0 };
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let mut rel = norm2(&r) / scale;
    let mut report = SolveReport {
        method: "mcsa".into(),
        preconditioner: "jacobi".into(),
        backend: mc.backend_name(),
        scalar: "f64".into(),
        n,
        residual_history: vec![rel],
        tolerance: opts.tolerance,
        setup_time_s: mc.setup_seconds(),
        // the walk data's layout: the matrix itself stays on the host
        layout: mc.layout().name().into(),
        ..Default::default()
    };
    let (mut best, mut since_best) = (rel, 0);
    let mut it = 0;
    while rel > opts.tolerance && it < opts.max_iterations {
        it += 1;
        for ((xi, ri), d) in x.iter_mut().zip(&r).zip(setup.diagonal()) {
            *xi += ri / d;
        }
        r = mc.residual(&x, b)?;
        inner.seed = opts.inner.seed.wrapping_add(it as u64);
        let delta = mc.estimate(&r, &inner)?;
        for (xi, di) in x.iter_mut().zip(&delta.x) {
            *xi += di;
        }
        r = mc.residual(&x, b)?;
        rel = norm2(&r) / scale;
        report.residual_history.push(rel);
        if !rel.is_finite() {
            return Err(breakdown(report, it, rel, t, "residual"));
        }
        if mc.stop_requested()? {
            return Err(breakdown(report, it, rel, t, INTERRUPTED));
        }
        if rel < best {
            (best, since_best) = (rel, 0);
        } else {
            since_best += 1;
            if opts.stagnation_window > 0 && since_best >= opts.stagnation_window {
                return Err(breakdown(report, it, rel, t, MCSA_STAGNATION));
            }
        }
    }
    report.iterations = it;
    report.relative_residual = rel;
    report.recurrence_residual = rel;
    report.converged = rel <= opts.tolerance;
    report.status = if report.converged {
        SolveStatus::Converged
    } else {
        SolveStatus::MaxIterations
    };
    report.time_s = t.elapsed().as_secs_f64();
    Ok((x, report))
}

/// The breakdown error carrying the state at iteration `it`.
fn breakdown(
    mut report: SolveReport,
    it: usize,
    rel: f64,
    t: Instant,
    quantity: &'static str,
) -> Error {
    report.iterations = it;
    report.relative_residual = rel;
    report.recurrence_residual = rel;
    report.time_s = t.elapsed().as_secs_f64();
    report.status = match quantity {
        MCSA_STAGNATION => SolveStatus::Stagnated,
        INTERRUPTED => SolveStatus::Interrupted,
        _ => SolveStatus::Breakdown,
    };
    Error::Breakdown {
        method: "mcsa",
        quantity,
        iteration: it,
        report: Box::new(report),
    }
}
