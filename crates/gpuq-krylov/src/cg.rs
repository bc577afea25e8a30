//! Conjugate gradients, plain and preconditioned.

use crate::replacement::with_residual_replacement;
use crate::session::{Session, STAGNATION};
use crate::{CgKernels, KrylovOptions};
use gpuq_core::num_traits::Zero;
use gpuq_core::{DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by (preconditioned) conjugate gradients, starting from the `x` given.
///
/// `a` must be Hermitian positive definite, and so must `precond` when given.
/// Per iteration: one operator application fused with p^H A p, one fused residual
/// update with its norm, one preconditioner application and dot product (when
/// preconditioned), and one fused update of x and p. Only scalars leave the backend.
///
/// Returns the report with `converged` false when the iteration cap is reached
/// (the iterate is still the best one found), and [`gpuq_core::Error::Breakdown`] when
/// p^H A p or r^H z is not positive (A or M not positive definite, or non-finite data).
/// The report's `relative_residual` is recomputed from a fresh product b - A x.
pub fn cg<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
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
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        cg_once(backend, a, precond, b, x, opts, monitor)
    })
}

/// One run of [`cg_monitored`] from the `x` given; its `converged` is the recurrence's.
fn cg_once<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    let method = if precond.is_some() { "pcg" } else { "cg" };
    let mut session = Session::begin(method, backend, a, precond, b, x, opts)?;
    let nr = b.len();
    let mut r = backend.zeros::<T>(nr)?;
    let mut rnorm = Session::residual(backend, a, b, x, &mut r)?;
    session.initial(rnorm);

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

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure: Option<&'static str> = None;
    while !converged && it < session.max_iter {
        it += 1;
        let pq = a.apply_dotc(backend, &p, &mut q)?;
        if !pq.is_finite_value() || pq.re() <= T::Real::zero() {
            failure = Some("p^H A p (not positive: is A positive definite?)");
            break;
        }
        let alpha = rho / pq;
        let rr = backend.cg_update_residual(alpha, &q, &mut r)?;
        rnorm = rr.to_f64_lossless().sqrt();
        if session.iteration(it, rnorm, monitor) {
            failure = Some(STAGNATION);
            break;
        }
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

    session.finish(
        backend,
        a,
        b,
        x,
        &mut q,
        it,
        rnorm,
        converged,
        failure.map(|q| ("cg", q)),
    )
}
