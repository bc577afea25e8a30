//! Matrices assembled from pieces that each hold a part of every row
//! ([`RowPiece`], [`join_pieces`]), and the parallel transposes built on them:
//! each task transposes its rows into a piece of its own, in row order, so
//! the joined rows come out sorted without a sort and without atomics.

use crate::csr::{par_fill_rows, par_row_pointers, Csr};
use gpuq_core::{Result, Scalar};
use rayon::prelude::*;
use std::ops::Range;

/// Part of every row of a matrix, in CSR arrays: row i's part is
/// `cols[ptr[i]..ptr[i + 1]]` with its values. Made by
/// [`RowPiece::transposed`] or [`RowPiece::of_entries`], which keep the
/// arrays consistent.
#[derive(Clone, Debug, PartialEq)]
pub struct RowPiece<T> {
    /// Row pointers (one more than the rows, starting at 0).
    ptr: Vec<usize>,
    /// The entries' columns, row after row.
    cols: Vec<u32>,
    /// The entries' values, as `cols`.
    vals: Vec<T>,
}

impl<T: Scalar> RowPiece<T> {
    /// The transpose of rows `rows` of `a`, restricted to the entries whose
    /// column `target` maps to one of `m` rows: entry (i, j) becomes entry
    /// (target(j), col_of(i)) of the piece, in the order of `a`'s rows, so
    /// each row's columns increase where `col_of` does. A count per row, a
    /// running sum, a placing pass. O(entries of the rows + m), one thread.
    ///
    /// # Panics
    /// Where `target` gives a row not below `m`, or `rows` is not a range of
    /// `a`'s rows.
    pub fn transposed(
        a: &Csr<T>,
        rows: Range<usize>,
        m: usize,
        target: impl Fn(u32) -> Option<usize>,
        col_of: impl Fn(usize) -> u32,
    ) -> Self {
        let mut ptr = vec![0usize; m + 1];
        for i in rows.clone() {
            for &j in a.row(i).0 {
                if let Some(r) = target(j) {
                    ptr[r + 1] += 1;
                }
            }
        }
        for r in 0..m {
            ptr[r + 1] += ptr[r];
        }
        let len = ptr[m];
        let (mut cols, mut vals) = (vec![0u32; len], vec![T::zero(); len]);
        let mut next = ptr[..m].to_vec();
        for i in rows {
            let (c, v) = a.row(i);
            let col = col_of(i);
            for (&j, &x) in c.iter().zip(v) {
                if let Some(r) = target(j) {
                    let at = &mut next[r];
                    cols[*at] = col;
                    vals[*at] = x;
                    *at += 1;
                }
            }
        }
        RowPiece { ptr, cols, vals }
    }

    /// The piece of `m` rows holding `entries` (row, column, value), each
    /// row's entries in the order given: a stable counting sort. Errors
    /// name the first row not below m. O(entries + m), one thread.
    pub fn of_entries(m: usize, entries: &[(usize, u32, T)]) -> Result<Self> {
        let mut ptr = vec![0usize; m + 1];
        for &(r, _, _) in entries {
            if r >= m {
                return Err(gpuq_core::Error::InvalidArgument(format!(
                    "row {r} of a piece of {m} rows"
                )));
            }
            ptr[r + 1] += 1;
        }
        for r in 0..m {
            ptr[r + 1] += ptr[r];
        }
        let (mut cols, mut vals) = (vec![0u32; entries.len()], vec![T::zero(); entries.len()]);
        let mut next = ptr[..m].to_vec();
        for &(r, c, v) in entries {
            cols[next[r]] = c;
            vals[next[r]] = v;
            next[r] += 1;
        }
        Ok(RowPiece { ptr, cols, vals })
    }

    /// Row i's part: its columns and values. O(1).
    fn row(&self, i: usize) -> (&[u32], &[T]) {
        let span = self.ptr[i]..self.ptr[i + 1];
        (&self.cols[span.clone()], &self.vals[span])
    }
}

