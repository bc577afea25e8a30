//! Restarted GMRES(m), right-preconditioned, with re-orthogonalised Gram-Schmidt.

use crate::session::{Session, STAGNATION};
use crate::GmresKernels;
use crate::KrylovOptions;
use gpuq_core::num_traits::Float;
use gpuq_core::{DeviceVector, Error, LinearOperator, RealScalar, Result, Scalar, SolveReport};

/// A complex (or real) Givens rotation [c s; -conj(s) c] with real c, which maps
/// (a, b) to (r, 0).
#[derive(Clone, Copy)]
struct Givens<T: Scalar> {
    c: T::Real,
    s: T,
}

impl<T: Scalar> Givens<T> {
    /// The rotation zeroing `b` against `a`, and the resulting `r`.
    fn new(a: T, b: T) -> (Self, T) {
        let (na, nb) = (a.magnitude(), b.magnitude());
        let zero = T::Real::of_f64(0.0);
        if nb == zero {
            return (
                Givens {
                    c: T::Real::of_f64(1.0),
                    s: T::zero(),
                },
                a,
            );
        }
        if na == zero {
            return (
                Givens {
                    c: zero,
                    s: T::one(),
                },
                b,
            );
        }
        let nu = na.hypot(nb);
        let phase = a / T::from_real(na);
        let g = Givens {
            c: na / nu,
            s: phase * b.conj() / T::from_real(nu),
        };
        (g, phase * T::from_real(nu))
    }

    /// Applies the rotation to the pair (a, b).
    fn apply(&self, a: T, b: T) -> (T, T) {
        let c = T::from_real(self.c);
        (c * a + self.s * b, -self.s.conj() * a + c * b)
    }
}

/// Solves A x = b by GMRES(`restart`) with right preconditioning, starting from
/// the `x` given, for any nonsingular A, real or complex.
///
/// Each inner step applies the operator and the preconditioner once and
/// orthogonalises against the basis by classical Gram-Schmidt, repeated when the
/// first pass cancelled most of the vector (the DGKS criterion; "twice is
/// enough", which keeps the basis orthogonal to working precision): at step j, one
/// or two passes of j + 1 inner products against the whole basis, one combined
/// subtraction and the norms before and after ([`GmresKernels::gs_pass`]: on
/// the GPU four launches and one download per pass). The small
/// least-squares problem is solved on the host by Givens rotations. Storage:
/// `restart + 1` basis vectors and 3 more. An iteration, as counted in the report,
/// is one inner step.
///
/// Returns the report with `converged` false at the iteration cap. An exact
/// solution found inside the Krylov space (the new basis vector vanishes) is
/// convergence, not breakdown; [`gpuq_core::Error::Breakdown`] is returned when a
/// rotation meets a non-finite value. The report's `relative_residual` is
/// recomputed from b - A x.
pub fn gmres<B: GmresKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    restart: usize,
    opts: &KrylovOptions,
) -> Result<SolveReport> {
    gmres_monitored(backend, a, precond, b, x, restart, opts, &mut |_, _| {})
}

