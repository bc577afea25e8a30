//! `gpuq._gpuq.integrate`: adaptive cubature of an expression or a built-in integrand.

use crate::errors::{json, IntoPy};
use gpuq::core::{Error, Result};
use gpuq::cubature::rules::RuleKind;
use gpuq::cubature::{builtin, func::kind_of, Expr, Func, Method, Options, Outcome};
use gpuq::{BackendChoice, FullBackend, OnBackend};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use std::sync::Mutex;

/// One integration on the backend chosen at run time.
struct Job<'a> {
    f: Func<'a>,
    method: Method,
    lo: &'a [f64],
    hi: &'a [f64],
    opts: &'a Options,
}

/// The outcome and where the integrand ran.
#[derive(serde::Serialize)]
struct Report {
    #[serde(flatten)]
    outcome: Outcome,
    /// `converged` or `not converged (...)`.
    describe: &'static str,
    /// Why the run stopped.
    stop_reason: &'static str,
    /// Whether the tolerance was met.
    converged: bool,
    /// Where the integrand ran (`host`, `device-builtin`, `device-linked`).
    evaluation: &'static str,
    /// Seconds compiling device code.
    compile_s: f64,
    /// The backend's name.
    backend: String,
}

impl OnBackend for Job<'_> {
    type Output = Result<Report>;
    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        let prepared = backend.cub_prepare(self.f)?;
        let outcome =
            gpuq::cubature::integrate(backend, self.method, self.f, self.lo, self.hi, self.opts)?;
        Ok(Report {
            describe: outcome.status.describe(),
            stop_reason: outcome.status.reason(),
            converged: outcome.converged(),
            outcome,
            evaluation: prepared.evaluation,
            compile_s: prepared.compile_s,
            backend: gpuq_core_name(backend),
        })
    }
}

fn gpuq_core_name<B: gpuq::core::Backend>(backend: &B) -> String {
    backend.name()
}

/// Integrates an expression in x1..xn (`expr`), a built-in (`builtin`, with its
/// parameters `a` and `u`) or a Python function of an (m, dim) float64 array returning m
/// float64 values (`callable`, called with the GIL once per round of boxes) over the box
/// [lo, hi]; returns the report as JSON text. An exception of the callable is raised again.
#[pyfunction]
#[pyo3(signature = (
    dim, lo, hi, expr=None, builtin_name=None, a=vec![], u=vec![], rel_tol=1e-3, abs_tol=0.0,
    method="auto", rule="cuhre", max_evals=0, max_time=None, backend="auto", callable=None
))]
#[allow(clippy::too_many_arguments)]
pub fn integrate(
    py: Python<'_>,
    dim: usize,
    lo: Vec<f64>,
    hi: Vec<f64>,
    expr: Option<&str>,
    builtin_name: Option<&str>,
    a: Vec<f64>,
    u: Vec<f64>,
    rel_tol: f64,
    abs_tol: f64,
    method: &str,
    rule: &str,
    max_evals: u64,
    max_time: Option<f64>,
    backend: &str,
    callable: Option<Py<PyAny>>,
) -> PyResult<String> {
    let method: Method = method.parse().py()?;
    let opts = Options {
        rel_tol,
        abs_tol,
        max_evals,
        max_time,
        rule: RuleKind::parse(rule).py()?,
        ..Options::default()
    };
    opts.check().py()?;
    let choice: BackendChoice = backend.parse().py()?;
    // The first exception the callable raised, raised again after the run.
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let batch = |points: &[f64], values: &mut [f64]| -> Result<()> {
        Python::attach(|py| -> PyResult<()> {
            let m = values.len();
            let x = PyArray1::from_slice(py, points).reshape([m, dim])?;
            let Some(f) = callable.as_ref() else {
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
            if let Ok(mut first) = raised.lock() {
                first.get_or_insert(e);
            }
            Error::InvalidArgument(format!("the integrand raised {message}"))
        })
    };
    let report = py
        .detach(|| -> Result<Report> {
            let parsed;
            let made;
            let f = match (expr, builtin_name) {
                (None, None) if callable.is_some() => Func::Batch(&batch),
                (Some(text), None) => {
                    parsed = Expr::parse(text, dim)?;
                    Func::Expr(&parsed)
                }
                (None, Some(name)) => {
                    made = builtin(kind_of(name)?, dim, &a, &u)?;
                    Func::Builtin(made)
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "give an expression, a built-in integrand's name or a callable".into(),
                    ))
                }
            };
            gpuq::choose(choice)?.run(Job {
                f,
                method,
                lo: &lo,
                hi: &hi,
                opts: &opts,
            })
        })
        .map_err(|e| match raised.lock().ok().and_then(|mut r| r.take()) {
            Some(original) => original,
            None => crate::errors::to_py(e),
        })?;
    json(&report)
}
