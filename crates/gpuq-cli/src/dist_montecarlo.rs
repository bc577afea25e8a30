//! `gpuq solve --method mc-forward|mc-adjoint|mcsa` under `mpirun` (feature
//! `mpi`): every batch's histories split over the ranks, each holding the
//! matrix whole.

use crate::args::SolveArgs;
use crate::solve::Source;
use gpuq_core::Result;
use gpuq_dist::{agree, broadcast_rows, Communicator, DistWalk};
use gpuq_dist::{CommChoice, RankBackend};
use std::process::ExitCode;
use std::sync::Arc;

/// `mc-forward`, `mc-adjoint` or `mcsa` over the ranks: rank 0 reads the
/// problem and every rank gets it whole (walks jump to any row), the
/// histories of every batch are split over the ranks
/// ([`gpuq_dist::DistWalk`]: the same seed gives the one-rank estimate to
/// rounding); rank 0 prints the report.
pub(crate) fn run(
    args: &SolveArgs,
    opts: &gpuq_mcls::McOptions,
    comm: Arc<dyn Communicator>,
    node: (usize, usize),
) -> Result<ExitCode> {
    let source = Source::from_args(args)?;
    let root = comm.rank() == 0;
    let loaded = agree(
        &*comm,
        root.then(|| crate::montecarlo::load_real(&source, args))
            .transpose(),
    )?;
    let (a, b) = broadcast_rows(&*comm, 0, loaded.as_ref().map(|(a, r)| (a, &r.b[..])))?;
    let problem = (&a, &b[..]);
    // The walks reduce their tallies through MPI: no NCCL needed.
    let backend = RankBackend::of(&*comm, node, &args.backend, CommChoice::Mpi)?;
    let device = match &backend {
        RankBackend::Cuda(_, d) => *d as f64,
        RankBackend::Cpu(_) => -1.0,
    };
    let all = comm.allgather(&[device])?;
    let mut devices: Vec<u64> = all
        .iter()
        .filter(|&&d| d >= 0.0)
        .map(|&d| d as u64)
        .collect();
    devices.sort_unstable();
    devices.dedup();
    let reporting = crate::montecarlo::Reporting {
        root,
        rhs: loaded.as_ref().map(|(_, r)| r),
        extra: vec![
            ("ranks", comm.size().into()),
            ("gpus", devices.len().into()),
            ("comm", "mpi".into()),
        ],
    };
    match backend {
        RankBackend::Cpu(cpu) => {
            let walks = DistWalk::new(cpu, comm);
            crate::montecarlo::run_on(&walks, args, problem, opts, &reporting)
        }
        RankBackend::Cuda(gpu, _) => {
            let walks = DistWalk::new(gpu, comm);
            crate::montecarlo::run_on(&walks, args, problem, opts, &reporting)
        }
    }
}
