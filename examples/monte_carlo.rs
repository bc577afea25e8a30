//! Monte Carlo linear solves on the backend chosen at run time: an adjoint
//! Neumann-Ulam estimate with per-entry standard errors, and Monte Carlo
//! Synthetic Acceleration (MCSA) iterated to 1e-10, both checked against the
//! solution by CG.
//!
//! ```text
//! cargo run --release --example monte_carlo
//! ```
//!
//! The system is the shifted 1D Laplacian tridiag(-1, 2.5, -1) of size 200
//! (its Jacobi iteration matrix has spectral radius 0.8, so the Neumann
//! series converges) with b = 1. `GPUQ_BACKEND=cpu|cuda|auto` (default
//! `auto`) picks the backend. Exits non-zero unless at least 90% of the
//! estimate's entries lie within 3 standard errors of the CG solution (about
//! 98% should, from 10 batches) and MCSA converges to within 1e-8 of it.

use gpuq::prelude::*;
use std::error::Error as StdError;
use std::process::ExitCode;

/// The Monte Carlo estimate and the MCSA solve on one backend.
struct Solves<'a> {
    a: &'a Csr<f64>,
    b: &'a [f64],
}

impl OnBackend for Solves<'_> {
    type Output = Result<(gpuq::mcls::McResult, Vec<f64>, SolveReport)>;

    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        let opts = McOptions {
            method: McMethod::Adjoint,
            histories: 100_000,
            ..McOptions::default()
        };
        // The walk data is made resident once and serves both solves.
        let mc = MonteCarlo::new(backend, self.a, opts.layout)?;
        let estimate = mc.solve(self.b, &opts)?;
        let mcsa_opts = McsaOptions {
            tolerance: 1e-10,
            inner: McOptions {
                histories: 10_000,
                ..McsaOptions::default().inner
            },
            ..McsaOptions::default()
        };
        let (x, report) = mcsa(&mc, self.b, &mcsa_opts)?;
        Ok((estimate, x, report))
    }
}

/// Runs the example; prints the error and exits with status 1 on failure.
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), Box<dyn StdError>> {
    let n = 200;
    let a = gpuq::sparse::generators::laplace1d::<f64>(n, 0.5);
    let b = vec![1.0; n];
    let config = SolverConfig {
        options: KrylovOptions {
            rtol: 1e-13,
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    let (exact, _) = solve_csr(&CpuBackend::new(), &a, &b, &config)?;

    let choice: BackendChoice =
        std::env::var("GPUQ_BACKEND").map_or(Ok(BackendChoice::Auto), |s| s.parse())?;
    let backend = choose(choice)?;
    let (estimate, x, report) = backend.run(Solves { a: &a, b: &b })?;

    let se = estimate
        .std_error
        .as_ref()
        .ok_or("the estimate has no standard errors")?;
    let within = estimate
        .x
        .iter()
        .zip(&exact)
        .zip(se)
        .filter(|((xi, ei), s)| (*xi - *ei).abs() <= 3.0 * **s)
        .count();
    println!(
        "{}: adjoint estimate from {} histories, rho(H) = {:.3}, relative residual {:.2e}, \
         {within}/{n} entries within 3 standard errors of the solution",
        backend.name(),
        estimate.histories,
        estimate.rho_h,
        estimate.relative_residual
    );
    let max_diff = x
        .iter()
        .zip(&exact)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    let scale = exact.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    println!(
        "MCSA: {} iterations, relative residual {:.2e}, max |x - x_cg| / max |x_cg| = {:.2e}",
        report.iterations,
        report.relative_residual,
        max_diff / scale
    );
    if 10 * within < 9 * n {
        return Err(
            "the Monte Carlo estimate is further from the solution than its standard errors say"
                .into(),
        );
    }
    if !report.converged || max_diff > 1e-8 * scale {
        return Err("MCSA did not converge to the solution".into());
    }
    println!("ok");
    Ok(())
}
