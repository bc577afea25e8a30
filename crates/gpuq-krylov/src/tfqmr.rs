//! TFQMR, the transpose-free quasi-minimal residual method (Freund 1993),
//! right-preconditioned.

use crate::session::{vanished, Session, STAGNATION};
use crate::KrylovOptions;
use gpuq_core::{Backend, DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by TFQMR with right preconditioning (A M y = b, x = M y),
/// starting from the `x` given, for any nonsingular A, real or complex.
///
/// An iteration, as counted in the report, is one full step: two half-steps, each
/// with one operator and one preconditioner application, so it costs what a
/// BiCGSTAB iteration costs; per iteration also two dot products and two norms
/// (one scalar download each) and about ten vector updates; 11 vectors of storage
/// (9 without a preconditioner). The shadow residual is the initial residual.
///
/// TFQMR's recurrence only bounds the residual, ||r_m|| <= tau_m sqrt(m + 1); the
/// residual history records that bound. When the bound falls below the target, the
/// true residual b - A x is computed (one more operator application) and the
/// solve stops only if it meets the target too. If it does not (rounding in the
/// squared BiCG recurrences opens a gap between the two, often of 1e3 on
/// indefinite or strongly nonsymmetric systems), the method restarts from the true
/// residual; a restart that did not at least halve the true residual is reported
/// as stagnation ([`gpuq_core::Error::Breakdown`] with that quantity).
///
/// Returns the report with `converged` false at the iteration cap, and
/// [`gpuq_core::Error::Breakdown`] naming the quantity when rho = r0^H w or
/// r0^H v vanishes (or turns non-finite). The report's `relative_residual` is
/// recomputed from b - A x.
pub fn tfqmr<B: Backend, T: Scalar>(
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
pub fn tfqmr_monitored<B: Backend, T: Scalar>(
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

    let target = session.target;
    let mut rnorm = r0norm;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    // Each pass of 'restart starts the recurrences from the true residual in `w`
    // (norm `restart_norm`): first r0, then after every residual gap.
    let mut restart_norm = r0norm;
    'restart: while !converged && it < session.max_iter {
        backend.copy(&w, &mut rstar)?;
        backend.copy(&w, &mut even.u)?;
        even.refresh(a, precond)?;
        backend.copy(&even.amu, &mut v)?;
        backend.fill(&mut md, T::zero())?;
        let mut tau = restart_norm;
        let (mut theta, mut eta) = (0.0_f64, T::zero());
        let mut rho = backend.dotc(&rstar, &w)?;
        if vanished(rho) {
            failure = Some("rho = r0^H r");
            break;
        }
        let mut m = 0;
        while it < session.max_iter {
            it += 1;
            let sigma = backend.dotc(&rstar, &v)?;
            if vanished(sigma) {
                failure = Some("r0^H v");
                break 'restart;
            }
            let alpha = rho / sigma;
            // u_{m+1} = u_m - alpha v
            backend.copy(&even.u, &mut odd.u)?;
            backend.axpy(-alpha, &v, &mut odd.u)?;
            odd.refresh(a, precond)?;
            for dir in [&even, &odd] {
                // w = w - alpha A M u_m; M d = M u_m + (theta^2 eta / alpha) M d
                backend.axpy(-alpha, &dir.amu, &mut w)?;
                let coef = T::from_f64(theta * theta) * eta / alpha;
                backend.axpby(T::one(), dir.mu(), coef, &mut md)?;
                theta = backend.nrm2(&w)?.to_f64_lossless() / tau;
                let c2 = 1.0 / (1.0 + theta * theta);
                tau *= theta * c2.sqrt();
                eta = T::from_f64(c2) * alpha;
                backend.axpy(eta, &md, x)?;
                m += 1;
                rnorm = tau * ((m + 1) as f64).sqrt();
                if !rnorm.is_finite() {
                    failure = Some("tau (not finite)");
                    break 'restart;
                }
                if rnorm <= target {
                    // The bound is met: check the true residual. When rounding has
                    // opened a gap between the two (CGS-type recurrences do),
                    // restart from the true residual, unless the last restart
                    // gained less than a factor 2 (stagnation).
                    let true_norm = Session::residual(backend, a, b, x, &mut scratch)?;
                    rnorm = true_norm;
                    let stalled = session.iteration(it, rnorm, monitor);
                    if true_norm <= target {
                        converged = true;
                        break 'restart;
                    }
                    if stalled {
                        failure = Some(STAGNATION);
                        break 'restart;
                    }
                    if true_norm > 0.5 * restart_norm {
                        failure = Some(
                            "stagnation: the true residual did not halve since the last restart",
                        );
                        break 'restart;
                    }
                    restart_norm = true_norm;
                    backend.copy(&scratch, &mut w)?;
                    continue 'restart;
                }
            }
            if session.iteration(it, rnorm, monitor) {
                failure = Some(STAGNATION);
                break 'restart;
            }
            let rho_new = backend.dotc(&rstar, &w)?;
            if vanished(rho_new) {
                failure = Some("rho = r0^H w");
                break 'restart;
            }
            let beta = rho_new / rho;
            rho = rho_new;
            // u_{m+2} = w + beta u_{m+1};  v = A M u_{m+2} + beta (A M u_{m+1} + beta v)
            backend.copy(&w, &mut even.u)?;
            backend.axpy(beta, &odd.u, &mut even.u)?;
            even.refresh(a, precond)?;
            backend.axpby(T::one(), &odd.amu, beta, &mut v)?;
            backend.axpby(T::one(), &even.amu, beta, &mut v)?;
        }
    }
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
