//! # gpuq-uq
//!
//! The five uncertainty-quantification procedures of seed 001 (Gaurav and
//! Wojtkiewicz, "Use of GPU computing for uncertainty quantification in
//! computational mechanics: a case study"), each written once, generic over the
//! backend. The static response is one function for every model (the seed's
//! beam is a model generator, [`Beam::model`]) over the backend's sparse
//! operations, `gpuq-krylov`'s conjugate gradients and `gpuq-amg`'s
//! hierarchy, or a factorisation chosen from the matrices (a random banded
//! K's per-sample band factorisations through the solver-owned trait
//! [`BandKernels`]); the others call a solver-owned trait (`SdofKernels`,
//! `PsdKernels`, `ConvolutionKernels`) whose methods have default bodies (a sequential
//! host fallback, so any backend runs them), which the CPU backend overrides
//! with Rayon (the same values, independent of the thread count) and the CUDA
//! backend with its kernels. The per-item arithmetic (an RK4 step, a load
//! sample, a banded factorisation, a normal draw) lives in `gpuq_kernels::uq`
//! and is shared by both backends, so the same seed gives the same samples on
//! the CPU and the GPU: random numbers come from keyed ChaCha8 streams
//! (stream = sample index), normals by Box-Muller with `ln`, `sqrt` and a
//! reduced sine/cosine written in plain IEEE arithmetic (no FMA, no libm), so
//! the device reproduces the host's bits.
//!
//! ## Example
//!
//! The static response of the cantilever to a random tip load and lognormal
//! element moduli on the CPU backend, against the exact tip moments:
//!
//! ```
//! use gpuq_cpu::CpuBackend;
//! use gpuq_uq::{static_response, Beam, StaticProblem};
//!
//! let beam = Beam::unit(32)?;
//! let problem = StaticProblem {
//!     dof: beam.tip(),
//!     beam,
//!     load_mean: 1.0,
//!     load_std: 0.1,
//!     modulus_cov: Some(0.1),
//!     design: Default::default(),
//!     solver: Default::default(),
//! };
//! let samples = 4000;
//! let r = static_response(&CpuBackend::new(), &problem, samples, 1)?;
//! let (mean, std) = problem.tip_moments();
//! assert_eq!(r.failed, 0);
//! assert!((r.mean - mean).abs() < 5.0 * std / (samples as f64).sqrt());
//! assert!((r.std - std).abs() < 0.1 * std);
//! # Ok::<(), gpuq_core::Error>(())
//! ```
//!
//! ## Models
//!
//! * [`beam`]: a cantilever Euler-Bernoulli beam (length L, modulus E, second
//!   moment I, mass per length rho A), `ne` cubic Hermite elements with two
//!   DOFs per node, consistent mass, Rayleigh damping C = alpha M + beta K;
//!   K, M, C as symmetric bands (semi-bandwidth 3), dense, or `gpuq_sparse::Csr`.
//!   O(ne) assembly.
//! * [`sdof`]: m x'' + c x' + g sgn(x') |x'|^p + k [alpha x + (1 - alpha) z] +
//!   k3 x^3 = A [sin(w t) + eps_t] with a Bouc-Wen variable z, from fixed or
//!   normal initial conditions, every parameter the user's (seed: m = 2,
//!   c = 1.6, k = 62.84, g = 1, p = 1/2, no Duffing or Bouc-Wen spring, w = 1,
//!   from rest; `g = 0` is linear).
//! * [`psd::Ar1`]: the stationary AR(1) load process and its PSD.
//! * [`model`]: a user's model: K, M and damping from Matrix Market files (or
//!   a generator), constrained DOFs eliminated, checked (square, one size,
//!   finite, symmetric, positive diagonals) before any sampling.
//!
//! ## Procedures
//!
//! * (i) [`static_model`]: the static response of any model, loads
//!   mu + D xi + L eta and a random stiffness K0 + sum theta_k K_k, one
//!   implementation ([`static_response_on`]) whose solver
//!   ([`StaticSolver`]) is chosen from the matrices or by the user: a
//!   banded K (semi-bandwidth at most 16) factored as a band (once on the
//!   host for deterministic K; per sample for random K, O(n b^2), through
//!   [`BandKernels`]: Rayon on the CPU, one device thread per sample on the
//!   GPU, the same `gpuq_kernels::uq::band` function and bits); a deterministic
//!   K otherwise by sparse Cholesky ([`cholesky`], by `faer`); or
//!   conjugate gradients on the backend (`gpuq-krylov`) preconditioned by AMG
//!   of the mean stiffness (`gpuq-amg`, built once), K(theta) formed on the
//!   backend per sample; the seed's dense LU per sample for comparison. Deterministic K:
//!   the outputs' adjoints (no solve per sample; the exact moments as a
//!   check). Mean, std and quantiles per output DOF.
//! * (i) on the beam, [`mod@static_response`]: a Gaussian tip load and
//!   optionally independent lognormal element moduli as a [`ModelStatic`] on
//!   the beam's model (the draws of seed 001's tables), exact closed forms for
//!   the tip ([`StaticProblem::tip_moments`]).
//! * (ii) [`psd_model`], on any model (the seed's beam through
//!   [`Beam::model`]): S_yy(w) = |H_o(w)|^2 S_ff(w) for a load p s(t) of
//!   white, AR(1), Kanai-Tajimi or tabulated PSD, by modal superposition
//!   over the lowest modes ([`eigen`]: shift-invert Lanczos or LOBPCG with
//!   the sparse Cholesky factor of K, or dense for small models) or by a
//!   complex sparse LU per frequency (the check, and the beam's path);
//!   cross-PSDs between outputs, RMS values and the modal mass captured
//!   (host); the full matrices S_xx = S_ff h h^H over every DOF on the
//!   backend by the memory-bound rank-1 kernel of [`psd`] (16 n^2 bytes per
//!   frequency).
//! * (iii) [`convolution_model`], on any model (the seed's beam through
//!   [`Beam::model`] with every mode): the modes' exact zero-order-hold
//!   kernels summed per output, then the FFT path of [`convolution`] on any
//!   backend (`rustfft` on the CPU, cuFFT on the device) with the AR(1)
//!   filter folded in (exactly the direct sum), many AR(1) samples,
//!   O((1 + r) L log L) per sample; the mean and standard deviation per step
//!   and each sample's peak reduced where the samples are computed.
//! * (iv) [`sdof`]: RK4 (with the hysteretic state when there is a Bouc-Wen
//!   spring), one thread per sample, f32 or f64, streamed mean and
//!   variance of x(t) at every time point (per-chunk or per-warp sums, never a
//!   samples x time array), histograms of x at chosen times.
//! * (v) [`expectation`]: tensor Gauss-Hermite through `gpuq-cubature` (any
//!   backend), and a Smolyak grid of non-nested Gauss-Hermite rules (host) for
//!   dimensions where the tensor grid is hopeless (N = 30).
//! * [`design`]: Latin hypercube sampling for (i) and (iv), scrambled Sobol
//!   points for the static load of (i).
//! * `plot` (feature `plot`, default): the procedures' figures (mean and
//!   band of x(t), histograms, PSDs, responses) with title, axes, tick
//!   labels, units and legend, as PNG or SVG, through `gpuq-plot`.
//!
//! ## Not done
//!
//! * Issue 51's remaining parts: the PSD's transfer values on the device
//!   (the modes or the per-frequency solves run on the host; only the full
//!   matrices are formed on the backend); the
//!   static response's draws on the device for random stiffness and for the
//!   Latin hypercube and Sobol designs (a random load under Monte Carlo is
//!   drawn on the backend: [`linear_samples`]), several right-hand sides per PCG
//!   and the AMG hierarchy rebuilt by `update_values` per sample; the device
//!   eigensolver.
//! * The band kernel on the device for a model with a uniform theta (its
//!   Phi is libm's erf, not linked into the main PTX module): such a model's
//!   band samples run on the host's threads with `--backend cuda`. The dense
//!   strategy (the seed's LU per sample) runs on the host for every backend
//!   (kernels-rs's `lu_solve`; no device kernel).
//! * The general band kernel is about twice as slow on the device as the
//!   beam-only kernel it replaced (which assembled the w = 3 band from the
//!   element moduli inside the thread): on the H200, 10^5 samples of the
//!   beam with a lognormal modulus take 0.54 s at 2048 DOFs (CPU 16 cores:
//!   1.70 s) and 33.7 s at 16384 DOFs (CPU: 14.4 s); see
//!   `docs/benchmarks.md`. One thread per sample with its band in global
//!   memory leaves the device idle at large n; a block per sample is not
//!   written.
//! * Single precision for (i) and (ii).
//! * Sobol points for the SDOF's per-step noise (1000 dimensions need direction
//!   numbers that are not in the tree); the Smolyak grid on the device.
//! * x0 != 0 in the convolution (the seed's formula adds x0 without propagating it).

