//! Per-item math of the uncertainty-quantification procedures (crate `gpuq-uq`),
//! shared by the CPU and the CUDA backend:
//!
//! * [`real`]: `f32`/`f64` behind one trait, with `sqrt`, `ln`, `exp` and a
//!   reduced sine/cosine in plain arithmetic (the same bits on both backends);
//! * [`gauss`]: standard normals from the keyed ChaCha8 streams (Box-Muller);
//! * [`sdof`]: one Monte Carlo sample of the nonlinear SDOF oscillator by RK4;
//! * [`band`]: the banded Cholesky of any semi-bandwidth and one static sample
//!   of a random banded stiffness K0 + sum_k theta_k K_k (draws, assembly,
//!   factorisation, solve, outputs and residual);
//! * [`beam`]: the cantilever beam's element stiffness and banded assembly;
//! * [`dense`]: LU with partial pivoting (the seed's dense static path);
//! * [`convolution`]: the FFT convolution's padded load blocks and the
//!   chunked mean and variance over samples;
//! * [`linear`]: linear outputs of Monte Carlo samples drawn a ChaCha8 block
//!   at a time (the static response's random loads);
//! * [`psd`]: the response PSD's cross-spectral entries, exactly Hermitian;
//! * [`sampling`]: Latin hypercube (keyed permutations) and Owen-scrambled
//!   one-dimensional Sobol points, the alternatives to plain Monte Carlo.

pub mod band;
pub mod beam;
pub mod convolution;
pub mod dense;
pub mod gauss;
pub mod linear;
pub mod psd;
pub mod real;
pub mod sampling;
pub mod sdof;
