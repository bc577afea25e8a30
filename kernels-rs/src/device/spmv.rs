//! Sparse matrix-vector products y = alpha A x + beta y.
//!
//! Scalars arrive as `(re, im)` pairs of the real type; `beta_zero != 0` means y is
//! only written, never read. Safety contract: the format arrays are valid device
//! memory describing a matrix whose column indices are below `x`'s length and whose
//! rows are below `y`'s length (the host validated it as a `Csr` before upload), and
//! `y` aliases none of the inputs.

use super::prelude::{
    global_id, grid_threads, ldg_stream_u32, ldg_u32, ldg_u64, reduce_grid, DeviceScalar,
};
use crate::scalar::{spmv_out, KScalar, C32, C64};

/// The sum of `val[q] * x[col[q]]` over `q = start, start + step, ... < end`,
/// added one term at a time in order of q, with four entries' loads in flight
/// (a thread's column index, then the gathered x, would otherwise be two
/// dependent memory round trips per entry). The matrix is read once, with
/// evict-first loads, so that x and the method's other vectors stay in L2.
///
/// # Safety
/// The entries' column indices must be below `x`'s length, and every `q` a
/// valid index of `col` and `val`.
#[inline(always)]
pub(super) unsafe fn row_sum<T: DeviceScalar + KScalar>(
    start: usize,
    end: usize,
    step: usize,
    col: *const u32,
    val: *const T,
    x: *const T,
) -> T {
    let mut acc = T::zero();
    let mut q = start;
    while q + 3 * step < end {
        let (j0, j1) = (
            ldg_stream_u32(col.add(q)),
            ldg_stream_u32(col.add(q + step)),
        );
        let (j2, j3) = (
            ldg_stream_u32(col.add(q + 2 * step)),
            ldg_stream_u32(col.add(q + 3 * step)),
        );
        let (v0, v1) = (T::ldg_stream(val.add(q)), T::ldg_stream(val.add(q + step)));
        let (v2, v3) = (
            T::ldg_stream(val.add(q + 2 * step)),
            T::ldg_stream(val.add(q + 3 * step)),
        );
        let (x0, x1) = (T::ldg(x.add(j0 as usize)), T::ldg(x.add(j1 as usize)));
        let (x2, x3) = (T::ldg(x.add(j2 as usize)), T::ldg(x.add(j3 as usize)));
        acc = acc + v0 * x0;
        acc = acc + v1 * x1;
        acc = acc + v2 * x2;
        acc = acc + v3 * x3;
        q += 4 * step;
    }
    if q + step < end {
        let (j0, j1) = (
            ldg_stream_u32(col.add(q)),
            ldg_stream_u32(col.add(q + step)),
        );
        let (v0, v1) = (T::ldg_stream(val.add(q)), T::ldg_stream(val.add(q + step)));
        let (x0, x1) = (T::ldg(x.add(j0 as usize)), T::ldg(x.add(j1 as usize)));
        acc = acc + v0 * x0;
        acc = acc + v1 * x1;
        q += 2 * step;
    }
    if q < end {
        let j = ldg_stream_u32(col.add(q)) as usize;
        acc = acc + T::ldg_stream(val.add(q)) * T::ldg(x.add(j));
    }
    acc
}

/// Sum over aligned groups of `1 << log2` lanes by shuffles; the total is valid in
/// the first lane of each group. Every lane of the warp must call it.
#[inline(always)]
pub(super) fn group_sum<T: DeviceScalar + KScalar>(mut s: T, log2: u32) -> T {
    let mut d = (1u32 << log2) >> 1;
    while d > 0 {
        s = s + s.shfl_down(d);
        d >>= 1;
    }
    s
}

/// Row `i` of a block CSR matrix with `B x B` blocks times x: the row's `B`
/// entries of each block of block row `i / B`, blocks in order, columns in
/// order within a block (the CPU backend's order). The `B` lanes of a block
/// row read the same column indices and x entries and together each block's
/// `B * B` contiguous values, all through the L1 cache: a lane's `B` values
/// are `B` loads, each of which touches the sectors of its neighbours' too,
/// so the later loads must find them cached (evict-first loads measured
/// slower). `U`
/// blocks are loaded before any is summed, so that a thread has `U` column
/// indices, then `2 U B` values in flight instead of one dependent round trip
/// per block.
///
/// # Safety
/// `brow_ptr`, `bcol` and `blocks` must describe a valid BSR matrix with at
/// least `i / B + 1` block rows whose block columns are below `x`'s length
/// divided by `B`.
#[inline(always)]
unsafe fn bsr_row<T: DeviceScalar + KScalar, const B: usize, const U: usize>(
    i: usize,
    brow_ptr: *const u64,
    bcol: *const u32,
    blocks: *const T,
    x: *const T,
) -> T {
    let (bi, r) = (i / B, i % B);
    let end = ldg_u64(brow_ptr.add(bi + 1)) as usize;
    let mut k = ldg_u64(brow_ptr.add(bi)) as usize;
    let mut acc = T::zero();
    while k + U <= end {
        let mut j = [0usize; U];
        let mut u = 0;
        while u < U {
            j[u] = B * ldg_u32(bcol.add(k + u)) as usize;
            u += 1;
        }
        let mut v = [[T::zero(); B]; U];
        let mut xs = [[T::zero(); B]; U];
        u = 0;
        while u < U {
            let row = blocks.add(B * B * (k + u) + B * r);
            let mut c = 0;
            while c < B {
                v[u][c] = T::ldg(row.add(c));
                xs[u][c] = T::ldg(x.add(j[u] + c));
                c += 1;
            }
            u += 1;
        }
        u = 0;
        while u < U {
            let mut c = 0;
            while c < B {
                acc = acc + v[u][c] * xs[u][c];
                c += 1;
            }
            u += 1;
        }
        k += U;
    }
    while k < end {
        let j = B * ldg_u32(bcol.add(k)) as usize;
        let row = blocks.add(B * B * k + B * r);
        let mut c = 0;
        while c < B {
            acc = acc + T::ldg(row.add(c)) * T::ldg(x.add(j + c));
            c += 1;
        }
        k += 1;
    }
    acc
}

