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

/// Builds an `nrows x ncols` CSR matrix whose row i is what `row(i, buf)` leaves
/// in `buf` (sorted, unique columns); rows are built in parallel tasks of
/// [`TASK_ROWS`] rows, each with its own scratch `S` from `init`. O(output).
pub(crate) fn par_build<S>(
    nrows: usize,
    ncols: usize,
    init: impl Fn() -> S + Sync,
    row: impl Fn(usize, &mut S, &mut Vec<(u32, f64)>) + Sync,
) -> Result<Csr<f64>> {
    let chunks: Vec<(Vec<usize>, Vec<u32>, Vec<f64>)> = (0..nrows.div_ceil(TASK_ROWS))
        .into_par_iter()
        .map_init(&init, |scratch, c| {
            let mut buf = Vec::new();
            let (mut lens, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
            for i in c * TASK_ROWS..((c + 1) * TASK_ROWS).min(nrows) {
                buf.clear();
                row(i, scratch, &mut buf);
                lens.push(buf.len());
                for &(j, v) in &buf {
                    cols.push(j);
                    vals.push(v);
                }
            }
            (lens, cols, vals)
        })
        .collect();
    let nnz: usize = chunks.iter().map(|c| c.1.len()).sum();
    let mut row_ptr = Vec::with_capacity(nrows + 1);
    let (mut col_idx, mut values) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
    row_ptr.push(0);
    for (lens, cols, vals) in chunks {
        for l in lens {
            row_ptr.push(row_ptr.last().copied().unwrap_or(0) + l);
        }
        col_idx.extend_from_slice(&cols);
        values.extend_from_slice(&vals);
    }
    Csr::try_new(nrows, ncols, row_ptr, col_idx, values)
}

/// Gustavson's accumulator: a dense value array, a marker per column, and the
/// list of columns touched in the current row.
pub(crate) struct Accumulator {
    value: Vec<f64>,
    seen: Vec<bool>,
    touched: Vec<u32>,
}

impl Accumulator {
    pub(crate) fn new(ncols: usize) -> Self {
        Accumulator {
            value: vec![0.0; ncols],
            seen: vec![false; ncols],
            touched: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, j: u32, v: f64) {
        let k = j as usize;
        if !self.seen[k] {
            self.seen[k] = true;
            self.touched.push(j);
        }
        self.value[k] += v;
    }

    /// Moves the row out, sorted by column, and clears the accumulator.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<(u32, f64)>) {
        self.touched.sort_unstable();
        for &j in &self.touched {
            let k = j as usize;
            out.push((j, self.value[k]));
            self.value[k] = 0.0;
            self.seen[k] = false;
        }
        self.touched.clear();
    }
}

/// C = A B. Row-parallel Gustavson product: O(flops + nnz(C)) time, one dense
/// accumulator of B's column count per task. Errors when the inner dimensions
/// differ.
pub fn spgemm(a: &Csr<f64>, b: &Csr<f64>) -> Result<Csr<f64>> {
    if a.ncols() != b.nrows() {
        return Err(Error::shape(
            "spgemm",
            format!("B with {} rows", a.ncols()),
            format!("{} rows", b.nrows()),
        ));
    }
    spgemm_rows(a, b.ncols(), |k| b.row(k))
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
    par_build(
        a.nrows(),
        ncols,
        || Accumulator::new(ncols),
        |i, acc, out| {
            let (ac, av) = a.row(i);
            for (&k, &aik) in ac.iter().zip(av) {
                let (bc, bv) = b_row(k as usize);
                for (&j, &bkj) in bc.iter().zip(bv) {
                    acc.add(j, aik * bkj);
                }
            }
            acc.drain_into(out);
        },
    )
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
                out.push((j, v));
            }
        },
    )
}

/// The Galerkin coarse operator R A P (with R = P^T in this crate), computed as
/// R (A P). Cost: two sparse products, O(flops(AP) + flops(R AP)).
pub fn galerkin(r: &Csr<f64>, a: &Csr<f64>, p: &Csr<f64>) -> Result<Csr<f64>> {
    let ap = spgemm(a, p)?;
    spgemm(r, &ap)
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
                out.push((i as u32, 1.0));
            } else {
                out.extend(c.iter().copied().zip(v.iter().copied()));
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
