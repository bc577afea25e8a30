//! Monte Carlo walks: one thread per forward entry or per history, the walk itself
//! from [`crate::walk`] and its numbers from [`crate::chacha`], so a seed gives
//! the same walks as on the CPU.
//!
//! Walk data arrives as five pointers: row starts, then either (cumulative
//! probabilities, weights, values, columns) for the structure-of-arrays layout or
//! (records, -, -, -) for the array of 32-byte records; every read goes through
//! the read-only cache. The kernels step the walks of [`crate::walk`] one move
//! at a time (see the note on the macro below). Adjoint tallies go by atomic add into one of `copies`
//! replicas of the tally vector (block b uses replica b mod copies), which
//! spreads the atomics of small systems over more addresses; `mc_sum_copies`
//! then adds the replicas in a fixed order. Every kernel adds its threads' moves
//! into `steps` (one atomic per thread).

use super::prelude::{
    atomic_add_f64, atomic_add_u64, global_id, grid_threads, ldg_u32, DeviceScalar,
};
use crate::chacha::{key_from_seed, Stream};
use crate::walk::{AdjointWalk, ForwardWalk, Record, Rows, Stop, Tally};
use core::ptr::addr_of;

/// Structure-of-arrays walk data in device memory.
struct Soa {
    ptr: *const u32,
    cdf: *const f64,
    w: *const f64,
    h: *const f64,
    col: *const u32,
}

impl Rows for Soa {
    #[inline(always)]
    fn row(&self, s: usize) -> (usize, usize) {
        // SAFETY: s < n, the row-start array holds n + 1 entries (host contract).
        unsafe {
            (
                ldg_u32(self.ptr.add(s)) as usize,
                ldg_u32(self.ptr.add(s + 1)) as usize,
            )
        }
    }
    #[inline(always)]
    fn cdf(&self, k: usize) -> f64 {
        // SAFETY: k < nnz, inside the row the host built.
        unsafe { f64::ldg(self.cdf.add(k)) }
    }
    #[inline(always)]
    fn step(&self, k: usize) -> (usize, f64) {
        // SAFETY: as above.
        unsafe { (ldg_u32(self.col.add(k)) as usize, f64::ldg(self.w.add(k))) }
    }
    #[inline(always)]
    fn value(&self, k: usize) -> (usize, f64) {
        // SAFETY: as above.
        unsafe { (ldg_u32(self.col.add(k)) as usize, f64::ldg(self.h.add(k))) }
    }
}

/// Array-of-records walk data in device memory.
struct Aos {
    ptr: *const u32,
    rec: *const Record,
}

impl Rows for Aos {
    #[inline(always)]
    fn row(&self, s: usize) -> (usize, usize) {
        // SAFETY: as for `Soa`.
        unsafe {
            (
                ldg_u32(self.ptr.add(s)) as usize,
                ldg_u32(self.ptr.add(s + 1)) as usize,
            )
        }
    }
    #[inline(always)]
    fn cdf(&self, k: usize) -> f64 {
        // SAFETY: k < nnz.
        unsafe { f64::ldg(addr_of!((*self.rec.add(k)).cdf)) }
    }
    #[inline(always)]
    fn step(&self, k: usize) -> (usize, f64) {
        // SAFETY: k < nnz.
        unsafe {
            let r = self.rec.add(k);
            (
                ldg_u32(addr_of!((*r).col)) as usize,
                f64::ldg(addr_of!((*r).w)),
            )
        }
    }
    #[inline(always)]
    fn value(&self, k: usize) -> (usize, f64) {
        // SAFETY: k < nnz.
        unsafe {
            let r = self.rec.add(k);
            (
                ldg_u32(addr_of!((*r).col)) as usize,
                f64::ldg(addr_of!((*r).h)),
            )
        }
    }
}

/// Adds tallies atomically into a vector in device memory.
struct Atomic(*mut f64);

impl Tally for Atomic {
    #[inline(always)]
    fn add(&mut self, state: usize, value: f64) {
        // SAFETY: state < n and the vector holds n entries (host contract).
        unsafe {
            atomic_add_f64(self.0.add(state), value);
        }
    }
}

