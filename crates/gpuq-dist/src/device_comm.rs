//! How a [`crate::Dist`]'s vectors travel between ranks: the transport of
//! halo exchanges, of the sums of fused reductions' slots and of the
//! all-gathers of row blocks, beside the [`Communicator`] that carries
//! everything else.
//!
//! Written once per transport and chosen once, when the [`crate::Dist`] is
//! made ([`HaloBackend::transport`]): [`HostStaged`] for any backend (the
//! values go through the hosts and the communicator), and for CUDA ranks
//! (feature `cuda`) `CudaTransport`, NCCL between the GPUs where an NCCL
//! communicator is attached. The solvers, the distributed matrices and the
//! AMG cycle call the transport's methods and have one path whatever it is.

use crate::comm::Communicator;
use crate::halo::{HaloBackend, HaloPlan};
use crate::partition::RowPartition;
use gpuq_core::{RealScalar, Result, Scalar};
use gpuq_krylov::KrylovBackend;

/// The transport of a distributed backend's device-resident data between
/// ranks (see the module docs). Every method is collective over the ranks
/// (or the plan's neighbours) and gives the same bits whatever the
/// transport: sums in the fixed rank order of [`crate::ordered_sum`].
pub trait DeviceComm<B: KrylovBackend>: Clone + Send + Sync {
    /// What an exchange keeps per halo plan, built once per matrix.
    type Halo: Send + Sync;

    /// The report's name of the transport: `nccl` (between the devices) or
    /// `mpi` (through the hosts; threads for a [`crate::ThreadComm`]).
    fn kind(&self) -> &'static str;

    /// Whether the data travel between the devices, never through the hosts
    /// (what lets a recorded iteration hold its exchanges).
    fn between_devices(&self) -> bool;

    /// The exchange's data for `plan` (device indices and buffers for NCCL;
    /// nothing through the hosts). O(plan) once.
    fn prepare_halo(&self, local: &B, plan: &HaloPlan) -> Result<Self::Halo>;

    /// One halo exchange: the ghosts of `x` that `plan` names into `ghosts`,
    /// with `overlap` (the owned block's product) run while they travel.
    #[allow(clippy::too_many_arguments)]
    fn exchange<T: Scalar>(
        &self,
        local: &B,
        comm: &dyn Communicator,
        plan: &HaloPlan,
        halo: &Self::Halo,
        x: &B::Vector<T>,
        ghosts: &mut B::Vector<T>,
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()>;

    /// `sc[k]` summed over ranks for every `k` of `slots` (a replicated
    /// scalar array where a local kernel left this rank's partials).
    fn sum_slots<T: Scalar>(
        &self,
        local: &B,
        comm: &dyn Communicator,
        sc: &mut B::Vector<T>,
        slots: &[usize],
    ) -> Result<()>;

    /// `whole` = every rank's `mine` (`counts[r]` values from rank r) in rank
    /// order: a vector split in row blocks made whole on every rank.
    fn allgather_rows<T: Scalar>(
        &self,
        local: &B,
        comm: &dyn Communicator,
        counts: &[usize],
        mine: &B::Vector<T>,
        whole: &mut B::Vector<T>,
    ) -> Result<()>;
}

/// Through the hosts, for any backend: a halo's packed entries gathered from
/// the device ([`HaloBackend::gather`]), sent by the communicator, the
/// arrivals written into the ghost vector ([`HaloBackend::overwrite`]); slot
/// sums and all-gathers as one download, one collective and one upload.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostStaged;

impl<B: HaloBackend> DeviceComm<B> for HostStaged {
    type Halo = ();

    fn kind(&self) -> &'static str {
        "mpi"
    }

    fn between_devices(&self) -> bool {
        false
    }

    fn prepare_halo(&self, _local: &B, _plan: &HaloPlan) -> Result<()> {
        Ok(())
    }

    /// Costs one gather on the backend, (sent + ghosts) values through the
    /// communicator and one overwrite of the ghosts.
    fn exchange<T: Scalar>(
        &self,
        local: &B,
        comm: &dyn Communicator,
        plan: &HaloPlan,
        _halo: &(),
        x: &B::Vector<T>,
        ghosts: &mut B::Vector<T>,
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let arrived = plan.exchange(comm, local, x, overlap)?;
        local.overwrite(&arrived, ghosts)
    }

    /// One download of `sc`, one all-reduce of the slots, one overwrite.
    fn sum_slots<T: Scalar>(
        &self,
        local: &B,
        comm: &dyn Communicator,
        sc: &mut B::Vector<T>,
        slots: &[usize],
    ) -> Result<()> {
        let mut host = local.download(sc)?;
        gpuq_core::check_indices("sum_slots", host.len(), slots)?;
        let partials: Vec<T> = slots.iter().map(|&k| host[k]).collect();
        for (&k, v) in slots.iter().zip(sum_over_ranks(comm, &partials)?) {
            host[k] = v;
        }
        local.overwrite(&host, sc)
    }

    /// One download of `mine`, [`crate::allgather_rows`], one overwrite of
    /// `whole`.
    fn allgather_rows<T: Scalar>(
        &self,
        local: &B,
        comm: &dyn Communicator,
        counts: &[usize],
        mine: &B::Vector<T>,
        whole: &mut B::Vector<T>,
    ) -> Result<()> {
        let partition = RowPartition::from_counts(counts)?;
        let all = crate::solve::allgather_rows(comm, &partition, &local.download(mine)?)?;
        local.overwrite(&all, whole)
    }
}

