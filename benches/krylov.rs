//! Krylov benchmarks: seed 003's Tables 10-12 redone on gpuq's generated
//! finite-element cylinders (`helmholtz-cylinder:0..2:soft`, the soft-walled
//! ducts closest to the seed's Cylinder3D-0/1/2; complex symmetric indefinite),
//! run through `cargo xtask gpu-pack` on the device machine (`bash
//! gpu-pack/run.sh bench`), or on any machine with `cargo bench --bench krylov`
//! (without a GPU the GPU columns stay empty). Flags: `--quick` (levels 0 and 1,
//! no peers), `--ours-only` (no peers), `--level N` (repeatable), `--hard` (the
//! hard-walled ducts `helmholtz-cylinder:0..2` instead), `--trace` (below).
//!
//! For each level and each method (BiCGSTAB, BiCGSTAB(8), TFQMR, QMR, GMRES(150)),
//! Jacobi-preconditioned, x0 = 0, stopping at ||b - A x|| <= 1e-9 ||b|| with a cap
//! of 1000 iterations (the seed's settings), it reports the iterations and the
//! time to solution on the CPU backend (CSR, all cores) and on the CUDA backend
//! (SELL-32-1): the solve only, not the upload, median of 3 runs after a warm-up.
//! `--trace` adds where each GPU solve's time went: its first and second
//! iterations, the steady iteration, the final residual, and the fixed cost.
//! `--kernel-costs` times single kernels inside CUDA graphs at the size of the
//! last level chosen instead (and runs no solve).
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

use gpuq::core::{Backend, Complex64, FusedDot, SolveReport, Stats};
use gpuq::cpu::CpuBackend;
use gpuq::cuda::CudaBackend;
use gpuq::krylov::{solve_csr_monitored, KrylovOptions, Method, Preconditioner, SolverConfig};
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
        // With a diagonal preconditioner folded in: d read, M p or M s written.
        "bicgstab_p_scaled" => 6.0 * n * s,
        "bicgstab_s_scaled" => 5.0 * n * s,
        "bicgstab_tt" => 2.0 * n * s,
        "axpby_slots" => 3.0 * n * s,
        "tfqmr_odd" | "tfqmr_even" | "tfqmr_x" => 3.0 * n * s,
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
        // w read for the fused dot product.
        "spmv_dot_csr" => spmv + n * s,
        // GMRES's Gram-Schmidt: counted by the vectors each step touches.
        "gs_dots_vectors" | "gs_update_vectors" | "gs_combine_vectors" => n * s,
        "gs_dots" | "gs_update" | "gs_combine" => 0.0,
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

/// Where a solve's time went, from the instants its monitor saw (`--trace`):
/// seconds from the start of the solve to the end of the first iteration, the
/// second iteration (where the methods with scalars on the device record their
/// iteration), the median of the later ones, and from the last iteration to the
/// end (the true residual).
struct Trace {
    first: f64,
    second: f64,
    steady: f64,
    tail: f64,
}

impl Trace {
    /// The trace of a solve that started at `start` (after its set-up) and took
    /// `time_s`, with the end of each iteration at `ends`.
    fn new(start: Instant, time_s: f64, ends: &[Instant]) -> Option<Trace> {
        let since = |t: &Instant| t.duration_since(start).as_secs_f64();
        let mut gaps: Vec<f64> = ends
            .windows(2)
            .skip(1)
            .map(|w| w[1].duration_since(w[0]).as_secs_f64())
            .collect();
        gaps.sort_by(f64::total_cmp);
        Some(Trace {
            first: since(ends.first()?),
            second: ends
                .get(1)
                .map_or(0.0, |t| t.duration_since(ends[0]).as_secs_f64()),
            steady: gaps.get(gaps.len() / 2).copied().unwrap_or(0.0),
            tail: time_s - since(ends.last()?),
        })
    }
}

