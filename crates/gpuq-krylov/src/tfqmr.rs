//! TFQMR, the transpose-free quasi-minimal residual method (Freund 1993),
//! right-preconditioned.

use crate::replacement::with_residual_replacement;
use crate::replay::{iterate_buffers, settle_iterate, Pipeline, Record};
use crate::session::{vanished, Session};
use crate::tfqmr_kernels::{TfqmrKernels, LEN, RHO_NEXT, SIGMA, TAU2};
use crate::KrylovOptions;
use gpuq_core::{Backend, DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by TFQMR with right preconditioning (A M y = b, x = M y),
/// starting from the `x` given, for any nonsingular A, real or complex.
///
/// An iteration, as counted in the report, is one full step: two half-steps, each
/// with one operator and one preconditioner application, so it costs what a
/// BiCGSTAB iteration costs; per iteration also two dot products, two norms and
/// seven fused vector steps ([`TfqmrKernels`]). Every scalar, the QMR recurrence
/// included, stays on the backend, so the iteration's work is recorded once per
/// parity and replayed ([`crate::Replay`]: on the GPU one CUDA graph launch),
/// and the iteration ends with one snapshot of the 6-slot scalar array, which
/// the host reads while the next iteration runs (the iterate alternates between
/// two vectors, so the one the solve stops at survives it). 12 vectors of
/// storage (10 without a preconditioner). The shadow residual is the initial
/// residual.
///
/// The recurrence is kept in the scalar's precision, in squares: in f32, tau^2
/// leaves the range when ||r|| leaves about [1e-19, 1e19].
///
/// TFQMR's recurrence only bounds the residual, ||r_m|| <= tau_m sqrt(m + 1); the
/// residual history records that bound, checked once per iteration (after its
/// second half-step). When the bound falls below the target, the
/// true residual b - A x is computed (one more operator application) and the
/// solve stops only if it meets the target too. If it does not (rounding in the
/// squared BiCG recurrences opens a gap between the two, often of 1e3 on
/// indefinite or strongly nonsymmetric systems), the method restarts from the true
/// residual; a restart that did not at least halve the true residual is reported
/// as stagnation ([`gpuq_core::Error::Breakdown`] with that quantity).
///
/// Returns the report with `converged` false at the iteration cap, and
/// [`gpuq_core::Error::Breakdown`] naming the quantity when rho = r0^H w or
/// r0^H v vanishes (or turns non-finite; a vanished r0^H v leaves x as it was).
/// The report's `relative_residual` is recomputed from b - A x.
pub fn tfqmr<B: TfqmrKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
) -> Result<SolveReport> {
    tfqmr_monitored(backend, a, precond, b, x, opts, &mut |_, _| {})
}

/// A vector u of the method with M u and A M u next to it (M u aliases u without
/// a preconditioner).
struct Direction<V> {
    u: V,
    mu: Option<V>,
    amu: V,
}

impl<V> Direction<V> {
    fn new<B: Backend<Vector<T> = V>, T: Scalar>(b: &B, n: usize, precond: bool) -> Result<Self> {
        Ok(Direction {
            u: b.zeros::<T>(n)?,
            mu: precond.then(|| b.zeros::<T>(n)).transpose()?,
            amu: b.zeros::<T>(n)?,
        })
    }

    fn mu(&self) -> &V {
        self.mu.as_ref().unwrap_or(&self.u)
    }

    /// Recomputes M u and A M u from u.
    fn refresh<B: Backend<Vector<T> = V>, T: Scalar>(
        &mut self,
        a: &dyn LinearOperator<B, T>,
        precond: Option<&dyn LinearOperator<B, T>>,
    ) -> Result<()> {
        if let (Some(m), Some(mu)) = (precond, self.mu.as_mut()) {
            m.apply(&self.u, mu)?;
        }
        a.apply(self.mu.as_ref().unwrap_or(&self.u), &mut self.amu)
    }
}

/// [`tfqmr`] with a monitor called after every iteration with
/// `(iteration, residual bound relative to ||b||)`.
pub fn tfqmr_monitored<B: TfqmrKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        tfqmr_once(backend, a, precond, b, x, opts, monitor)
    })
}

