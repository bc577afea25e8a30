//! End-to-end tests of `gpuq bidomain` and of the generators it brought
//! (`bidomain2d`, `bidomain3d`, `elasticity2d`).

mod common;
use common::gpuq;
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuq-cli-bidomain-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn bidomain_runs_and_writes_its_outputs() {
    let d = dir("run");
    let png = d.join("activation.png");
    let vtk = d.join("vtk");
    let mtx = d.join("mtx");
    let o = gpuq(&[
        "bidomain",
        "--grid",
        "24",
        "--steps",
        "20",
        "--dt",
        "0.1",
        "--plot",
        png.to_str().unwrap(),
        "--vtk",
        vtk.to_str().unwrap(),
        "--mtx",
        mtx.to_str().unwrap(),
        "--snapshot-every",
        "10",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps"].as_array().unwrap().len(), 20);
    assert_eq!(v["setup"]["unknowns"], 2 * 25 * 25);
    assert_eq!(v["setup"]["preconditioner"], "amg");
    assert!(v["activated_fraction"].as_f64().unwrap() > 0.0);
    assert!(v["steps"][19]["iterations"].as_u64().unwrap() > 0);
    // Calibrated by default to 0.6 / 0.2 m/s: the cable's velocities and the
    // calibration in the report.
    assert_eq!(v["model"], "aliev-panfilov");
    let cv = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    assert!(
        (cv("cv_along_m_s") / 0.6 - 1.0).abs() <= 0.05,
        "{}",
        v["cv_along_m_s"]
    );
    assert!(
        (cv("cv_across_m_s") / 0.2 - 1.0).abs() <= 0.05,
        "{}",
        v["cv_across_m_s"]
    );
    assert!(v.get("sheet_cv_along_m_s").is_some() && v.get("sheet_cv_across_m_s").is_some());
    let cal = &v["calibration"];
    assert_eq!(cal["target"]["along"], 0.6);
    assert_eq!(cal["sigma_i"][0], v["sigma_i"][0]);
    assert!(cal["trials"].as_array().unwrap().len() >= 2);
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    for k in ["000010", "000020"] {
        assert!(vtk.join(format!("bidomain_{k}.vtk")).exists());
        assert!(mtx.join(format!("bidomain_{k}.mtx")).exists());
    }
    // The text summary and the fallback preconditioner, in 3D.
    let o = gpuq(&[
        "bidomain",
        "--grid",
        "8",
        "--dim",
        "3",
        "--steps",
        "3",
        "--precond",
        "block2",
        "--layout",
        "bsr2",
        "--cv",
        "off",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("PCG iterations") && text.contains("activated"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bidomain_models_targets_and_raw_conductivities() {
    // Mitchell-Schaeffer calibrated to other targets.
    let o = gpuq(&[
        "bidomain",
        "--grid",
        "24",
        "--steps",
        "10",
        "--dt",
        "0.1",
        "--model",
        "mitchell-schaeffer",
        "--cv",
        "0.5,0.25",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["model"], "mitchell-schaeffer");
    let along = v["cv_along_m_s"].as_f64().unwrap();
    let across = v["cv_across_m_s"].as_f64().unwrap();
    assert!((along / 0.5 - 1.0).abs() <= 0.05 && (across / 0.25 - 1.0).abs() <= 0.05);
    // --cv off: the conductivities as given, no calibration; the cable's
    // velocities still measured (Mitchell-Schaeffer at the literature values:
    // about 0.33 / 0.12 m/s).
    let o = gpuq(&[
        "bidomain",
        "--grid",
        "10",
        "--steps",
        "5",
        "--model",
        "mitchell-schaeffer",
        "--cv",
        "off",
        "--sigma-i",
        "0.17,0.019",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["calibration"].is_null());
    assert_eq!(v["sigma_i"][0], 0.17);
    let along = v["cv_along_m_s"].as_f64().unwrap();
    assert!(along > 0.25 && along < 0.4, "{along}");
    // The text summary names the velocities.
    let o = gpuq(&["bidomain", "--grid", "24", "--steps", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("conduction velocity"), "{text}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("calibrated"));
}

#[test]
fn bidomain_rejects_bad_arguments_in_one_line() {
    for args in [
        &["bidomain", "--grid", "0"][..],
        &["bidomain", "--grid", "8", "--dim", "4"],
        &["bidomain", "--grid", "8", "--dt", "-1"],
        &["bidomain", "--grid", "8", "--precond", "ilu"],
        &["bidomain", "--grid", "8", "--backend", "tpu"],
        &["bidomain", "--grid", "8", "--layout", "coo"],
        &["bidomain", "--grid", "8", "--cv", "0,0.2"],
        &["bidomain", "--grid", "8", "--cv", "-0.6,0.2"],
        &["bidomain", "--grid", "8", "--cv", "nan,0.2"],
        &["bidomain", "--grid", "8", "--cv", "0.6,inf"],
        &["bidomain", "--grid", "8", "--cv", "0.6"],
        &["bidomain", "--grid", "8", "--cv", "fast,slow"],
        &["bidomain", "--grid", "8", "--model", "fitzhugh-nagumo"],
        &["bidomain", "--grid", "8", "--sigma-i", "0,0.019"],
        &["bidomain", "--grid", "8", "--sigma-e", "0.62"],
        // the calibrated stimulus (3 mm) covers a 0.8 mm sheet; no steps
        &["bidomain", "--grid", "8", "--steps", "5"],
        &["bidomain", "--grid", "8", "--steps", "0"],
    ] {
        let o = gpuq(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
        assert!(!e.contains("panicked"));
    }
}

#[test]
fn new_generators_write_and_solve() {
    let d = dir("gen");
    for (spec, n) in [
        ("bidomain2d:6", 2 * 49),
        ("bidomain3d:4", 2 * 50),
        ("elasticity2d:5", 2 * 30),
    ] {
        let a = d.join("a.mtx");
        let o = gpuq(&["generate", spec, "--out", a.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{spec}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let head = std::fs::read_to_string(&a).unwrap();
        let size = head.lines().find(|l| !l.starts_with('%')).unwrap();
        assert!(size.starts_with(&format!("{n} {n} ")), "{spec}: {size}");
        let o = gpuq(&["solve", "--generate", spec, "--precond", "block2", "--json"]);
        assert!(
            o.status.success(),
            "{spec}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["converged"], true, "{spec}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Ctrl-C (SIGINT) ends a run between steps: the report of the steps done
/// with status `interrupted`, exit 130, and no activation map.
#[test]
fn ctrl_c_ends_a_run_with_its_report() {
    let d = dir("ctrl-c");
    let map = d.join("map.png");
    let mut args = common::os_args(&[
        "bidomain",
        "--grid",
        "30",
        "--steps",
        "100000000",
        "--json",
        "--plot",
    ]);
    args.push(map.clone().into());
    let o = common::interrupted(&args, std::time::Duration::from_millis(2000));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "interrupted");
    assert!(!map.exists());
    let _ = std::fs::remove_dir_all(&d);
}
