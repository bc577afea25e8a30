//! Residual replacement: the rule that makes `converged` mean the true residual.
//!
//! A Krylov recurrence updates its residual instead of recomputing it, and in
//! finite precision the two drift apart: the recurrence may report a residual
//! below the tolerance while the true residual b - A x is far above it. Every
//! method of this crate therefore runs through [`with_residual_replacement`]: when
//! its recurrence meets the tolerance it checks the true residual (which the
//! session's finish recomputes anyway) and, if that is above the tolerance,
//! restarts from the current x — the restart recomputes r = b - A x, replacing
//! the drifted recurrence residual — up to
//! [`KrylovOptions::max_residual_replacements`] times. When a restart no longer
//! lowers the true residual, breaks down or runs out of replacements, the solve
//! ends with `converged: false` and [`SolveStatus::AccuracyLimit`], returning
//! the best iterate it found.

use crate::KrylovOptions;
use gpuq_core::{Backend, DeviceVector, Error, Result, Scalar, SolveReport, SolveStatus};
use std::time::Instant;

/// One run of a method from the `x` given, with the options and monitor given.
pub(crate) type Run<'r, B, T> = dyn FnMut(
        &mut <B as Backend>::Vector<T>,
        &KrylovOptions,
        &mut dyn FnMut(usize, f64),
    ) -> Result<SolveReport>
    + 'r;

/// Runs `run` from `x`, then restarts it from its true residual while its
/// recurrence claims the tolerance and its true residual has not met it (see the
/// module docs). The iterations, residual history (one entry per iteration; the
/// restarts' initial residuals are left out), time and backend counters of all
/// runs are summed into one report. Costs, per replacement, one vector copy and
/// the method's start-up (one operator application); nothing when the first run
/// ends honestly.
pub(crate) fn with_residual_replacement<B: Backend, T: Scalar>(
    backend: &B,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
    run: &mut Run<'_, B, T>,
) -> Result<SolveReport> {
    let start = Instant::now();
    let stats0 = backend.stats();
    let mut report = run(x, opts, monitor)?;
    if !report.converged || report.tolerance_met() {
        return Ok(report);
    }
    let cap = opts.max_iter_for(report.n);
    let mut saved = backend.zeros::<T>(x.len())?;
    loop {
        if report.residual_replacements >= opts.max_residual_replacements
            || report.iterations >= cap
        {
            report.converged = false;
            report.status = SolveStatus::AccuracyLimit;
            break;
        }
        backend.copy(x, &mut saved)?;
        let done = report.iterations;
        let rest = KrylovOptions {
            max_iter: Some(cap - done),
            ..opts.clone()
        };
        let next = run(x, &rest, &mut |it, r| monitor(done + it, r));
        report.residual_replacements += 1;
        match next {
            Ok(next) if next.relative_residual < report.relative_residual => {
                report.iterations += next.iterations;
                report
                    .residual_history
                    .extend(next.residual_history.iter().skip(1));
                report.relative_residual = next.relative_residual;
                report.recurrence_residual = next.recurrence_residual;
                if next.converged && !next.tolerance_met() {
                    continue;
                }
                report.converged = next.converged;
                report.status = next.status;
                break;
            }
            Ok(worse) => {
                report.iterations += worse.iterations;
                backend.copy(&saved, x)?;
            }
            Err(Error::Breakdown { report: failed, .. }) => {
                report.iterations += failed.iterations;
                backend.copy(&saved, x)?;
            }
            Err(e) => return Err(e),
        }
        report.converged = false;
        report.status = SolveStatus::AccuracyLimit;
        break;
    }
    report.time_s = start.elapsed().as_secs_f64();
    report.stats = backend.stats().since(&stats0);
    Ok(report)
}
