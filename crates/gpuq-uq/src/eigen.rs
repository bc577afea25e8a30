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
//! * [`lobpcg`]: Knyazev's locally optimal block preconditioned conjugate
//!   gradient method on the host. A block of b = m + g vectors (g guard vectors
//!   speed the last wanted ones) is improved from its preconditioned residuals
//!   W = T R (T = K^-1 by the sparse Cholesky factor of K: an excellent
//!   preconditioner for the low end of the spectrum) and the previous
//!   directions P; each step B-orthonormalises W and P against X and
//!   themselves (SVQB: an eigendecomposition of the Gram matrix, dropping
//!   directions below round-off), then a Rayleigh-Ritz step on [X W P] picks
//!   the new block (a dense symmetric eigenproblem of order at most 3b). Block
//!   products K X, M X run column by column in parallel; the dense algebra is
//!   `faer`'s. A mode is converged when |K x - lambda M x| <= tol lambda |M x|.
//! * [`dense_modes`]: the dense generalized eigensolver (Cholesky of M, the
//!   symmetric eigenproblem of L^-1 K L^-T): small models, and the tests'
//!   reference.
//!
//! Cost of LOBPCG per iteration: 3b SpMVs with K and M, one block solve with
//! the factor of K, O(n b^2) dense products and an O(b^3) eigenproblem.

use crate::cholesky::SparseCholesky;
use faer::{Mat, MatRef, Side};
use gpuq_core::{Error, Result};
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
}

/// How [`modes`] finds the modes of a large model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EigenMethod {
    /// Shift-invert Lanczos at 0 with the Cholesky factor of K (the fewest
    /// solves when K is factored: [`lanczos`]).
    #[default]
    Lanczos,
    /// LOBPCG preconditioned by the Cholesky factor of K ([`lobpcg`]).
    Lobpcg,
}

impl EigenMethod {
    /// Parses `lanczos` or `lobpcg`. O(1).
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "lanczos" => Ok(EigenMethod::Lanczos),
            "lobpcg" => Ok(EigenMethod::Lobpcg),
            other => Err(Error::InvalidArgument(format!(
                "unknown eigensolver {other:?} (available: lanczos, lobpcg)"
            ))),
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

/// The columns of `a` followed by those of `b`.
fn hcat(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    let k = a.ncols();
    let mut out = Mat::zeros(a.nrows(), k + b.ncols());
    out.as_mut().subcols_mut(0, k).copy_from(a);
    out.as_mut().subcols_mut(k, b.ncols()).copy_from(b);
    out
}

/// B-orthonormalises the columns of `w` (with `bw` = B w, and `aw` = A w when
/// known) by SVQB: the eigendecomposition V D V^T of w^T B w, keeping the
/// directions with d > eps max d, w <- w V D^-1/2 (and bw, aw alike). Returns
/// the transformed matrices, possibly with fewer columns; `None` when
/// nothing is left.
#[allow(clippy::type_complexity)]
fn svqb(
    w: Mat<f64>,
    bw: Mat<f64>,
    aw: Option<Mat<f64>>,
) -> Result<Option<(Mat<f64>, Mat<f64>, Option<Mat<f64>>)>> {
    if w.ncols() == 0 {
        return Ok(None);
    }
    let g = w.transpose() * &bw;
    let g = Mat::from_fn(g.nrows(), g.ncols(), |i, j| 0.5 * (g[(i, j)] + g[(j, i)]));
    let e = g
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Device(format!("LOBPCG: Gram eigenproblem: {e:?}")))?;
    let d = e.S().column_vector();
    let top = (0..d.nrows()).map(|i| d[i]).fold(0.0f64, f64::max);
    let keep: Vec<usize> = (0..d.nrows())
        .filter(|&i| d[i] > 1e-12 * top && d[i] > 0.0)
        .collect();
    if keep.is_empty() {
        return Ok(None);
    }
    let u = e.U();
    let t = Mat::from_fn(w.ncols(), keep.len(), |i, j| {
        u[(i, keep[j])] / d[keep[j]].sqrt()
    });
    Ok(Some((&w * &t, &bw * &t, aw.map(|a| &a * &t))))
}

/// x - X (X^T B x) for every column of `w` (X B-orthonormal, `bx` = B X).
fn b_orthogonalise(w: &Mat<f64>, x: MatRef<'_, f64>, bx: MatRef<'_, f64>) -> Mat<f64> {
    let c = bx.transpose() * w;
    w - x * &c
}

