//! BiCGSTAB(l) (Sleijpen and Fokkema 1993), right-preconditioned: l BiCG steps
//! followed by a degree-l minimal-residual polynomial.

use crate::bicgstabl_kernels::{
    coef, len, sigma, tau, BicgstablKernels, ALPHA, BETA, DISCARD, DOT, FLAG, GAMMA_DOT,
    GAMMA_VANISHED, NEG_ALPHA, NEG_BETA, NEG_OMEGA, NEG_TAU, ONE, RHO0, RHO1, RHO_VANISHED, RNORM2,
    SIGMA_VANISHED,
};
use crate::session::{Session, STAGNATION};
use crate::KrylovOptions;
use gpuq_core::{DeviceVector, Error, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by BiCGSTAB(`l`) with right preconditioning (A M y = b,
/// x = M y), starting from the `x` given, for any nonsingular A, real or complex.
/// `l = 1` is BiCGSTAB; seed 003 uses `l = 8`.
///
/// An iteration, as counted in the report, is one cycle: l BiCG steps (2l
/// operator and preconditioner applications, 2l dot products) and the
/// minimal-residual part (l (l + 3) / 2 dot products in the modified
/// Gram-Schmidt of the l new residual directions, and a small triangular
/// solve); about l^2 + 5l vector updates. Every scalar stays on the backend
/// ([`BicgstablKernels`]), so a cycle takes no host value: it is recorded once
/// and replayed ([`crate::Replay`]: on the GPU one CUDA graph launch), and it
/// ends with one download of the scalar array. Storage: 2 (l + 1) + 3 vectors
/// (one more with a preconditioner). The residual is checked once per cycle.
/// A quantity that vanishes inside a cycle stops every vector step after it (the
/// cycle's launches still run, as recorded); x then gets the cycle's increment
/// up to the breakdown, and the breakdown is reported.
///
/// Returns the report with `converged` false at the iteration cap,
/// [`Error::InvalidArgument`] for `l = 0`, and [`Error::Breakdown`] naming the
/// quantity when rho = r0^H r_j, r0^H u_(j+1), a residual direction's norm or
/// omega vanishes (or turns non-finite). The report's `relative_residual` is
/// recomputed from b - A x.
pub fn bicgstab_l<B: BicgstablKernels, T: Scalar>(
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
pub fn bicgstab_l_monitored<B: BicgstablKernels, T: Scalar>(
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

    let mut sc = backend.zeros::<T>(len(l))?;
    backend.bicgstabl_start(&mut sc, l)?;
    // Declared after the vectors, so it is dropped before them.
    let mut recording = None;

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    while !converged && it < session.max_iter {
        it += 1;
        let mut cycle = || -> Result<()> {
            // rho0 = -omega rho0
            backend.slot_ratio(&mut sc, (NEG_OMEGA, RHO0, ONE), RHO0, DISCARD, None, 0)?;
            if let Some(dy) = dy.as_mut() {
                backend.fill(dy, T::zero())?;
            }
            // BiCG part.
            for j in 0..l {
                // rho1 = r~^H r_j; beta = alpha (rho1 / rho0), rounded as the
                // host form was (the quotient first, in DOT); rho0 = rho1
                backend.dotc_into_slot(&rtilde, &r[j], &mut sc, RHO1)?;
                let check = Some(RHO1);
                backend.slot_ratio(
                    &mut sc,
                    (RHO1, ONE, RHO0),
                    DOT,
                    DISCARD,
                    check,
                    RHO_VANISHED,
                )?;
                backend.slot_ratio(&mut sc, (ALPHA, DOT, ONE), BETA, NEG_BETA, None, 0)?;
                backend.slot_ratio(&mut sc, (RHO1, ONE, ONE), RHO0, DISCARD, None, 0)?;
                for i in 0..=j {
                    // u_i = r_i - beta u_i
                    backend.axpby_slots(&sc, ONE, &r[i], NEG_BETA, &mut u[i])?;
                }
                let (lo, hi) = u.split_at_mut(j + 1);
                apply_am(&lo[j], &mut mv, &mut hi[0])?;
                // alpha = rho0 / (r~^H u_(j+1))
                backend.dotc_into_slot(&rtilde, &u[j + 1], &mut sc, GAMMA_DOT)?;
                let check = Some(GAMMA_DOT);
                backend.slot_ratio(
                    &mut sc,
                    (RHO0, ONE, GAMMA_DOT),
                    ALPHA,
                    NEG_ALPHA,
                    check,
                    GAMMA_VANISHED,
                )?;
                for i in 0..=j {
                    // r_i = r_i - alpha u_(i+1)
                    backend.axpby_slots(&sc, NEG_ALPHA, &u[i + 1], ONE, &mut r[i])?;
                }
                let (lo, hi) = r.split_at_mut(j + 1);
                apply_am(&lo[j], &mut mv, &mut hi[0])?;
                backend.axpby_slots(&sc, ALPHA, &u[0], ONE, dy.as_mut().unwrap_or(x))?;
            }
            // Minimal-residual part: modified Gram-Schmidt on r_1..r_l, then the
            // coefficients of the polynomial minimising ||r_0 - sum gamma_j r_j||.
            for j in 1..=l {
                for i in 1..j {
                    // tau_ij = r_i^H r_j / sigma_i; r_j = r_j - tau_ij r_i
                    backend.dotc_into_slot(&r[i], &r[j], &mut sc, DOT)?;
                    backend.slot_ratio(
                        &mut sc,
                        (DOT, ONE, sigma(i)),
                        tau(l, i, j),
                        NEG_TAU,
                        None,
                        0,
                    )?;
                    let (lo, hi) = r.split_at_mut(j);
                    backend.axpby_slots(&sc, NEG_TAU, &lo[i], ONE, &mut hi[0])?;
                }
                // sigma_j = ||r_j||^2; gamma'_j = r_j^H r_0 / sigma_j
                backend.dotc_into_slot(&r[j], &r[j], &mut sc, sigma(j))?;
                backend.dotc_into_slot(&r[j], &r[0], &mut sc, DOT)?;
                let check = Some(sigma(j));
                backend.slot_ratio(
                    &mut sc,
                    (DOT, ONE, sigma(j)),
                    coef(l, 2, j),
                    coef(l, 3, j),
                    check,
                    SIGMA_VANISHED,
                )?;
            }
            backend.bicgstabl_mr(&mut sc, l)?;
            // x += gamma_1 r_0 (in y-space), r_0 -= gamma'_l r_l, u_0 -= gamma_l u_l
            backend.axpby_slots(&sc, coef(l, 0, 1), &r[0], ONE, dy.as_mut().unwrap_or(x))?;
            {
                let (lo, hi) = r.split_at_mut(l);
                backend.axpby_slots(&sc, coef(l, 3, l), &hi[0], ONE, &mut lo[0])?;
                let (lo, hi) = u.split_at_mut(l);
                backend.axpby_slots(&sc, coef(l, 1, l), &hi[0], ONE, &mut lo[0])?;
            }
            for j in 1..l {
                let (lo, hi) = u.split_at_mut(j);
                backend.axpby_slots(&sc, coef(l, 1, j), &hi[0], ONE, &mut lo[0])?;
                backend.axpby_slots(&sc, coef(l, 4, j), &r[j], ONE, dy.as_mut().unwrap_or(x))?;
                let (lo, hi) = r.split_at_mut(j);
                backend.axpby_slots(&sc, coef(l, 3, j), &hi[0], ONE, &mut lo[0])?;
            }
            if let (Some(m), Some(dy)) = (precond, dy.as_ref()) {
                m.apply(dy, &mut mv)?;
                backend.axpy(T::one(), &mv, x)?;
            }
            backend.dotc_into_slot(&r[0], &r[0], &mut sc, RNORM2)
        };
        if it == 1 {
            // The first cycle runs as it is (its kernels load), the second is
            // recorded.
            cycle()?;
        } else {
            // SAFETY: `cycle` enqueues the same steps on the same vectors every
            // time, every per-cycle scalar in `sc`; the vectors are declared
            // before `recording`; it neither downloads nor waits.
            unsafe { backend.replay(&mut recording, &mut cycle)? };
        }
        // The one download of the cycle: the tests below read its scalars.
        let host = backend.download(&sc)?;
        rnorm = host[RNORM2].re().to_f64_lossless().sqrt();
        let quantity = match host[FLAG].re().to_f64_lossless() as u32 {
            0 => None,
            RHO_VANISHED => Some("rho = r0^H r_j"),
            GAMMA_VANISHED => Some("r0^H u_(j+1)"),
            SIGMA_VANISHED => Some("||r_j||^2 in the minimal-residual part"),
            _ => Some("omega (the last minimal-residual coefficient)"),
        };
        if quantity.is_some() {
            failure = quantity;
            break;
        }
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
        &mut mv,
        it,
        rnorm,
        converged,
        failure.map(|q| (method, q)),
    )
}
