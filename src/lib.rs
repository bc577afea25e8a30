//! # gpuq
//!
//! GPU-accelerated numerical methods for sparse linear systems and uncertainty
//! quantification. This facade is the crate a program depends on: it
//! re-exports every system of the workspace, names what most programs need in
//! [`prelude`], and opens the backend chosen at run time with
//! [`backend::choose`].
//!
//! * [`core`]: scalars, the `Backend` and `LinearOperator` traits, errors, reports;
//! * [`sparse`]: sparse formats, Matrix Market I/O, problem generators, `SparseBackend`;
//! * [`cpu`]: the Rayon CPU backend, the reference every other backend is tested against;
//! * [`krylov`]: Krylov solvers (CG, BiCGSTAB, BiCGSTAB(l), TFQMR, QMR, GMRES) and
//!   preconditioners;
//! * [`amg`]: algebraic multigrid (smoothed aggregation, seed aggregation), a V- or
//!   W-cycle preconditioner for any Krylov method;
//! * [`mcls`]: Monte Carlo linear solvers (forward and adjoint Neumann-Ulam, MCSA);
//! * [`cubature`]: adaptive multidimensional cubature (DCUHRE and Genz-Malik
//!   rules; sequential, two-phase and breadth-first) and tensor Gauss rules, of
//!   built-in integrands, closures, expressions or device code;
//! * [`expr`]: the integrand expression language (parser, CPU closures, CUDA C);
//! * [`uq`]: the UQ procedures of seed 001 (static response, response PSD, FFT
//!   convolution, SDOF Monte Carlo, Gauss-Hermite and Smolyak expectations), on
//!   the built-in beam or a user's model;
//! * [`bidomain`]: semi-implicit time stepping of the cardiac bidomain model;
//! * [`plot`]: figures with text (title, axes with tick labels and units,
//!   legend, colour bar) as PNG or SVG: charts, heat maps, a solve's residual
//!   history, an AMG hierarchy;
//! * [`dist`]: distributed solves (row-block partitions, halo exchange, the `Dist`
//!   backend over threads, or over MPI with the feature `mpi`);
//! * `cuda` (feature `cuda`, on by default): the CUDA backend, kernels written in Rust;
//! * [`backend`]: the backend chosen at run time ([`AnyBackend`],
//!   [`BackendChoice`]) and code written once for every backend ([`OnBackend`]).
//!
//! Features: `cuda` (default) builds the CUDA backend (no CUDA toolkit needed;
//! the driver is opened at run time), `plot` (default) the UQ procedures'
//! figures (`uq::plot`), `mpi` the MPI communicator of [`dist`]. The examples
//! (`cargo run --release --example NAME`, `examples/*.rs`) show one system
//! each: `amg_matrix_market`, `cubature`, `uq`, `monte_carlo`, `distributed`.
//!
//! ```
//! use gpuq::prelude::*;
//!
//! let a = gpuq::sparse::generators::laplace2d::<f64>(16);
//! let backend = CpuBackend::new();
//! let x_true = vec![1.0; a.nrows()];
//! let b = a.mul_vec(&x_true).unwrap();
//! let (x, report) = solve_csr(&backend, &a, &b, &SolverConfig::default()).unwrap();
//! assert!(report.converged && report.relative_residual <= 1e-8);
//! assert!(x.iter().all(|xi| (xi - 1.0).abs() < 1e-6));
//!
//! // The same solve preconditioned by AMG, on the backend chosen at run time.
//! struct AmgPcg<'a>(&'a Csr<f64>, &'a [f64]);
//! impl OnBackend for AmgPcg<'_> {
//!     type Output = Result<SolveReport>;
//!     fn run<B: FullBackend>(self, backend: &B) -> Result<SolveReport> {
//!         let h = Hierarchy::build(self.0, &AmgOptions::default())?;
//!         let m = Amg::<B, f64>::new(backend, &h, &CycleOptions::default())?;
//!         let config = SolverConfig::default(); // CG
//!         let (_, report) =
//!             solve_csr_with_precond(backend, self.0, self.1, &config, Some(&m), &mut |_, _| {})?;
//!         Ok(report)
//!     }
//! }
//! let amg = choose(BackendChoice::Cpu)?.run(AmgPcg(&a, &b))?;
//! assert!(amg.converged && amg.iterations < report.iterations);
//! # Ok::<(), gpuq::core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod solver;

