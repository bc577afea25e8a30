//! User integrands on the CUDA backend against the CPU: expressions (CUDA C
//! from `gpuq-expr`, compiled by NVRTC and linked with the rule kernels) give
//! the CPU's bits per box, f1-f5 as expressions the built-ins' bits, closed
//! forms through every method; user CUDA C and the Rust example's PTX; NaN
//! stopped with its point; compile errors reported; the linked modules
//! cached. Skips itself without a CUDA device (run by the gpu-pack).

#![cfg(feature = "cuda")]

use gpuq_core::Error;
use gpuq_cpu::CpuBackend;
use gpuq_cubature::rules::{build_lanes, RuleKind};
use gpuq_cubature::{
    builtin, gauss_hermite, gauss_legendre, integrate, CubatureKernels, Expr, Func, Method,
    UserCode,
};
use gpuq_cuda::{CudaBackend, DeviceCode, LinkSource};
use gpuq_kernels::cubature::integrand::{self as k, Integrand};
use std::sync::OnceLock;

mod common;

use common::{bump_integral, closed_forms, opts, random_boxes, rng, F_EXPRESSIONS};

/// The device, or `None` (test skipped) when there is no driver or device.
fn gpu(test: &str) -> Option<&'static CudaBackend> {
    static GPU: OnceLock<Option<CudaBackend>> = OnceLock::new();
    let g = GPU
        .get_or_init(|| match CudaBackend::new(0) {
            Ok(g) => Some(g),
            Err(Error::NoCudaDevice(_)) => None,
            Err(e) => panic!("the CUDA backend failed to start: {e}"),
        })
        .as_ref();
    if g.is_none() {
        eprintln!("{test}: skipped (no CUDA device)");
    }
    g
}

#[test]
fn expressions_match_the_cpu_and_the_builtins_bit_for_bit() {
    let Some(g) = gpu("expressions_match_the_cpu_and_the_builtins_bit_for_bit") else {
        return;
    };
    let cpu = CpuBackend::new();
    let mut rng = rng(31);
    for (kind, text) in F_EXPRESSIONS {
        for n in [3usize, 5, 8] {
            let b = builtin(kind, n, &[], &[]).unwrap();
            let e = Expr::parse(text, n).unwrap();
            let rule = build_lanes(RuleKind::Cuhre, n).unwrap();
            let boxes = random_boxes(n, 300, &mut rng);
            let want = cpu.cub_evaluate(&rule, Func::Builtin(b), &boxes).unwrap();
            let dev_expr = g.cub_evaluate(&rule, Func::Expr(&e), &boxes).unwrap();
            assert_eq!(
                want,
                dev_expr,
                "f{} n={n}: expression on the device",
                kind + 1
            );
            // The second phase and the tensor sums too.
            let few = random_boxes(n, 20, &mut rng);
            let roots = cpu.cub_evaluate(&rule, Func::Builtin(b), &few).unwrap();
            let tols = vec![1e-9; few.len()];
            let a = cpu
                .cub_local(&rule.rule, Func::Builtin(b), &few, &roots, &tols, 20_000)
                .unwrap();
            let d = g
                .cub_local(&rule.rule, Func::Expr(&e), &few, &roots, &tols, 20_000)
                .unwrap();
            assert_eq!(a, d, "f{} n={n}: second phase", kind + 1);
            let t = gauss_legendre(n, 4, 0.0, 1.0).unwrap();
            let a = t.integrate(&cpu, Func::Builtin(b)).unwrap();
            let d = t.integrate(g, Func::Expr(&e)).unwrap();
            assert_eq!(a.to_bits(), d.to_bits(), "f{} n={n}: tensor", kind + 1);
        }
    }
}

