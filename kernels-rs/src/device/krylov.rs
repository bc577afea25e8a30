//! Fused steps of BiCGSTAB whose scalars stay on the device.
//!
//! The method keeps its scalars in a small device array `sc` (slots in
//! [`crate::slots::bicgstab`]; see `gpuq_krylov::bicgstab` for the algorithm): the kernels read the coefficients they need from it, so no scalar
//! crosses the bus inside an iteration. A vanished denominator gives a zero
//! coefficient ([`guarded_quotient`]), which leaves the vectors unchanged; the host
//! sees the vanished scalar when it downloads `sc` at the end of the iteration and
//! reports the breakdown. Launch mapping and safety contract as in `blas1`.

use super::prelude::{
    global_id, grid_threads, store_block_partial, store_block_partials, DeviceScalar,
};
use crate::scalar::{guarded_quotient, KScalar, C32, C64};
use crate::slots::bicgstab::{R0V, RHO, SNORM2, TS, TT};

macro_rules! bicgstab {
    ($t:ty, $r:ty, $p:ident, $s:ident, $tt:ident, $xr:ident) => {
        /// p_i = r_i (first iteration) or r_i + beta (p_i - omega v_i) with the
        /// previous iteration's omega = ts / tt and beta = rho tt / (r0v ts).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $p(
            n: usize,
            first: u32,
            sc: *const $t,
            r: *const $t,
            v: *const $t,
            p: *mut $t,
        ) {
            let (rho, r0v, ts, tt) = (*sc.add(RHO), *sc.add(R0V), *sc.add(TS), *sc.add(TT));
            let omega = guarded_quotient(ts, tt);
            let beta = guarded_quotient(rho * tt, r0v * ts);
            let mut i = global_id();
            while i < n {
                let ri = <$t>::ldg(r.add(i));
                *p.add(i) = if first != 0 {
                    ri
                } else {
                    ri + beta * (*p.add(i) - omega * <$t>::ldg(v.add(i)))
                };
                i += grid_threads();
            }
        }

        /// s_i = r_i - alpha v_i in place of r, alpha = rho / r0v; `partials[b]` =
        /// the sum of |s_i|^2 over block `b`'s elements (first pass of ||s||^2).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $s(
            n: usize,
            sc: *const $t,
            v: *const $t,
            r: *mut $t,
            partials: *mut $r,
        ) {
            let alpha = guarded_quotient(*sc.add(RHO), *sc.add(R0V));
            let mut acc = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let si = *r.add(i) - alpha * <$t>::ldg(v.add(i));
                *r.add(i) = si;
                acc = acc + si.abs_sqr();
                i += grid_threads();
            }
            store_block_partial(partials, acc);
        }

        /// First passes of t^H s and t^H t in one sweep: `partials[b]` and
        /// `partials[stride + b]` = block b's sums (t^H t with a zero imaginary
        /// part).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $tt(
            n: usize,
            t: *const $t,
            s: *const $t,
            partials: *mut $t,
            stride: usize,
        ) {
            let mut ts = <$t>::zero();
            let mut tt = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let ti = <$t>::ldg(t.add(i));
                ts = ts + ti.conj() * <$t>::ldg(s.add(i));
                tt = tt + ti.abs_sqr();
                i += grid_threads();
            }
            store_block_partials([ts, <$t>::from_real(tt)], 2, partials, stride);
        }

        /// x_i += alpha phat_i + omega shat_i and r_i = s_i - omega t_i (r holds s),
        /// with alpha = rho / r0v and omega = ts / tt, or omega = 0 when
        /// ||s||^2 <= `target2` (s already meets the tolerance). `s_in_r != 0`:
        /// shat is s itself (no preconditioner), read from r (and `shat` unused).
        /// With the update, the first passes of the next rho = r0^H r and of
        /// ||r||^2: `partials[b]` and `partials[stride + b]` = block b's sums.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $xr(
            n: usize,
            sc: *const $t,
            target2: $r,
            phat: *const $t,
            shat: *const $t,
            s_in_r: u32,
            t: *const $t,
            r0: *const $t,
            x: *mut $t,
            r: *mut $t,
            partials: *mut $t,
            stride: usize,
        ) {
            let alpha = guarded_quotient(*sc.add(RHO), *sc.add(R0V));
            let omega = if (*sc.add(SNORM2)).re() <= target2 {
                <$t>::zero()
            } else {
                guarded_quotient(*sc.add(TS), *sc.add(TT))
            };
            let mut rho = <$t>::zero();
            let mut rr = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let si = *r.add(i);
                let shi = if s_in_r != 0 {
                    si
                } else {
                    <$t>::ldg(shat.add(i))
                };
                *x.add(i) = *x.add(i) + alpha * <$t>::ldg(phat.add(i)) + omega * shi;
                let ri = si - omega * <$t>::ldg(t.add(i));
                *r.add(i) = ri;
                rho = rho + <$t>::ldg(r0.add(i)).conj() * ri;
                rr = rr + ri.abs_sqr();
                i += grid_threads();
            }
            store_block_partials([rho, <$t>::from_real(rr)], 2, partials, stride);
        }
    };
}

bicgstab!(
    f32,
    f32,
    bicgstab_p_f32,
    bicgstab_s_f32,
    bicgstab_tt_f32,
    bicgstab_xr_f32
);
bicgstab!(
    f64,
    f64,
    bicgstab_p_f64,
    bicgstab_s_f64,
    bicgstab_tt_f64,
    bicgstab_xr_f64
);
bicgstab!(
    C32,
    f32,
    bicgstab_p_c32,
    bicgstab_s_c32,
    bicgstab_tt_c32,
    bicgstab_xr_c32
);
bicgstab!(
    C64,
    f64,
    bicgstab_p_c64,
    bicgstab_s_c64,
    bicgstab_tt_c64,
    bicgstab_xr_c64
);
