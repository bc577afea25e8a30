//! CG/PCG run unchanged on the device: same iterations (within 1) and solution as
//! the CPU, true residual met, and only scalars cross the bus while iterating.

use crate::common::{random_hpd, random_vec, rel_err};
use crate::private_gpu;
use gpuq::core::{Backend, Complex64};
use gpuq::cpu::CpuBackend;
use gpuq::krylov::{solve_csr, KrylovOptions, Preconditioner, SolverConfig};
use gpuq::sparse::{generators, Csr, Layout};

fn compare<T: crate::common::RandomScalar>(a: &Csr<T>, config: &SolverConfig, tol: f64) {
    let Some(g) = private_gpu("cg") else { return };
    let g = &g;
    let x_true: Vec<T> = random_vec(a.nrows(), 3);
    let b = a.mul_vec(&x_true).unwrap();
    let (xc, rc) = solve_csr(&CpuBackend::new(), a, &b, config).unwrap();
    g.reset_stats();
    let (xg, rg) = solve_csr(g, a, &b, config).unwrap();
    assert!(rc.converged && rg.converged, "{rc:?}\n{rg:?}");
    assert!(
        rg.relative_residual <= tol * 1.01,
        "gpu true residual {}",
        rg.relative_residual
    );
    assert!(
        rc.iterations.abs_diff(rg.iterations) <= 1,
        "cpu {} gpu {} iterations",
        rc.iterations,
        rg.iterations
    );
    assert!(
        rel_err(&xg, &xc) <= 1e3 * tol,
        "solutions differ by {}",
        rel_err(&xg, &xc)
    );
    // During the solve only scalars come back: at most a few per iteration, none up.
    assert_eq!(rg.stats.uploads, 0);
    let per_iter = rg.stats.bytes_down as f64 / rg.iterations.max(1) as f64;
    assert!(
        per_iter <= 4.0 * 16.0,
        "{per_iter} bytes down per iteration"
    );
}

#[test]
fn cg_and_pcg_match_the_cpu() {
    for precond in [Preconditioner::None, Preconditioner::Jacobi] {
        for layout in [Layout::Csr, Layout::Sell { c: 32, sigma: 1 }] {
            let config = SolverConfig {
                precond,
                layout,
                ..SolverConfig::default()
            };
            compare(&generators::laplace3d::<f64>(24), &config, 1e-8);
            compare(&random_hpd::<Complex64>(500, 0.02, 5), &config, 1e-8);
        }
    }
    let f32_config = SolverConfig {
        precond: Preconditioner::Jacobi,
        options: KrylovOptions {
            rtol: 1e-4,
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    compare(&generators::laplace2d::<f32>(40), &f32_config, 1e-4);
}
