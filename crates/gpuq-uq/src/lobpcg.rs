//! LOBPCG on a backend: Knyazev's locally optimal block preconditioned
//! conjugate gradient method for the lowest modes of K phi = lambda M phi,
//! written once over the backend's vectors, preconditioned by one AMG cycle
//! of K per column (gpuq-amg's hierarchy, set up on the backend).
//!
//! A block X of b = m + g vectors (g guard vectors speed the last wanted
//! ones) is improved from its preconditioned residuals W = T (K X - M X
//! Lambda) and the previous directions P. Each step B-orthogonalises W
//! against X, then B-orthonormalises W and P against X, W and themselves by
//! SVQB (the eigendecomposition of the diagonally scaled Gram matrix, dropping
//! directions below round-off), and a Rayleigh-Ritz step on S = [X W P] (a
//! dense symmetric eigenproblem of order at most 3b, on the host) picks the
//! new X and P. K X, M X, K P, M P are carried through the combinations, not
//! recomputed: a step applies K and M to W only. Converged columns stay in X
//! (soft locking) but get no new direction. A mode is converged when |K x -
//! lambda M x| <= tol lambda |M x|.
//!
//! The block products (Gram matrices X^T Y, combinations Z = beta Z + X C)
//! are the solver-owned kernels [`EigenKernels`]: the CPU backend sums over
//! fixed row chunks in parallel, CUDA in tiled kernels
//! (`gpuq_cuda::CudaBackend::block_gram`, `block_combine`); other backends
//! get default bodies from BLAS-1.
//!
//! Cost per step: a AMG cycles and 2 a SpMVs (a active columns, a <= b),
//! Gram matrices and combinations of O(n b^2) flops, and host eigenproblems
//! of order at most 3b.

use crate::eigen::{dense_pencil, EigenMethod, ModeOptions, Modes};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par, Side};
use gpuq_amg::{
    default_cycle_precision, f64_cycle, AmgKernels, AmgOptions, Hierarchy, SetupKernels,
};
use gpuq_core::{Backend, DeviceVector, Error, LinearOperator, Result, ScalarKind};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::gauss::NormalStream;
use gpuq_sparse::{Csr, Layout, MatrixOperator};
use rayon::prelude::*;

/// Rows per chunk of the CPU backend's Gram sums (fixed, so the sums do not
/// depend on the thread count).
const CPU_ROWS: usize = 4096;

/// The dense block products of a block eigensolver, on a backend's vectors
/// (a block is a slice of vectors of one length n, its columns).
pub trait EigenKernels: Backend {
    /// The eigensolver [`EigenMethod::Auto`] stands for on this backend.
    /// Default: shift-invert Lanczos with the host's Cholesky factor (on the
    /// host's cores it is the faster by far: 0.84 s against LOBPCG's 28 s for
    /// 50 modes of 20,200 DOFs on two cores). O(1).
    fn auto_eigen_method(&self) -> EigenMethod {
        EigenMethod::Lanczos
    }

    /// G = X^T Y (p x q, p = `x.len()`, q = `y.len()`). Default: one `dotu`
    /// per entry (p q passes over two vectors). O(n p q).
    fn block_gram(&self, x: &[Self::Vector<f64>], y: &[Self::Vector<f64>]) -> Result<Mat<f64>> {
        let mut g = Mat::zeros(x.len(), y.len());
        for (j, yj) in y.iter().enumerate() {
            for (i, xi) in x.iter().enumerate() {
                g[(i, j)] = self.dotu(xi, yj)?;
            }
        }
        Ok(g)
    }

