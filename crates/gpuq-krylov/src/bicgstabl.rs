//! BiCGSTAB(l) (Sleijpen and Fokkema 1993), right-preconditioned: l BiCG steps
//! followed by a degree-l minimal-residual polynomial.

use crate::bicgstabl_kernels::{
    checked_ratio, coef, len, ratio, sigma, tau, BicgstablKernels, Ratio, ALPHA, BETA, DISCARD,
    DOT, FLAG, GAMMA_DOT, GAMMA_VANISHED, NEG_ALPHA, NEG_BETA, NEG_OMEGA, NEG_TAU, ONE, RHO0, RHO1,
    RHO_VANISHED, RNORM2, SIGMA_VANISHED,
};
use crate::replacement::with_residual_replacement;
use crate::replay::{Pipeline, Record};
use crate::session::Session;
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
/// ends with one snapshot of the scalar array, which the host reads while the
/// next cycle runs. A cycle accumulates its increment in y-space (dy); x += M dy
/// is applied after it, before the next cycle starts. Storage: 2 (l + 1) + 3
/// vectors. The residual is checked once per cycle.
/// A quantity that vanishes inside a cycle stops every vector step after it (the
/// cycle's launches still run, as recorded); x then gets the cycle's increment
/// up to the breakdown, and the breakdown is reported, unless the residual
/// reached by then meets the tolerance (a residual that vanished takes rho and
/// the norms with it): then the solve has converged.
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
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        bicgstab_l_once(backend, a, precond, b, x, l, opts, monitor)
    })
}

