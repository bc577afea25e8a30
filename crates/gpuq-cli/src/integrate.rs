//! `gpuq integrate`: adaptive cubature (sequential CUHRE, two-phase,
//! breadth-first) or a tensor Gauss rule of a built-in integrand on either
//! backend, with a text summary or a JSON report on stdout.

use crate::solve::Chosen;
use clap::Args;
use gpuq_core::{Error, Result};
use gpuq_cubature::{builtin, integrate, kind_of, Func, Method, Options, Outcome, RuleKind};
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `gpuq integrate`.
#[derive(Args, Debug)]
pub struct IntegrateArgs {
    /// f1, f2, f3, f4, f5, genz-oscillatory, genz-product-peak, genz-corner-peak,
    /// genz-gaussian, genz-c0, genz-discontinuous or sum-of-squares.
    #[arg(long)]
    pub integrand: String,
    /// Dimension n (2..=16; 1..=16 for tensor rules).
    #[arg(long)]
    pub dim: usize,
    /// Genz difficulty parameters a: one value for every axis or n values (default 5).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub a: Vec<f64>,
    /// Genz shift parameters u: one value for every axis or n values (default 0.5).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub u: Vec<f64>,
    /// Relative tolerance.
    #[arg(long, default_value_t = 1e-6)]
    pub rel_tol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = 0.0)]
    pub abs_tol: f64,
    /// cuhre, two-phase, breadth-first, gauss-legendre:NA, gauss-legendre:auto (orders 2, 3, ...
    /// until successive ones agree within the tolerance) or gauss-hermite:NA.
    #[arg(long, default_value = "two-phase")]
    pub method: String,
    /// Rule of the adaptive methods: cuhre (degree 13/11/9 by n), degree9 or genz-malik.
    #[arg(long, default_value = "cuhre")]
    pub rule: String,
    /// Most integrand evaluations.
    #[arg(long, default_value_t = 100_000_000)]
    pub max_evals: u64,
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
    /// Lower end of every axis (upper end with --hi); the unit cube by default.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub lo: f64,
    /// Upper end of every axis.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub hi: f64,
    /// Backend: cpu, cuda (device 0) or auto.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Print a JSON report instead of text (`time_s`: the integration alone;
    /// `setup_s`: the backend's start and the integrand's set-up; `wall_s`: both).
    #[arg(long)]
    pub json: bool,
    /// Run the integration this many times in the process: the report is the
    /// first run's (a cold start: thread pool, device memory pool and host
    /// pages first touched inside it); `repeat_time_s` lists every run's time
    /// (later runs reuse what the first set up; the results are identical).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
}

fn rule_kind(name: &str) -> Result<RuleKind> {
    match name {
        "cuhre" => Ok(RuleKind::Cuhre),
        "degree9" => Ok(RuleKind::Degree9),
        "genz-malik" => Ok(RuleKind::GenzMalik7),
        other => Err(Error::InvalidArgument(format!(
            "unknown rule '{other}' (available: cuhre, degree9, genz-malik)"
        ))),
    }
}

/// Runs `gpuq integrate`; exit status 0 when converged, 3 when a cap stopped it.
pub fn run(a: &IntegrateArgs) -> Result<ExitCode> {
    let start = Instant::now();
    let kind = kind_of(&a.integrand)?;
    let f = builtin(kind, a.dim, &a.a, &a.u)?;
    let method: Method = a.method.parse()?;
    let opts = Options {
        rel_tol: a.rel_tol,
        abs_tol: a.abs_tol,
        max_evals: a.max_evals,
        rule: rule_kind(&a.rule)?,
        max_boxes: a.max_boxes,
        initial_boxes: a.initial_boxes,
        split_aim: a.split_aim,
    };
    let (lo, hi) = (vec![a.lo; a.dim], vec![a.hi; a.dim]);
    let chosen = Chosen::parse(&a.backend)?;
    let once = || match &chosen {
        Chosen::Cpu(b) => integrate(b, method, Func::Builtin(f), &lo, &hi, &opts),
        Chosen::Cuda(b) => integrate(b, method, Func::Builtin(f), &lo, &hi, &opts),
    };
    let backend = match &chosen {
        Chosen::Cpu(_) => "cpu",
        Chosen::Cuda(_) => "cuda",
    };
    let o: Outcome = once()?;
    // The integration alone (both phases); the backend's start (for CUDA the
    // driver and the PTX load) and the integrand's set-up are `setup_s`.
    let time_s = o.timings.total_s;
    let wall_s = start.elapsed().as_secs_f64();
    let mut repeat_time_s = vec![time_s];
    for _ in 1..a.repeat {
        repeat_time_s.push(once()?.timings.total_s);
    }
    let setup_s = (wall_s - time_s).max(0.0);
    if a.json {
        let report = json!({
            "integrand": a.integrand,
            "dim": a.dim,
            "method": a.method,
            "rule": a.rule,
            "backend": backend,
            "rel_tol": a.rel_tol,
            "abs_tol": a.abs_tol,
            "estimate": o.estimate,
            "error": o.error,
            "evaluations": o.evaluations,
            "boxes": o.boxes,
            "rounds": o.rounds,
            "converged": o.converged(),
            "status": o.status.describe(),
            "phase1_s": o.timings.phase1_s,
            "evaluate_s": o.timings.evaluate_s,
            "phase2_s": o.timings.phase2_s,
            "time_s": time_s,
            "setup_s": setup_s,
            "wall_s": wall_s,
            "repeat_time_s": repeat_time_s,
        });
        println!("{report}");
    } else {
        println!(
            "{} n={} {} on {backend}: {:.15e} +- {:.3e}",
            a.integrand, a.dim, a.method, o.estimate, o.error
        );
        println!(
            "{}; {} evaluations, {} boxes, {} rounds; phase 1 {:.3} s, phase 2 {:.3} s, total {:.3} s (with the backend's start {:.3} s)",
            o.status.describe(),
            o.evaluations,
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
    Ok(if o.converged() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
