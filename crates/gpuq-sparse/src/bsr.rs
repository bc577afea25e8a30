//! Block sparse rows with square b x b blocks (b = 1 to [`MAX_BSR_BLOCK`]).

use crate::Csr;
use gpuq_core::{Error, Result, Scalar};
use rayon::prelude::*;

/// Largest block size [`Bsr`] stores: 8 (a block's stored-entry mask is one
/// `u64`, and the smoothed-aggregation hierarchies of 3D elasticity have 6
/// unknowns per coarse node).
pub const MAX_BSR_BLOCK: usize = 8;

/// Block sparse rows with b x b blocks, for systems with b unknowns per node
/// numbered node by node (2D and 3D elasticity, the bidomain model, the coarse
/// levels of smoothed aggregation with k near-null-space vectors).
///
/// Block `k` covers rows `b*bi` to `b*bi + b - 1` and columns from
/// `b*block_col[k]` on, `b` of them; its `b*b` entries start at
/// `values[b*b*k]`, row-major. `masks[k]` has
/// bit `b*r + c` set when entry `(r, c)` of the block is stored in the source
/// matrix, so conversion back to CSR is lossless; entries not stored are zero
/// in `values`. Storage: `b*b` values and one `u32` column per block, against
/// `b*b` values and `b*b` columns in CSR when the blocks are full.
#[derive(Clone, Debug, PartialEq)]
pub struct Bsr<T> {
    b: usize,
    nbrows: usize,
    nbcols: usize,
    block_row_ptr: Vec<usize>,
    block_col: Vec<u32>,
    values: Vec<T>,
    masks: Vec<u64>,
}

impl<T: Scalar> Bsr<T> {
    /// Converts from CSR with blocks of `b`; `b` must be 1 to
    /// [`MAX_BSR_BLOCK`] and divide both dimensions. O(nnz log b).
    pub fn from_csr(a: &Csr<T>, b: usize) -> Result<Self> {
        if b == 0 || b > MAX_BSR_BLOCK {
            return Err(Error::InvalidArgument(format!(
                "BSR block size {b}: expected 1 to {MAX_BSR_BLOCK}"
            )));
        }
        if a.nrows() % b != 0 || a.ncols() % b != 0 {
            return Err(Error::InvalidMatrix(format!(
                "BSR with {b} x {b} blocks needs dimensions divisible by {b}, got {} x {}",
                a.nrows(),
                a.ncols()
            )));
        }
        let (nbrows, nbcols) = (a.nrows() / b, a.ncols() / b);
        let mut block_row_ptr = Vec::with_capacity(nbrows + 1);
        let (mut block_col, mut values, mut masks) = (Vec::new(), Vec::new(), Vec::new());
        block_row_ptr.push(0);
        let mut pos = [0usize; MAX_BSR_BLOCK];
        for bi in 0..nbrows {
            let rows: Vec<(&[u32], &[T])> = (0..b).map(|r| a.row(b * bi + r)).collect();
            pos[..b].fill(0);
            // Merge the block row's b sorted rows by block column.
            loop {
                let next = (0..b)
                    .filter(|&r| pos[r] < rows[r].0.len())
                    .map(|r| rows[r].0[pos[r]] as usize / b)
                    .min();
                let Some(bj) = next else { break };
                let first = values.len();
                values.resize(first + b * b, T::zero());
                let mut mask = 0u64;
                for (r, (cols, vals)) in rows.iter().enumerate() {
                    while pos[r] < cols.len() && cols[pos[r]] as usize / b == bj {
                        let c = cols[pos[r]] as usize % b;
                        values[first + b * r + c] = vals[pos[r]];
                        mask |= 1 << (b * r + c);
                        pos[r] += 1;
                    }
                }
                block_col.push(bj as u32);
                masks.push(mask);
            }
            block_row_ptr.push(block_col.len());
        }
        Ok(Bsr {
            b,
            nbrows,
            nbcols,
            block_row_ptr,
            block_col,
            values,
            masks,
        })
    }

