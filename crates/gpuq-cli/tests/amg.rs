//! End-to-end tests of `gpuq solve --precond amg` and `gpuq amg-info`.

mod common;
use common::gpuq;
use std::process::Output;

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("the output is JSON")
}

#[test]
fn solve_with_amg_reports_the_hierarchy() {
    for method in ["sa", "seed"] {
        let o = gpuq(&[
            "solve",
            "--generate",
            "laplace2d:40",
            "--precond",
            "amg",
            "--amg",
            method,
            "--amg-smoother",
            "chebyshev:2",
            "--json",
        ]);
        let v = json(&o);
        assert_eq!(v["converged"], true);
        // The default cycle of scalar unknowns is f32 inside the f64 CG.
        assert_eq!(v["preconditioner"], "amg, f32 cycle");
        assert_eq!(v["amg"]["cycle_precision"], "f32");
        assert!(v["relative_residual"].as_f64().unwrap() <= 1e-8);
        assert_eq!(v["amg"]["coarsening"], method);
        assert!(v["amg"]["levels"].as_array().unwrap().len() >= 2);
        assert!(v["amg"]["operator_complexity"].as_f64().unwrap() >= 1.0);
        assert!(v["amg_setup_s"].as_f64().unwrap() >= 0.0);
    }
}

/// What the solve chose where nothing was set is in the report: on the CPU an
/// f32 cycle (scalar unknowns, as on the GPU), damping 4/3, CSR (`--layout auto`);
/// options given are kept as given. (The GPU's defaults, f32 and 1.7 with
/// SELL-32-1, are checked by the device driver.)
#[test]
fn the_report_names_the_defaults_it_took() {
    let v = json(&gpuq(&[
        "solve",
        "--generate",
        "laplace2d:40",
        "--precond",
        "amg",
        "--json",
    ]));
    assert_eq!(v["amg"]["defaults"], "cpu");
    assert_eq!(v["amg"]["cycle_precision"], "f32");
    assert!((v["amg"]["jacobi_damping"].as_f64().unwrap() - 4.0 / 3.0).abs() < 1e-12);
    assert_eq!(v["layout"], "csr");
    assert_eq!(v["status"], "converged");
    let v = json(&gpuq(&[
        "solve",
        "--generate",
        "laplace2d:40",
        "--precond",
        "amg",
        "--amg-jacobi-damping",
        "1.7",
        "--amg-precision",
        "f64",
        "--layout",
        "sell:32:1",
        "--json",
    ]));
    assert_eq!(v["amg"]["cycle_precision"], "f64");
    assert_eq!(v["amg"]["jacobi_damping"], 1.7);
    assert_eq!(v["layout"], "sell:32:1");
}

#[test]
fn block2_amg_beats_block_jacobi_on_elasticity() {
    let its = |extra: &[&str]| {
        let mut args = vec!["solve", "--generate", "elasticity2d:16", "--json"];
        args.extend_from_slice(extra);
        json(&gpuq(&args))["iterations"].as_u64().unwrap()
    };
    let amg = its(&["--precond", "amg", "--block", "2", "--layout", "bsr2"]);
    let block2 = its(&["--precond", "block2"]);
    assert!(3 * amg <= block2, "amg {amg} vs block2 {block2}");
}

