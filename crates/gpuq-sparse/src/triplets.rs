//! Lists of triplets with 32-bit indices, kept in parts (a file's pieces, or
//! what each rank sent), and the CSR matrix of such a list.

use crate::csr::TripletPart;
use crate::matrix_market::csr_of_ordered;
use crate::Csr;
use gpuq_core::{Error, Result, Scalar};
use rayon::prelude::*;

/// Triplets with 32-bit indices, in order: one part of a list that
/// [`Csr::from_triplet_list`] builds a matrix from (the Matrix Market
/// reader's parts, [`crate::matrix_market::MmPartData`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Triplets32<T> {
    /// Row of each triplet.
    pub rows: Vec<u32>,
    /// Column of each triplet.
    pub cols: Vec<u32>,
    /// Value of each triplet.
    pub vals: Vec<T>,
}

/// Triplets per task of the parallel passes over a part.
const TASK: usize = 1 << 16;

impl<T: Scalar> Triplets32<T> {
    /// Number of triplets.
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    /// The triplets `(row, column, value)` in order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, usize, T)> + '_ {
        self.rows
            .iter()
            .zip(&self.cols)
            .zip(&self.vals)
            .map(|((&i, &j), &v)| (i as usize, j as usize, v))
    }

    /// Whether `(row, column)` strictly increases along the triplets.
    /// O(len), in parallel.
    fn ordered(&self) -> bool {
        let key = |k: usize| u64::from(self.rows[k]) << 32 | u64::from(self.cols[k]);
        (1..self.len())
            .into_par_iter()
            .with_min_len(TASK)
            .all(|k| key(k - 1) < key(k))
    }

    /// The first row index at or above `nrows` or column index at or above
    /// `ncols`, as `(row, column)`. O(len), in parallel.
    fn out_of_range(&self, nrows: usize, ncols: usize) -> Option<(usize, usize)> {
        (0..self.len())
            .into_par_iter()
            .with_min_len(TASK)
            .map(|k| (self.rows[k] as usize, self.cols[k] as usize))
            .find_first(|&(i, j)| i >= nrows || j >= ncols)
    }
}

impl<T: Scalar> Csr<T> {
    /// The `nrows x ncols` matrix of the triplets of `parts` taken in order,
    /// exactly as [`Csr::from_coo`] makes it of the same triplets (stably
    /// sorted by row, each row by column, duplicates summed in order). Where
    /// the triplets already strictly increase in (row, column), as a file
    /// written by rows stores them, the parts' columns and values become the
    /// CSR arrays as they are (one copy; none for a single part); otherwise
    /// they are converted by blocks of rows on all threads. Errors when a
    /// part's three arrays differ in length, an index is out of the shape, a
    /// value is not finite, or a dimension exceeds `u32::MAX` (which
    /// [`Csr::from_coo`] allows for rows). O(nnz + nrows) on
    /// all threads (O(nnz log(row length)) when unordered).
    pub fn from_triplet_list(
        nrows: usize,
        ncols: usize,
        parts: Vec<Triplets32<T>>,
    ) -> Result<Self> {
        if ncols > u32::MAX as usize || nrows > u32::MAX as usize {
            return Err(Error::InvalidMatrix(format!(
                "a {nrows} x {ncols} matrix exceeds the 32-bit index range"
            )));
        }
        if let Some(p) = parts
            .iter()
            .find(|p| p.rows.len() != p.vals.len() || p.cols.len() != p.vals.len())
        {
            return Err(Error::shape(
                "Csr::from_triplet_list (a part's rows and columns)",
                format!("{} of each", p.vals.len()),
                format!("{} rows and {} columns", p.rows.len(), p.cols.len()),
            ));
        }
        // Parts in parallel too: a file's pieces are many and short.
        let bad = parts
            .par_iter()
            .find_map_first(|p| p.out_of_range(nrows, ncols));
        if let Some((i, j)) = bad {
            return Err(Error::InvalidMatrix(format!(
                "entry ({i}, {j}) (0-based) outside a {nrows} x {ncols} matrix"
            )));
        }
        // Before the conversion, whose ordered path takes the arrays as
        // canonical (finite values among them).
        let bad_value = parts.par_iter().find_map_first(|p| {
            let k = p.vals.par_iter().position_first(|v| !v.is_finite_value())?;
            Some((p.rows[k], p.cols[k]))
        });
        if let Some((i, j)) = bad_value {
            return Err(Error::InvalidMatrix(format!(
                "non-finite value at ({i}, {j}) (0-based)"
            )));
        }
        let ordered: Vec<bool> = parts.par_iter().map(Triplets32::ordered).collect();
        let a = csr_of_parts(nrows, ncols, parts, &ordered);
        // Duplicates summed (the unordered path) may overflow.
        a.check_finite()?;
        Ok(a)
    }
}