    /// z_j = beta z_j + sum_i c_ij x_i for every column of `z` (C is
    /// `x.len()` x `z.len()`; beta = 0 overwrites z). Default: a scaling
    /// and one axpy per coefficient. O(n p q).
    fn block_combine(
        &self,
        x: &[Self::Vector<f64>],
        c: MatRef<'_, f64>,
        beta: f64,
        z: &mut [Self::Vector<f64>],
    ) -> Result<()> {
        check_combine(x.len(), c, z.len())?;
        for (j, zj) in z.iter_mut().enumerate() {
            if beta == 0.0 {
                self.fill(zj, 0.0)?;
            } else {
                self.scal(beta, zj)?;
            }
            for (i, xi) in x.iter().enumerate() {
                self.axpy(c[(i, j)], xi, zj)?;
            }
        }
        Ok(())
    }
}

/// Errors unless C is p x q.
fn check_combine(p: usize, c: MatRef<'_, f64>, q: usize) -> Result<()> {
    if c.nrows() != p || c.ncols() != q {
        return Err(Error::InvalidArgument(format!(
            "block_combine: C is {} x {}, the blocks need {p} x {q}",
            c.nrows(),
            c.ncols()
        )));
    }
    Ok(())
}

/// The CPU backend: chunks of 4096 rows in parallel, each gathered into a
/// contiguous matrix and multiplied by faer's kernel on its thread; the
/// Gram matrix's chunk sums added in chunk order (the bits independent of the
/// thread count).
impl EigenKernels for CpuBackend {
    fn block_gram(&self, x: &[Self::Vector<f64>], y: &[Self::Vector<f64>]) -> Result<Mat<f64>> {
        let (p, q) = (x.len(), y.len());
        let n = x.first().or(y.first()).map_or(0, |v| v.len());
        for v in x.iter().chain(y) {
            gpuq_core::check_same_len("block_gram", n, v.len())?;
        }
        let parts: Vec<Mat<f64>> = self.run("block_gram", || {
            (0..n.div_ceil(CPU_ROWS))
                .into_par_iter()
                .map(|c| {
                    let (lo, hi) = (c * CPU_ROWS, ((c + 1) * CPU_ROWS).min(n));
                    let (xm, ym) = (gather(x, lo, hi), gather(y, lo, hi));
                    let mut g = Mat::zeros(p, q);
                    matmul(
                        g.as_mut(),
                        Accum::Replace,
                        xm.transpose(),
                        ym.as_ref(),
                        1.0,
                        Par::Seq,
                    );
                    g
                })
                .collect()
        });
        let mut g = Mat::zeros(p, q);
        for part in parts {
            g += part;
        }
        Ok(g)
    }

    fn block_combine(
        &self,
        x: &[Self::Vector<f64>],
        c: MatRef<'_, f64>,
        beta: f64,
        z: &mut [Self::Vector<f64>],
    ) -> Result<()> {
        check_combine(x.len(), c, z.len())?;
        let n = z.first().map_or(0, |v| v.len());
        for v in x.iter() {
            gpuq_core::check_same_len("block_combine", n, v.len())?;
        }
        for v in z.iter() {
            gpuq_core::check_same_len("block_combine", n, v.len())?;
        }
        // The chunks of rows, each with its piece of every column of z.
        let mut columns: Vec<_> = z
            .iter_mut()
            .map(|v| v.as_mut_slice().chunks_mut(CPU_ROWS))
            .collect();
        let pieces: Vec<Vec<&mut [f64]>> = (0..n.div_ceil(CPU_ROWS))
            .map(|_| columns.iter_mut().filter_map(Iterator::next).collect())
            .collect();
        self.run("block_combine", || {
            pieces.into_par_iter().enumerate().for_each(|(k, mut out)| {
                let lo = k * CPU_ROWS;
                let hi = (lo + CPU_ROWS).min(n);
                let xm = gather(x, lo, hi);
                let mut zm = Mat::zeros(hi - lo, c.ncols());
                matmul(zm.as_mut(), Accum::Replace, xm.as_ref(), c, 1.0, Par::Seq);
                for (j, piece) in out.iter_mut().enumerate() {
                    let col = zm.col(j);
                    for (r, o) in piece.iter_mut().enumerate() {
                        *o = if beta == 0.0 {
                            col[r]
                        } else {
                            beta * *o + col[r]
                        };
                    }
                }
            })
        });
        Ok(())
    }
}

