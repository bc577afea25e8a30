//! BiCGSTAB, BiCGSTAB(l), TFQMR, QMR and GMRES(m) on SPD, nonsymmetric and complex
//! symmetric problems with known solutions, on the CPU, with each preconditioner;
//! breakdown on a constructed case; the iteration cap; method parsing.

mod common;

use common::*;
use gpuq::core::{Backend, Complex64, Error};
use gpuq::cpu::CpuBackend;
use gpuq::krylov::{
    bicgstab, bicgstab_l, gmres, qmr, solve_csr, tfqmr, KrylovOptions, Method, Preconditioner,
    SolverConfig,
};
use gpuq::sparse::{generators, Coo, Csr, Layout, MatrixOperator};

const METHODS: [Method; 9] = [
    Method::Bicgstab,
    Method::BicgstabL { l: 1 },
    Method::BicgstabL { l: 2 },
    Method::BicgstabL { l: 8 },
    Method::Tfqmr,
    Method::Qmr,
    Method::Gmres { restart: 30 },
    Method::Gmres { restart: 5 },
    Method::Gmres { restart: 200 },
];

const PRECONDS: [Preconditioner; 3] = [
    Preconditioner::None,
    Preconditioner::Jacobi,
    Preconditioner::Block2,
];

/// x_true random, b = A x_true: the solve must meet the tolerance in the true
/// residual, recomputed here on the host, and report it faithfully.
fn check<T: RandomScalar>(a: &Csr<T>, method: Method, precond: Preconditioner, tol: f64) -> usize {
    let x_true: Vec<T> = random_vec(a.nrows(), 11);
    let b = a.mul_vec(&x_true).unwrap();
    let config = SolverConfig {
        method,
        precond,
        layout: Layout::Csr,
        options: KrylovOptions {
            rtol: tol,
            ..KrylovOptions::default()
        },
    };
    let (x, report) = solve_csr(&CpuBackend::new(), a, &b, &config).unwrap();
    assert!(report.converged, "{method:?} {precond:?}: {report:?}");
    let res = rel_err(&a.mul_vec(&x).unwrap(), &b);
    assert!(
        res <= 1.01 * tol,
        "{method:?} {precond:?}: host residual {res:e} > {tol:e}"
    );
    assert!(
        (report.relative_residual - res).abs() <= 0.01 * tol,
        "{method:?}: reported {:e}, host {res:e}",
        report.relative_residual
    );
    report.iterations
}

#[test]
fn spd_laplacians() {
    for a in [
        generators::laplace2d::<f64>(20),
        generators::laplace3d::<f64>(8),
    ] {
        for method in METHODS {
            for precond in PRECONDS {
                check(&a, method, precond, 1e-9);
            }
        }
    }
}

#[test]
fn nonsymmetric_convection_diffusion() {
    for wind in [10.0, 200.0] {
        let a = generators::convdiff2d::<f64>(24, wind);
        for method in METHODS {
            for precond in PRECONDS {
                check(&a, method, precond, 1e-9);
            }
        }
    }
}

#[test]
fn complex_symmetric_helmholtz() {
    // Indefinite: kh^2 = 0.36 is above the smallest Laplacian eigenvalue (~0.3).
    let a = generators::helmholtz3d::<Complex64>(9, 0.6, 0.1).unwrap();
    assert_eq!(a.transpose(false), a);
    for method in METHODS {
        for precond in [Preconditioner::None, Preconditioner::Jacobi] {
            check(&a, method, precond, 1e-8);
        }
    }
}

#[test]
fn random_nonsymmetric_complex_systems() {
    for seed in 0..4 {
        // A diagonally dominant random complex matrix.
        let r: Csr<Complex64> = random_csr(60, 60, 0.1, seed);
        let mut coo = r.to_coo();
        for i in 0..60 {
            coo.push(i, i, Complex64::new(8.0, 1.0)).unwrap();
        }
        let a = Csr::from_coo(&coo).unwrap();
        for method in METHODS {
            check(&a, method, Preconditioner::Jacobi, 1e-10);
        }
    }
}

