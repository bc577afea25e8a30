//! The lowest modes of a structural model: K phi = lambda M phi, K and M sparse
//! symmetric positive definite, phi M-orthonormal.
//!
//! * [`lanczos`] (the default): shift-invert Lanczos at 0, one solve with the
//!   sparse Cholesky factor of K per step, full reorthogonalisation in the M
//!   inner product; the lowest modes converge first and need about 2-3 m
//!   solves. A mode is converged when its Ritz estimate (the residual of
//!   K^-1 M in the M norm, ARPACK's test) meets `tol` and its true relative
//!   residual |K x - lambda M x| / (lambda |M x|) meets `tol` or has stopped
//!   decreasing: on a model whose stiff and soft directions differ by many
//!   orders (a fine beam: |sum_j |k_ij x_j|| / |K x| about 10^11 at 1000
//!   DOFs) the computed residual cannot fall below the solves' rounding, and
//!   the modes are then as accurate as double precision makes them (the
//!   cantilever's first eigenvalue to 1e-6 at 1000 DOFs, where its relative
//!   residual stays at 5e-4).
//! * [`crate::lobpcg`]: LOBPCG on the backend ([`modes_on`]'s backend: the
//!   CPU or the GPU), preconditioned by one AMG cycle of K per column; no
//!   factorisation, so it serves models whose Cholesky factor would not fit
//!   (3D meshes) and runs where the model is.
//! * [`dense_modes`]: the dense generalized eigensolver (Cholesky of M, the
//!   symmetric eigenproblem of L^-1 K L^-T): small models, and the tests'
//!   reference.
//!
use crate::cholesky::SparseCholesky;
use crate::lobpcg::{lobpcg_on, EigenBackend};
use faer::{Mat, MatRef, Side};
use gpuq_core::{Error, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::gauss::NormalStream;
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// Modes of a model.
#[derive(Clone, Debug)]
pub struct Modes {
    /// Eigenvalues lambda = omega^2, increasing.
    pub values: Vec<f64>,
    /// Eigenvectors, one column each, M-orthonormal (phi^T M phi = I).
    pub vectors: Mat<f64>,
    /// Iterations taken (0 for the dense solver).
    pub iterations: usize,
    /// The method that found them: `dense`, `lanczos` or `lobpcg` (with
    /// [`EigenMethod::Auto`], the one that ran, a fallback included).
    pub solver: &'static str,
    /// Relative residuals |K x - lambda M x| / (lambda |M x|) at the end.
    pub residuals: Vec<f64>,
}

/// Options of [`modes`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeOptions {
    /// Number of modes m.
    pub count: usize,
    /// Relative residual at which a mode has converged.
    pub tol: f64,
    /// Most LOBPCG iterations.
    pub max_iterations: usize,
    /// Models with at most this many DOFs take the dense solver.
    pub dense_below: usize,
    /// Seed of the random starting block.
    pub seed: u64,
    /// The method above `dense_below` DOFs.
    pub method: EigenMethod,
    /// Unknowns per node of K for LOBPCG's AMG preconditioner (default 1; 2
    /// or 3 for elasticity numbered node by node).
    pub block: usize,
}

/// How [`modes`] finds the modes of a large model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EigenMethod {
    /// The backend's choice ([`crate::lobpcg::EigenKernels::auto_eigen_method`]):
    /// LOBPCG on a GPU, Lanczos on the CPU, the faster of the two on each as
    /// measured (`docs/benchmarks.md`); should LOBPCG break down or not
    /// converge (a badly conditioned model), Lanczos.
    #[default]
    Auto,
    /// Shift-invert Lanczos at 0 with the Cholesky factor of K (the fewest
    /// solves when K is factored: [`lanczos`]), on the host.
    Lanczos,
    /// LOBPCG on the backend, preconditioned by AMG cycles of K
    /// ([`crate::lobpcg::lobpcg_on`]): no factorisation.
    Lobpcg,
}

