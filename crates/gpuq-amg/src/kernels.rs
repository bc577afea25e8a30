//! The cycle's fusable steps: [`AmgKernels`], with default bodies made of
//! SpMV and BLAS-1 operations (so any [`SparseBackend`] runs the cycle), and
//! one-pass Rayon versions for [`CpuBackend`] (CSR or BSR2 matrices with a CSR
//! or BSR2 block-diagonal inverse; other layouts take the defaults).
//!
//! The CUDA backend (behind the `cuda` feature) fuses the residual and the
//! point-Jacobi sweep over CSR and SELL matrices into one kernel
//! ([`gpuq_cuda::CudaBackend::amg_sweep`]); 2x2-block sweeps and BSR2 matrices
//! take the defaults (a copy, an SpMV with beta = 1 and a block-diagonal SpMV).

use gpuq_core::{check_same_len, DeviceVector, Result, Scalar};
use gpuq_cpu::{CpuBackend, CpuMatrix, CpuVector};
use gpuq_sparse::{Bsr2, Csr, DeviceMatrix, SparseBackend};
use rayon::prelude::*;

/// The steps of an AMG cycle that a backend can fuse.
pub trait AmgKernels: SparseBackend {
    /// r = b - A x. Default: a copy and an SpMV (two passes over r); fused: one.
    fn amg_residual<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()> {
        default_residual(self, a, b, x, r)
    }

    /// One damped block-Jacobi sweep x <- x + omega D^-1 (b - A x), D^-1 the
    /// block-diagonal matrix `dinv` with blocks of `block` rows (for block 1
    /// also given as `diag`, the vector of omega D^-1's diagonal, the damping
    /// folded in); `scratch` (of x's length) is overwritten. Default: the residual into `scratch`, then
    /// x += omega D^-1 scratch as one SpMV with beta = 1; fused: one pass that
    /// writes the new iterate.
    #[allow(clippy::too_many_arguments)]
    fn amg_jacobi<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        dinv: &Self::Matrix<T>,
        diag: Option<&Self::Vector<T>>,
        block: usize,
        omega: T,
        b: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        scratch: &mut Self::Vector<T>,
    ) -> Result<()> {
        let _ = (block, diag);
        default_jacobi(self, a, dinv, omega, b, x, scratch)
    }

    /// One colour's Gauss-Seidel update ([`crate::coloring::ColorSweep`]):
    /// t = select b - scaled x, then x += scatter t, i.e. the colour's nodes
    /// x_u += D_u^-1 (b_u - A_u x). With `zero`, x is taken as zero on entry
    /// and overwritten (the colour's rows get D^-1 b, the others 0). `t`
    /// holds the colour's n_c values. Default: three SpMVs (two from zero);
    /// fused: one pass over `scaled` that updates x in place (the colour's
    /// rows read only other colours' entries of x and their own).
    #[allow(clippy::too_many_arguments)]
    fn amg_gs_color<T: Scalar>(
        &self,
        scaled: &Self::Matrix<T>,
        select: &Self::Matrix<T>,
        scatter: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        t: &mut Self::Vector<T>,
        zero: bool,
    ) -> Result<()> {
        default_gs_color(self, scaled, select, scatter, b, x, t, zero)
    }

    /// y = x converted element by element to another precision (the vectors
    /// entering and leaving a single-precision cycle inside a
    /// double-precision solve, [`crate::MixedAmg`]). Default: through the
    /// host (a download and an upload); fused: one pass on the backend.
    fn amg_convert<S: Scalar, T: Scalar>(
        &self,
        x: &Self::Vector<S>,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_same_len("amg_convert", x.len(), y.len())?;
        let v: Vec<T> = self.download(x)?.into_iter().map(convert_scalar).collect();
        *y = self.upload(&v)?;
        Ok(())
    }

    /// The residual restricted: scratch = b - A x, then bc = R scratch.
    /// Default: [`AmgKernels::amg_residual`] and one SpMV.
    fn amg_residual_restrict<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        r: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        scratch: &mut Self::Vector<T>,
        bc: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.amg_residual(a, b, x, scratch)?;
        self.spmv(T::one(), r, scratch, T::zero(), bc)
    }
}

/// The default residual: r = b, then r = -A x + r.
fn default_residual<B: SparseBackend, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    b: &B::Vector<T>,
    x: &B::Vector<T>,
    r: &mut B::Vector<T>,
) -> Result<()> {
    be.copy(b, r)?;
    be.spmv(-T::one(), a, x, T::one(), r)
}

/// The default Jacobi sweep.
fn default_jacobi<B: SparseBackend, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    dinv: &B::Matrix<T>,
    omega: T,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    scratch: &mut B::Vector<T>,
) -> Result<()> {
    default_residual(be, a, b, x, scratch)?;
    be.spmv(omega, dinv, scratch, T::one(), x)
}

