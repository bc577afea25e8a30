//! [`DistOperator`]: a distributed matrix as a [`LinearOperator`] of
//! [`Dist`], with its transpose when QMR needs it.

use crate::backend::{Dist, DistMatrix};
use crate::comm::{comm_error, Communicator};
use crate::halo::{split_rows, HaloBackend, SplitRows};
use crate::partition::RowPartition;
use gpuq_core::{
    scalars_as_bytes, scalars_as_bytes_mut, Error, FusedDot, LinearOperator, Result, Scalar,
};
use gpuq_sparse::{Csr, Layout, SparseBackend};

/// The tag of the transpose's entries.
const TRANSPOSE_TAG: u16 = 3;

/// A square matrix distributed by rows over the ranks of a [`Dist`], applied
/// by halo exchange and local SpMV; with [`DistOperator::with_transpose`] it
/// also applies A^T (distributed the same way), which QMR needs.
pub struct DistOperator<B: HaloBackend, T: Scalar> {
    backend: Dist<B>,
    a: DistMatrix<B, T>,
    at: Option<DistMatrix<B, T>>,
}

impl<B: HaloBackend, T: Scalar> DistOperator<B, T> {
    /// The operator of this rank's split rows (see [`DistMatrix::from_split`]).
    /// Collective.
    pub fn new(
        dist: &Dist<B>,
        partition: &RowPartition,
        split: &SplitRows<T>,
        layout: Layout,
    ) -> Result<Self> {
        Ok(DistOperator {
            backend: dist.clone(),
            a: DistMatrix::from_split(dist, partition, split, layout)?,
            at: None,
        })
    }

    /// [`DistOperator::new`] from the rank's rows (global columns), with A^T
    /// built as well: every entry (i, j) goes to the owner of row j of A^T
    /// (one exchange among all ranks, 16 bytes plus one scalar an entry),
    /// then A^T's rows are split and planned like A's. Collective.
    pub fn with_transpose(
        dist: &Dist<B>,
        partition: &RowPartition,
        rows: &Csr<T>,
        split: &SplitRows<T>,
        layout: Layout,
    ) -> Result<Self> {
        let mut op = Self::new(dist, partition, split, layout)?;
        let rows_t = transpose_rows(dist.comm(), partition, partition, rows)?;
        let split_t = dist.agree(split_rows(partition, dist.comm().rank(), &rows_t))?;
        op.at = Some(DistMatrix::from_split(dist, partition, &split_t, layout)?);
        Ok(op)
    }

    /// The distributed matrix.
    pub fn matrix(&self) -> &DistMatrix<B, T> {
        &self.a
    }
}

/// This rank's rows of A^T (global columns), from every rank's rows of A:
/// A's rows split by `rows_part`, its columns (A^T's rows) by `cols_part`.
/// Every entry (i, j) goes to the owner of row j of A^T (one exchange among
/// all ranks, 16 bytes plus one scalar an entry). The entries are placed by
/// a counting sort over A^T's rows taking the ranks' entries in rank order,
/// each rank's in its row order, so each row of A^T lists its columns in
/// increasing order with no sort. Collective. O(nnz).
pub(crate) fn transpose_rows<T: Scalar>(
    comm: &dyn Communicator,
    rows_part: &RowPartition,
    cols_part: &RowPartition,
    rows: &Csr<T>,
) -> Result<Csr<T>> {
    let (rank, size, n) = (comm.rank(), comm.size(), cols_part.rows());
    let first = rows_part.range(rank).start;
    let mine = cols_part.range(rank);
    let entry_bytes = 16 + std::mem::size_of::<T>();
    let mut outgoing: Vec<Vec<u8>> = vec![Vec::new(); size];
    // (row of A^T on this rank, column, value), this rank's own entries.
    let mut local: Vec<(usize, u32, T)> = Vec::new();
    for i in 0..rows.nrows() {
        let (cols, vals) = rows.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let (j, gi) = (j as usize, first + i);
            let q = cols_part
                .owner(j)
                .ok_or_else(|| Error::InvalidArgument(format!("column {j} of {n}")))?;
            if q == rank {
                local.push((j - mine.start, gi as u32, v));
            } else {
                let buf = &mut outgoing[q];
                buf.extend_from_slice(&(j as u64).to_le_bytes());
                buf.extend_from_slice(&(gi as u64).to_le_bytes());
                buf.extend_from_slice(scalars_as_bytes(&[v]));
            }
        }
    }
    let others: Vec<usize> = (0..size).filter(|&q| q != rank).collect();
    let sends: Vec<(usize, &[u8])> = others.iter().map(|&q| (q, &outgoing[q][..])).collect();
    let arrived = comm.exchange(TRANSPOSE_TAG, &sends, &others, &mut || Ok(()))?;
    let decode = |bytes: &[u8]| -> Result<Vec<(usize, u32, T)>> {
        if bytes.len() % entry_bytes != 0 {
            return Err(comm_error("transpose: a truncated entry"));
        }
        bytes
            .chunks_exact(entry_bytes)
            .map(|e| {
                let index = |k: usize| {
                    u64::from_le_bytes(e[k..k + 8].try_into().expect("8 bytes")) as usize
                };
                let mut v = [T::zero()];
                scalars_as_bytes_mut(&mut v).copy_from_slice(&e[16..]);
                let row = index(0)
                    .checked_sub(mine.start)
                    .filter(|&r| r < mine.len())
                    .ok_or_else(|| {
                        comm_error("transpose: an entry for a row this rank does not own")
                    })?;
                let col = u32::try_from(index(8))
                    .map_err(|_| comm_error("transpose: a column beyond 32 bits"))?;
                Ok((row, col, v[0]))
            })
            .collect()
    };
    // The ranks' entries in rank order: columns (A's global rows) increase
    // from one rank to the next, and within a rank's entries per row.
    let mut parts: Vec<Vec<(usize, u32, T)>> = Vec::with_capacity(size);
    let mut arrived = arrived.iter();
    for q in 0..size {
        if q == rank {
            parts.push(std::mem::take(&mut local));
        } else {
            let bytes = arrived
                .next()
                .ok_or_else(|| comm_error("transpose: a rank sent nothing"))?;
            parts.push(decode(bytes)?);
        }
    }
    let mut ptr = vec![0usize; mine.len() + 1];
    for &(r, _, _) in parts.iter().flatten() {
        ptr[r + 1] += 1;
    }
    for r in 0..mine.len() {
        ptr[r + 1] += ptr[r];
    }
    let nnz = ptr[mine.len()];
    let mut next = ptr.clone();
    let (mut cols, mut vals) = (vec![0u32; nnz], vec![T::zero(); nnz]);
    for &(r, c, v) in parts.iter().flatten() {
        let at = next[r];
        cols[at] = c;
        vals[at] = v;
        next[r] += 1;
    }
    Csr::try_new_allow_nonfinite(mine.len(), rows_part.rows(), ptr, cols, vals)
}