impl EigenMethod {
    /// Parses `auto`, `lanczos` or `lobpcg`. O(1).
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(EigenMethod::Auto),
            "lanczos" => Ok(EigenMethod::Lanczos),
            "lobpcg" => Ok(EigenMethod::Lobpcg),
            other => Err(Error::InvalidArgument(format!(
                "unknown eigensolver {other:?} (available: auto, lanczos, lobpcg)"
            ))),
        }
    }

    /// The method's name as [`EigenMethod::parse`] reads it. O(1).
    pub fn name(self) -> &'static str {
        match self {
            EigenMethod::Auto => "auto",
            EigenMethod::Lanczos => "lanczos",
            EigenMethod::Lobpcg => "lobpcg",
        }
    }
}

impl Default for ModeOptions {
    fn default() -> Self {
        ModeOptions {
            count: 10,
            tol: 1e-8,
            max_iterations: 500,
            dense_below: 400,
            seed: 1,
            method: EigenMethod::default(),
            block: 1,
        }
    }
}

impl ModeOptions {
    /// Every mode of a model of `dofs` DOFs, by the dense solver (the
    /// defaults otherwise): a small model's exact modal basis, as the beam's
    /// convolution (seed 001's example 3) uses it. O(dofs^3) to solve.
    pub fn every(dofs: usize) -> Self {
        ModeOptions {
            count: dofs,
            dense_below: dofs,
            ..ModeOptions::default()
        }
    }
}

/// Y = A X, column by column in parallel.
fn block_spmv(a: &Csr<f64>, x: MatRef<'_, f64>) -> Mat<f64> {
    let n = a.nrows();
    let mut cols = vec![0.0; n * x.ncols()];
    cols.par_chunks_mut(n).enumerate().for_each(|(j, y)| {
        let xj = x.col(j);
        for (i, yi) in y.iter_mut().enumerate() {
            let (c, v) = a.row(i);
            let mut s = 0.0;
            for (&k, &w) in c.iter().zip(v) {
                s += w * xj[k as usize];
            }
            *yi = s;
        }
    });
    Mat::from_fn(n, x.ncols(), |i, j| cols[j * n + i])
}

/// The m lowest modes of K phi = lambda M phi (see the module docs) with
/// `opts.method`: the dense solver below `opts.dense_below` DOFs, above it
/// shift-invert Lanczos with the Cholesky factor of K (host), or LOBPCG with
/// AMG on `backend` (`Auto`: the backend's choice; should LOBPCG break down
/// or not converge, Lanczos). Errors when m is 0 or above n, when K (or M) is not
/// positive definite (naming the pivot or the step), or when the method does
/// not converge in `opts.max_iterations` (naming the worst residual).
pub fn modes_on<B: EigenBackend>(
    backend: &B,
    k: &Csr<f64>,
    m: &Csr<f64>,
    opts: &ModeOptions,
) -> Result<Modes> {
    let n = k.nrows();
    if opts.count == 0 || opts.count > n {
        return Err(Error::InvalidArgument(format!(
            "{} modes of a model of {n} DOFs: ask for 1 to {n}",
            opts.count
        )));
    }
    if m.nrows() != n || m.ncols() != n || k.ncols() != n {
        return Err(Error::InvalidArgument(format!(
            "modes: K is {} x {} and M {} x {}: both must be square of one order",
            k.nrows(),
            k.ncols(),
            m.nrows(),
            m.ncols()
        )));
    }
    if n <= opts.dense_below {
        return dense_modes(k, m, opts.count);
    }
    let lanczos_on_host = || {
        let factor = SparseCholesky::new(k, "the stiffness matrix K")?;
        lanczos(k, m, &factor, opts)
    };
    match opts.method {
        EigenMethod::Lanczos => lanczos_on_host(),
        EigenMethod::Lobpcg => lobpcg_on(backend, k, m, opts),
        EigenMethod::Auto => match backend.auto_eigen_method() {
            // A model LOBPCG cannot resolve (a badly conditioned one, such as
            // a finely meshed beam, whose residuals stall above tol) falls
            // back to Lanczos, which stops at the rounding floor.
            EigenMethod::Lobpcg => match lobpcg_on(backend, k, m, opts) {
                Err(Error::Precondition { .. }) => lanczos_on_host(),
                done => done,
            },
            _ => lanczos_on_host(),
        },
    }
}

