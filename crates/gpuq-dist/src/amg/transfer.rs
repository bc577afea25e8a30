//! A level's matrices on a rank, split for the cycle ([`LevelSplit`]): A's
//! and R = P^T's rows by the level's columns, P's by the coarse columns the
//! rank owns, each owned block held where the setup left it ([`LevelMatrix`]:
//! on the host, or on the rank's GPU); and the transfer operators made so
//! ([`transfer_operators`]).

use super::setup::{DistSetupKernels, OwnedTransfer};
use crate::comm::{agree, comm_error, Communicator};
use crate::ghost_rows::GhostRows;
use crate::halo::{ghost_block_of_outside, split_columns, TASK_ROWS};
use crate::operator::{entries_of, exchange_tasks, push_entry};
use crate::partition::RowPartition;
use gpuq_amg::LevelMatrix;
use gpuq_core::{Error, Result};
use gpuq_sparse::{par_fill_rows, par_row_pointers, par_transpose, Csr};
use rayon::prelude::*;
use std::ops::Range;

/// The tag of the transpose's entries (P's ghost-column entries sent to
/// the owners of their coarse rows of R).
const TRANSFER_TAG: u16 = 4;

/// A rank's rows of a level's matrix split by columns: the block on the
/// columns the rank owns (local column numbers; on the host or kept by the
/// backend) and the block on the others (`ghost_cols[k]` the global column
/// of its column k, increasing).
#[derive(Clone, Debug)]
pub(crate) struct LevelSplit {
    /// The rows on the rank's own columns, numbered from `first`.
    pub(crate) owned: LevelMatrix,
    /// The rows on the other columns, numbered by `ghost_cols`, held by
    /// their non-empty rows.
    pub(crate) ghost: GhostRows,
    /// The global column of each ghost column, increasing.
    pub(crate) ghost_cols: Vec<usize>,
    /// The global column of owned column 0.
    pub(crate) first: usize,
    /// The operator's global columns.
    pub(crate) ncols: usize,
}

impl LevelSplit {
    /// The rows with global columns (each row's ghosts below `first`, its
    /// owned entries, then the ghosts above them). The owned block comes
    /// down from the backend if only it holds one ([`LevelMatrix::host`]).
    /// O(nnz), rows in parallel.
    pub(crate) fn global(&self) -> Result<Csr<f64>> {
        let owned = self.owned.host()?;
        let below = self.ghost_cols.partition_point(|&c| c < self.first);
        let first = self.first as u32;
        let ptr = par_row_pointers(owned.nrows(), |i| {
            owned.row(i).0.len() + self.ghost.row(i).0.len()
        });
        let (cols, vals) = par_fill_rows(
            &ptr,
            || (),
            |i, _, c, v| {
                let ((oc, ov), (gc, gv)) = (owned.row(i), self.ghost.row(i));
                let split = gc.partition_point(|&k| (k as usize) < below);
                let global = |k: u32| self.ghost_cols[k as usize] as u32;
                let entries = gc[..split]
                    .iter()
                    .map(|&k| global(k))
                    .zip(&gv[..split])
                    .chain(oc.iter().map(|&j| first + j).zip(ov))
                    .chain(gc[split..].iter().map(|&k| global(k)).zip(&gv[split..]));
                for (at, (j, &x)) in entries.enumerate() {
                    c[at] = j;
                    v[at] = x;
                }
            },
        );
        Csr::try_new_allow_nonfinite(owned.nrows(), self.ncols, ptr, cols, vals)
    }

    /// The rows over the owned then the ghost columns, on the host (the
    /// owned block downloaded if only the backend holds it). O(nnz).
    pub(crate) fn extended(&self) -> Result<Csr<f64>> {
        self.owned.host()?.beside(&self.ghost.to_csr()?)
    }
}

