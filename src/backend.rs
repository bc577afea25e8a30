//! The backend chosen at run time: one entry point, so that a program is
//! written once and runs on the CPU or on a GPU.
//!
//! * [`BackendChoice`]: `cpu`, `cuda` or `auto` (as the CLI's `--backend`
//!   takes them; it parses from those strings);
//! * [`choose`] (or [`AnyBackend::new`]): opens the chosen backend; `auto` is
//!   the CUDA backend when the crate is built with its `cuda` feature and a
//!   device is present, else the CPU backend;
//! * [`AnyBackend::run`]: runs an [`OnBackend`] visitor on whichever backend
//!   was opened. Rust has no generic closures, so the code written once for
//!   every backend is the visitor's generic method `run<B: FullBackend>`, and
//!   [`FullBackend`] names every kernel trait of every system, so that inside
//!   it any of gpuq's algorithms may be called on `B`.
//!
//! ```
//! use gpuq::prelude::*;
//!
//! /// A solve written once, for every backend.
//! struct Solve<'a> {
//!     a: &'a Csr<f64>,
//!     b: &'a [f64],
//! }
//!
//! impl OnBackend for Solve<'_> {
//!     type Output = Result<(Vec<f64>, SolveReport)>;
//!     fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
//!         gpuq::krylov::solve_csr(backend, self.a, self.b, &SolverConfig::default())
//!     }
//! }
//!
//! let a = gpuq::sparse::generators::laplace2d::<f64>(20);
//! let b = a.mul_vec(&vec![1.0; a.nrows()])?;
//! // `"auto".parse()` (or BackendChoice::Auto) takes a GPU where there is one;
//! // this example asks for the CPU so that it runs the same everywhere.
//! let backend = choose("cpu".parse::<BackendChoice>()?)?;
//! assert_eq!(backend.name(), "cpu");
//! let (x, report) = backend.run(Solve { a: &a, b: &b })?;
//! assert!(report.converged);
//! assert!(x.iter().all(|xi| (xi - 1.0).abs() < 1e-6));
//! # Ok::<(), gpuq::core::Error>(())
//! ```

use gpuq_core::{Error, Result};
use gpuq_cpu::CpuBackend;
use std::fmt;
use std::str::FromStr;

/// Which backend to open: the CPU, a CUDA device (device 0), or the CUDA
/// device when there is one and the CPU otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// The Rayon CPU backend.
    Cpu,
    /// CUDA device 0; an error when the `cuda` feature is off or no device
    /// is present.
    Cuda,
    /// CUDA device 0 when the `cuda` feature is on and a device is present,
    /// else the CPU (the default).
    #[default]
    Auto,
}

impl BackendChoice {
    /// The choice's name as [`FromStr`] reads it: `cpu`, `cuda` or `auto`.
    /// O(1).
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Auto => "auto",
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendChoice {
    type Err = Error;

    /// Reads `cpu`, `cuda` or `auto` (what the CLI's `--backend` takes);
    /// anything else is [`Error::InvalidArgument`] naming the choices. O(1).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cpu" => Ok(BackendChoice::Cpu),
            "cuda" => Ok(BackendChoice::Cuda),
            "auto" => Ok(BackendChoice::Auto),
            other => Err(Error::InvalidArgument(format!(
                "unknown backend '{other}' (available: cpu, cuda, auto)"
            ))),
        }
    }
}

/// A backend on which every system of gpuq runs: the Krylov solvers, AMG
/// (cycle and setup), the Monte Carlo walks, cubature, the UQ procedures,
/// the bidomain model, and the local side of a distributed solve
/// (`gpuq::dist::Dist<B>`). Implemented (by a blanket impl) for the CPU
/// backend and, with the `cuda` feature, the CUDA backend; it is the bound
/// of [`OnBackend::run`], so code written against it runs on either. It adds
/// no method and costs nothing.
pub trait FullBackend:
    gpuq_krylov::KrylovBackend
    + gpuq_amg::AmgKernels
    + gpuq_amg::SetupKernels
    + gpuq_mcls::WalkBackend
    + gpuq_cubature::CubatureKernels
    + gpuq_uq::SdofKernels
    + gpuq_uq::BandKernels
    + gpuq_uq::LinearSampleKernels
    + gpuq_uq::EigenKernels
    + gpuq_uq::PsdKernels
    + gpuq_uq::ConvolutionKernels
    + gpuq_bidomain::BidomainKernels
    + gpuq_dist::HaloBackend
{
}

impl<B> FullBackend for B where
    B: gpuq_krylov::KrylovBackend
        + gpuq_amg::AmgKernels
        + gpuq_amg::SetupKernels
        + gpuq_mcls::WalkBackend
        + gpuq_cubature::CubatureKernels
        + gpuq_uq::SdofKernels
        + gpuq_uq::BandKernels
        + gpuq_uq::LinearSampleKernels
        + gpuq_uq::EigenKernels
        + gpuq_uq::PsdKernels
        + gpuq_uq::ConvolutionKernels
        + gpuq_bidomain::BidomainKernels
        + gpuq_dist::HaloBackend
{
}

/// Code written once for every backend, run by [`AnyBackend::run`] on the
/// backend chosen at run time: the generic closure Rust does not have.
/// Implement it on a struct holding the inputs (by reference or by value);
/// `run` consumes it and returns [`OnBackend::Output`] (often a
/// `Result<...>`).
pub trait OnBackend {
    /// What the computation returns.
    type Output;

    /// Runs the computation on `backend`. Its cost is the computation's own;
    /// the dispatch is one `match`.
    fn run<B: FullBackend>(self, backend: &B) -> Self::Output;
}