#![warn(missing_docs)]

pub mod beam;
pub mod cholesky;
pub mod convolution;
pub mod convolution_model;
pub mod design;
pub mod eigen;
pub mod expectation;
pub mod linear_samples;
pub mod lobpcg;
pub mod modal;
pub mod model;
#[cfg(feature = "plot")]
pub mod plot;
pub mod psd;
pub mod psd_model;
pub mod sdof;
pub mod static_model;
pub mod static_response;
pub mod stats;
#[cfg(test)]
mod test_backend;
#[cfg(test)]
mod test_matrices;

pub use beam::{Band, Beam};
pub use convolution::{ConvolutionKernels, ConvolutionResult, ConvolutionSums};
pub use design::Design;
pub use expectation::{smolyak_expectation, tensor_expectation, Expectation, SmolyakRule};
pub use linear_samples::LinearSampleKernels;
pub use lobpcg::EigenKernels;
pub use psd::{Ar1, PsdKernels};
pub use sdof::{
    sdof_monte_carlo, BoucWen, HistogramSpec, Initial, Precision, SdofKernels, SdofProblem,
    SdofResult, SdofSums,
};
pub use static_model::{
    static_response_on, BandBlock, BandDraws, BandKernels, BandRun, ModelStatic, ModelStaticResult,
    StaticBackend, StaticOptions, StaticSolver, Theta,
};
pub use static_response::{static_response, StaticProblem, StaticResult};
