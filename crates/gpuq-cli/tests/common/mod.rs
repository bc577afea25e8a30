//! What the end-to-end tests of the `gpuq` binary share: the binary, a run, and a run
//! stopped by Ctrl-C. (Each test file uses its own part: the rest is unused there.)
#![allow(dead_code)]

use std::ffi::OsString;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The binary under test: `GPUQ_BIN` when set (a packed copy run on another machine, see
/// `cargo xtask gpu-pack`), else the one cargo built.
pub fn bin() -> OsString {
    std::env::var_os("GPUQ_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_gpuq").into())
}

/// A scratch folder for one test, under the system's temporary folder,
/// removed with everything in it when the returned guard is dropped.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("gpuq-test-")
        .tempdir()
        .expect("a temporary folder")
}

/// Runs `gpuq ARGS` to its end.
pub fn gpuq(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("the gpuq binary runs")
}

/// Runs `gpuq ARGS`, sends it SIGINT (Ctrl-C) after `wait`, and returns what it printed
/// and its exit status. The run must take far longer than `wait` on any machine.
pub fn interrupted(args: &[OsString], wait: Duration) -> Output {
    let child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gpuq binary starts");
    std::thread::sleep(wait);
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let o = child.wait_with_output().expect("gpuq ends");
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `args` as the owned strings [`interrupted`] takes.
pub fn os_args(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}
