//! `gpuq solve --method mc-forward|mc-adjoint|mcsa`: the Monte Carlo solvers.

use crate::args::SolveArgs;
use crate::rhs::{RhsOutcome, RightHandSide};
use crate::solve::{print_report, Chosen, Source};
use gpuq_core::{Error, Result};
use gpuq_mcls::{
    mcsa, Estimator, Layout, Mapping, McMethod, McOptions, McResult, McStatus, McsaOptions,
    MonteCarlo, WalkBackend,
};
use gpuq_sparse::matrix_market as mm;
use gpuq_sparse::Csr;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Whether `method` names a Monte Carlo solver.
pub fn is_monte_carlo(method: &str) -> bool {
    matches!(method, "mc-forward" | "mc-adjoint" | "mcsa")
}

/// Runs the Monte Carlo solve the arguments ask for.
pub fn run(args: &SolveArgs) -> Result<ExitCode> {
    let opts = checked_options(args)?;
    let source = Source::from_args(args)?;
    let (a, rhs) = load_real(&source, args)?;
    let reporting = Reporting::alone(&rhs);
    match Chosen::parse(&args.backend)? {
        Chosen::Cpu(backend) => run_on(&backend, args, (&a, &rhs.b), &opts, &reporting),
        Chosen::Cuda(backend) => run_on(&backend, args, (&a, &rhs.b), &opts, &reporting),
    }
}

/// The options of a Monte Carlo solve, after the checks that do not need the
/// matrix (`--plot` only with mcsa, f64 only).
pub(crate) fn checked_options(args: &SolveArgs) -> Result<McOptions> {
    if args.plot.is_some() && args.method != "mcsa" {
        return Err(Error::InvalidArgument(format!(
            "--plot draws a residual history: {} does not iterate (mcsa does)",
            args.method
        )));
    }
    if args.precision != "f64" {
        return Err(Error::InvalidArgument(format!(
            "the Monte Carlo methods run in f64 only (--precision {})",
            args.precision
        )));
    }
    options(args)
}

/// A and b of a Monte Carlo solve (real matrices only).
pub(crate) fn load_real(
    source: &Source,
    args: &SolveArgs,
) -> Result<(Csr<f64>, RightHandSide<f64>)> {
    if source.is_complex()? {
        return Err(Error::InvalidArgument(
            "the Monte Carlo methods take real matrices; this one is complex".into(),
        ));
    }
    source.load::<f64>(&args.rhs)
}

/// The Monte Carlo options from the arguments (validated).
fn options(args: &SolveArgs) -> Result<McOptions> {
    let opts = McOptions {
        method: if args.method == "mc-forward" {
            McMethod::Forward
        } else {
            McMethod::Adjoint
        },
        histories: args.histories,
        estimator: match &args.estimator {
            Some(name) => Estimator::parse(name)?,
            None if args.method == "mcsa" => Estimator::Expected,
            None => Estimator::Collision,
        },
        max_steps: args.max_steps,
        cutoff: args.cutoff,
        seed: args.seed,
        batches: args.batches,
        layout: match args.walk_layout.as_str() {
            "soa" => Layout::Soa,
            "aos" => Layout::Aos,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown walk layout '{other}' (available: soa, aos)"
                )))
            }
        },
        mapping: match args.mapping.as_str() {
            "thread-per-entry" => Mapping::ThreadPerEntry,
            "thread-per-history" => Mapping::ThreadPerHistory,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown mapping '{other}' (available: thread-per-entry, thread-per-history)"
                )))
            }
        },
        tolerance: args.tol,
    };
    opts.validate()?;
    Ok(opts)
}

/// Who reports a Monte Carlo solve, what b is, and what a distributed run
/// adds to its report (`ranks`, `gpus`, `comm`).
pub(crate) struct Reporting<'a> {
    /// Whether this process prints the report and writes `--out` and
    /// `--plot` (one rank of many does).
    pub root: bool,
    /// The right-hand side, where this process made it (the root).
    pub rhs: Option<&'a RightHandSide<f64>>,
    /// Fields added to the JSON report (and printed on one line otherwise).
    pub extra: Vec<(&'static str, serde_json::Value)>,
}

impl<'a> Reporting<'a> {
    /// The report of a one-process run.
    fn alone(rhs: &'a RightHandSide<f64>) -> Self {
        Reporting {
            root: true,
            rhs: Some(rhs),
            extra: Vec::new(),
        }
    }

    /// Prints `report` (text by `text`, or JSON) with the right-hand side's
    /// fields for the answer `x` and the extra fields.
    fn print<R: Serialize>(
        &self,
        report: &R,
        x: Option<&[f64]>,
        json: bool,
        text: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let outcome = self.rhs.map(|rhs| rhs.outcome(x));
        if !json {
            text()?;
            if let Some(outcome) = &outcome {
                println!("{}", outcome.line());
            }
            if !self.extra.is_empty() {
                let fields: Vec<String> = self
                    .extra
                    .iter()
                    .map(|(k, v)| {
                        format!("{k}: {}", v.as_str().map_or(v.to_string(), str::to_string))
                    })
                    .collect();
                println!("{}", fields.join("  "));
            }
            return Ok(());
        }
        crate::solve::print_json(&McReport {
            report,
            outcome: outcome.as_ref(),
            extra: self.extra.iter().map(|(k, v)| (*k, v)).collect(),
        })
    }
}

