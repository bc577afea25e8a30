//! BiCGSTAB(l) (Sleijpen and Fokkema 1993), right-preconditioned: l BiCG steps
//! followed by a degree-l minimal-residual polynomial.

use crate::session::{vanished, Session, STAGNATION};
use crate::KrylovOptions;
use gpuq_core::{
    Backend, DeviceVector, Error, LinearOperator, RealScalar, Result, Scalar, SolveReport,
};

/// Solves A x = b by BiCGSTAB(`l`) with right preconditioning (A M y = b,
/// x = M y), starting from the `x` given, for any nonsingular A, real or complex.
/// `l = 1` is BiCGSTAB; seed 003 uses `l = 8`.
///
/// An iteration, as counted in the report, is one cycle: l BiCG steps (2l
/// operator and preconditioner applications, 2l dot products) and the
/// minimal-residual part (l (l + 3) / 2 dot products on the host-side Gram-Schmidt
/// of the l new residual directions), each dot one scalar download; about
/// l^2 + 5l vector updates. Storage: 2 (l + 1) + 3 vectors (one more with a
/// preconditioner). The residual is checked once per cycle.
///
/// Returns the report with `converged` false at the iteration cap,
/// [`Error::InvalidArgument`] for `l = 0`, and [`Error::Breakdown`] naming the
/// quantity when rho = r0^H r_j, r0^H u_(j+1) or a residual direction's norm
/// vanishes (or turns non-finite). The report's `relative_residual` is
/// recomputed from b - A x.
pub fn bicgstab_l<B: Backend, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    l: usize,
    opts: &KrylovOptions,
) -> Result<SolveReport> {
    bicgstab_l_monitored(backend, a, precond, b, x, l, opts, &mut |_, _| {})
}

