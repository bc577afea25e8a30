//! The block diagonal D of a level (bs x bs blocks on the diagonal, seed 002
//! section 8.2) and its inverse, for the Jacobi-type smoothers, the
//! prolongator smoothing and the seed's coarsest solve.

use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A backend's copy of a block diagonal's values (for the CUDA backend, in
/// device memory), as a [`BlockDiagonal`] holds it.
pub trait ResidentBlocks: Send + Sync {
    /// A host copy of the values. Cost: a download of 8 bytes per value.
    fn download(&self) -> Result<Vec<f64>>;

    /// The backend's own type, for the backend that made it to find its data.
    fn as_any(&self) -> &dyn Any;
}

/// The diagonal blocks of a matrix, row-major, bs^2 values per node: a host
/// copy, a backend's copy ([`ResidentBlocks`]), or both, each made on first
/// need and then kept. Clones share both copies: O(1).
#[derive(Clone)]
pub struct BlockDiagonal {
    bs: usize,
    len: usize,
    blocks: Arc<OnceLock<Vec<f64>>>,
    resident: Arc<OnceLock<Arc<dyn ResidentBlocks>>>,
}

impl PartialEq for BlockDiagonal {
    /// The same block size and values (a backend's copy aside; one without a
    /// host copy is downloaded, and one that cannot be equals nothing).
    fn eq(&self, other: &Self) -> bool {
        if self.bs != other.bs || self.len != other.len {
            return false;
        }
        matches!((self.blocks(), other.blocks()), (Ok(x), Ok(y)) if x == y)
    }
}

impl fmt::Debug for BlockDiagonal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("BlockDiagonal");
        d.field("bs", &self.bs);
        match self.blocks.get() {
            Some(blocks) => d.field("blocks", blocks),
            None => d.field("values on the backend", &self.len),
        };
        d.finish()
    }
}

/// Nodes per parallel task of [`BlockDiagonal::mul_into`].
const MUL_TASK: usize = 2048;

/// Nodes per parallel task of the blocks' extraction and inversion.
const NODE_TASK: usize = 4096;

impl BlockDiagonal {
    fn new(bs: usize, blocks: Vec<f64>) -> Self {
        BlockDiagonal {
            bs,
            len: blocks.len(),
            blocks: Arc::new(OnceLock::from(blocks)),
            resident: Arc::default(),
        }
    }

    /// Blocks of `bs` held by a backend only (`len` values: whole blocks),
    /// the host copy downloaded on the first [`BlockDiagonal::blocks`].
    /// Errors as [`BlockDiagonal::from_blocks`].
    pub fn from_resident(bs: usize, len: usize, resident: Arc<dyn ResidentBlocks>) -> Result<Self> {
        check_whole_blocks(bs, len)?;
        Ok(BlockDiagonal {
            bs,
            len,
            blocks: Arc::default(),
            resident: Arc::new(OnceLock::from(resident)),
        })
    }

    /// A backend's copy of the blocks (for the CUDA backend, the values in
    /// device memory), if one was made.
    pub fn resident(&self) -> Option<&dyn ResidentBlocks> {
        self.resident.get().map(|r| r.as_ref())
    }

    /// The backend's copy, made by `make` on first need and then kept (and
    /// shared by the clones).
    pub fn resident_or_init(
        &self,
        make: impl FnOnce() -> Result<Arc<dyn ResidentBlocks>>,
    ) -> Result<&dyn ResidentBlocks> {
        if let Some(r) = self.resident.get() {
            return Ok(r.as_ref());
        }
        let made = make()?;
        Ok(self.resident.get_or_init(|| made).as_ref())
    }

    /// The bs x bs diagonal blocks of `a` (n divisible by bs). With `l1`, each
    /// row's sum of |a_ij| over the columns outside its block is added to the
    /// block's diagonal entry (the l1-Jacobi matrix). O(nnz) with `l1`;
    /// without, a binary search per row for the block's first column (a
    /// row's columns are increasing), O(n (log(row length) + bs)).
    pub fn of(a: &Csr<f64>, bs: usize, l1: bool) -> Self {
        Self::of_shifted(a, bs, l1, 0)
    }

    /// [`BlockDiagonal::of`] for rows whose columns are numbered from
    /// `first` (a rank's rows with the level's global columns, `first` its
    /// first row's): the blocks on columns `first + bs k..`. Without `l1`,
    /// the same values as `of` of the rows renumbered so that those columns
    /// come first (each block's entries summed in the row's order either
    /// way); with `l1`, each row's other entries' magnitudes are added to
    /// its diagonal in the order of its global columns (with `first` = 0,
    /// `of`'s exactly; renumbered rows would sum them in another order).
    /// Cost as `of`'s.
    pub fn of_rows(a: &Csr<f64>, bs: usize, first: usize, l1: bool) -> Self {
        Self::of_shifted(a, bs, l1, first)
    }

