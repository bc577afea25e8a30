//! Matrices resident on the CPU backend.

use gpuq_sparse::{Bsr, Csr, DeviceMatrix, Layout, Sell};

/// A matrix of the CPU backend, in the layout it was uploaded with.
#[derive(Clone, Debug)]
pub enum CpuMatrix<T> {
    /// Compressed sparse rows.
    Csr(Csr<T>),
    /// SELL-C-sigma (with the nonzero count of the source matrix).
    Sell(Sell<T>, usize),
    /// b x b blocks (with the nonzero count of the source matrix).
    Bsr(Bsr<T>, usize),
}

impl<T: gpuq_core::Scalar> DeviceMatrix for CpuMatrix<T> {
    fn shape(&self) -> (usize, usize) {
        match self {
            CpuMatrix::Csr(a) => a.shape(),
            CpuMatrix::Sell(a, _) => a.shape(),
            CpuMatrix::Bsr(a, _) => a.shape(),
        }
    }

    fn nnz(&self) -> usize {
        match self {
            CpuMatrix::Csr(a) => a.nnz(),
            CpuMatrix::Sell(_, nnz) | CpuMatrix::Bsr(_, nnz) => *nnz,
        }
    }

    fn layout(&self) -> Layout {
        match self {
            CpuMatrix::Csr(_) => Layout::Csr,
            CpuMatrix::Sell(a, _) => Layout::Sell {
                c: a.c(),
                sigma: a.sigma(),
            },
            CpuMatrix::Bsr(a, _) => Layout::Bsr { b: a.block_size() },
        }
    }
}
