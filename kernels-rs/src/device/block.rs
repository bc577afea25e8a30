//! Dense products of blocks of vectors (tall and thin, n x p, each column a
//! separate device vector whose address comes from a table), as a block
//! eigensolver needs them: the Gram matrix X^T Y (`block_gram_f64`, per row
//! split, then `block_gram_sum_f64` adding the splits in a fixed order, so
//! the bits depend only on the inputs and the grid) and the combination
//! Z = beta Z + X C with a small C (`block_combine_f64`).

use super::prelude::{grid_threads, ldg_u64, sync_threads, DeviceScalar};
use crate::{COMBINE_COLUMNS, GRAM_TILE};
use core::arch::asm;
use core::arch::nvptx;

/// Rows of X and Y a block stages in shared memory per step of the Gram
/// kernel.
const GRAM_ROWS: usize = 16;

/// Outputs per thread along each side of its tile (`GRAM_TILE / 16`).
const MICRO: usize = GRAM_TILE / 16;

const _: () = assert!(crate::BLOCK_THREADS as usize == 256 && GRAM_TILE == 64);

// The Gram kernel's staged rows: GRAM_ROWS x GRAM_TILE values of X, then of Y.
core::arch::global_asm!(".shared .align 8 .b8 gpuq_gram_rows[16384];");

/// Calls `f(0)`, ..., `f(15)`: the combination's columns unrolled, so that
/// its accumulators stay in registers (the unroller does not open a loop of
/// inline assembly by itself).
macro_rules! sixteen {
    ($f:ident) => {
        $f(0);
        $f(1);
        $f(2);
        $f(3);
        $f(4);
        $f(5);
        $f(6);
        $f(7);
        $f(8);
        $f(9);
        $f(10);
        $f(11);
        $f(12);
        $f(13);
        $f(14);
        $f(15);
    };
}

const _: () = assert!(COMBINE_COLUMNS == 16, "block_combine_f64 unrolls 16 columns");

/// a b + c, rounded once.
#[inline(always)]
fn fma(a: f64, b: f64, c: f64) -> f64 {
    let r: f64;
    // SAFETY: an arithmetic instruction on registers.
    unsafe { asm!("fma.rn.f64 {r}, {a}, {b}, {c};", r = out(reg64) r, a = in(reg64) a, b = in(reg64) b, c = in(reg64) c) }
    r
}

/// Column `c` of a table of `count` column addresses (null past the end).
///
/// # Safety
/// `table` must hold `count` addresses.
#[inline(always)]
unsafe fn column(table: *const u64, c: usize, count: usize) -> *const f64 {
    if c < count {
        ldg_u64(table.add(c)) as *const f64
    } else {
        core::ptr::null()
    }
}

