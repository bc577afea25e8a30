//! Conjugate gradients, plain and preconditioned.

use crate::kernels::{cg_next_slot, CG_LEN, PQ, RHO, RNORM2};
use crate::replacement::with_residual_replacement;
use crate::replay::{iterate_buffers, settle_iterate, Pipeline, Record};
use crate::session::Session;
use crate::{CgKernels, KrylovOptions};
use gpuq_core::num_traits::Zero;
use gpuq_core::{DeviceVector, FusedDot, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// Solves A x = b by (preconditioned) conjugate gradients, starting from the `x` given.
///
/// `a` must be Hermitian positive definite, and so must `precond` when given.
/// Per iteration: one operator application fused with p^H A p, one fused residual
/// update with its norm, one preconditioner application and dot product (when
/// preconditioned), and one fused update of x and p. Only scalars leave the backend.
///
/// On a backend that runs ahead of the host ([`crate::Replay::look_ahead`] above
/// 0: CUDA, and the distributed backend over GPUs), without a preconditioner or
/// with a diagonal one, the scalars stay on the backend instead
/// ([`CgKernels::cg_residual_slots`], [`CgKernels::cg_xp_slots`]): the diagonal
/// scaling and r^H z are folded into the residual update, the iteration's
/// launches are recorded once per parity and replayed (a CUDA graph, on one
/// GPU and across GPUs over NCCL: [`crate::Replay::replay_device_work`]),
/// and the host reads each iteration's scalars while the next iteration is
/// already queued, so no iteration waits for the host. On a backend that
/// does not record in general ([`crate::Replay::records`] false: the
/// distributed backend over GPUs) any other preconditioner runs inside the
/// queued iteration too, run again each time (an AMG cycle across GPUs),
/// with r^H z reduced into its slot after it. The
/// iteration the host
/// stops at is reported; the one queued behind it runs on buffers the result no
/// longer needs. The same iterates up to rounding (sums in another order).
///
/// Returns the report with `converged` false when the iteration cap is reached
/// (the iterate is still the best one found), and [`gpuq_core::Error::Breakdown`] when
/// p^H A p or r^H z is not positive (A or M not positive definite, or non-finite data).
/// The report's `relative_residual` is recomputed from a fresh product b - A x.
pub fn cg<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    cg_monitored(backend, a, precond, b, x, opts, &mut |_, _| {})
}

/// [`cg`] with a monitor called after every iteration with
/// `(iteration, recurrence relative residual)`; the CLI uses it for progress lines.
pub fn cg_monitored<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        cg_once(backend, a, precond, b, x, opts, monitor)
    })
}

/// One run of [`cg_monitored`] from the `x` given; its `converged` is the recurrence's.
fn cg_once<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    // A preconditioner with no diagonal runs inside the queued iteration
    // only where nothing is recorded (its cycle may not be recordable).
    let diagonal = precond.map(|m| m.diagonal());
    let general_ok = !backend.records();
    if backend.look_ahead() > 0 && (general_ok || !matches!(diagonal, Some(None))) {
        return cg_on_backend(backend, a, precond, b, x, opts, monitor);
    }
    let method = if precond.is_some() { "pcg" } else { "cg" };
    let mut session = Session::begin(method, backend, a, precond, b, x, opts)?;
    let nr = b.len();
    let mut r = backend.zeros::<T>(nr)?;
    let mut rnorm = Session::residual(backend, a, b, x, &mut r)?;
    session.initial(rnorm);

    let mut z = match precond {
        Some(_) => Some(backend.zeros::<T>(nr)?),
        None => None,
    };
    let mut p = backend.zeros::<T>(nr)?;
    let mut q = backend.zeros::<T>(nr)?;
    let mut rho = T::from_f64(rnorm * rnorm);
    if let (Some(m), Some(z)) = (precond, z.as_mut()) {
        m.apply(&r, z)?;
        rho = backend.dotc(&r, z)?;
    }
    backend.copy(z.as_ref().unwrap_or(&r), &mut p)?;

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure: Option<&'static str> = None;
    while !converged && it < session.max_iter {
        it += 1;
        let pq = a.apply_dotc(backend, &p, &mut q)?;
        if !pq.is_finite_value() || pq.re() <= T::Real::zero() {
            failure = Some("p^H A p (not positive: is A positive definite?)");
            break;
        }
        let alpha = rho / pq;
        let rr = backend.cg_update_residual(alpha, &q, &mut r)?;
        rnorm = rr.to_f64_lossless().sqrt();
        if session.iteration(it, rnorm, monitor) {
            failure = Some(session.stop_reason());
            break;
        }
        if !rnorm.is_finite() {
            failure = Some("||r|| (not finite)");
            break;
        }
        if rnorm <= target {
            backend.axpy(alpha, &p, x)?;
            converged = true;
            break;
        }
        let rho_new = match (precond, z.as_mut()) {
            (Some(m), Some(z)) => {
                m.apply(&r, z)?;
                backend.dotc(&r, z)?
            }
            _ => T::from_real(rr),
        };
        if !rho_new.is_finite_value() || rho_new.re() <= T::Real::zero() {
            backend.axpy(alpha, &p, x)?;
            failure = Some("r^H M r (not positive: is M positive definite?)");
            break;
        }
        let beta = rho_new / rho;
        rho = rho_new;
        backend.cg_update_xp(alpha, beta, z.as_ref().unwrap_or(&r), &mut p, x)?;
    }

    session.finish(
        backend,
        a,
        b,
        x,
        &mut q,
        it,
        rnorm,
        converged,
        failure.map(|q| ("cg", q)),
    )
}

