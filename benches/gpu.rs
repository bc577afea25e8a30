//! GPU benchmarks, run on the device machine through `cargo xtask gpu-pack`
//! (`bash gpu-pack/run.sh bench`), with the CuPy anchor
//! (`benches/anchors/cupy_gpu.py`) run by this binary in the same session so every
//! ratio compares measurements taken side by side.
//!
//! What it measures (all on one device, f64 and Complex<f64>):
//! * BLAS-1 for n = 10^5 .. 10^8: time and GB/s of each kernel next to the driver's
//!   device-to-device copy (`cuMemcpyDtoD`) at the same n;
//! * SpMV on `laplace3d:200` and on complex shifted 3D Laplacians of seed 003's
//!   sizes (`helmholtz3d:N`, N = 14, 27, 52: about 3e3, 2e4 and 1.4e5 unknowns), in
//!   CSR and SELL-32-1, as GB/s of the minimal bytes and as a ratio to cuSPARSE
//!   (CuPy's `csr_matrix @ x`) on the same matrix;
//! * one CG iteration on `laplace3d:200` vs `cupyx.scipy.sparse.linalg.cg`;
//! * SpMV of a block system, gpuq's 3D elasticity (`elasticity3d:M`, 3 unknowns
//!   per node) in CSR, SELL-32-1 and BSR with 3 x 3 blocks, against cuSPARSE's
//!   CSR SpMV (CuPy) and `cusparseDbsrmv` on the same matrix
//!   (`benches/anchors/cusparse_bsr.py`, given the matrix through binary files),
//!   each as GB/s of its own format's minimal bytes next to the device-to-device
//!   copy. `--block-only` runs this table alone.
//!
//! Timing: after a warm-up call, each sample runs the operation `reps` times
//! back to back and synchronises once (`reps` chosen so a sample takes about 20 ms);
//! the figure is the median of 7 samples. Reductions (dot, nrm2) are timed twice:
//! with the result left on the device (the kernels' throughput), and returned to
//! the host every call as a solver's `dotc` does (throughput plus one round trip).
//!
//! Minimal bytes: BLAS-1 counts each vector read or written once; SpMV counts
//! `(s + 4) nnz + 4 (n + 1) + 2 s n` for scalars of `s` bytes (values, 32-bit
//! column indices and row pointers, x read once, y written once), whatever the
//! format; a CG iteration counts one SpMV plus the 10 n vector element moves of
//! plain CG (dot p^H q: 2, residual update with its norm: 3, x and p update: 5) minus
//! the 2 n the fused SpMV dot saves; formula in `cg_bytes`.

use gpuq::core::{Backend, Complex64, Scalar};
use gpuq::cuda::CudaBackend;
use gpuq::krylov::{cg, KrylovOptions};
use gpuq::sparse::{generators, Coo, Csr, Layout, MatrixOperator, SparseBackend};
use std::process::Command;
use std::time::Instant;

/// Median seconds per call of `f` (see the module docs for the method).
fn time(g: &CudaBackend, mut f: impl FnMut()) -> f64 {
    f();
    g.synchronize().unwrap();
    let t = Instant::now();
    f();
    g.synchronize().unwrap();
    let once = t.elapsed().as_secs_f64();
    let reps = ((0.02 / once.max(1e-7)) as usize).clamp(1, 2000);
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            g.synchronize().unwrap();
            t.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[3]
}

/// Reproducible pseudo-random values in [-1, 1) (fast enough for 10^8 entries).
fn random<T: Scalar>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    };
    (0..n)
        .map(|_| {
            let re = next();
            T::from_parts(
                <T::Real as gpuq::core::RealScalar>::of_f64(re),
                <T::Real as gpuq::core::RealScalar>::of_f64(if T::IS_COMPLEX {
                    next()
                } else {
                    0.0
                }),
            )
        })
        .collect()
}

