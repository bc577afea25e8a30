//! The fused steps of an AMG cycle: one pass over a CSR or SELL matrix that
//! writes either the residual `out = b - A x` or, given the inverse diagonal
//! `dinv`, the damped point-Jacobi iterate `out = x + omega dinv (b - A x)`;
//! a colour's Gauss-Seidel update in place; a Chebyshev start or step.
//!
//! Safety contract as for the SpMV kernels (the arrays describe a validated
//! square matrix of `nrows` rows; `b`, `x`, `dinv` and `out` hold `nrows`
//! values), and `out` aliases none of the inputs (a Jacobi sweep reads every
//! old value of x, so it cannot run in place).

use super::prelude::{global_id, grid_threads, ldg_u32, ldg_u64, DeviceScalar};
use super::spmv::{group_sum, row_sum};
use crate::amg::{CHEB_PENDING, CHEB_STEP, CHEB_X_ZERO, CHEB_ZERO_START};
use crate::scalar::{KScalar, C32, C64};

/// Row `row`'s output given its product `s = A_row x`: the residual, or with
/// `dinv` not null the Jacobi update.
///
/// # Safety
/// `row` must index `b`, `x` and (when not null) `dinv`.
#[inline(always)]
unsafe fn sweep_out<T: DeviceScalar + KScalar>(
    row: usize,
    s: T,
    omega: T,
    b: *const T,
    x: *const T,
    dinv: *const T,
) -> T {
    let r = T::ldg(b.add(row)) - s;
    if dinv.is_null() {
        r
    } else {
        T::ldg(x.add(row)) + omega * T::ldg(dinv.add(row)) * r
    }
}

/// Calls `out(row, A_row x)` for every row of the CSR matrix, `1 << lanes_log2`
/// lanes per row (as `spmv_csr`), grid-stride over rows: any grid of whole
/// warps is correct; `out` runs on the row's first lane. With `skip`, every
/// product is zero, the matrix is not read and each thread takes its own rows
/// (no lane waits on another's row).
///
/// # Safety
/// The arrays describe a validated CSR matrix of `nrows` rows whose column
/// indices are below `x`'s length.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn csr_rows<T: DeviceScalar + KScalar>(
    nrows: usize,
    lanes_log2: u32,
    row_ptr: *const u64,
    col: *const u32,
    val: *const T,
    x: *const T,
    skip: bool,
    mut out: impl FnMut(usize, T),
) {
    let g = global_id();
    if skip {
        let mut row = g;
        while row < nrows {
            out(row, T::zero());
            row += grid_threads();
        }
        return;
    }
    let sub = g & ((1usize << lanes_log2) - 1);
    let stride = grid_threads() >> lanes_log2;
    let mut row = g >> lanes_log2;
    // Uniform across the warp: every lane runs the same rounds and takes part
    // in every shuffle.
    let mut warp_row = (g & !31) >> lanes_log2;
    while warp_row < nrows {
        let mut s = T::zero();
        if row < nrows {
            let end = ldg_u64(row_ptr.add(row + 1)) as usize;
            let start = ldg_u64(row_ptr.add(row)) as usize + sub;
            s = row_sum(start, end, 1usize << lanes_log2, col, val, x);
        }
        let s = group_sum(s, lanes_log2);
        if row < nrows && sub == 0 {
            out(row, s);
        }
        row += stride;
        warp_row += stride;
    }
}

/// Calls `out(row, A_row x)` for every row of the SELL-C-sigma matrix, one
/// thread per sorted row position p, row `perm[p]` (or p when `perm` is
/// null), grid-stride. With `skip`, every product is zero and the matrix is
/// not read.
///
/// # Safety
/// The arrays come from `Sell::from_csr` of a validated matrix of `nrows`
/// rows (c > 0) whose column indices are below `x`'s length.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn sell_rows<T: DeviceScalar + KScalar>(
    nrows: usize,
    c: u32,
    slice_ptr: *const u64,
    col: *const u32,
    val: *const T,
    perm: *const u32,
    x: *const T,
    skip: bool,
    mut out: impl FnMut(usize, T),
) {
    if c == 0 {
        return; // no such matrix: the host never uploads c = 0
    }
    let mut p = global_id();
    while p < nrows {
        let acc = if skip {
            T::zero()
        } else {
            let (s, r) = ((p as u32 / c) as usize, (p as u32 % c) as usize);
            let start = ldg_u64(slice_ptr.add(s)) as usize;
            let end = ldg_u64(slice_ptr.add(s + 1)) as usize;
            row_sum(start + r, end, c as usize, col, val, x)
        };
        let row = if perm.is_null() {
            p
        } else {
            ldg_u32(perm.add(p)) as usize
        };
        out(row, acc);
        p += grid_threads();
    }
}

