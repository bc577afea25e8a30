//! Fused steps of iterative methods: several BLAS-1 operations in one pass over
//! memory, for solvers whose per-iteration cost is the bytes they move.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::PushKernelArg;
use gpuq_core::{check_same_len, RealScalar, Result, Scalar};

impl CudaBackend {
    /// CG's residual update: r = r - alpha q, and returns ||r||^2.
    ///
    /// One kernel (3 n element moves: q and r read, r written) whose last block
    /// finishes the deterministic reduction; one scalar download.
    pub fn cg_update_residual<T: Scalar>(
        &self,
        alpha: T,
        q: &CudaVector<T>,
        r: &mut CudaVector<T>,
    ) -> Result<T::Real> {
        check_same_len("cg_update_residual", q.len, r.len)?;
        let n = r.len;
        if n == 0 {
            return Ok(T::Real::of_f64(0.0));
        }
        let a = ScalarArg::of(alpha);
        let f = self.function(&kernel::<T>("cg_residual"))?;
        let blocks = self.grid_blocks(n);
        self.reduce_with::<T::Real>(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n);
            a.push(&mut b);
            b.arg(&q.buf).arg(&mut r.buf);
            reduce.push(&mut b);
            b.arg(&reduce.out);
            // SAFETY: arguments match `cg_residual_*`; q and r hold n elements and
            // do not alias (one is borrowed shared, the other mutably); the scratch
            // has one partial per block of the grid and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("cg_residual"))?;
            self.inner.stats.launch("cg_residual");
            Ok(())
        })
    }

    /// CG's direction update: x = x + alpha p, then p = z + beta p.
    ///
    /// One kernel, 5 n element moves (x, p, z read; x, p written).
    pub fn cg_update_xp<T: Scalar>(
        &self,
        alpha: T,
        beta: T,
        z: &CudaVector<T>,
        p: &mut CudaVector<T>,
        x: &mut CudaVector<T>,
    ) -> Result<()> {
        check_same_len("cg_update_xp", z.len, p.len)?;
        check_same_len("cg_update_xp", z.len, x.len)?;
        let n = z.len;
        if n == 0 {
            return Ok(());
        }
        let (a, bb) = (ScalarArg::of(alpha), ScalarArg::of(beta));
        let f = self.function(&kernel::<T>("cg_xp"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n);
        a.push(&mut b);
        bb.push(&mut b);
        b.arg(&z.buf).arg(&mut p.buf).arg(&mut x.buf);
        // SAFETY: arguments match `cg_xp_*`; the three vectors hold n elements and
        // do not alias (distinct borrows).
        unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("cg_xp"))?;
        self.inner.stats.launch("cg_xp");
        Ok(())
    }
}