/// P (this rank's rows `p` of a prolongator from `fine` to `coarse`, global
/// coarse columns, wherever held) split by the
/// coarse columns, and R = P^T's rows for the coarse rows the rank owns
/// split by the fine columns. The owned blocks come from the backend
/// ([`DistSetupKernels::owned_transfer`]: P's block cut from its copy and
/// transposed there, and only P's entries outside the rank's coarse
/// columns brought to the host), else from the host (P split, its owned block
/// transposed in parallel). P's ghost-column entries go to the owners of
/// their coarse rows (one exchange among all ranks, 24 bytes an entry),
/// and arrive as R's ghost block: in rank order, then in the sender's row
/// order, so R's ghost columns and each row's entries come out increasing
/// with no sort. Equal entry for entry to R = P^T split as
/// [`split_columns`] splits it. Collective. O(nnz) on the host without a
/// backend's copy, O(ghost entries) with one.
pub(crate) fn transfer_operators(
    (comm, local): (&dyn Communicator, &dyn DistSetupKernels),
    (fine, coarse): (&RowPartition, &RowPartition),
    p: &LevelMatrix,
) -> Result<(LevelSplit, LevelSplit)> {
    let rank = comm.rank();
    let (own, mine) = (fine.range(rank), coarse.range(rank));
    let made = local
        .owned_transfer(p, mine.clone())
        .and_then(|kept| match kept {
            Some(OwnedTransfer { p, r, outside }) => {
                let (ghost, ghost_cols) = ghost_block_of_outside(coarse, rank, outside)?;
                Ok((p, r, ghost, ghost_cols))
            }
            None => {
                let split = split_columns(coarse, rank, p.host()?)?;
                let r_owned = par_transpose(&split.owned)?;
                Ok((
                    LevelMatrix::from_host(split.owned),
                    LevelMatrix::from_host(r_owned),
                    GhostRows::of_csr(&split.ghost)?,
                    split.ghost_cols,
                ))
            }
        });
    // Every rank's checks agreed before the exchange, so that no rank waits
    // for one that left.
    let checked = made.and_then(|(p_owned, r_owned, ghost, ghost_cols)| {
        if p_owned.shape() != (own.len(), mine.len()) || r_owned.shape() != (mine.len(), own.len())
        {
            return Err(Error::shape(
                "the owned blocks of P and R",
                format!("{} x {}", own.len(), mine.len()),
                format!("{:?} and {:?}", p_owned.shape(), r_owned.shape()),
            ));
        }
        let owners: Vec<usize> = ghost_cols
            .iter()
            .map(|&j| {
                coarse.owner(j).ok_or_else(|| {
                    Error::InvalidArgument(format!("coarse column {j} of {}", coarse.rows()))
                })
            })
            .collect::<Result<_>>()?;
        Ok((p_owned, r_owned, ghost, ghost_cols, owners))
    });
    let (p_owned, r_owned, ghost, ghost_cols, owners) = agree(comm, checked)?;
    let (r_ghost, r_ghost_cols) =
        exchange_ghost_entries(comm, (own.start, &mine), (&ghost, &ghost_cols, &owners))?;
    Ok((
        LevelSplit {
            owned: p_owned,
            ghost,
            ghost_cols,
            first: mine.start,
            ncols: coarse.rows(),
        },
        LevelSplit {
            owned: r_owned,
            ghost: r_ghost,
            ghost_cols: r_ghost_cols,
            first: own.start,
            ncols: fine.rows(),
        },
    ))
}

/// R's ghost block and its ghost columns: every entry (i, k) of P's ghost
/// block `ghost` (`ghost_cols[k]` its coarse column, owned by `owners[k]`)
/// sent as (coarse row, fine row `first` + i, value) to that owner; what
/// arrives (for this rank's coarse rows `mine`) numbered by the fine
/// columns met, in rank order. Errors on an entry for another rank's row
/// or out of order. Collective. O(P's ghost rows and entries) to send.
fn exchange_ghost_entries(
    comm: &dyn Communicator,
    (first, mine): (usize, &Range<usize>),
    (ghost, ghost_cols, owners): (&GhostRows, &[usize], &[usize]),
) -> Result<(GhostRows, Vec<usize>)> {
    let size = comm.size();
    let (rows, block) = (ghost.rows(), ghost.block());
    // Each task's entries for the other ranks, encoded in row order.
    let tasks: Vec<Vec<Vec<u8>>> = (0..rows.len().div_ceil(TASK_ROWS))
        .into_par_iter()
        .map(|t| {
            let mut out = vec![Vec::new(); size];
            let from = t * TASK_ROWS;
            let task = &rows[from..(from + TASK_ROWS).min(rows.len())];
            for (at, &i) in (from..).zip(task) {
                let (cols, vals) = block.row(at);
                let i = i as usize;
                for (&k, &v) in cols.iter().zip(vals) {
                    let buf = &mut out[owners[k as usize]];
                    push_entry(buf, ghost_cols[k as usize], first + i, v);
                }
            }
            out
        })
        .collect();
    let arrived = exchange_tasks(comm, TRANSFER_TAG, tasks)?;
    agree(comm, ghost_entries_of(&arrived, mine))
}

