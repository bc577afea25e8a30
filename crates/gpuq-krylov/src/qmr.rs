//! QMR, the quasi-minimal residual method (Freund and Nachtigal 1991) on the
//! two-sided Lanczos process without look-ahead, coupled two-term recurrences,
//! right-preconditioned. It uses the transpose of the operator.

use crate::session::{vanished, Session, STAGNATION};
use crate::KrylovOptions;
use gpuq_core::{Backend, DeviceVector, LinearOperator, RealScalar, Result, Scalar, SolveReport};

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
/// A^T, M and M^T, two unconjugated dot
/// products and three norms (one scalar download each), about ten vector updates;
/// 11 vectors of storage (8 without a preconditioner). The residual r = b - A x is
/// updated by recurrence and its norm is what the history records.
///
/// Returns the report with `converged` false at the iteration cap, and
/// [`gpuq_core::Error::Breakdown`] naming the quantity when one of the Lanczos
/// quantities (rho, xi, delta = z^T v, epsilon = q^T A p, beta) vanishes or turns
/// non-finite. The report's `relative_residual` is recomputed from b - A x.
pub fn qmr<B: Backend, T: Scalar>(
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
pub fn qmr_monitored<B: Backend, T: Scalar>(
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
    let real = |v: f64| T::from_f64(v);
    let norm = |v: &B::Vector<T>| -> Result<f64> { Ok(backend.nrm2(v)?.to_f64_lossless()) };
    // z = M^T w~ and its norm.
    let transpose_precond = |wt: &B::Vector<T>, z: &mut Option<B::Vector<T>>| -> Result<f64> {
        match (precond, z.as_mut()) {
            (Some(m), Some(z)) => {
                m.apply_transpose(wt, z)?;
                norm(z)
            }
            _ => norm(wt),
        }
    };

    let mut rho = norm(&vt)?;
    let mut xi = transpose_precond(&wt, &mut z)?;
    let (mut gamma_prev, mut theta_prev) = (1.0_f64, 0.0_f64);
    let (mut eta, mut eps) = (-T::one(), T::one());
    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    while !converged && it < session.max_iter {
        if !(rho.is_finite() && rho > 0.0) {
            failure = Some("rho = ||v~||");
            break;
        }
        if !(xi.is_finite() && xi > 0.0) {
            failure = Some("xi = ||M^T w~||");
            break;
        }
        it += 1;
        backend.scal(real(1.0 / rho), &mut vt)?;
        backend.scal(real(1.0 / xi), &mut wt)?;
        if let Some(z) = z.as_mut() {
            backend.scal(real(1.0 / xi), z)?;
        }
        let zv = z.as_ref().unwrap_or(&wt);
        let delta = backend.dotu(zv, &vt)?;
        if vanished(delta) {
            failure = Some("delta = z^T v");
            break;
        }
        if let (Some(m), Some(y)) = (precond, ytil.as_mut()) {
            m.apply(&vt, y)?;
        }
        let yv = ytil.as_ref().unwrap_or(&vt);
        // p = y~ - (xi delta / eps) p, q = z - (rho delta / eps) q (plain copies at i = 1)
        let (cp, cq) = if it == 1 {
            (T::zero(), T::zero())
        } else {
            (real(xi) * delta / eps, real(rho) * delta / eps)
        };
        backend.axpby(T::one(), yv, -cp, &mut p)?;
        backend.axpby(T::one(), zv, -cq, &mut q)?;
        a.apply(&p, &mut ptil)?;
        eps = backend.dotu(&q, &ptil)?;
        if vanished(eps) {
            failure = Some("epsilon = q^T A p");
            break;
        }
        let beta = eps / delta;
        if vanished(beta) {
            failure = Some("beta = epsilon / delta");
            break;
        }
        // v~ = A p - beta v; w~ = A^T q - beta w
        backend.axpby(T::one(), &ptil, -beta, &mut vt)?;
        a.apply_transpose(&q, &mut scratch)?;
        backend.axpby(T::one(), &scratch, -beta, &mut wt)?;
        let rho_next = norm(&vt)?;
        let xi_next = transpose_precond(&wt, &mut z)?;
        // The quasi-minimisation: one Givens rotation per step, in closed form.
        let theta = rho_next / (gamma_prev * beta.magnitude().to_f64_lossless());
        let gamma = 1.0 / (1.0 + theta * theta).sqrt();
        if !(theta.is_finite() && gamma > 0.0) {
            failure = Some("theta (the rotation of the quasi-minimisation)");
            break;
        }
        eta = -eta * real(rho * gamma * gamma) / (beta * real(gamma_prev * gamma_prev));
        let carry = real((theta_prev * gamma).powi(2));
        backend.axpby(eta, &p, carry, &mut d)?;
        backend.axpby(eta, &ptil, carry, &mut s)?;
        backend.axpy(T::one(), &d, x)?;
        backend.axpy(-T::one(), &s, &mut r)?;
        rnorm = norm(&r)?;
        if session.iteration(it, rnorm, monitor) {
            failure = Some(STAGNATION);
            break;
        }
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        converged = rnorm <= target;
        (rho, xi, gamma_prev, theta_prev) = (rho_next, xi_next, gamma, theta);
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
        failure.map(|q| ("qmr", q)),
    )
}
