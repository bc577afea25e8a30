//! Sparse products on the host: the row-parallel CSR builder, the sparse
//! matrix-matrix product (Gustavson), a sparse sum, and the Galerkin triple
//! product R A P (R = P^T by [`gpuq_sparse::par_transpose`]).
//!
//! Every result is deterministic: rows are built independently, each row's
//! entries are summed in a fixed order (the order of the operands' entries), so
//! the thread count changes nothing.

use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// Most rows per parallel task of the builders.
const TASK_ROWS: usize = 512;

/// Rows per task for `nrows` rows: [`TASK_ROWS`], or fewer so that there are
/// at least four tasks per thread (the coarse levels' products have a few
/// hundred long rows: in one or two tasks a thread would do them alone).
/// O(1).
fn task_rows(nrows: usize) -> usize {
    TASK_ROWS
        .min(nrows.div_ceil(4 * rayon::current_num_threads()))
        .max(1)
}

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
    task: usize,
    chunks: Vec<Chunk>,
}

impl Rows {
    /// Row i's columns and values. O(1).
    pub(crate) fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let (c, r) = (&self.chunks[i / self.task], i % self.task);
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
        let i = t * self.task + c.ends.partition_point(|&e| e <= k);
        Err(Error::InvalidMatrix(format!(
            "non-finite value at ({i}, {}) (0-based)",
            c.cols[k]
        )))
    }
}