/// The `nrows` x `ncols` matrix whose row i is the pieces' rows i one after
/// the other (piece order). Errors where a piece does not have `nrows` rows,
/// or where the joined rows are not valid CSR rows (columns increasing and
/// below `ncols`). Rows filled in parallel. O(nnz + pieces nrows).
pub fn join_pieces<T: Scalar>(
    nrows: usize,
    ncols: usize,
    pieces: &[RowPiece<T>],
) -> Result<Csr<T>> {
    if let Some(p) = pieces.iter().find(|p| p.ptr.len() != nrows + 1) {
        return Err(gpuq_core::Error::InvalidArgument(format!(
            "a piece of {} rows joined into {nrows} rows",
            p.ptr.len().saturating_sub(1)
        )));
    }
    let row_ptr = par_row_pointers(nrows, |i| {
        pieces.iter().map(|p| p.ptr[i + 1] - p.ptr[i]).sum()
    });
    let (cols, vals) = par_fill_rows(
        &row_ptr,
        || (),
        |i, _, c, v| {
            let mut at = 0;
            for p in pieces {
                let (pc, pv) = p.row(i);
                c[at..at + pc.len()].copy_from_slice(pc);
                v[at..at + pv.len()].copy_from_slice(pv);
                at += pc.len();
            }
        },
    );
    Csr::try_new_allow_nonfinite(nrows, ncols, row_ptr, cols, vals)
}

/// The rows of a matrix with row pointers `ptr` cut into at most `parts`
/// ranges of about equal entries: part q starts at the first row whose
/// entries start at or after q nnz / parts; the bounds increase from 0 to the
/// row count, repeats removed. O(parts log rows).
fn even_row_bounds(ptr: &[usize], parts: usize) -> Vec<usize> {
    let rows = ptr.len() - 1;
    let nnz = ptr[rows];
    let mut bounds: Vec<usize> = (0..parts)
        .map(|q| ptr.partition_point(|&p| p * parts < q * nnz).min(rows))
        .collect();
    bounds[0] = 0;
    bounds.push(rows);
    bounds.dedup();
    bounds
}

/// The transposes of `a`'s rows in tasks of about equal entries, each a
/// [`RowPiece`] of `m` rows ([`RowPiece::transposed`] with `target` and
/// `col_of`), in row order: joined in this order ([`join_pieces`]) they give
/// each row's entries in the order of `a`'s rows. Two tasks per thread, one,
/// or fewer than the threads: the most whose row pointers (16 bytes per row
/// of the piece each, while they run) stay within the entries' 12 bytes.
/// O(nnz + tasks m) time, tasks m <= 3 nnz / 4 extra memory.
pub fn transposed_pieces<T: Scalar>(
    a: &Csr<T>,
    m: usize,
    target: impl Fn(u32) -> Option<usize> + Sync,
    col_of: impl Fn(usize) -> u32 + Sync,
) -> Vec<RowPiece<T>> {
    let threads = rayon::current_num_threads();
    let cap = 3 * a.nnz() / (4 * m.max(1));
    let tasks = if cap >= 2 * threads {
        2 * threads
    } else if cap >= threads {
        threads
    } else {
        cap.max(1)
    };
    pieces_in_tasks(a, m, tasks, target, col_of)
}

/// [`transposed_pieces`] in at most `tasks` tasks (cut by
/// [`even_row_bounds`]).
fn pieces_in_tasks<T: Scalar>(
    a: &Csr<T>,
    m: usize,
    tasks: usize,
    target: impl Fn(u32) -> Option<usize> + Sync,
    col_of: impl Fn(usize) -> u32 + Sync,
) -> Vec<RowPiece<T>> {
    even_row_bounds(a.row_ptr(), tasks)
        .par_windows(2)
        .map(|w| RowPiece::transposed(a, w[0]..w[1], m, &target, &col_of))
        .collect()
}