macro_rules! amg_sweep {
    ($t:ty, $r:ty, $csr:ident, $sell:ident) => {
        /// CSR, `1 << lanes_log2` lanes per row (as `spmv_csr`), grid-stride
        /// over rows: any grid of whole warps is correct. `out[row]` = the
        /// residual, or with `dinv` not null the Jacobi iterate with damping
        /// `omega = (ore, oim)`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $csr(
            nrows: usize,
            lanes_log2: u32,
            row_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            ore: $r,
            oim: $r,
            b: *const $t,
            x: *const $t,
            dinv: *const $t,
            out: *mut $t,
        ) {
            let omega = <$t>::from_parts(ore, oim);
            csr_rows(nrows, lanes_log2, row_ptr, col, val, x, false, |row, s| {
                *out.add(row) = sweep_out(row, s, omega, b, x, dinv);
            });
        }

        /// SELL-C-sigma, one thread per sorted row position (as `spmv_sell`);
        /// the output as for the CSR kernel, at row `perm[p]` (or `p` when
        /// `perm` is null).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sell(
            nrows: usize,
            c: u32,
            slice_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            perm: *const u32,
            ore: $r,
            oim: $r,
            b: *const $t,
            x: *const $t,
            dinv: *const $t,
            out: *mut $t,
        ) {
            let omega = <$t>::from_parts(ore, oim);
            sell_rows(nrows, c, slice_ptr, col, val, perm, x, false, |row, acc| {
                *out.add(row) = sweep_out(row, acc, omega, b, x, dinv);
            });
        }
    };
}

amg_sweep!(f32, f32, amg_sweep_csr_f32, amg_sweep_sell_f32);
amg_sweep!(f64, f64, amg_sweep_csr_f64, amg_sweep_sell_f64);
amg_sweep!(C32, f32, amg_sweep_csr_c32, amg_sweep_sell_c32);
amg_sweep!(C64, f64, amg_sweep_csr_c64, amg_sweep_sell_c64);

macro_rules! amg_gs {
    ($t:ty, $csr:ident, $sell:ident) => {
        /// One colour's Gauss-Seidel update in place, over the colour's
        /// scaled rows D^-1 S A in CSR (`1 << lanes_log2` lanes per row, as
        /// `spmv_csr`): row k updates x[i] += d b[i] - (D^-1 A)_k x with
        /// i = `sel_col[k]` and d = `sel_val[k]` (the selection D^-1 S, one
        /// entry per row). The colour's rows read only other colours'
        /// entries of x and their own, so no row reads a value another
        /// thread writes. With `zero` != 0, x is taken as zero on those rows'
        /// products (the caller zeroed it): the matrix is not read.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $csr(
            nrows: usize,
            lanes_log2: u32,
            row_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            sel_col: *const u32,
            sel_val: *const $t,
            b: *const $t,
            x: *mut $t,
            zero: u32,
        ) {
            csr_rows(
                nrows,
                lanes_log2,
                row_ptr,
                col,
                val,
                x,
                zero != 0,
                |row, s| {
                    gs_update(row, s, sel_col, sel_val, b, x);
                },
            );
        }

        /// The update of the CSR kernel over SELL-C-sigma scaled rows, one
        /// thread per sorted row position, row `perm[p]` (or `p` when `perm`
        /// is null); `zero` as there.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sell(
            nrows: usize,
            c: u32,
            slice_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            perm: *const u32,
            sel_col: *const u32,
            sel_val: *const $t,
            b: *const $t,
            x: *mut $t,
            zero: u32,
        ) {
            sell_rows(
                nrows,
                c,
                slice_ptr,
                col,
                val,
                perm,
                x,
                zero != 0,
                |row, acc| {
                    gs_update(row, acc, sel_col, sel_val, b, x);
                },
            );
        }
    };
}

/// x[i] += d b[i] - s for the scaled row `row` with product `s`, where
/// i = `sel_col[row]` and d = `sel_val[row]`.
///
/// # Safety
/// `row` must index `sel_col` and `sel_val`, and `sel_col[row]` `b` and `x`.
#[inline(always)]
unsafe fn gs_update<T: DeviceScalar + KScalar>(
    row: usize,
    s: T,
    sel_col: *const u32,
    sel_val: *const T,
    b: *const T,
    x: *mut T,
) {
    let i = ldg_u32(sel_col.add(row)) as usize;
    let xi = x.add(i);
    *xi = *xi + T::ldg(sel_val.add(row)) * T::ldg(b.add(i)) - s;
}

amg_gs!(f32, amg_gs_csr_f32, amg_gs_sell_f32);
amg_gs!(f64, amg_gs_csr_f64, amg_gs_sell_f64);
amg_gs!(C32, amg_gs_csr_c32, amg_gs_sell_c32);
amg_gs!(C64, amg_gs_csr_c64, amg_gs_sell_c64);

