//! `Dist<CudaBackend>` on 2 ranks of threads sharing GPU 0 (feature `cuda`):
//! CG, BiCGSTAB and GMRES against the serial CPU solve. Skipped (one line
//! printed) without a CUDA driver or device.
#![cfg(feature = "cuda")]

use gpuq_core::Error;
use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_dist::{rows_of, solve_rows, Communicator, Dist, RowPartition, ThreadComm};
use gpuq_krylov::{solve_csr, KrylovOptions, Method, Preconditioner, SolverConfig};
use gpuq_sparse::{generators, Layout};
use std::sync::Arc;

/// GPU 0, or `None` (one line printed for `test`) without a CUDA device.
/// Panics when a present device fails to start.
fn gpu_zero(test: &str) -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(g) => Some(g),
        Err(Error::NoCudaDevice(_)) => {
            println!("{test}: skipped (no CUDA device)");
            None
        }
        Err(e) => panic!("the CUDA backend failed to start: {e}"),
    }
}

#[test]
fn dist_over_cuda_matches_the_serial_cpu_solve() {
    let Some(gpu) = gpu_zero("dist_over_cuda_matches_the_serial_cpu_solve") else {
        return;
    };
    let a = generators::convdiff2d::<f64>(24, 0.5);
    let n = a.nrows();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
    for (method, precond) in [
        (Method::Cg, Preconditioner::Jacobi),
        (Method::Bicgstab, Preconditioner::Jacobi),
        (Method::Gmres { restart: 30 }, Preconditioner::None),
    ] {
        let a = if method == Method::Cg {
            generators::laplace2d::<f64>(24)
        } else {
            a.clone()
        };
        let config = SolverConfig {
            method,
            precond,
            options: KrylovOptions {
                rtol: 1e-9,
                ..KrylovOptions::default()
            },
            layout: Layout::Csr,
        };
        let (xs, rs) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
        let partition = RowPartition::contiguous(n, 2).unwrap();
        let parts = ThreadComm::run(2, |comm| {
            let rank = comm.rank();
            let dist = Dist::new(gpu.clone(), Arc::new(comm));
            let rows = rows_of(&a, &partition, rank).unwrap();
            solve_rows(&dist, &partition, &rows, &b[partition.range(rank)], &config).unwrap()
        })
        .unwrap();
        let x: Vec<f64> = parts.iter().flat_map(|(x, _)| x.clone()).collect();
        let scale = xs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = xs
            .iter()
            .zip(&x)
            .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()));
        assert!(diff <= 1e-7 * scale, "{method:?}: differs by {diff:e}");
        assert!(
            parts[0].1.iterations.abs_diff(rs.iterations) <= 2,
            "{method:?}: {} vs {} iterations",
            parts[0].1.iterations,
            rs.iterations
        );
    }
}

#[test]
fn ghost_rows_in_pairs_of_runs_match_the_cpu() {
    let Ok(gpu) = CudaBackend::new(0) else {
        println!("ghost_rows_in_pairs_of_runs_match_the_cpu: skipped (no CUDA device)");
        return;
    };
    use gpuq_sparse::Csr;
    // 40 rows on 6 ghost columns, non-empty in rows 0..3, 17..20 and 33..40
    let full = |i: usize| i < 3 || (17..20).contains(&i) || i >= 33;
    let (mut ptr, mut col, mut val) = (vec![0usize], Vec::new(), Vec::new());
    for i in 0..40 {
        if full(i) {
            let (p, q) = (i % 6, (i + 2) % 6);
            for j in [p.min(q), p.max(q)] {
                col.push(j as u32);
                val.push(1.0 + (i * 7 + j) as f64 / 10.0);
            }
        }
        ptr.push(col.len());
    }
    let g = Csr::try_new(40, 6, ptr, col, val).unwrap();
    let x: Vec<f64> = (0..6).map(|j| (j as f64 * 0.7).cos()).collect();
    let y0: Vec<f64> = (0..40).map(|i| (i as f64 * 0.3).sin()).collect();
    let w: Vec<f64> = (0..40).map(|i| 1.0 + (i % 4) as f64).collect();
    let cpu = CpuBackend::new();
    for runs in [
        vec![0..3, 17..20, 33..40],
        vec![0..20, 33..40],
        vec![33..40, 0..3, 17..20],
    ] {
        // y + 2 G x over the runs, and 0.5 + w^H (2 G x) in slot 1
        let want = ghost_add_on(&cpu, &g, [&x, &y0, &w], &runs);
        let got = ghost_add_on(&gpu, &g, [&x, &y0, &w], &runs);
        let close = |u: &[f64], v: &[f64]| {
            u.iter()
                .zip(v)
                .all(|(p, q)| (p - q).abs() <= 1e-12 * (1.0 + q.abs()))
        };
        assert!(
            close(&got[0], &want[0]) && close(&got[1], &want[1]),
            "{runs:?}: {got:?} against {want:?}"
        );
    }
}

