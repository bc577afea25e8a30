//! GMRES's Gram-Schmidt steps, which a backend may batch.
//!
//! [`GmresKernels`]' default methods run one BLAS-1 operation per basis vector
//! (a dot product with its download, an axpy). The CPU backend overrides them with
//! one pass over memory each, whose inner products have the same bits as its
//! `dotc` (the same fixed blocking); the CUDA backend with kernels over eight basis
//! vectors at a time and a single download of all the inner products
//! (`CudaBackend::gs_project`, `CudaBackend::gs_subtract`).

use gpuq_core::{check_same_len, Backend, DeviceVector, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
use rayon::prelude::*;

/// The classical Gram-Schmidt steps of GMRES (one or two passes per step).
pub trait GmresKernels: Backend {
    /// `h[j] = basis[j]^H w` for every j; `h` has one entry per basis vector.
    /// Default: one `dotc` per basis vector (k downloads).
    fn gs_project<T: Scalar>(
        &self,
        basis: &[&Self::Vector<T>],
        w: &Self::Vector<T>,
        h: &mut [T],
    ) -> Result<()> {
        check_same_len("gs_project", basis.len(), h.len())?;
        for (hj, v) in h.iter_mut().zip(basis) {
            *hj = self.dotc(v, w)?;
        }
        Ok(())
    }

    /// `w = w - sum_j h[j] basis[j]`. Default: one axpy per basis vector (3 k n
    /// element moves; the batched forms move (k + 2) n).
    fn gs_subtract<T: Scalar>(
        &self,
        basis: &[&Self::Vector<T>],
        h: &[T],
        w: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_same_len("gs_subtract", basis.len(), h.len())?;
        for (v, &hj) in basis.iter().zip(h) {
            self.axpy(-hj, v, w)?;
        }
        Ok(())
    }
}

impl GmresKernels for CpuBackend {
    fn gs_project<T: Scalar>(
        &self,
        basis: &[&CpuVector<T>],
        w: &CpuVector<T>,
        h: &mut [T],
    ) -> Result<()> {
        check_same_len("gs_project", basis.len(), h.len())?;
        for v in basis {
            check_same_len("gs_project", w.len(), v.len())?;
        }
        let (w, k) = (w.as_slice(), basis.len());
        let n = w.len();
        // Vectors read: the k basis vectors and w.
        self.record("gs_project_vectors", k as u64 + 1);
        self.run("gs_project", || {
            // Per block of the fixed blocking, the partial sums of every basis
            // vector; then, per vector, the blocks' sums combined pairwise: the
            // bits of `dotc`.
            let partials: Vec<Vec<T>> = (0..n.div_ceil(BLOCK))
                .into_par_iter()
                .map(|b| {
                    let r = b * BLOCK..((b + 1) * BLOCK).min(n);
                    let ws = &w[r.clone()];
                    basis
                        .iter()
                        .map(|v| {
                            let vs = &v.as_slice()[r.clone()];
                            lane_sum(vs.len(), |i| vs[i].conj() * ws[i])
                        })
                        .collect()
                })
                .collect();
            for (j, hj) in h.iter_mut().enumerate().take(k) {
                let column: Vec<T> = partials.iter().map(|p| p[j]).collect();
                *hj = pairwise_sum(&column);
            }
        });
        Ok(())
    }

    fn gs_subtract<T: Scalar>(
        &self,
        basis: &[&CpuVector<T>],
        h: &[T],
        w: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("gs_subtract", basis.len(), h.len())?;
        for v in basis {
            check_same_len("gs_subtract", w.len(), v.len())?;
        }
        // Vectors moved: the k basis vectors read, w read and written.
        self.record("gs_subtract_vectors", basis.len() as u64 + 2);
        self.run("gs_subtract", || {
            w.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .enumerate()
                .for_each(|(b, wc)| {
                    let start = b * BLOCK;
                    for (v, &hj) in basis.iter().zip(h) {
                        let vs = &v.as_slice()[start..start + wc.len()];
                        for (wi, &vi) in wc.iter_mut().zip(vs) {
                            *wi -= hj * vi;
                        }
                    }
                })
        });
        Ok(())
    }
}

/// The CUDA backend batches eight basis vectors per launch and downloads the
/// inner products once (see `CudaBackend::gs_project`).
#[cfg(feature = "cuda")]
impl GmresKernels for gpuq_cuda::CudaBackend {
    fn gs_project<T: Scalar>(
        &self,
        basis: &[&gpuq_cuda::CudaVector<T>],
        w: &gpuq_cuda::CudaVector<T>,
        h: &mut [T],
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::gs_project(self, basis, w, h)
    }

    fn gs_subtract<T: Scalar>(
        &self,
        basis: &[&gpuq_cuda::CudaVector<T>],
        h: &[T],
        w: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::gs_subtract(self, basis, h, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_core::Complex64;

    /// A backend with only the default (per-vector) steps, to compare against.
    struct Plain<'a>(&'a CpuBackend);

    fn vectors(n: usize, k: usize) -> Vec<Vec<Complex64>> {
        (0..k)
            .map(|j| {
                (0..n)
                    .map(|i| {
                        let t = (i * 7 + j * 13) as f64;
                        Complex64::new((0.37 * t).sin(), (0.11 * t + j as f64).cos())
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn batched_steps_match_the_per_vector_ones() {
        let cpu = CpuBackend::new();
        let plain = Plain(&cpu);
        for (n, k) in [(0, 3), (1, 1), (37, 9), (BLOCK + 5, 4), (3 * BLOCK, 17)] {
            let vs = vectors(n, k + 1);
            let basis: Vec<CpuVector<Complex64>> =
                vs[..k].iter().map(|v| cpu.upload(v).unwrap()).collect();
            let refs: Vec<&CpuVector<Complex64>> = basis.iter().collect();
            let w0 = cpu.upload(&vs[k]).unwrap();
            let mut h = vec![Complex64::default(); k];
            cpu.gs_project(&refs, &w0, &mut h).unwrap();
            // The batched inner products have the bits of dotc.
            for (j, v) in refs.iter().enumerate() {
                assert_eq!(h[j], cpu.dotc(v, &w0).unwrap(), "n {n} k {k} j {j}");
            }
            let mut hp = vec![Complex64::default(); k];
            plain.project(&refs, &w0, &mut hp);
            assert_eq!(h, hp);
            let mut w1 = w0.clone();
            cpu.gs_subtract(&refs, &h, &mut w1).unwrap();
            let mut w2 = w0.clone();
            plain.subtract(&refs, &h, &mut w2);
            for (a, b) in w1.as_slice().iter().zip(w2.as_slice()) {
                assert!((a - b).norm() <= 1e-14 * (1.0 + b.norm()), "{a} vs {b}");
            }
        }
        let w = cpu.upload(&[Complex64::default(); 3]).unwrap();
        let short = cpu.upload(&[Complex64::default(); 2]).unwrap();
        let mut h = [Complex64::default()];
        assert!(cpu.gs_project(&[&short], &w, &mut h).is_err());
        assert!(cpu.gs_project(&[], &w, &mut h).is_err());
    }

    impl Plain<'_> {
        fn project(
            &self,
            b: &[&CpuVector<Complex64>],
            w: &CpuVector<Complex64>,
            h: &mut [Complex64],
        ) {
            for (hj, v) in h.iter_mut().zip(b) {
                *hj = self.0.dotc(v, w).unwrap();
            }
        }
        fn subtract(
            &self,
            b: &[&CpuVector<Complex64>],
            h: &[Complex64],
            w: &mut CpuVector<Complex64>,
        ) {
            for (v, &hj) in b.iter().zip(h) {
                self.0.axpy(-hj, v, w).unwrap();
            }
        }
    }
}