/// Rows `lo..hi` of the columns `x` as one contiguous matrix (for the dense
/// products' kernels). O((hi - lo) x.len()).
fn gather(x: &[<CpuBackend as Backend>::Vector<f64>], lo: usize, hi: usize) -> Mat<f64> {
    let mut m = Mat::zeros(hi - lo, x.len());
    for (j, v) in x.iter().enumerate() {
        for (dst, &src) in m.col_mut(j).iter_mut().zip(&v.as_slice()[lo..hi]) {
            *dst = src;
        }
    }
    m
}

/// The CUDA backend: tiled kernels (`block_gram_f64`, `block_combine_f64`).
#[cfg(feature = "cuda")]
impl EigenKernels for gpuq_cuda::CudaBackend {
    /// LOBPCG: 50 modes of a 10^6-DOF pencil in 11.6 s on an H200 against
    /// 86.4 s by Lanczos on its host's 16 cores.
    fn auto_eigen_method(&self) -> EigenMethod {
        EigenMethod::Lobpcg
    }

    fn block_gram(&self, x: &[Self::Vector<f64>], y: &[Self::Vector<f64>]) -> Result<Mat<f64>> {
        let (p, q) = (x.len(), y.len());
        let g = gpuq_cuda::CudaBackend::block_gram(self, x, y)?;
        Ok(Mat::from_fn(p, q, |i, j| g[j * p + i]))
    }

    fn block_combine(
        &self,
        x: &[Self::Vector<f64>],
        c: MatRef<'_, f64>,
        beta: f64,
        z: &mut [Self::Vector<f64>],
    ) -> Result<()> {
        check_combine(x.len(), c, z.len())?;
        let flat: Vec<f64> = (0..c.ncols())
            .flat_map(|j| (0..c.nrows()).map(move |i| c[(i, j)]))
            .collect();
        gpuq_cuda::CudaBackend::block_combine(self, x, &flat, beta, z)
    }
}

/// A backend LOBPCG runs on: sparse matrices, the AMG setup and cycle, and
/// the block products. Implemented for every backend that has those.
pub trait EigenBackend: AmgKernels + SetupKernels + EigenKernels {}

impl<B: AmgKernels + SetupKernels + EigenKernels> EigenBackend for B {}

/// A block of vectors on a backend, its columns.
type Block<B> = Vec<<B as Backend>::Vector<f64>>;

/// The m lowest modes of K phi = lambda M phi by LOBPCG on `backend`,
/// preconditioned by one AMG cycle of K (smoothed aggregation with
/// `opts.block` unknowns per node; the cycle in the precision
/// [`gpuq_amg::default_cycle_precision`] gives, f32 for scalar unknowns) per
/// column: uploads K and M, sets up the
/// hierarchy on the backend, then [`lobpcg_with`]. The modes come back to
/// the host. Errors as [`lobpcg_with`], and when the AMG setup does (K not
/// square, a NaN).
pub fn lobpcg_on<B: EigenBackend>(
    backend: &B,
    k: &Csr<f64>,
    m: &Csr<f64>,
    opts: &ModeOptions,
) -> Result<Modes> {
    let kop = MatrixOperator::new(backend, k, Layout::Csr)?;
    let mop = MatrixOperator::new(backend, m, Layout::Csr)?;
    let amg_options = AmgOptions {
        block: opts.block,
        ..AmgOptions::default()
    };
    let h = Hierarchy::build_on(backend, k, &amg_options)?;
    let precision = default_cycle_precision(ScalarKind::F64, opts.block);
    let t = f64_cycle(backend, &h, Layout::Csr, precision)?;
    lobpcg_with(backend, &kop, &mop, &*t, opts)
}

/// Applies `op` to every column of `x`.
fn apply<B: Backend>(
    backend: &B,
    op: &dyn LinearOperator<B, f64>,
    x: &[B::Vector<f64>],
) -> Result<Block<B>> {
    x.iter()
        .map(|v| {
            let mut y = backend.zeros::<f64>(v.len())?;
            op.apply(v, &mut y)?;
            Ok(y)
        })
        .collect()
}

