//! QMR's steps with its scalars on the device (slots in [`crate::slots::qmr`];
//! see `gpuq_krylov::qmr` for the algorithm). Every coefficient is read from the
//! scalar array `sc`; the reductions' last blocks write their results into it
//! (`qmr_xi_*`'s also runs the quasi-minimisation's rotation and moves rho and
//! xi along), so an iteration needs no host value. A vanished Lanczos
//! quantity zeroes the update's coefficients (x and r stay as they were); the
//! host reads the slots once per iteration and reports the breakdown. Launch
//! mapping and safety contract as in `blas1`.

use super::blas1::squared_norm_terms;
use super::prelude::{global_id, grid_threads, reduce_grid, DeviceReal, DeviceScalar};
use crate::scalar::{guarded_quotient, KScalar, C32, C64};
use crate::slots::qmr::{CARRY, DELTA, EPS, ETA, GAMMA, LEN, RHO, RHO_NEXT, RNORM2, THETA, XI};

macro_rules! qmr {
    ($t:ty, $r:ty, $start:ident, $scale:ident, $pq:ident, $v:ident, $w:ident,
     $xi:ident, $update:ident) => {
        /// The start, one thread: `sc[RHO] = rho`, `sc[XI] = xi`, gamma = 1,
        /// eta = -1, every other slot zero.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $start(sc: *mut $t, rho: $r, xi: $r) {
            if global_id() == 0 {
                let mut k = 0;
                while k < LEN {
                    *sc.add(k) = <$t>::zero();
                    k += 1;
                }
                *sc.add(RHO) = <$t>::from_real(rho);
                *sc.add(XI) = <$t>::from_real(xi);
                *sc.add(GAMMA) = <$t>::from_real(1.0);
                *sc.add(ETA) = <$t>::from_real(-1.0);
            }
        }

        /// v = v~ / rho, w = w~ / xi and z = z / xi (z is w when `z_is_w` is
        /// set), and `sc[DELTA]` = z^T v (unconjugated) of the scaled vectors, a
        /// single-launch reduction (see `blas1`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $scale(
            n: usize,
            sc: *mut $t,
            v: *mut $t,
            w: *mut $t,
            z: *mut $t,
            z_is_w: u32,
            partials: *mut $t,
            counter: *mut u32,
        ) {
            let inv_rho = <$t>::from_real(1.0 / (*sc.add(RHO)).re());
            let inv_xi = <$t>::from_real(1.0 / (*sc.add(XI)).re());
            let mut acc = <$t>::zero();
            let mut i = global_id();
            while i < n {
                let vi = *v.add(i) * inv_rho;
                *v.add(i) = vi;
                let wi = *w.add(i) * inv_xi;
                *w.add(i) = wi;
                let zi = if z_is_w != 0 {
                    wi
                } else {
                    let zi = *z.add(i) * inv_xi;
                    *z.add(i) = zi;
                    zi
                };
                acc = acc + zi * vi;
                i += grid_threads();
            }
            if let Some([delta]) = reduce_grid([acc], partials, 0, counter) {
                *sc.add(DELTA) = delta;
            }
        }

        /// p = y - (xi delta / eps) p and q = z - (rho delta / eps) q (plain
        /// copies while eps is zero, before the first iteration).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $pq(
            n: usize,
            sc: *const $t,
            y: *const $t,
            z: *const $t,
            p: *mut $t,
            q: *mut $t,
        ) {
            let (delta, eps) = (*sc.add(DELTA), *sc.add(EPS));
            let cp = guarded_quotient(*sc.add(XI) * delta, eps);
            let cq = guarded_quotient(*sc.add(RHO) * delta, eps);
            let mut i = global_id();
            while i < n {
                *p.add(i) = <$t>::ldg(y.add(i)) - cp * *p.add(i);
                *q.add(i) = <$t>::ldg(z.add(i)) - cq * *q.add(i);
                i += grid_threads();
            }
        }

        /// v~ = A p - beta v in place of v, beta = eps / delta, and
        /// `sc[RHO_NEXT]` = ||v~|| (real; a single-launch reduction).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $v(
            n: usize,
            sc: *mut $t,
            ap: *const $t,
            v: *mut $t,
            partials: *mut $r,
            counter: *mut u32,
        ) {
            let beta = guarded_quotient(*sc.add(EPS), *sc.add(DELTA));
            let mut acc = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let vi = <$t>::ldg(ap.add(i)) - beta * *v.add(i);
                *v.add(i) = vi;
                acc = acc + vi.abs_sqr();
                i += grid_threads();
            }
            if let Some([s]) = reduce_grid([acc], partials, 0, counter) {
                *sc.add(RHO_NEXT) = <$t>::from_real(s.sqrt_rn());
            }
        }

        /// w~ = A^T q - beta w in place of w, beta = eps / delta.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $w(n: usize, sc: *const $t, atq: *const $t, w: *mut $t) {
            let beta = guarded_quotient(*sc.add(EPS), *sc.add(DELTA));
            let mut i = global_id();
            while i < n {
                *w.add(i) = <$t>::ldg(atq.add(i)) - beta * *w.add(i);
                i += grid_threads();
            }
        }

        /// xi = ||z|| with z = M^T w~ (a single-launch reduction), then the
        /// rotation: theta = rho_next / (gamma_prev |beta|), gamma = 1 / sqrt(1
        /// + theta^2), eta = -eta rho gamma^2 / (beta gamma_prev^2), carry =
        /// (theta_prev gamma)^2 (both zero when delta, eps or beta vanished or
        /// theta is not finite; eta as computed, also when it overflowed), and
        /// rho, xi, theta, gamma move along.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $xi(
            n: usize,
            z: *const $t,
            sc: *mut $t,
            partials: *mut $r,
            counter: *mut u32,
        ) {
            let acc = squared_norm_terms(n, z);
            if let Some([z2]) = reduce_grid([acc], partials, 0, counter) {
                let xi = z2.sqrt_rn();
                let (delta, eps) = (*sc.add(DELTA), *sc.add(EPS));
                let beta = guarded_quotient(eps, delta);
                let rho = (*sc.add(RHO)).re();
                let rho_next = (*sc.add(RHO_NEXT)).re();
                let gamma_prev = (*sc.add(GAMMA)).re();
                let theta_prev = (*sc.add(THETA)).re();
                let theta = rho_next / (gamma_prev * beta.abs_sqr().sqrt_rn());
                let gamma = 1.0 / (1.0 + theta * theta).sqrt_rn();
                let ok = !delta.is_zero()
                    && delta.is_finite()
                    && !eps.is_zero()
                    && eps.is_finite()
                    && !beta.is_zero()
                    && theta.is_finite()
                    && gamma > 0.0;
                // eta may overflow: it is stored as it is (the host reports it)
                // and the update then treats it as zero.
                let (eta, carry) = if ok {
                    let num = (<$t>::zero() - *sc.add(ETA)) * <$t>::from_real(rho * gamma * gamma);
                    let den = beta * <$t>::from_real(gamma_prev * gamma_prev);
                    let tg = theta_prev * gamma;
                    (num.div(den), tg * tg)
                } else {
                    (<$t>::zero(), 0.0)
                };
                *sc.add(ETA) = eta;
                *sc.add(CARRY) = <$t>::from_real(carry);
                *sc.add(THETA) = <$t>::from_real(theta);
                *sc.add(GAMMA) = <$t>::from_real(gamma);
                *sc.add(RHO) = <$t>::from_real(rho_next);
                *sc.add(XI) = <$t>::from_real(xi);
            }
        }

        /// d = eta p + carry d, s = eta A p + carry s, x = xin + d, r = r - s (eta
        /// and carry taken as zero when either is not finite), and
        /// `sc[RNORM2]` = ||r||^2 (real; a single-launch reduction).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $update(
            n: usize,
            sc: *mut $t,
            p: *const $t,
            ap: *const $t,
            d: *mut $t,
            s: *mut $t,
            xin: *const $t,
            x: *mut $t,
            r: *mut $t,
            partials: *mut $r,
            counter: *mut u32,
        ) {
            // A non-finite eta or carry (reported by the host) leaves x and r as
            // they were.
            let (eta, carry) = (*sc.add(ETA), *sc.add(CARRY));
            let (eta, carry) = if eta.is_finite() && carry.is_finite() {
                (eta, carry)
            } else {
                (<$t>::zero(), <$t>::zero())
            };
            let mut acc = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let di = eta * <$t>::ldg(p.add(i)) + carry * *d.add(i);
                *d.add(i) = di;
                let si = eta * <$t>::ldg(ap.add(i)) + carry * *s.add(i);
                *s.add(i) = si;
                *x.add(i) = <$t>::ldg(xin.add(i)) + di;
                let ri = *r.add(i) - si;
                *r.add(i) = ri;
                acc = acc + ri.abs_sqr();
                i += grid_threads();
            }
            if let Some([rr]) = reduce_grid([acc], partials, 0, counter) {
                *sc.add(RNORM2) = <$t>::from_real(rr);
            }
        }
    };
}

qmr!(
    f32,
    f32,
    qmr_start_f32,
    qmr_scale_f32,
    qmr_pq_f32,
    qmr_v_f32,
    qmr_w_f32,
    qmr_xi_f32,
    qmr_update_f32
);
qmr!(
    f64,
    f64,
    qmr_start_f64,
    qmr_scale_f64,
    qmr_pq_f64,
    qmr_v_f64,
    qmr_w_f64,
    qmr_xi_f64,
    qmr_update_f64
);
qmr!(
    C32,
    f32,
    qmr_start_c32,
    qmr_scale_c32,
    qmr_pq_c32,
    qmr_v_c32,
    qmr_w_c32,
    qmr_xi_c32,
    qmr_update_c32
);
qmr!(
    C64,
    f64,
    qmr_start_c64,
    qmr_scale_c64,
    qmr_pq_c64,
    qmr_v_c64,
    qmr_w_c64,
    qmr_xi_c64,
    qmr_update_c64
);
