//! QMR's steps with the method's scalars kept on the backend.
//!
//! The scalars live in a backend vector `sc` of [`LEN`] slots (names in
//! [`gpuq_kernels::slots::qmr`]). Reductions write into it, the steps read their
//! coefficients from it, and the step that sums xi = ||M^T w~|| also runs the
//! quasi-minimisation's rotation and moves rho and xi along, so an iteration
//! takes no value from the host and can be recorded and replayed
//! ([`crate::Replay`]); the method downloads `sc` once per iteration. A vanished
//! Lanczos quantity (delta, epsilon, beta) or a non-finite rotation zeroes the
//! update's coefficients, so x and r stay as they were, and the method reports
//! the breakdown after the download. Both backends implement every step
//! natively: the CPU in one Rayon pass each, CUDA in one kernel each plus the
//! reductions' second passes (`CudaBackend::qmr_*`); any other backend gets
//! default methods built from its BLAS-1 operations, with the rotation and the
//! coefficients on the host (a download, and an upload when slots change, of
//! the [`LEN`] scalars per step). Costs are per call for vectors of n elements.

use crate::bicgstab_kernels::{check_slots, guarded_quotient};
use crate::kernels::{norm2_squared, start_slots, update_slots};
use crate::Replay;
use gpuq_core::num_traits::Float;
use gpuq_core::{Backend, DeviceVector, RealScalar, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
pub use gpuq_kernels::slots::qmr::{
    CARRY, DELTA, EPS, ETA, GAMMA, LEN, RHO, RHO_NEXT, RNORM2, THETA, XI,
};
use rayon::prelude::*;

/// The steps of [`crate::qmr()`] a backend implements, with the scalars in `sc`
/// (a vector of [`LEN`] elements on the backend).
///
/// Every method has a default built from [`Backend`] operations (so `impl
/// QmrKernels for MyBackend {}` runs [`crate::qmr()`]), with the CPU's
/// coefficients and rotation computed on the host copy of `sc`.
pub trait QmrKernels: Replay {
    /// The start: `sc[RHO] = rho`, `sc[XI] = xi`, gamma = 1, eta = -1, every
    /// other slot zero (no transfer). Default: one upload.
    fn qmr_start<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        rho: T::Real,
        xi: T::Real,
    ) -> Result<()> {
        start_slots(self, "qmr_start", sc, LEN, |s| start_values(s, rho, xi))
    }

    /// v = v~ / rho, w = w~ / xi, z = z / xi (`z` `None`: z is w itself), and
    /// `sc[DELTA] = z^T v` (unconjugated) of the scaled vectors (4 n element
    /// moves, 6 n with z). Default: `sc` downloaded, two or three `scal` and
    /// `dotu`, `sc` uploaded.
    fn qmr_scale<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        v: &mut Self::Vector<T>,
        w: &mut Self::Vector<T>,
        z: Option<&mut Self::Vector<T>>,
    ) -> Result<()> {
        let zl = z.as_ref().map_or(w.len(), |z| z.len());
        check_slots("qmr_scale", LEN, sc.len(), &[v.len(), w.len(), zl])?;
        let s = self.download(sc)?;
        let inv_rho = T::from_real(T::Real::of_f64(1.0) / s[RHO].re());
        let inv_xi = T::from_real(T::Real::of_f64(1.0) / s[XI].re());
        self.scal(inv_rho, v)?;
        self.scal(inv_xi, w)?;
        let delta = match z {
            Some(z) => {
                self.scal(inv_xi, z)?;
                self.dotu(z, v)?
            }
            None => self.dotu(w, v)?,
        };
        update_slots(self, sc, |s| s[DELTA] = delta)
    }

    /// p = y - (xi delta / eps) p and q = z - (rho delta / eps) q, plain copies
    /// while `sc[EPS]` is zero (6 n element moves). Default: `sc` downloaded,
    /// two axpby.
    fn qmr_pq<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        y: &Self::Vector<T>,
        z: &Self::Vector<T>,
        p: &mut Self::Vector<T>,
        q: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots(
            "qmr_pq",
            LEN,
            sc.len(),
            &[y.len(), z.len(), p.len(), q.len()],
        )?;
        let s = self.download(sc)?;
        let cp = guarded_quotient(s[XI] * s[DELTA], s[EPS]);
        let cq = guarded_quotient(s[RHO] * s[DELTA], s[EPS]);
        self.axpby(T::one(), y, -cp, p)?;
        self.axpby(T::one(), z, -cq, q)
    }

    /// `sc[EPS] = q^T ap`, unconjugated (2 n reads). Default: `dotu`, then
    /// `sc` downloaded and uploaded.
    fn qmr_eps<T: Scalar>(
        &self,
        q: &Self::Vector<T>,
        ap: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots("qmr_eps", LEN, sc.len(), &[q.len(), ap.len()])?;
        let eps = self.dotu(q, ap)?;
        update_slots(self, sc, |s| s[EPS] = eps)
    }

    /// v~ = ap - beta v in place of v, beta = eps / delta, and `sc[RHO_NEXT] =
    /// ||v~||` (3 n element moves). Default: `sc` downloaded, axpby and
    /// `dotc` (4 n moves), `sc` uploaded.
    fn qmr_v<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        ap: &Self::Vector<T>,
        v: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots("qmr_v", LEN, sc.len(), &[ap.len(), v.len()])?;
        let b = beta(&self.download(sc)?);
        self.axpby(T::one(), ap, -b, v)?;
        let v2 = norm2_squared(self, v)?;
        update_slots(self, sc, |s| s[RHO_NEXT] = T::from_real(v2.sqrt()))
    }

    /// w~ = atq - beta w in place of w (3 n element moves). Default: `sc`
    /// downloaded, axpby.
    fn qmr_w<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        atq: &Self::Vector<T>,
        w: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots("qmr_w", LEN, sc.len(), &[atq.len(), w.len()])?;
        self.axpby(T::one(), atq, -beta(&self.download(sc)?), w)
    }

    /// xi = ||z|| for the next iteration and the rotation: theta = rho_next /
    /// (gamma_prev |beta|), gamma = 1 / sqrt(1 + theta^2), eta = -eta rho
    /// gamma^2 / (beta gamma_prev^2), carry = (theta_prev gamma)^2 (both zero on
    /// a breakdown; eta stored as computed, also when it overflowed); then rho,
    /// xi, theta and gamma move along (n reads). Default: `nrm2`, then the
    /// rotation on the host between a download and an upload of `sc`.
    fn qmr_rotation<T: Scalar>(&self, z: &Self::Vector<T>, sc: &mut Self::Vector<T>) -> Result<()> {
        check_slots("qmr_rotation", LEN, sc.len(), &[z.len()])?;
        let xi = self.nrm2(z)?;
        update_slots(self, sc, |s| rotation(s, xi))
    }

    /// d = eta p + carry d, s = eta ap + carry s, x = x_in + d, r = r - s (eta
    /// and carry taken as zero when either is not finite), and `sc[RNORM2] =
    /// ||r||^2` (10 n element moves). Default: `sc` downloaded, two axpby,
    /// copy, two axpy and `dotc` (17 n moves), `sc` uploaded.
    #[allow(clippy::too_many_arguments)]
    fn qmr_update<T: Scalar>(
        &self,
        sc: &mut Self::Vector<T>,
        p: &Self::Vector<T>,
        ap: &Self::Vector<T>,
        d: &mut Self::Vector<T>,
        s: &mut Self::Vector<T>,
        x_in: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_slots(
            "qmr_update",
            LEN,
            sc.len(),
            &[
                p.len(),
                ap.len(),
                d.len(),
                s.len(),
                x_in.len(),
                x.len(),
                r.len(),
            ],
        )?;
        let (eta, carry) = update_coefficients(&self.download(sc)?);
        self.axpby(eta, p, carry, d)?;
        self.axpby(eta, ap, carry, s)?;
        self.copy(x_in, x)?;
        self.axpy(T::one(), d, x)?;
        self.axpy(-T::one(), s, r)?;
        let r2 = norm2_squared(self, r)?;
        update_slots(self, sc, |out| out[RNORM2] = T::from_real(r2))
    }
}

