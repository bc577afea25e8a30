//! # gpuq-amg
//!
//! Algebraic multigrid for scalar and block systems (1 to [`MAX_BLOCK`]
//! unknowns per node, numbered node by node) with the user's near-null space
//! (such as the rigid-body modes of elasticity, [`rigid_body_modes`]), used as
//! a preconditioner by every Krylov method of `gpuq-krylov`.
//!
//! ## Example
//!
//! PCG preconditioned by the smoothed-aggregation V-cycle on the CPU backend:
//!
//! ```
//! use gpuq_amg::{Amg, AmgOptions, CycleOptions, Hierarchy};
//! use gpuq_cpu::CpuBackend;
//! use gpuq_krylov::{solve_csr, solve_csr_with_precond, Preconditioner, SolverConfig};
//!
//! let a = gpuq_sparse::generators::laplace2d::<f64>(48);
//! let x_true: Vec<f64> = (0..a.nrows()).map(|i| (0.7 * i as f64).sin()).collect();
//! let b = a.mul_vec(&x_true)?;
//! let cpu = CpuBackend::new();
//! let h = Hierarchy::build(&a, &AmgOptions::default())?; // setup, on the host
//! assert!(h.levels().len() >= 2);
//! let cycle = Amg::<CpuBackend, f64>::new(&cpu, &h, &CycleOptions::default())?;
//! let config = SolverConfig::default(); // CG to 1e-8
//! let (x, amg) = solve_csr_with_precond(&cpu, &a, &b, &config, Some(&cycle), &mut |_, _| {})?;
//! assert!(amg.converged && amg.relative_residual <= 1e-8);
//! assert!(x.iter().zip(&x_true).all(|(p, q)| (p - q).abs() < 1e-5));
//! // Far fewer iterations than with Jacobi.
//! let jacobi = SolverConfig { precond: Preconditioner::Jacobi, ..config };
//! let (_, jac) = solve_csr(&cpu, &a, &b, &jacobi)?;
//! assert!(3 * amg.iterations < jac.iterations, "{} vs {}", amg.iterations, jac.iterations);
//! # Ok::<(), gpuq_core::Error>(())
//! ```
//!
//! ## What is implemented
//!
//! * [`Hierarchy::build`], the setup, on the host (Rayon where it pays;
//!   deterministic: the same hierarchy whatever the thread count), and
//!   [`Hierarchy::build_on`], the same setup with its O(nnz) steps run by a
//!   backend's [`SetupKernels`] (below):
//!   - the strength test of seed 002: the Frobenius-norm matrix of the bs x bs
//!     blocks and the Mandel-Brezina test e_kl^2 >= eps e_kk e_ll ([`strength`]);
//!   - [`Coarsening::Seed`], seed 002's method: greedy coarse-node selection in
//!     node order, each node interpolating from its n_i strongly connected
//!     coarse nodes with weight (1/n_i) I per block, R = P^T, Galerkin R A P;
//!   - [`Coarsening::SmoothedAggregation`]: aggregates from a distance-2
//!     maximal independent set (rounds of max-propagation of a hashed key, so
//!     a parallel or GPU setup builds the same ones, [`aggregate`]; a node
//!     without strong connections, such as a Dirichlet unknown kept as an
//!     identity row, joins none); the
//!     tentative prolongator from near-null-space vectors (the constant of each
//!     block component by default, or any given set such as the rigid-body modes
//!     of 2D elasticity), orthonormalised per aggregate by a thin QR; smoothed by
//!     one weighted-Jacobi step with omega = 4 / (3 rho(D^-1 A)), rho from a
//!     Lanczos estimate ([`prolong`], [`spectral`]);
//!   - the Galerkin products with our own row-parallel sparse matrix-matrix
//!     product ([`galerkin`]);
//!   - the time of each phase ([`SetupTimings`]).
//! * [`SetupKernels`]: the setup's steps a backend may run where its data
//!   lives (strength graph and aggregation, the Lanczos estimate, the
//!   smoothed prolongator, R = P^T and R A P), each with a default body that
//!   is the host code, so a new backend builds hierarchies at once
//!   (`impl HostSetup for MyBackend {}`, [`HostSetup`]). The CUDA
//!   backend overrides them all with Rust kernels
//!   (`kernels-rs/src/device/amg_setup.rs`): the strength kernel merges each
//!   node's bs rows, the aggregation runs the same rounds as the host, the
//!   sparse products hash each row's products in the host's order (count
//!   pass, device prefix sum, fill pass), the transpose scatters and sorts,
//!   and the Lanczos inner products sum fixed chunks in order. Every value is
//!   computed in the host's order of operations, so **the device builds the
//!   host's hierarchy bit for bit** (tests/setup_on_device.rs checks the
//!   aggregates and every level's A, P and R on scalar, 2x2-block, elasticity,
//!   singular and unsymmetric problems, and each kernel against the host on
//!   random matrices). `gpuq solve --backend cuda` and `gpuq amg-info
//!   --backend cuda` build on the device (`--amg-setup cpu|cuda|auto`).
//! * [`Amg`], the V-cycle as a [`gpuq_core::LinearOperator`] on any backend with
//!   [`AmgKernels`]: every level's A, P, R and smoother matrix uploaded once in
//!   the chosen layout (CSR, SELL, or BSR with each level's node blocks);
//!   V- or W-cycle ([`CycleKind`]);
//!   smoothers: damped block Jacobi (the seed's 2x2-block Jacobi; point Jacobi
//!   for block 1), l1-Jacobi, Chebyshev of degree 2-4, multicolour symmetric
//!   block Gauss-Seidel ([`coloring`]); the finest level and the levels below
//!   it may have different smoothers and sweeps
//!   ([`AmgOptions::coarse_smoother`]); pre- and post-smoothing
//!   mirror each other, so the cycle is symmetric for symmetric A and PCG may
//!   use it; the coarsest level is one SpMV with its stored dense
//!   (pseudo-)inverse ([`CoarseSolver::Direct`]) or the seed's inverse block
//!   diagonal ([`CoarseSolver::BlockDiagonal`]). No transfer and no host
//!   round trip happens inside a cycle on any backend.
//! * [`AmgKernels`]: the fusable steps (residual, Jacobi sweep, a colour's
//!   Gauss-Seidel update, the Chebyshev start and step, residual and
//!   restriction) with default bodies made of SpMV and BLAS-1 operations; the
//!   CPU backend overrides the residual, the Jacobi sweep and the Chebyshev
//!   steps with one-pass Rayon kernels; the CUDA backend (feature `cuda`)
//!   with one-pass kernels over CSR and SELL matrices (point diagonals;
//!   2x2-block smoothing takes the defaults). A Chebyshev step is one pass
//!   (r -= A d_old, d_new = alpha D^-1 r + beta d_old, x += d_new) over two
//!   alternating direction vectors; the start's x update waits for the first
//!   step, so that no pass writes a vector whose neighbours it reads.
//! * [`MixedAmg`]: the cycle in one precision (f32) preconditioning a solve in
//!   another (f64): same iterations on laplace3d, 8-14% less time on the H100.
//! * [`floor::cycle_floor_bytes`]: the memory traffic a cycle cannot avoid,
//!   the yardstick of `gpuq amg-info --bench-cycles`.
//!
//! ## Finite-element models: blocks and the near-null space
//!
//! [`AmgOptions::block`] (1 to [`MAX_BLOCK`]) makes the strength graph,
//! the aggregates and the smoothers' diagonal blocks work on nodes;
//! [`AmgOptions::near_null_space`] takes k = 1..8 vectors (by default the
//! block's component constants), and [`rigid_body_modes`] builds the 3 (2D)
//! or 6 (3D) rigid-body modes of elasticity from node coordinates. The
//! tentative prolongator is a thin QR of each aggregate's rows of the
//! vectors, so the levels below the finest have k unknowns per node and
//! reproduce the vectors exactly (`tests/rigid_body_modes.rs`). Given
//! vectors that A maps to zero (a floating structure's modes) join the null
//! space handled explicitly (below). On six finite-element systems of
//! unstructured meshes (scikit-fem: 2D and 3D elasticity with their modes,
//! P1 and P2 Poisson, anisotropic and jumping-coefficient diffusion,
//! 2-3 x 10^5 unknowns) PCG takes at most 1.05x the iterations of PyAMG's
//! smoothed aggregation with the same modes, 4.6-12.5x faster than PyAMG on
//! the same 16 cores and 73-156x on an H200 (`docs/benchmarks.md`, "AMG on
//! finite-element models"). The default smoother depends on the block size
//! ([`Smoother::default_for`]): Chebyshev of degree 3 for block 1, one
//! damped-Jacobi sweep for blocks.
//!
//! ## Singular systems
//!
//! A pure Neumann problem (positive semidefinite A whose null space holds the
//! constants, or for block 2 the constant of a component or of both) is handled
//! explicitly: [`Hierarchy::build`] detects the null space among those vectors
//! ([`Hierarchy::null_space`]); the coarsest level uses the Moore-Penrose
//! pseudo-inverse (from a Cholesky factorisation with complete pivoting that
//! stops at the numerical rank of the symmetric coarsest matrix); and the caller projects the null space out of the right-hand side
//! (so that it is consistent) and out of the solution with
//! [`Hierarchy::project`], on the host, before and after the solve. Inside the
//! solve the iterates are not projected (that would cost a reduction read back
//! per cycle); their null-space component does not change the residual, and the
//! final projection removes it.
//!
//! ## Costs
//!
//! Setup: O(nnz) per level for the strength graph and the aggregation rounds,
//! two sparse products for the smoothed prolongator and two for R A P, a few
//! (15 by default) products with A per level for the spectral-radius estimate,
//! and O(n_c^3) for the coarsest dense inverse (n_c <= the coarse size, 100 by
//! default). A cycle costs about the operator complexity times the work of the
//! finest level's smoothing, residual and transfer products (see [`Amg`]).
//!
//! ## The default: smoothed aggregation, measured
//!
//! PCG to 1e-8 on laplace3d:100 (10^6 unknowns, b = 1) on the CPU backend (the
//! 2 cores of the development machine, release build, `gpuq solve --precond
//! ...`), default options otherwise (one damped-Jacobi sweep before and after,
//! eps = 0.001, coarsest at or below 100 unknowns). Times are the best of four
//! runs per row: the machine was shared and the other runs were up to 2x
//! slower, but smoothed aggregation beat the seed's method in every run, and the
//! iterations and complexities are exact:
//!
//! | preconditioner | iterations | solve s | setup s | operator / grid complexity |
//! | --- | ---: | ---: | ---: | --- |
//! | Jacobi | 249 | 2.01 | 0.07 | - |
//! | AMG, smoothed aggregation (default) | 19 | 0.66 | 1.78 | 1.48 / 1.09 |
//! | AMG, smoothed aggregation, W-cycle | 17 | 0.72 | 2.03 | 1.48 / 1.09 |
//! | AMG, smoothed aggregation, Chebyshev degree 3 | 12 | 0.88 | 1.80 | 1.48 / 1.09 |
//! | AMG, seed 002's method | 16 | 0.79 | 2.48 | 3.02 / 1.61 |
//!
//! The seed's method needs fewer iterations (its coarsening halves the grid,
//! so the coarse spaces are rich), but its greedy selection coarsens a 3D
//! Laplacian only by about 2 per level, with denser coarse stencils: operator
//! complexity 3.0 against 1.5, so each cycle costs more and the setup's
//! Galerkin products take twice as long. Smoothed aggregation was faster in
//! setup and in solve in every run, and is therefore the default
//! ([`Coarsening`]'s default). Its setup on this problem splits into strength
//! 0.3 s, aggregation 0.2 s, prolongator 0.3 s, Galerkin 0.5 s and smoother data
//! (block inverses and Lanczos) 0.45 s. On 2D elasticity (`elasticity2d:64`,
//! two unknowns per node) PCG with block smoothed aggregation and the
//! rigid-body modes takes 27 iterations against 397 with 2x2-block Jacobi.
//!
//! The iteration count barely grows with the mesh: 17 iterations on
//! laplace3d:64 (2.6 x 10^5 unknowns) and 19 on laplace3d:100 (10^6), same
//! options.
//!
//! On the H100 (laplace3d:200, 8 x 10^6 unknowns, b = 1, `docs/benchmarks.md`,
//! SELL-32-1 storage) one Jacobi sweep takes 22 iterations and 0.051 s.
//! Symmetric Gauss-Seidel on the finest level with Chebyshev of degree 3 below
//! it takes 13 iterations (PyAMG's smoothed aggregation: 14) and 0.049 s, and
//! with the cycle in f32 (`MixedAmg`) 0.035 s: 13.8x CuPy's CG with Jacobi,
//! 1063x PyAMG's solve, one cycle at 1.29x its memory floor. That is the
//! configuration to ask for on a GPU for scalar problems
//! (`--amg-smoother gs --amg-coarse-smoother chebyshev:3 --amg-precision f32
//! --layout sell:32:1`). One damped-Jacobi sweep was the default until the
//! finite-element measurements below: block systems keep it (on the 2x2
//! systems it is the fastest on the GPU: elasticity2d:1414 0.094 s against
//! 0.098 s, bidomain3d:200 0.047 s against 0.083 s), scalar ones now take
//! Chebyshev of degree 3 ([`Smoother::default_for`]; on laplace3d:200 on an
//! H200, over the upper tenth of the spectrum ([`CHEBYSHEV_RATIO`]), 8
//! iterations and 0.23-0.30 s with the setup against one Jacobi sweep's 13
//! and 0.27-0.29 s). Gauss-Seidel on every level takes 9 iterations, but its
//! setup takes 1.1-1.4 s (the colouring on the host) and the coarse levels
//! need 18-64 colours, each a launch per sweep.
//!
//! ## The setup on the GPU, measured
//!
//! H100 against its host's 16 cores, same run (`docs/benchmarks.md`):
//! laplace3d:200 (8 x 10^6 rows) 3.8 s against 9.3 s; the aggregation
//! (strength graph and MIS-2 rounds) 0.10 s against 3.5 s, the Lanczos
//! estimates and smoother data 0.29 s against 0.73 s. What dominates the
//! device setup is what still crosses the bus or runs on the host: each
//! level's P, R and A_c come back to the host hierarchy (the cycle then
//! uploads them again in its layout), and the tentative prolongator's QR per
//! aggregate runs on the host; these make up most of the prolongation
//! (1.05 s) and Galerkin (1.40 s) phases. On the 2x2 systems:
//! elasticity2d:1414 3.4 s against 5.2 s, bidomain3d:200 7.5 s against
//! 10.6 s.
//!
//! ## Not done
//!
//! * The device setup ([`SetupKernels`] on CUDA) keeps each level's A, P, R
//!   and A_c on the device, but the aggregates and block diagonals come back
//!   to the host, and these run on the host: the block-diagonal inverses,
//!   the coarsest inverse, the seed's greedy selection, and Gauss-Seidel's
//!   colouring (one sequential pass) and colour matrices (in parallel), for
//!   which each level comes down. The device's sparse product takes one
//!   thread per row (no warp-per-row or shared-memory tables for long rows).
//! * On CUDA, the 2x2-block Jacobi, Gauss-Seidel and Chebyshev steps run
//!   the default bodies (separate SpMV and BLAS-1 launches), so on the 2x2
//!   systems Gauss-Seidel / Chebyshev-3 takes fewer iterations than block
//!   Jacobi but no less time; the cycle is not recorded as a CUDA graph
//!   (tried: captured once and replayed between copies of x and y, PCG with
//!   the Gauss-Seidel/Chebyshev cycle took 0.0522 s against 0.052 s
//!   unrecorded on laplace3d:200, and a capture must own the backend's
//!   stream, which tests sharing one backend across threads break; not kept).
//! * The CPU backend runs a Gauss-Seidel colour update in two passes over
//!   the colour's rows, the second (adding each row's correction to x)
//!   sequential: on 16 cores a symmetric sweep costs about three Jacobi
//!   sweeps, so Gauss-Seidel is never the default.
//! * Blocks above 2 are stored in CSR or SELL (BSR only for 2x2 blocks): no
//!   BSR of any block size, so no b = 3 SpMV measured against its memory
//!   floor or cuSPARSE's bsrmv. Chebyshev's and Gauss-Seidel's steps for
//!   blocks run the default bodies on both backends (hence one Jacobi sweep
//!   as the blocks' default smoother).
//! * PyAMG improves its near-null-space vectors by four Gauss-Seidel sweeps
//!   on A x = 0 before the tentative prolongator; four damped-Jacobi steps
//!   were tried here and changed no iteration count on the six
//!   finite-element systems, so nothing is done. No energy-minimising
//!   prolongators.
//! * On small systems the device setup is dominated by fixed costs: a P2
//!   Poisson system of 1.85 x 10^5 rows sets up in 19 ms (the upload of A
//!   2.4-2.6 ms through pinned buffers made beforehand, filled with
//!   non-temporal stores) for a 6 ms solve.
//!   The coarse levels' rows are long, so the strength graph of scalar rows
//!   takes a warp per node and the Lanczos products 8 lanes per row; the
//!   aggregation's rounds run in one cooperative launch, and the Lanczos
//!   steps of a level of at most 50,000 rows too (a grid barrier costs about
//!   2.5 us, more than a launch saves on a large level): the levels of 5570
//!   and 316 rows went from 4.0 and 3.4 ms to 2.3 and 1.5 ms. What is left
//!   on level 0 is the upload, the Galerkin product (3 ms), the Lanczos
//!   estimate and the aggregation (1.5-2 ms each). Setting small levels up
//!   on the host was slower (Rayon's fork-join on 16 cores).