#[test]
fn whole_runs_of_f1_to_f5_expressions_match_the_builtins() {
    let Some(g) = gpu("whole_runs_of_f1_to_f5_expressions_match_the_builtins") else {
        return;
    };
    for ((kind, text), (n, tol)) in
        F_EXPRESSIONS
            .iter()
            .zip([(5usize, 1e-4), (4, 1e-2), (4, 1e-2), (5, 1e-4), (6, 1e-6)])
    {
        let b = builtin(*kind, n, &[], &[]).unwrap();
        let e = Expr::parse(text, n).unwrap();
        for m in [Method::TwoPhase, Method::BreadthFirst] {
            let o = opts(tol, 200_000_000);
            let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
            let want = integrate(g, m, Func::Builtin(b), &lo, &hi, &o).unwrap();
            let got = integrate(g, m, Func::Expr(&e), &lo, &hi, &o).unwrap();
            let rel = (want.estimate - got.estimate).abs() / want.estimate.abs();
            assert!(rel <= 1e-12, "f{} {m:?}: {rel:e}", kind + 1);
            assert_eq!(want.evaluations, got.evaluations, "f{} {m:?}", kind + 1);
        }
    }
}

#[test]
fn closed_forms_on_the_device() {
    let Some(g) = gpu("closed_forms_on_the_device") else {
        return;
    };
    let cases = closed_forms();
    for (text, n, exact) in cases {
        let e = Expr::parse(text, n).unwrap();
        for m in [
            Method::Cuhre,
            Method::TwoPhase,
            Method::BreadthFirst,
            Method::GaussLegendreAuto,
        ] {
            let o = integrate(
                g,
                m,
                Func::Expr(&e),
                &vec![0.0; n],
                &vec![1.0; n],
                &opts(1e-8, 2_000_000_000),
            )
            .unwrap();
            assert!(o.converged(), "{text} {m:?}");
            assert!(
                (o.estimate - exact).abs() <= 1e-8 * exact.abs(),
                "{text} {m:?}: {} vs {exact}",
                o.estimate
            );
        }
    }
    // A Gauss-Hermite expectation of an expression.
    let e = Expr::parse("exp(0.1 * x1) * x2^2", 2).unwrap();
    let v = gauss_hermite(2, 12)
        .unwrap()
        .integrate(g, Func::Expr(&e))
        .unwrap();
    assert!((v - 0.005f64.exp()).abs() < 1e-14, "{v}");
}

/// The bump with CUDA's own `exp` (not gpuq's): user code may call either.
const BUMP_CUDA_C: &str = r#"
extern "C" __device__ double gpuq_integrand(const double* x, unsigned int n) {
    double s = 0.0;
    for (unsigned int k = 0; k < n; ++k) { double d = x[k] - 0.5; s += (k + 1.0) * d * d; }
    return exp(-s);
}
"#;

#[test]
fn user_cuda_c_and_rust_ptx_integrate_on_the_device() {
    let Some(g) = gpu("user_cuda_c_and_rust_ptx_integrate_on_the_device") else {
        return;
    };
    let host = |x: &[f64]| rust_integrand::Bump.eval(x);
    let ptx = include_str!("../../../examples/rust-integrand/rust_integrand.ptx");
    for n in [3usize, 6] {
        let exact = bump_integral(n);
        let c = UserCode::cuda_source(BUMP_CUDA_C, n).unwrap();
        let p = UserCode::ptx(ptx, n).unwrap().with_host(&host);
        for f in [Func::Code(&c), Func::Code(&p)] {
            assert_eq!(g.cub_prepare(f).unwrap().evaluation, "device-linked");
            for m in [Method::BreadthFirst, Method::TwoPhase, Method::Cuhre] {
                let o = integrate(
                    g,
                    m,
                    f,
                    &vec![0.0; n],
                    &vec![1.0; n],
                    &opts(1e-9, 1_000_000_000),
                )
                .unwrap();
                assert!(
                    (o.estimate - exact).abs() < 1e-9 * exact,
                    "{f:?} {m:?}: {} vs {exact}",
                    o.estimate
                );
            }
        }
        // A function body: sum of x_k^2 over the cube, n / 3.
        let body = UserCode::cuda_source(
            "double s = 0.0; for (unsigned int k = 0; k < n; ++k) s += x[k] * x[k]; return s;",
            n,
        )
        .unwrap();
        let o = integrate(
            g,
            Method::BreadthFirst,
            Func::Code(&body),
            &vec![0.0; n],
            &vec![1.0; n],
            &opts(1e-10, 100_000_000),
        )
        .unwrap();
        assert!(
            (o.estimate - n as f64 / 3.0).abs() < 1e-10,
            "{}",
            o.estimate
        );
        // The Rust PTX is the host twin's code: the same bits per box.
        let rule = build_lanes(RuleKind::Cuhre, n).unwrap();
        let boxes = random_boxes(n, 100, &mut rng(3));
        let cpu = CpuBackend::new()
            .cub_evaluate(&rule, Func::Code(&p), &boxes)
            .unwrap();
        let dev = g.cub_evaluate(&rule, Func::Code(&p), &boxes).unwrap();
        assert_eq!(cpu, dev);
    }
}