/// The slots at the start ([`QmrKernels::qmr_start`]).
fn start_values<T: Scalar>(s: &mut [T], rho: T::Real, xi: T::Real) {
    s.fill(T::zero());
    s[RHO] = T::from_real(rho);
    s[XI] = T::from_real(xi);
    s[GAMMA] = T::one();
    s[ETA] = -T::one();
}

/// The update's (eta, carry): zero both when either is not finite (reported
/// by the method), so x and r stay as they were.
fn update_coefficients<T: Scalar>(s: &[T]) -> (T, T) {
    match (s[ETA], s[CARRY]) {
        (eta, carry) if eta.is_finite_value() && carry.is_finite_value() => (eta, carry),
        _ => (T::zero(), T::zero()),
    }
}

/// beta = eps / delta (zero when delta vanished).
fn beta<T: Scalar>(sc: &[T]) -> T {
    guarded_quotient(sc[EPS], sc[DELTA])
}

/// The rotation of [`QmrKernels::qmr_rotation`] on the host, given the new xi:
/// the twin of `qmr_scalars_*` in `kernels-rs/src/device/qmr.rs`.
fn rotation<T: Scalar>(sc: &mut [T], xi: T::Real) {
    let one = T::Real::of_f64(1.0);
    let (delta, eps) = (sc[DELTA], sc[EPS]);
    let beta = guarded_quotient(eps, delta);
    let rho = sc[RHO].re();
    let rho_next = sc[RHO_NEXT].re();
    let gamma_prev = sc[GAMMA].re();
    let theta_prev = sc[THETA].re();
    let theta = rho_next / (gamma_prev * beta.abs_sqr().sqrt());
    let gamma = one / (one + theta * theta).sqrt();
    let ok = !delta.is_zero_value()
        && delta.is_finite_value()
        && !eps.is_zero_value()
        && eps.is_finite_value()
        && !beta.is_zero_value()
        && theta.is_finite()
        && gamma > T::Real::of_f64(0.0);
    // eta may overflow: it is stored as it is (the method reports it) and the
    // update then treats it as zero.
    let (eta, carry) = if ok {
        let num = -sc[ETA] * T::from_real(rho * gamma * gamma);
        let den = beta * T::from_real(gamma_prev * gamma_prev);
        let tg = theta_prev * gamma;
        (num / den, tg * tg)
    } else {
        (T::zero(), T::Real::of_f64(0.0))
    };
    sc[ETA] = eta;
    sc[CARRY] = T::from_real(carry);
    sc[THETA] = T::from_real(theta);
    sc[GAMMA] = T::from_real(gamma);
    sc[RHO] = T::from_real(rho_next);
    sc[XI] = T::from_real(xi);
}

