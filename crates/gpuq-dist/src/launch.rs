//! Starting a run under `mpirun` (feature `mpi`): MPI's world communicator,
//! the node-local rank that picks a GPU or a share of the cores, and NCCL
//! between the ranks' GPUs; what a library user calls once
//! ([`launch`], or [`init_mpi`] then [`RankBackend::of`]) before making a
//! [`crate::Dist`] of the rank's backend.

use crate::comm::{agree, Communicator};
use crate::mpi_comm::MpiComm;
use gpuq_core::{Error, Result};
use gpuq_cpu::CpuBackend;
use std::sync::Arc;

/// Whether this process was started by an MPI launcher (OpenMPI, MPICH or
/// Slurm's PMI set these environment variables). O(1).
pub fn under_mpi() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// MPI's world communicator, and this rank's (index, count) among the ranks
/// of its node (MPI's shared-memory split). Unless `RAYON_NUM_THREADS` is
/// set, the rank's global thread pool (the host steps of a setup: the
/// distributed AMG's, the input's reading) gets the node's cores divided
/// among its ranks, so ranks sharing a node do not oversubscribe it. Errors
/// when MPI is already initialised or lacks the threading level gpuq needs.
///
/// A launcher that binds each rank to fewer CPUs than that share (OpenMPI's
/// default for up to two ranks binds each to one core) would leave the
/// rank's threads on those CPUs: the rank's affinity is then widened to its
/// share ([`crate::affinity::take_share`]; `GPUQ_KEEP_AFFINITY=1` keeps the
/// launcher's binding), with a note on rank 0's standard error.
pub fn init_mpi() -> Result<(Arc<dyn Communicator>, (usize, usize))> {
    let mpi = MpiComm::init()?;
    let node = mpi.node_rank();
    let taken = crate::affinity::take_share(node);
    if let (Some(note), 0) = (&taken.note, mpi.rank()) {
        eprintln!("gpuq: {note}");
    }
    if (node.1 > 1 || taken.note.is_some()) && std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // An error means the pool already runs (built earlier): keep it.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(taken.threads)
            .build_global();
    }
    Ok((Arc::new(mpi), node))
}

/// How the GPUs of a run exchange halos and reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommChoice {
    /// NCCL where every rank has a GPU of its own and libnccl loads, else
    /// through the hosts.
    Auto,
    /// NCCL, or an error.
    Nccl,
    /// Through the hosts and the communicator.
    Mpi,
}

impl CommChoice {
    /// `auto`, `nccl` or `mpi`; an error naming the choices otherwise.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(CommChoice::Auto),
            "nccl" => Ok(CommChoice::Nccl),
            "mpi" => Ok(CommChoice::Mpi),
            other => Err(Error::InvalidArgument(format!(
                "unknown comm '{other}' (available: nccl, mpi, auto)"
            ))),
        }
    }
}

/// One rank's local backend.
pub enum RankBackend {
    /// The CPU, with the node's cores divided among its ranks.
    Cpu(CpuBackend),
    /// The GPU and its device number (feature `cuda`).
    #[cfg(feature = "cuda")]
    Cuda(gpuq_cuda::CudaBackend, usize),
}

impl RankBackend {
    /// The backend `name` names for this rank: `cpu` (`RAYON_NUM_THREADS`
    /// threads when set, else the node's cores divided among its ranks) or
    /// `cuda` (the GPU of the rank's index on its node, `node` = (index,
    /// ranks on the node); more ranks than GPUs on a node share them round
    /// robin), with NCCL attached between the GPUs as `choice` says.
    /// Collective: every rank learns whether any failed.
    pub fn of(
        comm: &dyn Communicator,
        node: (usize, usize),
        name: &str,
        choice: CommChoice,
    ) -> Result<Self> {
        match name {
            "cpu" if choice == CommChoice::Nccl => Err(Error::InvalidArgument(
                "comm nccl needs the cuda backend (NCCL connects GPUs)".into(),
            )),
            "cpu" => Ok(RankBackend::Cpu(agree(comm, cpu_for_rank(node.1))?)),
            #[cfg(feature = "cuda")]
            "cuda" => {
                use gpuq_cuda::CudaBackend;
                let gpus = agree(comm, CudaBackend::device_count())?.max(1);
                let device = node.0 % gpus;
                let gpu = agree(comm, CudaBackend::new(device))?;
                if choice != CommChoice::Mpi {
                    attach_nccl(comm, &gpu, node.1 <= gpus, choice == CommChoice::Nccl)?;
                }
                Ok(RankBackend::Cuda(gpu, device))
            }
            other => Err(Error::InvalidArgument(format!(
                "unknown backend '{other}' under mpirun (available: cpu{})",
                if cfg!(feature = "cuda") { ", cuda" } else { "" }
            ))),
        }
    }

    /// The rank's device number, `None` on the CPU.
    pub fn device(&self) -> Option<usize> {
        match self {
            RankBackend::Cpu(_) => None,
            #[cfg(feature = "cuda")]
            RankBackend::Cuda(_, d) => Some(*d),
        }
    }
}

/// MPI, then this rank's backend ([`init_mpi`], [`RankBackend::of`]): what
/// a program started by `mpirun` calls once, then makes a [`crate::Dist`]
/// of the backend with the communicator. Collective.
pub fn launch(backend: &str, choice: CommChoice) -> Result<(Arc<dyn Communicator>, RankBackend)> {
    let (comm, node) = init_mpi()?;
    let local = RankBackend::of(&*comm, node, backend, choice)?;
    Ok((comm, local))
}

/// The CPU backend of one rank: `RAYON_NUM_THREADS` threads when set, else
/// the node's cores divided among its ranks (at least one each).
fn cpu_for_rank(ranks_on_node: usize) -> Result<CpuBackend> {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return Ok(CpuBackend::new());
    }
    CpuBackend::with_threads(crate::affinity::share_len(
        ranks_on_node,
        crate::affinity::node_cpus(),
    ))
}

/// Joins the ranks' GPUs in one NCCL communicator (rank 0 makes the id and
/// broadcasts it) where every rank has a GPU of its own on its node and the
/// library loads; otherwise an error when `required`, else nothing (the
/// transport stays through the hosts). Collective.
#[cfg(feature = "cuda")]
fn attach_nccl(
    comm: &dyn Communicator,
    gpu: &gpuq_cuda::CudaBackend,
    own_gpu: bool,
    required: bool,
) -> Result<()> {
    use gpuq_cuda::CudaBackend;
    let able = own_gpu && CudaBackend::nccl_available();
    let flags = comm.allgather(&[f64::from(u8::from(able))])?;
    if let Some(r) = flags.iter().position(|&f| f == 0.0) {
        if required {
            return Err(Error::InvalidArgument(format!(
                "comm nccl: rank {r} cannot use NCCL (it needs a GPU of its own per rank and libnccl.so.2)"
            )));
        }
        return Ok(());
    }
    let made = agree(
        comm,
        (comm.rank() == 0)
            .then(CudaBackend::nccl_unique_id)
            .transpose(),
    )?;
    let mut id = made.map_or_else(Vec::new, |id| id.to_vec());
    comm.broadcast(0, &mut id)?;
    let id: [u8; gpuq_cuda::NCCL_ID_BYTES] = id
        .try_into()
        .map_err(|_| Error::InvalidArgument("rank 0 sent a malformed NCCL id".into()))?;
    agree(comm, gpu.attach_nccl(comm.rank(), comm.size(), &id))
}
