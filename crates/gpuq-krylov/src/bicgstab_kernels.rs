//! BiCGSTAB's steps with the method's scalars kept on the backend.
//!
//! The scalars live in a backend vector `sc` of [`LEN`] slots (names in
//! [`gpuq_kernels::slots::bicgstab`]): reductions write into it and the step
//! kernels read their coefficients from it, so on a GPU no scalar crosses the bus
//! inside an iteration; the method downloads `sc` once per iteration for its
//! stopping and breakdown tests. A vanished denominator gives a zero coefficient
//! (the vectors stay as they were) and is reported by the method after the
//! download. Both backends implement every step natively: the CPU in one Rayon
//! pass each, CUDA in one kernel each (`CudaBackend::bicgstab_*`); any other
//! backend gets default methods built from its BLAS-1 operations, which read
//! and write `sc` on the host (a download and an upload of its [`LEN`]
//! scalars per step that touches it). Because no
//! step takes a per-iteration value from the host, an iteration's launches can be
//! recorded once and replayed ([`crate::Replay`]: a CUDA graph).

use crate::kernels::{norm2_squared, update_slots};
use crate::Replay;
use gpuq_core::{check_same_len, Backend, DeviceVector, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
pub use gpuq_kernels::slots::bicgstab::{LEN, R0V, RHO, RNORM2, SNORM2, TS, TT};
use rayon::prelude::*;

/// `num / den`, or zero when `den` vanished or the quotient is not finite (the
/// host-side twin of `gpuq_kernels::scalar::guarded_quotient`).
pub fn guarded_quotient<T: Scalar>(num: T, den: T) -> T {
    let q = num / den;
    if den.is_zero_value() || !q.is_finite_value() {
        T::zero()
    } else {
        q
    }
}

/// Errors unless a method's scalar array has its `len` slots (`sc_len`) and the
/// vectors of a step agree in length (shared by the methods with scalars on the
/// backend).
pub(crate) fn check_slots(
    op: &'static str,
    len: usize,
    sc_len: usize,
    lens: &[usize],
) -> Result<()> {
    check_same_len(op, len, sc_len)?;
    for &l in lens {
        check_same_len(op, lens[0], l)?;
    }
    Ok(())
}

/// A diagonal scaling folded into a step: the diagonal d, and the vector that
/// receives d ⊙ (the step's result).
pub type Scaled<'a, V> = Option<(&'a V, &'a mut V)>;

/// Runs `update(chunk, start)` over the blocks of `out` in parallel and, with
/// `scaled = (d, ds)`, writes ds = d ⊙ out for each block right after it.
fn update_then_scale<T: Scalar>(
    out: &mut [T],
    scaled: Scaled<'_, CpuVector<T>>,
    update: impl Fn(&mut [T], usize) + Sync,
) {
    match scaled {
        Some((d, ds)) => {
            let d = d.as_slice();
            out.par_chunks_mut(BLOCK)
                .zip(ds.as_mut_slice().par_chunks_mut(BLOCK))
                .enumerate()
                .for_each(|(c, (oc, dc))| {
                    update(oc, c * BLOCK);
                    for (k, (di, oi)) in dc.iter_mut().zip(oc.iter()).enumerate() {
                        *di = d[c * BLOCK + k] * *oi;
                    }
                })
        }
        None => out
            .par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(c, oc)| update(oc, c * BLOCK)),
    }
}

/// Errors unless a diagonal scaling's vectors have `n` elements.
fn check_scaled<V: DeviceVector>(
    op: &'static str,
    n: usize,
    scaled: &Option<(&V, &mut V)>,
) -> Result<()> {
    if let Some((d, out)) = scaled {
        check_same_len(op, n, d.len())?;
        check_same_len(op, n, out.len())?;
    }
    Ok(())
}

/// Errors unless `sc` has [`LEN`] elements and `slot` is one of them.
fn check_slot(op: &'static str, sc_len: usize, slot: usize) -> Result<()> {
    check_same_len(op, LEN, sc_len)?;
    if slot >= LEN {
        return Err(gpuq_core::Error::InvalidArgument(format!(
            "{op}: slot {slot} is outside the {LEN}-slot scalar array"
        )));
    }
    Ok(())
}

