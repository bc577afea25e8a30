//! Uncertainty quantification on the device (launched from `gpuq-cuda/src/uq.rs`).
//!
//! `uq_sdof_{f32,f64}` (`uq_sdof_lhs_*`: Latin hypercube noise): the Monte
//! Carlo of the SDOF oscillator, one thread per
//! sample ([`crate::uq::sdof::run_sample`], the same arithmetic as the CPU). Each
//! warp takes 32 consecutive samples at a time (grid-stride over chunks), and at
//! every time point sums x and x^2 over its lanes by a fixed shuffle tree (in
//! `f64`; [`pair_sum`]: one exchange splits the two sums between the half-warps,
//! so both take five 64-bit shuffles instead of ten), lanes 0 and 16 adding the
//! sums into the warp's own row of partial sums: no atomics, so the bits depend
//! only on the grid. Samples below `keep` also store
//! their trajectory time-major (the seed's coalesced layout: consecutive samples
//! of one time point are adjacent). Histogram counts go by 64-bit atomic adds
//! (integers: exact in any order).
//!
//! `uq_sum_rows`: out[c] = sum over rows r of partial[r width + c], in a fixed order.
//!
//! `uq_band_static_f64`: one thread per static sample of a random banded
//! stiffness K0 + sum_k theta_k K_k ([`crate::uq::band::band_sample`], the
//! host's band strategy's function): each sample keeps its band, solution,
//! load and draws strided across the batch (slot k of sample t at
//! k count + t: consecutive threads touch consecutive addresses).

use super::prelude::{
    atomic_add_f64, atomic_add_u64, global_id, grid_threads, lane, warp_sum, DeviceScalar,
};
use crate::chacha::key_from_seed;
use crate::scalar::C64;
use crate::uq::band::{
    band_sample_designed, failure_code, BandModel, Draws, SampleWork, Slots, ThetaLaw,
};
use crate::uq::gauss::NormalStream;
use crate::uq::linear::{block_dot, block_normals, BLOCK_NORMALS};
use crate::uq::psd::cross_entry;
use crate::uq::real::UqReal;
use crate::uq::sampling::LhsNormals;
use crate::uq::sdof::{hist_bin, run_sample, SdofParams, SinTable, State};
use core::arch::nvptx;
use core::num::NonZeroUsize;

/// `shfl.sync.bfly.b32` over the full warp: the value of lane `lane ^ mask`.
#[inline(always)]
fn shfl_xor_b32(v: u32, mask: u32) -> u32 {
    let r: u32;
    // SAFETY: a full-warp shuffle; called from converged warps only.
    unsafe {
        core::arch::asm!(
            "shfl.sync.bfly.b32 {r}, {v}, {m}, 31, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            m = in(reg32) mask,
        );
    }
    r
}

/// [`shfl_xor_b32`] of an f64 (two 32-bit shuffles).
#[inline(always)]
fn shfl_xor_f64(v: f64, mask: u32) -> f64 {
    let b = v.to_bits();
    let lo = shfl_xor_b32(b as u32, mask);
    let hi = shfl_xor_b32((b >> 32) as u32, mask);
    f64::from_bits(((hi as u64) << 32) | lo as u64)
}

/// Sums a and b over the warp's 32 lanes in a fixed order: the low half-warp
/// keeps a and receives the high half's a, the high half the reverse (one
/// exchange), then each half sums its 16 values by a shuffle-down tree. The sum
/// of a is valid in lane 0, that of b in lane 16. Every lane must call it;
/// `high` is lane >= 16.
#[inline(always)]
fn pair_sum(a: f64, b: f64, high: bool) -> f64 {
    let (keep, send) = if high { (b, a) } else { (a, b) };
    let mut v = keep + shfl_xor_f64(send, 16);
    let mut d = 8;
    while d > 0 {
        v += v.shfl_down(d);
        d /= 2;
    }
    v
}

/// The sine table in device memory, read through the read-only cache.
struct DevSin<T>(*const T);

macro_rules! sin_table {
    ($t:ty) => {
        impl SinTable<$t> for DevSin<$t> {
            #[inline(always)]
            fn at(&self, j: usize) -> $t {
                // SAFETY: j <= 2 steps; the host uploads 2 steps + 1 values.
                unsafe { <$t>::ldg(self.0.add(j)) }
            }
        }
    };
}

sin_table!(f64);
sin_table!(f32);

