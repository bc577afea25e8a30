//! `gpuq solve`.

use crate::args::{RhsArgs, SolveArgs};
use crate::progress::Progress;
use crate::rhs::{RightHandSide, WithRhs};
use gpuq_core::{Complex, Error, Result, Scalar, SolveReport, SolveStatus};
use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_krylov::{
    solve_csr_monitored, KrylovBackend, KrylovOptions, Method, Preconditioner, SolverConfig,
};
use gpuq_sparse::generators::ProblemSpec;
use gpuq_sparse::matrix_market as mm;
use gpuq_sparse::{Csr, Layout};
use std::path::Path;
use std::process::ExitCode;

/// Where A comes from.
pub(crate) enum Source<'a> {
    File(&'a Path),
    Generated(ProblemSpec),
}

/// Runs a solve as the arguments say; returns the exit code (3 when not converged).
pub fn run(args: &SolveArgs) -> Result<ExitCode> {
    if crate::montecarlo::is_monte_carlo(&args.method) {
        return crate::montecarlo::run(args);
    }
    if crate::amg::is_amg(&args.precond) {
        return crate::amg::run_solve(args);
    }
    let config = SolverConfig {
        method: parse_method(&args.method)?,
        precond: parse_precond(&args.precond)?,
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
    let complex = source.is_complex()?;
    match &backend {
        Chosen::Cpu(b) => by_precision(b, args, &source, &config, complex),
        Chosen::Cuda(b) => by_precision(b, args, &source, &config, complex),
    }
}

/// The backend picked by `--backend`.
pub(crate) enum Chosen {
    Cpu(CpuBackend),
    Cuda(CudaBackend),
}

impl Chosen {
    /// `cpu`, `cuda` (device 0) or `auto` (CUDA when a device is present).
    pub(crate) fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "cpu" => Chosen::Cpu(CpuBackend::new()),
            "cuda" => Chosen::Cuda(CudaBackend::new(0)?),
            "auto" => {
                CudaBackend::new(0).map_or_else(|_| Chosen::Cpu(CpuBackend::new()), Chosen::Cuda)
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown backend '{other}' (available: cpu, cuda, auto)"
                )))
            }
        })
    }
}

impl<'a> Source<'a> {
    /// The matrix file or the generated problem the arguments name.
    pub(crate) fn from_args(args: &'a SolveArgs) -> Result<Self> {
        match (&args.generate, &args.matrix) {
            (Some(spec), _) => Ok(Source::Generated(ProblemSpec::parse(spec)?)),
            (None, Some(path)) => Ok(Source::File(path)),
            (None, None) => Err(Error::InvalidArgument(
                "give a Matrix Market file or --generate SPEC".into(),
            )),
        }
    }

    /// Whether A is complex (from the file's header or the problem's kind).
    pub(crate) fn is_complex(&self) -> Result<bool> {
        Ok(match self {
            Source::File(path) => gpuq_sparse::file::is_complex(path)?,
            Source::Generated(spec) => spec.is_complex(),
        })
    }

    /// Loads A, and b as `rhs` says ([`RightHandSide::make`]). Errors when A
    /// is not square or b's length differs from A's.
    pub(crate) fn load<T: Scalar>(&self, rhs: &RhsArgs) -> Result<(Csr<T>, RightHandSide<T>)> {
        let (a, own_rhs): (Csr<T>, Option<Vec<T>>) = match self {
            Source::File(path) => (gpuq_sparse::file::read_csr(path)?, None),
            Source::Generated(spec) => {
                let g = spec.build()?;
                (g.matrix, g.rhs)
            }
        };
        if a.nrows() != a.ncols() {
            return Err(Error::Precondition {
                method: "solve",
                reason: format!("matrix is {} x {}, not square", a.nrows(), a.ncols()),
            });
        }
        let b = RightHandSide::make(&a, own_rhs, &rhs.choice(), rhs.rhs_seed)?;
        Ok((a, b))
    }
}

fn by_precision<B: KrylovBackend>(
    backend: &B,
    args: &SolveArgs,
    source: &Source,
    config: &SolverConfig,
    complex: bool,
) -> Result<ExitCode> {
    match (args.precision.as_str(), complex) {
        ("f64", false) => solve_typed::<B, f64>(backend, args, source, config),
        ("f64", true) => solve_typed::<B, Complex<f64>>(backend, args, source, config),
        ("f32", false) => solve_typed::<B, f32>(backend, args, source, config),
        ("f32", true) => solve_typed::<B, Complex<f32>>(backend, args, source, config),
        (p, _) => Err(Error::InvalidArgument(format!(
            "unknown precision '{p}' (available: f32, f64)"
        ))),
    }
}

fn solve_typed<B: KrylovBackend, T: Scalar>(
    backend: &B,
    args: &SolveArgs,
    source: &Source,
    config: &SolverConfig,
) -> Result<ExitCode> {
    let (a, rhs) = source.load::<T>(&args.rhs)?;
    let b = &rhs.b;
    let config = &SolverConfig {
        layout: layout_for(&args.layout, &a, backend)?,
        ..config.clone()
    };
    let mut progress = Progress::new();
    let result = solve_csr_monitored(backend, &a, b, config, &mut |it, r| progress.update(it, r));
    progress.finish();
    let (x, report, stopped) = ended(result)?;
    if let (Some(path), Some(x)) = (&args.out, &x) {
        mm::save_dense_vector(x, path)?;
    }
    let outcome = rhs.outcome(x.as_deref());
    print_json_or(
        &WithRhs {
            report: &report,
            outcome: &outcome,
        },
        args.json,
        || {
            print_report(&report, false)?;
            println!("{}", outcome.line());
            Ok(())
        },
    )?;
    write_plot(args, &report)?;
    Ok(exit_status(&report, stopped.as_deref()))
}

