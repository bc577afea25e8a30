//! QMR, the quasi-minimal residual method (Freund and Nachtigal 1991) on the
//! two-sided Lanczos process without look-ahead, coupled two-term recurrences,
//! right-preconditioned. It uses the transpose of the operator.

use crate::qmr_kernels::{QmrKernels, CARRY, DELTA, EPS, ETA, GAMMA, LEN, RHO, RNORM2, THETA, XI};
use crate::replacement::with_residual_replacement;
use crate::replay::{iterate_buffers, settle_iterate, Pipeline, Record};
use crate::session::{vanished, Session};
use crate::KrylovOptions;
use gpuq_core::{DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by QMR with right preconditioning (A M y = b, x = M y),
/// starting from the `x` given, for any nonsingular A, real or complex.
///
/// QMR here is *not* transpose-free: the Lanczos process runs with the bilinear
/// form w^T v (unconjugated) and needs y = A^T x and y = M^T x, which the operators
/// provide through [`LinearOperator::apply_transpose`] (a matrix built by
/// `MatrixOperator::with_transpose`, Jacobi, the identity). For symmetric and
/// complex symmetric A (the Helmholtz matrices) A^T = A, so nothing extra is
/// stored. Without look-ahead the method breaks down on a (rare) serious Lanczos
/// breakdown, reported as an error.
///
/// An operator or preconditioner without a transpose is refused with
/// [`gpuq_core::Error::Precondition`] before the first iteration (a probe
/// application of each transpose). Per iteration: one application each of A,
/// A^T, M and M^T, two unconjugated dot products, three norms and six fused
/// vector steps ([`QmrKernels`]). Every scalar, the quasi-minimisation's
/// rotation included, stays on the backend, so the iteration's work is recorded
/// once per parity and replayed ([`crate::Replay`]: on the GPU one CUDA graph
/// launch), and the iteration ends with one snapshot of the 10-slot scalar
/// array, which the host reads while the next iteration runs (the iterate
/// alternates between two vectors, so the one the solve stops at survives it).
/// 12 vectors of storage (9 without a preconditioner). The residual r = b - A x is updated
/// by recurrence and its norm is what the history records. The rotation is
/// computed in the scalar's precision (f32 for f32 and `Complex<f32>`).
///
/// Returns the report with `converged` false at the iteration cap, and
/// [`gpuq_core::Error::Breakdown`] naming the quantity when one of the Lanczos
/// quantities (rho, xi, delta = z^T v, epsilon = q^T A p, beta) vanishes or turns
/// non-finite; x is then as it was before the iteration that met it. The
/// report's `relative_residual` is recomputed from b - A x.
pub fn qmr<B: QmrKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
) -> Result<SolveReport> {
    qmr_monitored(backend, a, precond, b, x, opts, &mut |_, _| {})
}

/// [`qmr`] with a monitor called after every iteration with
/// `(iteration, recurrence relative residual)`.
pub fn qmr_monitored<B: QmrKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        qmr_once(backend, a, precond, b, x, opts, monitor)
    })
}

