//! A small device prelude: thread geometry, warp shuffles and sums, the block
//! barrier and a block sum through shared memory, read-only cached loads and
//! atomic adds. Written with `core::arch::nvptx` and inline
//! PTX, since rust-cuda's `cuda_std` needs a codegen backend these machines lack.

use crate::scalar::{C32, C64};
use core::arch::asm;
use core::arch::nvptx;

/// `st.shared` of one value at shared-window address `a`.
macro_rules! st_shared {
    ($ty:literal, $a:expr, $v:expr, $class:ident) => {
        // SAFETY: callers pass addresses inside the block scratch.
        unsafe { asm!(concat!("st.shared.", $ty, " [{a}], {v};"), a = in(reg32) $a, v = in($class) $v) }
    };
}

/// `ld.shared` of one value at shared-window address `a`.
macro_rules! ld_shared {
    ($ty:literal, $a:expr, $class:ident) => {{
        let r;
        // SAFETY: callers pass addresses inside the block scratch.
        unsafe { asm!(concat!("ld.shared.", $ty, " {r}, [{a}];"), r = out($class) r, a = in(reg32) $a) }
        r
    }};
}

/// Index of this thread in the grid (x dimension).
#[inline(always)]
pub fn global_id() -> usize {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
            + nvptx::_thread_idx_x() as usize
    }
}

/// Number of threads in the grid (x dimension).
#[inline(always)]
pub fn grid_threads() -> usize {
    // SAFETY: as above.
    unsafe { nvptx::_grid_dim_x() as usize * nvptx::_block_dim_x() as usize }
}

/// Lane of this thread within its warp.
#[inline(always)]
pub fn lane() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_thread_idx_x() as u32 & 31 }
}

/// `shfl.sync.down.b32` over the full warp: the value of lane `lane + delta`
/// (own value when that lane is past the end). Every lane of the warp must call it.
#[inline(always)]
pub fn shfl_down_b32(v: u32, delta: u32) -> u32 {
    let r: u32;
    // SAFETY: a full-warp shuffle; the kernels call it from converged warps only.
    unsafe {
        asm!(
            "shfl.sync.down.b32 {r}, {v}, {d}, 31, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            d = in(reg32) delta,
        );
    }
    r
}

/// Real types with a correctly rounded square root (`sqrt.rn`), which `core`
/// does not offer without `std`.
pub trait DeviceReal: Copy {
    /// The square root, rounded to nearest (the IEEE result `f64::sqrt` gives).
    fn sqrt_rn(self) -> Self;
}

