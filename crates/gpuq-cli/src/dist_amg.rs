//! AMG under `mpirun` (feature `mpi`): the distributed hierarchy of a
//! solve's `--precond amg` (`gpuq_dist::DistHierarchy` and its V-cycle) and
//! `gpuq amg-info` across ranks.

use crate::amg::AmgInfoArgs;
use crate::dist_solve::{scatter_from_root, Run};
use crate::solve::Source;
use gpuq_amg::AmgKernels;
use gpuq_core::{Error, LinearOperator, RealScalar, Result, Scalar, ScalarKind};
use gpuq_dist::{
    agree, mixed_dist_amg, CommChoice, Dist, DistAmgOptions, DistHierarchy, DistMatrix,
    DistSetupKernels, DistSetupTimings, HaloBackend, RankBackend, RowPartition,
};
use gpuq_krylov::SolverConfig;
use gpuq_sparse::Csr;
use serde::Serialize;
use std::process::ExitCode;

/// `gpuq amg-info` under mpirun: every rank reads its rows of a file
/// (`gpuq_dist::read_matrix_rows`), or rank 0 generates A and scatters its
/// rows (on node boundaries for `--block b`); every rank builds the
/// distributed hierarchy with the defaults of `--backend` (a GPU solve's
/// with `cuda`, the aggregation and the Galerkin products then on the
/// rank's GPU), and rank 0 prints each level's rows per rank (the gathered
/// levels hold every row on every rank).
pub fn info(args: &AmgInfoArgs) -> Result<ExitCode> {
    let (comm, node) = gpuq_dist::init_mpi()?;
    let source = args.source()?;
    let (rank, size) = (comm.rank(), comm.size());
    let partition = |n| RowPartition::blocks(n, size, args.amg.block);
    let (p, a) = if let Source::File(path) = &source {
        if agree(&*comm, source.is_complex())? {
            return Err(Error::InvalidArgument(
                "AMG needs a real matrix (this one is complex)".into(),
            ));
        }
        gpuq_dist::read_matrix_rows::<f64>(&*comm, path, partition)?
    } else {
        let loaded = agree(
            &*comm,
            (rank == 0)
                .then(|| {
                    crate::amg::load_matrix(&source).map(|a| {
                        // b is not used: zeros of A's length for the scatter
                        let b = vec![0.0; a.nrows()];
                        (a, b)
                    })
                })
                .transpose(),
        )?;
        let (p, a, _) = scatter_from_root(&*comm, loaded, partition)?;
        (p, a)
    };
    // `auto`: the GPUs where the ranks have them.
    let backend = match args.backend.as_str() {
        "auto" if agree(&*comm, gpuq_cuda::CudaBackend::device_count())? > 0 => "cuda",
        "auto" => "cpu",
        other => other,
    };
    // The options a solve on `--backend` would take (on GPUs: the GPU
    // defaults).
    let gpu = backend == "cuda";
    let options = dist_amg_options(&args.amg, &source, gpu, p.range(rank))?;
    let (h, setup_on) = match RankBackend::of(&*comm, node, backend, CommChoice::Mpi)? {
        RankBackend::Cpu(cpu) => (
            DistHierarchy::build_on(&cpu, &*comm, &p, &a, &options)?,
            "cpu",
        ),
        RankBackend::Cuda(gpu, _) => (
            DistHierarchy::build_on(&gpu, &*comm, &p, &a, &options)?,
            "cuda",
        ),
    };
    if rank == 0 {
        let levels: Vec<InfoLevel> = h
            .rows_per_rank()
            .into_iter()
            .enumerate()
            .map(|(k, (rows, rows_per_rank))| InfoLevel {
                level: k,
                rows,
                rows_per_rank,
                distributed: k < h.levels().len(),
            })
            .collect();
        if args.json {
            crate::solve::print_json(&InfoReport {
                ranks: size,
                levels,
                distributed_levels: h.levels().len(),
                gather_below: options.gather_below,
                agglomerate: options.agglomerate,
                operator_complexity: h.operator_complexity(),
                setup_s: h.setup_seconds(),
                setup_on,
                timings: h.timings(),
            })?;
        } else {
            println!(
                "distributed AMG on {size} ranks: {} levels ({} distributed), operator complexity {:.3}, setup {:.3} s",
                levels.len(),
                h.levels().len(),
                h.operator_complexity(),
                h.setup_seconds()
            );
            let t = h.timings();
            println!(
                "setup on rank 0 ({setup_on}): split and plans {:.3} s, smoother data {:.3} s, aggregation {:.3} s, prolongation {:.3} s, galerkin {:.3} s (transpose {:.3} s, products {:.3} s), gathered levels {:.3} s",
                t.split_s, t.smoother_s, t.aggregation_s, t.prolongation_s, t.galerkin_s, t.transpose_s, t.products_s, t.gathered_s
            );
            for (k, (rows, per_rank)) in h.rows_per_rank().into_iter().enumerate() {
                let kind = if k < h.levels().len() {
                    "distributed"
                } else {
                    "gathered"
                };
                println!("  level {k}: {rows} rows ({kind}), per rank {per_rank:?}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The distributed AMG options of the `--amg*` arguments for a rank owning
/// the rows `own` (a generated `elasticity2d`'s rigid-body modes sliced to
/// them): the GPU defaults where `gpu`.
fn dist_amg_options(
    args: &crate::amg::AmgArgs,
    source: &Source,
    gpu: bool,
    own: std::ops::Range<usize>,
) -> Result<DistAmgOptions> {
    let mut amg = args.options_on(source, gpu)?;
    if args.smoother.is_none() {
        amg.smoother = DistAmgOptions::default().amg.smoother;
    }
    if let Some(v) = amg.near_null_space.as_mut() {
        for x in v.iter_mut() {
            *x = x[own.clone()].to_vec();
        }
    }
    Ok(DistAmgOptions {
        amg,
        gather_below: args
            .gather_below
            .unwrap_or(DistAmgOptions::default().gather_below),
        agglomerate: args.agglomerate,
        check_symmetry: false,
    })
}

/// A preconditioner over the ranks of a [`Dist`].
pub(crate) type DistPrecond<B, T> = Box<dyn LinearOperator<Dist<B>, T>>;

/// What [`distributed_amg`] makes for a solve: the cycle, the report and
/// the solve's operator from the hierarchy's finest level where it gives
/// one ([`DistHierarchy::solve_operator`]: the rows neither split nor
/// uploaded again).
pub(crate) type DistAmgSolve<'a, B, T> = (
    DistPrecond<B, T>,
    SolveAmgReport<'a>,
    Option<DistMatrix<B, T>>,
);

/// The distributed AMG of this rank's rows `a` (real): the hierarchy
/// ([`DistHierarchy::build`], the `--amg*` options; a generated
/// `elasticity2d`'s rigid-body modes sliced to the rank's rows) and its
/// cycle in `--amg-precision` (by default f32 on GPUs with `--block 1`, as
/// on one GPU, else the solve's precision), with what the report says of
/// it.
pub(crate) fn distributed_amg<'a, B: HaloBackend + AmgKernels + DistSetupKernels, T: Scalar>(
    dist: &Dist<B>,
    run: &Run<'a>,
    (p, a): (&RowPartition, &Csr<T>),
    config: &SolverConfig,
    gpu: bool,
) -> Result<DistAmgSolve<'a, B, T>> {
    let comm = dist.comm();
    let start = std::time::Instant::now();
    let options = dist_amg_options(&run.args.amg, run.source, gpu, p.range(comm.rank()))?
        .for_method(config.method);
    // f64 rows are the setup's input as they are (no copy of the rank's
    // rows); others are converted.
    let converted;
    let rows = match (a as &dyn std::any::Any).downcast_ref::<Csr<f64>>() {
        Some(same) => same,
        None => {
            converted = dist.agree(a.map_values(|v| v.re().to_f64_lossless()))?;
            &converted
        }
    };
    let h = DistHierarchy::build_on(dist.local(), comm, p, rows, &options)?;
    let precision = run.args.amg.cycle_precision(&run.args.precision);
    let layout = config.layout;
    let operator = h.solve_operator::<B, T>(dist, layout, config.method)?;
    let m: DistPrecond<B, T> = match (precision, T::KIND) {
        ("f64", ScalarKind::F64) | ("f32", ScalarKind::F32) => {
            Box::new(h.cycle::<B, T>(dist, layout)?)
        }
        ("f32", _) => Box::new(mixed_dist_amg::<B, T, f32>(dist, &h, layout)?),
        ("f64", _) => Box::new(mixed_dist_amg::<B, T, f64>(dist, &h, layout)?),
        (other, _) => {
            return Err(Error::InvalidArgument(format!(
                "unknown AMG precision '{other}' (available: f32, f64)"
            )))
        }
    };
    let info = SolveAmgReport {
        levels: h
            .rows_per_rank()
            .into_iter()
            .map(|(rows, rows_per_rank)| SolveLevel {
                rows,
                rows_per_rank,
            })
            .collect(),
        cycle_precision: precision,
        distributed_levels: h.levels().len(),
        gather_below: options.gather_below,
        agglomerate: options.agglomerate,
        operator_complexity: h.operator_complexity(),
        setup_s: start.elapsed().as_secs_f64(),
        setup_on: dist.local().dist_setup_name(),
        timings: h.timings(),
    };
    Ok((m, info, operator))
}

/// A level of `gpuq amg-info`'s report under mpirun.
#[derive(Serialize)]
struct InfoLevel {
    /// The level's number (0: the finest).
    level: usize,
    /// Rows of the level.
    rows: usize,
    /// Rows on each rank.
    rows_per_rank: Vec<usize>,
    /// Whether the level is distributed (else gathered: every row on every rank).
    distributed: bool,
}

/// The JSON report of `gpuq amg-info --json` under mpirun.
#[derive(Serialize)]
struct InfoReport {
    /// Number of ranks.
    ranks: usize,
    /// The levels, finest first.
    levels: Vec<InfoLevel>,
    /// Number of distributed levels.
    distributed_levels: usize,
    /// Rows per rank below which a level is gathered (per rank holding rows
    /// with agglomeration).
    gather_below: usize,
    /// Whether coarse levels moved onto fewer ranks (`--amg-agglomerate`).
    agglomerate: bool,
    /// Operator complexity of the hierarchy.
    operator_complexity: f64,
    /// Seconds of the setup.
    setup_s: f64,
    /// Where the setup ran: "cpu" or "cuda".
    setup_on: &'static str,
    /// Rank 0's seconds per setup phase.
    timings: DistSetupTimings,
}

/// A level of the distributed AMG in a solve's report.
#[derive(Serialize)]
struct SolveLevel {
    /// Rows of the level.
    rows: usize,
    /// Rows on each rank.
    rows_per_rank: Vec<usize>,
}

/// What a distributed solve's report says of its AMG (its `amg` field).
#[derive(Serialize)]
pub(crate) struct SolveAmgReport<'a> {
    /// The levels, finest first.
    levels: Vec<SolveLevel>,
    /// Precision of the cycle: f32 or f64.
    cycle_precision: &'a str,
    /// Number of distributed levels.
    distributed_levels: usize,
    /// Rows per rank below which a level is gathered (per rank holding rows
    /// with agglomeration).
    gather_below: usize,
    /// Whether coarse levels moved onto fewer ranks (`--amg-agglomerate`).
    agglomerate: bool,
    /// Operator complexity of the hierarchy.
    operator_complexity: f64,
    /// Seconds of the setup (the hierarchy and the cycle).
    pub(crate) setup_s: f64,
    /// Where the setup ran: "cpu" or "cuda".
    setup_on: &'static str,
    /// This rank's seconds per setup phase.
    timings: DistSetupTimings,
}
