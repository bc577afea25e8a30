//! The random-load samples of the static response through its adjoints: each
//! output is linear in the sample's normals, `u_o(s) = a_o + sum_k c_o[k] z_k(s)`
//! (z(s) the normals of sample s's Monte Carlo stream, c_o the adjoint's
//! weights on the load factor's columns, then on the loads per DOF), formed on
//! a backend a ChaCha8 block of 16 normals at a time
//! ([`gpuq_kernels::uq::linear`]): on the CPU the samples in parallel, on
//! CUDA a warp per 32 blocks of a sample, so a load per DOF (10^6 normals per
//! sample on a 10^6-DOF model) is drawn where it is summed.

use gpuq_core::{Backend, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::linear::{block_dot, block_normals, BLOCK_NORMALS};
use rayon::prelude::*;

/// Linear outputs of Monte Carlo samples on a backend.
pub trait LinearSampleKernels: Backend {
    /// Samples `first .. first + count` of `u_o(s) = base[o] + sum_k
    /// coef[o][k] z_k(s)`, z(s) the normals of stream s under
    /// `key_from_seed(seed)` (every `coef[o]` of one length), sample-major
    /// (count x outputs). Default: on the host, the samples in parallel, each
    /// one's blocks in order. O(count outputs len) and a ChaCha8 block per 16
    /// normals.
    fn linear_samples(
        &self,
        seed: u64,
        first: u64,
        count: usize,
        base: &[f64],
        coef: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        Ok(host_samples(seed, first, count, base, coef))
    }
}

/// [`LinearSampleKernels::linear_samples`] on the host.
fn host_samples(seed: u64, first: u64, count: usize, base: &[f64], coef: &[Vec<f64>]) -> Vec<f64> {
    let key = key_from_seed(seed);
    let len = coef.first().map_or(0, Vec::len);
    let blocks = len.div_ceil(BLOCK_NORMALS) as u64;
    (0..count)
        .into_par_iter()
        .flat_map_iter(|t| {
            let mut u = base.to_vec();
            for c in 0..blocks {
                let z = block_normals(&key, first + t as u64, c);
                for (uo, co) in u.iter_mut().zip(coef) {
                    *uo += block_dot(&z, c, len, |k| co[k]);
                }
            }
            u
        })
        .collect()
}

impl LinearSampleKernels for CpuBackend {}

/// One launch of `uq_linear_samples` ([`gpuq_cuda::CudaBackend::uq_linear_samples`]):
/// the weights uploaded (8 bytes per output and normal), the samples' values
/// back (8 bytes per output and sample).
#[cfg(feature = "cuda")]
impl LinearSampleKernels for gpuq_cuda::CudaBackend {
    fn linear_samples(
        &self,
        seed: u64,
        first: u64,
        count: usize,
        base: &[f64],
        coef: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        let len = coef.first().map_or(0, Vec::len);
        if len == 0 || coef.is_empty() {
            return Ok(host_samples(seed, first, count, base, coef));
        }
        let flat: Vec<f64> = coef.iter().flatten().copied().collect();
        gpuq_core::check_same_len("linear_samples: coef", coef.len() * len, flat.len())?;
        let c = self.upload(&flat)?;
        let start: Vec<f64> = (0..count).flat_map(|_| base.iter().copied()).collect();
        let mut out = self.upload(&start)?;
        self.uq_linear_samples(seed, first, count, len, &c, &mut out)?;
        self.download(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_kernels::uq::gauss::NormalStream;

    #[test]
    fn the_samples_are_the_streams_normals_weighted() {
        // 37 normals per sample (a partial last block), two outputs.
        let coef: Vec<Vec<f64>> = (0..2)
            .map(|o| (0..37).map(|k| 1.0 + (o * 37 + k) as f64 * 0.01).collect())
            .collect();
        let base = [0.5, -2.0];
        let got = CpuBackend::new()
            .linear_samples(9, 100, 5, &base, &coef)
            .unwrap();
        for t in 0..5 {
            let mut z = NormalStream::<f64>::new(key_from_seed(9), 100 + t as u64);
            let normals: Vec<f64> = (0..37).map(|_| z.next_normal()).collect();
            for o in 0..2 {
                let want = base[o]
                    + coef[o]
                        .iter()
                        .zip(&normals)
                        .map(|(c, z)| c * z)
                        .sum::<f64>();
                let g = got[t * 2 + o];
                assert!(
                    (g - want).abs() <= 1e-13 * want.abs().max(1.0),
                    "{t} {o}: {g} vs {want}"
                );
            }
        }
    }
}
