//! BiCGSTAB's steps with the method's scalars kept on the backend.
//!
//! The scalars live in a backend vector `sc` of [`LEN`] slots (names in
//! [`gpuq_kernels::slots::bicgstab`]): reductions write into it and the step
//! kernels read their coefficients from it, so on a GPU no scalar crosses the bus
//! inside an iteration; the method downloads `sc` once per iteration for its
//! stopping and breakdown tests. A vanished denominator gives a zero coefficient
//! (the vectors stay as they were) and is reported by the method after the
//! download. Both backends implement every step natively: the CPU in one Rayon
//! pass each, CUDA in one kernel each (`CudaBackend::bicgstab_*`). Because no
//! step takes a per-iteration value from the host, an iteration's launches can be
//! recorded once and replayed ([`crate::Replay`]: a CUDA graph).

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
pub trait BicgstabKernels: Replay {
    /// `sc[slot] = x^H y` (2 n reads).
    fn dotc_to_slot<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        y: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
        slot: usize,
    ) -> Result<()>;

    /// `sc[TS] = t^H s` and `sc[TT] = ||t||^2` (zero imaginary part), in one
    /// sweep (2 n reads).
    fn bicgstab_tt<T: Scalar>(
        &self,
        t: &Self::Vector<T>,
        s: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
    ) -> Result<()>;

    /// p = r when `first`, else p = r + beta (p - omega v) with the previous
    /// iteration's omega = sc[TS] / sc[TT] and beta = sc[RHO] sc[TT] /
    /// (sc[R0V] sc[TS]). 4 n element moves.
    fn bicgstab_p<T: Scalar>(
        &self,
        first: bool,
        sc: &Self::Vector<T>,
        r: &Self::Vector<T>,
        v: &Self::Vector<T>,
        p: &mut Self::Vector<T>,
    ) -> Result<()>;

    /// s = r - alpha v in place of r, alpha = sc[RHO] / sc[R0V]; sc[SNORM2] =
    /// ||s||^2. 3 n element moves.
    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        v: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()>;

    /// x = x + alpha phat + omega shat and r = s - omega t (r holds s; `shat`
    /// `None` means s itself), alpha = sc[RHO] / sc[R0V], omega = sc[TS] / sc[TT]
    /// or zero when sc[SNORM2] <= `target2`; then, of the new r, sc[RHO] =
    /// r0^H r and sc[RNORM2] = ||r||^2, in the same sweep. 8 n element moves (7
    /// without shat).
    #[allow(clippy::too_many_arguments)]
    fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        target2: T::Real,
        phat: &Self::Vector<T>,
        shat: Option<&Self::Vector<T>>,
        t: &Self::Vector<T>,
        r0: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()>;
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
        // Per block, both sums; then each combined pairwise (t^H s has the bits
        // of dotc).
        let (ts, tt) = self.run("bicgstab_tt", || {
            let partials: Vec<(T, T::Real)> = t
                .par_chunks(BLOCK)
                .zip(s.par_chunks(BLOCK))
                .map(|(tc, sc)| {
                    (
                        lane_sum(tc.len(), |i| tc[i].conj() * sc[i]),
                        lane_sum(tc.len(), |i| tc[i].abs_sqr()),
                    )
                })
                .collect();
            let (ts, tt): (Vec<T>, Vec<T::Real>) = partials.into_iter().unzip();
            (pairwise_sum(&ts), pairwise_sum(&tt))
        });
        let out = sc.as_mut_slice();
        out[TS] = ts;
        out[TT] = T::from_real(tt);
        Ok(())
    }

    fn bicgstab_p<T: Scalar>(
        &self,
        first: bool,
        sc: &CpuVector<T>,
        r: &CpuVector<T>,
        v: &CpuVector<T>,
        p: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_p", LEN, sc.len())?;
        check_same_len("bicgstab_p", r.len(), v.len())?;
        check_same_len("bicgstab_p", r.len(), p.len())?;
        let s = sc.as_slice();
        let omega = guarded_quotient(s[TS], s[TT]);
        let beta = guarded_quotient(s[RHO] * s[TT], s[R0V] * s[TS]);
        let (r, v) = (r.as_slice(), v.as_slice());
        self.run("bicgstab_p", || {
            p.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(r.par_chunks(BLOCK).zip(v.par_chunks(BLOCK)))
                .for_each(|(pc, (rc, vc))| {
                    for ((pi, &ri), &vi) in pc.iter_mut().zip(rc).zip(vc) {
                        *pi = if first {
                            ri
                        } else {
                            ri + beta * (*pi - omega * vi)
                        };
                    }
                })
        });
        Ok(())
    }

    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &mut CpuVector<T>,
        v: &CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_s", LEN, sc.len())?;
        check_same_len("bicgstab_s", v.len(), r.len())?;
        let alpha = guarded_quotient(sc.as_slice()[RHO], sc.as_slice()[R0V]);
        let v = v.as_slice();
        let s2 = self.run("bicgstab_s", || {
            let partials: Vec<T::Real> = r
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(v.par_chunks(BLOCK))
                .map(|(rc, vc)| {
                    for (ri, &vi) in rc.iter_mut().zip(vc) {
                        *ri -= alpha * vi;
                    }
                    lane_sum(rc.len(), |k| rc[k].abs_sqr())
                })
                .collect();
            pairwise_sum(&partials)
        });
        sc.as_mut_slice()[SNORM2] = T::from_real(s2);
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
        x: &mut CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("bicgstab_xr", LEN, sc.len())?;
        for len in [
            phat.len(),
            t.len(),
            r0.len(),
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
        let (phat, t, r0) = (phat.as_slice(), t.as_slice(), r0.as_slice());
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
                        *xi += alpha * phat[i] + omega * shi;
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
        first: bool,
        sc: &gpuq_cuda::CudaVector<T>,
        r: &gpuq_cuda::CudaVector<T>,
        v: &gpuq_cuda::CudaVector<T>,
        p: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_p(self, first, sc, r, v, p)
    }

    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        v: &gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_s(self, sc, v, r)
    }

    fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        target2: T::Real,
        phat: &gpuq_cuda::CudaVector<T>,
        shat: Option<&gpuq_cuda::CudaVector<T>>,
        t: &gpuq_cuda::CudaVector<T>,
        r0: &gpuq_cuda::CudaVector<T>,
        x: &mut gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstab_xr(self, sc, target2, phat, shat, t, r0, x, r)
    }
}
