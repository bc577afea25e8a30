//! End-to-end tests of `gpuq uq ...`: each procedure on the CPU (and on CUDA
//! when a device is present), checked against its closed form through the JSON
//! report.

mod common;
use common::gpuq;
use serde_json::Value;

/// Runs `gpuq uq ARGS --json` and parses the report.
fn report(args: &[&str]) -> Value {
    let mut all = vec!["uq"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = gpuq(&all);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON report")
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Backends to exercise: the CPU, and CUDA when `gpuq info` finds a device.
fn backends() -> Vec<&'static str> {
    let o = gpuq(&[
        "uq",
        "static",
        "--dofs",
        "2",
        "--samples",
        "1",
        "--backend",
        "cuda",
    ]);
    if o.status.success() {
        vec!["cpu", "cuda"]
    } else {
        vec!["cpu"]
    }
}

#[test]
fn static_tip_statistics_match_p_l3_over_3ei() {
    for b in backends() {
        let r = report(&[
            "static",
            "--dofs",
            "16",
            "--samples",
            "4000",
            "--length",
            "2",
            "--modulus",
            "2e11",
            "--inertia",
            "4e-6",
            "--load-mean",
            "1000",
            "--load-std",
            "100",
            "--design",
            "lhs",
            "--backend",
            b,
        ]);
        let exact = 1000.0 * 8.0 / (3.0 * 2e11 * 4e-6);
        assert!((num(&r, "exact_tip_mean") / exact - 1.0).abs() < 1e-12);
        assert!((num(&r, "tip_mean") / exact - 1.0).abs() < 1e-3, "{b}: {r}");
        assert!(
            (num(&r, "tip_std") / (0.1 * exact) - 1.0).abs() < 0.03,
            "{b}: {r}"
        );
    }
}

#[test]
fn sdof_reports_final_moments_and_time() {
    let mut finals = Vec::new();
    for b in backends() {
        let r = report(&[
            "sdof",
            "--samples",
            "64",
            "--duration",
            "2",
            "--dt",
            "0.01",
            "--backend",
            b,
            "--seed",
            "3",
        ]);
        assert!(num(&r, "time_s") >= 0.0);
        assert!(num(&r, "final_variance") > 0.0);
        finals.push((num(&r, "final_mean"), num(&r, "final_variance")));
    }
    // The same seed gives the same samples on both backends.
    if let [(m0, v0), (m1, v1)] = finals[..] {
        assert!((m0 - m1).abs() < 1e-12 && (v0 - v1).abs() < 1e-12 * v0.max(1.0));
    }
}

#[test]
fn psd_convolution_and_expectation_run() {
    for b in backends() {
        let r = report(&[
            "psd",
            "--dofs",
            "8",
            "--freqs",
            "0,1,2",
            "--full",
            "--backend",
            b,
        ]);
        let tip = r["tip_psd"].as_array().unwrap();
        assert_eq!(tip.len(), 3);
        let r = report(&[
            "convolution",
            "--dofs",
            "4",
            "--steps",
            "128",
            "--samples",
            "4",
            "--repeat",
            "2",
            "--backend",
            b,
        ]);
        assert!(num(&r, "final_tip_std") > 0.0);
        assert!(num(&r, "peak_tip_max") >= num(&r, "peak_tip_mean"));
        assert!(num(&r, "peak_tip_mean") > 0.0);
        assert!(num(&r, "time_s") <= num(&r, "first_s"));
        let r = report(&["expectation", "--dim", "5", "--points", "3", "--backend", b]);
        assert!((num(&r, "estimate") - 5.0).abs() < 1e-12);
    }
    let r = report(&["expectation", "--dim", "30", "--sparse-grid", "1"]);
    assert!((num(&r, "estimate") - 30.0).abs() < 1e-10);
}

#[test]
fn bad_arguments_are_one_line_errors() {
    for args in [
        &["uq", "sdof", "--duration", "1", "--dt", "0.3"][..],
        &["uq", "sdof", "--design", "sobol", "--samples", "2"][..],
        &["uq", "static", "--dofs", "7"][..],
        &["uq", "expectation", "--dim", "2", "--plot", "x.png"][..],
    ] {
        let o = gpuq(args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn user_set_oscillators_run_on_every_backend() {
    // m x'' + c x' + k x = A sin(w t) from (x0, v0), no noise: one sample is the
    // closed-form response.
    let p = gpuq_uq::SdofProblem {
        m: 1.5,
        c: 0.4,
        k: 20.0,
        amplitude: 2.0,
        omega: 3.0,
        initial: gpuq_uq::Initial {
            x0: 0.3,
            v0: -1.0,
            ..Default::default()
        },
        ..gpuq_uq::SdofProblem::seed001()
    };
    let want = gpuq_uq::sdof::linear_forced_response(&p, 2.0);
    let mut finals = Vec::new();
    for backend in backends() {
        let r = report(&[
            "sdof",
            "--samples",
            "1",
            "--duration",
            "2",
            "--dt",
            "0.001",
            "--m",
            "1.5",
            "--c",
            "0.4",
            "--k",
            "20",
            "--linear",
            "--amplitude",
            "2",
            "--forcing-frequency",
            "3",
            "--x0",
            "0.3",
            "--v0",
            "-1",
            "--no-noise",
            "--backend",
            backend,
        ]);
        let x = num(&r, "final_mean");
        assert!((x - want).abs() < 1e-9, "{backend}: {x} vs {want}");
        // Duffing and Bouc-Wen springs, another damping exponent, random start.
        let r = report(&[
            "sdof",
            "--samples",
            "2000",
            "--duration",
            "3",
            "--duffing",
            "50",
            "--bouc-wen",
            "0.2,0.4,0.3,1.5",
            "--exponent",
            "0.7",
            "--x0",
            "0.05",
            "--x0-std",
            "0.01",
            "--backend",
            backend,
        ]);
        assert!(r["linear_stationary_variance"].is_null());
        assert_eq!(r["oscillator"]["duffing"], 50.0);
        let v = num(&r, "final_variance");
        assert!(v.is_finite() && v > 0.0, "{backend}: {v}");
        finals.push((num(&r, "final_mean"), v));
    }
    // The same samples on both backends.
    if let [(m1, v1), (m2, v2)] = finals[..] {
        assert!(
            (m1 - m2).abs() < 1e-12 && (v1 - v2).abs() < 1e-12 * v1,
            "{finals:?}"
        );
    }
    // Bad oscillators are one-line errors.
    for bad in [
        &["sdof", "--bouc-wen", "1,2"][..],
        &["sdof", "--bouc-wen", "1.5,0.5,0.5,1"],
        &["sdof", "--exponent", "0"],
        &["sdof", "--samples", "0"],
        &["sdof", "--x0-std", "-1"],
    ] {
        let mut all = vec!["uq"];
        all.extend_from_slice(bad);
        let o = gpuq(&all);
        assert_eq!(o.status.code(), Some(1), "{bad:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{bad:?}: {e}");
    }
}

/// A temporary folder of one test, removed when the guard is dropped.
fn scratch() -> tempfile::TempDir {
    common::scratch_dir()
}

#[test]
fn static_response_of_a_model_from_files() {
    let d = scratch();
    let p = |f: &str| d.path().join(f).to_string_lossy().to_string();
    let o = gpuq(&[
        "generate",
        "beam:32",
        "--out",
        &p("K.mtx"),
        "--mass-out",
        &p("M.mtx"),
        "--rhs-out",
        &p("f.mtx"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Tip load mean 1 with std 0.2 as a rank-1 factor 0.2 f: the tip
    // deflection is P L^3 / 3EI = 1/3 with std 1/15.
    std::fs::write(
        p("L.mtx"),
        "%%MatrixMarket matrix coordinate real general\n64 1 1\n63 1 0.2\n",
    )
    .unwrap();
    let r = report(&[
        "static",
        "--stiffness",
        &p("K.mtx"),
        "--load-mean",
        &p("f.mtx"),
        "--load-factor",
        &p("L.mtx"),
        "--outputs",
        "62",
        "--samples",
        "4000",
    ]);
    let out = &r["outputs"][0];
    assert_eq!(out["dof"], 62);
    let (m, s) = (num(out, "exact_mean"), num(out, "exact_std"));
    assert!(
        (m - 1.0 / 3.0).abs() < 1e-9 && (s - 1.0 / 15.0).abs() < 1e-9,
        "{out}"
    );
    assert!((num(out, "mean") - m).abs() < 4.0 * s / 4000f64.sqrt());
    assert!((num(out, "std") / s - 1.0).abs() < 0.06);
    // A random modulus: K(theta) = K + theta K, theta uniform on [-0.2, 0.2].
    let r = report(&[
        "static",
        "--stiffness",
        &p("K.mtx"),
        "--load-mean",
        &p("f.mtx"),
        "--stiffness-terms",
        &p("K.mtx"),
        "--theta",
        "uniform:-0.2:0.2",
        "--outputs",
        "62",
        "--samples",
        "3000",
    ]);
    let want = (1.2f64 / 0.8).ln() / 0.4 / 3.0; // E[1 / (1 + theta)] / 3
    let got = num(&r["outputs"][0], "mean");
    assert!((got - want).abs() < 2e-3, "{got} vs {want}");
    assert!(r["outputs"][0]["exact_mean"].is_null());
    assert!(num(&r, "max_residual") < 1e-9);
    assert_eq!(r["status"], "converged");
    // A tolerance below the attainable accuracy of the beam's solves: said,
    // status not_converged and exit 3, the statistics still reported.
    let o = gpuq(&[
        "uq",
        "static",
        "--stiffness",
        &p("K.mtx"),
        "--load-mean",
        &p("f.mtx"),
        "--stiffness-terms",
        &p("K.mtx"),
        "--theta",
        "uniform:-0.2:0.2",
        "--outputs",
        "62",
        "--samples",
        "64",
        "--tol",
        "1e-14",
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "not_converged");
    // Bad models and arguments: one line each.
    std::fs::write(
        p("rect.mtx"),
        "%%MatrixMarket matrix coordinate real general\n2 3 1\n1 1 1.0\n",
    )
    .unwrap();
    std::fs::write(
        p("indef.mtx"),
        "%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 1.0\n2 1 3.0\n2 2 1.0\n",
    )
    .unwrap();
    for (args, says) in [
        (
            vec![
                "--stiffness",
                &p("rect.mtx"),
                "--load-mean",
                "1",
                "--outputs",
                "0",
            ],
            "2 x 3",
        ),
        (
            vec![
                "--stiffness",
                &p("indef.mtx"),
                "--load-mean",
                "1",
                "--outputs",
                "0",
            ],
            "pivot",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--load-mean",
                "1",
                "--outputs",
                "64",
            ],
            "outside",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--load-mean",
                "1",
                "--outputs",
                "3",
                "--fixed-dofs",
                "2-3",
            ],
            "fixed",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--load-mean",
                &p("rect.mtx"),
                "--outputs",
                "3",
            ],
            "vector",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--load-mean",
                "1",
                "--outputs",
                "3",
                "--samples",
                "0",
            ],
            "samples",
        ),
        (
            vec!["--stiffness", &p("K.mtx"), "--load-mean", "1"],
            "--outputs",
        ),
        (
            vec![
                "--stiffness",
                &p("M.mtx"),
                "--load-mean",
                "1",
                "--outputs",
                "1",
                "--theta",
                "beta:1:2",
                "--stiffness-terms",
                &p("K.mtx"),
            ],
            "theta",
        ),
    ] {
        let mut all = vec!["uq", "static"];
        all.extend(args.iter().copied());
        let o = gpuq(&all);
        assert_eq!(o.status.code(), Some(1), "{all:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{all:?}: {e}");
        assert!(e.contains(says), "{all:?}: {e}");
    }
}

#[test]
fn psd_of_a_model_from_files_matches_the_direct_solve() {
    let d = scratch();
    let p = |f: &str| d.path().join(f).to_string_lossy().to_string();
    let o = gpuq(&[
        "generate",
        "beam:30",
        "--out",
        &p("K.mtx"),
        "--mass-out",
        &p("M.mtx"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Base excitation: the load's shape M r, r = 1 on the translations.
    let m = gpuq_sparse::matrix_market::read_csr::<f64>(p("M.mtx")).unwrap();
    let r: Vec<f64> = (0..60)
        .map(|i| if i % 2 == 0 { 1.0 } else { 0.0 })
        .collect();
    gpuq_sparse::matrix_market::save_dense_vector(&m.mul_vec(&r).unwrap(), p("shape.mtx")).unwrap();
    let run_on = |modes: &str, backend: &str| {
        report(&[
            "psd",
            "--backend",
            backend,
            "--stiffness",
            &p("K.mtx"),
            "--mass",
            &p("M.mtx"),
            "--rayleigh",
            "0.1,1e-4",
            "--load-shape",
            &p("shape.mtx"),
            "--load-psd",
            "kanai-tajimi:1:15:0.6",
            "--outputs",
            "58,30",
            "--freq-range",
            "0.1:300:301",
            "--modes",
            modes,
        ])
    };
    let run = |modes: &str| run_on(modes, "cpu");
    let direct = run("0");
    assert_eq!(direct["method"], "direct");
    assert!(direct["modes"].is_null());
    let modal = run("40");
    assert_eq!(modal["method"], "modal");
    // Every backend: the same PSDs and cross-PSDs (formed by one shared kernel).
    for b in backends() {
        let on = run_on("40", b);
        assert_eq!(on["backend"], b);
        assert_eq!(on["outputs"], modal["outputs"], "{b}");
        assert_eq!(on["cross_psd"], modal["cross_psd"], "{b}");
    }
    assert!(
        num(&modal["modes"], "mass_captured") >= 0.99,
        "{}",
        modal["modes"]
    );
    for k in 0..2 {
        let (a, b) = (
            num(&modal["outputs"][k], "rms"),
            num(&direct["outputs"][k], "rms"),
        );
        assert!((a - b).abs() < 0.01 * b, "output {k}: {a} vs {b}");
        assert_eq!(modal["outputs"][k]["psd"].as_array().unwrap().len(), 301);
    }
    // The cross-PSD matrix per frequency: 2 x 2, the PSDs on its diagonal,
    // Hermitian, the same from the modes as from the direct solve.
    let cross = |r: &serde_json::Value, f: usize, part: &str, x: usize, y: usize| {
        r["cross_psd"][f][part][x][y].as_f64().unwrap()
    };
    assert_eq!(direct["cross_psd"].as_array().unwrap().len(), 301);
    for f in [10, 100, 250] {
        for k in 0..2 {
            let psd = direct["outputs"][k]["psd"][f].as_f64().unwrap();
            assert_eq!(cross(&direct, f, "re", k, k), psd);
        }
        assert_eq!(
            cross(&direct, f, "im", 0, 1),
            -cross(&direct, f, "im", 1, 0)
        );
        let scale = (cross(&direct, f, "re", 0, 0) * cross(&direct, f, "re", 1, 1)).sqrt();
        for part in ["re", "im"] {
            let (a, b) = (cross(&modal, f, part, 0, 1), cross(&direct, f, part, 0, 1));
            assert!((a - b).abs() < 0.02 * scale, "{part} at {f}: {a} vs {b}");
        }
    }
    // Its figure.
    let o = gpuq(&[
        "uq",
        "psd",
        "--stiffness",
        &p("K.mtx"),
        "--mass",
        &p("M.mtx"),
        "--rayleigh",
        "0.1,1e-4",
        "--load-shape",
        &p("shape.mtx"),
        "--outputs",
        "58,30,10",
        "--modes",
        "20",
        "--plot",
        &p("psd.svg"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(p("psd.svg")).unwrap();
    assert!(svg.contains("|S_xy|, DOFs 58 and 30") && svg.contains("S_xx, DOF 10"));
    // Bad models and arguments: one line each.
    for (args, says) in [
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--rayleigh",
                "0.1,0",
                "--load-dofs",
                "58",
                "--outputs",
                "58",
            ],
            "--mass",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--mass",
                &p("M.mtx"),
                "--modal-damping",
                "0.02",
                "--modes",
                "0",
                "--load-dofs",
                "58",
                "--outputs",
                "58",
            ],
            "modal damping ratio needs modes",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--mass",
                &p("M.mtx"),
                "--load-dofs",
                "58",
                "--outputs",
                "58",
            ],
            "needs damping",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--mass",
                &p("M.mtx"),
                "--rayleigh",
                "0.1",
                "--load-dofs",
                "58",
                "--outputs",
                "58",
            ],
            "A,B",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--mass",
                &p("M.mtx"),
                "--rayleigh",
                "0.1,0",
                "--load-dofs",
                "58",
                "--outputs",
                "99",
            ],
            "outside",
        ),
        (
            vec![
                "--stiffness",
                &p("K.mtx"),
                "--mass",
                &p("M.mtx"),
                "--rayleigh",
                "0.1,0",
                "--load-dofs",
                "58",
                "--outputs",
                "1",
                "--modes",
                "61",
            ],
            "modes",
        ),
    ] {
        let mut all = vec!["uq", "psd"];
        all.extend(args.iter().copied());
        let o = gpuq(&all);
        assert_eq!(o.status.code(), Some(1), "{all:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{all:?}: {e}");
        assert!(e.contains(says), "{all:?}: {e}");
    }
}

#[test]
fn convolution_of_a_model_matches_the_beams_own() {
    let d = scratch();
    let p = |f: &str| d.path().join(f).to_string_lossy().to_string();
    let o = gpuq(&[
        "generate",
        "beam:8",
        "--out",
        &p("K.mtx"),
        "--mass-out",
        &p("M.mtx"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for backend in backends() {
        let beam = report(&[
            "convolution",
            "--dofs",
            "16",
            "--steps",
            "256",
            "--samples",
            "50",
            "--backend",
            backend,
        ]);
        // The unit beam's damping is Rayleigh 0.1 M + 1e-4 K; all 16 modes.
        let model = report(&[
            "convolution",
            "--stiffness",
            &p("K.mtx"),
            "--mass",
            &p("M.mtx"),
            "--rayleigh",
            "0.1,1e-4",
            "--modes",
            "16",
            "--load-dofs",
            "14",
            "--outputs",
            "14",
            "--steps",
            "256",
            "--samples",
            "50",
            "--backend",
            backend,
        ]);
        let out = &model["outputs"][0];
        for (a, b) in [
            ("final_std", "final_tip_std"),
            ("final_mean", "final_tip_mean"),
            ("peak_max", "peak_tip_max"),
        ] {
            let (x, y) = (num(out, a), num(&beam, b));
            assert!(
                (x - y).abs() < 1e-6 * y.abs().max(1e-3),
                "{backend} {a}: {x} vs {y}"
            );
        }
        assert!((num(&model["modes"], "mass_captured") - 1.0).abs() < 1e-9);
    }
    // Modal damping needs no C; the convolution refuses --modes 0.
    let r = report(&[
        "convolution",
        "--stiffness",
        &p("K.mtx"),
        "--mass",
        &p("M.mtx"),
        "--modal-damping",
        "0.05",
        "--modes",
        "4",
        "--load-dofs",
        "14",
        "--outputs",
        "14,6",
        "--steps",
        "128",
    ]);
    assert_eq!(r["outputs"].as_array().unwrap().len(), 2);
    let o = gpuq(&[
        "uq",
        "convolution",
        "--stiffness",
        &p("K.mtx"),
        "--mass",
        &p("M.mtx"),
        "--modal-damping",
        "0.05",
        "--modes",
        "0",
        "--load-dofs",
        "14",
        "--outputs",
        "14",
    ]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn lobpcg_modes_on_every_backend_are_lanczos_modes() {
    // A membrane (the 2D Laplacian on 30 x 30 nodes, 900 DOFs: above the
    // dense solver's 400) with uneven lumped masses (no repeated
    // eigenvalues, so the modes are unique): LOBPCG with AMG on each backend
    // against shift-invert Lanczos with the Cholesky factor on the host.
    let d = scratch();
    let p = |f: &str| d.path().join(f).to_string_lossy().to_string();
    let o = gpuq(&["generate", "laplace2d:30", "--out", &p("K.mtx")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut masses = gpuq_sparse::Coo::<f64>::new(900, 900);
    for i in 0..900 {
        masses
            .push(i, i, 1.0 + 0.3 * (0.7 * i as f64).sin())
            .unwrap();
    }
    let m = gpuq_sparse::Csr::try_from(&masses).unwrap();
    gpuq_sparse::matrix_market::save_csr(&m, p("M.mtx")).unwrap();
    let run = |solver: &str, backend: &str| {
        report(&[
            "psd",
            "--backend",
            backend,
            "--stiffness",
            &p("K.mtx"),
            "--mass",
            &p("M.mtx"),
            "--modal-damping",
            "0.02",
            "--load-dofs",
            "450",
            "--outputs",
            "450,31",
            "--freq-range",
            "0:2:101",
            "--modes",
            "12",
            "--eigensolver",
            solver,
        ])
    };
    let lanczos = run("lanczos", "cpu");
    assert_eq!(lanczos["modes"]["eigensolver"], "lanczos");
    for b in backends() {
        let lobpcg = run("lobpcg", b);
        assert_eq!(lobpcg["modes"]["eigensolver"], "lobpcg", "{b}");
        assert!(num(&lobpcg["modes"], "max_residual") <= 1e-8, "{b}");
        assert!(num(&lobpcg["modes"], "iterations") > 0.0, "{b}");
        let (w, v) = (&lobpcg["modes"]["omega"], &lanczos["modes"]["omega"]);
        for i in 0..12 {
            let (a, b2) = (w[i].as_f64().unwrap(), v[i].as_f64().unwrap());
            assert!((a - b2).abs() <= 1e-8 * b2, "{b}: mode {i}: {a} vs {b2}");
        }
        for k in 0..2 {
            let (a, c) = (
                num(&lobpcg["outputs"][k], "rms"),
                num(&lanczos["outputs"][k], "rms"),
            );
            assert!((a - c).abs() <= 1e-6 * c, "{b}: output {k}: {a} vs {c}");
        }
    }
}
