//! Sparse matrix-vector products on the CPU: the [`SparseBackend`] implementation.
//!
//! CSR: rows are processed in fixed blocks of [`ROWS`] rows, one Rayon task each.
//! SELL: one task per sorting window (`max(sigma, c)` rows), each slice computing
//! its `c` rows together so the inner loop runs over contiguous memory.
//! BSR2: block rows in tasks of [`ROWS`] / 2, each block row writing its two rows.

use crate::reduce::pairwise_sum;
use crate::{CpuBackend, CpuMatrix, CpuVector};
use gpuq_core::{check_same_len, Backend, DeviceVector, Error, FusedDot, Result, Scalar};
use gpuq_sparse::{Bsr2, Csr, DeviceMatrix, Layout, Sell, SparseBackend};
use rayon::prelude::*;

/// Rows per task of the CSR product (and per block of its fused dot product).
pub const ROWS: usize = 2048;

/// Largest slice height the CPU SELL kernel accepts (its accumulators live on the stack).
pub const MAX_SLICE: usize = 64;

/// y_i = alpha * s + beta * y_i, without reading y when beta is zero (so NaN in an
/// uninitialised y does not leak).
#[inline(always)]
fn combine<T: Scalar>(alpha: T, s: T, beta: T, y: &mut T) {
    *y = if beta.is_zero_value() {
        alpha * s
    } else {
        alpha * s + beta * *y
    };
}

/// Row `i` of A times x.
#[inline(always)]
fn csr_row<T: Scalar>(a: &Csr<T>, x: &[T], i: usize) -> T {
    let (cols, vals) = a.row(i);
    let mut s = T::zero();
    for (&j, &v) in cols.iter().zip(vals) {
        s += v * x[j as usize];
    }
    s
}

fn csr_spmv<T: Scalar>(alpha: T, a: &Csr<T>, x: &[T], beta: T, y: &mut [T]) {
    y.par_chunks_mut(ROWS).enumerate().for_each(|(b, yc)| {
        for (k, yi) in yc.iter_mut().enumerate() {
            combine(alpha, csr_row(a, x, b * ROWS + k), beta, yi);
        }
    });
}

/// y = A x and, in the same pass, w^H y: per block of [`ROWS`] rows, then
/// pairwise.
fn csr_spmv_dot<T: Scalar>(a: &Csr<T>, x: &[T], w: &[T], y: &mut [T]) -> T {
    let partials: Vec<T> = y
        .par_chunks_mut(ROWS)
        .enumerate()
        .map(|(b, yc)| {
            let mut acc = T::zero();
            for (k, yi) in yc.iter_mut().enumerate() {
                let i = b * ROWS + k;
                *yi = csr_row(a, x, i);
                acc += w[i].conj() * *yi;
            }
            acc
        })
        .collect();
    pairwise_sum(&partials)
}

/// Products of one slice with a slice height known at compile time, so the
/// accumulators live in registers and the inner loop has a fixed width.
#[inline(always)]
fn sell_slice_fixed<T: Scalar, const C: usize>(cols: &[u32], vals: &[T], x: &[T], out: &mut [T]) {
    let mut acc = [T::zero(); C];
    for (cc, vv) in cols.chunks_exact(C).zip(vals.chunks_exact(C)) {
        for r in 0..C {
            acc[r] += vv[r] * x[cc[r] as usize];
        }
    }
    out[..C].copy_from_slice(&acc);
}

/// Products of one slice of height `c <= MAX_SLICE` chosen at run time.
fn sell_slice_any<T: Scalar>(c: usize, cols: &[u32], vals: &[T], x: &[T], out: &mut [T]) {
    let acc = &mut out[..c];
    acc.fill(T::zero());
    for (cc, vv) in cols.chunks_exact(c).zip(vals.chunks_exact(c)) {
        for r in 0..c {
            acc[r] += vv[r] * x[cc[r] as usize];
        }
    }
}

fn sell_spmv<T: Scalar>(alpha: T, a: &Sell<T>, x: &[T], beta: T, y: &mut [T]) {
    let c = a.c();
    let window = a.sigma().max(c);
    let slices_per_window = window / c;
    let (ptr, cols, vals, perm) = (a.slice_ptr(), a.col_idx(), a.values(), a.perm());
    y.par_chunks_mut(window).enumerate().for_each(|(w, yw)| {
        let row0 = w * window;
        let first = w * slices_per_window;
        let last = (first + slices_per_window).min(a.nslices());
        let mut acc = [T::zero(); MAX_SLICE];
        for s in first..last {
            let (cs, vs) = (&cols[ptr[s]..ptr[s + 1]], &vals[ptr[s]..ptr[s + 1]]);
            match c {
                4 => sell_slice_fixed::<T, 4>(cs, vs, x, &mut acc),
                8 => sell_slice_fixed::<T, 8>(cs, vs, x, &mut acc),
                16 => sell_slice_fixed::<T, 16>(cs, vs, x, &mut acc),
                _ => sell_slice_any(c, cs, vs, x, &mut acc),
            }
            let rows = ((s + 1) * c).min(perm.len()) - s * c;
            for (r, &ar) in acc[..rows].iter().enumerate() {
                let i = perm[s * c + r] as usize - row0;
                combine(alpha, ar, beta, &mut yw[i]);
            }
        }
    });
}