/// The sums over ranks of scalar partials (each as its real and imaginary
/// part, summed in f64 in the fixed rank order), in one all-reduce.
pub(crate) fn sum_over_ranks<T: Scalar>(comm: &dyn Communicator, partials: &[T]) -> Result<Vec<T>> {
    let flat: Vec<f64> = partials
        .iter()
        .flat_map(|v| [v.re().to_f64_lossless(), v.im().to_f64_lossless()])
        .collect();
    let sums = comm.allreduce_sum(&flat)?;
    Ok(sums
        .chunks_exact(2)
        .map(|p| T::from_parts(T::Real::of_f64(p[0]), T::Real::of_f64(p[1])))
        .collect())
}

/// The transport of CUDA ranks: NCCL between the GPUs where the backend has
/// an NCCL communicator attached (`gpuq_cuda::CudaBackend::attach_nccl`,
/// which `gpuq_dist::launch` does under mpirun), else [`HostStaged`]. Over
/// NCCL a halo is a device pack and `ncclSend`/`ncclRecv` in one group on a
/// communication stream while the owned block's product runs, straight into
/// the ghost vector; slot sums are an NCCL all-gather and a summing kernel
/// (slot arrays longer than the device sum takes go through the hosts), and
/// row blocks an NCCL all-gather.
#[cfg(feature = "cuda")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaTransport {
    /// Through the hosts ([`HostStaged`]).
    Host,
    /// NCCL between the GPUs.
    Nccl,
}

#[cfg(feature = "cuda")]
impl DeviceComm<gpuq_cuda::CudaBackend> for CudaTransport {
    type Halo = Option<gpuq_cuda::NcclHalo>;

    fn kind(&self) -> &'static str {
        match self {
            CudaTransport::Host => "mpi",
            CudaTransport::Nccl => "nccl",
        }
    }

    fn between_devices(&self) -> bool {
        *self == CudaTransport::Nccl
    }

    fn prepare_halo(
        &self,
        local: &gpuq_cuda::CudaBackend,
        plan: &HaloPlan,
    ) -> Result<Option<gpuq_cuda::NcclHalo>> {
        if *self == CudaTransport::Host {
            return Ok(None);
        }
        let mut at = 0;
        let sends = plan
            .sends()
            .iter()
            .map(|(p, idx)| {
                at += idx.len();
                (*p, at - idx.len()..at)
            })
            .collect();
        local
            .nccl_halo_plan(plan.packed().indices(), sends, plan.recvs().to_vec())
            .map(Some)
    }

    fn exchange<T: Scalar>(
        &self,
        local: &gpuq_cuda::CudaBackend,
        comm: &dyn Communicator,
        plan: &HaloPlan,
        halo: &Option<gpuq_cuda::NcclHalo>,
        x: &gpuq_cuda::CudaVector<T>,
        ghosts: &mut gpuq_cuda::CudaVector<T>,
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        match halo {
            Some(h) => local.nccl_exchange(h, x, ghosts, overlap),
            None => HostStaged.exchange(local, comm, plan, &(), x, ghosts, overlap),
        }
    }

    fn sum_slots<T: Scalar>(
        &self,
        local: &gpuq_cuda::CudaBackend,
        comm: &dyn Communicator,
        sc: &mut gpuq_cuda::CudaVector<T>,
        slots: &[usize],
    ) -> Result<()> {
        if *self == CudaTransport::Nccl && local.nccl_sum_slots(sc, slots)? {
            return Ok(());
        }
        HostStaged.sum_slots(local, comm, sc, slots)
    }

    fn allgather_rows<T: Scalar>(
        &self,
        local: &gpuq_cuda::CudaBackend,
        comm: &dyn Communicator,
        counts: &[usize],
        mine: &gpuq_cuda::CudaVector<T>,
        whole: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        match self {
            CudaTransport::Nccl => local.nccl_allgather_rows(counts, mine, whole),
            CudaTransport::Host => HostStaged.allgather_rows(local, comm, counts, mine, whole),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ThreadComm;
    use gpuq_core::Backend;
    use gpuq_cpu::CpuBackend;

    #[test]
    fn host_staged_slot_sums_and_row_gathers_are_the_ranks_in_order() {
        let got = ThreadComm::run(3, |c| {
            let be = CpuBackend::new();
            let r = c.rank();
            let mut sc = be.upload(&[1.0 + r as f64, 7.0, 0.25]).unwrap();
            HostStaged.sum_slots(&be, &c, &mut sc, &[0, 2]).unwrap();
            let counts = [2, 0, 3];
            let mine = be
                .upload(
                    &(0..counts[r])
                        .map(|k| (10 * r + k) as f64)
                        .collect::<Vec<_>>(),
                )
                .unwrap();
            let mut whole = be.zeros::<f64>(5).unwrap();
            HostStaged
                .allgather_rows(&be, &c, &counts, &mine, &mut whole)
                .unwrap();
            let bad = HostStaged.sum_slots(&be, &c, &mut sc, &[3]).is_err();
            (be.download(&sc).unwrap(), be.download(&whole).unwrap(), bad)
        })
        .unwrap();
        for (sc, whole, bad) in got {
            assert_eq!(sc, vec![6.0, 7.0, 0.75]);
            assert_eq!(whole, vec![0.0, 1.0, 20.0, 21.0, 22.0]);
            assert!(bad);
        }
    }
}
