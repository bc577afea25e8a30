//! What every Krylov method does the same way: check its inputs, measure ||b||,
//! keep the residual history, and end with the honest report (the true residual
//! recomputed from b - A x, the counters, and breakdown as an error).

use crate::KrylovOptions;
use gpuq_core::{
    Backend, DeviceVector, Error, LinearOperator, RealScalar, Result, Scalar, SolveReport,
    SolveStatus, Stats,
};
use std::time::Instant;

/// `true` when a scalar a recurrence divides by has vanished or is not finite:
/// the breakdown test every method applies.
pub(crate) fn vanished<T: Scalar>(z: T) -> bool {
    !z.is_finite_value() || z.is_zero_value()
}

/// The quantity named by the [`gpuq_core::Error::Breakdown`] a stalled solve
/// ends with (see [`KrylovOptions::stagnation_window`]).
pub const STAGNATION: &str =
    "stagnation: the residual did not decrease by 1% within the stagnation window";

pub use gpuq_core::interrupt::INTERRUPTED;

/// One solve in progress.
pub(crate) struct Session {
    start: Instant,
    stats0: Stats,
    record_history: bool,
    /// The report being filled.
    pub report: SolveReport,
    /// ||b||, or 1 when b = 0 (the residual is then measured absolutely).
    pub scale: f64,
    /// The residual norm to reach: max(rtol ||b||, atol).
    pub target: f64,
    /// The iteration cap.
    pub max_iter: usize,
    /// The smallest residual norm so far and the iteration that reached it.
    best: (f64, usize),
    stagnation_window: usize,
}

impl Session {
    /// Validates the options and shapes (square operator, b, x and the
    /// preconditioner agreeing with it) and measures ||b||. O(n).
    pub fn begin<B: Backend, T: Scalar>(
        method: &'static str,
        backend: &B,
        a: &dyn LinearOperator<B, T>,
        precond: Option<&dyn LinearOperator<B, T>>,
        b: &B::Vector<T>,
        x: &B::Vector<T>,
        opts: &KrylovOptions,
    ) -> Result<Session> {
        opts.validate()?;
        let (nr, nc) = a.shape();
        if nr != nc {
            return Err(Error::Precondition {
                method,
                reason: format!("operator is {nr} x {nc}, not square"),
            });
        }
        gpuq_core::check_same_len("krylov solve (b vs operator)", nr, b.len())?;
        gpuq_core::check_same_len("krylov solve (x vs operator)", nr, x.len())?;
        if let Some(m) = precond {
            if m.shape() != (nr, nr) {
                return Err(Error::shape(
                    "krylov solve (preconditioner)",
                    format!("{nr} x {nr}"),
                    format!("{} x {}", m.shape().0, m.shape().1),
                ));
            }
        }
        let start = Instant::now();
        let stats0 = backend.stats();
        let bnorm = backend.nrm2(b)?.to_f64_lossless();
        if !bnorm.is_finite() {
            return Err(Error::InvalidArgument(
                "right-hand side contains NaN or infinite values".into(),
            ));
        }
        let report = SolveReport {
            method: method.into(),
            preconditioner: precond.map_or("none", |m| m.name()).into(),
            backend: backend.name(),
            scalar: T::KIND.name().into(),
            n: nr,
            tolerance: (opts.rtol * bnorm).max(opts.atol) / if bnorm > 0.0 { bnorm } else { 1.0 },
            ..SolveReport::default()
        };
        Ok(Session {
            start,
            stats0,
            record_history: opts.record_history,
            report,
            scale: if bnorm > 0.0 { bnorm } else { 1.0 },
            target: (opts.rtol * bnorm).max(opts.atol),
            max_iter: opts.max_iter_for(nr),
            best: (f64::INFINITY, 0),
            stagnation_window: opts.stagnation_window,
        })
    }

