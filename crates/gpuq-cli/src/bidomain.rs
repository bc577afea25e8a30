//! `gpuq bidomain`: a time-stepping run of the bidomain model
//! ([`gpuq_bidomain`]) with a progress bar, a summary or a JSON report, and
//! PNG, VTK and Matrix Market outputs.

use crate::solve::Chosen;
use clap::Args;
use gpuq_amg::{AmgKernels, SetupKernels};
use gpuq_bidomain::{
    amg, block_jacobi, output, BidomainConfig, BidomainKernels, RunReport, Simulation, StepReport,
    Tissue,
};
use gpuq_core::{Error, Result};
use gpuq_sparse::Layout;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `gpuq bidomain`.
#[derive(Args, Debug)]
pub struct BidomainArgs {
    /// Cells per side: a square of N x N cells (2D, P1 triangles) or a slab of
    /// N x N x max(1, N/4) cells (3D, trilinear hexahedra), 0.1 mm each.
    #[arg(long)]
    pub grid: usize,
    /// Spatial dimension, 2 or 3.
    #[arg(long, default_value_t = 2)]
    pub dim: usize,
    /// Time steps.
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Time step in ms.
    #[arg(long, default_value_t = 0.05)]
    pub dt: f64,
    /// Fibre direction: angle from the x axis in degrees, in the x-y plane.
    #[arg(long, default_value_t = 0.0)]
    pub fibre_angle: f64,
    /// Backend: cpu, cuda (device 0) or auto (cuda when a device is present, else cpu).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Preconditioner of each step's PCG solve, built once: amg (smoothed
    /// aggregation, 2x2 blocks) or block2 (2x2-block Jacobi).
    #[arg(long, default_value = "amg")]
    pub precond: String,
    /// Storage of the matrix and of the AMG levels on the backend: csr, sell,
    /// sell:C:SIGMA or bsr2.
    #[arg(long, default_value = "csr")]
    pub layout: String,
    /// Relative residual tolerance of each step's solve.
    #[arg(long, default_value_t = 1e-8)]
    pub tol: f64,
    /// Write the activation map (bottom layer) at the end, with axes in mm and a
    /// colour bar in ms: SVG when the file name ends in .svg, else PNG.
    #[arg(long)]
    pub png: Option<PathBuf>,
    /// Write VTK legacy snapshots (v_m, phi_e, activation) into this directory.
    #[arg(long)]
    pub vtk: Option<PathBuf>,
    /// Write Matrix Market snapshots of the interleaved (phi_e, v_m) into this directory.
    #[arg(long)]
    pub mtx: Option<PathBuf>,
    /// Snapshot every K steps (0: only after the last step).
    #[arg(long, default_value_t = 0)]
    pub snapshot_every: usize,
    /// Print the run report (setup, every step, activation summary) as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs the simulation on the chosen backend and writes what was asked.
pub fn run(args: &BidomainArgs) -> Result<ExitCode> {
    let tissue = match args.dim {
        2 => Tissue::square(args.grid)?,
        3 => Tissue::slab(args.grid)?,
        d => {
            return Err(Error::InvalidArgument(format!(
                "--dim must be 2 or 3, not {d}"
            )))
        }
    };
    if !args.fibre_angle.is_finite() {
        return Err(Error::InvalidArgument(
            "--fibre-angle must be finite".into(),
        ));
    }
    let tissue = Tissue {
        fibre_angle: args.fibre_angle.to_radians(),
        ..tissue
    };
    let mut config = BidomainConfig::new(tissue);
    config.dt = args.dt;
    config.solver.rtol = args.tol;
    config.layout = Layout::parse(&args.layout)?;
    config.validate()?;
    if !matches!(args.precond.as_str(), "amg" | "block2") {
        return Err(Error::InvalidArgument(format!(
            "unknown preconditioner '{}' (available: amg, block2)",
            args.precond
        )));
    }
    for dir in [&args.vtk, &args.mtx].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.display().to_string(),
            source,
        })?;
    }
    match Chosen::parse(&args.backend)? {
        Chosen::Cpu(b) => simulate(&b, args, config),
        Chosen::Cuda(b) => simulate(&b, args, config),
    }
}

