//! Krylov benchmarks: seed 003's Tables 10-12 redone on gpuq's generated
//! finite-element cylinders (`helmholtz-cylinder:0..2:soft`, the soft-walled
//! ducts closest to the seed's Cylinder3D-0/1/2; complex symmetric indefinite),
//! run through `cargo xtask gpu-pack` on the device machine (`bash
//! gpu-pack/run.sh bench`), or on any machine with `cargo bench --bench krylov`
//! (without a GPU the GPU columns stay empty). Flags: `--quick` (levels 0 and 1,
//! no peers), `--ours-only` (no peers), `--level N` (repeatable), `--hard` (the
//! hard-walled ducts `helmholtz-cylinder:0..2` instead).
//!
//! For each level and each method (BiCGSTAB, BiCGSTAB(8), TFQMR, QMR, GMRES(150)),
//! Jacobi-preconditioned, x0 = 0, stopping at ||b - A x|| <= 1e-9 ||b|| with a cap
//! of 1000 iterations (the seed's settings), it reports the iterations and the
//! time to solution on the CPU backend (CSR, all cores) and on the CUDA backend
//! (SELL-32-1): the solve only, not the upload, median of 3 runs after a warm-up.
//!
//! The peers run in the same session on the same systems: SciPy (`bicgstab`,
//! `gmres`, and `tfqmr`/`qmr` where present) on the CPU and CuPy (`gmres`, `cgs`,
//! and `bicgstab` where present) on the GPU, through
//! `benches/anchors/krylov_peers.py`, which reads the systems this binary writes
//! to a temporary directory.
//!
//! Memory-traffic floor: the bytes one iteration of *our implementation* moves,
//! counted from the CPU run's per-operation counters (each BLAS-1 operation's
//! vector reads and writes, each SpMV's `(s + 4) nnz + 4 (n + 1) + 2 s n`; see
//! [`op_bytes`]), divided by the device-to-device copy bandwidth measured here:
//! the GPU time per iteration over that is how far each method is from the
//! bandwidth bound of the kernels it runs.

use gpuq::core::{Backend, Complex64, SolveReport, Stats};
use gpuq::cpu::CpuBackend;
use gpuq::cuda::CudaBackend;
use gpuq::krylov::{solve_csr, KrylovOptions, Method, Preconditioner, SolverConfig};
use gpuq::sparse::fem_cylinder::Cylinder;
use gpuq::sparse::{Csr, Layout};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const RTOL: f64 = 1e-9;
const MAX_ITER: usize = 1000;
/// GMRES restart length: 150 converges on the soft-walled level 2 within the cap
/// (30 does not, for us or the peers).
const GMRES_RESTART: usize = 150;

const METHODS: [(&str, Method); 5] = [
    ("P-BiCGSTAB", Method::Bicgstab),
    ("P-BiCGSTAB(8)", Method::BicgstabL { l: 8 }),
    ("P-TFQMR", Method::Tfqmr),
    ("P-QMR", Method::Qmr),
    (
        "P-GMRES(150)",
        Method::Gmres {
            restart: GMRES_RESTART,
        },
    ),
];

/// Bytes an operation moves, by the CPU backend's operation names, for vectors
/// of `n` scalars of `s` bytes and the system matrix's `spmv` bytes.
fn op_bytes(op: &str, n: f64, s: f64, spmv: f64) -> Option<f64> {
    Some(match op {
        "fill" => n * s,
        "copy" | "scal" => 2.0 * n * s,
        "axpy" | "axpby" | "mul_elementwise" => 3.0 * n * s,
        "dotc" | "dotu" => 2.0 * n * s,
        "nrm2" => n * s,
        "bicgstab_p" => 4.0 * n * s,
        "bicgstab_s" => 3.0 * n * s,
        "bicgstab_tt" => 2.0 * n * s,
        "axpby_slots" => 3.0 * n * s,
        "tfqmr_odd" | "tfqmr_even" => 3.0 * n * s,
        "tfqmr_v" => 4.0 * n * s,
        // amu and mu read, w and M d read and written.
        "tfqmr_half" => 6.0 * n * s,
        // With a preconditioner: v, w and z read and written.
        "qmr_scale" | "qmr_pq" => 6.0 * n * s,
        "qmr_v" => 3.0 * n * s,
        // p and A p read; d, s, x and r read and written.
        "qmr_update" => 10.0 * n * s,
        // With a preconditioner (the bench always has one): phat, shat, t, r0, x
        // and r read, x and r written.
        "bicgstab_xr" => 8.0 * n * s,
        "spmv_csr" | "spmv_sell" | "spmv_dotc_csr" => spmv,
        // GMRES's Gram-Schmidt: counted by the vectors each pass touches.
        "gs_project_vectors" | "gs_subtract_vectors" => n * s,
        "gs_pass" => 0.0,
        _ => return None,
    })
}