/// [`modes_on`] on the CPU backend.
pub fn modes(k: &Csr<f64>, m: &Csr<f64>, opts: &ModeOptions) -> Result<Modes> {
    modes_on(&CpuBackend::new(), k, m, opts)
}

/// The m lowest modes by shift-invert Lanczos at 0: Lanczos on K^-1 M in the
/// M inner product (self-adjoint there), one solve with the Cholesky factor
/// of K per step, full reorthogonalisation (twice) against every Lanczos
/// vector; every 10 steps from m + 10 on, the Ritz values theta of the
/// tridiagonal matrix give lambda = 1 / theta, and the run stops when the m
/// largest theta have estimated residuals |beta y_last| <= tol theta and
/// their true relative residuals |K x - lambda M x| / (lambda |M x|) meet tol
/// or have stopped decreasing (none more than 10% below the previous check's:
/// the rounding floor of an ill-conditioned model, see the module docs).
/// At most `opts.max_iterations` steps (and n).
/// Cost: a solve and an M SpMV per step, O(n j) reorthogonalisation at step
/// j, O(j^3) per Ritz check.
pub fn lanczos(
    k: &Csr<f64>,
    m: &Csr<f64>,
    factor: &SparseCholesky,
    opts: &ModeOptions,
) -> Result<Modes> {
    let n = k.nrows();
    let want = opts.count;
    let cap = opts.max_iterations.min(n);
    if want + 1 > cap {
        return Err(Error::InvalidArgument(format!(
            "Lanczos for {want} modes needs more than {cap} steps"
        )));
    }
    let dot = |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(x, y)| x * y).sum() };
    let mut z = NormalStream::<f64>::new(key_from_seed(opts.seed), 0);
    let mut q: Vec<f64> = (0..n).map(|_| z.next_normal()).collect();
    let mq0 = m.mul_vec(&q)?;
    let norm = dot(&q, &mq0).sqrt();
    q.iter_mut().for_each(|v| *v /= norm);
    let mut qs: Vec<Vec<f64>> = Vec::new();
    let mut mqs: Vec<Vec<f64>> = Vec::new();
    let (mut alpha, mut beta) = (Vec::new(), Vec::<f64>::new());
    let mut worst = f64::INFINITY;
    let mut previous = None;
    for j in 0..cap {
        let mq = m.mul_vec(&q)?;
        let mut w = factor.solve(&mq);
        let a = dot(&mq, &w);
        qs.push(q);
        mqs.push(mq);
        alpha.push(a);
        // Full reorthogonalisation in the M inner product, twice: this
        // removes alpha q_j and beta q_(j-1) as well.
        for _ in 0..2 {
            let c: Vec<f64> = mqs.par_iter().map(|mv| dot(mv, &w)).collect();
            for (qv, ci) in qs.iter().zip(&c) {
                for (wi, qi) in w.iter_mut().zip(qv) {
                    *wi -= ci * qi;
                }
            }
        }
        let mw = m.mul_vec(&w)?;
        let b = dot(&w, &mw).max(0.0).sqrt();
        let steps = j + 1;
        let check = (steps >= want + 10 && steps % 10 == 0) || steps == cap || b <= 1e-14 * a.abs();
        if check {
            let (theta, y) = tridiagonal_eigen(&alpha, &beta)?;
            let top: Vec<usize> = (0..theta.len()).rev().take(want).collect();
            if top.len() == want {
                worst = top
                    .iter()
                    .map(|&i| (b * y[(steps - 1, i)]).abs() / theta[i].abs())
                    .fold(0.0, f64::max);
                if worst <= opts.tol || steps == cap || b <= 1e-14 * a.abs() {
                    if let Some(&i) = top.iter().find(|&&i| theta[i] <= 0.0) {
                        return Err(Error::Precondition {
                            method: "Lanczos",
                            reason: format!(
                                "a Ritz value {:e} of K^-1 M is not positive: K or M is not positive definite",
                                theta[i]
                            ),
                        });
                    }
                    // Ritz vectors x_i = Q y_i, lambda_i = 1 / theta_i, increasing.
                    let mut vectors = Mat::zeros(n, want);
                    for (c, &i) in top.iter().enumerate() {
                        let mut col = vec![0.0; n];
                        for (r, qv) in qs.iter().enumerate() {
                            let yr = y[(r, i)];
                            for (x, qi) in col.iter_mut().zip(qv) {
                                *x += yr * qi;
                            }
                        }
                        for (r, v) in col.into_iter().enumerate() {
                            vectors[(r, c)] = v;
                        }
                    }
                    let values: Vec<f64> = top.iter().map(|&i| 1.0 / theta[i]).collect();
                    let residuals = residuals(k, m, vectors.as_ref(), &values);
                    let true_worst = residuals.iter().cloned().fold(0.0, f64::max);
                    let stalled = previous.as_ref().is_some_and(|p: &Vec<f64>| {
                        p.iter().zip(&residuals).all(|(a, b)| *b > 0.9 * a)
                    });
                    if true_worst <= opts.tol || (worst <= opts.tol && stalled) {
                        return Ok(Modes {
                            values,
                            vectors,
                            iterations: steps,
                            residuals,
                            solver: "lanczos",
                        });
                    }
                    worst = true_worst;
                    previous = Some(residuals);
                }
            }
        }
        if b <= 1e-14 * a.abs() {
            break;
        }
        beta.push(b);
        q = w.into_iter().map(|v| v / b).collect();
    }
    Err(Error::Precondition {
        method: "Lanczos",
        reason: format!(
            "{want} modes did not converge in {} steps (worst relative residual {worst:.2e}, tolerance {:.1e})",
            alpha.len(),
            opts.tol
        ),
    })
}