impl<B: HaloBackend, T: Scalar> LinearOperator<Dist<B>, T> for DistOperator<B, T> {
    /// The rank's block, (its rows, its rows), as the solvers check it.
    fn shape(&self) -> (usize, usize) {
        gpuq_sparse::DeviceMatrix::shape(&self.a)
    }

    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.backend.spmv(T::one(), &self.a, x, T::zero(), y)
    }

    fn apply_dotc(&self, backend: &Dist<B>, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<T> {
        backend.spmv_dotc(&self.a, x, y)
    }

    fn apply_dot(
        &self,
        backend: &Dist<B>,
        x: &B::Vector<T>,
        y: &mut B::Vector<T>,
        dot: FusedDot<'_, Dist<B>, T>,
    ) -> Result<bool> {
        backend.spmv_dot(&self.a, x, y, dot)
    }

    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        match &self.at {
            Some(at) => self.backend.spmv(T::one(), at, x, T::zero(), y),
            None => Err(Error::Precondition {
                method: "transpose",
                reason: "distributed operator built without its transpose (use DistOperator::with_transpose)".into(),
            }),
        }
    }

    fn name(&self) -> &str {
        "dist-csr"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{rows_of, ThreadComm};

    /// A 60 x 45 matrix of scattered entries (some rows and columns empty).
    fn scattered() -> Csr<f64> {
        let mut coo = gpuq_sparse::Coo::new(60, 45);
        for i in 0..60 {
            for k in 0..(i % 7) {
                let j = (i * 13 + k * 29) % 45;
                coo.push(i, j, (i * 45 + j) as f64 + 0.5).unwrap();
            }
        }
        Csr::from_coo(&coo).unwrap()
    }

    #[test]
    fn the_ranks_rows_of_the_transpose_are_the_serial_transposes() {
        let a = scattered();
        let whole = a.transpose(false);
        for ranks in 1..=4 {
            let rows_part = RowPartition::contiguous(a.nrows(), ranks).unwrap();
            // Columns split unevenly, one rank owning none where there are four.
            let counts = match ranks {
                4 => vec![20, 0, 5, 20],
                r => RowPartition::contiguous(a.ncols(), r)
                    .unwrap()
                    .starts()
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .collect(),
            };
            let cols_part = RowPartition::from_counts(&counts).unwrap();
            let parts = ThreadComm::run(ranks, |comm| {
                let rows = rows_of(&a, &rows_part, comm.rank()).unwrap();
                transpose_rows(&comm, &rows_part, &cols_part, &rows).unwrap()
            })
            .unwrap();
            for (q, t) in parts.iter().enumerate() {
                assert_eq!(
                    t,
                    &rows_of(&whole, &cols_part, q).unwrap(),
                    "{ranks} ranks, rank {q}"
                );
            }
        }
    }
}
