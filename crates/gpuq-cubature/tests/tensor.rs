//! Tensor Gauss rules: exactness, E[q^T q] = N, determinism.

use gpuq_cpu::CpuBackend;
use gpuq_cubature::func::{builtin, Func};
use gpuq_cubature::tensor::{gauss_hermite, gauss_legendre, hermite_1d, legendre_1d};
use gpuq_kernels::cubature::integrand::SUM_OF_SQUARES;

fn double_factorial(k: u32) -> f64 {
    (1..=k).rev().step_by(2).map(|v| v as f64).product()
}

#[test]
fn one_dimensional_rules_are_exact_to_degree_2na_minus_1() {
    for na in 1..=30 {
        let (x, w) = hermite_1d(na);
        let (xl, wl) = legendre_1d(na);
        for p in 0..(2 * na as u32) {
            let m: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(p as i32)).sum();
            let want = if p % 2 == 1 {
                0.0
            } else {
                double_factorial(p.saturating_sub(1))
            };
            let scale: f64 = x
                .iter()
                .zip(&w)
                .map(|(x, w)| w * x.abs().powi(p as i32))
                .sum();
            assert!(
                (m - want).abs() <= 1e-12 * scale.max(1.0),
                "hermite na={na} p={p}: {m} vs {want}"
            );
            let ml: f64 = xl.iter().zip(&wl).map(|(x, w)| w * x.powi(p as i32)).sum();
            let wantl = if p % 2 == 1 {
                0.0
            } else {
                2.0 / (p + 1) as f64
            };
            assert!(
                (ml - wantl).abs() <= 1e-13,
                "legendre na={na} p={p}: {ml} vs {wantl}"
            );
        }
        // One degree more is not exact (na >= 2: the even moment 2 na).
        if na >= 2 {
            let p = 2 * na as i32;
            let m: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(p)).sum();
            assert!((m - double_factorial(p as u32 - 1)).abs() > 1e-6);
        }
    }
}

#[test]
fn hermite_expectation_of_sum_of_squares_is_n() {
    let cpu = CpuBackend::new();
    for n in [1usize, 3, 6, 8] {
        let rule = gauss_hermite(n, 4).unwrap();
        let f = builtin(SUM_OF_SQUARES, n, &[], &[]).unwrap();
        let e = rule.integrate(&cpu, Func::Builtin(f)).unwrap();
        assert!((e - n as f64).abs() < 1e-12 * n as f64, "n={n}: {e}");
    }
}

#[test]
fn tensor_polynomials_exact_and_thread_count_free() {
    // E[q1^4 q2^2 q3^6] = 3 * 1 * 15 with N_a = 4 (degree 7 per axis).
    let rule = gauss_hermite(3, 4).unwrap();
    let f = |x: &[f64]| x[0].powi(4) * x[1].powi(2) * x[2].powi(6);
    let one = CpuBackend::with_threads(1).unwrap();
    let many = CpuBackend::with_threads(3).unwrap();
    let a = rule.integrate(&one, Func::Closure(&f)).unwrap();
    let b = rule.integrate(&many, Func::Closure(&f)).unwrap();
    assert_eq!(a.to_bits(), b.to_bits());
    assert!((a - 45.0).abs() < 1e-11, "{a}");
    // Legendre on [0, 2]^2: integral of x^5 y^3 = (64 / 6) (16 / 4).
    let rule = gauss_legendre(2, 3, 0.0, 2.0).unwrap();
    let g = |x: &[f64]| x[0].powi(5) * x[1].powi(3);
    let v = rule.integrate(&one, Func::Closure(&g)).unwrap();
    assert!((v - 64.0 / 6.0 * 4.0).abs() < 1e-12, "{v}");
    assert!(gauss_hermite(0, 4).is_err() && gauss_legendre(2, 3, 1.0, 0.0).is_err());
}

/// The rising-order Gauss-Legendre rule meets the tolerance on a smooth
/// integrand with a closed form (f5: n / 2 on the unit cube), its error
/// estimate bounds the true error there, and a cap too small for agreement
/// is reported as not converged.
#[test]
fn rising_order_gauss_legendre_converges_or_says_not() {
    use gpuq_cubature::tensor::gauss_legendre_auto;
    use gpuq_cubature::{Options, Status};
    use gpuq_kernels::cubature::integrand::F5;
    let cpu = CpuBackend::new();
    let n = 4;
    let f = Func::Builtin(builtin(F5, n, &[], &[]).unwrap());
    let opts = Options {
        rel_tol: 1e-9,
        ..Options::default()
    };
    let o = gauss_legendre_auto(&cpu, f, n, 0.0, 1.0, &opts).unwrap();
    assert_eq!(o.status, Status::Converged, "{o:?}");
    let truth = n as f64 / 2.0;
    assert!((o.estimate - truth).abs() <= 1e-9 * truth, "{o:?}");
    assert!(o.error <= 1e-9 * o.estimate.abs());
    let capped = Options {
        max_evals: 3000,
        ..opts
    };
    let o = gauss_legendre_auto(&cpu, f, n, 0.0, 1.0, &capped).unwrap();
    assert_eq!(o.status, Status::EvaluationCap, "{o:?}");
    assert!(o.evaluations <= 3000 && o.error > 1e-9 * o.estimate.abs());
}

/// On f4 (asin: square-root singularities at the cube's far faces, so the
/// rule's error decays only algebraically) the rising-order rule either says
/// "not converged" or is within the tolerance: its error estimate does not
/// take the small differences of successive orders for the error.
#[test]
fn rising_order_gauss_legendre_is_not_fooled_by_a_singularity() {
    use gpuq_cubature::reference::f4_series;
    use gpuq_cubature::tensor::gauss_legendre_auto;
    use gpuq_cubature::{Options, Status};
    use gpuq_kernels::cubature::integrand::F4;
    let cpu = CpuBackend::new();
    for n in [2, 3] {
        let truth = f4_series(n);
        let f = Func::Builtin(builtin(F4, n, &[], &[]).unwrap());
        for rel_tol in [1e-3, 1e-4, 1e-5] {
            let opts = Options {
                rel_tol,
                max_evals: 3_000_000,
                ..Options::default()
            };
            let o = gauss_legendre_auto(&cpu, f, n, 0.0, 1.0, &opts).unwrap();
            let true_err = (o.estimate - truth).abs();
            if o.status == Status::Converged {
                assert!(
                    true_err <= rel_tol * truth.abs(),
                    "n={n} {rel_tol}: {o:?}, true {true_err:e}"
                );
            }
            assert!(
                o.error >= 0.5 * true_err,
                "n={n} {rel_tol}: {o:?}, true {true_err:e}"
            );
        }
    }
}
