//! (iii) Time response by FFT convolution (seed 001's example 3):
//!
//! y(t) = C [x0 + int_0^t h(t - tau) f(tau) dtau],  h(t) = e^(At) B,
//!
//! for the beam's state-space form x = (u, u'), A = [0, I; -M^-1 K, -M^-1 C],
//! B = (0, M^-1 e_dof), with x0 = 0 and many samples of an AR(1) load f.
//!
//! The load is held constant over each step of length dt (zero-order hold),
//! so the integral is exactly the discrete convolution
//! x_k = sum_{m<k} Phi^(k-1-m) Gamma f_m with Phi = e^(A dt) and
//! Gamma = int_0^dt e^(As) ds B (both from one matrix exponential of the
//! augmented matrix [A, B; 0, 0] dt, by scaling and squaring of a degree-12
//! Taylor polynomial). The output kernel g_j = C Phi^j Gamma is formed once
//! (N_t matrix-vector products), transformed once, and every sample costs one
//! forward FFT of its load, r pointwise products and r inverse FFTs of length
//! L = next power of two >= 2 N_t (`rustfft`). The result equals direct time
//! stepping x_{k+1} = Phi x_k + Gamma f_k up to rounding (tested).
//!
//! Load samples: f_0 = sigma / sqrt(1 - phi^2) z_0, f_k = phi f_{k-1} + sigma z_k,
//! z_k the normals of the sample's ChaCha8 stream (the same on every backend).
//!
//! Costs: set-up O((2n)^3 log) for the exponential and O(N_t (2n)^2) for the
//! kernel; per sample O((1 + r) L log L).
//!
//! Not done: cuFFT. The CUDA backend runs the host fallback (the default body of
//! [`ConvolutionKernels`], sequential `rustfft`), so `--backend cuda` gives the
//! CPU's numbers without GPU speed-up. Only x0 = 0 is supported.

use crate::beam::{Band, Beam};
use crate::psd::Ar1;
use gpuq_core::{Backend, Complex64, Error, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::beam::{cholesky, solve};
use gpuq_kernels::uq::gauss::NormalStream;
use rayon::prelude::*;
use rustfft::FftPlanner;
use serde::Serialize;
use std::time::Instant;

/// A dense row-major square matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    /// Order.
    pub n: usize,
    /// Entries, row-major.
    pub a: Vec<f64>,
}

impl Dense {
    fn zeros(n: usize) -> Self {
        Dense {
            n,
            a: vec![0.0; n * n],
        }
    }

    fn identity(n: usize) -> Self {
        let mut d = Dense::zeros(n);
        for i in 0..n {
            d.a[i * n + i] = 1.0;
        }
        d
    }

    /// self * other (rows in parallel). O(n^3).
    fn mul(&self, other: &Dense) -> Dense {
        let n = self.n;
        let mut out = Dense::zeros(n);
        out.a.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
            for k in 0..n {
                let s = self.a[i * n + k];
                if s != 0.0 {
                    for (o, b) in row.iter_mut().zip(&other.a[k * n..(k + 1) * n]) {
                        *o += s * b;
                    }
                }
            }
        });
        out
    }

    /// y = self x.
    pub fn apply(&self, x: &[f64]) -> Vec<f64> {
        self.a
            .chunks(self.n)
            .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    }

    /// The largest absolute row sum.
    fn norm_inf(&self) -> f64 {
        self.a
            .chunks(self.n.max(1))
            .map(|r| r.iter().map(|v| v.abs()).sum::<f64>())
            .fold(0.0, f64::max)
    }

    /// e^self by scaling and squaring (degree-12 Taylor on norm <= 1/2).
    pub fn expm(&self) -> Dense {
        let norm = self.norm_inf();
        let s = if norm > 0.5 {
            (norm / 0.5).log2().ceil() as i32
        } else {
            0
        };
        let scale = 0.5f64.powi(s);
        let mut x = self.clone();
        x.a.iter_mut().for_each(|v| *v *= scale);
        // Horner: I + X (I + X/2 (I + X/3 (...))).
        let n = self.n;
        let mut r = Dense::identity(n);
        for k in (1..=12).rev() {
            let mut t = x.mul(&r);
            t.a.iter_mut().for_each(|v| *v /= k as f64);
            for i in 0..n {
                t.a[i * n + i] += 1.0;
            }
            r = t;
        }
        for _ in 0..s {
            r = r.mul(&r);
        }
        r
    }
}

