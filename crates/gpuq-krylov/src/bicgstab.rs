//! BiCGSTAB (van der Vorst 1992), right-preconditioned, with its scalars kept
//! on the backend ([`crate::BicgstabKernels`]).

use crate::bicgstab_kernels::{
    guarded_quotient, BicgstabKernels, LEN, R0V, RHO, RNORM2, SNORM2, TS, TT,
};
use crate::session::{vanished, Session, STAGNATION};
use crate::KrylovOptions;
use gpuq_core::{DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by BiCGSTAB with right preconditioning (A M y = b, x = M y),
/// starting from the `x` given, for any nonsingular A, real or complex.
///
/// Per iteration: two operator and two preconditioner applications, one
/// reduction (r0^H v) and four fused steps: p's update; s = r - alpha v with
/// ||s||^2; t^H s with t^H t; x's and r's updates with ||r||^2 and the next
/// rho = r0^H r. Every scalar stays on the backend, so from the second
/// iteration on the launches are the same every time: the backend records them
/// once and replays them ([`crate::Replay`]; on the GPU one CUDA graph
/// launch per iteration). The iteration ends with one download of the 6-slot
/// scalar array (96 bytes for complex f64), which the stopping and breakdown
/// tests read. 8 vectors of
/// storage (10 with a preconditioner). The shadow residual is the initial
/// residual.
///
/// Returns the report with `converged` false at the iteration cap, and
/// [`gpuq_core::Error::Breakdown`] naming the quantity when rho = r0^H r,
/// r0^H A p, t^H t or omega vanishes (or turns non-finite), or on stagnation; a
/// vanished quantity leaves the iterate as it was before the step that needed
/// it. The report's `relative_residual` is recomputed from b - A x.
pub fn bicgstab<B: BicgstabKernels, T: Scalar>(
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
pub fn bicgstab_monitored<B: BicgstabKernels, T: Scalar>(
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
    let mut sc = backend.zeros::<T>(LEN)?;
    let mut host = [T::zero(); LEN];

    let target = session.target;
    let target2 = <T::Real as RealScalar>::of_f64(target * target);
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    if !converged {
        backend.dotc_to_slot(&r0, &r, &mut sc, RHO)?;
    }
    // Declared after the vectors, so it is dropped before them.
    let mut recording = None;
    while !converged && it < session.max_iter {
        it += 1;
        let first = it == 1;
        let mut step = || -> Result<()> {
            backend.bicgstab_p(first, &sc, &r, &v, &mut p)?;
            apply_m(&p, &mut mp)?;
            let phat = mp.as_ref().unwrap_or(&p);
            a.apply(phat, &mut v)?;
            backend.dotc_to_slot(&r0, &v, &mut sc, R0V)?;
            backend.bicgstab_s(&mut sc, &v, &mut r)?;
            apply_m(&r, &mut ms)?;
            a.apply(ms.as_ref().unwrap_or(&r), &mut t)?;
            backend.bicgstab_tt(&t, &r, &mut sc)?;
            backend.bicgstab_xr(&mut sc, target2, phat, ms.as_ref(), &t, &r0, x, &mut r)
        };
        if first {
            step()?;
        } else {
            // SAFETY: from the second iteration on, `step` enqueues the same
            // steps on the same vectors (declared before `recording`), every
            // per-iteration scalar in `sc`, and it neither downloads nor waits.
            unsafe { backend.replay(&mut recording, &mut step)? };
        }
        // The one download of the iteration: the tests below read its scalars.
        host.copy_from_slice(&backend.download(&sc)?);
        if vanished(host[R0V]) || guarded_quotient(host[RHO], host[R0V]).is_zero_value() {
            failure = Some("r0^H A p");
            break;
        }
        let snorm = host[SNORM2].re().to_f64_lossless().sqrt();
        rnorm = host[RNORM2].re().to_f64_lossless().sqrt();
        let stalled = session.iteration(it, rnorm, monitor);
        if snorm > target {
            if vanished(host[TT]) {
                failure = Some("t^H t with t = A M s");
                break;
            }
            if vanished(host[TS] / host[TT]) {
                failure = Some("omega = (t^H s) / (t^H t)");
                break;
            }
        }
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        converged = rnorm <= target;
        if converged {
            break;
        }
        if stalled {
            failure = Some(STAGNATION);
            break;
        }
        if vanished(host[RHO]) {
            failure = Some("rho = r0^H r");
            break;
        }
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
