//! Coordinate (triplet) format.

use gpuq_core::{Error, Result, Scalar};
use rayon::prelude::*;

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

    /// The triplets of `parts` (each `nrows x ncols`), in order: each part
    /// copied into its place by its own Rayon task. O(nnz).
    pub(crate) fn concat(nrows: usize, ncols: usize, parts: Vec<Coo<T>>) -> Self {
        let nnz = parts.iter().map(Coo::nnz).sum();
        let mut out = Coo {
            nrows,
            ncols,
            rows: vec![0; nnz],
            cols: vec![0; nnz],
            vals: vec![T::zero(); nnz],
        };
        let mut tasks = Vec::with_capacity(parts.len());
        let (mut r, mut c, mut v) = (&mut out.rows[..], &mut out.cols[..], &mut out.vals[..]);
        for p in &parts {
            debug_assert_eq!((p.nrows, p.ncols), (nrows, ncols));
            let k = p.nnz();
            let (r0, r1) = r.split_at_mut(k);
            let (c0, c1) = c.split_at_mut(k);
            let (v0, v1) = v.split_at_mut(k);
            tasks.push((p, r0, c0, v0));
            (r, c, v) = (r1, c1, v1);
        }
        tasks.into_par_iter().for_each(|(p, r, c, v)| {
            r.copy_from_slice(&p.rows);
            c.copy_from_slice(&p.cols);
            v.copy_from_slice(&p.vals);
        });
        out
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
