//! CG and PCG on SPD/HPD problems with known solutions, and their failure modes.

mod common;

use common::*;
use gpuq::core::{Backend, Complex64, Error, LinearOperator, RealScalar};
use gpuq::cpu::CpuBackend;
use gpuq::krylov::{cg, solve_csr, Jacobi, KrylovOptions, Preconditioner, SolverConfig};
use gpuq::sparse::{generators, Coo, Csr, Layout, MatrixOperator};
use proptest::prelude::*;

/// Solves with x_true random and b = A x_true; checks the true residual meets the
/// tolerance and the error is at the level the tolerance implies (cond(A) * tol).
fn check_known_solution<T: RandomScalar>(
    a: &Csr<T>,
    precond: Preconditioner,
    layout: Layout,
    cond: f64,
    seed: u64,
) {
    let x_true: Vec<T> = random_vec(a.nrows(), seed);
    let b = a.mul_vec(&x_true).unwrap();
    let tol = if T::Real::eps().to_f64_lossless() > 1e-10 {
        1e-4
    } else {
        1e-9
    };
    let config = SolverConfig {
        precond,
        layout,
        options: KrylovOptions {
            rtol: tol,
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    let (x, report) = solve_csr(&CpuBackend::new(), a, &b, &config).unwrap();
    assert!(report.converged, "{report:?}");
    // The true residual, recomputed here on the host as well.
    let ax = a.mul_vec(&x).unwrap();
    let res = rel_err(&ax, &b);
    assert!(res <= 2.0 * tol, "host residual {res:e} > tol {tol:e}");
    assert!(
        (report.relative_residual - res).abs()
            <= 0.1 * tol + 1e3 * T::Real::eps().to_f64_lossless(),
        "reported {:e} vs host {res:e}",
        report.relative_residual
    );
    let err = rel_err(&x, &x_true);
    assert!(
        err <= 2.0 * cond * tol,
        "error {err:e} > cond * tol = {:e}",
        cond * tol
    );
}

#[test]
fn laplacians_with_and_without_jacobi() {
    // cond of the Dirichlet Laplacians: ~ 4 (m+1)^2 / pi^2
    for (a, cond) in [
        (generators::laplace1d::<f64>(200, 0.0), 1.7e4),
        (generators::laplace2d::<f64>(30), 4.0e2),
        (generators::laplace3d::<f64>(12), 7.0e1),
        (generators::laplace1d::<f64>(1000, 0.5), 10.0),
    ] {
        for precond in [Preconditioner::None, Preconditioner::Jacobi] {
            for layout in [Layout::Csr, Layout::Sell { c: 4, sigma: 16 }] {
                check_known_solution(&a, precond, layout, cond, 7);
            }
        }
    }
}

#[test]
fn single_precision_and_complex_hermitian() {
    check_known_solution(
        &generators::laplace2d::<f32>(20),
        Preconditioner::Jacobi,
        Layout::Csr,
        2e2,
        3,
    );
    let a = random_hpd::<Complex64>(300, 0.02, 11);
    check_known_solution(&a, Preconditioner::Jacobi, Layout::Csr, 1e2, 4);
    check_known_solution(
        &a,
        Preconditioner::None,
        Layout::Sell { c: 8, sigma: 32 },
        1e2,
        5,
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_spd_systems(n in 1usize..200, density in 0.0f64..0.1, seed in any::<u64>()) {
        // Diagonally dominant with diagonal >= rowsum + 1: cond <= 2 max(diag) / 1.
        let a = random_hpd::<f64>(n, density, seed);
        let cond = 2.0 * a.diagonal().iter().cloned().fold(1.0, f64::max);
        check_known_solution(&a, Preconditioner::Jacobi, Layout::Csr, cond, seed);
    }
}

#[test]
fn zero_rhs_gives_zero_solution() {
    let a = generators::laplace1d::<f64>(10, 0.0);
    let (x, r) = solve_csr(&CpuBackend::new(), &a, &[0.0; 10], &SolverConfig::default()).unwrap();
    assert!(r.converged && r.iterations == 0 && x.iter().all(|&v| v == 0.0));
}

#[test]
fn iteration_cap_reports_not_converged() {
    let a = generators::laplace2d::<f64>(30);
    let b = vec![1.0; a.nrows()];
    let config = SolverConfig {
        options: KrylovOptions {
            max_iter: Some(3),
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    let (_, r) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
    assert!(!r.converged);
    assert_eq!(r.iterations, 3);
    assert_eq!(r.residual_history.len(), 4);
    assert!(r.relative_residual > 1e-8);
}

#[test]
fn absolute_tolerance_stops_early() {
    let a = generators::laplace2d::<f64>(30);
    let b = vec![1.0; a.nrows()];
    let config = SolverConfig {
        options: KrylovOptions {
            rtol: 0.0,
            atol: 1e-3,
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    let (x, r) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
    assert!(r.converged);
    let ax = a.mul_vec(&x).unwrap();
    let res: f64 = ax
        .iter()
        .zip(&b)
        .map(|(p, q)| (p - q) * (p - q))
        .sum::<f64>()
        .sqrt();
    assert!(res <= 1.01e-3, "{res}");
}

#[test]
fn indefinite_matrix_breaks_down_with_the_quantity_named() {
    // diag(1, -1): p = b = (1, 1) gives p^T A p = 0.
    let coo = Coo::try_from_triplets(2, 2, vec![0, 1], vec![0, 1], vec![1.0, -1.0]).unwrap();
    let a = Csr::from_coo(&coo).unwrap();
    let err = solve_csr(
        &CpuBackend::new(),
        &a,
        &[1.0, 1.0],
        &SolverConfig::default(),
    )
    .unwrap_err();
    match &err {
        Error::Breakdown {
            quantity,
            iteration,
            report,
            ..
        } => {
            assert!(quantity.contains("p^H A p"));
            assert_eq!(*iteration, 1);
            assert!(!report.converged);
        }
        e => panic!("expected breakdown, got {e}"),
    }
    assert!(err.to_string().contains("broke down"));
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let be = CpuBackend::new();
    let a = generators::laplace1d::<f64>(4, 0.0);
    let cfg = SolverConfig::default();
    assert!(matches!(
        solve_csr(&be, &a, &[1.0; 3], &cfg),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        solve_csr(&be, &a, &[1.0, f64::NAN, 1.0, 1.0], &cfg),
        Err(Error::NonFinite { index: 1, .. })
    ));
    let rect = Csr::<f64>::try_new(2, 3, vec![0, 1, 2], vec![0, 1], vec![1.0, 1.0]).unwrap();
    assert!(matches!(
        solve_csr(&be, &rect, &[1.0; 2], &cfg),
        Err(Error::Precondition { .. })
    ));
    let no_diag = Csr::<f64>::try_new(2, 2, vec![0, 1, 2], vec![1, 0], vec![1.0, 1.0]).unwrap();
    let jac = SolverConfig {
        precond: Preconditioner::Jacobi,
        ..SolverConfig::default()
    };
    match solve_csr(&be, &no_diag, &[1.0; 2], &jac) {
        Err(Error::Precondition {
            method: "jacobi",
            reason,
        }) => assert!(reason.contains("diagonal entry of row 1 (1-based)")),
        other => panic!("{other:?}"),
    }
    let bad_tol = SolverConfig {
        options: KrylovOptions {
            rtol: -1.0,
            ..KrylovOptions::default()
        },
        ..SolverConfig::default()
    };
    assert!(matches!(
        solve_csr(&be, &a, &[1.0; 4], &bad_tol),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn generic_cg_counts_transfers_and_history() {
    let be = CpuBackend::new();
    let a = generators::laplace2d::<f64>(20);
    let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
    let m = Jacobi::new(&be, &a).unwrap();
    let b = be.upload(&vec![1.0; a.nrows()]).unwrap();
    let mut x = be.zeros::<f64>(a.nrows()).unwrap();
    let mut seen = 0;
    let r = gpuq::krylov::cg_monitored(
        &be,
        &op,
        Some(&m as &dyn LinearOperator<_, _>),
        &b,
        &mut x,
        &KrylovOptions::default(),
        &mut |it, _| seen = it,
    )
    .unwrap();
    assert!(r.converged);
    assert_eq!(seen, r.iterations);
    assert_eq!(r.residual_history.len(), r.iterations + 1);
    assert_eq!(r.method, "pcg");
    assert_eq!(r.stats.uploads, 0, "nothing crosses during the solve");
    assert_eq!(r.stats.downloads, 0);
    assert_eq!(
        r.stats.ops.get("spmv_dotc_csr").copied(),
        Some(r.iterations as u64)
    );
    // Plain CG on the same system.
    let mut x2 = be.zeros::<f64>(a.nrows()).unwrap();
    let r2 = cg(&be, &op, None, &b, &mut x2, &KrylovOptions::default()).unwrap();
    assert_eq!(r2.method, "cg");
    assert!(r2.converged);
}