/// The steps of [`crate::bicgstab()`] a backend implements, with the scalars in
/// `sc` (a vector of [`LEN`] elements on the backend). Costs are per call for
/// vectors of n elements.
///
/// Every method has a default built from [`Backend`] operations (so `impl
/// BicgstabKernels for MyBackend {}` runs [`crate::bicgstab()`]): the same
/// coefficients and guarded quotients as the fused kernels, each vector step
/// as one to three BLAS-1 calls, each reduction as `dotc`, and the slots read
/// and written on the host (one download, and one upload when the step writes
/// slots, of [`LEN`] scalars).
pub trait BicgstabKernels: Replay {
    /// `sc[slot] = x^H y` (2 n reads). Default: `dotc`, then `sc` downloaded
    /// and uploaded.
    fn dotc_to_slot<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        y: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
        slot: usize,
    ) -> Result<()> {
        check_slot("dotc_to_slot", sc.len(), slot)?;
        let v = self.dotc(x, y)?;
        update_slots(self, sc, |s| s[slot] = v)
    }

    /// `sc[TS] = t^H s`, `sc[TT] = ||t||^2` and `sc[SNORM2] = ||s||^2` (zero
    /// imaginary parts), in one sweep (2 n reads). Default: three `dotc`
    /// (4 n reads), then `sc` downloaded and uploaded.
    fn bicgstab_tt<T: Scalar>(
        &self,
        t: &Self::Vector<T>,
        s: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_tt", LEN, sc.len())?;
        check_same_len("bicgstab_tt", t.len(), s.len())?;
        let ts = self.dotc(t, s)?;
        let tt = norm2_squared(self, t)?;
        let ss = norm2_squared(self, s)?;
        update_slots(self, sc, |out| {
            out[TS] = ts;
            out[TT] = T::from_real(tt);
            out[SNORM2] = T::from_real(ss);
        })
    }

    /// p = r + beta (p - omega v) with the previous iteration's omega =
    /// sc[TS] / sc[TT] and beta = sc[RHO] sc[TT] / (sc[R0V] sc[TS]) (both zero
    /// in a fresh scalar array: then p = r when p and v are zero); with
    /// `scaled = (d, dp)` also dp = d ⊙ p (a diagonal preconditioner's M p, in
    /// the same pass). 4 n element moves (6 n scaled). Default: `sc`
    /// downloaded, then axpy, axpby (and the elementwise product): 6 n moves
    /// (9 n scaled).
    fn bicgstab_p<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        r: &Self::Vector<T>,
        v: &Self::Vector<T>,
        p: &mut Self::Vector<T>,
        scaled: Scaled<'_, Self::Vector<T>>,
    ) -> Result<()> {
        check_same_len("bicgstab_p", LEN, sc.len())?;
        check_same_len("bicgstab_p", r.len(), v.len())?;
        check_same_len("bicgstab_p", r.len(), p.len())?;
        check_scaled("bicgstab_p", r.len(), &scaled)?;
        let s = self.download(sc)?;
        let omega = guarded_quotient(s[TS], s[TT]);
        let beta = guarded_quotient(s[RHO] * s[TT], s[R0V] * s[TS]);
        self.axpy(-omega, v, p)?;
        self.axpby(T::one(), r, beta, p)?;
        match scaled {
            Some((d, dp)) => self.mul_elementwise(d, p, dp),
            None => Ok(()),
        }
    }

    /// s = r - alpha v in place of r, alpha = sc[RHO] / sc[R0V]; with `scaled
    /// = (d, ds)` also ds = d ⊙ s. 3 n element moves (5 n scaled). Default:
    /// `sc` downloaded, then axpy (and the elementwise product): 3 n moves
    /// (6 n scaled).
    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        v: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
        scaled: Scaled<'_, Self::Vector<T>>,
    ) -> Result<()> {
        check_same_len("bicgstab_s", LEN, sc.len())?;
        check_same_len("bicgstab_s", v.len(), r.len())?;
        check_scaled("bicgstab_s", r.len(), &scaled)?;
        let s = self.download(sc)?;
        self.axpy(-guarded_quotient(s[RHO], s[R0V]), v, r)?;
        match scaled {
            Some((d, ds)) => self.mul_elementwise(d, r, ds),
            None => Ok(()),
        }
    }

    /// x = x_in + alpha phat + omega shat and r = s - omega t (r holds s;
    /// `shat` `None` means s itself), alpha = sc[RHO] / sc[R0V], omega = sc[TS] /
    /// sc[TT] or zero when sc[SNORM2] <= `target2`; then, of the new r, sc[RHO]
    /// = r0^H r and sc[RNORM2] = ||r||^2, in the same sweep. 8 n element moves
    /// (7 without shat). Default: `sc` downloaded, copy, two axpy for x, one
    /// for r, two `dotc`, `sc` uploaded: 15 n moves.
    #[allow(clippy::too_many_arguments)]
    fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        target2: T::Real,
        phat: &Self::Vector<T>,
        shat: Option<&Self::Vector<T>>,
        t: &Self::Vector<T>,
        r0: &Self::Vector<T>,
        x_in: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_xr", LEN, sc.len())?;
        for len in [
            phat.len(),
            t.len(),
            r0.len(),
            x_in.len(),
            x.len(),
            shat.map_or(r.len(), |s| s.len()),
        ] {
            check_same_len("bicgstab_xr", r.len(), len)?;
        }
        let s = self.download(sc)?;
        let alpha = guarded_quotient(s[RHO], s[R0V]);
        let omega = if s[SNORM2].re() <= target2 {
            T::zero()
        } else {
            guarded_quotient(s[TS], s[TT])
        };
        self.copy(x_in, x)?;
        self.axpy(alpha, phat, x)?;
        // r holds s until it is updated below.
        self.axpy(omega, shat.unwrap_or(r), x)?;
        self.axpy(-omega, t, r)?;
        let rho = self.dotc(r0, r)?;
        let rr = norm2_squared(self, r)?;
        update_slots(self, sc, |out| {
            out[RHO] = rho;
            out[RNORM2] = T::from_real(rr);
        })
    }
}

