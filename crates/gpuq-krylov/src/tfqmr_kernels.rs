//! TFQMR's steps with the method's scalars kept on the backend.
//!
//! The scalars live in a backend vector `sc` of [`LEN`] slots (names in
//! [`gpuq_kernels::slots::tfqmr`]); the QMR recurrence is kept in squares
//! (theta^2, tau^2), so it needs no square root on the device. Reductions write
//! into `sc`, the steps read their coefficients from it, and the two reductions
//! that feed the recurrence update it themselves: summing sigma moves rho along,
//! summing a half-step's ||w||^2 advances theta^2, tau^2 and eta. So an
//! iteration takes no value from the host and can be recorded and replayed
//! ([`crate::Replay`]); the method downloads `sc` once per iteration. A vanished
//! denominator gives a zero coefficient and is reported by the method after the
//! download. Both backends implement every step natively: the CPU in one Rayon
//! pass each, CUDA in one kernel each plus the reductions' second passes
//! (`CudaBackend::tfqmr_*`); any other backend gets default methods built
//! from its BLAS-1 operations, with the recurrence on the host (a download,
//! and an upload when slots change, of the [`LEN`] scalars per step). Costs
//! are per call for vectors of n elements.

use crate::bicgstab_kernels::{check_slots, guarded_quotient};
use crate::kernels::{norm2_squared, start_slots, update_slots};
use crate::Replay;
use gpuq_core::{Backend, DeviceVector, RealScalar, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
pub use gpuq_kernels::slots::tfqmr::{ETA, LEN, RHO, RHO_NEXT, SIGMA, TAU2, THETA2};
use rayon::prelude::*;

/// The steps of [`crate::tfqmr()`] a backend implements, with the scalars in
/// `sc` (a vector of [`LEN`] elements on the backend).
///
/// Every method has a default built from [`Backend`] operations (so `impl
/// TfqmrKernels for MyBackend {}` runs [`crate::tfqmr()`]), with the CPU's
/// coefficients and recurrence computed on the host copy of `sc`.
pub trait TfqmrKernels: Replay {
    /// The start of a cycle: every slot zero but `sc[TAU2] = tau2`, the
    /// cycle's ||r||^2 (no transfer). Default: one upload.
    fn tfqmr_start<T: Scalar>(&self, sc: &mut Self::Vector<T>, tau2: T::Real) -> Result<()> {
        start_slots(self, "tfqmr_start", sc, LEN, |s| {
            s[TAU2] = T::from_real(tau2)
        })
    }

    /// `sc[SIGMA] = rstar^H v`, then `sc[RHO] = sc[RHO_NEXT]` (2 n reads).
    /// Default: `dotc`, then `sc` downloaded and uploaded.
    fn tfqmr_sigma<T: Scalar>(
        &self,
        rstar: &Self::Vector<T>,
        v: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots("tfqmr_sigma", LEN, sc.len(), &[rstar.len(), v.len()])?;
        let sigma = self.dotc(rstar, v)?;
        update_slots(self, sc, |s| {
            s[SIGMA] = sigma;
            s[RHO] = s[RHO_NEXT];
        })
    }

    /// `u_odd = u_even - alpha v`, alpha = sc[RHO] / sc[SIGMA] (3 n moves).
    /// Default: `sc` downloaded, copy and axpy (5 n moves).
    fn tfqmr_odd<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        u_even: &Self::Vector<T>,
        v: &Self::Vector<T>,
        u_odd: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_odd",
            LEN,
            sc.len(),
            &[u_even.len(), v.len(), u_odd.len()],
        )?;
        let a = alpha(&self.download(sc)?);
        self.copy(u_even, u_odd)?;
        self.axpy(-a, v, u_odd)
    }

    /// One half-step: `w = w - alpha amu` and `md = mu + (theta^2 eta / alpha)
    /// md` with the previous half-step's theta^2 and eta; then, from the new
    /// ||w||^2: theta^2 = ||w||^2 / tau^2, c^2 = 1 / (1 + theta^2), tau^2 =
    /// ||w||^2 c^2 and eta = c^2 alpha into `sc` (6 n moves). Default: `sc`
    /// downloaded, axpy, axpby and `dotc` (7 n moves), the recurrence on the
    /// host, `sc` uploaded.
    fn tfqmr_half<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        amu: &Self::Vector<T>,
        mu: &Self::Vector<T>,
        w: &mut Self::Vector<T>,
        md: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_half",
            LEN,
            sc.len(),
            &[amu.len(), mu.len(), w.len(), md.len()],
        )?;
        let s = self.download(sc)?;
        let a = alpha(&s);
        let coef = guarded_quotient(s[THETA2] * s[ETA], a);
        self.axpy(-a, amu, w)?;
        self.axpby(T::one(), mu, coef, md)?;
        let w2 = norm2_squared(self, w)?;
        update_slots(self, sc, |s| half_step_slots(s, w2, a))
    }

    /// `x = x_in + sc[ETA] md`, or `x = x + sc[ETA] md` when `x_in` is `None`
    /// (3 n moves). Default: `sc` downloaded, (copy and) axpy.
    fn tfqmr_x<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        md: &Self::Vector<T>,
        x_in: Option<&Self::Vector<T>>,
        x: &mut Self::Vector<T>,
    ) -> Result<()> {
        let xl = x_in.map_or(x.len(), |v| v.len());
        check_slots("tfqmr_x", LEN, sc.len(), &[md.len(), x.len(), xl])?;
        let eta = self.download(sc)?[ETA];
        if let Some(x_in) = x_in {
            self.copy(x_in, x)?;
        }
        self.axpy(eta, md, x)
    }

    /// `sc[RHO_NEXT] = rstar^H w` (2 n reads). Default: `dotc`, then `sc`
    /// downloaded and uploaded.
    fn tfqmr_rho<T: Scalar>(
        &self,
        rstar: &Self::Vector<T>,
        w: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots("tfqmr_rho", LEN, sc.len(), &[rstar.len(), w.len()])?;
        let rho = self.dotc(rstar, w)?;
        update_slots(self, sc, |s| s[RHO_NEXT] = rho)
    }

    /// `u_even = w + beta u_odd`, beta = sc[RHO_NEXT] / sc[RHO] (3 n moves).
    /// Default: `sc` downloaded, copy and axpy (5 n moves).
    fn tfqmr_even<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        w: &Self::Vector<T>,
        u_odd: &Self::Vector<T>,
        u_even: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_even",
            LEN,
            sc.len(),
            &[w.len(), u_odd.len(), u_even.len()],
        )?;
        let b = beta(&self.download(sc)?);
        self.copy(w, u_even)?;
        self.axpy(b, u_odd, u_even)
    }

    /// `v = amu_even + beta (amu_odd + beta v)`, beta as in
    /// [`TfqmrKernels::tfqmr_even`] (4 n moves). Default: `sc` downloaded,
    /// two axpby (6 n moves).
    fn tfqmr_v<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        amu_even: &Self::Vector<T>,
        amu_odd: &Self::Vector<T>,
        v: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_v",
            LEN,
            sc.len(),
            &[amu_even.len(), amu_odd.len(), v.len()],
        )?;
        let b = beta(&self.download(sc)?);
        self.axpby(T::one(), amu_odd, b, v)?;
        self.axpby(T::one(), amu_even, b, v)
    }
}

