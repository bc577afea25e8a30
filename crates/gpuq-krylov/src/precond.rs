//! Preconditioners as linear operators.

use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar};
use gpuq_sparse::Csr;

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
                        reason: format!("diagonal entry {i} is {d}"),
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

    fn name(&self) -> &str {
        "jacobi"
    }
}
