//! ELLPACK format.

use crate::Csr;
use gpuq_core::{Result, Scalar};

/// ELLPACK: every row padded to the length `width` of the longest row, stored
/// column-major (entry `k` of row `i` at `k * nrows + i`), so that consecutive rows
/// read consecutive memory.
///
/// Padding entries hold column 0 and value zero (harmless in a product); the true
/// row lengths are kept so that conversion back to CSR is lossless.
#[derive(Clone, Debug, PartialEq)]
pub struct Ell<T> {
    nrows: usize,
    ncols: usize,
    width: usize,
    row_len: Vec<u32>,
    col_idx: Vec<u32>,
    vals: Vec<T>,
}

impl<T: Scalar> Ell<T> {
    /// Converts from CSR. O(nrows * width) time and memory.
    pub fn from_csr(a: &Csr<T>) -> Self {
        let (nrows, width) = (a.nrows(), a.max_row_len());
        let mut col_idx = vec![0u32; nrows * width];
        let mut vals = vec![T::zero(); nrows * width];
        let mut row_len = Vec::with_capacity(nrows);
        for i in 0..nrows {
            let (c, v) = a.row(i);
            row_len.push(c.len() as u32);
            for k in 0..c.len() {
                col_idx[k * nrows + i] = c[k];
                vals[k * nrows + i] = v[k];
            }
        }
        Ell {
            nrows,
            ncols: a.ncols(),
            width,
            row_len,
            col_idx,
            vals,
        }
    }

    /// Converts back to CSR (exactly the matrix it came from). O(nrows * width).
    pub fn to_csr(&self) -> Result<Csr<T>> {
        let mut row_ptr = Vec::with_capacity(self.nrows + 1);
        let mut col_idx = Vec::new();
        let mut vals = Vec::new();
        row_ptr.push(0);
        for i in 0..self.nrows {
            for k in 0..self.row_len[i] as usize {
                col_idx.push(self.col_idx[k * self.nrows + i]);
                vals.push(self.vals[k * self.nrows + i]);
            }
            row_ptr.push(col_idx.len());
        }
        Csr::try_new_allow_nonfinite(self.nrows, self.ncols, row_ptr, col_idx, vals)
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows, self.ncols)
    }

    /// Padded row length.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Stored (unpadded) row lengths.
    pub fn row_len(&self) -> &[u32] {
        &self.row_len
    }

    /// Column indices, column-major, padded.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// Values, column-major, padded with zeros.
    pub fn values(&self) -> &[T] {
        &self.vals
    }

    /// Serial reference product y = A x over the padded storage. O(nrows * width).
    pub fn mul_vec(&self, x: &[T]) -> Result<Vec<T>> {
        gpuq_core::check_same_len("Ell::mul_vec", self.ncols, x.len())?;
        let mut y = vec![T::zero(); self.nrows];
        for k in 0..self.width {
            for (i, yi) in y.iter_mut().enumerate() {
                let p = k * self.nrows + i;
                *yi += self.vals[p] * x[self.col_idx[p] as usize];
            }
        }
        Ok(y)
    }
}
