//! BiCGSTAB (van der Vorst 1992), right-preconditioned.

use crate::session::{vanished, Session, STAGNATION};
use crate::KrylovOptions;
use gpuq_core::{Backend, DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by BiCGSTAB with right preconditioning (A M y = b, x = M y),
/// starting from the `x` given, for any nonsingular A, real or complex.
///
/// Per iteration: two operator and two preconditioner applications, four dot
/// products and two norms (each one scalar download), and six vector updates; 8
/// vectors of storage. The shadow residual is the initial residual.
///
/// Returns the report with `converged` false at the iteration cap, and
/// [`gpuq_core::Error::Breakdown`] naming the quantity when rho = r0^H r,
/// r0^H A p, or omega vanishes (or turns non-finite). The report's
/// `relative_residual` is recomputed from b - A x.
pub fn bicgstab<B: Backend, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
) -> Result<SolveReport> {
    bicgstab_monitored(backend, a, precond, b, x, opts, &mut |_, _| {})
}

/// [`bicgstab`] with a monitor called after every iteration with
/// `(iteration, recurrence relative residual)`.
pub fn bicgstab_monitored<B: Backend, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    let mut session = Session::begin("bicgstab", backend, a, precond, b, x, opts)?;
    let n = b.len();
    let mut r = backend.zeros::<T>(n)?;
    let mut rnorm = Session::residual(backend, a, b, x, &mut r)?;
    session.initial(rnorm);
    let mut r0 = backend.zeros::<T>(n)?;
    backend.copy(&r, &mut r0)?;
    let mut p = backend.zeros::<T>(n)?;
    let mut v = backend.zeros::<T>(n)?;
    let mut t = backend.zeros::<T>(n)?;
    // M p and M s (aliases of p and s without a preconditioner).
    let mut mp = precond.map(|_| backend.zeros::<T>(n)).transpose()?;
    let mut ms = precond.map(|_| backend.zeros::<T>(n)).transpose()?;
    let apply_m = |v: &B::Vector<T>, out: &mut Option<B::Vector<T>>| -> Result<()> {
        if let (Some(m), Some(o)) = (precond, out.as_mut()) {
            m.apply(v, o)?;
        }
        Ok(())
    };

    let target = session.target;
    let mut converged = rnorm <= target;
    let (mut rho, mut alpha, mut omega) = (T::one(), T::one(), T::one());
    let mut it = 0;
    let mut failure = None;
    while !converged && it < session.max_iter {
        it += 1;
        let rho_new = backend.dotc(&r0, &r)?;
        if vanished(rho_new) {
            failure = Some("rho = r0^H r");
            break;
        }
        if it == 1 {
            backend.copy(&r, &mut p)?;
        } else {
            // p = r + beta (p - omega v)
            let beta = (rho_new / rho) * (alpha / omega);
            backend.axpy(-omega, &v, &mut p)?;
            backend.axpby(T::one(), &r, beta, &mut p)?;
        }
        rho = rho_new;
        apply_m(&p, &mut mp)?;
        let phat = mp.as_ref().unwrap_or(&p);
        a.apply(phat, &mut v)?;
        let r0v = backend.dotc(&r0, &v)?;
        if vanished(r0v) {
            failure = Some("r0^H A p");
            break;
        }
        alpha = rho / r0v;
        // s = r - alpha v, kept in r
        backend.axpy(-alpha, &v, &mut r)?;
        let snorm = backend.nrm2(&r)?.to_f64_lossless();
        if snorm <= target {
            backend.axpy(alpha, phat, x)?;
            rnorm = snorm;
            let _ = session.iteration(it, rnorm, monitor);
            converged = true;
            break;
        }
        apply_m(&r, &mut ms)?;
        let shat = ms.as_ref().unwrap_or(&r);
        a.apply(shat, &mut t)?;
        let tt = backend.dotc(&t, &t)?;
        if vanished(tt) {
            failure = Some("t^H t with t = A M s");
            break;
        }
        omega = backend.dotc(&t, &r)? / tt;
        if vanished(omega) {
            failure = Some("omega = (t^H s) / (t^H t)");
            break;
        }
        backend.axpy(alpha, phat, x)?;
        backend.axpy(omega, shat, x)?;
        // r = s - omega t
        backend.axpy(-omega, &t, &mut r)?;
        rnorm = backend.nrm2(&r)?.to_f64_lossless();
        if session.iteration(it, rnorm, monitor) {
            failure = Some(STAGNATION);
            break;
        }
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        converged = rnorm <= target;
    }
    session.finish(
        backend,
        a,
        b,
        x,
        &mut t,
        it,
        rnorm,
        converged,
        failure.map(|q| ("bicgstab", q)),
    )
}
