//! Fused steps of BiCGSTAB and CG whose scalars stay on the device.
//!
//! The method keeps its scalars in a small device array `sc` (slots in
//! [`crate::slots::bicgstab`]; see `gpuq_krylov::bicgstab` for the algorithm): the kernels read the coefficients they need from it, so no scalar
//! crosses the bus inside an iteration. A vanished denominator gives a zero
//! coefficient ([`guarded_quotient`]), which leaves the vectors unchanged; the host
//! sees the vanished scalar when it downloads `sc` at the end of the iteration and
//! reports the breakdown. Launch mapping and safety contract as in `blas1`.

use super::prelude::{global_id, grid_threads, reduce_grid, DeviceScalar};
use crate::scalar::{cg_alpha, guarded_quotient, KScalar, C32, C64};
use crate::slots::bicgstab::{R0V, RHO, RNORM2, SNORM2, TS, TT};
use crate::slots::cg;

macro_rules! bicgstab {
    ($t:ty, $r:ty, $p:ident, $s:ident, $tt:ident, $xr:ident) => {
        /// p_i = r_i + beta (p_i - omega v_i) with the previous iteration's
        /// omega = ts / tt and beta = rho tt / (r0v ts) (both zero in a fresh
        /// scalar array, where p and v are zero too: p = r); and, unless `d` is
        /// null, dp_i = d_i p_i (a diagonal preconditioner's M p).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $p(
            n: usize,
            sc: *const $t,
            r: *const $t,
            v: *const $t,
            p: *mut $t,
            d: *const $t,
            dp: *mut $t,
        ) {
            let (rho, r0v, ts, tt) = (*sc.add(RHO), *sc.add(R0V), *sc.add(TS), *sc.add(TT));
            let omega = guarded_quotient(ts, tt);
            let beta = guarded_quotient(rho * tt, r0v * ts);
            let mut i = global_id();
            while i < n {
                let (ri, vi, pi) = (<$t>::ldg(r.add(i)), <$t>::ldg(v.add(i)), *p.add(i));
                let di = if d.is_null() {
                    <$t>::zero()
                } else {
                    <$t>::ldg(d.add(i))
                };
                let pi = ri + beta * (pi - omega * vi);
                *p.add(i) = pi;
                if !d.is_null() {
                    *dp.add(i) = di * pi;
                }
                i += grid_threads();
            }
        }

        /// s_i = r_i - alpha v_i in place of r, alpha = rho / r0v; and, unless
        /// `d` is null, ds_i = d_i s_i (a diagonal preconditioner's M s).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $s(
            n: usize,
            sc: *const $t,
            v: *const $t,
            r: *mut $t,
            d: *const $t,
            ds: *mut $t,
        ) {
            let alpha = guarded_quotient(*sc.add(RHO), *sc.add(R0V));
            let mut i = global_id();
            while i < n {
                let (vi, ri) = (<$t>::ldg(v.add(i)), *r.add(i));
                let di = if d.is_null() {
                    <$t>::zero()
                } else {
                    <$t>::ldg(d.add(i))
                };
                let si = ri - alpha * vi;
                *r.add(i) = si;
                if !d.is_null() {
                    *ds.add(i) = di * si;
                }
                i += grid_threads();
            }
        }

        /// `sc[TS]` = t^H s, `sc[TT]` = t^H t and `sc[SNORM2]` = s^H s (zero
        /// imaginary parts) in one sweep, a single-launch reduction of three
        /// values (`partials` holds three segments of `stride`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $tt(
            n: usize,
            t: *const $t,
            s: *const $t,
            sc: *mut $t,
            partials: *mut $t,
            stride: usize,
            counter: *mut u32,
        ) {
            let mut ts = <$t>::zero();
            let (mut tt, mut ss) = (<$r>::zero(), <$r>::zero());
            let mut i = global_id();
            while i < n {
                let (ti, si) = (<$t>::ldg(t.add(i)), <$t>::ldg(s.add(i)));
                ts = ts + ti.conj() * si;
                tt = tt + ti.abs_sqr();
                ss = ss + si.abs_sqr();
                i += grid_threads();
            }
            let sums = [ts, <$t>::from_real(tt), <$t>::from_real(ss)];
            if let Some([ts, tt, ss]) = reduce_grid(sums, partials, stride, counter) {
                *sc.add(TS) = ts;
                *sc.add(TT) = tt;
                *sc.add(SNORM2) = ss;
            }
        }

        /// x_i = xin_i + alpha phat_i + omega shat_i and r_i = s_i - omega t_i (r holds s),
        /// with alpha = rho / r0v and omega = ts / tt, or omega = 0 when
        /// ||s||^2 <= `target2` (s already meets the tolerance). `s_in_r != 0`:
        /// shat is s itself (no preconditioner), read from r (and `shat` unused).
        /// With the update, `sc[RHO]` = r0^H r and `sc[RNORM2]` = ||r||^2 of the
        /// new r, a single-launch reduction of two values (`partials` holds two
        /// segments of `stride`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $xr(
            n: usize,
            sc: *mut $t,
            target2: $r,
            phat: *const $t,
            shat: *const $t,
            s_in_r: u32,
            t: *const $t,
            r0: *const $t,
            xin: *const $t,
            x: *mut $t,
            r: *mut $t,
            partials: *mut $t,
            stride: usize,
            counter: *mut u32,
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
                *x.add(i) = <$t>::ldg(xin.add(i)) + alpha * <$t>::ldg(phat.add(i)) + omega * shi;
                let ri = si - omega * <$t>::ldg(t.add(i));
                *r.add(i) = ri;
                rho = rho + <$t>::ldg(r0.add(i)).conj() * ri;
                rr = rr + ri.abs_sqr();
                i += grid_threads();
            }
            let sums = [rho, <$t>::from_real(rr)];
            if let Some([rho, rr]) = reduce_grid(sums, partials, stride, counter) {
                *sc.add(RHO) = rho;
                *sc.add(RNORM2) = rr;
            }
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

