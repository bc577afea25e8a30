//! # gpuq-krylov
//!
//! Krylov solvers written once, generic over the [`gpuq_core::Backend`], the
//! [`gpuq_core::Scalar`] and the [`gpuq_core::LinearOperator`]:
//!
//! * [`cg()`]: conjugate gradients, optionally preconditioned (PCG), for Hermitian
//!   positive definite systems;
//! * preconditioners as operators: [`Jacobi`] (and `None`, the identity);
//! * [`solve_csr`]: the one-call path from a host CSR matrix and right-hand side
//!   to a solution and a [`gpuq_core::SolveReport`].
//!
//! Per-iteration work that a backend can fuse lives in the [`CgKernels`] trait:
//! its default methods are written with BLAS-1 operations, and a backend overrides
//! them with single-pass kernels (the CPU backend does, in [`kernels`]).
//!
//! Not yet here (a later issue): BiCGSTAB, BiCGSTAB(l), TFQMR, QMR, GMRES(m),
//! 2x2-block Jacobi. The [`Method`] enum and the solver module layout are where
//! they slot in.

#![warn(missing_docs)]

mod cg;
pub mod kernels;
mod options;
mod precond;
mod solve;

pub use cg::{cg, cg_monitored};
pub use kernels::CgKernels;
pub use options::{CgOptions, Method, Preconditioner};
pub use precond::Jacobi;
pub use solve::{solve_csr, solve_csr_monitored, SolverConfig};
