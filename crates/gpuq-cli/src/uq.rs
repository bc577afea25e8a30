//! `gpuq uq ...`: the uncertainty-quantification procedures of [`gpuq_uq`] on
//! either backend, with a text summary or a JSON report on stdout.

use crate::solve::Chosen;
use clap::{Args, Subcommand};
use gpuq_core::{Error, Result};
use gpuq_cubature::{builtin, kind_of, CubatureKernels, Func};
use gpuq_uq::convolution_model::{model_convolution, ModelConvolution};
use gpuq_uq::eigen::ModeOptions;
use gpuq_uq::plot::{self, Frame};
use gpuq_uq::psd_model::{model_psd_on, response_psd_full, transfer_vectors, LoadPsd, ModelPsd};
use gpuq_uq::{
    sdof_monte_carlo, smolyak_expectation, static_response, tensor_expectation, Ar1, Beam, BoucWen,
    Design, HistogramSpec, Initial, Precision, SdofProblem, StaticProblem, StaticSolver,
};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `gpuq uq`.
#[derive(Args, Debug)]
pub struct UqArgs {
    /// The procedure.
    #[command(subcommand)]
    pub command: UqCommand,
}

/// The UQ procedures.
#[derive(Subcommand, Debug)]
pub enum UqCommand {
    /// (i) Static response of a cantilever to a Gaussian tip load (and lognormal
    /// element moduli): mean, std and quantiles of the tip deflection.
    Static(StaticArgs),
    /// (iv) Monte Carlo of the SDOF oscillator m x'' + c x' + sgn(x')|x'|^0.5 + k x
    /// = A [sin t + white noise] by RK4: mean and variance of x(t).
    Sdof(SdofArgs),
    /// (ii) Response PSD of the cantilever to an AR(1) tip load: diagonal and tip
    /// output, optionally the full S_xx(w) matrices on the backend.
    Psd(PsdArgs),
    /// (iii) Tip response to AR(1) load samples by FFT convolution.
    Convolution(ConvolutionArgs),
    /// (v) E[g(q)] of standard normals by tensor Gauss-Hermite or a Smolyak grid.
    Expectation(ExpectationArgs),
}

/// The AR(1) load process.
#[derive(Args, Debug)]
pub struct Ar1Args {
    /// AR(1) coefficient phi (|phi| < 1).
    #[arg(long, default_value_t = 0.9)]
    pub phi: f64,
    /// Standard deviation of the AR(1) innovations.
    #[arg(long, default_value_t = 1.0)]
    pub sigma: f64,
    /// Sampling interval of the load (and time step of the convolution).
    #[arg(long, default_value_t = 0.01)]
    pub dt: f64,
}

impl Ar1Args {
    fn process(&self) -> Ar1 {
        Ar1 {
            phi: self.phi,
            sigma: self.sigma,
            dt: self.dt,
        }
    }
}

/// Arguments of `gpuq uq psd`.
#[derive(Args, Debug)]
pub struct PsdArgs {
    /// Degrees of freedom of the unit cantilever (even).
    #[arg(long, default_value_t = 128)]
    pub dofs: usize,
    /// Angular frequencies, comma-separated.
    #[arg(long, conflicts_with = "freq_range")]
    pub freqs: Option<String>,
    /// Angular frequencies A:B:K (K points from A to B).
    #[arg(long, default_value = "0:100:101", allow_hyphen_values = true)]
    pub freq_range: String,
    /// Also form the full S_xx(w) matrices (n^2 complex values each) on the backend.
    #[arg(long)]
    pub full: bool,
    #[command(flatten)]
    pub load: Ar1Args,
    #[command(flatten)]
    pub model: ModelArgs,
    /// With --stiffness: the load process's PSD, white:S0, ar1:PHI:SIGMA:DT,
    /// kanai-tajimi:S0:WG:ZG or a file of `w,S` lines (default: the AR(1) of
    /// --phi, --sigma, --dt).
    #[arg(long, requires = "stiffness")]
    pub load_psd: Option<String>,
    /// Write a figure with title, axes, tick labels, units and legend: SVG when
    /// the file name ends in .svg, else PNG (the axis ranges are printed too). The beam:
    /// its tip's PSD and the load's; a model: its outputs' PSDs and the cross-PSDs'
    /// magnitudes of the first four outputs' pairs (the JSON's `cross_psd` holds every
    /// pair at every frequency).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// The options of `gpuq uq psd` and `gpuq uq convolution` on a model from
/// files (`--stiffness`).
#[derive(Args, Debug)]
pub struct ModelArgs {
    /// The model's stiffness matrix K (Matrix Market): your model instead of
    /// the beam.
    #[arg(long)]
    pub stiffness: Option<std::path::PathBuf>,
    /// The model's mass matrix M (Matrix Market).
    #[arg(long)]
    pub mass: Option<std::path::PathBuf>,
    /// The damping matrix C (Matrix Market).
    #[arg(long, conflicts_with_all = ["rayleigh", "modal_damping"])]
    pub damping: Option<std::path::PathBuf>,
    /// Rayleigh damping C = a M + b K, given as A,B.
    #[arg(long, value_delimiter = ',', conflicts_with = "modal_damping")]
    pub rayleigh: Option<Vec<f64>>,
    /// The same damping ratio in every mode (modal superposition only).
    #[arg(long)]
    pub modal_damping: Option<f64>,
    /// Constrained DOFs to eliminate (0-based): a list such as 0,1,10-12 or a file.
    #[arg(long)]
    pub fixed_dofs: Option<String>,
    /// Modes kept (0: the direct per-frequency solve).
    #[arg(long, default_value_t = 20)]
    pub modes: usize,
    /// The eigensolver for models above 400 DOFs: lanczos (shift-invert, with
    /// the Cholesky factor of K, on the host), lobpcg (preconditioned by AMG
    /// cycles of K, on --backend: no factorisation), or auto: lobpcg on a GPU,
    /// lanczos on the CPU.
    #[arg(long, default_value = "auto", value_parser = ["auto", "lanczos", "lobpcg"])]
    pub eigensolver: String,
    /// Unknowns per node of K, numbered node by node (LOBPCG's AMG: 2 or 3
    /// for elasticity).
    #[arg(long, default_value_t = 1)]
    pub block: usize,
    /// DOFs the load acts on with unit weight (0-based list or file).
    #[arg(long, conflicts_with = "load_shape")]
    pub load_dofs: Option<String>,
    /// The load's shape over the DOFs (Matrix Market vector).
    #[arg(long)]
    pub load_shape: Option<std::path::PathBuf>,
    /// Output DOFs (0-based list or file).
    #[arg(long)]
    pub outputs: Option<String>,
}

/// Arguments of `gpuq uq convolution`.
#[derive(Args, Debug)]
pub struct ConvolutionArgs {
    /// Degrees of freedom of the unit cantilever (even).
    #[arg(long, default_value_t = 64)]
    pub dofs: usize,
    /// Time steps N_t.
    #[arg(long, default_value_t = 1024)]
    pub steps: usize,
    /// Load samples.
    #[arg(long, default_value_t = 100)]
    pub samples: usize,
    /// Runs of the whole convolution; the report gives the fastest and the
    /// first (on CUDA the first builds the cuFFT plans).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    #[command(flatten)]
    pub load: Ar1Args,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Write a figure with title, axes, tick labels, units and legend: SVG when
    /// the file name ends in .svg, else PNG (the axis ranges are printed too).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// Arguments of `gpuq uq expectation`.
#[derive(Args, Debug)]
pub struct ExpectationArgs {
    /// The integrand: sum-of-squares (q^T q), or another built-in of gpuq-cubature
    /// (tensor rule only).
    #[arg(
        long,
        default_value = "sum-of-squares",
        conflicts_with = "expr",
        value_parser = gpuq_cubature::func::NAMES
    )]
    pub integrand: String,
    /// The integrand as an expression in x1..xN (the standard normal variables;
    /// the language of `gpuq integrate --expr`), e.g. 'exp(0.1 * x1) * x2^2':
    /// compiled closures on the CPU, CUDA C on the GPU; the sparse grid
    /// evaluates it on the host.
    #[arg(long, allow_hyphen_values = true)]
    pub expr: Option<String>,
    /// Number of standard normal variables N.
    #[arg(long)]
    pub dim: usize,
    /// Gauss-Hermite points per axis N_a (tensor rule).
    #[arg(long, default_value_t = 4)]
    pub points: usize,
    /// Use the Smolyak sparse grid of this level instead (exact to total degree
    /// 2 LEVEL + 1; host evaluation, sum-of-squares only).
    #[arg(long)]
    pub sparse_grid: Option<usize>,
    /// Runs of the tensor rule; the report gives the fastest and the first.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    #[command(flatten)]
    pub common: Common,
}

