//! The fused AMG cycle step on the device (kernels `amg_sweep_csr_*` and
//! `amg_sweep_sell_*` in `kernels-rs/src/device/amg.rs`): one pass over A that
//! writes the residual b - A x or a damped point-Jacobi iterate.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::spmv::{Arrays, CudaMatrix};
use crate::vector::CudaVector;
use cudarc::driver::PushKernelArg;
use gpuq_core::{check_same_len, Error, Result, Scalar};

impl CudaBackend {
    /// One pass over the square CSR or SELL matrix `a`: `out = b - A x`, or
    /// with `dinv = Some(d)` (A's inverse diagonal) the damped Jacobi iterate
    /// `out = x + omega d .* (b - A x)`. Reads A once and b, x, d once each and
    /// writes `out` once: about 12 nnz + 32 n bytes for f64, against 12 nnz +
    /// 64 n for a copy, an SpMV and a diagonal product. `out` must be a
    /// distinct vector (Rust's borrows ensure it).
    ///
    /// Returns `Ok(false)` without launching for a BSR2 matrix (the caller
    /// takes its unfused path); errors on a non-square matrix or mismatched
    /// lengths.
    pub fn amg_sweep<T: Scalar>(
        &self,
        a: &CudaMatrix<T>,
        omega: T,
        b: &CudaVector<T>,
        x: &CudaVector<T>,
        dinv: Option<&CudaVector<T>>,
        out: &mut CudaVector<T>,
    ) -> Result<bool> {
        let (m, n) = a.shape;
        if m != n {
            return Err(Error::shape("amg_sweep (A square)", m, n));
        }
        check_same_len("amg_sweep (b)", m, b.len)?;
        check_same_len("amg_sweep (x)", m, x.len)?;
        check_same_len("amg_sweep (out)", m, out.len)?;
        if let Some(d) = dinv {
            check_same_len("amg_sweep (dinv)", m, d.len)?;
        }
        let om = ScalarArg::of(omega);
        let null = 0u64;
        match &a.arrays {
            Arrays::Csr {
                row_ptr,
                col,
                val,
                lanes_log2,
            } => {
                let f = self.function(&kernel::<T>("amg_sweep_csr"))?;
                let mut l = self.inner.stream.launch_builder(&f);
                l.arg(&m).arg(lanes_log2);
                om.push(&mut l);
                l.arg(row_ptr).arg(col).arg(val).arg(&b.buf).arg(&x.buf);
                match dinv {
                    Some(d) => l.arg(&d.buf),
                    None => l.arg(&null),
                };
                l.arg(&mut out.buf);
                // SAFETY: arguments match `amg_sweep_csr_*` (a null dinv means
                // the residual); the arrays describe a validated square CSR
                // matrix of m rows; b, x, dinv and out hold m values (checked
                // above); out is a distinct buffer (borrows).
                let blocks = self.grid_blocks(m << lanes_log2);
                unsafe { l.launch(Self::cfg(blocks)) }.map_err(dev("amg_sweep_csr"))?;
                self.inner.stats.launch("amg_sweep_csr");
            }
            Arrays::Sell {
                slice_ptr,
                col,
                val,
                perm,
                c,
            } => {
                let f = self.function(&kernel::<T>("amg_sweep_sell"))?;
                let mut l = self.inner.stream.launch_builder(&f);
                l.arg(&m).arg(c);
                om.push(&mut l);
                l.arg(slice_ptr).arg(col).arg(val);
                match perm {
                    Some(p) => l.arg(p),
                    None => l.arg(&null),
                };
                l.arg(&b.buf).arg(&x.buf);
                match dinv {
                    Some(d) => l.arg(&d.buf),
                    None => l.arg(&null),
                };
                l.arg(&mut out.buf);
                // SAFETY: arguments match `amg_sweep_sell_*` (null perm: the
                // identity; null dinv: the residual); the arrays come from
                // `Sell::from_csr` of a validated square matrix; as for CSR.
                unsafe { l.launch(Self::cfg(self.grid_blocks(m))) }
                    .map_err(dev("amg_sweep_sell"))?;
                self.inner.stats.launch("amg_sweep_sell");
            }
            Arrays::Bsr2 { .. } => return Ok(false),
        }
        Ok(true)
    }
}