// Every walk kernel runs a persistent grid in which each thread takes items
// (entries or histories) t, t + grid, t + 2 grid, ... and advances its current
// history one move per loop iteration, starting the next item as soon as one
// ends: the lanes of a warp stay busy with moves instead of waiting for the
// warp's longest history. An item's history (its stream) does not depend on
// which thread runs it, so the walks are those of the CPU.
macro_rules! walks {
    ($rows:ident, $make:expr, $expected:literal,
     $fwd_entry:ident, $fwd_hist:ident, $adj:ident) => {
        /// Forward histories, one thread per entry at a time: sums[i] = the
        /// summed scores of histories first..first+count of entry i (streams
        /// i per_entry + j). count > 0.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $fwd_entry(
            n: usize,
            d0: *const u32,
            d1: *const f64,
            d2: *const f64,
            d3: *const f64,
            d4: *const u32,
            bhat: *const f64,
            tally: *const f64,
            per_entry: u64,
            first: u64,
            count: u64,
            seed: u64,
            max_steps: u32,
            cutoff: f64,
            sums: *mut f64,
            steps: *mut u64,
        ) {
            let rows: $rows = $make(d0, d1, d2, d3, d4);
            let key = key_from_seed(seed);
            let stop = Stop { max_steps, cutoff };
            let tally_at = |s: usize| f64::ldg(tally.add(s));
            let start = |i: usize, j: u64| {
                ForwardWalk::start::<$expected>(
                    f64::ldg(bhat.add(i)),
                    tally_at(i),
                    i,
                    Stream::new(key, i as u64 * per_entry + j),
                )
            };
            let mut moves = 0u64;
            let mut i = global_id();
            if i < n && count > 0 {
                let (mut j, mut sum) = (first, 0.0);
                let mut walk = start(i, j);
                let mut alive = max_steps > 0;
                loop {
                    if alive {
                        alive = walk.step(&rows, tally_at, stop);
                        continue;
                    }
                    sum += walk.score;
                    moves += walk.moves as u64;
                    j += 1;
                    if j == first + count {
                        *sums.add(i) = sum;
                        (j, sum) = (first, 0.0);
                        i += grid_threads();
                        if i >= n {
                            break;
                        }
                    }
                    walk = start(i, j);
                    alive = max_steps > 0;
                }
            }
            atomic_add_u64(steps, moves);
        }

        /// Forward histories, one thread per history at a time: item t is
        /// history first + t mod count of entry t / count; scores add
        /// atomically into sums (zeroed by the host).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $fwd_hist(
            n: usize,
            d0: *const u32,
            d1: *const f64,
            d2: *const f64,
            d3: *const f64,
            d4: *const u32,
            bhat: *const f64,
            tally: *const f64,
            per_entry: u64,
            first: u64,
            count: u64,
            seed: u64,
            max_steps: u32,
            cutoff: f64,
            sums: *mut f64,
            steps: *mut u64,
        ) {
            let rows: $rows = $make(d0, d1, d2, d3, d4);
            let key = key_from_seed(seed);
            let stop = Stop { max_steps, cutoff };
            let tally_at = |s: usize| f64::ldg(tally.add(s));
            // count > 0 (the host launches no empty batch); the checked forms
            // keep panic paths out of the PTX.
            let item = |t: u64| {
                let i = t.checked_div(count).unwrap_or(0) as usize;
                (i, first + t.checked_rem(count).unwrap_or(0))
            };
            let start = |(i, j): (usize, u64)| {
                ForwardWalk::start::<$expected>(
                    f64::ldg(bhat.add(i)),
                    tally_at(i),
                    i,
                    Stream::new(key, i as u64 * per_entry + j),
                )
            };
            let items = n as u64 * count;
            let mut moves = 0u64;
            let mut t = global_id() as u64;
            if t < items {
                let mut walk = start(item(t));
                let mut alive = max_steps > 0;
                loop {
                    if alive {
                        alive = walk.step(&rows, tally_at, stop);
                        continue;
                    }
                    atomic_add_f64(sums.add(item(t).0), walk.score);
                    moves += walk.moves as u64;
                    t += grid_threads() as u64;
                    if t >= items {
                        break;
                    }
                    walk = start(item(t));
                    alive = max_steps > 0;
                }
            }
            atomic_add_u64(steps, moves);
        }

        /// Adjoint histories first..first+count; tallies add atomically into
        /// replica (block mod copies) of `tallies` (copies x n, zeroed by the
        /// host).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $adj(
            n: usize,
            d0: *const u32,
            d1: *const f64,
            d2: *const f64,
            d3: *const f64,
            d4: *const u32,
            start_cdf: *const f64,
            bhat: *const f64,
            bhat_l1: f64,
            first: u64,
            count: u64,
            seed: u64,
            max_steps: u32,
            cutoff: f64,
            tallies: *mut f64,
            copies: u32,
            steps: *mut u64,
        ) {
            let rows: $rows = $make(d0, d1, d2, d3, d4);
            let key = key_from_seed(seed);
            let stop = Stop { max_steps, cutoff };
            let block = core::arch::nvptx::_block_idx_x();
            let replica = block.checked_rem(copies).unwrap_or(0);
            let mut out = Atomic(tallies.add(replica as usize * n));
            let cdf = |s: usize| f64::ldg(start_cdf.add(s));
            let weight = |s: usize| bhat_l1 * f64::ldg(bhat.add(s)).signum();
            let mut moves = 0u64;
            let mut t = global_id() as u64;
            if t < count {
                let mut walk = AdjointWalk::start(
                    &cdf,
                    n,
                    weight,
                    stop,
                    Stream::new(key, first + t),
                    &mut out,
                );
                let mut alive = max_steps > 0;
                loop {
                    if alive {
                        alive = walk.step::<_, _, $expected>(&rows, stop, &mut out);
                        continue;
                    }
                    moves += walk.moves as u64;
                    t += grid_threads() as u64;
                    if t >= count {
                        break;
                    }
                    walk = AdjointWalk::start(
                        &cdf,
                        n,
                        weight,
                        stop,
                        Stream::new(key, first + t),
                        &mut out,
                    );
                    alive = max_steps > 0;
                }
            }
            atomic_add_u64(steps, moves);
        }
    };
}

