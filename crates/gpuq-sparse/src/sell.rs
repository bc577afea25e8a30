//! SELL-C-sigma format (sliced ELLPACK with local row sorting).

use crate::Csr;
use gpuq_core::{Error, Result, Scalar};
use rayon::prelude::*;

/// SELL-C-sigma: rows are sorted by decreasing length inside windows of `sigma`
/// consecutive rows, then cut into slices of `c` rows; each slice is stored as a
/// small column-major ELLPACK block padded to its own longest row.
///
/// * Entry `k` of the row at local position `r` of slice `s` sits at
///   `slice_ptr[s] + k * c + r`.
/// * `perm[p]` is the original row of sorted position `p`; positions past `nrows`
///   in the last slice are padding rows.
/// * `sigma = 1` keeps the original row order: that is the "interleaved ELLPACK"
///   of the elasticity/bidomain reference (seed 002) with slice height `c`.
/// * `sigma` must be 1 or a multiple of `c`, so a sorting window covers whole slices
///   and a slice only writes rows of its own window.
///
/// Padding entries hold column 0 and value zero; true row lengths are kept, so
/// conversion back to CSR is lossless.
#[derive(Clone, Debug, PartialEq)]
pub struct Sell<T> {
    nrows: usize,
    ncols: usize,
    c: usize,
    sigma: usize,
    perm: Vec<u32>,
    row_len: Vec<u32>,
    slice_ptr: Vec<usize>,
    col_idx: Vec<u32>,
    vals: Vec<T>,
}

/// The row order and slice offsets of SELL-`c`-`sigma` for `nrows` rows of
/// `len(i)` entries: rows sorted by length, longest first (stable), within
/// each window of `sigma` rows (no sorting for sigma = 1), and per slice of c
/// rows in that order the offset of its first entry (c times the widths of
/// the slices before it; nrows.div_ceil(c) + 1 offsets). [`Sell::from_csr`]
/// lays its arrays out by this plan; a backend that builds SELL where the
/// matrix lives uses it too. O(nrows log sigma), windows and slices in
/// parallel; `c` >= 1 and `sigma` >= 1
/// assumed (checked by the callers).
pub fn sell_plan(
    nrows: usize,
    len: impl Fn(usize) -> usize + Sync,
    c: usize,
    sigma: usize,
) -> (Vec<u32>, Vec<usize>) {
    let mut perm: Vec<u32> = (0..nrows as u32).into_par_iter().collect();
    if sigma > 1 {
        perm.par_chunks_mut(sigma)
            .for_each(|w| w.sort_by_key(|&i| std::cmp::Reverse(len(i as usize))));
    }
    let widths: Vec<usize> = perm
        .par_chunks(c)
        .map(|rows| rows.iter().map(|&i| len(i as usize)).max().unwrap_or(0))
        .collect();
    let mut slice_ptr = Vec::with_capacity(widths.len() + 1);
    slice_ptr.push(0);
    for (s, w) in widths.iter().enumerate() {
        slice_ptr.push(slice_ptr[s] + w * c);
    }
    (perm, slice_ptr)
}

impl<T: Scalar> Sell<T> {
    /// Converts from CSR with slice height `c >= 1` and sorting window `sigma`
    /// (1 or a multiple of `c`). O(nnz + padding + nrows log sigma), the
    /// slices filled in parallel.
    pub fn from_csr(a: &Csr<T>, c: usize, sigma: usize) -> Result<Self> {
        Self::from_csr_map(a, c, sigma, |v| v)
    }

