//! `gpuq solve --precond amg` and `gpuq amg-info`: the AMG hierarchy of
//! `gpuq-amg` built where `--amg-setup` says (by default on the solve's
//! backend), its V-cycle on the chosen backend.

use crate::args::SolveArgs;
use crate::progress::Progress;
use crate::rhs::{RhsOutcome, RightHandSide, WithRhs};
use crate::solve::{print_report, Chosen, Source};
use clap::Args;
use gpuq_amg::{
    Amg, AmgKernels, AmgOptions, Coarsening, CycleKind, CycleOptions, Hierarchy, HierarchyInfo,
    SetupTimings, Smoother,
};
use gpuq_core::{Error, Result, Scalar, ScalarKind, SolveReport};
use gpuq_facade::solver::AmgSummary;
use gpuq_krylov::{KrylovBackend, KrylovOptions, Preconditioner, SolverConfig};
use gpuq_sparse::generators::ProblemSpec;
use gpuq_sparse::matrix_market as mm;
use gpuq_sparse::{Csr, Layout};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The AMG options of `gpuq solve` (used with `--precond amg`) and `gpuq amg-info`.
#[derive(Args, Debug, Clone)]
pub struct AmgArgs {
    /// AMG coarsening: sa (smoothed aggregation) or seed (seed 002's greedy
    /// selection with 1/n_i interpolation).
    #[arg(long = "amg", default_value = "sa", value_parser = ["sa", "seed"])]
    pub coarsening: String,
    /// Unknowns per node for AMG, numbered node by node: 1 to 8 (3 for 3D elasticity).
    #[arg(long, default_value_t = 1)]
    pub block: usize,
    /// Near-null-space vectors for smoothed aggregation: a Matrix Market array of n rows and k
    /// columns (k = 1..8), e.g. the rigid-body modes of an elasticity model. Default: the
    /// constant of each of the --block components.
    #[arg(
        long = "near-null-space",
        value_name = "B.mtx",
        conflicts_with = "coords"
    )]
    pub near_null_space: Option<PathBuf>,
    /// Node coordinates for the rigid-body modes of elasticity as the near-null space: a Matrix
    /// Market array with one row per node in the matrix's node order and d = 2 or 3 columns
    /// (3 modes in 2D, 6 in 3D); needs --block d.
    #[arg(long, value_name = "X.mtx")]
    pub coords: Option<PathBuf>,
    /// AMG strength threshold eps of e_kl^2 >= eps e_kk e_ll (block norms; PyAMG's symmetric
    /// theta = sqrt(eps)); nodes without strong connections join no aggregate.
    #[arg(long = "amg-strength", default_value_t = 0.001)]
    pub strength: f64,
    /// AMG smoother: jacobi (damped block Jacobi), l1, chebyshev or chebyshev:D (D = 2..4),
    /// gs (multicolour symmetric block Gauss-Seidel). Default: chebyshev:3 for --block 1, jacobi for
    /// larger blocks and under mpirun (where gs is not available).
    #[arg(long = "amg-smoother", value_parser = crate::choices::smoother())]
    pub smoother: Option<String>,
    /// AMG smoother of the levels below the finest (the same choices; default: --amg-smoother).
    #[arg(long = "amg-coarse-smoother", value_parser = crate::choices::smoother())]
    pub coarse_smoother: Option<String>,
    /// AMG smoothing applications before and after the coarse correction.
    #[arg(long = "amg-sweeps", default_value_t = 1)]
    pub sweeps: usize,
    /// Precision of the AMG cycle: f32 or f64. Default: f32 with --block 1 on every backend
    /// (an f32 cycle in an f64 solve reads about two thirds of the bytes, the Krylov method
    /// staying in f64: the fastest configuration measured on the GPUs and the host's cores),
    /// else the solve's --precision.
    #[arg(long = "amg-precision", value_parser = ["f32", "f64"])]
    pub cycle_precision: Option<String>,
    /// AMG smoothing applications on the levels below the finest (default: --amg-sweeps).
    #[arg(long = "amg-coarse-sweeps")]
    pub coarse_sweeps: Option<usize>,
    /// AMG cycle: v or w.
    #[arg(long = "amg-cycle", default_value = "v", value_parser = ["v", "w"])]
    pub cycle: String,
    /// AMG coarsest size: stop coarsening at or below this many unknowns.
    #[arg(long = "amg-coarse", default_value_t = 100)]
    pub coarse: usize,
    /// Damped-Jacobi smoother's omega times rho(D^-1 A), in (0, 2). Default: 1.7 on a GPU with
    /// --block 1 (fewer cycles on Laplacian-like problems, the fastest configuration measured
    /// on the H100), else 4/3.
    #[arg(long = "amg-jacobi-damping")]
    pub jacobi_damping: Option<f64>,
    /// Where the AMG setup's aggregation, prolongator and Galerkin products run: cpu, cuda, or
    /// auto (the backend of the solve or of `amg-info --backend`).
    #[arg(long = "amg-setup", default_value = "auto", value_parser = ["auto", "cpu", "cuda"])]
    pub setup: String,
    /// Under mpirun: a level with fewer rows per rank than this is gathered onto every rank
    /// and coarsened further there by the one-process setup (each rank then solves it
    /// redundantly; with --amg-agglomerate, per rank holding rows). Default: 2000. On GPUs
    /// over NCCL, 50000 makes the solve phase 5-7% faster (fewer exchanges of small levels)
    /// for a dearer setup: worth it for many solves with one hierarchy.
    #[arg(long = "amg-gather-below")]
    pub gather_below: Option<usize>,
    /// Under mpirun: coarse levels move onto fewer ranks as they shrink (a power-of-two
    /// fraction of the ranks, each group's rows on its first rank, down to two) so that the
    /// ranks holding rows keep about --amg-gather-below of them or more; a level that would go
    /// to one rank is gathered onto every rank. Without it every rank holds a share
    /// of each level until the gathered levels, which then grow with the rank count.
    #[arg(long = "amg-agglomerate")]
    pub agglomerate: bool,
}

