//! The defaults: `Method::Auto` picks a method by its rule and converges on
//! closed-form integrals; the evaluation cap follows the backend; the time
//! limit stops a run with its reason; the two-phase method's evaluations stay
//! near breadth-first's and sequential CUHRE's.

use gpuq_cpu::CpuBackend;
use gpuq_cubature::reference::exact_over_box;
use gpuq_cubature::{builtin, integrate, plan, Func, Method, Options, Status};
use gpuq_kernels::cubature::integrand as k;

#[test]
fn auto_picks_an_adaptive_method_and_converges_on_closed_forms() {
    let cases = [
        (k::GENZ_GAUSSIAN, 3, 1e-7),
        (k::GENZ_PRODUCT_PEAK, 4, 1e-6),
        (k::GENZ_OSCILLATORY, 5, 1e-6),
        (k::GENZ_C0, 3, 1e-4),
        (k::F5, 6, 1e-6),
    ];
    for threads in [1, 4] {
        let cpu = CpuBackend::with_threads(threads).unwrap();
        for (kind, n, tol) in cases {
            let f = builtin(kind, n, &[3.0], &[0.4]).unwrap();
            let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
            let exact = exact_over_box(&f, &lo, &hi).unwrap();
            let opts = Options {
                rel_tol: tol,
                ..Options::default()
            };
            let (chosen, resolved) = plan(&cpu, Method::Auto, Func::Builtin(f), n, &opts);
            assert_eq!(chosen, Method::choose_for(false, threads, n, tol));
            assert!(matches!(
                chosen,
                Method::Cuhre | Method::TwoPhase | Method::BreadthFirst
            ));
            assert!(resolved.max_evals > 0);
            let o = integrate(&cpu, Method::Auto, Func::Builtin(f), &lo, &hi, &opts).unwrap();
            assert_eq!(o.method, chosen, "{kind} n={n}");
            assert!(o.converged(), "{kind} n={n} {tol:e}: {o:?}");
            assert!(
                (o.estimate - exact).abs() <= tol * exact.abs(),
                "{kind} n={n} {tol:e} {chosen}: {} vs {exact}",
                o.estimate
            );
        }
    }
    // The report names the method: "auto" never runs as such.
    assert_eq!(Method::Auto.to_string(), "auto");
    assert_eq!("auto".parse::<Method>().unwrap(), Method::Auto);
    assert_eq!(Options::default().max_evals, Options::BACKEND_CAP);
}

#[test]
fn the_default_cap_follows_the_backend() {
    let f = Func::Builtin(builtin(k::F5, 4, &[], &[]).unwrap());
    let one = Options::backend_cap(&CpuBackend::with_threads(1).unwrap(), f);
    let four = Options::backend_cap(&CpuBackend::with_threads(4).unwrap(), f);
    assert_eq!(one, Options::host_thread_cap());
    assert_eq!(four, 4 * one);
    // A minute of the nominal throughput.
    assert_eq!(one, 180_000_000);
    // A cap given is kept.
    let o = Options {
        max_evals: 12345,
        ..Options::default()
    };
    assert_eq!(o.with_cap(one).max_evals, 12345);
    // Sequential CUHRE on the host gets one thread's cap whatever the backend.
    let (m, r) = plan(
        &CpuBackend::with_threads(4).unwrap(),
        Method::Cuhre,
        f,
        4,
        &Options::default(),
    );
    assert_eq!((m, r.max_evals), (Method::Cuhre, one));
}

#[test]
fn the_time_limit_stops_with_its_reason() {
    // f2 at n = 5 to 1e-9 takes minutes; a limit of a microsecond is past at
    // the first check between rounds on any machine, before a cap is reached
    // (a limit of 0.3 s was not: a fast host reached the box cap first).
    let f = Func::Builtin(builtin(k::F2, 5, &[], &[]).unwrap());
    let (lo, hi) = (vec![0.0; 5], vec![1.0; 5]);
    let cpu = CpuBackend::new();
    for m in [
        Method::Cuhre,
        Method::BreadthFirst,
        Method::TwoPhase,
        Method::GaussLegendreAuto,
    ] {
        let opts = Options {
            rel_tol: 1e-9,
            max_evals: 1 << 40,
            max_time: Some(1e-6),
            max_boxes: 4096,
            ..Options::default()
        };
        let o = integrate(&cpu, m, f, &lo, &hi, &opts).unwrap();
        assert_eq!(o.status, Status::TimeLimit, "{m}: {o:?}");
        assert!(!o.converged());
        assert_eq!(o.status.reason(), "time limit");
        assert_eq!(o.status.describe(), "not converged (time limit)");
        assert!(o.estimate.is_finite() && o.error > 0.0, "{m}: {o:?}");
        // It stops between rounds: well before the cap, soon after the limit.
        assert!(o.evaluations < 1 << 40);
        assert!(o.timings.total_s < 30.0, "{m}: {o:?}");
    }
    // A time limit must be positive.
    let bad = Options {
        max_time: Some(0.0),
        ..Options::default()
    };
    assert!(integrate(&cpu, Method::BreadthFirst, f, &lo, &hi, &bad).is_err());
}