/// Partial Gram matrices `partials[s p q + j p + i] = sum_{r in split s}
/// x_i[r] y_j[r]` (i < p, j < q; column-major per split): block (t, s) of the
/// grid, t < `tiles_i` x ceil(q / 64), takes the 64 x 64 output tile t of
/// row split s (`rows` rows from s rows), 16 rows at a time through shared
/// memory, each thread a 4 x 4 sub-tile (outputs i0 + tx + 16 a, j0 + ty +
/// 16 b) in registers. Cost: reads X and Y once per tile row and column
/// (ceil(q / 64) and ceil(p / 64) times), 2 n p q flops.
///
/// # Safety
/// `tx`, `ty` must hold p and q addresses of vectors of n values; `partials`
/// splits p q values, splits = the grid's second dimension.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn block_gram_f64(
    n: usize,
    p: usize,
    q: usize,
    tiles_i: u32,
    rows: usize,
    tx_table: *const u64,
    ty_table: *const u64,
    partials: *mut f64,
) {
    let Some(tiles_i) = core::num::NonZeroU32::new(tiles_i) else {
        return;
    };
    let tile = nvptx::_block_idx_x();
    let split = nvptx::_block_idx_y() as usize;
    let i0 = (tile % tiles_i) as usize * GRAM_TILE;
    let j0 = (tile / tiles_i) as usize * GRAM_TILE;
    let t = nvptx::_thread_idx_x() as usize;
    let (tx, ty) = (t % 16, t / 16);
    let base: u64;
    asm!("cvta.shared.u64 {b}, gpuq_gram_rows;", b = out(reg64) base);
    let sx = base as *mut f64;
    let sy = sx.add(GRAM_ROWS * GRAM_TILE);
    // This thread stages row `t % 16` of columns t / 16 + 16 k, k < 4.
    let lr = t % GRAM_ROWS;
    let mut px = [core::ptr::null::<f64>(); MICRO];
    let mut py = [core::ptr::null::<f64>(); MICRO];
    for k in 0..MICRO {
        px[k] = column(tx_table, i0 + t / 16 + 16 * k, p);
        py[k] = column(ty_table, j0 + t / 16 + 16 * k, q);
    }
    let start = split * rows;
    let end = if start + rows < n { start + rows } else { n };
    let mut acc = [[0.0f64; MICRO]; MICRO];
    let mut r0 = start;
    while r0 < end {
        let r = r0 + lr;
        for k in 0..MICRO {
            let slot = lr * GRAM_TILE + t / 16 + 16 * k;
            let vx = if r < end && !px[k].is_null() { f64::ldg(px[k].add(r)) } else { 0.0 };
            let vy = if r < end && !py[k].is_null() { f64::ldg(py[k].add(r)) } else { 0.0 };
            *sx.add(slot) = vx;
            *sy.add(slot) = vy;
        }
        sync_threads();
        for rr in 0..GRAM_ROWS {
            let mut a = [0.0f64; MICRO];
            let mut b = [0.0f64; MICRO];
            for k in 0..MICRO {
                a[k] = *sx.add(rr * GRAM_TILE + tx + 16 * k);
                b[k] = *sy.add(rr * GRAM_TILE + ty + 16 * k);
            }
            for u in 0..MICRO {
                for v in 0..MICRO {
                    acc[u][v] = fma(a[u], b[v], acc[u][v]);
                }
            }
        }
        sync_threads();
        r0 += GRAM_ROWS;
    }
    let out = partials.add(split * p * q);
    for u in 0..MICRO {
        for v in 0..MICRO {
            let (i, j) = (i0 + tx + 16 * u, j0 + ty + 16 * v);
            if i < p && j < q {
                *out.add(j * p + i) = acc[u][v];
            }
        }
    }
}

/// `out[e] = sum_{s < splits} partials[s entries + e]`, s in order, e <
/// `entries`: the Gram matrix from `block_gram_f64`'s splits. One thread per
/// entry; reads every partial once.
///
/// # Safety
/// `partials` must hold `splits entries` values, `out` `entries`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn block_gram_sum_f64(
    entries: usize,
    splits: usize,
    partials: *const f64,
    out: *mut f64,
) {
    let mut e = super::prelude::global_id();
    while e < entries {
        let mut s = 0.0;
        for k in 0..splits {
            s += f64::ldg(partials.add(k * entries + e));
        }
        *out.add(e) = s;
        e += grid_threads();
    }
}

/// `z_j = beta z_j + sum_{i < p} x_i c[i + j p]` for j < q (`beta` = 0
/// writes z without reading it): each thread a row at a time and the 16
/// output columns 16 y.. of the grid's second index in registers, C read
/// through the cache (every lane of a warp the same value). C is padded to
/// a multiple of 16 columns (zeros past q), so the accumulation runs
/// unconditionally and stays in registers. Cost: X read ceil(q / 16) times,
/// Z read (beta != 0) and written once, 2 n p q flops.
///
/// # Safety
/// `tx` must hold p and `tz` q addresses of vectors of n values, no z the
/// same as an x; `c` p ceil(q / 16) 16 values.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn block_combine_f64(
    n: usize,
    p: usize,
    q: usize,
    tx_table: *const u64,
    c: *const f64,
    beta: f64,
    tz_table: *const u64,
) {
    let j0 = nvptx::_block_idx_y() as usize * COMBINE_COLUMNS;
    if j0 >= q {
        return;
    }
    let mut r = nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
        + nvptx::_thread_idx_x() as usize;
    let stride = nvptx::_grid_dim_x() as usize * nvptx::_block_dim_x() as usize;
    while r < n {
        let mut acc = [0.0f64; COMBINE_COLUMNS];
        for i in 0..p {
            let x = f64::ldg((ldg_u64(tx_table.add(i)) as *const f64).add(r));
            let ci = c.add(j0 * p + i);
            let mut step = |v: usize| acc[v] = fma(x, f64::ldg(ci.add(v * p)), acc[v]);
            sixteen!(step);
        }
        let store = |v: usize| {
            if j0 + v < q {
                let z = ldg_u64(tz_table.add(j0 + v)) as *mut f64;
                *z.add(r) = if beta == 0.0 { acc[v] } else { fma(beta, *z.add(r), acc[v]) };
            }
        };
        sixteen!(store);
        r += stride;
    }
}
