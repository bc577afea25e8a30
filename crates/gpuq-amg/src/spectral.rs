//! The spectral radius of D^-1 A (D the block diagonal), estimated by Lanczos
//! in the D inner product, where D^-1 A is self-adjoint when A and D are
//! symmetric: the largest Ritz value of a few steps, a lower bound that the
//! largest eigenvalue attracts quickly.

use crate::blockdiag::BlockDiagonal;
use crate::galerkin::same_columns;
use gpuq_core::Result;
use gpuq_kernels::amg::{
    chunk_dot, fold_partials, lanczos_start, lanes_total, row_sum, DOT_CHUNK, ROW_LANES,
};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// The vector operations of the Lanczos estimate, on the host or a device:
/// [`lanczos_rho`] is written once over them. Each backend computes every
/// entry in the same order (rows of A in `row_sum`'s lanes, blocks of D row by row,
/// inner products in chunks of [`DOT_CHUNK`] in [`chunk_dot`]'s order, the
/// chunks' sums added by [`fold_partials`]), so the estimates agree bit for bit.
/// The recurrence's scalars stay where the vectors are (a device keeps them
/// in its memory and reads them back once, at the end).
pub trait LanczosOps {
    /// A vector of the level's length.
    type V;
    /// A scalar of the recurrence where the backend keeps it (the host's
    /// value; a device's slot).
    type S: Copy;
    /// The fixed start vector ([`lanczos_start`] per entry).
    fn start(&self) -> Result<Self::V>;
    /// A zero vector.
    fn zeros(&self) -> Result<Self::V>;
    /// y = A x.
    fn a_mul(&self, x: &Self::V, y: &mut Self::V) -> Result<()>;
    /// y = D x (`inverse`: y = D^-1 x), D the block diagonal.
    fn d_mul(&self, inverse: bool, x: &Self::V, y: &mut Self::V) -> Result<()>;
    /// x^T y: the chunk partials ([`chunk_dot`] per chunk of [`DOT_CHUNK`])
    /// added by [`fold_partials`]; `root`: the square root of its absolute
    /// value.
    fn dot(&self, x: &Self::V, y: &Self::V, root: bool) -> Result<Self::S>;
    /// The scalar 0.
    fn zero(&self) -> Result<Self::S>;
    /// w_i -= al v_i + b u_i.
    fn update(
        &self,
        w: &mut Self::V,
        al: Self::S,
        v: &Self::V,
        b: Self::S,
        u: &Self::V,
    ) -> Result<()>;
    /// w_i /= b.
    fn divide(&self, w: &mut Self::V, b: Self::S) -> Result<()>;
    /// The scalar's value where it is known without waiting (the host's:
    /// the recurrence then stops at a breakdown; a device's: `None`, the
    /// steps run on and the breakdown is found in the values at the end).
    fn peek(&self, s: Self::S) -> Option<f64>;
    /// The scalars' values, read together.
    fn values(&self, s: &[Self::S]) -> Result<Vec<f64>>;
}

/// Whether Lanczos breaks down at beta `b` after alpha `al` (or meets a
/// value that is not finite): the recurrence stops before b.
fn breaks_down(b: f64, al: f64) -> bool {
    b.is_nan() || b <= 1e-12 * al.abs() || !b.is_finite()
}