/// The slots a half-step leaves, from its ||w||^2 and alpha (shared by the
/// CPU's step and the default).
fn half_step_slots<T: Scalar>(s: &mut [T], w2: T::Real, a: T) {
    let (theta2, c2) = tfqmr_recurrence(w2, s[TAU2].re());
    s[THETA2] = T::from_real(theta2);
    s[TAU2] = T::from_real(w2 * c2);
    s[ETA] = T::from_real(c2) * a;
}

/// alpha = sc[RHO] / sc[SIGMA] (zero when sigma vanished).
fn alpha<T: Scalar>(sc: &[T]) -> T {
    guarded_quotient(sc[RHO], sc[SIGMA])
}

/// A half-step's QMR recurrence from ||w||^2 and the previous tau^2: (theta^2,
/// c^2) with theta^2 = ||w||^2 / tau^2 and c^2 = 1 / (1 + theta^2); when tau^2
/// is zero (a residual that vanished exactly), (0, 0), so tau^2 and eta stay
/// zero and x stops where it solved the system (the host-side twin of the
/// `tfqmr_half` kernel's).
fn tfqmr_recurrence<R: RealScalar>(w2: R, tau2: R) -> (R, R) {
    if tau2 == R::zero() {
        return (R::zero(), R::zero());
    }
    let theta2 = w2 / tau2;
    (theta2, R::one() / (R::one() + theta2))
}

