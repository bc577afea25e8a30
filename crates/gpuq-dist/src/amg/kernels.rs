//! [`AmgKernels`] for [`Dist`]: the one-process cycle of `gpuq-amg`
//! ([`gpuq_amg::Amg`]) runs across ranks on levels whose matrices are
//! [`crate::DistMatrix`]es. Each product with a level's A exchanges its halo
//! while the rank's local backend runs its fused step over the owned block;
//! the steps without a distributed override (the Chebyshev start and step,
//! the out-of-place sweep) take the trait's defaults, made of the
//! distributed SpMV and BLAS-1 operations.

use crate::backend::{Dist, DistMatrix};
use crate::halo::HaloBackend;
use gpuq_amg::{AmgKernels, LevelMatrix};
use gpuq_core::{Error, Result, Scalar};
use gpuq_sparse::{Csr, Layout, SparseBackend};

impl<B: HaloBackend + AmgKernels> AmgKernels for Dist<B> {
    /// r = b - A x: the local backend's fused residual over the owned block
    /// while the halo of x travels, then the ghost block's share. One
    /// exchange and one pass.
    fn amg_residual<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()> {
        let local = self.local();
        self.split_apply(a, x, -T::one(), r, &mut |owned, r| {
            local.amg_residual(owned, b, x, r)
        })
    }

    /// One damped Jacobi sweep. Where A carries a point sweep
    /// ([`crate::DistMatrix`] of a level made by
    /// [`crate::DistHierarchy::cycle`]) and `diag` is given: one pass, the
    /// new iterate written into `scratch` by the local backend's fused sweep
    /// over the owned block while the halo of x travels, the scaled ghost
    /// block's share subtracted, then `scratch` and x swapped. Otherwise the
    /// residual, then x += omega D^-1 r (`dinv` local to the rank).
    fn amg_jacobi<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        dinv: &Self::Matrix<T>,
        diag: Option<&Self::Vector<T>>,
        block: usize,
        omega: T,
        b: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        scratch: &mut Self::Vector<T>,
    ) -> Result<()> {
        let _ = block;
        let (Some(d), Some(sweep)) = (diag, a.point_sweep()) else {
            self.amg_residual(a, b, x, scratch)?;
            return self.spmv(omega, dinv, scratch, T::one(), x);
        };
        let local = self.local();
        let mut tmp = sweep.tmp.lock().unwrap_or_else(|e| e.into_inner());
        {
            let x = &*x;
            self.split_apply_ghost(a, x, -T::one(), &sweep.ghost, scratch, &mut |owned, s| {
                local.amg_jacobi_into(owned, d, b, x, s, &mut tmp)
            })?;
        }
        std::mem::swap(x, scratch);
        Ok(())
    }

    /// Not for [`Dist`]: a distributed level's matrices are split across
    /// ranks by [`crate::DistHierarchy::cycle`], not uploaded from a
    /// one-process level. An error.
    fn amg_level_matrix<T: Scalar>(
        &self,
        m: &LevelMatrix,
        layout: Layout,
    ) -> Result<Self::Matrix<T>> {
        let _ = (m, layout);
        Err(Error::InvalidArgument(
            "a distributed AMG cycle is built from a DistHierarchy (DistHierarchy::cycle), not from a one-process hierarchy".into(),
        ))
    }

    /// `m` as a matrix local to the rank (its rows and columns the rank's
    /// own, as [`SparseBackend::upload_matrix`] for [`Dist`]), made by the
    /// local backend's [`AmgKernels::amg_host_matrix`]. No communication.
    fn amg_host_matrix<T: Scalar>(&self, m: &Csr<f64>, layout: Layout) -> Result<Self::Matrix<T>> {
        Ok(DistMatrix::local(
            self.local().amg_host_matrix(m, layout)?,
            m.shape(),
        ))
    }

    /// y = x in another precision: the local backend's conversion of the
    /// rank's rows (no communication).
    fn amg_convert<S: Scalar, T: Scalar>(
        &self,
        x: &Self::Vector<S>,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.local().amg_convert(x, y)
    }
}
