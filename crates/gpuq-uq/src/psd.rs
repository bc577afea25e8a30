//! The pieces of the response PSD (seed 001's example 2, computed for every
//! model by [`crate::psd_model`], the beam one of them through
//! [`crate::Beam::model`]):
//!
//! * [`Ar1`]: the stationary first-order autoregressive load process and its
//!   two-sided PSD;
//! * [`PsdKernels`]: the full matrices S_xx(w) = S_ff(w) h h^H formed on a
//!   backend from the transfer vectors h (a memory-bound kernel writing
//!   16 n^2 bytes per frequency on CUDA; Rayon rows on the CPU), each entry
//!   by [`gpuq_kernels::uq::psd::cross_entry`] on both backends (exactly
//!   Hermitian), for the cross-PSDs of [`crate::psd_model::model_psd_on`]
//!   and [`crate::psd_model::response_psd_full`].
//!
//! Not done: single precision (`cherk`), and the comparison with cuBLAS
//! `zherk`.

use gpuq_core::{Backend, Complex64, Error, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::scalar::C64;
use gpuq_kernels::uq::psd::cross_entry;
use rayon::prelude::*;
use serde::Serialize;

/// A stationary AR(1) process f_k = phi f_{k-1} + sigma e_k (e_k ~ N(0, 1))
/// sampled every `dt`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ar1 {
    /// Autoregression coefficient, |phi| < 1.
    pub phi: f64,
    /// Standard deviation of the innovations.
    pub sigma: f64,
    /// Sampling interval.
    pub dt: f64,
}

impl Ar1 {
    /// Checks |phi| < 1, sigma >= 0 and dt > 0.
    pub fn validate(&self) -> Result<()> {
        if !(self.phi.abs() < 1.0 && self.sigma >= 0.0 && self.dt > 0.0 && self.dt.is_finite()) {
            return Err(Error::InvalidArgument(
                "AR(1): need |phi| < 1, sigma >= 0, dt > 0".into(),
            ));
        }
        Ok(())
    }

    /// Two-sided PSD at angular frequency w (|w| <= pi / dt):
    /// sigma^2 dt / (2 pi (1 - 2 phi cos(w dt) + phi^2)).
    pub fn psd(&self, w: f64) -> f64 {
        let d = 1.0 - 2.0 * self.phi * (w * self.dt).cos() + self.phi * self.phi;
        self.sigma * self.sigma * self.dt / (2.0 * std::f64::consts::PI * d)
    }

    /// The stationary variance sigma^2 / (1 - phi^2).
    pub fn variance(&self) -> f64 {
        self.sigma * self.sigma / (1.0 - self.phi * self.phi)
    }
}

/// The full S_xx(w) matrices on a backend. The default body forms them on the
/// host and uploads them; the CPU backend forms them with Rayon, the CUDA
/// backend with its rank-1 kernel.
pub trait PsdKernels: Backend {
    /// `out[f n^2 + i n + j] = scale[f] h[f n + i] conj(h[f n + j])` for the
    /// nf = scale.len() frequencies ([`entry`]: exactly Hermitian, the
    /// diagonal exactly scale |h|^2). Traffic: 16 n^2 nf bytes written.
    fn rank1_hermitian(
        &self,
        n: usize,
        scale: &[f64],
        h: &[Complex64],
    ) -> Result<Self::Vector<Complex64>> {
        check(n, scale, h)?;
        let mut out = vec![Complex64::new(0.0, 0.0); scale.len() * n * n];
        for (row, o) in out.chunks_mut(n.max(1)).enumerate() {
            fill_row(n, scale, h, row, o);
        }
        self.upload(&out)
    }
}

impl PsdKernels for CpuBackend {
    fn rank1_hermitian(
        &self,
        n: usize,
        scale: &[f64],
        h: &[Complex64],
    ) -> Result<Self::Vector<Complex64>> {
        check(n, scale, h)?;
        // Each entry written once, in parallel, straight into the new vector
        // (no zero-fill pass first): the same products as `fill_row`.
        let n1 = n.max(1);
        let out: Vec<Complex64> = (0..scale.len() * n * n)
            .into_par_iter()
            .map(|k| {
                let (row, j) = (k / n1, k % n1);
                let f = row / n1;
                entry(h[row], h[f * n + j], scale[f])
            })
            .collect();
        Ok(out.into())
    }
}

#[cfg(feature = "cuda")]
impl PsdKernels for gpuq_cuda::CudaBackend {
    fn rank1_hermitian(
        &self,
        n: usize,
        scale: &[f64],
        h: &[Complex64],
    ) -> Result<Self::Vector<Complex64>> {
        check(n, scale, h)?;
        let s = self.upload(scale)?;
        let hv = self.upload(h)?;
        let mut out = self.zeros::<Complex64>(scale.len() * n * n)?;
        self.uq_rank1_c64(n, &s, &hv, &mut out)?;
        Ok(out)
    }
}

fn check(n: usize, scale: &[f64], h: &[Complex64]) -> Result<()> {
    gpuq_core::check_same_len("rank1_hermitian", scale.len() * n, h.len())
}

/// s h_i conj(h_j) by the kernels' [`cross_entry`] (the device's bits).
pub fn entry(hi: Complex64, hj: Complex64, s: f64) -> Complex64 {
    let c = |z: Complex64| C64 { re: z.re, im: z.im };
    let e = cross_entry(c(hi), c(hj), s);
    Complex64::new(e.re, e.im)
}

/// Row `row` (= f n + i) of the stacked matrices.
fn fill_row(n: usize, scale: &[f64], h: &[Complex64], row: usize, out: &mut [Complex64]) {
    let (f, i) = (row / n, row % n);
    for (o, &hj) in out.iter_mut().zip(&h[f * n..(f + 1) * n]) {
        *o = entry(h[f * n + i], hj, scale[f]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backends_rank1_matrices_are_the_default_bodys() {
        let (n, scale) = (5, [0.5, 2.0, 3.0]);
        let h: Vec<Complex64> = (0..scale.len() * n)
            .map(|k| Complex64::new(1.0 + k as f64, 0.25 * k as f64 - 1.0))
            .collect();
        let cpu = CpuBackend::new().rank1_hermitian(n, &scale, &h).unwrap();
        let seq = Sequential.rank1_hermitian(n, &scale, &h).unwrap();
        assert_eq!(cpu.as_slice(), seq.as_slice());
        let s = cpu.as_slice();
        for (f, &sf) in scale.iter().enumerate() {
            for i in 0..n {
                for j in 0..n {
                    let (hi, hj) = (h[f * n + i], h[f * n + j]);
                    let got = s[f * n * n + i * n + j];
                    let want = hi * sf * hj.conj();
                    assert!((got - want).norm() <= 1e-15 * want.norm().max(1.0));
                    // Exactly Hermitian, the diagonal exactly s |h_i|^2.
                    assert_eq!(got, s[f * n * n + j * n + i].conj());
                    if i == j {
                        assert_eq!(got, Complex64::new(hi.norm_sqr() * sf, 0.0));
                    }
                }
            }
        }
        assert!(CpuBackend::new()
            .rank1_hermitian(n, &scale, &h[1..])
            .is_err());
    }

    /// The default (host) body.
    #[derive(Clone)]
    struct Sequential;
    crate::test_backend::forward_backend!(Sequential);
    impl PsdKernels for Sequential {}
}