    /// r = b - A x into `r`, returning ||r||; an error when it is not finite.
    pub fn residual<B: Backend, T: Scalar>(
        backend: &B,
        a: &dyn LinearOperator<B, T>,
        b: &B::Vector<T>,
        x: &B::Vector<T>,
        r: &mut B::Vector<T>,
    ) -> Result<f64> {
        a.apply(x, r)?;
        backend.axpby(T::one(), b, -T::one(), r)?;
        let rnorm = backend.nrm2(r)?.to_f64_lossless();
        if !rnorm.is_finite() {
            return Err(Error::InvalidArgument(
                "residual is not finite (NaN or infinite values in A or x0)".into(),
            ));
        }
        Ok(rnorm)
    }

    /// Records the initial residual norm (always kept in the history).
    pub fn initial(&mut self, rnorm: f64) {
        self.report.residual_history.push(rnorm / self.scale);
    }

    /// Records iteration `it`'s recurrence residual norm and tells the monitor;
    /// returns `true` when the solve must stop: it has stagnated (no 1%
    /// decrease of the smallest residual within the stagnation window) or a
    /// stop was requested ([`gpuq_core::interrupt`]); [`Session::stop_reason`]
    /// says which.
    #[must_use]
    pub fn iteration(
        &mut self,
        it: usize,
        rnorm: f64,
        monitor: &mut dyn FnMut(usize, f64),
    ) -> bool {
        if self.record_history {
            self.report.residual_history.push(rnorm / self.scale);
        }
        monitor(it, rnorm / self.scale);
        if rnorm < 0.99 * self.best.0 {
            self.best = (rnorm, it);
        }
        gpuq_core::interrupt::requested()
            || (self.stagnation_window > 0 && it - self.best.1 >= self.stagnation_window)
    }

    /// Why [`Session::iteration`] asked to stop: [`INTERRUPTED`] when a stop
    /// was requested, else [`STAGNATION`].
    pub fn stop_reason(&self) -> &'static str {
        if gpuq_core::interrupt::requested() {
            INTERRUPTED
        } else {
            STAGNATION
        }
    }

    /// Ends the solve: recomputes the true residual b - A x (using `scratch`),
    /// fills the report, and returns it, or [`Error::Breakdown`] carrying it when
    /// `failure` names the quantity that vanished. O(one operator application).
    #[allow(clippy::too_many_arguments)]
    pub fn finish<B: Backend, T: Scalar>(
        mut self,
        backend: &B,
        a: &dyn LinearOperator<B, T>,
        b: &B::Vector<T>,
        x: &B::Vector<T>,
        scratch: &mut B::Vector<T>,
        iterations: usize,
        rnorm: f64,
        converged: bool,
        failure: Option<(&'static str, &'static str)>,
    ) -> Result<SolveReport> {
        a.apply(x, scratch)?;
        backend.axpby(T::one(), b, -T::one(), scratch)?;
        let r = &mut self.report;
        r.relative_residual = backend.nrm2(scratch)?.to_f64_lossless() / self.scale;
        r.recurrence_residual = rnorm / self.scale;
        r.iterations = iterations;
        r.converged = converged;
        r.status = match failure {
            Some((_, quantity)) if quantity == STAGNATION => SolveStatus::Stagnated,
            Some((_, quantity)) if quantity == INTERRUPTED => SolveStatus::Interrupted,
            Some(_) => SolveStatus::Breakdown,
            None if converged => SolveStatus::Converged,
            None => SolveStatus::MaxIterations,
        };
        if !self.record_history {
            r.residual_history.push(rnorm / self.scale);
        }
        r.time_s = self.start.elapsed().as_secs_f64();
        r.stats = backend.stats().since(&self.stats0);
        match failure {
            Some((method, quantity)) => Err(Error::Breakdown {
                method,
                quantity,
                iteration: iterations,
                report: Box::new(self.report),
            }),
            None => Ok(self.report),
        }
    }
}