#[test]
fn gauss_seidel_and_a_single_precision_cycle_in_a_double_precision_solve() {
    // b = 1 (the generator's b = A 1 is solved by one cycle).
    let rhs = std::env::temp_dir().join(format!("gpuq-amg-ones-{}.mtx", std::process::id()));
    let n = 16 * 16 * 16;
    let ones = format!(
        "%%MatrixMarket matrix array real general\n{n} 1\n{}",
        "1\n".repeat(n)
    );
    std::fs::write(&rhs, ones).unwrap();
    let rhs_path = rhs.to_str().unwrap().to_string();
    let solve = |extra: &[&str]| {
        let mut args = vec![
            "solve",
            "--generate",
            "laplace3d:16",
            "--rhs",
            &rhs_path,
            "--precond",
            "amg",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&gpuq(&args))
    };
    let default = solve(&[]);
    let jacobi = solve(&["--amg-smoother", "jacobi"]);
    let gs = solve(&[
        "--amg-smoother",
        "gs",
        "--amg-coarse-smoother",
        "chebyshev:3",
        "--amg-coarse-sweeps",
        "1",
    ]);
    assert_eq!(gs["amg"]["smoother"], "gs");
    assert_eq!(gs["amg"]["coarse_smoother"], "chebyshev:3");
    assert_eq!(gs["amg"]["levels"][0]["colors"], 2);
    assert!(gs["iterations"].as_u64() < jacobi["iterations"].as_u64());
    let mixed = solve(&["--amg-precision", "f32"]);
    // The Krylov method stays in f64 and reaches the f64 tolerance.
    assert_eq!(mixed["scalar"], "f64");
    assert!(mixed["relative_residual"].as_f64().unwrap() <= 1e-8);
    let (m, j) = (
        mixed["iterations"].as_u64().unwrap(),
        default["iterations"].as_u64().unwrap(),
    );
    assert!(m <= j + 1, "f32 cycle {m} vs f64 cycle {j}");
    let bad = gpuq(&[
        "solve",
        "--generate",
        "laplace2d:8",
        "--precond",
        "amg",
        "--amg-precision",
        "f16",
    ]);
    assert!(!bad.status.success());
    std::fs::remove_file(&rhs).ok();
}

