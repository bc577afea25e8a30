//! `gpuq solve` under `mpirun` (feature `mpi`): one rank per process, one GPU
//! per rank with `--backend cuda` (the rank's index among the ranks of its
//! node, from MPI's shared-memory split, picks the device, so one command
//! line serves one node or several; ranks beyond a node's GPU count share
//! them round robin); with `--backend cpu` each rank's Rayon pool gets the
//! node's cores divided among its ranks (or `RAYON_NUM_THREADS`).
//!
//! The stencil generators (laplace1d/2d/3d, convdiff2d, helmholtz3d) build
//! each rank's rows in place, and every rank reads its own rows of a matrix
//! file (Matrix Market by byte ranges, PETSc binary by row blocks:
//! `gpuq_dist::read_matrix_rows`) and of a `--rhs` file, so no rank holds
//! the whole matrix; any other generated problem is built by rank 0 and
//! scattered by rows. The report is printed once, by rank 0, with the number
//! of ranks and GPUs and the time spent in halo exchanges and collectives
//! (JSON fields `ranks`, `gpus`, `comm`, `halo_s`, `halo_bytes`,
//! `collective_s`); `--out` is written once, by rank 0. With `--backend cuda`
//! the GPUs exchange halos and fused reductions over NCCL where every rank
//! has a GPU of its own (`--comm auto`, the default; `comm: nccl` in the
//! report), else through host memory and MPI (`comm: mpi`).
//!
//! `--precond amg` builds the distributed smoothed-aggregation hierarchy
//! (`gpuq_dist::DistHierarchy`, the `--amg*` options; the JSON `amg` field
//! lists each level's rows per rank) and preconditions with its V-cycle;
//! `mc-forward`, `mc-adjoint` and `mcsa` split every batch's histories over
//! the ranks (each holds the matrix whole).

use crate::args::SolveArgs;
use crate::dist_amg::SolveAmgReport;
use crate::rhs::{read_of_length, RhsChoice, RhsInfo, RhsOutcome, WithRhs};
use crate::solve::Source;
use gpuq_amg::AmgKernels;
use gpuq_core::{Backend, Complex, Error, Result, Scalar, SolveReport};
use gpuq_dist::{
    agree, gather_rows, generated_rows, scatter_rows, solve_matrix_with_precond, solve_rows,
    solve_rows_with_precond, stencil_size, CommChoice, Communicator, Dist, DistSetupKernels,
    HaloBackend, RankBackend, RowPartition,
};
use gpuq_krylov::{KrylovOptions, Preconditioner, SolverConfig};
use gpuq_sparse::matrix_market as mm;
use gpuq_sparse::{Csr, Layout};
use serde::Serialize;
use std::process::ExitCode;

/// Runs a distributed solve as the arguments say; every rank returns the
/// same exit code (3 when not converged).
pub fn run(args: &SolveArgs) -> Result<ExitCode> {
    if crate::montecarlo::is_monte_carlo(&args.method) {
        let opts = crate::montecarlo::checked_options(args)?;
        let (comm, node) = gpuq_dist::init_mpi()?;
        return crate::dist_montecarlo::run(args, &opts, comm, node);
    }
    let amg = crate::amg::is_amg(&args.precond);
    let config = SolverConfig {
        method: crate::solve::parse_method(&args.method)?,
        precond: if amg {
            Preconditioner::None
        } else {
            crate::solve::parse_precond(&args.precond)?
        },
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
    let choice = CommChoice::parse(&args.comm)?;
    let (comm, node) = gpuq_dist::init_mpi()?;
    let source = Source::from_args(args)?;
    // Rank 0 reads the file's header; every rank learns the outcome.
    let header = (comm.rank() == 0).then(|| source.is_complex());
    let mut flag = vec![match &header {
        Some(Ok(c)) => u8::from(*c),
        Some(Err(_)) => 2,
        None => 0,
    }];
    comm.broadcast(0, &mut flag)?;
    if let Some(Err(e)) = header {
        return Err(e);
    }
    let complex = match flag.first() {
        Some(0) => false,
        Some(1) => true,
        _ => {
            return Err(Error::InvalidArgument(
                "rank 0 could not read the matrix (see its error)".into(),
            ))
        }
    };
    if amg && complex {
        return Err(Error::InvalidArgument(
            "AMG needs a real matrix (this one is complex)".into(),
        ));
    }
    let run = Run {
        args,
        source: &source,
        config: &config,
        amg,
    };
    match RankBackend::of(&*comm, node, &args.backend, choice)? {
        RankBackend::Cpu(cpu) => by_precision(&Dist::new(cpu, comm), &run, complex, None),
        RankBackend::Cuda(gpu, device) => {
            by_precision(&Dist::new(gpu, comm), &run, complex, Some(device))
        }
    }
}

/// What a distributed Krylov solve was asked for.
pub(crate) struct Run<'a> {
    pub args: &'a SolveArgs,
    pub source: &'a Source<'a>,
    pub config: &'a SolverConfig,
    /// `--precond amg`: the distributed AMG V-cycle.
    pub amg: bool,
}

