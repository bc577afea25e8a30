//! Conversions between [`Csr`] and `nalgebra_sparse::CsrMatrix`.

use crate::Csr;
use gpuq_core::{Error, Result, Scalar};
use nalgebra_sparse::CsrMatrix;

impl<T: Scalar + nalgebra_sparse::na::Scalar> Csr<T> {
    /// Copies into an `nalgebra_sparse::CsrMatrix` (same structure, same values). O(nnz).
    pub fn to_nalgebra(&self) -> CsrMatrix<T> {
        let col: Vec<usize> = self.col_idx().iter().map(|&j| j as usize).collect();
        CsrMatrix::try_from_csr_data(
            self.nrows(),
            self.ncols(),
            self.row_ptr().to_vec(),
            col,
            self.values().to_vec(),
        )
        .expect("a validated Csr is a valid nalgebra CSR pattern")
    }

    /// Copies from an `nalgebra_sparse::CsrMatrix`, validating values are finite. O(nnz).
    pub fn from_nalgebra(m: &CsrMatrix<T>) -> Result<Self> {
        let (ptr, col, vals) = m.csr_data();
        let col = col
            .iter()
            .map(|&j| {
                u32::try_from(j).map_err(|_| {
                    Error::InvalidMatrix(format!("column index {j} exceeds the 32-bit range"))
                })
            })
            .collect::<Result<Vec<u32>>>()?;
        Csr::try_new(m.nrows(), m.ncols(), ptr.to_vec(), col, vals.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use crate::generators::laplace2d;
    use crate::Csr;

    #[test]
    fn round_trip_through_nalgebra() {
        let a = laplace2d::<f64>(5);
        let m = a.to_nalgebra();
        assert_eq!(m.nnz(), a.nnz());
        assert_eq!(Csr::from_nalgebra(&m).unwrap(), a);
    }
}
