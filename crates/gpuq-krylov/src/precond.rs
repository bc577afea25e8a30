//! Preconditioners as linear operators.

use gpuq_core::{Backend, Error, LinearOperator, RealScalar, Result, Scalar};
use gpuq_sparse::{Coo, Csr, Layout, MatrixOperator, SparseBackend};

/// Jacobi preconditioner: z = D^-1 r with D the diagonal of A.
/// Setup O(nnz) on the host plus one upload of n values; apply: one elementwise product.
pub struct Jacobi<B: Backend, T: Scalar> {
    backend: B,
    inv_diag: B::Vector<T>,
}

impl<B: Backend, T: Scalar> Jacobi<B, T> {
    /// Builds D^-1 from `a`; errors if `a` is not square or a diagonal entry is zero
    /// (or not finite).
    pub fn new(backend: &B, a: &Csr<T>) -> Result<Self> {
        if a.nrows() != a.ncols() {
            return Err(Error::Precondition {
                method: "jacobi",
                reason: format!("matrix is {} x {}, not square", a.nrows(), a.ncols()),
            });
        }
        let inv: Vec<T> = a
            .diagonal()
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                if d.is_zero_value() || !d.is_finite_value() {
                    Err(Error::Precondition {
                        method: "jacobi",
                        reason: format!("the diagonal entry of row {} (1-based) is {d}", i + 1),
                    })
                } else {
                    Ok(T::one() / d)
                }
            })
            .collect::<Result<_>>()?;
        Ok(Jacobi {
            backend: backend.clone(),
            inv_diag: backend.upload(&inv)?,
        })
    }
}

impl<B: Backend, T: Scalar> LinearOperator<B, T> for Jacobi<B, T> {
    fn shape(&self) -> (usize, usize) {
        let n = gpuq_core::DeviceVector::len(&self.inv_diag);
        (n, n)
    }

    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.backend.mul_elementwise(&self.inv_diag, x, y)
    }

    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.apply(x, y)
    }

    fn diagonal(&self) -> Option<&B::Vector<T>> {
        Some(&self.inv_diag)
    }

    fn name(&self) -> &str {
        "jacobi"
    }
}

/// 2x2-block Jacobi preconditioner (seed 002): z = D^-1 r with D the block
/// diagonal of A made of the 2x2 blocks on rows and columns (2k, 2k + 1), each
/// inverted explicitly on the host. For systems with two coupled unknowns per
/// node, numbered node by node.
///
/// Setup O(nnz) on the host plus the upload of 4 n values (twice when the blocks
/// are not symmetric, for the transpose QMR needs); apply: one 2x2-block SpMV
/// (`Bsr { b: 2 }` layout), 4 multiply-adds per row.
pub struct BlockJacobi2<B: SparseBackend, T: Scalar> {
    inverse: MatrixOperator<B, T>,
}

impl<B: SparseBackend, T: Scalar> BlockJacobi2<B, T> {
    /// Builds the inverted block diagonal of `a`; errors if `a` is not square, its
    /// size is odd, or a diagonal block is singular (|det| <= 1e3 eps times the
    /// product of the block's largest entries) or not finite, naming the block.
    pub fn new(backend: &B, a: &Csr<T>) -> Result<Self> {
        let n = a.nrows();
        if n != a.ncols() || n % 2 != 0 {
            return Err(Error::Precondition {
                method: "block2 jacobi",
                reason: format!(
                    "matrix is {} x {}; 2x2-block Jacobi needs a square matrix of even size",
                    n,
                    a.ncols()
                ),
            });
        }
        let entry = |i: usize, j: usize| {
            let (c, v) = a.row(i);
            c.binary_search(&(j as u32)).map_or(T::zero(), |k| v[k])
        };
        let eps = <T::Real as RealScalar>::eps().to_f64_lossless();
        let mut coo = Coo::with_capacity(n, n, 2 * n);
        for k in 0..n / 2 {
            let (i, j) = (2 * k, 2 * k + 1);
            let (p, q, r, s) = (entry(i, i), entry(i, j), entry(j, i), entry(j, j));
            let det = p * s - q * r;
            let mag = |z: T| z.magnitude().to_f64_lossless();
            let scale = mag(p).max(mag(q)) * mag(r).max(mag(s));
            let d = det.magnitude().to_f64_lossless();
            if !(d.is_finite() && d > 1e3 * eps * scale) {
                return Err(Error::Precondition {
                    method: "block2 jacobi",
                    reason: format!(
                        "the diagonal block of rows {} and {} (1-based) is singular: det = {det}",
                        i + 1,
                        j + 1
                    ),
                });
            }
            let inv = T::one() / det;
            coo.push(i, i, s * inv)?;
            coo.push(i, j, -q * inv)?;
            coo.push(j, i, -r * inv)?;
            coo.push(j, j, p * inv)?;
        }
        let inverse = Csr::from_coo(&coo)?;
        Ok(BlockJacobi2 {
            inverse: MatrixOperator::with_transpose(backend, &inverse, Layout::Bsr { b: 2 })?,
        })
    }
}

impl<B: SparseBackend, T: Scalar> LinearOperator<B, T> for BlockJacobi2<B, T> {
    fn shape(&self) -> (usize, usize) {
        self.inverse.shape()
    }

    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.inverse.apply(x, y)
    }

    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.inverse.apply_transpose(x, y)
    }

    fn name(&self) -> &str {
        "block2"
    }
}