fn by_precision<B: HaloBackend + AmgKernels + DistSetupKernels>(
    dist: &Dist<B>,
    run: &Run,
    complex: bool,
    device: Option<usize>,
) -> Result<ExitCode> {
    match (run.args.precision.as_str(), complex) {
        ("f64", false) => typed::<B, f64>(dist, run, device),
        ("f64", true) => typed::<B, Complex<f64>>(dist, run, device),
        ("f32", false) => typed::<B, f32>(dist, run, device),
        ("f32", true) => typed::<B, Complex<f32>>(dist, run, device),
        (p, _) => Err(Error::InvalidArgument(format!(
            "unknown precision '{p}' (available: f32, f64)"
        ))),
    }
}

/// The partition of `n` rows: contiguous blocks, on node boundaries for
/// 2x2-block Jacobi and for AMG with `--block b` (a node's unknowns on one
/// rank).
fn partition(n: usize, ranks: usize, run: &Run) -> Result<RowPartition> {
    let block = if run.config.precond == Preconditioner::Block2 {
        2
    } else if run.amg {
        run.args.amg.block
    } else {
        1
    };
    RowPartition::blocks(n, ranks, block)
}

/// This rank's rows of A and b, and on rank 0 what b is: built in place for a
/// stencil problem (b = A x* from the rank's columns of x*, unless `--rhs`
/// names a file: rank 0 reads it and scatters it), else read by rank 0 and
/// scattered.
#[allow(clippy::type_complexity)]
fn rows<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    run: &Run,
) -> Result<(RowPartition, Csr<T>, Vec<T>, Option<RhsInfo>)> {
    let comm = dist.comm();
    let (rank, size) = (comm.rank(), comm.size());
    let choice = run.args.rhs.choice();
    if let Source::Generated(spec) = run.source {
        if let Some(n) = stencil_size(spec) {
            let p = dist.agree(partition(n, size, run))?;
            let info = RhsInfo::generated(&choice, run.args.rhs.rhs_seed);
            let built = generated_rows::<T>(spec, &p, rank, |r| info.solution(r)).and_then(|r| {
                r.ok_or_else(|| Error::InvalidArgument("not a stencil problem".into()))
            });
            let (a, b) = dist.agree(built)?;
            let root_info = (rank == 0).then_some(info);
            let b = match &choice {
                RhsChoice::Ones => vec![T::one(); a.nrows()],
                RhsChoice::File(path) => {
                    let read = (rank == 0)
                        .then(|| read_of_length::<T>(path, n))
                        .transpose();
                    let whole = dist.agree(read)?;
                    gpuq_dist::scatter_vector(comm, &p, 0, whole.as_deref())?
                }
                _ => b,
            };
            let root_info = root_info.map(|i| i.with_file(choice.file()));
            return Ok((p, a, b, root_info));
        }
    }
    if let Source::File(path) = run.source {
        return file_rows(comm, path, run);
    }
    let loaded = dist.agree(
        (rank == 0)
            .then(|| run.source.load::<T>(&run.args.rhs))
            .transpose(),
    )?;
    let info = loaded.as_ref().map(|(_, rhs)| rhs.info.clone());
    let loaded = loaded.map(|(a, rhs)| (a, rhs.b));
    let (p, a, b) = scatter_from_root(comm, loaded, |n| partition(n, size, run))?;
    Ok((p, a, b, info))
}