/// [`gmres`] with a monitor called after every inner step with
/// `(iteration, estimated relative residual)`.
#[allow(clippy::too_many_arguments)]
pub fn gmres_monitored<B: GmresKernels, T: Scalar>(
    backend: &B,
    a: &dyn LinearOperator<B, T>,
    precond: Option<&dyn LinearOperator<B, T>>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    restart: usize,
    opts: &KrylovOptions,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport> {
    if restart == 0 {
        return Err(Error::InvalidArgument(
            "GMRES restart length must be at least 1".into(),
        ));
    }
    let mut session = Session::begin("gmres", backend, a, precond, b, x, opts)?;
    session.report.method = format!("gmres({restart})");
    let n = b.len();
    let m = restart;
    let mut r = backend.zeros::<T>(n)?;
    let mut rnorm = Session::residual(backend, a, b, x, &mut r)?;
    session.initial(rnorm);
    let mut basis: Vec<B::Vector<T>> = (0..=m)
        .map(|_| backend.zeros::<T>(n))
        .collect::<Result<_>>()?;
    let mut w = backend.zeros::<T>(n)?;
    let mut z = precond.map(|_| backend.zeros::<T>(n)).transpose()?;

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    let mut stalled = false;
    // Column j of the Hessenberg matrix, rotated: h[j][0..=j+1].
    let mut h: Vec<Vec<T>> = Vec::with_capacity(m);
    let mut rotations: Vec<Givens<T>> = Vec::with_capacity(m);
    let mut g: Vec<T> = Vec::with_capacity(m + 1);
    while !converged && it < session.max_iter && failure.is_none() {
        // Start a cycle: v_0 = r / ||r||.
        backend.copy(&r, &mut basis[0])?;
        backend.scal(T::from_f64(1.0 / rnorm), &mut basis[0])?;
        h.clear();
        rotations.clear();
        g.clear();
        g.push(T::from_f64(rnorm));
        let mut k = 0; // basis vectors used in this cycle's update
        while k < m && it < session.max_iter {
            it += 1;
            // w = A M v_k
            let vk = &basis[k];
            match (precond, z.as_mut()) {
                (Some(pm), Some(z)) => {
                    pm.apply(vk, z)?;
                    a.apply(z, &mut w)?;
                }
                _ => a.apply(vk, &mut w)?,
            }
            // Classical Gram-Schmidt against v_0..v_k, repeated once when the
            // first pass cancelled most of w (the DGKS criterion: ||w|| fell below
            // ||A M v_k|| / sqrt 2), which keeps the basis orthogonal to working
            // precision. The whole basis goes to every pass, so a backend can keep
            // its addresses.
            let all: Vec<&B::Vector<T>> = basis.iter().collect();
            let mut col = vec![T::zero(); k + 2];
            let mut pass = vec![T::zero(); k + 1];
            let mut hnext = T::Real::of_f64(0.0);
            for round in 0..2 {
                let (before, after) = backend.gs_pass(&all, k + 1, &mut w, &mut pass)?;
                for (c, p) in col.iter_mut().zip(&pass) {
                    *c += *p;
                }
                hnext = after;
                if round == 1 || after >= before * T::Real::of_f64(std::f64::consts::FRAC_1_SQRT_2)
                {
                    break;
                }
            }
            col[k + 1] = T::from_real(hnext);
            // Rotate the new column by the previous rotations, then zero its tail.
            for (i, rot) in rotations.iter().enumerate() {
                let (u, l) = rot.apply(col[i], col[i + 1]);
                col[i] = u;
                col[i + 1] = l;
            }
            let (rot, diag) = Givens::new(col[k], col[k + 1]);
            if !diag.is_finite_value() {
                failure = Some("the Hessenberg matrix (non-finite entry)");
                break;
            }
            col[k] = diag;
            col[k + 1] = T::zero();
            let (gk, gk1) = rot.apply(g[k], T::zero());
            g[k] = gk;
            g.push(gk1);
            rotations.push(rot);
            h.push(col);
            k += 1;
            rnorm = gk1.magnitude().to_f64_lossless();
            stalled = session.iteration(it, rnorm, monitor);
            // hnext = 0: the Krylov space holds the solution ("lucky breakdown").
            if stalled || rnorm <= target || hnext.is_zero_value() || diag.is_zero_value() {
                break;
            }
            // The next basis vector (k already counts the step just done).
            let vnext = &mut basis[k];
            backend.copy(&w, vnext)?;
            backend.scal(T::from_real(T::Real::of_f64(1.0) / hnext), vnext)?;
        }
        if failure.is_some() || k == 0 {
            break;
        }
        // Solve the triangular system R y = g[0..k] and update x += M V y.
        let mut y = vec![T::zero(); k];
        for i in (0..k).rev() {
            let mut s = g[i];
            for (j, yj) in y.iter().enumerate().skip(i + 1) {
                s -= h[j][i] * *yj;
            }
            if h[i][i].is_zero_value() {
                failure = Some("the Hessenberg diagonal (singular least-squares problem)");
                break;
            }
            y[i] = s / h[i][i];
        }
        if failure.is_some() {
            break;
        }
        backend.fill(&mut w, T::zero())?;
        for (vi, &yi) in basis.iter().zip(&y) {
            backend.axpy(yi, vi, &mut w)?;
        }
        match (precond, z.as_mut()) {
            (Some(pm), Some(z)) => {
                pm.apply(&w, z)?;
                backend.axpy(T::one(), z, x)?;
            }
            _ => backend.axpy(T::one(), &w, x)?,
        }
        // The true residual starts the next cycle (and guards the estimate).
        rnorm = Session::residual(backend, a, b, x, &mut r)?;
        converged = rnorm <= target;
        if stalled && !converged {
            failure = Some(STAGNATION);
        }
    }
    session.finish(
        backend,
        a,
        b,
        x,
        &mut w,
        it,
        rnorm,
        converged,
        failure.map(|q| ("gmres", q)),
    )
}