/// A ghost block scaled by a vector on the GPU (`HaloBackend::scaled_rows`,
/// the one-pass point sweep's block) holds the host's scaled values bit for
/// bit, in f64 and f32: the same ghost product over both gives the same
/// result. Other layouts are left to the host (`None`).
#[test]
fn a_ghost_block_scaled_on_the_gpu_is_the_hosts() {
    use gpuq_core::{Backend, Scalar};
    use gpuq_dist::HaloBackend;
    use gpuq_sparse::{Csr, SparseBackend};
    let Some(gpu) = gpu_zero("a_ghost_block_scaled_on_the_gpu_is_the_hosts") else {
        return;
    };
    fn check<T: Scalar>(gpu: &CudaBackend) {
        // 40 rows on 6 ghost columns, non-empty in rows 0..3, 17..20 and 33..40.
        let full = |i: usize| i < 3 || (17..20).contains(&i) || i >= 33;
        let (mut ptr, mut col, mut val) = (vec![0usize], Vec::new(), Vec::new());
        for i in 0..40 {
            if full(i) {
                for j in [i % 3, 3 + i % 3] {
                    col.push(j as u32);
                    val.push(T::from_f64(1.0 + (i * 7 + j) as f64 / 10.0));
                }
            }
            ptr.push(col.len());
        }
        let g = Csr::try_new(40, 6, ptr.clone(), col.clone(), val.clone()).unwrap();
        let d: Vec<T> = (0..40).map(|i| T::from_f64(0.3 + i as f64 / 7.0)).collect();
        let scaled_val: Vec<T> = (0..40)
            .flat_map(|i| {
                let di = d[i];
                val[ptr[i]..ptr[i + 1]].iter().map(move |&v| v * di)
            })
            .collect();
        let host = Csr::try_new(40, 6, ptr, col, scaled_val).unwrap();
        let m = gpu.upload_matrix(&g, Layout::Csr).unwrap();
        let scaled = gpu
            .scaled_rows(&m, &gpu.upload(&d).unwrap())
            .unwrap()
            .expect("CSR is scaled on the GPU");
        let x: Vec<T> = (0..6)
            .map(|j| T::from_f64((j as f64 * 0.7).cos()))
            .collect();
        let xv = gpu.upload(&x).unwrap();
        let apply = |a: &gpuq_cuda::CudaMatrix<T>| {
            let mut y = gpu.zeros::<T>(40).unwrap();
            gpu.spmv(T::one(), a, &xv, T::zero(), &mut y).unwrap();
            gpu.download(&y).unwrap()
        };
        let uploaded = gpu.upload_matrix(&host, Layout::Csr).unwrap();
        assert_eq!(apply(&scaled), apply(&uploaded), "{:?}", T::KIND);
        let sell = gpu
            .upload_matrix(&g, Layout::Sell { c: 8, sigma: 1 })
            .unwrap();
        let left = gpu.scaled_rows(&sell, &gpu.upload(&d).unwrap()).unwrap();
        assert!(left.is_none());
        // d of the wrong length is an error.
        assert!(gpu.scaled_rows(&m, &gpu.upload(&d[1..]).unwrap()).is_err());
    }
    check::<f64>(&gpu);
    check::<f32>(&gpu);
}