/// This rank's rows of A, read by every rank from its share of the file
/// ([`gpuq_dist::read_matrix_rows`]), and of b: its share of `--rhs FILE`
/// likewise, ones, or its rows of A x* (x* = 1 or the seeded random vector,
/// whose entries every rank makes for all columns, O(n)); on rank 0 what b
/// is. Errors, on every rank, when A is not square.
#[allow(clippy::type_complexity)]
fn file_rows<T: Scalar>(
    comm: &dyn Communicator,
    path: &std::path::Path,
    run: &Run,
) -> Result<(RowPartition, Csr<T>, Vec<T>, Option<RhsInfo>)> {
    let size = comm.size();
    let (p, a) = gpuq_dist::read_matrix_rows::<T>(comm, path, |n| partition(n, size, run))?;
    if a.ncols() != p.rows() {
        return Err(Error::Precondition {
            method: "solve",
            reason: format!("matrix is {} x {}, not square", p.rows(), a.ncols()),
        });
    }
    let choice = run.args.rhs.choice();
    let info = RhsInfo::generated(&choice, run.args.rhs.rhs_seed).with_file(choice.file());
    let b = match &choice {
        RhsChoice::File(file) => gpuq_dist::read_vector_rows(comm, file, &p)?,
        RhsChoice::Ones => vec![T::one(); a.nrows()],
        _ => a.mul_vec(&info.solution::<T>(0..p.rows()))?,
    };
    Ok((p, a, b, (comm.rank() == 0).then_some(info)))
}

/// Rank 0's A and b (`loaded`, `None` elsewhere) scattered by rows: rank 0
/// broadcasts the size, every rank builds the partition `partition_of(n)`
/// (the ranks agree on its errors), then the rows move.
pub(crate) fn scatter_from_root<T: Scalar>(
    comm: &dyn Communicator,
    loaded: Option<(Csr<T>, Vec<T>)>,
    partition_of: impl FnOnce(usize) -> Result<RowPartition>,
) -> Result<(RowPartition, Csr<T>, Vec<T>)> {
    let mut n = loaded.as_ref().map_or(Vec::new(), |(a, _)| {
        (a.nrows() as u64).to_le_bytes().to_vec()
    });
    comm.broadcast(0, &mut n)?;
    let n = u64::from_le_bytes(
        n.try_into()
            .map_err(|_| Error::InvalidArgument("rank 0 sent no matrix size".into()))?,
    ) as usize;
    let p = agree(comm, partition_of(n))?;
    let (a, b) = scatter_rows(comm, &p, 0, loaded.as_ref().map(|(a, b)| (a, &b[..])))?;
    Ok((p, a, b))
}

