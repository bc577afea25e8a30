//! Solves A x = b for a Matrix Market file by PCG with an AMG preconditioner
//! (smoothed aggregation), on the backend chosen at run time, and compares it
//! with PCG with Jacobi.
//!
//! ```text
//! cargo run --release --example amg_matrix_market -- [A.mtx]
//! ```
//!
//! Without a path it writes a generated matrix (the 2D 5-point Laplacian on a
//! 64 x 64 grid) to a temporary `.mtx` file and reads it back. b = A x_true
//! for an oscillating x_true (not ones: smoothed aggregation's coarse spaces
//! hold the constant, which would make the solve trivial).
//! `GPUQ_BACKEND=cpu|cuda|auto` (default `auto`) picks the backend. Exits
//! non-zero unless the AMG solve converges to a true relative residual of at
//! most 1e-8 and, for the generated matrix, its error is within 1e-6 of
//! max |x_true| and it takes fewer than a third of Jacobi's iterations.

use gpuq::prelude::*;
use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// PCG with AMG and PCG with Jacobi on one backend: x and both reports.
struct Solves<'a> {
    a: &'a Csr<f64>,
    b: &'a [f64],
}

impl OnBackend for Solves<'_> {
    type Output = Result<(Vec<f64>, SolveReport, SolveReport)>;

    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        let config = SolverConfig {
            method: Method::Cg,
            options: KrylovOptions {
                rtol: 1e-10,
                ..KrylovOptions::default()
            },
            ..SolverConfig::default()
        };
        let start = Instant::now();
        let hierarchy = Hierarchy::build(self.a, &AmgOptions::default())?;
        let cycle = Amg::<B, f64>::new(backend, &hierarchy, &CycleOptions::default())?;
        let info = hierarchy.info();
        println!(
            "AMG: {} levels, operator complexity {:.2}, setup {:.3} s",
            info.levels.len(),
            info.operator_complexity,
            start.elapsed().as_secs_f64()
        );
        let (x, amg) = solve_csr_with_precond(
            backend,
            self.a,
            self.b,
            &config,
            Some(&cycle),
            &mut |_, _| {},
        )?;
        let jacobi_config = SolverConfig {
            precond: Preconditioner::Jacobi,
            ..config
        };
        let (_, jacobi) = solve_csr(backend, self.a, self.b, &jacobi_config)?;
        Ok((x, amg, jacobi))
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
    let given = std::env::args().nth(1).map(PathBuf::from);
    let path = match &given {
        Some(p) => p.clone(),
        None => {
            let a = gpuq::sparse::generators::laplace2d::<f64>(64);
            let p = std::env::temp_dir().join(format!("gpuq-example-{}.mtx", std::process::id()));
            save_csr(&a, &p)?;
            println!(
                "wrote the 2D Laplacian on a 64 x 64 grid to {}",
                p.display()
            );
            p
        }
    };
    let read = read_csr::<f64>(&path);
    if given.is_none() {
        std::fs::remove_file(&path)?;
    }
    let a = read?;
    println!("A: {} x {}, {} nonzeros", a.nrows(), a.ncols(), a.nnz());
    let x_true: Vec<f64> = (0..a.ncols())
        .map(|i| (0.731 * (i + 1) as f64).sin() + 0.3 * (0.512 * i as f64).cos())
        .collect();
    let b = a.mul_vec(&x_true)?;

    let choice: BackendChoice =
        std::env::var("GPUQ_BACKEND").map_or(Ok(BackendChoice::Auto), |s| s.parse())?;
    let backend = choose(choice)?;
    let (x, amg, jacobi) = backend.run(Solves { a: &a, b: &b })?;
    println!(
        "{}: PCG + AMG {} iterations ({:.3} s), PCG + Jacobi {} iterations ({:.3} s)",
        backend.name(),
        amg.iterations,
        amg.time_s,
        jacobi.iterations,
        jacobi.time_s
    );

    // The true residual and the error, on the host.
    let ax = a.mul_vec(&x)?;
    let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|t| t * t).sum::<f64>().sqrt();
    let residual = norm(&mut ax.iter().zip(&b).map(|(p, q)| p - q)) / norm(&mut b.iter().copied());
    let max = |v: &mut dyn Iterator<Item = f64>| v.map(f64::abs).fold(0.0, f64::max);
    let error =
        max(&mut x.iter().zip(&x_true).map(|(p, q)| p - q)) / max(&mut x_true.iter().copied());
    println!("true relative residual {residual:.2e}, max |x - x_true| / max |x_true| {error:.2e}");
    if !(amg.converged && residual <= 1e-8) {
        return Err("the AMG solve did not reach its tolerance".into());
    }
    if given.is_none() && error > 1e-6 {
        return Err("the AMG solution is not the generated problem's".into());
    }
    if given.is_none() && 3 * amg.iterations >= jacobi.iterations {
        return Err(format!(
            "AMG took {} iterations, not fewer than a third of Jacobi's {}",
            amg.iterations, jacobi.iterations
        )
        .into());
    }
    println!("ok");
    Ok(())
}
