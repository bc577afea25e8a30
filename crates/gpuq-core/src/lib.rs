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

#![warn(missing_docs)]

mod backend;
mod error;
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
