//! Sparse matrix-vector products on the CPU: the [`SparseBackend`] implementation.
//!
//! CSR: rows are processed in fixed blocks of [`ROWS`] rows, one Rayon task each.
//! SELL: one task per sorting window (`max(sigma, c)` rows), each slice computing
//! its `c` rows together so the inner loop runs over contiguous memory.
//! BSR: block rows in tasks of about [`ROWS`] rows, each block row writing its b
//! rows (the block size a constant of the inner loop for every b up to 8).

use crate::reduce::pairwise_sum;
use crate::{CpuBackend, CpuMatrix, CpuVector};
use gpuq_core::{check_same_len, Backend, DeviceVector, Error, FusedDot, Result, Scalar};
use gpuq_sparse::{Bsr, Csr, DeviceMatrix, Layout, Sell, SparseBackend};
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

/// y = alpha A x + beta y for BSR with blocks of `B` (a constant, so the
/// block's loops unroll): each block row sums its blocks in order.
fn bsr_spmv_fixed<T: Scalar, const B: usize>(alpha: T, a: &Bsr<T>, x: &[T], beta: T, y: &mut [T]) {
    let (ptr, bcol, vals) = (a.block_row_ptr(), a.block_col(), a.values());
    let per_task = (ROWS / B).max(1);
    y.par_chunks_mut(B * per_task)
        .enumerate()
        .for_each(|(c, yc)| {
            for (k, out) in yc.chunks_exact_mut(B).enumerate() {
                let bi = c * per_task + k;
                let mut s = [T::zero(); B];
                for q in ptr[bi]..ptr[bi + 1] {
                    let j = B * bcol[q] as usize;
                    let xb = &x[j..j + B];
                    let blk = &vals[B * B * q..B * B * (q + 1)];
                    for (r, sr) in s.iter_mut().enumerate() {
                        for (c, &xc) in xb.iter().enumerate() {
                            *sr += blk[B * r + c] * xc;
                        }
                    }
                }
                for (o, &sr) in out.iter_mut().zip(&s) {
                    combine(alpha, sr, beta, o);
                }
            }
        });
}

/// y = alpha A x + beta y for BSR of any block size up to
/// [`gpuq_sparse::MAX_BSR_BLOCK`]. O(b^2 nblocks).
fn bsr_spmv<T: Scalar>(alpha: T, a: &Bsr<T>, x: &[T], beta: T, y: &mut [T]) {
    match a.block_size() {
        1 => bsr_spmv_fixed::<T, 1>(alpha, a, x, beta, y),
        2 => bsr_spmv_fixed::<T, 2>(alpha, a, x, beta, y),
        3 => bsr_spmv_fixed::<T, 3>(alpha, a, x, beta, y),
        4 => bsr_spmv_fixed::<T, 4>(alpha, a, x, beta, y),
        5 => bsr_spmv_fixed::<T, 5>(alpha, a, x, beta, y),
        6 => bsr_spmv_fixed::<T, 6>(alpha, a, x, beta, y),
        7 => bsr_spmv_fixed::<T, 7>(alpha, a, x, beta, y),
        _ => bsr_spmv_fixed::<T, 8>(alpha, a, x, beta, y),
    }
}

impl CpuBackend {
    /// `a` stored as SELL-`c`-`sigma` with values of `T`, each converted by
    /// `map` as it is placed (one pass: what [`SparseBackend::upload_matrix`]
    /// does for SELL, and what a caller holding the matrix in another
    /// precision uses to skip the converted copy). Errors for a slice height
    /// above the CPU SELL kernel's largest (64) and as [`Sell::from_csr`].
    /// O(nnz + padding).
    pub fn sell_from<S: Scalar, T: Scalar>(
        &self,
        a: &Csr<S>,
        c: usize,
        sigma: usize,
        map: impl Fn(S) -> T + Sync,
    ) -> Result<CpuMatrix<T>> {
        if c > MAX_SLICE {
            return Err(Error::InvalidArgument(format!(
                "the CPU SELL kernel supports slice heights up to {MAX_SLICE}, got {c}"
            )));
        }
        let m = CpuMatrix::Sell(Sell::from_csr_map(a, c, sigma, map)?, a.nnz());
        self.stats.upload(
            a.nnz() * (std::mem::size_of::<T>() + 4)
                + (a.nrows() + 1) * std::mem::size_of::<usize>(),
        );
        Ok(m)
    }
}

impl SparseBackend for CpuBackend {
    type Matrix<T: Scalar> = CpuMatrix<T>;

    /// Copies `values` over the CSR's values, in parallel. O(nnz).
    fn set_csr_values<T: Scalar>(&self, a: &mut CpuMatrix<T>, values: &CpuVector<T>) -> Result<()> {
        let CpuMatrix::Csr(csr) = a else {
            return Err(Error::InvalidArgument(
                "set_csr_values: the matrix is not stored as CSR".into(),
            ));
        };
        let dst = csr.values_mut();
        gpuq_core::check_same_len("set_csr_values", dst.len(), values.as_slice().len())?;
        self.run("set_csr_values", || {
            dst.par_chunks_mut(1 << 16)
                .zip(values.as_slice().par_chunks(1 << 16))
                .for_each(|(d, v)| d.copy_from_slice(v))
        });
        Ok(())
    }

    fn upload_matrix<T: Scalar>(&self, a: &Csr<T>, layout: Layout) -> Result<CpuMatrix<T>> {
        let m = match layout {
            Layout::Csr => CpuMatrix::Csr(a.clone()),
            Layout::Sell { c, sigma } => return self.sell_from(a, c, sigma, |v| v),
            Layout::Bsr { b } => CpuMatrix::Bsr(Bsr::from_csr(a, b)?, a.nnz()),
        };
        self.stats.upload(
            a.nnz() * (std::mem::size_of::<T>() + 4)
                + (a.nrows() + 1) * std::mem::size_of::<usize>(),
        );
        Ok(m)
    }

    /// CSR is kept as given (no copy); other layouts as
    /// [`SparseBackend::upload_matrix`].
    fn upload_matrix_owned<T: Scalar>(&self, a: Csr<T>, layout: Layout) -> Result<CpuMatrix<T>> {
        if layout != Layout::Csr {
            return self.upload_matrix(&a, layout);
        }
        self.stats.upload(
            a.nnz() * (std::mem::size_of::<T>() + 4)
                + (a.nrows() + 1) * std::mem::size_of::<usize>(),
        );
        Ok(CpuMatrix::Csr(a))
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
            CpuMatrix::Bsr(a, _) => self.run("spmv_bsr", || {
                bsr_spmv(alpha, a, x.as_slice(), beta, y.as_mut_slice())
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
            CpuMatrix::Sell(..) | CpuMatrix::Bsr(..) => {
                self.spmv(T::one(), a, x, T::zero(), y)?;
                self.dotc(x, y)
            }
        }
    }

    /// Fused for CSR (`spmv_dot_csr` in the counters); SELL and BSR compute y
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