/// Bytes per iteration of the run behind `stats`.
fn bytes_per_iteration(stats: &Stats, iterations: usize, a: &Csr<Complex64>) -> f64 {
    let (n, nnz, s) = (a.nrows() as f64, a.nnz() as f64, 16.0);
    let spmv = (s + 4.0) * nnz + 4.0 * (n + 1.0) + 2.0 * s * n;
    let total: f64 = stats
        .ops
        .iter()
        .map(|(op, &count)| {
            count as f64
                * op_bytes(op, n, s, spmv).unwrap_or_else(|| {
                    eprintln!("bench-krylov: no byte count for operation '{op}'");
                    0.0
                })
        })
        .sum();
    total / iterations.max(1) as f64
}

fn config(method: Method, layout: Layout) -> SolverConfig {
    SolverConfig {
        method,
        precond: Preconditioner::Jacobi,
        layout,
        options: KrylovOptions {
            rtol: RTOL,
            max_iter: Some(MAX_ITER),
            ..KrylovOptions::default()
        },
    }
}

/// The report of the median-time run of `runs` solves after one warm-up.
fn median_solve<B: gpuq::krylov::KrylovBackend>(
    backend: &B,
    a: &Csr<Complex64>,
    b: &[Complex64],
    config: &SolverConfig,
    runs: usize,
) -> Option<SolveReport> {
    // A breakdown or stagnation ends the run with its partial report
    // (`converged: false`), which the table marks like the iteration cap.
    let solve = || match solve_csr(backend, a, b, config) {
        Ok((_, r)) => Some(r),
        Err(e) => {
            eprintln!(
                "bench-krylov: {:?} on {}: {e}",
                config.method,
                backend.name()
            );
            e.report().cloned()
        }
    };
    solve()?;
    let mut reports: Vec<SolveReport> = (0..runs).filter_map(|_| solve()).collect();
    reports.sort_by(|x, y| x.time_s.total_cmp(&y.time_s));
    reports.get(reports.len() / 2).cloned()
}

/// Device-to-device copy bandwidth (bytes read plus written per second) on
/// 5e7 doubles, median of 7 samples.
fn copy_bandwidth(g: &CudaBackend) -> f64 {
    let n = 50_000_000;
    let x = g.upload(&vec![1.0f64; n]).unwrap();
    let mut y = g.zeros::<f64>(n).unwrap();
    g.copy(&x, &mut y).unwrap();
    g.synchronize().unwrap();
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..10 {
                g.copy(&x, &mut y).unwrap();
            }
            g.synchronize().unwrap();
            t.elapsed().as_secs_f64() / 10.0
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    16.0 * n as f64 / samples[3]
}

fn write_bin<T: Copy>(path: &Path, v: &[T]) {
    // Plain little-endian arrays: the element types used here (i64, i32,
    // Complex<f64>) have no padding.
    let bytes =
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) };
    std::fs::write(path, bytes).unwrap();
}