    /// [`BlockDiagonal::of`] with node k's block on the columns `first + bs
    /// k..first + bs (k + 1)`.
    fn of_shifted(a: &Csr<f64>, bs: usize, l1: bool, first: usize) -> Self {
        let nodes = a.nrows() / bs;
        let mut blocks = vec![0.0; nodes * bs * bs];
        // Tasks of NODE_TASK nodes, each block made on its own.
        blocks
            .par_chunks_mut(bs * bs * NODE_TASK)
            .enumerate()
            .for_each(|(t, task)| {
                for (kk, blk) in task.chunks_mut(bs * bs).enumerate() {
                    let k = t * NODE_TASK + kk;
                    let (lo, hi) = ((first + bs * k) as u32, (first + bs * (k + 1)) as u32);
                    for r in 0..bs {
                        let (c, v) = a.row(bs * k + r);
                        if !l1 {
                            let first = c.partition_point(|&j| j < lo);
                            for (&j, &x) in c[first..].iter().zip(&v[first..]) {
                                if j >= hi {
                                    break;
                                }
                                blk[r * bs + (j - lo) as usize] += x;
                            }
                            continue;
                        }
                        for (&j, &x) in c.iter().zip(v) {
                            if (lo..hi).contains(&j) {
                                blk[r * bs + (j - lo) as usize] += x;
                            } else {
                                blk[r * bs + r] += x.abs();
                            }
                        }
                    }
                }
            });
        BlockDiagonal::new(bs, blocks)
    }

    /// The block diagonal with the given blocks (row-major, bs^2 values per
    /// node, as [`BlockDiagonal::blocks`] returns them). Errors when the
    /// length is not a multiple of bs^2 or bs is 0.
    pub fn from_blocks(bs: usize, blocks: Vec<f64>) -> Result<Self> {
        check_whole_blocks(bs, blocks.len())?;
        Ok(BlockDiagonal::new(bs, blocks))
    }

    /// Block size.
    pub fn block(&self) -> usize {
        self.bs
    }

    /// The rows the blocks cover (nodes times the block size), wherever the
    /// values are held. O(1).
    pub fn rows(&self) -> usize {
        self.len / self.bs.max(1)
    }

    /// The blocks, row-major, bs^2 values per node: the host copy,
    /// downloaded from the backend's on the first call (see
    /// [`ResidentBlocks::download`]); free afterwards.
    pub fn blocks(&self) -> Result<&[f64]> {
        if let Some(b) = self.blocks.get() {
            return Ok(b);
        }
        let r = self.resident.get().ok_or_else(|| {
            Error::InvalidArgument("a block diagonal with neither a host nor a device copy".into())
        })?;
        let values = r.download()?;
        if values.len() != self.len {
            return Err(Error::shape(
                "block diagonal download",
                self.len,
                values.len(),
            ));
        }
        Ok(self.blocks.get_or_init(|| values))
    }

    /// y = D x. O(n bs); errors as [`BlockDiagonal::blocks`].
    pub fn mul(&self, x: &[f64]) -> Result<Vec<f64>> {
        let mut y = vec![0.0; x.len()];
        self.mul_into(x, &mut y)?;
        Ok(y)
    }

    /// y = D x into `y` (of x's length), each entry summed over its block row
    /// in column order. O(n bs); errors as [`BlockDiagonal::blocks`].
    pub fn mul_into(&self, x: &[f64], y: &mut [f64]) -> Result<()> {
        let bs = self.bs;
        let blocks = self.blocks()?;
        if bs == 1 {
            y.par_chunks_mut(MUL_TASK)
                .zip(x.par_chunks(MUL_TASK))
                .zip(blocks.par_chunks(MUL_TASK))
                .for_each(|((y, x), d)| {
                    for ((yi, xi), di) in y.iter_mut().zip(x).zip(d) {
                        *yi = 0.0 + di * xi;
                    }
                });
            return Ok(());
        }
        y.par_chunks_mut(bs * MUL_TASK)
            .zip(x.par_chunks(bs * MUL_TASK))
            .zip(blocks.par_chunks(bs * bs * MUL_TASK))
            .for_each(|((y, x), blocks)| {
                for ((yk, xk), b) in y
                    .chunks_mut(bs)
                    .zip(x.chunks(bs))
                    .zip(blocks.chunks(bs * bs))
                {
                    for r in 0..bs {
                        let mut s = 0.0;
                        for c in 0..bs {
                            s += b[r * bs + c] * xk[c];
                        }
                        yk[r] = s;
                    }
                }
            });
        Ok(())
    }