/// One run of [`qmr_monitored`] from the `x` given; its `converged` is the recurrence's.
fn qmr_once<B: QmrKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    let mut session = Session::begin("qmr", backend, a, precond, b, x, opts)?;
    let n = b.len();
    let mut r = backend.zeros::<T>(n)?;
    let mut rnorm = Session::residual(backend, a, b, x, &mut r)?;
    session.initial(rnorm);
    let new = || backend.zeros::<T>(n);
    let with_m = || precond.map(|_| backend.zeros::<T>(n)).transpose();
    // v~ then v (scaled in place), w~ then w; z = M^T w~ (aliases w~ without M);
    // y~ = M v (aliases v without M).
    let (mut vt, mut wt) = (new()?, new()?);
    backend.copy(&r, &mut vt)?;
    backend.copy(&r, &mut wt)?;
    let (mut z, mut ytil) = (with_m()?, with_m()?);
    let (mut p, mut q, mut ptil, mut d, mut s, mut scratch) =
        (new()?, new()?, new()?, new()?, new()?, new()?);
    // Refuse operators without a transpose before iterating, not midway.
    a.apply_transpose(&r, &mut scratch)?;
    if let Some(m) = precond {
        m.apply_transpose(&r, &mut scratch)?;
    }
    let norm = |v: &B::Vector<T>| -> Result<f64> { Ok(backend.nrm2(v)?.to_f64_lossless()) };
    // rho = ||v~||, xi = ||M^T w~||, and the rotation's start: theta = 0,
    // gamma = 1, eta = -1, eps = 0 (which makes the first p and q plain copies).
    let mut host = [T::zero(); LEN];
    host[RHO] = T::from_f64(norm(&vt)?);
    host[XI] = T::from_f64(match (precond, z.as_mut()) {
        (Some(m), Some(z)) => {
            m.apply_transpose(&wt, z)?;
            norm(z)?
        }
        _ => norm(&wt)?,
    });
    let mut sc = backend.zeros::<T>(LEN)?;
    backend.qmr_start(&mut sc, host[RHO].re(), host[XI].re())?;
    // Odd iterations write their iterate to x_alt, even ones to x (see
    // `Pipeline`).
    let mut x_alt = backend.zeros::<T>(n)?;
    // Declared after the vectors, so its recordings are dropped before them.
    let mut pipe = Pipeline::new(backend, LEN)?;
    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    // rho and xi of the iteration taken last scale the next one's vectors.
    let lanczos_norms = |host: &[T; LEN]| {
        let (rho, xi) = (
            host[RHO].re().to_f64_lossless(),
            host[XI].re().to_f64_lossless(),
        );
        if !(rho.is_finite() && rho > 0.0) {
            Some("rho = ||v~||")
        } else if !(xi.is_finite() && xi > 0.0) {
            Some("xi = ||M^T w~||")
        } else {
            None
        }
    };
    if !converged {
        failure = lanczos_norms(&host);
    }
    while !converged && failure.is_none() {
        while pipe.wants(session.max_iter) {
            let k = pipe.next_number();
            {
                let slot = pipe.next_slot(backend);
                let (x_in, x_out) = iterate_buffers(k, x, &mut x_alt);
                let mut step = || -> Result<()> {
                    // v = v~ / rho, w = w~ / xi, z = M^T w~ / xi; delta = z^T v
                    backend.qmr_scale(&mut sc, &mut vt, &mut wt, z.as_mut())?;
                    if let (Some(m), Some(y)) = (precond, ytil.as_mut()) {
                        m.apply(&vt, y)?;
                    }
                    // p = y~ - (xi delta / eps) p, q = z - (rho delta / eps) q
                    let yv = ytil.as_ref().unwrap_or(&vt);
                    backend.qmr_pq(&sc, yv, z.as_ref().unwrap_or(&wt), &mut p, &mut q)?;
                    a.apply(&p, &mut ptil)?;
                    backend.qmr_eps(&q, &ptil, &mut sc)?;
                    // v~ = A p - beta v; w~ = A^T q - beta w; z = M^T w~
                    backend.qmr_v(&mut sc, &ptil, &mut vt)?;
                    a.apply_transpose(&q, &mut scratch)?;
                    backend.qmr_w(&sc, &scratch, &mut wt)?;
                    if let (Some(m), Some(z)) = (precond, z.as_mut()) {
                        m.apply_transpose(&wt, z)?;
                    }
                    // The quasi-minimisation: one Givens rotation per step, in
                    // closed form.
                    backend.qmr_rotation(z.as_ref().unwrap_or(&wt), &mut sc)?;
                    backend.qmr_update(&mut sc, &p, &ptil, &mut d, &mut s, x_in, x_out, &mut r)?;
                    backend.copy_to_slot(&sc, &slot)
                };
                // SAFETY: `step` enqueues the same steps on the same vectors for
                // every iteration of a parity, every per-iteration scalar in
                // `sc`; the vectors are declared before `pipe`; it neither
                // downloads nor waits.
                unsafe { pipe.enqueue(backend, Record::PerParity, &mut step)? };
            }
            pipe.mark(backend)?;
        }
        let Some(k) = pipe.next(backend, &mut host)? else {
            break;
        };
        it = k;
        let (delta, eps) = (host[DELTA], host[EPS]);
        if vanished(delta) {
            failure = Some("delta = z^T v");
            break;
        }
        if vanished(eps) {
            failure = Some("epsilon = q^T A p");
            break;
        }
        if vanished(eps / delta) {
            failure = Some("beta = epsilon / delta");
            break;
        }
        let (theta, gamma) = (host[THETA].re(), host[GAMMA].re());
        if !(theta.is_finite_value() && gamma > T::Real::of_f64(0.0)) {
            failure = Some("theta (the rotation of the quasi-minimisation)");
            break;
        }
        if !(host[ETA].is_finite_value() && host[CARRY].is_finite_value()) {
            failure = Some("eta or theta_prev gamma (the update's coefficients, not finite)");
            break;
        }
        rnorm = host[RNORM2].re().to_f64_lossless().sqrt();
        if session.iteration(it, rnorm, monitor) {
            failure = Some(session.stop_reason());
            break;
        }
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        converged = rnorm <= target;
        if !converged {
            failure = lanczos_norms(&host);
        }
    }
    settle_iterate(backend, it, &x_alt, x)?;
    session.finish(
        backend,
        a,
        b,
        x,
        &mut scratch,
        it,
        rnorm,
        converged,
        failure.map(|q| ("qmr", q)),
    )
}
