//! (iii) Time response by FFT convolution (seed 001's example 3), the path
//! every model's convolution ([`crate::convolution_model`], the beam's
//! through [`crate::Beam::model`]) ends in:
//!
//! y_k = sum_{m<k} g_{k-1-m} f_m
//!
//! for an output's kernel g (the zero-order-hold response to a load held
//! over each step of length dt, so the convolution is exact for such
//! loads) and many samples of an AR(1) load f.
//!
//! Load samples: f_0 = sigma / sqrt(1 - phi^2) z_0, f_k = phi f_{k-1} + sigma z_k,
//! z_k the normals of the sample's ChaCha8 stream (the same on every backend).
//! That is f = a * z' with a_j = sigma phi^j and z' the normals with z'_0
//! scaled by 1 / sqrt(1 - phi^2), so the set-up also folds the AR(1) filter
//! into the kernel: c = g * a by the recurrence c_k = phi c_{k-1} + sigma g_k,
//! shifted one step (y_0 = 0, y_k depends on the loads before step k), and
//! transformed once at length L = next power of two >= 2 N_t ([`Kernels`]).
//! A sample then costs its normals (generated independently, sixteen per
//! ChaCha8 block: `gpuq_kernels::uq::convolution`), one forward FFT, r
//! products and r inverse FFTs; no sequential recursion. The result equals
//! the direct sum of the recursive load up to rounding (tested).
//!
//! What comes back: per output and step the mean and the (unbiased)
//! standard deviation over the samples, each sample's peak |y|, and the
//! histories of the first `keep` samples. The statistics fold groups of
//! `STATS_GROUP` samples in order on every backend. The CPU backend runs
//! the samples of a batch in parallel (`rustfft`, Rayon); the CUDA backend
//! generates, transforms (cuFFT) and reduces on the device, and only the
//! statistics and the kept histories leave it
//! ([`ConvolutionKernels`]).
//!
//! Costs: set-up O(r L log L); per sample O((1 + r) L log L). Only x0 = 0
//! is supported.

use crate::psd::Ar1;
use gpuq_core::{Backend, Complex64, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::convolution::{
    chunk_moments, load_block, merge_moments, LOADS_PER_BLOCK, STATS_GROUP,
};
use gpuq_kernels::uq::gauss::NormalStream;
use rayon::prelude::*;
use rustfft::FftPlanner;
use serde::Serialize;

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

/// Device or host memory one batch of samples may use (inputs, spectra,
/// products, outputs).
const BATCH_BYTES: usize = 1 << 30;

/// The transformed kernels and the sizes of a convolution run.
#[derive(Clone, Debug)]
pub struct Kernels {
    /// FFT (length `len`) of each output's kernel (g with the AR(1) filter
    /// folded in, shifted one step), divided by `len`.
    pub spectra: Vec<Vec<Complex64>>,
    /// Time steps N_t.
    pub nt: usize,
    /// FFT length L (a power of two >= max(16, 2 N_t)).
    pub len: usize,
    /// The scale of a sample's first normal, 1 / sqrt(1 - phi^2).
    pub first_scale: f64,
    /// Samples per batch: a multiple of `STATS_GROUP`.
    pub chunk: usize,
}

impl Kernels {
    /// Kernels of the output kernels `g[r][0..nt]` under the load `load`:
    /// folds the AR(1) filter in, shifts, transforms. Batches of
    /// `BATCH_BYTES` at most. O(r L log L).
    pub fn new(g: &[Vec<f64>], load: &Ar1, nt: usize) -> Self {
        let len = (2 * nt).next_power_of_two().max(LOADS_PER_BLOCK);
        let fft = FftPlanner::new().plan_fft_forward(len);
        let inv = 1.0 / len as f64;
        let spectra = g
            .iter()
            .map(|gr| {
                let mut h = vec![Complex64::new(0.0, 0.0); len];
                let mut c = 0.0;
                for (k, &gk) in gr.iter().take(nt.saturating_sub(1)).enumerate() {
                    c = load.phi * c + load.sigma * gk;
                    h[k + 1] = Complex64::new(c * inv, 0.0);
                }
                fft.process(&mut h);
                h
            })
            .collect();
        let per_sample = 8 * len * (2 + 3 * g.len().max(1));
        let chunk = (BATCH_BYTES / per_sample / STATS_GROUP).max(1) * STATS_GROUP;
        Kernels {
            spectra,
            nt,
            len,
            first_scale: 1.0 / (1.0 - load.phi * load.phi).sqrt(),
            chunk,
        }
    }
}

/// What the convolutions of a run bring back (r outputs, N_t steps).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvolutionSums {
    /// Mean of y over the samples per output and step (r N_t, output-major).
    pub mean: Vec<f64>,
    /// Sum of squared deviations from the mean, the same layout.
    pub m2: Vec<f64>,
    /// max_k |y_k| per sample and output (sample-major).
    pub peaks: Vec<f64>,
    /// y of samples 0..keep (sample, output, step).
    pub histories: Vec<f64>,
}

