//! `gpuq integrate`: adaptive cubature (sequential CUHRE, two-phase,
//! breadth-first) or a tensor Gauss rule of a built-in integrand, an
//! expression, or user CUDA C or PTX, on either backend, with a text summary
//! or a JSON report on stdout.

use crate::solve::Chosen;
use clap::{ArgGroup, Args};
use gpuq_core::{Error, Result};
use gpuq_cubature::{
    builtin, integrate, kind_of, plan, CubatureKernels, Expr, Func, Method, Options, Outcome,
    Prepared, RuleKind, Status, UserCode,
};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `gpuq integrate`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("what").required(true).args(["integrand", "expr", "cuda_source", "ptx"])))]
pub struct IntegrateArgs {
    /// A built-in: f1, f2, f3, f4, f5, genz-oscillatory, genz-product-peak,
    /// genz-corner-peak, genz-gaussian, genz-c0, genz-discontinuous or sum-of-squares.
    #[arg(long, value_parser = gpuq_cubature::func::NAMES)]
    pub integrand: Option<String>,
    /// An expression in x1..xn (or x[i]), e.g. 'exp(-sum(i, 1, n, x[i]^2))' (the
    /// language: `gpuq_expr`'s docs); compiled closures on the CPU, CUDA C
    /// compiled by NVRTC on the GPU.
    #[arg(long, allow_hyphen_values = true)]
    pub expr: Option<String>,
    /// A CUDA C file defining `extern "C" __device__ double gpuq_integrand(const
    /// double *x, unsigned int n)`, or holding only that function's body, e.g.
    /// `return exp(-x[0] * x[1]);` (CUDA backend only).
    #[arg(long)]
    pub cuda_source: Option<String>,
    /// A PTX file defining `gpuq_integrand` (e.g. a Rust `no_std` crate built for
    /// nvptx64: see examples/rust-integrand; CUDA backend only).
    #[arg(long)]
    pub ptx: Option<String>,
    /// Dimension n (2..=16; 1..=16 for tensor rules).
    #[arg(long)]
    pub dim: usize,
    /// Genz difficulty parameters a: one value for every axis or n values (default 5).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub a: Vec<f64>,
    /// Genz shift parameters u: one value for every axis or n values (default 0.5).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub u: Vec<f64>,
    /// Relative tolerance of the estimate's error (`--rel-tol`, deprecated, is
    /// the old spelling).
    #[arg(
        long = "tol",
        alias = "rel-tol",
        default_value_t = 1e-6,
        allow_negative_numbers = true
    )]
    pub rel_tol: f64,
    /// Absolute tolerance (`--abs-tol`, deprecated, is the old spelling).
    #[arg(
        long = "atol",
        alias = "abs-tol",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub abs_tol: f64,
    /// auto (an adaptive method chosen per backend, dimension and tolerance:
    /// see `gpuq_cubature::Method::choose`), cuhre, two-phase, breadth-first,
    /// gauss-legendre:NA, gauss-legendre:auto (orders 2, 3, ... until successive
    /// ones agree within the tolerance) or gauss-hermite:NA.
    #[arg(long, default_value = "auto", value_parser = crate::choices::cubature_method())]
    pub method: String,
    /// Rule of the adaptive methods: cuhre (degree 13/11/9 by n), degree9 or genz-malik.
    #[arg(long, default_value = "cuhre", value_parser = clap::builder::PossibleValuesParser::new(RuleKind::NAMES))]
    pub rule: String,
    /// Most integrand evaluations: a number (2e10 or 20000000000) or auto,
    /// about a minute of the backend's nominal throughput (the CPU backend
    /// 1.8 x 10^8 per thread, one thread for sequential CUHRE; the CUDA
    /// backend 1.2 x 10^11).
    #[arg(long, default_value = "auto")]
    pub max_evals: String,
    /// Most seconds of the integration: the adaptive methods stop between
    /// rounds once it has passed, with the estimate so far and status
    /// "not converged (time limit)". No limit by default.
    #[arg(long)]
    pub max_time: Option<f64>,
    /// Most live boxes (first-phase L_max, breadth-first memory bound; about
    /// 16 n + 24 bytes each on the host).
    #[arg(long, default_value_t = 1 << 18)]
    pub max_boxes: usize,
    /// Boxes of the initial l^n partition (l^n at most this).
    #[arg(long, default_value_t = 1 << 10)]
    pub initial_boxes: usize,
    /// Breadth-first: split the worst bad boxes until the rest's error is within
    /// this fraction of the target, in [0, 1) (0: split every bad box).
    #[arg(long, default_value_t = 0.5)]
    pub split_aim: f64,
    /// Lower ends: one value for every axis or n comma-separated values (the
    /// unit cube by default; bounds must be finite).
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        default_value = "0"
    )]
    pub lo: Vec<f64>,
    /// Upper ends: one value for every axis or n comma-separated values.
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        default_value = "1"
    )]
    pub hi: Vec<f64>,
    /// Backend: cpu, cuda (device 0) or auto (cuda when a device is present).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "auto"])]
    pub backend: String,
    /// Print a JSON report instead of text (`time_s`: the integration alone;
    /// `compile_s`: compiling and linking an expression or user code for the
    /// device, 0 when a cache had it; `setup_s`: the backend's start and the
    /// integrand's set-up, compile included; `wall_s`: all).
    #[arg(long)]
    pub json: bool,
    /// Run the integration this many times in the process: the report is the
    /// first run's (a cold start: thread pool, device memory pool and host
    /// pages first touched inside it); `repeat_time_s` lists every run's time
    /// (later runs reuse what the first set up; the results are identical).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
}