/// The backend chosen at run time (by [`choose`]): the CPU backend, or with
/// the `cuda` feature a CUDA device. Cloning shares the backend (its pool or
/// its device context). Run code on it with [`AnyBackend::run`]; match on it
/// for backend-specific calls.
#[derive(Clone)]
pub enum AnyBackend {
    /// The Rayon CPU backend.
    Cpu(CpuBackend),
    /// A CUDA device (feature `cuda`).
    #[cfg(feature = "cuda")]
    Cuda(gpuq_cuda::CudaBackend),
}

impl fmt::Debug for AnyBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyBackend::Cpu(_) => f.write_str("AnyBackend::Cpu"),
            #[cfg(feature = "cuda")]
            AnyBackend::Cuda(b) => write!(f, "AnyBackend::Cuda({})", b.info().name),
        }
    }
}

/// Opens the backend `choice` names ([`AnyBackend::new`]).
///
/// `Cpu` costs O(1) (the CPU backend runs on Rayon's global pool). `Cuda`,
/// and `Auto` where a device is present, open device 0: load the driver,
/// create a context and a stream, and have the driver JIT-compile the
/// kernels' PTX (a fraction of a second to seconds on a first run, cached
/// by the driver afterwards). `Auto` without a device costs the driver probe
/// (milliseconds) and falls back to the CPU.
///
/// Errors: `Cuda` without the `cuda` feature or without a device is
/// [`Error::NoCudaDevice`]; a device that is present but fails to open
/// (for example, a driver that rejects the PTX) is an error for `Cuda` and
/// for `Auto` alike: `Auto` falls back to the CPU only when there is no
/// device to use, never to hide a broken one.
pub fn choose(choice: BackendChoice) -> Result<AnyBackend> {
    match choice {
        BackendChoice::Cpu => Ok(AnyBackend::Cpu(CpuBackend::new())),
        BackendChoice::Cuda => open_cuda(),
        BackendChoice::Auto => match open_cuda() {
            Err(Error::NoCudaDevice(_)) => Ok(AnyBackend::Cpu(CpuBackend::new())),
            other => other,
        },
    }
}

#[cfg(feature = "cuda")]
fn open_cuda() -> Result<AnyBackend> {
    gpuq_cuda::CudaBackend::new(0).map(AnyBackend::Cuda)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<AnyBackend> {
    Err(Error::NoCudaDevice(
        "gpuq was built without its `cuda` feature".into(),
    ))
}

impl AnyBackend {
    /// The same as [`choose`]: opens the backend `choice` names, at the cost
    /// and with the errors [`choose`] says.
    pub fn new(choice: BackendChoice) -> Result<Self> {
        choose(choice)
    }

    /// `"cpu"` or `"cuda"`: which backend was opened. O(1).
    pub fn name(&self) -> &'static str {
        match self {
            AnyBackend::Cpu(_) => "cpu",
            #[cfg(feature = "cuda")]
            AnyBackend::Cuda(_) => "cuda",
        }
    }

    /// Whether this is a CUDA device (only possible with the `cuda`
    /// feature). O(1).
    pub fn is_cuda(&self) -> bool {
        self.name() == "cuda"
    }

    /// Runs `work` on this backend: `work.run(&backend)` with the concrete
    /// backend type, so that the code of [`OnBackend::run`] is compiled for
    /// every backend and chosen here. Costs one `match` besides the work.
    pub fn run<V: OnBackend>(&self, work: V) -> V::Output {
        match self {
            AnyBackend::Cpu(b) => work.run(b),
            #[cfg(feature = "cuda")]
            AnyBackend::Cuda(b) => work.run(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_print_as_the_cli_spells_them() {
        for c in [BackendChoice::Cpu, BackendChoice::Cuda, BackendChoice::Auto] {
            assert_eq!(c.to_string().parse::<BackendChoice>().unwrap(), c);
        }
        assert_eq!(BackendChoice::default(), BackendChoice::Auto);
        let err = "gpu".parse::<BackendChoice>().unwrap_err().to_string();
        assert!(err.contains("unknown backend 'gpu'"), "{err}");
        assert!(err.contains("cpu, cuda, auto"), "{err}");
    }

    /// Whether a CUDA device can be used by this build.
    fn device_present() -> bool {
        #[cfg(feature = "cuda")]
        {
            gpuq_cuda::CudaBackend::device_count().unwrap_or(0) > 0
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
    }

    #[test]
    fn auto_is_cuda_exactly_when_a_device_is_present() {
        let cpu = choose(BackendChoice::Cpu).unwrap();
        assert_eq!(cpu.name(), "cpu");
        assert!(!cpu.is_cuda());
        let auto = choose(BackendChoice::Auto).unwrap();
        assert_eq!(auto.is_cuda(), device_present(), "{auto:?}");
        match choose(BackendChoice::Cuda) {
            Ok(b) => assert!(b.is_cuda() && device_present()),
            Err(Error::NoCudaDevice(_)) => assert!(!device_present()),
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    /// A visitor that uses the backend's own vector type.
    struct Dot<'a>(&'a [f64], &'a [f64]);

    impl OnBackend for Dot<'_> {
        type Output = Result<f64>;
        fn run<B: FullBackend>(self, backend: &B) -> Result<f64> {
            let (x, y) = (backend.upload(self.0)?, backend.upload(self.1)?);
            backend.dotc(&x, &y)
        }
    }

    #[test]
    fn run_dispatches_to_the_chosen_backend() {
        let x: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let y = vec![2.0; 1000];
        for choice in [BackendChoice::Cpu, BackendChoice::Auto] {
            let b = choose(choice).unwrap();
            assert_eq!(b.run(Dot(&x, &y)).unwrap(), 999_000.0);
        }
    }
}
