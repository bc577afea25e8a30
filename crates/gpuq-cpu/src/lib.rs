//! # gpuq-cpu
//!
//! [`CpuBackend`]: the Rayon backend of gpuq. It is the embedded default and the
//! oracle every other backend is tested against, so its code is plain: loops over
//! fixed-size blocks, no tricks beyond several accumulators per block.
//!
//! Reductions are deterministic: a vector is cut into blocks of
//! [`reduce::BLOCK`] elements whatever the thread count, each block is summed in a
//! fixed order, and the block sums are combined by a fixed pairwise tree. The same
//! input therefore gives bitwise the same dot product on 1 or 64 threads.
//!
//! ```
//! use gpuq_core::Backend;
//! use gpuq_cpu::CpuBackend;
//!
//! let x: Vec<f64> = (0..100_000).map(|i| ((i as f64) * 0.37).sin()).collect();
//! let dot_on = |backend: &CpuBackend| -> gpuq_core::Result<f64> {
//!     let v = backend.upload(&x)?;
//!     let mut w = backend.zeros::<f64>(x.len())?;
//!     backend.axpy(2.0, &v, &mut w)?; // w = 2 x
//!     backend.dotc(&v, &w)            // 2 x^T x
//! };
//! // Rayon's global pool, one thread and four threads: the same bits.
//! let d = dot_on(&CpuBackend::new())?;
//! assert_eq!(d.to_bits(), dot_on(&CpuBackend::with_threads(1)?)?.to_bits());
//! assert_eq!(d.to_bits(), dot_on(&CpuBackend::with_threads(4)?)?.to_bits());
//! let exact: f64 = x.iter().map(|v| 2.0 * v * v).sum();
//! assert!((d - exact).abs() <= 1e-10 * exact);
//! # Ok::<(), gpuq_core::Error>(())
//! ```

#![warn(missing_docs)]

mod backend;
mod blas1;
mod matrix;
pub mod reduce;
mod spmv;
mod vector;

pub use backend::CpuBackend;
pub use matrix::CpuMatrix;
pub use vector::CpuVector;

/// Runs `f` on a worker of Rayon's global pool (the calling thread waits; on a
/// worker already, `f` runs where it is). A solve or an AMG setup on the
/// global pool called this way forks each parallel step from a worker, which
/// takes its share of the work, instead of handing every step to the pool from
/// outside and sleeping until it ends: about 3000 context switches in a
/// two-core AMG solve of 1.9 x 10^5 unknowns, 400 this way, and its setup
/// about 5% faster (docs/benchmarks.md, issue 47). The results are the same
/// bits. The CLI's one-process solves and the Python package call it; a
/// library user may wrap a solve in it the same way. O(1) beyond `f`.
pub fn on_pool_worker<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| f())
}
