//! Sparse products on the host: the row-parallel CSR builder, the sparse
//! matrix-matrix product (Gustavson), a sparse sum, and the Galerkin triple
//! product R A P.
//!
//! Every result is deterministic: rows are built independently, each row's
//! entries are summed in a fixed order (the order of the operands' entries), so
//! the thread count changes nothing.

use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// Rows per parallel task of the builders.
const TASK_ROWS: usize = 512;

/// The row a [`par_build`] closure is writing: its entries are appended, in
/// increasing column order, to the task's arrays after the rows before it.
pub(crate) struct RowWriter<'a> {
    cols: &'a mut Vec<u32>,
    vals: &'a mut Vec<f64>,
}

impl RowWriter<'_> {
    /// Appends entry (j, v) to the row.
    #[inline]
    pub(crate) fn push(&mut self, j: u32, v: f64) {
        self.cols.push(j);
        self.vals.push(v);
    }

    /// Appends the entries of `cols` and `vals` (same length) to the row.
    pub(crate) fn extend(&mut self, cols: &[u32], vals: &[f64]) {
        self.cols.extend_from_slice(cols);
        self.vals.extend_from_slice(vals);
    }
}

/// One task's rows of a [`par_rows`]: each row's end in `cols`/`vals`.
struct Chunk {
    ends: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f64>,
}

/// The rows [`par_rows`] built, kept in its tasks' arrays: read by row
/// without being copied into one matrix.
pub(crate) struct Rows {
    ncols: usize,
    chunks: Vec<Chunk>,
}

impl Rows {
    /// Row i's columns and values. O(1).
    pub(crate) fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let (c, r) = (&self.chunks[i / TASK_ROWS], i % TASK_ROWS);
        let start = if r == 0 { 0 } else { c.ends[r - 1] };
        (&c.cols[start..c.ends[r]], &c.vals[start..c.ends[r]])
    }

    /// Errors on the first non-finite value (row by row) with the message of
    /// `Csr::check_finite`. O(nnz), in parallel.
    pub(crate) fn check_finite(&self) -> Result<()> {
        let bad = |c: &Chunk| c.vals.iter().position(|v| !v.is_finite());
        let Some(t) = self.chunks.par_iter().position_first(|c| bad(c).is_some()) else {
            return Ok(());
        };
        let (c, k) = (&self.chunks[t], bad(&self.chunks[t]).unwrap_or(0));
        let i = t * TASK_ROWS + c.ends.partition_point(|&e| e <= k);
        Err(Error::InvalidMatrix(format!(
            "non-finite value at ({i}, {}) (0-based)",
            c.cols[k]
        )))
    }
}

