//! [`DistOperator`]: a distributed matrix as a [`LinearOperator`] of
//! [`Dist`], with its transpose when QMR needs it.

use crate::backend::{Dist, DistMatrix};
use crate::comm::{comm_error, Communicator};
use crate::halo::{split_rows, HaloBackend, SplitRows};
use crate::partition::RowPartition;
use gpuq_core::{
    scalars_as_bytes, scalars_as_bytes_mut, Error, FusedDot, LinearOperator, Result, Scalar,
};
use gpuq_sparse::{Coo, Csr, Layout, SparseBackend};

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
/// all ranks, 16 bytes plus one scalar an entry); each row of A^T lists its
/// columns in increasing order. Collective. O(nnz log nnz).
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
    let mut coo = Coo::new(mine.len(), rows_part.rows());
    for i in 0..rows.nrows() {
        let (cols, vals) = rows.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let (j, gi) = (j as usize, first + i);
            let q = cols_part
                .owner(j)
                .ok_or_else(|| Error::InvalidArgument(format!("column {j} of {n}")))?;
            if q == rank {
                coo.push(j - mine.start, gi, v)?;
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
    for bytes in &arrived {
        if bytes.len() % entry_bytes != 0 {
            return Err(comm_error("transpose: a truncated entry"));
        }
        for e in bytes.chunks_exact(entry_bytes) {
            let index =
                |k: usize| u64::from_le_bytes(e[k..k + 8].try_into().expect("8 bytes")) as usize;
            let mut v = [T::zero()];
            scalars_as_bytes_mut(&mut v).copy_from_slice(&e[16..]);
            let row = index(0).checked_sub(mine.start).ok_or_else(|| {
                comm_error("transpose: an entry for a row this rank does not own")
            })?;
            coo.push(row, index(8), v[0])?;
        }
    }
    Csr::from_coo_allow_nonfinite(&coo)
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
