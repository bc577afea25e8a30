//! BiCGSTAB(l)'s steps with its scalars on the device (slots in
//! [`crate::slots::bicgstabl`]; see `gpuq_krylov::bicgstab_l` for the
//! algorithm). Every vector step is `y = sc[a] x + sc[b] y` with slot indices
//! as arguments; the scalars between them come from one-thread kernels over
//! the slot array (a guarded quotient, and the minimal-residual solve), so a
//! cycle takes no host value. A vanished quantity leaves a breakdown code in
//! `sc[FLAG]`, after which the vector steps do nothing, and the host reports it. Launch mapping and
//! safety contract as in `blas1`; the one-thread kernels run on one warp and
//! act in thread 0.

use super::prelude::{global_id, grid_threads, DeviceScalar};
use crate::scalar::{guarded_quotient, KScalar, C32, C64};
use crate::slots::bicgstabl::{coef, tau, FLAG, NEG_OMEGA, OMEGA, OMEGA_VANISHED, ONE, RHO0};

/// Zero, or not finite.
#[inline(always)]
fn vanished<T: KScalar>(v: T) -> bool {
    v.is_zero() || !v.is_finite()
}

macro_rules! bicgstabl {
    ($t:ty, $r:ty, $start:ident, $axpby:ident, $ratio:ident, $mr:ident) => {
        /// The start: every one of the `len` slots zero but ONE = 1, RHO0 = 1,
        /// OMEGA = 1 and NEG_OMEGA = -1 (alpha = 0).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $start(sc: *mut $t, len: usize) {
            if global_id() == 0 {
                let mut k = 0;
                while k < len {
                    *sc.add(k) = <$t>::zero();
                    k += 1;
                }
                *sc.add(ONE) = <$t>::from_real(1.0);
                *sc.add(RHO0) = <$t>::from_real(1.0);
                *sc.add(OMEGA) = <$t>::from_real(1.0);
                *sc.add(NEG_OMEGA) = <$t>::from_real(-1.0);
            }
        }

        /// y = sc[ka] x + sc[kb] y, or nothing once a breakdown is recorded
        /// (sc[FLAG] != 0): the vectors stay as they were at the breakdown.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $axpby(
            n: usize,
            sc: *const $t,
            ka: usize,
            x: *const $t,
            kb: usize,
            y: *mut $t,
        ) {
            if !(*sc.add(FLAG)).is_zero() {
                return;
            }
            let (a, b) = (*sc.add(ka), *sc.add(kb));
            let mut i = global_id();
            while i < n {
                *y.add(i) = a * <$t>::ldg(x.add(i)) + b * *y.add(i);
                i += grid_threads();
            }
        }

        /// One thread: v = sc[a] sc[b] / sc[c] (zero when sc[c] vanished),
        /// sc[out] = v and sc[neg_out] = -v; when `check` is a slot whose value
        /// vanished and no breakdown is recorded yet, sc[FLAG] = `code`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $ratio(
            sc: *mut $t,
            a: usize,
            b: usize,
            c: usize,
            out: usize,
            neg_out: usize,
            check: usize,
            code: u32,
        ) {
            if global_id() == 0 {
                if check != usize::MAX && vanished(*sc.add(check)) && (*sc.add(FLAG)).is_zero() {
                    *sc.add(FLAG) = <$t>::from_real(code as $r);
                }
                let v = guarded_quotient(*sc.add(a) * *sc.add(b), *sc.add(c));
                *sc.add(out) = v;
                *sc.add(neg_out) = <$t>::zero() - v;
            }
        }

        /// One thread: the minimal-residual solve from tau and gamma' (Sleijpen
        /// and Fokkema): gamma_l = gamma'_l, gamma_j = gamma'_j - sum_{i>j}
        /// tau_ji gamma_i, gamma''_j = gamma_{j+1} + sum_{j<i<l} tau_ji
        /// gamma_{i+1}; omega = gamma_l (a vanished omega is flagged).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $mr(sc: *mut $t, l: usize) {
            if global_id() != 0 {
                return;
            }
            let g = |j: usize| coef(l, 0, j);
            *sc.add(g(l)) = *sc.add(coef(l, 2, l));
            let mut j = l;
            while j > 1 {
                j -= 1;
                let mut v = *sc.add(coef(l, 2, j));
                let mut i = j + 1;
                while i <= l {
                    v = v - *sc.add(tau(l, j, i)) * *sc.add(g(i));
                    i += 1;
                }
                *sc.add(g(j)) = v;
            }
            let mut j = 1;
            while j < l {
                let mut v = *sc.add(g(j + 1));
                let mut i = j + 1;
                while i < l {
                    v = v + *sc.add(tau(l, j, i)) * *sc.add(g(i + 1));
                    i += 1;
                }
                *sc.add(coef(l, 4, j)) = v;
                j += 1;
            }
            let mut j = 1;
            while j <= l {
                *sc.add(coef(l, 1, j)) = <$t>::zero() - *sc.add(g(j));
                j += 1;
            }
            let omega = *sc.add(g(l));
            if vanished(omega) && (*sc.add(FLAG)).is_zero() {
                *sc.add(FLAG) = <$t>::from_real(OMEGA_VANISHED as $r);
            }
            *sc.add(OMEGA) = omega;
            *sc.add(NEG_OMEGA) = <$t>::zero() - omega;
        }
    };
}

bicgstabl!(
    f32,
    f32,
    bicgstabl_start_f32,
    axpby_slots_f32,
    slot_ratio_f32,
    bicgstabl_mr_f32
);
bicgstabl!(
    f64,
    f64,
    bicgstabl_start_f64,
    axpby_slots_f64,
    slot_ratio_f64,
    bicgstabl_mr_f64
);
bicgstabl!(
    C32,
    f32,
    bicgstabl_start_c32,
    axpby_slots_c32,
    slot_ratio_c32,
    bicgstabl_mr_c32
);
bicgstabl!(
    C64,
    f64,
    bicgstabl_start_c64,
    axpby_slots_c64,
    slot_ratio_c64,
    bicgstabl_mr_c64
);
