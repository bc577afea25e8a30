//! (iv) Monte Carlo of the single-degree-of-freedom oscillator
//!
//! m x'' + c x' + g sgn(x') |x'|^(1/2) + k x = A [sin t + eps_t],  x(0) = x'(0) = 0,
//!
//! (seed 001's example 4: m = 2, c = 1.6, k = 62.84, g = 1; `g = 0` is the linear
//! system) by RK4, one sample per thread, the per-sample arithmetic in
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
use gpuq_kernels::uq::sdof::{hist_bin, run_sample, SdofParams};
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

/// The oscillator, its forcing, time grid and what to record.
#[derive(Clone, Debug, Serialize)]
pub struct SdofProblem {
    /// Mass m.
    pub m: f64,
    /// Linear damping c.
    pub c: f64,
    /// Stiffness k.
    pub k: f64,
    /// Coefficient of sgn(x') |x'|^(1/2) (1 in the seed, 0 for `--linear`).
    pub g: f64,
    /// Amplitude A.
    pub amplitude: f64,
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
            amplitude: 1.0,
            noise: true,
            dt: 0.01,
            steps: 1000,
            precision: Precision::F64,
            design: Design::MonteCarlo,
            keep: 0,
            histogram: None,
        }
    }

    /// Checks the parameters (positive m, k, h; finite values; histogram times
    /// increasing inside the grid and lo < hi).
    pub fn validate(&self) -> Result<()> {
        let finite = [self.m, self.c, self.k, self.g, self.amplitude, self.dt]
            .iter()
            .all(|v| v.is_finite());
        if !finite || self.m <= 0.0 || self.k <= 0.0 || self.dt <= 0.0 || self.c < 0.0 {
            return Err(Error::InvalidArgument(
                "sdof: m, k and dt must be positive, c non-negative, all finite".into(),
            ));
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
        p
    }

    /// sin(j h / 2), j = 0..=2 steps: the forcing at the RK4 stage times.
    pub fn sine_table<T: UqReal>(&self) -> Vec<T> {
        (0..=2 * self.steps)
            .map(|j| T::from_f64((j as f64 * self.dt * 0.5).sin()))
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

/// The exact variance of x after `steps` steps of the *discretised* linear
/// system (RK4 with the noise held over each step), from rest:
/// P_{j+1} = Phi P_j Phi^T + gamma gamma^T, with Phi and gamma the RK4 step's
/// response to unit states and to a unit normal. Cost O(steps). Measures the
/// discretisation's effect on [`linear_stationary_variance`].
pub fn linear_discrete_variance(problem: &SdofProblem, steps: usize) -> f64 {
    let mut p = problem.params::<f64>();
    p.g = 0.0;
    let col0 = p.rk4(1.0, 0.0, 0.0, 0.0, 0.0);
    let col1 = p.rk4(0.0, 1.0, 0.0, 0.0, 0.0);
    let gamma = p.rk4(0.0, 0.0, p.noise, p.noise, p.noise);
    let phi = [[col0.0, col1.0], [col0.1, col1.1]];
    let g = [gamma.0, gamma.1];
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
}