/// `--max-evals`: auto ([`Options::BACKEND_CAP`]) or a positive count, in
/// integer or floating notation.
fn max_evals(text: &str) -> Result<u64> {
    if text == "auto" {
        return Ok(Options::BACKEND_CAP);
    }
    let bad = || {
        Error::InvalidArgument(format!(
            "--max-evals {text}: expected auto or a positive count (e.g. 2e10)"
        ))
    };
    let v = match text.parse::<u64>() {
        Ok(v) => v,
        Err(_) => {
            let x: f64 = text.parse().map_err(|_| bad())?;
            if !(x.is_finite() && x >= 1.0 && x.fract() == 0.0 && x < u64::MAX as f64) {
                return Err(bad());
            }
            x as u64
        }
    };
    if v == 0 {
        return Err(bad());
    }
    Ok(v)
}

/// One bound list: a value for every axis, or `dim` values.
fn bounds(v: &[f64], dim: usize, what: &str) -> Result<Vec<f64>> {
    match v.len() {
        1 => Ok(vec![v[0]; dim]),
        l if l == dim => Ok(v.to_vec()),
        l => Err(Error::InvalidArgument(format!(
            "--{what} has {l} values; give 1 or {dim} (one per axis)"
        ))),
    }
}

/// Reads a file named by an option.
fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_string(),
        source,
    })
}

/// What the arguments ask to integrate, owned: the `Func` borrows from it.
enum Integrand {
    Builtin(Box<gpuq_cubature::Builtin>),
    Expr(Expr),
    Code(gpuq_cubature::CodeKind, String),
}

impl Integrand {
    fn from_args(a: &IntegrateArgs) -> Result<Self> {
        if let Some(name) = &a.integrand {
            let b = builtin(kind_of(name)?, a.dim, &a.a, &a.u)?;
            return Ok(Integrand::Builtin(Box::new(b)));
        }
        if !a.a.is_empty() || !a.u.is_empty() {
            return Err(Error::InvalidArgument(
                "--a and --u are parameters of the built-in integrands".into(),
            ));
        }
        if let Some(text) = &a.expr {
            return Ok(Integrand::Expr(Expr::parse(text, a.dim)?));
        }
        if let Some(path) = &a.cuda_source {
            return Ok(Integrand::Code(gpuq_cubature::CodeKind::CudaC, read(path)?));
        }
        match &a.ptx {
            Some(path) => Ok(Integrand::Code(gpuq_cubature::CodeKind::Ptx, read(path)?)),
            None => Err(Error::InvalidArgument(
                "give --integrand, --expr, --cuda-source or --ptx".into(),
            )),
        }
    }