fn simulate<B: BidomainKernels + AmgKernels + SetupKernels>(
    backend: &B,
    args: &BidomainArgs,
    config: BidomainConfig,
) -> Result<ExitCode> {
    let use_amg = args.precond == "amg";
    let layout = config.layout;
    let mut sim = Simulation::new(backend, config, &mut |b, a| {
        if use_amg {
            amg(b, a, &Default::default(), layout)
        } else {
            block_jacobi(b, a)
        }
    })?;
    if !args.json {
        let s = sim.setup();
        eprintln!(
            "gpuq: bidomain {}D, {} nodes ({} unknowns, {} nonzeros) on {}, preconditioner {}; \
             setup {:.3} s (assembly {:.3}, upload {:.3}, preconditioner {:.3})",
            sim.config().tissue.dim(),
            s.nodes,
            s.unknowns,
            s.nonzeros,
            s.backend,
            s.preconditioner,
            s.assembly_s + s.upload_s + s.precond_s,
            s.assembly_s,
            s.upload_s,
            s.precond_s
        );
    }
    let mut bar = StepBar::new(args.steps);
    let mut reports = Vec::with_capacity(args.steps);
    let start = Instant::now();
    for _ in 0..args.steps {
        let r = sim.step()?;
        bar.update(&r);
        let k = r.step;
        if args.snapshot_every > 0 && k % args.snapshot_every == 0 && k < args.steps {
            snapshot(&sim, args, k)?;
        }
        reports.push(r);
    }
    bar.finish_line();
    let report = sim.summarize(reports, start.elapsed().as_secs_f64())?;
    snapshot(&sim, args, sim.steps_done())?;
    if let Some(path) = &args.png {
        let state = sim.state()?;
        output::write_activation_png(path, &sim.config().tissue, &state.activation)?;
    }
    if args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::InvalidArgument(format!("JSON report: {e}")))?;
        println!("{json}");
    } else {
        print_summary(&report, sim.time());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the VTK and Matrix Market snapshots of step `k`, where asked (the
/// state is copied to the host only then).
fn snapshot<B: BidomainKernels>(sim: &Simulation<B>, args: &BidomainArgs, k: usize) -> Result<()> {
    if args.vtk.is_none() && args.mtx.is_none() {
        return Ok(());
    }
    let state = sim.state()?;
    let name = |dir: &Path, ext: &str| dir.join(format!("bidomain_{k:06}.{ext}"));
    if let Some(dir) = &args.vtk {
        output::write_vtk(
            &name(dir, "vtk"),
            &sim.config().tissue,
            sim.time(),
            &state.vm,
            &state.phi_e,
            &state.activation,
        )?;
    }
    if let Some(dir) = &args.mtx {
        output::write_matrix_market(&name(dir, "mtx"), &state.vm, &state.phi_e)?;
    }
    Ok(())
}

fn print_summary(r: &RunReport, time_ms: f64) {
    let steps = r.steps.len().max(1) as f64;
    let max_it = r.steps.iter().map(|s| s.iterations).max().unwrap_or(0);
    let solve: f64 = r.steps.iter().map(|s| s.solve_s).sum();
    let ionic: f64 = r.steps.iter().map(|s| s.ionic_s).sum();
    println!(
        "steps: {}  simulated: {:.3} ms  wall: {:.3} s ({:.3} ms per step: solve {:.3}, ionic {:.3})",
        r.steps.len(),
        time_ms,
        r.total_s,
        1e3 * r.total_s / steps,
        1e3 * solve / steps,
        1e3 * ionic / steps
    );
    println!(
        "PCG iterations: {} in all, {:.1} per step, at most {}",
        r.total_iterations,
        r.total_iterations as f64 / steps,
        max_it
    );
    println!(
        "activated: {:.1}% of the nodes, the last at {:.3} ms",
        100.0 * r.activated_fraction,
        r.last_activation_ms
    );
}

/// A progress bar for the time loop on stderr: only when stderr is a terminal,
/// at most every 100 ms, overwriting itself.
struct StepBar {
    total: usize,
    last: Option<Instant>,
    enabled: bool,
}

impl StepBar {
    fn new(total: usize) -> Self {
        StepBar {
            total,
            last: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, r: &StepReport) {
        let recent = self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100));
        if !self.enabled || (recent && r.step < self.total) {
            return;
        }
        self.last = Some(Instant::now());
        let width = 30;
        let done = (width * r.step) / self.total.max(1);
        let _ = write!(
            std::io::stderr(),
            "\r  [{}{}] step {}/{}  t = {:.2} ms  {} PCG iterations",
            "#".repeat(done),
            ".".repeat(width - done),
            r.step,
            self.total,
            r.time_ms,
            r.iterations
        );
    }

    /// Ends the bar's line, if one was printed (before other output, or at the end).
    fn finish_line(&mut self) {
        if self.last.take().is_some() {
            let _ = writeln!(std::io::stderr());
        }
    }
}