pub use backend::{choose, AnyBackend, BackendChoice, FullBackend, OnBackend};
pub use gpuq_amg as amg;
pub use gpuq_bidomain as bidomain;
pub use gpuq_core as core;
pub use gpuq_cpu as cpu;
pub use gpuq_cubature as cubature;
#[cfg(feature = "cuda")]
pub use gpuq_cuda as cuda;
pub use gpuq_dist as dist;
pub use gpuq_expr as expr;
pub use gpuq_krylov as krylov;
pub use gpuq_mcls as mcls;
pub use gpuq_plot as plot;
pub use gpuq_sparse as sparse;
pub use gpuq_uq as uq;

pub mod prelude {
    //! The names most programs need: `use gpuq::prelude::*;`.
    //!
    //! * the backend: [`CpuBackend`], `CudaBackend` (feature `cuda`), and the run-time
    //!   choice [`choose`], [`AnyBackend`], [`BackendChoice`], [`OnBackend`], [`FullBackend`];
    //! * the vocabulary: [`Backend`], [`Scalar`], [`LinearOperator`], [`Error`],
    //!   [`Result`], [`SolveReport`];
    //! * matrices: [`Coo`], [`Csr`], [`Layout`], [`SparseBackend`], and
    //!   [`read_csr`] / [`save_csr`] (Matrix Market);
    //! * Krylov solves: [`solve_csr`], [`solve_csr_with_precond`], [`SolverConfig`],
    //!   [`Method`], [`Preconditioner`], [`KrylovOptions`];
    //! * AMG: [`Hierarchy`], [`Amg`], [`AmgOptions`], [`CycleOptions`];
    //! * Monte Carlo: [`MonteCarlo`], [`McOptions`], [`McMethod`], [`mcsa()`], [`McsaOptions`];
    //! * cubature: [`integrate`], [`CubatureMethod`], [`CubatureOptions`], [`Func`],
    //!   [`Expr`], [`Outcome`];
    //! * UQ: [`Model`], [`Damping`], [`ModelStatic`], [`model_static_response`],
    //!   [`Beam`], [`StaticProblem`], [`static_response()`], [`SdofProblem`],
    //!   [`sdof_monte_carlo`];
    //! * distributed: [`ThreadComm`], [`Communicator`], [`Dist`], [`RowPartition`],
    //!   [`solve_rows`];
    //! * bidomain: [`Simulation`], [`BidomainConfig`], [`Tissue`].
    pub use crate::backend::{choose, AnyBackend, BackendChoice, FullBackend, OnBackend};
    pub use gpuq_amg::{Amg, AmgOptions, CycleOptions, Hierarchy};
    pub use gpuq_bidomain::{BidomainConfig, Simulation, Tissue};
    pub use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar, SolveReport};
    pub use gpuq_cpu::CpuBackend;
    pub use gpuq_cubature::{
        integrate, Expr, Func, Method as CubatureMethod, Options as CubatureOptions, Outcome,
    };
    #[cfg(feature = "cuda")]
    pub use gpuq_cuda::CudaBackend;
    pub use gpuq_dist::{solve_rows, Communicator, Dist, RowPartition, ThreadComm};
    pub use gpuq_krylov::{
        solve_csr, solve_csr_with_precond, KrylovOptions, Method, Preconditioner, SolverConfig,
    };
    pub use gpuq_mcls::{mcsa, McMethod, McOptions, McsaOptions, MonteCarlo};
    pub use gpuq_sparse::matrix_market::{read_csr, save_csr};
    pub use gpuq_sparse::{Coo, Csr, Layout, SparseBackend};
    pub use gpuq_uq::model::{Damping, Model};
    pub use gpuq_uq::static_model::{model_static_response, ModelStatic};
    pub use gpuq_uq::{sdof_monte_carlo, static_response, Beam, SdofProblem, StaticProblem};
}
