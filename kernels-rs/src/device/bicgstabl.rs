//! BiCGSTAB(l)'s steps with its scalars on the device (slots in
//! [`crate::slots::bicgstabl`]; see `gpuq_krylov::bicgstab_l` for the
//! algorithm). Every vector step is `y = sc[a] x + sc[b] y` with slot indices
//! as arguments (for up to 16 vector pairs in one launch); the scalars between
//! them come from the last block of a dot product (guarded quotients after it)
//! and a one-thread kernel (the minimal-residual solve), so a cycle takes no
//! host value. A vanished quantity leaves a breakdown code in
//! `sc[FLAG]`, after which the vector steps do nothing, and the host reports it. Launch mapping and
//! safety contract as in `blas1`; the one-thread kernels run on one warp and
//! act in thread 0.

use super::blas1::dot_terms;
use super::prelude::{global_id, grid_threads, reduce_grid, DeviceScalar};
use crate::scalar::{guarded_quotient, KScalar, C32, C64};
use crate::slots::bicgstabl::{
    coef, tau, Ratio, Ratios, FLAG, MAX_PAIRS, MAX_RATIOS, NEG_OMEGA, NO_CHECK, OMEGA,
    OMEGA_VANISHED, ONE, RHO0,
};

/// The vectors of a batched update, as a kernel argument: pairs p < `count`
/// (an argument of its own) are (x[p], y[p]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Pairs<T> {
    x: [*const T; MAX_PAIRS],
    y: [*mut T; MAX_PAIRS],
}

/// A breakdown code as a real value.
trait Code {
    fn code(c: u32) -> Self;
}

impl Code for f32 {
    fn code(c: u32) -> f32 {
        c as f32
    }
}

impl Code for f64 {
    fn code(c: u32) -> f64 {
        c as f64
    }
}

/// Applies one [`Ratio`] to the slot array (one thread).
///
/// # Safety
/// Every slot `op` names must be inside `sc`.
#[inline(always)]
unsafe fn apply_ratio<T: KScalar>(sc: *mut T, op: Ratio)
where
    T::Real: Code,
{
    if op.check != NO_CHECK && vanished(*sc.add(op.check as usize)) && (*sc.add(FLAG)).is_zero() {
        *sc.add(FLAG) = T::from_real(T::Real::code(op.code));
    }
    let v = guarded_quotient(
        *sc.add(op.a as usize) * *sc.add(op.b as usize),
        *sc.add(op.c as usize),
    );
    *sc.add(op.out as usize) = v;
    *sc.add(op.neg_out as usize) = T::zero() - v;
}

/// Zero, or not finite.
#[inline(always)]
fn vanished<T: KScalar>(v: T) -> bool {
    v.is_zero() || !v.is_finite()
}

macro_rules! bicgstabl {
    ($t:ty, $r:ty, $start:ident, $axpby:ident, $dot:ident, $many:ident, $mr:ident) => {
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

        /// `sc[slot]` = x^H y (the BLAS-1 dot's terms and single-launch
        /// reduction), then, in the last block's thread 0, the first
        /// `ratios.count` quotients of `ratios` in order.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $dot(
            n: usize,
            x: *const $t,
            y: *const $t,
            sc: *mut $t,
            slot: usize,
            ratios: Ratios,
            partials: *mut $t,
            counter: *mut u32,
        ) {
            let d = dot_terms(n, x, y, true);
            if let Some([d]) = reduce_grid([d], partials, 0, counter) {
                *sc.add(slot) = d;
                let count = (ratios.count as usize).min(MAX_RATIOS);
                // Constant indices: the ratios stay in the parameter space.
                let apply = |k: usize| {
                    if k < count {
                        apply_ratio(sc, ratios.ops[k]);
                    }
                };
                apply(0);
                apply(1);
                apply(2);
                apply(3);
            }
        }

        /// y_p = sc[ka] x_p + sc[kb] y_p for the first `count` (at most
        /// MAX_PAIRS) pairs of `pairs`, or nothing once a breakdown is recorded:
        /// one pass per element over all pairs, four pairs' loads in flight.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $many(
            n: usize,
            sc: *const $t,
            ka: usize,
            kb: usize,
            count: u32,
            pairs: Pairs<$t>,
        ) {
            if !(*sc.add(FLAG)).is_zero() {
                return;
            }
            let (a, b) = (*sc.add(ka), *sc.add(kb));
            let count = (count as usize).min(MAX_PAIRS);
            let mut i = global_id();
            while i < n {
                // Groups of four with constant indices: the pointers stay in
                // the parameter space.
                let group = |p: usize| {
                    if p < count {
                        let mut xs = [<$t>::zero(); 4];
                        let mut ys = [<$t>::zero(); 4];
                        let mut load = |q: usize| {
                            if p + q < count {
                                xs[q] = <$t>::ldg(pairs.x[p + q].add(i));
                                ys[q] = *pairs.y[p + q].add(i);
                            }
                        };
                        load(0);
                        load(1);
                        load(2);
                        load(3);
                        let store = |q: usize| {
                            if p + q < count {
                                *pairs.y[p + q].add(i) = a * xs[q] + b * ys[q];
                            }
                        };
                        store(0);
                        store(1);
                        store(2);
                        store(3);
                    }
                };
                group(0);
                group(4);
                group(8);
                group(12);
                i += grid_threads();
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
    dot_ratios_f32,
    axpby_slots_many_f32,
    bicgstabl_mr_f32
);
bicgstabl!(
    f64,
    f64,
    bicgstabl_start_f64,
    axpby_slots_f64,
    dot_ratios_f64,
    axpby_slots_many_f64,
    bicgstabl_mr_f64
);
bicgstabl!(
    C32,
    f32,
    bicgstabl_start_c32,
    axpby_slots_c32,
    dot_ratios_c32,
    axpby_slots_many_c32,
    bicgstabl_mr_c32
);
bicgstabl!(
    C64,
    f64,
    bicgstabl_start_c64,
    axpby_slots_c64,
    dot_ratios_c64,
    axpby_slots_many_c64,
    bicgstabl_mr_c64
);
