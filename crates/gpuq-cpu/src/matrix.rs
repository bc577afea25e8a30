//! Matrices resident on the CPU backend.

use gpuq_sparse::{Bsr2, Csr, DeviceMatrix, Layout, Sell};

/// A matrix of the CPU backend, in the layout it was uploaded with.
#[derive(Clone, Debug)]
pub enum CpuMatrix<T> {
    /// Compressed sparse rows.
    Csr(Csr<T>),
    /// SELL-C-sigma (with the nonzero count of the source matrix).
    Sell(Sell<T>, usize),
    /// 2x2 blocks (with the nonzero count of the source matrix).
    Bsr2(Bsr2<T>, usize),
}

impl<T: gpuq_core::Scalar> DeviceMatrix for CpuMatrix<T> {
    fn shape(&self) -> (usize, usize) {
        match self {
            CpuMatrix::Csr(a) => a.shape(),
            CpuMatrix::Sell(a, _) => a.shape(),
            CpuMatrix::Bsr2(a, _) => a.shape(),
        }
    }

    fn nnz(&self) -> usize {
        match self {
            CpuMatrix::Csr(a) => a.nnz(),
            CpuMatrix::Sell(_, nnz) | CpuMatrix::Bsr2(_, nnz) => *nnz,
        }
    }

    fn layout(&self) -> Layout {
        match self {
            CpuMatrix::Csr(_) => Layout::Csr,
            CpuMatrix::Sell(a, _) => Layout::Sell {
                c: a.c(),
                sigma: a.sigma(),
            },
            CpuMatrix::Bsr2(..) => Layout::Bsr2,
        }
    }
}