/// R's ghost block and its columns from the entries that `arrived` (one
/// message per other rank, in rank order) for this rank's coarse rows
/// `mine`. Errors on a truncated entry, an entry for another rank's row, or
/// entries out of column order. O(entries log entries): nothing per row of
/// `mine` that receives none.
fn ghost_entries_of(arrived: &[Vec<u8>], mine: &Range<usize>) -> Result<(GhostRows, Vec<usize>)> {
    if u32::try_from(mine.len()).is_err() {
        return Err(Error::InvalidArgument(format!(
            "transpose: {} coarse rows on a rank do not fit u32 indices",
            mine.len()
        )));
    }
    // In rank order, then each sender's row order: the fine columns never
    // decrease, so each new one is the next ghost column.
    let (mut entries, mut cols) = (Vec::new(), Vec::<usize>::new());
    for bytes in arrived {
        for (row, col, v) in entries_of::<f64>(bytes, "transpose")? {
            let row = row
                .checked_sub(mine.start)
                .filter(|&r| r < mine.len())
                .ok_or_else(|| {
                    comm_error("transpose: an entry for a row this rank does not own")
                })?;
            match cols.last() {
                Some(&last) if last > col => {
                    return Err(comm_error("transpose: entries out of column order"));
                }
                Some(&last) if last == col => {}
                _ => cols.push(col),
            }
            entries.push((row as u32, (cols.len() - 1) as u32, v));
        }
    }
    // By row, each row's entries in arrival order (the sort is stable): its
    // columns increasing.
    entries.par_sort_by_key(|e| e.0);
    let mut rows: Vec<u32> = entries.iter().map(|e| e.0).collect();
    rows.dedup();
    let mut ptr = Vec::with_capacity(rows.len() + 1);
    ptr.push(0);
    for (k, e) in entries.iter().enumerate().skip(1) {
        if e.0 != entries[k - 1].0 {
            ptr.push(k);
        }
    }
    if !entries.is_empty() {
        ptr.push(entries.len());
    }
    let (col, val) = entries.into_iter().map(|(_, c, v)| (c, v)).unzip();
    let block = Csr::try_new_allow_nonfinite(rows.len(), cols.len(), ptr, col, val)?;
    Ok((GhostRows::new(mine.len(), rows, block)?, cols))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::halo::{split_columns_extended, SplitRows};
    use crate::{rows_of, ThreadComm};

    /// P split by [`transfer_operators`] is [`split_columns`]' split, and R
    /// is the serial transpose's rows split the same way, on 1-4 ranks with
    /// coarse columns split unevenly (one rank owning none, as
    /// agglomeration leaves some), with the owned blocks made on the host.
    #[test]
    fn the_transfer_operators_are_the_split_transpose() {
        let p = crate::operator::tests::scattered();
        let whole = p.transpose(false);
        for ranks in 1..=4 {
            let fine = RowPartition::contiguous(p.nrows(), ranks).unwrap();
            let coarse = match ranks {
                4 => RowPartition::from_counts(&[20, 0, 5, 20]).unwrap(),
                2 => RowPartition::from_counts(&[45, 0]).unwrap(),
                r => RowPartition::contiguous(p.ncols(), r).unwrap(),
            };
            let ok = ThreadComm::run(ranks, |comm| {
                let rank = comm.rank();
                let rows = rows_of(&p, &fine, rank).unwrap();
                let local = gpuq_cpu::CpuBackend::new();
                let held = LevelMatrix::from_host(rows.clone());
                let (ps, rs) =
                    transfer_operators((&comm, &local), (&fine, &coarse), &held).unwrap();
                let want_p = split_columns_extended(&coarse, rank, &rows).unwrap();
                let r_rows = rows_of(&whole, &coarse, rank).unwrap();
                let want_r = split_columns_extended(&fine, rank, &r_rows).unwrap();
                let same =
                    |s: &LevelSplit, (w, ext): &(SplitRows<f64>, Csr<f64>), global: &Csr<f64>| {
                        s.owned.host().unwrap() == &w.owned
                            && s.ghost.to_csr().unwrap() == w.ghost
                            && s.ghost_cols == w.ghost_cols
                            && &s.global().unwrap() == global
                            && &s.extended().unwrap() == ext
                    };
                same(&ps, &want_p, &rows) && same(&rs, &want_r, &r_rows)
            })
            .unwrap();
            assert!(ok.iter().all(|&s| s), "{ranks} ranks");
        }
    }
}
