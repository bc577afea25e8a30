//! GMRES's Gram-Schmidt against its whole basis, delayed classical Gram-Schmidt
//! with re-orthogonalisation (DCGS2; see `gpuq_krylov::gmres`): one sweep over
//! the basis for every inner product of a step (`gs_dots_*`, then
//! `reduce_segments_*` for their sums and `gs_coef_*` for the new vector's
//! norm, by Pythagoras, and its inner product with the next), one sweep that
//! writes the new basis vector and the next one to orthogonalise
//! (`gs_update_*`), and one that combines the basis for the solution's update
//! (`gs_combine_*`). The basis
//! vectors' addresses come from a device table (`table[g]`, g < k), so one
//! launch covers any k, and the coefficients come from a small device array.
//! Launch mapping and safety contract as in `blas1`.

use super::prelude::{
    global_id, grid_threads, lane, ldg_u64, store_block_partials, warp_sum, warp_total, DeviceReal,
    DeviceScalar,
};
use crate::scalar::{KScalar, C32, C64};
use crate::GS_CHUNK;

const _: () = assert!(GS_CHUNK == 8, "the kernels unroll eight vectors");

/// Calls `f(0)`, ..., `f(7)`: an unrolled loop over the eight vectors of a
/// chunk, so that arrays indexed by the vector stay in registers.
macro_rules! unroll8 {
    ($f:ident) => {
        $f(0);
        $f(1);
        $f(2);
        $f(3);
        $f(4);
        $f(5);
        $f(6);
        $f(7);
    };
}

/// Element `i` of the basis vectors `table[c..c + 8]` that are below `k` (zero
/// for the others): eight loads in flight, constant indices, so the array stays
/// in registers.
///
/// # Safety
/// `table` must hold `k` addresses of vectors with more than `i` elements.
#[inline(always)]
unsafe fn chunk_at<T: DeviceScalar + KScalar>(
    table: *const u64,
    c: u32,
    k: u32,
    i: usize,
) -> [T; GS_CHUNK] {
    let mut vals = [T::zero(); GS_CHUNK];
    let mut load = |j: usize| {
        let g = c + j as u32;
        if g < k {
            let v = ldg_u64(table.add(g as usize)) as *const T;
            vals[j] = T::ldg(v.add(i));
        }
    };
    unroll8!(load);
    vals
}

