//! Conjugate gradients, plain and preconditioned.

use crate::{CgKernels, CgOptions};
use gpuq_core::num_traits::Zero;
use gpuq_core::{DeviceVector, Error, LinearOperator, RealScalar, Result, Scalar, SolveReport};
use std::time::Instant;

/// Solves A x = b by (preconditioned) conjugate gradients, starting from the `x` given.
///
/// `a` must be Hermitian positive definite, and so must `precond` when given.
/// Per iteration: one operator application fused with p^H A p, one fused residual
/// update with its norm, one preconditioner application and dot product (when
/// preconditioned), and one fused update of x and p. Only scalars leave the backend.
///
/// Returns the report with `converged` false when the iteration cap is reached
/// (the iterate is still the best one found), and [`Error::Breakdown`] when
/// p^H A p or r^H z is not positive (A or M not positive definite, or non-finite data).
/// The report's `relative_residual` is recomputed from a fresh product b - A x.
pub fn cg<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &CgOptions,
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    cg_monitored(backend, a, precond, b, x, opts, &mut |_, _| {})
}

/// [`cg`] with a monitor called after every iteration with
/// `(iteration, recurrence relative residual)`; the CLI uses it for progress lines.
pub fn cg_monitored<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &CgOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    opts.validate()?;
    let (nr, nc) = a.shape();
    if nr != nc {
        return Err(Error::Precondition {
            method: "cg",
            reason: format!("operator is {nr} x {nc}, not square"),
        });
    }
    gpuq_core::check_same_len("cg (b vs operator)", nr, b.len())?;
    gpuq_core::check_same_len("cg (x vs operator)", nr, x.len())?;
    if let Some(m) = precond {
        if m.shape() != (nr, nr) {
            return Err(Error::shape(
                "cg (preconditioner)",
                format!("{nr} x {nr}"),
                format!("{} x {}", m.shape().0, m.shape().1),
            ));
        }
    }

    let start = Instant::now();
    let stats0 = backend.stats();
    let mut report = SolveReport {
        method: if precond.is_some() { "pcg" } else { "cg" }.into(),
        preconditioner: precond.map_or("none", |m| m.name()).into(),
        backend: backend.name(),
        scalar: T::KIND.name().into(),
        n: nr,
        ..SolveReport::default()
    };

    let bnorm = backend.nrm2(b)?.to_f64_lossless();
    if !bnorm.is_finite() {
        return Err(Error::InvalidArgument(
            "right-hand side contains NaN or infinite values".into(),
        ));
    }
    // With b = 0 the residual is measured absolutely.
    let scale = if bnorm > 0.0 { bnorm } else { 1.0 };
    let target = (opts.rtol * bnorm).max(opts.atol);
    let max_iter = opts.max_iter_for(nr);

    // r = b - A x
    let mut r = backend.zeros::<T>(nr)?;
    a.apply(x, &mut r)?;
    backend.axpby(T::one(), b, -T::one(), &mut r)?;
    let mut rnorm = backend.nrm2(&r)?.to_f64_lossless();
    if !rnorm.is_finite() {
        return Err(Error::InvalidArgument(
            "initial residual is not finite (NaN or infinite values in A or x0)".into(),
        ));
    }
    report.residual_history.push(rnorm / scale);

    let mut z = match precond {
        Some(_) => Some(backend.zeros::<T>(nr)?),
        None => None,
    };
    let mut p = backend.zeros::<T>(nr)?;
    let mut q = backend.zeros::<T>(nr)?;
    let mut rho = T::from_f64(rnorm * rnorm);
    if let (Some(m), Some(z)) = (precond, z.as_mut()) {
        m.apply(&r, z)?;
        rho = backend.dotc(&r, z)?;
    }
    backend.copy(z.as_ref().unwrap_or(&r), &mut p)?;

    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure: Option<&'static str> = None;
    while !converged && it < max_iter {
        it += 1;
        let pq = a.apply_dotc(backend, &p, &mut q)?;
        if !pq.is_finite_value() || pq.re() <= T::Real::zero() {
            failure = Some("p^H A p (not positive: is A positive definite?)");
            break;
        }
        let alpha = rho / pq;
        let rr = backend.cg_update_residual(alpha, &q, &mut r)?;
        rnorm = rr.to_f64_lossless().sqrt();
        if opts.record_history {
            report.residual_history.push(rnorm / scale);
        }
        monitor(it, rnorm / scale);
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        if rnorm <= target {
            backend.axpy(alpha, &p, x)?;
            converged = true;
            break;
        }
        let rho_new = match (precond, z.as_mut()) {
            (Some(m), Some(z)) => {
                m.apply(&r, z)?;
                backend.dotc(&r, z)?
            }
            _ => T::from_real(rr),
        };
        if !rho_new.is_finite_value() || rho_new.re() <= T::Real::zero() {
            backend.axpy(alpha, &p, x)?;
            failure = Some("r^H M r (not positive: is M positive definite?)");
            break;
        }
        let beta = rho_new / rho;
        rho = rho_new;
        backend.cg_update_xp(alpha, beta, z.as_ref().unwrap_or(&r), &mut p, x)?;
    }

    // The honest residual: b - A x from scratch.
    a.apply(x, &mut q)?;
    backend.axpby(T::one(), b, -T::one(), &mut q)?;
    report.relative_residual = backend.nrm2(&q)?.to_f64_lossless() / scale;
    report.recurrence_residual = rnorm / scale;
    report.iterations = it;
    report.converged = converged;
    if !opts.record_history {
        report.residual_history.push(rnorm / scale);
    }
    report.time_s = start.elapsed().as_secs_f64();
    report.stats = backend.stats().since(&stats0);
    match failure {
        Some(quantity) => Err(Error::Breakdown {
            method: "cg",
            quantity,
            iteration: it,
            report: Box::new(report),
        }),
        None => Ok(report),
    }
}
