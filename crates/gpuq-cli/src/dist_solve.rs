//! `gpuq solve` under `mpirun` (feature `mpi`): one rank per process, one GPU
//! per rank with `--backend cuda` (the rank's local rank picks the device;
//! ranks beyond a node's GPU count share them round robin); with `--backend
//! cpu` each rank's Rayon pool gets the node's cores divided among its ranks
//! (or `RAYON_NUM_THREADS`).
//!
//! The stencil generators (laplace1d/2d/3d, convdiff2d, helmholtz3d) build
//! each rank's rows in place, so no rank holds the whole matrix; a Matrix
//! Market file (and any other generated problem) is read by rank 0 and
//! scattered by rows. The report is printed once, by rank 0, with the number
//! of ranks and GPUs and the time spent in halo exchanges and collectives
//! (JSON fields `ranks`, `gpus`, `halo_s`, `halo_bytes`, `collective_s`); `--out`
//! is written once, by rank 0. Not distributed: Monte Carlo methods and AMG.

use crate::args::SolveArgs;
use crate::solve::Source;
use gpuq_core::{Backend, Complex, Error, Result, Scalar, SolveReport};
use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_dist::{
    agree, gather_rows, generated_rows, scatter_rows, solve_rows, stencil_size, Communicator, Dist,
    HaloBackend, MpiComm, RowPartition,
};
use gpuq_krylov::{KrylovOptions, Preconditioner, SolverConfig};
use gpuq_sparse::matrix_market as mm;
use gpuq_sparse::{Csr, Layout};
use std::process::ExitCode;
use std::sync::Arc;

/// Whether this process was started by an MPI launcher (OpenMPI, MPICH or
/// Slurm's PMI set these).
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

/// The rank's index among the ranks of its node (0 when the launcher does
/// not say).
fn local_rank() -> usize {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
    .unwrap_or(0)
}

/// The number of ranks on this node (1 when the launcher does not say).
fn local_size() -> usize {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(1)
}

/// The CPU backend of one rank: `RAYON_NUM_THREADS` threads when set, else
/// the node's cores divided among its ranks (at least one each), so that
/// ranks sharing a node do not oversubscribe its cores.
fn cpu_for_rank() -> Result<CpuBackend> {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return Ok(CpuBackend::new());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    CpuBackend::with_threads((cores / local_size().max(1)).max(1))
}

/// Runs a distributed solve as the arguments say; every rank returns the
/// same exit code (3 when not converged).
pub fn run(args: &SolveArgs) -> Result<ExitCode> {
    if crate::montecarlo::is_monte_carlo(&args.method) || crate::amg::is_amg(&args.precond) {
        return Err(Error::InvalidArgument(format!(
            "method '{}' with preconditioner '{}' does not run under mpirun yet (Krylov methods with none, jacobi or block2 do)",
            args.method, args.precond
        )));
    }
    let config = SolverConfig {
        method: crate::solve::parse_method(&args.method)?,
        precond: Preconditioner::parse(&args.precond)?,
        options: KrylovOptions {
            rtol: args.tol,
            atol: args.atol,
            max_iter: args.max_iter,
            stagnation_window: args.stagnation_window,
            ..KrylovOptions::default()
        },
        layout: Layout::parse_or_auto(&args.layout)?.unwrap_or_default(),
    };
    config.options.validate()?;
    let comm: Arc<dyn Communicator> = Arc::new(MpiComm::init()?);
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
    match args.backend.as_str() {
        "cpu" => by_precision(
            &Dist::new(agree(&*comm, cpu_for_rank())?, comm),
            args,
            &source,
            &config,
            complex,
            None,
        ),
        "cuda" => {
            // More ranks than GPUs on a node share them round robin.
            let gpus = agree(&*comm, CudaBackend::device_count())?.max(1);
            let device = local_rank() % gpus;
            let gpu = agree(&*comm, CudaBackend::new(device))?;
            by_precision(
                &Dist::new(gpu, comm),
                args,
                &source,
                &config,
                complex,
                Some(device),
            )
        }
        other => Err(Error::InvalidArgument(format!(
            "unknown backend '{other}' under mpirun (available: cpu, cuda)"
        ))),
    }
}

fn by_precision<B: HaloBackend>(
    dist: &Dist<B>,
    args: &SolveArgs,
    source: &Source,
    config: &SolverConfig,
    complex: bool,
    device: Option<usize>,
) -> Result<ExitCode> {
    match (args.precision.as_str(), complex) {
        ("f64", false) => typed::<B, f64>(dist, args, source, config, device),
        ("f64", true) => typed::<B, Complex<f64>>(dist, args, source, config, device),
        ("f32", false) => typed::<B, f32>(dist, args, source, config, device),
        ("f32", true) => typed::<B, Complex<f32>>(dist, args, source, config, device),
        (p, _) => Err(Error::InvalidArgument(format!(
            "unknown precision '{p}' (available: f32, f64)"
        ))),
    }
}

