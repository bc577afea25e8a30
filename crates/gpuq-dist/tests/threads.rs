//! Distributed solves on 1 to 4 ranks of threads (ThreadComm) against the
//! serial CPU solve: solutions equal to rounding, iteration counts within 1,
//! the same bits run to run.

use gpuq_core::{Complex64, RealScalar, Scalar, SolveReport};
use gpuq_cpu::CpuBackend;
use gpuq_dist::{rows_of, solve_rows, Communicator, Dist, Reordering, RowPartition, ThreadComm};
use gpuq_krylov::{solve_csr, KrylovOptions, Method, Preconditioner, SolverConfig};
use gpuq_sparse::{generators, Csr, Layout};
use std::sync::Arc;

fn config(method: Method, precond: Preconditioner) -> SolverConfig {
    SolverConfig {
        method,
        precond,
        options: KrylovOptions {
            rtol: 1e-10,
            ..KrylovOptions::default()
        },
        layout: Layout::Csr,
    }
}

fn rhs<T: Scalar>(n: usize) -> Vec<T> {
    (0..n)
        .map(|i| T::from_f64(1.0 + ((i * 7) % 13) as f64 / 13.0))
        .collect()
}

/// Solves on `partition`'s ranks; returns the whole solution and rank 0's
/// report (after checking every rank reports the same iterations).
fn distributed<T: Scalar>(
    a: &Csr<T>,
    b: &[T],
    partition: &RowPartition,
    config: &SolverConfig,
) -> (Vec<T>, SolveReport) {
    let parts = ThreadComm::run(partition.ranks(), |comm| {
        let rank = comm.rank();
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(a, partition, rank).unwrap();
        let range = partition.range(rank);
        solve_rows(&dist, partition, &rows, &b[range], config).unwrap()
    })
    .unwrap();
    let mut x = Vec::with_capacity(b.len());
    for (xr, report) in &parts {
        assert_eq!(report.iterations, parts[0].1.iterations);
        assert_eq!(report.residual_history, parts[0].1.residual_history);
        x.extend_from_slice(xr);
    }
    (x, parts.into_iter().next().unwrap().1)
}

fn max_diff<T: Scalar>(x: &[T], y: &[T]) -> (f64, f64) {
    let scale = x
        .iter()
        .map(|v| v.magnitude().to_f64_lossless())
        .fold(0.0, f64::max);
    let diff = x
        .iter()
        .zip(y)
        .map(|(u, v)| (*u - *v).magnitude().to_f64_lossless())
        .fold(0.0, f64::max);
    (diff, scale)
}

/// Every rank count 1..=4 against the serial solve, twice for the bits.
fn matches_serial<T: Scalar>(a: &Csr<T>, method: Method, precond: Preconditioner, block: usize) {
    let b = rhs::<T>(a.nrows());
    let config = config(method, precond);
    let (xs, rs) = solve_csr(&CpuBackend::new(), a, &b, &config).unwrap();
    assert!(rs.converged);
    for ranks in 1..=4 {
        let partition = RowPartition::blocks(a.nrows(), ranks, block).unwrap();
        let what = format!("{method:?} {precond:?} on {ranks} ranks");
        let (xd, rd) = distributed(a, &b, &partition, &config);
        assert!(rd.converged, "{what}: {rd:?}");
        assert_eq!(rd.n, a.nrows());
        assert!(
            rd.iterations.abs_diff(rs.iterations) <= 1,
            "{what}: {} vs {} serial iterations",
            rd.iterations,
            rs.iterations
        );
        let (diff, scale) = max_diff(&xs, &xd);
        assert!(diff <= 1e-8 * scale, "{what}: differs by {diff:e}");
        if ranks == 1 {
            // One rank: the serial bits.
            assert_eq!(xd, xs, "{what}");
        }
        let (again, _) = distributed(a, &b, &partition, &config);
        assert_eq!(again, xd, "{what}: not the same bits run to run");
    }
}

#[test]
fn cg_matches_the_serial_solve_on_1_to_4_ranks() {
    let a = generators::laplace2d::<f64>(14);
    matches_serial(&a, Method::Cg, Preconditioner::None, 1);
    matches_serial(&a, Method::Cg, Preconditioner::Jacobi, 1);
}

#[test]
fn bicgstab_matches_the_serial_solve_on_1_to_4_ranks() {
    let a = generators::convdiff2d::<f64>(12, 0.7);
    matches_serial(&a, Method::Bicgstab, Preconditioner::Jacobi, 1);
    matches_serial(&a, Method::Bicgstab, Preconditioner::Block2, 2);
}