/// A ghost block given by its non-empty rows and made on the GPU
/// (`HaloBackend::ghost_matrix`: the listed rows uploaded, the row pointers
/// expanded there) is the whole block uploaded: the same product bit for
/// bit, in f64 and f32, with empty rows first, between and last, and with
/// no row listed. A value beyond f32 is left to the host (`None`).
#[test]
fn a_ghost_block_by_its_rows_made_on_the_gpu_is_the_whole_block() {
    use gpuq_core::{Backend, Scalar};
    use gpuq_dist::{GhostRows, HaloBackend};
    use gpuq_sparse::{Csr, SparseBackend};
    let Some(gpu) = gpu_zero("a_ghost_block_by_its_rows_made_on_the_gpu_is_the_whole_block") else {
        return;
    };
    fn check<T: Scalar>(gpu: &CudaBackend, filled: &dyn Fn(usize) -> bool) {
        let (mut ptr, mut col, mut val) = (vec![0usize], Vec::new(), Vec::new());
        for i in 0..3000 {
            if filled(i) {
                for j in [i % 3, 3 + i % 3] {
                    col.push(j as u32);
                    val.push(1.0 + (i * 7 + j) as f64 / 10.0);
                }
            }
            ptr.push(col.len());
        }
        let whole = Csr::try_new(3000, 6, ptr, col, val).unwrap();
        let g = GhostRows::of_csr(&whole).unwrap();
        let made: gpuq_cuda::CudaMatrix<T> = gpu
            .ghost_matrix(&g)
            .unwrap()
            .expect("CSR is made on the GPU");
        let uploaded = gpu
            .upload_matrix(&whole.map_values(T::from_f64).unwrap(), Layout::Csr)
            .unwrap();
        let x: Vec<T> = (0..6)
            .map(|j| T::from_f64((j as f64 * 0.7).cos()))
            .collect();
        let xv = gpu.upload(&x).unwrap();
        let apply = |a: &gpuq_cuda::CudaMatrix<T>| {
            let mut y = gpu.zeros::<T>(3000).unwrap();
            gpu.spmv(T::one(), a, &xv, T::zero(), &mut y).unwrap();
            gpu.download(&y).unwrap()
        };
        assert_eq!(apply(&made), apply(&uploaded), "{:?}", T::KIND);
        assert_eq!(gpuq_sparse::DeviceMatrix::shape(&made), (3000, 6));
    }
    let slab = |i: usize| (3..40).contains(&i) || (1700..1710).contains(&i) || i == 2999;
    check::<f64>(&gpu, &slab);
    check::<f32>(&gpu, &slab);
    check::<f64>(&gpu, &|_| false);
    let huge = Csr::try_new(4, 2, vec![0, 0, 1, 1, 1], vec![1], vec![1e300]).unwrap();
    let g = GhostRows::of_csr(&huge).unwrap();
    let left: Option<gpuq_cuda::CudaMatrix<f32>> = gpu.ghost_matrix(&g).unwrap();
    assert!(left.is_none());
}

/// y + 2 G x over `runs` and 0.5 + w^H (2 G x) in slot 1 of a scalar array,
/// through `be`'s ghost-block product (`[x, y, w]` uploaded to it).
fn ghost_add_on<B: gpuq_dist::HaloBackend>(
    be: &B,
    g: &gpuq_sparse::Csr<f64>,
    [x, y, w]: [&[f64]; 3],
    runs: &[std::ops::Range<usize>],
) -> [Vec<f64>; 2] {
    let a = be.upload_matrix(g, Layout::Csr).unwrap();
    let (xv, wv) = (be.upload(x).unwrap(), be.upload(w).unwrap());
    let (mut yv, mut sc) = (be.upload(y).unwrap(), be.upload(&[0.5, 0.0]).unwrap());
    let dot = gpuq_core::FusedDot {
        w: &wv,
        sc: &mut sc,
        slot: 1,
    };
    assert!(be
        .ghost_add(2.0, &a, &xv, &mut yv, Some(dot), runs)
        .unwrap());
    [be.download(&yv).unwrap(), be.download(&sc).unwrap()]
}

/// Two ranks of threads on GPUs 0 and 1 with an NCCL communicator between
/// them (rank 0 makes the id, the threads share it), or `None` (one line
/// printed) without two GPUs or the NCCL library.
fn nccl_pair(test: &str) -> Option<()> {
    let count = CudaBackend::device_count().unwrap_or(0);
    if count < 2 || !CudaBackend::nccl_available() {
        println!(
            "{test}: skipped ({count} GPUs, NCCL library present: {})",
            CudaBackend::nccl_available()
        );
        return None;
    }
    Some(())
}

/// Whether two distributed hierarchies have the same levels: rho, A, P and R
/// bit for bit.
fn same_levels(h: &gpuq_dist::DistHierarchy, g: &gpuq_dist::DistHierarchy) -> bool {
    h.levels().len() == g.levels().len()
        && h.levels().iter().zip(g.levels()).all(|(x, y)| {
            x.rho == y.rho
                && x.a().unwrap() == y.a().unwrap()
                && x.p().unwrap() == y.p().unwrap()
                && x.r().unwrap() == y.r().unwrap()
        })
}

