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

use crate::bicgstab_kernels::{guarded_quotient, Scaled};
use crate::Replay;
use gpuq_core::num_traits::Zero;
use gpuq_core::{check_same_len, Backend, DeviceVector, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
pub use gpuq_kernels::slots::cg::{LEN as CG_LEN, PQ, RHO, RNORM2};
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

/// CG's step length `rho / pq`, or zero unless `pq` = p^H A p has a
/// positive real part and the quotient is finite (the host-side twin of
/// `gpuq_kernels::scalar::cg_alpha`).
pub fn cg_alpha<T: Scalar>(rho: T, pq: T) -> T {
    if pq.re() > T::Real::zero() {
        guarded_quotient(rho, pq)
    } else {
        T::zero()
    }
}

/// The rho slot CG's iteration writes when it reads `rho` (the other of
/// [`RHO`]).
pub fn cg_next_slot(rho: usize) -> usize {
    RHO[0] + RHO[1] - rho
}

/// Errors unless `sc` has CG's [`CG_LEN`] slots and `rho` is one of [`RHO`].
fn check_cg_slots(op: &'static str, sc_len: usize, rho: usize) -> Result<()> {
    check_same_len(op, CG_LEN, sc_len)?;
    if !RHO.contains(&rho) {
        return Err(gpuq_core::Error::InvalidArgument(format!(
            "{op}: slot {rho} is not one of CG's rho slots {RHO:?}"
        )));
    }
    Ok(())
}

/// The steps of a CG iteration that a backend can fuse: with the scalars on
/// the host ([`CgKernels::cg_update_residual`], [`CgKernels::cg_update_xp`]),
/// and with them in a scalar array `sc` of [`CG_LEN`] slots on the backend
/// ([`CgKernels::cg_dot_to_slot`], [`CgKernels::cg_residual_slots`],
/// [`CgKernels::cg_xp_slots`]: the kernels read alpha and beta from `sc`, so
/// an iteration's launches can be recorded and replayed and the host reads
/// the scalars one iteration late, see [`crate::cg()`]). The slot methods'
/// defaults download and upload `sc` (a synchronisation each); the CUDA
/// backend runs each as one kernel.
pub trait CgKernels: Replay {
    /// `sc[slot] = x^H y` (2 n reads). Default: `dotc`, then `sc` downloaded
    /// and uploaded.
    fn cg_dot_to_slot<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        y: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
        slot: usize,
    ) -> Result<()> {
        check_same_len("cg_dot_to_slot", CG_LEN, sc.len())?;
        if slot >= CG_LEN {
            return Err(gpuq_core::Error::InvalidArgument(format!(
                "cg_dot_to_slot: slot {slot} is outside the {CG_LEN}-slot scalar array"
            )));
        }
        let v = self.dotc(x, y)?;
        update_slots(self, sc, |s| s[slot] = v)
    }

    /// r = r - alpha q with alpha = [`cg_alpha`]`(sc[rho], sc[PQ])` and, with
    /// `scaled = (d, z)`, z = d ⊙ r (a diagonal preconditioner's M r); then
    /// `sc[RNORM2]` = ||r||^2 and `sc[next]` = r^H z (||r||^2 unscaled),
    /// `next` = [`cg_next_slot`]`(rho)`. Fused: one pass (3 n element moves,
    /// 5 n scaled). Default: `sc` downloaded, axpy, a norm (and the product
    /// and a dot), `sc` uploaded.
    fn cg_residual_slots<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        rho: usize,
        q: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
        scaled: Scaled<'_, Self::Vector<T>>,
    ) -> Result<()> {
        check_cg_slots("cg_residual_slots", sc.len(), rho)?;
        check_same_len("cg_residual_slots", q.len(), r.len())?;
        let s = self.download(sc)?;
        self.axpy(-cg_alpha(s[rho], s[PQ]), q, r)?;
        let rr = norm2_squared(self, r)?;
        let rz = match scaled {
            Some((d, z)) => {
                self.mul_elementwise(d, r, z)?;
                self.dotc(r, z)?
            }
            None => T::from_real(rr),
        };
        update_slots(self, sc, |out| {
            out[RNORM2] = T::from_real(rr);
            out[cg_next_slot(rho)] = rz;
        })
    }

    /// [`CgKernels::cg_residual_slots`] with no diagonal, before a
    /// preconditioner applied as an operator: r updated, ||r||^2 into
    /// `sc[RNORM2]`; a backend that sums slots over ranks may leave them
    /// unsummed, since [`CgKernels::cg_rz_slots`] follows and sums them with
    /// r^H z in one collective. Default: `cg_residual_slots` unscaled.
    fn cg_residual_before_precond<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        rho: usize,
        q: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.cg_residual_slots(sc, rho, q, r, None)
    }

    /// `sc[next] = r^H z` (z = M r of a preconditioner applied as an
    /// operator), `next` = [`cg_next_slot`]`(rho)`, after
    /// [`CgKernels::cg_residual_before_precond`]; a backend that sums slots
    /// over ranks sums `sc[RNORM2]` and `sc[next]` here, in one collective.
    /// Default: [`CgKernels::cg_dot_to_slot`].
    fn cg_rz_slots<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        rho: usize,
        r: &Self::Vector<T>,
        z: &Self::Vector<T>,
    ) -> Result<()> {
        self.cg_dot_to_slot(r, z, sc, cg_next_slot(rho))
    }

    /// x = x_in + alpha p, then p = z + beta p, alpha as in
    /// [`CgKernels::cg_residual_slots`] and beta = `sc[next] / sc[rho]`
    /// ([`guarded_quotient`]); a zero alpha (a breakdown) leaves x = x_in
    /// even where p is not finite. Fused: one pass (6 n element moves).
    /// Default: `sc` downloaded, copy, axpy, axpby.
    fn cg_xp_slots<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        rho: usize,
        z: &Self::Vector<T>,
        p: &mut Self::Vector<T>,
        x_in: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_cg_slots("cg_xp_slots", sc.len(), rho)?;
        let s = self.download(sc)?;
        let alpha = cg_alpha(s[rho], s[PQ]);
        let beta = guarded_quotient(s[cg_next_slot(rho)], s[rho]);
        self.copy(x_in, x)?;
        if !alpha.is_zero_value() {
            self.axpy(alpha, p, x)?;
        }
        self.axpby(T::one(), z, beta, p)
    }

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

    fn cg_dot_to_slot<T: Scalar>(
        &self,
        x: &gpuq_cuda::CudaVector<T>,
        y: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
        slot: usize,
    ) -> Result<()> {
        check_same_len("cg_dot_to_slot", CG_LEN, sc.len())?;
        gpuq_cuda::CudaBackend::dotc_into(self, x, y, sc, slot)
    }

    fn cg_residual_slots<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        rho: usize,
        q: &gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
        scaled: Scaled<'_, gpuq_cuda::CudaVector<T>>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::cg_residual_slots(self, sc, rho, q, r, scaled)
    }

    fn cg_xp_slots<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        rho: usize,
        z: &gpuq_cuda::CudaVector<T>,
        p: &mut gpuq_cuda::CudaVector<T>,
        x_in: &gpuq_cuda::CudaVector<T>,
        x: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::cg_xp_slots(self, sc, rho, z, p, x_in, x)
    }
}
