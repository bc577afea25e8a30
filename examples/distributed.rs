//! A distributed solve over 4 ranks that are threads of this process
//! (`ThreadComm`, no MPI needed), on the backend chosen at run time: each
//! rank builds its own rows of the 3D Laplacian on a 16^3 grid in place (no
//! rank holds the whole matrix), CG with Jacobi runs across the ranks with a
//! halo exchange per product, and the parts of x are gathered.
//!
//! ```text
//! cargo run --release --example distributed
//! ```
//!
//! `GPUQ_BACKEND=cpu|cuda|auto` (default `auto`) picks every rank's local
//! backend. Exits non-zero unless every rank reports the same iterations,
//! the distributed solution agrees with the one-process solve to 1e-10
//! (relative), and their iteration counts differ by at most one.

use gpuq::dist::generated_rows;
use gpuq::prelude::*;
use gpuq::sparse::generators::ProblemSpec;
use gpuq::sparse::reference::random_vector;
use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::Arc;

/// The seed of the random solution x* (b = A x*).
const SEED: u64 = 1;

/// The distributed solve, and the one-process solve, on one backend.
struct Solves<'a> {
    spec: &'a ProblemSpec,
    ranks: usize,
    config: &'a SolverConfig,
}

/// Each rank's part of x with its report, and the one-process x and report.
type Solved = (Vec<(Vec<f64>, SolveReport)>, Vec<f64>, SolveReport);

impl OnBackend for Solves<'_> {
    type Output = Result<Solved>;

    fn run<B: FullBackend>(self, backend: &B) -> Result<Solved> {
        let n = self.spec.build::<f64>()?.matrix.nrows();
        let partition = RowPartition::contiguous(n, self.ranks)?;
        let parts = ThreadComm::run(self.ranks, |comm| {
            let rank = comm.rank();
            let dist = Dist::new(backend.clone(), Arc::new(comm));
            let solution = |r| random_vector(SEED, r);
            let (rows, b) = generated_rows::<f64>(self.spec, &partition, rank, solution)?
                .ok_or_else(|| Error::InvalidArgument("not a stencil problem".into()))?;
            solve_rows(&dist, &partition, &rows, &b, self.config)
        })?
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        // The same problem in one process: the whole matrix, b = A x*.
        let a = self.spec.build::<f64>()?.matrix;
        let b = a.mul_vec(&random_vector(SEED, 0..n))?;
        let (x, report) = solve_csr(backend, &a, &b, self.config)?;
        Ok((parts, x, report))
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
    let spec = ProblemSpec::parse("laplace3d:16")?;
    let config = SolverConfig {
        precond: Preconditioner::Jacobi,
        options: KrylovOptions {
            rtol: 1e-12,
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    let ranks = 4;
    let choice: BackendChoice =
        std::env::var("GPUQ_BACKEND").map_or(Ok(BackendChoice::Auto), |s| s.parse())?;
    let backend = choose(choice)?;
    let (parts, serial, serial_report) = backend.run(Solves {
        spec: &spec,
        ranks,
        config: &config,
    })?;

    let iterations: Vec<usize> = parts.iter().map(|(_, r)| r.iterations).collect();
    let x: Vec<f64> = parts.iter().flat_map(|(x, _)| x.iter().copied()).collect();
    let report = &parts[0].1;
    let max_diff = x
        .iter()
        .zip(&serial)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    let scale = serial.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    println!(
        "{} ranks on {}: n = {}, CG + Jacobi {} iterations per rank {:?}, relative residual {:.2e}",
        ranks,
        backend.name(),
        x.len(),
        report.iterations,
        iterations,
        report.relative_residual
    );
    println!(
        "one process: {} iterations; max |x_dist - x| / max |x| = {:.2e}",
        serial_report.iterations,
        max_diff / scale
    );
    if iterations.iter().any(|&i| i != report.iterations) {
        return Err("the ranks disagree on the iterations".into());
    }
    if !report.converged || x.len() != serial.len() || max_diff > 1e-10 * scale {
        return Err("the distributed solution differs from the one-process solution".into());
    }
    if report.iterations.abs_diff(serial_report.iterations) > 1 {
        return Err("the iteration counts differ by more than one".into());
    }
    println!("ok");
    Ok(())
}
