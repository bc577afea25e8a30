//! The spectral radius of D^-1 A (D the block diagonal), estimated by Lanczos
//! in the D inner product, where D^-1 A is self-adjoint when A and D are
//! symmetric: the largest Ritz value of a few steps, a lower bound that the
//! largest eigenvalue attracts quickly.

use crate::aggregate::hash;
use crate::blockdiag::BlockDiagonal;
use gpuq_core::Result;
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// y = A x, rows in parallel (each row summed in order: deterministic).
fn mul(a: &Csr<f64>, x: &[f64]) -> Vec<f64> {
    (0..a.nrows())
        .into_par_iter()
        .map(|i| {
            let (c, v) = a.row(i);
            c.iter().zip(v).map(|(&j, &aij)| aij * x[j as usize]).sum()
        })
        .collect()
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// The largest Ritz value of `steps` Lanczos steps on D^-1 A from a fixed
/// pseudo-random start (the same on every run). Cost: `steps` products with A,
/// D and D^-1, O(steps nnz); the tridiagonal's eigenvalue by bisection.
pub fn rho_dinv_a(
    a: &Csr<f64>,
    d: &BlockDiagonal,
    dinv: &BlockDiagonal,
    steps: usize,
) -> Result<f64> {
    let n = a.nrows();
    let mut v: Vec<f64> = (0..n)
        .map(|i| f64::from(hash(i as u32)) / f64::from(u32::MAX) - 0.5)
        .collect();
    let norm = dot(&v, &d.mul(&v)).abs().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Ok(0.0);
    }
    v.iter_mut().for_each(|x| *x /= norm);
    let mut v_prev = vec![0.0; n];
    let (mut alpha, mut beta) = (Vec::new(), Vec::new());
    let mut b_prev = 0.0;
    for _ in 0..steps.min(n) {
        let av = mul(a, &v);
        let mut w = dinv.mul(&av);
        let al = dot(&av, &v);
        for i in 0..n {
            w[i] -= al * v[i] + b_prev * v_prev[i];
        }
        alpha.push(al);
        let b = dot(&w, &d.mul(&w)).abs().sqrt();
        if b.is_nan() || b <= 1e-12 * al.abs() || !b.is_finite() {
            break;
        }
        beta.push(b);
        w.iter_mut().for_each(|x| *x /= b);
        v_prev = std::mem::replace(&mut v, w);
        b_prev = b;
    }
    beta.truncate(alpha.len().saturating_sub(1));
    Ok(largest_eigenvalue(&alpha, &beta))
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
}