    /// The inverse blocks, each by Gauss-Jordan elimination with partial
    /// pivoting (`gpuq_kernels::amg::invert_block`, which a device backend
    /// runs too). Errors naming the first node whose block is singular (a
    /// pivot at or below 1e-12 times the block's largest entry) or not
    /// finite ([`singular_block`]), or as [`BlockDiagonal::blocks`].
    /// O(n bs^3).
    pub fn inverse(&self) -> Result<BlockDiagonal> {
        let bs = self.bs;
        let values = self.blocks()?;
        let mut blocks = vec![0.0; values.len()];
        // Tasks of NODE_TASK nodes, each with its scratch; the first singular
        // node of each task, then the first of all.
        let task = bs * bs * NODE_TASK;
        let singular = blocks
            .par_chunks_mut(task)
            .zip(values.par_chunks(task))
            .enumerate()
            .filter_map(|(t, (out, b))| {
                let mut m = vec![0.0; bs * bs];
                let mut first = None;
                for (kk, (out, b)) in out.chunks_mut(bs * bs).zip(b.chunks(bs * bs)).enumerate() {
                    if !gpuq_kernels::amg::invert_block(b, bs, &mut m, out) && first.is_none() {
                        first = Some(t * NODE_TASK + kk);
                    }
                }
                first
            })
            .min();
        match singular {
            Some(k) => Err(singular_block(k, bs)),
            None => Ok(BlockDiagonal::new(bs, blocks)),
        }
    }

    /// The blocks as a block-diagonal CSR matrix (explicit zeros inside blocks
    /// kept, so the pattern is bs entries per row). O(n bs).
    pub fn to_csr(&self) -> Result<Csr<f64>> {
        let bs = self.bs;
        let values = self.blocks()?;
        let n = values.len() / bs;
        let row_ptr = (0..=n).into_par_iter().map(|i| i * bs).collect();
        let col_idx = (0..n * bs)
            .into_par_iter()
            .map(|e| {
                let (i, c) = (e / bs, e % bs);
                (i / bs * bs + c) as u32
            })
            .collect();
        Csr::try_new(n, n, row_ptr, col_idx, values.par_iter().copied().collect())
    }
}

/// The error of [`BlockDiagonal::inverse`] (and of a backend's inverse) for
/// node `k` (0-based) of blocks of `bs`, whose block is singular or not
/// finite.
pub fn singular_block(k: usize, bs: usize) -> Error {
    Error::Precondition {
        method: "amg",
        reason: format!(
            "the diagonal block of node {} (rows {} to {}, 1-based) is singular",
            k + 1,
            bs * k + 1,
            bs * (k + 1)
        ),
    }
}