#[test]
fn gmres_matches_the_serial_solve_on_1_to_4_ranks() {
    let a = generators::convdiff2d::<f64>(12, 0.7);
    matches_serial(&a, Method::Gmres { restart: 20 }, Preconditioner::None, 1);
    matches_serial(&a, Method::Gmres { restart: 20 }, Preconditioner::Jacobi, 1);
}

#[test]
fn the_other_methods_and_complex_systems_run_distributed() {
    let a = generators::convdiff2d::<f64>(10, 0.7);
    for method in [Method::Tfqmr, Method::Qmr, Method::BicgstabL { l: 2 }] {
        matches_serial(&a, method, Preconditioner::Jacobi, 1);
    }
    let h = generators::helmholtz3d::<Complex64>(5, 0.5, 0.3).unwrap();
    matches_serial(&h, Method::Bicgstab, Preconditioner::Jacobi, 1);
    matches_serial(&h, Method::Gmres { restart: 30 }, Preconditioner::None, 1);
}

#[test]
fn uneven_and_empty_ranks_solve_too() {
    let a = generators::convdiff2d::<f64>(8, 0.5);
    let b = rhs::<f64>(64);
    let partition = RowPartition::from_counts(&[30, 0, 1, 33]).unwrap();
    for method in [
        Method::Bicgstab,
        Method::Gmres { restart: 10 },
        Method::Tfqmr,
        Method::Qmr,
    ] {
        let config = config(method, Preconditioner::Jacobi);
        let (xs, rs) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
        let (xd, rd) = distributed(&a, &b, &partition, &config);
        let (diff, scale) = max_diff(&xs, &xd);
        assert!(diff <= 1e-8 * scale, "{method:?}: differs by {diff:e}");
        assert!(rd.iterations.abs_diff(rs.iterations) <= 1, "{method:?}");
    }
    let lap = generators::laplace2d::<f64>(8);
    let config = config(Method::Cg, Preconditioner::Jacobi);
    let (xs, _) = solve_csr(&CpuBackend::new(), &lap, &b, &config).unwrap();
    let (xd, _) = distributed(&lap, &b, &partition, &config);
    let (diff, scale) = max_diff(&xs, &xd);
    assert!(diff <= 1e-8 * scale);
}

#[test]
fn a_mismatched_partition_is_an_error_on_every_rank() {
    let a = generators::laplace2d::<f64>(4);
    let b = rhs::<f64>(16);
    let config = config(Method::Cg, Preconditioner::None);
    // Three blocks for two ranks.
    let three = RowPartition::contiguous(16, 3).unwrap();
    let errs = ThreadComm::run(2, |comm| {
        let rank = comm.rank();
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(&a, &three, rank).unwrap();
        solve_rows(&dist, &three, &rows, &b[three.range(rank)], &config).is_err()
    })
    .unwrap();
    assert_eq!(errs, vec![true, true]);
    // Rank 1 was given 6 rows for a block of 8.
    let two = RowPartition::contiguous(16, 2).unwrap();
    let other = RowPartition::from_counts(&[10, 6]).unwrap();
    let errs = ThreadComm::run(2, |comm| {
        let rank = comm.rank();
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(&a, if rank == 0 { &two } else { &other }, rank).unwrap();
        solve_rows(&dist, &two, &rows, &b[two.range(rank)], &config).is_err()
    })
    .unwrap();
    assert_eq!(errs, vec![true, true]);
    // Different partitions on the two ranks.
    let errs = ThreadComm::run(2, |comm| {
        let rank = comm.rank();
        let p = if rank == 0 { &two } else { &other };
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(&a, p, rank).unwrap();
        solve_rows(&dist, p, &rows, &b[p.range(rank)], &config).is_err()
    })
    .unwrap();
    assert_eq!(errs, vec![true, true]);
    // More ranks than rows.
    assert!(RowPartition::contiguous(16, 17).is_err());
}

#[test]
fn the_halo_and_collectives_are_counted() {
    let a = generators::laplace2d::<f64>(10);
    let b = rhs::<f64>(100);
    let partition = RowPartition::contiguous(100, 3).unwrap();
    let config = config(Method::Cg, Preconditioner::None);
    let stats = ThreadComm::run(3, |comm| {
        let rank = comm.rank();
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(&a, &partition, rank).unwrap();
        let (_, report) =
            solve_rows(&dist, &partition, &rows, &b[partition.range(rank)], &config).unwrap();
        (dist.comm_stats(), report.iterations)
    })
    .unwrap();
    let (middle, iterations) = stats[1];
    // One exchange per product (the initial and final residuals, one per
    // iteration); the middle rank trades one grid row with each neighbour.
    assert_eq!(middle.halo_exchanges as usize, iterations + 2);
    assert_eq!(middle.halo_bytes as usize, (iterations + 2) * 4 * 10 * 8);
    assert!(middle.collectives as usize >= 2 * iterations);
}

