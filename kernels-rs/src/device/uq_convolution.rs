//! The FFT convolution of procedure (iii) on the device (launched from
//! `gpuq-cuda/src/uq_convolution.rs`; the transforms are cuFFT's, batched
//! over the samples of a chunk):
//!
//! * `uq_conv_loads`: each sample's zero-padded input z' (one thread per
//!   sixteen entries: one ChaCha8 block, [`crate::uq::convolution::load_block`]);
//! * `uq_conv_multiply`: the spectra's products with each output's kernel;
//! * `uq_conv_group_moments` and `uq_conv_merge`: per (output, step) column,
//!   the mean and sum of squared deviations of each group of
//!   [`STATS_GROUP`] samples, then folded in order into the running pair;
//! * `uq_conv_peaks`: max |y| over the steps of each (sample, output) row, a
//!   warp per row.

use super::prelude::{global_id, grid_threads, lane, DeviceScalar};
use crate::chacha::key_from_seed;
use crate::scalar::C64;
use crate::uq::convolution::{
    chunk_moments, load_block, merge_moments, LOADS_PER_BLOCK, STATS_GROUP,
};
use core::arch::nvptx;
use core::num::NonZeroUsize;

/// out[s len + p] = z'_p of sample first + s, for s < count and p < len
/// (`len` a multiple of 16). One thread per block of sixteen entries,
/// grid-stride; 8 len count bytes written.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_conv_loads(
    seed: u64,
    first_scale: f64,
    nt: usize,
    len: usize,
    first: usize,
    count: usize,
    out: *mut f64,
) {
    let key = key_from_seed(seed);
    let Some(per_row) = NonZeroUsize::new(len / LOADS_PER_BLOCK) else {
        return;
    };
    let mut i = global_id();
    while i < count * per_row.get() {
        let s = i / per_row;
        let b = i % per_row;
        let v = load_block(&key, (first + s) as u64, b as u64, nt as u64, first_scale);
        let o = out.add(s * len + b * LOADS_PER_BLOCK);
        let mut j = 0;
        while j < LOADS_PER_BLOCK {
            *o.add(j) = v[j];
            j += 1;
        }
        i += grid_threads();
    }
}

/// out[(s r + o) half + j] = x[s half + j] spectra[o half + j] for s < count,
/// o < r, j < half (complex). `out` may be `x` when r = 1. Grid-stride;
/// 16 half count (1 + 2 r) bytes moved.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_conv_multiply(
    count: usize,
    r: usize,
    half: usize,
    spectra: *const C64,
    x: *const C64,
    out: *mut C64,
) {
    let (Some(hz), Some(rz)) = (NonZeroUsize::new(half), NonZeroUsize::new(r)) else {
        return;
    };
    let mut i = global_id();
    while i < count * r * half {
        let j = i % hz;
        let row = i / hz;
        let o = row % rz;
        let s = row / rz;
        let v = *x.add(s * half + j) * C64::ldg(spectra.add(o * half + j));
        *out.add(i) = v;
        i += grid_threads();
    }
}

/// For each column c = o nt + k (o < r, k < nt) and group g of
/// [`STATS_GROUP`] samples: the moments of y[(s r + o) len + k] over the
/// group's s < count ([`chunk_moments`]) at parts[2 (g r nt + c)] (mean, then
/// sum of squared deviations). One thread per (group, column), grid-stride:
/// the threads of a warp read adjacent steps. 16 count r nt bytes read.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_conv_group_moments(
    count: usize,
    r: usize,
    nt: usize,
    len: usize,
    y: *const f64,
    parts: *mut f64,
) {
    let (Some(ntz), Some(width)) = (NonZeroUsize::new(nt), NonZeroUsize::new(r * nt)) else {
        return;
    };
    let groups = count.div_ceil(STATS_GROUP);
    let mut i = global_id();
    while i < groups * width.get() {
        let c = i % width;
        let g = i / width;
        let o = c / ntz;
        let k = c % ntz;
        let first = g * STATS_GROUP;
        let size = if count - first < STATS_GROUP {
            count - first
        } else {
            STATS_GROUP
        };
        let col = y.add((first * r + o) * len + k);
        let (m, q) = chunk_moments(size, |s| *col.add(s * r * len));
        *parts.add(2 * i) = m;
        *parts.add(2 * i + 1) = q;
        i += grid_threads();
    }
}

/// For each column c < width: folds the group moments of
/// [`uq_conv_group_moments`] (groups of [`STATS_GROUP`] of the chunk's `count`
/// samples, in order) into (mean[c], m2[c]) of `before` earlier samples
/// ([`merge_moments`]). One thread per column, grid-stride.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_conv_merge(
    count: usize,
    width: usize,
    parts: *const f64,
    before: f64,
    mean: *mut f64,
    m2: *mut f64,
) {
    let groups = count.div_ceil(STATS_GROUP);
    let mut c = global_id();
    while c < width {
        let mut n = before;
        let mut acc = (*mean.add(c), *m2.add(c));
        let mut g = 0;
        while g < groups {
            let size = (count - g * STATS_GROUP).min(STATS_GROUP) as f64;
            let p = parts.add(2 * (g * width + c));
            acc = merge_moments(n, acc, size, (*p, *p.add(1)));
            n += size;
            g += 1;
        }
        *mean.add(c) = acc.0;
        *m2.add(c) = acc.1;
        c += grid_threads();
    }
}

/// out[row] = max over k < nt of |y[row len + k]| for row < rows: one warp
/// per row (lanes stride the row, then a shuffle tree), grid-stride over
/// rows. 8 rows nt bytes read.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_conv_peaks(
    rows: usize,
    nt: usize,
    len: usize,
    y: *const f64,
    out: *mut f64,
) {
    let warps = grid_threads() / 32;
    let mut row = (nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
        + nvptx::_thread_idx_x() as usize)
        / 32;
    while row < rows {
        let base = y.add(row * len);
        let mut m = 0.0f64;
        let mut k = lane() as usize;
        while k < nt {
            let a = (*base.add(k)).abs();
            if a > m {
                m = a;
            }
            k += 32;
        }
        let mut d = 16;
        while d > 0 {
            let other = m.shfl_down(d);
            if other > m {
                m = other;
            }
            d /= 2;
        }
        if lane() == 0 {
            *out.add(row) = m;
        }
        row += warps;
    }
}