/// `x` in the precision of `T` (real and imaginary parts rounded apart).
fn convert_scalar<S: Scalar, T: Scalar>(x: S) -> T {
    use gpuq_core::RealScalar;
    T::from_parts(
        <T::Real as RealScalar>::of_f64(x.re().to_f64_lossless()),
        <T::Real as RealScalar>::of_f64(x.im().to_f64_lossless()),
    )
}

/// The default colour update: three SpMVs (two from zero).
#[allow(clippy::too_many_arguments)]
fn default_gs_color<B: SparseBackend, T: Scalar>(
    be: &B,
    scaled: &B::Matrix<T>,
    select: &B::Matrix<T>,
    scatter: &B::Matrix<T>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    t: &mut B::Vector<T>,
    zero: bool,
) -> Result<()> {
    be.spmv(T::one(), select, b, T::zero(), t)?;
    if zero {
        return be.spmv(T::one(), scatter, t, T::zero(), x);
    }
    be.spmv(-T::one(), scaled, x, T::one(), t)?;
    be.spmv(T::one(), scatter, t, T::one(), x)
}

/// Row access to the CPU matrix layouts the fused kernels handle.
enum Rows<'a, T> {
    Csr(&'a Csr<T>),
    Bsr2(&'a Bsr2<T>),
}

impl<'a, T: Scalar> Rows<'a, T> {
    fn of(m: &'a CpuMatrix<T>) -> Option<Self> {
        match m {
            CpuMatrix::Csr(a) => Some(Rows::Csr(a)),
            CpuMatrix::Bsr2(a, _) => Some(Rows::Bsr2(a)),
            CpuMatrix::Sell(..) => None,
        }
    }

    /// Row i times x.
    #[inline(always)]
    fn dot(&self, i: usize, x: &[T]) -> T {
        match self {
            Rows::Csr(a) => {
                let (c, v) = a.row(i);
                c.iter()
                    .zip(v)
                    .fold(T::zero(), |s, (&j, &aij)| s + aij * x[j as usize])
            }
            Rows::Bsr2(a) => {
                let (bi, half) = (i / 2, 2 * (i % 2));
                let (ptr, col, blk) = (a.block_row_ptr(), a.block_col(), a.blocks());
                (ptr[bi]..ptr[bi + 1]).fold(T::zero(), |s, q| {
                    let j = 2 * col[q] as usize;
                    s + blk[q][half] * x[j] + blk[q][half + 1] * x[j + 1]
                })
            }
        }
    }
}

/// Largest block the fused CPU Jacobi sweep keeps on the stack.
const MAX_BLOCK: usize = 8;

/// Rows per task of the fused CPU kernels (a multiple of every block up to 8
/// that divides 840).
const TASK_ROWS: usize = 1680;

impl AmgKernels for CpuBackend {
    /// One Rayon pass.
    fn amg_convert<S: Scalar, T: Scalar>(
        &self,
        x: &CpuVector<S>,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("amg_convert", x.len(), y.len())?;
        y.as_mut_slice()
            .par_iter_mut()
            .zip(x.as_slice().par_iter())
            .for_each(|(t, &s)| *t = convert_scalar(s));
        Ok(())
    }

    /// One pass: r_i = b_i - A_i x, in tasks of 1680 rows.
    fn amg_residual<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        b: &CpuVector<T>,
        x: &CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<()> {
        let Some(rows) = Rows::of(a) else {
            return default_residual(self, a, b, x, r);
        };
        let (m, n) = a.shape();
        check_same_len("amg_residual (x vs columns)", n, x.len())?;
        check_same_len("amg_residual (b vs rows)", m, b.len())?;
        check_same_len("amg_residual (r vs rows)", m, r.len())?;
        let (b, x) = (b.as_slice(), x.as_slice());
        self.run("amg_residual", || {
            r.as_mut_slice()
                .par_chunks_mut(TASK_ROWS)
                .enumerate()
                .for_each(|(c, rc)| {
                    for (k, ri) in rc.iter_mut().enumerate() {
                        let i = c * TASK_ROWS + k;
                        *ri = b[i] - rows.dot(i, x);
                    }
                })
        });
        Ok(())
    }

    /// One pass writing the new iterate into `scratch` (each block's residual
    /// kept on the stack), then the two vectors are swapped (no copy).
    fn amg_jacobi<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        dinv: &CpuMatrix<T>,
        _diag: Option<&CpuVector<T>>,
        block: usize,
        omega: T,
        b: &CpuVector<T>,
        x: &mut CpuVector<T>,
        scratch: &mut CpuVector<T>,
    ) -> Result<()> {
        let (Some(rows), Some(drows)) = (Rows::of(a), Rows::of(dinv)) else {
            return default_jacobi(self, a, dinv, omega, b, x, scratch);
        };
        let bsr2_mismatch = matches!(drows, Rows::Bsr2(_)) && block != 2;
        if block == 0 || block > MAX_BLOCK || TASK_ROWS % block != 0 || bsr2_mismatch {
            return default_jacobi(self, a, dinv, omega, b, x, scratch);
        }
        let (m, n) = a.shape();
        check_same_len("amg_jacobi (A square)", m, n)?;
        check_same_len("amg_jacobi (D^-1 vs A)", m, dinv.shape().0)?;
        check_same_len("amg_jacobi (x vs rows)", m, x.len())?;
        check_same_len("amg_jacobi (b vs rows)", m, b.len())?;
        check_same_len("amg_jacobi (scratch vs rows)", m, scratch.len())?;
        if m % block != 0 {
            return default_jacobi(self, a, dinv, omega, b, x, scratch);
        }
        let (bs, xs) = (b.as_slice(), x.as_slice());
        self.run("amg_jacobi", || {
            scratch
                .as_mut_slice()
                .par_chunks_mut(TASK_ROWS)
                .enumerate()
                .for_each(|(c, out)| {
                    let row0 = c * TASK_ROWS;
                    let mut res = [T::zero(); MAX_BLOCK];
                    for (k, blk) in out.chunks_mut(block).enumerate() {
                        let first = row0 + k * block;
                        for (q, rq) in res.iter_mut().take(blk.len()).enumerate() {
                            *rq = bs[first + q] - rows.dot(first + q, xs);
                        }
                        // D^-1 only couples rows of the block: read its rows
                        // against the block's residual placed at its columns.
                        for (q, o) in blk.iter_mut().enumerate() {
                            let i = first + q;
                            let corr = drows.dot_local(i, first, &res);
                            *o = xs[i] + omega * corr;
                        }
                    }
                })
        });
        std::mem::swap(x, scratch);
        Ok(())
    }
}

