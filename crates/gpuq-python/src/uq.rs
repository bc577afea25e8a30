//! `gpuq._gpuq.uq_static_response`: the random static response of a user's model.

use crate::arrays::{csr, IndexArray};
use crate::errors::{json, IntoPy};
use gpuq::core::{Error, Result};
use gpuq::sparse::Csr;
use gpuq::uq::convolution_model::{model_convolution, ModelConvolution};
use gpuq::uq::design::Design;
use gpuq::uq::eigen::{EigenMethod, ModeOptions};
use gpuq::uq::model::{Damping, Model};
use gpuq::uq::psd::Ar1;
use gpuq::uq::psd_model::{model_psd_on, LoadPsd, ModelPsd};
use gpuq::uq::sdof::{Initial, Precision, SdofProblem};
use gpuq::uq::static_model::{model_static_response, ModelStatic, Theta};
use gpuq::{BackendChoice, FullBackend, OnBackend};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

/// A CSR matrix as the Python layer passes it: (shape, indptr, indices, data).
type PyCsr<'py> = (
    (usize, usize),
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    PyReadonlyArray1<'py, f64>,
);

/// The matrix of `m`, copied and checked.
fn matrix(m: &PyCsr<'_>) -> PyResult<Csr<f64>> {
    let (indptr, indices) = (IndexArray::of(&m.1)?, IndexArray::of(&m.2)?);
    csr(
        m.0,
        indptr.entries()?,
        indices.entries()?,
        m.3.as_slice()?.to_vec(),
    )
    .py()
}

/// Samples the static response K(theta) u = f of the model of stiffness `k` (the DOFs
/// `fixed` eliminated): f with mean `load_mean`, independent Gaussian parts of deviation
/// `load_std` and/or a correlated part `load_factor` eta; K = K0 + sum theta_k K_k for the
/// `terms` (a matrix and its coefficient's distribution, `uniform:LO:HI`, `normal:M:S` or
/// `lognormal:MU:SIGMA`). Returns the statistics of the `outputs` DOFs as JSON text. On the
/// host (a direct factorisation for deterministic K, CG per sample for random K).
#[pyfunction]
#[pyo3(signature = (
    k, load_mean, outputs, load_std=None, load_factor=None, terms=vec![], fixed=vec![],
    samples=1000, seed=1, design="mc", tol=1e-8
))]
#[allow(clippy::too_many_arguments)]
pub fn uq_static_response(
    py: Python<'_>,
    k: PyCsr<'_>,
    load_mean: Vec<f64>,
    outputs: Vec<usize>,
    load_std: Option<Vec<f64>>,
    load_factor: Option<PyCsr<'_>>,
    terms: Vec<(PyCsr<'_>, String)>,
    fixed: Vec<usize>,
    samples: u64,
    seed: u64,
    design: &str,
    tol: f64,
) -> PyResult<String> {
    let k = matrix(&k)?;
    let load_factor = load_factor.as_ref().map(matrix).transpose()?;
    let terms = terms
        .iter()
        .map(|(m, theta)| Ok((matrix(m)?, Theta::parse(theta).py()?)))
        .collect::<PyResult<Vec<_>>>()?;
    let design = Design::parse(design)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("unknown design '{design}' (mc, lhs, sobol)"))
        })
        .py()?;
    let result = crate::interruptible::run(py, || -> Result<_> {
        let model = Model::new(k, None, Damping::None, &fixed)?;
        let reduce = |v: &[f64], what| model.reduce_vector(v, what);
        let problem = ModelStatic {
            load_mean: reduce(&load_mean, "the mean load")?,
            load_std: load_std
                .as_deref()
                .map(|s| reduce(s, "the load deviations"))
                .transpose()?,
            load_factor: load_factor
                .as_ref()
                .map(|l| model.reduce_matrix(l, "the load factor"))
                .transpose()?,
            terms: terms
                .iter()
                .map(|(m, t)| Ok((model.reduce_matrix(m, "a stiffness term")?, *t)))
                .collect::<Result<_>>()?,
            outputs,
            design,
            tol,
            model: &model,
        };
        model_static_response(&problem, samples, seed)
    })?
    .py()?;
    json(&result)
}