impl QmrKernels for CpuBackend {
    fn qmr_start<T: Scalar>(&self, sc: &mut CpuVector<T>, rho: T::Real, xi: T::Real) -> Result<()> {
        check_slots("qmr_start", LEN, sc.len(), &[])?;
        start_values(sc.as_mut_slice(), rho, xi);
        Ok(())
    }

    fn qmr_scale<T: Scalar>(
        &self,
        sc: &mut CpuVector<T>,
        v: &mut CpuVector<T>,
        w: &mut CpuVector<T>,
        z: Option<&mut CpuVector<T>>,
    ) -> Result<()> {
        let zl = z.as_ref().map_or(w.len(), |z| z.len());
        check_slots("qmr_scale", LEN, sc.len(), &[v.len(), w.len(), zl])?;
        let s = sc.as_slice();
        let inv_rho = T::from_real(T::Real::of_f64(1.0) / s[RHO].re());
        let inv_xi = T::from_real(T::Real::of_f64(1.0) / s[XI].re());
        let delta = self.run("qmr_scale", || {
            let partials: Vec<T> = match z {
                Some(z) => z
                    .as_mut_slice()
                    .par_chunks_mut(BLOCK)
                    .zip(v.as_mut_slice().par_chunks_mut(BLOCK))
                    .zip(w.as_mut_slice().par_chunks_mut(BLOCK))
                    .map(|((zc, vc), wc)| {
                        for ((zi, vi), wi) in zc.iter_mut().zip(vc.iter_mut()).zip(wc) {
                            *zi *= inv_xi;
                            *vi *= inv_rho;
                            *wi *= inv_xi;
                        }
                        lane_sum(vc.len(), |i| zc[i] * vc[i])
                    })
                    .collect(),
                None => v
                    .as_mut_slice()
                    .par_chunks_mut(BLOCK)
                    .zip(w.as_mut_slice().par_chunks_mut(BLOCK))
                    .map(|(vc, wc)| {
                        for (vi, wi) in vc.iter_mut().zip(wc.iter_mut()) {
                            *vi *= inv_rho;
                            *wi *= inv_xi;
                        }
                        lane_sum(vc.len(), |i| wc[i] * vc[i])
                    })
                    .collect(),
            };
            pairwise_sum(&partials)
        });
        sc.as_mut_slice()[DELTA] = delta;
        Ok(())
    }

