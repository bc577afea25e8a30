//! Distributed solves under `mpirun`: every rank builds the same small test
//! matrices, solves its rows with CG, BiCGSTAB and GMRES (with and without
//! preconditioning) over MPI, and checks the gathered solution against the
//! serial solve (equal to rounding, iteration counts within 1, the same bits
//! on a second run). Exits non-zero on the first mismatch; rank 0 prints one
//! line per case.
//!
//! ```text
//! cargo build -p gpuq-dist --features mpi --example mpi_solve
//! mpirun -n 4 --oversubscribe target/debug/examples/mpi_solve
//! ```

use gpuq_core::{Backend, Result};
use gpuq_cpu::CpuBackend;
use gpuq_dist::{allgather_rows, rows_of, solve_rows, Communicator, Dist, MpiComm, RowPartition};
use gpuq_krylov::{solve_csr, KrylovOptions, Method, Preconditioner, SolverConfig};
use gpuq_sparse::{generators, Csr, Layout};
use std::sync::Arc;

/// One distributed solve checked against the serial one; `Err` describes a
/// mismatch.
fn check(
    dist: &Dist<CpuBackend>,
    a: &Csr<f64>,
    method: Method,
    precond: Preconditioner,
    block: usize,
) -> Result<std::result::Result<String, String>> {
    dist.reset_stats();
    let comm = dist.comm();
    let n = a.nrows();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 7) % 13) as f64 / 13.0).collect();
    let config = SolverConfig {
        method,
        precond,
        options: KrylovOptions {
            rtol: 1e-10,
            ..KrylovOptions::default()
        },
        layout: Layout::Csr,
    };
    let partition = RowPartition::blocks(n, comm.size(), block)?;
    let rows = rows_of(a, &partition, comm.rank())?;
    let range = partition.range(comm.rank());
    let (x1, r1) = solve_rows(dist, &partition, &rows, &b[range.clone()], &config)?;
    let (x2, _) = solve_rows(dist, &partition, &rows, &b[range], &config)?;
    let whole = allgather_rows(comm, &partition, &x1)?;
    let (xs, rs) = solve_csr(&CpuBackend::new(), a, &b, &config)?;
    let scale = xs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = xs
        .iter()
        .zip(&whole)
        .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()));
    let what = format!(
        "{method:?} {precond:?} n={n} ranks={}: {} iterations (serial {}), max diff {diff:.1e}, halo {} B",
        comm.size(),
        r1.iterations,
        rs.iterations,
        dist.comm_stats().halo_bytes
    );
    let bits_equal = x1.iter().zip(&x2).all(|(u, v)| u.to_bits() == v.to_bits());
    Ok(
        if r1.converged
            && r1.iterations.abs_diff(rs.iterations) <= 1
            && diff <= 1e-8 * scale
            && bits_equal
        {
            Ok(what)
        } else {
            Err(format!("{what}, same bits twice: {bits_equal}"))
        },
    )
}

fn main() {
    let comm = match MpiComm::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mpi_solve: {e}");
            std::process::exit(2);
        }
    };
    let rank = comm.rank();
    let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
    let laplace = generators::laplace2d::<f64>(20);
    let convdiff = generators::convdiff2d::<f64>(16, 0.7);
    let cases = [
        (&laplace, Method::Cg, Preconditioner::None, 1),
        (&laplace, Method::Cg, Preconditioner::Jacobi, 1),
        (&convdiff, Method::Bicgstab, Preconditioner::Jacobi, 1),
        (&convdiff, Method::Bicgstab, Preconditioner::Block2, 2),
        (
            &convdiff,
            Method::Gmres { restart: 20 },
            Preconditioner::None,
            1,
        ),
        (
            &convdiff,
            Method::Gmres { restart: 20 },
            Preconditioner::Jacobi,
            1,
        ),
    ];
    let mut failed = 0;
    for (a, method, precond, block) in cases {
        match check(&dist, a, method, precond, block) {
            Ok(Ok(line)) => {
                if rank == 0 {
                    println!("ok: {line}");
                }
            }
            Ok(Err(line)) => {
                failed += 1;
                eprintln!("rank {rank} MISMATCH: {line}");
            }
            Err(e) => {
                failed += 1;
                eprintln!("rank {rank} ERROR: {method:?} {precond:?}: {e}");
            }
        }
    }
    // A partition of another rank count is an error on every rank.
    let wrong = RowPartition::contiguous(laplace.nrows(), dist.comm().size() + 1).and_then(|p| {
        let rows = rows_of(&laplace, &p, rank)?;
        let b = vec![1.0; p.range(rank).len()];
        solve_rows(&dist, &p, &rows, &b, &SolverConfig::default())
    });
    if wrong.is_ok() {
        failed += 1;
        eprintln!("rank {rank}: a partition for another rank count was accepted");
    }
    if rank == 0 {
        println!(
            "mpi_solve on {} ranks: {} passed, {failed} failed",
            dist.comm().size(),
            cases.len() + 1 - failed
        );
    }
    drop(dist);
    if failed > 0 {
        std::process::exit(1);
    }
}
