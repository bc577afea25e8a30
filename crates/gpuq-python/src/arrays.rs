//! NumPy arrays in and out: compressed sparse rows from SciPy's three arrays, vectors of
//! the four scalar types, and the dtype dispatch.

use gpuq::core::{Error, Result, Scalar};
use gpuq::sparse::{Bsr, Csr};
use numpy::{Element, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use rayon::prelude::*;

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

/// A copy of the 1-D array `array` of scalar `T` (a `ValueError` for another dtype); a
/// contiguous one copied on all threads ([`copy`]).
pub fn vector<T: Element + Copy + Send + Sync>(array: &Bound<'_, PyAny>) -> PyResult<Vec<T>> {
    let a: PyReadonlyArray1<'_, T> = array.extract()?;
    Ok(match a.as_slice() {
        Ok(v) => copy(v),
        Err(_) => a.as_array().iter().copied().collect(),
    })
}

/// A copy of the optional 1-D array `array` of scalar `T`.
pub fn optional_vector<T: Element + Copy + Send + Sync>(
    array: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Vec<T>>> {
    array.map(vector::<T>).transpose()
}

/// `v` as a new NumPy array.
pub fn to_numpy<'py, T: Element>(py: Python<'py>, v: Vec<T>) -> Bound<'py, PyAny> {
    PyArray1::from_vec(py, v).into_any()
}

/// An index array as SciPy holds it: int32 (its default) or int64, borrowed.
pub enum IndexArray<'py> {
    /// int32
    I32(PyReadonlyArray1<'py, i32>),
    /// int64
    I64(PyReadonlyArray1<'py, i64>),
}

/// The entries of an [`IndexArray`].
#[derive(Clone, Copy)]
pub enum Indices<'a> {
    /// int32
    I32(&'a [i32]),
    /// int64
    I64(&'a [i64]),
}

impl<'py> IndexArray<'py> {
    /// `array` if it is a 1-D int32 or int64 array; a `ValueError` otherwise.
    pub fn of(array: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(a) = array.extract::<PyReadonlyArray1<'py, i32>>() {
            return Ok(IndexArray::I32(a));
        }
        array
            .extract::<PyReadonlyArray1<'py, i64>>()
            .map(IndexArray::I64)
            .map_err(|_| {
                pyo3::exceptions::PyValueError::new_err("index arrays must be 1-D int32 or int64")
            })
    }

    /// The entries (contiguous arrays only).
    pub fn entries(&self) -> PyResult<Indices<'_>> {
        Ok(match self {
            IndexArray::I32(a) => Indices::I32(a.as_slice()?),
            IndexArray::I64(a) => Indices::I64(a.as_slice()?),
        })
    }
}

impl Indices<'_> {
    /// The entries as `I`, an error naming `what` for a negative or too large one. O(len),
    /// on all threads.
    fn to_vec<I: TryFrom<i64> + Send>(self, what: &str) -> Result<Vec<I>> {
        let convert = |i: i64| {
            I::try_from(i).map_err(|_| {
                Error::InvalidMatrix(format!("{what} entry {i} is negative or too large"))
            })
        };
        match self {
            Indices::I32(v) => v.par_iter().map(|&i| convert(i64::from(i))).collect(),
            Indices::I64(v) => v.par_iter().map(|&i| convert(i)).collect(),
        }
    }
}

/// A copy of `v` made on all threads (the values of a large matrix: one pass, its pages
/// touched in parallel). O(len).
pub fn copy<T: Copy + Send + Sync>(v: &[T]) -> Vec<T> {
    v.par_iter().copied().collect()
}

/// The CSR matrix of SciPy's arrays (`indptr`, `indices`, `data`) and `shape`, checked:
/// indices in range and rows in order, as [`Csr::try_new`] checks them. Cost: one copy of
/// each array.
pub fn csr<T: Scalar>(
    shape: (usize, usize),
    indptr: Indices<'_>,
    indices: Indices<'_>,
    data: Vec<T>,
) -> Result<Csr<T>> {
    Csr::try_new(
        shape.0,
        shape.1,
        indptr.to_vec("indptr")?,
        indices.to_vec("indices")?,
        data,
    )
}

/// The CSR matrix of SciPy's block sparse rows (`indptr` and `indices` over block rows and
/// columns, `blocks` the r x r blocks row-major, one after another) of `shape`: every
/// stored block entry kept (as SciPy's `tocsr` keeps them) by `gpuq_sparse::Bsr`
/// (`try_from_blocks`, then its parallel `to_csr`), the values checked finite. Errors on a
/// block size outside 1 to `MAX_BSR_BLOCK`, a shape the blocks do not tile, or parts of the
/// wrong lengths, order or range. Cost: two passes over the blocks, O(nnz).
pub fn csr_of_bsr(
    shape: (usize, usize),
    r: usize,
    indptr: Indices<'_>,
    indices: Indices<'_>,
    blocks: &[f64],
) -> Result<Csr<f64>> {
    let a = Bsr::try_from_blocks(
        r,
        shape,
        indptr.to_vec("indptr")?,
        indices.to_vec("indices")?,
        copy(blocks),
    )?
    .to_csr()?;
    a.check_finite()?;
    Ok(a)
}
