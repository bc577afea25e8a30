//! The Krylov kernel traits on [`Dist`]: the steps without a reduction run
//! on the local backend as they are (the scalar arrays are replicated, so
//! every rank reads the same coefficients); the fused reductions of CG,
//! BiCGSTAB and GMRES run the local backend's fused kernel for the rank's
//! partial and then one collective; TFQMR, QMR and BiCGSTAB(l) take the
//! traits' defaults, whose every reduction is a [`Dist`] dot product (one
//! collective each).

use crate::backend::Dist;
use crate::device_comm::DeviceComm;
use crate::halo::HaloBackend;
use gpuq_core::{RealScalar, Result, Scalar};
use gpuq_krylov::bicgstab_kernels::{Scaled, RHO, RNORM2, SNORM2, TS, TT};
use gpuq_krylov::gmres_kernels::{finish_dots, gs_extra};
use gpuq_krylov::kernels::{cg_next_slot, RNORM2 as CG_RNORM2};
use gpuq_krylov::{
    BicgstabKernels, BicgstablKernels, CgKernels, GmresKernels, QmrKernels, Replay, TfqmrKernels,
};

/// Snapshots of a method's scalar array go through the local backend's ring,
/// with its look-ahead or the one [`Dist::with_look_ahead`] sets, whichever
/// is larger (1 on a GPU: the iteration after the one the host reads
/// is already queued; every rank reads the same summed scalars, so every rank
/// stops at the same iteration). An iteration's work is run again at each
/// replay, except a body of device work only
/// ([`Replay::replay_device_work`]: CG with no preconditioner or a diagonal
/// one, BiCGSTAB) on a local backend that records and exchanges between its
/// devices (GPUs over NCCL): its kernels, halo exchanges and slot
/// reductions are recorded once by the local backend (a CUDA graph with
/// NCCL's kernels in it) and replayed, the communication counters advancing
/// by the recording's exchanges and collectives at each replay.
impl<B: HaloBackend> Replay for Dist<B> {
    type Recording = DistRecording<B::Recording>;
    type Ring<T: Scalar> = B::Ring<T>;
    type Slot<T: Scalar> = B::Slot<T>;

    fn look_ahead(&self) -> usize {
        self.local().look_ahead().max(self.min_look_ahead())
    }

    /// A body in general is not recorded (every replay runs it again): it
    /// may hold a preconditioner with logic of its own. Bodies of device work
    /// only are, on GPUs ([`Replay::replay_device_work`]).
    fn records(&self) -> bool {
        false
    }

    fn ring<T: Scalar>(&self, len: usize) -> Result<Self::Ring<T>> {
        self.local().ring(len)
    }

    fn ring_slot<T: Scalar>(&self, ring: &Self::Ring<T>, slot: usize) -> Self::Slot<T> {
        self.local().ring_slot(ring, slot)
    }

    fn copy_to_slot<T: Scalar>(&self, sc: &B::Vector<T>, slot: &Self::Slot<T>) -> Result<()> {
        self.local().copy_to_slot(sc, slot)
    }

    fn mark_slot<T: Scalar>(&self, ring: &mut Self::Ring<T>, slot: usize) -> Result<()> {
        self.local().mark_slot(ring, slot)
    }

    fn read_snapshot<T: Scalar>(
        &self,
        ring: &Self::Ring<T>,
        slot: usize,
        out: &mut [T],
    ) -> Result<()> {
        self.local().read_snapshot(ring, slot, out)
    }

    unsafe fn replay(
        &self,
        _recording: &mut Option<Self::Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        body()
    }

    /// Recorded by the local backend where it records and every exchange
    /// and reduction of the body is device work
    /// ([`DeviceComm::between_devices`] of the transport the `Dist` took
    /// when it was made: attach NCCL before making it); run again otherwise.
    /// Every rank
    /// records at the same iteration (the host collectives a recording
    /// makes, such as the ranks' agreement on a fused dot product, run once,
    /// on every rank).
    unsafe fn replay_device_work(
        &self,
        recording: &mut Option<Self::Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        if !(self.local().records() && self.transport().between_devices()) {
            return body();
        }
        if let Some(rec) = recording {
            // SAFETY: the caller's contract; the stored recording is
            // replayed without calling `body`.
            unsafe { self.local().replay(&mut rec.local, body)? };
            self.add_counts(&rec.per_replay);
            return Ok(());
        }
        let before = self.counts();
        let mut local = None;
        // SAFETY: the caller's contract.
        unsafe { self.local().replay(&mut local, body)? };
        let after = self.counts();
        // A local backend that kept no recording runs the body again next
        // time, which counts itself.
        if local.is_some() {
            *recording = Some(DistRecording {
                local,
                per_replay: std::array::from_fn(|k| after[k].saturating_sub(before[k])),
            });
        }
        Ok(())
    }
}

/// A distributed iteration recorded by the local backend
/// ([`Replay::replay_device_work`]) with the halo exchanges, halo bytes and
/// collectives one replay stands for.
pub struct DistRecording<R> {
    local: Option<R>,
    per_replay: [u64; 3],
}
impl<B: HaloBackend> BicgstablKernels for Dist<B> {}
impl<B: HaloBackend> TfqmrKernels for Dist<B> {}
impl<B: HaloBackend> QmrKernels for Dist<B> {}

/// CG's fused steps: the local fused kernel, and for the residual update one
/// allreduce of the local ||r||^2; with the scalars on the backend, the local
/// step and the slots it wrote summed over ranks in one collective (on GPUs
/// with NCCL, on the device: nothing waits for the host).
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

    fn cg_dot_to_slot<T: Scalar>(
        &self,
        x: &B::Vector<T>,
        y: &B::Vector<T>,
        sc: &mut B::Vector<T>,
        slot: usize,
    ) -> Result<()> {
        self.local().cg_dot_to_slot(x, y, sc, slot)?;
        self.sum_slots(sc, &[slot])
    }

    fn cg_residual_slots<T: Scalar>(
        &self,
        sc: &mut B::Vector<T>,
        rho: usize,
        q: &B::Vector<T>,
        r: &mut B::Vector<T>,
        scaled: Scaled<'_, B::Vector<T>>,
    ) -> Result<()> {
        self.local().cg_residual_slots(sc, rho, q, r, scaled)?;
        self.sum_slots(sc, &[CG_RNORM2, cg_next_slot(rho)])
    }

    /// The local step only: its ||r||^2 is summed with r^H z by
    /// [`CgKernels::cg_rz_slots`].
    fn cg_residual_before_precond<T: Scalar>(
        &self,
        sc: &mut B::Vector<T>,
        rho: usize,
        q: &B::Vector<T>,
        r: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local().cg_residual_slots(sc, rho, q, r, None)
    }

    /// The local r^H z, then ||r||^2 and r^H z summed over ranks in one
    /// collective.
    fn cg_rz_slots<T: Scalar>(
        &self,
        sc: &mut B::Vector<T>,
        rho: usize,
        r: &B::Vector<T>,
        z: &B::Vector<T>,
    ) -> Result<()> {
        let next = cg_next_slot(rho);
        self.local().cg_dot_to_slot(r, z, sc, next)?;
        self.sum_slots(sc, &[CG_RNORM2, next])
    }

    fn cg_xp_slots<T: Scalar>(
        &self,
        sc: &B::Vector<T>,
        rho: usize,
        z: &B::Vector<T>,
        p: &mut B::Vector<T>,
        x_in: &B::Vector<T>,
        x: &mut B::Vector<T>,
    ) -> Result<()> {
        self.local().cg_xp_slots(sc, rho, z, p, x_in, x)
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
