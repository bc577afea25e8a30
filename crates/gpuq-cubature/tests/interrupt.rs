//! A stop request ([`gpuq_core::interrupt`], Ctrl-C in the CLI) ends every adaptive method
//! and the Gauss-Legendre sequence after their first round, with the estimate of that round
//! and the status `Interrupted`. (A test binary of its own: the request is process-wide.)

use gpuq_cpu::CpuBackend;
use gpuq_cubature::{builtin, integrate, Func, Method, Options, Status};
use gpuq_kernels::cubature::integrand as k;

#[test]
fn a_stop_request_ends_each_method_after_its_first_round() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    let n = 4;
    let f = builtin(k::GENZ_DISCONTINUOUS, n, &[3.0], &[0.4]).unwrap();
    let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
    // A tolerance none of them meets in one round (nor within the cap).
    let opts = Options {
        rel_tol: 1e-14,
        max_evals: 1_000_000,
        ..Options::default()
    };
    gpuq_core::interrupt::request();
    for method in [
        Method::Cuhre,
        Method::TwoPhase,
        Method::BreadthFirst,
        Method::GaussLegendreAuto,
    ] {
        let o = integrate(&cpu, method, Func::Builtin(f), &lo, &hi, &opts).unwrap();
        assert_eq!(o.status, Status::Interrupted, "{method}: {o:?}");
        assert!(o.rounds <= 1, "{method}: {o:?}");
        assert!(
            o.estimate.is_finite() && o.evaluations > 0,
            "{method}: {o:?}"
        );
        assert_eq!(o.status.reason(), "interrupted");
    }
    gpuq_core::interrupt::clear();
    let o = integrate(&cpu, Method::Cuhre, Func::Builtin(f), &lo, &hi, &opts).unwrap();
    assert_eq!(o.status, Status::EvaluationCap, "cleared: {o:?}");
}