/// [`bicgstab_l`] with a monitor called after every cycle with
/// `(cycle, recurrence relative residual)`.
#[allow(clippy::too_many_arguments)]
pub fn bicgstab_l_monitored<B: Backend, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    l: usize,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    if l == 0 {
        return Err(Error::InvalidArgument(
            "BiCGSTAB(l) needs l >= 1 (l = 0 given)".into(),
        ));
    }
    let method: &'static str = "bicgstab(l)";
    let mut session = Session::begin(method, backend, a, precond, b, x, opts)?;
    session.report.method = format!("bicgstab({l})");
    let n = b.len();
    let zeros = || -> Result<Vec<B::Vector<T>>> { (0..=l).map(|_| backend.zeros(n)).collect() };
    // r[j] = (A M)^j r, u[j] = (A M)^j u within a cycle.
    let (mut r, mut u) = (zeros()?, zeros()?);
    let mut rnorm = Session::residual(backend, a, b, x, &mut r[0])?;
    session.initial(rnorm);
    let mut rtilde = backend.zeros::<T>(n)?;
    backend.copy(&r[0], &mut rtilde)?;
    // The y-space increment of a cycle (x += M dy at its end), and M v scratch.
    let mut dy = precond.map(|_| backend.zeros::<T>(n)).transpose()?;
    let mut mv = backend.zeros::<T>(n)?;
    // out = A M v
    let apply_am = |v: &B::Vector<T>, mv: &mut B::Vector<T>, out: &mut B::Vector<T>| match precond {
        Some(m) => {
            m.apply(v, mv)?;
            a.apply(mv, out)
        }
        None => a.apply(v, out),
    };

    let target = session.target;
    let mut converged = rnorm <= target;
    let (mut rho0, mut alpha, mut omega) = (T::one(), T::zero(), T::one());
    let mut it = 0;
    let mut failure = None;
    'cycles: while !converged && it < session.max_iter {
        it += 1;
        rho0 = -omega * rho0;
        if let Some(dy) = dy.as_mut() {
            backend.fill(dy, T::zero())?;
        }
        // BiCG part.
        for j in 0..l {
            let rho1 = backend.dotc(&rtilde, &r[j])?;
            if vanished(rho1) {
                failure = Some("rho = r0^H r_j");
                break 'cycles;
            }
            let beta = alpha * (rho1 / rho0);
            rho0 = rho1;
            for i in 0..=j {
                // u_i = r_i - beta u_i
                backend.axpby(T::one(), &r[i], -beta, &mut u[i])?;
            }
            let (lo, hi) = u.split_at_mut(j + 1);
            apply_am(&lo[j], &mut mv, &mut hi[0])?;
            let gamma = backend.dotc(&rtilde, &u[j + 1])?;
            if vanished(gamma) {
                failure = Some("r0^H u_(j+1)");
                break 'cycles;
            }
            alpha = rho0 / gamma;
            for i in 0..=j {
                backend.axpy(-alpha, &u[i + 1], &mut r[i])?;
            }
            let (lo, hi) = r.split_at_mut(j + 1);
            apply_am(&lo[j], &mut mv, &mut hi[0])?;
            backend.axpy(alpha, &u[0], dy.as_mut().unwrap_or(x))?;
        }
        // Minimal-residual part: modified Gram-Schmidt on r_1..r_l, then the
        // coefficients of the polynomial minimising ||r_0 - sum gamma_j r_j||.
        let mut tau = vec![vec![T::zero(); l + 1]; l + 1];
        let mut sigma = vec![T::zero(); l + 1];
        let mut gamma1 = vec![T::zero(); l + 1];
        for j in 1..=l {
            for i in 1..j {
                tau[i][j] = backend.dotc(&r[i], &r[j])? / sigma[i];
                let (lo, hi) = r.split_at_mut(j);
                backend.axpy(-tau[i][j], &lo[i], &mut hi[0])?;
            }
            sigma[j] = backend.dotc(&r[j], &r[j])?;
            if vanished(sigma[j]) {
                failure = Some("||r_j||^2 in the minimal-residual part");
                break 'cycles;
            }
            gamma1[j] = backend.dotc(&r[j], &r[0])? / sigma[j];
        }
        let mut gamma = vec![T::zero(); l + 1];
        gamma[l] = gamma1[l];
        omega = gamma[l];
        for j in (1..l).rev() {
            let mut g = gamma1[j];
            for i in j + 1..=l {
                g -= tau[j][i] * gamma[i];
            }
            gamma[j] = g;
        }
        let mut gamma2 = vec![T::zero(); l + 1];
        for j in 1..l {
            let mut g = gamma[j + 1];
            for i in j + 1..l {
                g += tau[j][i] * gamma[i + 1];
            }
            gamma2[j] = g;
        }
        if vanished(omega) {
            failure = Some("omega (the last minimal-residual coefficient)");
            break;
        }
        backend.axpy(gamma[1], &r[0], dy.as_mut().unwrap_or(x))?;
        {
            let (lo, hi) = r.split_at_mut(l);
            backend.axpy(-gamma1[l], &hi[0], &mut lo[0])?;
            let (lo, hi) = u.split_at_mut(l);
            backend.axpy(-gamma[l], &hi[0], &mut lo[0])?;
        }
        for j in 1..l {
            let (lo, hi) = u.split_at_mut(j);
            backend.axpy(-gamma[j], &hi[0], &mut lo[0])?;
            backend.axpy(gamma2[j], &r[j], dy.as_mut().unwrap_or(x))?;
            let (lo, hi) = r.split_at_mut(j);
            backend.axpy(-gamma1[j], &hi[0], &mut lo[0])?;
        }
        if let (Some(m), Some(dy)) = (precond, dy.as_ref()) {
            m.apply(dy, &mut mv)?;
            backend.axpy(T::one(), &mv, x)?;
        }
        rnorm = backend.nrm2(&r[0])?.to_f64_lossless();
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
    if failure.is_some() {
        // x misses the y-space increment of the broken cycle; add it so the
        // partial report describes the iterate reached.
        if let (Some(m), Some(dy)) = (precond, dy.as_ref()) {
            m.apply(dy, &mut mv)?;
            backend.axpy(T::one(), &mv, x)?;
        }
    }
    session.finish(
        backend,
        a,
        b,
        x,
        &mut mv,
        it,
        rnorm,
        converged,
        failure.map(|q| (method, q)),
    )
}