    fn qmr_pq<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        y: &CpuVector<T>,
        z: &CpuVector<T>,
        p: &mut CpuVector<T>,
        q: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots(
            "qmr_pq",
            LEN,
            sc.len(),
            &[y.len(), z.len(), p.len(), q.len()],
        )?;
        let s = sc.as_slice();
        let cp = guarded_quotient(s[XI] * s[DELTA], s[EPS]);
        let cq = guarded_quotient(s[RHO] * s[DELTA], s[EPS]);
        let (y, z) = (y.as_slice(), z.as_slice());
        self.run("qmr_pq", || {
            p.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(q.as_mut_slice().par_chunks_mut(BLOCK))
                .zip(y.par_chunks(BLOCK).zip(z.par_chunks(BLOCK)))
                .for_each(|((pc, qc), (yc, zc))| {
                    for (((pi, qi), &yi), &zi) in pc.iter_mut().zip(qc).zip(yc).zip(zc) {
                        *pi = yi - cp * *pi;
                        *qi = zi - cq * *qi;
                    }
                })
        });
        Ok(())
    }

    fn qmr_eps<T: Scalar>(
        &self,
        q: &CpuVector<T>,
        ap: &CpuVector<T>,
        sc: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots("qmr_eps", LEN, sc.len(), &[q.len(), ap.len()])?;
        sc.as_mut_slice()[EPS] = self.dotu(q, ap)?;
        Ok(())
    }

    fn qmr_v<T: Scalar>(
        &self,
        sc: &mut CpuVector<T>,
        ap: &CpuVector<T>,
        v: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots("qmr_v", LEN, sc.len(), &[ap.len(), v.len()])?;
        let b = beta(sc.as_slice());
        let ap = ap.as_slice();
        let v2 = self.run("qmr_v", || {
            let partials: Vec<T::Real> = v
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(ap.par_chunks(BLOCK))
                .map(|(vc, ac)| {
                    for (vi, &ai) in vc.iter_mut().zip(ac) {
                        *vi = ai - b * *vi;
                    }
                    lane_sum(vc.len(), |i| vc[i].abs_sqr())
                })
                .collect();
            pairwise_sum(&partials)
        });
        sc.as_mut_slice()[RHO_NEXT] = T::from_real(v2.sqrt());
        Ok(())
    }

    fn qmr_w<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        atq: &CpuVector<T>,
        w: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots("qmr_w", LEN, sc.len(), &[atq.len(), w.len()])?;
        self.axpby(T::one(), atq, -beta(sc.as_slice()), w)
    }

    fn qmr_rotation<T: Scalar>(&self, z: &CpuVector<T>, sc: &mut CpuVector<T>) -> Result<()> {
        check_slots("qmr_rotation", LEN, sc.len(), &[z.len()])?;
        let xi = self.nrm2(z)?;
        rotation(sc.as_mut_slice(), xi);
        Ok(())
    }

    fn qmr_update<T: Scalar>(
        &self,
        sc: &mut CpuVector<T>,
        p: &CpuVector<T>,
        ap: &CpuVector<T>,
        d: &mut CpuVector<T>,
        s: &mut CpuVector<T>,
        x_in: &CpuVector<T>,
        x: &mut CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<()> {
        check_slots(
            "qmr_update",
            LEN,
            sc.len(),
            &[
                p.len(),
                ap.len(),
                d.len(),
                s.len(),
                x_in.len(),
                x.len(),
                r.len(),
            ],
        )?;
        let (eta, carry) = update_coefficients(sc.as_slice());
        let (p, ap, x_in) = (p.as_slice(), ap.as_slice(), x_in.as_slice());
        let r2 = self.run("qmr_update", || {
            let partials: Vec<T::Real> = d
                .as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(s.as_mut_slice().par_chunks_mut(BLOCK))
                .zip(x.as_mut_slice().par_chunks_mut(BLOCK))
                .zip(r.as_mut_slice().par_chunks_mut(BLOCK))
                .enumerate()
                .map(|(c, (((dc, sc), xc), rc))| {
                    let base = c * BLOCK;
                    for (k, (((di, si), xi), ri)) in dc
                        .iter_mut()
                        .zip(sc.iter_mut())
                        .zip(xc.iter_mut())
                        .zip(rc.iter_mut())
                        .enumerate()
                    {
                        *di = eta * p[base + k] + carry * *di;
                        *si = eta * ap[base + k] + carry * *si;
                        *xi = x_in[base + k] + *di;
                        *ri -= *si;
                    }
                    lane_sum(rc.len(), |i| rc[i].abs_sqr())
                })
                .collect();
            pairwise_sum(&partials)
        });
        sc.as_mut_slice()[RNORM2] = T::from_real(r2);
        Ok(())
    }
}

