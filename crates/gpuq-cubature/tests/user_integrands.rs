//! User integrands on the CPU backend: expressions with closed-form integrals
//! through every method, f1-f5 written as expressions against the built-ins
//! (bit for bit), NaN-producing integrands stopped with their point, device
//! code with and without a host twin, and the Rust example integrand.

use gpuq_core::Error;
use gpuq_cpu::CpuBackend;
use gpuq_cubature::rules::{build_lanes, RuleKind};
use gpuq_cubature::{
    builtin, gauss_hermite, integrate, CubatureKernels, Expr, Func, Method, Options, UserCode,
};
use gpuq_kernels::cubature::integrand::{self as k, Integrand};

mod common;

use common::{bump_integral, closed_forms, opts, random_boxes, rng, BUMP_CUDA_C, F_EXPRESSIONS};

const METHODS: [Method; 4] = [
    Method::Cuhre,
    Method::TwoPhase,
    Method::BreadthFirst,
    Method::GaussLegendreAuto,
];

#[test]
fn expressions_meet_their_closed_forms_with_every_method() {
    let cpu = CpuBackend::new();
    let cases = closed_forms();
    for (text, n, exact) in cases {
        let e = Expr::parse(text, n).unwrap();
        for m in METHODS {
            let o = integrate(
                &cpu,
                m,
                Func::Expr(&e),
                &vec![0.0; n],
                &vec![1.0; n],
                &opts(1e-8, 20_000_000),
            )
            .unwrap();
            assert!(o.converged(), "{text} {m:?}: {o:?}");
            assert!(
                (o.estimate - exact).abs() <= 1e-8 * exact.abs(),
                "{text} {m:?}: {} vs {exact}",
                o.estimate
            );
        }
    }
}

#[test]
fn per_axis_bounds_are_honoured() {
    // x1^2 x2 + 3 x3 - x1 x2 x3 over [0, 2] x [-1, 1] x [1, 3]: 0 + 48 - 0.
    let cpu = CpuBackend::new();
    let e = Expr::parse("x1^2*x2 + 3*x3 - x1*x2*x3", 3).unwrap();
    for m in [Method::Cuhre, Method::TwoPhase, Method::BreadthFirst] {
        let o = integrate(
            &cpu,
            m,
            Func::Expr(&e),
            &[0.0, -1.0, 1.0],
            &[2.0, 1.0, 3.0],
            &opts(1e-10, 1_000_000),
        )
        .unwrap();
        assert!((o.estimate - 48.0).abs() < 1e-9, "{m:?}: {}", o.estimate);
    }
    // The tensor rule needs one interval for every axis.
    assert!(integrate(
        &cpu,
        Method::GaussLegendre(4),
        Func::Expr(&e),
        &[0.0, -1.0, 1.0],
        &[2.0, 1.0, 3.0],
        &opts(1e-10, 1_000_000),
    )
    .is_err());
}

#[test]
fn infinite_and_mismatched_bounds_are_refused() {
    let cpu = CpuBackend::new();
    let e = Expr::parse("exp(-x1^2 - x2^2)", 2).unwrap();
    let err = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Expr(&e),
        &[f64::NEG_INFINITY, 0.0],
        &[f64::INFINITY, 1.0],
        &opts(1e-6, 1_000_000),
    )
    .unwrap_err();
    assert!(err.to_string().contains("finite"), "{err}");
    // Three bounds for a 2-variable expression.
    let err = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Expr(&e),
        &[0.0; 3],
        &[1.0; 3],
        &opts(1e-6, 1_000_000),
    )
    .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
}

#[test]
fn gauss_hermite_expectation_of_an_expression() {
    // E[exp(t q1) q2^2] = exp(t^2 / 2) for independent standard normals.
    let cpu = CpuBackend::new();
    let e = Expr::parse("exp(0.1 * x1) * x2^2", 2).unwrap();
    let v = gauss_hermite(2, 12)
        .unwrap()
        .integrate(&cpu, Func::Expr(&e))
        .unwrap();
    assert!((v - 0.005f64.exp()).abs() < 1e-14, "{v}");
}

#[test]
fn f1_to_f5_as_expressions_are_the_builtins_bit_for_bit() {
    let cpu = CpuBackend::new();
    let mut rng = rng(29);
    for (kind, text) in F_EXPRESSIONS {
        for n in [2usize, 5, 8] {
            let b = builtin(kind, n, &[], &[]).unwrap();
            let e = Expr::parse(text, n).unwrap();
            let rule = build_lanes(RuleKind::Cuhre, n).unwrap();
            let boxes = random_boxes(n, 40, &mut rng);
            let want = cpu.cub_evaluate(&rule, Func::Builtin(b), &boxes).unwrap();
            let got = cpu.cub_evaluate(&rule, Func::Expr(&e), &boxes).unwrap();
            assert_eq!(want, got, "f{} n={n}", kind + 1);
        }
    }
    // Whole runs: the same estimates, evaluations and boxes.
    for (kind, text) in F_EXPRESSIONS {
        let n = 4;
        let b = builtin(kind, n, &[], &[]).unwrap();
        let e = Expr::parse(text, n).unwrap();
        for m in [Method::TwoPhase, Method::BreadthFirst] {
            let o = opts(1e-3, 3_000_000);
            let (lo, hi) = ([0.0; 4], [1.0; 4]);
            let want = integrate(&cpu, m, Func::Builtin(b), &lo, &hi, &o).unwrap();
            let got = integrate(&cpu, m, Func::Expr(&e), &lo, &hi, &o).unwrap();
            assert_eq!(
                want.estimate.to_bits(),
                got.estimate.to_bits(),
                "f{}",
                kind + 1
            );
            assert_eq!(want.evaluations, got.evaluations);
            assert_eq!(want.boxes, got.boxes);
        }
    }
}

