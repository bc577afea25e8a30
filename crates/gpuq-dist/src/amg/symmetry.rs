//! Whether a matrix split by rows across ranks equals its transpose: each
//! rank's block on its own columns by the one-process cursor pass
//! ([`gpuq_amg::block_is_symmetric`]), its entries on other ranks' columns
//! against their partners, sent once to the ranks that hold them.

use crate::comm::{agree, Communicator};
use crate::halo::TASK_ROWS;
use crate::operator::{entries_of, exchange_tasks, push_entry};
use crate::partition::RowPartition;
use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// The tag of the entries sent to their partners' ranks.
const SYMMETRY_TAG: u16 = 9;

/// Whether the matrix whose rows `rows` this rank holds (global columns,
/// the rows `partition` gives the rank) equals its transpose to `tol`, as
/// [`gpuq_amg::block_is_symmetric`] judges one process's matrix (a stored
/// zero equals a missing entry): the rank's block on its own columns by the
/// cursor pass, and each entry (i, j) on another rank's column sent as
/// (j, i, value) to that rank, which compares it with its entry (j, i), 0
/// where it stores none (both entries of a pair are sent, so an entry
/// without a partner is judged too). The same answer on every rank.
/// Collective: one exchange (24 bytes an entry off the rank's columns), the
/// agreement on its errors (an all-gather) and one sum. O(nnz) on each
/// rank, the cursor pass sequential.
pub(crate) fn rows_are_symmetric(
    comm: &dyn Communicator,
    partition: &RowPartition,
    rows: &Csr<f64>,
    tol: f64,
) -> Result<bool> {
    let rank = comm.rank();
    let own = partition.range(rank);
    // Row i's entries on the rank's own columns: a contiguous run of them.
    let inside = |i: usize| {
        let (cols, vals) = rows.row(i);
        let lo = cols.partition_point(|&c| (c as usize) < own.start);
        let hi = cols.partition_point(|&c| (c as usize) < own.end);
        (&cols[lo..hi], &vals[lo..hi])
    };
    let local = gpuq_amg::block_is_symmetric(own.len(), own.start, inside, tol);
    // Each task's entries off the rank's columns, for their columns' owners.
    let tasks: Vec<Vec<Vec<u8>>> = (0..rows.nrows().div_ceil(TASK_ROWS))
        .into_par_iter()
        .map(|t| {
            let mut out = vec![Vec::new(); comm.size()];
            for i in t * TASK_ROWS..((t + 1) * TASK_ROWS).min(rows.nrows()) {
                let (cols, vals) = rows.row(i);
                for (&j, &v) in cols.iter().zip(vals) {
                    let j = j as usize;
                    if own.contains(&j) {
                        continue;
                    }
                    let Some(q) = partition.owner(j) else {
                        continue;
                    };
                    // The partner's place: row j, column own.start + i.
                    push_entry(&mut out[q], j, own.start + i, v);
                }
            }
            out
        })
        .collect();
    // A rank's error in the exchange or in its messages is every rank's
    // before the sum.
    let judged = exchange_tasks(comm, SYMMETRY_TAG, tasks)
        .and_then(|arrived| partners_agree(rows, own.start, &arrived, tol));
    let ok = agree(comm, judged)? && local;
    let failed = comm.allreduce_sum(&[f64::from(u8::from(!ok))])?[0];
    Ok(failed == 0.0)
}