fn typed<B: HaloBackend + AmgKernels + DistSetupKernels, T: Scalar>(
    dist: &Dist<B>,
    run: &Run,
    device: Option<usize>,
) -> Result<ExitCode> {
    let comm = dist.comm();
    let args = run.args;
    let setup = std::time::Instant::now();
    let (p, a, b, rhs) = rows::<B, T>(dist, run)?;
    // `--layout auto`: each rank chooses for its own rows (its storage is its own).
    let config = &SolverConfig {
        layout: match Layout::parse_or_auto(&args.layout)? {
            Some(layout) => layout,
            None => Layout::auto(&a, device.is_some()),
        },
        ..run.config.clone()
    };
    let load_s = setup.elapsed().as_secs_f64();
    dist.reset_stats();
    let amg = if run.amg {
        Some(crate::dist_amg::distributed_amg(
            dist,
            run,
            (&p, &a),
            config,
            device.is_some(),
        )?)
    } else {
        None
    };
    let (amg, finest) = match amg {
        Some((m, info, finest)) => (Some((m, info)), finest),
        None => (None, None),
    };
    let precond = amg.as_ref().map(|(m, _)| &**m);
    let solved = match (precond, finest) {
        (Some(m), Some(a)) => solve_matrix_with_precond(dist, &p, a, &b, config, Some(m)),
        (Some(m), None) => solve_rows_with_precond(dist, &p, &a, &b, config, Some(m)),
        (None, _) => solve_rows(dist, &p, &a, &b, config),
    };
    let (x, mut report, stopped) = crate::solve::ended(solved)?;
    report.setup_time_s += load_s;
    if let Some((_, info)) = &amg {
        report.setup_time_s += info.setup_s;
    }
    let stats = dist.comm_stats();
    let all = comm.allgather(&[
        stats.halo_s,
        stats.halo_bytes as f64,
        stats.collective_s,
        device.map_or(-1.0, |d| d as f64),
    ])?;
    let column = |k: usize| all.chunks_exact(4).map(move |c| c[k]);
    let mut devices: Vec<u64> = column(3).filter(|&d| d >= 0.0).map(|d| d as u64).collect();
    devices.sort_unstable();
    devices.dedup();
    let extra = Extra {
        input_s: load_s,
        ranks: comm.size(),
        gpus: devices.len(),
        halo_s: column(0).fold(0.0, f64::max),
        halo_bytes: column(1).sum::<f64>() as u64,
        collective_s: column(2).fold(0.0, f64::max),
        comm: dist.comm_kind(),
        amg_setup_s: amg.as_ref().map(|(_, info)| info.setup_s),
        amg: amg.map(|(_, info)| info),
    };
    // x on rank 0, for --out and the error against x* (rank 0 alone knows
    // whether x* is known: it tells the others, the gather is collective)
    let mut known = vec![u8::from(rhs.as_ref().is_some_and(RhsInfo::knows_solution))];
    comm.broadcast(0, &mut known)?;
    let whole = match &x {
        Some(x) if args.out.is_some() || known.first() == Some(&1) => gather_rows(comm, &p, 0, x)?,
        _ => None,
    };
    if let (Some(path), Some(whole)) = (&args.out, &whole) {
        mm::save_dense_vector(whole, path)?;
    }
    if let Some(rhs) = rhs {
        let outcome = rhs.outcome(whole.as_deref());
        print(&report, &outcome, &extra, args.json)?;
        crate::solve::write_plot(args, &report)?;
    }
    Ok(if report.converged || comm.rank() == 0 {
        crate::solve::exit_status(&report, stopped.as_deref())
    } else {
        ExitCode::from(3)
    })
}

/// What a distributed report adds to the serial one.
#[derive(Serialize)]
struct Extra<'a> {
    /// Rank 0's seconds to have its rows of A and b (read, generated or
    /// received; part of `setup_time_s`).
    input_s: f64,
    ranks: usize,
    gpus: usize,
    /// The slowest rank's seconds in halo exchanges.
    halo_s: f64,
    /// Bytes sent and received in halo exchanges, over all ranks.
    halo_bytes: u64,
    /// The slowest rank's seconds in collectives.
    collective_s: f64,
    /// How halos and fused reductions travel (`nccl` or `mpi`).
    comm: &'static str,
    /// With `--precond amg`: the levels (rows, rows per rank), the
    /// distributed levels' count, the operator complexity, the setup time.
    #[serde(skip_serializing_if = "Option::is_none")]
    amg: Option<SolveAmgReport<'a>>,
    /// With `--precond amg`: seconds of the AMG setup (hierarchy and cycle,
    /// as `amg.setup_s`), under the one-process report's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    amg_setup_s: Option<f64>,
}

/// The JSON report of a distributed solve.
#[derive(Serialize)]
struct DistReport<'a> {
    #[serde(flatten)]
    solve: WithRhs<'a, SolveReport>,
    #[serde(flatten)]
    extra: &'a Extra<'a>,
}

fn print(report: &SolveReport, outcome: &RhsOutcome, extra: &Extra, json: bool) -> Result<()> {
    let full = DistReport {
        solve: WithRhs { report, outcome },
        extra,
    };
    crate::solve::print_json_or(&full, json, || {
        crate::solve::print_report(report, false)?;
        println!("{}", outcome.line());
        println!(
            "ranks: {}  gpus: {}  comm: {}  halo: {:.4} s ({} bytes)  collectives: {:.4} s",
            extra.ranks, extra.gpus, extra.comm, extra.halo_s, extra.halo_bytes, extra.collective_s
        );
        if let Some(amg) = &extra.amg {
            // as a JSON value, whose keys come sorted
            let amg = serde_json::to_value(amg).map_err(|e| {
                Error::InvalidArgument(format!("cannot serialise the AMG report: {e}"))
            })?;
            println!("amg: {amg}");
        }
        Ok(())
    })
}
