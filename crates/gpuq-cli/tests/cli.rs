//! End-to-end tests of the `gpuq` binary.

mod common;
use common::{gpuq, scratch_dir};
use std::path::{Path, PathBuf};
use std::process::Output;

/// `contents` written to the file `name` in `dir`.
fn tmp(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

fn stderr_one_line(o: &Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(e.trim_end().lines().count(), 1, "stderr: {e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

#[test]
fn info_lists_the_cpu_backend() {
    let o = gpuq(&["info"]);
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("cpu") && s.contains("threads"), "{s}");
}

#[test]
fn solves_a_generated_problem_with_json_report() {
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace2d:20",
        "--method",
        "cg",
        "--precond",
        "jacobi",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "method",
        "backend",
        "converged",
        "iterations",
        "relative_residual",
        "time_s",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["converged"], true);
    assert_eq!(v["backend"], "cpu");
    assert!(v["relative_residual"].as_f64().unwrap() <= 1e-8);
}

/// A symmetric SPD matrix in Matrix Market (lower triangle), x_true = (1, -2, 3),
/// b = A x_true; the solution written by --out must match x_true to the tolerance.
#[test]
fn solves_a_matrix_market_file_against_a_known_solution() {
    let d = scratch_dir();
    // A = [[4, 1, 0], [1, 3, -1], [0, -1, 2]]
    let a = tmp(
        d.path(),
        "a.mtx",
        "%%MatrixMarket matrix coordinate real symmetric\n% test\n3 3 5\n1 1 4\n2 1 1\n2 2 3\n3 2 -1\n3 3 2\n",
    );
    // b = A (1, -2, 3) = (2, -8, 8)
    let b = tmp(
        d.path(),
        "b.mtx",
        "%%MatrixMarket matrix array real general\n3 1\n2\n-8\n8\n",
    );
    let out = d.path().join("x.mtx");
    let o = gpuq(&[
        "solve",
        a.to_str().unwrap(),
        "--rhs",
        b.to_str().unwrap(),
        "--tol",
        "1e-12",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["relative_residual"].as_f64().unwrap() <= 1e-12);
    let x: Vec<f64> = gpuq_sparse::matrix_market::read_dense_vector(&out).unwrap();
    for (xi, ti) in x.iter().zip([1.0, -2.0, 3.0]) {
        assert!((xi - ti).abs() < 1e-10, "{x:?}");
    }
}

#[test]
fn petsc_binary_files_solve_as_their_matrix_market_twins() {
    let d = scratch_dir();
    let dir = d.path();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let mut reports = Vec::new();
    for (spec, complex) in [("convdiff2d:12", false), ("helmholtz3d:5", true)] {
        for fmt in ["mtx", "petsc"] {
            let (a, b) = (path(&format!("g.{fmt}")), path(&format!("gb.{fmt}")));
            let g = gpuq(&[
                "generate",
                spec,
                "--format",
                fmt,
                "--out",
                &a,
                "--rhs-out",
                &b,
            ]);
            assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
            let o = gpuq(&["solve", &a, "--rhs", &b, "--method", "gmres:30", "--json"]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(
                v["scalar"].as_str().unwrap().starts_with('c'),
                complex,
                "{v}"
            );
            reports.push((v["iterations"].clone(), v["relative_residual"].clone()));
        }
        let petsc = reports.pop().unwrap();
        assert_eq!(reports.pop().unwrap(), petsc, "{spec}");
    }
    // A vector where a matrix is wanted, and the reverse: one line each.
    for args in [
        vec!["solve".to_string(), path("gb.petsc")],
        vec![
            "solve".into(),
            path("g.petsc"),
            "--rhs".into(),
            path("g.petsc"),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = gpuq(&args);
        assert!(!o.status.success());
        assert!(stderr_one_line(&o).contains("PETSc binary"));
    }
}

#[test]
fn complex_hermitian_file_is_detected_and_solved() {
    let d = scratch_dir();
    // A = [[2, i], [-i, 2]] (Hermitian positive definite), stored lower triangle.
    let a = tmp(
        d.path(),
        "h.mtx",
        "%%MatrixMarket matrix coordinate complex hermitian\n2 2 3\n1 1 2 0\n2 1 0 -1\n2 2 2 0\n",
    );
    let o = gpuq(&["solve", a.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["scalar"], "c64");
    assert_eq!(v["converged"], true);
}

#[test]
fn bad_input_gives_one_line_and_nonzero_exit() {
    let d = scratch_dir();
    let truncated = tmp(
        d.path(),
        "t.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1\n",
    );
    let garbage = tmp(d.path(), "g.mtx", "\u{1}\u{2}binary\u{0}junk");
    let rect = tmp(
        d.path(),
        "r.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1\n2 2 1\n",
    );
    let sq = tmp(
        d.path(),
        "s.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1\n",
    );
    let short_b = tmp(
        d.path(),
        "sb.mtx",
        "%%MatrixMarket matrix array real general\n3 1\n1\n1\n1\n",
    );
    let cases: Vec<Vec<&str>> = vec![
        vec!["solve", truncated.to_str().unwrap()],
        vec!["solve", garbage.to_str().unwrap()],
        vec!["solve", rect.to_str().unwrap()],
        vec![
            "solve",
            sq.to_str().unwrap(),
            "--rhs",
            short_b.to_str().unwrap(),
        ],
        vec!["solve", "/nonexistent/file.mtx"],
        vec!["solve", "--generate", "laplace2d:5", "--method", "nope"],
        vec!["solve", "--generate", "laplace2d:5", "--precond", "nope"],
        vec!["solve", "--generate", "laplace2d:5", "--backend", "nope"],
        vec!["solve", "--generate", "laplace9d:5"],
        vec!["solve", "--generate", "laplace2d:5", "--tol", "-1"],
        vec!["solve", "--generate", "laplace2d:5", "--precision", "f16"],
    ];
    for args in cases {
        let o = gpuq(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = stderr_one_line(&o);
        assert!(e.starts_with("gpuq: error:"), "{args:?}: {e}");
    }
}

#[test]
fn not_converged_exits_with_status_3() {
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace2d:30",
        "--max-iter",
        "2",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["converged"], false);
    assert_eq!(v["status"], "max_iterations");
    assert_eq!(v["iterations"], 2);
}

/// `gpuq generate` writes the complex symmetric cylinder and its right-hand side;
/// every method solves it from the files to the tolerance (true residual).
/// Single precision asked for 1e-10: the recurrence claims it, the true residual
/// cannot reach it; the report says `converged: false`, `status: accuracy_limit`,
/// and the exit status is 3 with one line naming the status.
#[test]
fn an_unreachable_tolerance_is_an_accuracy_limit_with_status_3() {
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace2d:40",
        "--precision",
        "f32",
        "--precond",
        "jacobi",
        "--tol",
        "1e-10",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let line = stderr_one_line(&o);
    assert!(line.contains("accuracy_limit"), "{line}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["converged"], false);
    assert_eq!(v["status"], "accuracy_limit");
    assert!(v["relative_residual"].as_f64().unwrap() > v["tolerance"].as_f64().unwrap());
    assert!(v["residual_replacements"].as_u64().unwrap() >= 1);
}

/// A breakdown is a report too: printed with its status, exit status 3.
#[test]
fn a_breakdown_prints_its_report_and_exits_with_status_3() {
    let d = scratch_dir();
    // [[1, 0], [0, -1]] is indefinite: CG's p^H A p vanishes for b = (1, 1).
    let a = tmp(
        d.path(),
        "indefinite.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 -1\n",
    );
    let b = tmp(
        d.path(),
        "indefinite_b.mtx",
        "%%MatrixMarket matrix array real general\n2 1\n1\n1\n",
    );
    let o = gpuq(&[
        "solve",
        a.to_str().unwrap(),
        "--rhs",
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = stderr_one_line(&o);
    assert!(line.contains("breakdown"), "{line}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "breakdown");
    assert_eq!(v["converged"], false);
    // a breakdown's report says how the matrix was stored, as any other
    assert_eq!(v["layout"], "csr");
}

#[test]
fn generated_helmholtz_cylinder_is_solved_from_files_by_every_method() {
    let d = scratch_dir();
    let dir = d.path();
    let (a, b) = (dir.join("cyl0.mtx"), dir.join("cyl0_b.mtx"));
    let o = gpuq(&[
        "generate",
        "helmholtz-cylinder:0",
        "--out",
        a.to_str().unwrap(),
        "--rhs-out",
        b.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let head = std::fs::read_to_string(&a).unwrap();
    assert!(head.starts_with("%%MatrixMarket matrix coordinate complex"));
    for method in ["bicgstab", "bicgstab-l:4", "tfqmr", "qmr", "gmres:80"] {
        let o = gpuq(&[
            "solve",
            a.to_str().unwrap(),
            "--rhs",
            b.to_str().unwrap(),
            "--method",
            method,
            "--precond",
            "jacobi",
            "--json",
        ]);
        assert!(
            o.status.success(),
            "{method}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["converged"], true, "{method}");
        assert_eq!(v["scalar"], "c64", "{method}");
        assert!(v["relative_residual"].as_f64().unwrap() <= 1e-8, "{method}");
    }
    // The soft-walled duct, generated in place, by TFQMR to 1e-9.
    let o = gpuq(&[
        "solve",
        "--generate",
        "helmholtz-cylinder:0:soft",
        "--method",
        "tfqmr",
        "--precond",
        "jacobi",
        "--tol",
        "1e-9",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["converged"].as_bool(), v["n"].as_u64()),
        (Some(true), Some(2904))
    );
    assert!(v["relative_residual"].as_f64().unwrap() <= 1e-9);
    for (args, what) in [
        (
            vec!["generate", "cylinder:9", "--out", "x.mtx"],
            "unknown generator",
        ),
        (
            vec!["solve", "--generate", "laplace1d:5", "--precond", "block2"],
            "even size",
        ),
        (
            vec![
                "solve",
                "--generate",
                "laplace1d:5",
                "--method",
                "bicgstab-l:0",
            ],
            "positive integer",
        ),
    ] {
        let o = gpuq(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr_one_line(&o).contains(what), "{args:?}");
    }
}

/// The Monte Carlo methods through the CLI: the adjoint estimate of a diagonally
/// dominant system comes with its statistics, MCSA reaches the tolerance, and the
/// method's preconditions fail with one line.
#[test]
fn monte_carlo_methods_solve_and_refuse_bad_input() {
    // laplace1d:200:0.5 has rho(H) = 0.8.
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace1d:200:0.5",
        "--method",
        "mc-adjoint",
        "--histories",
        "200000",
        "--seed",
        "7",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["method"], "mc-adjoint");
    assert_eq!(v["histories"], 200_000);
    let rho = v["rho_h"].as_f64().unwrap();
    assert!((rho - 0.8).abs() < 1e-3, "rho(H) = {rho}");
    let res = v["relative_residual"].as_f64().unwrap();
    assert!(res > 0.0 && res < 0.05, "residual {res}");
    assert_eq!(v["std_error"].as_array().unwrap().len(), 200);

    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace1d:300:0.5",
        "--method",
        "mcsa",
        "--histories",
        "3000",
        "--estimator",
        "expected",
        "--tol",
        "1e-8",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["method"], "mcsa");
    assert_eq!(v["converged"], true);
    assert_eq!(v["layout"], "soa");
    assert!(v["relative_residual"].as_f64().unwrap() <= 1e-8);

    // At the iteration cap: the report, converged false, exit status 3.
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace1d:300:0.5",
        "--method",
        "mcsa",
        "--histories",
        "3000",
        "--max-iter",
        "1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["converged"], false);
    assert_eq!(v["iterations"], 1);

    // The unshifted Laplacian has rho(H) -> 1 but below it; a negative shift
    // pushes it above 1, where the Neumann series diverges.
    for args in [
        vec![
            "solve",
            "--generate",
            "laplace1d:50:-0.5",
            "--method",
            "mc-forward",
        ],
        vec![
            "solve",
            "--generate",
            "laplace1d:50:0.5",
            "--method",
            "mc-adjoint",
            "--estimator",
            "nope",
        ],
        vec![
            "solve",
            "--generate",
            "laplace1d:50:0.5",
            "--method",
            "mc-adjoint",
            "--histories",
            "0",
        ],
        vec![
            "solve",
            "--generate",
            "laplace1d:50:0.5",
            "--method",
            "mc-adjoint",
            "--cutoff",
            "2",
        ],
    ] {
        let o = gpuq(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = stderr_one_line(&o);
        assert!(e.starts_with("gpuq: error:"), "{args:?}: {e}");
    }
}

/// The default right-hand side is b = A x* for a seeded random x*: AMG takes
/// more than the one iteration the constant x* = 1 gives it, and the error
/// against x* is reported; `--rhs a1`, `ones` and the seed by name.
#[test]
fn the_default_rhs_is_a_random_known_solution() {
    let json = |extra: &[&str]| {
        let mut args = vec!["solve", "--generate", "laplace3d:12", "--precond", "amg"];
        args.extend_from_slice(extra);
        args.push("--json");
        let o = gpuq(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let v = json(&[]);
    assert_eq!(v["rhs"]["kind"], "random");
    assert_eq!(v["rhs"]["seed"], 1);
    assert!(v["iterations"].as_u64().unwrap() > 2, "{}", v["iterations"]);
    let error = v["error"].as_f64().unwrap();
    assert!(error > 0.0 && error < 1e-6, "error {error}");
    let other = json(&["--rhs-seed", "2"]);
    assert_eq!(other["rhs"]["seed"], 2);
    assert_ne!(other["error"], v["error"]);
    let a1 = json(&["--rhs", "a1"]);
    assert_eq!(a1["rhs"]["kind"], "a1");
    assert!(a1["error"].as_f64().unwrap() < 1e-6);
    let ones = json(&["--rhs", "ones"]);
    assert_eq!(ones["rhs"]["kind"], "ones");
    assert!(ones["error"].is_null());
    // a problem with a b of its own keeps it
    let o = gpuq(&["solve", "--generate", "elasticity2d:6", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rhs"]["kind"], "problem");
}

/// A Monte Carlo estimate carries a status: `estimate` without a tolerance,
/// `inaccurate` (exit 3) when its residual exceeds 1, and against `--tol`
/// when one is given.
#[test]
fn monte_carlo_estimates_carry_a_status() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "solve",
            "--generate",
            "laplace1d:100:0.5",
            "--method",
            "mc-adjoint",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = gpuq(&args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.code(), v)
    };
    let (code, v) = run(&["--histories", "100000"]);
    assert_eq!((code, v["status"].as_str()), (Some(0), Some("estimate")));
    assert!(v["relative_residual"].as_f64().unwrap() < 1.0);
    let (code, v) = run(&["--histories", "100000", "--tol", "1e-9"]);
    assert_eq!(
        (code, v["status"].as_str()),
        (Some(3), Some("not_converged"))
    );
    let (code, v) = run(&["--histories", "100000", "--tol", "0.5"]);
    assert_eq!((code, v["status"].as_str()), (Some(0), Some("converged")));
    // one history in all: the estimate is far worse than x = 0
    let (code, v) = run(&["--histories", "1", "--batches", "1"]);
    assert!(v["relative_residual"].as_f64().unwrap() > 1.0, "{v}");
    assert_eq!((code, v["status"].as_str()), (Some(3), Some("inaccurate")));
}

/// A problem larger than the host's memory is a one-line error naming the
/// size, not an abort of the process.
#[test]
fn a_problem_too_large_for_the_host_is_an_error() {
    let o = gpuq(&["solve", "--generate", "laplace3d:1250"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr_one_line(&o);
    assert!(
        e.contains("laplace3d:1250") && e.contains("host memory"),
        "{e}"
    );
}

/// Ctrl-C (SIGINT) stops a solve at its next iteration: the report of the
/// work done with status `interrupted`, exit status 130, and no `--out` file
/// (neither complete nor partial).
#[test]
fn ctrl_c_stops_with_a_report_and_no_output_file() {
    let dir = std::env::temp_dir().join(format!("gpuq-ctrl-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("x.mtx");
    // Far more work than the wait below on any machine: the stop comes first.
    let mut args = common::os_args(&[
        "solve",
        "--generate",
        "laplace3d:40",
        "--tol",
        "1e-300",
        "--atol",
        "0",
        "--stagnation-window",
        "0",
        "--max-iter",
        "100000000",
        "--json",
        "--out",
    ]);
    args.push(out.clone().into());
    let o = common::interrupted(&args, std::time::Duration::from_millis(1500));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "interrupted");
    assert_eq!(v["converged"], false);
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An output path that cannot be written is found before any computation:
/// one line naming it.
#[test]
fn bad_output_paths_are_refused_before_the_work() {
    for args in [
        vec![
            "solve",
            "--generate",
            "laplace3d:1250",
            "--out",
            "/nonexistent-gpuq/x.mtx",
        ],
        vec![
            "generate",
            "laplace2d:4",
            "--out",
            "/nonexistent-gpuq/A.mtx",
        ],
        vec!["uq", "psd", "--plot", "/nonexistent-gpuq/psd.png"],
    ] {
        let o = gpuq(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = stderr_one_line(&o);
        assert!(e.contains("/nonexistent-gpuq/"), "{args:?}: {e}");
    }
}