/// Eigenvalues (increasing) and eigenvectors of the symmetric tridiagonal
/// matrix of diagonal `alpha` and off-diagonal `beta` (one shorter). O(j^3).
fn tridiagonal_eigen(alpha: &[f64], beta: &[f64]) -> Result<(Vec<f64>, Mat<f64>)> {
    let j = alpha.len();
    let t = Mat::from_fn(j, j, |r, c| {
        if r == c {
            alpha[r]
        } else if r + 1 == c {
            beta[r]
        } else if c + 1 == r {
            beta[c]
        } else {
            0.0
        }
    });
    let e = t
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Device(format!("Lanczos: tridiagonal eigenproblem: {e:?}")))?;
    let s = e.S().column_vector();
    let mut order: Vec<usize> = (0..j).collect();
    order.sort_by(|&a, &b| s[a].total_cmp(&s[b]));
    let u = e.U();
    Ok((
        order.iter().map(|&i| s[i]).collect(),
        Mat::from_fn(j, j, |r, c| u[(r, order[c])]),
    ))
}

/// The `count` lowest eigenpairs of the dense symmetric pencil (a, b) (each
/// taken as its symmetric part): with b = L L^T, the symmetric eigenproblem
/// of L^-1 a L^-T, the vectors y = L^-T u (b-orthonormal), the values
/// increasing. `None` when b is not positive definite (its Cholesky
/// factorisation fails). O(k^3) for order k.
pub(crate) fn dense_pencil(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    count: usize,
) -> Result<Option<(Vec<f64>, Mat<f64>)>> {
    let k = a.nrows();
    let sym = |m: MatRef<'_, f64>| Mat::from_fn(k, k, |i, j| 0.5 * (m[(i, j)] + m[(j, i)]));
    let Ok(l) = sym(b).llt(Side::Lower) else {
        return Ok(None);
    };
    let lf = l.L().to_owned();
    // C = L^-1 a L^-T by two triangular solves.
    let mut c = sym(a);
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        lf.as_ref(),
        c.as_mut(),
        faer::Par::rayon(0),
    );
    let mut ct = c.transpose().to_owned();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        lf.as_ref(),
        ct.as_mut(),
        faer::Par::rayon(0),
    );
    let e = sym(ct.as_ref())
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Device(format!("dense eigenproblem: {e:?}")))?;
    let s = e.S().column_vector();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| s[a].total_cmp(&s[b]));
    let order = &order[..count.min(k)];
    let mut y = Mat::from_fn(k, order.len(), |i, j| e.U()[(i, order[j])]);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        lf.transpose(),
        y.as_mut(),
        faer::Par::rayon(0),
    );
    Ok(Some((order.iter().map(|&i| s[i]).collect(), y)))
}

