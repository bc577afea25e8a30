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

/// Most triplets per task of the conversion by blocks of rows.
const PARALLEL_TASK_TRIPLETS: usize = 1 << 16;

/// An index type of [`TripletPart`]s: `u32` (the Matrix Market reader's) or
/// `usize` (a [`Coo`]'s).
pub(crate) trait TripletIndex: Copy + Send + Sync {
    /// The index as a `usize`.
    fn get(self) -> usize;
}

impl TripletIndex for u32 {
    fn get(self) -> usize {
        self as usize
    }
}

impl TripletIndex for usize {
    fn get(self) -> usize {
        self
    }
}

/// One part of a list of triplets, in order: rows, columns and values of
/// equal length, the indices within the matrix's shape.
pub(crate) struct TripletPart<'a, I, T> {
    /// Row of each triplet.
    pub rows: &'a [I],
    /// Column of each triplet.
    pub cols: &'a [I],
    /// Value of each triplet.
    pub vals: &'a [T],
}

/// One block's share of the conversion by blocks of rows: its buckets'
/// rows, columns and values (a task's triplets of the block, in order).
type Bucket<'a, T> = (&'a mut [u32], &'a mut [u32], &'a mut [T]);

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

    /// A matrix from arrays that the caller knows to satisfy every invariant
    /// (the Matrix Market reader's triplets that strictly increase by row,
    /// then column, with finite values); checked again in debug builds only.
    /// O(1) (O(nnz) in debug builds).
    pub(crate) fn from_canonical(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        vals: Vec<T>,
    ) -> Self {
        let a = Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            vals,
        };
        debug_assert!(Csr::try_new(
            nrows,
            ncols,
            a.row_ptr.clone(),
            a.col_idx.clone(),
            a.vals.clone()
        )
        .is_ok());
        a
    }

    /// Converts triplets to CSR: sorts, sums duplicates (in the triplets'
    /// order), requires finite values. O(nnz log(row length) + nrows), on
    /// all threads from 65536 triplets on.
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
        if coo.nnz() >= PARALLEL_MIN_NNZ {
            if coo.row_indices().par_windows(2).all(|w| w[0] <= w[1]) {
                return Ok(Self::from_row_sorted(coo));
            }
            let part = TripletPart {
                rows: coo.row_indices(),
                cols: coo.col_indices(),
                vals: coo.values(),
            };
            return Ok(Self::from_triplet_parts(nrows, ncols, &[part]));
        }
        Ok(Self::from_coo_serial(coo))
    }

    /// [`Csr::from_coo_allow_nonfinite`] on one thread (the reference the
    /// parallel conversions reproduce): a counting sort by row, then each
    /// row sorted by column (stably) with duplicates summed in order.
    /// O(nnz log(row length) + nrows).
    fn from_coo_serial(coo: &Coo<T>) -> Self {
        let (nrows, ncols) = (coo.nrows(), coo.ncols());
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
        Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            vals,
        }
    }

    /// The `nrows x ncols` matrix of the triplets of `parts` taken in order,
    /// exactly as [`Csr::from_coo_allow_nonfinite`] makes it (the triplets
    /// stably sorted by row, each row stably by column, duplicates summed in
    /// order), by blocks of rows on all threads: tasks of consecutive
    /// triplets count theirs per block and copy them into the block's
    /// buckets (task by task, so in order); each block sorts its triplets
    /// into its share of the CSR arrays ([`sort_block`]). On one thread the
    /// one block sorts the parts' triplets directly. Requires `ncols <=
    /// u32::MAX`. O(nnz log(row length) + nrows) on all threads: two copies
    /// of the triplets (one on one thread; one more when duplicates were
    /// summed).
    pub(crate) fn from_triplet_parts<I: TripletIndex>(
        nrows: usize,
        ncols: usize,
        parts: &[TripletPart<'_, I, T>],
    ) -> Self {
        let nnz: usize = parts.iter().map(|p| p.vals.len()).sum();
        let (mut col_idx, mut values) = (vec![0u32; nnz], vec![T::zero(); nnz]);
        let mut row_ptr = vec![0usize; nrows + 1];
        let threads = rayon::current_num_threads();
        if threads == 1 || nrows <= 1 {
            let kept = sort_block(parts, 0, &mut col_idx, &mut values, &mut row_ptr[1..]);
            col_idx.truncate(kept);
            values.truncate(kept);
            return Csr {
                nrows,
                ncols,
                row_ptr,
                col_idx,
                vals: values,
            };
        }
        // Blocks of 2^shift rows, about four per thread.
        let per_block = nrows.div_ceil(4 * threads).next_power_of_two();
        let shift = per_block.trailing_zeros();
        let nblocks = nrows.div_ceil(per_block);
        let tasks: Vec<(&TripletPart<'_, I, T>, std::ops::Range<usize>)> = parts
            .iter()
            .flat_map(|part| {
                let n = part.vals.len();
                (0..n.div_ceil(PARALLEL_TASK_TRIPLETS)).map(move |k| {
                    let start = k * PARALLEL_TASK_TRIPLETS;
                    (part, start..(start + PARALLEL_TASK_TRIPLETS).min(n))
                })
            })
            .collect();
        let counts: Vec<Vec<usize>> = tasks
            .par_iter()
            .map(|(part, range)| {
                let mut count = vec![0usize; nblocks];
                for &i in &part.rows[range.clone()] {
                    count[i.get() >> shift] += 1;
                }
                count
            })
            .collect();
        let mut block_start = vec![0usize; nblocks + 1];
        for b in 0..nblocks {
            block_start[b + 1] = block_start[b] + counts.iter().map(|c| c[b]).sum::<usize>();
        }
        // The buckets: the triplets grouped by block, in order within each.
        let (mut rows, mut cols, mut vals) =
            (vec![0u32; nnz], vec![0u32; nnz], vec![T::zero(); nnz]);
        {
            let mut shares: Vec<Vec<Bucket<'_, T>>> =
                tasks.iter().map(|_| Vec::with_capacity(nblocks)).collect();
            let (mut r, mut c, mut v) = (&mut rows[..], &mut cols[..], &mut vals[..]);
            for b in 0..nblocks {
                for (share, count) in shares.iter_mut().zip(&counts) {
                    let (r0, r1) = std::mem::take(&mut r).split_at_mut(count[b]);
                    let (c0, c1) = std::mem::take(&mut c).split_at_mut(count[b]);
                    let (v0, v1) = std::mem::take(&mut v).split_at_mut(count[b]);
                    share.push((r0, c0, v0));
                    (r, c, v) = (r1, c1, v1);
                }
            }
            shares
                .into_par_iter()
                .zip(&tasks)
                .for_each(|(mut share, (part, range))| {
                    let mut at = vec![0usize; nblocks];
                    for k in range.clone() {
                        let i = part.rows[k].get();
                        let b = i >> shift;
                        let (r, c, v) = &mut share[b];
                        r[at[b]] = i as u32;
                        c[at[b]] = part.cols[k].get() as u32;
                        v[at[b]] = part.vals[k];
                        at[b] += 1;
                    }
                });
        }
        // Each block into its share of the CSR arrays (as long as its
        // triplets), compacted to the front where duplicates were summed.
        let mut blocks = Vec::with_capacity(nblocks);
        {
            let (mut c, mut v) = (&mut col_idx[..], &mut values[..]);
            let mut ptr = row_ptr[1..].chunks_mut(per_block);
            for b in 0..nblocks {
                let len = block_start[b + 1] - block_start[b];
                let (c0, c1) = std::mem::take(&mut c).split_at_mut(len);
                let (v0, v1) = std::mem::take(&mut v).split_at_mut(len);
                blocks.push((b, c0, v0, ptr.next().unwrap_or_default()));
                (c, v) = (c1, v1);
            }
        }
        let kept: Vec<usize> = blocks
            .into_par_iter()
            .map(|(b, out_cols, out_vals, ptr)| {
                let range = block_start[b]..block_start[b + 1];
                let bucket = TripletPart {
                    rows: &rows[range.clone()],
                    cols: &cols[range.clone()],
                    vals: &vals[range],
                };
                sort_block(&[bucket], b << shift, out_cols, out_vals, ptr)
            })
            .collect();
        // The blocks' offsets into the row pointers; the arrays joined
        // again when duplicates left gaps.
        let mut offset = Vec::with_capacity(nblocks);
        let mut total = 0;
        for &k in &kept {
            offset.push(total);
            total += k;
        }
        row_ptr[1..]
            .par_chunks_mut(per_block)
            .zip(&offset)
            .for_each(|(ptr, &off)| ptr.iter_mut().for_each(|p| *p += off));
        if total < nnz {
            col_idx = join_blocks(&col_idx, &block_start, &kept, 0);
            values = join_blocks(&values, &block_start, &kept, T::zero());
        }
        Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            vals: values,
        }
    }

    /// [`Csr::from_coo_allow_nonfinite`] for triplets already in row order
    /// (as most files store them), in parallel: each row's triplets are
    /// contiguous, so the rows are sorted by column (stably: duplicates summed
    /// in the triplets' order, the serial conversion's result exactly; a row
    /// whose columns already strictly increase is taken as it stands),
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
            sort_summing_duplicates(out);
        };
        // Whether row i's columns strictly increase: already sorted, with no
        // duplicates, so its triplets are its CSR row as they stand.
        let canonical = |i: usize| cols[start[i]..start[i + 1]].windows(2).all(|w| w[0] < w[1]);
        let lens: Vec<usize> = (0..nrows)
            .into_par_iter()
            .map_init(Vec::new, |buf, i| {
                if canonical(i) {
                    return start[i + 1] - start[i];
                }
                merged(i, buf);
                buf.len()
            })
            .collect();
        let mut row_ptr = Vec::with_capacity(nrows + 1);
        row_ptr.push(0);
        for l in &lens {
            row_ptr.push(row_ptr[row_ptr.len() - 1] + l);
        }
        let (col_idx, values) = par_fill_rows(&row_ptr, Vec::new, |i, buf, c, v| {
            if canonical(i) {
                for (k, (c, v)) in (start[i]..start[i + 1]).zip(c.iter_mut().zip(v)) {
                    *c = cols[k] as u32;
                    *v = vals[k];
                }
                return;
            }
            merged(i, buf);
            for (&(j, x), (c, v)) in buf.iter().zip(c.iter_mut().zip(v)) {
                *c = j;
                *v = x;
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

    /// Values, row by row, to rewrite in place (the pattern stays).
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.vals
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

    /// Errors with the position of the first NaN or infinite value. Chunks of
    /// values in parallel, each read whole without a branch per value. O(nnz).
    pub fn check_finite(&self) -> Result<()> {
        const CHUNK: usize = 1 << 14;
        let finite = |v: &[T]| v.iter().fold(true, |ok, x| ok & x.is_finite_value());
        match self.vals.par_chunks(CHUNK).position_first(|c| !finite(c)) {
            None => Ok(()),
            Some(c) => {
                let k = c * CHUNK
                    + self.vals[c * CHUNK..]
                        .iter()
                        .position(|v| !v.is_finite_value())
                        .expect("the chunk found holds a non-finite value");
                let i = self.row_ptr.partition_point(|&p| p <= k) - 1;
                Err(Error::InvalidMatrix(format!(
                    "non-finite value at ({}, {}) (0-based)",
                    i, self.col_idx[k]
                )))
            }
        }
    }

    /// A copy of the matrix, its three arrays copied in parallel (the
    /// derived `clone` copies them on one thread). O(nnz).
    pub fn par_clone(&self) -> Self {
        Csr {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr: self.row_ptr.par_iter().copied().collect(),
            col_idx: self.col_idx.par_iter().copied().collect(),
            vals: self.vals.par_iter().copied().collect(),
        }
    }

    /// The first `n` rows (all columns kept): the arrays truncated in place,
    /// nothing copied. Errors when the matrix has fewer rows. O(1).
    pub fn into_first_rows(mut self, n: usize) -> Result<Self> {
        if n > self.nrows {
            return Err(Error::shape(
                "Csr::into_first_rows",
                format!("at most {} rows", self.nrows),
                n,
            ));
        }
        let nnz = self.row_ptr[n];
        self.row_ptr.truncate(n + 1);
        self.col_idx.truncate(nnz);
        self.vals.truncate(nnz);
        self.nrows = n;
        Ok(self)
    }

    /// The rows `idx` (in that order, repeats allowed) as a matrix of the
    /// same columns. Errors name the first index not below the rows.
    /// O(idx + their entries).
    pub fn select_rows(&self, idx: &[usize]) -> Result<Csr<T>> {
        gpuq_core::check_indices("select_rows", self.nrows, idx)?;
        let mut ptr = Vec::with_capacity(idx.len() + 1);
        ptr.push(0);
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for &i in idx {
            let (c, v) = self.row(i);
            cols.extend_from_slice(c);
            vals.extend_from_slice(v);
            ptr.push(cols.len());
        }
        Ok(Csr {
            nrows: idx.len(),
            ncols: self.ncols,
            row_ptr: ptr,
            col_idx: cols,
            vals,
        })
    }

    /// [self | right]: each row's entries, then `right`'s row with its
    /// columns numbered after this matrix's (a rank's owned block and its
    /// ghost block made one matrix over owned then ghost columns). Errors
    /// when the row counts differ or the columns pass u32. O(nnz), rows in
    /// parallel.
    pub fn beside(&self, right: &Csr<T>) -> Result<Csr<T>> {
        if right.nrows != self.nrows {
            return Err(Error::shape("Csr::beside (rows)", self.nrows, right.nrows));
        }
        let ncols = self.ncols + right.ncols;
        let shift = u32::try_from(self.ncols)
            .ok()
            .filter(|_| u32::try_from(ncols).is_ok())
            .ok_or_else(|| Error::InvalidArgument(format!("{ncols} columns pass u32")))?;
        let ptr = par_row_pointers(self.nrows, |i| {
            self.row_ptr[i + 1] - self.row_ptr[i] + right.row_ptr[i + 1] - right.row_ptr[i]
        });
        let (cols, vals) = par_fill_rows(
            &ptr,
            || (),
            |i, _, c, v| {
                let ((lc, lv), (rc, rv)) = (self.row(i), right.row(i));
                c[..lc.len()].copy_from_slice(lc);
                v[..lv.len()].copy_from_slice(lv);
                for (k, (&j, &x)) in rc.iter().zip(rv).enumerate() {
                    c[lc.len() + k] = shift + j;
                    v[lc.len() + k] = x;
                }
            },
        );
        Ok(Csr {
            nrows: self.nrows,
            ncols,
            row_ptr: ptr,
            col_idx: cols,
            vals,
        })
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

/// Rows per task of [`par_row_pointers`].
const POINTER_TASK_ROWS: usize = 4096;

/// The column and value arrays of a CSR matrix whose row pointers are
/// `row_ptr` (row i holds `row_ptr[i + 1] - row_ptr[i]` entries), row i's
/// written in place by `fill(i, scratch, cols, vals)`: tasks of
/// 4096 rows in parallel, each with a scratch from `init`.
/// O(nnz) plus the fills. `row_ptr` must be valid row pointers (at least one
/// entry, starting at 0, never decreasing); otherwise this panics.
pub fn par_fill_rows<T: Scalar, S>(
    row_ptr: &[usize],
    init: impl Fn() -> S + Sync,
    fill: impl Fn(usize, &mut S, &mut [u32], &mut [T]) + Sync,
) -> (Vec<u32>, Vec<T>) {
    let nrows = row_ptr.len() - 1;
    let nnz = row_ptr[nrows];
    let (mut col_idx, mut values) = (vec![0u32; nnz], vec![T::zero(); nnz]);
    let mut tasks = Vec::with_capacity(nrows.div_ceil(PARALLEL_TASK_ROWS));
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
        let (mut scratch, base) = (init(), row_ptr[range.start]);
        for i in range {
            let span = row_ptr[i] - base..row_ptr[i + 1] - base;
            fill(i, &mut scratch, &mut c[span.clone()], &mut v[span]);
        }
    });
    (col_idx, values)
}

/// The row pointers of `n` rows of `count(i)` entries each: `[0, c_0, c_0 +
/// c_1, ...]` (n + 1 values), summed by tasks of 4096 rows in parallel (each
/// task's total, the totals' running sum, then each task's rows; `count` is
/// called twice per row). O(n).
pub fn par_row_pointers(n: usize, count: impl Fn(usize) -> usize + Sync) -> Vec<usize> {
    const T: usize = POINTER_TASK_ROWS;
    let tasks = n.div_ceil(T);
    let totals: Vec<usize> = (0..tasks)
        .into_par_iter()
        .map(|t| (t * T..((t + 1) * T).min(n)).map(&count).sum())
        .collect();
    let mut ptr = vec![0usize; n + 1];
    let mut base = 0;
    let mut starts = Vec::with_capacity(tasks);
    for total in &totals {
        starts.push(base);
        base += total;
    }
    ptr[n] = base;
    ptr[..n]
        .par_chunks_mut(T)
        .zip(starts)
        .enumerate()
        .for_each(|(t, (chunk, mut at))| {
            for (k, p) in chunk.iter_mut().enumerate() {
                *p = at;
                at += count(t * T + k);
            }
        });
    ptr
}

impl<T: Scalar> TryFrom<&Coo<T>> for Csr<T> {
    type Error = Error;
    fn try_from(coo: &Coo<T>) -> Result<Self> {
        Csr::from_coo(coo)
    }
}

/// The triplets of `runs` (taken in order, all of rows `first..first +
/// ptr.len()`) as CSR rows in `out_cols` and `out_vals` (as long as the
/// triplets): sorted by row (a counting sort, stable), each row by column
/// (stably; a row whose columns already strictly increase is taken as it
/// stands), duplicates summed in order, the rows compacted to the front.
/// `ptr[i]` becomes the number of entries up to row `first + i`; returns
/// the number kept. O(triplets log(row length) + rows).
fn sort_block<I: TripletIndex, T: Scalar>(
    runs: &[TripletPart<'_, I, T>],
    first: usize,
    out_cols: &mut [u32],
    out_vals: &mut [T],
    ptr: &mut [usize],
) -> usize {
    let mut start = vec![0usize; ptr.len() + 1];
    for run in runs {
        for &i in run.rows {
            start[i.get() - first + 1] += 1;
        }
    }
    for i in 0..ptr.len() {
        start[i + 1] += start[i];
    }
    let mut next = start.clone();
    for run in runs {
        for ((&i, &j), &v) in run.rows.iter().zip(run.cols).zip(run.vals) {
            let at = &mut next[i.get() - first];
            out_cols[*at] = j.get() as u32;
            out_vals[*at] = v;
            *at += 1;
        }
    }
    let mut buf: Vec<(u32, T)> = Vec::new();
    let mut kept = 0;
    for (i, end) in ptr.iter_mut().enumerate() {
        let row = start[i]..start[i + 1];
        if out_cols[row.clone()].windows(2).all(|w| w[0] < w[1]) {
            if kept < row.start {
                out_cols.copy_within(row.clone(), kept);
                out_vals.copy_within(row.clone(), kept);
            }
            kept += row.len();
        } else {
            buf.clear();
            buf.extend(row.map(|k| (out_cols[k], out_vals[k])));
            sort_summing_duplicates(&mut buf);
            for &(j, x) in &buf {
                out_cols[kept] = j;
                out_vals[kept] = x;
                kept += 1;
            }
        }
        *end = kept;
    }
    kept
}

/// The first `kept[b]` elements of each block `b` of `from` (block `b`
/// starting at `start[b]`), joined in order, each block copied by its own
/// Rayon task. O(total) on all threads.
fn join_blocks<U: Copy + Send + Sync>(
    from: &[U],
    start: &[usize],
    kept: &[usize],
    zero: U,
) -> Vec<U> {
    let mut out = vec![zero; kept.iter().sum()];
    let mut slots = Vec::with_capacity(kept.len());
    let mut rest = &mut out[..];
    for (b, &k) in kept.iter().enumerate() {
        let (slot, tail) = std::mem::take(&mut rest).split_at_mut(k);
        slots.push((slot, &from[start[b]..start[b] + k]));
        rest = tail;
    }
    slots
        .into_par_iter()
        .for_each(|(slot, from)| slot.copy_from_slice(from));
    out
}

/// Sorts a row's `(column, value)` entries by column (stably) and sums the
/// values of equal columns in their order, keeping one entry per column.
/// O(k log k).
fn sort_summing_duplicates<T: Scalar>(row: &mut Vec<(u32, T)>) {
    row.sort_by_key(|e| e.0);
    row.dedup_by(|next, kept| {
        let same = next.0 == kept.0;
        if same {
            kept.1 += next.1;
        }
        same
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_row_pointers_are_the_running_sums() {
        let t = POINTER_TASK_ROWS;
        for n in [0, 1, t - 1, t, 3 * t + 5] {
            let count = |i: usize| (i * 7 + 3) % 5;
            let mut want = vec![0];
            for i in 0..n {
                want.push(want[i] + count(i));
            }
            assert_eq!(par_row_pointers(n, count), want, "{n} rows");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn a_parallel_copy_is_the_matrix() {
        let a = crate::generators::laplace2d::<f64>(40);
        assert_eq!(a.par_clone(), a);
        let empty = Csr::<f64>::try_new(0, 3, vec![0], Vec::new(), Vec::new()).unwrap();
        assert_eq!(empty.par_clone(), empty);
    }

    #[test]
    fn the_first_rows_are_the_rows_of_the_matrix() {
        let a = crate::generators::laplace2d::<f64>(6);
        for n in [0, 1, 17, 36] {
            let first = a.clone().into_first_rows(n).unwrap();
            assert_eq!(first.shape(), (n, 36));
            assert_eq!(first.nnz(), a.row_ptr()[n]);
            for i in 0..n {
                assert_eq!(first.row(i), a.row(i));
            }
        }
        let picked = a.select_rows(&[35, 2, 2, 0]).unwrap();
        assert_eq!(picked.shape(), (4, 36));
        for (k, &i) in [35, 2, 2, 0].iter().enumerate() {
            assert_eq!(picked.row(k), a.row(i));
        }
        assert!(a.select_rows(&[36]).is_err());
        assert!(a.into_first_rows(37).is_err());
    }

    #[test]
    fn a_matrix_beside_another_holds_both_rows_one_after_the_other() {
        // A 36 x 36 Laplacian beside its first 20 columns' block (a rank's
        // owned block beside its ghost block) is the dense concatenation.
        let a = crate::generators::laplace2d::<f64>(6);
        let right = Csr::from_coo(&{
            let mut c = Coo::new(36, 20);
            for i in 0..36 {
                let (cols, vals) = a.row(i);
                for (&j, &v) in cols.iter().zip(vals) {
                    if (j as usize) < 20 {
                        c.push(i, j as usize, 2.0 * v).unwrap();
                    }
                }
            }
            c
        })
        .unwrap();
        let both = a.beside(&right).unwrap();
        assert_eq!(both.shape(), (36, 56));
        assert_eq!(both.nnz(), a.nnz() + right.nnz());
        for i in 0..36 {
            let mut want: Vec<(u32, f64)> = a
                .row(i)
                .0
                .iter()
                .copied()
                .zip(a.row(i).1.iter().copied())
                .collect();
            want.extend(
                right
                    .row(i)
                    .0
                    .iter()
                    .map(|&j| j + 36)
                    .zip(right.row(i).1.iter().copied()),
            );
            let got: Vec<(u32, f64)> = both
                .row(i)
                .0
                .iter()
                .copied()
                .zip(both.row(i).1.iter().copied())
                .collect();
            assert_eq!(got, want, "row {i}");
        }
        let short = a.clone().into_first_rows(35).unwrap();
        assert!(a.beside(&short).is_err());
    }

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
        let serial = Csr::from_coo_serial(&reversed);
        assert_eq!(Csr::from_coo(&sorted).unwrap(), serial);
        // Rows out of order take the conversion by blocks, on any number of
        // threads.
        for threads in [1, 2, 5] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            assert_eq!(pool.install(|| Csr::from_coo(&reversed)).unwrap(), serial);
        }
        let none: [TripletPart<'_, u32, f64>; 0] = [];
        assert_eq!(Csr::from_triplet_parts(0, 3, &none).row_ptr(), &[0]);
        assert_eq!(Csr::from_triplet_parts(4, 3, &none).row_ptr(), &[0; 5]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Triplets in any order, with duplicates whose sums depend on the
        /// order and negative zeros, cut into any parts: the conversion by
        /// blocks gives the serial conversion's matrix bit for bit.
        #[test]
        fn blocks_of_rows_give_the_serial_conversion(
            (nrows, ncols, triplets) in (1usize..40, 1usize..40).prop_flat_map(|(m, n)| {
                let value = prop::sample::select(vec![1e16, -1e16, 0.1, -0.0, 0.0, 2.5, -3.0]);
                (Just(m), Just(n), prop::collection::vec((0..m, 0..n, value), 0..300))
            }),
            cuts in prop::collection::vec(0usize..300, 0..4),
            threads in 1usize..5,
        ) {
            let mut coo = Coo::new(nrows, ncols);
            for &(i, j, v) in &triplets {
                coo.push(i, j, v).unwrap();
            }
            let want = format!("{:?}", Csr::from_coo_serial(&coo));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(triplets.len())).collect();
            cuts.extend([0, triplets.len()]);
            cuts.sort_unstable();
            let (rows, cols) = (coo.row_indices(), coo.col_indices());
            let parts: Vec<TripletPart<'_, usize, f64>> = cuts
                .windows(2)
                .map(|w| TripletPart {
                    rows: &rows[w[0]..w[1]],
                    cols: &cols[w[0]..w[1]],
                    vals: &coo.values()[w[0]..w[1]],
                })
                .collect();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let got = pool.install(|| Csr::from_triplet_parts(nrows, ncols, &parts));
            prop_assert_eq!(format!("{got:?}"), want);
        }
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
