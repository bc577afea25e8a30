//! `cargo xtask gpu-pack`: every test binary (profile `gpu-test`: release
//! optimisation without LTO) and every bench binary and the `gpuq` CLI (release),
//! built with the `cuda` feature and stripped, packed as `gpu-pack/bins.tar.xz`
//! (every binary embeds the PTX, which compresses well: about 90 MiB of binaries
//! become 12 MiB) with a `run.sh` that unpacks them into `/tmp/gpuq-pack` on the GPU
//! machine, runs them all and prints a pass/fail table last.
//!
//! The folder must stay under the device tool's 60 MiB carry budget; the command
//! fails when it does not.

use crate::{cargo, root};
use std::path::Path;
use std::process::Stdio;

/// The carry budget of the device tool, with room left for the working tree.
const LIMIT_BYTES: u64 = 60 * 1024 * 1024;

pub fn gpu_pack() -> Result<(), String> {
    let dest_dir = root().join("gpu-pack");
    let pack = root().join("target").join("gpu-pack-bins");
    for dir in [&dest_dir, &pack] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }

    // The CLI and the benches in release (what is measured); the tests in a
    // profile of their own without LTO (see `profile.gpu-test`).
    let mut messages = Vec::new();
    for (profile, kinds) in [
        ("release", &["--bins", "--benches"][..]),
        ("gpu-test", &["--tests"][..]),
    ] {
        let mut cmd = cargo();
        cmd.args([
            "build",
            "--profile",
            profile,
            "--workspace",
            "--exclude",
            "xtask",
        ])
        .args(kinds)
        .args([
            "--features",
            "gpuq/cuda",
            "--message-format=json-render-diagnostics",
        ])
        .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
        .env("CARGO_PROFILE_BENCH_STRIP", "symbols")
        .env("CARGO_PROFILE_GPU_TEST_STRIP", "symbols")
        .current_dir(root())
        .stdout(Stdio::piped());
        eprintln!("xtask: running {cmd:?}");
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run cargo build: {e}"))?;
        if !out.status.success() {
            return Err(format!("cargo build failed with {}", out.status));
        }
        // The test build also builds the CLI (for its tests): the packed one is release's.
        let tests_only = profile == "gpu-test";
        messages.push((
            tests_only,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }

    let mut tests = Vec::new();
    let mut benches = Vec::new();
    let lines = messages
        .iter()
        .flat_map(|(tests_only, text)| text.lines().map(move |l| (*tests_only, l)));
    for (tests_only, line) in lines {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let target = &msg["target"];
        let name = target["name"].as_str().unwrap_or("unnamed");
        let kind = target["kind"][0].as_str().unwrap_or("");
        let is_test = msg["profile"]["test"].as_bool().unwrap_or(false);
        let package = package_name(msg["package_id"].as_str().unwrap_or(""));
        let (file, list) = match (kind, is_test) {
            ("bin", false) if tests_only => continue,
            ("bin", false) => (name.to_string(), None),
            ("bench", _) => (format!("bench-{name}"), Some(&mut benches)),
            // Several crates have a `tests/cuda.rs`: the package keeps the names apart.
            (_, true) => (format!("test-{package}-{kind}-{name}"), Some(&mut tests)),
            _ => continue,
        };
        let dest = pack.join(&file);
        std::fs::copy(exe, &dest).map_err(|e| format!("copying {exe}: {e}"))?;
        if let Some(list) = list {
            list.push(file);
        }
    }
    tests.sort();
    benches.sort();
    if tests.is_empty() || !pack.join("gpuq").exists() {
        return Err("cargo reported no test binaries or no gpuq binary".into());
    }
    std::fs::write(dest_dir.join("run.sh"), run_script(&tests, &benches))
        .map_err(|e| format!("writing run.sh: {e}"))?;
    let unpacked = folder_bytes(&pack)?;
    let status = std::process::Command::new("tar")
        .arg("-cJf")
        .arg(dest_dir.join("bins.tar.xz"))
        .arg("-C")
        .arg(&pack)
        .arg(".")
        .env("XZ_OPT", "-6 -T0")
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    if !status.success() {
        return Err(format!("tar -cJf failed with {status}"));
    }

    let total = folder_bytes(&dest_dir)?;
    eprintln!(
        "xtask: {} holds {} test binaries, {} bench binaries and gpuq: {:.1} MiB ({:.1} MiB unpacked)",
        dest_dir.display(),
        tests.len(),
        benches.len(),
        total as f64 / 1048576.0,
        unpacked as f64 / 1048576.0
    );
    if total > LIMIT_BYTES {
        return Err(format!(
            "gpu-pack is {:.1} MiB, over the {} MiB carry budget",
            total as f64 / 1048576.0,
            LIMIT_BYTES / 1048576
        ));
    }
    Ok(())
}

/// The package's name in a cargo package id: `path+file:///..#name@0.1.0`,
/// `path+file:///../name#0.1.0`, or the older `name 0.1.0 (path+file:///..)`.
fn package_name(id: &str) -> &str {
    match id.split_once('#') {
        Some((path, tail)) => match tail.split_once('@') {
            Some((name, _)) => name,
            None => path.rsplit('/').next().unwrap_or(path),
        },
        None => id.split(' ').next().unwrap_or(id),
    }
}

fn folder_bytes(dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    for e in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        total += e
            .map_err(|e| e.to_string())?
            .metadata()
            .map_err(|e| e.to_string())?
            .len();
    }
    Ok(total)
}