/// beta = sc[RHO_NEXT] / sc[RHO] (zero when rho vanished).
fn beta<T: Scalar>(sc: &[T]) -> T {
    guarded_quotient(sc[RHO_NEXT], sc[RHO])
}

impl TfqmrKernels for CpuBackend {
    fn tfqmr_start<T: Scalar>(&self, sc: &mut CpuVector<T>, tau2: T::Real) -> Result<()> {
        check_slots("tfqmr_start", LEN, sc.len(), &[])?;
        let s = sc.as_mut_slice();
        s.fill(T::zero());
        s[TAU2] = T::from_real(tau2);
        Ok(())
    }

    fn tfqmr_sigma<T: Scalar>(
        &self,
        rstar: &CpuVector<T>,
        v: &CpuVector<T>,
        sc: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots("tfqmr_sigma", LEN, sc.len(), &[rstar.len(), v.len()])?;
        let sigma = self.dotc(rstar, v)?;
        let s = sc.as_mut_slice();
        s[SIGMA] = sigma;
        s[RHO] = s[RHO_NEXT];
        Ok(())
    }

    fn tfqmr_odd<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        u_even: &CpuVector<T>,
        v: &CpuVector<T>,
        u_odd: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_odd",
            LEN,
            sc.len(),
            &[u_even.len(), v.len(), u_odd.len()],
        )?;
        let a = alpha(sc.as_slice());
        let (ue, v) = (u_even.as_slice(), v.as_slice());
        self.run("tfqmr_odd", || {
            u_odd
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(ue.par_chunks(BLOCK).zip(v.par_chunks(BLOCK)))
                .for_each(|(uo, (ue, vc))| {
                    for ((o, &e), &vi) in uo.iter_mut().zip(ue).zip(vc) {
                        *o = e - a * vi;
                    }
                })
        });
        Ok(())
    }

    fn tfqmr_half<T: Scalar>(
        &self,
        sc: &mut CpuVector<T>,
        amu: &CpuVector<T>,
        mu: &CpuVector<T>,
        w: &mut CpuVector<T>,
        md: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_half",
            LEN,
            sc.len(),
            &[amu.len(), mu.len(), w.len(), md.len()],
        )?;
        let s = sc.as_slice();
        let a = alpha(s);
        let coef = guarded_quotient(s[THETA2] * s[ETA], a);
        let (amu, mu) = (amu.as_slice(), mu.as_slice());
        let w2 = self.run("tfqmr_half", || {
            let partials: Vec<T::Real> = w
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(md.as_mut_slice().par_chunks_mut(BLOCK))
                .enumerate()
                .map(|(c, (wc, dc))| {
                    let base = c * BLOCK;
                    for (k, (wi, di)) in wc.iter_mut().zip(dc.iter_mut()).enumerate() {
                        *wi -= a * amu[base + k];
                        *di = mu[base + k] + coef * *di;
                    }
                    lane_sum(wc.len(), |k| wc[k].abs_sqr())
                })
                .collect();
            pairwise_sum(&partials)
        });
        half_step_slots(sc.as_mut_slice(), w2, a);
        Ok(())
    }

    fn tfqmr_x<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        md: &CpuVector<T>,
        x_in: Option<&CpuVector<T>>,
        x: &mut CpuVector<T>,
    ) -> Result<()> {
        let xl = x_in.map_or(x.len(), |v| v.len());
        check_slots("tfqmr_x", LEN, sc.len(), &[md.len(), x.len(), xl])?;
        let eta = sc.as_slice()[ETA];
        let (md, x_in) = (md.as_slice(), x_in.map(|v| v.as_slice()));
        self.run("tfqmr_x", || {
            x.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .enumerate()
                .for_each(|(c, xc)| {
                    let base = c * BLOCK;
                    for (k, xi) in xc.iter_mut().enumerate() {
                        let from = x_in.map_or(*xi, |v| v[base + k]);
                        *xi = from + eta * md[base + k];
                    }
                })
        });
        Ok(())
    }

    fn tfqmr_rho<T: Scalar>(
        &self,
        rstar: &CpuVector<T>,
        w: &CpuVector<T>,
        sc: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots("tfqmr_rho", LEN, sc.len(), &[rstar.len(), w.len()])?;
        sc.as_mut_slice()[RHO_NEXT] = self.dotc(rstar, w)?;
        Ok(())
    }

    fn tfqmr_even<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        w: &CpuVector<T>,
        u_odd: &CpuVector<T>,
        u_even: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_even",
            LEN,
            sc.len(),
            &[w.len(), u_odd.len(), u_even.len()],
        )?;
        let b = beta(sc.as_slice());
        let (w, uo) = (w.as_slice(), u_odd.as_slice());
        self.run("tfqmr_even", || {
            u_even
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(w.par_chunks(BLOCK).zip(uo.par_chunks(BLOCK)))
                .for_each(|(ue, (wc, oc))| {
                    for ((e, &wi), &oi) in ue.iter_mut().zip(wc).zip(oc) {
                        *e = wi + b * oi;
                    }
                })
        });
        Ok(())
    }

    fn tfqmr_v<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        amu_even: &CpuVector<T>,
        amu_odd: &CpuVector<T>,
        v: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots(
            "tfqmr_v",
            LEN,
            sc.len(),
            &[amu_even.len(), amu_odd.len(), v.len()],
        )?;
        let b = beta(sc.as_slice());
        let (ae, ao) = (amu_even.as_slice(), amu_odd.as_slice());
        self.run("tfqmr_v", || {
            v.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(ae.par_chunks(BLOCK).zip(ao.par_chunks(BLOCK)))
                .for_each(|(vc, (ec, oc))| {
                    for ((vi, &e), &o) in vc.iter_mut().zip(ec).zip(oc) {
                        *vi = e + b * (o + b * *vi);
                    }
                })
        });
        Ok(())
    }
}

