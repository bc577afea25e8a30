//! `gpuq._gpuq.integrate`: adaptive cubature of an expression or a built-in integrand.

use crate::errors::{json, IntoPy};
use crate::integrand::PyIntegrand;
use gpuq::core::Result;
use gpuq::cubature::rules::RuleKind;
use gpuq::cubature::{Func, Method, Options, Outcome};
use gpuq::{BackendChoice, FullBackend, OnBackend};
use pyo3::prelude::*;

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
    let integrand = PyIntegrand::new(dim, expr, builtin_name.map(|n| (n, a, u)), callable);
    let report = crate::interruptible::run(py, || {
        integrand.with_func(|f| {
            crate::opened::open(choice)?.run(Job {
                f,
                method,
                lo: &lo,
                hi: &hi,
                opts: &opts,
            })
        })
    })?
    .map_err(|e| integrand.error(e))?;
    json(&report)
}

/// E[g(q)] for q ~ N(0, I_dim) by the tensor Gauss-Hermite rule with `points` per axis on
/// the backend, g an expression, a built-in or a batch callable; the report (`estimate`,
/// `points`, `time_s`) as JSON text.
#[pyfunction]
#[pyo3(signature = (
    dim, points=5, expr=None, builtin_name=None, a=vec![], u=vec![], backend="auto",
    callable=None
))]
#[allow(clippy::too_many_arguments)]
pub fn uq_expectation(
    py: Python<'_>,
    dim: usize,
    points: usize,
    expr: Option<&str>,
    builtin_name: Option<&str>,
    a: Vec<f64>,
    u: Vec<f64>,
    backend: &str,
    callable: Option<Py<PyAny>>,
) -> PyResult<String> {
    struct Run<'a> {
        dim: usize,
        points: usize,
        f: Func<'a>,
    }
    impl OnBackend for Run<'_> {
        type Output = Result<gpuq::uq::expectation::Expectation>;
        fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
            gpuq::uq::expectation::tensor_expectation(backend, self.dim, self.points, self.f)
        }
    }
    let choice: BackendChoice = backend.parse().py()?;
    let integrand = PyIntegrand::new(dim, expr, builtin_name.map(|n| (n, a, u)), callable);
    let e = crate::interruptible::run(py, || {
        integrand.with_func(|f| crate::opened::open(choice)?.run(Run { dim, points, f }))
    })?
    .map_err(|e| integrand.error(e))?;
    json(&e)
}