/// Builds the hierarchy of `a` (handed over: on the host it becomes the
/// finest level without a copy) where `name` (`--amg-setup`) says: `cpu`,
/// `cuda` (the solve's device when it runs on CUDA, else device 0), or `auto`
/// (the backend `backend` names).
fn build_hierarchy(
    a: Csr<f64>,
    options: &AmgOptions,
    name: &str,
    backend: &Chosen,
) -> Result<Hierarchy> {
    match (name, backend) {
        ("cpu", _) | ("auto", Chosen::Cpu(_)) => {
            Hierarchy::build_handed_over(&gpuq_cpu::CpuBackend::new(), a, options)
        }
        ("cuda" | "auto", Chosen::Cuda(b)) => Hierarchy::build_handed_over(b, a, options),
        ("cuda", Chosen::Cpu(_)) => {
            Hierarchy::build_handed_over(&gpuq_cuda::CudaBackend::new(0)?, a, options)
        }
        (other, _) => Err(Error::InvalidArgument(format!(
            "unknown AMG setup backend '{other}' (available: cpu, cuda, auto)"
        ))),
    }
}

impl AmgArgs {
    /// The cycle's precision: `--amg-precision`, else the library's default for the solve's
    /// `precision` and the block size ([`gpuq_facade::solver::default_cycle_precision`]: f32
    /// for scalar unknowns in an f64 solve, on every backend).
    pub(crate) fn cycle_precision<'a>(&'a self, precision: &'a str) -> &'a str {
        match self.cycle_precision.as_deref() {
            Some(p) => p,
            None if precision == "f64" => {
                gpuq_facade::solver::default_cycle_precision(ScalarKind::F64, self.block).name()
            }
            None => precision,
        }
    }

    /// The setup options these arguments name for a run on `backend` (the
    /// Jacobi damping's default depends on it); see [`AmgArgs::options_on`].
    fn options(&self, source: &Source, backend: &Chosen) -> Result<AmgOptions> {
        self.options_on(source, matches!(backend, Chosen::Cuda(_)))
    }