#[test]
fn full_gmres_converges_in_at_most_n_steps() {
    let a = generators::convdiff2d::<f64>(6, 50.0); // n = 36
    let it = check(
        &a,
        Method::Gmres { restart: 36 },
        Preconditioner::None,
        1e-10,
    );
    assert!(it <= 36, "{it} steps");
}

#[test]
fn block2_jacobi_inverts_the_block_diagonal_and_rejects_singular_blocks() {
    // Two coupled unknowns per node: a block-diagonal A is solved in one step.
    let mut coo = Coo::new(4, 4);
    for (i, j, v) in [(0, 0, 2.0), (0, 1, 1.0), (1, 0, 3.0), (1, 1, 4.0)] {
        coo.push(i, j, v).unwrap();
        coo.push(i + 2, j + 2, v * 2.0).unwrap();
    }
    let a = Csr::from_coo(&coo).unwrap();
    let it = check(&a, Method::Bicgstab, Preconditioner::Block2, 1e-12);
    assert_eq!(it, 1);
    let be = CpuBackend::new();
    let odd = generators::laplace1d::<f64>(5, 0.0);
    assert!(matches!(
        gpuq::krylov::BlockJacobi2::new(&be, &odd),
        Err(Error::Precondition { .. })
    ));
    let mut coo = Coo::new(2, 2);
    for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        coo.push(i, j, 1.0).unwrap();
    }
    match gpuq::krylov::BlockJacobi2::new(&be, &Csr::from_coo(&coo).unwrap()) {
        Err(Error::Precondition { reason, .. }) => {
            assert!(reason.contains("rows 1 and 2 (1-based)"), "{reason}")
        }
        other => panic!("expected a singular-block error, got {:?}", other.err()),
    }
}

#[test]
fn breakdown_is_reported_with_the_quantity() {
    // A = [[0, 1], [-1, 0]], b = e1: r0^H A r0 = 0 at the first step.
    let mut coo = Coo::new(2, 2);
    coo.push(0, 1, 1.0).unwrap();
    coo.push(1, 0, -1.0).unwrap();
    let a = Csr::from_coo(&coo).unwrap();
    let be = CpuBackend::new();
    let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
    let b = be.upload(&[1.0, 0.0]).unwrap();
    let mut x = be.zeros::<f64>(2).unwrap();
    match bicgstab(&be, &op, None, &b, &mut x, &KrylovOptions::default()) {
        Err(Error::Breakdown {
            method,
            quantity,
            report,
            ..
        }) => {
            assert_eq!(method, "bicgstab");
            assert!(quantity.contains("r0^H A p"), "{quantity}");
            assert!((report.relative_residual - 1.0).abs() < 1e-12);
        }
        other => panic!("expected a breakdown, got {other:?}"),
    }
    let opts = KrylovOptions::default();
    let op_t = MatrixOperator::with_transpose(&be, &a, Layout::Csr).unwrap();
    let runs = [
        ("bicgstab(l)", "r0^H u_(j+1)", {
            let mut x = be.zeros::<f64>(2).unwrap();
            bicgstab_l(&be, &op, None, &b, &mut x, 4, &opts)
        }),
        ("tfqmr", "r0^H v", {
            let mut x = be.zeros::<f64>(2).unwrap();
            tfqmr(&be, &op, None, &b, &mut x, &opts)
        }),
        ("qmr", "epsilon = q^T A p", {
            let mut x = be.zeros::<f64>(2).unwrap();
            qmr(&be, &op_t, None, &b, &mut x, &opts)
        }),
    ];
    for (name, what, run) in runs {
        match run {
            Err(Error::Breakdown {
                method, quantity, ..
            }) => assert!(
                method == name && quantity.contains(what),
                "{method}: {quantity}"
            ),
            other => panic!("{name}: expected a breakdown, got {other:?}"),
        }
    }
    // QMR needs the transpose: an operator without one is refused, not misused.
    let mut x = be.zeros::<f64>(2).unwrap();
    assert!(matches!(
        qmr(&be, &op, None, &b, &mut x, &opts),
        Err(Error::Precondition { .. })
    ));
    // GMRES solves the same system (x = e2).
    let mut x = be.zeros::<f64>(2).unwrap();
    let r = gmres(&be, &op, None, &b, &mut x, 2, &KrylovOptions::default()).unwrap();
    assert!(r.converged && r.relative_residual < 1e-12, "{r:?}");
    let xs = be.download(&x).unwrap();
    assert!(xs[0].abs() < 1e-12 && (xs[1] - 1.0).abs() < 1e-12, "{xs:?}");
}