    /// [`Self::from_csr`] of a CSR matrix of another scalar type, each value
    /// converted by `map` as it is placed (one pass, no intermediate copy).
    /// Same cost.
    pub fn from_csr_map<S: Scalar>(
        a: &Csr<S>,
        c: usize,
        sigma: usize,
        map: impl Fn(S) -> T + Sync,
    ) -> Result<Self> {
        if c == 0 || sigma == 0 || (sigma != 1 && sigma % c != 0) {
            return Err(Error::InvalidArgument(format!(
                "SELL-C-sigma needs c >= 1 and sigma = 1 or a multiple of c (got c = {c}, sigma = {sigma})"
            )));
        }
        let nrows = a.nrows();
        if nrows > u32::MAX as usize {
            return Err(Error::InvalidMatrix(format!(
                "{nrows} rows exceed the 32-bit row index range of SELL"
            )));
        }
        let len = |i: usize| a.row_ptr()[i + 1] - a.row_ptr()[i];
        let (perm, slice_ptr) = sell_plan(nrows, len, c, sigma);
        let nslices = nrows.div_ceil(c);
        let total = slice_ptr[nslices];
        let mut col_idx = vec![0u32; total];
        let mut vals = vec![T::zero(); total];
        // Each slice's region of the arrays, filled by one task.
        let (mut col_rest, mut val_rest) = (&mut col_idx[..], &mut vals[..]);
        let mut regions = Vec::with_capacity(nslices);
        for w in slice_ptr.windows(2) {
            let (cs, ct) = std::mem::take(&mut col_rest).split_at_mut(w[1] - w[0]);
            let (vs, vt) = std::mem::take(&mut val_rest).split_at_mut(w[1] - w[0]);
            regions.push((cs, vs));
            (col_rest, val_rest) = (ct, vt);
        }
        regions
            .into_par_iter()
            .enumerate()
            .for_each(|(s, (cs, vs))| {
                let rows = &perm[s * c..((s + 1) * c).min(nrows)];
                for (r, &i) in rows.iter().enumerate() {
                    let (cols, v) = a.row(i as usize);
                    for k in 0..cols.len() {
                        cs[k * c + r] = cols[k];
                        vs[k * c + r] = map(v[k]);
                    }
                }
            });
        let row_len = perm.par_iter().map(|&i| len(i as usize) as u32).collect();
        Ok(Sell {
            nrows,
            ncols: a.ncols(),
            c,
            sigma,
            perm,
            row_len,
            slice_ptr,
            col_idx,
            vals,
        })
    }

    /// Converts back to CSR (exactly the matrix it came from). O(nnz + nrows).
    pub fn to_csr(&self) -> Result<Csr<T>> {
        let mut inv = vec![0usize; self.nrows];
        for (p, &i) in self.perm.iter().enumerate() {
            inv[i as usize] = p;
        }
        let mut row_ptr = Vec::with_capacity(self.nrows + 1);
        let mut col_idx = Vec::new();
        let mut vals = Vec::new();
        row_ptr.push(0);
        for &p in &inv {
            let (s, r) = (p / self.c, p % self.c);
            for k in 0..self.row_len[p] as usize {
                let q = self.slice_ptr[s] + k * self.c + r;
                col_idx.push(self.col_idx[q]);
                vals.push(self.vals[q]);
            }
            row_ptr.push(col_idx.len());
        }
        Csr::try_new_allow_nonfinite(self.nrows, self.ncols, row_ptr, col_idx, vals)
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows, self.ncols)
    }

    /// Slice height C.
    pub fn c(&self) -> usize {
        self.c
    }

    /// Sorting window sigma.
    pub fn sigma(&self) -> usize {
        self.sigma
    }

    /// Number of slices, `ceil(nrows / c)`.
    pub fn nslices(&self) -> usize {
        self.slice_ptr.len() - 1
    }

    /// `perm[p]`: the original row stored at sorted position `p`.
    pub fn perm(&self) -> &[u32] {
        &self.perm
    }

    /// Stored row lengths by sorted position.
    pub fn row_len(&self) -> &[u32] {
        &self.row_len
    }

    /// Offsets of the slices in `col_idx`/`values` (`nslices + 1` entries).
    pub fn slice_ptr(&self) -> &[usize] {
        &self.slice_ptr
    }

    /// Column indices, slice by slice, column-major within a slice, padded.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// Values, laid out like `col_idx`, padded with zeros.
    pub fn values(&self) -> &[T] {
        &self.vals
    }

    /// Stored entries including padding.
    pub fn stored(&self) -> usize {
        self.vals.len()
    }

    /// Serial reference product y = A x over the padded storage. O(stored).
    pub fn mul_vec(&self, x: &[T]) -> Result<Vec<T>> {
        gpuq_core::check_same_len("Sell::mul_vec", self.ncols, x.len())?;
        let mut y = vec![T::zero(); self.nrows];
        for (p, &i) in self.perm.iter().enumerate() {
            let (s, r) = (p / self.c, p % self.c);
            let width = (self.slice_ptr[s + 1] - self.slice_ptr[s]) / self.c;
            let mut acc = T::zero();
            for k in 0..width {
                let q = self.slice_ptr[s] + k * self.c + r;
                acc += self.vals[q] * x[self.col_idx[q] as usize];
            }
            y[i as usize] = acc;
        }
        Ok(y)
    }
}