/// One result row.
struct Row {
    table: &'static str,
    what: String,
    seconds: f64,
    bytes: f64,
    reference: Option<(f64, &'static str)>,
}

fn blas1<T: Scalar>(g: &CudaBackend, n: usize, rows: &mut Vec<Row>) {
    let s = std::mem::size_of::<T>() as f64;
    let x = g.upload(&random::<T>(n, 1)).unwrap();
    let mut y = g.upload(&random::<T>(n, 2)).unwrap();
    let mut z = g.zeros::<T>(n).unwrap();
    let (a, b) = (T::from_f64(1e-9), T::from_f64(0.999_999_9));
    let kind = T::KIND.name();
    let dtod = time(g, || g.memcpy_dtod(&x, &mut z).unwrap());
    let copy_gbs = 2.0 * s * n as f64 / dtod / 1e9;
    let mut push = |op: &str, moves: f64, t: f64| {
        rows.push(Row {
            table: "blas1",
            what: format!("{op} {kind} n=1e{}", (n as f64).log10().round()),
            seconds: t,
            bytes: moves * s * n as f64,
            reference: Some((copy_gbs, "of D2D copy")),
        })
    };
    push("memcpy_dtod (reference)", 2.0, dtod);
    push("fill", 1.0, time(g, || g.fill(&mut z, a).unwrap()));
    push("copy", 2.0, time(g, || g.copy(&x, &mut z).unwrap()));
    push("scal", 2.0, time(g, || g.scal(b, &mut y).unwrap()));
    push("axpy", 3.0, time(g, || g.axpy(a, &x, &mut y).unwrap()));
    push("axpby", 3.0, time(g, || g.axpby(a, &x, b, &mut y).unwrap()));
    push(
        "mul",
        3.0,
        time(g, || g.mul_elementwise(&x, &y, &mut z).unwrap()),
    );
    let mut d = g.zeros::<T>(1).unwrap();
    push(
        "dotc (result on device)",
        2.0,
        time(g, || g.dotc_on_device(&x, &y, &mut d).unwrap()),
    );
    let mut ss = g.zeros::<T::Real>(1).unwrap();
    push(
        "nrm2 (result on device)",
        1.0,
        time(g, || g.squared_norm_on_device(&x, &mut ss).unwrap()),
    );
    push(
        "dotc (to host, waits)",
        2.0,
        time(g, || {
            g.dotc(&x, &y).unwrap();
        }),
    );
    push(
        "nrm2 (to host, waits)",
        1.0,
        time(g, || {
            g.nrm2(&x).unwrap();
        }),
    );
}

/// A complex shifted 3D Laplacian: laplace3d:m - (0.5 + 0.05 i) I, the
/// Helmholtz-like stand-in for seed 003's matrices (same as the CuPy anchor's).
fn helmholtz3d(m: usize) -> Csr<Complex64> {
    let l: Csr<f64> = generators::laplace3d(m);
    let n = l.nrows();
    let mut coo = Coo::with_capacity(n, n, l.nnz());
    for (i, j, v) in l.to_coo().triplets() {
        let shift = if i == j {
            Complex64::new(0.5, 0.05)
        } else {
            Complex64::new(0.0, 0.0)
        };
        coo.push(i, j, Complex64::new(v, 0.0) - shift).unwrap();
    }
    Csr::from_coo(&coo).unwrap()
}

fn spmv<T: Scalar>(
    g: &CudaBackend,
    name: &str,
    a: &Csr<T>,
    cusparse: Option<f64>,
    rows: &mut Vec<Row>,
) {
    let s = std::mem::size_of::<T>() as f64;
    let (n, nnz) = (a.nrows() as f64, a.nnz() as f64);
    let bytes = (s + 4.0) * nnz + 4.0 * (n + 1.0) + 2.0 * s * n;
    let x = g.upload(&random::<T>(a.ncols(), 3)).unwrap();
    let mut y = g.zeros::<T>(a.nrows()).unwrap();
    for (label, layout) in [
        ("CSR", Layout::Csr),
        ("SELL-32-1", Layout::Sell { c: 32, sigma: 1 }),
    ] {
        let m = g.upload_matrix(a, layout).unwrap();
        let t = time(g, || {
            g.spmv(T::one(), &m, &x, T::zero(), &mut y).unwrap();
        });
        rows.push(Row {
            table: "spmv",
            what: format!("{name} {} {label}", T::KIND.name()),
            seconds: t,
            bytes,
            reference: cusparse.map(|c| (c / t, "x faster than cuSPARSE")),
        });
    }
    if let Some(c) = cusparse {
        rows.push(Row {
            table: "spmv",
            what: format!("{name} {} cuSPARSE (CuPy)", T::KIND.name()),
            seconds: c,
            bytes,
            reference: None,
        });
    }
}

/// The cuSPARSE anchor of the block table: the seconds per call of CuPy's CSR
/// SpMV and of `cusparseDbsrmv` with `b x b` blocks on `a` (handed over as raw
/// arrays under `/tmp/gpuq_block.*`), and the largest difference of their
/// products from each other relative to the largest entry.
fn cusparse_block(a: &Csr<f64>, b: usize) -> Option<serde_json::Value> {
    let base = "/tmp/gpuq_block";
    let bytes = |v: &[u8], ext: &str| std::fs::write(format!("{base}.{ext}"), v);
    let ptr: Vec<u8> = a
        .row_ptr()
        .iter()
        .flat_map(|&p| (p as i64).to_le_bytes())
        .collect();
    let col: Vec<u8> = a.col_idx().iter().flat_map(|&c| c.to_le_bytes()).collect();
    let val: Vec<u8> = a.values().iter().flat_map(|&v| v.to_le_bytes()).collect();
    for (v, ext) in [(&ptr, "ptr"), (&col, "col"), (&val, "val")] {
        if let Err(e) = bytes(v, ext) {
            eprintln!("bench-gpu: cannot write the block matrix: {e}");
            return None;
        }
    }
    let out = Command::new("python3")
        .args(["benches/anchors/cusparse_bsr.py", base, &b.to_string()])
        .output()
        .map_err(|e| eprintln!("bench-gpu: cannot run the cuSPARSE BSR anchor: {e}"))
        .ok()?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .map_err(|e| eprintln!("bench-gpu: cuSPARSE BSR anchor output: {e}"))
        .ok()
}

/// The block table (see the module docs): `elasticity3d:m` in CSR, SELL-32-1
/// and BSR-3 on the device, cuSPARSE's CSR and BSR on the same matrix, and
/// the device-to-device copy of the BSR values' size for the floor.
fn spmv_block(g: &CudaBackend, m: usize, rows: &mut Vec<Row>) {
    let a: Csr<f64> = gpuq::sparse::elasticity3d::Elasticity3d::new(m)
        .unwrap()
        .stiffness();
    let b = 3;
    let bsr = gpuq::sparse::Bsr::from_csr(&a, b).unwrap();
    let (n, nnz, nb) = (a.nrows() as f64, a.nnz() as f64, bsr.nblocks() as f64);
    let csr_bytes = 12.0 * nnz + 4.0 * (n + 1.0) + 16.0 * n;
    let bsr_bytes = (8.0 * (b * b) as f64 + 4.0) * nb + 8.0 * (n / b as f64 + 1.0) + 16.0 * n;
    let name = format!("elasticity3d:{m} (n {n:.0}, nnz {nnz:.0}, {nb:.0} 3x3 blocks)");
    let peers = cusparse_block(&a, b);
    let peer = |k: &str| peers.as_ref().and_then(|p| p[k].as_f64());
    let bsrmv = peer("bsrmv_s");
    let x = g.upload(&random::<f64>(a.ncols(), 3)).unwrap();
    let mut y = g.zeros::<f64>(a.nrows()).unwrap();
    let want = a.mul_vec(&g.download(&x).unwrap()).unwrap();
    for (label, layout, bytes) in [
        ("CSR", Layout::Csr, csr_bytes),
        ("SELL-32-1", Layout::Sell { c: 32, sigma: 1 }, csr_bytes),
        ("BSR-3", Layout::Bsr { b }, bsr_bytes),
    ] {
        let mt = g.upload_matrix(&a, layout).unwrap();
        let t = time(g, || {
            g.spmv(1.0, &mt, &x, 0.0, &mut y).unwrap();
        });
        let got = g.download(&y).unwrap();
        let scale = want.iter().fold(0.0f64, |s, v| s.max(v.abs()));
        let err = got
            .iter()
            .zip(&want)
            .fold(0.0f64, |e, (p, q)| e.max((p - q).abs()))
            / scale;
        assert!(err < 1e-12, "{label}: relative difference {err:e}");
        rows.push(Row {
            table: "block",
            what: format!("{name} gpuq {label}"),
            seconds: t,
            bytes,
            reference: bsrmv.map(|c| (c / t, "x cuSPARSE bsrmv's speed")),
        });
    }
    for (key, label, bytes) in [
        ("csr_s", "cuSPARSE CSR (CuPy)", csr_bytes),
        ("bsrmv_s", "cuSPARSE bsrmv", bsr_bytes),
    ] {
        if let Some(t) = peer(key) {
            rows.push(Row {
                table: "block",
                what: format!("{name} {label}"),
                seconds: t,
                bytes,
                reference: None,
            });
        }
    }
    if let Some(d) = peer("max_rel_diff") {
        println!("cuSPARSE bsrmv against its CSR SpMV: max relative difference {d:.1e}");
    }
    let values = g.upload(&vec![0.0f64; bsr.values().len()]).unwrap();
    let mut copy = g.zeros::<f64>(bsr.values().len()).unwrap();
    let t = time(g, || g.memcpy_dtod(&values, &mut copy).unwrap());
    rows.push(Row {
        table: "block",
        what: format!(
            "memcpy_dtod of the BSR values ({:.0} MB)",
            8.0 * bsr.values().len() as f64 / 1e6
        ),
        seconds: t,
        bytes: 16.0 * bsr.values().len() as f64,
        reference: None,
    });
}

/// Bytes of one plain CG iteration with gpuq's fused kernels (see module docs).
fn cg_bytes(n: f64, nnz: f64) -> f64 {
    let spmv = 12.0 * nnz + 4.0 * (n + 1.0) + 16.0 * n;
    spmv + 8.0 * n * (3.0 + 5.0)
}

/// Seconds per iteration of plain CG on the device: the difference of two capped
/// runs, so setup and the final true-residual check cancel.
fn cg_iteration(g: &CudaBackend, a: &Csr<f64>, layout: Layout) -> f64 {
    let op = MatrixOperator::new(g, a, layout).unwrap();
    let b = g.upload(&random::<f64>(a.nrows(), 4)).unwrap();
    let run = |iters: usize| {
        let mut x = g.zeros::<f64>(a.nrows()).unwrap();
        let opts = KrylovOptions {
            rtol: 1e-30,
            max_iter: Some(iters),
            ..KrylovOptions::default()
        };
        g.synchronize().unwrap();
        let r = cg(g, &op, None, &b, &mut x, &opts).unwrap();
        assert_eq!(r.iterations, iters);
        r.time_s
    };
    run(10);
    let (short, long) = (run(20), run(220));
    (long - short) / 200.0
}

fn cupy_anchor() -> Option<serde_json::Value> {
    let out = Command::new("python3")
        .arg("benches/anchors/cupy_gpu.py")
        .output()
        .map_err(|e| eprintln!("bench-gpu: cannot run the CuPy anchor: {e}"))
        .ok()?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        eprintln!("bench-gpu: the CuPy anchor failed ({})", out.status);
        return None;
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| eprintln!("bench-gpu: CuPy anchor output: {e}"))
        .ok()
}