macro_rules! spmv {
    ($t:ty, $r:ty, $csr:ident, $sell:ident, $bsr:ident) => {
        /// CSR, `1 << lanes_log2` consecutive lanes per row (1 to 32, a power of two
        /// chosen by the host from the mean row length), grid-stride over rows: any
        /// grid of whole warps is correct (of whole 256-thread blocks when `w`
        /// is not null: the block sum needs them).
        ///
        /// `beta_mode`: 0 a general beta, 1 beta zero (y not read), 2 an
        /// increment (beta one: y = y + alpha A x).
        ///
        /// When `w` is not null it also writes `*out` = w^H y (square matrices
        /// only), or with `beta_mode` 2 adds to it w^H (alpha A x), the
        /// increment's dot (any shape with w of the rows' length): a
        /// deterministic single-launch reduction (see the BLAS-1 reductions)
        /// through `partials` and `counter`. With beta = 1 and no `w`, or an
        /// increment, an empty row leaves its y untouched (neither read nor
        /// written): the ghost block of a distributed matrix, most of whose
        /// rows are empty.
        ///
        /// The rows are `0..split` and `split + jump..nrows + jump` (two runs
        /// in one launch: a slab's first and last planes); `split >= nrows`
        /// and `jump = 0` give the rows `0..nrows`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $csr(
            nrows: usize,
            lanes_log2: u32,
            are: $r,
            aim: $r,
            bre: $r,
            bim: $r,
            beta_mode: u32,
            row_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            x: *const $t,
            y: *mut $t,
            w: *const $t,
            partials: *mut $t,
            counter: *mut u32,
            out: *mut $t,
            split: usize,
            jump: usize,
        ) {
            let (a, b) = (<$t>::from_parts(are, aim), <$t>::from_parts(bre, bim));
            let increment = beta_mode == 2;
            let keep_y = bre == 1.0 && bim == 0.0;
            let g = global_id();
            let sub = (g & ((1usize << lanes_log2) - 1)) as u64;
            let stride = grid_threads() >> lanes_log2;
            let mut row = g >> lanes_log2;
            // The warp's first row: uniform across the warp, so every lane runs the
            // same number of rounds and takes part in every shuffle.
            let mut warp_row = (g & !31) >> lanes_log2;
            let mut d = <$t>::zero();
            while warp_row < nrows {
                let mut s = <$t>::zero();
                let mut empty = false;
                let at = if row >= split { row + jump } else { row };
                if row < nrows {
                    let end = ldg_u64(row_ptr.add(at + 1)) as usize;
                    let first = ldg_u64(row_ptr.add(at)) as usize;
                    empty = first == end;
                    s = row_sum(first + sub as usize, end, 1usize << lanes_log2, col, val, x);
                }
                let s = group_sum(s, lanes_log2);
                // An empty row adds nothing to y when beta is one.
                let unchanged = empty && (increment || keep_y && w.is_null());
                if row < nrows && sub == 0 && !unchanged {
                    let yp = y.add(at);
                    let yi = spmv_out(a, s, b, || *yp, beta_mode == 1);
                    *yp = yi;
                    if !w.is_null() {
                        let wi = <$t>::ldg(w.add(at)).conj();
                        d = d + if increment { wi * (a * s) } else { wi * yi };
                    }
                }
                row += stride;
                warp_row += stride;
            }
            if !w.is_null() {
                if let Some([d]) = reduce_grid([d], partials, 0, counter) {
                    *out = if increment { *out + d } else { d };
                }
            }
        }

        /// SELL-C-sigma, one thread per sorted row position `p` (grid-stride; slice
        /// `p / c`, lane `p % c`); entry k of the row sits at
        /// `slice_ptr[s] + k c + p % c`, so a warp reads consecutive addresses. The
        /// result goes to row `perm[p]` (or `p` when `perm` is null, i.e. sigma = 1).
        /// `w`, `partials`, `counter` and `out` as for CSR.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sell(
            nrows: usize,
            c: u32,
            are: $r,
            aim: $r,
            bre: $r,
            bim: $r,
            beta_zero: u32,
            slice_ptr: *const u64,
            col: *const u32,
            val: *const $t,
            perm: *const u32,
            x: *const $t,
            y: *mut $t,
            w: *const $t,
            partials: *mut $t,
            counter: *mut u32,
            out: *mut $t,
        ) {
            let (a, b) = (<$t>::from_parts(are, aim), <$t>::from_parts(bre, bim));
            if c == 0 {
                return; // no such matrix: the host never uploads c = 0
            }
            let mut d = <$t>::zero();
            let mut p = global_id();
            while p < nrows {
                // Row counts fit in 32 bits (the host checks), and 32-bit division
                // is several times cheaper than 64-bit on the device.
                let (s, r) = ((p as u32 / c) as usize, (p as u32 % c) as usize);
                let c = c as usize;
                let start = ldg_u64(slice_ptr.add(s)) as usize;
                let end = ldg_u64(slice_ptr.add(s + 1)) as usize;
                let acc = row_sum(start + r, end, c, col, val, x);
                let row = if perm.is_null() {
                    p
                } else {
                    ldg_u32(perm.add(p)) as usize
                };
                let yp = y.add(row);
                let yi = spmv_out(a, acc, b, || *yp, beta_zero != 0);
                *yp = yi;
                if !w.is_null() {
                    d = d + <$t>::ldg(w.add(row)).conj() * yi;
                }
                p += grid_threads();
            }
            if !w.is_null() {
                if let Some([d]) = reduce_grid([d], partials, 0, counter) {
                    *out = d;
                }
            }
        }

        /// Block CSR with `b x b` blocks (b = 1 to 8), one thread per row
        /// `i = global_id`: the row's `b` entries of each block of its block row,
        /// in order (see [`bsr_row`]). `blocks` holds `b * b` values per block,
        /// row-major. Launch: at least `nrows` threads.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $bsr(
            nrows: usize,
            b: u32,
            are: $r,
            aim: $r,
            bre: $r,
            bim: $r,
            beta_zero: u32,
            brow_ptr: *const u64,
            bcol: *const u32,
            blocks: *const $t,
            x: *const $t,
            y: *mut $t,
        ) {
            let i = global_id();
            if i >= nrows {
                return;
            }
            let s = match b {
                1 => bsr_row::<$t, 1, 8>(i, brow_ptr, bcol, blocks, x),
                2 => bsr_row::<$t, 2, 4>(i, brow_ptr, bcol, blocks, x),
                3 => bsr_row::<$t, 3, 4>(i, brow_ptr, bcol, blocks, x),
                4 => bsr_row::<$t, 4, 2>(i, brow_ptr, bcol, blocks, x),
                5 => bsr_row::<$t, 5, 2>(i, brow_ptr, bcol, blocks, x),
                6 => bsr_row::<$t, 6, 2>(i, brow_ptr, bcol, blocks, x),
                7 => bsr_row::<$t, 7, 1>(i, brow_ptr, bcol, blocks, x),
                _ => bsr_row::<$t, 8, 1>(i, brow_ptr, bcol, blocks, x),
            };
            let (a, b) = (<$t>::from_parts(are, aim), <$t>::from_parts(bre, bim));
            let yi = y.add(i);
            *yi = spmv_out(a, s, b, || *yi, beta_zero != 0);
        }
    };
}