#[test]
fn nonfinite_values_on_the_device_name_their_point() {
    let Some(g) = gpu("nonfinite_values_on_the_device_name_their_point") else {
        return;
    };
    let e = Expr::parse("log(x1 - 0.3) + x2", 2).unwrap();
    for m in [
        Method::TwoPhase,
        Method::BreadthFirst,
        Method::GaussLegendre(6),
        Method::Cuhre,
    ] {
        let err = integrate(
            g,
            m,
            Func::Expr(&e),
            &[0.0; 2],
            &[1.0; 2],
            &opts(1e-6, 1_000_000),
        )
        .unwrap_err();
        match err {
            Error::IntegrandNotFinite { value, point } => {
                assert!(value.is_nan(), "{m:?}");
                assert_eq!(point.len(), 2);
                assert!(point[0] < 0.3, "{m:?}: {point:?}");
            }
            other => panic!("{m:?}: {other}"),
        }
    }
    // CUDA C code, and a built-in (located by the host's replay).
    let src = r#"extern "C" __device__ double gpuq_integrand(const double* x, unsigned int n) {
        return x[0] > 0.75 ? 1.0 / 0.0 : x[1]; }"#;
    let c = UserCode::cuda_source(src, 2).unwrap();
    let err = integrate(
        g,
        Method::BreadthFirst,
        Func::Code(&c),
        &[0.0; 2],
        &[1.0; 2],
        &opts(1e-6, 1_000_000),
    )
    .unwrap_err();
    match err {
        Error::IntegrandNotFinite { value, point } => {
            assert_eq!(value, f64::INFINITY);
            assert!(point[0] > 0.75, "{point:?}");
        }
        other => panic!("{other}"),
    }
    let b = builtin(k::GENZ_CORNER_PEAK, 2, &[-1.0], &[]).unwrap();
    let err = integrate(
        g,
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
fn compile_errors_are_reported_and_modules_cached() {
    let Some(g) = gpu("compile_errors_are_reported_and_modules_cached") else {
        return;
    };
    let bad = "extern \"C\" __device__ double gpuq_integrand(const double* x, unsigned int n) { return x[0] +; }";
    let err = g.link_integrand(DeviceCode::CudaC(bad)).unwrap_err();
    assert!(matches!(err, Error::Compile(_)), "{err}");
    let body = UserCode::cuda_source("return x[0] +;", 2).unwrap();
    let err = g.cub_prepare(Func::Code(&body)).unwrap_err();
    assert!(err.to_string().contains("NVRTC"), "{err}");
    // A function of another name links to nothing: the linker says so.
    let other = "extern \"C\" __device__ double gpuq_integrandx(const double* x, unsigned int n) { return 1.0; } // gpuq_integrand";
    assert!(matches!(
        g.link_integrand(DeviceCode::CudaC(other)),
        Err(Error::Compile(_))
    ));
    // The second link of the same code comes from the backend's cache; a
    // fresh backend (another context) takes the process's cubin.
    let e = Expr::parse("x1 * x2 + 0.123456789", 2).unwrap();
    let src = e.cuda_source();
    let first = g.link_integrand(DeviceCode::CudaC(&src)).unwrap();
    let again = g.link_integrand(DeviceCode::CudaC(&src)).unwrap();
    assert_eq!(again.source, LinkSource::Process);
    assert_eq!(again.compile_s, 0.0);
    assert_ne!(first.source, LinkSource::Process);
    let fresh = CudaBackend::new(0).unwrap();
    let third = fresh.link_integrand(DeviceCode::CudaC(&src)).unwrap();
    assert_eq!(third.source, LinkSource::Process);
}