/// The `nrows x ncols` matrix of the triplets of `parts` (indices within the
/// shape, values not checked) taken in order: straight from the parts'
/// arrays where they strictly increase (`ordered[k]` says so within part
/// k; [`csr_of_ordered`] checks across parts), else by blocks of rows
/// ([`Csr::from_triplet_parts`]). O(nnz + nrows) on all threads, O(nnz
/// log(row length)) when unordered.
pub(crate) fn csr_of_parts<T: Scalar>(
    nrows: usize,
    ncols: usize,
    parts: Vec<Triplets32<T>>,
    ordered: &[bool],
) -> Csr<T> {
    match csr_of_ordered(nrows, ncols, parts, ordered) {
        Ok(a) => a,
        Err(parts) => {
            let views: Vec<TripletPart<'_, u32, T>> = parts
                .iter()
                .map(|p| TripletPart {
                    rows: &p.rows,
                    cols: &p.cols,
                    vals: &p.vals,
                })
                .collect();
            Csr::from_triplet_parts(nrows, ncols, &views)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Coo;

    fn part(t: &[(u32, u32, f64)]) -> Triplets32<f64> {
        Triplets32 {
            rows: t.iter().map(|e| e.0).collect(),
            cols: t.iter().map(|e| e.1).collect(),
            vals: t.iter().map(|e| e.2).collect(),
        }
    }

    fn by_coo(n: usize, m: usize, parts: &[Triplets32<f64>]) -> Csr<f64> {
        let mut coo = Coo::new(n, m);
        for p in parts {
            for (i, j, v) in p.iter() {
                coo.push(i, j, v).unwrap();
            }
        }
        Csr::from_coo(&coo).unwrap()
    }

    #[test]
    fn a_list_becomes_the_matrix_from_coo_makes() {
        let ordered = vec![
            part(&[(0, 0, 1.0), (0, 2, 2.0)]),
            part(&[]),
            part(&[(1, 1, 3.0), (3, 0, 4.0)]),
        ];
        // Out of order across parts, a duplicate summed in order.
        let unordered = vec![
            part(&[(2, 1, 1.0), (0, 0, 2.0)]),
            part(&[(2, 1, 0.5), (1, 2, 3.0), (2, 0, 1.0)]),
        ];
        // Ordered within each part, not across them.
        let across = vec![part(&[(1, 0, 1.0)]), part(&[(0, 1, 2.0)])];
        for parts in [ordered, unordered, across, vec![]] {
            let want = by_coo(4, 3, &parts);
            let got = Csr::from_triplet_list(4, 3, parts).unwrap();
            assert_eq!(got, want);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Random triplets (sorted by row and column or not, duplicates
        /// possible) cut into random parts, on 3 threads: the matrix
        /// `Csr::from_coo` makes of the same triplets.
        #[test]
        fn any_list_in_any_parts_is_the_coo_conversion(
            entries in proptest::collection::vec((0u32..40, 0u32..30, -4.0f64..4.0), 0..400),
            sorted in proptest::bool::ANY,
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let mut entries = entries;
            if sorted {
                entries.sort_by_key(|e| (e.0, e.1));
                entries.dedup_by_key(|e| (e.0, e.1));
            }
            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(entries.len())).collect();
            bounds.extend([0, entries.len()]);
            bounds.sort_unstable();
            let parts: Vec<Triplets32<f64>> =
                bounds.windows(2).map(|w| part(&entries[w[0]..w[1]])).collect();
            let want = by_coo(40, 30, &parts);
            let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            let got = pool.install(|| Csr::from_triplet_list(40, 30, parts)).unwrap();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn bad_indices_and_values_are_errors() {
        let e = Csr::from_triplet_list(2, 2, vec![part(&[(0, 0, 1.0), (2, 0, 1.0)])]);
        assert!(e.unwrap_err().to_string().contains("(2, 0)"));
        assert!(Csr::from_triplet_list(2, 2, vec![part(&[(0, 2, 1.0)])]).is_err());
        assert!(Csr::from_triplet_list(2, 2, vec![part(&[(0, 0, f64::NAN)])]).is_err());
        let overflow = part(&[(0, 0, 1e308), (0, 0, 1e308)]);
        assert!(Csr::from_triplet_list(2, 2, vec![overflow]).is_err());
        let mut short = part(&[(0, 0, 1.0), (1, 1, 1.0)]);
        short.cols.pop();
        assert!(Csr::from_triplet_list(2, 2, vec![short]).is_err());
    }
}