/// The discrete state-space system of the beam under a load on one DOF.
#[derive(Clone, Debug)]
pub struct StateSpace {
    /// Phi = e^(A dt) (2n x 2n).
    pub phi: Dense,
    /// Gamma = int_0^dt e^(As) ds B (2n).
    pub gamma: Vec<f64>,
    /// Step dt.
    pub dt: f64,
}

impl StateSpace {
    /// The zero-order-hold discretisation of the beam's K, M, C with the load on
    /// `dof`. Errors when M is not positive definite or dt is not positive.
    pub fn new(k: &Band, m: &Band, c: &Band, dof: usize, dt: f64) -> Result<Self> {
        let n = k.n;
        if m.n != n || c.n != n || dof >= n || !(dt > 0.0 && dt.is_finite()) {
            return Err(Error::InvalidArgument(
                "convolution: K, M, C of one order, load DOF inside, dt > 0".into(),
            ));
        }
        let mut mf = m.clone();
        if !cholesky(&mut mf, n) {
            return Err(Error::InvalidArgument(
                "convolution: the mass matrix is not positive definite".into(),
            ));
        }
        let minv = |col: &dyn Fn(usize) -> f64| {
            let mut w = mf.clone();
            for i in 0..n {
                w.rhs[i] = col(i);
            }
            solve(&mut w, n);
            w.rhs
        };
        // Augmented [A, B; 0, 0] dt of order 2n + 1.
        let na = 2 * n + 1;
        let mut aug = Dense::zeros(na);
        for i in 0..n {
            aug.a[i * na + n + i] = dt;
        }
        for j in 0..n {
            let mk = minv(&|i| k.get(i, j));
            let mc = minv(&|i| c.get(i, j));
            for i in 0..n {
                aug.a[(n + i) * na + j] = -mk[i] * dt;
                aug.a[(n + i) * na + n + j] = -mc[i] * dt;
            }
        }
        let b = minv(&|i| if i == dof { 1.0 } else { 0.0 });
        for (i, bi) in b.iter().enumerate() {
            aug.a[(n + i) * na + 2 * n] = bi * dt;
        }
        let e = aug.expm();
        let ns = 2 * n;
        let mut phi = Dense::zeros(ns);
        for (i, row) in phi.a.chunks_mut(ns).enumerate() {
            row.copy_from_slice(&e.a[i * na..i * na + ns]);
        }
        let gamma = (0..ns).map(|i| e.a[i * na + ns]).collect();
        Ok(StateSpace { phi, gamma, dt })
    }

    /// The output kernel g_j = C Phi^j Gamma, j = 0..nt (`g[r][j]`).
    pub fn output_kernel(&self, output: &[Vec<f64>], nt: usize) -> Vec<Vec<f64>> {
        let mut g = vec![Vec::with_capacity(nt); output.len()];
        let mut v = self.gamma.clone();
        for _ in 0..nt {
            for (gr, row) in g.iter_mut().zip(output) {
                gr.push(row.iter().zip(&v).map(|(a, b)| a * b).sum());
            }
            v = self.phi.apply(&v);
        }
        g
    }

    /// Direct time stepping x_{k+1} = Phi x_k + Gamma f_k from x_0 = 0;
    /// returns C x_k for k = 0..f.len() (`y[r][k]`). O(N_t (2n)^2).
    pub fn step(&self, output: &[Vec<f64>], f: &[f64]) -> Vec<Vec<f64>> {
        let mut x = vec![0.0; self.gamma.len()];
        let mut y = vec![Vec::with_capacity(f.len()); output.len()];
        for &fk in f {
            for (yr, row) in y.iter_mut().zip(output) {
                yr.push(row.iter().zip(&x).map(|(a, b)| a * b).sum());
            }
            x = self.phi.apply(&x);
            for (xi, g) in x.iter_mut().zip(&self.gamma) {
                *xi += g * fk;
            }
        }
        y
    }
}

/// AR(1) load sample `s` of length `nt` (see the module notes).
pub fn ar1_sample(load: &Ar1, seed: u64, s: u64, nt: usize) -> Vec<f64> {
    let mut z = NormalStream::<f64>::new(key_from_seed(seed), s);
    let mut f = Vec::with_capacity(nt);
    let mut prev = load.sigma / (1.0 - load.phi * load.phi).sqrt() * z.next_normal();
    for k in 0..nt {
        if k > 0 {
            prev = load.phi * prev + load.sigma * z.next_normal();
        }
        f.push(prev);
    }
    f
}