/// The CUDA backend runs each step as one kernel, the reductions' second passes
/// updating `sc` (see `CudaBackend::tfqmr_sigma` and the others).
#[cfg(feature = "cuda")]
impl TfqmrKernels for gpuq_cuda::CudaBackend {
    fn tfqmr_start<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        tau2: T::Real,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_start(self, sc, tau2)
    }

    fn tfqmr_sigma<T: Scalar>(
        &self,
        rstar: &gpuq_cuda::CudaVector<T>,
        v: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_sigma(self, rstar, v, sc)
    }

    fn tfqmr_odd<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        u_even: &gpuq_cuda::CudaVector<T>,
        v: &gpuq_cuda::CudaVector<T>,
        u_odd: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_odd(self, sc, u_even, v, u_odd)
    }

    fn tfqmr_half<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        amu: &gpuq_cuda::CudaVector<T>,
        mu: &gpuq_cuda::CudaVector<T>,
        w: &mut gpuq_cuda::CudaVector<T>,
        md: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_half(self, sc, amu, mu, w, md)
    }

    fn tfqmr_x<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        md: &gpuq_cuda::CudaVector<T>,
        x_in: Option<&gpuq_cuda::CudaVector<T>>,
        x: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_x(self, sc, md, x_in, x)
    }

    fn tfqmr_rho<T: Scalar>(
        &self,
        rstar: &gpuq_cuda::CudaVector<T>,
        w: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_rho(self, rstar, w, sc)
    }

    fn tfqmr_even<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        w: &gpuq_cuda::CudaVector<T>,
        u_odd: &gpuq_cuda::CudaVector<T>,
        u_even: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_even(self, sc, w, u_odd, u_even)
    }

    fn tfqmr_v<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        amu_even: &gpuq_cuda::CudaVector<T>,
        amu_odd: &gpuq_cuda::CudaVector<T>,
        v: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::tfqmr_v(self, sc, amu_even, amu_odd, v)
    }
}