/// Errors unless `len` values make whole blocks of `bs` (bs at least 1).
fn check_whole_blocks(bs: usize, len: usize) -> Result<()> {
    if bs == 0 || len % (bs * bs) != 0 {
        return Err(Error::InvalidArgument(format!(
            "{len} block values do not make {bs} x {bs} blocks"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_blocks_times_blocks_is_identity() {
        let a = gpuq_sparse::generators::convdiff2d::<f64>(4, 0.4);
        for bs in [1, 2] {
            let d = BlockDiagonal::of(&a, bs, false);
            let di = d.inverse().unwrap();
            let x: Vec<f64> = (0..16).map(|i| (i as f64 * 0.37).sin()).collect();
            let y = di.mul(&d.mul(&x).unwrap()).unwrap();
            for (p, q) in x.iter().zip(&y) {
                assert!((p - q).abs() < 1e-13);
            }
            let csr = di.to_csr().unwrap();
            assert_eq!(csr.mul_vec(&x).unwrap(), di.mul(&x).unwrap());
        }
        let zero = Csr::<f64>::try_new(2, 2, vec![0, 1, 1], vec![1], vec![1.0]).unwrap();
        assert!(BlockDiagonal::of(&zero, 1, false).inverse().is_err());
    }

    /// Over many tasks of nodes: each block is the matrix's, its inverse
    /// times it the identity, and the error names the first singular node
    /// of all (not the first of some task).
    #[test]
    fn many_nodes_give_their_blocks_and_the_first_singular_node() {
        for bs in [1, 2, 3] {
            let nodes = 3 * NODE_TASK + 17;
            let n = nodes * bs;
            let mut coo = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                coo.push(i, i, 4.0 + (i % 7) as f64).unwrap();
                if i % bs != 0 {
                    coo.push(i, i - 1, -1.0).unwrap();
                }
                coo.push(i, (i * 31) % n, 0.25).unwrap();
            }
            let a = Csr::from_coo(&coo).unwrap();
            let d = BlockDiagonal::of(&a, bs, false);
            for k in [0, NODE_TASK - 1, NODE_TASK, nodes - 1] {
                for r in 0..bs {
                    for c in 0..bs {
                        let (cols, vals) = a.row(bs * k + r);
                        let want = cols
                            .iter()
                            .position(|&j| j as usize == bs * k + c)
                            .map_or(0.0, |at| vals[at]);
                        assert_eq!(
                            d.blocks().unwrap()[bs * bs * k + r * bs + c],
                            want,
                            "node {k}"
                        );
                    }
                }
            }
            let di = d.inverse().unwrap();
            let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
            for (p, q) in x.iter().zip(&di.mul(&d.mul(&x).unwrap()).unwrap()) {
                assert!((p - q).abs() < 1e-12);
            }
            // Zero blocks at a late task's node, then at an earlier task's.
            let mut blocks = d.blocks().unwrap().to_vec();
            for k in [2 * NODE_TASK + 5, NODE_TASK + 3] {
                blocks[bs * bs * k..bs * bs * (k + 1)].fill(0.0);
            }
            let err = BlockDiagonal::from_blocks(bs, blocks)
                .unwrap()
                .inverse()
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("node {} ", NODE_TASK + 4)), "{err}");
        }
    }

    /// Rows whose columns are numbered from `first` (a middle rank's rows
    /// of a matrix) give the blocks of the same rows with their own
    /// columns moved to the front.
    #[test]
    fn blocks_of_a_ranks_rows_are_those_of_its_extended_rows() {
        let a = gpuq_sparse::generators::convdiff2d::<f64>(6, 0.3);
        for bs in [1, 2, 3] {
            let (first, n) = (6, 18);
            let idx: Vec<usize> = (first..first + n).collect();
            let rows = a.select_rows(&idx).unwrap();
            // own columns first, the others after them in their order
            let order: Vec<usize> = idx
                .iter()
                .copied()
                .chain((0..a.ncols()).filter(|c| !idx.contains(c)))
                .collect();
            let mut coo = gpuq_sparse::Coo::new(n, a.ncols());
            for i in 0..n {
                let (c, v) = rows.row(i);
                for (&j, &x) in c.iter().zip(v) {
                    let at = order.iter().position(|&o| o == j as usize).unwrap();
                    coo.push(i, at, x).unwrap();
                }
            }
            let ext = Csr::from_coo(&coo).unwrap();
            assert_eq!(
                BlockDiagonal::of_rows(&rows, bs, first, false)
                    .blocks()
                    .unwrap(),
                BlockDiagonal::of(&ext, bs, false).blocks().unwrap()
            );
            // l1: the same sums in the global columns' order.
            let (l1, l1_ext) = (
                BlockDiagonal::of_rows(&rows, bs, first, true),
                BlockDiagonal::of(&ext, bs, true),
            );
            for (x, y) in l1.blocks().unwrap().iter().zip(l1_ext.blocks().unwrap()) {
                assert!((x - y).abs() <= 1e-14 * y.abs(), "{x} vs {y}");
            }
            assert_ne!(
                l1.blocks().unwrap(),
                BlockDiagonal::of_rows(&rows, bs, first, false)
                    .blocks()
                    .unwrap()
            );
        }
        // From the first row on, exactly `of`'s.
        let top = a.select_rows(&(0..12).collect::<Vec<_>>()).unwrap();
        for l1 in [false, true] {
            assert_eq!(
                BlockDiagonal::of_rows(&top, 3, 0, l1).blocks().unwrap(),
                BlockDiagonal::of(&top, 3, l1).blocks().unwrap()
            );
        }
    }

    #[test]
    fn blocks_are_the_dense_diagonal_blocks_and_l1_adds_the_rest() {
        // 12 rows, 15 columns (ghost columns past the square part, as a
        // rank's extended block has), some rows empty or without diagonal.
        let (n, m) = (12usize, 15usize);
        let mut coo = gpuq_sparse::Coo::new(n, m);
        for i in 0..n {
            for j in 0..m {
                if (i * 7 + j * 3) % 5 < 2 && i % 4 != 3 {
                    coo.push(i, j, (i as f64 + 1.0) * 0.5 - j as f64 * 0.25)
                        .unwrap();
                }
            }
        }
        let a = Csr::from_coo(&coo).unwrap();
        let dense = a.to_dense();
        for bs in [1, 2, 3, 4] {
            for l1 in [false, true] {
                let got = BlockDiagonal::of(&a, bs, l1);
                for k in 0..n / bs {
                    for r in 0..bs {
                        let i = bs * k + r;
                        let outside: f64 = (0..m)
                            .filter(|&j| j / bs != k)
                            .map(|j| dense[i * m + j].abs())
                            .sum();
                        for c in 0..bs {
                            let mut want = dense[i * m + bs * k + c];
                            if l1 && c == r {
                                want += outside;
                            }
                            let have = got.blocks().unwrap()[(k * bs + r) * bs + c];
                            assert!((have - want).abs() < 1e-14, "bs {bs}, l1 {l1}, ({i}, {c})");
                        }
                    }
                }
            }
        }
    }
}
