//! (iv) Monte Carlo of the single-degree-of-freedom oscillator
//!
//! m x'' + c x' + g sgn(x') |x'|^p + k [alpha x + (1 - alpha) z] + k3 x^3
//!     = A [sin(w t) + eps_t],
//! z' = x' [a - |z|^n (gamma + beta sgn(x' z))],  x(0) = x0, x'(0) = v0, z(0) = 0
//!
//! (seed 001's example 4: m = 2, c = 1.6, k = 62.84, g = 1, p = 1/2, w = 1, from
//! rest; `g = 0` is the linear system; every parameter is the user's: a Duffing
//! spring k3, a Bouc-Wen hysteretic spring ([`BoucWen`]), the damping exponent,
//! the forcing frequency, fixed or normal initial conditions) by RK4, one sample
//! per thread, the per-sample arithmetic in
//! [`gpuq_kernels::uq::sdof`] shared by both backends, white noise of unit
//! intensity discretised as z_j / sqrt(h) held over step j, z_j the j-th normal of
//! the sample's ChaCha8 stream: the same seed gives the same samples on the CPU
//! and the GPU.
//!
//! Statistics are streamed: the mean and variance of x(t_j) at every time point
//! come from per-chunk sums of x and x^2 (CPU: chunks of samples fixed by the
//! sample count, combined in chunk order; GPU: per-warp rows summed in row
//! order), so no samples x time array is ever stored, and the result does not
//! depend on the number of threads. Histograms of x at chosen time points are
//! exact counts. Cost: S N_t RK4 steps (about 70 flops, 4 square roots when
//! g = 1 and half a Box-Muller transform each) and 2 S N_t additions for the
//! statistics; memory O(N_t) per chunk (CPU) or per resident warp (GPU).

use crate::design::Design;
use gpuq_core::{Backend, Error, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::gauss::NormalStream;
use gpuq_kernels::uq::real::UqReal;
use gpuq_kernels::uq::sampling::LhsNormals;
use gpuq_kernels::uq::sdof::{hist_bin, run_sample, SdofParams, State};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// Floating-point type of the integration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Precision {
    /// Single precision (statistics still summed in `f64`).
    F32,
    /// Double precision.
    F64,
}

/// Histograms of x at chosen time points.
#[derive(Clone, Debug, Serialize)]
pub struct HistogramSpec {
    /// Increasing time indices j (time j h).
    pub steps: Vec<usize>,
    /// Lower edge of the first bin.
    pub lo: f64,
    /// Upper edge of the last bin.
    pub hi: f64,
    /// Number of bins between `lo` and `hi`.
    pub bins: usize,
}

/// A Bouc-Wen hysteretic spring: the restoring force k [alpha x + (1 - alpha) z]
/// with z' = x' [a - |z|^n (gamma + beta sgn(x' z))], z(0) = 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BoucWen {
    /// Post-yield stiffness ratio alpha, in [0, 1).
    pub alpha: f64,
    /// a (1 in the usual normalisation).
    pub a: f64,
    /// beta.
    pub beta: f64,
    /// gamma.
    pub gamma: f64,
    /// Exponent n (> 0).
    pub n: f64,
}

/// Initial conditions: fixed (std 0) or independent normals around the means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Initial {
    /// Mean initial displacement.
    pub x0: f64,
    /// Mean initial velocity.
    pub v0: f64,
    /// Standard deviation of the initial displacement.
    pub x0_std: f64,
    /// Standard deviation of the initial velocity.
    pub v0_std: f64,
}

/// The oscillator, its forcing, time grid and what to record.
#[derive(Clone, Debug, Serialize)]
pub struct SdofProblem {
    /// Mass m.
    pub m: f64,
    /// Linear damping c.
    pub c: f64,
    /// Stiffness k.
    pub k: f64,
    /// Coefficient of sgn(x') |x'|^p (1 in the seed, 0 for `--linear`).
    pub g: f64,
    /// Exponent p of the fractional damping (1/2 in the seed; > 0).
    pub exponent: f64,
    /// Cubic (Duffing) stiffness k3 (0: none).
    pub duffing: f64,
    /// A Bouc-Wen hysteretic spring, if any.
    pub bouc_wen: Option<BoucWen>,
    /// Initial conditions.
    pub initial: Initial,
    /// Amplitude A.
    pub amplitude: f64,
    /// Circular frequency w of the deterministic forcing A sin(w t) (1 in the seed).
    pub omega: f64,
    /// Whether the white noise is applied (false: the deterministic A sin t).
    pub noise: bool,
    /// Time step h.
    pub dt: f64,
    /// Number of steps (N_t = steps + 1 time points).
    pub steps: usize,
    /// Integration precision.
    pub precision: Precision,
    /// Monte Carlo or Latin hypercube noise (Sobol is refused).
    pub design: Design,
    /// Samples 0..keep whose whole trajectories are returned.
    pub keep: usize,
    /// Optional histograms.
    pub histogram: Option<HistogramSpec>,
}

