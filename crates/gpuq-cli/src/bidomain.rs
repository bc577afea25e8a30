//! `gpuq bidomain`: a time-stepping run of the bidomain model
//! ([`gpuq_bidomain`]) with a progress bar, a summary or a JSON report, and
//! PNG, VTK and Matrix Market outputs.

use crate::solve::Chosen;
use clap::Args;
use gpuq_amg::{AmgKernels, SetupKernels};
use gpuq_bidomain::{
    amg, amg_options, block_jacobi, calibrate, measure_cv, output, sheet_cv, AlievPanfilov,
    BidomainConfig, BidomainKernels, Calibration, CalibrationOptions, Conductivity, CvTarget,
    Membrane, MitchellSchaeffer, RunReport, Simulation, StepReport, Tissue,
};
use gpuq_core::{Error, Result};
use gpuq_sparse::Layout;
use serde::Serialize;
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
    /// Membrane model: aliev-panfilov or mitchell-schaeffer.
    #[arg(
        long,
        default_value = "aliev-panfilov",
        value_parser = ["aliev-panfilov", "mitchell-schaeffer"]
    )]
    pub model: String,
    /// Target conduction velocities along and across the fibres, m/s: the
    /// conductivities are calibrated on a 1-D cable for the model, --dt and
    /// the 0.1 mm spacing before the run; `off` runs the conductivities as
    /// given (--sigma-i, --sigma-e).
    #[arg(long, default_value = "0.6,0.2")]
    pub cv: String,
    /// Intracellular conductivities along and across the fibres, mS/mm (= S/m):
    /// the starting point of the calibration (which keeps the intra- to
    /// extracellular ratio of each direction), or with --cv off the values run.
    #[arg(long, default_value = "0.17,0.019")]
    pub sigma_i: String,
    /// Extracellular conductivities along and across the fibres, mS/mm.
    #[arg(long, default_value = "0.62,0.24")]
    pub sigma_e: String,
    /// Backend: cpu, cuda (device 0) or auto (cuda when a device is present, else cpu).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "auto"])]
    pub backend: String,
    /// Preconditioner of each step's PCG solve, built once: amg (smoothed
    /// aggregation, 2x2 blocks) or block2 (2x2-block Jacobi).
    #[arg(long, default_value = "amg", value_parser = ["amg", "block2"])]
    pub precond: String,
    /// Storage of the matrix and of the AMG levels on the backend: auto (CSR),
    /// csr, sell, sell:C:SIGMA or bsr:B.
    #[arg(long, default_value = "auto", value_parser = crate::choices::layout())]
    pub layout: String,
    /// Relative residual tolerance of each step's solve.
    #[arg(long, default_value_t = 1e-8)]
    pub tol: f64,
    /// Write the activation map (bottom layer) at the end, with axes in mm and a
    /// colour bar in ms: SVG when the file name ends in .svg, else PNG.
    /// (`--png`, deprecated, is the old spelling.)
    #[arg(long, alias = "png")]
    pub plot: Option<PathBuf>,
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
    if args.steps == 0 {
        return Err(Error::InvalidArgument(
            "--steps must be at least 1 (a run of no steps activates nothing)".into(),
        ));
    }
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
        sigma_i: parse_conductivity(&args.sigma_i, "--sigma-i")?,
        sigma_e: parse_conductivity(&args.sigma_e, "--sigma-e")?,
        ..tissue
    };
    let mut config = BidomainConfig::new(tissue);
    config.dt = args.dt;
    config.ionic = parse_model(&args.model)?;
    let target = parse_cv(&args.cv)?;
    config.solver.rtol = args.tol;
    config.layout = Layout::parse_or_auto(&args.layout)?.unwrap_or(Layout::Csr);
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
    let backend = Chosen::parse(&args.backend)?;
    let calibration = match target {
        Some(target) => {
            let c = calibrate(&config, target, &CalibrationOptions::default())?;
            config = c.apply(config);
            stimulus_leaves_room(&config)?;
            if !args.json {
                eprintln!(
                    "gpuq: conductivities calibrated for {} m/s along and {} m/s across the \
                     fibres ({}, dx = {} mm, dt = {} ms; {} cable runs, {:.3} s): sigma_i = \
                     {:.4} / {:.4}, sigma_e = {:.4} / {:.4} mS/mm; cable CV {:.4} / {:.4} m/s; \
                     stimulus radius {:.2} mm",
                    target.along,
                    target.across,
                    c.model,
                    c.dx_mm,
                    c.dt_ms,
                    c.trials.len(),
                    c.time_s,
                    c.sigma_i.longitudinal,
                    c.sigma_i.transverse,
                    c.sigma_e.longitudinal,
                    c.sigma_e.transverse,
                    c.cv_along_m_s,
                    c.cv_across_m_s,
                    config.stimulus.radius
                );
            }
            Some(c)
        }
        None => {
            stimulus_leaves_room(&config)?;
            None
        }
    };
    match backend {
        Chosen::Cpu(b) => simulate(&b, args, config, calibration),
        Chosen::Cuda(b) => simulate(&b, args, config, calibration),
    }
}

