//! Fused steps of iterative methods: several BLAS-1 operations in one pass over
//! memory, for solvers whose per-iteration cost is the bytes they move.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::PushKernelArg;
use gpuq_core::{check_same_len, RealScalar, Result, Scalar};
use gpuq_kernels::slots::cg::{LEN, RHO, RNORM2};

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

    /// Errors unless `sc` is CG's scalar array and `rho` one of its two rho
    /// slots.
    fn check_cg_slots<T: Scalar>(op: &'static str, sc: &CudaVector<T>, rho: usize) -> Result<()> {
        check_same_len(op, LEN, sc.len)?;
        if !RHO.contains(&rho) {
            return Err(gpuq_core::Error::InvalidArgument(format!(
                "{op}: slot {rho} is not one of CG's rho slots {RHO:?}"
            )));
        }
        Ok(())
    }

    /// CG's residual update with its scalars on the device: r = r - alpha q
    /// with alpha = `sc[rho] / sc[PQ]` (zero unless p^H A p has a positive
    /// real part), with `scaled = (d, z)` also z = d ⊙ r (a diagonal
    /// preconditioner); then `sc[RNORM2]` = ||r||^2 and `sc[next]` = r^H z
    /// (||r||^2 unscaled), `next` the other rho slot. One kernel whose last
    /// block finishes both reductions: 3 n element moves (5 n scaled), no
    /// download, no wait.
    pub fn cg_residual_slots<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        rho: usize,
        q: &CudaVector<T>,
        r: &mut CudaVector<T>,
        scaled: Option<(&CudaVector<T>, &mut CudaVector<T>)>,
    ) -> Result<()> {
        Self::check_cg_slots("cg_residual_slots", sc, rho)?;
        check_same_len("cg_residual_slots", q.len, r.len)?;
        if let Some((d, z)) = &scaled {
            check_same_len("cg_residual_slots", r.len, d.len)?;
            check_same_len("cg_residual_slots", r.len, z.len)?;
        }
        let next = RHO[0] + RHO[1] - rho;
        let n = r.len;
        let size = std::mem::size_of::<T>();
        if n == 0 {
            self.memset_slot::<T>(sc, RNORM2 * size)?;
            return self.memset_slot::<T>(sc, next * size);
        }
        let f = self.function(&kernel::<T>("cg_residual_slots"))?;
        let blocks = self.grid_blocks(n);
        let stride = blocks as usize;
        let (rho_arg, next_arg) = (rho as u32, next as u32);
        let null = 0u64;
        // The kernel's blocks read sc[rho] and sc[PQ]; its last block writes
        // the other two slots.
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&mut sc.buf)
                .arg(&rho_arg)
                .arg(&next_arg)
                .arg(&q.buf)
                .arg(&mut r.buf);
            match scaled {
                Some((d, z)) => b.arg(&d.buf).arg(&mut z.buf),
                None => b.arg(&null).arg(&null),
            };
            b.arg(&reduce.partials).arg(&stride).arg(&reduce.counter);
            // SAFETY: arguments match `cg_residual_slots_*`; q, r (and d, z)
            // hold n elements, distinct borrows; sc holds LEN; the scratch
            // holds two segments of `stride` = grid partials and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("cg_residual_slots"))?;
            self.inner.stats.launch("cg_residual_slots");
            Ok(())
        })
    }

    /// CG's direction update with its scalars on the device: x = x_in +
    /// alpha p, then p = z + beta p, alpha = `sc[rho] / sc[PQ]` (as in
    /// [`CudaBackend::cg_residual_slots`]) and beta = `sc[next] / sc[rho]`
    /// (zero where `sc[rho]` vanished). One kernel, 6 n element moves.
    pub fn cg_xp_slots<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        rho: usize,
        z: &CudaVector<T>,
        p: &mut CudaVector<T>,
        x_in: &CudaVector<T>,
        x: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_cg_slots("cg_xp_slots", sc, rho)?;
        for len in [p.len, x_in.len, x.len] {
            check_same_len("cg_xp_slots", z.len, len)?;
        }
        let n = z.len;
        if n == 0 {
            return Ok(());
        }
        let next = RHO[0] + RHO[1] - rho;
        let (rho_arg, next_arg) = (rho as u32, next as u32);
        let f = self.function(&kernel::<T>("cg_xp_slots"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n)
            .arg(&sc.buf)
            .arg(&rho_arg)
            .arg(&next_arg)
            .arg(&z.buf)
            .arg(&mut p.buf)
            .arg(&x_in.buf)
            .arg(&mut x.buf);
        // SAFETY: arguments match `cg_xp_slots_*`; every vector holds n
        // elements; p and x are borrowed mutably, so no input aliases them.
        unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("cg_xp_slots"))?;
        self.inner.stats.launch("cg_xp_slots");
        Ok(())
    }
}
