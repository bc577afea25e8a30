//! Helpers shared by the methods that keep their scalars in a small device array
//! `sc` (BiCGSTAB, TFQMR, QMR): length checks and the one-warp start kernels
//! that fill `sc`.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Result, Scalar};

/// One block of one warp: the kernels that set `sc` (thread 0 writing).
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
}
