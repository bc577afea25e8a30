//! The setup's checks of its input on the host, for backends that do not run
//! them on the device: finite values, the null space among the block-component
//! constants, and symmetry. They only read A and run beside the levels' setup
//! (on their own threads), so they are written to read it as few times as
//! possible: a parallel pass for finiteness, one for the norms and the
//! candidates' products, and one sequential pass for symmetry.

use crate::symmetry::is_symmetric;
use gpuq_core::Result;
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// Most candidates [`check_input`] tests: the block-component constants of
/// the largest block, and the all-ones vector.
const MAX_CANDIDATES: usize = crate::options::MAX_BLOCK + 1;

/// The host's checks of the finest matrix `a` with block size `bs`: an error
/// at the first non-finite value; otherwise A's null space among the
/// candidates ([`kernel_basis`]) and whether A is symmetric to 1e-12 of its
/// largest entry ([`is_symmetric`]). Cost: two parallel passes over A's values (finiteness,
/// then the norms and the candidates' products together) and one sequential
/// pass over its entries.
pub(crate) fn check_input(a: &Csr<f64>, bs: usize) -> Result<(Vec<Vec<f64>>, bool)> {
    a.check_finite()?;
    let sums = row_sums(a, bs);
    // A candidate v (entries 0 and 1) is in the null space when
    // ||A v||_inf <= 1e-10 ||A||_inf ||v||_inf.
    let large: Vec<bool> = sums.candidates[..candidate_count(bs)]
        .iter()
        .map(|&r| r > 1e-10 * sums.norm_inf)
        .collect();
    let kernel = kernel_basis(a.nrows(), bs, &large);
    Ok((kernel, is_symmetric(a, 1e-12 * sums.largest)))
}

/// How many candidates a block size has ([`kernel_candidates`]).
fn candidate_count(bs: usize) -> usize {
    if bs > 1 {
        bs + 1
    } else {
        1
    }
}

/// What [`row_sums`] finds.
#[derive(Clone, Copy)]
struct RowSums {
    /// ||A||_inf, the largest row sum of |a_ij|.
    norm_inf: f64,
    /// The largest |a_ij|.
    largest: f64,
    /// Per candidate, ||A v||_inf: the largest |sum of a row's entries in
    /// the candidate's columns| (component c: the columns j with j % bs = c;
    /// the last, for bs > 1, every column).
    candidates: [f64; MAX_CANDIDATES],
}

impl RowSums {
    const ZERO: RowSums = RowSums {
        norm_inf: 0.0,
        largest: 0.0,
        candidates: [0.0; MAX_CANDIDATES],
    };

    fn max(mut self, o: RowSums) -> RowSums {
        self.norm_inf = self.norm_inf.max(o.norm_inf);
        self.largest = self.largest.max(o.largest);
        for (x, y) in self.candidates.iter_mut().zip(o.candidates) {
            *x = x.max(y);
        }
        self
    }
}

/// The norms and the candidates' products of A in one parallel pass over its
/// rows (each row's sums in column order, as a product with the candidate
/// vector would take them). O(nnz).
fn row_sums(a: &Csr<f64>, bs: usize) -> RowSums {
    // the options' check keeps bs within 1..=MAX_BLOCK (8)
    debug_assert!((1..MAX_CANDIDATES).contains(&bs), "block size {bs}");
    let row = |i: usize| {
        let (cols, vals) = a.row(i);
        match bs {
            1 => row_sums_of::<1>(cols, vals),
            2 => row_sums_of::<2>(cols, vals),
            3 => row_sums_of::<3>(cols, vals),
            4 => row_sums_of::<4>(cols, vals),
            5 => row_sums_of::<5>(cols, vals),
            6 => row_sums_of::<6>(cols, vals),
            7 => row_sums_of::<7>(cols, vals),
            _ => row_sums_of::<8>(cols, vals),
        }
    };
    (0..a.nrows())
        .into_par_iter()
        .with_min_len(1024)
        .map(row)
        .reduce(|| RowSums::ZERO, RowSums::max)
}

/// [`row_sums`] of one row for blocks of `BS` (1 to
/// [`crate::options::MAX_BLOCK`]), compiled per block size: the component of a
/// column a constant remainder, and for `BS` = 1 the one component's sum the
/// whole row's (the same sum in the same order), kept in a register. O(row).
#[inline(always)]
fn row_sums_of<const BS: usize>(cols: &[u32], vals: &[f64]) -> RowSums {
    let mut r = RowSums::ZERO;
    let mut component = [0.0f64; MAX_CANDIDATES];
    let mut all = 0.0;
    for (&j, &x) in cols.iter().zip(vals) {
        r.norm_inf += x.abs();
        r.largest = r.largest.max(x.abs());
        if BS > 1 {
            component[j as usize % BS] += x;
        }
        all += x;
    }
    if BS == 1 {
        component[0] = all;
    }
    component[BS] = all;
    for (c, s) in r.candidates.iter_mut().zip(component) {
        *c = s.abs();
    }
    r
}

/// ||A||_inf, the largest row sum of |a_ij|, rows in parallel. O(nnz).
fn norm_inf(a: &Csr<f64>) -> f64 {
    (0..a.nrows())
        .into_par_iter()
        .map(|i| a.row(i).1.iter().map(|x| x.abs()).sum::<f64>())
        .reduce(|| 0.0, f64::max)
}