/// The partition of `n` rows: contiguous blocks, on even rows for 2x2-block
/// Jacobi.
fn partition(n: usize, ranks: usize, config: &SolverConfig) -> Result<RowPartition> {
    let block = if config.precond == Preconditioner::Block2 {
        2
    } else {
        1
    };
    RowPartition::blocks(n, ranks, block)
}

/// This rank's rows of A and b: built in place for a stencil problem, else
/// read by rank 0 and scattered.
fn rows<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    args: &SolveArgs,
    source: &Source,
    config: &SolverConfig,
) -> Result<(RowPartition, Csr<T>, Vec<T>)> {
    let comm = dist.comm();
    let (rank, size) = (comm.rank(), comm.size());
    if let (Source::Generated(spec), None) = (source, &args.rhs) {
        if let Some(n) = stencil_size(spec) {
            let p = dist.agree(partition(n, size, config))?;
            let built = generated_rows::<T>(spec, &p, rank).and_then(|r| {
                r.ok_or_else(|| Error::InvalidArgument("not a stencil problem".into()))
            });
            let (a, b) = dist.agree(built)?;
            return Ok((p, a, b));
        }
    }
    let loaded = dist.agree(
        (rank == 0)
            .then(|| source.load::<T>(args.rhs.as_deref()))
            .transpose(),
    )?;
    let mut n = loaded.as_ref().map_or(Vec::new(), |(a, _)| {
        (a.nrows() as u64).to_le_bytes().to_vec()
    });
    comm.broadcast(0, &mut n)?;
    let n = u64::from_le_bytes(
        n.try_into()
            .map_err(|_| Error::InvalidArgument("rank 0 sent no matrix size".into()))?,
    ) as usize;
    let p = dist.agree(partition(n, size, config))?;
    let (a, b) = scatter_rows(comm, &p, 0, loaded.as_ref().map(|(a, b)| (a, &b[..])))?;
    Ok((p, a, b))
}

fn typed<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    args: &SolveArgs,
    source: &Source,
    config: &SolverConfig,
    device: Option<usize>,
) -> Result<ExitCode> {
    let comm = dist.comm();
    let setup = std::time::Instant::now();
    let (p, a, b) = rows::<B, T>(dist, args, source, config)?;
    // `--layout auto`: each rank chooses for its own rows (its storage is its own).
    let config = &SolverConfig {
        layout: match Layout::parse_or_auto(&args.layout)? {
            Some(layout) => layout,
            None => Layout::auto(&a, device.is_some()),
        },
        ..config.clone()
    };
    let load_s = setup.elapsed().as_secs_f64();
    dist.reset_stats();
    let (x, mut report, stopped) = crate::solve::ended(solve_rows(dist, &p, &a, &b, config))?;
    report.setup_time_s += load_s;
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
        ranks: comm.size(),
        gpus: devices.len(),
        halo_s: column(0).fold(0.0, f64::max),
        halo_bytes: column(1).sum::<f64>() as u64,
        collective_s: column(2).fold(0.0, f64::max),
    };
    if let (Some(path), Some(x)) = (&args.out, &x) {
        if let Some(whole) = gather_rows(comm, &p, 0, x)? {
            mm::save_dense_vector(&whole, path)?;
        }
    }
    if comm.rank() == 0 {
        print(&report, &extra, args.json)?;
        crate::solve::write_plot(args, &report)?;
    }
    Ok(if report.converged || comm.rank() == 0 {
        crate::solve::exit_status(&report, stopped.as_deref())
    } else {
        ExitCode::from(3)
    })
}

/// What a distributed report adds to the serial one.
struct Extra {
    ranks: usize,
    gpus: usize,
    /// The slowest rank's seconds in halo exchanges.
    halo_s: f64,
    /// Bytes sent and received in halo exchanges, over all ranks.
    halo_bytes: u64,
    /// The slowest rank's seconds in collectives.
    collective_s: f64,
}

fn print(report: &SolveReport, extra: &Extra, json: bool) -> Result<()> {
    if !json {
        crate::solve::print_report(report, false)?;
        println!(
            "ranks: {}  gpus: {}  halo: {:.4} s ({} bytes)  collectives: {:.4} s",
            extra.ranks, extra.gpus, extra.halo_s, extra.halo_bytes, extra.collective_s
        );
        return Ok(());
    }
    let bad =
        |e: serde_json::Error| Error::InvalidArgument(format!("cannot serialise the report: {e}"));
    let mut value = serde_json::to_value(report).map_err(bad)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("ranks".into(), extra.ranks.into());
        map.insert("gpus".into(), extra.gpus.into());
        map.insert("halo_s".into(), extra.halo_s.into());
        map.insert("halo_bytes".into(), extra.halo_bytes.into());
        map.insert("collective_s".into(), extra.collective_s.into());
    }
    println!("{}", serde_json::to_string_pretty(&value).map_err(bad)?);
    Ok(())
}