    /// [`AmgArgs::options`] for a run on a GPU (`gpu`) or not (the
    /// distributed solve's ranks). The near-null space: `--near-null-space`'s
    /// vectors, or the rigid-body modes of `--coords`, or for a generated
    /// elasticity problem with `--block` its dimension the rigid-body modes
    /// of its nodes; else none (the setup's default).
    pub(crate) fn options_on(&self, source: &Source, gpu: bool) -> Result<AmgOptions> {
        let near_null_space = match (&self.near_null_space, &self.coords, source) {
            (Some(path), _, _) => Some(read_columns(path, "--near-null-space")?),
            (None, Some(path), _) => {
                let x = read_columns(path, "--coords")?;
                if x.len() != self.block {
                    return Err(Error::InvalidArgument(format!(
                        "--coords {}: {} columns, so {}D rigid-body modes, which need --block {} (given {})",
                        path.display(),
                        x.len(),
                        x.len(),
                        x.len(),
                        self.block
                    )));
                }
                Some(gpuq_amg::rigid_body_modes(&x)?)
            }
            (None, None, Source::Generated(spec)) if self.coarsening == "sa" => spec
                .node_coordinates()
                .filter(|x| x.len() == self.block)
                .map(|x| gpuq_amg::rigid_body_modes(&x))
                .transpose()?,
            _ => None,
        };
        let o = AmgOptions {
            coarsening: Coarsening::parse(&self.coarsening)?,
            block: self.block,
            strength: self.strength,
            smoother: self.smoother.as_deref().map(Smoother::parse).transpose()?,
            coarse_smoother: self
                .coarse_smoother
                .as_deref()
                .map(Smoother::parse)
                .transpose()?,
            sweeps: self.sweeps,
            coarse_sweeps: self.coarse_sweeps,
            coarse_size: self.coarse,
            cycle: CycleKind::parse(&self.cycle)?,
            near_null_space,
            jacobi_damping: self
                .jacobi_damping
                .unwrap_or_else(|| gpuq_amg::default_jacobi_damping(gpu, self.block)),
            ..AmgOptions::default()
        };
        o.validate()?;
        Ok(o)
    }
}

/// The columns of the dense Matrix Market file at `path`, given by option
/// `flag`; errors name both.
fn read_columns(path: &std::path::Path, flag: &str) -> Result<Vec<Vec<f64>>> {
    mm::read_dense_columns(path).map_err(|e| match e {
        Error::Io { .. } => e,
        other => Error::InvalidArgument(format!("{flag} {}: {other}", path.display())),
    })
}

/// Arguments of `gpuq amg-info`.
#[derive(Args, Debug)]
pub struct AmgInfoArgs {
    /// Matrix Market file holding A (real).
    #[arg(required_unless_present = "generate", conflicts_with = "generate")]
    pub matrix: Option<PathBuf>,
    /// Generate A instead of reading it (the spellings of `gpuq solve --generate`).
    #[arg(long)]
    pub generate: Option<String>,
    /// The AMG options.
    #[command(flatten)]
    pub amg: AmgArgs,
    /// Print the hierarchy as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also time this many cycles (in --amg-precision, default f64, from a zero guess on b = 1) on
    /// `--backend`, and report the time per cycle against its memory floor
    /// at the copy rate measured in the same run (0: no timing).
    #[arg(long = "bench-cycles", default_value_t = 0)]
    pub bench_cycles: usize,
    /// Backend of `--bench-cycles` and, with `--amg-setup auto`, of the setup: cpu, cuda or auto.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "auto"])]
    pub backend: String,
    /// Matrix layout of `--bench-cycles`: csr, sell or sell:C:SIGMA, bsr:B.
    #[arg(long, default_value = "csr", value_parser = crate::choices::fixed_layout())]
    pub layout: String,
    /// Write the hierarchy as a figure: rows and non-zeros per level as bars on
    /// a log axis (SVG when the file name ends in .svg, else PNG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write each level's matrix and prolongator to DIR as Matrix Market
    /// files (A0.mtx, P0.mtx, A1.mtx, ...; R = P^T), for other tools (a
    /// device setup copies them to the host for this).
    #[arg(long = "save-levels", value_name = "DIR")]
    pub save_levels: Option<PathBuf>,
    /// Build the hierarchy this many times in the same process and report
    /// each build's phase times (`repeat_setup`; the levels shown are the
    /// first build's; each build is dropped before the next). Builds after
    /// the first find the device's memory pool already grown, as a program
    /// that sets up again (a new matrix of the same size) does.
    #[arg(long = "repeat-setup", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub repeat_setup: u64,
}

