//! # gpuq-sparse
//!
//! Sparse matrix formats, their conversions, Matrix Market and PETSc binary I/O, test-problem
//! generators, and the [`SparseBackend`] trait through which a backend stores
//! matrices and multiplies by them.
//!
//! | format | use |
//! | --- | --- |
//! | [`Coo`] | assembly: unordered triplets, duplicates allowed (summed on conversion) |
//! | [`Csr`] | the validated hub format: sorted, unique, in-range indices; finite values |
//! | [`Ell`] | ELLPACK: every row padded to the longest, column-major |
//! | [`Sell`] | SELL-C-sigma: ELLPACK per slice of C rows, rows sorted by length within windows of sigma rows |
//! | [`Bsr`] | b x b block rows (b = 1 to 8), for systems with b unknowns per node |
//!
//! All conversions go through [`Csr`] and are lossless: converting back gives the
//! same structure and values (explicit zeros included).
//!
//! Assemble, convert, write and read back, and multiply on the CPU backend
//! (`gpuq-cpu`, which implements [`SparseBackend`]):
//!
//! ```
//! use gpuq_core::Backend;
//! use gpuq_sparse::{matrix_market, Coo, Csr, Layout, Sell, SparseBackend};
//!
//! // A 3 x 3 matrix from triplets; the duplicate (0, 0) entries are summed.
//! let mut coo = Coo::new(3, 3);
//! for (i, j, v) in [(0, 0, 1.0), (0, 0, 1.0), (0, 1, -1.0), (1, 0, -1.0), (1, 1, 2.0), (2, 2, 4.0)] {
//!     coo.push(i, j, v)?;
//! }
//! let a = Csr::from_coo(&coo)?;
//! assert_eq!(a.nnz(), 5);
//! // Conversions are lossless.
//! assert_eq!(Sell::from_csr(&a, 2, 1)?.to_csr()?, a);
//! // Matrix Market out and back in.
//! let mut text = Vec::new();
//! matrix_market::write_csr(&a, &mut text)?;
//! let back: Csr<f64> = matrix_market::parse_csr(std::str::from_utf8(&text).unwrap())?;
//! assert_eq!(back, a);
//! // y = A x on the host and on the CPU backend, in SELL-C-sigma storage.
//! let x = [1.0, 2.0, 3.0];
//! assert_eq!(a.mul_vec(&x)?, [0.0, 3.0, 12.0]);
//! let cpu = gpuq_cpu::CpuBackend::new();
//! let m = cpu.upload_matrix(&a, Layout::Sell { c: 2, sigma: 1 })?;
//! let xv = cpu.upload(&x)?;
//! let mut yv = cpu.zeros::<f64>(3)?;
//! cpu.spmv(1.0, &m, &xv, 0.0, &mut yv)?; // y = 1 A x + 0 y
//! assert_eq!(cpu.download(&yv)?, [0.0, 3.0, 12.0]);
//! # Ok::<(), gpuq_core::Error>(())
//! ```

#![warn(missing_docs)]

mod backend;
pub mod bidomain;
mod bsr;
mod coo;
mod csr;
pub mod elasticity;
pub mod elasticity3d;
mod ell;
pub mod fem_cylinder;
pub mod file;
pub mod generators;
pub mod matrix_market;
mod nalgebra_interop;
pub mod petsc;
mod pieces;
pub mod reference;
mod sell;
mod triplets;

pub use backend::{
    DeviceMatrix, Layout, MatrixOperator, SparseBackend, AUTO_SELL_MAX_MEAN_ROW,
    AUTO_SELL_MAX_PADDING,
};
pub use bsr::{Bsr, MAX_BSR_BLOCK};
pub use coo::Coo;
pub use csr::{par_fill_rows, par_row_pointers, Csr};
pub use ell::Ell;
pub use pieces::{join_pieces, par_transpose, transposed_pieces, RowPiece};
pub use sell::{sell_plan, Sell};
pub use triplets::Triplets32;
