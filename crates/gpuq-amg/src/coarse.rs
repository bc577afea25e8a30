//! The coarsest solve: a dense (pseudo-)inverse, stored as a dense CSR matrix
//! so the cycle applies it with one SpMV and no host round trip.

use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;

/// Largest coarsest matrix the dense inverse accepts (its setup is O(n^3)).
pub const MAX_DENSE: usize = 1500;

/// The dense inverse of the coarsest matrix and whether it was singular.
pub struct DenseInverse {
    /// The (pseudo-)inverse as a dense CSR matrix (all n^2 entries stored).
    pub matrix: Csr<f64>,
    /// Eigenvalues treated as zero (the dimension of the null space found).
    pub null_dim: usize,
}

/// For symmetric `a` (to 1e-12 relative, assumed positive semidefinite): the
/// Moore-Penrose pseudo-inverse from a Cholesky factorisation with complete
/// pivoting that stops at the numerical rank (so a singular matrix, the
/// coarsest level of a pure Neumann problem, gets its pseudo-inverse; a
/// nonsingular one its inverse). Otherwise the inverse by
/// Gauss-Jordan elimination with partial pivoting, an error if a pivot is at or
/// below 1e-13 of the largest entry. O(n^3); errors above [`MAX_DENSE`].
pub fn dense_inverse(a: &Csr<f64>) -> Result<DenseInverse> {
    let n = a.nrows();
    if n > MAX_DENSE {
        return Err(Error::Precondition {
            method: "amg",
            reason: format!("coarsest matrix of {n} rows is too large for the dense solve (at most {MAX_DENSE}); lower the coarse size or use the block-diagonal coarse solve"),
        });
    }
    let d = a.to_dense();
    let scale = d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let symmetric =
        (0..n).all(|i| (0..i).all(|j| (d[i * n + j] - d[j * n + i]).abs() <= 1e-12 * scale));
    let (inv, null_dim) = if symmetric {
        pseudo_inverse(d, n)?
    } else {
        (gauss_jordan(d, n, scale)?, 0)
    };
    let row_ptr = (0..=n).map(|i| i * n).collect();
    let col_idx = (0..n * n).map(|k| (k % n) as u32).collect();
    Ok(DenseInverse {
        matrix: Csr::try_new(n, n, row_ptr, col_idx, inv)?,
        null_dim,
    })
}

/// The Moore-Penrose pseudo-inverse of the symmetric positive semidefinite
/// row-major `a`: Cholesky with complete (diagonal) pivoting, Pi^T A Pi = L L^T
/// with L of rank r (it stops when the largest remaining pivot is at or below
/// 1e-10 of the largest diagonal entry), then A^+ = Pi K K^T Pi^T with
/// K = L (L^T L)^-1. Returns it with n - r. About 3 n^3 flops.
fn pseudo_inverse(a: Vec<f64>, n: usize) -> Result<(Vec<f64>, usize)> {
    let mut perm: Vec<usize> = (0..n).collect();
    let mut m = a;
    // Column-major L, n x r, rows in pivoted order.
    let mut l: Vec<Vec<f64>> = Vec::new();
    let mut diag: Vec<f64> = (0..n).map(|i| m[i * n + i]).collect();
    let top = diag.iter().fold(0.0f64, |t, &d| t.max(d));
    if !(top > 0.0 && top.is_finite()) {
        return Err(Error::Precondition {
            method: "amg",
            reason: "the coarsest matrix has no positive diagonal entry".into(),
        });
    }
    for k in 0..n {
        let p = (k..n)
            .max_by(|&i, &j| diag[i].total_cmp(&diag[j]))
            .unwrap_or(k);
        if diag[p] <= 1e-10 * top {
            break;
        }
        if p != k {
            perm.swap(k, p);
            diag.swap(k, p);
            for c in l.iter_mut() {
                c.swap(k, p);
            }
            // Swap rows and columns k, p of m.
            for c in 0..n {
                m.swap(k * n + c, p * n + c);
            }
            for r in 0..n {
                m.swap(r * n + k, r * n + p);
            }
        }
        let lkk = diag[k].sqrt();
        let mut col = vec![0.0; n];
        col[k] = lkk;
        for i in k + 1..n {
            let s: f64 = l.iter().map(|c| c[i] * c[k]).sum();
            col[i] = (m[i * n + k] - s) / lkk;
            diag[i] -= col[i] * col[i];
        }
        l.push(col);
    }
    let r = l.len();
    // G = L^T L (r x r), then its inverse by Cholesky.
    let mut g = vec![0.0; r * r];
    for p in 0..r {
        for q in 0..=p {
            let s: f64 = (0..n).map(|i| l[p][i] * l[q][i]).sum();
            g[p * r + q] = s;
            g[q * r + p] = s;
        }
    }
    let g_inv = spd_inverse(g, r)?;
    // K = L G^-1 (n x r, row-major), A^+ (pivoted) = K K^T.
    let mut k_mat = vec![0.0; n * r];
    for i in 0..n {
        for q in 0..r {
            k_mat[i * r + q] = (0..r).map(|p| l[p][i] * g_inv[p * r + q]).sum();
        }
    }
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..r).map(|q| k_mat[i * r + q] * k_mat[j * r + q]).sum();
            let (pi, pj) = (perm[i], perm[j]);
            out[pi * n + pj] = s;
            out[pj * n + pi] = s;
        }
    }
    Ok((out, n - r))
}