impl AmgInfoArgs {
    /// The matrix the arguments name: a file or a generated problem.
    pub(crate) fn source(&self) -> Result<Source<'_>> {
        match (&self.generate, &self.matrix) {
            (Some(spec), _) => Ok(Source::Generated(ProblemSpec::parse(spec)?)),
            (None, Some(path)) => Ok(Source::File(path)),
            (None, None) => Err(Error::InvalidArgument(
                "give a Matrix Market file or --generate SPEC".into(),
            )),
        }
    }
}

/// Writes the levels of `h` to `dir` (see `AmgInfoArgs::save_levels`).
fn save_levels(h: &Hierarchy, dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })?;
    for (l, level) in h.levels().iter().enumerate() {
        mm::save_csr(level.a.host()?, dir.join(format!("A{l}.mtx")))?;
        if let Some(p) = &level.p {
            mm::save_csr(p.host()?, dir.join(format!("P{l}.mtx")))?;
        }
    }
    Ok(())
}

/// One timed run of the cycle (`gpuq amg-info --bench-cycles K`).
#[derive(serde::Serialize, Debug)]
struct CycleBench {
    backend: String,
    layout: String,
    cycles: usize,
    /// Seconds per cycle (K cycles back to back, one synchronisation).
    cycle_s: f64,
    /// The floor's bytes per cycle ([`gpuq_amg::floor::cycle_floor_bytes`]).
    floor_bytes: f64,
    /// The backend's copy rate in the same run (bytes read plus written per second).
    copy_bytes_per_s: f64,
    /// floor_bytes / copy rate.
    floor_s: f64,
    /// cycle_s / floor_s.
    ratio: f64,
}

/// Elements of the copy that measures the bandwidth: 2^26 (a 512 MiB f64
/// vector, well beyond any cache).
const COPY_LEN: usize = 1 << 26;

/// Copies timed back to back for the bandwidth.
const COPIES: usize = 10;

/// Times `k` cycles of `h` on `backend` (after one warm-up cycle) and
/// [`COPIES`] copies of [`COPY_LEN`] values, each batch ended by a reduction
/// that waits for the queued work (the copies' less one reduction timed
/// alone). O(k cycles + 10 copies).
fn bench_cycles<B: AmgKernels, S: Scalar>(
    backend: &B,
    h: &Hierarchy,
    layout: Layout,
    k: usize,
) -> Result<CycleBench> {
    use gpuq_core::LinearOperator;
    let cycle = Amg::<B, S>::new(backend, h, &CycleOptions { layout })?;
    let n = h.levels()[0].a.nrows();
    let b = backend.upload(&vec![S::one(); n])?;
    let mut y = backend.zeros::<S>(n)?;
    cycle.apply(&b, &mut y)?;
    backend.nrm2(&y)?;
    let t = Instant::now();
    for _ in 0..k {
        cycle.apply(&b, &mut y)?;
    }
    backend.nrm2(&y)?;
    let cycle_s = t.elapsed().as_secs_f64() / k as f64;
    let src = backend.upload(&vec![1.0f64; COPY_LEN])?;
    let mut dst = backend.zeros::<f64>(COPY_LEN)?;
    let copy_s = {
        backend.nrm2(&dst)?;
        let t = Instant::now();
        for _ in 0..COPIES {
            backend.copy(&src, &mut dst)?;
        }
        backend.nrm2(&dst)?;
        let all = t.elapsed().as_secs_f64();
        let t = Instant::now();
        backend.nrm2(&dst)?;
        ((all - t.elapsed().as_secs_f64()) / COPIES as f64).max(1e-9)
    };
    let copy_bytes_per_s = 16.0 * COPY_LEN as f64 / copy_s;
    let floor_bytes = gpuq_amg::floor::cycle_floor_bytes(h, S::size_bytes());
    let floor_s = floor_bytes / copy_bytes_per_s;
    Ok(CycleBench {
        backend: backend.name(),
        layout: format!("{layout:?}"),
        cycles: k,
        cycle_s,
        floor_bytes,
        copy_bytes_per_s,
        floor_s,
        ratio: cycle_s / floor_s,
    })
}

/// Whether `--precond` asks for AMG.
pub fn is_amg(precond: &str) -> bool {
    precond == "amg"
}

