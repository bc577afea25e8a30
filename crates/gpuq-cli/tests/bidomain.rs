//! End-to-end tests of `gpuq bidomain` and of the generators it brought
//! (`bidomain2d`, `bidomain3d`, `elasticity2d`).

use std::path::PathBuf;
use std::process::{Command, Output};

/// The binary under test: `GPUQ_BIN` when set (a packed copy run on another
/// machine), else the one cargo built.
fn gpuq(args: &[&str]) -> Output {
    let bin = std::env::var_os("GPUQ_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_gpuq").into());
    Command::new(bin)
        .args(args)
        .output()
        .expect("the gpuq binary runs")
}

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
        "12",
        "--steps",
        "20",
        "--dt",
        "0.1",
        "--png",
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
    assert_eq!(v["setup"]["unknowns"], 2 * 13 * 13);
    assert_eq!(v["setup"]["preconditioner"], "amg");
    assert!(v["activated_fraction"].as_f64().unwrap() > 0.0);
    assert!(v["steps"][19]["iterations"].as_u64().unwrap() > 0);
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
fn bidomain_rejects_bad_arguments_in_one_line() {
    for args in [
        &["bidomain", "--grid", "0"][..],
        &["bidomain", "--grid", "8", "--dim", "4"],
        &["bidomain", "--grid", "8", "--dt", "-1"],
        &["bidomain", "--grid", "8", "--precond", "ilu"],
        &["bidomain", "--grid", "8", "--backend", "tpu"],
        &["bidomain", "--grid", "8", "--layout", "coo"],
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
