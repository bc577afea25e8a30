//! Coordinate (triplet) format.

use gpuq_core::{Error, Result, Scalar};

/// A sparse matrix as unordered `(row, col, value)` triplets.
///
/// Duplicates are allowed and are summed when converting to [`crate::Csr`].
/// Indices are checked against the shape on insertion; values are not checked
/// here (the conversion to CSR does that).
#[derive(Clone, Debug, PartialEq)]
pub struct Coo<T> {
    nrows: usize,
    ncols: usize,
    rows: Vec<usize>,
    cols: Vec<usize>,
    vals: Vec<T>,
}

impl<T: Scalar> Coo<T> {
    /// An empty `nrows x ncols` matrix.
    pub fn new(nrows: usize, ncols: usize) -> Self {
        Coo {
            nrows,
            ncols,
            rows: Vec::new(),
            cols: Vec::new(),
            vals: Vec::new(),
        }
    }

    /// An empty matrix with room for `cap` triplets.
    pub fn with_capacity(nrows: usize, ncols: usize, cap: usize) -> Self {
        Coo {
            nrows,
            ncols,
            rows: Vec::with_capacity(cap),
            cols: Vec::with_capacity(cap),
            vals: Vec::with_capacity(cap),
        }
    }

    /// Builds from parallel triplet arrays, checking lengths and index ranges. O(nnz).
    pub fn try_from_triplets(
        nrows: usize,
        ncols: usize,
        rows: Vec<usize>,
        cols: Vec<usize>,
        vals: Vec<T>,
    ) -> Result<Self> {
        if rows.len() != cols.len() || rows.len() != vals.len() {
            return Err(Error::shape(
                "Coo::try_from_triplets",
                format!("{} rows, cols and values", rows.len()),
                format!("{} cols and {} values", cols.len(), vals.len()),
            ));
        }
        for (k, (&i, &j)) in rows.iter().zip(&cols).enumerate() {
            check_index(nrows, ncols, i, j)
                .map_err(|e| Error::InvalidMatrix(format!("triplet {k}: {e}")))?;
        }
        Ok(Coo {
            nrows,
            ncols,
            rows,
            cols,
            vals,
        })
    }

    /// Appends the triplet `(i, j, v)`; errors if the index is outside the shape. O(1) amortised.
    pub fn push(&mut self, i: usize, j: usize, v: T) -> Result<()> {
        check_index(self.nrows, self.ncols, i, j).map_err(Error::InvalidMatrix)?;
        self.rows.push(i);
        self.cols.push(j);
        self.vals.push(v);
        Ok(())
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Number of stored triplets (duplicates counted separately).
    pub fn nnz(&self) -> usize {
        self.vals.len()
    }

    /// Row indices of the triplets.
    pub fn row_indices(&self) -> &[usize] {
        &self.rows
    }

    /// Column indices of the triplets.
    pub fn col_indices(&self) -> &[usize] {
        &self.cols
    }

    /// Values of the triplets.
    pub fn values(&self) -> &[T] {
        &self.vals
    }

    /// Triplets from parallel arrays of equal length whose indices the caller
    /// has already checked against the shape (the Matrix Market reader);
    /// checked again in debug builds only. O(1) (O(nnz) in debug builds).
    pub(crate) fn from_checked(
        nrows: usize,
        ncols: usize,
        rows: Vec<usize>,
        cols: Vec<usize>,
        vals: Vec<T>,
    ) -> Self {
        debug_assert!(rows.len() == cols.len() && rows.len() == vals.len());
        debug_assert!(rows
            .iter()
            .zip(&cols)
            .all(|(&i, &j)| check_index(nrows, ncols, i, j).is_ok()));
        Coo {
            nrows,
            ncols,
            rows,
            cols,
            vals,
        }
    }

    /// Iterates over `(row, col, value)`.
    pub fn triplets(&self) -> impl Iterator<Item = (usize, usize, T)> + '_ {
        self.rows
            .iter()
            .zip(&self.cols)
            .zip(&self.vals)
            .map(|((&i, &j), &v)| (i, j, v))
    }
}

fn check_index(nrows: usize, ncols: usize, i: usize, j: usize) -> std::result::Result<(), String> {
    if i >= nrows || j >= ncols {
        Err(format!(
            "entry ({i}, {j}) outside a {nrows} x {ncols} matrix (0-based)"
        ))
    } else {
        Ok(())
    }
}