/// Whether every entry that `arrived` (one message per other rank: (row,
/// column, value), the row this rank's, numbered from `first`) equals the
/// rank's entry there to `tol` (0 where it stores none). Errors on a
/// truncated entry or a row the rank does not hold. O(arrived log row
/// length).
fn partners_agree(rows: &Csr<f64>, first: usize, arrived: &[Vec<u8>], tol: f64) -> Result<bool> {
    let mut agree = true;
    for bytes in arrived {
        for (row, col, v) in entries_of::<f64>(bytes, "symmetry check")? {
            let i = row
                .checked_sub(first)
                .filter(|&i| i < rows.nrows())
                .ok_or_else(|| {
                    Error::InvalidArgument(
                        "symmetry check: an entry for a row this rank does not hold".into(),
                    )
                })?;
            let (cols, vals) = rows.row(i);
            let mine = u32::try_from(col)
                .ok()
                .and_then(|j| cols.binary_search(&j).ok())
                .map_or(0.0, |p| vals[p]);
            agree &= (mine - v).abs() <= tol;
        }
    }
    Ok(agree)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{rows_of, ThreadComm};

    fn csr(n: usize, entries: &[(usize, usize, f64)]) -> Csr<f64> {
        let mut coo = gpuq_sparse::Coo::new(n, n);
        for &(i, j, v) in entries {
            coo.push(i, j, v).unwrap();
        }
        Csr::from_coo(&coo).unwrap()
    }

    /// The definition: every a_ij against a_ji found by search.
    fn symmetric_by_search(a: &Csr<f64>, tol: f64) -> bool {
        (0..a.nrows()).all(|i| {
            let (c, v) = a.row(i);
            c.iter().zip(v).all(|(&j, &x)| {
                let (cj, vj) = a.row(j as usize);
                let y = cj.binary_search(&(i as u32)).map_or(0.0, |p| vj[p]);
                (x - y).abs() <= tol
            })
        })
    }

    /// On 1-4 ranks (one partition leaving a rank without rows), the split
    /// rows are judged as the whole matrix is by definition: symmetric
    /// matrices, and asymmetries inside a rank's block, across ranks in
    /// either direction, an entry across ranks without a partner (a
    /// stored zero without one is symmetric), and a difference below and
    /// above the tolerance.
    #[test]
    fn split_rows_are_judged_as_the_whole_matrix() {
        let lap = gpuq_sparse::generators::laplace2d::<f64>(6);
        let n = lap.nrows();
        let with = |extra: &[(usize, usize, f64)]| {
            let mut e: Vec<(usize, usize, f64)> = (0..n)
                .flat_map(|i| {
                    let (c, v) = lap.row(i);
                    c.iter()
                        .zip(v)
                        .map(move |(&j, &x)| (i, j as usize, x))
                        .collect::<Vec<_>>()
                })
                .collect();
            for &(i, j, v) in extra {
                match e.iter_mut().find(|x| x.0 == i && x.1 == j) {
                    Some(x) => x.2 = v,
                    None => e.push((i, j, v)),
                }
            }
            csr(n, &e)
        };
        let cases = [
            lap.clone(),
            gpuq_sparse::generators::convdiff2d::<f64>(6, 0.5),
            // Inside the first rank's rows.
            with(&[(1, 0, -1.5)]),
            // Across ranks, the lower entry changed, then the upper one.
            with(&[(30, 5, 1.0)]),
            with(&[(5, 30, 1.0)]),
            // Entries across ranks without partners: stored zeros, then not.
            with(&[(2, 33, 0.0), (34, 1, 0.0)]),
            with(&[(2, 33, 0.5)]),
            with(&[(34, 1, 0.5)]),
            // A difference within the tolerance, then beyond it.
            with(&[(30, 24, -1.0 + 1e-15)]),
            with(&[(30, 24, -1.0 + 1e-9)]),
        ];
        for (k, a) in cases.iter().enumerate() {
            let tol = 1e-12 * 4.0;
            let want = symmetric_by_search(a, tol);
            for ranks in 1..=4 {
                let part = match ranks {
                    3 => RowPartition::from_counts(&[10, 0, n - 10]).unwrap(),
                    r => RowPartition::contiguous(n, r).unwrap(),
                };
                let got = ThreadComm::run(ranks, |comm| {
                    let rows = rows_of(a, &part, comm.rank()).unwrap();
                    rows_are_symmetric(&comm, &part, &rows, tol).unwrap()
                })
                .unwrap();
                assert!(
                    got.iter().all(|&s| s == want),
                    "case {k} on {ranks} ranks: {got:?}, want {want}"
                );
            }
        }
    }
}
