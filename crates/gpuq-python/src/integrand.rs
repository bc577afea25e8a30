//! An integrand from Python: an expression, a built-in with its parameters, or a Python
//! function of an (m, dim) array of points (a batch integrand, `Func::Batch`), as the
//! `Func` that gpuq's cubature and expectations take.

use crate::errors::to_py;
use gpuq::core::{Error, Result};
use gpuq::cubature::{builtin, func::kind_of, Expr, Func};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use std::sync::Mutex;

/// What the caller gave, and the first exception its callable raised.
pub struct PyIntegrand<'a> {
    /// Number of variables.
    pub dim: usize,
    /// An expression in x1..xn.
    pub expr: Option<&'a str>,
    /// A built-in's name, with its parameters `a` and `u`.
    pub builtin: Option<(&'a str, Vec<f64>, Vec<f64>)>,
    /// A function of an (m, dim) float64 array returning m float64 values.
    pub callable: Option<Py<PyAny>>,
    raised: Mutex<Option<PyErr>>,
}

impl<'a> PyIntegrand<'a> {
    /// The integrand the arguments name (exactly one of them).
    pub fn new(
        dim: usize,
        expr: Option<&'a str>,
        builtin: Option<(&'a str, Vec<f64>, Vec<f64>)>,
        callable: Option<Py<PyAny>>,
    ) -> Self {
        PyIntegrand {
            dim,
            expr,
            builtin,
            callable,
            raised: Mutex::new(None),
        }
    }

    /// The callable at `points` (row-major, m x dim) into `values`, with the GIL.
    fn call(&self, points: &[f64], values: &mut [f64]) -> Result<()> {
        Python::attach(|py| -> PyResult<()> {
            let m = values.len();
            let x = PyArray1::from_slice(py, points).reshape([m, self.dim])?;
            let Some(f) = self.callable.as_ref() else {
                return Err(pyo3::exceptions::PyValueError::new_err("no callable"));
            };
            let out = f.call1(py, (x,))?;
            let out: PyReadonlyArray1<'_, f64> = out.extract(py)?;
            let out = out.as_slice()?;
            if out.len() != m {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "the integrand returned {} values for {m} points",
                    out.len()
                )));
            }
            values.copy_from_slice(out);
            Ok(())
        })
        .map_err(|e| {
            let message = e.to_string();
            if let Ok(mut first) = self.raised.lock() {
                first.get_or_insert(e);
            }
            Error::InvalidArgument(format!("the integrand raised {message}"))
        })
    }

    /// Runs `work` on the integrand as a `Func` (the GIL must be released: a callable
    /// takes it for each batch).
    pub fn with_func<R>(&self, work: impl FnOnce(Func<'_>) -> Result<R>) -> Result<R> {
        let batch = |points: &[f64], values: &mut [f64]| self.call(points, values);
        match (self.expr, &self.builtin, &self.callable) {
            (Some(text), None, None) => work(Func::Expr(&Expr::parse(text, self.dim)?)),
            (None, Some((name, a, u)), None) => {
                work(Func::Builtin(builtin(kind_of(name)?, self.dim, a, u)?))
            }
            (None, None, Some(_)) => work(Func::Batch(&batch)),
            _ => Err(Error::InvalidArgument(
                "give one of an expression, a built-in integrand's name or a callable".into(),
            )),
        }
    }

    /// `e` as the Python exception to raise: the callable's own when it raised one.
    pub fn error(&self, e: Error) -> PyErr {
        match self.raised.lock().ok().and_then(|mut r| r.take()) {
            Some(original) => original,
            None => to_py(e),
        }
    }
}