/// The largest Ritz value of `steps` Lanczos steps on D^-1 A (at most n) in
/// the D inner product from the fixed start vector, over any [`LanczosOps`];
/// 0 when the start vector has no D-norm. Cost: per step a product with A,
/// one with D and one with D^-1, two inner products and two vector updates;
/// the scalars read once (a device's); then bisection on the tridiagonal.
pub fn lanczos_rho<O: LanczosOps>(ops: &O, n: usize, steps: usize) -> Result<f64> {
    let mut v = ops.start()?;
    let mut t = ops.zeros()?;
    ops.d_mul(false, &v, &mut t)?;
    let norm = ops.dot(&v, &t, true)?;
    if ops.peek(norm).is_some_and(|x| x == 0.0 || !x.is_finite()) {
        return Ok(0.0);
    }
    ops.divide(&mut v, norm)?;
    let (mut v_prev, mut w, mut av) = (ops.zeros()?, ops.zeros()?, ops.zeros()?);
    let (mut alpha, mut beta) = (Vec::new(), Vec::new());
    let mut b_prev = ops.zero()?;
    for _ in 0..steps.min(n) {
        ops.a_mul(&v, &mut av)?;
        ops.d_mul(true, &av, &mut w)?;
        let al = ops.dot(&av, &v, false)?;
        ops.update(&mut w, al, &v, b_prev, &v_prev)?;
        alpha.push(al);
        ops.d_mul(false, &w, &mut t)?;
        let b = ops.dot(&w, &t, true)?;
        if let (Some(b), Some(al)) = (ops.peek(b), ops.peek(al)) {
            if breaks_down(b, al) {
                break;
            }
        }
        beta.push(b);
        ops.divide(&mut w, b)?;
        // v_prev <- v <- w; the old v_prev becomes the next w.
        std::mem::swap(&mut v_prev, &mut v);
        std::mem::swap(&mut v, &mut w);
        b_prev = b;
    }
    let steps_run = alpha.len();
    let scalars: Vec<O::S> = [norm].into_iter().chain(alpha).chain(beta).collect();
    let values = ops.values(&scalars)?;
    let (norm, rest) = values.split_first().unwrap_or((&0.0, &[]));
    if *norm == 0.0 || !norm.is_finite() {
        return Ok(0.0);
    }
    let (alpha, beta) = rest.split_at(steps_run.min(rest.len()));
    let (mut alpha, mut beta) = (alpha.to_vec(), beta.to_vec());
    // The breakdown where the scalars were not known during the steps.
    if let Some(k) = (0..beta.len()).find(|&k| breaks_down(beta[k], alpha[k])) {
        alpha.truncate(k + 1);
    }
    beta.truncate(alpha.len().saturating_sub(1));
    Ok(largest_eigenvalue(&alpha, &beta))
}

/// [`LanczosOps`] on the host (Rayon over rows, nodes and chunks).
pub struct HostLanczos<'a> {
    /// The level matrix.
    pub a: &'a Csr<f64>,
    /// Its block diagonal.
    pub d: &'a BlockDiagonal,
    /// The inverse of `d`.
    pub dinv: &'a BlockDiagonal,
}

impl LanczosOps for HostLanczos<'_> {
    type V = Vec<f64>;
    type S = f64;

    fn start(&self) -> Result<Vec<f64>> {
        Ok((0..self.a.nrows())
            .into_par_iter()
            .map(|i| lanczos_start(i as u32))
            .collect())
    }

    fn zeros(&self) -> Result<Vec<f64>> {
        Ok(vec![0.0; self.a.nrows()])
    }

    /// Rows in tasks of 2048; with blocks (D's block size above 1),
    /// consecutive rows of the same columns (a node's rows) in groups of up
    /// to 8 that read the columns and x once; scalar rows one by one (no
    /// search for groups, which rows of a scalar problem rarely form: on 2
    /// cores it made the product half as slow again).
    fn a_mul(&self, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        let grouped = self.d.block() > 1;
        y.par_chunks_mut(SPMV_TASK).enumerate().for_each(|(t, ys)| {
            if grouped {
                mul_rows(self.a, x, t * SPMV_TASK, ys)
            } else {
                for (k, yk) in ys.iter_mut().enumerate() {
                    *yk = row_dot(self.a, x, t * SPMV_TASK + k);
                }
            }
        });
        Ok(())
    }

    fn d_mul(&self, inverse: bool, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        let d = if inverse { self.dinv } else { self.d };
        d.mul_into(x, y)
    }

    fn dot(&self, x: &Vec<f64>, y: &Vec<f64>, root: bool) -> Result<f64> {
        Ok(host_root(dot_sum(x, y), root))
    }

    fn zero(&self) -> Result<f64> {
        Ok(0.0)
    }

    fn update(&self, w: &mut Vec<f64>, al: f64, v: &Vec<f64>, b: f64, u: &Vec<f64>) -> Result<()> {
        w.par_iter_mut()
            .zip(v.par_iter().zip(u))
            .for_each(|(wi, (vi, ui))| *wi -= al * vi + b * ui);
        Ok(())
    }

    fn divide(&self, w: &mut Vec<f64>, b: f64) -> Result<()> {
        w.par_iter_mut().for_each(|x| *x /= b);
        Ok(())
    }

    fn peek(&self, s: f64) -> Option<f64> {
        Some(s)
    }

    fn values(&self, s: &[f64]) -> Result<Vec<f64>> {
        Ok(s.to_vec())
    }
}

/// x^T y on the host as every backend sums it: [`chunk_dot`] over chunks of
/// [`DOT_CHUNK`] (in parallel), the chunks' sums added by
/// [`fold_partials`]. O(n).
pub fn dot_sum(x: &[f64], y: &[f64]) -> f64 {
    let partials: Vec<f64> = x
        .par_chunks(DOT_CHUNK)
        .zip(y.par_chunks(DOT_CHUNK))
        .map(|(a, b)| chunk_dot(a, b))
        .collect();
    fold_partials(&partials)
}