/// The report (and its trace) of the median-time run of `runs` solves after one
/// warm-up.
fn median_solve<B: gpuq::krylov::KrylovBackend>(
    backend: &B,
    a: &Csr<Complex64>,
    b: &[Complex64],
    config: &SolverConfig,
    runs: usize,
) -> Option<(SolveReport, Option<Trace>)> {
    // A breakdown or stagnation ends the run with its partial report
    // (`converged: false`), which the table marks like the iteration cap.
    let solve = || {
        let mut ends = Vec::new();
        let called = Instant::now();
        let result =
            solve_csr_monitored(backend, a, b, config, &mut |_, _| ends.push(Instant::now()));
        let report = match result {
            Ok((_, r)) => r,
            Err(e) => {
                eprintln!(
                    "bench-krylov: {:?} on {}: {e}",
                    config.method,
                    backend.name()
                );
                e.report().cloned()?
            }
        };
        let start = called + std::time::Duration::from_secs_f64(report.setup_time_s);
        let trace = Trace::new(start, report.time_s, &ends);
        Some((report, trace))
    };
    solve()?;
    let mut runs: Vec<_> = (0..runs).filter_map(|_| solve()).collect();
    runs.sort_by(|x, y| x.0.time_s.total_cmp(&y.0.time_s));
    let middle = runs.len() / 2;
    (middle < runs.len()).then(|| runs.swap_remove(middle))
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

/// Seconds per call of `body` (which enqueues one kernel) when 20 calls are
/// recorded as one CUDA graph and replayed: the in-graph cost of a kernel,
/// launch gaps included. Median of 7 samples of 10 replays.
fn in_graph(g: &CudaBackend, body: &mut dyn FnMut()) -> f64 {
    const CALLS: usize = 20;
    let mut recording = None;
    let mut all = || {
        for _ in 0..CALLS {
            body();
        }
        Ok(())
    };
    // SAFETY: the body enqueues the same kernels on the same buffers (which
    // outlive `recording`) every time, with no download and no wait.
    let mut replay = || unsafe { g.replay(&mut recording, &mut all) }.unwrap();
    replay();
    g.synchronize().unwrap();
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..10 {
                replay();
            }
            g.synchronize().unwrap();
            t.elapsed().as_secs_f64() / (10 * CALLS) as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[3]
}

/// `--kernel-costs`: what single kernels cost inside a CUDA graph at the size
/// of cylinder level 2 (n = 141 204 complex values, 2.26 MB a vector) and at
/// eight times that, against the bytes they move: the cost model behind the
/// Krylov iterations' distance from their floor.
fn kernel_costs(g: &CudaBackend, a: &Csr<Complex64>, bw: f64) {
    use gpuq::sparse::SparseBackend;
    let one = Complex64::new(1.0, 0.0);
    let half = Complex64::new(0.5, 0.25);
    println!("\n| kernel | n | us per kernel in a graph | bytes moved (MB) | GB/s | us at the copy rate |");
    println!("|---|---|---|---|---|---|");
    let row = |name: &str, n: usize, t: f64, bytes: f64| {
        println!(
            "| {name} | {n} | {:.2} | {:.2} | {:.0} | {:.2} |",
            1e6 * t,
            bytes / 1e6,
            bytes / t / 1e9,
            1e6 * bytes / bw
        );
    };
    let mut tiny = g.zeros::<Complex64>(1).unwrap();
    let t = in_graph(g, &mut || g.fill(&mut tiny, one).unwrap());
    row("fill, one element (one block)", 1, t, 16.0);
    for n in [a.nrows(), 8 * a.nrows()] {
        let s = 16.0 * n as f64;
        let x = g.upload(&vec![half; n]).unwrap();
        let mut y = g.upload(&vec![one; n]).unwrap();
        let mut z = g.zeros::<Complex64>(n).unwrap();
        let mut out = g.zeros::<Complex64>(1).unwrap();
        let mut out_re = g.zeros::<f64>(1).unwrap();
        let t = in_graph(g, &mut || g.copy(&x, &mut y).unwrap());
        row("copy", n, t, 2.0 * s);
        let t = in_graph(g, &mut || g.mul_elementwise(&x, &y, &mut z).unwrap());
        row("mul (Jacobi)", n, t, 3.0 * s);
        let t = in_graph(g, &mut || g.axpby(half, &x, one, &mut y).unwrap());
        row("axpby", n, t, 3.0 * s);
        let t = in_graph(g, &mut || g.dotc_on_device(&x, &y, &mut out).unwrap());
        row("dotc (one launch)", n, t, 2.0 * s);
        let t = in_graph(g, &mut || {
            g.squared_norm_on_device(&x, &mut out_re).unwrap()
        });
        row("squared norm (one launch)", n, t, s);
    }
    let n = a.nrows();
    let m = g
        .upload_matrix(a, Layout::Sell { c: 32, sigma: 1 })
        .unwrap();
    let x = g.upload(&vec![half; n]).unwrap();
    let mut y = g.zeros::<Complex64>(n).unwrap();
    let t = in_graph(g, &mut || {
        g.spmv(one, &m, &x, Complex64::default(), &mut y).unwrap()
    });
    let bytes = 20.0 * a.nnz() as f64 + 4.0 * (n + 1) as f64 + 32.0 * n as f64;
    row("SpMV SELL-32-1, cylinder-2", n, t, bytes);
    let w = g.upload(&vec![one; n]).unwrap();
    let mut sc = g.zeros::<Complex64>(6).unwrap();
    let t = in_graph(g, &mut || {
        let dot = FusedDot {
            w: &w,
            sc: &mut sc,
            slot: 0,
        };
        assert!(g.spmv_dot(&m, &x, &mut y, dot).unwrap());
    });
    row("SpMV + w^H y (fused)", n, t, bytes + 16.0 * n as f64);
    let t = in_graph(g, &mut || g.bicgstab_tt(&x, &w, &mut sc).unwrap());
    row("bicgstab_tt (t^H s, t^H t, s^H s)", n, t, 32.0 * n as f64);
    setup_costs(g, n);
}

/// What a solve's fixed steps cost (in `--kernel-costs`): the median of 9
/// timings of each, waited for, drops included.
fn setup_costs(g: &CudaBackend, n: usize) {
    let median = |f: &mut dyn FnMut()| {
        f();
        let mut t: Vec<f64> = (0..9)
            .map(|_| {
                let s = Instant::now();
                f();
                g.synchronize().unwrap();
                s.elapsed().as_secs_f64()
            })
            .collect();
        t.sort_by(f64::total_cmp);
        t[4]
    };
    let half = Complex64::new(0.5, 0.25);
    let x = g.upload(&vec![half; n]).unwrap();
    let mut y = g.zeros::<Complex64>(n).unwrap();
    let mut eight = || {
        for _ in 0..8 {
            g.axpby(half, &x, half, &mut y)?;
        }
        Ok(())
    };
    println!("\n| fixed step of a solve | us |");
    println!("|---|---|");
    let ring = median(&mut || drop(g.scalar_ring::<Complex64>(6).unwrap()));
    println!(
        "| scalar ring (page-locked 2 x 96 B, two events), made and dropped | {:.1} |",
        1e6 * ring
    );
    let zeros = median(&mut || drop(g.zeros::<Complex64>(n).unwrap()));
    println!(
        "| zeros, {n} complex values (memory pool) | {:.1} |",
        1e6 * zeros
    );
    // SAFETY (both): the body enqueues the same kernels on the same buffers,
    // which outlive the recording, with no download and no wait.
    let fresh = median(&mut || {
        let mut rec = None;
        unsafe { g.replay(&mut rec, &mut eight) }.unwrap();
    });
    println!(
        "| 8 axpby recorded, instantiated and launched | {:.1} |",
        1e6 * fresh
    );
    let mut rec = None;
    unsafe { g.replay(&mut rec, &mut eight) }.unwrap();
    let again = median(&mut || unsafe { g.replay(&mut rec, &mut eight) }.unwrap());
    println!("| the same 8 replayed | {:.1} |", 1e6 * again);
    // An iteration's snapshot (96 bytes into mapped page-locked memory by a
    // one-block kernel, and an event): what it adds to a stream of 100 replays
    // of a one-kernel graph, as a launch of its own after each replay and as a
    // node of the graph.
    let sc = g.zeros::<Complex64>(6).unwrap();
    let mut ring = g.scalar_ring::<Complex64>(6).unwrap();
    let slot = g.ring_slot(&ring, 0);
    let mut one = || g.axpby(half, &x, half, &mut y);
    let mut y2 = g.zeros::<Complex64>(n).unwrap();
    let mut with_copy = || {
        g.axpby(half, &x, half, &mut y2)?;
        g.copy_to_slot(&sc, &slot)
    };
    let (mut rec, mut rec_copy) = (None, None);
    for (label, snap) in [
        ("a one-axpby graph replayed", 0),
        ("the same, then the copy and the event", 1),
        ("a graph of the axpby and the copy, then the event", 2),
    ] {
        let t = median(&mut || {
            for _ in 0..100 {
                // SAFETY: as above; the slot outlives the recordings.
                if snap == 2 {
                    unsafe { g.replay(&mut rec_copy, &mut with_copy) }.unwrap();
                } else {
                    unsafe { g.replay(&mut rec, &mut one) }.unwrap();
                }
                if snap == 1 {
                    g.copy_to_slot(&sc, &slot).unwrap();
                }
                if snap > 0 {
                    g.mark_slot(&mut ring, 0).unwrap();
                }
            }
        }) / 100.0;
        println!("| {label} (per replay) | {:.2} |", 1e6 * t);
    }
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
    let trace = args.iter().any(|a| a == "--trace");
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
    if args.iter().any(|a| a == "--kernel-costs") {
        if let (Some(g), Some(bw), Some((_, a, _))) = (&gpu, bandwidth, systems.last()) {
            kernel_costs(g, a, bw);
        }
        return;
    }
    let peer = if ours_only { None } else { peers(&systems) };

    println!(
        "\n| system | method | iterations (CPU/GPU) | CPU time (s) | GPU time (s) | GPU/CPU speed-up | GPU ms/iter | floor ms/iter | GPU / floor | rel. residual (GPU) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut traces = Vec::new();
    for (name, a, b) in &systems {
        for (label, method) in METHODS {
            let rc = median_solve(&cpu, a, b, &config(method, Layout::Csr), 3).map(|r| r.0);
            let rg = gpu.as_ref().and_then(|g| {
                median_solve(
                    g,
                    a,
                    b,
                    &config(method, Layout::Sell { c: 32, sigma: 1 }),
                    3,
                )
            });
            let rg = rg.map(|(report, t)| {
                if let Some(t) = t {
                    traces.push((name.clone(), label, report.iterations, report.time_s, t));
                }
                report
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
    if trace {
        println!("\nWhere the GPU solves' time went (ms; `steady` is the median iteration from the third on, `fixed` the time beyond iterations x steady):\n");
        println!(
            "| system | method | iterations | total | first | second | steady | tail | fixed |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for (name, label, its, total, t) in &traces {
            println!(
                "| {name} | {label} | {its} | {:.3} | {:.3} | {:.3} | {:.4} | {:.3} | {:.3} |",
                1e3 * total,
                1e3 * t.first,
                1e3 * t.second,
                1e3 * t.steady,
                1e3 * t.tail,
                1e3 * (total - *its as f64 * t.steady)
            );
        }
    }
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