fn bsr2_spmv<T: Scalar>(alpha: T, a: &Bsr2<T>, x: &[T], beta: T, y: &mut [T]) {
    let (ptr, bcol, blocks) = (a.block_row_ptr(), a.block_col(), a.blocks());
    y.par_chunks_mut(ROWS).enumerate().for_each(|(c, yc)| {
        for (k, pair) in yc.chunks_exact_mut(2).enumerate() {
            let bi = c * ROWS / 2 + k;
            let (mut s0, mut s1) = (T::zero(), T::zero());
            for q in ptr[bi]..ptr[bi + 1] {
                let j = 2 * bcol[q] as usize;
                let b = &blocks[q];
                s0 += b[0] * x[j] + b[1] * x[j + 1];
                s1 += b[2] * x[j] + b[3] * x[j + 1];
            }
            combine(alpha, s0, beta, &mut pair[0]);
            combine(alpha, s1, beta, &mut pair[1]);
        }
    });
}

impl SparseBackend for CpuBackend {
    type Matrix<T: Scalar> = CpuMatrix<T>;

    fn upload_matrix<T: Scalar>(&self, a: &Csr<T>, layout: Layout) -> Result<CpuMatrix<T>> {
        let m = match layout {
            Layout::Csr => CpuMatrix::Csr(a.clone()),
            Layout::Sell { c, sigma } => {
                if c > MAX_SLICE {
                    return Err(Error::InvalidArgument(format!(
                        "the CPU SELL kernel supports slice heights up to {MAX_SLICE}, got {c}"
                    )));
                }
                CpuMatrix::Sell(Sell::from_csr(a, c, sigma)?, a.nnz())
            }
            Layout::Bsr2 => CpuMatrix::Bsr2(Bsr2::from_csr(a)?, a.nnz()),
        };
        self.stats.upload(
            a.nnz() * (std::mem::size_of::<T>() + 4)
                + (a.nrows() + 1) * std::mem::size_of::<usize>(),
        );
        Ok(m)
    }

    fn spmv<T: Scalar>(
        &self,
        alpha: T,
        a: &CpuMatrix<T>,
        x: &CpuVector<T>,
        beta: T,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        let (m, n) = a.shape();
        check_same_len("spmv (x vs columns)", n, x.len())?;
        check_same_len("spmv (y vs rows)", m, y.len())?;
        match a {
            CpuMatrix::Csr(a) => self.run("spmv_csr", || {
                csr_spmv(alpha, a, x.as_slice(), beta, y.as_mut_slice())
            }),
            CpuMatrix::Sell(a, _) => self.run("spmv_sell", || {
                sell_spmv(alpha, a, x.as_slice(), beta, y.as_mut_slice())
            }),
            CpuMatrix::Bsr2(a, _) => self.run("spmv_bsr2", || {
                bsr2_spmv(alpha, a, x.as_slice(), beta, y.as_mut_slice())
            }),
        }
        Ok(())
    }

    fn spmv_dotc<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        x: &CpuVector<T>,
        y: &mut CpuVector<T>,
    ) -> Result<T> {
        let (m, n) = a.shape();
        check_same_len("spmv_dotc (x vs columns)", n, x.len())?;
        check_same_len("spmv_dotc (y vs rows)", m, y.len())?;
        if m != n {
            return Err(Error::shape(
                "spmv_dotc",
                "a square matrix",
                format!("{m} x {n}"),
            ));
        }
        match a {
            CpuMatrix::Csr(a) => Ok(self.run("spmv_dotc_csr", || {
                csr_spmv_dot(a, x.as_slice(), x.as_slice(), y.as_mut_slice())
            })),
            CpuMatrix::Sell(..) | CpuMatrix::Bsr2(..) => {
                self.spmv(T::one(), a, x, T::zero(), y)?;
                self.dotc(x, y)
            }
        }
    }

    /// Fused for CSR (`spmv_dot_csr` in the counters); SELL and BSR2 compute y
    /// only and return `false`.
    fn spmv_dot<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        x: &CpuVector<T>,
        y: &mut CpuVector<T>,
        dot: FusedDot<'_, Self, T>,
    ) -> Result<bool> {
        let (m, n) = a.shape();
        if m != n {
            return Err(Error::shape(
                "spmv_dot",
                "a square matrix",
                format!("{m} x {n}"),
            ));
        }
        dot.check("spmv_dot (w vs rows)", m)?;
        let CpuMatrix::Csr(csr) = a else {
            self.spmv(T::one(), a, x, T::zero(), y)?;
            return Ok(false);
        };
        check_same_len("spmv_dot (x vs columns)", n, x.len())?;
        check_same_len("spmv_dot (y vs rows)", m, y.len())?;
        let sum = self.run("spmv_dot_csr", || {
            csr_spmv_dot(csr, x.as_slice(), dot.w.as_slice(), y.as_mut_slice())
        });
        dot.sc.as_mut_slice()[dot.slot] = sum;
        Ok(true)
    }
}