#[test]
fn a_system_renumbered_by_bisection_solves_to_the_serial_solution() {
    let a = generators::convdiff2d::<f64>(12, 0.7);
    let b = rhs::<f64>(a.nrows());
    let config = config(Method::Bicgstab, Preconditioner::Jacobi);
    let (xs, rs) = solve_csr(&CpuBackend::new(), &a, &b, &config).unwrap();
    let order = Reordering::bisection(&a, 3).unwrap();
    let (pa, pb) = order.apply(&a, &b).unwrap();
    let (px, rd) = distributed(&pa, &pb, order.partition(), &config);
    let xd = order.restore(&px).unwrap();
    let (diff, scale) = max_diff(&xs, &xd);
    assert!(diff <= 1e-8 * scale, "differs by {diff:e}");
    assert!(rd.iterations.abs_diff(rs.iterations) <= 1);
}

/// `converged` means the true residual across ranks too: single precision
/// asked for 1e-10 ends at the accuracy limit on every rank count, each rank
/// taking the same residual replacements (the decision is made on reduced,
/// rank-independent values).
#[test]
fn the_accuracy_limit_is_reported_across_ranks() {
    let a = generators::laplace2d::<f32>(40);
    let b = rhs::<f32>(a.nrows());
    let mut config = config(Method::Cg, Preconditioner::Jacobi);
    config.options.rtol = 1e-10;
    for ranks in 1..=4 {
        let partition = RowPartition::blocks(a.nrows(), ranks, 1).unwrap();
        let (_, report) = distributed(&a, &b, &partition, &config);
        assert!(!report.converged, "{ranks} ranks: {report:?}");
        assert_eq!(
            report.status,
            gpuq_core::SolveStatus::AccuracyLimit,
            "{ranks} ranks"
        );
        assert!(report.residual_replacements >= 1 && report.relative_residual > 1e-10);
    }
}

#[test]
fn the_fused_product_and_dot_match_the_serial_ones_on_1_to_4_ranks() {
    use gpuq_core::{Backend, FusedDot};
    use gpuq_dist::DistMatrix;
    use gpuq_sparse::SparseBackend;
    let a = generators::laplace2d::<f64>(12);
    let n = a.nrows();
    let x: Vec<f64> = rhs(n);
    let w: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
    let y_serial = a.mul_vec(&x).unwrap();
    let d_serial: f64 = w.iter().zip(&y_serial).map(|(p, q)| p * q).sum();
    for ranks in 1..=4 {
        let partition = RowPartition::contiguous(n, ranks).unwrap();
        let parts = ThreadComm::run(ranks, |comm| {
            let rank = comm.rank();
            let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
            let rows = rows_of(&a, &partition, rank).unwrap();
            let m = DistMatrix::new(&dist, &partition, &rows, Layout::Csr).unwrap();
            let r = partition.range(rank);
            let xv = dist.upload(&x[r.clone()]).unwrap();
            let wv = dist.upload(&w[r.clone()]).unwrap();
            let mut y = dist.zeros::<f64>(r.len()).unwrap();
            let mut sc = dist.zeros::<f64>(3).unwrap();
            let dot = FusedDot {
                w: &wv,
                sc: &mut sc,
                slot: 1,
            };
            let fused = dist.spmv_dot(&m, &xv, &mut y, dot).unwrap();
            (
                fused,
                dist.download(&y).unwrap(),
                dist.download(&sc).unwrap(),
            )
        })
        .unwrap();
        let y: Vec<f64> = parts.iter().flat_map(|p| p.1.clone()).collect();
        let (err, _) = max_diff(&y, &y_serial);
        assert!(err <= 1e-14, "{ranks} ranks: y differs by {err}");
        for (fused, _, sc) in &parts {
            // the CPU fuses both halves on every rank: the summed dot everywhere
            assert!(*fused, "{ranks} ranks");
            assert!(
                (sc[1] - d_serial).abs() <= 1e-12 * d_serial.abs(),
                "{ranks} ranks: {} vs {d_serial}",
                sc[1]
            );
            assert_eq!((sc[0], sc[2]), (0.0, 0.0));
        }
    }
}
