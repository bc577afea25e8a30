//! BiCGSTAB(l)'s steps with device-resident scalars: vector steps
//! `y = sc[a] x + sc[b] y` with slot indices as arguments, dot products into
//! slots, and one-thread kernels for the scalars between them (slots in
//! [`gpuq_kernels::slots::bicgstabl`]; after a recorded breakdown the vector
//! steps do nothing), so a cycle needs no host round trip
//! until the caller downloads `sc` at its end. Every slot index is checked
//! against `sc`'s length here: the kernels index unchecked.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, launch_1d, Dest, FirstPass};
use crate::slots::ONE_WARP;
use crate::vector::CudaVector;
use cudarc::driver::PushKernelArg;
use gpuq_core::{check_indices, check_same_len, Result, Scalar};
use gpuq_kernels::slots::bicgstabl::{len, FLAG};

impl CudaBackend {
    /// The start of a solve: every slot zero but the constant 1, rho0 = 1 and
    /// omega = 1 (one launch of one warp, thread 0 writing; no upload).
    pub fn bicgstabl_start<T: Scalar>(&self, sc: &mut CudaVector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_start", len(l), sc.len)?;
        let f = self.function(&kernel::<T>("bicgstabl_start"))?;
        let n = sc.len;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mut sc.buf).arg(&n);
        // SAFETY: arguments match `bicgstabl_start_*`; sc holds `n` slots.
        unsafe { b.launch(ONE_WARP) }.map_err(dev("bicgstabl_start"))?;
        self.inner.stats.launch("bicgstabl_start");
        Ok(())
    }

    /// `sc[k] = x^H y`: the BLAS-1 dot with its result written into the slot
    /// (2 n reads, no download).
    pub fn dotc_into_slot<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        y: &CudaVector<T>,
        sc: &mut CudaVector<T>,
        k: usize,
    ) -> Result<()> {
        check_same_len("dotc_into_slot", x.len, y.len)?;
        check_indices("dotc_into_slot", sc.len, &[k])?;
        self.reduce_blas1::<T, T>(
            x.len,
            FirstPass::Dot(&x.buf, &y.buf, 1),
            Dest::Device(&mut sc.buf, k * std::mem::size_of::<T>()),
        )
    }

    /// `y = sc[ka] x + sc[kb] y` (3 n element moves), or nothing once
    /// `sc[FLAG]` records a breakdown.
    pub fn axpby_slots<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        ka: usize,
        x: &CudaVector<T>,
        kb: usize,
        y: &mut CudaVector<T>,
    ) -> Result<()> {
        check_same_len("axpby_slots", x.len, y.len)?;
        check_indices("axpby_slots", sc.len, &[ka, kb, FLAG])?;
        launch_1d!(self, T, "axpby_slots", y.len, |b| {
            b.arg(&sc.buf).arg(&ka).arg(&x.buf).arg(&kb).arg(&mut y.buf);
        })
    }

    /// One thread: `v = sc[a] sc[b] / sc[c]` (zero when `sc[c]` vanished) into
    /// `sc[out]`, `-v` into `sc[neg_out]`; when `check` names a slot whose
    /// value vanished and no breakdown is recorded, `code` goes to `sc[FLAG]`.
    pub fn slot_ratio<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        (a, b, c): (usize, usize, usize),
        out: usize,
        neg_out: usize,
        check: Option<usize>,
        code: u32,
    ) -> Result<()> {
        check_indices("slot_ratio", sc.len, &[a, b, c, out, neg_out, FLAG])?;
        check_indices("slot_ratio", sc.len, check.as_slice())?;
        let check = check.unwrap_or(usize::MAX);
        let f = self.function(&kernel::<T>("slot_ratio"))?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&mut sc.buf)
            .arg(&a)
            .arg(&b)
            .arg(&c)
            .arg(&out)
            .arg(&neg_out)
            .arg(&check)
            .arg(&code);
        // SAFETY: arguments match `slot_ratio_*`; every index is below sc's
        // length (checked), `check` too unless it is usize::MAX (none).
        unsafe { l.launch(ONE_WARP) }.map_err(dev("slot_ratio"))?;
        self.inner.stats.launch("slot_ratio");
        Ok(())
    }

    /// One thread: the minimal-residual solve of a BiCGSTAB(l) cycle from the
    /// tau and gamma' slots (see `bicgstabl_mr_*`).
    pub fn bicgstabl_mr<T: Scalar>(&self, sc: &mut CudaVector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_mr", len(l), sc.len)?;
        let f = self.function(&kernel::<T>("bicgstabl_mr"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mut sc.buf).arg(&l);
        // SAFETY: arguments match `bicgstabl_mr_*`; sc holds the len(l) slots
        // the kernel indexes.
        unsafe { b.launch(ONE_WARP) }.map_err(dev("bicgstabl_mr"))?;
        self.inner.stats.launch("bicgstabl_mr");
        Ok(())
    }
}