    /// The user code of a `Code` integrand, checked.
    fn code(&self, dim: usize) -> Result<Option<UserCode<'_>>> {
        match self {
            Integrand::Code(gpuq_cubature::CodeKind::CudaC, text) => {
                Ok(Some(UserCode::cuda_source(text, dim)?))
            }
            Integrand::Code(gpuq_cubature::CodeKind::Ptx, text) => {
                Ok(Some(UserCode::ptx(text, dim)?))
            }
            _ => Ok(None),
        }
    }

    /// What the report's `integrand` says: the built-in's name, "expr",
    /// "cuda-c" or "ptx".
    fn name<'a>(&self, a: &'a IntegrateArgs) -> &'a str {
        match self {
            Integrand::Builtin(_) => a.integrand.as_deref().unwrap_or("builtin"),
            Integrand::Expr(_) => "expr",
            Integrand::Code(gpuq_cubature::CodeKind::CudaC, _) => "cuda-c",
            Integrand::Code(gpuq_cubature::CodeKind::Ptx, _) => "ptx",
        }
    }
}

/// Prepares `f` on the chosen backend (compiles device code there).
fn prepare(chosen: &Chosen, f: Func<'_>) -> Result<Prepared> {
    match chosen {
        Chosen::Cpu(b) => b.cub_prepare(f),
        Chosen::Cuda(b) => b.cub_prepare(f),
    }
}

/// Runs `gpuq integrate`; exit status 0 when converged, 3 when a cap or the
/// time limit stopped it.
pub fn run(a: &IntegrateArgs) -> Result<ExitCode> {
    let start = Instant::now();
    let what = Integrand::from_args(a)?;
    let code = what.code(a.dim)?;
    let f = match (&what, &code) {
        (Integrand::Builtin(b), _) => Func::Builtin(**b),
        (Integrand::Expr(e), _) => Func::Expr(e),
        (Integrand::Code(..), c) => Func::Code(c.as_ref().ok_or_else(|| {
            Error::InvalidArgument("device code without its checked form".into())
        })?),
    };
    let method: Method = a.method.parse()?;
    let opts = Options {
        rel_tol: a.rel_tol,
        abs_tol: a.abs_tol,
        max_evals: max_evals(&a.max_evals)?,
        max_time: a.max_time,
        rule: RuleKind::parse(&a.rule)?,
        max_boxes: a.max_boxes,
        initial_boxes: a.initial_boxes,
        split_aim: a.split_aim,
    };
    let (lo, hi) = (bounds(&a.lo, a.dim, "lo")?, bounds(&a.hi, a.dim, "hi")?);
    let chosen = Chosen::parse(&a.backend)?;
    let prepared = prepare(&chosen, f)?;
    opts.check()?;
    let (_, resolved) = match &chosen {
        Chosen::Cpu(b) => plan(b, method, f, a.dim, &opts),
        Chosen::Cuda(b) => plan(b, method, f, a.dim, &opts),
    };
    let once = || match &chosen {
        Chosen::Cpu(b) => integrate(b, method, f, &lo, &hi, &opts),
        Chosen::Cuda(b) => integrate(b, method, f, &lo, &hi, &opts),
    };
    let backend = match &chosen {
        Chosen::Cpu(_) => "cpu",
        Chosen::Cuda(_) => "cuda",
    };
    let o: Outcome = once()?;
    // The integration alone (both phases); the backend's start (for CUDA the
    // driver and the PTX load) and the integrand's set-up (a device compile
    // included) are `setup_s`.
    let time_s = o.timings.total_s;
    let wall_s = start.elapsed().as_secs_f64();
    let mut repeat_time_s = vec![time_s];
    for _ in 1..a.repeat {
        if gpuq_core::interrupt::requested() {
            break;
        }
        repeat_time_s.push(once()?.timings.total_s);
    }
    let setup_s = (wall_s - time_s).max(0.0);
    let name = what.name(a);
    if a.json {
        let report = IntegrateReport {
            integrand: name,
            expression: a.expr.as_deref(),
            source: a.cuda_source.as_deref().or(a.ptx.as_deref()),
            evaluation: prepared.evaluation,
            compile_s: prepared.compile_s,
            module: prepared.module,
            dim: a.dim,
            lo: &lo,
            hi: &hi,
            method: &a.method,
            method_used: o.method.to_string(),
            max_evals: resolved.max_evals,
            max_time: a.max_time,
            rule: &a.rule,
            backend,
            rel_tol: a.rel_tol,
            abs_tol: a.abs_tol,
            estimate: o.estimate,
            error: o.error,
            evaluations: o.evaluations,
            boxes: o.boxes,
            rounds: o.rounds,
            converged: o.converged(),
            status: o.status.describe(),
            stop_reason: o.status.reason(),
            phase1_s: o.timings.phase1_s,
            evaluate_s: o.timings.evaluate_s,
            phase2_s: o.timings.phase2_s,
            time_s,
            setup_s,
            wall_s,
            repeat_time_s: &repeat_time_s,
        };
        crate::solve::print_json(&report)?;
    } else {
        let shown = a.expr.as_deref().unwrap_or(name);
        let ran = if method == Method::Auto {
            format!("auto ({})", o.method)
        } else {
            o.method.to_string()
        };
        println!(
            "{shown} n={} {ran} on {backend} ({}): {:.15e} +- {:.3e}",
            a.dim, prepared.evaluation, o.estimate, o.error
        );
        if let Some(m) = prepared.module {
            println!(
                "device code: {m} in {:.3} s (not in the times below)",
                prepared.compile_s
            );
        }
        println!(
            "{}; {} evaluations of at most {}, {} boxes, {} rounds; phase 1 {:.3} s, phase 2 {:.3} s, total {:.3} s (with the backend's start {:.3} s)",
            o.status.describe(),
            o.evaluations,
            resolved.max_evals,
            o.boxes,
            o.rounds,
            o.timings.phase1_s,
            o.timings.phase2_s,
            time_s,
            wall_s
        );
        if a.repeat > 1 {
            println!("times of the {} runs: {repeat_time_s:.4?} s", a.repeat);
        }
    }
    Ok(match o.status {
        Status::Converged => ExitCode::SUCCESS,
        Status::Interrupted => ExitCode::from(130),
        _ => ExitCode::from(3),
    })
}