/// [`cg_once`] with the scalars on the backend (see [`cg`]): `precond`, when
/// given, has a diagonal ([`LinearOperator::diagonal`]), folded into the
/// residual step, or, on a backend that records nothing ([`crate::Replay::records`]:
/// the distributed one), is applied as an operator inside the queued
/// iteration, then r^H z reduced into its slot together with ||r||^2. Iteration k reads
/// its rho from slot `RHO[k % 2]` and writes the next into the other, so the
/// work of an iteration is the same for every iteration of a parity; odd
/// iterations write their iterate to a second vector (see [`Pipeline`]). 6
/// vectors of storage (7 preconditioned).
fn cg_on_backend<B, T>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport>
where
    B: CgKernels,
    T: Scalar,
{
    let method = if precond.is_some() { "pcg" } else { "cg" };
    let diagonal = precond.and_then(|m| m.diagonal());
    // A preconditioner without a diagonal, applied as an operator.
    let general = precond.filter(|_| diagonal.is_none());
    let mut session = Session::begin(method, backend, a, precond, b, x, opts)?;
    let n = b.len();
    let mut r = backend.zeros::<T>(n)?;
    let mut rnorm = Session::residual(backend, a, b, x, &mut r)?;
    session.initial(rnorm);
    let mut z = precond.map(|_| backend.zeros::<T>(n)).transpose()?;
    let mut p = backend.zeros::<T>(n)?;
    let mut q = backend.zeros::<T>(n)?;
    let mut x_alt = backend.zeros::<T>(n)?;
    let mut sc = backend.zeros::<T>(CG_LEN)?;
    let mut host = [T::zero(); CG_LEN];
    // Iteration 1 reads rho = r^H z from RHO[1].
    if let Some(z) = z.as_mut() {
        match (diagonal, general) {
            (Some(d), _) => backend.mul_elementwise(d, &r, z)?,
            (None, Some(m)) => m.apply(&r, z)?,
            (None, None) => {}
        }
    }
    let first = z.as_ref().unwrap_or(&r);
    backend.cg_dot_to_slot(&r, first, &mut sc, RHO[1])?;
    backend.copy(first, &mut p)?;

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    let mut previous = rnorm;
    // Declared after the vectors, so its recordings are dropped before them.
    let mut pipe = Pipeline::new(backend, CG_LEN)?;
    if general.is_none() {
        pipe = pipe.device_work();
    }
    while !converged {
        while pipe.wants(session.max_iter) {
            let k = pipe.next_number();
            let rho = RHO[k % 2];
            {
                let slot = pipe.next_slot(backend);
                let (x_in, x_out) = iterate_buffers(k, x, &mut x_alt);
                let mut step = || -> Result<()> {
                    let pq = FusedDot {
                        w: &p,
                        sc: &mut sc,
                        slot: PQ,
                    };
                    if !a.apply_dot(backend, &p, &mut q, pq)? {
                        backend.cg_dot_to_slot(&p, &q, &mut sc, PQ)?;
                    }
                    match (general, z.as_mut()) {
                        // z = M r, then the next rho = r^H z (with ||r||^2
                        // summed over ranks in the same collective).
                        (Some(m), Some(z)) => {
                            backend.cg_residual_before_precond(&mut sc, rho, &q, &mut r)?;
                            m.apply(&r, z)?;
                            backend.cg_rz_slots(&mut sc, rho, &r, z)?;
                        }
                        (_, z) => {
                            backend.cg_residual_slots(&mut sc, rho, &q, &mut r, diagonal.zip(z))?
                        }
                    }
                    backend.cg_xp_slots(&sc, rho, z.as_ref().unwrap_or(&r), &mut p, x_in, x_out)?;
                    backend.copy_to_slot(&sc, &slot)
                };
                // SAFETY: `step` enqueues the same steps on the same vectors
                // for every iteration of a parity (declared before `pipe`),
                // every per-iteration scalar in `sc`, and it neither
                // downloads nor waits on a backend that records (a general
                // preconditioner, which might, runs only where nothing is
                // recorded).
                unsafe { pipe.enqueue(backend, Record::PerParity, &mut step)? };
            }
            pipe.mark(backend)?;
        }
        let Some(k) = pipe.next(backend, &mut host)? else {
            break;
        };
        it = k;
        // A p^H A p that is not positive gave a zero step: the iterate of
        // iteration k is that of k - 1.
        let pq = host[PQ];
        if !pq.is_finite_value() || pq.re() <= T::Real::zero() {
            failure = Some("p^H A p (not positive: is A positive definite?)");
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
        if converged {
            break;
        }
        pipe.expect_last(expected_last(k, rnorm, previous, target));
        previous = rnorm;
        let rho_new = host[cg_next_slot(RHO[k % 2])];
        if !rho_new.is_finite_value() || rho_new.re() <= T::Real::zero() {
            failure = Some("r^H M r (not positive: is M positive definite?)");
            break;
        }
    }
    settle_iterate(backend, it, &x_alt, x)?;
    session.finish(
        backend,
        a,
        b,
        x,
        &mut q,
        it,
        rnorm,
        converged,
        failure.map(|q| ("cg", q)),
    )
}

/// Slack on the predicted residual within which [`expected_last`] expects
/// the next iteration to end the solve: a wrong "last" costs one iteration
/// that waits for the host, a missed one a whole iteration queued in vain.
const LAST_SLACK: f64 = 2.0;

/// The iteration expected to be the last, seen from iteration `k`'s residual
/// norm `rnorm` and the one before it, `previous`: `k + 1` where the last
/// step's reduction repeated would bring the norm within [`LAST_SLACK`] times
/// `target`, else none.
fn expected_last(k: usize, rnorm: f64, previous: f64, target: f64) -> Option<usize> {
    let rate = rnorm / previous;
    (rate < 1.0 && rnorm * rate <= LAST_SLACK * target).then_some(k + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Jacobi;
    use gpuq_core::{Backend, Complex64, Error};
    use gpuq_cpu::{CpuBackend, CpuVector};
    use gpuq_sparse::{generators, Csr, Layout, MatrixOperator};

    /// S A S for the 2-D Laplacian A of `m` x `m` nodes and S = diag(1 + i mod
    /// 7): symmetric positive definite with a diagonal that varies (Jacobi
    /// then changes the iteration).
    fn scaled_laplace<T: Scalar>(m: usize) -> Csr<T> {
        let a = generators::laplace2d::<T>(m);
        let (n, _, ptr, col, mut val) = a.into_parts();
        let s = |i: usize| T::from_f64(1.0 + (i % 7) as f64);
        for i in 0..n {
            for k in ptr[i]..ptr[i + 1] {
                val[k] = s(i) * val[k] * s(col[k] as usize);
            }
        }
        Csr::try_new(n, n, ptr, col, val).unwrap()
    }

    fn opts() -> KrylovOptions {
        KrylovOptions {
            rtol: 1e-10,
            ..KrylovOptions::default()
        }
    }

    /// Jacobi behind an operator that does not name its diagonal: CG then
    /// applies it as a general preconditioner.
    struct Opaque<'a, T: Scalar>(&'a Jacobi<CpuBackend, T>);

    impl<T: Scalar> LinearOperator<CpuBackend, T> for Opaque<'_, T> {
        fn shape(&self) -> (usize, usize) {
            self.0.shape()
        }

        fn apply(&self, x: &CpuVector<T>, y: &mut CpuVector<T>) -> Result<()> {
            self.0.apply(x, y)
        }

        fn name(&self) -> &str {
            "jacobi (as a general operator)"
        }
    }

    /// The preconditioner of [`both_ways`].
    #[derive(Clone, Copy)]
    enum Pc {
        None,
        Jacobi,
        /// Jacobi as a general operator ([`Opaque`]).
        General,
    }

    /// The scalars-on-the-backend iteration against the host-scalar one, on
    /// the CPU (the oracle): the same iterates up to rounding, so the same
    /// iteration count within one and both solutions near x.
    fn both_ways<T: Scalar>(a: &Csr<T>, pc: Pc) {
        let be = CpuBackend::new();
        let op = MatrixOperator::new(&be, a, Layout::Csr).unwrap();
        let m = Jacobi::new(&be, a).unwrap();
        let opaque = Opaque(&m);
        let precond: Option<&dyn LinearOperator<CpuBackend, T>> = match pc {
            Pc::None => None,
            Pc::Jacobi => Some(&m),
            Pc::General => Some(&opaque),
        };
        let want: Vec<T> = (0..a.nrows())
            .map(|i| T::from_f64(((i * 37) % 11) as f64 - 5.0))
            .collect();
        let b = be.upload(&a.mul_vec(&want).unwrap()).unwrap();
        let mut runs = Vec::new();
        for on_backend in [false, true] {
            let mut x = be.zeros::<T>(a.nrows()).unwrap();
            let report = if on_backend {
                cg_on_backend(&be, &op, precond, &b, &mut x, &opts(), &mut |_, _| {})
            } else {
                cg_once(&be, &op, precond, &b, &mut x, &opts(), &mut |_, _| {})
            }
            .unwrap();
            assert!(report.converged, "{report:?}");
            assert!(report.relative_residual <= 1e-9, "{report:?}");
            let got = be.download(&x).unwrap();
            let err = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (*g - *w).abs_sqr().to_f64_lossless())
                .fold(0.0f64, f64::max)
                .sqrt();
            assert!(err < 1e-6, "max error {err}");
            runs.push(report.iterations);
        }
        assert!(runs[0].abs_diff(runs[1]) <= 1, "{runs:?}");
    }

    #[test]
    fn the_last_iteration_is_expected_from_the_last_reduction() {
        // halving: 1e-6 -> 5e-7, within twice the target 4e-7
        assert_eq!(expected_last(7, 1e-6, 2e-6, 4e-7), Some(8));
        // halving, but 5e-7 is five times the target
        assert_eq!(expected_last(7, 1e-6, 2e-6, 1e-7), None);
        // no reduction: no expectation
        assert_eq!(expected_last(7, 1e-6, 1e-6, 6e-7), None);
    }

    #[test]
    fn scalars_on_the_backend_give_the_host_iteration() {
        both_ways::<f64>(&generators::laplace2d(24), Pc::None);
        both_ways::<f64>(&scaled_laplace(24), Pc::Jacobi);
        both_ways::<Complex64>(&scaled_laplace(16), Pc::Jacobi);
        both_ways::<f64>(&generators::laplace1d(400, 0.5), Pc::Jacobi);
        both_ways::<f64>(&scaled_laplace(24), Pc::General);
        both_ways::<Complex64>(&scaled_laplace(16), Pc::General);
    }

    #[test]
    fn scalars_on_the_backend_report_an_indefinite_matrix() {
        let a = generators::laplace2d::<f64>(10);
        let (n, _, ptr, col, val) = a.into_parts();
        let neg = Csr::try_new(n, n, ptr, col, val.iter().map(|v| -v).collect()).unwrap();
        let be = CpuBackend::new();
        let op = MatrixOperator::new(&be, &neg, Layout::Csr).unwrap();
        let b = be.upload(&vec![1.0; n]).unwrap();
        let mut x = be.zeros::<f64>(n).unwrap();
        let err = cg_on_backend(&be, &op, None, &b, &mut x, &opts(), &mut |_, _| {}).unwrap_err();
        assert!(
            matches!(err, Error::Breakdown { .. }) && err.to_string().contains("p^H A p"),
            "{err}"
        );
        // the zero step left the iterate at the start
        assert!(be.download(&x).unwrap().iter().all(|&v| v == 0.0));
    }
}