/// The m lowest modes by the dense generalized eigensolver. O(n^3).
pub fn dense_modes(k: &Csr<f64>, m: &Csr<f64>, count: usize) -> Result<Modes> {
    let n = k.nrows();
    let dense = |a: &Csr<f64>| {
        let d = a.to_dense();
        Mat::from_fn(n, n, |i, j| d[i * n + j])
    };
    let Some((values, phi)) = dense_pencil(dense(k).as_ref(), dense(m).as_ref(), count)? else {
        return Err(Error::Precondition {
            method: "modes",
            reason:
                "the mass matrix M is not positive definite (its Cholesky factorisation failed)"
                    .into(),
        });
    };
    if let Some(l) = values.iter().find(|&&l| l <= 0.0) {
        return Err(Error::Precondition {
            method: "modes",
            reason: format!("the stiffness matrix K is not positive definite (eigenvalue {l:e})"),
        });
    }
    let residuals = residuals(k, m, phi.as_ref(), &values);
    Ok(Modes {
        values,
        vectors: phi,
        iterations: 0,
        residuals,
        solver: "dense",
    })
}

/// |K x_j - lambda_j M x_j| / (lambda_j |M x_j|) for every column.
fn residuals(k: &Csr<f64>, m: &Csr<f64>, x: MatRef<'_, f64>, values: &[f64]) -> Vec<f64> {
    relative_residuals(&block_spmv(k, x), &block_spmv(m, x), values)
}