/// X C as new vectors (n values each).
fn times<B: EigenKernels>(
    backend: &B,
    x: &[B::Vector<f64>],
    c: MatRef<'_, f64>,
    n: usize,
) -> Result<Block<B>> {
    let mut z = (0..c.ncols())
        .map(|_| backend.zeros::<f64>(n))
        .collect::<Result<Block<B>>>()?;
    backend.block_combine(x, c, 0.0, &mut z)?;
    Ok(z)
}

/// Copies of the columns of `x`.
fn copies<B: Backend>(backend: &B, x: &[B::Vector<f64>]) -> Result<Block<B>> {
    x.iter()
        .map(|v| {
            let mut c = backend.zeros::<f64>(v.len())?;
            backend.copy(v, &mut c)?;
            Ok(c)
        })
        .collect()
}

/// The symmetric part of a square matrix.
fn symmetric(g: &Mat<f64>) -> Mat<f64> {
    Mat::from_fn(g.nrows(), g.ncols(), |i, j| 0.5 * (g[(i, j)] + g[(j, i)]))
}

/// The transform T that B-orthonormalises a block with Gram matrix `g` =
/// W^T B W by SVQB: with D the diagonal of g, V E V^T the eigendecomposition
/// of D^-1/2 g D^-1/2, T = D^-1/2 V E^-1/2 over the eigenvalues above 1e-12
/// of the largest. `None` when nothing is left (a zero block).
fn svqb_transform(g: &Mat<f64>) -> Result<Option<Mat<f64>>> {
    let k = g.nrows();
    let d: Vec<f64> = (0..k)
        .map(|i| {
            let v = g[(i, i)];
            if v > 0.0 && v.is_finite() {
                1.0 / v.sqrt()
            } else {
                0.0
            }
        })
        .collect();
    let h = symmetric(&Mat::from_fn(k, k, |i, j| d[i] * g[(i, j)] * d[j]));
    let e = h
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Device(format!("LOBPCG: Gram eigenproblem: {e:?}")))?;
    let s = e.S().column_vector();
    let top = (0..k).map(|i| s[i]).fold(0.0f64, f64::max);
    let keep: Vec<usize> = (0..k)
        .filter(|&i| s[i] > 1e-12 * top && s[i] > 0.0)
        .collect();
    if keep.is_empty() {
        return Ok(None);
    }
    let u = e.U();
    Ok(Some(Mat::from_fn(k, keep.len(), |i, j| {
        d[i] * u[(i, keep[j])] / s[keep[j]].sqrt()
    })))
}

/// The `count` lowest eigenpairs of the Rayleigh-Ritz pencil (S^T A S, S^T
/// B S) (Ritz values increasing, vectors B-orthonormal as columns); `None`
/// when S^T B S is not positive definite (S lost its independence). Errors
/// when a Ritz value is not positive (K or M not positive definite), naming
/// LOBPCG step `it`.
fn ritz(
    ga: &Mat<f64>,
    gb: &Mat<f64>,
    count: usize,
    it: usize,
) -> Result<Option<(Vec<f64>, Mat<f64>)>> {
    let Some((values, y)) = dense_pencil(ga.as_ref(), gb.as_ref(), count)? else {
        return Ok(None);
    };
    if let Some(l) = values.iter().find(|&&l| l <= 0.0 || !l.is_finite()) {
        return Err(Error::Precondition {
            method: "LOBPCG",
            reason: format!(
                "a Ritz value {l:e} is not positive at step {it}: K (or M) is not positive definite, or the basis lost its M-orthogonality on a badly conditioned model (a finely meshed beam: use the Lanczos eigensolver)"
            ),
        });
    }
    Ok(Some((values, y)))
}

