//! End-to-end tests of `gpuq integrate` and `gpuq uq expectation` with user
//! integrands: expressions against closed forms and against the built-ins on
//! the CPU, and on CUDA when the binary finds a device (the gpu-pack runs
//! them there); malformed expressions and NaN-producing integrands give a
//! one-line error; the disk cache of compiled device code.

mod common;

use std::process::{Command, Output};

/// Runs `gpuq ARGS` with `env` added to its environment.
fn gpuq_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(common::bin());
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the gpuq binary runs")
}

fn gpuq(args: &[&str]) -> Output {
    gpuq_env(args, &[])
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("the output is JSON")
}

/// The backends to test: the CPU, and CUDA when `gpuq info` finds a device.
fn backends() -> Vec<&'static str> {
    let info = String::from_utf8_lossy(&gpuq(&["info"]).stdout).to_string();
    if info.contains("cuda  available") {
        vec!["cpu", "cuda"]
    } else {
        eprintln!("CUDA cases skipped (no CUDA device)");
        vec!["cpu"]
    }
}

const F_EXPRESSIONS: [(&str, &str); 5] = [
    ("f1", "1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)"),
    ("f2", "cos(prod(i, 1, n, cos(4^i * x[i])))"),
    ("f3", "sin(prod(i, 1, n, i * asin(x[i]^i)))"),
    ("f4", "sin(prod(i, 1, n, asin(x[i])))"),
    (
        "f5",
        "sum(i, 1, n, cos(10 * x[i])) / (2 * -0.054402111088937)",
    ),
];

#[test]
fn expressions_give_their_closed_forms() {
    let gauss = (std::f64::consts::PI.sqrt() / 2.0 * 0.842_700_792_949_714_9).powi(4);
    let cases: [(&str, &str, f64, &[&str]); 4] = [
        ("prod(i, 1, n, cos(x[i]))", "4", 1f64.sin().powi(4), &[]),
        ("exp(-sum(i, 1, n, x[i]^2))", "4", gauss, &[]),
        (
            "x1^2*x2 + 3*x3 - x1*x2*x3",
            "3",
            48.0,
            &["--lo", "0,-1,1", "--hi", "2,1,3"],
        ),
        (
            "pi * x1 + e * x2",
            "2",
            (std::f64::consts::PI + std::f64::consts::E) / 2.0,
            &[],
        ),
    ];
    for backend in backends() {
        for (text, dim, exact, extra) in cases {
            for method in ["breadth-first", "two-phase", "cuhre"] {
                let mut args = vec![
                    "integrate",
                    "--expr",
                    text,
                    "--dim",
                    dim,
                    "--tol",
                    "1e-8",
                    "--method",
                    method,
                    "--backend",
                    backend,
                    "--json",
                ];
                args.extend_from_slice(extra);
                let v = json(&gpuq(&args));
                let est = v["estimate"].as_f64().unwrap();
                assert!(
                    (est - exact).abs() <= 1e-8 * exact.abs(),
                    "{backend} {method} {text}: {est} vs {exact}"
                );
                assert_eq!(v["integrand"], "expr");
                assert_eq!(v["converged"], true);
                let evaluation = if backend == "cuda" && method != "cuhre" {
                    "device-linked"
                } else {
                    "host"
                };
                if method != "cuhre" {
                    assert_eq!(v["evaluation"], evaluation, "{backend} {method}");
                }
                assert!(v["compile_s"].as_f64().unwrap() >= 0.0);
            }
        }
    }
}

#[test]
fn f1_to_f5_as_expressions_match_the_builtins() {
    for backend in backends() {
        for ((name, text), (dim, tol)) in F_EXPRESSIONS.iter().zip([
            ("5", "1e-4"),
            ("4", "1e-2"),
            ("4", "1e-2"),
            ("5", "1e-4"),
            ("6", "1e-6"),
        ]) {
            let common = [
                "--dim",
                dim,
                "--tol",
                tol,
                "--method",
                "breadth-first",
                "--backend",
                backend,
                "--json",
            ];
            let mut a = vec!["integrate", "--integrand", name];
            a.extend_from_slice(&common);
            let mut b = vec!["integrate", "--expr", text];
            b.extend_from_slice(&common);
            let (va, vb) = (json(&gpuq(&a)), json(&gpuq(&b)));
            let (x, y) = (
                va["estimate"].as_f64().unwrap(),
                vb["estimate"].as_f64().unwrap(),
            );
            assert!(
                (x - y).abs() <= 1e-12 * x.abs(),
                "{backend} {name}: {x} vs {y}"
            );
            assert_eq!(va["evaluations"], vb["evaluations"], "{backend} {name}");
        }
    }
}

