//! # gpuq-core
//!
//! The vocabulary every other gpuq crate speaks:
//!
//! * [`Scalar`] and [`RealScalar`]: the four element types (`f32`, `f64`,
//!   `Complex<f32>`, `Complex<f64>`) with their real type, conjugation and magnitude;
//! * [`Backend`]: device-resident vectors and the BLAS-1 operations on them;
//! * [`LinearOperator`]: anything that maps a vector to a vector on a backend
//!   (matrices, preconditioners, later AMG cycles);
//! * [`Error`]: the one error type, whose variants say what is wrong and where;
//! * [`Stats`]: transfer and launch accounting of a backend;
//! * [`SolveReport`]: what a solver returns (serialisable).
//!
//! The sparse-matrix side of a backend (`SparseBackend`) lives in `gpuq-sparse`,
//! next to the formats it consumes, so that this crate stays free of matrix types.
//!
//! Code written against these traits runs on every backend. An operator
//! y = alpha x, written once, applied on the CPU backend (`gpuq-cpu`):
//!
//! ```
//! use gpuq_core::{Backend, LinearOperator, Result, Scalar};
//! use gpuq_cpu::CpuBackend;
//!
//! /// y = alpha x on any backend.
//! struct Scale<B, T> {
//!     backend: B,
//!     alpha: T,
//!     n: usize,
//! }
//!
//! impl<B: Backend, T: Scalar> LinearOperator<B, T> for Scale<B, T> {
//!     fn shape(&self) -> (usize, usize) {
//!         (self.n, self.n)
//!     }
//!     fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
//!         self.backend.copy(x, y)?;
//!         self.backend.scal(self.alpha, y)
//!     }
//!     fn name(&self) -> &str {
//!         "scale"
//!     }
//! }
//!
//! let cpu = CpuBackend::new();
//! let op = Scale { backend: cpu.clone(), alpha: 2.0, n: 3 };
//! let x = cpu.upload(&[1.0, 2.0, 3.0])?;
//! let mut y = cpu.zeros::<f64>(3)?;
//! op.apply(&x, &mut y)?;
//! assert_eq!(cpu.download(&y)?, [2.0, 4.0, 6.0]);
//! // The fused form returns x^H y with y.
//! assert_eq!(op.apply_dotc(&cpu, &x, &mut y)?, 28.0);
//! // Errors say what is wrong and where.
//! let short = cpu.zeros::<f64>(2)?;
//! let err = cpu.dotc(&x, &short).unwrap_err();
//! assert!(matches!(err, gpuq_core::Error::ShapeMismatch { .. }), "{err}");
//! # Ok::<(), gpuq_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod alloc;
mod backend;
mod error;
pub mod files;
pub mod interrupt;
pub mod memory;
mod operator;
mod report;
mod scalar;
mod stats;

pub use backend::{check_indices, check_same_len, Backend, DeviceVector};
pub use error::{Error, Result};
pub use operator::{FusedDot, IdentityOperator, LinearOperator};
pub use report::{SolveReport, SolveStatus};
pub use scalar::{scalars_as_bytes, scalars_as_bytes_mut, RealScalar, Scalar, ScalarKind};
pub use stats::{Stats, StatsRecorder};

pub use num_complex::{Complex, Complex32, Complex64};
pub use num_traits;
