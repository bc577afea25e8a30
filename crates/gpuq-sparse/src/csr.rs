//! Compressed sparse row format: the validated hub of all conversions.

use crate::Coo;
use gpuq_core::{Error, Result, Scalar};
use rayon::prelude::*;

/// A sparse matrix in compressed sparse row (CSR) form.
///
/// Invariants, checked by every constructor:
/// * `row_ptr` has `nrows + 1` non-decreasing entries, starting at 0 and ending at `nnz`;
/// * column indices are in range and strictly increasing within each row
///   (sorted, no duplicates);
/// * values are finite, unless the matrix was built with an `*_allow_nonfinite` constructor.
///
/// Column indices are `u32` (4 bytes per nonzero of index traffic in SpMV), so
/// `ncols` must not exceed `u32::MAX`.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T> {
    nrows: usize,
    ncols: usize,
    row_ptr: Vec<usize>,
    col_idx: Vec<u32>,
    vals: Vec<T>,
}

/// Triplets at or above which a row-ordered COO goes to CSR on all threads
/// (below, one thread is faster).
const PARALLEL_MIN_NNZ: usize = 1 << 16;

/// Rows per task of the parallel COO-to-CSR conversion.
const PARALLEL_TASK_ROWS: usize = 4096;

impl<T: Scalar> Csr<T> {
    /// Builds from raw arrays, validating every invariant and requiring finite values. O(nnz).
    pub fn try_new(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        vals: Vec<T>,
    ) -> Result<Self> {
        let a = Self::try_new_allow_nonfinite(nrows, ncols, row_ptr, col_idx, vals)?;
        a.check_finite()?;
        Ok(a)
    }

