//! CPU and CUDA agree: per-box rule applications and second-phase runs bit for
//! bit, tensor sums and the parallel methods' results bit for bit (the sums are
//! added on the host in the same order). Skips itself without a CUDA device.

#![cfg(feature = "cuda")]

use gpuq_cpu::CpuBackend;
use gpuq_cubature::reference::{self, unit_cube};
use gpuq_cubature::rules::{build_lanes, RuleKind};
use gpuq_cubature::{
    builtin, gauss_hermite, integrate, Boxes, CubatureKernels, Func, Method, Options,
};
use gpuq_cuda::CudaBackend;
use gpuq_kernels::cubature::integrand as k;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::OnceLock;

/// The device, or `None` (test skipped) when there is no driver or device.
fn gpu(test: &str) -> Option<&'static CudaBackend> {
    static GPU: OnceLock<Option<CudaBackend>> = OnceLock::new();
    let g = GPU
        .get_or_init(|| match CudaBackend::new(0) {
            Ok(g) => Some(g),
            Err(gpuq_core::Error::NoCudaDevice(_)) => None,
            Err(e) => panic!("the CUDA backend failed to start: {e}"),
        })
        .as_ref();
    if g.is_none() {
        eprintln!("{test}: skipped (no CUDA device)");
    }
    g
}

fn random_boxes(n: usize, count: usize, rng: &mut ChaCha8Rng) -> Boxes {
    let mut b = Boxes::new(n);
    for _ in 0..count {
        let c: Vec<f64> = (0..n).map(|_| rng.random_range(0.1..0.9)).collect();
        let h: Vec<f64> = (0..n).map(|_| rng.random_range(0.01..0.1)).collect();
        b.push(&c, &h);
    }
    b
}

#[test]
fn rule_applications_match_bit_for_bit() {
    let Some(g) = gpu("rule_applications_match_bit_for_bit") else {
        return;
    };
    let cpu = CpuBackend::new();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (n, kind) in [
        (2, RuleKind::Cuhre),
        (3, RuleKind::Cuhre),
        (5, RuleKind::Cuhre),
        (8, RuleKind::Degree9),
        (4, RuleKind::GenzMalik7),
        (12, RuleKind::Cuhre),
    ] {
        let rule = build_lanes(kind, n).unwrap();
        let boxes = random_boxes(n, 300, &mut rng);
        for id in 0..k::KINDS {
            let f = builtin(id, n, &[2.5], &[0.4]).unwrap();
            let a = cpu.cub_evaluate(&rule, Func::Builtin(f), &boxes).unwrap();
            let b = g.cub_evaluate(&rule, Func::Builtin(f), &boxes).unwrap();
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    (x.estimate.to_bits(), x.error.to_bits(), x.axis),
                    (y.estimate.to_bits(), y.error.to_bits(), y.axis),
                    "n={n} {kind:?} integrand {id} box {i}: cpu {x:?} gpu {y:?}"
                );
            }
        }
    }
}

#[test]
fn second_phase_runs_match_bit_for_bit() {
    let Some(g) = gpu("second_phase_runs_match_bit_for_bit") else {
        return;
    };
    let cpu = CpuBackend::new();
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for n in [2, 3, 5] {
        let lanes = build_lanes(RuleKind::Cuhre, n).unwrap();
        let boxes = random_boxes(n, 200, &mut rng);
        let f = Func::Builtin(builtin(k::GENZ_GAUSSIAN, n, &[8.0], &[0.5]).unwrap());
        // Each box from its rule result, tolerances of three sizes.
        let roots = cpu.cub_evaluate(&lanes, f, &boxes).unwrap();
        let tols: Vec<f64> = (0..boxes.len())
            .map(|b| [1e-9, 1e-7, 1e-5][b % 3])
            .collect();
        let a = cpu
            .cub_local(&lanes.rule, f, &boxes, &roots, &tols, 40_000)
            .unwrap();
        let b = g
            .cub_local(&lanes.rule, f, &boxes, &roots, &tols, 40_000)
            .unwrap();
        assert_eq!(a, b, "n={n}");
    }
}

#[test]
fn tensor_sums_match_and_give_n() {
    let Some(g) = gpu("tensor_sums_match_and_give_n") else {
        return;
    };
    let cpu = CpuBackend::new();
    for n in [3usize, 6, 9] {
        let rule = gauss_hermite(n, 4).unwrap();
        let f = Func::Builtin(builtin(k::SUM_OF_SQUARES, n, &[], &[]).unwrap());
        let a = rule.integrate(&cpu, f).unwrap();
        let b = rule.integrate(g, f).unwrap();
        assert_eq!(a.to_bits(), b.to_bits(), "n={n}: {a} vs {b}");
        assert!((b - n as f64).abs() < 1e-11 * n as f64);
    }
    // Closures run on the host for the CUDA backend: the CPU's result.
    let rule = gauss_hermite(2, 3).unwrap();
    let f = Func::Closure(&|x: &[f64]| x[0] * x[0] + x[1]);
    let a = rule.integrate(&cpu, f).unwrap();
    assert_eq!(a.to_bits(), rule.integrate(g, f).unwrap().to_bits());
}