impl SdofProblem {
    /// Seed 001's system: m = 2, c = 1.6, k = 62.84, g = 1, A = 1, 10 s in
    /// 1001 points (h = 0.01), f64, noise on, nothing recorded beyond the moments.
    pub fn seed001() -> Self {
        SdofProblem {
            m: 2.0,
            c: 1.6,
            k: 62.84,
            g: 1.0,
            exponent: 0.5,
            duffing: 0.0,
            bouc_wen: None,
            initial: Initial::default(),
            amplitude: 1.0,
            omega: 1.0,
            noise: true,
            dt: 0.01,
            steps: 1000,
            precision: Precision::F64,
            design: Design::MonteCarlo,
            keep: 0,
            histogram: None,
        }
    }

    /// Checks the parameters (positive m, k, h, p; non-negative c; finite
    /// values; a Bouc-Wen spring with alpha in [0, 1), a > 0, n > 0; initial
    /// standard deviations non-negative; histogram times increasing inside
    /// the grid and lo < hi).
    pub fn validate(&self) -> Result<()> {
        let bw = self
            .bouc_wen
            .map_or([0.0; 5], |b| [b.alpha, b.a, b.beta, b.gamma, b.n]);
        let i = &self.initial;
        let finite = [
            self.m,
            self.c,
            self.k,
            self.g,
            self.exponent,
            self.duffing,
            self.amplitude,
            self.omega,
            self.dt,
            i.x0,
            i.v0,
            i.x0_std,
            i.v0_std,
        ]
        .iter()
        .chain(&bw)
        .all(|v| v.is_finite());
        if !finite || self.m <= 0.0 || self.k <= 0.0 || self.dt <= 0.0 || self.c < 0.0 {
            return Err(Error::InvalidArgument(
                "sdof: m, k and dt must be positive, c non-negative, all finite".into(),
            ));
        }
        if self.exponent <= 0.0 {
            return Err(Error::InvalidArgument(format!(
                "sdof: the damping exponent must be positive, not {}",
                self.exponent
            )));
        }
        if i.x0_std < 0.0 || i.v0_std < 0.0 {
            return Err(Error::InvalidArgument(
                "sdof: initial standard deviations must be non-negative".into(),
            ));
        }
        if let Some(b) = self.bouc_wen {
            if !(0.0..1.0).contains(&b.alpha) || b.a <= 0.0 || b.n <= 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "sdof: Bouc-Wen needs 0 <= alpha < 1, a > 0 and n > 0 (got alpha {}, a {}, n {})",
                    b.alpha, b.a, b.n
                )));
            }
        }
        if self.design == Design::Sobol {
            return Err(Error::InvalidArgument(
                "sdof: Sobol sampling of the per-step noise is not implemented (use mc or lhs)"
                    .into(),
            ));
        }
        if let Some(h) = &self.histogram {
            let ok = h.steps.windows(2).all(|w| w[0] < w[1])
                && h.steps.iter().all(|&j| j <= self.steps)
                && h.lo < h.hi
                && h.bins > 0;
            if !ok {
                return Err(Error::InvalidArgument(
                    "sdof: histogram times must increase within 0..=steps, lo < hi, bins > 0"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// The kernel parameters in type `T`.
    pub fn params<T: UqReal>(&self) -> SdofParams<T> {
        let mut p = SdofParams::<T>::new(
            self.m,
            self.c,
            self.k,
            self.g,
            self.amplitude,
            self.dt,
            self.steps,
        );
        if !self.noise {
            p.noise = T::ZERO;
        }
        p.p = T::from_f64(self.exponent);
        p.k3 = T::from_f64(self.duffing);
        if let Some(b) = self.bouc_wen {
            p.alpha = T::from_f64(b.alpha);
            p.bw_a = T::from_f64(b.a);
            p.bw_beta = T::from_f64(b.beta);
            p.bw_gamma = T::from_f64(b.gamma);
            p.bw_n = T::from_f64(b.n);
        }
        let i = &self.initial;
        p.x0 = T::from_f64(i.x0);
        p.v0 = T::from_f64(i.v0);
        p.x0_std = T::from_f64(i.x0_std);
        p.v0_std = T::from_f64(i.v0_std);
        p
    }

    /// sin(w j h / 2), j = 0..=2 steps: the forcing at the RK4 stage times.
    pub fn sine_table<T: UqReal>(&self) -> Vec<T> {
        (0..=2 * self.steps)
            .map(|j| T::from_f64((self.omega * (j as f64 * self.dt * 0.5)).sin()))
            .collect()
    }
}

/// Raw sums of a run, as a backend returns them.
#[derive(Clone, Debug, Default)]
pub struct SdofSums {
    /// sum_s x_s(t_j) and sum_s x_s(t_j)^2 interleaved, j = 0..=steps.
    pub sums: Vec<f64>,
    /// Trajectories of samples 0..keep, time-major (x_s(t_j) at j keep + s).
    pub trajectories: Vec<f64>,
    /// Histogram counters: one row of bins + 2 per histogram time (underflow
    /// first, overflow last).
    pub counts: Vec<u64>,
}

/// The statistics of a run.
#[derive(Clone, Debug, Serialize)]
pub struct SdofResult {
    /// Number of samples.
    pub samples: u64,
    /// Time points t_j = j h.
    pub times: Vec<f64>,
    /// Sample mean of x(t_j).
    pub mean: Vec<f64>,
    /// Unbiased sample variance of x(t_j) (0 for one sample).
    pub variance: Vec<f64>,
    /// Trajectories of samples 0..keep (`trajectories[s][j]`).
    pub trajectories: Vec<Vec<f64>>,
    /// Histogram counters per histogram time (bins + 2: underflow first).
    pub histograms: Vec<Vec<u64>>,
    /// Wall time of the backend's run in seconds (launches and downloads included).
    pub time_s: f64,
}

/// The SDOF Monte Carlo on a backend. The default body is a sequential host loop
/// (any backend runs it); the CPU backend overrides it with Rayon over the same
/// chunks (the same bits), the CUDA backend with its kernel.
pub trait SdofKernels: Backend {
    /// Runs samples 0..samples of `problem` under `seed` and returns the sums.
    fn sdof_sums(&self, problem: &SdofProblem, samples: u64, seed: u64) -> Result<SdofSums> {
        host_sums(problem, samples, seed, false)
    }
}

impl SdofKernels for CpuBackend {
    fn sdof_sums(&self, problem: &SdofProblem, samples: u64, seed: u64) -> Result<SdofSums> {
        host_sums(problem, samples, seed, true)
    }
}

/// Runs the Monte Carlo of `problem` with `samples` samples and seed `seed` on
/// `backend` and forms the statistics. Errors on invalid parameters.
pub fn sdof_monte_carlo<B: SdofKernels>(
    backend: &B,
    problem: &SdofProblem,
    samples: u64,
    seed: u64,
) -> Result<SdofResult> {
    problem.validate()?;
    let start = Instant::now();
    let raw = backend.sdof_sums(problem, samples, seed)?;
    let time_s = start.elapsed().as_secs_f64();
    Ok(statistics(problem, samples, raw, time_s))
}

/// Mean and variance from the sums; trajectories and histograms reshaped.
fn statistics(problem: &SdofProblem, samples: u64, raw: SdofSums, time_s: f64) -> SdofResult {
    let nt = problem.steps + 1;
    let n = samples as f64;
    let mut mean = Vec::with_capacity(nt);
    let mut variance = Vec::with_capacity(nt);
    for j in 0..nt {
        let (s1, s2) = (raw.sums[2 * j], raw.sums[2 * j + 1]);
        let m = if samples > 0 { s1 / n } else { 0.0 };
        mean.push(m);
        variance.push(if samples > 1 {
            ((s2 - s1 * m) / (n - 1.0)).max(0.0)
        } else {
            0.0
        });
    }
    let keep = problem.keep.min(samples as usize);
    let trajectories = (0..keep)
        .map(|s| (0..nt).map(|j| raw.trajectories[j * keep + s]).collect())
        .collect();
    let width = problem.histogram.as_ref().map_or(0, |h| h.bins + 2);
    let histograms = if width > 0 {
        raw.counts.chunks(width).map(<[u64]>::to_vec).collect()
    } else {
        Vec::new()
    };
    SdofResult {
        samples,
        times: (0..nt).map(|j| j as f64 * problem.dt).collect(),
        mean,
        variance,
        trajectories,
        histograms,
        time_s,
    }
}

/// Samples per host chunk: at least 1024, and at most 4096 chunks, so memory
/// stays O(4096 N_t) and the chunking depends on the sample count only.
fn chunk_len(samples: u64) -> u64 {
    samples.div_ceil(4096).max(1024)
}

/// The host run: chunks of samples, each summed in sample order, chunk sums
/// added in chunk order. `parallel` only decides who computes a chunk.
fn host_sums(problem: &SdofProblem, samples: u64, seed: u64, parallel: bool) -> Result<SdofSums> {
    problem.validate()?;
    match problem.precision {
        Precision::F32 => Ok(host_sums_typed::<f32>(problem, samples, seed, parallel)),
        Precision::F64 => Ok(host_sums_typed::<f64>(problem, samples, seed, parallel)),
    }
}

/// One chunk's contribution.
struct Chunk {
    sums: Vec<f64>,
    counts: Vec<u64>,
    /// (sample, trajectory) for the chunk's samples below `keep`.
    traj: Vec<(u64, Vec<f64>)>,
}

fn host_sums_typed<T: UqReal + Send + Sync>(
    problem: &SdofProblem,
    samples: u64,
    seed: u64,
    parallel: bool,
) -> SdofSums {
    let p = problem.params::<T>();
    let sin = problem.sine_table::<T>();
    let nt = problem.steps + 1;
    let keep = problem.keep.min(samples as usize) as u64;
    let hist = problem.histogram.as_ref();
    let (hsteps, hlo, hwidth, bins) = hist.map_or((&[][..], 0.0, 1.0, 0), |h| {
        (&h.steps[..], h.lo, (h.hi - h.lo) / h.bins as f64, h.bins)
    });
    let key = key_from_seed(seed);
    let len = chunk_len(samples);
    let chunks = samples.div_ceil(len);
    let run_chunk = |c: u64| {
        let mut ch = Chunk {
            sums: vec![0.0; 2 * nt],
            counts: vec![0; hsteps.len() * (bins + 2)],
            traj: Vec::new(),
        };
        for s in c * len..((c + 1) * len).min(samples) {
            let mut next = 0;
            let mut path = if s < keep { vec![0.0; nt] } else { Vec::new() };
            let observe = |j: usize, x: T| {
                let x = x.to_f64();
                ch.sums[2 * j] += x;
                ch.sums[2 * j + 1] += x * x;
                if s < keep {
                    path[j] = x;
                }
                if next < hsteps.len() && hsteps[next] == j {
                    ch.counts[next * (bins + 2) + hist_bin(x, hlo, hwidth, bins)] += 1;
                    next += 1;
                }
            };
            match problem.design {
                Design::LatinHypercube => {
                    let mut z = LhsNormals::new(key, s, samples);
                    run_sample(&p, &sin.as_slice(), &mut z, observe);
                }
                _ => {
                    let mut z = NormalStream::<T>::new(key, s);
                    run_sample(&p, &sin.as_slice(), &mut z, observe);
                }
            }
            if s < keep {
                ch.traj.push((s, path));
            }
        }
        ch
    };
    let parts: Vec<Chunk> = if parallel {
        (0..chunks).into_par_iter().map(run_chunk).collect()
    } else {
        (0..chunks).map(run_chunk).collect()
    };
    let mut out = SdofSums {
        sums: vec![0.0; 2 * nt],
        counts: vec![0; hsteps.len() * (bins + 2)],
        trajectories: vec![0.0; keep as usize * nt],
    };
    for ch in parts {
        for (a, b) in out.sums.iter_mut().zip(&ch.sums) {
            *a += b;
        }
        for (a, b) in out.counts.iter_mut().zip(&ch.counts) {
            *a += b;
        }
        for (s, path) in ch.traj {
            for (j, x) in path.into_iter().enumerate() {
                out.trajectories[j * keep as usize + s as usize] = x;
            }
        }
    }
    out
}

/// The stationary variance A^2 / (2 c k) of the linear oscillator (g = 0) under
/// white noise of unit intensity (two-sided PSD 1 / (2 pi)), continuous time.
pub fn linear_stationary_variance(amplitude: f64, c: f64, k: f64) -> f64 {
    amplitude * amplitude / (2.0 * c * k)
}

/// The steady response of the linear oscillator to A sin t at time t:
/// A [(k - m) sin t - c cos t] / ((k - m)^2 + c^2).
pub fn linear_steady_response(m: f64, c: f64, k: f64, amplitude: f64, t: f64) -> f64 {
    let d = k - m;
    amplitude * (d * t.sin() - c * t.cos()) / (d * d + c * c)
}

/// The deterministic response at time t of the linear oscillator of `p`
/// (m x'' + c x' + k x = A sin(w t), from p's mean initial conditions; g,
/// k3, Bouc-Wen and noise ignored), in closed form; underdamped systems only
/// (NaN otherwise). O(1).
pub fn linear_forced_response(p: &SdofProblem, t: f64) -> f64 {
    let (m, c, k, a, w) = (p.m, p.c, p.k, p.amplitude, p.omega);
    let (x0, v0) = (p.initial.x0, p.initial.v0);
    let amp = a / ((k - m * w * w).powi(2) + (c * w).powi(2)).sqrt();
    let phi = (c * w).atan2(k - m * w * w);
    let wn = (k / m).sqrt();
    let zeta = c / (2.0 * (k * m).sqrt());
    if zeta >= 1.0 {
        return f64::NAN;
    }
    let wd = wn * (1.0 - zeta * zeta).sqrt();
    let c1 = x0 + amp * phi.sin();
    let c2 = (v0 - amp * w * phi.cos() + zeta * wn * c1) / wd;
    (-zeta * wn * t).exp() * (c1 * (wd * t).cos() + c2 * (wd * t).sin()) + amp * (w * t - phi).sin()
}

/// The exact variance of x after `steps` steps of the *discretised* linear
/// system (RK4 with the noise held over each step), from rest:
/// P_{j+1} = Phi P_j Phi^T + gamma gamma^T, with Phi and gamma the RK4 step's
/// response to unit states and to a unit normal. Cost O(steps). Measures the
/// discretisation's effect on [`linear_stationary_variance`].
pub fn linear_discrete_variance(problem: &SdofProblem, steps: usize) -> f64 {
    let mut p = problem.params::<f64>();
    p.g = 0.0;
    let state = |x, v| State { x, v, z: 0.0 };
    let col0 = p.rk4(state(1.0, 0.0), 0.0, 0.0, 0.0);
    let col1 = p.rk4(state(0.0, 1.0), 0.0, 0.0, 0.0);
    let gamma = p.rk4(state(0.0, 0.0), p.noise, p.noise, p.noise);
    let phi = [[col0.x, col1.x], [col0.v, col1.v]];
    let g = [gamma.x, gamma.v];
    let mut cov = [[0.0f64; 2]; 2];
    for _ in 0..steps {
        let mut next = [[0.0; 2]; 2];
        for (a, row) in next.iter_mut().enumerate() {
            for (b, v) in row.iter_mut().enumerate() {
                let mut s = g[a] * g[b];
                for i in 0..2 {
                    for j in 0..2 {
                        s += phi[a][i] * cov[i][j] * phi[b][j];
                    }
                }
                *v = s;
            }
        }
        cov = next;
    }
    cov[0][0]
}

#[cfg(feature = "cuda")]
pub use cuda::{sdof_kernel_costs, SdofCosts};

#[cfg(feature = "cuda")]
mod cuda {
    use super::{Design, Precision, SdofKernels, SdofProblem, SdofSums};
    use gpuq_core::Result;
    use gpuq_cuda::{CudaBackend, SdofPart, SdofReal, SdofRun};
    use serde::Serialize;

    /// Seconds of the SDOF kernel's ingredients, each timed alone on the
    /// device over the same samples and steps (see `CudaBackend::uq_sdof_part`),
    /// and of the whole run with its statistics.
    #[derive(Clone, Debug, Serialize)]
    pub struct SdofCosts {
        /// RK4 arithmetic alone (linear, no noise, no square root).
        pub rk4_arithmetic_s: f64,
        /// Four square roots per step alone.
        pub square_roots_s: f64,
        /// One normal per step alone (ChaCha8 and Box-Muller).
        pub normals_s: f64,
        /// The full nonlinear noisy steps without the statistics.
        pub steps_without_statistics_s: f64,
        /// The whole run (`sdof_monte_carlo`'s time: kernels, allocation, downloads).
        pub full_s: f64,
    }

    /// Times the SDOF kernel's ingredients for `problem` with `samples` samples
    /// on the device (one warm-up launch of each first). Monte Carlo design.
    pub fn sdof_kernel_costs(
        b: &CudaBackend,
        problem: &SdofProblem,
        samples: u64,
        seed: u64,
    ) -> Result<SdofCosts> {
        problem.validate()?;
        match problem.precision {
            Precision::F32 => costs::<f32>(b, problem, samples, seed),
            Precision::F64 => costs::<f64>(b, problem, samples, seed),
        }
    }

    fn costs<T: SdofReal>(
        b: &CudaBackend,
        problem: &SdofProblem,
        samples: u64,
        seed: u64,
    ) -> Result<SdofCosts> {
        let p = problem.params::<T>();
        let sin = problem.sine_table::<T>();
        let time = |part| -> Result<f64> {
            b.uq_sdof_part(part, &p, &sin, seed, samples.min(1 << 16))?;
            b.uq_sdof_part(part, &p, &sin, seed, samples)
        };
        let rk4_arithmetic_s = time(SdofPart::Rk4Arithmetic)?;
        let square_roots_s = time(SdofPart::SquareRoots)?;
        let normals_s = time(SdofPart::Normals)?;
        let steps_without_statistics_s = time(SdofPart::StepsWithoutStatistics)?;
        let mc = SdofProblem {
            design: Design::MonteCarlo,
            ..problem.clone()
        };
        super::sdof_monte_carlo(b, &mc, samples.min(1 << 16), seed)?;
        let full_s = super::sdof_monte_carlo(b, &mc, samples, seed)?.time_s;
        Ok(SdofCosts {
            rk4_arithmetic_s,
            square_roots_s,
            normals_s,
            steps_without_statistics_s,
            full_s,
        })
    }

    fn run<T: SdofReal>(
        b: &CudaBackend,
        problem: &SdofProblem,
        samples: u64,
        seed: u64,
    ) -> Result<SdofSums> {
        let sin = problem.sine_table::<T>();
        let hist: Vec<u64>;
        let (lo, width, bins) = match &problem.histogram {
            Some(h) => {
                hist = h.steps.iter().map(|&j| j as u64).collect();
                (h.lo, (h.hi - h.lo) / h.bins as f64, h.bins)
            }
            None => {
                hist = Vec::new();
                (0.0, 1.0, 0)
            }
        };
        let out = b.uq_sdof(&SdofRun {
            params: problem.params::<T>(),
            sin: &sin,
            seed,
            samples,
            latin_hypercube: problem.design == Design::LatinHypercube,
            keep: problem.keep,
            hist_steps: &hist,
            hist_lo: lo,
            hist_width: width,
            bins,
        })?;
        Ok(SdofSums {
            sums: out.sums,
            trajectories: out.trajectories,
            counts: out.counts,
        })
    }

    impl SdofKernels for CudaBackend {
        fn sdof_sums(&self, problem: &SdofProblem, samples: u64, seed: u64) -> Result<SdofSums> {
            problem.validate()?;
            match problem.precision {
                Precision::F32 => run::<f32>(self, problem, samples, seed),
                Precision::F64 => run::<f64>(self, problem, samples, seed),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear(dt: f64, steps: usize) -> SdofProblem {
        SdofProblem {
            g: 0.0,
            dt,
            steps,
            ..SdofProblem::seed001()
        }
    }

    #[test]
    fn cpu_result_is_the_same_on_any_thread_count() {
        let mut p = SdofProblem::seed001();
        p.steps = 50;
        p.keep = 3;
        p.histogram = Some(HistogramSpec {
            steps: vec![10, 50],
            lo: -0.2,
            hi: 0.2,
            bins: 8,
        });
        let samples = 2500;
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let a = one.install(|| CpuBackend::new().sdof_sums(&p, samples, 9).unwrap());
        let b = three.install(|| CpuBackend::new().sdof_sums(&p, samples, 9).unwrap());
        let c = host_sums(&p, samples, 9, false).unwrap();
        assert_eq!(a.sums, b.sums);
        assert_eq!(a.sums, c.sums);
        assert_eq!(a.counts, b.counts);
        assert_eq!(a.trajectories, b.trajectories);
        let r = statistics(&p, samples, a, 0.0);
        for h in &r.histograms {
            assert_eq!(h.iter().sum::<u64>(), samples);
        }
        assert_eq!(r.trajectories.len(), 3);
    }

    #[test]
    fn deterministic_linear_response_reaches_the_steady_state() {
        let mut p = linear(0.01, 4000);
        p.noise = false;
        let r = sdof_monte_carlo(&CpuBackend::new(), &p, 1, 0).unwrap();
        // The transient decays as exp(-c t / 2m) = exp(-16) by t = 40.
        for j in [3800, 3900, 4000] {
            let want = linear_steady_response(p.m, p.c, p.k, p.amplitude, j as f64 * p.dt);
            assert!((r.mean[j] - want).abs() < 1e-7, "{} vs {want}", r.mean[j]);
        }
    }

    #[test]
    fn linear_variance_matches_the_closed_form() {
        // 10 s at h = 0.02: the transient variance has decayed by exp(-8).
        let p = linear(0.02, 500);
        let exact = linear_stationary_variance(p.amplitude, p.c, p.k);
        let discrete = linear_discrete_variance(&p, p.steps);
        // Discretisation: noise held over a step has PSD scaled by
        // sinc^2(w h / 2) ~ 1 - (w_n h)^2 / 12 near the resonance: 1e-3 here.
        assert!(
            (discrete / exact - 1.0).abs() < 2e-3,
            "{discrete} vs {exact}"
        );
        let samples = 3000;
        let r = sdof_monte_carlo(&CpuBackend::new(), &p, samples, 42).unwrap();
        let v = r.variance[p.steps];
        // Gaussian response: the sample variance has relative std sqrt(2 / (S - 1)).
        let sigma = (2.0 / (samples as f64 - 1.0)).sqrt();
        assert!(
            (v / discrete - 1.0).abs() < 4.0 * sigma,
            "{v} vs {discrete}"
        );
        // The mean is the deterministic response (within its Monte Carlo error).
        let m_err = (discrete / samples as f64).sqrt();
        let steady = linear_steady_response(p.m, p.c, p.k, p.amplitude, 10.0);
        assert!((r.mean[p.steps] - steady).abs() < 4.0 * m_err + 5e-4);
    }

    #[test]
    fn latin_hypercube_noise_keeps_the_linear_variance() {
        let mut p = linear(0.02, 500);
        p.design = Design::LatinHypercube;
        let discrete = linear_discrete_variance(&p, p.steps);
        let samples = 2000;
        let r = sdof_monte_carlo(&CpuBackend::new(), &p, samples, 8).unwrap();
        let sigma = (2.0 / (samples as f64 - 1.0)).sqrt();
        let v = r.variance[p.steps];
        assert!(
            (v / discrete - 1.0).abs() < 4.0 * sigma,
            "{v} vs {discrete}"
        );
        p.design = Design::Sobol;
        assert!(sdof_monte_carlo(&CpuBackend::new(), &p, 10, 0).is_err());
    }

    #[test]
    fn invalid_parameters_are_errors() {
        let mut p = SdofProblem::seed001();
        p.dt = -1.0;
        assert!(sdof_monte_carlo(&CpuBackend::new(), &p, 10, 0).is_err());
        let mut p = SdofProblem::seed001();
        p.histogram = Some(HistogramSpec {
            steps: vec![5, 5],
            lo: 0.0,
            hi: 1.0,
            bins: 4,
        });
        assert!(sdof_monte_carlo(&CpuBackend::new(), &p, 10, 0).is_err());
    }

    fn user(dt: f64, steps: usize) -> SdofProblem {
        SdofProblem {
            m: 1.5,
            c: 0.4,
            k: 20.0,
            g: 0.0,
            amplitude: 2.0,
            omega: 3.0,
            noise: false,
            initial: Initial {
                x0: 0.3,
                v0: -1.0,
                ..Initial::default()
            },
            dt,
            steps,
            ..SdofProblem::seed001()
        }
    }

    #[test]
    fn user_set_linear_oscillator_matches_its_closed_form() {
        let p = user(1e-3, 3000);
        let r = sdof_monte_carlo(&CpuBackend::new(), &p, 1, 0).unwrap();
        for j in [0, 1, 500, 1700, 3000] {
            let t = j as f64 * p.dt;
            let want = linear_forced_response(&p, t);
            assert!(
                (r.mean[j] - want).abs() < 1e-9,
                "t {t}: {} vs {want}",
                r.mean[j]
            );
        }
    }

    #[test]
    fn duffing_bouc_wen_and_exponent_reduce_to_the_linear_limits() {
        let cpu = CpuBackend::new();
        let base = sdof_monte_carlo(&cpu, &user(1e-3, 2000), 1, 0)
            .unwrap()
            .mean;
        let close = |other: &[f64], what: &str| {
            for (a, b) in base.iter().zip(other) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + a.abs()),
                    "{what}: {a} vs {b}"
                );
            }
        };
        // No cubic term: the same bits.
        let p = SdofProblem {
            duffing: 0.0,
            ..user(1e-3, 2000)
        };
        assert_eq!(sdof_monte_carlo(&cpu, &p, 1, 0).unwrap().mean, base);
        // An elastic Bouc-Wen spring (beta = gamma = 0, a = 1, from x0 = 0):
        // z = x, so any alpha gives k x.
        let elastic = |alpha| SdofProblem {
            bouc_wen: Some(BoucWen {
                alpha,
                a: 1.0,
                beta: 0.0,
                gamma: 0.0,
                n: 1.0,
            }),
            initial: Initial {
                x0: 0.0,
                v0: -1.0,
                ..Initial::default()
            },
            ..user(1e-3, 2000)
        };
        let from_zero = SdofProblem {
            initial: elastic(0.5).initial,
            ..user(1e-3, 2000)
        };
        let linear0 = sdof_monte_carlo(&cpu, &from_zero, 1, 0).unwrap().mean;
        for alpha in [0.0, 0.3, 0.9] {
            let m = sdof_monte_carlo(&cpu, &elastic(alpha), 1, 0).unwrap().mean;
            for (a, b) in linear0.iter().zip(&m) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + a.abs()),
                    "alpha {alpha}: {a} vs {b}"
                );
            }
        }
        // Exponent 1: g |x'| sgn(x') is linear damping g x'.
        let p = SdofProblem {
            c: 0.1,
            g: 0.3,
            exponent: 1.0,
            ..user(1e-3, 2000)
        };
        close(
            &sdof_monte_carlo(&cpu, &p, 1, 0).unwrap().mean,
            "exponent 1",
        );
        // Exponent 1.5 is neither: it must differ.
        let p = SdofProblem {
            c: 0.1,
            g: 0.3,
            exponent: 1.5,
            ..user(1e-3, 2000)
        };
        let m = sdof_monte_carlo(&cpu, &p, 1, 0).unwrap().mean;
        assert!((m[2000] - base[2000]).abs() > 1e-6);
    }

    /// K(kappa), the complete elliptic integral of the first kind, by the
    /// arithmetic-geometric mean.
    fn elliptic_k(kappa: f64) -> f64 {
        let (mut a, mut b) = (1.0f64, (1.0 - kappa * kappa).sqrt());
        for _ in 0..30 {
            (a, b) = (0.5 * (a + b), (a * b).sqrt());
        }
        std::f64::consts::PI / (2.0 * a)
    }

    #[test]
    fn free_duffing_oscillator_has_its_elliptic_period() {
        // m x'' + k x + k3 x^3 = 0 from (A, 0): x = A cn(w0 t, kappa),
        // w0^2 = (k + k3 A^2) / m, kappa^2 = k3 A^2 / (2 (k + k3 A^2)),
        // period 4 K(kappa) / w0; x = -A at half the period.
        let (m, k, k3, a) = (1.0, 4.0, 6.0, 1.2);
        let w0 = ((k + k3 * a * a) / m).sqrt();
        let kappa = (k3 * a * a / (2.0 * (k + k3 * a * a))).sqrt();
        let period = 4.0 * elliptic_k(kappa) / w0;
        let dt = period / 4000.0;
        let p = SdofProblem {
            m,
            c: 0.0,
            k,
            g: 0.0,
            duffing: k3,
            amplitude: 0.0,
            noise: false,
            initial: Initial {
                x0: a,
                ..Initial::default()
            },
            dt,
            steps: 4000,
            ..SdofProblem::seed001()
        };
        let r = sdof_monte_carlo(&CpuBackend::new(), &p, 1, 0).unwrap();
        assert!((r.mean[2000] + a).abs() < 1e-9, "{}", r.mean[2000]);
        assert!((r.mean[4000] - a).abs() < 1e-9, "{}", r.mean[4000]);
        // A linear spring of the same k would not be back at A.
        assert!((r.mean[1000]).abs() < 1e-9, "{}", r.mean[1000]);
    }

    #[test]
    fn random_initial_conditions_give_the_free_response_moments() {
        // Undamped, unforced: x = x0 cos(w t) + v0 / w sin(w t).
        let p = SdofProblem {
            m: 1.0,
            c: 0.0,
            k: 9.0,
            g: 0.0,
            amplitude: 0.0,
            noise: false,
            initial: Initial {
                x0: 0.5,
                v0: 1.0,
                x0_std: 0.2,
                v0_std: 0.6,
            },
            dt: 1e-3,
            steps: 700,
            ..SdofProblem::seed001()
        };
        let samples = 20_000;
        let r = sdof_monte_carlo(&CpuBackend::new(), &p, samples, 5).unwrap();
        let w = 3.0f64;
        for j in [0usize, 300, 700] {
            let t = j as f64 * p.dt;
            let (c, s) = ((w * t).cos(), (w * t).sin());
            let mean = 0.5 * c + 1.0 / w * s;
            let var = (0.2 * c).powi(2) + (0.6 / w * s).powi(2);
            let se = (var / samples as f64).sqrt();
            assert!(
                (r.mean[j] - mean).abs() < 4.0 * se,
                "t {t}: {} vs {mean}",
                r.mean[j]
            );
            let rel = 4.0 * (2.0 / samples as f64).sqrt();
            assert!(
                (r.variance[j] / var - 1.0).abs() < rel,
                "t {t}: {} vs {var}",
                r.variance[j]
            );
        }
    }

    #[test]
    fn bad_oscillators_are_refused() {
        let bad = [
            SdofProblem {
                exponent: 0.0,
                ..SdofProblem::seed001()
            },
            SdofProblem {
                bouc_wen: Some(BoucWen {
                    alpha: 1.0,
                    a: 1.0,
                    beta: 0.5,
                    gamma: 0.5,
                    n: 1.0,
                }),
                ..SdofProblem::seed001()
            },
            SdofProblem {
                initial: Initial {
                    x0_std: -1.0,
                    ..Initial::default()
                },
                ..SdofProblem::seed001()
            },
            SdofProblem {
                omega: f64::NAN,
                ..SdofProblem::seed001()
            },
        ];
        for p in bad {
            assert!(
                sdof_monte_carlo(&CpuBackend::new(), &p, 10, 1).is_err(),
                "{p:?}"
            );
        }
    }

    #[test]
    fn bouc_wen_spring_follows_its_backbone_under_slow_loading() {
        // alpha = 0, a = 1, beta + gamma = 1, n = 1: under a slow monotonic
        // load z = 1 - exp(-x), so the equilibrium of k z = F is
        // x = -ln(1 - F / k), 0.357 for F = 0.3 k, where a linear spring gives 0.3.
        let (k, w) = (100.0, 0.05);
        let quarter = std::f64::consts::FRAC_PI_2 / w;
        let p = SdofProblem {
            m: 1.0,
            c: 14.0,
            k,
            g: 0.0,
            amplitude: 0.3 * k,
            omega: w,
            noise: false,
            bouc_wen: Some(BoucWen {
                alpha: 0.0,
                a: 1.0,
                beta: 0.5,
                gamma: 0.5,
                n: 1.0,
            }),
            dt: quarter / 4000.0,
            steps: 4000,
            ..SdofProblem::seed001()
        };
        let x = sdof_monte_carlo(&CpuBackend::new(), &p, 1, 0).unwrap().mean[4000];
        let want = -(1.0f64 - 0.3).ln();
        assert!((x - want).abs() < 0.01, "{x} vs {want}");
    }
}