/// The inverse of a symmetric positive definite row-major matrix by Cholesky
/// (A = L L^T, A^-1 = L^-T L^-1).
fn spd_inverse(mut a: Vec<f64>, n: usize) -> Result<Vec<f64>> {
    for j in 0..n {
        let s: f64 = (0..j).map(|k| a[j * n + k] * a[j * n + k]).sum();
        let d = a[j * n + j] - s;
        if !(d > 0.0 && d.is_finite()) {
            return Err(Error::Precondition {
                method: "amg",
                reason: "the coarsest matrix's Gram matrix is not positive definite".into(),
            });
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let s: f64 = (0..j).map(|k| a[i * n + k] * a[j * n + k]).sum();
            a[i * n + j] = (a[i * n + j] - s) / d;
        }
    }
    // L^-1 by forward substitution, column by column (lower triangular).
    let mut li = vec![0.0; n * n];
    for c in 0..n {
        for i in c..n {
            let s: f64 = (c..i).map(|k| a[i * n + k] * li[k * n + c]).sum();
            li[i * n + c] = (f64::from(i == c) - s) / a[i * n + i];
        }
    }
    let mut inv = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (i..n).map(|k| li[k * n + i] * li[k * n + j]).sum();
            inv[i * n + j] = s;
            inv[j * n + i] = s;
        }
    }
    Ok(inv)
}

/// The inverse of the row-major `a` by Gauss-Jordan elimination with partial
/// pivoting.
fn gauss_jordan(mut a: Vec<f64>, n: usize, scale: f64) -> Result<Vec<f64>> {
    let mut inv = vec![0.0; n * n];
    for i in 0..n {
        inv[i * n + i] = 1.0;
    }
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&p, &q| a[p * n + col].abs().total_cmp(&a[q * n + col].abs()))
            .unwrap_or(col);
        if a[piv * n + col].abs() <= 1e-13 * scale {
            return Err(Error::Precondition {
                method: "amg",
                reason: format!("the coarsest matrix is singular (pivot {col}); nonsymmetric singular systems are not supported"),
            });
        }
        for c in 0..n {
            a.swap(col * n + c, piv * n + c);
            inv.swap(col * n + c, piv * n + c);
        }
        let d = 1.0 / a[col * n + col];
        for c in 0..n {
            a[col * n + c] *= d;
            inv[col * n + c] *= d;
        }
        for r in 0..n {
            let f = a[r * n + col];
            if r != col && f != 0.0 {
                for c in 0..n {
                    a[r * n + c] -= f * a[col * n + c];
                    inv[r * n + c] -= f * inv[col * n + c];
                }
            }
        }
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_of_spd_and_nonsymmetric() {
        for a in [
            gpuq_sparse::generators::laplace2d::<f64>(4),
            gpuq_sparse::generators::convdiff2d::<f64>(4, 0.5),
        ] {
            let inv = dense_inverse(&a).unwrap();
            assert_eq!(inv.null_dim, 0);
            let x: Vec<f64> = (0..16).map(|i| (i as f64).cos()).collect();
            let y = inv.matrix.mul_vec(&a.mul_vec(&x).unwrap()).unwrap();
            for (p, q) in x.iter().zip(&y) {
                assert!((p - q).abs() < 1e-11);
            }
        }
    }

    #[test]
    fn pseudo_inverse_of_singular_laplacian() {
        // Path graph Laplacian of 6 nodes (null space: constants).
        let n = 6;
        let mut coo = gpuq_sparse::Coo::new(n, n);
        for i in 0..n - 1 {
            coo.push(i, i, 1.0).unwrap();
            coo.push(i + 1, i + 1, 1.0).unwrap();
            coo.push(i, i + 1, -1.0).unwrap();
            coo.push(i + 1, i, -1.0).unwrap();
        }
        let a = Csr::from_coo(&coo).unwrap();
        let inv = dense_inverse(&a).unwrap();
        assert_eq!(inv.null_dim, 1);
        // A A^+ b = b for b orthogonal to constants; A^+ b has zero mean.
        let b = [1.0, -2.0, 0.5, 0.25, 0.0, 0.25];
        let x = inv.matrix.mul_vec(&b).unwrap();
        assert!(x.iter().sum::<f64>().abs() < 1e-12);
        for (p, q) in a.mul_vec(&x).unwrap().iter().zip(&b) {
            assert!((p - q).abs() < 1e-12);
        }
    }
}
