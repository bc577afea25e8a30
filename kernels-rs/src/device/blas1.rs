//! BLAS-1 entry points.
//!
//! Launch mapping: one-dimensional grids of [`crate::BLOCK_THREADS`] threads; every
//! kernel walks its vector with a grid-stride loop (`i = global_id; i < n; i +=
//! grid_threads`), so any grid size is correct and the host picks it from the
//! device properties. Scalars arrive as `(re, im)` pairs of the real type (`im` is
//! ignored for real kernels).
//!
//! Reductions take one launch and are deterministic: thread `t` accumulates
//! elements `t + k * grid_threads` in order of `k`, each block sums its threads by
//! fixed shuffle trees and leaves one partial, and the last block to finish sums
//! the partials in a fixed order and writes the result
//! ([`super::prelude::reduce_grid`]). For a given grid size the same input gives
//! the same bits on every run.
//!
//! Safety contract of every entry point: each pointer is valid device memory for
//! the `n` elements the kernel touches (`partials` for one element per block of the
//! grid, `counter` a zero `u32` no concurrent kernel uses, `out` one element), and
//! output buffers do not alias inputs unless the kernel says so.

use super::prelude::{global_id, grid_threads, reduce_grid, DeviceScalar};
use crate::scalar::{axpby as axpby_item, KScalar, C32, C64};

/// This thread's share of a dot product: the sum, in order of i, of conj(x_i)
/// y_i (or x_i y_i) over `i = global_id + k grid_threads < n`, two terms (four
/// loads) in flight; the unrolling does not change the bits.
///
/// # Safety
/// `x` and `y` must be valid for `n` reads.
#[inline(always)]
pub(super) unsafe fn dot_terms<T: DeviceScalar + KScalar>(
    n: usize,
    x: *const T,
    y: *const T,
    conjugate: bool,
) -> T {
    let term = |i: usize| {
        let xi = T::ldg(x.add(i));
        let xi = if conjugate { xi.conj() } else { xi };
        xi * T::ldg(y.add(i))
    };
    let t = grid_threads();
    let mut s = T::zero();
    let mut i = global_id();
    while i + t < n {
        let (a, b) = (term(i), term(i + t));
        s = s + a + b;
        i += 2 * t;
    }
    while i < n {
        s = s + term(i);
        i += t;
    }
    s
}

/// This thread's share of a squared norm: the sum, in order of i, of |x_i|^2
/// over `i = global_id + k grid_threads < n`, four loads in flight (eight
/// measured slower at 10^7 and 10^8 on the H100); the unrolling does not change
/// the bits.
///
/// # Safety
/// `x` must be valid for `n` reads.
#[inline(always)]
pub(super) unsafe fn squared_norm_terms<T: DeviceScalar + KScalar>(
    n: usize,
    x: *const T,
) -> T::Real {
    let term = |i: usize| T::ldg(x.add(i)).abs_sqr();
    let t = grid_threads();
    let mut s = T::Real::zero();
    let mut i = global_id();
    while i + 3 * t < n {
        let (a, b, c, d) = (term(i), term(i + t), term(i + 2 * t), term(i + 3 * t));
        s = s + a + b + c + d;
        i += 4 * t;
    }
    while i < n {
        s = s + term(i);
        i += t;
    }
    s
}

