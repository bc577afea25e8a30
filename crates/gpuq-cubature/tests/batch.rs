//! Batch integrands ([`Func::Batch`]): the same estimates as the point-wise closure of
//! the same function on every method, far fewer calls than points on the methods that
//! evaluate whole rounds, and their errors and NaNs stop the run with a clear error.

use gpuq_core::Error;
use gpuq_cpu::CpuBackend;
use gpuq_cubature::{integrate, Func, Method, Options};
use std::sync::atomic::{AtomicUsize, Ordering};

fn f(x: &[f64]) -> f64 {
    (-x[0] * x[1]).exp() + x[2] * x[2]
}

#[test]
fn a_batch_integrand_gives_the_closures_estimates_in_few_calls() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    let (lo, hi) = ([0.0; 3], [1.0; 3]);
    let calls = AtomicUsize::new(0);
    let batch = |points: &[f64], values: &mut [f64]| {
        calls.fetch_add(1, Ordering::Relaxed);
        for (x, v) in points.chunks(3).zip(values.iter_mut()) {
            *v = f(x);
        }
        Ok(())
    };
    let opts = Options {
        rel_tol: 1e-8,
        ..Options::default()
    };
    for method in [
        Method::BreadthFirst,
        Method::TwoPhase,
        Method::Cuhre,
        Method::GaussLegendreAuto,
    ] {
        calls.store(0, Ordering::Relaxed);
        let by_point = integrate(&cpu, method, Func::Closure(&f), &lo, &hi, &opts).unwrap();
        let by_batch = integrate(&cpu, method, Func::Batch(&batch), &lo, &hi, &opts).unwrap();
        assert_eq!(by_batch.estimate, by_point.estimate, "{method}");
        assert_eq!(by_batch.error, by_point.error, "{method}");
        assert_eq!(by_batch.evaluations, by_point.evaluations, "{method}");
        let n = calls.load(Ordering::Relaxed);
        if matches!(method, Method::BreadthFirst | Method::GaussLegendreAuto) {
            assert!(n as u64 <= by_batch.rounds + 1, "{method}: {n} calls");
        }
        assert!(
            (n as u64) < by_batch.evaluations / 10,
            "{method}: {n} calls"
        );
    }
}

#[test]
fn auto_runs_breadth_first_for_a_batch_integrand() {
    let cpu = CpuBackend::with_threads(1).unwrap();
    let batch = |points: &[f64], values: &mut [f64]| {
        for (x, v) in points.chunks(2).zip(values.iter_mut()) {
            *v = x[0] * x[1];
        }
        Ok(())
    };
    let o = integrate(
        &cpu,
        Method::Auto,
        Func::Batch(&batch),
        &[0.0; 2],
        &[1.0; 2],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(o.method, Method::BreadthFirst);
    assert!((o.estimate - 0.25).abs() < 1e-12);
}

#[test]
fn a_batch_integrands_error_or_nan_stops_the_run() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    let failing =
        |_: &[f64], _: &mut [f64]| Err(Error::InvalidArgument("the callable raised".into()));
    let e = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Batch(&failing),
        &[0.0; 2],
        &[1.0; 2],
        &Options::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("the callable raised"), "{e}");
    let nan = |points: &[f64], values: &mut [f64]| {
        for (x, v) in points.chunks(2).zip(values.iter_mut()) {
            *v = if x[0] > 0.9 { f64::NAN } else { 1.0 };
        }
        Ok(())
    };
    let e = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Batch(&nan),
        &[0.0; 2],
        &[1.0; 2],
        &Options::default(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::IntegrandNotFinite { .. }), "{e}");
}
