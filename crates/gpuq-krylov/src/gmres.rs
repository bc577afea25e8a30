//! Restarted GMRES(m), right-preconditioned, with re-orthogonalised Gram-Schmidt.

use crate::gmres_kernels::{gs_extra, GmresKernels};
use crate::replacement::with_residual_replacement;
use crate::replay::snapshot;
use crate::session::Session;
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
/// The Arnoldi basis is built by delayed classical Gram-Schmidt with
/// re-orthogonalisation (DCGS2: Bielich, Langou, Thomas, Swirydowicz, Yamazaki
/// and Boman, Parallel Computing 2022), which keeps the basis orthogonal to
/// working precision like classical Gram-Schmidt applied twice, with two
/// sweeps over the basis per step instead of four. Step j takes u_j, the next
/// vector projected once, and z = A M u_j, and makes one sweep for every inner
/// product it needs ([`GmresKernels::gs_dots`]): s = Q^H u_j (the
/// re-orthogonalisation of u_j, delayed to this step), Q^H z and u_j^H
/// [u_j, z]. Then q_j = (u_j - Q s) / rho_j with rho_j = ||u_j - Q s|| by
/// Pythagoras completes column j - 1 of the Hessenberg matrix (its first
/// projection plus s, and rho_j below), and one sweep
/// ([`GmresKernels::gs_update`]) writes q_j and u_(j+1) = (z - Q Q^H z - q_j
/// q_j^H z) / rho_j, the once-projected A M q_j (z - A Q s lies in the span of
/// [Q, q_j], so projecting z projects A M q_j). Column j's first projection is
/// (Q^H z - H s) / rho_j from the Arnoldi relation A M Q = Q H. The small
/// least-squares problem is solved on the host by Givens rotations.
///
/// The residual estimate therefore trails the operator by one step: a cycle
/// applies the operator once more than it has columns, and its last step (at
/// the restart length or the iteration cap) makes the sweep of inner products
/// alone. No coefficient goes up inside a cycle (the device computes rho and
/// q_j^H z itself); each step's inner products come down once, and on the GPU
/// the next step is already queued while the host reads them. The solution's
/// update, x += M Q y, is one sweep ([`GmresKernels::gs_combine`]) with one
/// upload of y per cycle. Storage: `restart` basis vectors and 4 more (5 with
/// a preconditioner). An iteration, as counted in the report, is one column of
/// the Hessenberg matrix.
///
/// Returns the report with `converged` false at the iteration cap. An exact
/// solution found inside the Krylov space (the new basis vector vanishes) is
/// convergence, not breakdown; [`gpuq_core::Error::Breakdown`] is returned when a
/// rotation meets a non-finite value. The report's `relative_residual` is
/// recomputed from b - A x. The norms by Pythagoras are taken in the scalar's
/// precision from squares (in f32 they leave the range when a vector's norm
/// leaves about [1e-19, 1e19]).
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
    with_residual_replacement(backend, x, opts, monitor, &mut |x, opts, monitor| {
        gmres_once(backend, a, precond, b, x, restart, opts, monitor)
    })
}