#[test]
fn malformed_expressions_get_one_line_with_their_column() {
    for (text, dim, column) in [
        ("sin(x1) + y", "2", "column 11"),
        ("sin(x1, x2)", "2", "column 1"),
        ("x1 + x3", "2", "column 6"),
        ("(x1 + x2", "2", ""),
    ] {
        let o = gpuq(&["integrate", "--expr", text, "--dim", dim]);
        assert_eq!(o.status.code(), Some(1), "{text}");
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(e.trim_end().lines().count(), 1, "{text}: {e}");
        assert!(e.contains("column") && e.contains(column), "{text}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    // Bounds of the wrong length, infinite bounds.
    for extra in [["--lo", "0,0,0"], ["--hi", "inf"]] {
        let mut args = vec!["integrate", "--expr", "x1*x2", "--dim", "2"];
        args.extend_from_slice(&extra);
        let o = gpuq(&args);
        assert_eq!(o.status.code(), Some(1));
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    }
}

#[test]
fn nan_producing_integrands_stop_with_an_error() {
    for backend in backends() {
        for method in ["breadth-first", "two-phase", "gauss-legendre:8"] {
            let o = gpuq(&[
                "integrate",
                "--expr",
                "sqrt(x1 - 0.5) * x2",
                "--dim",
                "2",
                "--method",
                method,
                "--backend",
                backend,
            ]);
            assert_eq!(o.status.code(), Some(1), "{backend} {method}");
            let e = String::from_utf8_lossy(&o.stderr).to_string();
            assert_eq!(e.trim_end().lines().count(), 1, "{e}");
            assert!(
                e.contains("NaN") && e.contains("x = ["),
                "{backend} {method}: {e}"
            );
        }
    }
}

#[test]
fn expectations_of_expressions() {
    for backend in backends() {
        let v = json(&gpuq(&[
            "uq",
            "expectation",
            "--expr",
            "exp(0.1 * x1) * x2^2",
            "--dim",
            "2",
            "--points",
            "12",
            "--backend",
            backend,
            "--json",
        ]));
        let est = v["estimate"].as_f64().unwrap();
        assert!((est - 0.005f64.exp()).abs() < 1e-13, "{backend}: {est}");
        assert_eq!(v["integrand"], "expr");
    }
    // The sparse grid evaluates it on the host.
    let v = json(&gpuq(&[
        "uq",
        "expectation",
        "--expr",
        "sum(i, 1, n, x[i]^2)",
        "--dim",
        "20",
        "--sparse-grid",
        "1",
        "--json",
    ]));
    assert!((v["estimate"].as_f64().unwrap() - 20.0).abs() < 1e-11);
}

#[test]
fn compiled_device_code_is_cached_on_disk() {
    if !backends().contains(&"cuda") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpuq-cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.to_string_lossy().to_string();
    let args = [
        "integrate",
        "--expr",
        "x1 * x2 + 0.5 * cos(x2)",
        "--dim",
        "2",
        "--backend",
        "cuda",
        "--json",
    ];
    let first = json(&gpuq_env(&args, &[("GPUQ_CACHE_DIR", &dir_s)]));
    let second = json(&gpuq_env(&args, &[("GPUQ_CACHE_DIR", &dir_s)]));
    assert_eq!(first["module"], "compiled");
    assert_eq!(second["module"], "disk-cache");
    assert_eq!(first["estimate"], second["estimate"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn user_cuda_c_and_ptx_files() {
    let dir = std::env::temp_dir().join(format!("gpuq-cli-code-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body = dir.join("body.cu");
    std::fs::write(&body, "return x[0] * x[1] + gpuq_cos(x[2]);").unwrap();
    let ptx = dir.join("bump.ptx");
    std::fs::write(
        &ptx,
        include_str!("../../../examples/rust-integrand/rust_integrand.ptx"),
    )
    .unwrap();
    let body_s = body.to_string_lossy().to_string();
    let ptx_s = ptx.to_string_lossy().to_string();
    // Device code cannot run on the CPU backend: one line, status 1.
    let o = gpuq(&[
        "integrate",
        "--cuda-source",
        &body_s,
        "--dim",
        "3",
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("host function"), "{e}");
    if backends().contains(&"cuda") {
        let v = json(&gpuq(&[
            "integrate",
            "--cuda-source",
            &body_s,
            "--dim",
            "3",
            "--tol",
            "1e-10",
            "--backend",
            "cuda",
            "--json",
        ]));
        let want = 0.25 + 1f64.sin();
        assert!((v["estimate"].as_f64().unwrap() - want).abs() < 1e-9, "{v}");
        assert_eq!(v["integrand"], "cuda-c");
        assert_eq!(v["evaluation"], "device-linked");
        // The Rust example's bump over [0, 1]^2: sqrt(pi) erf(1/2) sqrt(pi/2) erf(sqrt(2)/2).
        let v = json(&gpuq(&[
            "integrate",
            "--ptx",
            &ptx_s,
            "--dim",
            "2",
            "--tol",
            "1e-10",
            "--backend",
            "cuda",
            "--json",
        ]));
        let want = std::f64::consts::PI.sqrt()
            * 0.520_499_877_813_046_5
            * (std::f64::consts::PI / 2.0).sqrt()
            * 0.682_689_492_137_085_9;
        assert!((v["estimate"].as_f64().unwrap() - want).abs() < 1e-9, "{v}");
        assert_eq!(v["integrand"], "ptx");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no option but the integrand, dimension, tolerance and backend: the
/// method is auto (the report names the one it ran), the cap the backend's.
#[test]
fn defaults_are_auto_and_the_backends_cap() {
    for backend in backends() {
        let v = json(&gpuq(&[
            "integrate",
            "--integrand",
            "f5",
            "--dim",
            "6",
            "--tol",
            "1e-6",
            "--backend",
            backend,
            "--json",
        ]));
        assert_eq!(v["method"], "auto");
        let used = v["method_used"].as_str().unwrap();
        assert!(
            ["cuhre", "two-phase", "breadth-first"].contains(&used),
            "{backend}: {used}"
        );
        assert_eq!(v["converged"], true, "{backend}: {v}");
        assert_eq!(v["stop_reason"], "tolerance met");
        // At least a minute of one host thread (1.8 x 10^8 evaluations).
        assert!(v["max_evals"].as_u64().unwrap() >= 180_000_000, "{v}");
        assert!(v["max_time"].is_null());
        let est = v["estimate"].as_f64().unwrap();
        assert!((est - 3.0).abs() <= 3e-6, "{backend}: {est}");
    }
}

/// `--max-time` stops the run with exit status 3 and says why; `--max-evals`
/// takes floating notation and auto; bad values are refused.
#[test]
fn time_limit_and_evaluation_cap_give_their_reasons() {
    let base = [
        "integrate",
        "--integrand",
        "f2",
        "--dim",
        "5",
        "--tol",
        "1e-9",
        "--backend",
        "cpu",
        "--json",
    ];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        gpuq(&a)
    };
    let o = with(&["--max-time", "0.5"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["converged"], false);
    assert_eq!(v["stop_reason"], "time limit");
    assert_eq!(v["status"], "not converged (time limit)");
    assert_eq!(v["max_time"], 0.5);
    let o = with(&["--max-evals", "2e4", "--method", "breadth-first"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["stop_reason"], "evaluation cap");
    assert_eq!(v["max_evals"], 20_000);
    assert_eq!(v["method_used"], "breadth-first");
    assert!(v["evaluations"].as_u64().unwrap() <= 20_000);
    for bad in [
        &["--max-evals", "0"][..],
        &["--max-evals", "1.5"],
        &["--max-evals", "many"],
        &["--max-time", "0"],
        &["--max-time", "-1"],
    ] {
        assert_eq!(with(bad).status.code(), Some(1), "{bad:?}");
    }
}

/// Ctrl-C (SIGINT) ends an integration between rounds (here CUHRE's splits): the report
/// of the estimate so far, stop reason `interrupted`, exit 130.
#[test]
fn ctrl_c_ends_an_integration_with_its_estimate() {
    // A tolerance no run meets: far more work than the wait on any machine.
    let args = common::os_args(&[
        "integrate",
        "--integrand",
        "genz-discontinuous",
        "--dim",
        "5",
        "--tol",
        "1e-15",
        "--method",
        "cuhre",
        "--json",
    ]);
    let o = common::interrupted(&args, std::time::Duration::from_millis(1500));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the report is JSON");
    assert_eq!(v["stop_reason"], "interrupted");
    assert_eq!(v["converged"], false);
    assert!(v["estimate"].as_f64().unwrap().is_finite());
    assert!(v["evaluations"].as_u64().unwrap() > 0);
}
