//! TFQMR's steps with its scalars on the device (slots in
//! [`crate::slots::tfqmr`]; see `gpuq_krylov::tfqmr` for the algorithm). Every
//! coefficient is read from the scalar array `sc`; the last block of the two
//! reductions that feed the recurrence also updates it (`tfqmr_sigma_*` moves
//! rho along, `tfqmr_half_*` advances theta^2, tau^2 and eta), so an
//! iteration needs no host value. Vanished denominators give zero coefficients
//! ([`guarded_quotient`]); the host reads the slots once per iteration and
//! reports the breakdown. Launch mapping and safety contract as in `blas1`.

use super::blas1::dot_terms;
use super::prelude::{global_id, grid_threads, reduce_grid, DeviceScalar};
use crate::scalar::{guarded_quotient, KScalar, C32, C64};
use crate::slots::tfqmr::{ETA, LEN, RHO, RHO_NEXT, SIGMA, TAU2, THETA2};

macro_rules! tfqmr {
    ($t:ty, $r:ty, $start:ident, $sigma:ident, $odd:ident, $half:ident,
     $x:ident, $even:ident, $v:ident) => {
        /// The start of a cycle, one thread: every slot zero but `sc[TAU2]` =
        /// `tau2` (the cycle's ||r||^2).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $start(sc: *mut $t, tau2: $r) {
            if global_id() == 0 {
                let mut k = 0;
                while k < LEN {
                    *sc.add(k) = <$t>::zero();
                    k += 1;
                }
                *sc.add(TAU2) = <$t>::from_real(tau2);
            }
        }

        /// `sc[SIGMA]` = r*^H v (the BLAS-1 dot's terms and single-launch
        /// reduction), and rho moves along (`sc[RHO] = sc[RHO_NEXT]`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sigma(
            n: usize,
            rstar: *const $t,
            v: *const $t,
            sc: *mut $t,
            partials: *mut $t,
            counter: *mut u32,
        ) {
            let s = dot_terms(n, rstar, v, true);
            if let Some([s]) = reduce_grid([s], partials, 0, counter) {
                *sc.add(SIGMA) = s;
                *sc.add(RHO) = *sc.add(RHO_NEXT);
            }
        }

        /// u_odd = u_even - alpha v, alpha = rho / sigma.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $odd(
            n: usize,
            sc: *const $t,
            u_even: *const $t,
            v: *const $t,
            u_odd: *mut $t,
        ) {
            let alpha = guarded_quotient(*sc.add(RHO), *sc.add(SIGMA));
            let mut i = global_id();
            while i < n {
                *u_odd.add(i) = <$t>::ldg(u_even.add(i)) - alpha * <$t>::ldg(v.add(i));
                i += grid_threads();
            }
        }

        /// One half-step: w = w - alpha A M u and M d = M u + (theta^2 eta /
        /// alpha) M d, with theta^2 and eta of the previous half-step; then,
        /// from ||w||^2 (a single-launch reduction), the half-step's
        /// recurrence: theta^2 = ||w||^2 / tau^2, c^2 = 1 / (1 + theta^2),
        /// tau^2 = ||w||^2 c^2, eta = c^2 alpha (theta^2 = c^2 = 0 when tau^2
        /// was zero).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $half(
            n: usize,
            sc: *mut $t,
            amu: *const $t,
            mu: *const $t,
            w: *mut $t,
            md: *mut $t,
            partials: *mut $r,
            counter: *mut u32,
        ) {
            let alpha = guarded_quotient(*sc.add(RHO), *sc.add(SIGMA));
            let coef = guarded_quotient(*sc.add(THETA2) * *sc.add(ETA), alpha);
            let mut acc = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let wi = *w.add(i) - alpha * <$t>::ldg(amu.add(i));
                *w.add(i) = wi;
                acc = acc + wi.abs_sqr();
                *md.add(i) = <$t>::ldg(mu.add(i)) + coef * *md.add(i);
                i += grid_threads();
            }
            if let Some([w2]) = reduce_grid([acc], partials, 0, counter) {
                // A tau^2 that vanished (an exact solve) keeps tau^2 and eta
                // zero: x stays where it is.
                let tau2 = (*sc.add(TAU2)).re();
                let (theta2, c2) = if tau2 == 0.0 {
                    (0.0, 0.0)
                } else {
                    let theta2 = w2 / tau2;
                    (theta2, 1.0 / (1.0 + theta2))
                };
                *sc.add(THETA2) = <$t>::from_real(theta2);
                *sc.add(TAU2) = <$t>::from_real(w2 * c2);
                *sc.add(ETA) = <$t>::from_real(c2) * alpha;
            }
        }

        /// x = xin + eta M d, or x = x + eta M d when `xin` is null.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $x(
            n: usize,
            sc: *const $t,
            md: *const $t,
            xin: *const $t,
            x: *mut $t,
        ) {
            let eta = *sc.add(ETA);
            let mut i = global_id();
            while i < n {
                let from = if xin.is_null() {
                    *x.add(i)
                } else {
                    <$t>::ldg(xin.add(i))
                };
                *x.add(i) = from + eta * <$t>::ldg(md.add(i));
                i += grid_threads();
            }
        }

        /// u_even = w + beta u_odd, beta = rho_next / rho.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $even(
            n: usize,
            sc: *const $t,
            w: *const $t,
            u_odd: *const $t,
            u_even: *mut $t,
        ) {
            let beta = guarded_quotient(*sc.add(RHO_NEXT), *sc.add(RHO));
            let mut i = global_id();
            while i < n {
                *u_even.add(i) = <$t>::ldg(w.add(i)) + beta * <$t>::ldg(u_odd.add(i));
                i += grid_threads();
            }
        }

        /// v = A M u_even + beta (A M u_odd + beta v), beta = rho_next / rho.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $v(
            n: usize,
            sc: *const $t,
            amu_even: *const $t,
            amu_odd: *const $t,
            v: *mut $t,
        ) {
            let beta = guarded_quotient(*sc.add(RHO_NEXT), *sc.add(RHO));
            let mut i = global_id();
            while i < n {
                *v.add(i) = <$t>::ldg(amu_even.add(i))
                    + beta * (<$t>::ldg(amu_odd.add(i)) + beta * *v.add(i));
                i += grid_threads();
            }
        }
    };
}

tfqmr!(
    f32,
    f32,
    tfqmr_start_f32,
    tfqmr_sigma_f32,
    tfqmr_odd_f32,
    tfqmr_half_f32,
    tfqmr_x_f32,
    tfqmr_even_f32,
    tfqmr_v_f32
);
tfqmr!(
    f64,
    f64,
    tfqmr_start_f64,
    tfqmr_sigma_f64,
    tfqmr_odd_f64,
    tfqmr_half_f64,
    tfqmr_x_f64,
    tfqmr_even_f64,
    tfqmr_v_f64
);
tfqmr!(
    C32,
    f32,
    tfqmr_start_c32,
    tfqmr_sigma_c32,
    tfqmr_odd_c32,
    tfqmr_half_c32,
    tfqmr_x_c32,
    tfqmr_even_c32,
    tfqmr_v_c32
);
tfqmr!(
    C64,
    f64,
    tfqmr_start_c64,
    tfqmr_sigma_c64,
    tfqmr_odd_c64,
    tfqmr_half_c64,
    tfqmr_x_c64,
    tfqmr_even_c64,
    tfqmr_v_c64
);