#[test]
fn every_stop_has_a_reason() {
    for (s, r) in [
        (Status::Converged, "tolerance met"),
        (Status::EvaluationCap, "evaluation cap"),
        (Status::MemoryCap, "region cap"),
        (Status::TimeLimit, "time limit"),
    ] {
        assert_eq!(s.reason(), r);
    }
}

/// f1 at n = 4 to 1e-6 with the library's defaults: the first phase used to
/// split each bad box in four along one axis (4.0 x breadth-first's
/// evaluations); halving keeps it near breadth-first.
#[test]
fn two_phase_evaluations_stay_near_breadth_first() {
    let f = Func::Builtin(builtin(k::F1, 4, &[], &[]).unwrap());
    let (lo, hi) = (vec![0.0; 4], vec![1.0; 4]);
    let cpu = CpuBackend::new();
    let opts = Options {
        rel_tol: 1e-6,
        ..Options::default()
    };
    let bf = integrate(&cpu, Method::BreadthFirst, f, &lo, &hi, &opts).unwrap();
    let tp = integrate(&cpu, Method::TwoPhase, f, &lo, &hi, &opts).unwrap();
    assert!(bf.converged() && tp.converged(), "{bf:?} {tp:?}");
    assert!(
        2 * tp.evaluations <= 3 * bf.evaluations,
        "two-phase {} vs breadth-first {}",
        tp.evaluations,
        bf.evaluations
    );
    assert!((tp.estimate - bf.estimate).abs() <= 2e-6 * bf.estimate);
}

/// f3 at n = 3 to 1e-5 with room for 256 boxes: most of the work is the
/// second phase's. It used to give every box an equal share, re-evaluate
/// each box and restart starved boxes from scratch, and stopped at 2 x 10^8
/// evaluations unconverged; now it converges within 3 x sequential CUHRE's.
#[test]
fn the_second_phase_converges_within_a_few_times_sequential_cuhre() {
    let f = Func::Builtin(builtin(k::F3, 3, &[], &[]).unwrap());
    let (lo, hi) = (vec![0.0; 3], vec![1.0; 3]);
    let cpu = CpuBackend::new();
    let opts = Options {
        rel_tol: 1e-5,
        max_evals: 20_000_000,
        max_boxes: 256,
        ..Options::default()
    };
    let seq = integrate(&cpu, Method::Cuhre, f, &lo, &hi, &opts).unwrap();
    let tp = integrate(&cpu, Method::TwoPhase, f, &lo, &hi, &opts).unwrap();
    assert!(seq.converged() && tp.converged(), "{seq:?} {tp:?}");
    assert!(tp.timings.phase2_s > 0.0, "{tp:?}");
    assert!(
        tp.evaluations <= 3 * seq.evaluations,
        "two-phase {} vs sequential CUHRE {}",
        tp.evaluations,
        seq.evaluations
    );
    assert!((tp.estimate - seq.estimate).abs() <= 1e-5 * seq.estimate.abs() + seq.error);
}

/// A cap below the first batch stops every method with nothing to show: not
/// "converged" with an estimate of 0.
#[test]
fn a_cap_below_the_first_batch_is_not_convergence() {
    let f = Func::Builtin(builtin(k::F2, 5, &[], &[]).unwrap());
    let (lo, hi) = (vec![0.0; 5], vec![1.0; 5]);
    let opts = Options {
        rel_tol: 1e-6,
        max_evals: 20_000,
        ..Options::default()
    };
    for m in [Method::BreadthFirst, Method::TwoPhase] {
        let o = integrate(&CpuBackend::new(), m, f, &lo, &hi, &opts).unwrap();
        assert_eq!(o.status, Status::EvaluationCap, "{m}: {o:?}");
        assert_eq!(o.evaluations, 0);
    }
}

#[test]
fn auto_on_a_device_runs_two_phase_in_high_dimension() {
    use gpuq_cubature::DEVICE_TWO_PHASE_FROM_DIM as D;
    for tol in [1e-3, 1e-7] {
        assert_eq!(
            Method::choose_for(true, 1, D - 1, tol),
            Method::BreadthFirst
        );
        assert_eq!(Method::choose_for(true, 1, D, tol), Method::TwoPhase);
        assert_eq!(Method::choose_for(true, 1, D + 3, tol), Method::TwoPhase);
        // the host never picks two-phase
        assert_ne!(Method::choose_for(false, 64, D, tol), Method::TwoPhase);
    }
}
