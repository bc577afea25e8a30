//! # gpuq
//!
//! GPU-accelerated numerical methods for sparse linear systems and uncertainty
//! quantification. This facade re-exports the workspace crates:
//!
//! * [`core`]: scalars, the `Backend` and `LinearOperator` traits, errors, reports;
//! * [`sparse`]: sparse formats, Matrix Market I/O, problem generators, `SparseBackend`;
//! * [`cpu`]: the Rayon CPU backend, the reference every other backend is tested against;
//! * [`krylov`]: Krylov solvers (CG, BiCGSTAB, BiCGSTAB(l), TFQMR, QMR, GMRES) and
//!   preconditioners;
//! * [`mcls`]: Monte Carlo linear solvers (forward and adjoint Neumann-Ulam, MCSA);
//! * [`dist`]: distributed solves (row-block partitions, halo exchange, the `Dist`
//!   backend over threads, or over MPI with the feature `mpi`);
//! * `cuda` (feature `cuda`, on by default): the CUDA backend, kernels written in Rust.
//!
//! ```
//! use gpuq::prelude::*;
//!
//! let a = gpuq::sparse::generators::laplace2d::<f64>(16);
//! let backend = CpuBackend::new();
//! let x_true = vec![1.0; a.nrows()];
//! let b = a.mul_vec(&x_true).unwrap();
//! let (x, report) = gpuq::krylov::solve_csr(&backend, &a, &b, &SolverConfig::default()).unwrap();
//! assert!(report.converged && report.relative_residual <= 1e-8);
//! assert!(x.iter().all(|xi| (xi - 1.0).abs() < 1e-6));
//! ```

pub use gpuq_core as core;
pub use gpuq_cpu as cpu;
#[cfg(feature = "cuda")]
pub use gpuq_cuda as cuda;
pub use gpuq_dist as dist;
pub use gpuq_krylov as krylov;
pub use gpuq_mcls as mcls;
pub use gpuq_sparse as sparse;

/// The names most programs need.
pub mod prelude {
    pub use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar, SolveReport};
    pub use gpuq_cpu::CpuBackend;
    pub use gpuq_krylov::{KrylovOptions, Method, Preconditioner, SolverConfig};
    pub use gpuq_sparse::{Coo, Csr, SparseBackend};
}