/// Wraps the five walk-data pointers as the structure-of-arrays layout.
#[inline(always)]
fn soa(ptr: *const u32, cdf: *const f64, w: *const f64, h: *const f64, col: *const u32) -> Soa {
    Soa {
        ptr,
        cdf,
        w,
        h,
        col,
    }
}

/// Wraps the walk-data pointers as records (the second pointer is the records).
#[inline(always)]
fn aos(ptr: *const u32, rec: *const f64, _: *const f64, _: *const f64, _: *const u32) -> Aos {
    Aos {
        ptr,
        rec: rec as *const Record,
    }
}

walks!(
    Soa,
    soa,
    false,
    mc_fwd_entry_soa_col,
    mc_fwd_hist_soa_col,
    mc_adj_soa_col
);
walks!(
    Soa,
    soa,
    true,
    mc_fwd_entry_soa_exp,
    mc_fwd_hist_soa_exp,
    mc_adj_soa_exp
);
walks!(
    Aos,
    aos,
    false,
    mc_fwd_entry_aos_col,
    mc_fwd_hist_aos_col,
    mc_adj_aos_col
);
walks!(
    Aos,
    aos,
    true,
    mc_fwd_entry_aos_exp,
    mc_fwd_hist_aos_exp,
    mc_adj_aos_exp
);

/// sums[i] = sum over c of tallies[c n + i], replicas in order.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mc_sum_copies(
    n: usize,
    copies: u32,
    tallies: *const f64,
    sums: *mut f64,
) {
    let mut i = global_id();
    while i < n {
        let mut s = 0.0;
        let mut c = 0;
        while c < copies as usize {
            s += f64::ldg(tallies.add(c * n + i));
            c += 1;
        }
        *sums.add(i) = s;
        i += grid_threads();
    }
}

/// The random-access reference for the walks: every thread reads `reads`
/// 32-byte records at pseudo-random indices (a 64-bit xorshift per thread) out of
/// `m` (a power of two) and stores the sum of their words, so the loads cannot
/// be dropped. Reads within a thread are independent, so many are in flight.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gather32(
    m: usize,
    rec: *const crate::scalar::C64,
    reads: u32,
    seed: u64,
    out: *mut f64,
) {
    let t = global_id();
    let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
    let mut acc = 0.0;
    let mut r = 0;
    while r < reads {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x as usize) & (m - 1);
        let a = crate::scalar::C64::ldg(rec.add(2 * i));
        let b = crate::scalar::C64::ldg(rec.add(2 * i + 1));
        acc += a.re + a.im + b.re + b.im;
        r += 1;
    }
    *out.add(t) = acc;
}