impl BicgstabKernels for CpuBackend {
    fn dotc_to_slot<T: Scalar>(
        &self,
        x: &CpuVector<T>,
        y: &CpuVector<T>,
        sc: &mut CpuVector<T>,
        slot: usize,
    ) -> Result<()> {
        check_slot("dotc_to_slot", sc.len(), slot)?;
        sc.as_mut_slice()[slot] = self.dotc(x, y)?;
        Ok(())
    }

    fn bicgstab_tt<T: Scalar>(
        &self,
        t: &CpuVector<T>,
        s: &CpuVector<T>,
        sc: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_tt", LEN, sc.len())?;
        check_same_len("bicgstab_tt", t.len(), s.len())?;
        let (t, s) = (t.as_slice(), s.as_slice());
        // Per block, the three sums; then each combined pairwise (t^H s has
        // the bits of dotc).
        let (ts, tt, ss) = self.run("bicgstab_tt", || {
            let partials: Vec<(T, T::Real, T::Real)> = t
                .par_chunks(BLOCK)
                .zip(s.par_chunks(BLOCK))
                .map(|(tc, sc)| {
                    (
                        lane_sum(tc.len(), |i| tc[i].conj() * sc[i]),
                        lane_sum(tc.len(), |i| tc[i].abs_sqr()),
                        lane_sum(sc.len(), |i| sc[i].abs_sqr()),
                    )
                })
                .collect();
            let ts: Vec<T> = partials.iter().map(|p| p.0).collect();
            let tt: Vec<T::Real> = partials.iter().map(|p| p.1).collect();
            let ss: Vec<T::Real> = partials.iter().map(|p| p.2).collect();
            (pairwise_sum(&ts), pairwise_sum(&tt), pairwise_sum(&ss))
        });
        let out = sc.as_mut_slice();
        out[TS] = ts;
        out[TT] = T::from_real(tt);
        out[SNORM2] = T::from_real(ss);
        Ok(())
    }

