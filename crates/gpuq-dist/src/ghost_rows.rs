//! A rank's block on its ghost columns stored by its non-empty rows
//! ([`GhostRows`]): a slab of a grid has entries off its columns only in its
//! boundary planes (90,000 of laplace3d:300's 13.5 million rows on each of two
//! ranks), so the row pointers of the whole block would be almost all of
//! what it stores and what crosses the link.

use crate::halo::TASK_ROWS;
use gpuq_core::{Error, Result, Scalar};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::ops::Range;

/// A block of `nrows` rows held by its non-empty rows: `rows` (increasing)
/// and `block`, whose row k is row `rows[k]`. Every row not listed is empty
/// and every row listed holds an entry, so two equal blocks have equal
/// parts. The columns are whatever the caller numbers them by (global
/// columns for a rank's entries outside its columns, ghost indices for its
/// ghost block).
#[derive(Clone, Debug, PartialEq)]
pub struct GhostRows<T = f64> {
    nrows: usize,
    rows: Vec<u32>,
    block: Csr<T>,
}

impl<T: Scalar> GhostRows<T> {
    /// The block of `nrows` rows whose non-empty rows are `rows` with the
    /// entries of `block`'s rows. Errors unless `rows` increases, lies below
    /// `nrows` and has one index per row of `block`, and each of `block`'s
    /// rows holds an entry. O(rows).
    pub fn new(nrows: usize, rows: Vec<u32>, block: Csr<T>) -> Result<Self> {
        if rows.len() != block.nrows() {
            return Err(Error::shape(
                "ghost rows (row indices vs the block's rows)",
                rows.len(),
                block.nrows(),
            ));
        }
        let increasing = rows.windows(2).all(|w| w[0] < w[1]);
        if !increasing || rows.last().is_some_and(|&r| r as usize >= nrows) {
            return Err(Error::InvalidArgument(format!(
                "ghost rows: the row indices must increase and lie below {nrows}"
            )));
        }
        let ptr = block.row_ptr();
        if (0..rows.len()).any(|k| ptr[k] == ptr[k + 1]) {
            return Err(Error::InvalidArgument(
                "ghost rows: a listed row holds no entry".into(),
            ));
        }
        Ok(GhostRows { nrows, rows, block })
    }