/// The response PSD S_yy(w) of the outputs of the model (K, M, damping; the DOFs `fixed`
/// eliminated) under a load p f(t), p = `load_shape` (on all DOFs) and f of PSD `load_psd`
/// (`white:S0`, `ar1:PHI:SIGMA:DT`, `kanai-tajimi:S0:WG:ZG`): by `modes` modes (the lowest of
/// (K, M) by `eigensolver`: `auto`, the backend's choice, `lanczos` on the host or `lobpcg`
/// with AMG of `block` unknowns per node on the backend), or by a direct solve per frequency
/// with `modes` = 0; the cross-PSDs formed on the backend. Damping: a
/// matrix C, `rayleigh` (a, b) for a M + b K, or `modal_damping` (one ratio for every mode).
/// The result (frequencies, per output its PSD and RMS, the modes' summary) as JSON text.
#[pyfunction]
#[pyo3(signature = (
    k, m, load_shape, outputs, frequencies, damping=None, rayleigh=None, modal_damping=None,
    load_psd="white:1", modes=20, eigensolver="auto", fixed=vec![], seed=1, block=1,
    backend="auto"
))]
#[allow(clippy::too_many_arguments)]
pub fn uq_psd(
    py: Python<'_>,
    k: PyCsr<'_>,
    m: PyCsr<'_>,
    load_shape: Vec<f64>,
    outputs: Vec<usize>,
    frequencies: Vec<f64>,
    damping: Option<PyCsr<'_>>,
    rayleigh: Option<(f64, f64)>,
    modal_damping: Option<f64>,
    load_psd: &str,
    modes: usize,
    eigensolver: &str,
    fixed: Vec<usize>,
    seed: u64,
    block: usize,
    backend: &str,
) -> PyResult<String> {
    struct Run<'a>(&'a ModelPsd<'a>);
    impl OnBackend for Run<'_> {
        type Output = Result<gpuq::uq::psd_model::ModelPsdResult>;
        fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
            model_psd_on(backend, self.0)
        }
    }
    let (k, m) = (matrix(&k)?, matrix(&m)?);
    let damping = damping_of(damping, rayleigh, modal_damping)?;
    let load = LoadPsd::parse(load_psd).py()?;
    let method = EigenMethod::parse(eigensolver).py()?;
    let choice: BackendChoice = backend.parse().py()?;
    let result = crate::interruptible::run(py, || -> Result<_> {
        let model = Model::new(k, Some(m), damping, &fixed)?;
        let problem = ModelPsd {
            load_shape: model.reduce_vector(&load_shape, "the load shape")?,
            outputs,
            frequencies,
            load,
            modes: ModeOptions {
                count: modes,
                seed,
                method,
                block,
                ..ModeOptions::default()
            },
            model: &model,
        };
        crate::opened::open(choice)?.run(Run(&problem))
    })?
    .py()?;
    json(&result)
}

/// The SDOF oscillator m x'' + c x' + g sgn(x')|x'|^p + k x + k3 x^3 = A (sin(omega t) + w(t))
/// (w white noise, left out without `noise`) sampled `samples` times over `steps` steps of `dt`
/// on the backend: the mean and variance of x at every step and the first `keep`
/// trajectories, as JSON text. The same seed gives the same samples on every backend.
#[pyfunction]
#[pyo3(signature = (
    m, c, k, samples=10_000, steps=1000, dt=0.01, amplitude=1.0, noise=true, omega=1.0,
    g=0.0, exponent=0.5, duffing=0.0, initial=(0.0, 0.0, 0.0, 0.0), precision="f64",
    design="mc", keep=0, seed=1, backend="auto"
))]
#[allow(clippy::too_many_arguments)]
pub fn uq_sdof(
    py: Python<'_>,
    m: f64,
    c: f64,
    k: f64,
    samples: u64,
    steps: usize,
    dt: f64,
    amplitude: f64,
    noise: bool,
    omega: f64,
    g: f64,
    exponent: f64,
    duffing: f64,
    initial: (f64, f64, f64, f64),
    precision: &str,
    design: &str,
    keep: usize,
    seed: u64,
    backend: &str,
) -> PyResult<String> {
    struct Run<'a>(&'a SdofProblem, u64, u64);
    impl OnBackend for Run<'_> {
        type Output = Result<gpuq::uq::SdofResult>;
        fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
            gpuq::uq::sdof_monte_carlo(backend, self.0, self.1, self.2)
        }
    }
    let precision = match precision {
        "f32" => Precision::F32,
        "f64" => Precision::F64,
        other => {
            return Err(Error::InvalidArgument(format!(
                "precision '{other}': f32 or f64"
            )))
            .py()
        }
    };
    let (x0, v0, x0_std, v0_std) = initial;
    let problem = SdofProblem {
        m,
        c,
        k,
        g,
        exponent,
        duffing,
        bouc_wen: None,
        initial: Initial {
            x0,
            v0,
            x0_std,
            v0_std,
        },
        amplitude,
        omega,
        noise,
        dt,
        steps,
        precision,
        design: Design::parse(design)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown design '{design}' (mc, lhs)")))
            .py()?,
        keep,
        histogram: None,
    };
    let choice: BackendChoice = backend.parse().py()?;
    let result = crate::interruptible::run(py, || {
        crate::opened::open(choice)?.run(Run(&problem, samples, seed))
    })?
    .py()?;
    json(&result)
}

