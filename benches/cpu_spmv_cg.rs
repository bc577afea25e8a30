//! CPU benchmarks of the foundation: copy bandwidth, SpMV (CSR and SELL) and one CG
//! iteration on `laplace3d:M` (M = 100 by default, 10^6 unknowns; set GPUQ_BENCH_M).
//!
//! Each group reports decimal GB/s of its minimal byte count, so SpMV and CG can be
//! read against the copy bandwidth measured by the same run:
//!
//! * copy: 2 * 8 n bytes (read x, write y), n = 2^24, both through the backend's
//!   `copy` and as one large memcpy per thread (the machine's copy bandwidth);
//! * SpMV (f64, u32 indices): 12 nnz + 8 (n + 1) + 8 n + 8 n bytes (values and
//!   column indices, row pointers, x read once, y written);
//! * CG iteration: SpMV with p^H A p fused (as SpMV), the residual update with its
//!   norm (read q and r, write r: 24 n), the x and p update (read x, p, r, write x, p:
//!   40 n); 12 nnz + 8 (n + 1) + 80 n bytes in all.
//!
//! Run with `cargo xtask bench`, which also runs the SciPy anchor in the same session.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpuq::core::{Backend, LinearOperator};
use gpuq::cpu::CpuBackend;
use gpuq::krylov::CgKernels;
use gpuq::sparse::{generators, Layout, MatrixOperator, SparseBackend};
use std::hint::black_box;
use std::time::Duration;

fn grid_size() -> usize {
    std::env::var("GPUQ_BENCH_M")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

fn copy_bandwidth(c: &mut Criterion) {
    let be = CpuBackend::new();
    let n = 1 << 24;
    let x = be.upload(&vec![1.0f64; n]).unwrap();
    let mut y = be.zeros::<f64>(n).unwrap();
    let mut g = c.benchmark_group("copy");
    g.throughput(Throughput::BytesDecimal(16 * n as u64));
    g.bench_function("backend_f64_2^24", |b| {
        b.iter(|| be.copy(&x, &mut y).unwrap())
    });
    // The machine's copy bandwidth: one large memcpy per thread (glibc switches to
    // non-temporal stores for such sizes, which the 64 KiB chunks above do not).
    let src = vec![1.0f64; n];
    let mut dst = vec![0.0f64; n];
    let threads = rayon::current_num_threads();
    g.bench_function("memcpy_f64_2^24", |b| {
        b.iter(|| {
            let chunk = n.div_ceil(threads);
            rayon::scope(|s| {
                for (d, s_) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                    s.spawn(move |_| d.copy_from_slice(s_));
                }
            })
        })
    });
    g.finish();
}

fn spmv(c: &mut Criterion) {
    let be = CpuBackend::new();
    let m = grid_size();
    let a = generators::laplace3d::<f64>(m);
    let n = a.nrows();
    let bytes = 12 * a.nnz() + 8 * (n + 1) + 16 * n;
    let x = be.upload(&vec![1.0f64; n]).unwrap();
    let mut y = be.zeros::<f64>(n).unwrap();
    let mut g = c.benchmark_group(format!("spmv_laplace3d_{m}"));
    g.throughput(Throughput::BytesDecimal(bytes as u64));
    for (name, layout) in [
        ("csr", Layout::Csr),
        ("sell_8_1", Layout::Sell { c: 8, sigma: 1 }),
        ("sell_8_256", Layout::Sell { c: 8, sigma: 256 }),
    ] {
        let mat = be.upload_matrix(&a, layout).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| be.spmv(1.0, &mat, &x, 0.0, &mut y).unwrap())
        });
    }
    g.finish();
}

fn cg_iteration(c: &mut Criterion) {
    let be = CpuBackend::new();
    let m = grid_size();
    let a = generators::laplace3d::<f64>(m);
    let n = a.nrows();
    let bytes = 12 * a.nnz() + 8 * (n + 1) + 80 * n;
    let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
    let mut p = be.upload(&vec![1.0f64; n]).unwrap();
    let mut q = be.zeros::<f64>(n).unwrap();
    let mut r = be.upload(&vec![1.0f64; n]).unwrap();
    let mut x = be.zeros::<f64>(n).unwrap();
    let mut g = c.benchmark_group(format!("cg_iteration_laplace3d_{m}"));
    g.throughput(Throughput::BytesDecimal(bytes as u64));
    // Exactly the body of the CG loop without preconditioner; alpha and beta are
    // kept tiny so the vectors stay bounded over many repetitions.
    g.bench_function("cg", |b| {
        b.iter(|| {
            let pq = op.apply_dotc(&be, &p, &mut q).unwrap();
            let alpha = 1e-12 * black_box(pq).signum();
            let rr = be.cg_update_residual(alpha, &q, &mut r).unwrap();
            let beta = 1e-12 * black_box(rr).signum();
            be.cg_update_xp(alpha, beta, &r, &mut p, &mut x).unwrap();
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = copy_bandwidth, spmv, cg_iteration
}
criterion_main!(benches);