/// Writes the systems for the Python peers and runs them.
fn peers(systems: &[(String, Csr<Complex64>, Vec<Complex64>)]) -> Option<serde_json::Value> {
    let dir = std::env::temp_dir().join(format!("gpuq-krylov-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let mut list = Vec::new();
    for (name, a, b) in systems {
        let rp: Vec<i64> = a.row_ptr().iter().map(|&p| p as i64).collect();
        let ci: Vec<i32> = a.col_idx().iter().map(|&c| c as i32).collect();
        write_bin(&dir.join(format!("{name}_indptr.bin")), &rp);
        write_bin(&dir.join(format!("{name}_indices.bin")), &ci);
        write_bin(&dir.join(format!("{name}_data.bin")), a.values());
        write_bin(&dir.join(format!("{name}_rhs.bin")), b);
        list.push(
            serde_json::json!({"name": name, "n": a.nrows(), "nnz": a.nnz(), "prefix": name}),
        );
    }
    let spec = serde_json::json!({
        "systems": list, "rtol": RTOL, "max_iter": MAX_ITER,
        "restart": GMRES_RESTART, "repeats": 3,
    });
    std::fs::write(dir.join("systems.json"), spec.to_string()).ok()?;
    let out = Command::new("python3")
        .arg("benches/anchors/krylov_peers.py")
        .arg(&dir)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out
        .map_err(|e| eprintln!("bench-krylov: cannot run the peers: {e}"))
        .ok()?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        eprintln!("bench-krylov: the peer script failed ({})", out.status);
        return None;
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| eprintln!("bench-krylov: peer output: {e}"))
        .ok()
}

fn fmt_s(t: Option<f64>) -> String {
    t.map_or("-".into(), |t| format!("{t:.4}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // --quick: levels 0 and 1 without peers; --ours-only: no peers;
    // --level N (repeatable): only those levels.
    let quick = args.iter().any(|a| a == "--quick");
    let ours_only = quick || args.iter().any(|a| a == "--ours-only");
    let chosen: Vec<usize> = args
        .windows(2)
        .filter(|w| w[0] == "--level")
        .filter_map(|w| w[1].parse().ok())
        .collect();
    let levels: Vec<usize> = if !chosen.is_empty() {
        chosen
    } else if quick {
        vec![0, 1]
    } else {
        vec![0, 1, 2]
    };
    let gpu = CudaBackend::new(0)
        .map_err(|e| println!("bench-krylov: GPU columns skipped ({e})"))
        .ok();
    let cpu = CpuBackend::new();
    let bandwidth = gpu.as_ref().map(copy_bandwidth);
    if let (Some(g), Some(bw)) = (&gpu, bandwidth) {
        println!(
            "device: {}; copy bandwidth {:.0} GB/s; CPU threads: {}",
            g.info().name,
            bw / 1e9,
            cpu.threads()
        );
    }

    let hard = args.iter().any(|a| a == "--hard");
    let mut systems = Vec::new();
    for &level in &levels {
        let (cyl, wall) = if hard {
            (Cylinder::level(level).unwrap(), "hard")
        } else {
            (Cylinder::soft_level(level).unwrap(), "soft")
        };
        let t = Instant::now();
        let p = cyl.assemble::<Complex64>().unwrap();
        let name = format!("cylinder-{level}-{wall}");
        eprintln!(
            "{name}: n = {}, nnz = {}, h = {:.4}, assembled in {:.2} s",
            p.matrix.nrows(),
            p.matrix.nnz(),
            cyl.mesh_size(),
            t.elapsed().as_secs_f64()
        );
        systems.push((name, p.matrix, p.rhs));
    }
    let peer = if ours_only { None } else { peers(&systems) };

    println!(
        "\n| system | method | iterations (CPU/GPU) | CPU time (s) | GPU time (s) | GPU/CPU speed-up | GPU ms/iter | floor ms/iter | GPU / floor | rel. residual (GPU) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, a, b) in &systems {
        for (label, method) in METHODS {
            let rc = median_solve(&cpu, a, b, &config(method, Layout::Csr), 3);
            let rg = gpu.as_ref().and_then(|g| {
                median_solve(
                    g,
                    a,
                    b,
                    &config(method, Layout::Sell { c: 32, sigma: 1 }),
                    3,
                )
            });
            let floor = match (&rc, bandwidth) {
                (Some(rc), Some(bw)) => Some(bytes_per_iteration(&rc.stats, rc.iterations, a) / bw),
                _ => None,
            };
            let it = |r: &Option<SolveReport>| {
                r.as_ref().map_or("-".into(), |r| {
                    format!("{}{}", r.iterations, if r.converged { "" } else { "*" })
                })
            };
            let per_iter = rg.as_ref().map(|r| r.time_s / r.iterations.max(1) as f64);
            println!(
                "| {name} | {label} | {} / {} | {} | {} | {} | {} | {} | {} | {} |",
                it(&rc),
                it(&rg),
                fmt_s(rc.as_ref().map(|r| r.time_s)),
                fmt_s(rg.as_ref().map(|r| r.time_s)),
                match (&rc, &rg) {
                    (Some(c), Some(g)) => format!("{:.2}", c.time_s / g.time_s),
                    _ => "-".into(),
                },
                per_iter.map_or("-".into(), |t| format!("{:.4}", 1e3 * t)),
                floor.map_or("-".into(), |f| format!("{:.4}", 1e3 * f)),
                match (per_iter, floor) {
                    (Some(t), Some(f)) => format!("{:.2}", t / f),
                    _ => "-".into(),
                },
                rg.as_ref()
                    .or(rc.as_ref())
                    .map_or("-".into(), |r| format!("{:.1e}", r.relative_residual)),
            );
        }
    }
    println!("\n`*`: not converged (iteration cap, breakdown or stagnation; reason on stderr).");
    if let Some(peer) = peer {
        println!(
            "\n| system | peer | method | iterations | time (s) | converged | true rel. residual |"
        );
        println!("|---|---|---|---|---|---|---|");
        for run in peer["runs"].as_array().into_iter().flatten() {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                run["system"].as_str().unwrap_or("?"),
                run["library"].as_str().unwrap_or("?"),
                run["method"].as_str().unwrap_or("?"),
                run["iterations"],
                fmt_s(run["time_s"].as_f64()),
                run["converged"],
                run["true_relative_residual"]
                    .as_f64()
                    .map_or("-".into(), |r| format!("{r:.1e}")),
            );
        }
        for note in peer["notes"].as_array().into_iter().flatten() {
            println!("note: {}", note.as_str().unwrap_or(""));
        }
        println!(
            "peers: scipy {} cupy {}",
            peer["scipy_version"], peer["cupy_version"]
        );
    }
}