/// The damping of a dynamic model: a matrix C, Rayleigh (a, b) or one modal ratio (at most
/// one of them; none: undamped).
fn damping_of(
    matrix_c: Option<PyCsr<'_>>,
    rayleigh: Option<(f64, f64)>,
    modal: Option<f64>,
) -> PyResult<Damping> {
    Ok(match (matrix_c, rayleigh, modal) {
        (Some(c), None, None) => Damping::Matrix(matrix(&c)?),
        (None, Some((a, b)), None) => Damping::Rayleigh { a, b },
        (None, None, Some(z)) => Damping::Modal(z),
        (None, None, None) => Damping::None,
        _ => {
            return Err(Error::InvalidArgument(
                "give one damping: a matrix, rayleigh or modal_damping".into(),
            ))
            .py()
        }
    })
}

/// The response of the model's outputs to the load p f(t), f the AR(1) process of `phi`,
/// `sigma` and time step `dt`, over `steps` steps by convolution with the kernels of
/// `modes` modes (FFTs on the backend: rustfft on the CPU, cuFFT on the GPU), `samples`
/// load samples; the statistics per output and step (and the first `keep` histories) as
/// JSON text.
#[pyfunction]
#[pyo3(signature = (
    k, m, load_shape, outputs, phi, sigma, dt, steps=1024, samples=100, damping=None,
    rayleigh=None, modal_damping=None, modes=20, eigensolver="auto", fixed=vec![], seed=1,
    keep=0, block=1, backend="auto"
))]
#[allow(clippy::too_many_arguments)]
pub fn uq_convolution(
    py: Python<'_>,
    k: PyCsr<'_>,
    m: PyCsr<'_>,
    load_shape: Vec<f64>,
    outputs: Vec<usize>,
    phi: f64,
    sigma: f64,
    dt: f64,
    steps: usize,
    samples: usize,
    damping: Option<PyCsr<'_>>,
    rayleigh: Option<(f64, f64)>,
    modal_damping: Option<f64>,
    modes: usize,
    eigensolver: &str,
    fixed: Vec<usize>,
    seed: u64,
    keep: usize,
    block: usize,
    backend: &str,
) -> PyResult<String> {
    struct Run<'a>(&'a ModelConvolution<'a>, usize, u64, usize);
    impl OnBackend for Run<'_> {
        type Output = Result<gpuq::uq::convolution_model::ModelConvolutionResult>;
        fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
            model_convolution(backend, self.0, self.1, self.2, self.3)
        }
    }
    let (k, m) = (matrix(&k)?, matrix(&m)?);
    let damping = damping_of(damping, rayleigh, modal_damping)?;
    let method = EigenMethod::parse(eigensolver).py()?;
    let choice: BackendChoice = backend.parse().py()?;
    let result = crate::interruptible::run(py, || -> Result<_> {
        let model = Model::new(k, Some(m), damping, &fixed)?;
        let problem = ModelConvolution {
            load_shape: model.reduce_vector(&load_shape, "the load shape")?,
            outputs,
            modes: ModeOptions {
                count: modes,
                seed,
                method,
                block,
                ..ModeOptions::default()
            },
            load: Ar1 { phi, sigma, dt },
            steps,
            model: &model,
        };
        crate::opened::open(choice)?.run(Run(&problem, samples, seed, keep))
    })?
    .py()?;
    json(&result)
}