/// Errors when the stimulus (after calibration widened it) covers the whole
/// sheet: every node is excited at once and no wave travels, so the
/// conduction velocities would be meaningless.
fn stimulus_leaves_room(config: &BidomainConfig) -> Result<()> {
    let t = &config.tissue;
    let [ex, ey] = [t.cells[0] as f64 * t.h, t.cells[1] as f64 * t.h];
    let r = config.stimulus.radius;
    if r >= ex.hypot(ey) {
        return Err(Error::InvalidArgument(format!(
            "the stimulus (radius {r:.2} mm) covers the whole {ex:.1} x {ey:.1} mm sheet: no \
             wave can travel; take a larger --grid (the sheet's velocities, measured from a \
             third of its edges, need more than {} cells a side)",
            (3.0 * r / t.h).ceil() as usize
        )));
    }
    Ok(())
}

/// The membrane model of `--model`.
fn parse_model(s: &str) -> Result<Membrane> {
    match s {
        "aliev-panfilov" => Ok(AlievPanfilov::STANDARD.into()),
        "mitchell-schaeffer" => Ok(MitchellSchaeffer::STANDARD.into()),
        _ => Err(Error::InvalidArgument(format!(
            "unknown membrane model '{s}' (available: aliev-panfilov, mitchell-schaeffer)"
        ))),
    }
}

/// Two comma-separated numbers.
fn parse_pair(s: &str, what: &str) -> Result<(f64, f64)> {
    let bad = || {
        Error::InvalidArgument(format!(
            "{what} takes two comma-separated numbers (along,across), not '{s}'"
        ))
    };
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let a: f64 = a.trim().parse().map_err(|_| bad())?;
    let b: f64 = b.trim().parse().map_err(|_| bad())?;
    Ok((a, b))
}

/// `--cv`: `off`, or the targets along and across (positive, finite).
fn parse_cv(s: &str) -> Result<Option<CvTarget>> {
    if s == "off" {
        return Ok(None);
    }
    let (along, across) = parse_pair(s, "--cv (or 'off')")?;
    let target = CvTarget { along, across };
    target.validate()?;
    Ok(Some(target))
}

/// `--sigma-i` / `--sigma-e`: positive, finite conductivities in mS/mm.
fn parse_conductivity(s: &str, what: &str) -> Result<Conductivity> {
    let (longitudinal, transverse) = parse_pair(s, what)?;
    if ![longitudinal, transverse]
        .iter()
        .all(|v| v.is_finite() && *v > 0.0)
    {
        return Err(Error::InvalidArgument(format!(
            "{what}: conductivities must be positive and finite (mS/mm), not '{s}'"
        )));
    }
    Ok(Conductivity {
        longitudinal,
        transverse,
    })
}