impl DeviceReal for f32 {
    #[inline(always)]
    fn sqrt_rn(self) -> f32 {
        let r: f32;
        // SAFETY: a register-to-register instruction with no preconditions.
        unsafe {
            asm!("sqrt.rn.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) self, options(pure, nomem, nostack))
        };
        r
    }
}

impl DeviceReal for f64 {
    #[inline(always)]
    fn sqrt_rn(self) -> f64 {
        let r: f64;
        // SAFETY: a register-to-register instruction with no preconditions.
        unsafe {
            asm!("sqrt.rn.f64 {r}, {v};", r = out(reg64) r, v = in(reg64) self, options(pure, nomem, nostack))
        };
        r
    }
}

/// Element types that can move across a warp and be loaded through the read-only cache.
pub trait DeviceScalar: Copy {
    /// Warp shuffle down by `delta` lanes (see [`shfl_down_b32`]).
    fn shfl_down(self, delta: u32) -> Self;
    /// Load through the read-only (non-coherent) cache: `ld.global.nc`.
    ///
    /// # Safety
    /// `p` must be valid for reads and not written during the kernel.
    unsafe fn ldg(p: *const Self) -> Self;
    /// Load through the read-only cache of data read once (a matrix streamed
    /// by an SpMV): `ld.global.cs.nc`, evict-first in L1 and L2, so the
    /// streamed bytes do not push the vectors out of L2.
    ///
    /// # Safety
    /// As [`DeviceScalar::ldg`].
    unsafe fn ldg_stream(p: *const Self) -> Self;
    /// Stores the value in 16-byte slot `w` (< 64) of the block scratch.
    fn scratch_store(self, w: u32);
    /// Loads 16-byte slot `w` (< 64) of the block scratch.
    fn scratch_load(w: u32) -> Self;
}

impl DeviceScalar for f32 {
    #[inline(always)]
    fn scratch_store(self, w: u32) {
        st_shared!("f32", scratch_addr(16 * w), self, reg32);
    }
    #[inline(always)]
    fn scratch_load(w: u32) -> f32 {
        ld_shared!("f32", scratch_addr(16 * w), reg32)
    }
    #[inline(always)]
    fn shfl_down(self, d: u32) -> Self {
        f32::from_bits(shfl_down_b32(self.to_bits(), d))
    }
    #[inline(always)]
    unsafe fn ldg(p: *const f32) -> f32 {
        let r: f32;
        asm!("ld.global.nc.f32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p);
        r
    }
    #[inline(always)]
    unsafe fn ldg_stream(p: *const f32) -> f32 {
        let r: f32;
        asm!("ld.global.cs.nc.f32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p);
        r
    }
}

impl DeviceScalar for f64 {
    #[inline(always)]
    fn scratch_store(self, w: u32) {
        st_shared!("f64", scratch_addr(16 * w), self, reg64);
    }
    #[inline(always)]
    fn scratch_load(w: u32) -> f64 {
        ld_shared!("f64", scratch_addr(16 * w), reg64)
    }
    #[inline(always)]
    fn shfl_down(self, d: u32) -> Self {
        let b = self.to_bits();
        let lo = shfl_down_b32(b as u32, d);
        let hi = shfl_down_b32((b >> 32) as u32, d);
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }
    #[inline(always)]
    unsafe fn ldg(p: *const f64) -> f64 {
        let r: f64;
        asm!("ld.global.nc.f64 {r}, [{p}];", r = out(reg64) r, p = in(reg64) p);
        r
    }
    #[inline(always)]
    unsafe fn ldg_stream(p: *const f64) -> f64 {
        let r: f64;
        asm!("ld.global.cs.nc.f64 {r}, [{p}];", r = out(reg64) r, p = in(reg64) p);
        r
    }
}

impl DeviceScalar for C32 {
    #[inline(always)]
    fn scratch_store(self, w: u32) {
        st_shared!("f32", scratch_addr(16 * w), self.re, reg32);
        st_shared!("f32", scratch_addr(16 * w + 4), self.im, reg32);
    }
    #[inline(always)]
    fn scratch_load(w: u32) -> C32 {
        C32 {
            re: ld_shared!("f32", scratch_addr(16 * w), reg32),
            im: ld_shared!("f32", scratch_addr(16 * w + 4), reg32),
        }
    }
    #[inline(always)]
    fn shfl_down(self, d: u32) -> Self {
        C32 {
            re: self.re.shfl_down(d),
            im: self.im.shfl_down(d),
        }
    }
    /// One 8-byte vector load (`ld.global.nc.v2.f32`): `C32` is 8-byte aligned.
    #[inline(always)]
    unsafe fn ldg(p: *const C32) -> C32 {
        let (re, im): (f32, f32);
        asm!(
            "ld.global.nc.v2.f32 {{{re}, {im}}}, [{p}];",
            re = out(reg32) re,
            im = out(reg32) im,
            p = in(reg64) p,
        );
        C32 { re, im }
    }
    #[inline(always)]
    unsafe fn ldg_stream(p: *const C32) -> C32 {
        let (re, im): (f32, f32);
        asm!(
            "ld.global.cs.nc.v2.f32 {{{re}, {im}}}, [{p}];",
            re = out(reg32) re,
            im = out(reg32) im,
            p = in(reg64) p,
        );
        C32 { re, im }
    }
}

impl DeviceScalar for C64 {
    #[inline(always)]
    fn scratch_store(self, w: u32) {
        st_shared!("f64", scratch_addr(16 * w), self.re, reg64);
        st_shared!("f64", scratch_addr(16 * w + 8), self.im, reg64);
    }
    #[inline(always)]
    fn scratch_load(w: u32) -> C64 {
        C64 {
            re: ld_shared!("f64", scratch_addr(16 * w), reg64),
            im: ld_shared!("f64", scratch_addr(16 * w + 8), reg64),
        }
    }
    #[inline(always)]
    fn shfl_down(self, d: u32) -> Self {
        C64 {
            re: self.re.shfl_down(d),
            im: self.im.shfl_down(d),
        }
    }
    /// One 16-byte vector load (`ld.global.nc.v2.f64`): device buffers of `C64`
    /// are 16-byte aligned (allocations are 256-byte aligned, elements 16 bytes).
    #[inline(always)]
    unsafe fn ldg(p: *const C64) -> C64 {
        let (re, im): (f64, f64);
        asm!(
            "ld.global.nc.v2.f64 {{{re}, {im}}}, [{p}];",
            re = out(reg64) re,
            im = out(reg64) im,
            p = in(reg64) p,
        );
        C64 { re, im }
    }
    #[inline(always)]
    unsafe fn ldg_stream(p: *const C64) -> C64 {
        let (re, im): (f64, f64);
        asm!(
            "ld.global.cs.nc.v2.f64 {{{re}, {im}}}, [{p}];",
            re = out(reg64) re,
            im = out(reg64) im,
            p = in(reg64) p,
        );
        C64 { re, im }
    }
}

/// Read-only load of a `u32` read once (an SpMV's column indices), evict-first
/// in L1 and L2 (`ld.global.cs.nc`; see [`DeviceScalar::ldg_stream`]).
///
/// # Safety
/// `p` must be valid for reads and not written during the kernel.
#[inline(always)]
pub unsafe fn ldg_stream_u32(p: *const u32) -> u32 {
    let r: u32;
    asm!("ld.global.cs.nc.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p);
    r
}

/// Read-only cached load of a `u32` (column indices, permutations).
///
/// # Safety
/// `p` must be valid for reads and not written during the kernel.
#[inline(always)]
pub unsafe fn ldg_u32(p: *const u32) -> u32 {
    let r: u32;
    asm!("ld.global.nc.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p);
    r
}

/// Read-only cached load of a `u64` (row and slice pointers).
///
/// # Safety
/// `p` must be valid for reads and not written during the kernel.
#[inline(always)]
pub unsafe fn ldg_u64(p: *const u64) -> u64 {
    let r: u64;
    asm!("ld.global.nc.u64 {r}, [{p}];", r = out(reg64) r, p = in(reg64) p);
    r
}

/// Atomically adds `v` to `*p` (`atom.global.add.f64`, sm_60 and later); returns the old value.
///
/// # Safety
/// `p` must point to device global memory valid for reads and writes.
#[inline(always)]
pub unsafe fn atomic_add_f64(p: *mut f64, v: f64) -> f64 {
    let r: f64;
    asm!("atom.global.add.f64 {r}, [{p}], {v};", r = out(reg64) r, p = in(reg64) p, v = in(reg64) v);
    r
}

// The block's scratch in shared memory: 16-byte slots, one per warp of a
// 256-thread block for each of up to 8 sums (declared once at module scope;
// every kernel that uses it gets its own copy per block).
core::arch::global_asm!(".shared .align 16 .b8 gpuq_block_scratch[1024];");

/// Waits until every thread of the block has arrived (`bar.sync 0`), and makes
/// their shared-memory writes visible to each other. Every thread of the block
/// must call it.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a block-wide barrier (`llvm.nvvm.barrier0`, which the compiler
    // knows to be convergent, so it is never moved into divergent code); the
    // kernels call it from every thread.
    unsafe { nvptx::_syncthreads() }
}

/// Shared-window address of byte `offset` of the block scratch (`offset < 1024`).
#[inline(always)]
fn scratch_addr(offset: u32) -> u32 {
    let base: u32;
    // SAFETY: takes the address of a declared shared variable.
    unsafe { asm!("mov.u32 {b}, gpuq_block_scratch;", b = out(reg32) base) }
    base + offset
}

/// Writes the block sums of the first `k <= K <= 8` of `vals` to
/// `partials[j * stride + block]`, j < k: each warp sums every value by a
/// fixed shuffle tree and stores its sums in the block scratch; then warp j sums
/// the eight warp sums of value j the same way, so the bits depend only on the
/// inputs. Every thread of the block must call it, at most once per kernel.
///
/// # Safety
/// `partials` must hold `k * stride` elements, `block < stride`.
#[inline(always)]
pub unsafe fn store_block_partials<T: DeviceScalar + crate::scalar::KScalar, const K: usize>(
    vals: [T; K],
    k: u32,
    partials: *mut T,
    stride: usize,
    block: usize,
) {
    const WARPS: u32 = crate::BLOCK_THREADS / 32;
    let warp = nvptx::_thread_idx_x() as u32 / 32;
    // A loop over a constant count: unrolled, so `vals` stays in registers.
    for (j, &v) in vals.iter().enumerate() {
        let s = warp_sum(v);
        if lane() == 0 {
            s.scratch_store(j as u32 * WARPS + warp);
        }
    }
    sync_threads();
    if warp < k && (warp as usize) < K {
        let mut t = T::zero();
        if lane() < WARPS {
            t = T::scratch_load(warp * WARPS + lane());
        }
        let t = warp_sum(t);
        if lane() == 0 {
            *partials.add(warp as usize * stride + block) = t;
        }
    }
}

/// Sum of `partials[0..m]` over one warp (lane l adds elements l, l + 32, ... in
/// order, then [`warp_sum`]): the second pass of a reduction, valid in lane 0.
/// Every lane of the warp must call it.
///
/// # Safety
/// `partials` must hold `m` elements.
#[inline(always)]
pub unsafe fn warp_total<T: DeviceScalar + crate::scalar::KScalar>(
    m: usize,
    partials: *const T,
) -> T {
    let mut s = T::zero();
    let mut i = lane() as usize;
    while i < m {
        s = s + *partials.add(i);
        i += 32;
    }
    warp_sum(s)
}

/// Sum over the 32 lanes of a warp by a fixed shuffle tree; the total is valid in lane 0.
/// Every lane of the warp must call it.
#[inline(always)]
pub fn warp_sum<T: DeviceScalar + crate::scalar::KScalar>(mut s: T) -> T {
    let mut d = 16;
    while d > 0 {
        s = s + s.shfl_down(d);
        d /= 2;
    }
    s
}

/// Atomically adds `v` to `*p` (`atom.global.add.u64`); returns the old value.
///
/// # Safety
/// `p` must point to device global memory valid for reads and writes.
#[inline(always)]
pub unsafe fn atomic_add_u64(p: *mut u64, v: u64) -> u64 {
    let r: u64;
    asm!("atom.global.add.u64 {r}, [{p}], {v};", r = out(reg64) r, p = in(reg64) p, v = in(reg64) v);
    r
}

/// `fence.acq_rel.gpu`: orders this thread's memory accesses before and after
/// it for every thread of the device (`__threadfence`).
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.acq_rel.gpu;") }
}

/// A block barrier (`bar.red.or.pred`) that also tells every thread whether
/// any thread of the block passed `p` true. Every thread of the block must
/// call it.
#[inline(always)]
pub fn sync_threads_or(p: bool) -> bool {
    let r: u32;
    // SAFETY: a block-wide barrier with a reduction; called by every thread.
    unsafe {
        asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; bar.red.or.pred q, 0, p; selp.u32 {r}, 1, 0, q; }}",
            x = in(reg32) p as u32,
            r = out(reg32) r,
        );
    }
    r != 0
}