#[test]
fn parallel_methods_match_and_meet_references() {
    let Some(g) = gpu("parallel_methods_match_and_meet_references") else {
        return;
    };
    let cpu = CpuBackend::new();
    let opts = |rel_tol| Options {
        rel_tol,
        max_evals: 200_000_000,
        max_boxes: 1 << 14,
        initial_boxes: 256,
        ..Default::default()
    };
    for (kind, n, tol, want) in [
        (k::F5, 5, 1e-5, 2.5),
        (k::F2, 3, 1e-3, unit_cube(k::F2, 3).unwrap()),
        (k::F4, 4, 1e-4, unit_cube(k::F4, 4).unwrap()),
        (k::F1, 3, 1e-4, f64::NAN),
    ] {
        let f = Func::Builtin(builtin(kind, n, &[], &[]).unwrap());
        let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
        for m in [Method::TwoPhase, Method::BreadthFirst] {
            let a = integrate(&cpu, m, f, &lo, &hi, &opts(tol)).unwrap();
            let b = integrate(g, m, f, &lo, &hi, &opts(tol)).unwrap();
            assert_eq!(
                a.estimate.to_bits(),
                b.estimate.to_bits(),
                "{kind} n={n} {m:?}"
            );
            assert_eq!(a.error.to_bits(), b.error.to_bits());
            assert_eq!((a.evaluations, a.boxes), (b.evaluations, b.boxes));
            assert!(b.converged(), "{kind} n={n} {m:?}: {b:?}");
            if want.is_finite() {
                assert!(
                    (b.estimate - want).abs() <= tol * want.abs(),
                    "{kind} n={n} {m:?}: {}",
                    b.estimate
                );
            }
        }
    }
}

/// Seed 004's Table III cases on the device (run in release:
/// `cargo test --release -p gpuq-cubature --test cross_backend -- --ignored --nocapture`).
#[test]
#[ignore]
fn seed_table3_cases_on_the_device() {
    let Some(g) = gpu("seed_table3_cases_on_the_device") else {
        return;
    };
    for (kind, n, tol, want) in [
        (k::F1, 7, 1e-5, reference::F1_N7),
        (k::F2, 5, 1e-2, reference::F2_N5),
        (k::F3, 5, 1e-2, f64::NAN),
        (k::F4, 6, 1e-5, reference::F4_N6),
        (k::F5, 8, 1e-7, 4.0),
    ] {
        let f = Func::Builtin(builtin(kind, n, &[], &[]).unwrap());
        let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
        for m in [Method::TwoPhase, Method::BreadthFirst] {
            let o = Options {
                rel_tol: tol,
                max_evals: 5_000_000_000,
                max_boxes: 1 << 20,
                initial_boxes: 1 << 14,
                ..Default::default()
            };
            let r = integrate(g, m, f, &lo, &hi, &o).unwrap();
            println!(
                "f{} n={n} tol={tol:e} {m:?}: {:.15} err {:.2e} true {:.2e} evals {} {:?} {:.3} s",
                kind + 1,
                r.estimate,
                r.error,
                (r.estimate - want).abs(),
                r.evaluations,
                r.status,
                r.timings.total_s
            );
        }
    }
}

/// Seed 004's Table III cases on the device with the defaults: nothing but the
/// tolerance set (`Method::Auto`, the backend's evaluation cap, the library's
/// boxes); each converges and meets its reference (run in release:
/// `cargo test --release -p gpuq-cubature --test cross_backend -- --ignored --nocapture`).
#[test]
#[ignore]
fn seed_table3_cases_with_the_defaults_on_the_device() {
    let Some(g) = gpu("seed_table3_cases_with_the_defaults_on_the_device") else {
        return;
    };
    for (kind, n, tol, want) in [
        (k::F1, 7, 1e-5, reference::F1_N7),
        (k::F2, 5, 1e-2, reference::F2_N5),
        (k::F3, 5, 1e-2, f64::NAN),
        (k::F4, 6, 1e-5, reference::F4_N6),
        (k::F5, 8, 1e-6, 4.0),
        (k::F5, 8, 1e-7, 4.0),
    ] {
        let f = Func::Builtin(builtin(kind, n, &[], &[]).unwrap());
        let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
        let o = Options {
            rel_tol: tol,
            ..Default::default()
        };
        let r = integrate(g, Method::Auto, f, &lo, &hi, &o).unwrap();
        println!(
            "f{} n={n} tol={tol:e} auto ({}): {:.15} err {:.2e} true {:.2e} evals {} {:?} {:.3} s",
            kind + 1,
            r.method,
            r.estimate,
            r.error,
            (r.estimate - want).abs(),
            r.evaluations,
            r.status,
            r.timings.total_s
        );
        assert!(r.converged(), "f{} n={n}: {r:?}", kind + 1);
        if want.is_finite() {
            assert!((r.estimate - want).abs() <= tol * want.abs(), "{r:?}");
        }
    }
}