/// Row `row`'s part of a Chebyshev start or step given its product `s`
/// (A x for a start, A d_old for a step; zero for a start from zero):
///
/// * start: r = b - s, d_out = alpha dinv r;
/// * step: r = r - s, d_out = alpha dinv r + beta d_old, and
///   x = (x or 0) (+ d_old when pending) + d_out.
///
/// # Safety
/// `row` must index every array the flags use (`b` for a start; `src`,
/// `x` for a step; `r`, `dinv`, `d_out` always).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn cheb_out<T: DeviceScalar + KScalar>(
    row: usize,
    s: T,
    flags: u32,
    [alpha, beta]: [T; 2],
    b: *const T,
    dinv: *const T,
    src: *const T,
    r: *mut T,
    d_out: *mut T,
    x: *mut T,
) {
    let ri = if flags & CHEB_STEP == 0 {
        T::ldg(b.add(row)) - s
    } else {
        *r.add(row) - s
    };
    *r.add(row) = ri;
    let scaled = alpha * (T::ldg(dinv.add(row)) * ri);
    if flags & CHEB_STEP == 0 {
        *d_out.add(row) = scaled;
        return;
    }
    let old = T::ldg(src.add(row));
    let dn = scaled + beta * old;
    *d_out.add(row) = dn;
    let mut xv = if flags & CHEB_X_ZERO == 0 {
        *x.add(row)
    } else {
        T::zero()
    };
    if flags & CHEB_PENDING != 0 {
        xv = xv + old;
    }
    *x.add(row) = xv + dn;
}

macro_rules! amg_cheb {
    ($t:ty, $r:ty, $csr:ident, $sell:ident) => {
        /// A Chebyshev start or step ([`cheb_out`], `flags` of `CHEB_*`)
        /// over a CSR matrix, `1 << lanes_log2` lanes per row (as
        /// `spmv_csr`), grid-stride over rows. The product is A `src` (x
        /// for a start, d_old for a step); a start from zero reads no
        /// matrix. `alpha = (are, aim)`, `beta = (bre, bim)`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $csr(
            nrows: usize,
            lanes_log2: u32,
            row_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            are: $r,
            aim: $r,
            bre: $r,
            bim: $r,
            flags: u32,
            b: *const $t,
            dinv: *const $t,
            src: *const $t,
            r: *mut $t,
            d_out: *mut $t,
            x: *mut $t,
        ) {
            let coef = [<$t>::from_parts(are, aim), <$t>::from_parts(bre, bim)];
            let skip = flags & CHEB_ZERO_START != 0;
            csr_rows(nrows, lanes_log2, row_ptr, col, val, src, skip, |row, s| {
                cheb_out(row, s, flags, coef, b, dinv, src, r, d_out, x);
            });
        }

        /// The CSR kernel's update over SELL-C-sigma, one thread per sorted
        /// row position, row `perm[p]` (or `p` when `perm` is null).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sell(
            nrows: usize,
            c: u32,
            slice_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            perm: *const u32,
            are: $r,
            aim: $r,
            bre: $r,
            bim: $r,
            flags: u32,
            b: *const $t,
            dinv: *const $t,
            src: *const $t,
            r: *mut $t,
            d_out: *mut $t,
            x: *mut $t,
        ) {
            let coef = [<$t>::from_parts(are, aim), <$t>::from_parts(bre, bim)];
            let skip = flags & CHEB_ZERO_START != 0;
            sell_rows(nrows, c, slice_ptr, col, val, perm, src, skip, |row, s| {
                cheb_out(row, s, flags, coef, b, dinv, src, r, d_out, x);
            });
        }
    };
}

amg_cheb!(f32, f32, amg_cheb_csr_f32, amg_cheb_sell_f32);
amg_cheb!(f64, f64, amg_cheb_csr_f64, amg_cheb_sell_f64);
amg_cheb!(C32, f32, amg_cheb_csr_c32, amg_cheb_sell_c32);
amg_cheb!(C64, f64, amg_cheb_csr_c64, amg_cheb_sell_c64);

/// y[i] = x[i] rounded to single precision, for i < n (a complex vector is
/// 2 n reals): the input of a single-precision cycle inside a
/// double-precision solve. Grid-stride; 12 n bytes moved.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn convert_f64_f32(n: usize, x: *const f64, y: *mut f32) {
    let mut i = global_id();
    while i < n {
        *y.add(i) = f64::ldg(x.add(i)) as f32;
        i += grid_threads();
    }
}

/// y[i] = x[i] widened to double precision, for i < n (exact). Grid-stride;
/// 12 n bytes moved.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn convert_f32_f64(n: usize, x: *const f32, y: *mut f64) {
    let mut i = global_id();
    while i < n {
        *y.add(i) = f32::ldg(x.add(i)) as f64;
        i += grid_threads();
    }
}
