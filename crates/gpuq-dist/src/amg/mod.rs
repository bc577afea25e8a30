//! Algebraic multigrid across ranks: smoothed aggregation set up on every
//! rank's own rows, the V-cycle over [`crate::Dist`].
//!
//! * [`DistHierarchy::build`]: per level, the strength graph and the
//!   distance-2 aggregates of `gpuq-amg` on the rank's own block of A (so
//!   aggregates never cross ranks, as in AmgX and PETSc's GAMG), the
//!   tentative prolongator from the rank's rows of the near-null-space
//!   vectors, rho(D^-1 A) by Lanczos with one halo exchange per product and
//!   one collective per inner product, the smoothed prolongator
//!   P = (I - omega D^-1 A) P_T with P_T's ghost rows fetched once, R = P^T by
//!   one exchange of entries, and R (A P) with the ghost rows of P and of A P
//!   fetched once each. Coarse rows are numbered rank by rank, so each
//!   coarse level is again split in contiguous row blocks.
//! * Processor agglomeration: the first level whose rows per rank fall
//!   below [`DistAmgOptions::gather_below`] (or that the one-process rules
//!   would make the coarsest) is gathered whole onto every rank, where the
//!   one-process [`gpuq_amg::Hierarchy`] coarsens it further; each rank then
//!   solves that part redundantly (one allgather of the level's vector per
//!   cycle, no other communication below it). With
//!   [`DistAmgOptions::agglomerate`], a coarse level below `gather_below`
//!   rows per rank holding rows first moves onto a power-of-two fraction of
//!   those ranks (each consecutive group's coarse rows owned by its first
//!   rank, numbered as before: R = P^T and R (A P) land there, the coarse
//!   near-null-space rows are moved, [`crate::RowPartition::agglomerated`]),
//!   level by level down to two ranks; a level that would go to one rank is
//!   gathered (fewer than 2 `gather_below` rows): the redundant levels stay
//!   bounded whatever the rank count.
//! * [`DistAmg`] ([`DistHierarchy::cycle`]): the one-process cycle of
//!   `gpuq-amg` ([`gpuq_amg::Amg`]: its V- and W-cycles, damped and l1
//!   Jacobi and Chebyshev smoothing, its mixed-precision wrapper) over levels
//!   whose matrices are distributed ([`crate::DistMatrix`]), through
//!   [`gpuq_amg::AmgKernels`] for [`crate::Dist`]: each product with a
//!   level's A exchanges its halo while the local backend's fused step runs
//!   over the owned block; the gathered levels are its coarsest solve, the
//!   one-process cycle on the rank's local backend. [`MixedDistAmg`] runs it
//!   in f32 inside an f64 solve.
//!
//! The cycle of a symmetric A is its own transpose (QMR applies it) where
//! the setup checked A's symmetry across ranks
//! ([`DistAmgOptions::check_symmetry`], off by default:
//! [`DistHierarchy::is_symmetric`]): each rank's block on its own columns
//! by the one-process check, and each entry off them against its partner,
//! sent once to the rank holding it.
//!
//! With one rank the hierarchy is the one-process hierarchy bit for bit
//! (same aggregates, prolongators and coarse operators: tested). With more,
//! the aggregates near rank boundaries differ, so iteration counts differ a
//! little (on the tests' 3D Laplacians within 20% of one rank's).
//!
//! On GPU ranks with NCCL the cycle runs on the GPUs end to end (halos,
//! the gathered levels' all-gather and their cycle), so CG queues its
//! iterations without waiting for the host.
//!
//! With [`DistHierarchy::build_on`] and a GPU rank's backend, the
//! aggregation of each rank's block, the Lanczos estimates, the smoothed
//! prolongator and the products A P and R (A P) run on its GPU
//! ([`DistSetupKernels`]; the host's hierarchy bit for bit), a level's rows
//! uploaded once with their global columns and made extended there (own
//! columns, then ghosts: [`RankRows`]) for its Lanczos estimate, smoothing
//! and A P ([`DistSetupKernels::keep_rows`]), so the host's split writes
//! only the ghost block; the tentative prolongator is built
//! there ([`DistSetupKernels::tentative`]); P stays there for A P, and the owned
//! blocks of P and R = P^T are cut and transposed there
//! ([`DistSetupKernels::owned_transfer`]) for R (A P) and the cycle, which
//! lays them out where they are ([`gpuq_amg::AmgKernels::amg_level_matrix`]);
//! A's owned block is cut from the kept rows for the aggregation and the
//! cycle.
//!
//! P stays on the GPU after its smoothing: only its rows other ranks need,
//! the rows that A P's shared rows reach and its entries on other ranks'
//! coarse columns come to the host, and the largest magnitudes of A and P
//! (the cycle's f32 range check) are found there.
//!
//! R (A P) stays on the GPU as the next level's rows ([`GlobalRows`]): the
//! next level takes from it, on the device, the entries outside the rank's
//! columns, only the rows holding any brought down (the host makes the
//! ghost block and the ghost columns from them alone,
//! [`DistSetupKernels::outside_entries`]), the diagonal blocks
//! ([`DistSetupKernels::block_diagonal`]), the zero rows
//! ([`DistSetupKernels::zero_rows`]), the extended rows and the rows others
//! need of A P (gathered from the kept A P, [`KeptProduct::rows`]); only
//! the last distributed level's comes down whole, to be gathered. The
//! finest level takes the same path from the backend's copy of the
//! caller's rows ([`DistSetupKernels::hold_rows`]), and a solve
//! preconditioned by the hierarchy takes its operator from the finest
//! level's split ([`DistHierarchy::finest_matrix`],
//! [`crate::solve_matrix_with_precond`]), so the rows are uploaded once.
//!
//! The ghost blocks of A, P and R are held by their non-empty rows
//! ([`crate::GhostRows`]: a slab's boundary planes, not a row pointer per
//! row of the rank): they come down so from the device (A's and P's entries
//! outside the rank's columns), travel so in the transpose's exchange, and
//! go up so for R (A P) and the cycle, whose row pointers are expanded
//! there ([`crate::HaloBackend::ghost_matrix`]).
//!
//! The Lanczos estimates on GPU ranks joined by NCCL exchange their halos
//! and sum their inner products between the GPUs (no step waits for the
//! host; the scalars are read once per estimate); without NCCL they go
//! through the hosts.
//!
//! Not done: the setup's other exchanges go through the hosts whatever the
//! transport: the halo plans' index lists, the ghost rows of P_T, P and
//! A P and R's transposed ghost entries (each rank's boundary rows:
//! downloaded, sent over the communicator as bytes, uploaded), and the
//! gathered levels' all-gather ([`crate::allgather_matrix`]); the ghost
//! blocks and ghost columns are made on the host from the entries outside
//! the rank's columns. The last, gathered levels are still solved
//! redundantly on every rank (gathered onto one rank and scattered back is
//! not done); agglomeration is off by default; Gauss-Seidel (its colouring is per process) and
//! the seed's coarsening are not distributed (asking for them is an error);
//! a singular system's null space is not projected.

mod cycle;
mod kernels;
mod lanczos;
mod mixed;
mod rows;
mod setup;
mod symmetry;
mod transfer;

pub use cycle::DistAmg;
pub use mixed::{mixed_dist_amg, MixedDistAmg};
pub use rows::{GlobalRows, RankRows};
pub use setup::{
    DistAmgOptions, DistHierarchy, DistLevel, DistSetupKernels, DistSetupTimings, KeptAggregates,
    KeptProduct, KeptRows, OwnedTransfer,
};