/// ||b - A x|| / ||b||.
fn true_residual(a: &gpuq_sparse::Csr<f64>, x: &[f64], b: &[f64]) -> f64 {
    let ax = a.mul_vec(x).unwrap();
    let r: f64 = ax.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum();
    (r / b.iter().map(|v| v * v).sum::<f64>()).sqrt()
}

/// The distributed setup's device steps on one GPU shared by 2 and 3 thread
/// ranks (host exchanges, no NCCL): A P kept on the device for R (A P), its
/// rows other ranks need computed on the host; the owned blocks cut from
/// the kept rows on the device for the aggregation and the cycle. The
/// levels are the host's bit for bit (rho, A, P and R), for scalar and
/// 2x2-block systems, and the cycle made from the device's kept blocks
/// gives the host-built hierarchy's cycle's result bit for bit (f64 CSR,
/// f32 SELL).
#[test]
fn the_setup_on_a_shared_gpu_builds_the_host_levels() {
    use gpuq_core::{Backend, LinearOperator};
    use gpuq_dist::{DistAmgOptions, DistHierarchy};
    let Some(gpu) = gpu_zero("the_setup_on_a_shared_gpu_builds_the_host_levels") else {
        return;
    };
    let elasticity = gpuq_sparse::generators::ProblemSpec::parse("elasticity2d:40")
        .unwrap()
        .build::<f64>()
        .unwrap()
        .matrix;
    // Identity rows: isolated nodes, whose aggregates the kept aggregation
    // drops on the host.
    let fixed = generators::with_identity_rows(&generators::laplace3d::<f64>(24), |i| i % 97 == 0);
    for (a, bs) in [
        (generators::laplace3d::<f64>(24), 1),
        (elasticity, 2),
        (fixed, 1),
    ] {
        let mut o = DistAmgOptions {
            gather_below: 300,
            ..DistAmgOptions::default()
        };
        o.amg.block = bs;
        for ranks in [2, 3] {
            let partition = RowPartition::blocks(a.nrows(), ranks, bs).unwrap();
            let same = ThreadComm::run(ranks, |comm| {
                let rank = comm.rank();
                let rows = rows_of(&a, &partition, rank).unwrap();
                let h = DistHierarchy::build(&comm, &partition, &rows, &o).unwrap();
                let g = DistHierarchy::build_on(&gpu, &comm, &partition, &rows, &o).unwrap();
                let levels = !h.levels().is_empty() && same_levels(&h, &g);
                let dist = Dist::new(gpu.clone(), Arc::new(comm));
                let b: Vec<f64> = partition
                    .range(rank)
                    .map(|i| 1.0 + (i % 7) as f64)
                    .collect();
                let f64_csr = |h: &DistHierarchy| {
                    let m = h.cycle::<CudaBackend, f64>(&dist, Layout::Csr).unwrap();
                    let mut x = dist.zeros(b.len()).unwrap();
                    m.apply(&dist.upload(&b).unwrap(), &mut x).unwrap();
                    dist.download(&x).unwrap()
                };
                let f32_sell = |h: &DistHierarchy| {
                    let layout = Layout::Sell { c: 32, sigma: 1 };
                    let m = h.cycle::<CudaBackend, f32>(&dist, layout).unwrap();
                    let bf: Vec<f32> = b.iter().map(|&v| v as f32).collect();
                    let mut x = dist.zeros(b.len()).unwrap();
                    m.apply(&dist.upload(&bf).unwrap(), &mut x).unwrap();
                    dist.download(&x).unwrap()
                };
                levels && f64_csr(&h) == f64_csr(&g) && f32_sell(&h) == f32_sell(&g)
            })
            .unwrap();
            assert!(
                same.iter().all(|&s| s),
                "block {bs}, {ranks} ranks: the levels or cycles built on the GPU differ from the host's"
            );
        }
    }
}