/// The CUDA backend runs each step as one kernel, the reductions' second passes
/// updating `sc` (see `CudaBackend::qmr_scale` and the others).
#[cfg(feature = "cuda")]
impl QmrKernels for gpuq_cuda::CudaBackend {
    fn qmr_start<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        rho: T::Real,
        xi: T::Real,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_start(self, sc, rho, xi)
    }

    fn qmr_scale<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        v: &mut gpuq_cuda::CudaVector<T>,
        w: &mut gpuq_cuda::CudaVector<T>,
        z: Option<&mut gpuq_cuda::CudaVector<T>>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_scale(self, sc, v, w, z)
    }

    fn qmr_pq<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        y: &gpuq_cuda::CudaVector<T>,
        z: &gpuq_cuda::CudaVector<T>,
        p: &mut gpuq_cuda::CudaVector<T>,
        q: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_pq(self, sc, y, z, p, q)
    }

    fn qmr_eps<T: Scalar>(
        &self,
        q: &gpuq_cuda::CudaVector<T>,
        ap: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_eps(self, q, ap, sc)
    }

    fn qmr_v<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        ap: &gpuq_cuda::CudaVector<T>,
        v: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_v(self, sc, ap, v)
    }

    fn qmr_w<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        atq: &gpuq_cuda::CudaVector<T>,
        w: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_w(self, sc, atq, w)
    }

    fn qmr_rotation<T: Scalar>(
        &self,
        z: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_rotation(self, z, sc)
    }

    fn qmr_update<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        p: &gpuq_cuda::CudaVector<T>,
        ap: &gpuq_cuda::CudaVector<T>,
        d: &mut gpuq_cuda::CudaVector<T>,
        s: &mut gpuq_cuda::CudaVector<T>,
        x_in: &gpuq_cuda::CudaVector<T>,
        x: &mut gpuq_cuda::CudaVector<T>,
        r: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::qmr_update(self, sc, p, ap, d, s, x_in, x, r)
    }
}
