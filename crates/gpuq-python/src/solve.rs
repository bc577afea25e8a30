//! `gpuq._gpuq.solve`: A x = b for a CSR matrix of any of the four scalar types.

use crate::amg::AmgParams;
use crate::arrays::{csr, optional_vector, to_numpy, vector, Dtype, IndexArray, Indices};
use crate::errors::{json, IntoPy};
use gpuq::core::{Result, Scalar, SolveReport, Stats};
use gpuq::krylov::{KrylovOptions, Method, Preconditioner, SolverConfig};
use gpuq::solver::{AmgSpec, AmgSummary, Solution, SolveSpec};
use gpuq::sparse::{Csr, Layout};
use gpuq::{BackendChoice, FullBackend, OnBackend};
use numpy::Element;
use pyo3::prelude::*;

/// What the Python layer receives as a solve's report: the solve report's fields (as the
/// CLI's JSON has them), the message of a breakdown or stagnation, with AMG the
/// hierarchy under `amg` and the AMG setup time under `amg_setup_s`, and for `gpuq.solve`
/// the host-device transfers of the whole call under `transfers`.
#[derive(serde::Serialize)]
pub struct PyReport<'a> {
    /// The solve report.
    #[serde(flatten)]
    pub report: &'a SolveReport,
    /// Why the solve stopped early, when a breakdown or stagnation ended it.
    pub stopped: Option<&'a str>,
    /// With AMG: the hierarchy and the choices made for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amg: Option<&'a AmgSummary>,
    /// With AMG: seconds of its setup (hierarchy and cycle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amg_setup_s: Option<f64>,
    /// The backend's transfers during the whole call (the report's `stats` count the
    /// iterations only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfers: Option<Transfers>,
}

/// The copies between host and device a backend made during one call: the uploads of
/// the matrix and the vectors, the scalars the iterations read back, the download of the
/// solution. Counted on the backend, which concurrent calls share. Zero on the CPU.
#[derive(serde::Serialize)]
pub struct Transfers {
    /// Host-to-device copies.
    pub uploads: u64,
    /// Bytes copied host to device.
    pub bytes_up: u64,
    /// Device-to-host copies.
    pub downloads: u64,
    /// Bytes copied device to host.
    pub bytes_down: u64,
}

impl Transfers {
    /// The transfers `backend` counted since its counters read `before`. O(1).
    pub fn since<B: gpuq::core::Backend>(backend: &B, before: &Stats) -> Self {
        let d = backend.stats().since(before);
        Transfers {
            uploads: d.uploads,
            bytes_up: d.bytes_up,
            downloads: d.downloads,
            bytes_down: d.bytes_down,
        }
    }
}

impl<'a> PyReport<'a> {
    /// The report of `s`.
    pub fn of<T>(s: &'a Solution<T>) -> Self {
        PyReport {
            report: &s.report,
            stopped: s.stopped.as_deref(),
            amg: s.amg.as_ref(),
            amg_setup_s: s.amg.as_ref().map(|a| a.setup_s),
            transfers: None,
        }
    }
}

/// The Krylov part of a solve's options.
pub fn config(
    method: &str,
    tol: f64,
    atol: f64,
    maxiter: Option<usize>,
    stagnation_window: usize,
) -> Result<SolverConfig> {
    let config = SolverConfig {
        method: Method::parse(method)?,
        precond: Preconditioner::None,
        options: KrylovOptions {
            rtol: tol,
            atol,
            max_iter: maxiter,
            stagnation_window,
            record_history: true,
            ..KrylovOptions::default()
        },
        layout: Layout::default(),
    };
    config.options.validate()?;
    Ok(config)
}

/// One solve on the backend chosen at run time.
struct Job<'a, T> {
    a: &'a Csr<T>,
    b: &'a [T],
    x0: Option<&'a [T]>,
    spec: &'a SolveSpec,
}