/// Rayleigh-Ritz on the B-orthonormalised starting block: `None` when its
/// Gram matrix in B is singular.
fn start_ritz<B: EigenKernels>(backend: &B, t: &Triple<B>) -> Result<(Vec<f64>, Mat<f64>)> {
    let ga = backend.block_gram(&t.x, &t.ax)?;
    let gb = backend.block_gram(&t.x, &t.bx)?;
    ritz(&ga, &gb, t.x.len(), 0)?
        .ok_or_else(|| Error::Device("LOBPCG: the starting block has no directions".into()))
}

/// Makes the columns of `w` B-orthogonal to the B-orthonormal block `x`
/// (`bx` = B x): w -= x (bx^T w), twice (one pass leaves what round-off
/// brought back when w is nearly in the span of x). The same combination
/// applies to `more` (B w, A w when carried).
fn orthogonalise<B: EigenKernels>(
    backend: &B,
    x: &Triple<B>,
    w: &mut Block<B>,
    more: &mut [&mut Block<B>],
) -> Result<()> {
    for _ in 0..2 {
        let c = -backend.block_gram(&x.bx, w)?;
        backend.block_combine(&x.x, c.as_ref(), 1.0, w)?;
        for (m, src) in more.iter_mut().zip([&x.bx, &x.ax]) {
            backend.block_combine(src, c.as_ref(), 1.0, m)?;
        }
    }
    Ok(())
}

/// The block, M times it and (when tracked) K times it.
struct Triple<B: Backend> {
    x: Block<B>,
    bx: Block<B>,
    ax: Block<B>,
}

impl<B: EigenKernels> Triple<B> {
    /// Each of the three blocks times C (new vectors).
    fn times(&self, backend: &B, c: MatRef<'_, f64>, n: usize) -> Result<Self> {
        Ok(Triple {
            x: times(backend, &self.x, c, n)?,
            bx: times(backend, &self.bx, c, n)?,
            ax: times(backend, &self.ax, c, n)?,
        })
    }

    /// Appends the columns of `other`.
    fn extend(&mut self, other: Triple<B>) {
        self.x.extend(other.x);
        self.bx.extend(other.bx);
        self.ax.extend(other.ax);
    }
}

/// The relative residuals |a_j - lambda_j b_j| / (lambda_j |b_j|) of the
/// columns, with the residual vectors a_j - lambda_j b_j.
fn residuals<B: Backend>(
    backend: &B,
    t: &Triple<B>,
    lambda: &[f64],
) -> Result<(Vec<f64>, Block<B>)> {
    let mut norms = Vec::with_capacity(lambda.len());
    let mut r = Vec::with_capacity(lambda.len());
    for ((a, b), &l) in t.ax.iter().zip(&t.bx).zip(lambda) {
        let mut v = backend.zeros::<f64>(a.len())?;
        backend.copy(a, &mut v)?;
        backend.axpy(-l, b, &mut v)?;
        let scale = (l.abs() * backend.nrm2(b)?).max(f64::MIN_POSITIVE);
        norms.push(backend.nrm2(&v)? / scale);
        r.push(v);
    }
    Ok((norms, r))
}

