//! # gpuq-dist
//!
//! Distributed solves: a matrix split by rows over ranks (threads of one
//! process or MPI processes), and [`Dist`], a backend that wraps any local
//! backend so that every Krylov method of `gpuq-krylov` runs across the ranks
//! unchanged.
//!
//! * [`Communicator`]: rank, size, barrier, deterministic allreduce (partials
//!   gathered in rank order, summed in a fixed order: the same bits on every
//!   rank and run), broadcast, point-to-point messages and a neighbourhood
//!   exchange that overlaps a computation. Implementations: [`SingleRank`],
//!   [`ThreadComm`] (ranks as threads over channels: the default build tests
//!   1 to 4 ranks without MPI), and `MpiComm` over rsmpi behind the `mpi`
//!   feature.
//! * [`RowPartition`]: contiguous row blocks (even, or on multiples of a
//!   block size, or from per-rank counts, or from a partition file), checked
//!   against the matrix and the communicator.
//! * [`split_rows`] and [`HaloPlan`]: a rank's rows as the block on its own
//!   columns and the block on ghost columns (PETSc's MPIAIJ), and the plan,
//!   built once, of which owned entries go to which neighbour and which
//!   ghosts come from whom. As in seed 002's shared-node exchange, only those
//!   entries travel.
//! * [`Dist`]: vectors are the rank's owned part; BLAS-1 is local; `dotc`,
//!   `dotu` and `nrm2` are the local deterministic partial plus one allreduce;
//!   SpMV on a [`DistMatrix`] is the halo exchange overlapped with the owned
//!   block's SpMV, then the ghost block's. Every Krylov kernel trait is
//!   implemented through its defaults, and the hot fused reductions (CG's
//!   residual update, BiCGSTAB's three reductions, GMRES's Gram-Schmidt inner
//!   products) run the local fused kernel and then one collective.
//!   [`CommStats`] reports halo bytes and time and collective time.
//! * [`solve_rows`]: the one-call distributed solve (CG, BiCGSTAB,
//!   BiCGSTAB(l), TFQMR, QMR with a distributed A^T, GMRES; no, Jacobi or
//!   2x2-block Jacobi preconditioning, each local to its rank).
//! * Input: [`generated_rows`] builds a rank's rows of the stencil problems in
//!   place (no rank holds the whole matrix); [`scatter_rows`] sends rows read
//!   by one rank; [`gather_rows`] and [`allgather_rows`] collect a solution.
//! * [`DistHierarchy`] and [`DistAmg`]: smoothed-aggregation AMG across
//!   ranks (aggregates local to each rank, P, R and R A P with ghost rows
//!   fetched once per level, coarse levels gathered onto every rank below a
//!   rows-per-rank threshold), the V-cycle a preconditioner of every Krylov
//!   method on [`Dist`] ([`solve_rows_with_precond`]); see [`amg`].
//! * [`DistWalk`]: Monte Carlo across ranks. Every batch of histories is split
//!   over the ranks (histories keep their ids, hence their random streams) and
//!   the tallies are summed, so `gpuq_mcls::MonteCarlo` and `gpuq_mcls::mcsa`
//!   run distributed unchanged and give the single-rank estimate to rounding.
//! * Cubature: `Dist<B>` implements `gpuq_cubature::CubatureKernels` for any
//!   local backend that does. The adaptive methods' batches (rule
//!   applications, second-phase runs) are dealt to the ranks in contiguous
//!   slices and all-gathered, so any integrand (built-in, closure, expression,
//!   user device code) runs across ranks and gives the one-rank estimate bit
//!   for bit; tensor sums run whole on every rank.
//! * The CLI: `mpirun -n 4 gpuq solve ...` (feature `mpi` of `gpuq-cli`).
//!
//! ## Example
//!
//! CG with Jacobi over three ranks that are threads, each with its own CPU
//! backend, against the one-process solve:
//!
//! ```
//! use gpuq_cpu::CpuBackend;
//! use gpuq_dist::{rows_of, solve_rows, Communicator, Dist, RowPartition, ThreadComm};
//! use gpuq_krylov::{solve_csr, Preconditioner, SolverConfig};
//! use std::sync::Arc;
//!
//! let a = gpuq_sparse::generators::laplace2d::<f64>(20);
//! let b = vec![1.0; a.nrows()];
//! let config = SolverConfig { precond: Preconditioner::Jacobi, ..SolverConfig::default() };
//! let partition = RowPartition::contiguous(a.nrows(), 3)?;
//! let parts = ThreadComm::run(3, |comm| {
//!     let rank = comm.rank();
//!     let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
//!     let rows = rows_of(&a, &partition, rank)?; // this rank's rows
//!     solve_rows(&dist, &partition, &rows, &b[partition.range(rank)], &config)
//! })?;
//! let (serial, one) = solve_csr(&CpuBackend::new(), &a, &b, &config)?;
//! let mut x = Vec::new();
//! for part in parts {
//!     let (xr, report) = part?;
//!     assert!(report.converged && report.iterations.abs_diff(one.iterations) <= 1);
//!     x.extend(xr);
//! }
//! assert!(x.iter().zip(&serial).all(|(p, q)| (p - q).abs() < 1e-10 * q.abs()));
//! # Ok::<(), gpuq_core::Error>(())
//! ```
//!
//! Distributed results equal the serial ones to rounding, not bit for bit:
//! a dot product over ranks sums different partials than the local
//! backend's fixed blocking does (with one rank the bits are the serial
//! ones). Iteration counts agree within one. The same rank count and input
//! give the same bits on every run.
//!
//! Partitioners: contiguous row ranges ([`RowPartition`]); for the
//! generators' structured grids numbered lexicographically a block is a slab
//! of the grid, whose halo is one grid plane per neighbour. Where the
//! numbering does not follow the geometry (unstructured meshes, scrambled
//! orderings), [`Reordering::bisection`] partitions the matrix graph by
//! recursive breadth-first bisection and renumbers the unknowns so each part
//! is a contiguous block (on a scrambled 2D grid it cuts the ghosts nine
//! times). It is our own (deterministic, no C library to build); METIS is
//! not used.
//!
//! How vectors travel between ranks is the local backend's transport
//! ([`DeviceComm`], taken when the `Dist` is made: [`HostStaged`] for any
//! backend, `CudaTransport` for GPUs), so the solvers, the distributed
//! matrices and the AMG cycle have one path. Under `mpirun` (feature `mpi`)
//! one call starts MPI, splits the node's cores among its ranks, gives each
//! rank its GPU and joins the GPUs over NCCL (`launch`, or `init_mpi` then
//! `RankBackend::of`).
//!
//! GPUs (feature `cuda`): a `Dist` over the CUDA backend stages its halo
//! through the host (one download per contiguous range of the entries to
//! send, one upload of the ghosts, host-side collectives) unless an NCCL
//! communicator is attached to each rank's GPU
//! (`gpuq_cuda::CudaBackend::attach_nccl`): then the halo is packed on the
//! device and sent between the GPUs by `ncclSend`/`ncclRecv` on a
//! communication stream while the owned SpMV runs, and the fused
//! reductions' slots are all-gathered and summed on the device in the host's
//! rank order (the same bits); scalar results (`dotc`, `nrm2`) still come
//! back through the host, as on one GPU, and reduce over the communicator.
//! An iteration of device work only (CG with no preconditioner or a diagonal
//! one, BiCGSTAB) is then recorded once per parity as a CUDA graph with
//! NCCL's kernels in it and replayed, as on one GPU
//! (`gpuq_krylov::Replay::replay_device_work`).
//!
//! Files: every rank reads its own rows ([`read_matrix_rows`],
//! [`read_vector_rows`]: Matrix Market by byte ranges, PETSc binary by row
//! blocks).
//!
//! Not done yet: the distributed AMG setup's row exchanges between the GPUs
//! (its steps run on each rank's GPU, but the boundary rows it exchanges go
//! through the hosts: [`amg`]); the last gathered levels solved on one rank
//! rather than on every rank (the levels above them can be agglomerated onto fewer ranks,
//! [`DistAmgOptions::agglomerate`]); a rank's Matrix Market rows built straight
//! into CSR (they go through triplets); distributed walk data for Monte Carlo
//! (every rank holds the whole matrix); a CLI option for the bisection
//! partition.