/// Builds the rows of an `nrows x ncols` matrix: row i is what `row(i,
/// scratch, writer)` writes (sorted, unique columns); rows are built in
/// parallel tasks of [`TASK_ROWS`] rows, each with its own scratch `S` from
/// `init`. O(output).
pub(crate) fn par_rows<S>(
    nrows: usize,
    ncols: usize,
    init: impl Fn() -> S + Sync,
    row: impl Fn(usize, &mut S, &mut RowWriter<'_>) + Sync,
) -> Rows {
    let chunks = (0..nrows.div_ceil(TASK_ROWS))
        .into_par_iter()
        .map_init(&init, |scratch, c| {
            let rows = c * TASK_ROWS..((c + 1) * TASK_ROWS).min(nrows);
            let mut chunk = Chunk {
                ends: Vec::with_capacity(rows.len()),
                cols: Vec::new(),
                vals: Vec::new(),
            };
            for i in rows {
                let mut writer = RowWriter {
                    cols: &mut chunk.cols,
                    vals: &mut chunk.vals,
                };
                row(i, scratch, &mut writer);
                chunk.ends.push(chunk.cols.len());
            }
            chunk
        })
        .collect();
    Rows { ncols, chunks }
}

/// [`par_rows`] copied into a CSR matrix ([`assemble`]). O(output).
pub(crate) fn par_build<S>(
    nrows: usize,
    ncols: usize,
    init: impl Fn() -> S + Sync,
    row: impl Fn(usize, &mut S, &mut RowWriter<'_>) + Sync,
) -> Result<Csr<f64>> {
    assemble(nrows, &par_rows(nrows, ncols, init, row))
}

/// The CSR matrix of the tasks' rows, in order: row pointers by a serial
/// prefix sum (O(nrows)), columns and values copied chunk by chunk in
/// parallel (O(nnz)).
fn assemble(nrows: usize, rows: &Rows) -> Result<Csr<f64>> {
    let (ncols, chunks) = (rows.ncols, &rows.chunks);
    let mut row_ptr = Vec::with_capacity(nrows + 1);
    row_ptr.push(0);
    for c in chunks {
        let base = row_ptr.last().copied().unwrap_or(0);
        row_ptr.extend(c.ends.iter().map(|e| base + e));
    }
    let nnz = row_ptr.last().copied().unwrap_or(0);
    let (mut col_idx, mut values) = (vec![0u32; nnz], vec![0.0f64; nnz]);
    let mut parts = Vec::with_capacity(chunks.len());
    let (mut cols_left, mut vals_left) = (&mut col_idx[..], &mut values[..]);
    for c in chunks {
        let (cols, rest_cols) = cols_left.split_at_mut(c.cols.len());
        let (vals, rest_vals) = vals_left.split_at_mut(c.vals.len());
        parts.push((c, cols, vals));
        (cols_left, vals_left) = (rest_cols, rest_vals);
    }
    parts.into_par_iter().for_each(|(c, cols, vals)| {
        cols.copy_from_slice(&c.cols);
        vals.copy_from_slice(&c.vals);
    });
    Csr::try_new(nrows, ncols, row_ptr, col_idx, values)
}

/// Whether two rows have the same columns: their lengths and end columns
/// compared inline first (rows of a scalar problem usually differ there),
/// then the whole slices. O(len) at most.
#[inline]
pub(crate) fn same_columns(x: &[u32], y: &[u32]) -> bool {
    x.len() == y.len() && x.first() == y.first() && x.last() == y.last() && x == y
}

/// Most rows a product accumulates together ([`Accumulator`]).
pub(crate) const MAX_GROUP: usize = 8;

/// A column's slot in [`Accumulator`] while the column is not in the
/// group's pattern.
const NO_SLOT: u32 = u32::MAX;

/// Gustavson's accumulator for a group of g rows (1 to [`MAX_GROUP`]) of the
/// same pattern: each column's slot in the group's pattern (its rank in the
/// order first reached, or [`NO_SLOT`]), the columns in that order and the g
/// sums of each slot side by side, contiguous; once drained, the pattern (in
/// increasing column order, or as first reached) and the g rows' values.
/// A column's slot is looked up per entry, so distinct columns never wait on
/// one another (a bit per column in shared words made every entry of a row
/// depend on the one before). Grouping rows changes no value: each entry is
/// summed in its own row's order.
pub(crate) struct Accumulator {
    slot: Vec<u32>,
    group: usize,
    touched: Vec<u32>,
    sums: Vec<f64>,
    len: usize,
    seen: Vec<u64>,
    sorted: bool,
    pattern: Vec<u32>,
    rows: Vec<f64>,
}

/// Column j's slot, given the next one (`len`, its `G` sums zeroed) when the
/// group has not reached j yet. O(G).
#[inline(always)]
fn slot_of<const G: usize>(
    slot: &mut [u32],
    touched: &mut [u32],
    sums: &mut [f64],
    len: &mut usize,
    j: u32,
) -> usize {
    let s = &mut slot[j as usize];
    if *s == NO_SLOT {
        *s = *len as u32;
        touched[*len] = j;
        sums[*len * G..*len * G + G].fill(0.0);
        *len += 1;
    }
    *s as usize * G
}

impl Accumulator {
    /// An empty accumulator for rows of `ncols` columns. O(ncols).
    pub(crate) fn new(ncols: usize) -> Self {
        Accumulator {
            slot: vec![NO_SLOT; ncols],
            group: 1,
            touched: vec![0; ncols],
            sums: vec![0.0; ncols],
            len: 0,
            seen: vec![0; ncols.div_ceil(64)],
            sorted: true,
            pattern: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Starts a group of `g` rows, empty (the sums grow to g per column on
    /// the first such group: O(ncols g) once).
    pub(crate) fn start(&mut self, g: usize) {
        let need = self.slot.len() * g;
        if self.sums.len() < need {
            self.sums.resize(need, 0.0);
        }
        self.group = g;
        self.len = 0;
    }

    /// Adds `v[r]` to column j of row r of the group, for each of its `G`
    /// rows (`G` as started). O(G).
    #[inline]
    pub(crate) fn add<const G: usize>(&mut self, j: u32, v: [f64; G]) {
        let at = slot_of::<G>(
            &mut self.slot,
            &mut self.touched,
            &mut self.sums,
            &mut self.len,
            j,
        );
        for (x, y) in self.sums[at..at + G].iter_mut().zip(v) {
            *x += y;
        }
    }

    /// For each `(coef, cols, vals)` of `terms`, in order, adds `coef[r] *
    /// vals[e]` to column `cols[e]` of row r of the group (`G` rows as
    /// started), entry by entry. The arrays are held as local slices for the
    /// whole loop, so nothing is reloaded per entry. O(entries G).
    #[inline(always)]
    pub(crate) fn add_scaled_rows<'x, const G: usize>(
        &mut self,
        terms: impl Iterator<Item = ([f64; G], &'x [u32], &'x [f64])>,
    ) {
        let (slot, touched, sums) = (
            &mut self.slot[..],
            &mut self.touched[..],
            &mut self.sums[..],
        );
        let mut len = self.len;
        for (coef, cols, vals) in terms {
            for (&j, &b) in cols.iter().zip(vals) {
                let at = slot_of::<G>(slot, touched, sums, &mut len, j);
                for (x, c) in sums[at..at + G].iter_mut().zip(&coef) {
                    *x += c * b;
                }
            }
        }
        self.len = len;
    }

    /// Ends the group: its pattern in increasing column order (by a scan of
    /// bits set for its columns when their range spans few words for their
    /// count, else by a sort) and its rows' values in that order; the slots
    /// are left clear. O(touched g + min(words spanned, touched log
    /// touched)).
    pub(crate) fn drain(&mut self) {
        self.drain_in(true);
    }

    /// [`Accumulator::drain`], the pattern in increasing column order when
    /// `sorted`, else in the order the columns were first reached (no scan,
    /// sort or copy: [`Accumulator::emit`] reads the sums where they are; for
    /// rows that are only read by a further product, whose sums do not
    /// depend on the order of a row's columns). O(touched g).
    fn drain_in(&mut self, sorted: bool) {
        let (g, n) = (self.group, self.len);
        self.sorted = sorted;
        if sorted {
            self.sorted_pattern();
            self.rows.clear();
            for &j in &self.pattern {
                let at = self.slot[j as usize] as usize * g;
                self.rows.extend_from_slice(&self.sums[at..at + g]);
            }
        }
        for &j in &self.touched[..n] {
            self.slot[j as usize] = NO_SLOT;
        }
    }

    /// The touched columns in increasing order into `pattern`: through the
    /// bits (set, then scanned and cleared) when their range spans fewer
    /// than 4 words per column, else by a sort. O(touched + min(words
    /// spanned, touched log touched)).
    fn sorted_pattern(&mut self) {
        self.pattern.clear();
        let touched = &self.touched[..self.len];
        let (lo, hi) = touched.iter().fold((usize::MAX, 0), |(lo, hi), &j| {
            let w = j as usize / 64;
            (lo.min(w), hi.max(w))
        });
        let n = touched.len();
        if n > 0 && hi - lo < 4 * n {
            for &j in touched {
                self.seen[j as usize / 64] |= 1u64 << (j % 64);
            }
            for w in lo..=hi {
                let mut bits = std::mem::take(&mut self.seen[w]);
                while bits != 0 {
                    self.pattern.push((w * 64) as u32 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
        } else {
            self.pattern.extend_from_slice(touched);
            self.pattern.sort_unstable();
        }
    }

    /// Writes row r of the group drained last. O(pattern).
    pub(crate) fn emit(&self, r: usize, out: &mut RowWriter<'_>) {
        let g = self.group;
        let (cols, vals) = if self.sorted {
            (&self.pattern[..], &self.rows[..])
        } else {
            (&self.touched[..self.len], &self.sums[..self.len * g])
        };
        if g == 1 {
            out.extend(cols, vals);
            return;
        }
        for (p, &j) in cols.iter().enumerate() {
            out.push(j, vals[p * g + r]);
        }
    }
}

/// Runs `f::<G>()` for `G = g` (1 to [`MAX_GROUP`]): a group's loops
/// compiled for its size.
macro_rules! for_group {
    ($g:expr, $f:ident, $($arg:expr),*) => {
        match $g {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            _ => $f::<8>($($arg),*),
        }
    };
}
pub(crate) use for_group;

/// The rows a [`par_build`] scratch computed last as one group, from row
/// `first` on: `len` rows, their values in `acc`.
pub(crate) struct GroupScratch {
    pub(crate) acc: Accumulator,
    first: usize,
    len: usize,
}

impl GroupScratch {
    /// An empty scratch for rows of `ncols` columns.
    pub(crate) fn new(ncols: usize) -> Self {
        GroupScratch {
            acc: Accumulator::new(ncols),
            first: 0,
            len: 0,
        }
    }

    /// Writes row i: from the group computed last if it holds i, else by
    /// `group(i, acc)`, which computes the group starting at row i into `acc`
    /// and returns its size. O(pattern) plus the group's cost.
    pub(crate) fn row(
        &mut self,
        i: usize,
        out: &mut RowWriter<'_>,
        group: impl FnOnce(usize, &mut Accumulator) -> usize,
    ) {
        if !(self.first..self.first + self.len).contains(&i) {
            self.len = group(i, &mut self.acc);
            self.first = i;
        }
        self.acc.emit(i - self.first, out);
    }
}

/// C = A B. Row-parallel Gustavson product: O(flops + nnz(C)) time, one dense
/// accumulator of B's column count per task (up to 8 times that for
/// consecutive rows of A with the same columns, accumulated together).
/// Errors when the inner dimensions differ.
pub fn spgemm(a: &Csr<f64>, b: &Csr<f64>) -> Result<Csr<f64>> {
    check_inner(a, b.nrows())?;
    spgemm_rows(a, b.ncols(), |k| b.row(k))
}

/// Errors unless A's columns match the `rows` of the B of a product A B.
fn check_inner(a: &Csr<f64>, rows: usize) -> Result<()> {
    if a.ncols() != rows {
        return Err(Error::shape(
            "spgemm",
            format!("B with {} rows", a.ncols()),
            format!("{rows} rows"),
        ));
    }
    Ok(())
}

/// C = A B where B's row k (`ncols` columns, sorted) is `b_row(k)`, for
/// every column k of A: a B whose rows live in several matrices (a rank's
/// own rows and the ghost rows it fetched) without stacking them. The same
/// row-parallel Gustavson product and summation order as [`spgemm`].
/// O(flops + nnz(C)).
pub fn spgemm_rows<'b>(
    a: &Csr<f64>,
    ncols: usize,
    b_row: impl Fn(usize) -> (&'b [u32], &'b [f64]) + Sync,
) -> Result<Csr<f64>> {
    assemble(a.nrows(), &product_rows(a, ncols, b_row, true))
}

/// The rows of A B ([`spgemm_rows`]) as [`par_rows`] leaves them, each
/// row's columns in increasing order when `sorted`, else in the order the
/// product first reached them (the same values). O(flops + nnz(C)).
fn product_rows<'b>(
    a: &Csr<f64>,
    ncols: usize,
    b_row: impl Fn(usize) -> (&'b [u32], &'b [f64]) + Sync,
    sorted: bool,
) -> Rows {
    par_rows(
        a.nrows(),
        ncols,
        || GroupScratch::new(ncols),
        |i, s, out| {
            s.row(i, out, |i, acc| {
                let cols = a.row(i).0;
                let g = (1..MAX_GROUP.min(a.nrows() - i))
                    .find(|&r| !same_columns(a.row(i + r).0, cols))
                    .unwrap_or(MAX_GROUP.min(a.nrows() - i));
                for_group!(g, product_group, a, &b_row, i, acc, sorted);
                g
            })
        },
    )
}

/// Rows i..i + G of A B (A's rows of the same columns) into `acc`: each B
/// row read once for the group. O(flops G).
fn product_group<'b, const G: usize>(
    a: &Csr<f64>,
    b_row: &impl Fn(usize) -> (&'b [u32], &'b [f64]),
    i: usize,
    acc: &mut Accumulator,
    sorted: bool,
) {
    acc.start(G);
    let cols = a.row(i).0;
    let vals: [&[f64]; G] = std::array::from_fn(|r| a.row(i + r).1);
    acc.add_scaled_rows::<G>(cols.iter().enumerate().map(|(p, &k)| {
        let (bc, bv) = b_row(k as usize);
        (std::array::from_fn(|r| vals[r][p]), bc, bv)
    }));
    acc.drain_in(sorted);
}

/// alpha A + beta B for matrices of the same shape (union of the patterns).
/// O(nnz(A) + nnz(B)).
pub fn add(alpha: f64, a: &Csr<f64>, beta: f64, b: &Csr<f64>) -> Result<Csr<f64>> {
    if a.shape() != b.shape() {
        return Err(Error::shape(
            "sparse add",
            format!("{:?}", a.shape()),
            format!("{:?}", b.shape()),
        ));
    }
    par_build(
        a.nrows(),
        a.ncols(),
        || (),
        |i, _, out| {
            let ((ac, av), (bc, bv)) = (a.row(i), b.row(i));
            let (mut p, mut q) = (0, 0);
            while p < ac.len() || q < bc.len() {
                let take_a = q == bc.len() || (p < ac.len() && ac[p] <= bc[q]);
                let take_b = p == ac.len() || (q < bc.len() && bc[q] <= ac[p]);
                let (mut j, mut v) = (0, 0.0);
                if take_a {
                    j = ac[p];
                    v += alpha * av[p];
                    p += 1;
                }
                if take_b {
                    j = bc[q];
                    v += beta * bv[q];
                    q += 1;
                }
                out.push(j, v);
            }
        },
    )
}

/// A^T, the matrix `Csr::transpose(false)` builds (each row's entries in
/// increasing column order), built in parallel: the column counts by tasks
/// of rows, then the rows of A^T in ranges of about equal entries, each
/// range filled by one pass over A's rows that finds, by binary search,
/// each row's entries in its columns. O(nnz + ncols tasks + nrows ranges
/// log(row length)).
pub fn transpose(a: &Csr<f64>) -> Result<Csr<f64>> {
    let (n, m) = (a.nrows(), a.ncols());
    let threads = rayon::current_num_threads();
    let counts = (0..n)
        .into_par_iter()
        .with_min_len(n.div_ceil(2 * threads).max(1))
        .fold(
            || vec![0usize; m],
            |mut counts, i| {
                for &j in a.row(i).0 {
                    counts[j as usize] += 1;
                }
                counts
            },
        )
        .reduce_with(|mut x, y| {
            x.iter_mut().zip(&y).for_each(|(x, y)| *x += y);
            x
        })
        .unwrap_or_else(|| vec![0; m]);
    let mut row_ptr = Vec::with_capacity(m + 1);
    row_ptr.push(0);
    for c in &counts {
        row_ptr.push(row_ptr.last().copied().unwrap_or(0) + c);
    }
    let nnz = a.nnz();
    let ranges = 4 * threads;
    // Range q holds the rows of A^T from bounds[q], the first row whose
    // entries start at or after q nnz / ranges.
    let mut bounds: Vec<usize> = (0..ranges)
        .map(|q| row_ptr.partition_point(|&p| p * ranges < q * nnz).min(m))
        .collect();
    bounds.push(m);
    bounds.dedup();
    let (mut col_idx, mut values) = (vec![0u32; nnz], vec![0.0f64; nnz]);
    let mut parts = Vec::with_capacity(bounds.len());
    let (mut cols_left, mut vals_left) = (&mut col_idx[..], &mut values[..]);
    for w in bounds.windows(2) {
        let len = row_ptr[w[1]] - row_ptr[w[0]];
        let (cols, rest_cols) = cols_left.split_at_mut(len);
        let (vals, rest_vals) = vals_left.split_at_mut(len);
        parts.push((w[0]..w[1], cols, vals));
        (cols_left, vals_left) = (rest_cols, rest_vals);
    }
    parts.into_par_iter().for_each(|(range, cols, vals)| {
        let base = row_ptr[range.start];
        let mut next: Vec<usize> = row_ptr[range.clone()].iter().map(|p| p - base).collect();
        let (lo, hi) = (range.start as u32, range.end as u32);
        for i in 0..n {
            let (c, v) = a.row(i);
            let first = c.partition_point(|&j| j < lo);
            for (&j, &x) in c[first..].iter().zip(&v[first..]) {
                if j >= hi {
                    break;
                }
                let at = &mut next[(j - lo) as usize];
                cols[*at] = i as u32;
                vals[*at] = x;
                *at += 1;
            }
        }
    });
    Csr::try_new_allow_nonfinite(m, n, row_ptr, col_idx, values)
}

/// The Galerkin coarse operator R A P (with R = P^T in this crate), computed as
/// R (A P), A P's rows read where their tasks built them (their columns left
/// unsorted: R (A P) sums each entry in R's order either way). Errors when the
/// shapes do not chain or A P has a value that is not finite. Cost: two
/// sparse products, O(flops(AP) + flops(R AP)).
pub fn galerkin(r: &Csr<f64>, a: &Csr<f64>, p: &Csr<f64>) -> Result<Csr<f64>> {
    check_inner(a, p.nrows())?;
    let ap = product_rows(a, p.ncols(), |k| p.row(k), false);
    ap.check_finite()?;
    check_inner(r, a.nrows())?;
    spgemm_rows(r, p.ncols(), |k| ap.row(k))
}

/// The rows of `a` whose stored entries are all zero (or that store none),
/// in increasing order. O(nnz).
pub fn empty_rows(a: &Csr<f64>) -> Vec<usize> {
    (0..a.nrows())
        .filter(|&i| a.row(i).1.iter().all(|&v| v == 0.0))
        .collect()
}

/// `a` with each row of `empty` (increasing) replaced by a 1 on its diagonal:
/// the coarse unknown of a zero prolongator column then decouples (its
/// restricted right-hand side is 0), so the level stays nonsingular. O(nnz).
pub fn with_unit_rows(a: &Csr<f64>, empty: &[usize]) -> Result<Csr<f64>> {
    par_build(
        a.nrows(),
        a.ncols(),
        || (),
        |i, _, out| {
            let (c, v) = a.row(i);
            if empty.binary_search(&i).is_ok() {
                out.push(i as u32, 1.0);
            } else {
                out.extend(c, v);
            }
        },
    )
}

/// Puts a 1 on the diagonal of every row of the square matrix `a` whose stored
/// entries are all zero ([`empty_rows`], [`with_unit_rows`]). Returns the
/// matrix and how many rows it fixed. O(nnz).
pub fn fix_empty_rows(a: Csr<f64>) -> Result<(Csr<f64>, usize)> {
    let empty = empty_rows(&a);
    if empty.is_empty() {
        return Ok((a, 0));
    }
    Ok((with_unit_rows(&a, &empty)?, empty.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense_mul(a: &Csr<f64>, b: &Csr<f64>) -> Vec<f64> {
        let (da, db) = (a.to_dense(), b.to_dense());
        let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for l in 0..k {
                for j in 0..n {
                    c[i * n + j] += da[i * k + l] * db[l * n + j];
                }
            }
        }
        c
    }

    #[test]
    fn spgemm_matches_dense_product() {
        let a = gpuq_sparse::generators::laplace2d::<f64>(5);
        let b = gpuq_sparse::generators::convdiff2d::<f64>(5, 0.3);
        let c = spgemm(&a, &b).unwrap();
        let want = dense_mul(&a, &b);
        for (x, y) in c.to_dense().iter().zip(&want) {
            assert!((x - y).abs() < 1e-12);
        }
        assert!(spgemm(&a, &gpuq_sparse::generators::laplace2d::<f64>(4)).is_err());
    }

    /// A product summed entry by entry in the order of A's row and then of
    /// B's rows (the order the accumulator keeps), in a sorted map.
    fn reference_product(a: &Csr<f64>, b: &Csr<f64>) -> Csr<f64> {
        let rows: Vec<std::collections::BTreeMap<u32, f64>> = (0..a.nrows())
            .map(|i| {
                let mut row = std::collections::BTreeMap::new();
                let (ac, av) = a.row(i);
                for (&k, &x) in ac.iter().zip(av) {
                    let (bc, bv) = b.row(k as usize);
                    for (&j, &y) in bc.iter().zip(bv) {
                        *row.entry(j).or_insert(0.0) += x * y;
                    }
                }
                row
            })
            .collect();
        let mut row_ptr = vec![0];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for row in &rows {
            cols.extend(row.keys());
            vals.extend(row.values());
            row_ptr.push(cols.len());
        }
        Csr::try_new(a.nrows(), b.ncols(), row_ptr, cols, vals).unwrap()
    }

    /// An m x n matrix of pseudo-random rows of 1 to `per_row` entries, runs
    /// of up to 9 consecutive rows sharing one pattern (as a node's rows
    /// do, so the products group them) with their own values.
    fn scattered(m: usize, n: usize, per_row: usize, seed: u64) -> Csr<f64> {
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let (mut row_ptr, mut cols, mut vals) = (vec![0], Vec::new(), Vec::new());
        let mut pattern: Vec<u32> = Vec::new();
        let mut left = 0;
        for _ in 0..m {
            if left == 0 {
                left = 1 + next() % 9;
                let mut p: Vec<u32> = (0..1 + next() % per_row)
                    .map(|_| (next() % n) as u32)
                    .collect();
                p.sort_unstable();
                p.dedup();
                pattern = p;
            }
            left -= 1;
            cols.extend(&pattern);
            vals.extend(pattern.iter().map(|_| (next() % 1000) as f64 / 97.0 - 5.0));
            row_ptr.push(cols.len());
        }
        Csr::try_new(m, n, row_ptr, cols, vals).unwrap()
    }

    #[test]
    fn products_match_the_entrywise_sums_bit_for_bit() {
        // Narrow column ranges (the pattern sorted through bits) and wide
        // ones (sorted by a sort), groups of 1 to 8 rows, empty rows of B.
        for (m, k, n, per_row, seed) in [
            (40, 30, 20, 6, 1),
            (300, 200, 150, 12, 2),
            (100, 80, 5000, 4, 3),
            (1200, 700, 64, 20, 4),
        ] {
            let a = scattered(m, k, per_row, seed);
            let b = scattered(k, n, per_row, seed + 10);
            assert_eq!(spgemm(&a, &b).unwrap(), reference_product(&a, &b));
            // R (A B) with R = A^T: the unsorted rows of A B read by the
            // second product.
            let r = transpose(&a).unwrap();
            let want = reference_product(&r, &reference_product(&a, &b));
            assert_eq!(galerkin(&r, &a, &b).unwrap(), want);
        }
    }

    #[test]
    fn add_merges_patterns() {
        let a = gpuq_sparse::generators::laplace2d::<f64>(4);
        let b = Csr::identity(16);
        let c = add(2.0, &a, -1.0, &b).unwrap();
        let (da, dc) = (a.to_dense(), c.to_dense());
        for i in 0..16 {
            for j in 0..16 {
                let want = 2.0 * da[i * 16 + j] - f64::from(i == j);
                assert_eq!(dc[i * 16 + j], want);
            }
        }
    }
}