/// The m lowest modes of K phi = lambda M phi (see the module docs): the dense
/// solver below `opts.dense_below` DOFs, LOBPCG preconditioned by `precond`
/// (the factor of K) above. Errors when m is 0 or above n, when a Ritz
/// value is not positive (K or M not positive definite, naming the step), or
/// when LOBPCG does not converge in `opts.max_iterations` (naming the worst
/// residual).
pub fn modes(
    k: &Csr<f64>,
    m: &Csr<f64>,
    precond: &SparseCholesky,
    opts: &ModeOptions,
) -> Result<Modes> {
    let n = k.nrows();
    if opts.count == 0 || opts.count > n {
        return Err(Error::InvalidArgument(format!(
            "{} modes of a model of {n} DOFs: ask for 1 to {n}",
            opts.count
        )));
    }
    if n <= opts.dense_below {
        dense_modes(k, m, opts.count)
    } else {
        match opts.method {
            EigenMethod::Lanczos => lanczos(k, m, precond, opts),
            EigenMethod::Lobpcg => lobpcg(k, m, precond, opts),
        }
    }
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

/// The m lowest modes by the dense generalized eigensolver. O(n^3).
pub fn dense_modes(k: &Csr<f64>, m: &Csr<f64>, count: usize) -> Result<Modes> {
    let n = k.nrows();
    let dense = |a: &Csr<f64>| {
        let d = a.to_dense();
        Mat::from_fn(n, n, |i, j| d[i * n + j])
    };
    let (kd, md) = (dense(k), dense(m));
    let l = md.llt(Side::Lower).map_err(|e| Error::Precondition {
        method: "modes",
        reason: format!("the mass matrix M is not positive definite ({e:?})"),
    })?;
    let lf = l.L().to_owned();
    // C = L^-1 K L^-T by two triangular solves.
    let mut c = kd.clone();
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
    let sym = Mat::from_fn(n, n, |i, j| 0.5 * (ct[(i, j)] + ct[(j, i)]));
    let e = sym
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Device(format!("modes: dense eigenproblem: {e:?}")))?;
    let s = e.S().column_vector();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| s[a].total_cmp(&s[b]));
    let order = &order[..count];
    if let Some(&i) = order.iter().find(|&&i| s[i] <= 0.0) {
        return Err(Error::Precondition {
            method: "modes",
            reason: format!(
                "the stiffness matrix K is not positive definite (eigenvalue {:e})",
                s[i]
            ),
        });
    }
    // phi = L^-T y.
    let y = Mat::from_fn(n, count, |i, j| e.U()[(i, order[j])]);
    let mut phi = y;
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        lf.transpose(),
        phi.as_mut(),
        faer::Par::rayon(0),
    );
    let values: Vec<f64> = order.iter().map(|&i| s[i]).collect();
    let residuals = residuals(k, m, phi.as_ref(), &values);
    Ok(Modes {
        values,
        vectors: phi,
        iterations: 0,
        residuals,
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

/// The m lowest modes by LOBPCG (see the module docs).
pub fn lobpcg(
    k: &Csr<f64>,
    m: &Csr<f64>,
    precond: &SparseCholesky,
    opts: &ModeOptions,
) -> Result<Modes> {
    let n = k.nrows();
    let want = opts.count;
    let b = (want + want.div_ceil(4).clamp(2, 16)).min(n / 3);
    if b < want {
        return Err(Error::InvalidArgument(format!(
            "LOBPCG needs at least 3 (modes + 2) DOFs: {n} DOFs for {want} modes (use the dense solver)"
        )));
    }
    // A random start, B-orthonormalised.
    let key = key_from_seed(opts.seed);
    let mut start = Mat::zeros(n, b);
    for j in 0..b {
        let mut z = NormalStream::<f64>::new(key, j as u64);
        for i in 0..n {
            start[(i, j)] = z.next_normal();
        }
    }
    let bs = block_spmv(m, start.as_ref());
    let Some((mut x, mut bx, _)) = svqb(start, bs, None)? else {
        return Err(Error::Device(
            "LOBPCG: the starting block has no directions".into(),
        ));
    };
    let mut ax = block_spmv(k, x.as_ref());
    // Rayleigh-Ritz on the starting block.
    let (mut lambda, y) = ritz(&(x.transpose() * &ax), x.ncols(), 0)?;
    x = &x * &y;
    bx = &bx * &y;
    ax = &ax * &y;
    // The previous directions P with A P and B P (tracked, not recomputed).
    let mut p: Option<(Mat<f64>, Mat<f64>, Mat<f64>)> = None;
    let mut worst = f64::INFINITY;
    for it in 1..=opts.max_iterations {
        // Residuals and convergence of the wanted modes.
        let norms = relative_residuals(&ax, &bx, &lambda);
        worst = norms[..want].iter().cloned().fold(0.0, f64::max);
        if worst <= opts.tol {
            return Ok(Modes {
                values: lambda[..want].to_vec(),
                residuals: norms[..want].to_vec(),
                vectors: x.as_ref().subcols(0, want).to_owned(),
                iterations: it - 1,
            });
        }
        // Preconditioned residuals of the unconverged columns.
        let active: Vec<usize> = (0..x.ncols()).filter(|&j| norms[j] > opts.tol).collect();
        let mut w = Mat::from_fn(n, active.len(), |i, j| {
            let c = active[j];
            ax[(i, c)] - lambda[c] * bx[(i, c)]
        });
        precond.solve_block(w.as_mut());
        let w = b_orthogonalise(&w, x.as_ref(), bx.as_ref());
        let bw = block_spmv(m, w.as_ref());
        let Some((w, bw, _)) = svqb(w, bw, None)? else {
            return Err(Error::Device(format!(
                "LOBPCG lost its search directions at step {it}"
            )));
        };
        let aw = block_spmv(k, w.as_ref());
        let mut s = hcat(x.as_ref(), w.as_ref());
        let mut bsm = hcat(bx.as_ref(), bw.as_ref());
        let mut asm = hcat(ax.as_ref(), aw.as_ref());
        // P orthogonalised against X and W: q = P - S c, c = (B S)^T P, and
        // A q, B q by the same combination.
        if let Some((pp, bp, ap)) = &p {
            let c = bsm.transpose() * pp;
            let q = pp - &s * &c;
            let bq = bp - &bsm * &c;
            let aq = ap - &asm * &c;
            if let Some((q, bq, Some(aq))) = svqb(q, bq, Some(aq))? {
                s = hcat(s.as_ref(), q.as_ref());
                bsm = hcat(bsm.as_ref(), bq.as_ref());
                asm = hcat(asm.as_ref(), aq.as_ref());
            }
        }
        // Rayleigh-Ritz on [X W P] (B-orthonormal up to round-off).
        let g = s.transpose() * &asm;
        let (vals, y) = ritz(&g, x.ncols(), it)?;
        let nx = x.ncols();
        let rest = s.ncols() - nx;
        let yp = y.as_ref().subrows(nx, rest);
        p = Some((
            s.as_ref().subcols(nx, rest) * yp,
            bsm.as_ref().subcols(nx, rest) * yp,
            asm.as_ref().subcols(nx, rest) * yp,
        ));
        x = &s * &y;
        bx = &bsm * &y;
        ax = &asm * &y;
        lambda = vals;
    }
    Err(Error::Precondition {
        method: "LOBPCG",
        reason: format!(
            "{want} modes did not converge in {} iterations (worst relative residual {worst:.2e}, tolerance {:.1e})",
            opts.max_iterations, opts.tol
        ),
    })
}

/// The `count` smallest eigenpairs of the symmetric Gram matrix `g` (Ritz
/// values increasing, vectors as columns); errors when one is not positive
/// (K or M not positive definite), naming LOBPCG step `it`.
fn ritz(g: &Mat<f64>, count: usize, it: usize) -> Result<(Vec<f64>, Mat<f64>)> {
    let h = Mat::from_fn(g.nrows(), g.ncols(), |i, j| 0.5 * (g[(i, j)] + g[(j, i)]));
    let e = h
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Device(format!("LOBPCG: Rayleigh-Ritz: {e:?}")))?;
    let s = e.S().column_vector();
    let mut order: Vec<usize> = (0..s.nrows()).collect();
    order.sort_by(|&a, &b| s[a].total_cmp(&s[b]));
    let order = &order[..count.min(order.len())];
    if let Some(&i) = order.iter().find(|&&i| s[i] <= 0.0) {
        return Err(Error::Precondition {
            method: "LOBPCG",
            reason: format!(
                "a Ritz value {:e} is not positive at step {it}: K (or M) is not positive definite, or the basis lost its M-orthogonality (a badly conditioned model, such as a finely meshed beam: use the Lanczos eigensolver)",
                s[i]
            ),
        });
    }
    let u = e.U();
    Ok((
        order.iter().map(|&i| s[i]).collect(),
        Mat::from_fn(g.nrows(), order.len(), |i, j| u[(i, order[j])]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let chol = SparseCholesky::new(k, "K").unwrap();
        let opts = ModeOptions {
            count: 20,
            dense_below: 0,
            ..ModeOptions::default()
        };
        let r = modes(k, m, &chol, &opts).unwrap();
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
        let chol = SparseCholesky::new(&k, "K").unwrap();
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
            let r = modes(&k, &m, &chol, &opts).unwrap();
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
        let a = lobpcg(&k, &m, &chol, &opts).unwrap();
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
        let chol = SparseCholesky::new(&k, "K").unwrap();
        let opts = ModeOptions::default();
        assert!(modes(
            &k,
            &Csr::identity(50),
            &chol,
            &ModeOptions { count: 0, ..opts }
        )
        .is_err());
        assert!(modes(
            &k,
            &Csr::identity(50),
            &chol,
            &ModeOptions { count: 51, ..opts }
        )
        .is_err());
        // All 50 from the dense solver.
        let all = modes(
            &k,
            &Csr::identity(50),
            &chol,
            &ModeOptions { count: 50, ..opts },
        )
        .unwrap();
        assert_eq!(all.values.len(), 50);
        let mut neg = vec![1.0; 50];
        neg[7] = -1.0;
        let e = dense_modes(&k, &diag(&neg), 3).unwrap_err();
        assert!(
            e.to_string()
                .contains("mass matrix M is not positive definite"),
            "{e}"
        );
        let e = lobpcg(
            &k,
            &Csr::identity(50),
            &chol,
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
