//! Project automation, run as `cargo xtask <command>`:
//!
//! * `ci`: what `.ci/run` runs: fmt check, clippy with warnings denied, the tests,
//!   the PTX freshness check;
//! * `ptx [--check]`: builds `kernels-rs` to PTX with the nightly toolchain into
//!   `crates/gpuq-cuda/ptx/gpuq_kernels.ptx` (every kernel) and
//!   `gpuq_user_cubature.ptx` (the cubature kernels of user integrands, feature
//!   `user-integrand`), and the Rust user integrand of `examples/rust-integrand`;
//!   `--check` fails when a committed file differs from a fresh build;
//! * `bench [M]`: the CPU criterion benches and the SciPy anchor on `laplace3d:M`
//!   (default 100) in one session, then a comparison table in Markdown;
//! * `gpu-pack`: release test and bench binaries with the `cuda` feature, and the
//!   CLI, in `gpu-pack/` with a `run.sh` for the GPU machine (see [`gpu_pack`]).

mod gpu_pack;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("ptx") => ptx(args.get(1).map(String::as_str) == Some("--check")),
        Some("bench") => bench(args.get(1).map(String::as_str).unwrap_or("100")),
        Some("gpu-pack") => gpu_pack::gpu_pack(),
        _ => Err("usage: cargo xtask ci | ptx [--check] | bench [M] | gpu-pack".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed with {status}"))
    }
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn ci() -> Result<(), String> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo().args(["test", "--workspace"]))?;
    ptx(true)
}

/// The PTX target architecture: sm_80 runs on Ampere and, JIT-compiled by the
/// driver, on Hopper.
const PTX_ARCH: &str = "sm_80";

/// One PTX module built with nightly: its crate (manifest and the prefix of
/// its `.s` output), the committed file, the cargo features and extra rustc
/// flags of its build, what it must contain, and the one external function it
/// may call.
struct PtxModule {
    manifest: &'static str,
    crate_file: &'static str,
    out: &'static str,
    features: &'static [&'static str],
    rustflags: &'static str,
    must_contain: &'static str,
    linked_at_run_time: Option<&'static str>,
}

/// Register caps of kernels that Rust cannot annotate (PTX `.maxnreg`, which
/// `build_ptx` writes after the entry's parameter list): (kernel, registers
/// per thread). The sparse products' passes are latency-bound: uncapped
/// (one kernel for both passes then) they took 70 registers, so only 3
/// blocks of 256 threads fitted an SM; at 48, 5 do.
const MAX_REGISTERS: [(&str, u32); 4] = [
    ("spgemm_count_rows", 48),
    ("spgemm_fill_rows", 48),
    ("spgemm_count_wide", 48),
    ("spgemm_fill_wide", 48),
];

/// `text` with `.maxnreg` after the parameter list of each kernel of
/// `MAX_REGISTERS` it defines.
fn cap_registers(text: &str) -> Result<String, String> {
    let mut out = text.to_string();
    for (kernel, regs) in MAX_REGISTERS {
        let Some(at) = out.find(&format!(".entry {kernel}(")) else {
            continue;
        };
        let close = out[at..]
            .find("\n)\n")
            .ok_or_else(|| format!("the PTX entry {kernel} has no parameter list"))?;
        let after = at + close + "\n)\n".len();
        out.insert_str(after, &format!(".maxnreg {regs}\n"));
    }
    Ok(out)
}

/// Every function inlinable across crates, so that what a module uses from its
/// dependencies (libm, gpuq-kernels) is compiled into it instead of left
/// external.
const INLINE_ALL: &str = "-Zcross-crate-inline-threshold=always";

/// The committed PTX modules: every kernel; the cubature kernels of user
/// integrands, which call `gpuq_integrand` (linked at run time with the user's
/// code); and the example of a user integrand written in Rust.
const PTX_MODULES: [PtxModule; 3] = [
    PtxModule {
        manifest: "kernels-rs/Cargo.toml",
        crate_file: "gpuq_kernels",
        out: "crates/gpuq-cuda/ptx/gpuq_kernels.ptx",
        features: &[],
        rustflags: "",
        must_contain: ".entry",
        linked_at_run_time: None,
    },
    PtxModule {
        manifest: "kernels-rs/Cargo.toml",
        crate_file: "gpuq_kernels",
        out: "crates/gpuq-cuda/ptx/gpuq_user_cubature.ptx",
        features: &["user-integrand"],
        rustflags: INLINE_ALL,
        must_contain: ".entry cubu_evaluate",
        linked_at_run_time: Some("gpuq_integrand"),
    },
    PtxModule {
        manifest: "examples/rust-integrand/Cargo.toml",
        crate_file: "rust_integrand",
        out: "examples/rust-integrand/rust_integrand.ptx",
        features: &[],
        rustflags: INLINE_ALL,
        must_contain: ".visible .func  (.param .b64 func_retval0) gpuq_integrand(",
        linked_at_run_time: None,
    },
];

