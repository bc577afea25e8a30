//! Whether a matrix equals its transpose, in one sequential pass without
//! searches: the input check of the AMG setup.

use gpuq_sparse::Csr;

/// Whether `a` equals its transpose to `tol` (|a_ij - a_ji| <= tol for every
/// stored entry; a stored zero equals a missing entry; `tol` 0 asks for exact
/// equality; NaN values are not judged: the callers check finiteness first or
/// treat NaN alike in both directions). [`block_is_symmetric`] over all of
/// `a`'s rows. O(nnz) time, sequential (it runs beside the setup), n cursors.
pub(crate) fn is_symmetric(a: &Csr<f64>, tol: f64) -> bool {
    block_is_symmetric(a.nrows(), 0, |i| a.row(i), tol)
}

/// Whether the square block of `n` rows `row(0..n)` equals its transpose to
/// `tol` (a stored zero equals a missing entry; NaN is not judged), its rows and columns numbered from
/// `first` (row i is global row `first + i`; each row's columns sorted): a
/// rank's rows cut to its own columns. False where a column lies outside
/// `first..first + n` (the block is then not square).
/// One pass in row order: the entries of row j right of the diagonal are
/// met, in column order, as the rows i > j are visited, so a cursor per row
/// finds each lower entry's partner without a search, and the entries a
/// cursor passes (or never reaches) have no partner and must be negligible.
/// O(entries) time, sequential, n cursors.
pub fn block_is_symmetric<'a>(
    n: usize,
    first: usize,
    row: impl Fn(usize) -> (&'a [u32], &'a [f64]),
    tol: f64,
) -> bool {
    // Every row's columns in first..first + n (sorted: its first and last).
    let inside = |c: &u32| (first..first + n).contains(&(*c as usize));
    if (0..n).any(|j| {
        let cols = row(j).0;
        !(cols.first().is_none_or(inside) && cols.last().is_none_or(inside))
    }) {
        return false;
    }
    // Local column of a stored (global) column.
    let local = |c: u32| c as usize - first;
    // cursor[j]: the position in row j of its next entry right of the diagonal
    // that no lower entry has matched yet.
    let mut cursor: Vec<usize> = (0..n)
        .map(|j| row(j).0.partition_point(|&c| local(c) <= j))
        .collect();
    for i in 0..n {
        let (cols, vals) = row(i);
        for (&j, &x) in cols.iter().zip(vals) {
            let j = local(j);
            if j >= i {
                break;
            }
            let (cj, vj) = row(j);
            let mut p = cursor[j];
            // Entries of row j left of column i: their rows are behind, without a partner.
            while p < cj.len() && local(cj[p]) < i {
                if vj[p].abs() > tol {
                    return false;
                }
                p += 1;
            }
            let partner = if p < cj.len() && local(cj[p]) == i {
                p += 1;
                vj[p - 1]
            } else {
                0.0
            };
            cursor[j] = p;
            if (x - partner).abs() > tol {
                return false;
            }
        }
    }
    (0..n).all(|j| row(j).1[cursor[j]..].iter().all(|y| y.abs() <= tol))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use gpuq_sparse::Coo;

    pub(crate) fn csr(n: usize, entries: &[(usize, usize, f64)]) -> Csr<f64> {
        let mut coo = Coo::new(n, n);
        for &(i, j, v) in entries {
            coo.push(i, j, v).unwrap();
        }
        Csr::from_coo(&coo).unwrap()
    }

    /// The definition: every a_ij against a_ji found by search.
    fn symmetric_by_search(a: &Csr<f64>) -> bool {
        let largest = a.values().iter().fold(0.0f64, |m, x| m.max(x.abs()));
        (0..a.nrows()).all(|i| {
            let (c, v) = a.row(i);
            c.iter().zip(v).all(|(&j, &x)| {
                let (cj, vj) = a.row(j as usize);
                let y = cj.binary_search(&(i as u32)).map_or(0.0, |p| vj[p]);
                (x - y).abs() <= 1e-12 * largest
            })
        })
    }

    fn largest(a: &Csr<f64>) -> f64 {
        a.values().iter().fold(0.0f64, |m, x| m.max(x.abs()))
    }

    #[test]
    fn symmetry_by_cursors_agrees_with_the_definition() {
        let lap = gpuq_sparse::generators::laplace2d::<f64>(7);
        let cases = [
            lap.clone(),
            // A lower entry without a partner.
            csr(3, &[(0, 0, 2.0), (1, 0, 1.0), (1, 1, 2.0), (2, 2, 1.0)]),
            // An upper entry without a partner.
            csr(3, &[(0, 0, 2.0), (0, 2, 1.0), (1, 1, 2.0), (2, 2, 1.0)]),
            // Unpartnered entries that are stored zeros: symmetric.
            csr(3, &[(0, 0, 2.0), (0, 2, 0.0), (2, 1, 0.0), (1, 1, 2.0)]),
            // Partners with different values.
            csr(3, &[(0, 1, 1.0), (1, 0, 1.5), (2, 2, 1.0)]),
            // An upper entry skipped over by a later lower entry of its row.
            csr(4, &[(0, 2, 1.0), (0, 3, 1.0), (3, 0, 1.0), (1, 1, 1.0)]),
            csr(4, &[(0, 2, 0.0), (0, 3, 1.0), (3, 0, 1.0), (1, 1, 1.0)]),
            gpuq_sparse::generators::convdiff2d::<f64>(6, 0.5),
        ];
        for (k, a) in cases.iter().enumerate() {
            let tol = 1e-12 * largest(a);
            assert_eq!(is_symmetric(a, tol), symmetric_by_search(a), "case {k}");
            // The same rows numbered from 5, as a rank's own block is.
            let shifted: Vec<Vec<u32>> = (0..a.nrows())
                .map(|i| a.row(i).0.iter().map(|&c| c + 5).collect())
                .collect();
            let row = |i: usize| (&shifted[i][..], a.row(i).1);
            assert_eq!(
                block_is_symmetric(a.nrows(), 5, row, tol),
                symmetric_by_search(a),
                "case {k} numbered from 5"
            );
        }
        assert!(is_symmetric(&lap, 0.0));
        // Symmetric to rounding, not exactly.
        let near = csr(
            2,
            &[(0, 0, 1.0), (0, 1, 0.5), (1, 0, 0.5 + 1e-15), (1, 1, 1.0)],
        );
        assert!(is_symmetric(&near, 1e-12));
        assert!(!is_symmetric(&near, 0.0));
        // A column outside the block (below or past its columns) makes it
        // not square: false, not a wrong answer.
        let block = |rows: &[(Vec<u32>, Vec<f64>)]| {
            block_is_symmetric(2, 5, |i| (&rows[i].0[..], &rows[i].1[..]), 0.0)
        };
        // [[2, 1], [1, 2]] numbered from 5: symmetric.
        let inside = [(vec![5, 6], vec![2.0, 1.0]), (vec![5, 6], vec![1.0, 2.0])];
        assert!(block(&inside));
        // The same with an entry on column 4 (below the block) or 7 (past it).
        let below = [(vec![4, 5, 6], vec![1.0, 2.0, 1.0]), inside[1].clone()];
        assert!(!block(&below));
        let past = [inside[0].clone(), (vec![5, 6, 7], vec![1.0, 2.0, 1.0])];
        assert!(!block(&past));
    }
}
