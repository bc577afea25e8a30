//! The Krylov kernel traits on [`Dist`]: the steps without a reduction run
//! on the local backend as they are (the scalar arrays are replicated, so
//! every rank reads the same coefficients); the fused reductions of CG,
//! BiCGSTAB and GMRES run the local backend's fused kernel for the rank's
//! partial and then one collective; TFQMR, QMR and BiCGSTAB(l) take the
//! traits' defaults, whose every reduction is a [`Dist`] dot product (one
//! collective each).

use crate::backend::Dist;
use crate::halo::HaloBackend;
use gpuq_core::{RealScalar, Result, Scalar};
use gpuq_krylov::bicgstab_kernels::{Scaled, RHO, RNORM2, SNORM2, TS, TT};
use gpuq_krylov::gmres_kernels::{finish_dots, gs_extra};
use gpuq_krylov::{
    BicgstabKernels, BicgstablKernels, CgKernels, GmresKernels, QmrKernels, ReplayByRerun,
    TfqmrKernels,
};

impl<B: HaloBackend> ReplayByRerun for Dist<B> {}
impl<B: HaloBackend> BicgstablKernels for Dist<B> {}
impl<B: HaloBackend> TfqmrKernels for Dist<B> {}
impl<B: HaloBackend> QmrKernels for Dist<B> {}

/// CG's fused steps: the local fused kernel, and for the residual update one
/// allreduce of the local ||r||^2.
impl<B: HaloBackend> CgKernels for Dist<B> {
    fn cg_update_residual<T: Scalar>(
        &self,
        alpha: T,
        q: &B::Vector<T>,
        r: &mut B::Vector<T>,
    ) -> Result<T::Real> {
        let local = self.local().cg_update_residual(alpha, q, r)?;
        let sum = self.allreduce(&[local.to_f64_lossless()])?;
        Ok(T::Real::of_f64(sum[0]))
    }

    fn cg_update_xp<T: Scalar>(
        &self,
        alpha: T,
        beta: T,
        z: &B::Vector<T>,
        p: &mut B::Vector<T>,
        x: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local().cg_update_xp(alpha, beta, z, p, x)
    }
}

/// BiCGSTAB's steps: the local backend's, with the slots a reduction wrote
/// summed over ranks right after it (one download, one collective, one
/// overwrite of the 6-slot array).
impl<B: HaloBackend> BicgstabKernels for Dist<B> {
    fn dotc_to_slot<T: Scalar>(
        &self,
        x: &B::Vector<T>,
        y: &B::Vector<T>,
        sc: &mut B::Vector<T>,
        slot: usize,
    ) -> Result<()> {
        self.local().dotc_to_slot(x, y, sc, slot)?;
        self.sum_slots(sc, &[slot])
    }

    fn bicgstab_tt<T: Scalar>(
        &self,
        t: &B::Vector<T>,
        s: &B::Vector<T>,
        sc: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local().bicgstab_tt(t, s, sc)?;
        self.sum_slots(sc, &[TS, TT, SNORM2])
    }

    fn bicgstab_p<T: Scalar>(
        &self,
        sc: &B::Vector<T>,
        r: &B::Vector<T>,
        v: &B::Vector<T>,
        p: &mut B::Vector<T>,
        scaled: Scaled<'_, B::Vector<T>>,
    ) -> Result<()> {
        self.local().bicgstab_p(sc, r, v, p, scaled)
    }

    fn bicgstab_s<T: Scalar>(
        &self,
        sc: &B::Vector<T>,
        v: &B::Vector<T>,
        r: &mut B::Vector<T>,
        scaled: Scaled<'_, B::Vector<T>>,
    ) -> Result<()> {
        self.local().bicgstab_s(sc, v, r, scaled)
    }

    fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut B::Vector<T>,
        target2: T::Real,
        phat: &B::Vector<T>,
        shat: Option<&B::Vector<T>>,
        t: &B::Vector<T>,
        r0: &B::Vector<T>,
        x_in: &B::Vector<T>,
        x: &mut B::Vector<T>,
        r: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local()
            .bicgstab_xr(sc, target2, phat, shat, t, r0, x_in, x, r)?;
        self.sum_slots(sc, &[RHO, RNORM2])
    }
}

/// GMRES's batched Gram-Schmidt: the local backend's sweep over the basis for
/// the partial inner products, all of a step's inner products summed in one
/// collective, then the coefficients from the sums; the updates are local.
impl<B: HaloBackend> GmresKernels for Dist<B> {
    fn gs_dots<T: Scalar>(
        &self,
        basis: &[B::Vector<T>],
        used: usize,
        u: &B::Vector<T>,
        z: Option<&B::Vector<T>>,
        gs: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local().gs_dots(basis, used, u, z, gs)?;
        let mut host = self.local().download(gs)?;
        let count = (used + 1) * if z.is_some() { 2 } else { 1 };
        let totals = self.sum_scalars(&host[..count])?;
        finish_dots(&mut host, &totals, used, gs_extra(basis.len()));
        self.local().overwrite(&host, gs)
    }

    fn gs_update<T: Scalar>(
        &self,
        basis: &mut [B::Vector<T>],
        used: usize,
        gs: &B::Vector<T>,
        u: &mut B::Vector<T>,
        z: &B::Vector<T>,
    ) -> Result<()> {
        self.local().gs_update(basis, used, gs, u, z)
    }

    fn gs_combine<T: Scalar>(
        &self,
        basis: &[B::Vector<T>],
        y: &[T],
        w: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local().gs_combine(basis, y, w)
    }
}