/// Builds kernels-rs for nvptx64 with nightly as `module` says and returns the
/// PTX text.
fn build_ptx(module: &PtxModule) -> Result<String, String> {
    // rust-src is needed by -Zbuild-std; installing it is idempotent.
    run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))?;
    // One target directory per module: the two builds differ in features and
    // flags, and each reads back its own newest output.
    let name = Path::new(module.out)
        .file_stem()
        .map_or_else(|| "ptx".into(), |s| s.to_string_lossy().to_string());
    let target_dir = root().join("target/ptx").join(name);
    let mut cmd = Command::new("cargo");
    cmd.env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN");
    if !module.rustflags.is_empty() {
        cmd.env("RUSTFLAGS", module.rustflags);
    }
    cmd.args(["+nightly", "rustc", "--release", "--manifest-path"])
        .arg(root().join(module.manifest));
    if !module.features.is_empty() {
        cmd.args(["--features", &module.features.join(",")]);
    }
    cmd.args([
        "--target",
        "nvptx64-nvidia-cuda",
        "-Zbuild-std=core",
        "--target-dir",
    ])
    .arg(&target_dir)
    .args(["--", "--emit=asm", "-C", &format!("target-cpu={PTX_ARCH}")]);
    run(&mut cmd)?;
    let deps = target_dir.join("nvptx64-nvidia-cuda/release/deps");
    let newest = std::fs::read_dir(&deps)
        .map_err(|e| format!("{}: {e}", deps.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.starts_with(&format!("{}-", module.crate_file)) && name.ends_with(".s")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .ok_or_else(|| format!("no {}-*.s in {}", module.crate_file, deps.display()))?;
    let text = std::fs::read_to_string(newest.path()).map_err(|e| e.to_string())?;
    if !text.contains(module.must_contain) {
        return Err(format!(
            "{}: the PTX lacks {:?}",
            module.out, module.must_contain
        ));
    }
    // The PTX is linked against nothing (the user module: against the one
    // function it names): a declared-but-undefined function or global (a panic
    // path of core that survived optimisation, a dependency's static) makes the
    // driver's JIT reject the whole module, so refuse it here, where the cause
    // is visible.
    let allowed = module
        .linked_at_run_time
        .map(|name| format!(".extern .func  (.param .b64 func_retval0) {name}"));
    if let Some(line) = text
        .lines()
        .find(|l| l.starts_with(".extern") && Some(l.trim_end()) != allowed.as_deref())
    {
        return Err(format!(
            "{}: the PTX uses a symbol it does not define (remove the panic path): {line}",
            module.out
        ));
    }
    cap_registers(&text)
}

fn ptx(check: bool) -> Result<(), String> {
    for module in &PTX_MODULES {
        let fresh = build_ptx(module)?;
        let path = root().join(module.out);
        if check {
            let committed =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if committed != fresh {
                return Err(format!(
                    "{} is stale: run `cargo xtask ptx` and commit the result",
                    path.display()
                ));
            }
            eprintln!("xtask: {} is up to date", path.display());
        } else {
            std::fs::write(&path, fresh).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("xtask: wrote {}", path.display());
        }
    }
    Ok(())
}

/// Mean time in seconds of a criterion benchmark, read from its estimates file.
/// The median time in seconds of criterion benchmark `group/bench`, read from
/// criterion's report (which replaces characters such as `^` by `_` in folder names).
fn criterion_median(group: &str, bench: &str) -> Result<f64, String> {
    let folder = |s: &str| s.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_");
    let path = root()
        .join("target/criterion")
        .join(folder(group))
        .join(folder(bench))
        .join("new/estimates.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    v["median"]["point_estimate"]
        .as_f64()
        .map(|ns| ns * 1e-9)
        .ok_or_else(|| format!("{}: no median estimate", path.display()))
}

fn bench(m: &str) -> Result<(), String> {
    let m_num: usize = m
        .parse()
        .map_err(|_| format!("grid size '{m}' is not a number"))?;
    run(cargo()
        .args(["bench", "--bench", "cpu_spmv_cg"])
        .env("GPUQ_BENCH_M", m))?;
    let out = Command::new("python3")
        .args(["benches/anchors/scipy_cpu.py", m])
        .current_dir(root())
        .output()
        .map_err(|e| format!("cannot run the SciPy anchor: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "SciPy anchor failed (pip install scipy): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let scipy: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("SciPy anchor output: {e}"))?;
    let get = |k: &str| scipy[k].as_f64().unwrap_or(f64::NAN);

    let n = m_num.pow(3);
    let nnz = 7 * n - 6 * m_num * m_num;
    let spmv_bytes = (12 * nnz + 8 * (n + 1) + 16 * n) as f64;
    let cg_bytes = (12 * nnz + 8 * (n + 1) + 80 * n) as f64;
    let copy_backend = criterion_median("copy", "backend_f64_2^24")?;
    let copy_memcpy = criterion_median("copy", "memcpy_f64_2^24")?;
    // The reference is the fastest copy measured (gpuq's or NumPy's), so ratios to it
    // are conservative.
    let copy_bytes = 16.0 * (1u64 << 24) as f64;
    let copy_gbs = (copy_bytes / copy_backend.min(copy_memcpy) / 1e9).max(get("copy_gbs"));
    let group = format!("spmv_laplace3d_{m}");
    let csr = criterion_median(&group, "csr")?;
    let sell1 = criterion_median(&group, "sell_8_1")?;
    let sell = criterion_median(&group, "sell_8_256")?;
    let cg = criterion_median(&format!("cg_iteration_laplace3d_{m}"), "cg")?;

    let gbs = |bytes: f64, t: f64| bytes / t / 1e9;
    println!("\nlaplace3d:{m}: n = {n}, nnz = {nnz}; SpMV bytes {spmv_bytes:.4e}, CG iteration bytes {cg_bytes:.4e}\n");
    println!(
        "| measurement (laplace3d:{m}) | time | GB/s | % of copy ({copy_gbs:.1} GB/s) | vs SciPy |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, t) in [
        ("copy, gpuq `Backend::copy`", copy_backend),
        ("copy, memcpy per thread", copy_memcpy),
    ] {
        println!(
            "| {name} (2^24 f64) | {:.3} ms | {:.1} | {:.0}% | |",
            1e3 * t,
            copy_bytes / t / 1e9,
            100.0 * copy_bytes / t / 1e9 / copy_gbs
        );
    }
    println!(
        "| copy, NumPy `copyto` (2^24 f64) | | {:.1} | {:.0}% | |",
        get("copy_gbs"),
        100.0 * get("copy_gbs") / copy_gbs
    );
    for (name, t) in [
        ("SpMV CSR, gpuq", csr),
        ("SpMV SELL-8-1, gpuq", sell1),
        ("SpMV SELL-8-256, gpuq", sell),
    ] {
        println!(
            "| {name} | {:.3} ms | {:.1} | {:.0}% | {:.2}x faster |",
            1e3 * t,
            gbs(spmv_bytes, t),
            100.0 * gbs(spmv_bytes, t) / copy_gbs,
            get("spmv_ms") / (1e3 * t)
        );
    }
    println!(
        "| SpMV, SciPy `A.dot(x)` | {:.3} ms | {:.1} | {:.0}% | 1 |",
        get("spmv_ms"),
        get("spmv_gbs"),
        100.0 * get("spmv_gbs") / copy_gbs
    );
    println!(
        "| CG iteration, gpuq (fused) | {:.3} ms | {:.1} | {:.0}% | {:.2}x faster |",
        1e3 * cg,
        gbs(cg_bytes, cg),
        100.0 * gbs(cg_bytes, cg) / copy_gbs,
        get("cg_ms_per_iter") / (1e3 * cg)
    );
    println!(
        "| CG iteration, SciPy `cg` | {:.3} ms | | | 1 |",
        get("cg_ms_per_iter")
    );
    println!(
        "\nSciPy {} / NumPy {}, same machine, same session.",
        scipy["scipy"].as_str().unwrap_or("?"),
        scipy["numpy"].as_str().unwrap_or("?")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cap_registers;

    #[test]
    fn register_caps_follow_the_parameter_list_of_their_kernel_only() {
        let ptx = ".visible .entry other(\n\t.param .u32 a\n)\n{\n}\n\
                   .visible .entry spgemm_fill_rows(\n\t.param .u32 w,\n\t.param .u64 x\n)\n{\n\tret;\n}\n";
        let capped = cap_registers(ptx).unwrap();
        assert_eq!(capped.matches(".maxnreg").count(), 1);
        assert!(capped.contains(".param .u64 x\n)\n.maxnreg 48\n{\n\tret;"));
        assert!(capped.contains(".entry other(\n\t.param .u32 a\n)\n{"));
        // A module without the kernel is left as it is.
        assert_eq!(cap_registers("no kernels").unwrap(), "no kernels");
    }
}