/// The JSON report of a Monte Carlo solve: the solver's report, b and the
/// error, and the fields of [`Reporting::extra`], as one object.
#[derive(Serialize)]
struct McReport<'a, R: Serialize> {
    /// The solver's report ([`McResult`] or the MCSA's `SolveReport`).
    #[serde(flatten)]
    report: &'a R,
    /// b and the error, where this process made b.
    #[serde(flatten)]
    outcome: Option<&'a RhsOutcome>,
    /// What a distributed run adds (`ranks`, `gpus`, `comm`); a field given
    /// twice takes its last value.
    #[serde(flatten)]
    extra: BTreeMap<&'static str, &'a serde_json::Value>,
}

/// The Monte Carlo solve of A x = b on the walk backend `backend` (a local
/// one, or `gpuq_dist::DistWalk` over MPI ranks), reported as `reporting`
/// says.
pub(crate) fn run_on<B: WalkBackend>(
    backend: &B,
    args: &SolveArgs,
    (a, b): (&Csr<f64>, &[f64]),
    opts: &McOptions,
    reporting: &Reporting,
) -> Result<ExitCode> {
    let root = reporting.root;
    let mc = MonteCarlo::new(backend, a, opts.layout)?;
    if root {
        for w in &mc.setup().warnings {
            eprintln!("gpuq: warning: {w}");
        }
    }
    if args.method == "mcsa" {
        let mcsa_opts = McsaOptions {
            tolerance: args.tol(),
            max_iterations: args.max_iter.unwrap_or(100),
            inner: *opts,
            ..McsaOptions::default()
        };
        let (x, report, stopped) = crate::solve::ended(mcsa(&mc, b, &mcsa_opts))?;
        if root {
            if let (Some(path), Some(x)) = (&args.out, &x) {
                mm::save_dense_vector(x, path)?;
            }
            reporting.print(&report, x.as_deref(), args.json, || {
                print_report(&report, false)
            })?;
            crate::solve::write_plot(args, &report)?;
        }
        return Ok(crate::solve::exit_status(&report, stopped.as_deref()));
    }
    let result = mc.solve(b, opts)?;
    let interrupted = result.status == McStatus::Interrupted;
    if root {
        if let Some(path) = args.out.as_ref().filter(|_| !interrupted) {
            mm::save_dense_vector(&result.x, path)?;
        }
        reporting.print(&result, Some(&result.x), args.json, || {
            print_result(&result, false)
        })?;
    }
    if result.status.is_success() {
        return Ok(ExitCode::SUCCESS);
    }
    if interrupted {
        return Ok(ExitCode::from(130));
    }
    if root {
        let why = match result.status {
            McStatus::Inaccurate => "the estimate is worse than x = 0 (relative residual above 1: \
                                     too few histories for the walks' variance)"
                .to_string(),
            _ => format!(
                "the relative residual misses the tolerance {:.1e}",
                args.tol()
            ),
        };
        eprintln!(
            "gpuq: {} ({}): {why}; true relative residual {:.3e}",
            result.status.name().replace('_', " "),
            result.method,
            result.relative_residual
        );
    }
    Ok(ExitCode::from(3))
}

fn print_result(r: &McResult, json: bool) -> Result<()> {
    if json {
        let text = serde_json::to_string_pretty(r)
            .map_err(|e| Error::InvalidArgument(format!("cannot serialise the result: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    println!(
        "method {} ({} estimator, {} layout) on {}, n = {}",
        r.method, r.estimator, r.layout, r.backend, r.n
    );
    println!(
        "rho(H) = {:.6}  rho(H^) = {:.6}  histories: {}  moves: {} ({:.1} per history)",
        r.rho_h,
        r.rho_hat,
        r.histories,
        r.steps,
        r.steps as f64 / r.histories.max(1) as f64
    );
    let se = r
        .std_error
        .as_ref()
        .map_or(String::from("n/a (one batch)"), |se| {
            format!(
                "{:.3e} mean, {:.3e} max",
                se.iter().sum::<f64>() / se.len().max(1) as f64,
                se.iter().cloned().fold(0.0, f64::max)
            )
        });
    println!(
        "status: {}  relative residual (true): {:.4e}  standard error ({} batches): {se}",
        r.status.name(),
        r.relative_residual,
        r.batches
    );
    println!(
        "time: setup {:.4} s, walks {:.4} s, reduction {:.4} s  ({:.3e} histories/s, {:.3e} moves/s)",
        r.timing.setup_s,
        r.timing.walks_s,
        r.timing.reduction_s,
        r.histories_per_s(),
        r.steps_per_s()
    );
    Ok(())
}