/// `s`, or the square root of |s| when `root` ([`LanczosOps::dot`]).
pub fn host_root(s: f64, root: bool) -> f64 {
    if root {
        s.abs().sqrt()
    } else {
        s
    }
}

/// Rows per task of the host's y = A x.
const SPMV_TASK: usize = 2048;

/// Most rows of the same columns [`mul_rows`] computes together.
const SPMV_GROUP: usize = 8;

/// Row i of A times x, summed in [`row_sum`]'s order (as a device sums
/// it). O(row length).
#[inline(always)]
fn row_dot(a: &Csr<f64>, x: &[f64], i: usize) -> f64 {
    let (cols, vals) = a.row(i);
    row_sum(cols, vals, |j| x[j])
}

/// y_i = sum_j a_ij x_j for the rows `first..` of `y`'s length, each summed
/// in [`row_sum`]'s order; runs of rows with the same columns are computed
/// together, their columns and x read once. O(nnz of the rows).
fn mul_rows(a: &Csr<f64>, x: &[f64], first: usize, y: &mut [f64]) {
    let mut r = 0;
    while r < y.len() {
        let cols = a.row(first + r).0;
        let g = (1..SPMV_GROUP.min(y.len() - r))
            .find(|&q| !same_columns(a.row(first + r + q).0, cols))
            .unwrap_or(SPMV_GROUP.min(y.len() - r));
        if g == 1 {
            y[r] = row_dot(a, x, first + r);
            r += 1;
            continue;
        }
        let vals: [&[f64]; SPMV_GROUP] =
            std::array::from_fn(|q| if q < g { a.row(first + r + q).1 } else { &[] });
        // each row's lanes, as row_sum keeps them
        let mut s = [[0.0f64; ROW_LANES]; SPMV_GROUP];
        for (p, &j) in cols.iter().enumerate() {
            let xj = x[j as usize];
            for (sq, v) in s.iter_mut().zip(&vals).take(g) {
                sq[p % ROW_LANES] += v[p] * xj;
            }
        }
        for (yq, sq) in y[r..r + g].iter_mut().zip(s) {
            *yq = lanes_total(sq);
        }
        r += g;
    }
}

/// The largest Ritz value of `steps` Lanczos steps on D^-1 A on the host
/// ([`lanczos_rho`] with [`HostLanczos`]). Cost: `steps` products with A, D
/// and D^-1, O(steps nnz); the tridiagonal's eigenvalue by bisection.
pub fn rho_dinv_a(
    a: &Csr<f64>,
    d: &BlockDiagonal,
    dinv: &BlockDiagonal,
    steps: usize,
) -> Result<f64> {
    lanczos_rho(&HostLanczos { a, d, dinv }, a.nrows(), steps)
}

/// Number of eigenvalues of the symmetric tridiagonal (alpha, beta) below x
/// (Sturm sequence).
fn count_below(alpha: &[f64], beta: &[f64], x: f64) -> usize {
    let mut count = 0;
    let mut q = 1.0;
    for k in 0..alpha.len() {
        let off = if k == 0 {
            0.0
        } else {
            beta[k - 1] * beta[k - 1]
        };
        q = alpha[k] - x - if k == 0 { 0.0 } else { off / q };
        if q == 0.0 {
            q = 1e-300;
        }
        if q < 0.0 {
            count += 1;
        }
    }
    count
}