/// The transformed output kernels and the sizes of a convolution run.
#[derive(Clone, Debug)]
pub struct Kernels {
    /// FFT of each output's g, zero-padded to `len`.
    pub spectra: Vec<Vec<Complex64>>,
    /// Time steps N_t.
    pub nt: usize,
    /// FFT length L.
    pub len: usize,
}

/// The convolutions on a backend: for samples 0..samples, `y[s][r][k]`.
/// The default body is the sequential host path (`rustfft`); the CPU backend
/// runs samples in parallel with Rayon (the same values).
pub trait ConvolutionKernels: Backend {
    /// Responses of samples 0..samples (sample-major, then output, then time).
    fn convolve(&self, k: &Kernels, load: &Ar1, seed: u64, samples: usize) -> Result<Vec<f64>> {
        let mut planner = FftPlanner::new();
        let plans = (
            planner.plan_fft_forward(k.len),
            planner.plan_fft_inverse(k.len),
        );
        Ok((0..samples)
            .flat_map(|s| one_sample(k, load, seed, s as u64, &plans))
            .collect())
    }
}

type Plans = (
    std::sync::Arc<dyn rustfft::Fft<f64>>,
    std::sync::Arc<dyn rustfft::Fft<f64>>,
);

/// y[r][k] of one sample, flattened output-major.
fn one_sample(k: &Kernels, load: &Ar1, seed: u64, s: u64, plans: &Plans) -> Vec<f64> {
    let f = ar1_sample(load, seed, s, k.nt);
    let mut fs: Vec<Complex64> = f.iter().map(|&v| Complex64::new(v, 0.0)).collect();
    fs.resize(k.len, Complex64::new(0.0, 0.0));
    plans.0.process(&mut fs);
    let mut out = Vec::with_capacity(k.spectra.len() * k.nt);
    let inv = 1.0 / k.len as f64;
    for g in &k.spectra {
        let mut p: Vec<Complex64> = g.iter().zip(&fs).map(|(a, b)| a * b).collect();
        plans.1.process(&mut p);
        // y_0 = 0; y_k = (g * f)_{k-1}.
        out.push(0.0);
        out.extend(p[..k.nt - 1].iter().map(|v| v.re * inv));
    }
    out
}

impl ConvolutionKernels for CpuBackend {
    fn convolve(&self, k: &Kernels, load: &Ar1, seed: u64, samples: usize) -> Result<Vec<f64>> {
        let mut planner = FftPlanner::new();
        let plans = (
            planner.plan_fft_forward(k.len),
            planner.plan_fft_inverse(k.len),
        );
        let parts: Vec<Vec<f64>> = (0..samples)
            .into_par_iter()
            .map(|s| one_sample(k, load, seed, s as u64, &plans))
            .collect();
        Ok(parts.concat())
    }
}

/// cuFFT is not used yet: the CUDA backend runs the CPU backend's Rayon FFTs
/// on the host (the same values, at the CPU's speed).
#[cfg(feature = "cuda")]
impl ConvolutionKernels for gpuq_cuda::CudaBackend {
    fn convolve(&self, k: &Kernels, load: &Ar1, seed: u64, samples: usize) -> Result<Vec<f64>> {
        CpuBackend::new().convolve(k, load, seed, samples)
    }
}

/// A convolution problem on the beam.
#[derive(Clone, Debug, Serialize)]
pub struct ConvolutionProblem {
    /// The beam.
    pub beam: Beam,
    /// The loaded DOF.
    pub load_dof: usize,
    /// The load process (its `dt` is the time step).
    pub load: Ar1,
    /// Time steps N_t.
    pub steps: usize,
    /// Output matrix C (rows of 2n values over the states (u, u')).
    pub output: Vec<Vec<f64>>,
}

/// Responses and timings.
#[derive(Clone, Debug, Serialize)]
pub struct ConvolutionResult {
    /// Number of samples.
    pub samples: usize,
    /// `y[s][r][k]` flattened (sample, output, time).
    pub responses: Vec<f64>,
    /// Set-up (exponential, kernel, its FFT) in seconds.
    pub setup_s: f64,
    /// The samples' convolutions in seconds.
    pub time_s: f64,
}

impl ConvolutionProblem {
    /// The discretised system.
    pub fn state_space(&self) -> Result<StateSpace> {
        self.beam.validate()?;
        self.load.validate()?;
        StateSpace::new(
            &self.beam.stiffness(),
            &self.beam.mass(),
            &self.beam.damping(),
            self.load_dof,
            self.load.dt,
        )
    }
}