/// One run of [`bicgstab_l_monitored`] from the `x` given; its `converged` is the recurrence's.
#[allow(clippy::too_many_arguments)]
fn bicgstab_l_once<B: BicgstablKernels, T: Scalar>(
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
    // The y-space increment of a cycle (x += M dy after it), and M v scratch.
    let mut dy = backend.zeros::<T>(n)?;
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
    let mut host = vec![T::zero(); len(l)];
    // Declared after the vectors, so its recording is dropped before them.
    let mut pipe = Pipeline::new(backend, len(l))?;

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    // Cycles whose increment dy is in x: x += M dy is enqueued after a cycle,
    // before the next one refills dy, so a cycle queued behind the last one
    // taken never reaches x.
    let mut applied = 0;
    let apply_dy = |dy: &B::Vector<T>, mv: &mut B::Vector<T>, x: &mut B::Vector<T>| match precond {
        Some(m) => {
            m.apply(dy, mv)?;
            backend.axpy(T::one(), mv, x)
        }
        None => backend.axpy(T::one(), dy, x),
    };
    while !converged {
        while pipe.wants(session.max_iter) {
            let k = pipe.next_number();
            if k > 1 {
                apply_dy(&dy, &mut mv, x)?;
                applied = k - 1;
            }
            let mut cycle = || -> Result<()> {
                backend.fill(&mut dy, T::zero())?;
                // BiCG part.
                for j in 0..l {
                    // rho1 = r~^H r_j; beta = alpha (rho1 / rho0), rounded as the
                    // host form was (the quotient first, in DOT); rho0 = rho1.
                    // The cycle's first also starts it: rho0 = -omega rho0.
                    let start = ratio(NEG_OMEGA, RHO0, ONE, RHO0, DISCARD);
                    let then = [
                        checked_ratio((RHO1, ONE, RHO0), DOT, DISCARD, RHO1, RHO_VANISHED),
                        ratio(ALPHA, DOT, ONE, BETA, NEG_BETA),
                        ratio(RHO1, ONE, ONE, RHO0, DISCARD),
                    ];
                    let then: Vec<Ratio> =
                        (j == 0).then_some(start).into_iter().chain(then).collect();
                    backend.dotc_into_slot(&rtilde, &r[j], &mut sc, RHO1, &then)?;
                    // u_i = r_i - beta u_i, i <= j
                    backend.axpby_slots_many(&sc, ONE, &r[..=j], NEG_BETA, &mut u[..=j])?;
                    let (lo, hi) = u.split_at_mut(j + 1);
                    apply_am(&lo[j], &mut mv, &mut hi[0])?;
                    // alpha = rho0 / (r~^H u_(j+1))
                    let then = [checked_ratio(
                        (RHO0, ONE, GAMMA_DOT),
                        ALPHA,
                        NEG_ALPHA,
                        GAMMA_DOT,
                        GAMMA_VANISHED,
                    )];
                    backend.dotc_into_slot(&rtilde, &u[j + 1], &mut sc, GAMMA_DOT, &then)?;
                    // r_i = r_i - alpha u_(i+1), i <= j
                    backend.axpby_slots_many(&sc, NEG_ALPHA, &u[1..=j + 1], ONE, &mut r[..=j])?;
                    let (lo, hi) = r.split_at_mut(j + 1);
                    apply_am(&lo[j], &mut mv, &mut hi[0])?;
                    backend.axpby_slots(&sc, ALPHA, &u[0], ONE, &mut dy)?;
                }
                // Minimal-residual part: modified Gram-Schmidt on r_1..r_l, then
                // the coefficients of the polynomial minimising ||r_0 - sum
                // gamma_j r_j||.
                for j in 1..=l {
                    for i in 1..j {
                        // tau_ij = r_i^H r_j / sigma_i; r_j = r_j - tau_ij r_i
                        let then = [ratio(DOT, ONE, sigma(i), tau(l, i, j), NEG_TAU)];
                        backend.dotc_into_slot(&r[i], &r[j], &mut sc, DOT, &then)?;
                        let (lo, hi) = r.split_at_mut(j);
                        backend.axpby_slots(&sc, NEG_TAU, &lo[i], ONE, &mut hi[0])?;
                    }
                    // sigma_j = ||r_j||^2; gamma'_j = r_j^H r_0 / sigma_j
                    backend.dotc_into_slot(&r[j], &r[j], &mut sc, sigma(j), &[])?;
                    let then = [checked_ratio(
                        (DOT, ONE, sigma(j)),
                        coef(l, 2, j),
                        coef(l, 3, j),
                        sigma(j),
                        SIGMA_VANISHED,
                    )];
                    backend.dotc_into_slot(&r[j], &r[0], &mut sc, DOT, &then)?;
                }
                backend.bicgstabl_mr(&mut sc, l)?;
                // dy += gamma_1 r_0, r_0 -= gamma'_l r_l, u_0 -= gamma_l u_l
                backend.axpby_slots(&sc, coef(l, 0, 1), &r[0], ONE, &mut dy)?;
                {
                    let (lo, hi) = r.split_at_mut(l);
                    backend.axpby_slots(&sc, coef(l, 3, l), &hi[0], ONE, &mut lo[0])?;
                    let (lo, hi) = u.split_at_mut(l);
                    backend.axpby_slots(&sc, coef(l, 1, l), &hi[0], ONE, &mut lo[0])?;
                }
                for j in 1..l {
                    let (lo, hi) = u.split_at_mut(j);
                    backend.axpby_slots(&sc, coef(l, 1, j), &hi[0], ONE, &mut lo[0])?;
                    backend.axpby_slots(&sc, coef(l, 4, j), &r[j], ONE, &mut dy)?;
                    let (lo, hi) = r.split_at_mut(j);
                    backend.axpby_slots(&sc, coef(l, 3, j), &hi[0], ONE, &mut lo[0])?;
                }
                backend.dotc_into_slot(&r[0], &r[0], &mut sc, RNORM2, &[])
            };
            // SAFETY: `cycle` enqueues the same steps on the same vectors every
            // time, every per-cycle scalar in `sc`; the vectors are declared
            // before `pipe`; it neither downloads nor waits.
            unsafe { pipe.enqueue(backend, Record::Once, &mut cycle)? };
            pipe.snapshot(backend, &sc)?;
        }
        let Some(k) = pipe.next(backend, &mut host)? else {
            break;
        };
        it = k;
        rnorm = host[RNORM2].re().to_f64_lossless().sqrt();
        let quantity = match host[FLAG].re().to_f64_lossless() as u32 {
            0 => None,
            RHO_VANISHED => Some("rho = r0^H r_j"),
            GAMMA_VANISHED => Some("r0^H u_(j+1)"),
            SIGMA_VANISHED => Some("||r_j||^2 in the minimal-residual part"),
            _ => Some("omega (the last minimal-residual coefficient)"),
        };
        // A quantity that vanished because the residual did (an exact or
        // tolerance-meeting step inside the cycle) is convergence, not a
        // breakdown: r_0 stopped where x did.
        let met = rnorm <= target;
        if quantity.is_some() && !met {
            failure = quantity;
            break;
        }
        if session.iteration(it, rnorm, monitor) {
            failure = Some(session.stop_reason());
            break;
        }
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        converged = rnorm <= target;
    }
    // x gets the increment of the last cycle taken, unless the next one was
    // already queued (which enqueued it before refilling dy).
    if applied < it {
        apply_dy(&dy, &mut mv, x)?;
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