#[test]
fn nan_values_stop_every_method_naming_a_point() {
    let cpu = CpuBackend::new();
    // log of a negative number below x1 = 0.3.
    let e = Expr::parse("log(x1 - 0.3) + x2", 2).unwrap();
    let closure = |x: &[f64]| (x[0] - 0.3).ln() + x[1];
    for f in [Func::Expr(&e), Func::Closure(&closure)] {
        for m in [
            Method::Cuhre,
            Method::TwoPhase,
            Method::BreadthFirst,
            Method::GaussLegendre(6),
            Method::GaussLegendreAuto,
        ] {
            let err =
                integrate(&cpu, m, f, &[0.0; 2], &[1.0; 2], &opts(1e-6, 1_000_000)).unwrap_err();
            match err {
                Error::IntegrandNotFinite { value, point } => {
                    assert!(value.is_nan(), "{m:?}: {value}");
                    assert_eq!(point.len(), 2);
                    assert!(point[0] < 0.3, "{m:?}: {point:?}");
                }
                other => panic!("{m:?}: {other}"),
            }
        }
    }
    // An infinite value (1/0 at the middle Gauss-Hermite node, 0) stops it too.
    let e = Expr::parse("1/x1", 1).unwrap();
    let err = gauss_hermite(1, 3)
        .unwrap()
        .integrate(&cpu, Func::Expr(&e))
        .unwrap_err();
    assert!(matches!(err, Error::IntegrandNotFinite { .. }), "{err}");
    // One initial box: its centre, x1 = 0, is the first point evaluated.
    let err = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Expr(&Expr::parse("1/x1 + x2", 2).unwrap()),
        &[-1.0; 2],
        &[1.0; 2],
        &Options {
            initial_boxes: 1,
            ..opts(1e-6, 1_000_000)
        },
    )
    .unwrap_err();
    match err {
        Error::IntegrandNotFinite { value, point } => {
            assert!(value.is_infinite());
            assert_eq!(point, vec![0.0, 0.0]);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn builtins_with_nonfinite_values_are_stopped_too() {
    // Genz corner peak (1 + sum a_i x_i)^-(n+1) with a = -1: infinite on the
    // line x1 + x2 = 1, where the centres of half the initial boxes lie.
    let cpu = CpuBackend::new();
    let b = builtin(k::GENZ_CORNER_PEAK, 2, &[-1.0], &[]).unwrap();
    let err = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Builtin(b),
        &[0.0; 2],
        &[1.0; 2],
        &opts(1e-6, 1_000_000),
    )
    .unwrap_err();
    assert!(matches!(err, Error::IntegrandNotFinite { .. }), "{err}");
}

#[test]
fn device_code_needs_a_host_twin_on_the_cpu() {
    let cpu = CpuBackend::new();
    let code = UserCode::cuda_source(BUMP_CUDA_C, 3).unwrap();
    let err = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Code(&code),
        &[0.0; 3],
        &[1.0; 3],
        &opts(1e-8, 10_000_000),
    )
    .unwrap_err();
    assert!(err.to_string().contains("host function"), "{err}");
    assert!(cpu.cub_prepare(Func::Code(&code)).is_err());
    // With the Rust example as its host twin (the same function).
    let host = |x: &[f64]| rust_integrand::Bump.eval(x);
    let code = code.with_host(&host);
    assert_eq!(
        cpu.cub_prepare(Func::Code(&code)).unwrap().evaluation,
        "host"
    );
    let o = integrate(
        &cpu,
        Method::BreadthFirst,
        Func::Code(&code),
        &[0.0; 3],
        &[1.0; 3],
        &opts(1e-10, 20_000_000),
    )
    .unwrap();
    assert!(
        (o.estimate - bump_integral(3)).abs() < 1e-10 * bump_integral(3),
        "{} vs {}",
        o.estimate,
        bump_integral(3)
    );
    // PTX that does not define gpuq_integrand is refused at once; CUDA C
    // without it is a function body, wrapped into one.
    assert!(UserCode::ptx(".version 7.0", 2).is_err());
    assert!(UserCode::ptx(BUMP_CUDA_C, 0).is_err());
    let body = UserCode::cuda_source("return gpuq_exp(-x[0] * x[1]);", 2).unwrap();
    assert!(body
        .text
        .contains("double gpuq_integrand(const double* x, unsigned int n)"));
    assert!(body
        .text
        .contains("extern \"C\" __device__ double gpuq_exp(double);"));
    assert!(body.text.contains("return gpuq_exp(-x[0] * x[1]);"));
}

#[test]
fn rising_order_rule_stops_at_its_largest_order_not_converged() {
    // sqrt has an algebraic singularity at 0: 64 points per axis cannot reach
    // 1e-15, and the run says so instead of failing.
    let cpu = CpuBackend::new();
    let e = Expr::parse("sqrt(x1)", 1).unwrap();
    let o = integrate(
        &cpu,
        Method::GaussLegendreAuto,
        Func::Expr(&e),
        &[0.0],
        &[1.0],
        &opts(1e-15, u64::MAX),
    )
    .unwrap();
    assert!(!o.converged());
    assert_eq!(o.rounds, 63);
    assert!((o.estimate - 2.0 / 3.0).abs() < 1e-5);
}
