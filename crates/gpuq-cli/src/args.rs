//! Command-line arguments.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// GPU-accelerated sparse linear solvers and uncertainty quantification.
#[derive(Parser, Debug)]
#[command(name = "gpuq", version, about, arg_required_else_help = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the version, the available backends and the CPU thread count.
    Info,
    /// Solve A x = b for a Matrix Market matrix or a generated problem.
    Solve(Box<SolveArgs>),
    /// Write a generated test matrix (and right-hand side) as Matrix Market files.
    Generate(GenerateArgs),
    /// Time-step the cardiac bidomain model (AMG-preconditioned CG each step).
    Bidomain(Box<crate::bidomain::BidomainArgs>),
    /// Uncertainty quantification (seed 001): static, psd, convolution, sdof, expectation.
    Uq(Box<crate::uq::UqArgs>),
    /// Build the AMG hierarchy of a matrix and print its levels, complexities
    /// and setup time per phase.
    AmgInfo(Box<crate::amg::AmgInfoArgs>),
    /// Adaptive cubature (CUHRE, two-phase, breadth-first) or tensor Gauss rules
    /// of a built-in integrand.
    Integrate(Box<crate::integrate::IntegrateArgs>),
}

/// Arguments of `gpuq generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The problem: laplace1d:N[:SHIFT], laplace2d:M, laplace3d:M, convdiff2d:M[:WIND],
    /// helmholtz3d:M[:KH[:DAMPING]], helmholtz-cylinder:LEVEL[:hard|soft] (0, 1, 2),
    /// elasticity2d:N, elasticity3d:N, bidomain2d:N[:DT], bidomain3d:N[:DT], or beam:NE (seed 001's
    /// cantilever of NE elements, clamped DOFs removed: its stiffness K, and with
    /// --mass-out its mass M; --rhs-out writes a unit tip load).
    pub spec: String,
    /// Where to write A (Matrix Market coordinate, real or complex general; or PETSc binary
    /// with `--format petsc`).
    #[arg(long)]
    pub out: PathBuf,
    /// The files' format: `mtx` (Matrix Market text) or `petsc` (PETSc's binary format,
    /// what `MatView`/`VecView` write: read by row blocks under mpirun). `gpuq solve` and
    /// `gpuq uq` read either, whatever the file's name.
    #[arg(long, default_value = "mtx", value_parser = ["mtx", "petsc"])]
    pub format: String,
    /// Where to write b: as `--rhs` says (by default the problem's own, such as the
    /// cylinder's piston, else b = A x* for the seeded random x*).
    #[arg(long)]
    pub rhs_out: Option<PathBuf>,
    /// Where to write x*, the solution of A x = b, when it is known (`--rhs random` or `a1`).
    #[arg(long)]
    pub solution_out: Option<PathBuf>,
    /// How b is made (`random`, `ones`, `a1`; not a file) and the seed of x*.
    #[command(flatten)]
    pub rhs: RhsArgs,
    /// beam:NE only: where to write the mass matrix M.
    #[arg(long)]
    pub mass_out: Option<PathBuf>,
    /// elasticity2d:N and elasticity3d:N only: where to write the node coordinates (a Matrix
    /// Market array, one row per node in the matrix's node order), for `gpuq solve --coords`.
    #[arg(long)]
    pub coords_out: Option<PathBuf>,
}

impl SolveArgs {
    /// `--tol`, 1e-8 when not given.
    pub fn tol(&self) -> f64 {
        self.tol.unwrap_or(1e-8)
    }
}

/// The right-hand side of a solve or a generated problem.
#[derive(Args, Debug, Clone)]
pub struct RhsArgs {
    /// b: a Matrix Market array file, or `random` (b = A x* for a seeded random x*, entries
    /// uniform in [-1, 1); the error ||x - x*|| / ||x*|| is reported), `a1` (b = A 1, x* = 1:
    /// the constant vector AMG and Monte Carlo reproduce exactly, a degenerate test) or
    /// `ones` (b = 1). Default: a generated problem's own b where it has one, else `random`.
    #[arg(long, value_name = "FILE|random|a1|ones")]
    pub rhs: Option<String>,
    /// Seed of the random x* (`--rhs random`).
    #[arg(long, default_value_t = 1)]
    pub rhs_seed: u64,
}

impl RhsArgs {
    /// `--rhs` as a choice.
    pub fn choice(&self) -> crate::rhs::RhsChoice {
        crate::rhs::RhsChoice::parse(self.rhs.as_deref())
    }
}

