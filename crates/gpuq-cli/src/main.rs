//! `gpuq`: the command-line front end of the gpuq library.
//!
//! ```text
//! gpuq info
//! gpuq solve A.mtx [--rhs b.mtx] [--method cg|bicgstab|bicgstab-l:L|tfqmr|qmr|gmres:M]
//!                   [--precond none|jacobi|block2] [--tol 1e-8] [--json] [--out x.mtx]
//! gpuq solve --generate laplace3d:100 --method cg --precond jacobi
//! gpuq generate helmholtz-cylinder:1 --out A.mtx --rhs-out b.mtx
//! gpuq bidomain --grid 128 --steps 400 --dt 0.05 --plot activation.png
//! gpuq integrate --integrand f4 --dim 6 --tol 1e-5 --method two-phase --backend cuda --json
//! ```
//!
//! Errors print one line on stderr and exit with status 1; a solve that does not
//! converge prints its report and exits with status 3; one stopped by Ctrl-C
//! prints its report (status `interrupted`) and exits with status 130.

mod amg;
mod args;
mod bidomain;
mod choices;
#[cfg(feature = "mpi")]
mod dist_amg;
#[cfg(feature = "mpi")]
mod dist_montecarlo;
#[cfg(feature = "mpi")]
mod dist_solve;
mod generate;
mod info;
mod integrate;
mod montecarlo;
mod outputs;
mod progress;
mod rhs;
mod solve;
mod uq;
mod uq_model;

use clap::Parser;
use std::process::ExitCode;

/// Large blocks on transparent huge pages once a GPU backend is in use: the
/// host steps of GPU setups over tens of millions of rows fault and miss the
/// TLB less (docs/benchmarks.md; off on the CPU backend, where it was measured
/// to cost).
#[global_allocator]
static ALLOC: gpuq_core::alloc::HugePageAlloc = gpuq_core::alloc::HugePageAlloc;

fn main() -> ExitCode {
    gpuq_core::alloc::HugePageAlloc::configure_from_env();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap prints them to stdout.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            use clap::error::ErrorKind;
            // A bare `gpuq` or a subcommand without its arguments: the usage.
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    | ErrorKind::MissingRequiredArgument
                    | ErrorKind::MissingSubcommand
            ) {
                let _ = e.print();
            } else {
                eprintln!("gpuq: error: {}", one_line(&e.to_string()));
            }
            return ExitCode::from(1);
        }
    };
    warn_deprecated(std::env::args().skip(1));
    stop_on_ctrl_c();
    if let Err(e) = outputs::check(&cli.command) {
        eprintln!("gpuq: error: {e}");
        return ExitCode::from(1);
    }
    let outcome = match cli.command {
        args::Command::Info => info::run(),
        #[cfg(feature = "mpi")]
        args::Command::Solve(a) if gpuq_dist::under_mpi() => dist_solve::run(&a),
        args::Command::Solve(a) => gpuq_cpu::on_pool_worker(|| solve::run(&a)),
        args::Command::Generate(a) => generate::run(&a),
        args::Command::Bidomain(a) => bidomain::run(&a),
        args::Command::Uq(a) => uq::run(&a),
        #[cfg(feature = "mpi")]
        args::Command::AmgInfo(a) if gpuq_dist::under_mpi() => dist_amg::info(&a),
        args::Command::AmgInfo(a) => gpuq_cpu::on_pool_worker(|| amg::info(&a)),
        args::Command::Integrate(a) => integrate::run(&a),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpuq: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Old spellings of options, kept as hidden aliases for one release: the
/// subcommand they belong to, the old name and the new one.
const DEPRECATED: &[(&str, &str, &str)] = &[
    ("integrate", "--rel-tol", "--tol"),
    ("integrate", "--abs-tol", "--atol"),
    ("bidomain", "--png", "--plot"),
    ("sdof", "--mass", "--m"),
    ("sdof", "--damping", "--c"),
    ("sdof", "--stiffness", "--k"),
];

/// A warning on stderr for each deprecated spelling among `args` (the
/// command line without the program's name).
fn warn_deprecated(args: impl Iterator<Item = String>) {
    let args: Vec<String> = args.collect();
    for arg in &args {
        let name = arg.split('=').next().unwrap_or_default();
        for (command, old, new) in DEPRECATED {
            if *old == name && args.iter().any(|a| a == command) {
                eprintln!(
                    "gpuq: warning: {command} {old} is deprecated and will be removed; use {new}"
                );
            }
        }
    }
}

/// Ctrl-C asks the running solve to stop at its next iteration
/// ([`gpuq_core::interrupt`]): it prints the report of the work done with
/// status `interrupted` and exits with status 130, writing no output file. A
/// second Ctrl-C exits at once.
fn stop_on_ctrl_c() {
    let installed = ctrlc::set_handler(|| {
        if gpuq_core::interrupt::requested() {
            std::process::exit(130);
        }
        gpuq_core::interrupt::request();
        eprintln!("\ngpuq: stopping at the next iteration (Ctrl-C again to quit at once)");
    });
    if let Err(e) = installed {
        eprintln!("gpuq: warning: Ctrl-C will end the process without a report ({e})");
    }
}

/// Folds clap's multi-line message (error, possible values, usage hint) into one
/// line: the error itself and, when clap lists them, the accepted values.
fn one_line(message: &str) -> String {
    let mut lines = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"));
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match lines.find(|l| l.starts_with('[')) {
        Some(values) => format!("{first} {values}"),
        None => first.to_string(),
    }
}
