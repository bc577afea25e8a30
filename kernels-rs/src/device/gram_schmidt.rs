//! Classical Gram-Schmidt against up to [`crate::GS_CHUNK`] basis vectors per
//! launch, for GMRES: `gs_dots_*` is the first pass of the inner products
//! h_j = v_j^H w (one partial per block and vector), `reduce_segments_*` their
//! second pass, and `gs_subtract_*` the update w = w - sum_j h_j v_j. The basis
//! vectors arrive as eight pointer arguments (`k` of them used; the others may be
//! null and are never read), the coefficients of the update as eight `(re, im)`
//! argument pairs, so no pointer table or coefficient crosses the bus. Launch
//! mapping and safety contract as in `blas1`.

use super::prelude::{global_id, grid_threads, lane, store_block_partials, warp_sum, DeviceScalar};
use crate::scalar::{KScalar, C32, C64};
use crate::GS_CHUNK;

const _: () = assert!(GS_CHUNK == 8, "the kernels take eight vector arguments");

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
    ($t:ty, $r:ty, $dots:ident, $segments:ident, $subtract:ident) => {
        /// First pass of h_j = v_j^H w for j < k <= 8: `partials[j * stride + b]`
        /// = block b's sum (thread t adds rows t, t + grid, ... in order).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $dots(
            n: usize,
            k: u32,
            v0: *const $t,
            v1: *const $t,
            v2: *const $t,
            v3: *const $t,
            v4: *const $t,
            v5: *const $t,
            v6: *const $t,
            v7: *const $t,
            w: *const $t,
            partials: *mut $t,
            stride: usize,
        ) {
            let v = [v0, v1, v2, v3, v4, v5, v6, v7];
            let mut acc = [<$t>::zero(); GS_CHUNK];
            let mut i = global_id();
            while i < n {
                let wi = <$t>::ldg(w.add(i));
                // Called with constant j only (unrolled), so acc and v stay in
                // registers.
                let mut add = |j: usize| {
                    if (j as u32) < k {
                        acc[j] = acc[j] + <$t>::ldg(v[j].add(i)).conj() * wi;
                    }
                };
                unroll8!(add);
                i += grid_threads();
            }
            store_block_partials(acc, k, partials, stride);
        }

        /// Second pass, launched as `k` blocks of 32 threads: block j writes the
        /// sum of `partials[j * m .. (j + 1) * m]` to `out[j]` (lane l adds
        /// elements l, l + 32, ... in order, then the warp sums by shuffles).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $segments(m: usize, partials: *const $t, out: *mut $t) {
            let j = core::arch::nvptx::_block_idx_x() as usize;
            let seg = partials.add(j * m);
            let mut s = <$t>::zero();
            let mut i = lane() as usize;
            while i < m {
                s = s + *seg.add(i);
                i += 32;
            }
            let s = warp_sum(s);
            if lane() == 0 {
                *out.add(j) = s;
            }
        }

        /// w_i = w_i - sum_{j < k} h_j v_j[i] for k <= 8, h_j = (hj_re, hj_im).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $subtract(
            n: usize,
            k: u32,
            v0: *const $t,
            v1: *const $t,
            v2: *const $t,
            v3: *const $t,
            v4: *const $t,
            v5: *const $t,
            v6: *const $t,
            v7: *const $t,
            h0: $r,
            g0: $r,
            h1: $r,
            g1: $r,
            h2: $r,
            g2: $r,
            h3: $r,
            g3: $r,
            h4: $r,
            g4: $r,
            h5: $r,
            g5: $r,
            h6: $r,
            g6: $r,
            h7: $r,
            g7: $r,
            w: *mut $t,
        ) {
            let v = [v0, v1, v2, v3, v4, v5, v6, v7];
            let h = [
                <$t>::from_parts(h0, g0),
                <$t>::from_parts(h1, g1),
                <$t>::from_parts(h2, g2),
                <$t>::from_parts(h3, g3),
                <$t>::from_parts(h4, g4),
                <$t>::from_parts(h5, g5),
                <$t>::from_parts(h6, g6),
                <$t>::from_parts(h7, g7),
            ];
            let mut i = global_id();
            while i < n {
                let mut wi = *w.add(i);
                let mut sub = |j: usize| {
                    if (j as u32) < k {
                        wi = wi - h[j] * <$t>::ldg(v[j].add(i));
                    }
                };
                unroll8!(sub);
                *w.add(i) = wi;
                i += grid_threads();
            }
        }
    };
}

gram_schmidt!(f32, f32, gs_dots_f32, reduce_segments_f32, gs_subtract_f32);
gram_schmidt!(f64, f64, gs_dots_f64, reduce_segments_f64, gs_subtract_f64);
gram_schmidt!(C32, f32, gs_dots_c32, reduce_segments_c32, gs_subtract_c32);
gram_schmidt!(C64, f64, gs_dots_c64, reduce_segments_c64, gs_subtract_c64);