/// Whether ||A v||_inf <= 1e-10 ||A||_inf ||v||_inf (`norm` is ||A||_inf) and
/// v is not zero: v is in A's numerical null space. Rows in parallel, O(nnz).
fn maps_to_zero(a: &Csr<f64>, norm: f64, v: &[f64]) -> bool {
    let size = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    size > 0.0
        && (0..a.nrows()).into_par_iter().all(|i| {
            let (c, x) = a.row(i);
            let s: f64 = c.iter().zip(x).map(|(&j, &y)| y * v[j as usize]).sum();
            s.abs() <= 1e-10 * norm * size
        })
}

/// `kernel` (orthonormal) extended by those of the `given` near-null-space
/// vectors that A maps to zero ([`maps_to_zero`]: a floating structure's
/// rigid-body modes), orthonormalised against the basis (dependent ones
/// dropped). O(nnz) per given vector.
pub(crate) fn kernel_with(
    a: &Csr<f64>,
    mut kernel: Vec<Vec<f64>>,
    given: &[Vec<f64>],
) -> Vec<Vec<f64>> {
    let norm = norm_inf(a);
    for v in given {
        if maps_to_zero(a, norm, v) {
            orthonormal_push(&mut kernel, v.clone());
        }
    }
    kernel
}

/// Appends `v` to the orthonormal `basis` after orthogonalising it (twice)
/// against it, unless what is left is below 1e-8 of its original norm (then
/// dependent, and dropped). O(n) per basis vector.
fn orthonormal_push(basis: &mut Vec<Vec<f64>>, mut v: Vec<f64>) {
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let original = norm(&v);
    for _ in 0..2 {
        for q in basis.iter() {
            let d: f64 = q.iter().zip(&v).map(|(x, y)| x * y).sum();
            v.iter_mut().zip(q).for_each(|(x, y)| *x -= d * y);
        }
    }
    let left = norm(&v);
    if original > 0.0 && left > 1e-8 * original {
        v.iter_mut().for_each(|x| *x /= left);
        basis.push(v);
    }
}

/// The constant of each block component: `bs` vectors of length n.
pub(crate) fn component_constants(n: usize, bs: usize) -> Vec<Vec<f64>> {
    (0..bs)
        .map(|c| {
            (0..n)
                .into_par_iter()
                .map(|i| f64::from(i % bs == c))
                .collect()
        })
        .collect()
}

/// The candidates of the null-space detection: the block-component constants
/// and, for blocks above 1, the all-ones vector.
fn kernel_candidates(n: usize, bs: usize) -> Vec<Vec<f64>> {
    let mut cands = component_constants(n, bs);
    if bs > 1 {
        cands.push(vec![1.0; n]);
    }
    cands
}

/// The orthonormal basis of the candidates (in [`kernel_candidates`]'s
/// order) that `large` does not flag (A v not small), dependent ones
/// dropped. O(n) per candidate kept.
pub(crate) fn kernel_basis(n: usize, bs: usize, large: &[bool]) -> Vec<Vec<f64>> {
    let mut basis: Vec<Vec<f64>> = Vec::new();
    for (v, &big) in kernel_candidates(n, bs).into_iter().zip(large) {
        if !big {
            orthonormal_push(&mut basis, v);
        }
    }
    basis
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::tests::csr;

    /// Per-row sums summed as their definition says (entries in column
    /// order, component c the columns j with j % bs = c, the last every
    /// column), the rows' maxima taken.
    fn row_sums_by_definition(a: &Csr<f64>, bs: usize) -> RowSums {
        (0..a.nrows()).fold(RowSums::ZERO, |acc, i| {
            let (cols, vals) = a.row(i);
            let mut r = RowSums::ZERO;
            let mut component = [0.0f64; MAX_CANDIDATES];
            for (&j, &x) in cols.iter().zip(vals) {
                r.norm_inf += x.abs();
                r.largest = r.largest.max(x.abs());
                component[j as usize % bs] += x;
                component[bs] += x;
            }
            for (c, s) in r.candidates.iter_mut().zip(component) {
                *c = s.abs();
            }
            acc.max(r)
        })
    }

    /// The sums compiled per block size are the definition's bit for bit.
    #[test]
    fn row_sums_per_block_size_are_the_definitions() {
        let a = gpuq_sparse::generators::convdiff2d::<f64>(24, 0.37);
        for bs in 1..=MAX_CANDIDATES - 1 {
            let rows = a.nrows() / bs * bs;
            let sq = a.select_rows(&(0..rows).collect::<Vec<_>>()).unwrap();
            let (got, want) = (row_sums(&sq, bs), row_sums_by_definition(&sq, bs));
            assert_eq!(
                (got.norm_inf, got.largest, got.candidates),
                (want.norm_inf, want.largest, want.candidates),
                "bs {bs}"
            );
        }
    }

    #[test]
    fn row_sums_find_the_component_constants_in_the_null_space() {
        // Two decoupled 1D Laplacians with free ends, interleaved as block 2:
        // each component's constant is in the null space, the all-ones too.
        let n = 10;
        let mut e = Vec::new();
        for c in 0..2 {
            for k in 0..n / 2 {
                let i = 2 * k + c;
                let deg = if k == 0 || k == n / 2 - 1 { 1.0 } else { 2.0 };
                e.push((i, i, deg));
                if k + 1 < n / 2 {
                    e.push((i, i + 2, -1.0));
                    e.push((i + 2, i, -1.0));
                }
            }
        }
        let a = csr(n, &e);
        let (kernel, symmetric) = check_input(&a, 2).unwrap();
        assert!(symmetric);
        assert_eq!(kernel.len(), 2);
        // A Dirichlet Laplacian has none.
        let lap = gpuq_sparse::generators::laplace2d::<f64>(5);
        assert!(check_input(&lap, 1).unwrap().0.is_empty());
    }
}