/// Loads that bypass the SM's L1 cache (`ld.global.cg`): values other blocks
/// wrote during this kernel, read after a fence.
pub trait L2Load: Copy {
    /// The value at `p`, read from L2.
    ///
    /// # Safety
    /// `p` must be valid for reads.
    unsafe fn ld_cg(p: *const Self) -> Self;
}

impl L2Load for f32 {
    #[inline(always)]
    unsafe fn ld_cg(p: *const f32) -> f32 {
        let r: f32;
        asm!("ld.global.cg.f32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p);
        r
    }
}

impl L2Load for f64 {
    #[inline(always)]
    unsafe fn ld_cg(p: *const f64) -> f64 {
        let r: f64;
        asm!("ld.global.cg.f64 {r}, [{p}];", r = out(reg64) r, p = in(reg64) p);
        r
    }
}

impl L2Load for C32 {
    #[inline(always)]
    unsafe fn ld_cg(p: *const C32) -> C32 {
        let (re, im): (f32, f32);
        asm!(
            "ld.global.cg.v2.f32 {{{re}, {im}}}, [{p}];",
            re = out(reg32) re,
            im = out(reg32) im,
            p = in(reg64) p,
        );
        C32 { re, im }
    }
}

impl L2Load for C64 {
    #[inline(always)]
    unsafe fn ld_cg(p: *const C64) -> C64 {
        let (re, im): (f64, f64);
        asm!(
            "ld.global.cg.v2.f64 {{{re}, {im}}}, [{p}];",
            re = out(reg64) re,
            im = out(reg64) im,
            p = in(reg64) p,
        );
        C64 { re, im }
    }
}

/// Atomically adds 1 to `*p` (`atom.global.add.u32`); returns the old value.
///
/// # Safety
/// `p` must point to device global memory valid for reads and writes.
#[inline(always)]
unsafe fn atomic_inc_u32(p: *mut u32) -> u32 {
    let r: u32;
    asm!("atom.global.add.u32 {r}, [{p}], 1;", r = out(reg32) r, p = in(reg64) p);
    r
}

/// `ld.volatile.global.u32`: the value at `p` as the device holds it now
/// (not a copy in this SM's L1 cache).
///
/// # Safety
/// `p` must point to device global memory valid for reads.
#[inline(always)]
pub unsafe fn ld_volatile_u32(p: *const u32) -> u32 {
    let r: u32;
    asm!("ld.volatile.global.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p);
    r
}

/// `ld.volatile.global.u64`, as [`ld_volatile_u32`].
///
/// # Safety
/// `p` must point to device global memory valid for reads.
#[inline(always)]
pub unsafe fn ld_volatile_u64(p: *const u64) -> u64 {
    let r: u64;
    asm!("ld.volatile.global.u64 {r}, [{p}];", r = out(reg64) r, p = in(reg64) p);
    r
}

/// Waits until every thread of the grid has arrived, and makes each one's
/// global-memory writes before it visible to every thread after it (the
/// pattern of cooperative groups' grid barrier: a block barrier; thread 0
/// of each block fences, counts its block in `bar[0]` and waits for the
/// generation `bar[1]` to change, which the last block to arrive does after
/// resetting the count; a fence and a block barrier). A grid of one block
/// only takes the block barrier. Every thread of every block must call it.
///
/// # Safety
/// Every block of the grid must be resident at once (a cooperative launch);
/// `bar` must point to two `u32` of device global memory that no other
/// kernel uses concurrently, `bar[0]` zero at the launch.
#[inline(always)]
pub unsafe fn sync_grid(bar: *mut u32) {
    let blocks = nvptx::_grid_dim_x() as u32;
    sync_threads();
    if blocks > 1 && nvptx::_thread_idx_x() == 0 {
        let generation = bar.add(1);
        let seen = ld_volatile_u32(generation);
        fence_gpu();
        if atomic_inc_u32(bar) == blocks - 1 {
            asm!("st.volatile.global.u32 [{p}], 0;", p = in(reg64) bar);
            fence_gpu();
            atomic_inc_u32(generation);
        } else {
            while ld_volatile_u32(generation) == seen {}
        }
        fence_gpu();
    }
    sync_threads();
}

/// The end of a single-launch deterministic reduction of up to four values
/// per thread: stores the block's sums of `vals` at `partials[j * stride +
/// block]` (as [`store_block_partials`]), and the last block of the grid to
/// get here sums every block's partials in a fixed order (thread t adds
/// partials t, t + 256, ... in order, then the fixed shuffle trees of [`store_block_partials`]),
/// so the bits depend only on the inputs and the grid size, never on which
/// block came last. Returns the totals in thread 0 of that last block, `None`
/// in every other thread. The block that sums resets `*counter` to zero for
/// the next launch.
///
/// Every thread of the block must call it, once, at the end of its kernel;
/// the kernel must not read memory the caller of the totals writes (the totals
/// are only known once every block has finished its reads).
///
/// # Safety
/// `partials` must hold `K * stride` elements with `stride` at least the
/// grid's blocks; `counter` must point to a `u32` that is zero at the launch
/// and that no other kernel uses concurrently.
#[inline(always)]
pub unsafe fn reduce_grid<T: DeviceScalar + L2Load + crate::scalar::KScalar, const K: usize>(
    vals: [T; K],
    partials: *mut T,
    stride: usize,
    counter: *mut u32,
) -> Option<[T; K]> {
    const WARPS: u32 = crate::BLOCK_THREADS / 32;
    const { assert!(K >= 1 && K <= 4) };
    // Every loop over the K values below is unrolled by hand (constant
    // indices, `j < K` known at compile time), so no array leaves registers.
    macro_rules! each {
        (|$j:ident| $body:block) => {{
            #[allow(unused_mut)]
            let mut f = |$j: usize| {
                if $j < K $body
            };
            f(0);
            f(1);
            f(2);
            f(3);
        }};
    }
    let tid = nvptx::_thread_idx_x() as u32;
    let warp = tid / 32;
    let block = nvptx::_block_idx_x() as usize;
    each!(|j| {
        let s = warp_sum(vals[j]);
        if lane() == 0 {
            s.scratch_store(j as u32 * WARPS + warp);
        }
    });
    sync_threads();
    if (warp as usize) < K {
        let mut t = T::zero();
        if lane() < WARPS {
            t = T::scratch_load(warp * WARPS + lane());
        }
        let t = warp_sum(t);
        if lane() == 0 {
            *partials.add(warp as usize * stride + block) = t;
            // Visible to the device before this block is counted.
            fence_gpu();
        }
    }
    sync_threads();
    let blocks = nvptx::_grid_dim_x() as u32;
    let mut last = false;
    if tid == 0 {
        // The other warps' partials were fenced by their writers before the
        // barrier; this fence carries them along with the count.
        fence_gpu();
        last = atomic_inc_u32(counter) == blocks - 1;
        if last {
            // Every block has counted itself: nobody reads the counter again
            // in this launch.
            *counter = 0;
        }
    }
    if !sync_threads_or(last) {
        return None;
    }
    fence_gpu();
    let m = blocks as usize;
    let step = crate::BLOCK_THREADS as usize;
    let mut sums = [T::zero(); 4];
    each!(|j| {
        let p = partials.add(j * stride);
        let mut s = T::zero();
        let mut i = tid as usize;
        // Four loads in flight, added in order of i.
        while i + 3 * step < m {
            let (a, b) = (T::ld_cg(p.add(i)), T::ld_cg(p.add(i + step)));
            let (c, d) = (T::ld_cg(p.add(i + 2 * step)), T::ld_cg(p.add(i + 3 * step)));
            s = s + a + b + c + d;
            i += 4 * step;
        }
        while i < m {
            s = s + T::ld_cg(p.add(i));
            i += step;
        }
        sums[j] = s;
    });
    // The block scratch is free again: every thread passed the barrier above
    // after the partials' reads of it.
    each!(|j| {
        let s = warp_sum(sums[j]);
        if lane() == 0 {
            s.scratch_store(j as u32 * WARPS + warp);
        }
    });
    sync_threads();
    if (warp as usize) < K {
        let mut t = T::zero();
        if lane() < WARPS {
            t = T::scratch_load(warp * WARPS + lane());
        }
        let t = warp_sum(t);
        if lane() == 0 {
            // Slots 32.. are past the 4 x 8 warp sums.
            t.scratch_store(32 + warp);
        }
    }
    sync_threads();
    if tid != 0 {
        return None;
    }
    let mut totals = [T::zero(); K];
    each!(|j| {
        totals[j] = T::scratch_load(32 + j as u32);
    });
    Some(totals)
}