/// The normals of sample `s` (of `n`) under `key`: plain Monte Carlo or Latin
/// hypercube.
macro_rules! source {
    (mc, $t:ty, $key:expr, $s:expr, $n:expr) => {
        NormalStream::<$t>::new($key, $s)
    };
    (lhs, $t:ty, $key:expr, $s:expr, $n:expr) => {
        LhsNormals::new($key, $s, $n)
    };
}

macro_rules! sdof_kernel {
    ($name:ident, $t:ty, $design:ident) => {
        /// Samples 0..samples of the SDOF oscillator (see the module notes).
        /// `partial` holds (grid threads / 32) rows of 2 (steps + 1) zeroed f64;
        /// `traj` holds keep (steps + 1) values; `hist_steps` holds `hist_count`
        /// increasing time indices and `counts` hist_count (bins + 2) zeroed
        /// counters. The block size is a multiple of 32.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            params: *const SdofParams<$t>,
            sin: *const $t,
            seed: u64,
            samples: u64,
            partial: *mut f64,
            keep: u64,
            traj: *mut $t,
            hist_steps: *const u64,
            hist_count: usize,
            hist_lo: f64,
            hist_width: f64,
            bins: usize,
            counts: *mut u64,
        ) {
            let p = *params;
            let steps = p.steps as usize;
            let table = DevSin(sin);
            let key = key_from_seed(seed);
            let l = lane() as u64;
            let first = global_id() as u64 - l;
            let row = partial.add((first as usize / 32) * 2 * (steps + 1));
            let stride = grid_threads() as u64;
            let high = l >= 16;
            let mut base = first;
            while base < samples {
                let s = base + l;
                let active = s < samples;
                let mut next_hist = 0usize;
                let mut next_at = if hist_count > 0 {
                    *hist_steps
                } else {
                    u64::MAX
                };
                let mut normals = source!($design, $t, key, if active { s } else { base }, samples);
                run_sample(&p, &table, &mut normals, |j, x| {
                    let xv = if active { x as f64 } else { 0.0 };
                    // sum x lands in lane 0, sum x^2 in lane 16.
                    let v = pair_sum(xv, xv * xv, high);
                    if l & 15 == 0 {
                        *row.add(2 * j + (l >> 4) as usize) += v;
                    }
                    if s < keep {
                        *traj.add(j * keep as usize + s as usize) = x;
                    }
                    if j as u64 == next_at {
                        if active {
                            let b = hist_bin(xv, hist_lo, hist_width, bins);
                            atomic_add_u64(counts.add(next_hist * (bins + 2) + b), 1);
                        }
                        next_hist += 1;
                        next_at = if next_hist < hist_count {
                            *hist_steps.add(next_hist)
                        } else {
                            u64::MAX
                        };
                    }
                });
                base += stride;
            }
        }
    };
}

sdof_kernel!(uq_sdof_f64, f64, mc);
sdof_kernel!(uq_sdof_f32, f32, mc);
sdof_kernel!(uq_sdof_lhs_f64, f64, lhs);
sdof_kernel!(uq_sdof_lhs_f32, f32, lhs);

/// out[c] = sum_{r < rows} partial[r width + c] (one thread per column,
/// grid-stride): eight accumulators take rows r = 8 q + a in order of q (the
/// last rows % 8 rows go to the first), so eight loads are in flight at a time,
/// and are then added in the fixed order a = 0..8 (deterministic).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_sum_rows(
    rows: usize,
    width: usize,
    partial: *const f64,
    out: *mut f64,
) {
    let mut col = global_id();
    while col < width {
        let mut acc = [0.0f64; 8];
        let mut r = 0;
        while r + 8 <= rows {
            let mut a = 0;
            while a < 8 {
                acc[a] += f64::ldg(partial.add((r + a) * width + col));
                a += 1;
            }
            r += 8;
        }
        // The last rows % 8 rows go to the first accumulator, in order.
        while r < rows {
            acc[0] += f64::ldg(partial.add(r * width + col));
            r += 1;
        }
        let total = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
        *out.add(col) = total;
        col += grid_threads();
    }
}

/// A device array of `len` values as a slice (empty when `len` is 0,
/// whatever the pointer).
///
/// # Safety
/// `p` points to `len` initialised values that nothing writes during the launch.
#[inline(always)]
unsafe fn view<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        core::slice::from_raw_parts(p, len)
    }
}

/// One sample's work slots strided across the batch: slot k of sample t at
/// k count + t (consecutive threads, consecutive addresses).
struct StridedSlots {
    base: *mut f64,
    count: usize,
    t: usize,
}