/// Builds the rows of an `nrows x ncols` matrix: row i is what `row(i,
/// scratch, writer)` writes (sorted, unique columns); rows are built in
/// parallel tasks of [`task_rows`] rows, each with its own scratch `S` from
/// `init`. O(output).
pub(crate) fn par_rows<S>(
    nrows: usize,
    ncols: usize,
    init: impl Fn() -> S + Sync,
    row: impl Fn(usize, &mut S, &mut RowWriter<'_>) + Sync,
) -> Rows {
    let task = task_rows(nrows);
    let chunks = (0..nrows.div_ceil(task))
        .into_par_iter()
        .map_init(
            || (init(), 0),
            |(scratch, last), c| {
                let rows = c * task..((c + 1) * task).min(nrows);
                // Room for as many entries as the worker's previous task wrote.
                let mut chunk = Chunk {
                    ends: Vec::with_capacity(rows.len()),
                    cols: Vec::with_capacity(*last),
                    vals: Vec::with_capacity(*last),
                };
                for i in rows {
                    let mut writer = RowWriter {
                        cols: &mut chunk.cols,
                        vals: &mut chunk.vals,
                    };
                    row(i, scratch, &mut writer);
                    chunk.ends.push(chunk.cols.len());
                }
                *last = chunk.cols.len() + chunk.cols.len() / 8;
                chunk
            },
        )
        .collect();
    Rows {
        ncols,
        task,
        chunks,
    }
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

/// Gustavson's accumulator for a group of g rows (1 to [`MAX_GROUP`]) of the
/// same pattern, dense by column: the g sums of column j side by side at
/// j g, a stamp per column saying whether the current group reached it, and
/// the columns in the order first reached; once drained, the pattern (in
/// increasing column order, or as first reached) and, for g > 1, the g
/// rows' values side by side.
/// An entry is added without a branch: its column is written at the end of
/// the reached list, which grows by one when the column's stamp is not the
/// group's, so whether a column is new costs no misprediction (a test per
/// entry mispredicted for about one entry in five of a product's rows, and
/// a slot per column made every sum wait on the slot's load). Grouping
/// rows changes no value: each entry is summed in its own row's order.
pub(crate) struct Accumulator {
    stamp: Vec<u32>,
    current: u32,
    group: usize,
    touched: Vec<u32>,
    sums: Vec<f64>,
    len: usize,
    seen: Vec<u64>,
    sorted: bool,
    pending: bool,
    pattern: Vec<u32>,
    rows: Vec<f64>,
}

/// Adds `v` to the `G` sums of column j, recording j as reached by the
/// group stamped `current` (at `touched[len]`, `len` grown by one if new).
/// O(G), no branch.
#[inline(always)]
fn accumulate<const G: usize>(
    stamp: &mut [u32],
    current: u32,
    touched: &mut [u32],
    len: &mut usize,
    sums: &mut [f64],
    j: u32,
    v: [f64; G],
) {
    let c = j as usize;
    touched[*len] = j;
    *len += usize::from(stamp[c] != current);
    stamp[c] = current;
    for (x, y) in sums[c * G..c * G + G].iter_mut().zip(v) {
        *x += y;
    }
}

impl Accumulator {
    /// An empty accumulator for rows of `ncols` columns. O(ncols).
    pub(crate) fn new(ncols: usize) -> Self {
        Accumulator {
            stamp: vec![u32::MAX; ncols],
            current: 0,
            group: 1,
            touched: vec![0; ncols + 1],
            sums: vec![0.0; ncols],
            len: 0,
            seen: vec![0; ncols.div_ceil(64)],
            sorted: true,
            pending: false,
            pattern: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Starts a group of `g` rows, empty (the sums grow to g per column on
    /// the first such group: O(ncols g) once; the stamps are reset once
    /// every 2^32 - 1 groups).
    pub(crate) fn start(&mut self, g: usize) {
        let need = self.stamp.len() * g;
        if self.sums.len() < need {
            self.sums.resize(need, 0.0);
        }
        if self.pending {
            // A one-row group drained and never written: its sums back to zero.
            for &j in &self.touched[..self.len] {
                self.sums[j as usize] = 0.0;
            }
            self.pending = false;
        }
        self.group = g;
        self.len = 0;
        self.current = self.current.wrapping_add(1);
        if self.current == u32::MAX {
            self.stamp.fill(u32::MAX);
            self.current = 0;
        }
    }

    /// Adds `v[r]` to column j of row r of the group, for each of its `G`
    /// rows (`G` as started). O(G).
    #[inline]
    pub(crate) fn add<const G: usize>(&mut self, j: u32, v: [f64; G]) {
        accumulate::<G>(
            &mut self.stamp,
            self.current,
            &mut self.touched,
            &mut self.len,
            &mut self.sums,
            j,
            v,
        );
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
        let (stamp, current, touched, sums) = (
            &mut self.stamp[..],
            self.current,
            &mut self.touched[..],
            &mut self.sums[..],
        );
        let mut len = self.len;
        for (coef, cols, vals) in terms {
            for (&j, &b) in cols.iter().zip(vals) {
                let v: [f64; G] = std::array::from_fn(|r| coef[r] * b);
                accumulate::<G>(stamp, current, touched, &mut len, sums, j, v);
            }
        }
        self.len = len;
    }

    /// Ends the group: its pattern in increasing column order (by a scan of
    /// bits set for its columns when their range spans few words for their
    /// count, else by a sort) and, for several rows, their values in that
    /// order, the sums left zero (a single row's sums are taken as
    /// [`Accumulator::emit`] writes it). O(touched g + min(words spanned,
    /// touched log touched)).
    pub(crate) fn drain(&mut self) {
        self.drain_in(true);
    }

    /// [`Accumulator::drain`], the pattern in increasing column order when
    /// `sorted`, else in the order the columns were first reached (no scan
    /// or sort; for rows that are only read by a further product, whose
    /// sums do not depend on the order of a row's columns). O(touched g).
    fn drain_in(&mut self, sorted: bool) {
        let g = self.group;
        self.sorted = sorted;
        if sorted {
            self.sorted_pattern();
        }
        if g == 1 {
            // Taken from the sums as the row is written (`emit`).
            self.pending = true;
            return;
        }
        self.rows.clear();
        let order = if sorted {
            &self.pattern[..]
        } else {
            &self.touched[..self.len]
        };
        for &j in order {
            let at = j as usize * g;
            let sums = &mut self.sums[at..at + g];
            self.rows.extend(sums.iter_mut().map(std::mem::take));
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

    /// Writes row r of the group drained last (a one-row group's sums taken
    /// back to zero as they are written). O(pattern).
    pub(crate) fn emit(&mut self, r: usize, out: &mut RowWriter<'_>) {
        let g = self.group;
        let cols = if self.sorted {
            &self.pattern[..]
        } else {
            &self.touched[..self.len]
        };
        if g == 1 {
            let sums = &mut self.sums;
            out.cols.extend_from_slice(cols);
            out.vals
                .extend(cols.iter().map(|&j| std::mem::take(&mut sums[j as usize])));
            self.pending = false;
            return;
        }
        for (p, &j) in cols.iter().enumerate() {
            out.push(j, self.rows[p * g + r]);
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
            let r = a.transpose(false);
            let want = reference_product(&r, &reference_product(&a, &b));
            assert_eq!(galerkin(&r, &a, &b).unwrap(), want);
        }
    }

    /// The row an accumulator's last group wrote as row `r`.
    fn written(acc: &mut Accumulator, r: usize) -> (Vec<u32>, Vec<f64>) {
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        acc.emit(
            r,
            &mut RowWriter {
                cols: &mut cols,
                vals: &mut vals,
            },
        );
        (cols, vals)
    }

    #[test]
    fn the_accumulator_starts_each_group_from_zero() {
        let mut acc = Accumulator::new(10);
        // A one-row group drained and never written leaves nothing behind.
        acc.start(1);
        acc.add::<1>(3, [1.0]);
        acc.add::<1>(7, [2.0]);
        acc.drain();
        acc.start(1);
        acc.add::<1>(7, [0.5]);
        acc.add::<1>(3, [0.25]);
        acc.add::<1>(7, [0.5]);
        acc.drain();
        assert_eq!(written(&mut acc, 0), (vec![3, 7], vec![0.25, 1.0]));
        // Groups of two rows, then of one, over the same columns.
        acc.start(2);
        acc.add::<2>(9, [1.0, 2.0]);
        acc.add::<2>(0, [3.0, 4.0]);
        acc.drain_in(false);
        assert_eq!(written(&mut acc, 1), (vec![9, 0], vec![2.0, 4.0]));
        assert_eq!(written(&mut acc, 0), (vec![9, 0], vec![1.0, 3.0]));
        acc.start(1);
        acc.add::<1>(0, [5.0]);
        acc.drain();
        assert_eq!(written(&mut acc, 0), (vec![0], vec![5.0]));
        // The stamps wrap after 2^32 - 1 groups (column 5, never reached,
        // still holds the initial stamp).
        acc.current = u32::MAX - 1;
        acc.start(1);
        acc.add::<1>(5, [1.0]);
        acc.add::<1>(0, [1.0]);
        acc.drain();
        assert_eq!(written(&mut acc, 0), (vec![0, 5], vec![1.0, 1.0]));
        acc.start(1);
        acc.add::<1>(0, [2.0]);
        acc.drain();
        assert_eq!(written(&mut acc, 0), (vec![0], vec![2.0]));
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