/// The convolutions on a backend, for samples 0..samples. The default body
/// is the sequential host path (`rustfft`); the CPU backend runs a batch's
/// samples in parallel with Rayon, the CUDA backend on the device with cuFFT.
pub trait ConvolutionKernels: Backend {
    /// Statistics of samples 0..samples and the histories of 0..keep.
    fn convolve(
        &self,
        k: &Kernels,
        seed: u64,
        samples: usize,
        keep: usize,
    ) -> Result<ConvolutionSums> {
        Ok(host_convolve(k, seed, samples, keep, false))
    }
}

/// y[r][k] of one sample, flattened output-major.
fn one_sample(k: &Kernels, seed: u64, s: u64, plans: &Plans) -> Vec<f64> {
    let key = key_from_seed(seed);
    let mut fs = Vec::with_capacity(k.len);
    for b in 0..(k.len / LOADS_PER_BLOCK) as u64 {
        let v = load_block(&key, s, b, k.nt as u64, k.first_scale);
        fs.extend(v.iter().map(|&x| Complex64::new(x, 0.0)));
    }
    plans.0.process(&mut fs);
    let mut out = Vec::with_capacity(k.spectra.len() * k.nt);
    for h in &k.spectra {
        let mut p: Vec<Complex64> = h.iter().zip(&fs).map(|(a, b)| a * b).collect();
        plans.1.process(&mut p);
        out.extend(p[..k.nt].iter().map(|v| v.re));
    }
    out
}

type Plans = (
    std::sync::Arc<dyn rustfft::Fft<f64>>,
    std::sync::Arc<dyn rustfft::Fft<f64>>,
);

/// The host path: batches of `k.chunk` samples, each sample's responses
/// (sequentially or with Rayon), then the statistics by groups in order.
fn host_convolve(
    k: &Kernels,
    seed: u64,
    samples: usize,
    keep: usize,
    parallel: bool,
) -> ConvolutionSums {
    let mut planner = FftPlanner::new();
    let plans: Plans = (
        planner.plan_fft_forward(k.len),
        planner.plan_fft_inverse(k.len),
    );
    let r = k.spectra.len();
    let width = r * k.nt;
    let keep = keep.min(samples);
    let mut sums = ConvolutionSums {
        mean: vec![0.0; width],
        m2: vec![0.0; width],
        peaks: Vec::with_capacity(samples * r),
        histories: Vec::with_capacity(keep * width),
    };
    let mut first = 0;
    while first < samples {
        let count = k.chunk.max(1).min(samples - first);
        let one = |s: usize| one_sample(k, seed, (first + s) as u64, &plans);
        let ys: Vec<Vec<f64>> = if parallel {
            (0..count).into_par_iter().map(one).collect()
        } else {
            (0..count).map(one).collect()
        };
        let column = |c: usize, (mean, m2): (f64, f64)| {
            let mut acc = (mean, m2);
            let mut n = first as f64;
            for g in (0..count).step_by(STATS_GROUP) {
                let size = STATS_GROUP.min(count - g);
                let part = chunk_moments(size, |s| ys[g + s][c]);
                acc = merge_moments(n, acc, size as f64, part);
                n += size as f64;
            }
            acc
        };
        let merged: Vec<(f64, f64)> = if parallel {
            (0..width)
                .into_par_iter()
                .map(|c| column(c, (sums.mean[c], sums.m2[c])))
                .collect()
        } else {
            (0..width)
                .map(|c| column(c, (sums.mean[c], sums.m2[c])))
                .collect()
        };
        for (c, (m, q)) in merged.into_iter().enumerate() {
            sums.mean[c] = m;
            sums.m2[c] = q;
        }
        for (s, y) in ys.iter().enumerate() {
            sums.peaks.extend(y.chunks(k.nt).map(|row| {
                row.iter()
                    .fold(0.0f64, |m, v| if v.abs() > m { v.abs() } else { m })
            }));
            if first + s < keep {
                sums.histories.extend_from_slice(y);
            }
        }
        first += count;
    }
    sums
}

impl ConvolutionKernels for CpuBackend {
    fn convolve(
        &self,
        k: &Kernels,
        seed: u64,
        samples: usize,
        keep: usize,
    ) -> Result<ConvolutionSums> {
        Ok(host_convolve(k, seed, samples, keep, true))
    }
}