impl<T: Scalar> OnBackend for Job<'_, T> {
    type Output = Result<(Solution<T>, Transfers)>;
    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        let before = backend.stats();
        let s = gpuq::solver::solve(backend, self.a, self.b, self.x0, self.spec)?;
        Ok((s, Transfers::since(backend, &before)))
    }
}

/// Solves A x = b, A given by SciPy's CSR arrays, b (and x0) of the dtype of `data`.
/// Returns the solution (None after a breakdown) and the report as JSON text.
#[pyfunction]
#[pyo3(signature = (
    shape, indptr, indices, data, b, x0=None, method="cg", precond="none", tol=1e-8,
    atol=0.0, maxiter=None, stagnation_window=500, backend="auto", layout="auto", amg=None
))]
#[allow(clippy::too_many_arguments)]
pub fn solve<'py>(
    py: Python<'py>,
    shape: (usize, usize),
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    x0: Option<&Bound<'py, PyAny>>,
    method: &str,
    precond: &str,
    tol: f64,
    atol: f64,
    maxiter: Option<usize>,
    stagnation_window: usize,
    backend: &str,
    layout: &str,
    amg: Option<PyRef<'py, AmgParams>>,
) -> PyResult<(Option<Bound<'py, PyAny>>, String)> {
    let mut config = config(method, tol, atol, maxiter, stagnation_window).py()?;
    let amg = preconditioner(&mut config, precond, amg)?;
    let spec = SolveSpec {
        config,
        layout: Layout::parse_or_auto(layout).py()?,
        amg,
    };
    let choice: BackendChoice = backend.parse().py()?;
    let (indptr, indices) = (IndexArray::of(indptr)?, IndexArray::of(indices)?);
    let (ip, ix) = (indptr.entries()?, indices.entries()?);
    macro_rules! typed {
        ($t:ty) => {
            run::<$t>(py, shape, ip, ix, data, b, x0, choice, &spec)
        };
    }
    match Dtype::of(data)? {
        Dtype::F64 => typed!(f64),
        Dtype::F32 => typed!(f32),
        Dtype::C64 => typed!(num_complex::Complex<f64>),
        Dtype::C32 => typed!(num_complex::Complex<f32>),
    }
}

/// `precond` into `config`, or for `amg` the AMG options (`amg`'s, else the
/// defaults), which the solve then builds its hierarchy from.
pub(crate) fn preconditioner(
    config: &mut SolverConfig,
    precond: &str,
    amg: Option<PyRef<'_, AmgParams>>,
) -> PyResult<Option<AmgSpec>> {
    if precond == "amg" {
        return Ok(Some(amg.map(|p| p.spec()).unwrap_or_default()));
    }
    config.precond = Preconditioner::parse(precond).py()?;
    Ok(None)
}

/// [`solve`] in scalar `T`, the GIL released while gpuq works.
#[allow(clippy::too_many_arguments)]
fn run<'py, T: Scalar + Element>(
    py: Python<'py>,
    shape: (usize, usize),
    indptr: Indices<'_>,
    indices: Indices<'_>,
    data: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    x0: Option<&Bound<'py, PyAny>>,
    choice: BackendChoice,
    spec: &SolveSpec,
) -> PyResult<(Option<Bound<'py, PyAny>>, String)> {
    let (data, b, x0) = (
        vector::<T>(data)?,
        vector::<T>(b)?,
        optional_vector::<T>(x0)?,
    );
    let (solution, transfers) =
        crate::interruptible::run(py, || -> Result<(Solution<T>, Transfers)> {
            let a = csr(shape, indptr, indices, data)?;
            crate::opened::open(choice)?.run(Job {
                a: &a,
                b: &b,
                x0: x0.as_deref(),
                spec,
            })
        })?
        .py()?;
    let report = json(&PyReport {
        transfers: Some(transfers),
        ..PyReport::of(&solution)
    })?;
    Ok((solution.x.map(|x| to_numpy(py, x)), report))
}
