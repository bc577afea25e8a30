//! GMRES's Gram-Schmidt passes, which a backend may batch.
//!
//! [`GmresKernels::gs_pass`]'s default runs one BLAS-1 operation per basis vector
//! (a dot product with its download, an axpy) and two norms. The CPU backend
//! overrides it with one pass over memory for the inner products and ||w|| (whose
//! inner products have the same bits as its `dotc`: the same fixed blocking) and
//! one for the subtraction and the new ||w||; the CUDA backend with four launches
//! over the whole basis and a single download (`CudaBackend::gs_pass`).

use gpuq_core::{check_same_len, Backend, DeviceVector, Error, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, norm_from_squares, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
use rayon::prelude::*;

/// Errors unless `h` has `used` entries and `basis` at least `used` vectors.
fn check_pass(basis_len: usize, used: usize, h_len: usize) -> Result<()> {
    check_same_len("gs_pass", used, h_len)?;
    if used > basis_len {
        return Err(Error::InvalidArgument(format!(
            "gs_pass: {used} basis vectors used of {basis_len}"
        )));
    }
    Ok(())
}

/// The classical Gram-Schmidt pass of GMRES (one or two per step).
pub trait GmresKernels: Backend {
    /// One classical Gram-Schmidt pass of `w` against the first `used` vectors of
    /// `basis`: `h[j] = basis[j]^H w` for j < used, then `w = w - sum_j h[j]
    /// basis[j]`. Returns `(||w|| before, ||w|| after)`.
    ///
    /// `basis` may hold more vectors than `used` (a backend may cache its
    /// addresses when it is the same every call). Default: `used` dot products
    /// (each a download), `used` axpys and two norms, 5 used + 2 vectors moved;
    /// the batched forms move about 2 used + 3.
    fn gs_pass<T: Scalar>(
        &self,
        basis: &[&Self::Vector<T>],
        used: usize,
        w: &mut Self::Vector<T>,
        h: &mut [T],
    ) -> Result<(T::Real, T::Real)> {
        per_vector_pass(self, basis, used, w, h)
    }
}

/// [`GmresKernels::gs_pass`] by one BLAS-1 operation per basis vector: the
/// default for backends without a batched form.
fn per_vector_pass<B: Backend, T: Scalar>(
    backend: &B,
    basis: &[&B::Vector<T>],
    used: usize,
    w: &mut B::Vector<T>,
    h: &mut [T],
) -> Result<(T::Real, T::Real)> {
    check_pass(basis.len(), used, h.len())?;
    let before = backend.nrm2(w)?;
    for (hj, v) in h.iter_mut().zip(basis) {
        *hj = backend.dotc(v, w)?;
    }
    for (v, &hj) in basis.iter().zip(h.iter()) {
        backend.axpy(-hj, v, w)?;
    }
    Ok((before, backend.nrm2(w)?))
}

impl GmresKernels for CpuBackend {
    fn gs_pass<T: Scalar>(
        &self,
        basis: &[&CpuVector<T>],
        used: usize,
        w: &mut CpuVector<T>,
        h: &mut [T],
    ) -> Result<(T::Real, T::Real)> {
        check_pass(basis.len(), used, h.len())?;
        for v in basis {
            check_same_len("gs_pass", w.len(), v.len())?;
        }
        let basis = &basis[..used];
        let n = w.len();
        // Vectors read: the basis vectors and w; then the basis read, w read and
        // written.
        self.record("gs_project_vectors", used as u64 + 1);
        self.record("gs_subtract_vectors", used as u64 + 2);
        let norms = self.run("gs_pass", || {
            // Per block of the fixed blocking, the partial sums of every basis
            // vector and of |w|^2; then, per value, the blocks' sums combined
            // pairwise: the bits of `dotc`.
            let ws = w.as_slice();
            let partials: Vec<Vec<T>> = (0..n.div_ceil(BLOCK))
                .into_par_iter()
                .map(|b| {
                    let r = b * BLOCK..((b + 1) * BLOCK).min(n);
                    let wb = &ws[r.clone()];
                    basis
                        .iter()
                        .map(|v| v.as_slice())
                        .chain(std::iter::once(ws))
                        .map(|v| {
                            let vb = &v[r.clone()];
                            lane_sum(vb.len(), |i| vb[i].conj() * wb[i])
                        })
                        .collect()
                })
                .collect();
            let column =
                |j: usize| pairwise_sum(&partials.iter().map(|p| p[j]).collect::<Vec<T>>());
            for (j, hj) in h.iter_mut().enumerate() {
                *hj = column(j);
            }
            let before = norm_from_squares(ws, column(used).re());
            let h = &*h;
            let squares: Vec<T::Real> = w
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .enumerate()
                .map(|(b, wc)| {
                    let start = b * BLOCK;
                    for (v, &hj) in basis.iter().zip(h) {
                        let vs = &v.as_slice()[start..start + wc.len()];
                        for (wi, &vi) in wc.iter_mut().zip(vs.iter()) {
                            *wi -= hj * vi;
                        }
                    }
                    lane_sum(wc.len(), |i| wc[i].abs_sqr())
                })
                .collect();
            (
                before,
                norm_from_squares(w.as_slice(), pairwise_sum(&squares)),
            )
        });
        Ok(norms)
    }
}

/// The CUDA backend: four launches over the whole basis and one download per
/// pass (see `CudaBackend::gs_pass`).
#[cfg(feature = "cuda")]
impl GmresKernels for gpuq_cuda::CudaBackend {
    fn gs_pass<T: Scalar>(
        &self,
        basis: &[&gpuq_cuda::CudaVector<T>],
        used: usize,
        w: &mut gpuq_cuda::CudaVector<T>,
        h: &mut [T],
    ) -> Result<(T::Real, T::Real)> {
        gpuq_cuda::CudaBackend::gs_pass(self, basis, used, w, h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_core::Complex64;

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
    fn batched_pass_matches_the_per_vector_one() {
        let cpu = CpuBackend::new();
        for (n, k) in [(0, 3), (1, 1), (37, 9), (BLOCK + 5, 4), (3 * BLOCK, 17)] {
            let vs = vectors(n, k + 2);
            let basis: Vec<CpuVector<Complex64>> =
                vs[..k + 1].iter().map(|v| cpu.upload(v).unwrap()).collect();
            let refs: Vec<&CpuVector<Complex64>> = basis.iter().collect();
            let w0 = cpu.upload(&vs[k + 1]).unwrap();
            // Only the first k of the k + 1 vectors are used.
            let (mut w1, mut h1) = (w0.clone(), vec![Complex64::default(); k]);
            let (b1, a1) = cpu.gs_pass(&refs, k, &mut w1, &mut h1).unwrap();
            // The batched inner products have the bits of dotc.
            for (j, v) in refs.iter().take(k).enumerate() {
                assert_eq!(h1[j], cpu.dotc(v, &w0).unwrap(), "n {n} k {k} j {j}");
            }
            let (mut w2, mut h2) = (w0.clone(), vec![Complex64::default(); k]);
            let (b2, a2) = per_vector_pass(&cpu, &refs, k, &mut w2, &mut h2).unwrap();
            assert_eq!(h1, h2);
            for (a, b) in w1.as_slice().iter().zip(w2.as_slice()) {
                assert!((a - b).norm() <= 1e-14 * (1.0 + b.norm()), "{a} vs {b}");
            }
            for (x, y) in [(b1, b2), (a1, a2)] {
                assert!((x - y).abs() <= 1e-14 * (1.0 + y), "{x} vs {y}");
            }
            assert!((b1 - cpu.nrm2(&w0).unwrap()).abs() <= 1e-14 * (1.0 + b1));
            assert!((a1 - cpu.nrm2(&w1).unwrap()).abs() <= 1e-14 * (1.0 + a1));
        }
        // Norms far outside the range of their squares stay accurate.
        for scale in [1e-200, 1e200] {
            let v = cpu
                .upload(&[Complex64::new(1.0, 0.0), Complex64::default()])
                .unwrap();
            let mut w = cpu
                .upload(&[
                    Complex64::new(3.0 * scale, 0.0),
                    Complex64::new(0.0, 4.0 * scale),
                ])
                .unwrap();
            let mut h = [Complex64::default()];
            let (before, after) = cpu.gs_pass(&[&v], 1, &mut w, &mut h).unwrap();
            assert!((before / (5.0 * scale) - 1.0).abs() < 1e-15, "{before}");
            assert!((after / (4.0 * scale) - 1.0).abs() < 1e-15, "{after}");
        }
        let mut w = cpu.upload(&[Complex64::default(); 3]).unwrap();
        let short = cpu.upload(&[Complex64::default(); 2]).unwrap();
        let mut h = [Complex64::default()];
        assert!(cpu.gs_pass(&[&short], 1, &mut w, &mut h).is_err());
        assert!(cpu.gs_pass(&[], 1, &mut w, &mut h).is_err());
        assert!(cpu.gs_pass(&[&w.clone()], 0, &mut w, &mut h).is_err());
    }
}