/// The distributed setup on one GPU with an NCCL communicator of one rank:
/// the Lanczos estimates take NCCL's paths (the halo exchanged between the
/// GPUs, the inner products summed on the device and read once at the end)
/// and the levels are the host's bit for bit (rho, A, P and R), for scalar
/// and 2x2-block systems. (Two GPUs: `cg_and_amg_over_nccl_match_one_gpu`.)
#[test]
fn the_setup_over_nccl_of_one_rank_builds_the_host_levels() {
    use gpuq_dist::{DistAmgOptions, DistHierarchy};
    if !CudaBackend::nccl_available() {
        println!(
            "the_setup_over_nccl_of_one_rank_builds_the_host_levels: skipped (no NCCL library)"
        );
        return;
    }
    let Some(nccl) = gpu_zero("the_setup_over_nccl_of_one_rank_builds_the_host_levels") else {
        return;
    };
    nccl.attach_nccl(0, 1, &CudaBackend::nccl_unique_id().unwrap())
        .unwrap();
    let plain = CudaBackend::new(0).unwrap();
    let elasticity = gpuq_sparse::generators::ProblemSpec::parse("elasticity2d:40")
        .unwrap()
        .build::<f64>()
        .unwrap()
        .matrix;
    for (a, bs) in [(generators::laplace3d::<f64>(24), 1), (elasticity, 2)] {
        let mut o = DistAmgOptions {
            gather_below: 300,
            ..DistAmgOptions::default()
        };
        o.amg.block = bs;
        let partition = RowPartition::blocks(a.nrows(), 1, bs).unwrap();
        let found = ThreadComm::run(1, |comm| {
            let rows = rows_of(&a, &partition, 0).unwrap();
            let h = DistHierarchy::build(&comm, &partition, &rows, &o).unwrap();
            [("without NCCL", &plain), ("over NCCL", &nccl)].map(|(how, gpu)| {
                let g = DistHierarchy::build_on(gpu, &comm, &partition, &rows, &o).unwrap();
                // Each level's differences from the host's (none expected).
                let diff: Vec<String> = h
                    .levels()
                    .iter()
                    .zip(g.levels())
                    .enumerate()
                    .map(|(k, (x, y))| {
                        format!(
                            "level {k}: rho {:e} / {:e}, A {}, P {}, R {}",
                            x.rho,
                            y.rho,
                            x.a().unwrap() == y.a().unwrap(),
                            x.p().unwrap() == y.p().unwrap(),
                            x.r().unwrap() == y.r().unwrap()
                        )
                    })
                    .collect();
                let same = !h.levels().is_empty()
                    && h.levels().len() == g.levels().len()
                    && same_levels(&h, &g);
                (
                    same,
                    format!("{how}: {} levels, {diff:?}", g.levels().len()),
                )
            })
        })
        .unwrap();
        for (same, what) in &found[0] {
            assert!(*same, "block {bs}, host levels differ {what}");
        }
    }
}

/// The finest level's finiteness is judged from the GPU's copy of the
/// rows: a NaN or an infinity on one rank is the host's error, naming the
/// entry, on every rank; finite rows pass.
#[test]
fn a_non_finite_value_on_a_gpu_rank_is_named_on_every_rank() {
    use gpuq_dist::{DistAmgOptions, DistHierarchy};
    let Some(gpu) = gpu_zero("a_non_finite_value_on_a_gpu_rank_is_named_on_every_rank") else {
        return;
    };
    let a = generators::laplace3d::<f64>(12);
    let partition = RowPartition::contiguous(a.nrows(), 2).unwrap();
    let o = DistAmgOptions::default();
    for bad in [f64::NAN, f64::INFINITY] {
        let errors = ThreadComm::run(2, |comm| {
            let rows = rows_of(&a, &partition, comm.rank()).unwrap();
            let rows = match comm.rank() {
                1 => {
                    let (n, m, ptr, cols, mut vals) = rows.into_parts();
                    vals[ptr[5] + 1] = bad;
                    gpuq_sparse::Csr::try_new_allow_nonfinite(n, m, ptr, cols, vals).unwrap()
                }
                _ => rows,
            };
            let host = DistHierarchy::build(&comm, &partition, &rows, &o).err();
            let gpu = DistHierarchy::build_on(&gpu, &comm, &partition, &rows, &o).err();
            (host.map(|e| e.to_string()), gpu.map(|e| e.to_string()))
        })
        .unwrap();
        for (host, gpu) in &errors {
            assert!(host.is_some(), "{bad}: the host setup took it");
            assert_eq!(host, gpu, "{bad}");
        }
        assert!(
            errors[1]
                .0
                .as_deref()
                .unwrap()
                .contains("non-finite value at (5,"),
            "{errors:?}"
        );
    }
    let fine = ThreadComm::run(2, |comm| {
        let rows = rows_of(&a, &partition, comm.rank()).unwrap();
        DistHierarchy::build_on(&gpu, &comm, &partition, &rows, &o).is_ok()
    })
    .unwrap();
    assert!(fine.iter().all(|&ok| ok));
}