/// The largest eigenvalue of the symmetric tridiagonal matrix with diagonal
/// `alpha` and off-diagonal `beta`, by bisection inside its Gershgorin interval.
pub fn largest_eigenvalue(alpha: &[f64], beta: &[f64]) -> f64 {
    let m = alpha.len();
    if m == 0 {
        return 0.0;
    }
    let radius = |k: usize| {
        (if k > 0 { beta[k - 1].abs() } else { 0.0 })
            + (if k + 1 < m { beta[k].abs() } else { 0.0 })
    };
    let mut lo = (0..m)
        .map(|k| alpha[k] - radius(k))
        .fold(f64::INFINITY, f64::min);
    let mut hi = (0..m)
        .map(|k| alpha[k] + radius(k))
        .fold(f64::NEG_INFINITY, f64::max);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if count_below(alpha, beta, mid) == m {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tridiagonal_largest() {
        // tridiag(-1, 2, -1) of size 5: largest eigenvalue 2 + 2 cos(pi / 6).
        let want = 2.0 + 2.0 * (std::f64::consts::PI / 6.0).cos();
        let got = largest_eigenvalue(&[2.0; 5], &[-1.0; 4]);
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    #[test]
    fn rho_of_jacobi_laplacian() {
        // D^-1 A for the 1D Laplacian of size 50: 1 + cos(pi / 51).
        let a = gpuq_sparse::generators::laplace1d::<f64>(50, 0.0);
        let d = BlockDiagonal::of(&a, 1, false);
        let rho = rho_dinv_a(&a, &d, &d.inverse().unwrap(), 30).unwrap();
        let want = 1.0 + (std::f64::consts::PI / 51.0).cos();
        assert!(rho <= want + 1e-12 && rho > 0.99 * want, "{rho} vs {want}");
    }

    /// The host's operations with the scalars unknown until the end, as a
    /// device keeps them: the steps run past a breakdown, found afterwards.
    struct Deferred<'a>(HostLanczos<'a>);

    impl LanczosOps for Deferred<'_> {
        type V = Vec<f64>;
        type S = f64;
        fn start(&self) -> Result<Vec<f64>> {
            self.0.start()
        }
        fn zeros(&self) -> Result<Vec<f64>> {
            self.0.zeros()
        }
        fn a_mul(&self, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
            self.0.a_mul(x, y)
        }
        fn d_mul(&self, inverse: bool, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
            self.0.d_mul(inverse, x, y)
        }
        fn dot(&self, x: &Vec<f64>, y: &Vec<f64>, root: bool) -> Result<f64> {
            self.0.dot(x, y, root)
        }
        fn zero(&self) -> Result<f64> {
            self.0.zero()
        }
        fn update(
            &self,
            w: &mut Vec<f64>,
            al: f64,
            v: &Vec<f64>,
            b: f64,
            u: &Vec<f64>,
        ) -> Result<()> {
            self.0.update(w, al, v, b, u)
        }
        fn divide(&self, w: &mut Vec<f64>, b: f64) -> Result<()> {
            self.0.divide(w, b)
        }
        fn peek(&self, _: f64) -> Option<f64> {
            None
        }
        fn values(&self, s: &[f64]) -> Result<Vec<f64>> {
            self.0.values(s)
        }
    }

    /// Scalars read once at the end give the estimate of scalars known at
    /// each step, bit for bit: without a breakdown, with one after two steps
    /// (D = I, A with two distinct eigenvalues), after one (A = 0), and with
    /// more steps than rows.
    #[test]
    fn scalars_read_at_the_end_give_the_same_estimate() {
        let diagonal = |n: usize, value: &dyn Fn(usize) -> f64| {
            let mut coo = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                coo.push(i, i, value(i)).unwrap();
            }
            Csr::from_coo(&coo).unwrap()
        };
        let laplace = gpuq_sparse::generators::laplace1d::<f64>(50, 0.0);
        let small = gpuq_sparse::generators::laplace1d::<f64>(3, 0.0);
        let two_values = diagonal(40, &|i| if i % 2 == 0 { 2.0 } else { 5.0 });
        let zero = diagonal(40, &|_| 0.0);
        let identity = diagonal(40, &|_| 1.0);
        for (a, d_of, steps) in [
            (&laplace, &laplace, 15),
            (&two_values, &identity, 15),
            (&zero, &identity, 15),
            (&small, &small, 15),
        ] {
            let d = BlockDiagonal::of(d_of, 1, false);
            let dinv = d.inverse().unwrap();
            let host = HostLanczos {
                a,
                d: &d,
                dinv: &dinv,
            };
            let deferred = Deferred(HostLanczos {
                a,
                d: &d,
                dinv: &dinv,
            });
            let want = lanczos_rho(&host, a.nrows(), steps).unwrap();
            let got = lanczos_rho(&deferred, a.nrows(), steps).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{got} vs {want}");
        }
        // The breakdowns' estimates are the exact largest eigenvalues.
        let d = BlockDiagonal::of(&identity, 1, false);
        let dinv = d.inverse().unwrap();
        let two = Deferred(HostLanczos {
            a: &two_values,
            d: &d,
            dinv: &dinv,
        });
        assert!((lanczos_rho(&two, 40, 15).unwrap() - 5.0).abs() < 1e-12);
        let none = Deferred(HostLanczos {
            a: &zero,
            d: &d,
            dinv: &dinv,
        });
        assert_eq!(lanczos_rho(&none, 40, 15).unwrap(), 0.0);
    }
}