/// A system that one step solves exactly (a diagonal matrix with its Jacobi
/// preconditioner): the residual after the step is zero, so
/// the next scalars (rho = r0^H r, t^H t, ...) vanish. That is
/// convergence, not a breakdown: every method reports `converged` with the
/// exact solution.
#[test]
fn a_system_solved_in_one_step_converges_without_a_breakdown() {
    let n = 50;
    let mut coo = Coo::new(n, n);
    for i in 0..n {
        // Powers of two: the Jacobi-preconditioned operator is the identity
        // to the bit, so the first step leaves a residual of exactly zero.
        coo.push(i, i, Complex64::new(f64::powi(2.0, i as i32 % 7 - 3), 0.0))
            .unwrap();
    }
    let diag = Csr::from_coo(&coo).unwrap();
    let x_true: Vec<Complex64> = random_vec(n, 5);
    let b = diag.mul_vec(&x_true).unwrap();
    let mut failures = Vec::new();
    for method in METHODS {
        for precond in [Preconditioner::Jacobi, Preconditioner::Block2] {
            let config = SolverConfig {
                method,
                precond,
                ..SolverConfig::default()
            };
            match solve_csr(&CpuBackend::new(), &diag, &b, &config) {
                Ok((x, r)) if r.converged && rel_err(&x, &x_true) < 1e-12 => {
                    println!("{method:?} {precond:?}: {} iterations", r.iterations)
                }
                Ok((_, r)) => failures.push(format!("{method:?} {precond:?}: {r:?}")),
                Err(e) => failures.push(format!("{method:?} {precond:?}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn iteration_cap_gives_an_unconverged_report() {
    let a = generators::convdiff2d::<f64>(30, 10.0);
    let b = a.mul_vec(&vec![1.0; a.nrows()]).unwrap();
    for method in METHODS {
        let config = SolverConfig {
            method,
            options: KrylovOptions {
                rtol: 1e-12,
                max_iter: Some(3),
                ..KrylovOptions::default()
            },
            ..SolverConfig::default()
        };
        let (_, r) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
        assert!(!r.converged && r.iterations == 3, "{method:?}: {r:?}");
        assert_eq!(r.residual_history.len(), 4, "{method:?}");
        assert!(r.relative_residual > 1e-12 && r.relative_residual.is_finite());
    }
}

#[test]
fn methods_parse() {
    assert_eq!(Method::parse("bicgstab").unwrap(), Method::Bicgstab);
    assert_eq!(
        Method::parse("gmres").unwrap(),
        Method::Gmres { restart: 30 }
    );
    assert_eq!(
        Method::parse("gmres:8").unwrap(),
        Method::Gmres { restart: 8 }
    );
    assert_eq!(
        Method::parse("bicgstab-l").unwrap(),
        Method::BicgstabL { l: 8 }
    );
    assert_eq!(
        Method::parse("bicgstab-l:3").unwrap(),
        Method::BicgstabL { l: 3 }
    );
    assert_eq!(Method::parse("tfqmr").unwrap(), Method::Tfqmr);
    assert_eq!(Method::parse("qmr").unwrap(), Method::Qmr);
    for bad in [
        "gmres:0",
        "gmres:x",
        "gmres:",
        "bicgstab:2",
        "bicgstab-l:0",
        "qmr:1",
        "minres",
    ] {
        assert!(
            matches!(Method::parse(bad), Err(Error::InvalidArgument(_))),
            "{bad}"
        );
    }
    let g = CpuBackend::new();
    let a = generators::laplace2d::<f64>(3);
    let op = MatrixOperator::new(&g, &a, Layout::Csr).unwrap();
    let b = g.upload(&[1.0; 9]).unwrap();
    let mut x = g.zeros::<f64>(9).unwrap();
    assert!(matches!(
        gmres(&g, &op, None, &b, &mut x, 0, &KrylovOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        bicgstab_l(&g, &op, None, &b, &mut x, 0, &KrylovOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn stagnation_is_an_error_naming_it() {
    // The cyclic shift: GMRES(m) with m < n makes no progress at all from x0 = 0
    // on b = e1 (the residual stays ||b|| until step n).
    let n = 12;
    let mut coo = Coo::new(n, n);
    for i in 0..n {
        coo.push((i + 1) % n, i, 1.0).unwrap();
    }
    let a = Csr::from_coo(&coo).unwrap();
    let be = CpuBackend::new();
    let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
    let mut e1 = vec![0.0; n];
    e1[0] = 1.0;
    let b = be.upload(&e1).unwrap();
    let mut x = be.zeros::<f64>(n).unwrap();
    let opts = KrylovOptions {
        stagnation_window: 20,
        ..KrylovOptions::default()
    };
    match gmres(&be, &op, None, &b, &mut x, 3, &opts) {
        Err(Error::Breakdown {
            quantity, report, ..
        }) => {
            assert_eq!(quantity, gpuq::krylov::STAGNATION);
            assert!(!report.converged && report.iterations >= 20, "{report:?}");
            assert!((report.relative_residual - 1.0).abs() < 1e-12);
        }
        other => panic!("expected stagnation, got {other:?}"),
    }
    // Full GMRES solves it in n steps; stagnation detection is off with window 0.
    let opts = KrylovOptions {
        stagnation_window: 0,
        max_iter: Some(200),
        ..KrylovOptions::default()
    };
    let mut x = be.zeros::<f64>(n).unwrap();
    let r = gmres(&be, &op, None, &b, &mut x, n, &opts).unwrap();
    assert!(r.converged && r.iterations == n, "{r:?}");
}

/// A BiCGSTAB(l) breakdown inside a cycle leaves x where the cycle had taken
/// it: with l at least n the Krylov space runs out mid-cycle (r0^H u vanishes
/// once r does), and x must stay the solution it reached, not be blown up by
/// the rest of the cycle; an extreme scaling must not turn it non-finite.
#[test]
fn bicgstab_l_breakdown_keeps_the_iterate_reached() {
    let be = CpuBackend::new();
    let opts = KrylovOptions::default();
    let a = generators::laplace1d::<f64>(2, 0.3);
    let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
    let b = be.upload(&[1.0, 2.0]).unwrap();
    let mut x = be.zeros::<f64>(2).unwrap();
    let report = match bicgstab_l(&be, &op, None, &b, &mut x, 8, &opts) {
        Ok(r) => r,
        Err(Error::Breakdown { report, .. }) => *report,
        Err(e) => panic!("{e}"),
    };
    assert!(report.relative_residual < 1e-10, "{report:?}");
    let mut coo = Coo::new(4, 4);
    for (i, v) in [1e200, 1.0, 2.0, 3.0].into_iter().enumerate() {
        coo.push(i, i, v).unwrap();
    }
    let a = Csr::from_coo(&coo).unwrap();
    let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
    let b = be.upload(&[1.0, 1.0, 1.0, 1.0]).unwrap();
    let mut x = be.zeros::<f64>(4).unwrap();
    let report = match bicgstab_l(&be, &op, None, &b, &mut x, 4, &opts) {
        Ok(r) => r,
        Err(Error::Breakdown { report, .. }) => *report,
        Err(e) => panic!("{e}"),
    };
    let xs = be.download(&x).unwrap();
    assert!(xs.iter().all(|v| v.is_finite()), "{xs:?} {report:?}");
}
