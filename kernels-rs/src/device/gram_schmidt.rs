//! Classical Gram-Schmidt against a whole GMRES basis in four launches per pass:
//! `gs_dots_*` is the first pass of the inner products h_j = v_j^H w for every
//! basis vector and of ||w||^2 (one partial per block and value),
//! `reduce_segments_*` their second pass (into a small device array `coef`), and
//! `gs_subtract_*` the update w = w - sum_j h_j v_j, reading h from `coef` and
//! writing the first pass of the new ||w||^2. The basis vectors' addresses come
//! from a device table (`table[j]`, j < k), so one launch covers any k and no
//! coefficient crosses the bus. Launch mapping and safety contract as in `blas1`.

use super::prelude::{
    global_id, grid_threads, lane, ldg_u64, store_block_partial, store_block_partials,
    sync_threads, warp_total, DeviceScalar,
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

macro_rules! gram_schmidt {
    ($t:ty, $dots:ident, $segments:ident, $subtract:ident) => {
        /// First pass of h_j = v_j^H w for j < k and of h_k = w^H w = ||w||^2:
        /// `partials[j * stride + b]` = block b's sum for j <= k (thread t adds
        /// rows t, t + grid, ... in order). The k + 1 values go in chunks of
        /// eight, each chunk one sweep over w (which stays in L2) and its vectors.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $dots(
            n: usize,
            k: u32,
            table: *const u64,
            w: *const $t,
            partials: *mut $t,
            stride: usize,
        ) {
            let total = k + 1;
            let mut c = 0u32;
            while c < total {
                let kc = (total - c).min(GS_CHUNK as u32);
                // Vector j of the chunk: table[c + j], or w itself for index k.
                let mut v = [w; GS_CHUNK];
                let mut set = |j: usize| {
                    let g = c + j as u32;
                    if (j as u32) < kc && g < k {
                        v[j] = ldg_u64(table.add(g as usize)) as *const $t;
                    }
                };
                unroll8!(set);
                let mut acc = [<$t>::zero(); GS_CHUNK];
                let mut i = global_id();
                while i < n {
                    let wi = <$t>::ldg(w.add(i));
                    // Called with constant j only (unrolled), so acc and v stay
                    // in registers.
                    let mut add = |j: usize| {
                        if (j as u32) < kc {
                            acc[j] = acc[j] + <$t>::ldg(v[j].add(i)).conj() * wi;
                        }
                    };
                    unroll8!(add);
                    i += grid_threads();
                }
                store_block_partials(acc, kc, partials.add(c as usize * stride), stride);
                // The next chunk reuses the block scratch.
                sync_threads();
                c += GS_CHUNK as u32;
            }
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

        /// w_i = w_i - sum_{j < k} coef_j v_j[i] (terms in order of j), with
        /// v_j at `table[j]`; `partials[b]` = block b's sum of |w_i|^2 after the
        /// update (as a scalar with zero imaginary part).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $subtract(
            n: usize,
            k: u32,
            table: *const u64,
            coef: *const $t,
            w: *mut $t,
            partials: *mut $t,
        ) {
            let mut norm = <$t>::zero().re();
            let mut i = global_id();
            while i < n {
                let mut wi = *w.add(i);
                let mut c = 0u32;
                while c < k {
                    let mut sub = |j: usize| {
                        let g = c + j as u32;
                        if g < k {
                            let v = ldg_u64(table.add(g as usize)) as *const $t;
                            wi = wi - <$t>::ldg(coef.add(g as usize)) * <$t>::ldg(v.add(i));
                        }
                    };
                    unroll8!(sub);
                    c += GS_CHUNK as u32;
                }
                *w.add(i) = wi;
                norm = norm + wi.abs_sqr();
                i += grid_threads();
            }
            store_block_partial(partials, <$t>::from_real(norm));
        }
    };
}

gram_schmidt!(f32, gs_dots_f32, reduce_segments_f32, gs_subtract_f32);
gram_schmidt!(f64, gs_dots_f64, reduce_segments_f64, gs_subtract_f64);
gram_schmidt!(C32, gs_dots_c32, reduce_segments_c32, gs_subtract_c32);
gram_schmidt!(C64, gs_dots_c64, reduce_segments_c64, gs_subtract_c64);
