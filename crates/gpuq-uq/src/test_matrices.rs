//! Small matrices the unit tests of the model procedures share.

use gpuq_sparse::{Coo, Csr};

/// The diagonal matrix of `values`.
pub fn diag(values: &[f64]) -> Csr<f64> {
    let mut c = Coo::new(values.len(), values.len());
    for (i, &v) in values.iter().enumerate() {
        c.push(i, i, v).unwrap();
    }
    Csr::from_coo(&c).unwrap()
}