fn main() {
    let g = match CudaBackend::new(0) {
        Ok(g) => g,
        Err(e) => {
            println!("bench-gpu: skipped ({e})");
            return;
        }
    };
    let info = g.info().clone();
    println!(
        "device: {} (sm_{}{}, {} SMs, {:.1} GiB)",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        info.total_memory as f64 / (1u64 << 30) as f64
    );
    let quick = std::env::args().any(|a| a == "--quick");
    let mut rows = Vec::new();
    spmv_block(&g, if quick { 32 } else { 64 }, &mut rows);
    if std::env::args().any(|a| a == "--block-only") {
        print_tables(&rows);
        return;
    }
    let cupy = if quick { None } else { cupy_anchor() };
    let peer = |key: &str| -> Option<f64> { cupy.as_ref()?[key].as_f64() };

    let sizes: &[usize] = if quick {
        &[100_000, 10_000_000]
    } else {
        &[100_000, 1_000_000, 10_000_000, 100_000_000]
    };
    for &n in sizes {
        blas1::<f64>(&g, n, &mut rows);
        blas1::<Complex64>(&g, n, &mut rows);
    }

    let m = if quick { 100 } else { 200 };
    let lap: Csr<f64> = generators::laplace3d(m);
    spmv(
        &g,
        &format!("laplace3d:{m}"),
        &lap,
        peer("spmv_laplace3d_f64_s"),
        &mut rows,
    );
    let lapc: Csr<Complex64> = generators::laplace3d(m);
    spmv(
        &g,
        &format!("laplace3d:{m}"),
        &lapc,
        peer("spmv_laplace3d_c64_s"),
        &mut rows,
    );
    for hm in [14, 27, 52] {
        let h = helmholtz3d(hm);
        spmv(
            &g,
            &format!("helmholtz3d:{hm}"),
            &h,
            peer(&format!("spmv_helmholtz3d_{hm}_s")),
            &mut rows,
        );
    }

    let (n, nnz) = (lap.nrows() as f64, lap.nnz() as f64);
    for (label, layout) in [
        ("CSR", Layout::Csr),
        ("SELL-32-1", Layout::Sell { c: 32, sigma: 1 }),
    ] {
        let t = cg_iteration(&g, &lap, layout);
        rows.push(Row {
            table: "cg",
            what: format!("CG iteration laplace3d:{m} f64 {label}"),
            seconds: t,
            bytes: cg_bytes(n, nnz),
            reference: peer("cg_iteration_s").map(|c| (c / t, "x faster than CuPy cg")),
        });
    }
    if let Some(c) = peer("cg_iteration_s") {
        rows.push(Row {
            table: "cg",
            what: format!("CG iteration laplace3d:{m} f64 CuPy cg"),
            seconds: c,
            bytes: cg_bytes(n, nnz),
            reference: None,
        });
    }
    if let Some(c) = peer("copy_gbs") {
        println!("CuPy device-to-device copy: {c:.0} GB/s");
    }

    print_tables(&rows);
}

/// Prints one Markdown table per kind of row.
fn print_tables(rows: &[Row]) {
    for table in ["blas1", "spmv", "cg", "block"] {
        if !rows.iter().any(|r| r.table == table) {
            continue;
        }
        println!("\n| {table} | time | GB/s (minimal bytes) | ratio |");
        println!("| --- | ---: | ---: | ---: |");
        for r in rows.iter().filter(|r| r.table == table) {
            let gbs = r.bytes / r.seconds / 1e9;
            let ratio = match r.reference {
                Some((c, "of D2D copy")) => format!("{:.0}% of D2D copy", 100.0 * gbs / c),
                Some((x, label)) => format!("{x:.2}{label}"),
                None => String::new(),
            };
            println!(
                "| {} | {:.4} ms | {:.0} | {} |",
                r.what,
                1e3 * r.seconds,
                gbs,
                ratio
            );
        }
    }
}
