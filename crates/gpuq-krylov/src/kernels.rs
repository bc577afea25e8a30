//! Per-iteration CG steps a backend may fuse.
//!
//! [`CgKernels`]' default methods compose BLAS-1 operations; [`CpuBackend`]
//! overrides them with one pass over memory each (fewer bytes moved per iteration),
//! and keeps the reductions deterministic with the same fixed blocking as its dots
//! ([`gpuq_cpu::reduce::BLOCK`] elements per block, block sums combined pairwise).
//!
//! The module also holds the helpers that the default methods of the other
//! solver-owned kernel traits ([`crate::BicgstabKernels`] and the rest) use to
//! read and write a method's small scalar array on any backend.

use gpuq_core::{check_same_len, Backend, DeviceVector, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
use rayon::prelude::*;

/// Downloads a method's scalar array `sc`, lets `update` change it on the host
/// and uploads the result in its place; returns what `update` returns. The
/// default kernel methods use it for the slot arithmetic: one download and one
/// upload of `sc.len()` scalars (a few dozen bytes, but a round trip and a
/// synchronisation on an asynchronous backend).
pub(crate) fn update_slots<B: Backend, T: Scalar, R>(
    backend: &B,
    sc: &mut B::Vector<T>,
    update: impl FnOnce(&mut [T]) -> R,
) -> Result<R> {
    let mut host = backend.download(sc)?;
    let out = update(&mut host);
    *sc = backend.upload(&host)?;
    Ok(out)
}

/// Uploads a fresh scalar array of `len` zeros after `init` set its slots, in
/// place of `sc`, which must have `len` elements (one upload, no download).
pub(crate) fn start_slots<B: Backend, T: Scalar>(
    backend: &B,
    op: &'static str,
    sc: &mut B::Vector<T>,
    len: usize,
    init: impl FnOnce(&mut [T]),
) -> Result<()> {
    check_same_len(op, len, sc.len())?;
    let mut host = vec![T::zero(); len];
    init(&mut host);
    *sc = backend.upload(&host)?;
    Ok(())
}

/// sum_i |x_i|^2 as the real part of x^H x: with the bits of the sum of
/// squares a fused CPU kernel forms (each term re^2 + im^2), unlike `nrm2`^2.
/// 1 n reads.
pub(crate) fn norm2_squared<B: Backend, T: Scalar>(
    backend: &B,
    x: &B::Vector<T>,
) -> Result<T::Real> {
    Ok(backend.dotc(x, x)?.re())
}

/// The steps of a CG iteration that a backend can fuse.
pub trait CgKernels: Backend {
    /// r = r - alpha q, and returns ||r||^2.
    /// Default: axpy then nrm2 (two passes: 5n element moves); fused: one pass (3n).
    fn cg_update_residual<T: Scalar>(
        &self,
        alpha: T,
        q: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<T::Real> {
        self.axpy(-alpha, q, r)?;
        let n = self.nrm2(r)?;
        Ok(n * n)
    }

    /// x = x + alpha p, then p = z + beta p.
    /// Default: axpy then axpby (two passes: 6n element moves); fused: one pass (5n).
    fn cg_update_xp<T: Scalar>(
        &self,
        alpha: T,
        beta: T,
        z: &Self::Vector<T>,
        p: &mut Self::Vector<T>,
        x: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.axpy(alpha, p, x)?;
        self.axpby(T::one(), z, beta, p)
    }
}

impl CgKernels for CpuBackend {
    fn cg_update_residual<T: Scalar>(
        &self,
        alpha: T,
        q: &CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<T::Real> {
        check_same_len("cg_update_residual", q.len(), r.len())?;
        let q = q.as_slice();
        Ok(self.run("cg_update_residual", || {
            let partials: Vec<T::Real> = r
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(q.par_chunks(BLOCK))
                .map(|(rs, qs)| {
                    for (ri, &qi) in rs.iter_mut().zip(qs) {
                        *ri -= alpha * qi;
                    }
                    lane_sum(rs.len(), |k| rs[k].abs_sqr())
                })
                .collect();
            pairwise_sum(&partials)
        }))
    }

    fn cg_update_xp<T: Scalar>(
        &self,
        alpha: T,
        beta: T,
        z: &CpuVector<T>,
        p: &mut CpuVector<T>,
        x: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("cg_update_xp", z.len(), p.len())?;
        check_same_len("cg_update_xp", z.len(), x.len())?;
        let z = z.as_slice();
        self.run("cg_update_xp", || {
            x.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(p.as_mut_slice().par_chunks_mut(BLOCK))
                .zip(z.par_chunks(BLOCK))
                .for_each(|((xc, pc), zc)| {
                    for ((xi, pi), &zi) in xc.iter_mut().zip(pc.iter_mut()).zip(zc) {
                        *xi += alpha * *pi;
                        *pi = zi + beta * *pi;
                    }
                })
        });
        Ok(())
    }
}

/// The CUDA backend runs each step as one fused kernel (see
/// `CudaBackend::cg_update_residual` and `CudaBackend::cg_update_xp`).
#[cfg(feature = "cuda")]
impl CgKernels for gpuq_cuda::CudaBackend {
    fn cg_update_residual<T: Scalar>(
        &self,
        alpha: T,
        q: &gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<T::Real> {
        gpuq_cuda::CudaBackend::cg_update_residual(self, alpha, q, r)
    }

    fn cg_update_xp<T: Scalar>(
        &self,
        alpha: T,
        beta: T,
        z: &gpuq_cuda::CudaVector<T>,
        p: &mut gpuq_cuda::CudaVector<T>,
        x: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::cg_update_xp(self, alpha, beta, z, p, x)
    }
}
