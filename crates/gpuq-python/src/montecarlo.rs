//! `gpuq._gpuq.mc_solve`: Monte Carlo estimates and MCSA for a real CSR matrix.

use crate::arrays::{copy, csr, to_numpy, IndexArray};
use crate::errors::{json, IntoPy};
use crate::solve::PyReport;
use gpuq::core::{Error, Result};
use gpuq::mcls::{Estimator, McMethod, McOptions, McResult, McsaOptions, MonteCarlo};
use gpuq::solver::Solution;
use gpuq::sparse::Csr;
use gpuq::{BackendChoice, FullBackend, OnBackend};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

/// What a Monte Carlo run gives: an estimate with its statistics, or an MCSA solve.
enum Outcome {
    Estimate(Box<McResult>),
    Mcsa(Box<Solution<f64>>),
}

/// One run on the backend chosen at run time.
struct Job<'a> {
    a: &'a Csr<f64>,
    b: &'a [f64],
    method: &'a str,
    opts: McOptions,
    mcsa: (f64, usize, usize),
}

impl OnBackend for Job<'_> {
    type Output = Result<Outcome>;
    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        let mc = MonteCarlo::new(backend, self.a, self.opts.layout)?;
        if self.method != "mcsa" {
            return mc
                .solve(self.b, &self.opts)
                .map(|r| Outcome::Estimate(Box::new(r)));
        }
        let (tolerance, max_iterations, stagnation_window) = self.mcsa;
        let opts = McsaOptions {
            tolerance,
            max_iterations,
            stagnation_window,
            inner: self.opts,
        };
        let solution = gpuq::solver::ended(gpuq::mcls::mcsa(&mc, self.b, &opts))?;
        Ok(Outcome::Mcsa(Box::new(solution)))
    }
}

/// Estimates the solution of A x = b by `mc-forward` or `mc-adjoint` (the estimate, its
/// standard error and status), or solves it by `mcsa`; returns x and the report as JSON.
#[pyfunction]
#[pyo3(signature = (
    shape, indptr, indices, data, b, method="mcsa", histories=100_000, tol=None, seed=1,
    batches=10, estimator=None, cutoff=1e-9, max_steps=10_000, maxiter=1000,
    stagnation_window=20, backend="auto"
))]
#[allow(clippy::too_many_arguments)]
pub fn mc_solve<'py>(
    py: Python<'py>,
    shape: (usize, usize),
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: PyReadonlyArray1<'py, f64>,
    b: PyReadonlyArray1<'py, f64>,
    method: &str,
    histories: u64,
    tol: Option<f64>,
    seed: u64,
    batches: u32,
    estimator: Option<&str>,
    cutoff: f64,
    max_steps: u32,
    maxiter: usize,
    stagnation_window: usize,
    backend: &str,
) -> PyResult<(Option<Bound<'py, PyAny>>, String)> {
    let mc_method = match method {
        "mc-forward" => McMethod::Forward,
        "mc-adjoint" | "mcsa" => McMethod::Adjoint,
        other => {
            return Err(Error::InvalidArgument(format!(
                "unknown Monte Carlo method '{other}' (available: mc-forward, mc-adjoint, mcsa)"
            )))
            .py()
        }
    };
    let estimator = match (estimator, method) {
        (Some(name), _) => Estimator::parse(name).py()?,
        (None, "mcsa") => Estimator::Expected,
        (None, _) => Estimator::Collision,
    };
    let opts = McOptions {
        method: mc_method,
        histories,
        estimator,
        max_steps,
        cutoff,
        seed,
        batches,
        tolerance: if method == "mcsa" { None } else { tol },
        ..McOptions::default()
    };
    let choice: BackendChoice = backend.parse().py()?;
    let (indptr, indices) = (IndexArray::of(indptr)?, IndexArray::of(indices)?);
    let (ip, ix, values, b) = (
        indptr.entries()?,
        indices.entries()?,
        data.as_slice()?,
        b.as_slice()?,
    );
    let outcome = crate::interruptible::run(py, || {
        let a = csr(shape, ip, ix, copy(values))?;
        crate::opened::open(choice)?.run(Job {
            a: &a,
            b,
            method,
            opts,
            mcsa: (tol.unwrap_or(1e-8), maxiter, stagnation_window),
        })
    })?
    .py()?;
    match outcome {
        Outcome::Estimate(r) => {
            let report = json(&r)?;
            Ok((Some(to_numpy(py, r.x)), report))
        }
        Outcome::Mcsa(s) => {
            let report = json(&PyReport::of(&s))?;
            Ok((s.x.map(|x| to_numpy(py, x)), report))
        }
    }
}
