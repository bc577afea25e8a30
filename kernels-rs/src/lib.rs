//! # gpuq-kernels
//!
//! The device side of gpuq, written in Rust:
//!
//! * [`scalar`]: the element types as kernels see them ([`scalar::C32`], [`scalar::C64`]
//!   are `#[repr(C)]` pairs laid out exactly like `num_complex::Complex`) and the
//!   per-item arithmetic ([`scalar::KScalar`]) both backends share;
//! * [`slots`]: where methods that keep their scalars on the device store them;
//! * [`collective`]: the fixed order in which distributed reductions add the ranks'
//!   partials (host and device alike);
//! * [`chacha`]: the ChaCha block function as a counter-based generator, keyed by
//!   (seed, history id), and [`walk`]: one Monte Carlo history of the Neumann-Ulam
//!   methods, so both backends walk the same walks;
//! * `device` (compiled for `nvptx64` only): a small prelude of thread indices,
//!   warp shuffles and read-only loads, and the `extern "ptx-kernel"` entry points,
//!   monomorphised per scalar by macro (`axpy_f64`, `axpy_c64`, ...).
//!
//! The crate is `#![no_std]` and builds on stable for the host; the nightly-only
//! features are enabled only when compiling for `nvptx64` (`cargo xtask ptx`).

#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

pub mod amg;
pub mod chacha;
pub mod collective;
pub mod cubature;
pub mod ionic;
pub mod scalar;
pub mod slots;
pub mod uq;
pub mod walk;

#[cfg(target_arch = "nvptx64")]
pub mod device;

/// Threads per block of every 1D kernel (eight warps).
pub const BLOCK_THREADS: u32 = 256;

/// Threads per warp on every NVIDIA architecture gpuq targets.
pub const WARP: u32 = 32;

/// Basis vectors the Gram-Schmidt kernels take per unrolled group (and per row
/// of blocks of `gs_dots`'s grid), so their accumulators stay in registers.
pub const GS_CHUNK: usize = 8;

/// Where a GMRES step's array `gs` keeps t_k and rho after its inner products,
/// for a basis of `capacity` vectors: slots `gs_extra(capacity)` and one after
/// (the inner products take the `2 (capacity + 1)` slots before). The array
/// has `gs_extra(capacity) + 2` slots.
pub const fn gs_extra(capacity: usize) -> usize {
    2 * (capacity + 1)
}

/// Output tile of `block_gram_f64`: a block of [`BLOCK_THREADS`] threads
/// computes a `GRAM_TILE` x `GRAM_TILE` tile of X^T Y over its rows.
pub const GRAM_TILE: usize = 64;

/// Output columns one thread of `block_combine_f64` accumulates in registers
/// (its grid's second dimension walks the output columns by this many).
pub const COMBINE_COLUMNS: usize = 16;