#[test]
fn amg_info_prints_levels_and_phases() {
    let o = gpuq(&["amg-info", "--generate", "laplace3d:12"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("operator complexity"));
    assert!(text.contains("galerkin"));
    let v = json(&gpuq(&["amg-info", "--generate", "laplace3d:12", "--json"]));
    assert_eq!(v["levels"][0]["rows"], 1728);
    assert!(v["timings"]["total_s"].as_f64().unwrap() > 0.0);
    // --save-levels: every level's A and P as Matrix Market, P A-compatible
    let dir = std::env::temp_dir().join(format!("gpuq-levels-{}", std::process::id()));
    let o = gpuq(&[
        "amg-info",
        "--generate",
        "laplace3d:12",
        "--save-levels",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let levels = v["levels"].as_array().unwrap();
    for (l, level) in levels.iter().enumerate() {
        let a = gpuq_sparse::matrix_market::read_csr::<f64>(dir.join(format!("A{l}.mtx"))).unwrap();
        assert_eq!(a.nrows() as u64, level["rows"].as_u64().unwrap());
        assert_eq!(a.nnz() as u64, level["nnz"].as_u64().unwrap());
        let p = dir.join(format!("P{l}.mtx"));
        if l + 1 < levels.len() {
            let p = gpuq_sparse::matrix_market::read_csr::<f64>(p).unwrap();
            let next = levels[l + 1]["rows"].as_u64().unwrap();
            assert_eq!((p.nrows(), p.ncols() as u64), (a.nrows(), next));
        } else {
            assert!(!p.exists());
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn amg_info_repeats_the_setup_and_reports_each_build() {
    let v = json(&gpuq(&[
        "amg-info",
        "--generate",
        "laplace3d:10",
        "--json",
        "--repeat-setup",
        "3",
    ]));
    let builds = v["repeat_setup"].as_array().unwrap();
    assert_eq!(builds.len(), 3);
    // the first build is the one the report describes
    assert_eq!(builds[0], v["timings"]);
    for b in builds {
        assert!(b["total_s"].as_f64().unwrap() >= b["galerkin_s"].as_f64().unwrap());
    }
    let zero = gpuq(&[
        "amg-info",
        "--generate",
        "laplace3d:10",
        "--repeat-setup",
        "0",
    ]);
    assert!(!zero.status.success());
}

#[test]
fn bad_amg_arguments_are_one_line_errors() {
    for args in [
        &[
            "solve",
            "--generate",
            "laplace2d:8",
            "--precond",
            "amg",
            "--amg",
            "rs",
        ][..],
        &[
            "solve",
            "--generate",
            "laplace2d:9",
            "--precond",
            "amg",
            "--block",
            "2",
        ],
        &[
            "solve",
            "--generate",
            "laplace2d:8",
            "--precond",
            "amg",
            "--amg-smoother",
            "sor",
        ],
        &["solve", "--generate", "helmholtz3d:4", "--precond", "amg"],
        &[
            "amg-info",
            "--generate",
            "laplace2d:8",
            "--amg-strength",
            "3",
        ],
    ] {
        let o = gpuq(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("gpuq: error:") && err.lines().count() == 1,
            "{err}"
        );
    }
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gpuq-amg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn block3_with_coordinates_or_the_same_modes_solves_3d_elasticity() {
    let d = scratch("elasticity3d");
    let path = |f: &str| d.join(f).to_string_lossy().into_owned();
    let (a, b, x) = (path("A.mtx"), path("b.mtx"), path("X.mtx"));
    let g = gpuq(&[
        "generate",
        "elasticity3d:8",
        "--out",
        &a,
        "--rhs-out",
        &b,
        "--coords-out",
        &x,
    ]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let solve = |extra: &[&str]| {
        let mut args = vec![
            "solve",
            &a,
            "--rhs",
            &b,
            "--method",
            "cg",
            "--precond",
            "amg",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&gpuq(&args))
    };
    let with_coords = solve(&["--block", "3", "--coords", &x]);
    assert_eq!(with_coords["status"], "converged");
    assert!(with_coords["relative_residual"].as_f64().unwrap() <= 1e-8);
    assert_eq!(with_coords["amg"]["candidates"], 6);
    assert!(with_coords["amg"]["levels"][1]["block"] == 6);
    let its = with_coords["iterations"].as_u64().unwrap();
    // The same modes as a near-null-space file: the same iterations.
    let cols: Vec<Vec<f64>> = gpuq_sparse::matrix_market::read_dense_columns(&x).unwrap();
    let modes = gpuq_amg::rigid_body_modes(&cols).unwrap();
    let bfile = path("B.mtx");
    gpuq_sparse::matrix_market::save_dense_columns(&modes, &bfile).unwrap();
    let given = solve(&["--block", "3", "--near-null-space", &bfile]);
    assert_eq!(given["iterations"].as_u64().unwrap(), its);
    // Block 1 with the same smoother (one Jacobi sweep, the block default)
    // takes far more (97 against 24).
    let scalar = solve(&["--amg-smoother", "jacobi"]);
    assert!(3 * its < scalar["iterations"].as_u64().unwrap(), "{its}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bad_coordinates_and_near_null_spaces_are_one_line_errors() {
    let d = scratch("bad-coords");
    let path = |f: &str| d.join(f).to_string_lossy().into_owned();
    let (a, x) = (path("A.mtx"), path("X.mtx"));
    let g = gpuq(&[
        "generate",
        "elasticity3d:3",
        "--out",
        &a,
        "--coords-out",
        &x,
    ]);
    assert!(g.status.success());
    let write = |f: &str, text: &str| {
        let p = path(f);
        std::fs::write(&p, text).unwrap();
        p
    };
    let malformed = write(
        "bad.mtx",
        "%%MatrixMarket matrix array real general\n2 3\n1.0\nx\n",
    );
    let short = write(
        "short.mtx",
        "%%MatrixMarket matrix array real general\n2 1\n1.0\n2.0\n",
    );
    let cases: Vec<Vec<&str>> = vec![
        // 3 columns need --block 3
        vec!["--coords", &x],
        vec!["--block", "3", "--coords", &malformed],
        vec!["--block", "3", "--near-null-space", &short],
        vec!["--block", "3", "--coords", "/nonexistent/X.mtx"],
        // 144 unknowns: 5 does not divide them
        vec!["--block", "5"],
        vec!["--block", "9"],
    ];
    for extra in cases {
        let mut args = vec!["solve", &a, "--precond", "amg"];
        args.extend_from_slice(&extra);
        let o = gpuq(&args);
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("gpuq: error:") && err.lines().count() == 1,
            "{extra:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&d).ok();
}
