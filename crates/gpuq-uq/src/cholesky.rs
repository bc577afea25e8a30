//! Sparse Cholesky factorisation of a symmetric positive definite matrix on the
//! host, by the `faer` crate (supernodal or simplicial by size, AMD
//! fill-reducing ordering, multithreaded): one factorisation, then solves of
//! blocks of right-hand sides (triangular solves with many columns at once).

use faer::linalg::solvers::Solve;
use faer::sparse::linalg::solvers::{Llt, SymbolicLlt};
use faer::sparse::linalg::LltError;
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{MatMut, Side};
use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;

/// L L^T = P A P^T of a symmetric positive definite matrix.
pub struct SparseCholesky {
    llt: Llt<u32, f64>,
    n: usize,
}

impl SparseCholesky {
    /// Factors the symmetric matrix `a` (`what` names it in errors). Only the
    /// upper triangle of the CSR rows is read (the lower triangle of the
    /// matrix seen column by column). Errors when `a` is not square, has 2^32
    /// entries or more, or is not positive definite (naming the pivot, in
    /// the factorisation's order, that was not positive). Cost: that of the
    /// factorisation, O(nnz(L)) memory.
    pub fn new(a: &Csr<f64>, what: &str) -> Result<Self> {
        let n = a.nrows();
        if a.ncols() != n {
            return Err(Error::shape(
                "sparse Cholesky",
                format!("{what} square"),
                format!("{n} x {}", a.ncols()),
            ));
        }
        let col_ptr: Vec<u32> = a
            .row_ptr()
            .iter()
            .map(|&p| u32::try_from(p))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::InvalidArgument(format!("{what} has 2^32 entries or more")))?;
        // Symmetric: the CSR rows are the CSC columns.
        let sym = SymbolicSparseColMatRef::new_checked(n, n, &col_ptr, None, a.col_idx());
        let mat = SparseColMatRef::new(sym, a.values());
        let symbolic = SymbolicLlt::try_new(mat.symbolic(), Side::Lower)
            .map_err(|e| Error::Device(format!("sparse Cholesky of {what}: {e:?}")))?;
        let llt = Llt::try_new_with_symbolic(symbolic, mat, Side::Lower).map_err(|e| match e {
            LltError::Numeric(faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot {
                index,
            }) => Error::Precondition {
                method: "sparse Cholesky",
                reason: format!(
                    "{what} is not positive definite: pivot {index} of {n} (in the fill-reducing order) is not positive"
                ),
            },
            other => Error::Device(format!("sparse Cholesky of {what}: {other:?}")),
        })?;
        Ok(SparseCholesky { llt, n })
    }

    /// The order n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Overwrites the columns of `b` (n rows) with A^-1 b. Cost: two
    /// triangular solves per column, done for all columns together.
    pub fn solve_block(&self, b: MatMut<'_, f64>) {
        self.llt.solve_in_place(b);
    }

    /// A^-1 b for one vector of length n.
    pub fn solve(&self, b: &[f64]) -> Vec<f64> {
        let mut m = faer::Mat::from_fn(self.n, 1, |i, _| b[i]);
        self.solve_block(m.as_mut());
        (0..self.n).map(|i| m[(i, 0)]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_sparse::Coo;

    #[test]
    fn solves_and_names_the_failing_pivot() {
        let n = 50;
        let mut c = Coo::new(n, n);
        for i in 0..n {
            c.push(i, i, 2.5).unwrap();
            if i > 0 {
                c.push(i, i - 1, -1.0).unwrap();
                c.push(i - 1, i, -1.0).unwrap();
            }
        }
        let a = Csr::from_coo(&c).unwrap();
        let f = SparseCholesky::new(&a, "K").unwrap();
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).sin()).collect();
        let b = a.mul_vec(&x).unwrap();
        let y = f.solve(&b);
        for (u, v) in x.iter().zip(&y) {
            assert!((u - v).abs() < 1e-12);
        }
        c.push(20, 20, -3.0).unwrap();
        let bad = Csr::from_coo(&c).unwrap();
        let e = SparseCholesky::new(&bad, "K").err().unwrap();
        assert!(
            e.to_string().contains("not positive definite: pivot"),
            "{e}"
        );
    }
}