spmv!(f32, f32, spmv_csr_f32, spmv_sell_f32, spmv_bsr_f32);
spmv!(f64, f64, spmv_csr_f64, spmv_sell_f64, spmv_bsr_f64);
spmv!(C32, f32, spmv_csr_c32, spmv_sell_c32, spmv_bsr_c32);
spmv!(C64, f64, spmv_csr_c64, spmv_sell_c64, spmv_bsr_c64);

/// A CSR matrix's values with each row scaled by its entry of a vector.
macro_rules! csr_scale_rows {
    ($t:ty, $name:ident) => {
        /// `val_out[k] = val[k] d[i]` for every entry k of row i (row_ptr's
        /// nrows + 1 offsets): a distributed level's ghost block scaled by
        /// its sweep's point diagonal where it lies. Grid-stride over the
        /// rows; an empty row costs its two row pointers.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            nrows: usize,
            row_ptr: *const u64,
            d: *const $t,
            val: *const $t,
            val_out: *mut $t,
        ) {
            let mut i = global_id();
            while i < nrows {
                let (start, end) = (*row_ptr.add(i) as usize, *row_ptr.add(i + 1) as usize);
                if start < end {
                    let s = *d.add(i);
                    for k in start..end {
                        *val_out.add(k) = *val.add(k) * s;
                    }
                }
                i += grid_threads();
            }
        }
    };
}

csr_scale_rows!(f32, csr_scale_rows_f32);
csr_scale_rows!(f64, csr_scale_rows_f64);
