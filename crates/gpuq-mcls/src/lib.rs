//! # gpuq-mcls
//!
//! Monte Carlo linear solvers (seed 000): the forward and adjoint Neumann-Ulam
//! methods with collision and expected-value estimators, and Monte Carlo
//! Synthetic Acceleration (MCSA) on top of them.
//!
//! A system A x = b is rewritten as x = H x + b^ with H = I - D^-1 A and
//! b^ = D^-1 b ([`McSetup`]); when rho(H) < 1 the Neumann series
//! x = sum_m H^m b^ converges and random walks on the rows of H (forward) or H^T
//! (adjoint) estimate it. The walk of one history is written once, in
//! `gpuq_kernels::walk`, and its random numbers come from a counter-based
//! ChaCha8 generator keyed by (seed, history id) (`gpuq_kernels::chacha`).
//!
//! How that answers seed 000 §1 and §4: the seed's cuRAND variants had to choose
//! between an expensive per-thread initialisation (one seed, skip-ahead to each
//! thread's subsequence) and cheap but possibly correlated streams (one seed per
//! thread). A counter-based generator has no state to initialise: the numbers of
//! history h are ChaCha8 blocks 0, 1, 2, ... of stream h under the seed's key, a
//! pure function any thread evaluates directly, and distinct streams are distinct
//! inputs to a cryptographic permutation, so they are as uncorrelated as ChaCha's
//! output is random. Batching the generator's calls (§4) is built in: one block
//! gives sixteen 32-bit draws.
//!
//! Backends implement [`WalkBackend`]; the Rayon CPU backend is the oracle.
//!
//! ```
//! use gpuq_mcls::{solve, McMethod, McOptions};
//! use gpuq_sparse::generators::laplace1d;
//! let a = laplace1d::<f64>(50, 1.0); // diagonally dominant: rho(H) < 1
//! let b = vec![1.0; 50];
//! let opts = McOptions { method: McMethod::Adjoint, histories: 20_000, ..Default::default() };
//! let r = solve(&gpuq_cpu::CpuBackend::new(), &a, &b, &opts).unwrap();
//! assert!(r.relative_residual < 0.1);
//! ```

#![warn(missing_docs)]

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod mcsa;
pub mod options;
pub mod setup;
pub mod solve;
pub mod spectral;
pub mod walker;

pub use mcsa::{mcsa, McsaOptions, MCSA_STAGNATION};
pub use options::{Estimator, Mapping, McMethod, McOptions};
pub use setup::{Layout, McSetup, WalkData};
pub use solve::{McResult, McStatus, McTiming, MonteCarlo};
pub use spectral::SpectralEstimate;
pub use walker::{AdjointBatch, BatchSums, ForwardBatch, Source, WalkBackend};

/// Builds the setup of `a` on `backend` in `opts.layout` and estimates the
/// solution of A x = b ([`MonteCarlo::new`] then [`MonteCarlo::solve`]).
pub fn solve<B: WalkBackend>(
    backend: &B,
    a: &gpuq_sparse::Csr<f64>,
    b: &[f64],
    opts: &McOptions,
) -> gpuq_core::Result<McResult> {
    MonteCarlo::new(backend, a, opts.layout)?.solve(b, opts)
}