/// Runs `samples` AR(1) load samples through the beam by FFT convolution.
pub fn convolution_response<B: ConvolutionKernels>(
    backend: &B,
    problem: &ConvolutionProblem,
    samples: usize,
    seed: u64,
) -> Result<ConvolutionResult> {
    let start = Instant::now();
    let ns = 2 * problem.beam.dofs();
    if problem.steps < 2 || problem.output.iter().any(|r| r.len() != ns) {
        return Err(Error::InvalidArgument(format!(
            "convolution: at least 2 steps, output rows of {ns} values"
        )));
    }
    let ss = problem.state_space()?;
    let g = ss.output_kernel(&problem.output, problem.steps);
    let len = (2 * problem.steps).next_power_of_two();
    let fft = FftPlanner::new().plan_fft_forward(len);
    let spectra = g
        .into_iter()
        .map(|gr| {
            let mut c: Vec<Complex64> = gr.into_iter().map(|v| Complex64::new(v, 0.0)).collect();
            c.resize(len, Complex64::new(0.0, 0.0));
            fft.process(&mut c);
            c
        })
        .collect();
    let k = Kernels {
        spectra,
        nt: problem.steps,
        len,
    };
    let setup_s = start.elapsed().as_secs_f64();
    let t = Instant::now();
    let responses = backend.convolve(&k, &problem.load, seed, samples)?;
    Ok(ConvolutionResult {
        samples,
        responses,
        setup_s,
        time_s: t.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expm_of_an_oscillator_is_a_rotation() {
        let w: f64 = 3.0;
        let t = 0.7;
        let a = Dense {
            n: 2,
            a: vec![0.0, t, -w * w * t, 0.0],
        };
        let e = a.expm();
        let want = [
            (w * t).cos(),
            (w * t).sin() / w,
            -w * (w * t).sin(),
            (w * t).cos(),
        ];
        for (x, y) in e.a.iter().zip(want) {
            assert!((x - y).abs() < 1e-13, "{x} vs {y}");
        }
    }

    fn problem(dofs: usize, steps: usize) -> ConvolutionProblem {
        let beam = Beam::unit(dofs).unwrap();
        let ns = 2 * beam.dofs();
        let mut tip = vec![0.0; ns];
        tip[beam.tip()] = 1.0;
        let mut tip_velocity = vec![0.0; ns];
        tip_velocity[beam.dofs() + beam.tip()] = 1.0;
        ConvolutionProblem {
            load_dof: beam.tip(),
            beam,
            load: Ar1 {
                phi: 0.9,
                sigma: 1.0,
                dt: 0.01,
            },
            steps,
            output: vec![tip, tip_velocity],
        }
    }

    #[test]
    fn fft_convolution_equals_direct_time_stepping() {
        let p = problem(6, 300);
        let r = convolution_response(&CpuBackend::new(), &p, 3, 5).unwrap();
        let ss = p.state_space().unwrap();
        let scale = r.responses.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for s in 0..3 {
            let f = ar1_sample(&p.load, 5, s, p.steps);
            let y = ss.step(&p.output, &f);
            for (o, yo) in y.iter().enumerate() {
                let base = (s as usize * 2 + o) * p.steps;
                for (k, v) in yo.iter().enumerate() {
                    let e = (r.responses[base + k] - v).abs();
                    assert!(e <= 1e-10 * scale, "sample {s} output {o} step {k}: {e}");
                }
            }
        }
        // The default (sequential) body gives the same numbers as Rayon.
        let seq = convolution_response(&Sequential, &p, 3, 5).unwrap();
        assert_eq!(seq.responses, r.responses);
    }

    #[test]
    fn static_limit_matches_the_tip_flexibility() {
        // Under a constant unit load the stepped system settles at
        // (I - Phi)^-1 Gamma, whose tip deflection is L^3 / (3 E I).
        let p = problem(4, 2);
        let ss = p.state_space().unwrap();
        let f = vec![1.0; 20_000];
        let y = ss.step(&p.output[..1], &f);
        let last = *y[0].last().unwrap();
        assert!(
            (last / p.beam.tip_deflection(1.0) - 1.0).abs() < 1e-3,
            "{last}"
        );
    }

    #[derive(Clone)]
    struct Sequential;
    crate::test_backend::forward_backend!(Sequential);
    impl ConvolutionKernels for Sequential {}
}