/// The JSON report of `gpuq integrate --json`.
#[derive(Serialize)]
struct IntegrateReport<'a> {
    /// The built-in's name, "expr", "cuda-c" or "ptx".
    integrand: &'a str,
    /// `--expr`, when given.
    expression: Option<&'a str>,
    /// `--cuda-source` or `--ptx`, when given.
    source: Option<&'a str>,
    /// Where the integrand ran ([`gpuq_cubature::kernels::Prepared::evaluation`]).
    evaluation: &'static str,
    /// Seconds compiling device code.
    compile_s: f64,
    /// Where linked device code came from.
    module: Option<&'static str>,
    /// Dimension.
    dim: usize,
    /// Lower bounds.
    lo: &'a [f64],
    /// Upper bounds.
    hi: &'a [f64],
    /// `--method` as given.
    method: &'a str,
    /// The method that ran.
    method_used: String,
    /// The evaluation cap in force.
    max_evals: u64,
    /// `--max-time`.
    max_time: Option<f64>,
    /// `--rule`.
    rule: &'a str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// Relative tolerance.
    rel_tol: f64,
    /// Absolute tolerance.
    abs_tol: f64,
    /// The estimate of the integral.
    estimate: f64,
    /// Its error estimate.
    error: f64,
    /// Integrand evaluations.
    evaluations: u64,
    /// Boxes in the final partition.
    boxes: u64,
    /// Rounds (or splits of sequential CUHRE).
    rounds: u64,
    /// Whether the tolerance was met.
    converged: bool,
    /// "converged" or "not converged (...)".
    status: &'static str,
    /// Why the run stopped.
    stop_reason: &'static str,
    /// Seconds of the rounds.
    phase1_s: f64,
    /// Of them, seconds in batch evaluations.
    evaluate_s: f64,
    /// Seconds of the second phase.
    phase2_s: f64,
    /// Seconds of the integration.
    time_s: f64,
    /// Seconds of the backend's start and the integrand's set-up.
    setup_s: f64,
    /// Seconds of the whole command.
    wall_s: f64,
    /// Seconds of each `--repeat` run.
    repeat_time_s: &'a [f64],
}