/// The m lowest modes of the pencil (A, B) by LOBPCG on `backend` (see the
/// module docs), A and B symmetric positive definite operators of order n,
/// preconditioned by `t` (an approximation of A^-1). The starting block is
/// normal draws (stream j of `opts.seed` for column j, as on every backend).
/// Errors when 3 (m + 2) exceeds n, when a Ritz value is not positive, when
/// the directions degenerate, or when `opts.max_iterations` steps do not
/// converge (naming the worst residual).
pub fn lobpcg_with<B: EigenKernels>(
    backend: &B,
    a: &dyn LinearOperator<B, f64>,
    bm: &dyn LinearOperator<B, f64>,
    t: &dyn LinearOperator<B, f64>,
    opts: &ModeOptions,
) -> Result<Modes> {
    let n = a.shape().0;
    let want = opts.count;
    let size = (want + want.div_ceil(4).clamp(2, 16)).min(n / 3);
    if want == 0 || size < want {
        return Err(Error::InvalidArgument(format!(
            "LOBPCG needs at least 3 (modes + 2) DOFs: {n} DOFs for {want} modes (use the dense solver)"
        )));
    }
    let key = key_from_seed(opts.seed);
    let columns: Vec<Vec<f64>> = (0..size)
        .into_par_iter()
        .map(|j| {
            let mut z = NormalStream::<f64>::new(key, j as u64);
            (0..n).map(|_| z.next_normal()).collect()
        })
        .collect();
    let start = columns
        .iter()
        .map(|c| backend.upload(c))
        .collect::<Result<Block<B>>>()?;
    drop(columns);
    let bstart = apply(backend, bm, &start)?;
    let Some(tr) = svqb_transform(&backend.block_gram(&start, &bstart)?)? else {
        return Err(Error::Device(
            "LOBPCG: the starting block has no directions".into(),
        ));
    };
    let x = times(backend, &start, tr.as_ref(), n)?;
    let bx = times(backend, &bstart, tr.as_ref(), n)?;
    let ax = apply(backend, a, &x)?;
    drop((start, bstart));
    let first = Triple { x, bx, ax };
    let (mut lambda, y) = start_ritz(backend, &first)?;
    let mut cur = first.times(backend, y.as_ref(), n)?;
    let mut prev: Option<Triple<B>> = None;
    let mut worst = f64::INFINITY;
    for it in 1..=opts.max_iterations {
        let (norms, r) = residuals(backend, &cur, &lambda)?;
        worst = norms[..want].iter().cloned().fold(0.0, f64::max);
        if worst <= opts.tol {
            let vectors = cur.x[..want]
                .iter()
                .map(|v| backend.download(v))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Modes {
                values: lambda[..want].to_vec(),
                residuals: norms[..want].to_vec(),
                vectors: Mat::from_fn(n, want, |i, j| vectors[j][i]),
                iterations: it - 1,
                solver: "lobpcg",
            });
        }
        // Preconditioned residuals of the unconverged columns, made
        // B-orthogonal to X.
        let active: Vec<_> = r
            .into_iter()
            .zip(&norms)
            .filter(|(_, &nr)| nr > opts.tol)
            .map(|(v, _)| v)
            .collect();
        let mut w = apply(backend, t, &active)?;
        drop(active);
        orthogonalise(backend, &cur, &mut w, &mut [])?;
        let bw = apply(backend, bm, &w)?;
        let Some(tr) = svqb_transform(&backend.block_gram(&w, &bw)?)? else {
            return Err(Error::Device(format!(
                "LOBPCG lost its search directions at step {it}"
            )));
        };
        let w = times(backend, &w, tr.as_ref(), n)?;
        let bw = times(backend, &bw, tr.as_ref(), n)?;
        let aw = apply(backend, a, &w)?;
        let nx = cur.x.len();
        let mut s = cur;
        s.extend(Triple {
            x: w,
            bx: bw,
            ax: aw,
        });
        // P made B-orthogonal to [X W] (with B P and A P by the same
        // combinations), then B-orthonormalised.
        let with_p = s.x.len();
        if let Some(mut p) = prev.take() {
            orthogonalise(backend, &s, &mut p.x, &mut [&mut p.bx, &mut p.ax])?;
            if let Some(tr) = svqb_transform(&backend.block_gram(&p.x, &p.bx)?)? {
                s.extend(p.times(backend, tr.as_ref(), n)?);
            }
        }
        // Rayleigh-Ritz on S = [X W P] with its Gram matrices in A and B;
        // should S^T B S have lost definiteness, on [X W] without P.
        let ritz_of = |s: &Triple<B>| -> Result<Option<(Vec<f64>, Mat<f64>)>> {
            let ga = backend.block_gram(&s.x, &s.ax)?;
            let gb = backend.block_gram(&s.x, &s.bx)?;
            ritz(&ga, &gb, nx, it)
        };
        let (vals, y) = match ritz_of(&s)? {
            Some(r) => r,
            None if s.x.len() > with_p => {
                s.x.truncate(with_p);
                s.bx.truncate(with_p);
                s.ax.truncate(with_p);
                ritz_of(&s)?.ok_or_else(|| {
                    Error::Device(format!("LOBPCG: the basis [X W] degenerated at step {it}"))
                })?
            }
            None => {
                return Err(Error::Device(format!(
                    "LOBPCG: the basis [X W] degenerated at step {it}"
                )))
            }
        };
        let rest = s.x.len() - nx;
        let yp = y.as_ref().subrows(nx, rest);
        let tail = Triple {
            x: s.x.split_off(nx),
            bx: s.bx.split_off(nx),
            ax: s.ax.split_off(nx),
        };
        // P = [W P] Y_rest, then X = X Y_head + P (and B X, A X alike).
        let p = tail.times(backend, yp, n)?;
        let head = y.as_ref().subrows(0, nx);
        let mut next = Triple {
            x: copies(backend, &p.x)?,
            bx: copies(backend, &p.bx)?,
            ax: copies(backend, &p.ax)?,
        };
        backend.block_combine(&s.x, head, 1.0, &mut next.x)?;
        backend.block_combine(&s.bx, head, 1.0, &mut next.bx)?;
        backend.block_combine(&s.ax, head, 1.0, &mut next.ax)?;
        prev = Some(p);
        cur = next;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eigen::dense_modes;
    use gpuq_sparse::generators::{laplace2d, laplace3d};

    #[derive(Clone)]
    struct Sequential;
    crate::test_backend::forward_backend!(Sequential);
    impl EigenKernels for Sequential {}

    /// Columns of n values, column j's entry i a fixed function of (i, j).
    fn block(n: usize, cols: usize, shift: f64) -> Vec<Vec<f64>> {
        (0..cols)
            .map(|j| {
                (0..n)
                    .map(|i| ((i * 7 + j * 13) as f64 * 0.37 + shift).sin())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn block_products_are_the_default_bodies_and_the_dense_ones() {
        // Across a chunk boundary of the CPU sums, p, q not multiples of
        // anything.
        let n = 2 * CPU_ROWS + 37;
        let (x, y) = (block(n, 5, 0.0), block(n, 3, 1.0));
        let cpu = CpuBackend::with_threads(3).unwrap();
        let up = |b: &Vec<Vec<f64>>| -> Block<CpuBackend> {
            b.iter().map(|c| cpu.upload(c).unwrap()).collect()
        };
        let (xc, yc) = (up(&x), up(&y));
        let g = cpu.block_gram(&xc, &yc).unwrap();
        let s = Sequential.block_gram(&xc, &yc).unwrap();
        assert_eq!((g.nrows(), g.ncols()), (5, 3));
        for i in 0..5 {
            for j in 0..3 {
                let want: f64 = x[i].iter().zip(&y[j]).map(|(a, b)| a * b).sum();
                assert!((g[(i, j)] - want).abs() <= 1e-12 * n as f64);
                assert!((s[(i, j)] - want).abs() <= 1e-12 * n as f64);
            }
        }
        // The sums do not depend on the thread count.
        let one = CpuBackend::with_threads(1).unwrap();
        assert_eq!(one.block_gram(&xc, &yc).unwrap(), g);
        // Z = 0.5 Z + X C against the formula, both ways.
        let c = Mat::from_fn(5, 3, |i, j| (i as f64 - 2.0 * j as f64) * 0.25);
        let mut z = up(&y);
        cpu.block_combine(&xc, c.as_ref(), 0.5, &mut z).unwrap();
        let mut zs = up(&y);
        Sequential
            .block_combine(&xc, c.as_ref(), 0.5, &mut zs)
            .unwrap();
        for j in 0..3 {
            for r in [0, CPU_ROWS, n - 1] {
                let want = 0.5 * y[j][r] + (0..5).map(|i| c[(i, j)] * x[i][r]).sum::<f64>();
                assert!((z[j].as_slice()[r] - want).abs() < 1e-13);
                assert!((zs[j].as_slice()[r] - want).abs() < 1e-13);
            }
        }
        // Bad shapes are errors.
        assert!(cpu
            .block_combine(&xc, c.as_ref().transpose(), 0.0, &mut z)
            .is_err());
        let short = vec![cpu.upload(&[1.0, 2.0]).unwrap()];
        assert!(cpu.block_gram(&xc, &short).is_err());
    }

    #[test]
    fn lobpcg_with_amg_finds_the_laplacians_modes() {
        // 3D: lambda = 4 sum_d sin^2(k_d pi / (2 (m + 1))), the smallest
        // ten by enumeration.
        let m = 12;
        let k = laplace3d::<f64>(m);
        let n = k.nrows();
        let s = |j: usize| {
            (j as f64 * std::f64::consts::PI / (2.0 * (m + 1) as f64))
                .sin()
                .powi(2)
        };
        let mut exact: Vec<f64> = (1..=m)
            .flat_map(|a| (1..=m).flat_map(move |b| (1..=m).map(move |c| (a, b, c))))
            .map(|(a, b, c)| 4.0 * (s(a) + s(b) + s(c)))
            .collect();
        exact.sort_by(f64::total_cmp);
        let opts = ModeOptions {
            count: 10,
            tol: 1e-9,
            dense_below: 0,
            ..ModeOptions::default()
        };
        let r = lobpcg_on(&CpuBackend::new(), &k, &Csr::identity(n), &opts).unwrap();
        for (got, want) in r.values.iter().zip(&exact) {
            assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
        }
        assert!(r.residuals.iter().all(|&x| x <= 1e-9));
        assert!(r.iterations < 60, "{} iterations", r.iterations);
        // M-orthonormal vectors (M = I here).
        let g = r.vectors.transpose() * &r.vectors;
        for i in 0..10 {
            for j in 0..10 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((g[(i, j)] - want).abs() < 1e-9, "({i}, {j}): {}", g[(i, j)]);
            }
        }
    }

    #[test]
    fn a_generalized_pencil_with_a_two_by_two_block_amg() {
        // K the 2D Laplacian of two uncoupled components numbered node by
        // node, M a varying diagonal: every mode against the dense solver.
        let l = laplace2d::<f64>(10);
        let nodes = l.nrows();
        let mut coo = gpuq_sparse::Coo::new(2 * nodes, 2 * nodes);
        for i in 0..nodes {
            let (cols, vals) = l.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                for c in 0..2 {
                    let w = if c == 0 { v } else { 2.0 * v };
                    coo.push(2 * i + c, 2 * j as usize + c, w).unwrap();
                }
            }
        }
        let k = Csr::try_from(&coo).unwrap();
        let masses: Vec<f64> = (0..2 * nodes)
            .map(|i| 1.0 + 0.5 * (i as f64 * 0.37).sin())
            .collect();
        let m = crate::test_matrices::diag(&masses);
        let opts = ModeOptions {
            count: 8,
            tol: 1e-9,
            dense_below: 0,
            block: 2,
            ..ModeOptions::default()
        };
        let r = lobpcg_on(&CpuBackend::new(), &k, &m, &opts).unwrap();
        let d = dense_modes(&k, &m, 8).unwrap();
        for (x, y) in r.values.iter().zip(&d.values) {
            assert!((x - y).abs() < 1e-9 * y, "{x} vs {y}");
        }
        // A block size that does not divide n is refused by the AMG setup.
        let bad = ModeOptions { block: 3, ..opts };
        let e = lobpcg_on(
            &CpuBackend::new(),
            &laplace2d::<f64>(7),
            &Csr::identity(49),
            &bad,
        );
        let e = e.unwrap_err().to_string();
        assert!(e.contains("block size 3 does not divide"), "{e}");
    }
}
