//! Command-line arguments.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// GPU-accelerated sparse linear solvers and uncertainty quantification.
#[derive(Parser, Debug)]
#[command(name = "gpuq", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the version, the available backends and the CPU thread count.
    Info,
    /// Solve A x = b for a Matrix Market matrix or a generated problem.
    Solve(Box<SolveArgs>),
}

/// Arguments of `gpuq solve`.
#[derive(Args, Debug)]
pub struct SolveArgs {
    /// Matrix Market file holding A (real or complex; general, symmetric or hermitian).
    #[arg(required_unless_present = "generate", conflicts_with = "generate")]
    pub matrix: Option<PathBuf>,
    /// Matrix Market array file holding b (default: b = A * ones).
    #[arg(long)]
    pub rhs: Option<PathBuf>,
    /// Generate A instead of reading it: laplace1d:N[:SHIFT], laplace2d:M or laplace3d:M.
    #[arg(long)]
    pub generate: Option<String>,
    /// Krylov method: cg.
    #[arg(long, default_value = "cg")]
    pub method: String,
    /// Preconditioner: none or jacobi.
    #[arg(long, default_value = "none")]
    pub precond: String,
    /// Relative residual tolerance ||b - A x|| / ||b||.
    #[arg(long, default_value_t = 1e-8, allow_negative_numbers = true)]
    pub tol: f64,
    /// Absolute residual tolerance (0: relative only).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub atol: f64,
    /// Iteration cap (default: 10 n, at least 100).
    #[arg(long)]
    pub max_iter: Option<usize>,
    /// Backend: cpu, cuda (device 0) or auto (cuda when a device is present, else cpu).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Matrix storage on the backend: csr, sell or sell:C:SIGMA.
    #[arg(long, default_value = "csr")]
    pub layout: String,
    /// Floating-point precision: f32 or f64 (complex matrices use the complex type of that precision).
    #[arg(long, default_value = "f64")]
    pub precision: String,
    /// Print the solve report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the solution x as a Matrix Market array file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}