/// The solve's operator taken from the hierarchy's finest level as the
/// GPU setup left it (`DistHierarchy::finest_matrix`) solves as the
/// operator split from the rows and uploaded does, bit for bit, in CSR and
/// SELL-32, on two ranks sharing the GPU.
#[test]
fn the_finest_level_on_the_gpu_is_the_solve_operator() {
    use gpuq_dist::{
        solve_matrix_with_precond, solve_rows_with_precond, DistAmgOptions, DistHierarchy,
    };
    let Some(gpu) = gpu_zero("the_finest_level_on_the_gpu_is_the_solve_operator") else {
        return;
    };
    let a = generators::laplace3d::<f64>(24);
    let partition = RowPartition::contiguous(a.nrows(), 2).unwrap();
    let o = DistAmgOptions {
        gather_below: 300,
        ..DistAmgOptions::default()
    };
    let same = ThreadComm::run(2, |comm| {
        let rank = comm.rank();
        let rows = rows_of(&a, &partition, rank).unwrap();
        let b: Vec<f64> = partition
            .range(rank)
            .map(|i| 1.0 + (i % 7) as f64)
            .collect();
        let dist = Dist::new(gpu.clone(), Arc::new(comm));
        let h = DistHierarchy::build_on(&gpu, dist.comm(), &partition, &rows, &o).unwrap();
        let m = h.cycle::<CudaBackend, f64>(&dist, Layout::Csr).unwrap();
        let m: &dyn gpuq_core::LinearOperator<Dist<CudaBackend>, f64> = &m;
        [Layout::Csr, Layout::Sell { c: 32, sigma: 1 }].map(|layout| {
            let config = SolverConfig {
                method: Method::Cg,
                layout,
                options: KrylovOptions {
                    rtol: 1e-8,
                    ..KrylovOptions::default()
                },
                ..SolverConfig::default()
            };
            let (x0, r0) =
                solve_rows_with_precond(&dist, &partition, &rows, &b, &config, Some(m)).unwrap();
            let finest = h
                .finest_matrix::<CudaBackend, f64>(&dist, layout)
                .unwrap()
                .unwrap();
            let (x1, r1) =
                solve_matrix_with_precond(&dist, &partition, finest, &b, &config, Some(m)).unwrap();
            r0.converged && x0 == x1 && r0.iterations == r1.iterations
        })
    })
    .unwrap();
    assert!(same.iter().flatten().all(|&s| s), "{same:?}");
}

/// Runs `f` on two thread ranks, rank r on GPU r with NCCL attached.
fn on_two_gpus<R: Send>(f: impl Fn(Dist<CudaBackend>) -> R + Sync) -> Vec<R> {
    let id = CudaBackend::nccl_unique_id().unwrap();
    ThreadComm::run(2, |comm| {
        let rank = comm.rank();
        let gpu = CudaBackend::new(rank).unwrap();
        gpu.attach_nccl(rank, 2, &id).unwrap();
        f(Dist::new(gpu, Arc::new(comm)))
    })
    .unwrap()
}

