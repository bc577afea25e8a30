//! BiCGSTAB (van der Vorst 1992), right-preconditioned, with its scalars kept
//! on the backend ([`crate::BicgstabKernels`]).

use crate::bicgstab_kernels::{
    guarded_quotient, BicgstabKernels, LEN, R0V, RHO, RNORM2, SNORM2, TS, TT,
};
use crate::replacement::with_residual_replacement;
use crate::replay::{iterate_buffers, settle_iterate, Pipeline, Record};
use crate::session::{vanished, Session};
use crate::KrylovOptions;
use gpuq_core::{DeviceVector, FusedDot, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by BiCGSTAB with right preconditioning (A M y = b, x = M y),
/// starting from the `x` given, for any nonsingular A, real or complex.
///
/// Per iteration: two operator and two preconditioner applications, one
/// reduction (r0^H v; computed by the product that makes v when the operator
/// fuses it, [`LinearOperator::apply_dot`], a pass of its own otherwise) and
/// four fused steps: p's update; s = r - alpha v; t^H s with t^H t and
/// ||s||^2; x's and r's updates with ||r||^2 and the next rho = r0^H r. Every
/// scalar stays on the backend, so the launches are the same every iteration
/// (the first too: with p, v and the scalars but rho zero, p's update gives
/// p = r): the backend records them once per parity and replays them
/// ([`crate::Replay`]; on the GPU one CUDA graph launch per iteration). The
/// iteration ends with one snapshot of the 6-slot scalar array (96 bytes for
/// complex f64; on the GPU copied by the graph's last kernel), which the
/// stopping and breakdown tests read; on the GPU the next iteration is already
/// queued while the host reads it, and the iterate alternates between two
/// vectors so that the one the solve stops at survives it. 9 vectors of storage (11 with a
/// preconditioner). The shadow residual is the initial residual.
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
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        bicgstab_once(backend, a, precond, b, x, opts, monitor)
    })
}

/// One run of [`bicgstab_monitored`] from the `x` given; its `converged` is the recurrence's.
fn bicgstab_once<B: BicgstabKernels, T: Scalar>(
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
    // A diagonal preconditioner is applied inside the steps that produce p
    // and s; another one on its own.
    let diagonal = precond.and_then(|m| m.diagonal());
    let apply_m = |v: &B::Vector<T>, out: &mut Option<B::Vector<T>>| -> Result<()> {
        if let (Some(m), Some(o), None) = (precond, out.as_mut(), diagonal) {
            m.apply(v, o)?;
        }
        Ok(())
    };
    let mut sc = backend.zeros::<T>(LEN)?;
    let mut host = [T::zero(); LEN];
    // Odd iterations write their iterate to x_alt, even ones to x (see
    // `Pipeline`).
    let mut x_alt = backend.zeros::<T>(n)?;

    let target = session.target;
    let target2 = <T::Real as RealScalar>::of_f64(target * target);
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    if !converged {
        backend.dotc_to_slot(&r0, &r, &mut sc, RHO)?;
    }
    // The first rho, r0^H r0 = ||r0||^2, as the host knows it (the device's
    // sum may differ in the last bits; only its vanishing or overflow in a
    // quotient matters).
    let mut rho_prev = T::from_real(<T::Real as RealScalar>::of_f64(rnorm * rnorm));
    // Declared after the vectors, so its recordings are dropped before them.
    let mut pipe = Pipeline::new(backend, LEN)?;
    if precond.is_none() || diagonal.is_some() {
        pipe = pipe.device_work();
    }
    while !converged {
        while pipe.wants(session.max_iter) {
            let k = pipe.next_number();
            {
                let slot = pipe.next_slot(backend);
                let (x_in, x_out) = iterate_buffers(k, x, &mut x_alt);
                let mut step = || -> Result<()> {
                    // In the first iteration p = r: p, v and the scalars but
                    // rho are zero.
                    backend.bicgstab_p(&sc, &r, &v, &mut p, diagonal.zip(mp.as_mut()))?;
                    apply_m(&p, &mut mp)?;
                    let phat = mp.as_ref().unwrap_or(&p);
                    let r0v = FusedDot {
                        w: &r0,
                        sc: &mut sc,
                        slot: R0V,
                    };
                    if !a.apply_dot(backend, phat, &mut v, r0v)? {
                        backend.dotc_to_slot(&r0, &v, &mut sc, R0V)?;
                    }
                    backend.bicgstab_s(&sc, &v, &mut r, diagonal.zip(ms.as_mut()))?;
                    apply_m(&r, &mut ms)?;
                    a.apply(ms.as_ref().unwrap_or(&r), &mut t)?;
                    backend.bicgstab_tt(&t, &r, &mut sc)?;
                    let shat = ms.as_ref();
                    backend
                        .bicgstab_xr(&mut sc, target2, phat, shat, &t, &r0, x_in, x_out, &mut r)?;
                    backend.copy_to_slot(&sc, &slot)
                };
                // SAFETY: `step` enqueues the same steps on the same vectors
                // for every iteration of a parity (declared before `pipe`),
                // every per-iteration scalar in `sc`, and it neither downloads
                // nor waits.
                unsafe { pipe.enqueue(backend, Record::PerParity, &mut step)? };
            }
            pipe.mark(backend)?;
        }
        let Some(k) = pipe.next(backend, &mut host)? else {
            break;
        };
        it = k;
        // alpha = rho / r0^H v with the rho the iteration started from (the
        // snapshot's is the next one, which is zero when the iteration
        // solved the system).
        if vanished(host[R0V]) || guarded_quotient(rho_prev, host[R0V]).is_zero_value() {
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
            failure = Some(session.stop_reason());
            break;
        }
        if vanished(host[RHO]) {
            failure = Some("rho = r0^H r");
            break;
        }
        rho_prev = host[RHO];
    }
    settle_iterate(backend, it, &x_alt, x)?;
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