impl Slots for StridedSlots {
    #[inline(always)]
    fn get(&self, k: usize) -> f64 {
        // SAFETY: k < work_len, t < count: inside the work_len count values.
        unsafe { *self.base.add(k * self.count + self.t) }
    }
    #[inline(always)]
    fn set(&mut self, k: usize, v: f64) {
        // SAFETY: as above; only thread t touches column t.
        unsafe { *self.base.add(k * self.count + self.t) = v }
    }
}

/// Static samples first..first + count (of `samples`) of a random banded
/// stiffness K0 + sum_k theta_k K_k ([`band_sample_designed`], stream
/// first + t under `seed`, normals by `design`): values[o count + t] =
/// u[outputs[o]] of sample first + t, residuals[t] its relative residual or
/// [`crate::uq::band::failure_code`] of its failed pivot. K0 is the lower
/// band (n (w + 1) values), term k's triplets term_start[k]..term_start[k +
/// 1] (m + 1 offsets), `laws` m values, the load mean n, `load_std` std_len
/// (0 or n), the load factor's CSR (n + 1 offsets when rank > 0), `work`
/// holds work_len count values (n (w + 3) + rank + m per sample).
#[allow(clippy::too_many_arguments)]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_band_static_f64(
    n: usize,
    w: usize,
    k0: *const f64,
    m: usize,
    term_start: *const u32,
    term_row: *const u32,
    term_col: *const u32,
    term_val: *const f64,
    laws: *const ThetaLaw,
    load_mean: *const f64,
    std_len: usize,
    load_std: *const f64,
    rank: usize,
    factor_start: *const u32,
    factor_col: *const u32,
    factor_val: *const f64,
    outputs_len: usize,
    outputs: *const u32,
    seed: u64,
    design: u32,
    samples: u64,
    first: u64,
    count: usize,
    work: *mut f64,
    values: *mut f64,
    residuals: *mut f64,
) {
    let starts = view(term_start, m + 1);
    let triplets = *term_start.add(m) as usize;
    let lstart = view(factor_start, if rank > 0 { n + 1 } else { 0 });
    let lnnz = if rank > 0 {
        *factor_start.add(n) as usize
    } else {
        0
    };
    let p = BandModel {
        n,
        w,
        k0: view(k0, n * (w + 1)),
        term_start: starts,
        term_row: view(term_row, triplets),
        term_col: view(term_col, triplets),
        term_val: view(term_val, triplets),
        draws: Draws {
            laws: view(laws, m),
            load_mean: view(load_mean, n),
            load_std: view(load_std, std_len),
            rank,
            factor_start: lstart,
            factor_col: view(factor_col, lnnz),
            factor_val: view(factor_val, lnnz),
        },
        outputs: view(outputs, outputs_len),
    };
    let mut t = global_id();
    while t < count {
        let mut slots = StridedSlots {
            base: work,
            count,
            t,
        };
        let mut s = SampleWork {
            slots: &mut slots,
            n,
            w,
        };
        let r = band_sample_designed(&p, &mut s, design, seed, first + t as u64, samples, |o, v| {
            *values.add(o * count + t) = v
        });
        *residuals.add(t) = match r {
            Ok(res) => res,
            Err(j) => failure_code(j),
        };
        t += grid_threads();
    }
}

/// The response PSD's rank-1 Hermitian update for `nf` frequencies:
/// `out[f n^2 + i n + j] = cross_entry(h[f n + i], h[f n + j], scale[f])` (an
/// n x n matrix per frequency, row-major), a block per output row, grid-stride
/// over rows, its threads across the row. Reads of h hit the cache; the
/// 16 n^2 nf bytes written are the memory floor.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_rank1_c64(
    n: usize,
    nf: usize,
    scale: *const f64,
    h: *const C64,
    out: *mut C64,
) {
    // The row's index is decoded once per row, not once per entry, and the
    // writes of a warp are contiguous.
    let (block, blocks, tid, width) = (
        nvptx::_block_idx_x() as usize,
        nvptx::_grid_dim_x() as usize,
        nvptx::_thread_idx_x() as usize,
        nvptx::_block_dim_x() as usize,
    );
    let Some(nz) = NonZeroUsize::new(n) else {
        return;
    };
    let mut row = block;
    while row < nf * n {
        let f = row / nz;
        let s = f64::ldg(scale.add(f));
        let hi = C64::ldg(h.add(row));
        let hf = h.add(f * n);
        let o = out.add(row * n);
        let mut j = tid;
        while j < n {
            *o.add(j) = cross_entry(hi, C64::ldg(hf.add(j)), s);
            j += width;
        }
        row += blocks;
    }
}