fn simulate<B: BidomainKernels + AmgKernels + SetupKernels>(
    backend: &B,
    args: &BidomainArgs,
    config: BidomainConfig,
    calibration: Option<Calibration>,
) -> Result<ExitCode> {
    let use_amg = args.precond == "amg";
    let layout = config.layout;
    let mut sim = Simulation::new(backend, config, &mut |b, a| {
        if use_amg {
            amg(b, a, &amg_options(), layout)
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
    // Ctrl-C: the steps done are reported (status interrupted, exit 130);
    // the final snapshot and the activation map are not written.
    let mut interrupted = false;
    for _ in 0..args.steps {
        if gpuq_core::interrupt::requested() {
            interrupted = true;
            break;
        }
        let r = match sim.step() {
            Err(Error::Breakdown { quantity, .. })
                if quantity == gpuq_core::interrupt::INTERRUPTED =>
            {
                interrupted = true;
                break;
            }
            r => r?,
        };
        bar.update(&r);
        let k = r.step;
        if args.snapshot_every > 0 && k % args.snapshot_every == 0 && k < args.steps {
            snapshot(&sim, args, k)?;
        }
        reports.push(r);
    }
    bar.finish_line();
    let report = sim.summarize(reports, start.elapsed().as_secs_f64())?;
    let activation = sim.activation()?;
    let tissue = &sim.config().tissue;
    if !interrupted {
        snapshot(&sim, args, sim.steps_done())?;
        if let Some(path) = &args.plot {
            output::write_activation_png(path, tissue, &activation)?;
        }
    }
    let cable = match &calibration {
        Some(c) => [Some(c.cv_along_m_s), Some(c.cv_across_m_s)],
        None => measure_cv(sim.config(), &CalibrationOptions::default())?,
    };
    let sheet = sheet_cv(tissue, &activation, sim.config().stimulus.radius)?;
    let cv = Velocities { cable, sheet };
    if args.json {
        crate::solve::print_json(&BidomainReport {
            run: &report,
            model: sim.config().ionic.name(),
            sigma_i: [tissue.sigma_i.longitudinal, tissue.sigma_i.transverse],
            sigma_e: [tissue.sigma_e.longitudinal, tissue.sigma_e.transverse],
            cv_along_m_s: cable[0],
            cv_across_m_s: cable[1],
            sheet_cv_along_m_s: sheet[0],
            sheet_cv_across_m_s: sheet[1],
            calibration: calibration.as_ref(),
            status: if interrupted {
                "interrupted"
            } else {
                "completed"
            },
        })?;
    } else {
        print_summary(&report, sim.time(), &cv);
    }
    if interrupted {
        eprintln!(
            "gpuq: interrupted by Ctrl-C after {} of {} steps; the final snapshot and the map \
             were not written",
            sim.steps_done(),
            args.steps
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON report of `gpuq bidomain --json`: the run's report and what the
/// command adds to it.
#[derive(Serialize)]
struct BidomainReport<'a> {
    /// The setup, the steps and the totals.
    #[serde(flatten)]
    run: &'a RunReport,
    /// The ionic model's name.
    model: &'static str,
    /// Intracellular conductivities (longitudinal, transverse), mS/mm.
    sigma_i: [f64; 2],
    /// Extracellular conductivities (longitudinal, transverse), mS/mm.
    sigma_e: [f64; 2],
    /// Conduction velocity along the fibres on the 1-D cable, m/s.
    cv_along_m_s: Option<f64>,
    /// Conduction velocity across the fibres on the 1-D cable, m/s.
    cv_across_m_s: Option<f64>,
    /// Conduction velocity along the fibres on the run's sheet, m/s.
    sheet_cv_along_m_s: Option<f64>,
    /// Conduction velocity across the fibres on the run's sheet, m/s.
    sheet_cv_across_m_s: Option<f64>,
    /// The conductivities' calibration to `--cv`, when done.
    calibration: Option<&'a Calibration>,
    /// "completed" or "interrupted" (Ctrl-C).
    status: &'static str,
}

/// The conduction velocities of a run, m/s: `[along, across]` on the 1-D
/// cable (the plane-wave CV of the run's conductivities and discretisation)
/// and on the run's own sheet (`None` where not measured).
struct Velocities {
    cable: [Option<f64>; 2],
    sheet: [Option<f64>; 2],
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

fn print_summary(r: &RunReport, time_ms: f64, cv: &Velocities) {
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
    if r.activated_fraction > 0.0 {
        println!(
            "activated: {:.1}% of the nodes, the last at {:.3} ms",
            100.0 * r.activated_fraction,
            r.last_activation_ms
        );
    } else {
        println!("activated: none of the nodes");
    }
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    println!(
        "conduction velocity along / across the fibres: {} / {} m/s (plane wave, 1-D cable); \
         {} / {} m/s on this sheet's edges",
        show(cv.cable[0]),
        show(cv.cable[1]),
        show(cv.sheet[0]),
        show(cv.sheet[1])
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