#![warn(missing_docs)]

pub mod aggregate;
pub mod blockdiag;
pub mod coarse;
pub mod coloring;
mod cycle;
pub mod floor;
pub mod galerkin;
mod hierarchy;
mod host_checks;
pub mod kernels;
mod mixed;
mod node_aggregates;
mod options;
mod precision;
pub mod prolong;
mod resident;
mod rigid;
mod setup;
pub mod spectral;
pub mod strength;
mod symmetry;
pub mod trace;

pub use cycle::{
    chebyshev_interval, level_cycle_layout, Amg, Coarsest, CycleLevel, CHEBYSHEV_RATIO,
};
pub use hierarchy::{
    coarsening_accepted, Hierarchy, HierarchyInfo, Level, LevelInfo, SetupTimings, SmootherData,
};
pub use kernels::{
    device_largest_fits, device_layout_fits, device_lays_out, device_values_fit, AmgKernels,
};
pub use mixed::MixedAmg;
pub use node_aggregates::{HeldAggregates, NodeAggregates};
pub use options::{
    default_jacobi_damping, device_defaults, AmgOptions, CoarseSolver, Coarsening, CycleKind,
    CycleOptions, Smoother, DEVICE_JACOBI_DAMPING, MAX_BLOCK,
};
pub use precision::{amg_cycle, default_cycle_precision, f64_cycle};
pub use resident::{LevelMatrix, ResidentMatrix};
pub use rigid::rigid_body_modes;
#[cfg(feature = "cuda")]
pub use setup::cuda::{
    device_aggregates, device_blocks, device_copy, device_inverse, device_level, kept_aggregates,
    kept_blocks, resident_finest,
};
pub use setup::{HostSetup, SetupKernels};
pub use symmetry::block_is_symmetric;
