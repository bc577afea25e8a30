//! [`DistOperator`]: a distributed matrix as a [`LinearOperator`] of
//! [`Dist`], with its transpose when QMR needs it.

use crate::backend::{Dist, DistMatrix};
use crate::comm::{comm_error, Communicator};
use crate::halo::{split_rows, HaloBackend, SplitRows, TASK_ROWS};
use crate::partition::RowPartition;
use gpuq_core::{
    scalars_as_bytes, scalars_as_bytes_mut, Error, FusedDot, LinearOperator, Result, Scalar,
};
use gpuq_sparse::{join_pieces, transposed_pieces, Csr, Layout, RowPiece, SparseBackend};

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

    /// The operator of a matrix already distributed (`a`: made by
    /// [`DistMatrix::from_split`], or a distributed AMG hierarchy's finest
    /// level). O(1).
    pub fn from_matrix(dist: &Dist<B>, a: DistMatrix<B, T>) -> Self {
        DistOperator {
            backend: dist.clone(),
            a,
            at: None,
        }
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
/// An entry (i, j) whose column this rank owns stays here; every other goes
/// to the owner of row j of A^T (one exchange among all ranks, 16 bytes plus
/// one scalar an entry, encoded by tasks of rows in parallel). The rank's own
/// entries are transposed by tasks of rows into pieces ([`RowPiece`]), the
/// lower and the higher ranks' entries arrive as a piece each (in rank order,
/// then row order), and the pieces are joined
/// in rank order ([`join_pieces`]): the ranks' rows, and so A^T's columns, are
/// unique and increase from rank to rank, so each row comes out sorted, as a
/// sequential pass in rank order would give it, with no sort and no atomic.
/// Collective. O(nnz + tasks m), m the rank's rows of A^T, tasks m at most
/// 3 nnz / 4 ([`transposed_pieces`]).
pub(crate) fn transpose_rows<T: Scalar>(
    comm: &dyn Communicator,
    rows_part: &RowPartition,
    cols_part: &RowPartition,
    rows: &Csr<T>,
) -> Result<Csr<T>> {
    use rayon::prelude::*;
    let (rank, size, n) = (comm.rank(), comm.size(), cols_part.rows());
    let first = rows_part.range(rank).start;
    let mine = cols_part.range(rank);
    // Each task's entries for the other ranks, encoded in row order.
    let tasks: Vec<Vec<Vec<u8>>> = (0..rows.nrows().div_ceil(TASK_ROWS))
        .into_par_iter()
        .map(|t| -> Result<Vec<Vec<u8>>> {
            let mut out = vec![Vec::new(); size];
            for i in t * TASK_ROWS..((t + 1) * TASK_ROWS).min(rows.nrows()) {
                let (cols, vals) = rows.row(i);
                for (&j, &v) in cols.iter().zip(vals) {
                    let j = j as usize;
                    if mine.contains(&j) {
                        continue;
                    }
                    let q = cols_part
                        .owner(j)
                        .ok_or_else(|| Error::InvalidArgument(format!("column {j} of {n}")))?;
                    push_entry(&mut out[q], j, first + i, v);
                }
            }
            Ok(out)
        })
        .collect::<Result<_>>()?;
    let others: Vec<usize> = (0..size).filter(|&q| q != rank).collect();
    let arrived = exchange_tasks(comm, TRANSPOSE_TAG, tasks)?;
    let decode = |bytes: &[u8]| -> Result<Vec<(usize, u32, T)>> {
        entries_of::<T>(bytes, "transpose")?
            .map(|(row, col, v)| {
                let row = row
                    .checked_sub(mine.start)
                    .filter(|&r| r < mine.len())
                    .ok_or_else(|| {
                        comm_error("transpose: an entry for a row this rank does not own")
                    })?;
                let col = u32::try_from(col)
                    .map_err(|_| comm_error("transpose: a column beyond 32 bits"))?;
                Ok((row, col, v))
            })
            .collect()
    };
    // The lower ranks' entries as one piece and the higher ranks' as another,
    // each in rank order, then in each rank's (increasing) row order: two
    // pieces whatever the rank count.
    let below = others.partition_point(|&q| q < rank);
    let entries: Vec<Vec<(usize, u32, T)>> = arrived
        .par_iter()
        .map(|bytes| decode(bytes))
        .collect::<Result<_>>()?;
    drop(arrived);
    let (lower, higher) = entries.split_at(below);
    let (lower, higher) = rayon::join(
        || RowPiece::of_entries(mine.len(), &lower.concat()),
        || RowPiece::of_entries(mine.len(), &higher.concat()),
    );
    drop(entries);
    let own = transposed_pieces(
        rows,
        mine.len(),
        |j| {
            let j = j as usize;
            mine.contains(&j).then(|| j - mine.start)
        },
        |i| (first + i) as u32,
    );
    // The lower ranks' piece, this rank's, then the higher ranks'.
    let mut pieces = Vec::with_capacity(own.len() + 2);
    pieces.push(lower?);
    pieces.extend(own);
    pieces.push(higher?);
    join_pieces(mine.len(), rows_part.rows(), &pieces)
}

/// Appends the entry (row, column, value) to a message: the indices in 8
/// bytes each, little-endian, then the value's bytes.
pub(crate) fn push_entry<T: Scalar>(buf: &mut Vec<u8>, row: usize, col: usize, v: T) {
    buf.extend_from_slice(&(row as u64).to_le_bytes());
    buf.extend_from_slice(&(col as u64).to_le_bytes());
    buf.extend_from_slice(scalars_as_bytes(&[v]));
}

/// The entries (row, column, value) of a message of [`push_entry`]s, in
/// order. Errors on a truncated entry (`what` names the exchange). O(len).
pub(crate) fn entries_of<'b, T: Scalar>(
    bytes: &'b [u8],
    what: &str,
) -> Result<impl Iterator<Item = (usize, usize, T)> + 'b> {
    let entry_bytes = 16 + std::mem::size_of::<T>();
    if bytes.len() % entry_bytes != 0 {
        return Err(comm_error(format!("{what}: a truncated entry")));
    }
    Ok(bytes.chunks_exact(entry_bytes).map(|e| {
        let index =
            |k: usize| u64::from_le_bytes(e[k..k + 8].try_into().expect("8 bytes")) as usize;
        let mut v = [T::zero()];
        scalars_as_bytes_mut(&mut v).copy_from_slice(&e[16..]);
        (index(0), index(8), v[0])
    }))
}