    fn bicgstab_p<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        r: &CpuVector<T>,
        v: &CpuVector<T>,
        p: &mut CpuVector<T>,
        scaled: Option<(&CpuVector<T>, &mut CpuVector<T>)>,
    ) -> Result<()> {
        check_same_len("bicgstab_p", LEN, sc.len())?;
        check_same_len("bicgstab_p", r.len(), v.len())?;
        check_same_len("bicgstab_p", r.len(), p.len())?;
        check_scaled("bicgstab_p", r.len(), &scaled)?;
        let s = sc.as_slice();
        let omega = guarded_quotient(s[TS], s[TT]);
        let beta = guarded_quotient(s[RHO] * s[TT], s[R0V] * s[TS]);
        let (r, v) = (r.as_slice(), v.as_slice());
        let op = if scaled.is_some() {
            "bicgstab_p_scaled"
        } else {
            "bicgstab_p"
        };
        self.run(op, || {
            update_then_scale(p.as_mut_slice(), scaled, |pc, base| {
                for (k, pi) in pc.iter_mut().enumerate() {
                    *pi = r[base + k] + beta * (*pi - omega * v[base + k]);
                }
            })
        });
        Ok(())
    }

    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        v: &CpuVector<T>,
        r: &mut CpuVector<T>,
        scaled: Option<(&CpuVector<T>, &mut CpuVector<T>)>,
    ) -> Result<()> {
        check_same_len("bicgstab_s", LEN, sc.len())?;
        check_same_len("bicgstab_s", v.len(), r.len())?;
        check_scaled("bicgstab_s", r.len(), &scaled)?;
        let alpha = guarded_quotient(sc.as_slice()[RHO], sc.as_slice()[R0V]);
        let v = v.as_slice();
        let op = if scaled.is_some() {
            "bicgstab_s_scaled"
        } else {
            "bicgstab_s"
        };
        self.run(op, || {
            update_then_scale(r.as_mut_slice(), scaled, |rc, base| {
                for (k, ri) in rc.iter_mut().enumerate() {
                    *ri -= alpha * v[base + k];
                }
            })
        });
        Ok(())
    }

    fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut CpuVector<T>,
        target2: T::Real,
        phat: &CpuVector<T>,
        shat: Option<&CpuVector<T>>,
        t: &CpuVector<T>,
        r0: &CpuVector<T>,
        x_in: &CpuVector<T>,
        x: &mut CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_xr", LEN, sc.len())?;
        for len in [
            phat.len(),
            t.len(),
            r0.len(),
            x_in.len(),
            x.len(),
            shat.map_or(r.len(), |s| s.len()),
        ] {
            check_same_len("bicgstab_xr", r.len(), len)?;
        }
        let s = sc.as_slice();
        let alpha = guarded_quotient(s[RHO], s[R0V]);
        let omega = if s[SNORM2].re() <= target2 {
            T::zero()
        } else {
            guarded_quotient(s[TS], s[TT])
        };
        let (phat, t, r0, x_in) = (
            phat.as_slice(),
            t.as_slice(),
            r0.as_slice(),
            x_in.as_slice(),
        );
        let shat = shat.map(|v| v.as_slice());
        let (rho, rr) = self.run("bicgstab_xr", || {
            let partials: Vec<(T, T::Real)> = x
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(r.as_mut_slice().par_chunks_mut(BLOCK))
                .enumerate()
                .map(|(c, (xc, rc))| {
                    let base = c * BLOCK;
                    for (k, (xi, ri)) in xc.iter_mut().zip(rc.iter_mut()).enumerate() {
                        let i = base + k;
                        let si = *ri;
                        let shi = shat.map_or(si, |sh| sh[i]);
                        *xi = x_in[i] + alpha * phat[i] + omega * shi;
                        *ri = si - omega * t[i];
                    }
                    let r0c = &r0[base..base + rc.len()];
                    (
                        lane_sum(rc.len(), |k| r0c[k].conj() * rc[k]),
                        lane_sum(rc.len(), |k| rc[k].abs_sqr()),
                    )
                })
                .collect();
            let (rho, rr): (Vec<T>, Vec<T::Real>) = partials.into_iter().unzip();
            (pairwise_sum(&rho), pairwise_sum(&rr))
        });
        let out = sc.as_mut_slice();
        out[RHO] = rho;
        out[RNORM2] = T::from_real(rr);
        Ok(())
    }
}

/// The CUDA backend runs each step as one kernel (see `CudaBackend::bicgstab_p`
/// and the others), the reductions' results written straight into `sc`.
#[cfg(feature = "cuda")]
impl BicgstabKernels for gpuq_cuda::CudaBackend {
    fn dotc_to_slot<T: Scalar>(
        &self,
        x: &gpuq_cuda::CudaVector<T>,
        y: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
        slot: usize,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::dotc_to_slot(self, x, y, sc, slot)
    }

    fn bicgstab_tt<T: Scalar>(
        &self,
        t: &gpuq_cuda::CudaVector<T>,
        s: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_tt(self, t, s, sc)
    }

    fn bicgstab_p<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        r: &gpuq_cuda::CudaVector<T>,
        v: &gpuq_cuda::CudaVector<T>,
        p: &mut gpuq_cuda::CudaVector<T>,
        scaled: Option<(&gpuq_cuda::CudaVector<T>, &mut gpuq_cuda::CudaVector<T>)>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_p(self, sc, r, v, p, scaled)
    }

    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        v: &gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
        scaled: Option<(&gpuq_cuda::CudaVector<T>, &mut gpuq_cuda::CudaVector<T>)>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_s(self, sc, v, r, scaled)
    }

    fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        target2: T::Real,
        phat: &gpuq_cuda::CudaVector<T>,
        shat: Option<&gpuq_cuda::CudaVector<T>>,
        t: &gpuq_cuda::CudaVector<T>,
        r0: &gpuq_cuda::CudaVector<T>,
        x_in: &gpuq_cuda::CudaVector<T>,
        x: &mut gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_xr(self, sc, target2, phat, shat, t, r0, x_in, x, r)
    }
}