macro_rules! blas1 {
    ($t:ty, $r:ty,
     $fill:ident, $copy:ident, $scal:ident, $axpy:ident, $axpby:ident, $mul:ident,
     $dot:ident, $nrm:ident, $cgr:ident, $cgxp:ident) => {
        /// y_i = value for i < n.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $fill(n: usize, re: $r, im: $r, y: *mut $t) {
            let v = <$t>::from_parts(re, im);
            let mut i = global_id();
            while i < n {
                *y.add(i) = v;
                i += grid_threads();
            }
        }

        /// y_i = x_i for i < n.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $copy(n: usize, x: *const $t, y: *mut $t) {
            let mut i = global_id();
            while i < n {
                *y.add(i) = <$t>::ldg(x.add(i));
                i += grid_threads();
            }
        }

        /// x_i = alpha x_i for i < n.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $scal(n: usize, re: $r, im: $r, x: *mut $t) {
            let a = <$t>::from_parts(re, im);
            let mut i = global_id();
            while i < n {
                *x.add(i) = a * *x.add(i);
                i += grid_threads();
            }
        }

        /// y_i = alpha x_i + y_i for i < n.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $axpy(
            n: usize,
            re: $r,
            im: $r,
            x: *const $t,
            y: *mut $t,
        ) {
            let a = <$t>::from_parts(re, im);
            let mut i = global_id();
            while i < n {
                *y.add(i) = a * <$t>::ldg(x.add(i)) + *y.add(i);
                i += grid_threads();
            }
        }

        /// y_i = alpha x_i + beta y_i for i < n.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $axpby(
            n: usize,
            are: $r,
            aim: $r,
            x: *const $t,
            bre: $r,
            bim: $r,
            y: *mut $t,
        ) {
            let a = <$t>::from_parts(are, aim);
            let b = <$t>::from_parts(bre, bim);
            let mut i = global_id();
            while i < n {
                *y.add(i) = axpby_item(a, <$t>::ldg(x.add(i)), b, *y.add(i));
                i += grid_threads();
            }
        }

        /// z_i = x_i y_i for i < n (z may alias neither x nor y).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $mul(n: usize, x: *const $t, y: *const $t, z: *mut $t) {
            let mut i = global_id();
            while i < n {
                *z.add(i) = <$t>::ldg(x.add(i)) * <$t>::ldg(y.add(i));
                i += grid_threads();
            }
        }

        /// `*out` = the sum of conj(x_i) y_i (`conjugate != 0`) or x_i y_i.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $dot(
            n: usize,
            x: *const $t,
            y: *const $t,
            conjugate: u32,
            partials: *mut $t,
            counter: *mut u32,
            out: *mut $t,
        ) {
            let s = dot_terms(n, x, y, conjugate != 0);
            if let Some([s]) = reduce_grid([s], partials, 0, counter) {
                *out = s;
            }
        }

        /// `*out` = the sum of |x_i|^2.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $nrm(
            n: usize,
            x: *const $t,
            partials: *mut $r,
            counter: *mut u32,
            out: *mut $r,
        ) {
            let s = squared_norm_terms(n, x);
            if let Some([s]) = reduce_grid([s], partials, 0, counter) {
                *out = s;
            }
        }

        /// Fused CG residual update: r_i = r_i - alpha q_i, and `*out` = ||r||^2
        /// of the new r. One pass: 3 n element moves instead of the 4 n of an
        /// axpy and a norm.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $cgr(
            n: usize,
            re: $r,
            im: $r,
            q: *const $t,
            r: *mut $t,
            partials: *mut $r,
            counter: *mut u32,
            out: *mut $r,
        ) {
            let a = <$t>::from_parts(re, im);
            let mut s = <$r>::zero();
            let mut i = global_id();
            while i < n {
                let ri = *r.add(i) - a * <$t>::ldg(q.add(i));
                *r.add(i) = ri;
                s = s + ri.abs_sqr();
                i += grid_threads();
            }
            if let Some([s]) = reduce_grid([s], partials, 0, counter) {
                *out = s;
            }
        }

        /// Fused CG direction update: x_i = x_i + alpha p_i, then p_i = z_i + beta p_i.
        /// One pass: 5 n element moves instead of the 6 n of an axpy and an axpby.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $cgxp(
            n: usize,
            are: $r,
            aim: $r,
            bre: $r,
            bim: $r,
            z: *const $t,
            p: *mut $t,
            x: *mut $t,
        ) {
            let a = <$t>::from_parts(are, aim);
            let b = <$t>::from_parts(bre, bim);
            let mut i = global_id();
            while i < n {
                let pi = *p.add(i);
                *x.add(i) = *x.add(i) + a * pi;
                *p.add(i) = <$t>::ldg(z.add(i)) + b * pi;
                i += grid_threads();
            }
        }
    };
}

blas1!(
    f32,
    f32,
    fill_f32,
    copy_f32,
    scal_f32,
    axpy_f32,
    axpby_f32,
    mul_f32,
    dot_f32,
    squared_norm_f32,
    cg_residual_f32,
    cg_xp_f32
);
blas1!(
    f64,
    f64,
    fill_f64,
    copy_f64,
    scal_f64,
    axpy_f64,
    axpby_f64,
    mul_f64,
    dot_f64,
    squared_norm_f64,
    cg_residual_f64,
    cg_xp_f64
);
blas1!(
    C32,
    f32,
    fill_c32,
    copy_c32,
    scal_c32,
    axpy_c32,
    axpby_c32,
    mul_c32,
    dot_c32,
    squared_norm_c32,
    cg_residual_c32,
    cg_xp_c32
);
blas1!(
    C64,
    f64,
    fill_c64,
    copy_c64,
    scal_c64,
    axpy_c64,
    axpby_c64,
    mul_c64,
    dot_c64,
    squared_norm_c64,
    cg_residual_c64,
    cg_xp_c64
);