impl<T: Scalar> Rows<'_, T> {
    /// Row i of a block-diagonal matrix times a vector whose only nonzeros are
    /// `local[0..]` at positions `first..` (the block's residual).
    #[inline(always)]
    fn dot_local(&self, i: usize, first: usize, local: &[T]) -> T {
        match self {
            Rows::Csr(a) => {
                let (c, v) = a.row(i);
                c.iter()
                    .zip(v)
                    .fold(T::zero(), |s, (&j, &d)| s + d * local[j as usize - first])
            }
            Rows::Bsr2(a) => {
                let (bi, half) = (i / 2, 2 * (i % 2));
                let (ptr, col, blk) = (a.block_row_ptr(), a.block_col(), a.blocks());
                (ptr[bi]..ptr[bi + 1]).fold(T::zero(), |s, q| {
                    let j = 2 * col[q] as usize - first;
                    s + blk[q][half] * local[j] + blk[q][half + 1] * local[j + 1]
                })
            }
        }
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::{default_gs_color, default_jacobi, default_residual, AmgKernels};
    use gpuq_core::{Backend, Result, Scalar};
    use gpuq_cuda::{CudaBackend, CudaMatrix, CudaVector};

    impl AmgKernels for CudaBackend {
        /// One fused pass over a CSR or SELL matrix; BSR2 takes the default.
        fn amg_residual<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            b: &CudaVector<T>,
            x: &CudaVector<T>,
            r: &mut CudaVector<T>,
        ) -> Result<()> {
            if self.amg_sweep(a, T::zero(), b, x, None, r)? {
                Ok(())
            } else {
                default_residual(self, a, b, x, r)
            }
        }

        /// Block 1 over a CSR or SELL matrix: one fused pass writing the new
        /// iterate into `scratch`, then a copy back into x (x may be the
        /// caller's vector, and a recorded iteration keeps its buffers, so
        /// the two are not swapped). Blocks of 2 and BSR2 take the default.
        fn amg_jacobi<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            dinv: &CudaMatrix<T>,
            diag: Option<&CudaVector<T>>,
            block: usize,
            omega: T,
            b: &CudaVector<T>,
            x: &mut CudaVector<T>,
            scratch: &mut CudaVector<T>,
        ) -> Result<()> {
            if let (1, Some(d)) = (block, diag) {
                // d already holds omega D^-1
                if self.amg_sweep(a, T::one(), b, x, Some(d), scratch)? {
                    return self.copy(scratch, x);
                }
            }
            default_jacobi(self, a, dinv, omega, b, x, scratch)
        }

        /// One pass on the device.
        fn amg_convert<S: Scalar, T: Scalar>(
            &self,
            x: &CudaVector<S>,
            y: &mut CudaVector<T>,
        ) -> Result<()> {
            self.convert_precision(x, y)
        }

        /// One fused in-place pass over `scaled` where `select` has one
        /// entry per row (block 1) and `scaled` is CSR or SELL (from zero:
        /// x zeroed, then the pass without reading `scaled`). Blocks of 2
        /// and BSR2 take the default.
        fn amg_gs_color<T: Scalar>(
            &self,
            scaled: &CudaMatrix<T>,
            select: &CudaMatrix<T>,
            scatter: &CudaMatrix<T>,
            b: &CudaVector<T>,
            x: &mut CudaVector<T>,
            t: &mut CudaVector<T>,
            zero: bool,
        ) -> Result<()> {
            if self.amg_gs_color(scaled, select, b, x, zero)? {
                return Ok(());
            }
            default_gs_color(self, scaled, select, scatter, b, x, t, zero)
        }
    }
}