/// One run of [`tfqmr_monitored`] from the `x` given; its `converged` is the recurrence's.
fn tfqmr_once<B: TfqmrKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    let mut session = Session::begin("tfqmr", backend, a, precond, b, x, opts)?;
    let n = b.len();
    let mut w = backend.zeros::<T>(n)?;
    let r0norm = Session::residual(backend, a, b, x, &mut w)?;
    session.initial(r0norm);
    let mut rstar = backend.zeros::<T>(n)?;
    // u_m for even m (`even`) and odd m (`odd`), each with M u and A M u.
    let mut even = Direction::new(backend, n, precond.is_some())?;
    let mut odd = Direction::new(backend, n, precond.is_some())?;
    let mut v = backend.zeros::<T>(n)?;
    // M d, the update direction in x's space.
    let mut md = backend.zeros::<T>(n)?;
    let mut scratch = backend.zeros::<T>(n)?;
    let mut sc = backend.zeros::<T>(LEN)?;
    let mut host = [T::zero(); LEN];
    // Odd iterations write their iterate to x_alt, even ones to x (see
    // `Pipeline`).
    let mut x_alt = backend.zeros::<T>(n)?;
    // Declared after the vectors, so its recordings are dropped before them.
    let mut pipe = Pipeline::new(backend, LEN)?;

    let target = session.target;
    let mut rnorm = r0norm;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    // Each pass of 'restart starts the recurrences from the true residual in `w`
    // (norm `restart_norm`): first r0, then after every residual gap.
    let mut restart_norm = r0norm;
    'restart: while !converged && it < session.max_iter {
        // An iteration queued behind the last one taken is forgotten; the
        // refills below come after it.
        pipe.discard();
        backend.copy(&w, &mut rstar)?;
        backend.copy(&w, &mut even.u)?;
        even.refresh(a, precond)?;
        backend.copy(&even.amu, &mut v)?;
        backend.fill(&mut md, T::zero())?;
        // theta^2 = eta = 0, tau^2 = ||r||^2, and rho = r*^H w (= ||r||^2 > 0),
        // which the first sigma step moves into place.
        let tau2 = <T::Real as RealScalar>::of_f64(restart_norm * restart_norm);
        backend.tfqmr_start(&mut sc, tau2)?;
        backend.tfqmr_rho(&rstar, &w, &mut sc)?;
        let mut m = 0;
        loop {
            while pipe.wants(session.max_iter) {
                let k = pipe.next_number();
                {
                    let slot = pipe.next_slot(backend);
                    let (x_in, x_out) = iterate_buffers(k, x, &mut x_alt);
                    let mut step = || -> Result<()> {
                        backend.tfqmr_sigma(&rstar, &v, &mut sc)?;
                        // u_{m+1} = u_m - alpha v
                        backend.tfqmr_odd(&sc, &even.u, &v, &mut odd.u)?;
                        odd.refresh(a, precond)?;
                        // Each half-step: w = w - alpha A M u; M d = M u + (theta^2
                        // eta / alpha) M d; the recurrence; x = x + eta M d (the
                        // first from the previous iteration's iterate).
                        backend.tfqmr_half(&mut sc, &even.amu, even.mu(), &mut w, &mut md)?;
                        backend.tfqmr_x(&sc, &md, Some(x_in), x_out)?;
                        backend.tfqmr_half(&mut sc, &odd.amu, odd.mu(), &mut w, &mut md)?;
                        backend.tfqmr_x(&sc, &md, None, x_out)?;
                        // u_{m+2} = w + beta u_{m+1};  v = A M u_{m+2} + beta (A M u_{m+1} + beta v)
                        backend.tfqmr_rho(&rstar, &w, &mut sc)?;
                        backend.tfqmr_even(&sc, &w, &odd.u, &mut even.u)?;
                        even.refresh(a, precond)?;
                        backend.tfqmr_v(&sc, &even.amu, &odd.amu, &mut v)?;
                        backend.copy_to_slot(&sc, &slot)
                    };
                    // SAFETY: `step` enqueues the same steps on the same vectors
                    // for every iteration of a parity (a restart refills them in
                    // place), every per-iteration scalar in `sc`; the vectors are
                    // declared before `pipe`; it neither downloads nor waits.
                    unsafe { pipe.enqueue(backend, Record::PerParity, &mut step)? };
                }
                pipe.mark(backend)?;
            }
            let Some(k) = pipe.next(backend, &mut host)? else {
                break 'restart;
            };
            it = k;
            // A vanished sigma made alpha zero: x is as it was.
            if vanished(host[SIGMA]) {
                failure = Some("r0^H v");
                break 'restart;
            }
            m += 2;
            rnorm = host[TAU2].re().to_f64_lossless().sqrt() * ((m + 1) as f64).sqrt();
            if !rnorm.is_finite() {
                failure = Some("tau (not finite)");
                break 'restart;
            }
            if rnorm <= target {
                // The bound is met: check the true residual of this iteration's
                // iterate. When rounding has opened a gap between the two
                // (CGS-type recurrences do), restart from the true residual,
                // unless the last restart gained less than a factor 2
                // (stagnation).
                let x_k = if it % 2 == 1 { &x_alt } else { &*x };
                let true_norm = Session::residual(backend, a, b, x_k, &mut scratch)?;
                rnorm = true_norm;
                let stalled = session.iteration(it, rnorm, monitor);
                if true_norm <= target {
                    converged = true;
                    break 'restart;
                }
                if stalled {
                    failure = Some(session.stop_reason());
                    break 'restart;
                }
                if true_norm > 0.5 * restart_norm {
                    failure =
                        Some("stagnation: the true residual did not halve since the last restart");
                    break 'restart;
                }
                restart_norm = true_norm;
                backend.copy(&scratch, &mut w)?;
                continue 'restart;
            }
            if session.iteration(it, rnorm, monitor) {
                failure = Some(session.stop_reason());
                break 'restart;
            }
            if vanished(host[RHO_NEXT]) {
                failure = Some("rho = r0^H w");
                break 'restart;
            }
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
        failure.map(|q| ("tfqmr", q)),
    )
}
