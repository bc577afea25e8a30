//! NumPy arrays in and out: compressed sparse rows from SciPy's three arrays, vectors of
//! the four scalar types, and the dtype dispatch.

use gpuq::core::{Error, Result, Scalar};
use gpuq::sparse::Csr;
use numpy::{Element, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

/// The scalar type of an array: which of f32, f64, complex64, complex128.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// float32
    F32,
    /// float64
    F64,
    /// complex64
    C32,
    /// complex128
    C64,
}

impl Dtype {
    /// The dtype of `array`, one of the four; a `ValueError` otherwise.
    pub fn of(array: &Bound<'_, PyAny>) -> PyResult<Self> {
        if array.cast::<PyArray1<f64>>().is_ok() {
            Ok(Dtype::F64)
        } else if array.cast::<PyArray1<f32>>().is_ok() {
            Ok(Dtype::F32)
        } else if array.cast::<PyArray1<num_complex::Complex<f64>>>().is_ok() {
            Ok(Dtype::C64)
        } else if array.cast::<PyArray1<num_complex::Complex<f32>>>().is_ok() {
            Ok(Dtype::C32)
        } else {
            Err(pyo3::exceptions::PyValueError::new_err(
                "expected a 1-D array of float32, float64, complex64 or complex128",
            ))
        }
    }
}

/// A copy of the 1-D array `array` of scalar `T` (a `ValueError` for another dtype).
pub fn vector<T: Element + Copy>(array: &Bound<'_, PyAny>) -> PyResult<Vec<T>> {
    let a: PyReadonlyArray1<'_, T> = array.extract()?;
    Ok(a.as_array().iter().copied().collect())
}

/// A copy of the optional 1-D array `array` of scalar `T`.
pub fn optional_vector<T: Element + Copy>(
    array: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Vec<T>>> {
    array.map(vector::<T>).transpose()
}

/// `v` as a new NumPy array.
pub fn to_numpy<'py, T: Element>(py: Python<'py>, v: Vec<T>) -> Bound<'py, PyAny> {
    PyArray1::from_vec(py, v).into_any()
}

/// The CSR matrix of SciPy's arrays (`indptr`, `indices`, `data`) and `shape`, checked:
/// indices in range and rows in order, as [`Csr::try_new`] checks them. Cost: one copy.
pub fn csr<T: Scalar>(
    shape: (usize, usize),
    indptr: &[i64],
    indices: &[i64],
    data: Vec<T>,
) -> Result<Csr<T>> {
    fn index<I: TryFrom<i64>>(v: &[i64], what: &str) -> Result<Vec<I>> {
        v.iter()
            .map(|&i| {
                I::try_from(i).map_err(|_| {
                    Error::InvalidMatrix(format!("{what} entry {i} is negative or too large"))
                })
            })
            .collect()
    }
    Csr::try_new(
        shape.0,
        shape.1,
        index(indptr, "indptr")?,
        index(indices, "indices")?,
        data,
    )
}