/// A^T (each row's entries in increasing column order, as
/// `Csr::transpose(false)` builds it), in parallel: A's rows transposed by
/// tasks into pieces ([`transposed_pieces`]), then joined ([`join_pieces`]).
/// O(nnz + tasks ncols), at most 3 nnz / 4 more memory than A^T while it
/// runs.
pub fn par_transpose<T: Scalar>(a: &Csr<T>) -> Result<Csr<T>> {
    let (n, m) = a.shape();
    let pieces = transposed_pieces(a, m, |j| Some(j as usize), |i| i as u32);
    join_pieces(m, n, &pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn matrix(n: usize, m: usize, entries: &[(usize, usize, f64)]) -> Csr<f64> {
        let mut coo = crate::Coo::new(n, m);
        for &(i, j, v) in entries {
            coo.push(i % n, j % m, v).unwrap();
        }
        Csr::from_coo(&coo).unwrap()
    }

    proptest! {
        /// The parallel transpose is the serial one, on one thread and three.
        #[test]
        fn par_transpose_is_the_serial_transpose(
            n in 1usize..60,
            m in 1usize..60,
            entries in prop::collection::vec((0usize..60, 0usize..60, -5.0f64..5.0), 0..300),
        ) {
            let a = matrix(n, m, &entries);
            let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            prop_assert_eq!(&pool.install(|| par_transpose(&a)).unwrap(), &a.transpose(false));
            prop_assert_eq!(&par_transpose(&a).unwrap(), &a.transpose(false));
        }

        /// The transpose in 1 to 9 tasks (whatever the memory cap would
        /// choose), restricted to a range of target rows and with shifted
        /// columns, is the serial transpose's rows of that range.
        #[test]
        fn pieces_in_any_number_of_tasks_join_into_the_transpose(
            n in 1usize..60,
            m in 1usize..60,
            entries in prop::collection::vec((0usize..60, 0usize..60, -5.0f64..5.0), 0..300),
            tasks in 1usize..10,
            cut in 0usize..60,
        ) {
            let a = matrix(n, m, &entries);
            let at = a.transpose(false);
            let lo = cut % m;
            let pieces = pieces_in_tasks(
                &a,
                m - lo,
                tasks,
                |j| (j as usize).checked_sub(lo),
                |i| (i + 7) as u32,
            );
            let joined = join_pieces(m - lo, n + 7, &pieces).unwrap();
            for r in 0..m - lo {
                let (c, v) = at.row(r + lo);
                let shifted: Vec<u32> = c.iter().map(|&i| i + 7).collect();
                prop_assert_eq!(joined.row(r), (&shifted[..], v));
            }
        }

        /// Pieces of entries in row order joined give the rows of the
        /// matrix the entries make.
        #[test]
        fn pieces_of_entries_join_into_the_matrix(
            m in 1usize..40,
            entries in prop::collection::vec((0usize..40, 0usize..40, -5.0f64..5.0), 0..200),
            cut in 0usize..200,
        ) {
            let a = matrix(m, 40, &entries);
            // a's entries in row order, cut by column into two pieces
            let all: Vec<(usize, u32, f64)> = (0..m)
                .flat_map(|i| {
                    let (c, v) = a.row(i);
                    c.iter().zip(v).map(move |(&j, &x)| (i, j, x)).collect::<Vec<_>>()
                })
                .collect();
            let split = (cut % 41) as u32;
            let low: Vec<_> = all.iter().copied().filter(|e| e.1 < split).collect();
            let high: Vec<_> = all.iter().copied().filter(|e| e.1 >= split).collect();
            let pieces = [
                RowPiece::of_entries(m, &low).unwrap(),
                RowPiece::of_entries(m, &high).unwrap(),
            ];
            prop_assert_eq!(join_pieces(m, 40, &pieces).unwrap(), a);
        }
    }

    /// Empty matrices, rows and columns, on 1, 2 and 5 threads.
    #[test]
    fn par_transpose_of_empty_shapes() {
        for (n, m) in [(0, 0), (3, 0), (0, 4), (3, 4)] {
            let a = Csr::<f64>::try_new(n, m, vec![0; n + 1], vec![], vec![]).unwrap();
            for threads in [1, 2, 5] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                assert_eq!(
                    pool.install(|| par_transpose(&a)).unwrap(),
                    a.transpose(false)
                );
            }
        }
    }

    #[test]
    fn bad_pieces_are_errors() {
        assert!(RowPiece::<f64>::of_entries(3, &[(3, 0, 1.0)]).is_err());
        let piece = RowPiece::<f64>::of_entries(2, &[(1, 0, 1.0)]).unwrap();
        assert!(join_pieces(3, 2, std::slice::from_ref(&piece)).is_err());
        // two pieces with the same column in a row: not a valid CSR row
        assert!(join_pieces(2, 2, &[piece.clone(), piece]).is_err());
    }
}