/// Every other rank's message from this rank's `tasks` (task t's bytes for
/// rank q in `tasks[t][q]`, joined in task order into one message per rank;
/// nothing to itself), exchanged with every other rank under `tag`: the
/// messages received, one per other rank in rank order. Errors when a
/// message is missing. Collective.
pub(crate) fn exchange_tasks(
    comm: &dyn Communicator,
    tag: u16,
    tasks: Vec<Vec<Vec<u8>>>,
) -> Result<Vec<Vec<u8>>> {
    let (rank, size) = (comm.rank(), comm.size());
    let others: Vec<usize> = (0..size).filter(|&q| q != rank).collect();
    let outgoing: Vec<Vec<u8>> = (0..size)
        .map(|q| tasks.iter().map(|t| &t[q][..]).collect::<Vec<_>>().concat())
        .collect();
    drop(tasks);
    let sends: Vec<(usize, &[u8])> = others.iter().map(|&q| (q, &outgoing[q][..])).collect();
    let arrived = comm.exchange(tag, &sends, &others, &mut || Ok(()))?;
    if arrived.len() != others.len() {
        return Err(comm_error("a message per other rank expected"));
    }
    Ok(arrived)
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
pub(crate) mod tests {
    use super::*;
    use crate::{rows_of, ThreadComm};

    /// A 60 x 45 matrix of scattered entries (some rows and columns empty):
    /// a rank's rows of a prolongator-like operator in the transposes' tests.
    pub(crate) fn scattered() -> Csr<f64> {
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