    /// Like [`Csr::try_new`] but accepts NaN and infinite values. O(nnz).
    pub fn try_new_allow_nonfinite(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        vals: Vec<T>,
    ) -> Result<Self> {
        if ncols > u32::MAX as usize {
            return Err(Error::InvalidMatrix(format!(
                "{ncols} columns exceed the 32-bit column index range"
            )));
        }
        if row_ptr.len() != nrows + 1 {
            return Err(Error::shape(
                "Csr::try_new (row_ptr)",
                format!("length {}", nrows + 1),
                format!("length {}", row_ptr.len()),
            ));
        }
        if col_idx.len() != vals.len() {
            return Err(Error::shape(
                "Csr::try_new (col_idx vs values)",
                format!("length {}", vals.len()),
                format!("length {}", col_idx.len()),
            ));
        }
        if row_ptr[0] != 0 || row_ptr[nrows] != vals.len() {
            return Err(Error::InvalidMatrix(format!(
                "row_ptr must start at 0 and end at nnz = {}, found {} and {}",
                vals.len(),
                row_ptr[0],
                row_ptr[nrows]
            )));
        }
        // Rows in parallel (blocks of rows), reporting the first bad row.
        let check_row = |i: usize| -> Option<Error> {
            let (s, e) = (row_ptr[i], row_ptr[i + 1]);
            if s > e {
                return Some(Error::InvalidMatrix(format!(
                    "row_ptr decreases at row {i} ({s} > {e})"
                )));
            }
            if e > col_idx.len() {
                return Some(Error::InvalidMatrix(format!(
                    "row_ptr[{}] = {e} exceeds nnz = {}",
                    i + 1,
                    col_idx.len()
                )));
            }
            let cols = &col_idx[s..e];
            for (k, &j) in cols.iter().enumerate() {
                if j as usize >= ncols {
                    return Some(Error::InvalidMatrix(format!(
                        "column index {j} out of range (ncols = {ncols}) in row {i}"
                    )));
                }
                if k > 0 && cols[k - 1] >= j {
                    let what = if cols[k - 1] == j {
                        "duplicate"
                    } else {
                        "unsorted"
                    };
                    return Some(Error::InvalidMatrix(format!(
                        "{what} column index {j} in row {i}"
                    )));
                }
            }
            None
        };
        if let Some(err) = (0..nrows)
            .into_par_iter()
            .with_min_len(4096)
            .find_map_first(check_row)
        {
            return Err(err);
        }
        Ok(Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            vals,
        })
    }

    /// Converts triplets to CSR: sorts, sums duplicates, requires finite values. O(nnz log(row length)).
    pub fn from_coo(coo: &Coo<T>) -> Result<Self> {
        let a = Self::from_coo_allow_nonfinite(coo)?;
        a.check_finite()?;
        Ok(a)
    }

    /// Like [`Csr::from_coo`] but accepts NaN and infinite values.
    pub fn from_coo_allow_nonfinite(coo: &Coo<T>) -> Result<Self> {
        let (nrows, ncols) = (coo.nrows(), coo.ncols());
        if ncols > u32::MAX as usize {
            return Err(Error::InvalidMatrix(format!(
                "{ncols} columns exceed the 32-bit column index range"
            )));
        }
        if coo.nnz() >= PARALLEL_MIN_NNZ && coo.row_indices().par_windows(2).all(|w| w[0] <= w[1]) {
            return Ok(Self::from_row_sorted(coo));
        }
        // Counting sort by row.
        let mut counts = vec![0usize; nrows + 1];
        for &i in coo.row_indices() {
            counts[i + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut entries: Vec<(u32, T)> = vec![(0, T::zero()); coo.nnz()];
        for (i, j, v) in coo.triplets() {
            entries[next[i]] = (j as u32, v);
            next[i] += 1;
        }
        // Sort each row by column and merge duplicates.
        let mut row_ptr = Vec::with_capacity(nrows + 1);
        let mut col_idx = Vec::with_capacity(coo.nnz());
        let mut vals = Vec::with_capacity(coo.nnz());
        row_ptr.push(0);
        for i in 0..nrows {
            let row = &mut entries[counts[i]..counts[i + 1]];
            row.sort_by_key(|e| e.0);
            let start = col_idx.len();
            for &(j, v) in row.iter() {
                if col_idx.len() > start && *col_idx.last().unwrap() == j {
                    *vals.last_mut().unwrap() += v;
                } else {
                    col_idx.push(j);
                    vals.push(v);
                }
            }
            row_ptr.push(col_idx.len());
        }
        Ok(Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            vals,
        })
    }

    /// [`Csr::from_coo_allow_nonfinite`] for triplets already in row order
    /// (as most files store them), in parallel: each row's triplets are
    /// contiguous, so the rows are sorted by column (stably: duplicates summed
    /// in the triplets' order, the serial conversion's result exactly),
    /// counted, and written straight into the final arrays. O(nnz log(row
    /// length) + nrows log nnz) on all threads.
    fn from_row_sorted(coo: &Coo<T>) -> Self {
        let (nrows, ncols) = (coo.nrows(), coo.ncols());
        let (rows, cols, vals) = (coo.row_indices(), coo.col_indices(), coo.values());
        let start: Vec<usize> = (0..=nrows)
            .into_par_iter()
            .map(|i| rows.partition_point(|&r| r < i))
            .collect();
        // Row i's entries, sorted by column, duplicates summed, into `out`.
        let merged = |i: usize, out: &mut Vec<(u32, T)>| {
            out.clear();
            out.extend((start[i]..start[i + 1]).map(|k| (cols[k] as u32, vals[k])));
            out.sort_by_key(|e| e.0);
            out.dedup_by(|next, kept| {
                let same = next.0 == kept.0;
                if same {
                    kept.1 += next.1;
                }
                same
            });
        };
        let lens: Vec<usize> = (0..nrows)
            .into_par_iter()
            .map_init(Vec::new, |buf, i| {
                merged(i, buf);
                buf.len()
            })
            .collect();
        let mut row_ptr = Vec::with_capacity(nrows + 1);
        row_ptr.push(0);
        for l in &lens {
            row_ptr.push(row_ptr[row_ptr.len() - 1] + l);
        }
        let nnz = row_ptr[nrows];
        let (mut col_idx, mut values) = (vec![0u32; nnz], vec![T::zero(); nnz]);
        let mut tasks = Vec::new();
        let (mut c_left, mut v_left) = (&mut col_idx[..], &mut values[..]);
        for r0 in (0..nrows).step_by(PARALLEL_TASK_ROWS) {
            let r1 = (r0 + PARALLEL_TASK_ROWS).min(nrows);
            let len = row_ptr[r1] - row_ptr[r0];
            let (c, c_rest) = c_left.split_at_mut(len);
            let (v, v_rest) = v_left.split_at_mut(len);
            tasks.push((r0..r1, c, v));
            (c_left, v_left) = (c_rest, v_rest);
        }
        tasks.into_par_iter().for_each(|(range, c, v)| {
            let (mut buf, mut at) = (Vec::new(), 0);
            for i in range {
                merged(i, &mut buf);
                for &(j, x) in &buf {
                    c[at] = j;
                    v[at] = x;
                    at += 1;
                }
            }
        });
        Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            vals: values,
        }
    }

    /// The n-by-n identity.
    pub fn identity(n: usize) -> Self {
        Csr {
            nrows: n,
            ncols: n,
            row_ptr: (0..=n).collect(),
            col_idx: (0..n as u32).collect(),
            vals: vec![T::one(); n],
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows, self.ncols)
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.vals.len()
    }

    /// Row pointers (`nrows + 1` entries).
    pub fn row_ptr(&self) -> &[usize] {
        &self.row_ptr
    }

    /// Column indices, row by row.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// Values, row by row.
    pub fn values(&self) -> &[T] {
        &self.vals
    }

    /// Column indices and values of row `i`. Panics if `i >= nrows` (an internal
    /// accessor; callers iterate over `0..nrows`).
    pub fn row(&self, i: usize) -> (&[u32], &[T]) {
        let r = self.row_ptr[i]..self.row_ptr[i + 1];
        (&self.col_idx[r.clone()], &self.vals[r])
    }

    /// Length of the longest row.
    pub fn max_row_len(&self) -> usize {
        self.row_ptr
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// The main diagonal (zero where no entry is stored). O(nnz).
    pub fn diagonal(&self) -> Vec<T> {
        let n = self.nrows.min(self.ncols);
        (0..n)
            .map(|i| {
                let (c, v) = self.row(i);
                c.binary_search(&(i as u32)).map_or(T::zero(), |k| v[k])
            })
            .collect()
    }

    /// Serial reference product y = A x. O(nnz). Errors if `x.len() != ncols`.
    pub fn mul_vec(&self, x: &[T]) -> Result<Vec<T>> {
        gpuq_core::check_same_len("Csr::mul_vec", self.ncols, x.len())?;
        Ok((0..self.nrows)
            .map(|i| {
                let (c, v) = self.row(i);
                c.iter().zip(v).map(|(&j, &a)| a * x[j as usize]).sum()
            })
            .collect())
    }

    /// The transpose (conjugated when `conjugate` is set, giving A^H). O(nnz + nrows + ncols).
    pub fn transpose(&self, conjugate: bool) -> Self {
        let mut counts = vec![0usize; self.ncols + 1];
        for &j in &self.col_idx {
            counts[j as usize + 1] += 1;
        }
        for j in 0..self.ncols {
            counts[j + 1] += counts[j];
        }
        let mut next = counts.clone();
        let mut col_idx = vec![0u32; self.nnz()];
        let mut vals = vec![T::zero(); self.nnz()];
        for i in 0..self.nrows {
            let (c, v) = self.row(i);
            for (&j, &a) in c.iter().zip(v) {
                let k = next[j as usize];
                col_idx[k] = i as u32;
                vals[k] = if conjugate { a.conj() } else { a };
                next[j as usize] += 1;
            }
        }
        Csr {
            nrows: self.ncols,
            ncols: self.nrows,
            row_ptr: counts,
            col_idx,
            vals,
        }
    }

    /// The triplets of this matrix, row by row.
    pub fn to_coo(&self) -> Coo<T> {
        let mut coo = Coo::with_capacity(self.nrows, self.ncols, self.nnz());
        for i in 0..self.nrows {
            let (c, v) = self.row(i);
            for (&j, &a) in c.iter().zip(v) {
                coo.push(i, j as usize, a)
                    .expect("CSR invariants keep indices in range");
            }
        }
        coo
    }

    /// Dense row-major copy (`nrows * ncols` entries); meant for tests and small matrices.
    pub fn to_dense(&self) -> Vec<T> {
        let mut d = vec![T::zero(); self.nrows * self.ncols];
        for i in 0..self.nrows {
            let (c, v) = self.row(i);
            for (&j, &a) in c.iter().zip(v) {
                d[i * self.ncols + j as usize] = a;
            }
        }
        d
    }

    /// Errors with the position of the first NaN or infinite value.
    pub fn check_finite(&self) -> Result<()> {
        match self
            .vals
            .par_iter()
            .with_min_len(1 << 14)
            .position_first(|v| !v.is_finite_value())
        {
            None => Ok(()),
            Some(k) => {
                let i = self.row_ptr.partition_point(|&p| p <= k) - 1;
                Err(Error::InvalidMatrix(format!(
                    "non-finite value at ({}, {}) (0-based)",
                    i, self.col_idx[k]
                )))
            }
        }
    }

    /// The same pattern with every value mapped by `f` (a change of scalar
    /// type, a scaling), the results required finite. The pattern is copied,
    /// not checked again. O(nnz), in parallel.
    pub fn map_values<U: Scalar>(&self, f: impl Fn(T) -> U + Sync) -> Result<Csr<U>> {
        let a = Csr {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr: self.row_ptr.par_iter().copied().collect(),
            col_idx: self.col_idx.par_iter().copied().collect(),
            vals: self.vals.par_iter().map(|&v| f(v)).collect(),
        };
        a.check_finite()?;
        Ok(a)
    }

    /// Decomposes into `(nrows, ncols, row_ptr, col_idx, values)`.
    pub fn into_parts(self) -> (usize, usize, Vec<usize>, Vec<u32>, Vec<T>) {
        (
            self.nrows,
            self.ncols,
            self.row_ptr,
            self.col_idx,
            self.vals,
        )
    }
}