/// Loads a real A as f64 (erroring on a complex one) and b.
pub(crate) fn load_real(
    source: &Source,
    rhs: &crate::args::RhsArgs,
) -> Result<(Csr<f64>, RightHandSide<f64>)> {
    if source.is_complex()? {
        return Err(Error::InvalidArgument(
            "AMG needs a real matrix (this one is complex)".into(),
        ));
    }
    source.load::<f64>(rhs)
}

/// Loads a real A as f64 (erroring on a complex one), without a right-hand side.
pub(crate) fn load_matrix(source: &Source) -> Result<Csr<f64>> {
    if source.is_complex()? {
        return Err(Error::InvalidArgument(
            "AMG needs a real matrix (this one is complex)".into(),
        ));
    }
    match source {
        Source::File(path) => gpuq_sparse::file::read_csr(path),
        Source::Generated(spec) => Ok(spec.build::<f64>()?.matrix),
    }
}

/// `gpuq amg-info`: builds the hierarchy and prints its levels, complexities
/// and setup time per phase.
pub fn info(args: &AmgInfoArgs) -> Result<ExitCode> {
    let source = args.source()?;
    let a = load_matrix(&source)?;
    let backend = Chosen::parse(&args.backend)?;
    let build = || {
        // A copy per build (outside the setup's clock), so `--repeat-setup`
        // times the builds the solve makes.
        build_hierarchy(
            a.clone(),
            &args.amg.options(&source, &backend)?,
            &args.amg.setup,
            &backend,
        )
    };
    let h = build()?;
    let info = h.info();
    if let Some(dir) = &args.save_levels {
        save_levels(&h, dir)?;
    }
    let bench = if args.bench_cycles == 0 {
        None
    } else {
        let layout = Layout::parse(&args.layout)?;
        let k = args.bench_cycles;
        Some(match (&backend, args.amg.cycle_precision.as_deref()) {
            (Chosen::Cpu(b), None | Some("f64")) => bench_cycles::<_, f64>(b, &h, layout, k)?,
            (Chosen::Cpu(b), Some("f32")) => bench_cycles::<_, f32>(b, &h, layout, k)?,
            (Chosen::Cuda(b), None | Some("f64")) => bench_cycles::<_, f64>(b, &h, layout, k)?,
            (Chosen::Cuda(b), Some("f32")) => bench_cycles::<_, f32>(b, &h, layout, k)?,
            (_, Some(p)) => {
                return Err(Error::InvalidArgument(format!(
                    "unknown AMG precision '{p}' (available: f32, f64)"
                )))
            }
        })
    };
    // The first hierarchy goes first, so each later build finds the pool as
    // a fresh setup after an earlier one's release would.
    drop(h);
    let mut repeat_setup = vec![info.timings.clone()];
    for _ in 1..args.repeat_setup {
        repeat_setup.push(build()?.info().timings);
    }
    if args.json {
        crate::solve::print_json(&AmgInfoReport {
            info: &info,
            cycle_bench: bench.as_ref(),
            repeat_setup: (repeat_setup.len() > 1).then_some(&repeat_setup[..]),
        })?;
    } else {
        print_hierarchy(&info);
    }
    if let Some(path) = &args.plot {
        let name = match (&args.generate, &args.matrix) {
            (Some(spec), _) => spec.clone(),
            (None, Some(file)) => file
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            (None, None) => String::new(),
        };
        write_hierarchy_plot(path, &info, &name, args.json)?;
    }
    if !args.json {
        if repeat_setup.len() > 1 {
            for (k, t) in repeat_setup.iter().enumerate() {
                println!(
                    "setup {}: total {:.4} s, galerkin {:.4} s, prolongation {:.4} s, aggregation {:.4} s",
                    k + 1,
                    t.total_s,
                    t.galerkin_s,
                    t.prolongation_s,
                    t.aggregation_s
                );
            }
        }
        if let Some(c) = &bench {
            println!(
                "cycle on {} ({}): {:.4} ms over {} cycles; floor {:.1} MB = {:.4} ms at the copy rate {:.1} GB/s; {:.2}x the floor",
                c.backend,
                c.layout,
                1e3 * c.cycle_s,
                c.cycles,
                c.floor_bytes / 1e6,
                1e3 * c.floor_s,
                c.copy_bytes_per_s / 1e9,
                c.ratio
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `amg-info --plot`: the rows and non-zeros per level of `info` (the
/// hierarchy of `name`) at `path`, and a line saying where (on stderr with
/// `--json`).
fn write_hierarchy_plot(
    path: &std::path::Path,
    info: &HierarchyInfo,
    name: &str,
    json: bool,
) -> Result<()> {
    let of = if name.is_empty() {
        String::new()
    } else {
        format!(" of {name}")
    };
    let title = format!(
        "AMG hierarchy{of} ({}, {} levels): operator complexity {:.3}, grid complexity {:.3}",
        info.coarsening,
        info.levels.len(),
        info.operator_complexity,
        info.grid_complexity
    );
    let levels: Vec<(usize, usize)> = info.levels.iter().map(|l| (l.rows, l.nnz)).collect();
    gpuq_plot::hierarchy_chart(&title, &levels).save(path)?;
    let line = format!(
        "plot {}: rows and non-zeros of {} levels (log scale)",
        path.display(),
        levels.len()
    );
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(())
}

/// The JSON report of `gpuq amg-info --json`.
#[derive(Serialize)]
struct AmgInfoReport<'a> {
    /// The hierarchy: its levels, complexities and the first build's setup
    /// times.
    #[serde(flatten)]
    info: &'a HierarchyInfo,
    /// With `--bench-cycles K` (K > 0): the timed cycles against their floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    cycle_bench: Option<&'a CycleBench>,
    /// With `--repeat-setup N` (N > 1): each build's phase times.
    #[serde(skip_serializing_if = "Option::is_none")]
    repeat_setup: Option<&'a [SetupTimings]>,
}

/// The hierarchy as a table, then the complexities and setup times.
fn print_hierarchy(info: &HierarchyInfo) {
    println!(
        "AMG {} ({}-cycle, smoother {} x{} (coarse levels {} x{}), strength {}), coarsest solve {}",
        info.coarsening,
        info.cycle,
        info.smoother,
        info.sweeps,
        info.coarse_smoother,
        info.coarse_sweeps,
        info.strength,
        info.coarse_solver
    );
    println!("level        rows         nnz  block  nnz/row  colours");
    for (l, lev) in info.levels.iter().enumerate() {
        println!(
            "{l:>5} {:>11} {:>11} {:>6} {:>8.1} {:>8}",
            lev.rows,
            lev.nnz,
            lev.block,
            lev.nnz as f64 / lev.rows.max(1) as f64,
            lev.colors
        );
    }
    println!(
        "operator complexity {:.3}  grid complexity {:.3}  near-null-space vectors {}  null space dimension {}",
        info.operator_complexity, info.grid_complexity, info.candidates, info.null_space_dim
    );
    let t = &info.timings;
    println!(
        "setup on {} {:.4} s: upload {:.4}, strength {:.4}, aggregation {:.4}, prolongation {:.4}, galerkin {:.4}, smoother {:.4}, coarse {:.4}",
        info.setup_backend, t.total_s, t.upload_s, t.strength_s, t.aggregation_s, t.prolongation_s, t.galerkin_s, t.smoother_s, t.coarse_s
    );
}

/// `gpuq solve ... --precond amg`: builds the hierarchy of A (where
/// `--amg-setup` says), uploads the cycle to the backend and runs the method with it. For a singular
/// system (a null space found among the block-component constants) the
/// right-hand side and the solution are projected on the host.
pub fn run_solve(args: &SolveArgs) -> Result<ExitCode> {
    let config = SolverConfig {
        method: crate::solve::parse_method(&args.method)?,
        precond: Preconditioner::None,
        options: KrylovOptions {
            rtol: args.tol(),
            atol: args.atol,
            max_iter: args.max_iter,
            stagnation_window: args.stagnation_window,
            ..KrylovOptions::default()
        },
        layout: Layout::parse_or_auto(&args.layout)?.unwrap_or_default(),
    };
    config.options.validate()?;
    let backend = Chosen::parse(&args.backend)?;
    let source = Source::from_args(args)?;
    let options = args.amg.options(&source, &backend)?;
    let cycle = args.amg.cycle_precision(&args.precision);
    macro_rules! typed {
        ($b:expr) => {
            match (args.precision.as_str(), cycle) {
                ("f64", "f64") => {
                    solve_typed::<_, f64, f64>($b, &backend, args, &source, &config, &options)
                }
                ("f64", "f32") => {
                    solve_typed::<_, f64, f32>($b, &backend, args, &source, &config, &options)
                }
                ("f32", "f32") => {
                    solve_typed::<_, f32, f32>($b, &backend, args, &source, &config, &options)
                }
                ("f32", "f64") => {
                    solve_typed::<_, f32, f64>($b, &backend, args, &source, &config, &options)
                }
                (p, q) => Err(Error::InvalidArgument(format!(
                    "unknown precision '{p}' or AMG precision '{q}' (available: f32, f64)"
                ))),
            }
        };
    }
    match &backend {
        Chosen::Cpu(b) => typed!(b),
        Chosen::Cuda(b) => typed!(b),
    }
}

/// The solve in precision `T` with the cycle in precision `S` (the cycle
/// itself when they agree, else [`MixedAmg`]).
fn solve_typed<B: KrylovBackend + AmgKernels, T: Scalar, S: Scalar>(
    backend: &B,
    chosen: &Chosen,
    args: &SolveArgs,
    source: &Source,
    config: &SolverConfig,
    options: &AmgOptions,
) -> Result<ExitCode> {
    let (a, rhs) = load_real(source, &args.rhs)?;
    let config = &SolverConfig {
        layout: crate::solve::layout_for(&args.layout, &a, backend)?,
        ..config.clone()
    };
    let setup = Instant::now();
    let h = build_hierarchy(a, options, &args.amg.setup, chosen)?;
    let hierarchy_s = setup.elapsed().as_secs_f64();
    let mut progress = Progress::new();
    let solution =
        gpuq_facade::solver::amg_solve::<B, T, S>(backend, &h, &rhs.b, config, &mut |it, r| {
            progress.update(it, r)
        })?;
    progress.finish();
    let (x, mut report, stopped) = (solution.x, solution.report, solution.stopped);
    let summary = solution.amg.ok_or_else(|| {
        Error::InvalidArgument("the AMG solve returned no hierarchy summary".into())
    })?;
    report.setup_time_s += hierarchy_s;
    let amg_setup_s = hierarchy_s + summary.cycle_setup_s;
    let mut rhs = rhs;
    if let Some(s) = &mut rhs.solution {
        h.project(s);
    }
    if let (Some(path), Some(x)) = (&args.out, &x) {
        mm::save_dense_vector(x, path)?;
    }
    let x64: Option<Vec<f64>> = x.as_ref().map(|x| {
        x.iter()
            .map(|v| gpuq_core::RealScalar::to_f64_lossless(v.re()))
            .collect()
    });
    let outcome = rhs.outcome(x64.as_deref());
    let summary = AmgSummary {
        setup_s: amg_setup_s,
        ..summary
    };
    print_amg_report(&report, &summary, &outcome, args.json)?;
    crate::solve::write_plot(args, &report)?;
    Ok(crate::solve::exit_status(&report, stopped.as_deref()))
}

/// The JSON report of an AMG solve: the solve report, the right-hand side,
/// the hierarchy under `amg` and the AMG setup time (hierarchy and upload)
/// under `amg_setup_s`.
#[derive(Serialize)]
struct AmgSolveReport<'a> {
    #[serde(flatten)]
    solve: WithRhs<'a, SolveReport>,
    /// The hierarchy and the choices made for it.
    amg: &'a AmgSummary,
    /// Seconds of the AMG setup: hierarchy and cycle (as `amg.setup_s`).
    amg_setup_s: f64,
}

/// Prints the solve report with the hierarchy: JSON ([`AmgSolveReport`]) or text.
fn print_amg_report(
    report: &SolveReport,
    amg: &AmgSummary,
    outcome: &RhsOutcome,
    json: bool,
) -> Result<()> {
    if !json {
        print_report(report, false)?;
        println!("{}", outcome.line());
        print_hierarchy(&amg.info);
        println!(
            "cycle in {}, Jacobi damping {}, {} defaults; AMG setup with upload: {:.4} s",
            amg.cycle_precision, amg.jacobi_damping, amg.defaults, amg.setup_s
        );
        return Ok(());
    }
    let full = AmgSolveReport {
        solve: WithRhs { report, outcome },
        amg,
        amg_setup_s: amg.setup_s,
    };
    crate::solve::print_json(&full)
}
