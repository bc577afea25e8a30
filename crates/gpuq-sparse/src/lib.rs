//! # gpuq-sparse
//!
//! Sparse matrix formats, their conversions, Matrix Market I/O, test-problem
//! generators, and the [`SparseBackend`] trait through which a backend stores
//! matrices and multiplies by them.
//!
//! | format | use |
//! | --- | --- |
//! | [`Coo`] | assembly: unordered triplets, duplicates allowed (summed on conversion) |
//! | [`Csr`] | the validated hub format: sorted, unique, in-range indices; finite values |
//! | [`Ell`] | ELLPACK: every row padded to the longest, column-major |
//! | [`Sell`] | SELL-C-sigma: ELLPACK per slice of C rows, rows sorted by length within windows of sigma rows |
//! | [`Bsr2`] | 2x2 block rows, for systems with two unknowns per node |
//!
//! All conversions go through [`Csr`] and are lossless: converting back gives the
//! same structure and values (explicit zeros included).

#![warn(missing_docs)]

mod backend;
pub mod bidomain;
mod bsr2;
mod coo;
mod csr;
pub mod elasticity;
mod ell;
pub mod fem_cylinder;
pub mod generators;
pub mod matrix_market;
mod nalgebra_interop;
mod sell;

pub use backend::{DeviceMatrix, Layout, MatrixOperator, SparseBackend};
pub use bsr2::Bsr2;
pub use coo::Coo;
pub use csr::Csr;
pub use ell::Ell;
pub use sell::Sell;