/// Options every procedure takes.
#[derive(Args, Debug)]
pub struct Common {
    /// Backend: cpu, cuda (device 0) or auto.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "auto"])]
    pub backend: String,
    /// Seed of the random streams (the same samples on every backend; the
    /// deterministic procedures psd and expectation do not use it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `gpuq uq static`.
#[derive(Args, Debug)]
pub struct StaticArgs {
    /// Degrees of freedom (even: two per node).
    #[arg(long, default_value_t = 128)]
    pub dofs: usize,
    /// Number of load samples.
    #[arg(long, default_value_t = 1000)]
    pub samples: usize,
    /// Beam length L.
    #[arg(long, default_value_t = 1.0)]
    pub length: f64,
    /// Young's modulus E (mean modulus with --modulus-cov).
    #[arg(long, default_value_t = 1.0)]
    pub modulus: f64,
    /// Second moment of area I.
    #[arg(long, default_value_t = 1.0)]
    pub inertia: f64,
    /// Mean load: for the beam the tip load (default 1); for a model
    /// (--stiffness) a Matrix Market vector over the DOFs, or one number for
    /// every free DOF.
    #[arg(long, allow_hyphen_values = true)]
    pub load_mean: Option<String>,
    /// Standard deviation of the load: for the beam the tip load's (default
    /// 0.1); for a model independent Gaussian loads per DOF, a Matrix Market
    /// vector or one number for every free DOF (default: none).
    #[arg(long)]
    pub load_std: Option<String>,
    /// The model's stiffness matrix K (Matrix Market, symmetric positive
    /// definite): the static response of your model instead of the beam.
    #[arg(long)]
    pub stiffness: Option<std::path::PathBuf>,
    /// Constrained DOFs to eliminate from the model (0-based): a list such as
    /// 0,1,10-12 or a file of integers.
    #[arg(long)]
    pub fixed_dofs: Option<String>,
    /// An n x r load factor L (Matrix Market): the load adds L eta, eta
    /// standard normal (a correlated, low-rank load).
    #[arg(long)]
    pub load_factor: Option<std::path::PathBuf>,
    /// Stiffness terms K_1,K_2,... (Matrix Market): K(theta) = K + sum theta_k K_k.
    #[arg(long, value_delimiter = ',')]
    pub stiffness_terms: Vec<std::path::PathBuf>,
    /// Distributions of theta: one for every term or one per term, each
    /// uniform:LO:HI, normal:MEAN:STD or lognormal:MU:SIGMA.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub theta: Vec<String>,
    /// Output DOFs of a model (0-based): a list such as 10,20,30-35 or a file.
    #[arg(long)]
    pub outputs: Option<String>,
    /// Relative residual at which a random-stiffness sample's solve stops; the
    /// samples' true residuals are checked against it (status `not_converged`,
    /// exit 3, on a miss). 1e-8 by default: 1e-10 lies below the attainable
    /// accuracy of stiff models such as the beam's.
    #[arg(long, default_value_t = 1e-8)]
    pub tol: f64,
    /// Coefficient of variation of independent lognormal element moduli (each
    /// sample then factors its own K).
    #[arg(long)]
    pub modulus_cov: Option<f64>,
    /// DOF whose statistics are reported (default: the tip deflection, N - 2).
    #[arg(long)]
    pub dof: Option<usize>,
    /// Solver: auto (from the matrices: band for the beam), band (banded
    /// Cholesky), direct (sparse Cholesky of a deterministic K), pcg
    /// (AMG-preconditioned conjugate gradients on the backend) or dense (the
    /// seed's dense LU per sample).
    #[arg(long, default_value = "auto", value_parser = ["auto", "band", "direct", "pcg", "dense"])]
    pub solver: String,
    /// Sampling design: mc, lhs (Latin hypercube over every variable) or sobol
    /// (the load from scrambled Sobol points, the moduli by Monte Carlo).
    #[arg(long, default_value = "mc", value_parser = ["mc", "lhs", "sobol"])]
    pub design: String,
    /// Write a figure with title, axes, tick labels, units and legend: SVG when
    /// the file name ends in .svg, else PNG (the axis ranges are printed too).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// Arguments of `gpuq uq sdof`.
#[derive(Args, Debug)]
pub struct SdofArgs {
    /// Number of samples.
    #[arg(long, default_value_t = 10_000)]
    pub samples: u64,
    /// Simulated time in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Time step in seconds (duration / dt steps, rounded).
    #[arg(long, default_value_t = 0.01)]
    pub dt: f64,
    /// Load amplitude A.
    #[arg(long, default_value_t = 1.0)]
    pub amplitude: f64,
    /// Mass m (seed: 2; `--mass`, deprecated, is the old spelling: the other
    /// procedures' `--mass` is a file).
    #[arg(long = "m", alias = "mass", default_value_t = 2.0)]
    pub mass: f64,
    /// Linear damping c (seed: 1.6; `--damping`, deprecated, is the old spelling).
    #[arg(long = "c", alias = "damping", default_value_t = 1.6)]
    pub damping: f64,
    /// Stiffness k (seed: 62.84; `--stiffness`, deprecated, is the old spelling).
    #[arg(long = "k", alias = "stiffness", default_value_t = 62.84)]
    pub stiffness: f64,
    /// Coefficient g of the fractional damping g sgn(x')|x'|^p (seed: 1).
    #[arg(long, default_value_t = 1.0)]
    pub frac_damping: f64,
    /// Exponent p of the fractional damping (seed: 0.5).
    #[arg(long, default_value_t = 0.5)]
    pub exponent: f64,
    /// Drop the fractional damping term (g = 0).
    #[arg(long)]
    pub linear: bool,
    /// Cubic (Duffing) stiffness k3: the spring force adds k3 x^3.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub duffing: f64,
    /// A Bouc-Wen hysteretic spring ALPHA,BETA,GAMMA,N (a = 1): the spring force
    /// k [alpha x + (1 - alpha) z], z' = x' [1 - |z|^n (gamma + beta sgn(x' z))].
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub bouc_wen: Option<Vec<f64>>,
    /// Circular frequency w of the deterministic forcing A sin(w t) (seed: 1).
    #[arg(long, default_value_t = 1.0)]
    pub forcing_frequency: f64,
    /// Drop the white noise (the deterministic response A sin(w t)).
    #[arg(long)]
    pub no_noise: bool,
    /// Initial displacement (its mean with --x0-std).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub x0: f64,
    /// Initial velocity (its mean with --v0-std).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub v0: f64,
    /// Standard deviation of a normal initial displacement (0: fixed).
    #[arg(long, default_value_t = 0.0)]
    pub x0_std: f64,
    /// Standard deviation of a normal initial velocity (0: fixed).
    #[arg(long, default_value_t = 0.0)]
    pub v0_std: f64,
    /// Arithmetic of the integration: f32 or f64.
    #[arg(long, default_value = "f64", value_parser = ["f32", "f64"])]
    pub precision: String,
    /// Sampling design of the noise: mc or lhs (Latin hypercube per step).
    #[arg(long, default_value = "mc", value_parser = ["mc", "lhs", "sobol"])]
    pub design: String,
    /// Times (seconds, comma-separated) at which to histogram x.
    #[arg(long)]
    pub hist_times: Option<String>,
    /// Histogram range and bins LO:HI:BINS.
    #[arg(long, default_value = "-0.3:0.3:30", allow_hyphen_values = true)]
    pub hist_range: String,
    /// Include the mean and variance at every time point in the JSON report.
    #[arg(long)]
    pub series: bool,
    /// Also time the kernel's ingredients alone (RK4 arithmetic, square roots,
    /// normals, steps without statistics) on the CUDA backend.
    #[arg(long)]
    pub kernel_costs: bool,
    /// Write a figure with title, axes, tick labels, units and legend: SVG when
    /// the file name ends in .svg, else PNG (the axis ranges are printed too).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// Runs `gpuq uq ...`.
pub fn run(args: &UqArgs) -> Result<ExitCode> {
    match &args.command {
        UqCommand::Static(a) => run_static(a),
        UqCommand::Sdof(a) => run_sdof(a),
        UqCommand::Psd(a) => run_psd(a),
        UqCommand::Convolution(a) => run_convolution(a),
        UqCommand::Expectation(a) => run_expectation(a),
    }
}

/// Prints where a plot went and the ranges its axes span (stderr with --json).
pub(crate) fn report_plot(path: &Path, what: &str, frame: Frame, json: bool) {
    let line = format!(
        "plot {}: {what}; x from {:.4e} to {:.4e}, y from {:.4e} to {:.4e}",
        path.display(),
        frame.x.0,
        frame.x.1,
        frame.y.0,
        frame.y.1
    );
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// `dir/stem_suffix.EXT` next to `path`, in its format (`svg` or `png`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or("plot".into(), |s| s.to_string_lossy());
    let ext = plot::Format::of(path).extension();
    path.with_file_name(format!("{stem}_{suffix}.{ext}"))
}

pub(crate) fn backend_name(c: &Chosen) -> &'static str {
    match c {
        Chosen::Cpu(_) => "cpu",
        Chosen::Cuda(_) => "cuda",
    }
}

/// `--samples 0` is refused before any work: statistics of no samples are not numbers.
fn at_least_one_sample(samples: usize) -> Result<()> {
    if samples == 0 {
        return Err(Error::InvalidArgument(
            "--samples must be at least 1".into(),
        ));
    }
    Ok(())
}

fn run_static(a: &StaticArgs) -> Result<ExitCode> {
    at_least_one_sample(a.samples)?;
    if a.stiffness.is_some() {
        return crate::uq_model::run_static_model(a);
    }
    let number = |v: &Option<String>, default: f64, what: &str| -> Result<f64> {
        v.as_deref().map_or(Ok(default), |t| {
            t.parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "the beam's {what} is a number, not {t:?} (a file needs --stiffness)"
                ))
            })
        })
    };
    let mut beam = Beam::unit(a.dofs)?;
    beam.length = a.length;
    beam.modulus = a.modulus;
    beam.inertia = a.inertia;
    beam.validate()?;
    let problem = StaticProblem {
        dof: a.dof.unwrap_or(beam.tip()),
        beam,
        load_mean: number(&a.load_mean, 1.0, "--load-mean")?,
        load_std: number(&a.load_std, 0.1, "--load-std")?,
        modulus_cov: a.modulus_cov,
        design: parse_design(&a.design)?,
        solver: StaticSolver::parse(&a.solver)?,
    };
    let chosen = Chosen::parse(&a.common.backend)?;
    let r = match &chosen {
        Chosen::Cpu(b) => static_response(b, &problem, a.samples, a.common.seed)?,
        Chosen::Cuda(b) => static_response(b, &problem, a.samples, a.common.seed)?,
    };
    let (exact_mean, exact_std) = problem.tip_moments();
    let tip = problem.dof == problem.beam.tip();
    if let Some(path) = &a.plot {
        let f = plot::static_histogram(&r, problem.dof, 40).save(path)?;
        report_plot(
            path,
            "histogram of u[dof] over the samples",
            f,
            a.common.json,
        );
    }
    if a.common.json {
        crate::solve::print_json(&StaticReport {
            procedure: "static",
            backend: backend_name(&chosen),
            dofs: a.dofs,
            dof: problem.dof,
            samples: r.samples,
            seed: a.common.seed,
            random_modulus: problem.random_modulus(),
            design: &a.design,
            solver: r.solver.name(),
            tip_mean: tip.then_some(r.mean),
            tip_std: tip.then_some(r.std),
            mean: r.mean,
            std: r.std,
            quantiles: &r.quantiles,
            exact_tip_mean: exact_mean,
            exact_tip_std: exact_std,
            failed: r.failed,
            time_s: r.time_s,
        })?;
    } else {
        println!(
            "static: {} DOFs, {} samples on {} in {:.3} s",
            a.dofs,
            r.samples,
            backend_name(&chosen),
            r.time_s
        );
        println!(
            "DOF {}: mean {:.6e}, std {:.6e}",
            problem.dof, r.mean, r.std
        );
        if tip {
            println!("exact tip: mean {exact_mean:.6e}, std {exact_std:.6e}");
        }
        for (q, v) in &r.quantiles {
            println!("  q{:<4} {v:.6e}", q * 100.0);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_precision(s: &str) -> Result<Precision> {
    match s {
        "f32" => Ok(Precision::F32),
        "f64" => Ok(Precision::F64),
        other => Err(Error::InvalidArgument(format!(
            "unknown precision '{other}' (available: f32, f64)"
        ))),
    }
}

pub(crate) fn parse_design(s: &str) -> Result<Design> {
    Design::parse(s).ok_or_else(|| {
        Error::InvalidArgument(format!("unknown design '{s}' (available: mc, lhs, sobol)"))
    })
}

fn bad(what: &str, value: &str) -> Error {
    Error::InvalidArgument(format!("cannot parse {what} '{value}'"))
}

/// The number of steps duration / dt, which must be a whole number (to 1e-9).
fn steps_of(duration: f64, dt: f64) -> Result<usize> {
    let ratio = duration / dt;
    if !(ratio.is_finite() && ratio >= 1.0) || (ratio - ratio.round()).abs() > 1e-9 * ratio {
        return Err(Error::InvalidArgument(format!(
            "duration {duration} is not a positive whole number of steps of {dt}"
        )));
    }
    Ok(ratio.round() as usize)
}

fn histogram(a: &SdofArgs, steps: usize) -> Result<Option<HistogramSpec>> {
    let Some(times) = &a.hist_times else {
        return Ok(None);
    };
    let mut idx = Vec::new();
    for t in times.split(',') {
        let v: f64 = t.trim().parse().map_err(|_| bad("histogram time", t))?;
        let j = (v / a.dt).round();
        if !(0.0..=steps as f64).contains(&j) {
            return Err(Error::InvalidArgument(format!(
                "histogram time {v} is outside 0..={}",
                a.duration
            )));
        }
        idx.push(j as usize);
    }
    idx.sort_unstable();
    idx.dedup();
    let parts: Vec<&str> = a.hist_range.split(':').collect();
    let [lo, hi, bins] = parts[..] else {
        return Err(bad("histogram range LO:HI:BINS", &a.hist_range));
    };
    Ok(Some(HistogramSpec {
        steps: idx,
        lo: lo.parse().map_err(|_| bad("histogram low edge", lo))?,
        hi: hi.parse().map_err(|_| bad("histogram high edge", hi))?,
        bins: bins.parse().map_err(|_| bad("histogram bins", bins))?,
    }))
}

fn run_sdof(a: &SdofArgs) -> Result<ExitCode> {
    let steps = steps_of(a.duration, a.dt)?;
    let bouc_wen = match a.bouc_wen.as_deref() {
        None => None,
        Some(&[alpha, beta, gamma, n]) => Some(BoucWen {
            alpha,
            a: 1.0,
            beta,
            gamma,
            n,
        }),
        Some(v) => {
            return Err(Error::InvalidArgument(format!(
                "--bouc-wen takes ALPHA,BETA,GAMMA,N (4 values), not {}",
                v.len()
            )))
        }
    };
    at_least_one_sample(usize::try_from(a.samples).unwrap_or(usize::MAX))?;
    let problem = SdofProblem {
        m: a.mass,
        c: a.damping,
        k: a.stiffness,
        g: if a.linear { 0.0 } else { a.frac_damping },
        exponent: a.exponent,
        duffing: a.duffing,
        bouc_wen,
        initial: Initial {
            x0: a.x0,
            v0: a.v0,
            x0_std: a.x0_std,
            v0_std: a.v0_std,
        },
        amplitude: a.amplitude,
        omega: a.forcing_frequency,
        noise: !a.no_noise,
        dt: a.dt,
        steps,
        precision: parse_precision(&a.precision)?,
        design: parse_design(&a.design)?,
        histogram: histogram(a, steps)?,
        ..SdofProblem::seed001()
    };
    let chosen = Chosen::parse(&a.common.backend)?;
    let r = match &chosen {
        Chosen::Cpu(b) => sdof_monte_carlo(b, &problem, a.samples, a.common.seed)?,
        Chosen::Cuda(b) => sdof_monte_carlo(b, &problem, a.samples, a.common.seed)?,
    };
    let costs = match (&chosen, a.kernel_costs) {
        (_, false) => None,
        (Chosen::Cuda(b), true) => Some(gpuq_uq::sdof::sdof_kernel_costs(
            b,
            &problem,
            a.samples,
            a.common.seed,
        )?),
        (Chosen::Cpu(_), true) => {
            return Err(Error::InvalidArgument(
                "--kernel-costs times device kernels: use --backend cuda".into(),
            ))
        }
    };
    let last = steps;
    if let Some(path) = &a.plot {
        let f = plot::sdof_chart(&r).save(path)?;
        report_plot(path, "mean and mean +/- 2 std of x(t)", f, a.common.json);
        if let Some(h) = &problem.histogram {
            for (k, j) in h.steps.iter().enumerate() {
                let Some(chart) = plot::sdof_histogram(h, &r, k, a.dt) else {
                    continue;
                };
                let p = sibling(path, &format!("hist_t{j}"));
                let f = chart.save(&p)?;
                let what = format!("histogram of x at t = {}", *j as f64 * a.dt);
                report_plot(&p, &what, f, a.common.json);
            }
        }
    }
    // The closed form holds for the linear system only.
    let linear_var = (problem.g == 0.0 && problem.duffing == 0.0 && problem.bouc_wen.is_none())
        .then(|| gpuq_uq::sdof::linear_stationary_variance(a.amplitude, problem.c, problem.k));
    if a.common.json {
        let hist: Vec<_> = problem
            .histogram
            .iter()
            .flat_map(|h| {
                h.steps
                    .iter()
                    .zip(&r.histograms)
                    .map(move |(j, c)| (j, c, h))
            })
            .map(|(j, c, h)| SdofHistogram {
                time: *j as f64 * a.dt,
                lo: h.lo,
                hi: h.hi,
                counts: c,
            })
            .collect();
        crate::solve::print_json(&SdofReport {
            procedure: "sdof",
            backend: backend_name(&chosen),
            samples: a.samples,
            seed: a.common.seed,
            precision: &a.precision,
            design: &a.design,
            linear: a.linear,
            oscillator: Oscillator {
                m: problem.m,
                c: problem.c,
                k: problem.k,
                g: problem.g,
                exponent: problem.exponent,
                duffing: problem.duffing,
                bouc_wen: problem.bouc_wen,
                initial: problem.initial,
                amplitude: problem.amplitude,
                omega: problem.omega,
                noise: problem.noise,
            },
            steps,
            dt: a.dt,
            final_mean: r.mean[last],
            final_variance: r.variance[last],
            linear_stationary_variance: linear_var,
            time_s: r.time_s,
            steps_per_s: a.samples as f64 * steps as f64 / r.time_s,
            mean: a.series.then_some(&r.mean[..]),
            variance: a.series.then_some(&r.variance[..]),
            histograms: hist,
            kernel_costs: costs.as_ref(),
        })?;
    } else {
        println!(
            "sdof: {} samples x {} steps ({}, {}) on {} in {:.3} s",
            a.samples,
            steps,
            a.precision,
            if a.linear { "linear" } else { "nonlinear" },
            backend_name(&chosen),
            r.time_s
        );
        println!(
            "x({}): mean {:.6e}, variance {:.6e}",
            a.duration, r.mean[last], r.variance[last]
        );
        if let Some(v) = linear_var {
            println!("linear stationary variance A^2/(2ck) = {v:.6e}");
        }
        if let Some(c) = &costs {
            println!(
                "alone: RK4 arithmetic {:.4} s, square roots {:.4} s, normals {:.4} s; \
                 steps without statistics {:.4} s; full run {:.4} s",
                c.rk4_arithmetic_s,
                c.square_roots_s,
                c.normals_s,
                c.steps_without_statistics_s,
                c.full_s
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_list(s: &str, what: &str) -> Result<Vec<f64>> {
    s.split(',')
        .map(|v| v.trim().parse().map_err(|_| bad(what, v)))
        .collect()
}

/// The frequencies `--freqs` lists or `--freq-range A:B:K` spans (K points from A
/// to B): at least one, each finite and non-negative, a range increasing (A < B when
/// K > 1); anything else is an error naming the argument.
fn frequencies(a: &PsdArgs) -> Result<Vec<f64>> {
    let checked = |w: Vec<f64>, what: &str| -> Result<Vec<f64>> {
        if w.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{what} gives no frequency (at least one is needed)"
            )));
        }
        if let Some(v) = w.iter().find(|v| !v.is_finite() || **v < 0.0) {
            return Err(Error::InvalidArgument(format!(
                "{what}: frequency {v} is not a finite non-negative number"
            )));
        }
        Ok(w)
    };
    if let Some(list) = &a.freqs {
        return checked(parse_list(list, "frequency")?, "--freqs");
    }
    let parts: Vec<&str> = a.freq_range.split(':').collect();
    let [lo, hi, k] = parts[..] else {
        return Err(bad("frequency range A:B:K", &a.freq_range));
    };
    let lo: f64 = lo.parse().map_err(|_| bad("frequency", lo))?;
    let hi: f64 = hi.parse().map_err(|_| bad("frequency", hi))?;
    let k: usize = k.parse().map_err(|_| bad("frequency count", k))?;
    if k > 1 && lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return Err(Error::InvalidArgument(format!(
            "--freq-range {}: the range must increase (A < B) for K = {k} points",
            a.freq_range
        )));
    }
    let range = match k {
        0 => Vec::new(),
        1 => vec![lo],
        _ => (0..k)
            .map(|i| lo + (hi - lo) * i as f64 / (k - 1) as f64)
            .collect(),
    };
    checked(range, "--freq-range")
}

/// The CUDA rank-1 kernel alone on resident inputs and output (the transfers
/// and the output's allocation excluded): seconds per launch, the best of 10.
fn rank1_kernel_seconds(b: &gpuq_cuda::CudaBackend, problem: &ModelPsd<'_>) -> Result<f64> {
    use gpuq_core::Backend;
    let (h, sff) = transfer_vectors(problem)?;
    let n = problem.model.dofs();
    let s = b.upload(&sff)?;
    let hv = b.upload(&h)?;
    let mut out = b.zeros::<num_complex::Complex64>(sff.len() * n * n)?;
    let mut best = f64::INFINITY;
    for _ in 0..10 {
        b.synchronize()?;
        let t = Instant::now();
        b.uq_rank1_c64(n, &s, &hv, &mut out)?;
        b.synchronize()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Seed 001's example 2: the beam's response PSD to an AR(1) tip load, as
/// the PSD of its model ([`Beam::model`], the direct solve per frequency);
/// with `--full` the full S_xx matrices formed on the backend.
fn run_psd(a: &PsdArgs) -> Result<ExitCode> {
    if a.model.stiffness.is_some() {
        return crate::uq_model::run_psd_model(a, frequencies(a)?);
    }
    let beam = Beam::unit(a.dofs)?;
    let model = beam.model()?;
    let mut shape = vec![0.0; model.dofs()];
    shape[beam.tip()] = 1.0;
    let load = a.load.process();
    let problem = ModelPsd {
        model: &model,
        load_shape: shape,
        outputs: vec![beam.tip()],
        frequencies: frequencies(a)?,
        load: LoadPsd::Ar1(load),
        modes: ModeOptions {
            count: 0,
            ..ModeOptions::default()
        },
    };
    let chosen = Chosen::parse(&a.common.backend)?;
    let t = Instant::now();
    let r = match &chosen {
        Chosen::Cpu(b) => model_psd_on(b, &problem)?,
        Chosen::Cuda(b) => model_psd_on(b, &problem)?,
    };
    let cheap_s = t.elapsed().as_secs_f64();
    let sff: Vec<f64> = r.frequencies.iter().map(|&w| load.psd(w)).collect();
    let full_s = if a.full {
        let t = Instant::now();
        match &chosen {
            Chosen::Cpu(b) => {
                response_psd_full(b, &problem)?;
            }
            Chosen::Cuda(b) => {
                let v = response_psd_full(b, &problem)?;
                b.synchronize()?;
                drop(v);
            }
        }
        Some(t.elapsed().as_secs_f64())
    } else {
        None
    };
    let kernel_s = match (&chosen, a.full) {
        (Chosen::Cuda(b), true) => Some(rank1_kernel_seconds(b, &problem)?),
        _ => None,
    };
    let n = beam.dofs();
    let bytes = 16.0 * (n * n * r.frequencies.len()) as f64;
    let tip = &r.outputs[0].psd;
    if let Some(path) = &a.plot {
        let f = plot::psd_chart(&r, &sff).save(path)?;
        report_plot(
            path,
            "the tip PSD and S_ff against w (log scale)",
            f,
            a.common.json,
        );
    }
    if a.common.json {
        crate::solve::print_json(&PsdReport {
            procedure: "psd",
            backend: backend_name(&chosen),
            dofs: n,
            freqs: &r.frequencies,
            sff: &sff,
            tip_psd: tip,
            cheap_outputs_s: cheap_s,
            full_s,
            full_bytes: a.full.then_some(bytes),
            rank1_kernel_s: kernel_s,
            rank1_kernel_gbps: kernel_s.map(|k| bytes / k / 1e9),
        })?;
    } else {
        println!(
            "psd: {n} DOFs, {} frequencies; the tip output in {cheap_s:.3} s",
            r.frequencies.len()
        );
        if let Some(s) = full_s {
            println!(
                "full S_xx on {}: {s:.4} s ({:.1} GB/s written)",
                backend_name(&chosen),
                bytes / s / 1e9
            );
        }
        for (w, p) in r.frequencies.iter().zip(tip).take(12) {
            println!("  w {w:>10.4}  S_tip {p:.6e}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_convolution(a: &ConvolutionArgs) -> Result<ExitCode> {
    at_least_one_sample(a.samples)?;
    if a.model.stiffness.is_some() {
        return crate::uq_model::run_convolution_model(a);
    }
    // Seed 001's example 3: the beam's model with every mode (the dense
    // eigensolver), the load on the tip.
    let beam = Beam::unit(a.dofs)?;
    let model = beam.model()?;
    let n = model.dofs();
    let mut shape = vec![0.0; n];
    shape[beam.tip()] = 1.0;
    let problem = ModelConvolution {
        model: &model,
        load_shape: shape,
        outputs: vec![beam.tip()],
        modes: ModeOptions::every(n),
        load: a.load.process(),
        steps: a.steps,
    };
    let chosen = Chosen::parse(&a.common.backend)?;
    if a.repeat == 0 {
        return Err(Error::InvalidArgument("--repeat must be at least 1".into()));
    }
    // Three histories come back for the plot; the statistics cover every sample.
    let keep = if a.plot.is_some() { 3 } else { 0 };
    let mut runs = Vec::with_capacity(a.repeat);
    for _ in 0..a.repeat {
        let run = match &chosen {
            Chosen::Cpu(b) => model_convolution(b, &problem, a.samples, a.common.seed, keep)?,
            Chosen::Cuda(b) => model_convolution(b, &problem, a.samples, a.common.seed, keep)?,
        };
        runs.push(run.response);
    }
    let first_s = runs[0].time_s;
    let fastest = runs.iter().map(|r| r.time_s).fold(f64::INFINITY, f64::min);
    let r = runs.swap_remove(0);
    if let Some(path) = &a.plot {
        let f = plot::convolution_chart(&r.histories, a.steps, a.load.dt).save(path)?;
        report_plot(path, "tip response of the first samples", f, a.common.json);
    }
    let mean = r.mean[a.steps - 1];
    let std = r.std[a.steps - 1];
    let n = r.peaks.len().max(1) as f64;
    let peak_mean = r.peaks.iter().sum::<f64>() / n;
    let peak_max = r.peaks.iter().fold(0.0f64, |m, v| m.max(*v));
    let fft = match &chosen {
        Chosen::Cpu(_) => "rustfft (host, Rayon)",
        Chosen::Cuda(_) => "cuFFT (device)",
    };
    if a.common.json {
        crate::solve::print_json(&ConvolutionReport {
            procedure: "convolution",
            backend: backend_name(&chosen),
            fft,
            dofs: a.dofs,
            steps: a.steps,
            samples: a.samples,
            seed: a.common.seed,
            final_tip_mean: mean,
            final_tip_std: std,
            peak_tip_mean: peak_mean,
            peak_tip_max: peak_max,
            setup_s: r.setup_s,
            time_s: fastest,
            first_s,
            repeat: a.repeat,
        })?;
    } else {
        println!(
            "convolution: {} DOFs, {} steps, {} samples ({fft}) in {fastest:.4} s (first run {first_s:.4} s, set-up {:.3} s)",
            a.dofs, a.steps, a.samples, r.setup_s
        );
        println!("tip at the last step: mean {mean:.6e}, std {std:.6e}");
        println!("peak |tip| per sample: mean {peak_mean:.6e}, max {peak_max:.6e}");
    }
    Ok(ExitCode::SUCCESS)
}

fn run_expectation(a: &ExpectationArgs) -> Result<ExitCode> {
    let chosen = Chosen::parse(&a.common.backend)?;
    if a.repeat == 0 {
        return Err(Error::InvalidArgument("--repeat must be at least 1".into()));
    }
    let mut first_s = None;
    let expr = a
        .expr
        .as_deref()
        .map(|t| gpuq_cubature::Expr::parse(t, a.dim))
        .transpose()?;
    let mut prepared = None;
    let (method, e) = match a.sparse_grid {
        Some(level) => match &expr {
            Some(x) => (
                "smolyak (host)",
                smolyak_expectation(a.dim, level, &|q| x.eval(q))?,
            ),
            None if a.integrand == "sum-of-squares" => {
                let g = |x: &[f64]| x.iter().map(|v| v * v).sum::<f64>();
                ("smolyak (host)", smolyak_expectation(a.dim, level, &g)?)
            }
            None => {
                return Err(Error::InvalidArgument(
                    "the sparse grid evaluates sum-of-squares or an --expr".into(),
                ))
            }
        },
        None => {
            let f = match &expr {
                Some(x) => Func::Expr(x),
                None => Func::Builtin(builtin(kind_of(&a.integrand)?, a.dim, &[], &[])?),
            };
            prepared = Some(match &chosen {
                Chosen::Cpu(b) => b.cub_prepare(f)?,
                Chosen::Cuda(b) => b.cub_prepare(f)?,
            });
            let mut best: Option<gpuq_uq::Expectation> = None;
            for _ in 0..a.repeat {
                let e = match &chosen {
                    Chosen::Cpu(b) => tensor_expectation(b, a.dim, a.points, f)?,
                    Chosen::Cuda(b) => tensor_expectation(b, a.dim, a.points, f)?,
                };
                first_s.get_or_insert(e.time_s);
                if best.as_ref().is_none_or(|b| e.time_s < b.time_s) {
                    best = Some(e);
                }
            }
            let e = best.ok_or_else(|| Error::InvalidArgument("no run".into()))?;
            ("tensor gauss-hermite", e)
        }
    };
    let exact = (expr.is_none() && a.integrand == "sum-of-squares").then_some(a.dim as f64);
    let integrand = if expr.is_some() {
        "expr"
    } else {
        a.integrand.as_str()
    };
    if a.common.json {
        crate::solve::print_json(&ExpectationReport {
            procedure: "expectation",
            backend: backend_name(&chosen),
            method,
            integrand,
            expression: a.expr.as_deref(),
            evaluation: prepared.as_ref().map_or("host", |p| p.evaluation),
            compile_s: prepared.as_ref().map_or(0.0, |p| p.compile_s),
            module: prepared.as_ref().and_then(|p| p.module),
            dim: a.dim,
            points_per_axis: a.sparse_grid.is_none().then_some(a.points),
            sparse_grid_level: a.sparse_grid,
            estimate: e.estimate,
            exact,
            evaluations: e.points,
            time_s: e.time_s,
            first_s,
            repeat: a.repeat,
        })?;
    } else {
        println!(
            "expectation ({method}, {}): E[{}] over {} normals = {:.15e} ({} evaluations, {:.3} s)",
            backend_name(&chosen),
            a.expr.as_deref().unwrap_or(integrand),
            a.dim,
            e.estimate,
            e.points,
            e.time_s
        );
        if let Some(x) = exact {
            println!("exact: {x}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON report of `gpuq uq static --json` on the beam.
#[derive(Serialize)]
struct StaticReport<'a> {
    /// "static".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// Degrees of freedom of the beam.
    dofs: usize,
    /// The DOF whose statistics are reported.
    dof: usize,
    /// Samples in the statistics.
    samples: usize,
    /// Seed of the random streams.
    seed: u64,
    /// Whether the element moduli are random (`--modulus-cov` above 0).
    random_modulus: bool,
    /// `--design`.
    design: &'a str,
    /// The solver that ran (`--solver`, auto resolved).
    solver: &'static str,
    /// The mean where the DOF is the tip deflection.
    tip_mean: Option<f64>,
    /// The standard deviation where the DOF is the tip deflection.
    tip_std: Option<f64>,
    /// Sample mean of u[dof].
    mean: f64,
    /// Sample standard deviation of u[dof].
    std: f64,
    /// (probability, quantile) pairs.
    quantiles: &'a [(f64, f64)],
    /// The exact mean of the tip deflection.
    exact_tip_mean: f64,
    /// The exact standard deviation of the tip deflection.
    exact_tip_std: f64,
    /// Samples whose K was not positive definite.
    failed: usize,
    /// Seconds of the backend's solves.
    time_s: f64,
}

/// The oscillator of `gpuq uq sdof`'s report.
#[derive(Serialize)]
struct Oscillator {
    /// Mass m.
    m: f64,
    /// Linear damping c.
    c: f64,
    /// Stiffness k.
    k: f64,
    /// Coefficient of the fractional damping (0 with `--linear`).
    g: f64,
    /// Exponent of the fractional damping.
    exponent: f64,
    /// Cubic (Duffing) stiffness k3.
    duffing: f64,
    /// The Bouc-Wen spring, if any.
    bouc_wen: Option<BoucWen>,
    /// Initial conditions.
    initial: Initial,
    /// Load amplitude A.
    amplitude: f64,
    /// Circular frequency of the deterministic forcing.
    omega: f64,
    /// Whether the white noise is applied.
    noise: bool,
}

/// A histogram of x at one time in `gpuq uq sdof`'s report.
#[derive(Serialize)]
struct SdofHistogram<'a> {
    /// The time in seconds.
    time: f64,
    /// Lower edge of the first bin.
    lo: f64,
    /// Upper edge of the last bin.
    hi: f64,
    /// Counts per bin (underflow first, overflow last).
    counts: &'a [u64],
}

/// The JSON report of `gpuq uq sdof --json`.
#[derive(Serialize)]
struct SdofReport<'a> {
    /// "sdof".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// Number of samples.
    samples: u64,
    /// Seed of the random streams.
    seed: u64,
    /// `--precision`: f32 or f64.
    precision: &'a str,
    /// `--design`.
    design: &'a str,
    /// Whether the fractional damping was dropped (`--linear`).
    linear: bool,
    /// The oscillator and its forcing.
    oscillator: Oscillator,
    /// Time steps.
    steps: usize,
    /// Time step in seconds.
    dt: f64,
    /// Mean of x at the last time.
    final_mean: f64,
    /// Variance of x at the last time.
    final_variance: f64,
    /// A^2 / (2 c k) for the linear system, else `None`.
    linear_stationary_variance: Option<f64>,
    /// Seconds of the backend's run.
    time_s: f64,
    /// Sample steps per second.
    steps_per_s: f64,
    /// The mean at every time point, with `--series`.
    mean: Option<&'a [f64]>,
    /// The variance at every time point, with `--series`.
    variance: Option<&'a [f64]>,
    /// The histograms of `--hist-times`.
    histograms: Vec<SdofHistogram<'a>>,
    /// The kernel's ingredients timed alone, with `--kernel-costs`.
    kernel_costs: Option<&'a gpuq_uq::sdof::SdofCosts>,
}

/// The JSON report of `gpuq uq psd --json` on the beam.
#[derive(Serialize)]
struct PsdReport<'a> {
    /// "psd".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// Degrees of freedom of the beam.
    dofs: usize,
    /// Angular frequencies (rad/s).
    freqs: &'a [f64],
    /// The load's PSD S_ff(w).
    sff: &'a [f64],
    /// The tip deflection's PSD.
    tip_psd: &'a [f64],
    /// Seconds of the tip output (the beam model's direct solve per
    /// frequency).
    cheap_outputs_s: f64,
    /// Seconds of the full S_xx(w) matrices, with `--full`.
    full_s: Option<f64>,
    /// Bytes of the full matrices, with `--full`.
    full_bytes: Option<f64>,
    /// Seconds of one launch of the CUDA rank-1 kernel alone, with `--full`.
    rank1_kernel_s: Option<f64>,
    /// Its bandwidth in GB/s written.
    rank1_kernel_gbps: Option<f64>,
}

/// The JSON report of `gpuq uq convolution --json` on the beam.
#[derive(Serialize)]
struct ConvolutionReport {
    /// "convolution".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// The FFT library and where it ran.
    fft: &'static str,
    /// Degrees of freedom of the beam.
    dofs: usize,
    /// Time steps.
    steps: usize,
    /// Load samples.
    samples: usize,
    /// Seed of the random streams.
    seed: u64,
    /// Mean tip deflection at the last step.
    final_tip_mean: f64,
    /// Its standard deviation.
    final_tip_std: f64,
    /// Mean over the samples of the peak |tip|.
    peak_tip_mean: f64,
    /// Largest peak |tip|.
    peak_tip_max: f64,
    /// Seconds of the set-up.
    setup_s: f64,
    /// Seconds of the fastest run.
    time_s: f64,
    /// Seconds of the first run.
    first_s: f64,
    /// `--repeat`.
    repeat: usize,
}

/// The JSON report of `gpuq uq expectation --json`.
#[derive(Serialize)]
struct ExpectationReport<'a> {
    /// "expectation".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// "tensor gauss-hermite" or "smolyak (host)".
    method: &'static str,
    /// The built-in's name or "expr".
    integrand: &'a str,
    /// `--expr`, when given.
    expression: Option<&'a str>,
    /// Where the integrand ran ("host" for the sparse grid).
    evaluation: &'static str,
    /// Seconds compiling device code.
    compile_s: f64,
    /// Where linked device code came from.
    module: Option<&'static str>,
    /// Number of standard normal variables.
    dim: usize,
    /// Gauss-Hermite points per axis (tensor rule).
    points_per_axis: Option<usize>,
    /// The Smolyak level (sparse grid).
    sparse_grid_level: Option<usize>,
    /// The estimate of E[g(q)].
    estimate: f64,
    /// The exact value, where known.
    exact: Option<f64>,
    /// Integrand evaluations.
    evaluations: u64,
    /// Seconds of the fastest run.
    time_s: f64,
    /// Seconds of the first run (tensor rule).
    first_s: Option<f64>,
    /// `--repeat`.
    repeat: usize,
}