/// `--plot FILE`: writes the residual history of `report` (the recurrence
/// residual per iteration, the true residual at the end, the tolerance) and
/// says where on stdout (stderr with `--json`). Nothing without `--plot`.
pub(crate) fn write_plot(args: &SolveArgs, report: &SolveReport) -> Result<()> {
    let Some(path) = &args.plot else {
        return Ok(());
    };
    let problem = match (&args.generate, &args.matrix) {
        (Some(spec), _) => spec.clone(),
        (None, Some(file)) => file
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        (None, None) => String::new(),
    };
    let frame = gpuq_plot::residual_chart(report, &problem).save(path)?;
    let line = format!(
        "plot {}: residual history of {} iteration{}; relative residual from {:.3e} to {:.3e} (log scale)",
        path.display(),
        report.iterations,
        if report.iterations == 1 { "" } else { "s" },
        frame.y.0,
        frame.y.1
    );
    if args.json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(())
}

/// `--layout` for `a` on `backend`: as spelled, or for `auto` what
/// [`Layout::auto`] picks (SELL-32-1 for short, even rows on a device, else CSR).
pub(crate) fn layout_for<B: gpuq_core::Backend, T: Scalar>(
    spec: &str,
    a: &Csr<T>,
    backend: &B,
) -> Result<Layout> {
    Ok(match Layout::parse_or_auto(spec)? {
        Some(layout) => layout,
        None => Layout::auto(a, backend.device_memory()?.is_some()),
    })
}

/// `--precond`: a Krylov preconditioner; an unknown name is an error listing
/// every preconditioner `gpuq solve` takes, AMG included.
pub(crate) fn parse_precond(name: &str) -> Result<Preconditioner> {
    Preconditioner::parse(name).map_err(|_| {
        Error::InvalidArgument(format!(
            "unknown preconditioner '{name}' (available: none, jacobi, block2, amg)"
        ))
    })
}

/// `--method`: a Krylov method; an unknown name is an error listing every method
/// `gpuq solve` takes, the Monte Carlo ones included.
pub(crate) fn parse_method(name: &str) -> Result<Method> {
    Method::parse(name).map_err(|e| {
        if crate::montecarlo::is_monte_carlo(name) || !e.to_string().contains("unknown method") {
            return e;
        }
        Error::InvalidArgument(format!(
            "unknown method '{name}' (available: {}, and the Monte Carlo methods mc-forward, mc-adjoint, mcsa)",
            Method::SPELLINGS
        ))
    })
}

/// A solve's result as the CLI reports it: the iterate and report of a solve
/// that ended normally, or the report a breakdown or stagnation carries (no
/// iterate) with the error's message. Other errors pass through.
pub(crate) fn ended<X>(
    result: Result<(X, SolveReport)>,
) -> Result<(Option<X>, SolveReport, Option<String>)> {
    match result {
        Ok((x, report)) => Ok((Some(x), report, None)),
        Err(e @ Error::Breakdown { .. }) => {
            let message = e.to_string();
            match e {
                Error::Breakdown { report, .. } => Ok((None, *report, Some(message))),
                _ => unreachable!("matched as a breakdown above"),
            }
        }
        Err(e) => Err(e),
    }
}

/// The exit status of a finished solve: 0 when it converged; 130 when it was
/// interrupted; otherwise 3; with one line on stderr naming its status (and
/// `stopped`, the breakdown's message).
pub(crate) fn exit_status(report: &SolveReport, stopped: Option<&str>) -> ExitCode {
    if report.converged {
        return ExitCode::SUCCESS;
    }
    let why = match (report.status, stopped) {
        (_, Some(message)) => message.to_string(),
        (SolveStatus::Interrupted, _) => "stopped by Ctrl-C; no output file written".to_string(),
        (SolveStatus::AccuracyLimit, None) => format!(
            "the recurrence met the tolerance but the true residual did not after {} \
             residual replacement(s): the attainable accuracy lies above the tolerance",
            report.residual_replacements
        ),
        (status, None) => status.name().replace('_', " "),
    };
    eprintln!(
        "gpuq: not converged ({}): {why}; true relative residual {:.3e} after {} iterations (tolerance {:.1e})",
        report.status.name(),
        report.relative_residual,
        report.iterations,
        report.tolerance
    );
    if report.status == SolveStatus::Interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::from(3)
    }
}

/// Prints `report` as pretty JSON with `json`, else as `text` prints it.
pub(crate) fn print_json_or<R: serde::Serialize>(
    report: &R,
    json: bool,
    text: impl FnOnce() -> Result<()>,
) -> Result<()> {
    if json {
        print_json(report)
    } else {
        text()
    }
}

/// Prints `report` as pretty JSON on stdout.
pub(crate) fn print_json<R: serde::Serialize>(report: &R) -> Result<()> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| Error::InvalidArgument(format!("cannot serialise the report: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Prints a solve report: pretty JSON with `json`, else three lines of text.
pub(crate) fn print_report(report: &SolveReport, json: bool) -> Result<()> {
    if json {
        print_json(report)?;
    } else {
        println!(
            "method {} (preconditioner {}) on {} [{}, {}], n = {}",
            report.method,
            report.preconditioner,
            report.backend,
            report.scalar,
            report.layout,
            report.n
        );
        println!(
            "converged: {} ({})  iterations: {}  relative residual (true): {:.3e}",
            report.converged,
            report.status.name(),
            report.iterations,
            report.relative_residual
        );
        println!(
            "solve time: {:.4} s  ({:.3} ms per iteration)  setup: {:.4} s",
            report.time_s,
            1e3 * report.time_s / report.iterations.max(1) as f64,
            report.setup_time_s
        );
    }
    Ok(())
}
