//! # gpuq-krylov
//!
//! Krylov solvers written once, generic over the [`gpuq_core::Backend`], the
//! [`gpuq_core::Scalar`] and the [`gpuq_core::LinearOperator`]:
//!
//! * [`cg()`]: conjugate gradients, optionally preconditioned (PCG), for Hermitian
//!   positive definite systems;
//! * [`bicgstab()`]: BiCGSTAB, right-preconditioned, for general systems;
//! * [`bicgstab_l()`]: BiCGSTAB(l), right-preconditioned, for general systems;
//! * [`tfqmr()`]: transpose-free QMR, right-preconditioned, for general systems;
//! * [`qmr()`]: QMR on two-sided Lanczos (uses A^T; free for symmetric and complex
//!   symmetric A), right-preconditioned, for general systems;
//! * [`gmres()`]: restarted GMRES(m), right-preconditioned, with delayed classical
//!   Gram-Schmidt re-orthogonalised at every step (DCGS2), for general systems;
//! * preconditioners as operators: [`Jacobi`], [`BlockJacobi2`] (and `None`, the
//!   identity); the AMG issue's V-cycle implements the same
//!   [`gpuq_core::LinearOperator`] trait;
//! * [`solve_csr`]: the one-call path from a host CSR matrix and right-hand side
//!   to a solution and a [`gpuq_core::SolveReport`].
//!
//! ```
//! use gpuq_cpu::CpuBackend;
//! use gpuq_krylov::{solve_csr, KrylovOptions, Method, Preconditioner, SolverConfig};
//! use gpuq_sparse::generators::{convdiff2d, laplace2d};
//!
//! let cpu = CpuBackend::new();
//! // CG with Jacobi on a symmetric positive definite system, b = A * ones.
//! let a = laplace2d::<f64>(32);
//! let b = a.mul_vec(&vec![1.0; a.nrows()])?;
//! let config = SolverConfig { precond: Preconditioner::Jacobi, ..SolverConfig::default() };
//! let (x, report) = solve_csr(&cpu, &a, &b, &config)?;
//! assert!(report.converged && report.relative_residual <= 1e-8);
//! assert!(x.iter().all(|xi| (xi - 1.0).abs() < 1e-5));
//! // GMRES(30) on a nonsymmetric convection-diffusion system.
//! let c = convdiff2d::<f64>(24, 20.0);
//! let b = vec![1.0; c.nrows()];
//! let config = SolverConfig {
//!     method: Method::Gmres { restart: 30 },
//!     precond: Preconditioner::Jacobi,
//!     options: KrylovOptions { rtol: 1e-10, ..KrylovOptions::default() },
//!     ..SolverConfig::default()
//! };
//! let (_, report) = solve_csr(&cpu, &c, &b, &config)?;
//! assert!(report.converged && report.relative_residual <= 1e-10);
//! # Ok::<(), gpuq_core::Error>(())
//! ```
//!
//! Per-iteration work that a backend can fuse lives in traits with default or
//! native implementations per backend: [`CgKernels`] (its default methods are
//! written with BLAS-1 operations; the CPU backend overrides them with
//! single-pass kernels, in [`kernels`]); [`BicgstabKernels`], [`TfqmrKernels`]
//! and [`QmrKernels`] (each method's steps with its scalars kept on the backend,
//! so a GPU iteration takes no host value, is recorded once and replayed as a
//! CUDA graph through [`Replay`], and ends with one snapshot of its scalars,
//! which the host reads while the next iteration already runs;
//! [`bicgstab_kernels`], [`bicgstabl_kernels`], [`tfqmr_kernels`], [`qmr_kernels`]); and
//! [`GmresKernels`] (GMRES's Gram-Schmidt against the whole basis, two sweeps a
//! step; [`gmres_kernels`]).
//!
//! Every method of these traits has a default body built from the core
//! operations ([`gpuq_core::Backend`]'s BLAS-1 and `gpuq_sparse::SparseBackend`),
//! the slot arithmetic done on a host copy of the method's small scalar array;
//! so a new backend runs every method after `impl ReplayByRerun for MyBackend
//! {}` and one empty `impl` per kernel trait (`impl CgKernels for MyBackend
//! {}`, ...; see `tests/default_kernels.rs`), and overrides the steps it fuses.

//! Every method starts and ends the same way (input checks, ||b||, residual
//! history, the true residual recomputed at the end, breakdown as an error
//! carrying the partial report), and `converged` means the *true* residual met
//! the tolerance: when a recurrence claims the tolerance and b - A x does not
//! meet it, the method restarts from the true residual (residual replacement, at
//! most [`KrylovOptions::max_residual_replacements`] times) and otherwise ends
//! with `converged: false` and [`gpuq_core::SolveStatus::AccuracyLimit`]. Every
//! report says why it ended in its `status`.
//!
//! Stagnation (no 1% decrease of the smallest residual within
//! [`KrylovOptions::stagnation_window`] iterations) ends a solve with a breakdown
//! error naming [`STAGNATION`] and carrying the partial report.
//!
//! Not yet here: look-ahead in QMR.

#![warn(missing_docs)]

mod bicgstab;
pub mod bicgstab_kernels;
mod bicgstabl;
pub mod bicgstabl_kernels;
mod cg;
mod gmres;
pub mod gmres_kernels;
pub mod kernels;
mod options;
mod precond;
mod qmr;
pub mod qmr_kernels;
mod replacement;
mod replay;
mod session;
mod solve;
mod tfqmr;
pub mod tfqmr_kernels;

pub use bicgstab::{bicgstab, bicgstab_monitored};
pub use bicgstab_kernels::BicgstabKernels;
pub use bicgstabl::{bicgstab_l, bicgstab_l_monitored};
pub use bicgstabl_kernels::BicgstablKernels;
pub use cg::{cg, cg_monitored};
pub use gmres::{gmres, gmres_monitored};
pub use gmres_kernels::GmresKernels;
pub use kernels::CgKernels;
pub use options::{KrylovOptions, Method, Preconditioner};
pub use precond::{BlockJacobi2, Jacobi};
pub use qmr::{qmr, qmr_monitored};
pub use qmr_kernels::QmrKernels;
pub use replay::{Replay, ReplayByRerun};
pub use session::{INTERRUPTED, STAGNATION};
pub use solve::{
    solve_csr, solve_csr_monitored, solve_csr_with_precond, solve_resident_with_precond,
    KrylovBackend, SolverConfig,
};
pub use tfqmr::{tfqmr, tfqmr_monitored};
pub use tfqmr_kernels::TfqmrKernels;