#[test]
fn the_nccl_halo_equals_the_host_plans() {
    if nccl_pair("the_nccl_halo_equals_the_host_plans").is_none() {
        return;
    }
    use gpuq_core::Backend;
    use gpuq_dist::DistMatrix;
    use gpuq_sparse::SparseBackend;
    let a = generators::laplace3d::<f64>(20);
    let n = a.nrows();
    let x: Vec<f64> = (0..n).map(|i| (0.37 * i as f64).sin()).collect();
    let want = a.mul_vec(&x).unwrap();
    let partition = RowPartition::contiguous(n, 2).unwrap();
    let parts = on_two_gpus(|dist| {
        assert_eq!(dist.comm_kind(), "nccl");
        let rank = dist.comm().rank();
        let range = partition.range(rank);
        let rows = rows_of(&a, &partition, rank).unwrap();
        let m = DistMatrix::new(&dist, &partition, &rows, Layout::Csr).unwrap();
        let xv = dist.upload(&x[range.clone()]).unwrap();
        let mut y = dist.zeros::<f64>(range.len()).unwrap();
        let mut sums = Vec::new();
        for _ in 0..3 {
            dist.spmv(1.0, &m, &xv, 0.0, &mut y).unwrap();
            sums.push(dist.download(&y).unwrap());
        }
        // The fused reductions' slots summed over the GPUs, three times.
        let mut sc = dist.upload(&[1.0 + rank as f64, 10.0, 0.5]).unwrap();
        for _ in 0..3 {
            dist.sum_slots(&mut sc, &[0, 2]).unwrap();
        }
        // An array longer than the device sum takes goes through the host.
        let mut long = dist.upload(&vec![1.0; gpuq_cuda::NCCL_SLOTS + 6]).unwrap();
        dist.sum_slots(&mut long, &[0, gpuq_cuda::NCCL_SLOTS + 5])
            .unwrap();
        let long = dist.download(&long).unwrap();
        // Blocks of 3 and 5 values made whole on both GPUs, three times.
        let counts = [3, 5];
        let mine: Vec<f64> = (0..counts[rank]).map(|i| (10 * rank + i) as f64).collect();
        let mine = dist.local().upload(&mine).unwrap();
        let mut wholes = Vec::new();
        for _ in 0..3 {
            let mut whole = dist.local().zeros::<f64>(8).unwrap();
            dist.allgather_rows_into(&counts, &mine, &mut whole)
                .unwrap();
            wholes.push(dist.local().download(&whole).unwrap());
        }
        (sums, dist.download(&sc).unwrap(), wholes, long)
    });
    let mut y = Vec::new();
    for (sums, sc, wholes, long) in &parts {
        let summed = |k: usize| k == 0 || k == gpuq_cuda::NCCL_SLOTS + 5;
        assert!(long
            .iter()
            .enumerate()
            .all(|(k, &v)| v == if summed(k) { 2.0 } else { 1.0 }));
        assert!(
            sums.windows(2).all(|w| w[0] == w[1]),
            "repeated exchanges agree"
        );
        y.extend_from_slice(&sums[0]);
        // 1 + 2 = 3 and 0.5 + 0.5 = 1, then 3 + 3 and 1 + 1, then again.
        assert_eq!(sc, &vec![12.0, 10.0, 4.0]);
        for w in wholes {
            assert_eq!(w, &vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0, 13.0, 14.0]);
        }
    }
    // The host's SpMV sums each row in the same order: the same bits.
    let diff = y
        .iter()
        .zip(&want)
        .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()));
    assert!(diff <= 1e-12, "NCCL halo SpMV differs by {diff:e}");
}

#[test]
fn cg_and_amg_over_nccl_match_one_gpu() {
    if nccl_pair("cg_and_amg_over_nccl_match_one_gpu").is_none() {
        return;
    }
    use gpuq_core::{Backend, LinearOperator};
    use gpuq_dist::{solve_rows_with_precond, DistAmgOptions, DistHierarchy};
    let a = generators::laplace3d::<f64>(32);
    let n = a.nrows();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 7) % 13) as f64 / 13.0).collect();
    let config = SolverConfig {
        method: Method::Cg,
        precond: Preconditioner::Jacobi,
        options: KrylovOptions {
            rtol: 1e-9,
            ..KrylovOptions::default()
        },
        layout: Layout::Csr,
    };
    let gpu = CudaBackend::new(0).unwrap();
    let (x1, r1) = gpuq_krylov::solve_csr(&gpu, &a, &b, &config).unwrap();
    let partition = RowPartition::contiguous(n, 2).unwrap();
    let runs = on_two_gpus(|dist| {
        let rank = dist.comm().rank();
        let range = partition.range(rank);
        let rows = rows_of(&a, &partition, rank).unwrap();
        dist.reset_stats();
        let cg = solve_rows(&dist, &partition, &rows, &b[range.clone()], &config).unwrap();
        // Its iterations are recorded (a CUDA graph with NCCL's kernels) and
        // replayed: every replay still counts its exchange and reductions.
        let stats = dist.comm_stats();
        assert!(
            stats.halo_exchanges > cg.1.iterations as u64
                && stats.collectives > 2 * cg.1.iterations as u64,
            "{stats:?} for {} iterations",
            cg.1.iterations
        );
        let o = DistAmgOptions {
            gather_below: 500,
            ..DistAmgOptions::default()
        };
        let h = DistHierarchy::build(dist.comm(), &partition, &rows, &o).unwrap();
        // The Lanczos estimates, the aggregation and the products on each
        // rank's GPU: the same distributed levels (rho too, bit for bit); the gathered levels built on the GPU too (the
        // one-process device setup: the host's matrices to rounding).
        let hg = DistHierarchy::build_on(dist.local(), dist.comm(), &partition, &rows, &o).unwrap();
        assert!(
            same_levels(&h, &hg),
            "the GPU-built hierarchy differs from the host's"
        );
        let (ct, dev) = (h.tail().coarse_solve(), hg.tail().coarse_solve());
        let scale = ct.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(
            h.tail().levels().len() == hg.tail().levels().len()
                && ct.shape() == dev.shape()
                && ct.col_idx() == dev.col_idx()
                && ct
                    .values()
                    .iter()
                    .zip(dev.values())
                    .all(|(x, y)| (x - y).abs() <= 1e-10 * scale),
            "the gathered levels built on the GPU differ from the host's"
        );
        let m = h.cycle::<CudaBackend, f64>(&dist, Layout::Csr).unwrap();
        let m: &dyn LinearOperator<Dist<CudaBackend>, f64> = &m;
        let amg =
            solve_rows_with_precond(&dist, &partition, &rows, &b[range], &config, Some(m)).unwrap();
        (cg, amg, h.levels().len())
    });
    let x: Vec<f64> = runs.iter().flat_map(|((x, _), _, _)| x.clone()).collect();
    let r = &runs[0].0 .1;
    assert!(r.converged && r.iterations.abs_diff(r1.iterations) <= 1);
    let scale = x1.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = x1
        .iter()
        .zip(&x)
        .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()));
    assert!(
        diff <= 1e-7 * scale,
        "CG over NCCL differs from one GPU by {diff:e}"
    );
    // AMG-PCG across the two GPUs: the tolerance met (true residual), far
    // fewer iterations than Jacobi, at least one level distributed.
    let xa: Vec<f64> = runs.iter().flat_map(|(_, (x, _), _)| x.clone()).collect();
    let ra = &runs[0].1 .1;
    assert!(ra.converged && ra.relative_residual <= 1e-9);
    assert!(runs[0].2 >= 1 && 3 * ra.iterations < r1.iterations);
    let res = true_residual(&a, &xa, &b);
    assert!(res <= 1.5e-9, "true residual {res:e}");
}

