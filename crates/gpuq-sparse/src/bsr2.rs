//! 2x2 block sparse row format.

use crate::Csr;
use gpuq_core::{Error, Result, Scalar};

/// Block sparse rows with 2x2 blocks, for systems with two unknowns per node
/// (the 2x2 elasticity/bidomain model of seed 002).
///
/// Block `k` covers rows `2*bi, 2*bi+1` and columns `2*block_col[k], +1`; its
/// entries are stored row-major in `blocks[k] = [a00, a01, a10, a11]`.
/// `masks[k]` has bit `2*r + c` set when entry `(r, c)` of the block is stored in
/// the source matrix, so conversion back to CSR is lossless; entries not stored
/// are zero in `blocks`.
#[derive(Clone, Debug, PartialEq)]
pub struct Bsr2<T> {
    nbrows: usize,
    nbcols: usize,
    block_row_ptr: Vec<usize>,
    block_col: Vec<u32>,
    blocks: Vec<[T; 4]>,
    masks: Vec<u8>,
}

impl<T: Scalar> Bsr2<T> {
    /// Converts from CSR; both dimensions must be even. O(nnz).
    pub fn from_csr(a: &Csr<T>) -> Result<Self> {
        if a.nrows() % 2 != 0 || a.ncols() % 2 != 0 {
            return Err(Error::InvalidMatrix(format!(
                "2x2 block format needs even dimensions, got {} x {}",
                a.nrows(),
                a.ncols()
            )));
        }
        let (nbrows, nbcols) = (a.nrows() / 2, a.ncols() / 2);
        let mut block_row_ptr = Vec::with_capacity(nbrows + 1);
        let mut block_col = Vec::new();
        let mut blocks = Vec::new();
        let mut masks = Vec::new();
        block_row_ptr.push(0);
        for bi in 0..nbrows {
            let rows = [a.row(2 * bi), a.row(2 * bi + 1)];
            // Merge the two sorted rows by block column.
            let mut pos = [0usize; 2];
            loop {
                let next = (0..2)
                    .filter(|&r| pos[r] < rows[r].0.len())
                    .map(|r| rows[r].0[pos[r]] / 2)
                    .min();
                let Some(bj) = next else { break };
                let mut block = [T::zero(); 4];
                let mut mask = 0u8;
                for r in 0..2 {
                    while pos[r] < rows[r].0.len() && rows[r].0[pos[r]] / 2 == bj {
                        let c = (rows[r].0[pos[r]] % 2) as usize;
                        block[2 * r + c] = rows[r].1[pos[r]];
                        mask |= 1 << (2 * r + c);
                        pos[r] += 1;
                    }
                }
                block_col.push(bj);
                blocks.push(block);
                masks.push(mask);
            }
            block_row_ptr.push(block_col.len());
        }
        Ok(Bsr2 {
            nbrows,
            nbcols,
            block_row_ptr,
            block_col,
            blocks,
            masks,
        })
    }

    /// Converts back to CSR (exactly the matrix it came from). O(nnz).
    pub fn to_csr(&self) -> Result<Csr<T>> {
        let mut row_ptr = vec![0usize];
        let mut col_idx = Vec::new();
        let mut vals = Vec::new();
        for bi in 0..self.nbrows {
            for r in 0..2 {
                for k in self.block_row_ptr[bi]..self.block_row_ptr[bi + 1] {
                    for c in 0..2 {
                        if self.masks[k] & (1 << (2 * r + c)) != 0 {
                            col_idx.push(2 * self.block_col[k] + c as u32);
                            vals.push(self.blocks[k][2 * r + c]);
                        }
                    }
                }
                row_ptr.push(col_idx.len());
            }
        }
        Csr::try_new_allow_nonfinite(2 * self.nbrows, 2 * self.nbcols, row_ptr, col_idx, vals)
    }

    /// (rows, columns) in scalar entries.
    pub fn shape(&self) -> (usize, usize) {
        (2 * self.nbrows, 2 * self.nbcols)
    }

    /// Number of stored 2x2 blocks.
    pub fn nblocks(&self) -> usize {
        self.blocks.len()
    }

    /// Block row pointers (`nrows / 2 + 1` entries).
    pub fn block_row_ptr(&self) -> &[usize] {
        &self.block_row_ptr
    }

    /// Block column of each block.
    pub fn block_col(&self) -> &[u32] {
        &self.block_col
    }

    /// The blocks, row-major `[a00, a01, a10, a11]`.
    pub fn blocks(&self) -> &[[T; 4]] {
        &self.blocks
    }

    /// The 2x2 diagonal blocks (zero where no block is stored). O(nblocks).
    pub fn diagonal_blocks(&self) -> Vec<[T; 4]> {
        (0..self.nbrows)
            .map(|bi| {
                let r = self.block_row_ptr[bi]..self.block_row_ptr[bi + 1];
                self.block_col[r.clone()]
                    .binary_search(&(bi as u32))
                    .map_or([T::zero(); 4], |k| self.blocks[r.start + k])
            })
            .collect()
    }

    /// Serial reference product y = A x. O(4 * nblocks).
    pub fn mul_vec(&self, x: &[T]) -> Result<Vec<T>> {
        gpuq_core::check_same_len("Bsr2::mul_vec", 2 * self.nbcols, x.len())?;
        let mut y = vec![T::zero(); 2 * self.nbrows];
        for bi in 0..self.nbrows {
            for k in self.block_row_ptr[bi]..self.block_row_ptr[bi + 1] {
                let j = 2 * self.block_col[k] as usize;
                let b = &self.blocks[k];
                y[2 * bi] += b[0] * x[j] + b[1] * x[j + 1];
                y[2 * bi + 1] += b[2] * x[j] + b[3] * x[j + 1];
            }
        }
        Ok(y)
    }
}