macro_rules! gram_schmidt {
    ($t:ty, $r:ty, $dots:ident, $segments:ident, $coef:ident, $update:ident, $combine:ident) => {
        /// The inner products of one step against V = [table[0..k], u]:
        /// `partials[g * stride + b]` = block b's sum of conj(V_g) u and, when
        /// `has_z` is set, `partials[(k + 1 + g) * stride + b]` = its sum of
        /// conj(V_g) z, for g <= k. A two-dimensional grid: `blockIdx.y` is the
        /// chunk of eight vectors; `blockIdx.x` = 2 b + side (b + side without
        /// z) picks the right-hand side (u or z) and the rows, which block b
        /// walks grid-stride (`stride` blocks); neighbouring blocks read the
        /// same vectors, so the second read comes from L2. Thread t adds its
        /// rows in order, so the bits depend only on the inputs and the grid.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $dots(
            n: usize,
            k: u32,
            table: *const u64,
            u: *const $t,
            z: *const $t,
            has_z: u32,
            partials: *mut $t,
            stride: usize,
        ) {
            let kv = k + 1;
            let c = core::arch::nvptx::_block_idx_y() * GS_CHUNK as u32;
            let kc = (kv - c).min(GS_CHUNK as u32);
            let bx = core::arch::nvptx::_block_idx_x() as usize;
            let sides = 1 + (has_z != 0) as usize;
            let (b, side) = (bx / sides, bx % sides);
            let w = if side == 0 { u } else { z };
            // Vector j of the chunk: table[c + j], or u itself for index k.
            let mut v = [u; GS_CHUNK];
            let mut set = |j: usize| {
                let g = c + j as u32;
                if (j as u32) < kc && g < k {
                    v[j] = ldg_u64(table.add(g as usize)) as *const $t;
                }
            };
            unroll8!(set);
            let mut acc = [<$t>::zero(); GS_CHUNK];
            let threads = crate::BLOCK_THREADS as usize;
            let rows = stride * threads;
            let mut i = b * threads + core::arch::nvptx::_thread_idx_x() as usize;
            while i < n {
                // Every load of the row first, then the products (called with
                // constant j only, so the arrays stay in registers).
                let wi = <$t>::ldg(w.add(i));
                let mut vals = [<$t>::zero(); GS_CHUNK];
                let mut load = |j: usize| {
                    if (j as u32) < kc {
                        vals[j] = <$t>::ldg(v[j].add(i));
                    }
                };
                unroll8!(load);
                let mut add = |j: usize| {
                    if (j as u32) < kc {
                        acc[j] = acc[j] + vals[j].conj() * wi;
                    }
                };
                unroll8!(add);
                i += rows;
            }
            let segment = side * kv as usize + c as usize;
            store_block_partials(acc, kc, partials.add(segment * stride), stride, b);
        }

        /// Second pass, launched as one block of 32 threads per segment: block j
        /// writes the sum of `partials[j * m .. (j + 1) * m]` to `out[j]` (lane l
        /// adds elements l, l + 32, ... in order, then the warp sums by shuffles).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $segments(m: usize, partials: *const $t, out: *mut $t) {
            let j = core::arch::nvptx::_block_idx_x() as usize;
            let s = warp_total(m, partials.add(j * m));
            if lane() == 0 {
                *out.add(j) = s;
            }
        }

        /// The coefficients of one step from its inner products, one warp: with
        /// `dots[g]` = V_g^H u and `dots[k + 1 + g]` = V_g^H z (g <= k, V_k = u),
        /// s_g = `dots[g]` and t_g = V_g^H z for g < k, writes `extra[1]` = rho
        /// = sqrt(u^H u - ||s||^2) (zero when that is not positive: u lies in the
        /// basis' span) and, when `has_z` is set, `extra[0]` = (u^H z - s^H t) /
        /// rho = q^H z for the new basis vector q = (u - sum_g s_g V_g) / rho
        /// (lane l adds the terms g = l, l + 32, ... in order, then the warp
        /// sums by shuffles).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $coef(
            k: u32,
            has_z: u32,
            dots: *const $t,
            extra: *mut $t,
        ) {
            let kk = k as usize;
            let t = dots.add(kk + 1);
            let mut ss = <$r>::zero();
            let mut st = <$t>::zero();
            let mut g = lane() as usize;
            while g < kk {
                let sg = *dots.add(g);
                ss = ss + sg.abs_sqr();
                if has_z != 0 {
                    st = st + sg.conj() * *t.add(g);
                }
                g += 32;
            }
            let ss = warp_sum(ss);
            let st = warp_sum(st);
            if lane() == 0 {
                let rho2 = (*dots.add(kk)).re() - ss;
                let rho = if rho2 > <$r>::zero() {
                    rho2.sqrt_rn()
                } else {
                    <$r>::zero()
                };
                let tk = if has_z != 0 && rho > <$r>::zero() {
                    (*t.add(kk) - st) * <$t>::from_real(1.0 / rho)
                } else {
                    <$t>::zero()
                };
                *extra = tk;
                *extra.add(1) = <$t>::from_real(rho);
            }
        }

        /// One step's update, with V_g = `table[g]` (g < k), s_g = `s[g]`, t_g =
        /// `t[g]`, t_k = `extra[0]` and rho = `extra[1]` (see the coefficient
        /// kernel): q = (u - sum_g s_g V_g) / rho, written to `q`, and u = (z -
        /// sum_g t_g V_g - t_k q) / rho in place (terms in order of g; a zero
        /// rho gives zero vectors). Moves k + 4 vectors.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $update(
            n: usize,
            k: u32,
            table: *const u64,
            s: *const $t,
            t: *const $t,
            extra: *const $t,
            u: *mut $t,
            z: *const $t,
            q: *mut $t,
        ) {
            let kk = k as usize;
            let tk = <$t>::ldg(extra);
            let rho = <$t>::ldg(extra.add(1)).re();
            let inv_rho = <$t>::from_real(if rho > <$r>::zero() {
                1.0 / rho
            } else {
                <$r>::zero()
            });
            let mut i = global_id();
            while i < n {
                let mut qi = *u.add(i);
                let mut ui = <$t>::ldg(z.add(i));
                let mut c = 0u32;
                while c < k {
                    // The chunk's loads first, then the products in order of g.
                    let vals = chunk_at::<$t>(table, c, k, i);
                    let mut sub = |j: usize| {
                        let g = (c + j as u32) as usize;
                        if g < kk {
                            qi = qi - <$t>::ldg(s.add(g)) * vals[j];
                            ui = ui - <$t>::ldg(t.add(g)) * vals[j];
                        }
                    };
                    unroll8!(sub);
                    c += GS_CHUNK as u32;
                }
                let qi = qi * inv_rho;
                *q.add(i) = qi;
                *u.add(i) = (ui - tk * qi) * inv_rho;
                i += grid_threads();
            }
        }

        /// w = sum_{g < k} coef_g V_g with V_g = `table[g]` (terms in order of
        /// g): the solution's update from the basis. Moves k + 1 vectors.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $combine(
            n: usize,
            k: u32,
            table: *const u64,
            coef: *const $t,
            w: *mut $t,
        ) {
            let mut i = global_id();
            while i < n {
                let mut wi = <$t>::zero();
                let mut c = 0u32;
                while c < k {
                    // The chunk's loads first, then the products in order of g.
                    let vals = chunk_at::<$t>(table, c, k, i);
                    let mut add = |j: usize| {
                        let g = c + j as u32;
                        if g < k {
                            wi = wi + <$t>::ldg(coef.add(g as usize)) * vals[j];
                        }
                    };
                    unroll8!(add);
                    c += GS_CHUNK as u32;
                }
                *w.add(i) = wi;
                i += grid_threads();
            }
        }
    };
}

gram_schmidt!(
    f32,
    f32,
    gs_dots_f32,
    reduce_segments_f32,
    gs_coef_f32,
    gs_update_f32,
    gs_combine_f32
);
gram_schmidt!(
    f64,
    f64,
    gs_dots_f64,
    reduce_segments_f64,
    gs_coef_f64,
    gs_update_f64,
    gs_combine_f64
);
gram_schmidt!(
    C32,
    f32,
    gs_dots_c32,
    reduce_segments_c32,
    gs_coef_c32,
    gs_update_c32,
    gs_combine_c32
);
gram_schmidt!(
    C64,
    f64,
    gs_dots_c64,
    reduce_segments_c64,
    gs_coef_c64,
    gs_update_c64,
    gs_combine_c64
);
