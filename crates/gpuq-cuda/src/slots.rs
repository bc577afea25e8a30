//! Helpers shared by the methods that keep their scalars in a small device array
//! `sc` (BiCGSTAB, TFQMR, QMR): length checks, sc's raw address, and a
//! reduction whose one-warp second pass updates `sc`.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Result, Scalar};

/// One block of one warp: the second passes that update `sc`.
pub(crate) const ONE_WARP: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (32, 1, 1),
    shared_mem_bytes: 0,
};

impl CudaBackend {
    /// Errors unless `sc` has `len` slots and the vectors agree in length.
    pub(crate) fn check_slots<T: Scalar>(
        op: &'static str,
        len: usize,
        sc: &CudaVector<T>,
        lens: &[usize],
    ) -> Result<()> {
        check_same_len(op, len, sc.len)?;
        for &l in lens {
            check_same_len(op, lens[0], l)?;
        }
        Ok(())
    }

    /// sc's raw address, for a kernel that reads sc while a later launch of the
    /// same step (holding the buffer's mutable borrow) writes it; stream order
    /// puts the reads first.
    pub(crate) fn slots_ptr<T: Scalar>(&self, sc: &CudaVector<T>) -> u64 {
        let (ptr, _record) = sc.buf.device_ptr(&self.inner.stream);
        ptr
    }

    /// Sets every slot of `sc` by the kernel `name` of scalar T (one warp, thread 0 writing),
    /// whose arguments after `sc` are the real values `reals`: a method's start,
    /// with no upload.
    pub(crate) fn set_slots<T: Scalar>(
        &self,
        name: &'static str,
        sc: &mut CudaVector<T>,
        reals: &[T::Real],
    ) -> Result<()> {
        let f = self.function(&kernel::<T>(name))?;
        let args: Vec<ScalarArg> = reals.iter().map(|&v| ScalarArg::of(v)).collect();
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mut sc.buf);
        for a in &args {
            a.push_re(&mut b);
        }
        // SAFETY: arguments match the start kernels (`tfqmr_start_*`,
        // `qmr_start_*`): sc holds the method's slots, then its real values in
        // the scalar's precision.
        unsafe { b.launch(ONE_WARP) }.map_err(dev(name))?;
        self.inner.stats.launch(name);
        Ok(())
    }

    /// Runs `first_pass` (which writes `blocks` partials into the reduction
    /// scratch), then the one-warp second pass `second` of scalar T with the
    /// arguments `(blocks, partials, sc)` and, when given, `(slot, root)` (the
    /// norm pass: the slot written and whether to take the square root).
    pub(crate) fn reduce_into_slots<T: Scalar>(
        &self,
        blocks: u32,
        first_pass: impl FnOnce(&mut CudaSlice<u8>) -> Result<()>,
        second: &'static str,
        sc: &mut CudaVector<T>,
        slot: Option<(usize, u32)>,
    ) -> Result<()> {
        let mut scratch = self.inner.scratch.lock().unwrap_or_else(|e| e.into_inner());
        first_pass(&mut scratch)?;
        let f2 = self.function(&kernel::<T>(second))?;
        let m = blocks as usize;
        let mut b = self.inner.stream.launch_builder(&f2);
        b.arg(&m).arg(&mut *scratch).arg(&mut sc.buf);
        if let Some((slot, root)) = slot.as_ref() {
            b.arg(slot).arg(root);
        }
        // SAFETY: arguments match the second-pass kernels (`tfqmr_sigma_*`,
        // `tfqmr_scalars_*`, `qmr_scalars_*`, and `qmr_norm_*` with its slot and
        // root flag): `m` partials written by the first pass, in the type the kernel reads,
        // and sc holds the method's slots (slot below their count).
        unsafe { b.launch(ONE_WARP) }.map_err(dev(second))?;
        self.inner.stats.launch(second);
        Ok(())
    }
}
