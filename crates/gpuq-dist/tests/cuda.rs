//! `Dist<CudaBackend>` on 2 ranks of threads sharing GPU 0 (feature `cuda`):
//! CG, BiCGSTAB and GMRES against the serial CPU solve. Skipped (one line
//! printed) without a CUDA driver or device.
#![cfg(feature = "cuda")]

use gpuq_core::Error;
use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_dist::{rows_of, solve_rows, Communicator, Dist, RowPartition, ThreadComm};
use gpuq_krylov::{solve_csr, KrylovOptions, Method, Preconditioner, SolverConfig};
use gpuq_sparse::{generators, Layout};
use std::sync::Arc;

#[test]
fn dist_over_cuda_matches_the_serial_cpu_solve() {
    let gpu = match CudaBackend::new(0) {
        Ok(g) => g,
        Err(Error::NoCudaDevice(_)) => {
            println!("dist_over_cuda_matches_the_serial_cpu_solve: skipped (no CUDA device)");
            return;
        }
        Err(e) => panic!("the CUDA backend failed to start: {e}"),
    };
    let a = generators::convdiff2d::<f64>(24, 0.5);
    let n = a.nrows();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
    for (method, precond) in [
        (Method::Cg, Preconditioner::Jacobi),
        (Method::Bicgstab, Preconditioner::Jacobi),
        (Method::Gmres { restart: 30 }, Preconditioner::None),
    ] {
        let a = if method == Method::Cg {
            generators::laplace2d::<f64>(24)
        } else {
            a.clone()
        };
        let config = SolverConfig {
            method,
            precond,
            options: KrylovOptions {
                rtol: 1e-9,
                ..KrylovOptions::default()
            },
            layout: Layout::Csr,
        };
        let (xs, rs) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
        let partition = RowPartition::contiguous(n, 2).unwrap();
        let parts = ThreadComm::run(2, |comm| {
            let rank = comm.rank();
            let dist = Dist::new(gpu.clone(), Arc::new(comm));
            let rows = rows_of(&a, &partition, rank).unwrap();
            solve_rows(&dist, &partition, &rows, &b[partition.range(rank)], &config).unwrap()
        })
        .unwrap();
        let x: Vec<f64> = parts.iter().flat_map(|(x, _)| x.clone()).collect();
        let scale = xs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = xs
            .iter()
            .zip(&x)
            .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()));
        assert!(diff <= 1e-7 * scale, "{method:?}: differs by {diff:e}");
        assert!(
            parts[0].1.iterations.abs_diff(rs.iterations) <= 2,
            "{method:?}: {} vs {} iterations",
            parts[0].1.iterations,
            rs.iterations
        );
    }
}