/// Linear outputs of the Monte Carlo samples `first .. first + count` under
/// `seed` ([`crate::uq::linear`], the streams keyed by `key_from_seed`): `out[t outputs + o] += sum_k coef[o len + k]
/// z_k(first + t)`, `out` holding the outputs' constant parts on entry. Each
/// warp takes 32 consecutive ChaCha8 blocks of one sample (the blocks of a
/// sample padded to a multiple of 32, so the warps stay whole), sums its
/// lanes' dot products per output and adds the total with one atomic.
/// Cost: a ChaCha8 block and 8 Box-Muller transforms per 16 normals, the
/// coefficients read once per sample (from L2 after the first samples).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uq_linear_samples(
    seed: u64,
    first: u64,
    count: usize,
    len: usize,
    outputs: usize,
    coef: *const f64,
    out: *mut f64,
) {
    let k = key_from_seed(seed);
    let blocks = len.div_ceil(BLOCK_NORMALS);
    let Some(padded) = NonZeroUsize::new(blocks.div_ceil(32) * 32) else {
        return;
    };
    let total = count * padded.get();
    // The grid's threads and `padded` are multiples of 32: a warp's lanes
    // share their sample and their trips through the loop.
    let mut t = global_id();
    while t < total {
        let (s, c) = (t / padded, t % padded);
        let active = c < blocks;
        let z = if active {
            block_normals(&k, first + s as u64, c as u64)
        } else {
            [0.0; BLOCK_NORMALS]
        };
        for o in 0..outputs {
            let row = coef.add(o * len);
            let p = if active {
                block_dot(&z, c as u64, len, |i| f64::ldg(row.add(i)))
            } else {
                0.0
            };
            let sum = warp_sum(p);
            if lane() == 0 {
                atomic_add_f64(out.add(s * outputs + o), sum);
            }
        }
        t += grid_threads();
    }
}

/// The SDOF kernel's ingredients timed alone (for the roofline of
/// `uq_sdof_*`), one thread per sample, `steps` iterations each, one value
/// per sample written to `out` so nothing is optimised away:
/// mode 0: the arithmetic of an RK4 step (linear, no noise, no square root);
/// mode 1: four square roots per step (chained);
/// mode 2: one normal per step from the sample's ChaCha8 stream (Box-Muller);
/// mode 3: the full nonlinear step with noise, without the statistics.
macro_rules! sdof_part_kernel {
    ($name:ident, $t:ty) => {
        /// See the macro's notes; `out` holds `samples` values.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            mode: u32,
            params: *const SdofParams<$t>,
            sin: *const $t,
            seed: u64,
            samples: u64,
            out: *mut $t,
        ) {
            let full = *params;
            let steps = full.steps as usize;
            let amp = full.amp;
            let key = key_from_seed(seed);
            let table = DevSin(sin);
            let mut s = global_id() as u64;
            while s < samples {
                let one = <$t>::from_f64(1.0);
                let seedv = <$t>::from_f64(s as f64 * 1e-9);
                let mut acc = seedv;
                if mode == 0 {
                    let p = SdofParams::<$t> {
                        g: <$t>::from_f64(0.0),
                        ..full
                    };
                    let mut st = State {
                        x: seedv,
                        v: <$t>::from_f64(0.0),
                        z: <$t>::from_f64(0.0),
                    };
                    let mut j = 0;
                    while j < steps {
                        st = p.rk4(st, amp, amp, amp);
                        j += 1;
                    }
                    acc = st.x + st.v;
                } else if mode == 1 {
                    let mut j = 0;
                    while j < steps {
                        acc = (acc + one).sqrt();
                        acc = (acc + one).sqrt();
                        acc = (acc + one).sqrt();
                        acc = (acc + one).sqrt();
                        j += 1;
                    }
                } else if mode == 2 {
                    let mut z = NormalStream::<$t>::new(key, s);
                    let mut j = 0;
                    while j < steps {
                        acc = acc + z.next_normal();
                        j += 1;
                    }
                } else {
                    let p = full;
                    let mut z = NormalStream::<$t>::new(key, s);
                    run_sample(&p, &table, &mut z, |_, x| acc = x);
                }
                *out.add(s as usize) = acc;
                s += grid_threads() as u64;
            }
        }
    };
}

sdof_part_kernel!(uq_sdof_part_f64, f64);
sdof_part_kernel!(uq_sdof_part_f32, f32);