    /// The BSR matrix of `nrows` x `ncols` given by its parts, every entry of
    /// every block stored (SciPy's and PETSc's block formats, explicit zeros
    /// included): `block_row_ptr` and `block_col` over block rows and
    /// columns (increasing within a block row), `values` the blocks one
    /// after another, each row-major. Errors on a block size outside 1 to
    /// [`MAX_BSR_BLOCK`], dimensions it does not divide, or parts of the wrong
    /// lengths, order or range. O(nblocks).
    pub fn try_from_blocks(
        b: usize,
        (nrows, ncols): (usize, usize),
        block_row_ptr: Vec<usize>,
        block_col: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Self> {
        let bad = |what: String| Err(Error::InvalidMatrix(what));
        if b == 0 || b > MAX_BSR_BLOCK {
            return Err(Error::InvalidArgument(format!(
                "BSR block size {b}: expected 1 to {MAX_BSR_BLOCK}"
            )));
        }
        if nrows % b != 0 || ncols % b != 0 || ncols / b > u32::MAX as usize {
            return bad(format!(
                "a {nrows} x {ncols} matrix is not tiled by {b} x {b} blocks"
            ));
        }
        let (nbrows, nbcols, nblocks) = (nrows / b, ncols / b, block_col.len());
        if block_row_ptr.len() != nbrows + 1
            || block_row_ptr[0] != 0
            || block_row_ptr[nbrows] != nblocks
            || block_row_ptr.windows(2).any(|w| w[0] > w[1])
        {
            return bad(format!(
                "block row pointers of {nbrows} block rows must rise from 0 to the {nblocks} blocks"
            ));
        }
        if values.len() != nblocks * b * b {
            return bad(format!(
                "{} block values for {nblocks} blocks of {b} x {b}",
                values.len()
            ));
        }
        for (bi, w) in block_row_ptr.windows(2).enumerate() {
            let cols = &block_col[w[0]..w[1]];
            if cols.iter().any(|&j| j as usize >= nbcols) || cols.windows(2).any(|p| p[0] >= p[1]) {
                return bad(format!(
                    "block row {bi}: block columns must increase and stay below {nbcols}"
                ));
            }
        }
        let full = if b * b == 64 {
            u64::MAX
        } else {
            (1u64 << (b * b)) - 1
        };
        Ok(Bsr {
            b,
            nbrows,
            nbcols,
            block_row_ptr,
            block_col,
            values,
            masks: vec![full; nblocks],
        })
    }

    /// Converts back to CSR (exactly the matrix it came from): the rows'
    /// lengths from the masks, then each block row's entries written in
    /// parallel into its own range. O(nnz).
    pub fn to_csr(&self) -> Result<Csr<T>> {
        let b = self.b;
        let ptr = &self.block_row_ptr;
        let row_bits = if b == 8 {
            u64::from(u8::MAX)
        } else {
            (1u64 << b) - 1
        };
        let row_len = |i: usize| -> usize {
            let (bi, r) = (i / b, i % b);
            (ptr[bi]..ptr[bi + 1])
                .map(|k| ((self.masks[k] >> (b * r)) & row_bits).count_ones() as usize)
                .sum()
        };
        let lengths: Vec<usize> = (0..b * self.nbrows).into_par_iter().map(row_len).collect();
        let mut row_ptr = Vec::with_capacity(lengths.len() + 1);
        row_ptr.push(0usize);
        for l in &lengths {
            row_ptr.push(row_ptr[row_ptr.len() - 1] + l);
        }
        let nnz = row_ptr[row_ptr.len() - 1];
        let (mut col_idx, mut vals) = (vec![0u32; nnz], vec![T::zero(); nnz]);
        // Block row bi's entries are the range of its b rows.
        let mut parts = Vec::with_capacity(self.nbrows);
        let (mut c_rest, mut v_rest) = (&mut col_idx[..], &mut vals[..]);
        for bi in 0..self.nbrows {
            let len = row_ptr[b * (bi + 1)] - row_ptr[b * bi];
            let (c, c_tail) = std::mem::take(&mut c_rest).split_at_mut(len);
            let (v, v_tail) = std::mem::take(&mut v_rest).split_at_mut(len);
            parts.push((bi, c, v));
            (c_rest, v_rest) = (c_tail, v_tail);
        }
        parts.into_par_iter().for_each(|(bi, c, v)| {
            let mut at = 0;
            for r in 0..b {
                for k in ptr[bi]..ptr[bi + 1] {
                    for col in 0..b {
                        if self.masks[k] & (1 << (b * r + col)) != 0 {
                            c[at] = (b * self.block_col[k] as usize + col) as u32;
                            v[at] = self.values[b * b * k + b * r + col];
                            at += 1;
                        }
                    }
                }
            }
        });
        Csr::try_new_allow_nonfinite(b * self.nbrows, b * self.nbcols, row_ptr, col_idx, vals)
    }

    /// The block size b.
    pub fn block_size(&self) -> usize {
        self.b
    }

    /// (rows, columns) in scalar entries.
    pub fn shape(&self) -> (usize, usize) {
        (self.b * self.nbrows, self.b * self.nbcols)
    }

    /// Number of stored blocks.
    pub fn nblocks(&self) -> usize {
        self.block_col.len()
    }

    /// Block row pointers (`nrows / b + 1` entries).
    pub fn block_row_ptr(&self) -> &[usize] {
        &self.block_row_ptr
    }

    /// Block column of each block.
    pub fn block_col(&self) -> &[u32] {
        &self.block_col
    }

    /// The blocks' values, `b*b` per block, each block row-major.
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// Serial reference product y = A x. O(b^2 nblocks).
    pub fn mul_vec(&self, x: &[T]) -> Result<Vec<T>> {
        let b = self.b;
        gpuq_core::check_same_len("Bsr::mul_vec", b * self.nbcols, x.len())?;
        let mut y = vec![T::zero(); b * self.nbrows];
        for bi in 0..self.nbrows {
            for k in self.block_row_ptr[bi]..self.block_row_ptr[bi + 1] {
                let j = b * self.block_col[k] as usize;
                let blk = &self.values[b * b * k..][..b * b];
                for r in 0..b {
                    for c in 0..b {
                        y[b * bi + r] += blk[b * r + c] * x[j + c];
                    }
                }
            }
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generators::laplace2d;

    #[test]
    fn round_trips_and_multiplies_for_every_block_size() {
        let a = laplace2d::<f64>(12); // 144 rows: divisible by 1, 2, 3, 4, 6, 8
        let x: Vec<f64> = (0..144).map(|i| (i as f64 * 0.37).sin()).collect();
        let want = a.mul_vec(&x).unwrap();
        for b in [1, 2, 3, 4, 6, 8] {
            let m = Bsr::from_csr(&a, b).unwrap();
            assert_eq!(m.to_csr().unwrap(), a, "b = {b}");
            let got = m.mul_vec(&x).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "b = {b}");
            }
        }
    }

    #[test]
    fn blocks_given_whole_expand_to_every_entry() {
        // laplace2d(12) in 3 x 3 blocks, each block's entries filled in
        // (explicit zeros): the parts' CSR is the dense-block matrix.
        let a = laplace2d::<f64>(12);
        let m = Bsr::from_csr(&a, 3).unwrap();
        let whole = Bsr::try_from_blocks(
            3,
            (144, 144),
            m.block_row_ptr().to_vec(),
            m.block_col().to_vec(),
            m.values().to_vec(),
        )
        .unwrap();
        let c = whole.to_csr().unwrap();
        assert_eq!(c.nnz(), 9 * m.nblocks());
        for i in 0..144 {
            let (cols, vals) = c.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                let (ac, av) = a.row(i);
                let want = ac.iter().position(|&k| k == j).map_or(0.0, |p| av[p]);
                assert_eq!(v, want, "({i}, {j})");
            }
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
        }
        // Bad parts: a wrong pointer end, values, a column out of range or
        // out of order, a size that does not tile.
        let parts = || {
            (
                m.block_row_ptr().to_vec(),
                m.block_col().to_vec(),
                m.values().to_vec(),
            )
        };
        let (mut p, bc, v) = parts();
        p[48] += 1;
        assert!(Bsr::try_from_blocks(3, (144, 144), p, bc, v).is_err());
        let (p, bc, mut v) = parts();
        v.pop();
        assert!(Bsr::try_from_blocks(3, (144, 144), p, bc, v).is_err());
        let (p, mut bc, v) = parts();
        bc[0] = 48;
        assert!(Bsr::try_from_blocks(3, (144, 144), p, bc, v).is_err());
        let (p, mut bc, v) = parts();
        bc.swap(0, 1);
        assert!(Bsr::try_from_blocks(3, (144, 144), p, bc, v).is_err());
        let (p, bc, v) = parts();
        assert!(Bsr::try_from_blocks(3, (144, 145), p, bc, v).is_err());
    }

    #[test]
    fn refuses_sizes_it_cannot_hold() {
        let a = laplace2d::<f64>(5); // 25 rows
        assert!(Bsr::from_csr(&a, 2).is_err());
        assert!(Bsr::from_csr(&a, 0).is_err());
        assert!(Bsr::from_csr(&a, 9).is_err());
        assert!(Bsr::from_csr(&a, 5).is_ok());
    }
}