/// |ax_j - lambda_j bx_j| / (lambda_j |bx_j|) for every column.
fn relative_residuals(ax: &Mat<f64>, bx: &Mat<f64>, values: &[f64]) -> Vec<f64> {
    (0..ax.ncols())
        .map(|j| {
            let (mut r, mut b) = (0.0, 0.0);
            for i in 0..ax.nrows() {
                let d = ax[(i, j)] - values[j] * bx[(i, j)];
                r += d * d;
                b += bx[(i, j)] * bx[(i, j)];
            }
            r.sqrt() / (values[j].abs() * b.sqrt()).max(f64::MIN_POSITIVE)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lobpcg::lobpcg_on;
    use crate::test_matrices::diag;
    use gpuq_sparse::generators::{laplace1d, laplace2d};

    #[test]
    fn a_fine_beams_modes_converge_at_the_rounding_floor() {
        // The unit cantilever at 1000 DOFs: |K| / lambda_1 about 10^9, so no
        // computed relative residual reaches 1e-8; Lanczos stops when its
        // Ritz estimates meet tol and the true residuals stall. The lowest
        // eigenvalues are the continuum's (beta_k L)^4 to discretisation.
        let beam = crate::Beam::unit(1000).unwrap();
        let model = beam.model().unwrap();
        let (k, m) = (&model.k, model.m.as_ref().unwrap());
        let opts = ModeOptions {
            count: 20,
            dense_below: 0,
            ..ModeOptions::default()
        };
        let r = modes(k, m, &opts).unwrap();
        for (got, bl) in r.values.iter().zip([1.875104068711961, 4.694091132974175]) {
            let want = f64::powi(bl, 4);
            assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
        }
        assert!(r.iterations < 200, "{} steps", r.iterations);
        assert!(r.values.windows(2).all(|w| w[0] < w[1]));
        // M-orthonormal vectors.
        let mx = block_spmv(m, r.vectors.as_ref());
        let g = r.vectors.transpose() * &mx;
        for i in 0..20 {
            for j in 0..20 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((g[(i, j)] - want).abs() < 1e-8, "({i}, {j}): {}", g[(i, j)]);
            }
        }
    }

    #[test]
    fn the_string_has_its_closed_form_modes() {
        // K = tridiag(-1, 2, -1), M = I: lambda_k = 4 sin^2(k pi / (2 (n + 1))).
        let n = 200;
        let k = laplace1d::<f64>(n, 0.0);
        let m = Csr::identity(n);
        for (dense_below, method) in [
            (1000, EigenMethod::Lanczos),
            (0, EigenMethod::Lanczos),
            (0, EigenMethod::Lobpcg),
        ] {
            let opts = ModeOptions {
                count: 6,
                tol: 1e-9,
                dense_below,
                method,
                ..ModeOptions::default()
            };
            let r = modes(&k, &m, &opts).unwrap();
            for (j, &l) in r.values.iter().enumerate() {
                let want = 4.0
                    * ((j + 1) as f64 * std::f64::consts::PI / (2.0 * (n + 1) as f64))
                        .sin()
                        .powi(2);
                assert!(
                    (l - want).abs() < 1e-9 * want,
                    "{dense_below}: mode {j}: {l} vs {want}"
                );
            }
            assert!(r.residuals.iter().all(|&x| x < 1e-8));
        }
    }

    #[test]
    fn lobpcg_matches_the_dense_solver_on_a_generalized_pencil() {
        let k = laplace2d::<f64>(24);
        let n = k.nrows();
        let masses: Vec<f64> = (0..n)
            .map(|i| 1.0 + 0.5 * (i as f64 * 0.37).sin())
            .collect();
        let m = diag(&masses);
        let chol = SparseCholesky::new(&k, "K").unwrap();
        let opts = ModeOptions {
            count: 8,
            tol: 1e-10,
            dense_below: 0,
            ..ModeOptions::default()
        };
        let a = lobpcg_on(&CpuBackend::new(), &k, &m, &opts).unwrap();
        let d = dense_modes(&k, &m, 8).unwrap();
        let l = lanczos(&k, &m, &chol, &opts).unwrap();
        assert!(a.iterations > 0 && l.iterations > 0);
        for ((x, y), z) in a.values.iter().zip(&d.values).zip(&l.values) {
            assert!((x - y).abs() < 1e-9 * y, "{x} vs {y}");
            assert!((z - y).abs() < 1e-9 * y, "{z} vs {y}");
        }
        assert!(l.residuals.iter().all(|&r| r < 1e-8), "{:?}", l.residuals);
        // M-orthonormal vectors.
        let mphi = block_spmv(&m, a.vectors.as_ref());
        let g = a.vectors.transpose() * &mphi;
        for i in 0..8 {
            for j in 0..8 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((g[(i, j)] - want).abs() < 1e-9, "({i}, {j}): {}", g[(i, j)]);
            }
        }
    }

    #[test]
    fn bad_pencils_are_refused() {
        let k = laplace1d::<f64>(50, 0.0);
        let opts = ModeOptions::default();
        assert!(modes(&k, &Csr::identity(50), &ModeOptions { count: 0, ..opts }).is_err());
        assert!(modes(&k, &Csr::identity(50), &ModeOptions { count: 51, ..opts }).is_err());
        // All 50 from the dense solver.
        let all = modes(&k, &Csr::identity(50), &ModeOptions { count: 50, ..opts }).unwrap();
        assert_eq!(all.values.len(), 50);
        let mut neg = vec![1.0; 50];
        neg[7] = -1.0;
        let e = dense_modes(&k, &diag(&neg), 3).unwrap_err();
        assert!(
            e.to_string()
                .contains("mass matrix M is not positive definite"),
            "{e}"
        );
        let e = lobpcg_on(
            &CpuBackend::new(),
            &k,
            &Csr::identity(50),
            &ModeOptions {
                count: 3,
                max_iterations: 2,
                tol: 1e-14,
                ..opts
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("did not converge"), "{e}");
    }
}