    /// `m` held by its non-empty rows. Errors when `m` has 2^32 rows or
    /// more. O(rows + nnz), in parallel.
    pub fn of_csr(m: &Csr<T>) -> Result<Self> {
        if u32::try_from(m.nrows()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "ghost rows: {} rows do not fit u32 indices",
                m.nrows()
            )));
        }
        let ptr = m.row_ptr();
        let filled: Vec<usize> = (0..m.nrows())
            .into_par_iter()
            .with_min_len(TASK_ROWS)
            .filter(|&i| ptr[i + 1] != ptr[i])
            .collect();
        let block = m.select_rows(&filled)?;
        let rows = filled.into_iter().map(|i| i as u32).collect();
        Ok(GhostRows {
            nrows: m.nrows(),
            rows,
            block,
        })
    }

    /// The whole block in CSR, a row pointer per row. O(rows + nnz), in
    /// parallel.
    pub fn to_csr(&self) -> Result<Csr<T>> {
        let mut ptr = vec![0usize; self.nrows + 1];
        let cptr = self.block.row_ptr();
        ptr.par_chunks_mut(TASK_ROWS)
            .enumerate()
            .for_each(|(t, chunk)| {
                let first = t * TASK_ROWS;
                // The listed rows before this chunk's first row.
                let mut k = self.rows.partition_point(|&r| (r as usize) < first);
                for (at, p) in chunk.iter_mut().enumerate() {
                    while k < self.rows.len() && (self.rows[k] as usize) < first + at {
                        k += 1;
                    }
                    *p = cptr[k];
                }
            });
        Csr::try_new_allow_nonfinite(
            self.nrows,
            self.block.ncols(),
            ptr,
            self.block.col_idx().to_vec(),
            self.block.values().to_vec(),
        )
    }

    /// The block's rows, listed or not.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// The block's columns.
    pub fn ncols(&self) -> usize {
        self.block.ncols()
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.block.nnz()
    }

    /// The non-empty rows, increasing.
    pub fn rows(&self) -> &[u32] {
        &self.rows
    }

    /// The non-empty rows' entries, row k of it being row `rows()[k]`.
    pub fn block(&self) -> &Csr<T> {
        &self.block
    }

    /// The parts: the row count, the non-empty rows and their entries.
    pub fn into_parts(self) -> (usize, Vec<u32>, Csr<T>) {
        (self.nrows, self.rows, self.block)
    }

    /// Row `i`'s columns and values (empty where it is not listed). O(log
    /// rows listed).
    pub fn row(&self, i: usize) -> (&[u32], &[T]) {
        match u32::try_from(i).map(|i| self.rows.binary_search(&i)) {
            Ok(Ok(k)) => self.block.row(k),
            _ => (&[], &[]),
        }
    }

    /// The row ranges that hold every non-empty row, for a product that
    /// walks only them ([`crate::halo::ghost_row_runs`]'s runs of the whole
    /// block). O(rows listed).
    pub fn runs(&self) -> Vec<Range<usize>> {
        crate::halo::runs_of_rows(self.rows.iter().map(|&r| r as usize))
    }

    /// The same rows with `f` applied to the block (its columns renumbered
    /// or its values scaled, rows and row lengths unchanged). Errors as
    /// [`GhostRows::new`] when `f` changes the block's rows.
    pub fn map_block<U: Scalar>(
        self,
        f: impl FnOnce(Csr<T>) -> Result<Csr<U>>,
    ) -> Result<GhostRows<U>> {
        GhostRows::new(self.nrows, self.rows, f(self.block)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix of 3000 rows with entries in two bands and a few scattered
    /// rows (more than one task of rows, empty rows at both ends).
    fn banded() -> Csr<f64> {
        let mut coo = gpuq_sparse::Coo::new(3000, 12);
        for i in (5..40).chain(1500..1530).chain([2100, 2900]) {
            coo.push(i, i % 7, 1.0 + i as f64).unwrap();
            coo.push(i, 7 + i % 5, -(i as f64)).unwrap();
        }
        Csr::from_coo(&coo).unwrap()
    }

    /// Compressed and expanded again, a block is itself; its rows, runs and
    /// row accessor agree with the whole block's.
    #[test]
    fn a_block_by_its_rows_is_the_whole_block() {
        let m = banded();
        let g = GhostRows::of_csr(&m).unwrap();
        assert_eq!(g.rows().len(), 35 + 30 + 2);
        assert_eq!((g.nrows(), g.ncols(), g.nnz()), (3000, 12, m.nnz()));
        assert_eq!(g.to_csr().unwrap(), m);
        for i in 0..m.nrows() {
            assert_eq!(g.row(i), m.row(i), "row {i}");
        }
        assert_eq!(g.row(1 << 40), (&[][..], &[][..]));
        assert_eq!(g.runs(), crate::halo::ghost_row_runs(&m));
        let empty = Csr::<f64>::try_new(5, 3, vec![0; 6], vec![], vec![]).unwrap();
        let e = GhostRows::of_csr(&empty).unwrap();
        assert!(e.rows().is_empty() && e.runs().is_empty());
        assert_eq!(e.to_csr().unwrap(), empty);
    }

    /// Parts that do not describe a block's non-empty rows are errors.
    #[test]
    fn parts_that_are_not_non_empty_rows_are_errors() {
        let m = banded();
        let (n, rows, block) = GhostRows::of_csr(&m).unwrap().into_parts();
        assert!(GhostRows::new(n, rows.clone(), block.clone()).is_ok());
        let mut swapped = rows.clone();
        swapped.swap(0, 1);
        assert!(GhostRows::new(n, swapped, block.clone()).is_err());
        assert!(
            GhostRows::new(rows[rows.len() - 1] as usize, rows.clone(), block.clone()).is_err()
        );
        assert!(GhostRows::new(n, rows[1..].to_vec(), block.clone()).is_err());
        let with_empty = Csr::<f64>::try_new(2, 3, vec![0, 0, 1], vec![1], vec![2.0]).unwrap();
        assert!(GhostRows::new(10, vec![3, 4], with_empty).is_err());
    }
}