#![warn(missing_docs)]

#[cfg(feature = "mpi")]
mod affinity;
pub mod amg;
mod backend;
mod comm;
mod cubature;
mod device_comm;
mod generate;
mod ghost_rows;
mod halo;
mod input;
mod kernels;
#[cfg(feature = "mpi")]
mod launch;
#[cfg(feature = "mpi")]
mod mpi_comm;
mod operator;
mod partition;
mod reorder;
mod scatter;
mod solve;
mod thread_comm;
mod walks;

pub use amg::{
    mixed_dist_amg, DistAmg, DistAmgOptions, DistHierarchy, DistLevel, DistSetupKernels,
    DistSetupTimings, GlobalRows, KeptAggregates, KeptProduct, KeptRows, MixedDistAmg,
    OwnedTransfer, RankRows,
};
pub use backend::{CommStats, Dist, DistMatrix};
pub use comm::{agree, ordered_sum, Communicator, SingleRank};
#[cfg(feature = "cuda")]
pub use device_comm::CudaTransport;
pub use device_comm::{DeviceComm, HostStaged};
pub use generate::{generated_rows, stencil_size};
pub use ghost_rows::GhostRows;
pub use halo::{
    ghost_row_runs, split_columns, split_rows, HaloBackend, HaloPlan, Pack, SplitRows,
    GHOST_JOIN_GAP, GHOST_RUNS,
};
pub use input::{read_matrix_rows, read_vector_rows};
pub use kernels::DistRecording;
#[cfg(feature = "mpi")]
pub use launch::{init_mpi, launch, under_mpi, CommChoice, RankBackend};
#[cfg(feature = "mpi")]
pub use mpi_comm::MpiComm;
pub use operator::DistOperator;
pub use partition::RowPartition;
pub use reorder::Reordering;
pub use scatter::{
    allgather_matrix, broadcast_rows, gather_rows, move_rows, scatter_rows, scatter_vector,
};
pub use solve::{
    allgather_rows, rows_of, solve_matrix_with_precond, solve_rows, solve_rows_with_precond,
};
pub use thread_comm::ThreadComm;
pub use walks::DistWalk;