/// Arguments of `gpuq solve`.
#[derive(Args, Debug)]
pub struct SolveArgs {
    /// Matrix Market file holding A (real or complex; general, symmetric or hermitian).
    #[arg(required_unless_present = "generate", conflicts_with = "generate")]
    pub matrix: Option<PathBuf>,
    /// The right-hand side: a Matrix Market array file, or how to make it.
    #[command(flatten)]
    pub rhs: RhsArgs,
    /// Generate A instead of reading it: laplace1d:N[:SHIFT], laplace2d:M, laplace3d:M,
    /// convdiff2d:M[:WIND], helmholtz3d:M[:KH[:DAMPING]] or
    /// helmholtz-cylinder:LEVEL[:hard|soft], elasticity2d:N, elasticity3d:N, bidomain2d:N[:DT] or
    /// bidomain3d:N[:DT] (b is then the problem's own right-hand side if it has one).
    #[arg(long)]
    pub generate: Option<String>,
    /// Method. Krylov: cg, bicgstab, bicgstab-l[:L] (L = 8), tfqmr, qmr, gmres[:M]
    /// (M = 30). Monte Carlo (real matrices with rho(I - D^-1 A) < 1): mc-forward,
    /// mc-adjoint, mcsa.
    #[arg(long, default_value = "cg", value_parser = crate::choices::solve_method())]
    pub method: String,
    /// Preconditioner: none, jacobi, block2 (2x2-block Jacobi) or amg (see the --amg options).
    #[arg(long, default_value = "none", value_parser = crate::choices::preconditioner())]
    pub precond: String,
    /// Relative residual tolerance ||b - A x|| / ||b|| (default 1e-8). The Monte Carlo
    /// estimates (mc-forward, mc-adjoint) are held to it only when it is given: without it
    /// their status is `estimate`, or `inaccurate` when the residual exceeds 1.
    #[arg(long, allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// Absolute residual tolerance (0: relative only).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub atol: f64,
    /// Iteration cap (default: 10 n, at least 100).
    #[arg(long)]
    pub max_iter: Option<usize>,
    /// End the solve as stagnated when the smallest residual has not dropped by 1% for this
    /// many iterations (0: never; CG's residual norm may plateau for long on hard problems).
    #[arg(long, default_value_t = 500)]
    pub stagnation_window: usize,
    /// Backend: cpu, cuda (device 0) or auto (cuda when a device is present, else cpu).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "auto"])]
    pub backend: String,
    /// Under mpirun with --backend cuda, how the GPUs exchange halos and fused reductions:
    /// nccl (between the GPUs), mpi (through host memory), or auto (NCCL where every rank
    /// has a GPU of its own and libnccl loads, else MPI).
    #[arg(long, default_value = "auto", value_parser = ["auto", "nccl", "mpi"])]
    pub comm: String,
    /// Matrix storage on the backend: auto, csr, sell, sell:C:SIGMA or bsr:B (B x B
    /// blocks; under AMG each level's own node blocks). auto: on a GPU SELL-32-1 when the rows are short and even (mean at most 32 entries, padding at most
    /// 25%), else CSR; on the CPU CSR. The report's `layout` says what was used.
    #[arg(long, default_value = "auto", value_parser = crate::choices::layout())]
    pub layout: String,
    /// Floating-point precision: f32 or f64 (complex matrices use the complex type of that precision).
    #[arg(long, default_value = "f64", value_parser = ["f32", "f64"])]
    pub precision: String,
    /// Monte Carlo: total histories (the forward method runs round(N / n) per
    /// entry; MCSA runs N per correction).
    #[arg(long, default_value_t = 100_000)]
    pub histories: u64,
    /// Monte Carlo: relative weight cutoff ending a history (0: none).
    #[arg(long, default_value_t = 1e-9)]
    pub cutoff: f64,
    /// Monte Carlo: most moves of one history.
    #[arg(long, default_value_t = 10_000)]
    pub max_steps: u32,
    /// Monte Carlo: estimator, collision or expected (default: expected for mcsa,
    /// whose corrections need the smaller variance, collision otherwise).
    #[arg(long, value_parser = ["collision", "expected"])]
    pub estimator: Option<String>,
    /// Monte Carlo: seed of the random streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Monte Carlo: independent batches for the standard error.
    #[arg(long, default_value_t = 10)]
    pub batches: u32,
    /// Monte Carlo: walk data layout, soa (structure of arrays) or aos (32-byte records).
    #[arg(long, default_value = "soa", value_parser = ["soa", "aos"])]
    pub walk_layout: String,
    /// Monte Carlo forward method on the GPU: thread-per-entry or thread-per-history.
    #[arg(
        long,
        default_value = "thread-per-entry",
        value_parser = ["thread-per-entry", "thread-per-history"]
    )]
    pub mapping: String,
    /// AMG options (with --precond amg).
    #[command(flatten)]
    pub amg: crate::amg::AmgArgs,
    /// Print the solve report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the solution x as a Matrix Market array file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the residual history as a figure: the recurrence residual per
    /// iteration, the true residual at the end and the tolerance, on a log
    /// axis (SVG when the file name ends in .svg, else PNG; not for
    /// mc-forward and mc-adjoint, which do not iterate).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}