/// The script run on the GPU machine from the repository root:
/// `bash gpu-pack/run.sh [tests|bench|all]` (default all).
fn run_script(tests: &[String], benches: &[String]) -> String {
    let mut s = String::from(
        r#"#!/usr/bin/env bash
# Generated by `cargo xtask gpu-pack`. Run from the repository root:
#   bash gpu-pack/run.sh [tests|bench|all|unpack]   or   bash gpu-pack/run.sh BINARY [ARGS...]
# The binaries are unpacked from gpu-pack/bins.tar.xz into /tmp/gpuq-pack first
# (`unpack` does only that).
# Runs every packed test binary (the cross-backend tests use the GPU), checks that
# CG converges alike on both backends, runs the GPU benchmarks (with the CuPy
# anchor), and prints a pass/fail table last. Logs go to /tmp/gpuq-logs, and to
# $OUT/gpuq-logs.tgz when $OUT is set (the device tool brings that file back).
set -u
PACK=/tmp/gpuq-pack
if [ ! -x "$PACK/gpuq" ]; then
    mkdir -p "$PACK" && tar -xJf "$(dirname "$0")/bins.tar.xz" -C "$PACK" || exit 1
fi
[ "${1:-}" = unpack ] && exit 0
LOGS=/tmp/gpuq-logs
rm -rf "$LOGS"; mkdir -p "$LOGS"
WHAT="${1:-all}"
export GPUQ_BIN="$PACK/gpuq"
if [ -x "$PACK/$WHAT" ]; then shift; "$PACK/$WHAT" "$@"; exit $?; fi
TABLE=""
FAILED=0
row() { TABLE="$TABLE$(printf '%-44s %-6s %s' "$1" "$2" "$3")\n"; }
run_test() {
    local name="$1"; shift
    local log="$LOGS/$name.log"
    "$PACK/$name" "$@" >"$log" 2>&1
    local rc=$?
    local counts
    counts="$(grep -E '^test result:' "$log" | awk '{p+=$4; f+=$6} END {printf "%d passed, %d failed", p, f}')"
    local skipped
    skipped="$(grep -c 'skipped (no CUDA device)' "$log")"
    [ "$skipped" -gt 0 ] && counts="$counts, $skipped skipped (no GPU)"
    if [ $rc -eq 0 ]; then row "$name" PASS "$counts"; else
        row "$name" FAIL "$counts (exit $rc)"; FAILED=1
        grep -E "panicked|^---- " "$log" | head -20
    fi
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
"$PACK/gpuq" info
"$PACK/gpuq" solve --generate laplace3d:50 --method cg --precond jacobi --backend auto --json 2>&1 \
    | grep -E '"(backend|converged|iterations)"' | tr -d '\n '; echo
if [ "$WHAT" = all ] || [ "$WHAT" = tests ]; then
"#,
    );
    for t in tests {
        // --nocapture: the lines of skipped GPU tests reach the log and the table.
        s.push_str(&format!("    run_test {t} --nocapture\n"));
    }
    s.push_str(
        r#"    # CG on the GPU converges like on the CPU (same problem, same iteration count within 1).
    for be in cpu cuda; do
        "$PACK/gpuq" solve --generate laplace3d:200 --method cg --precond jacobi --backend $be --json \
            >"$LOGS/solve-$be.json" 2>"$LOGS/solve-$be.err"
        echo "solve --backend $be: exit $? $(tr -d '\n ' <"$LOGS/solve-$be.json" | grep -oE '"(backend|iterations|relative_residual|time_s|converged)":[^,}]*' | tr '\n' ' ')"
        cat "$LOGS/solve-$be.err"
    done
    itc=$(grep -oE '"iterations": *[0-9]+' "$LOGS/solve-cpu.json" | grep -oE '[0-9]+$')
    itg=$(grep -oE '"iterations": *[0-9]+' "$LOGS/solve-cuda.json" | grep -oE '[0-9]+$')
    if [ -n "$itc" ] && [ -n "$itg" ] && [ $(( itc > itg ? itc - itg : itg - itc )) -le 1 ] \
        && grep -q '"converged": *true' "$LOGS/solve-cuda.json"; then
        row "solve laplace3d:200 pcg cpu vs cuda" PASS "iterations cpu $itc, cuda $itg"
    else
        row "solve laplace3d:200 pcg cpu vs cuda" FAIL "iterations cpu ${itc:-?}, cuda ${itg:-?}"; FAILED=1
    fi
    # A complex symmetric Helmholtz system through Matrix Market files, BiCGSTAB + Jacobi.
    "$PACK/gpuq" generate helmholtz-cylinder:1 --out "$LOGS/cyl1.mtx" --rhs-out "$LOGS/cyl1_b.mtx" 2>/dev/null
    for be in cpu cuda; do
        "$PACK/gpuq" solve "$LOGS/cyl1.mtx" --rhs "$LOGS/cyl1_b.mtx" --method bicgstab --precond jacobi \
            --backend $be --json >"$LOGS/cyl-$be.json" 2>"$LOGS/cyl-$be.err"
        rc=$?
        res=$(grep -oE '"relative_residual": *[^,}]*' "$LOGS/cyl-$be.json" | grep -oE '[^ :]+$')
        its=$(grep -oE '"iterations": *[0-9]+' "$LOGS/cyl-$be.json" | grep -oE '[0-9]+$')
        if [ $rc -eq 0 ] && awk -v r="${res:-1}" 'BEGIN { exit !(r <= 1e-8) }'; then
            row "solve cylinder-1 bicgstab $be (mtx)" PASS "iterations ${its:-?}, residual ${res:-?}"
        else
            row "solve cylinder-1 bicgstab $be (mtx)" FAIL "exit $rc, residual ${res:-?}"; FAILED=1
        fi
    done
    # MCSA on 10^5 unknowns with rho(H) = 0.9 to 1e-8 on both backends, timed.
    for be in cpu cuda; do
        "$PACK/gpuq" solve --generate laplace1d:100000:0.2222222222 --method mcsa --histories 1000000 \
            --estimator expected --backend $be --json >"$LOGS/mcsa-$be.json" 2>"$LOGS/mcsa-$be.err"
        rc=$?
        res=$(grep -oE '"relative_residual": *[^,}]*' "$LOGS/mcsa-$be.json" | grep -oE '[^ :]+$')
        its=$(grep -oE '"iterations": *[0-9]+' "$LOGS/mcsa-$be.json" | grep -oE '[0-9]+$')
        secs=$(grep -oE '"time_s": *[^,}]*' "$LOGS/mcsa-$be.json" | grep -oE '[^ :]+$')
        if [ $rc -eq 0 ] && awk -v r="${res:-1}" 'BEGIN { exit !(r <= 1e-8) }'; then
            row "solve mcsa laplace1d 1e5 rho 0.9 $be" PASS "iterations ${its:-?}, residual ${res:-?}, ${secs:-?} s"
        else
            row "solve mcsa laplace1d 1e5 rho 0.9 $be" FAIL "exit $rc, residual ${res:-?}"; FAILED=1
        fi
    done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = bench ]; then
"#,
    );
    for b in benches {
        if b == "bench-gpu" || b == "bench-krylov" || b == "bench-mcls" {
            s.push_str(&format!(
                "    \"$PACK/{b}\" 2>&1 | tee \"$LOGS/{b}.log\"\n    [ ${{PIPESTATUS[0]}} -eq 0 ] && row {b} PASS \"tables above and in $LOGS/{b}.log\" || {{ row {b} FAIL \"see $LOGS/{b}.log\"; FAILED=1; }}\n"
            ));
        } else {
            // CPU criterion benches: a smoke run (each benchmark once).
            s.push_str(&format!("    run_test {b} --test\n"));
        }
    }
    s.push_str(
        r#"fi
[ -n "${OUT:-}" ] && tar czf "$OUT/gpuq-logs.tgz" -C "$LOGS" .
echo
echo "== gpu-pack summary"
printf "$TABLE"
exit $FAILED
"#,
    );
    s
}
