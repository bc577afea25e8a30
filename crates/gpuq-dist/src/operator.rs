//! [`DistOperator`]: a distributed matrix as a [`LinearOperator`] of
//! [`Dist`], with its transpose when QMR needs it.

use crate::backend::{Dist, DistMatrix};
use crate::comm::{comm_error, Communicator};
use crate::halo::{split_rows, task_slices, HaloBackend, SplitRows, TASK_ROWS};
use crate::partition::RowPartition;
use gpuq_core::{
    scalars_as_bytes, scalars_as_bytes_mut, Error, FusedDot, LinearOperator, Result, Scalar,
};
use gpuq_sparse::par_row_pointers;
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
/// An entry (i, j) whose column this rank owns stays here; every other goes
/// to the owner of row j of A^T (one exchange among all ranks, 16 bytes plus
/// one scalar an entry, encoded by tasks of rows in parallel). Entries are
/// counted and placed into A^T's rows in parallel, then each row is sorted
/// by column: the ranks' rows, and so A^T's columns, are unique and
/// increase from rank to rank, so the rows are those of a sequential pass
/// in rank order. Collective. O(nnz log(row length)).
pub(crate) fn transpose_rows<T: Scalar>(
    comm: &dyn Communicator,
    rows_part: &RowPartition,
    cols_part: &RowPartition,
    rows: &Csr<T>,
) -> Result<Csr<T>> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let (rank, size, n) = (comm.rank(), comm.size(), cols_part.rows());
    let first = rows_part.range(rank).start;
    let mine = cols_part.range(rank);
    let entry_bytes = 16 + std::mem::size_of::<T>();
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
                    let buf = &mut out[q];
                    buf.extend_from_slice(&(j as u64).to_le_bytes());
                    buf.extend_from_slice(&((first + i) as u64).to_le_bytes());
                    buf.extend_from_slice(scalars_as_bytes(&[v]));
                }
            }
            Ok(out)
        })
        .collect::<Result<_>>()?;
    let others: Vec<usize> = (0..size).filter(|&q| q != rank).collect();
    let outgoing: Vec<Vec<u8>> = (0..size)
        .map(|q| tasks.iter().map(|t| &t[q][..]).collect::<Vec<_>>().concat())
        .collect();
    drop(tasks);
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
    let remote: Vec<(usize, u32, T)> = arrived
        .iter()
        .map(|bytes| decode(bytes))
        .collect::<Result<Vec<_>>>()?
        .concat();
    let own = |f: &(dyn Fn(usize, u32, T) + Sync)| {
        (0..rows.nrows()).into_par_iter().for_each(|i| {
            let (cols, vals) = rows.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                if mine.contains(&(j as usize)) {
                    f(j as usize - mine.start, (first + i) as u32, v);
                }
            }
        })
    };
    let next: Vec<AtomicUsize> = (0..mine.len())
        .into_par_iter()
        .map(|_| AtomicUsize::new(0))
        .collect();
    own(&|r, _, _| {
        next[r].fetch_add(1, Relaxed);
    });
    for &(r, _, _) in &remote {
        next[r].fetch_add(1, Relaxed);
    }
    let ptr = par_row_pointers(mine.len(), |r| next[r].load(Relaxed));
    next.par_iter()
        .zip(&ptr[..mine.len()])
        .for_each(|(c, &start)| c.store(start, Relaxed));
    let nnz = ptr[mine.len()];
    let (mut cols, mut vals) = (vec![0u32; nnz], vec![T::zero(); nnz]);
    {
        let (col_slots, val_slots) = (
            SharedSlots(cols.as_mut_ptr()),
            SharedSlots(vals.as_mut_ptr()),
        );
        let place = |r: usize, c: u32, v: T| {
            let at = next[r].fetch_add(1, Relaxed);
            // SAFETY: `at` is taken once, from row r's slots (counted above).
            unsafe {
                col_slots.write(at, c);
                val_slots.write(at, v);
            }
        };
        own(&place);
        remote.iter().for_each(|&(r, c, v)| place(r, c, v));
    }
    sort_rows(&ptr, &mut cols, &mut vals);
    Csr::try_new_allow_nonfinite(mine.len(), rows_part.rows(), ptr, cols, vals)
}

/// The slots of a vector written through a shared reference, each once.
struct SharedSlots<T>(*mut T);

// SAFETY: writers write distinct slots.
unsafe impl<T: Send> Sync for SharedSlots<T> {}

impl<T> SharedSlots<T> {
    /// Writes slot `at`.
    ///
    /// # Safety
    /// `at` is in bounds and written by no other thread.
    unsafe fn write(&self, at: usize, v: T) {
        self.0.add(at).write(v);
    }
}

/// Sorts each row of a CSR matrix's arrays by column, in parallel tasks of
/// rows. O(nnz log(row length)).
fn sort_rows<T: Scalar>(ptr: &[usize], cols: &mut [u32], vals: &mut [T]) {
    use rayon::prelude::*;
    let nrows = ptr.len() - 1;
    let (c_tasks, v_tasks) = (task_slices(cols, ptr), task_slices(vals, ptr));
    c_tasks
        .into_par_iter()
        .zip(v_tasks)
        .enumerate()
        .for_each_init(Vec::new, |pairs, (t, (c, v))| {
            let first = t * TASK_ROWS;
            for i in first..(first + TASK_ROWS).min(nrows) {
                let at = ptr[i] - ptr[first]..ptr[i + 1] - ptr[first];
                let (c, v) = (&mut c[at.clone()], &mut v[at]);
                if c.windows(2).all(|w| w[0] < w[1]) {
                    continue;
                }
                pairs.clear();
                pairs.extend(c.iter().copied().zip(v.iter().copied()));
                pairs.sort_unstable_by_key(|&(j, _)| j);
                for ((cj, vj), &(j, x)) in c.iter_mut().zip(v.iter_mut()).zip(pairs.iter()) {
                    (*cj, *vj) = (j, x);
                }
            }
        });
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
