//! # gpuq-krylov
//!
//! Krylov solvers written once, generic over the [`gpuq_core::Backend`], the
//! [`gpuq_core::Scalar`] and the [`gpuq_core::LinearOperator`]:
//!
//! * [`cg()`]: conjugate gradients, optionally preconditioned (PCG), for Hermitian
//!   positive definite systems;
//! * [`bicgstab()`]: BiCGSTAB, right-preconditioned, for general systems;
//! * [`gmres()`]: restarted GMRES(m), right-preconditioned, with Gram-Schmidt run
//!   twice per step, for general systems;
//! * preconditioners as operators: [`Jacobi`] (and `None`, the identity);
//! * [`solve_csr`]: the one-call path from a host CSR matrix and right-hand side
//!   to a solution and a [`gpuq_core::SolveReport`].
//!
//! Per-iteration work that a backend can fuse lives in the [`CgKernels`] trait:
//! its default methods are written with BLAS-1 operations, and a backend overrides
//! them with single-pass kernels (the CPU backend does, in [`kernels`]).
//!
//! Every method starts and ends the same way (input checks, ||b||, residual
//! history, the true residual recomputed at the end, breakdown as an error
//! carrying the partial report).
//!
//! Not yet here (issue 4 continues): BiCGSTAB(l), TFQMR, QMR, the 2x2-block Jacobi
//! preconditioner, stagnation detection, and fused kernels for BiCGSTAB. The
//! [`Method`] enum and the solver module layout are where they slot in.

#![warn(missing_docs)]

mod bicgstab;
mod cg;
mod gmres;
pub mod kernels;
mod options;
mod precond;
mod session;
mod solve;

pub use bicgstab::{bicgstab, bicgstab_monitored};
pub use cg::{cg, cg_monitored};
pub use gmres::{gmres, gmres_monitored};
pub use kernels::CgKernels;
pub use options::{KrylovOptions, Method, Preconditioner};
pub use precond::Jacobi;
pub use solve::{solve_csr, solve_csr_monitored, SolverConfig};
