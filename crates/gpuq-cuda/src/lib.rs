//! # gpuq-cuda
//!
//! [`CudaBackend`]: gpuq's CUDA backend. Its kernels are Rust (`kernels-rs`,
//! compiled to PTX by `cargo xtask ptx` and committed as `ptx/gpuq_kernels.ptx`);
//! this crate embeds that PTX and loads it with cudarc, which opens the CUDA
//! driver library at run time. Building therefore needs neither a CUDA toolkit
//! nor a GPU; on a machine without either, [`CudaBackend::new`] returns
//! [`gpuq_core::Error::NoCudaDevice`].
//!
//! Data stays on the device: vectors and matrices are uploaded once, and the
//! operations only move scalars back (dot products and norms, one download each).
//! Every upload, download, byte and launch is counted in [`gpuq_core::Stats`].
//!
//! Launch configurations come from the device: elementwise kernels and the first
//! reduction pass use grid-stride loops over `min(ceil(n / 256), 8 * SMs)` blocks of
//! 256 threads; SpMV walks rows the same way, one thread per row (SELL) or a
//! power-of-two group of lanes per row chosen from the mean row length (CSR); the
//! BSR2 kernel takes one thread per block row. Reductions (dot products, norms, the
//! dot fused into `spmv_dotc`, CG's fused residual update, the methods' fused
//! steps) take one launch and are deterministic: one partial per block in a fixed
//! order, then the last block to finish sums them in a fixed order.
//!
//! All work goes to one stream of the backend's own. A method whose iteration
//! keeps its scalars on the device can record the iteration's launches once as
//! a CUDA graph and replay it ([`CudaBackend::replay`]), and read each
//! iteration's scalars through a [`ScalarRing`] while the next iteration runs.
//!
//! ## Example
//!
//! Without a device (or without the driver library) [`CudaBackend::new`]
//! says so with [`gpuq_core::Error::NoCudaDevice`], on which a program may
//! use the CPU backend instead (as the facade's `gpuq::choose` does for
//! `auto`); with a device, the data goes up once and only the dot product
//! comes back:
//!
//! ```
//! use gpuq_core::{Backend, Error};
//! use gpuq_cuda::CudaBackend;
//!
//! let x: Vec<f64> = (0..10_000).map(|i| i as f64 * 1e-3).collect();
//! let exact: f64 = x.iter().map(|v| v * v).sum();
//! match CudaBackend::new(0) {
//!     Ok(gpu) => {
//!         let before = gpu.stats();
//!         let v = gpu.upload(&x)?;
//!         let d = gpu.dotc(&v, &v)?;
//!         assert!((d - exact).abs() <= 1e-12 * exact);
//!         let moved = gpu.stats().since(&before);
//!         assert_eq!((moved.uploads, moved.downloads), (1, 1));
//!     }
//!     Err(Error::NoCudaDevice(reason)) => {
//!         assert_eq!(CudaBackend::device_count().unwrap_or(0), 0, "{reason}");
//!     }
//!     Err(e) => return Err(e),
//! }
//! # Ok::<(), Error>(())
//! ```

#![warn(missing_docs)]

mod amg;
mod amg_resident;
mod amg_setup;
mod backend;
mod bicgstab;
mod bicgstabl;
mod bidomain;
mod blas1;
mod block;
mod cubature;
mod foreign;
mod fused;
mod gram_schmidt;
mod halo;
mod linked;
mod nccl;
mod qmr;
mod replay;
mod setup_replay;
mod slots;
mod snapshots;
mod spmv;
mod staging;
mod tfqmr;
mod uq;
mod uq_convolution;
mod vector;
mod walks;

pub use amg::ChebPass;
pub use amg_resident::InputChecks;
pub use amg_setup::{DeviceAggregates, SetupCsr, SetupVec};
pub use backend::{CudaBackend, DeviceInfo};
pub use cubature::DeviceIntegrand;
pub use foreign::{ForeignCsr, ForeignVector};
pub use linked::{cache_dir, DeviceCode, LinkSource, LinkedIntegrand, ENTRY, USER_PTX};
pub use nccl::{DeviceIndices, NcclHalo, NCCL_ID_BYTES, NCCL_SLOTS};
pub use replay::Recording;
pub use setup_replay::SetupOps;
pub use snapshots::{ScalarRing, SnapshotSlot};
pub use spmv::CudaMatrix;
pub use uq::{BandResident, SdofPart, SdofReal, SdofRun, SdofSums};
pub use uq_convolution::{ConvolutionRun, ConvolutionSums};
pub use vector::CudaVector;
pub use walks::{DeviceWalkData, ForwardMapping};

/// The PTX of `kernels-rs`, as committed (checked fresh by `cargo xtask ptx --check`).
pub const PTX: &str = include_str!("../ptx/gpuq_kernels.ptx");
