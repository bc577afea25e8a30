//! AMG as the preconditioner of every Krylov method, through
//! `gpuq_krylov::solve_csr_with_precond`: a symmetric problem for CG and a
//! nonsymmetric convection-diffusion problem for the others.

mod common;

use common::*;
use gpuq_amg::{Amg, AmgKernels, AmgOptions, CycleOptions, Hierarchy};
use gpuq_cpu::CpuBackend;
use gpuq_krylov::{
    solve_csr, solve_csr_with_precond, solve_resident_with_precond, Method, Preconditioner,
    SolverConfig,
};
use gpuq_sparse::generators::{convdiff2d, laplace2d};

#[test]
fn amg_preconditions_every_method() {
    let cpu = CpuBackend::new();
    let cases = [
        (laplace2d::<f64>(32), Method::Cg),
        (convdiff2d::<f64>(32, 0.3), Method::Bicgstab),
        (convdiff2d::<f64>(32, 0.3), Method::BicgstabL { l: 2 }),
        (convdiff2d::<f64>(32, 0.3), Method::Tfqmr),
        (convdiff2d::<f64>(32, 0.3), Method::Gmres { restart: 30 }),
    ];
    for (a, method) in cases {
        let b = a.mul_vec(&vector(a.nrows(), 0.917)).unwrap();
        let h = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
        let m = Amg::<CpuBackend, f64>::new(&cpu, &h, &CycleOptions::default()).unwrap();
        let config = SolverConfig {
            method,
            ..SolverConfig::default()
        };
        let (x, rep) =
            solve_csr_with_precond(&cpu, &a, &b, &config, Some(&m), &mut |_, _| {}).unwrap();
        assert!(rep.converged, "{method:?}");
        assert_eq!(rep.preconditioner, "amg");
        assert!(true_residual(&a, &x, &b) <= 1e-8);
        // A from the hierarchy's finest level, already on the backend: the
        // same solve
        let resident = cpu
            .amg_level_matrix::<f64>(&h.levels()[0].a, config.layout)
            .unwrap();
        let (y, again) =
            solve_resident_with_precond(&cpu, resident, &b, &config, Some(&m), &mut |_, _| {})
                .unwrap();
        assert_eq!((&y, again.iterations), (&x, rep.iterations), "{method:?}");
        let jacobi = SolverConfig {
            method,
            precond: Preconditioner::Jacobi,
            ..SolverConfig::default()
        };
        let (_, rj) = solve_csr(&cpu, &a, &b, &jacobi).unwrap();
        assert!(
            3 * rep.iterations < rj.iterations,
            "{method:?}: {} vs {}",
            rep.iterations,
            rj.iterations
        );
    }
}

#[test]
fn transpose_only_for_symmetric_matrices() {
    let cpu = CpuBackend::new();
    let qmr = SolverConfig {
        method: Method::Qmr,
        ..SolverConfig::default()
    };
    let sym = laplace2d::<f64>(16);
    let h = Hierarchy::build(&sym, &AmgOptions::default()).unwrap();
    assert!(h.is_symmetric());
    let m = Amg::<CpuBackend, f64>::new(&cpu, &h, &CycleOptions::default()).unwrap();
    let b = sym.mul_vec(&vector(256, 0.3)).unwrap();
    let (_, rep) = solve_csr_with_precond(&cpu, &sym, &b, &qmr, Some(&m), &mut |_, _| {}).unwrap();
    assert!(rep.converged);
    let non = convdiff2d::<f64>(16, 0.3);
    let h = Hierarchy::build(&non, &AmgOptions::default()).unwrap();
    assert!(!h.is_symmetric());
    let m = Amg::<CpuBackend, f64>::new(&cpu, &h, &CycleOptions::default()).unwrap();
    match solve_csr_with_precond(&cpu, &non, &b, &qmr, Some(&m), &mut |_, _| {}) {
        Err(e) => assert!(e.to_string().contains("transpose"), "{e}"),
        Ok(_) => panic!("QMR with the cycle of a nonsymmetric matrix must fail"),
    }
}

#[test]
fn a_resident_matrix_refuses_qmr_and_a_missing_preconditioner() {
    let cpu = CpuBackend::new();
    let a = laplace2d::<f64>(8);
    let b = vec![1.0; a.nrows()];
    let h = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
    let m = Amg::<CpuBackend, f64>::new(&cpu, &h, &CycleOptions::default()).unwrap();
    let resident = || {
        cpu.amg_level_matrix::<f64>(&h.levels()[0].a, Default::default())
            .unwrap()
    };
    let qmr = SolverConfig {
        method: Method::Qmr,
        ..SolverConfig::default()
    };
    assert!(
        solve_resident_with_precond(&cpu, resident(), &b, &qmr, Some(&m), &mut |_, _| {}).is_err()
    );
    let jacobi = SolverConfig {
        precond: Preconditioner::Jacobi,
        ..SolverConfig::default()
    };
    // `None` means no preconditioner: the configured Jacobi is ignored, as
    // with solve_csr_with_precond
    let (_, rep) =
        solve_resident_with_precond(&cpu, resident(), &b, &jacobi, None, &mut |_, _| {}).unwrap();
    assert!(rep.converged);
}
