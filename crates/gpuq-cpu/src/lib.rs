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