macro_rules! cg_steps {
    ($t:ty, $r:ty, $res:ident, $xp:ident) => {
        /// r_i = r_i - alpha q_i with alpha = `cg_alpha(sc[rho], sc[PQ])` and,
        /// unless `d` is null, z_i = d_i r_i (a diagonal preconditioner's M r);
        /// then `sc[RNORM2]` = ||r||^2 and `sc[next]` = r^H z (||r||^2 where
        /// `d` is null), a single-launch reduction of two values (`partials`
        /// holds two segments of `stride`).
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $res(
            n: usize,
            sc: *mut $t,
            rho: u32,
            next: u32,
            q: *const $t,
            r: *mut $t,
            d: *const $t,
            z: *mut $t,
            partials: *mut $t,
            stride: usize,
            counter: *mut u32,
        ) {
            let alpha = cg_alpha(*sc.add(rho as usize), *sc.add(cg::PQ));
            let mut rr = <$r>::zero();
            let mut rz = <$t>::zero();
            let mut i = global_id();
            while i < n {
                let ri = *r.add(i) - alpha * <$t>::ldg(q.add(i));
                *r.add(i) = ri;
                rr = rr + ri.abs_sqr();
                if !d.is_null() {
                    let zi = <$t>::ldg(d.add(i)) * ri;
                    *z.add(i) = zi;
                    rz = rz + ri.conj() * zi;
                }
                i += grid_threads();
            }
            if d.is_null() {
                rz = <$t>::from_real(rr);
            }
            if let Some([rr, rz]) = reduce_grid([<$t>::from_real(rr), rz], partials, stride, counter) {
                *sc.add(cg::RNORM2) = rr;
                *sc.add(next as usize) = rz;
            }
        }

        /// x_i = xin_i + alpha p_i and p_i = z_i + beta p_i, with alpha =
        /// `cg_alpha(sc[rho], sc[PQ])` and beta = sc[next] / sc[rho] (guarded);
        /// a zero alpha (a breakdown) copies x_i = xin_i, even where p holds
        /// non-finite values.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $xp(
            n: usize,
            sc: *const $t,
            rho: u32,
            next: u32,
            z: *const $t,
            p: *mut $t,
            xin: *const $t,
            x: *mut $t,
        ) {
            let old = *sc.add(rho as usize);
            let alpha = cg_alpha(old, *sc.add(cg::PQ));
            let beta = guarded_quotient(*sc.add(next as usize), old);
            let mut i = global_id();
            while i < n {
                let pi = *p.add(i);
                let xi = <$t>::ldg(xin.add(i));
                *x.add(i) = if alpha.is_zero() { xi } else { xi + alpha * pi };
                *p.add(i) = <$t>::ldg(z.add(i)) + beta * pi;
                i += grid_threads();
            }
        }
    };
}

cg_steps!(f32, f32, cg_residual_slots_f32, cg_xp_slots_f32);
cg_steps!(f64, f64, cg_residual_slots_f64, cg_xp_slots_f64);
cg_steps!(C32, f32, cg_residual_slots_c32, cg_xp_slots_c32);
cg_steps!(C64, f64, cg_residual_slots_c64, cg_xp_slots_c64);