impl<T: Scalar> TryFrom<&Coo<T>> for Csr<T> {
    type Error = Error;
    fn try_from(coo: &Coo<T>) -> Result<Self> {
        Csr::from_coo(coo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ordered_triplets_take_the_parallel_path_with_the_serial_result() {
        // Rows of 1-9 entries, columns out of order, duplicates whose sum
        // depends on the order (1e16 - 1e16 + 0.1 against 0.1 + 1e16 - 1e16).
        let n = 20_000;
        let row = |i: usize| -> Vec<(usize, f64)> {
            let mut r: Vec<(usize, f64)> = (0..1 + i % 9)
                .map(|k| ((i * 31 + k * 7919) % n, 0.5 + k as f64))
                .collect();
            if i % 5 == 0 {
                let j = r[0].0;
                r.extend([(j, 1e16), (j, -1e16), (j, 0.1)]);
            }
            r
        };
        let build = |order: &mut dyn Iterator<Item = usize>| {
            let mut coo = Coo::new(n, n);
            for i in order {
                for (j, v) in row(i) {
                    coo.push(i, j, v).unwrap();
                }
            }
            coo
        };
        let sorted = build(&mut (0..n));
        let reversed = build(&mut (0..n).rev());
        assert!(sorted.nnz() >= PARALLEL_MIN_NNZ);
        let parallel = Csr::from_coo(&sorted).unwrap();
        let serial = Csr::from_coo(&reversed).unwrap();
        assert_eq!(parallel, serial);
    }

    #[test]
    fn coo_duplicates_are_summed_and_sorted() {
        let coo = Coo::try_from_triplets(
            2,
            3,
            vec![1, 0, 1, 0],
            vec![2, 1, 2, 0],
            vec![1.0, 2.0, 3.0, 4.0],
        )
        .unwrap();
        let a = Csr::from_coo(&coo).unwrap();
        assert_eq!(a.row_ptr(), &[0, 2, 3]);
        assert_eq!(a.col_idx(), &[0, 1, 2]);
        assert_eq!(a.values(), &[4.0, 2.0, 4.0]);
    }

    #[test]
    fn validation_names_the_problem() {
        let e = Csr::try_new(1, 2, vec![0, 2], vec![1, 1], vec![1.0, 2.0]).unwrap_err();
        assert!(e.to_string().contains("duplicate"), "{e}");
        let e = Csr::try_new(1, 2, vec![0, 2], vec![1, 0], vec![1.0, 2.0]).unwrap_err();
        assert!(e.to_string().contains("unsorted"), "{e}");
        let e = Csr::try_new(1, 2, vec![0, 1], vec![2], vec![1.0]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        let e = Csr::try_new(1, 2, vec![0, 1], vec![0], vec![f64::NAN]).unwrap_err();
        assert!(e.to_string().contains("non-finite"), "{e}");
        assert!(Csr::try_new_allow_nonfinite(1, 2, vec![0, 1], vec![0], vec![f64::NAN]).is_ok());
        let e = Csr::<f64>::try_new(2, 2, vec![0, 1], vec![0], vec![1.0]).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }));
    }

    #[test]
    fn transpose_and_diagonal() {
        let coo = Coo::try_from_triplets(2, 2, vec![0, 0, 1], vec![0, 1, 1], vec![1.0, 2.0, 3.0])
            .unwrap();
        let a = Csr::from_coo(&coo).unwrap();
        let t = a.transpose(false);
        assert_eq!(t.to_dense(), vec![1.0, 0.0, 2.0, 3.0]);
        assert_eq!(a.diagonal(), vec![1.0, 3.0]);
        assert_eq!(a.mul_vec(&[1.0, 1.0]).unwrap(), vec![3.0, 3.0]);
    }
}