/// On the device: loads, cuFFT transforms and statistics
/// (`CudaBackend::uq_convolve`); the bins 0..=L/2 of the kernels' spectra
/// go up (the inputs are real).
#[cfg(feature = "cuda")]
impl ConvolutionKernels for gpuq_cuda::CudaBackend {
    fn convolve(
        &self,
        k: &Kernels,
        seed: u64,
        samples: usize,
        keep: usize,
    ) -> Result<ConvolutionSums> {
        let half = k.len / 2 + 1;
        let spectra: Vec<Complex64> = k
            .spectra
            .iter()
            .flat_map(|h| h[..half].iter().copied())
            .collect();
        let s = self.uq_convolve(&gpuq_cuda::ConvolutionRun {
            spectra: &spectra,
            outputs: k.spectra.len(),
            nt: k.nt,
            len: k.len,
            first_scale: k.first_scale,
            seed,
            samples,
            chunk: k.chunk,
            keep,
        })?;
        Ok(ConvolutionSums {
            mean: s.mean,
            m2: s.m2,
            peaks: s.peaks,
            histories: s.histories,
        })
    }
}

/// Statistics, kept histories and timings of a run.
#[derive(Clone, Debug, Serialize)]
pub struct ConvolutionResult {
    /// Number of samples.
    pub samples: usize,
    /// Time steps N_t.
    pub steps: usize,
    /// Mean response per output and step (r N_t, output-major).
    pub mean: Vec<f64>,
    /// Standard deviation over the samples (divisor samples - 1), the same
    /// layout; zero for fewer than two samples.
    pub std: Vec<f64>,
    /// max_k |y_k| per sample and output (sample-major).
    pub peaks: Vec<f64>,
    /// y of the first `keep` samples (sample, output, step).
    pub histories: Vec<f64>,
    /// Set-up (exponential, kernels, their FFTs) in seconds.
    pub setup_s: f64,
    /// The samples' convolutions and statistics in seconds.
    pub time_s: f64,
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

    /// The kernels of a damped oscillator's displacement (two outputs: the
    /// kernel and half of it) under `load`.
    fn oscillator(load: &Ar1, steps: usize) -> (Vec<Vec<f64>>, Kernels) {
        let g = crate::convolution_model::mode_kernel(6.0, 0.05, 1.0, load.dt, steps);
        let g = vec![g.clone(), g.iter().map(|v| 0.5 * v).collect()];
        let k = Kernels::new(&g, load, steps);
        (g, k)
    }

    const LOAD: Ar1 = Ar1 {
        phi: 0.9,
        sigma: 1.0,
        dt: 0.01,
    };

    #[test]
    fn fft_convolution_equals_the_direct_sum() {
        let steps = 300;
        let (g, k) = oscillator(&LOAD, steps);
        let r = CpuBackend::new().convolve(&k, 5, 3, 3).unwrap();
        let scale = r.histories.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(scale > 0.0);
        for s in 0..3 {
            let f = ar1_sample(&LOAD, 5, s, steps);
            for (o, go) in g.iter().enumerate() {
                let base = (s as usize * 2 + o) * steps;
                let mut peak = 0.0f64;
                for step in 0..steps {
                    let y: f64 = (0..step).map(|m| go[step - 1 - m] * f[m]).sum();
                    let e = (r.histories[base + step] - y).abs();
                    assert!(e <= 1e-10 * scale, "sample {s} output {o} step {step}: {e}");
                    peak = peak.max(y.abs());
                }
                assert!((r.peaks[s as usize * 2 + o] - peak).abs() <= 1e-10 * scale);
            }
        }
        // The default (sequential) body gives the same numbers as Rayon.
        let seq = Sequential.convolve(&k, 5, 3, 3).unwrap();
        assert_eq!(seq, r);
    }

    #[test]
    fn statistics_over_batches_equal_those_of_the_histories() {
        let steps = 100;
        let (_, mut k) = oscillator(&LOAD, steps);
        let samples = 150;
        let one_batch = CpuBackend::new().convolve(&k, 2, samples, samples).unwrap();
        // Batches of one group: the same groups folded in the same order.
        k.chunk = STATS_GROUP;
        let batched = CpuBackend::new().convolve(&k, 2, samples, samples).unwrap();
        assert_eq!(batched.mean, one_batch.mean);
        assert_eq!(batched.m2, one_batch.m2);
        assert_eq!(batched.histories, one_batch.histories);
        let width = 2 * steps;
        for c in 0..width {
            let v: Vec<f64> = (0..samples)
                .map(|s| one_batch.histories[s * width + c])
                .collect();
            let mean = v.iter().sum::<f64>() / samples as f64;
            let m2: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
            let tol = 1e-12 * (1.0 + m2);
            assert!((one_batch.mean[c] - mean).abs() <= 1e-12 * (1.0 + mean.abs()));
            assert!(
                (one_batch.m2[c] - m2).abs() <= tol,
                "{c}: {} vs {m2}",
                one_batch.m2[c]
            );
        }
        // The final state's spread is positive; the first step is zero up to
        // the transforms' rounding.
        let spread = one_batch.m2[steps - 1];
        assert!(spread > 0.0);
        assert!(one_batch.m2[0] <= 1e-20 * spread, "{}", one_batch.m2[0]);
    }

    #[derive(Clone)]
    struct Sequential;
    crate::test_backend::forward_backend!(Sequential);
    impl ConvolutionKernels for Sequential {}
}