/// One run of [`gmres_monitored`] from the `x` given; its `converged` is the recurrence's.
#[allow(clippy::too_many_arguments)]
fn gmres_once<B: GmresKernels, T: Scalar>(
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
    let mut basis: Vec<B::Vector<T>> = (0..m)
        .map(|_| backend.zeros::<T>(n))
        .collect::<Result<_>>()?;
    // u: the vector a step orthogonalises; z = A M u; w: the solution's update
    // (and scratch); mz = M u or M w.
    let (mut u, mut z, mut w) = (
        backend.zeros::<T>(n)?,
        backend.zeros::<T>(n)?,
        backend.zeros::<T>(n)?,
    );
    let mut mz = precond.map(|_| backend.zeros::<T>(n)).transpose()?;
    let e = gs_extra(m);
    let mut gs = backend.zeros::<T>(e + 2)?;
    let mut ring = backend.ring::<T>(e + 2)?;
    let mut snap = vec![T::zero(); e + 2];

    let target = session.target;
    let mut converged = rnorm <= target;
    let mut it = 0;
    let mut failure = None;
    let mut stalled = false;
    while !converged && it < session.max_iter && failure.is_none() {
        backend.copy(&r, &mut u)?;
        // The step that only finalises the last column: at the restart length
        // or the iteration cap.
        let last = m.min(session.max_iter - it);
        // Finalised columns of the Hessenberg matrix as computed (for the
        // Arnoldi relation) and rotated (for the least-squares problem), the
        // rotations, the rotated right-hand side, and the first projection of
        // the column in progress.
        let mut hcols: Vec<Vec<T>> = Vec::with_capacity(last);
        let mut rotations: Vec<Givens<T>> = Vec::with_capacity(last);
        let mut rcols: Vec<Vec<T>> = Vec::with_capacity(last);
        let mut g: Vec<T> = Vec::with_capacity(last + 1);
        let mut first_projection: Vec<T> = Vec::new();
        let (mut launched, mut taken) = (0, 0);
        let mut k = 0; // finalised columns of this cycle
        loop {
            while launched <= last && launched <= taken + backend.look_ahead() {
                let j = launched;
                if j < last {
                    match (precond, mz.as_mut()) {
                        (Some(pm), Some(mu)) => {
                            pm.apply(&u, mu)?;
                            a.apply(mu, &mut z)?;
                        }
                        _ => a.apply(&u, &mut z)?,
                    }
                    backend.gs_dots(&basis, j, &u, Some(&z), &mut gs)?;
                    snapshot(backend, &gs, &mut ring, j)?;
                    backend.gs_update(&mut basis, j, &gs, &mut u, &z)?;
                } else {
                    backend.gs_dots(&basis, j, &u, None, &mut gs)?;
                    snapshot(backend, &gs, &mut ring, j)?;
                }
                launched += 1;
            }
            let j = taken;
            backend.read_snapshot(&ring, j, &mut snap)?;
            taken += 1;
            let s = &snap[..j];
            let rho = snap[e + 1].re();
            let zero = T::Real::of_f64(0.0);
            if j == 0 {
                // rho_0 = ||r||.
                g.push(T::from_real(rho));
            } else {
                // Column j - 1: its first projection, plus s, and rho_j below.
                let mut col = std::mem::take(&mut first_projection);
                for (c, &si) in col.iter_mut().zip(s) {
                    *c += si;
                }
                col.push(T::from_real(rho));
                hcols.push(col.clone());
                // Rotate the new column by the previous rotations, then zero
                // its tail.
                for (i, rot) in rotations.iter().enumerate() {
                    let (hi, lo) = rot.apply(col[i], col[i + 1]);
                    col[i] = hi;
                    col[i + 1] = lo;
                }
                let (rot, diag) = Givens::new(col[j - 1], col[j]);
                if !diag.is_finite_value() {
                    failure = Some("the Hessenberg matrix (non-finite entry)");
                    break;
                }
                col[j - 1] = diag;
                col[j] = T::zero();
                let (gj, gj1) = rot.apply(g[j - 1], T::zero());
                g[j - 1] = gj;
                g.push(gj1);
                rotations.push(rot);
                rcols.push(col);
                k = j;
                it += 1;
                rnorm = gj1.magnitude().to_f64_lossless();
                stalled = session.iteration(it, rnorm, monitor);
                // rho_j = 0: the Krylov space holds the solution ("lucky
                // breakdown").
                if stalled || rnorm <= target || rho == zero || diag.is_zero_value() {
                    break;
                }
            }
            if j == last || rho == zero {
                break;
            }
            // Column j's first projection: (Q^H z - H s) / rho_j, with Q^H z =
            // [t, q_j^H z] and H the finalised columns before it.
            let kv = j + 1;
            let mut h: Vec<T> = snap[kv..kv + j].to_vec();
            h.push(snap[e]);
            for (l, col) in hcols.iter().enumerate() {
                for (i, &hil) in col.iter().enumerate() {
                    h[i] -= hil * s[l];
                }
            }
            let inv = T::from_real(T::Real::of_f64(1.0) / rho);
            first_projection = h.into_iter().map(|v| v * inv).collect();
        }
        if failure.is_some() || k == 0 {
            break;
        }
        // Solve the triangular system R y = g[0..k] and update x += M Q y.
        let mut y = vec![T::zero(); k];
        for i in (0..k).rev() {
            let mut sum = g[i];
            for (j, yj) in y.iter().enumerate().skip(i + 1) {
                sum -= rcols[j][i] * *yj;
            }
            if rcols[i][i].is_zero_value() {
                failure = Some("the Hessenberg diagonal (singular least-squares problem)");
                break;
            }
            y[i] = sum / rcols[i][i];
        }
        if failure.is_some() {
            break;
        }
        backend.gs_combine(&basis, &y, &mut w)?;
        match (precond, mz.as_mut()) {
            (Some(pm), Some(mw)) => {
                pm.apply(&w, mw)?;
                backend.axpy(T::one(), mw, x)?;
            }
            _ => backend.axpy(T::one(), &w, x)?,
        }
        // The true residual starts the next cycle (and guards the estimate).
        rnorm = Session::residual(backend, a, b, x, &mut r)?;
        converged = rnorm <= target;
        if stalled && !converged {
            failure = Some(session.stop_reason());
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