/// A rank without rows on two GPUs (what agglomeration leaves on three or
/// more ranks): every row of laplace3d(22) on rank 0, rank 1 holding none of
/// any level; the hierarchy built on the GPUs is the host's (rho, A, P and
/// R), and the cycle on the GPUs preconditions CG to the tolerance.
#[test]
fn a_rank_without_rows_on_two_gpus_matches_the_host() {
    if nccl_pair("a_rank_without_rows_on_two_gpus_matches_the_host").is_none() {
        return;
    }
    use gpuq_core::LinearOperator;
    use gpuq_dist::{solve_rows_with_precond, DistAmgOptions, DistHierarchy};
    let a = generators::laplace3d::<f64>(22);
    let n = a.nrows();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
    let config = SolverConfig {
        method: Method::Cg,
        precond: Preconditioner::None,
        options: KrylovOptions {
            rtol: 1e-10,
            ..KrylovOptions::default()
        },
        layout: Layout::Csr,
    };
    let partition = RowPartition::from_counts(&[n, 0]).unwrap();
    let o = DistAmgOptions {
        gather_below: 300,
        agglomerate: true,
        ..DistAmgOptions::default()
    };
    let runs = on_two_gpus(|dist| {
        let rank = dist.comm().rank();
        let rows = rows_of(&a, &partition, rank).unwrap();
        let h = DistHierarchy::build(dist.comm(), &partition, &rows, &o).unwrap();
        let hg = DistHierarchy::build_on(dist.local(), dist.comm(), &partition, &rows, &o).unwrap();
        assert!(h.levels().len() >= 2);
        assert!(h.levels().iter().all(|l| l.partition.active_ranks() == 1));
        assert!(
            same_levels(&h, &hg),
            "rank {rank}: the GPU-built hierarchy differs from the host's"
        );
        let m = hg.cycle::<CudaBackend, f64>(&dist, Layout::Csr).unwrap();
        let m: &dyn LinearOperator<Dist<CudaBackend>, f64> = &m;
        let range = partition.range(rank);
        solve_rows_with_precond(&dist, &partition, &rows, &b[range], &config, Some(m)).unwrap()
    });
    let x: Vec<f64> = runs.iter().flat_map(|(x, _)| x.clone()).collect();
    assert!(runs.iter().all(|(_, r)| r.converged && r.iterations < 40));
    let res = true_residual(&a, &x, &b);
    assert!(res <= 1.5e-10, "true residual {res:e}");
}
