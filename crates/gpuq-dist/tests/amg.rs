//! Distributed AMG on 1 to 4 ranks of threads against the one-process AMG:
//! one rank builds the one-process hierarchy bit for bit; more ranks reach
//! the tolerance (true residual checked) within 20% of its PCG iterations;
//! and MCSA over ranks reaches the tolerance as on one rank.

use gpuq_amg::{Amg, AmgOptions, CycleOptions, Hierarchy, LevelMatrix, Smoother};
use gpuq_core::{Backend, Error, LinearOperator, SolveReport};
use gpuq_cpu::CpuBackend;
use gpuq_dist::{
    mixed_dist_amg, rows_of, solve_matrix_with_precond, solve_rows_with_precond, Communicator,
    Dist, DistAmgOptions, DistHierarchy, DistSetupKernels, DistWalk, GhostRows, KeptAggregates,
    KeptProduct, KeptRows, OwnedTransfer, RankRows, RowPartition, ThreadComm,
};
use gpuq_krylov::{solve_csr_with_precond, KrylovOptions, Preconditioner, SolverConfig};
use gpuq_mcls::{mcsa, McOptions, McsaOptions, MonteCarlo};
use gpuq_sparse::generators::{laplace2d, laplace3d, ProblemSpec};
use gpuq_sparse::{Csr, Layout};
use std::sync::Arc;

fn cg(rtol: f64) -> SolverConfig {
    SolverConfig {
        options: KrylovOptions {
            rtol,
            ..KrylovOptions::default()
        },
        layout: Layout::Csr,
        ..SolverConfig::default()
    }
}

fn rhs(n: usize) -> Vec<f64> {
    (0..n).map(|i| 1.0 + ((i * 7) % 13) as f64 / 13.0).collect()
}

/// ||b - A x|| / ||b||.
fn true_residual(a: &Csr<f64>, x: &[f64], b: &[f64]) -> f64 {
    let ax = a.mul_vec(x).unwrap();
    let r: f64 = ax.iter().zip(b).map(|(p, q)| (q - p) * (q - p)).sum();
    let nb: f64 = b.iter().map(|v| v * v).sum();
    (r / nb).sqrt()
}

/// The one-process AMG-PCG report.
fn serial(a: &Csr<f64>, b: &[f64], o: &AmgOptions, rtol: f64) -> SolveReport {
    let cpu = CpuBackend::new();
    let h = Hierarchy::build(a, o).unwrap();
    let m = Amg::<CpuBackend, f64>::new(&cpu, &h, &CycleOptions::default()).unwrap();
    let (_, report) =
        solve_csr_with_precond(&cpu, a, b, &cg(rtol), Some(&m), &mut |_, _| {}).unwrap();
    report
}

/// AMG-PCG over `partition`'s ranks: the whole solution and every rank's
/// report (and the number of distributed levels). The near-null-space
/// vectors of `o`, if any, are whole: each rank gets its rows of them.
fn distributed(
    a: &Csr<f64>,
    b: &[f64],
    partition: &RowPartition,
    o: &DistAmgOptions,
    rtol: f64,
) -> (Vec<f64>, Vec<SolveReport>, usize) {
    let parts = ThreadComm::run(partition.ranks(), |comm| {
        let rank = comm.rank();
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(a, partition, rank).unwrap();
        let range = partition.range(rank);
        let mut o = o.clone();
        if let Some(v) = o.amg.near_null_space.as_mut() {
            v.iter_mut().for_each(|x| *x = x[range.clone()].to_vec());
        }
        let h = DistHierarchy::build(dist.comm(), partition, &rows, &o).unwrap();
        let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
        let m: &dyn LinearOperator<Dist<CpuBackend>, f64> = &m;
        let (x, report) =
            solve_rows_with_precond(&dist, partition, &rows, &b[range], &cg(rtol), Some(m))
                .unwrap();
        (x, report, h.levels().len())
    })
    .unwrap();
    let levels = parts[0].2;
    let mut x = Vec::new();
    let mut reports = Vec::new();
    for (xr, report, _) in parts {
        x.extend(xr);
        reports.push(report);
    }
    (x, reports, levels)
}

#[test]
fn one_rank_builds_the_one_process_hierarchy_bit_for_bit() {
    let a = laplace3d::<f64>(18);
    let o = DistAmgOptions {
        gather_below: 1,
        agglomerate: false,
        check_symmetry: false,
        amg: AmgOptions {
            coarse_size: 40,
            ..DistAmgOptions::default().amg
        },
    };
    let serial = Hierarchy::build(&a, &o.amg).unwrap();
    let p = RowPartition::contiguous(a.nrows(), 1).unwrap();
    let h = ThreadComm::run(1, |comm| DistHierarchy::build(&comm, &p, &a, &o).unwrap())
        .unwrap()
        .remove(0);
    let same = |x: &Csr<f64>, y: &Csr<f64>, what: &str| {
        assert_eq!(x.shape(), y.shape(), "{what}");
        assert_eq!(x.row_ptr(), y.row_ptr(), "{what}");
        assert_eq!(x.col_idx(), y.col_idx(), "{what}");
        assert_eq!(x.values(), y.values(), "{what}");
    };
    let levels = serial.levels();
    assert!(h.levels().len() >= 2, "{} levels", h.levels().len());
    for (k, l) in h.levels().iter().enumerate() {
        let s = &levels[k];
        same(&l.a().unwrap(), s.a.host().unwrap(), &format!("A{k}"));
        same(
            &l.p().unwrap(),
            s.p.as_ref().unwrap().host().unwrap(),
            &format!("P{k}"),
        );
        same(
            &l.r().unwrap(),
            s.r.as_ref().unwrap().host().unwrap(),
            &format!("R{k}"),
        );
        assert_eq!(l.rho, s.smoother.as_ref().unwrap().rho, "rho{k}");
    }
    let rest = &levels[h.levels().len()..];
    assert_eq!(h.tail().levels().len(), rest.len());
    for (t, s) in h.tail().levels().iter().zip(rest) {
        same(t.a.host().unwrap(), s.a.host().unwrap(), "gathered A");
    }
    same(h.tail().coarse_solve(), serial.coarse_solve(), "coarsest");
}

/// The coarsening rule is the one-process rule on every rank count: with a
/// threshold that keeps only a chain of strong couplings among rows of 41
/// entries, no distributed level holds more entries than the one above (the
/// level is coarsened again with every connection strong), and one rank
/// builds the one-process levels.
#[test]
fn distributed_levels_follow_the_one_process_coarsening_rule() {
    let a = gpuq_sparse::generators::chain_with_far_couplings(1500).unwrap();
    let o = DistAmgOptions {
        gather_below: 10,
        agglomerate: false,
        check_symmetry: false,
        amg: AmgOptions {
            strength: 0.01,
            coarse_size: 50,
            ..DistAmgOptions::default().amg
        },
    };
    let serial = Hierarchy::build(&a, &o.amg).unwrap();
    for ranks in 1..=3 {
        let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
        let h = ThreadComm::run(ranks, |comm| {
            let rows = rows_of(&a, &p, comm.rank()).unwrap();
            DistHierarchy::build(&comm, &p, &rows, &o).unwrap()
        })
        .unwrap()
        .remove(0);
        let nnz: Vec<usize> = h
            .levels()
            .iter()
            .map(|l| l.nnz)
            .chain(h.tail().levels().iter().map(|l| l.a.nnz()))
            .collect();
        assert!(!h.levels().is_empty(), "{ranks} ranks: {nnz:?}");
        assert!(
            nnz.windows(2).all(|w| w[1] <= w[0]),
            "{ranks} ranks: entries per level {nnz:?}"
        );
        if ranks == 1 {
            let one: Vec<usize> = serial.levels().iter().map(|l| l.a.nnz()).collect();
            assert_eq!(nnz, one);
        }
    }
}

/// A rank's distributed levels (their partitions and its rows of A) and the
/// gathered levels' finest matrix.
type RankLevels = (Vec<(RowPartition, Csr<f64>)>, Csr<f64>);

/// Every rank's [`RankLevels`], built over `ranks` ranks.
fn levels_over(a: &Csr<f64>, ranks: usize, o: &DistAmgOptions) -> Vec<RankLevels> {
    let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
    ThreadComm::run(ranks, |comm| {
        let rows = rows_of(a, &p, comm.rank()).unwrap();
        let h = DistHierarchy::build(&comm, &p, &rows, o).unwrap();
        let levels = h
            .levels()
            .iter()
            .map(|l| (l.partition.clone(), l.a().unwrap()))
            .collect();
        (levels, h.tail().levels()[0].a.host().unwrap().clone())
    })
    .unwrap()
}

#[test]
fn agglomerated_levels_hold_the_same_coarse_operator_on_fewer_ranks() {
    // laplace3d(22): about 1050 rows on level 1, 80-100 on level 2. Without
    // agglomeration a level of fewer than ranks x per_rank rows is gathered
    // onto every rank; with it, that level stays distributed on fewer ranks
    // (two of three with 400 a rank, two of four with 300), its rows those of
    // the gathered matrix (the same aggregates, P and numbering; R and
    // R (A P) on the groups' first ranks: the same pattern, the values to
    // rounding, as a rank sums its own columns first), the levels above it
    // the same; a level that would go to one rank (two ranks, or 600 a rank)
    // is gathered as without agglomeration.
    let a = laplace3d::<f64>(22);
    for (ranks, per_rank, holders) in [(3, 400, 2), (4, 300, 2), (2, 600, 1), (4, 600, 1)] {
        let o = DistAmgOptions {
            gather_below: per_rank,
            ..DistAmgOptions::default()
        };
        let on = DistAmgOptions {
            agglomerate: true,
            ..o.clone()
        };
        let gathered = levels_over(&a, ranks, &o);
        let agglomerated = levels_over(&a, ranks, &on);
        // Level j, gathered without agglomeration, is the first agglomerated.
        let (j, whole) = (gathered[0].0.len(), &gathered[0].1);
        let levels = &agglomerated[0].0;
        if holders == 1 {
            assert_eq!(levels.len(), j, "{ranks} ranks, {per_rank} a rank");
            assert_eq!(&agglomerated[0].1, whole);
            continue;
        }
        assert!(
            levels.len() > j,
            "{ranks} ranks: {} distributed levels",
            levels.len()
        );
        for (l, (part, _)) in levels.iter().enumerate() {
            assert_eq!(
                part.active_ranks() < ranks,
                l >= j,
                "{ranks} ranks, level {l}"
            );
        }
        let part = &levels[j].0;
        assert_eq!(part.rows(), whole.nrows());
        assert_eq!(part.active_ranks(), holders);
        for (r, (mine, _)) in agglomerated.iter().enumerate() {
            let (x, y) = (&mine[j].1, rows_of(whole, part, r).unwrap());
            assert_eq!(x.shape(), y.shape());
            assert_eq!((x.row_ptr(), x.col_idx()), (y.row_ptr(), y.col_idx()));
            let scale = y.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (u, v) in x.values().iter().zip(y.values()) {
                assert!(
                    (u - v).abs() <= 1e-14 * scale,
                    "{ranks} ranks, rank {r}: {u} vs {v}"
                );
            }
        }
        // The gathered levels below are fewer than 2 gather_below rows.
        assert!(agglomerated[0].1.nrows() < 2 * on.gather_below);
    }
}

#[test]
fn pcg_with_agglomerated_levels_on_1_to_4_ranks_reaches_the_tolerance() {
    // Level 1 (about 1050 rows) onto two of four ranks (300 a rank), or two
    // of three or four (400).
    let a = laplace3d::<f64>(22);
    let b = rhs(a.nrows());
    for per_rank in [300, 400] {
        let o = DistAmgOptions {
            gather_below: per_rank,
            agglomerate: true,
            ..DistAmgOptions::default()
        };
        pcg_on_1_to_4_ranks(&a, &b, &o);
    }
}

/// With the one-process cycle's smoothers across ranks: damped Jacobi (the
/// distributed default) and Chebyshev (the one-process default).
#[test]
fn pcg_with_distributed_amg_on_1_to_4_ranks_reaches_the_tolerance() {
    let a = laplace3d::<f64>(22);
    let b = rhs(a.nrows());
    for smoother in [Smoother::Jacobi, Smoother::Chebyshev { degree: 3 }] {
        let o = DistAmgOptions {
            gather_below: 150,
            agglomerate: false,
            check_symmetry: false,
            amg: AmgOptions {
                smoother: Some(smoother),
                ..DistAmgOptions::default().amg
            },
        };
        pcg_on_1_to_4_ranks(&a, &b, &o);
    }
}

/// The solve's operator taken from the hierarchy's finest level
/// (`DistHierarchy::finest_matrix`, no second split of the rows) gives the
/// solve from the rows bit for bit, in CSR and SELL, on 1 to 4 ranks; QMR
/// and an operator of another partition are errors on every rank, and
/// `DistHierarchy::solve_operator` leaves QMR and complex rows to the rows'
/// path.
#[test]
fn the_finest_level_as_the_operator_solves_as_the_rows_do() {
    let a = laplace3d::<f64>(14);
    let b = rhs(a.nrows());
    let o = DistAmgOptions {
        gather_below: 60,
        ..DistAmgOptions::default()
    };
    for ranks in 1..=4 {
        let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
        // The same ranks, one row moved from the last to the first.
        let mut counts: Vec<usize> = (0..ranks).map(|r| p.range(r).len()).collect();
        counts[0] += 1;
        counts[ranks - 1] -= 1;
        let other = RowPartition::from_counts(&counts).unwrap();
        ThreadComm::run(ranks, |comm| {
            let rank = comm.rank();
            let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
            let rows = rows_of(&a, &p, rank).unwrap();
            let h = DistHierarchy::build(dist.comm(), &p, &rows, &o).unwrap();
            assert!(!h.levels().is_empty(), "{ranks} ranks: nothing distributed");
            let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
            let m: &dyn LinearOperator<Dist<CpuBackend>, f64> = &m;
            let rhs = &b[p.range(rank)];
            for layout in [Layout::Csr, Layout::Sell { c: 8, sigma: 1 }] {
                let config = SolverConfig { layout, ..cg(1e-8) };
                let (x0, r0) =
                    solve_rows_with_precond(&dist, &p, &rows, rhs, &config, Some(m)).unwrap();
                let finest = h
                    .solve_operator::<CpuBackend, f64>(&dist, layout, config.method)
                    .unwrap();
                let (x1, r1) =
                    solve_matrix_with_precond(&dist, &p, finest.unwrap(), rhs, &config, Some(m))
                        .unwrap();
                assert_eq!(x0, x1, "{ranks} ranks, {layout:?}");
                assert_eq!(r0.iterations, r1.iterations);
                assert!(r1.converged);
            }
            let qmr = SolverConfig {
                method: gpuq_krylov::Method::Qmr,
                ..cg(1e-8)
            };
            // QMR (A^T) and complex rows (the setup took real parts) take
            // the rows' path.
            let none = h.solve_operator::<CpuBackend, f64>(&dist, Layout::Csr, qmr.method);
            assert!(none.unwrap().is_none());
            let complex = h.solve_operator::<CpuBackend, gpuq_core::Complex<f64>>(
                &dist,
                Layout::Csr,
                gpuq_krylov::Method::Cg,
            );
            assert!(complex.unwrap().is_none());
            let finest = h.finest_matrix::<CpuBackend, f64>(&dist, Layout::Csr);
            let refused =
                solve_matrix_with_precond(&dist, &p, finest.unwrap().unwrap(), rhs, &qmr, None);
            // Without the setup's symmetry check (`check_symmetry` off) the
            // distributed cycle offers no transpose, and says so.
            let mut y = dist.zeros(rhs.len()).unwrap();
            let t = m.apply_transpose(&dist.upload(rhs).unwrap(), &mut y);
            let t = t.unwrap_err().to_string();
            assert!(
                t.contains("dist-amg") && t.contains("not known to be symmetric"),
                "{t}"
            );
            assert!(refused.unwrap_err().to_string().contains("QMR"));
            // The operator does not fit another partition (its rows and
            // right-hand side of that partition's length).
            let finest = h.finest_matrix::<CpuBackend, f64>(&dist, Layout::Csr);
            let theirs = vec![1.0; other.range(rank).len()];
            let misfit = solve_matrix_with_precond(
                &dist,
                &other,
                finest.unwrap().unwrap(),
                &theirs,
                &cg(1e-8),
                Some(m),
            );
            assert_eq!(misfit.is_err(), ranks > 1, "{ranks} ranks");
        })
        .unwrap();
    }
}

/// With `DistAmgOptions::check_symmetry`, the setup judges A's symmetry
/// across ranks as one process judges it: on 1 to 4 ranks a Laplacian is
/// symmetric, its cycle is its own transpose and QMR with it converges; the
/// Laplacian with one entry changed, its partner on another rank (on one
/// rank, the same), is not, and its cycle's transpose is an error; a
/// hierarchy gathered whole takes the one-process setup's answer; without
/// the check the answer is `None`.
#[test]
fn qmr_takes_the_distributed_cycle_where_the_setup_checked_symmetry() {
    let a = laplace3d::<f64>(14);
    let n = a.nrows();
    let b = rhs(n);
    // Entry (i, j) (z-neighbours, on two ranks of every split) made larger
    // than its partner.
    let skewed = |(i, j): (usize, usize)| {
        let mut s = a.clone();
        let at = a.row_ptr()[i] + a.row(i).0.iter().position(|&c| c as usize == j).unwrap();
        s.values_mut()[at] *= 1.5;
        s
    };
    let checked = DistAmgOptions {
        gather_below: 60,
        check_symmetry: true,
        ..DistAmgOptions::default()
    };
    let qmr = SolverConfig {
        method: gpuq_krylov::Method::Qmr,
        ..cg(1e-8)
    };
    for ranks in 1..=4 {
        let p = RowPartition::contiguous(n, ranks).unwrap();
        let pair = if ranks == 3 {
            (1700, 1896)
        } else {
            (1300, 1496)
        };
        assert!(ranks == 1 || p.owner(pair.0) != p.owner(pair.1));
        let skewed = skewed(pair);
        ThreadComm::run(ranks, |comm| {
            let rank = comm.rank();
            let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
            let rows = rows_of(&a, &p, rank).unwrap();
            let h = DistHierarchy::build(dist.comm(), &p, &rows, &checked).unwrap();
            assert!(!h.levels().is_empty(), "{ranks} ranks: nothing distributed");
            assert_eq!(h.is_symmetric(), Some(true), "{ranks} ranks");
            let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
            let m: &dyn LinearOperator<Dist<CpuBackend>, f64> = &m;
            let rhs = &b[p.range(rank)];
            let x = dist.upload(rhs).unwrap();
            let (mut y, mut yt) = (
                dist.zeros(rhs.len()).unwrap(),
                dist.zeros(rhs.len()).unwrap(),
            );
            m.apply(&x, &mut y).unwrap();
            m.apply_transpose(&x, &mut yt).unwrap();
            assert_eq!(dist.download(&y).unwrap(), dist.download(&yt).unwrap());
            let (_, report) =
                solve_rows_with_precond(&dist, &p, &rows, rhs, &qmr, Some(m)).unwrap();
            assert!(report.converged, "{ranks} ranks: QMR {report:?}");
            // Not symmetric: the cycle has no transpose.
            let rows = rows_of(&skewed, &p, rank).unwrap();
            let h = DistHierarchy::build(dist.comm(), &p, &rows, &checked).unwrap();
            assert_eq!(h.is_symmetric(), Some(false), "{ranks} ranks");
            let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
            let t = m.apply_transpose(&x, &mut yt).unwrap_err().to_string();
            assert!(t.contains("not known to be symmetric"), "{t}");
            // Gathered whole, the one-process setup's check; unchecked, None.
            let gathered = DistAmgOptions {
                gather_below: n + 1,
                ..checked.clone()
            };
            let h = DistHierarchy::build(dist.comm(), &p, &rows, &gathered).unwrap();
            assert!(h.levels().is_empty());
            assert_eq!(h.is_symmetric(), Some(false));
            let unchecked = DistAmgOptions {
                check_symmetry: false,
                ..checked.clone()
            };
            let h = DistHierarchy::build(dist.comm(), &p, &rows, &unchecked).unwrap();
            assert_eq!(h.is_symmetric(), None);
            // The options for QMR check; for CG they are left as given.
            assert!(
                unchecked
                    .clone()
                    .for_method(gpuq_krylov::Method::Qmr)
                    .check_symmetry
            );
            assert!(!unchecked.for_method(gpuq_krylov::Method::Cg).check_symmetry);
        })
        .unwrap();
    }
}

/// AMG-PCG with `o` on 1 to 4 ranks against one process: converged by the
/// true residual, within 20% of one process's iterations (within one on one
/// rank).
fn pcg_on_1_to_4_ranks(a: &Csr<f64>, b: &[f64], o: &DistAmgOptions) {
    let one = serial(a, b, &o.amg, 1e-8);
    for ranks in 1..=4 {
        let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
        let (x, reports, levels) = distributed(a, b, &p, o, 1e-8);
        assert!(levels >= 2, "{ranks} ranks: {levels} distributed levels");
        let its = reports[0].iterations;
        for r in &reports {
            assert!(r.converged, "{ranks} ranks: {:?}", r.status);
            assert_eq!(r.iterations, its);
        }
        let res = true_residual(a, &x, b);
        assert!(res <= 1e-8, "{ranks} ranks: true residual {res:e}");
        assert!(
            its * 10 <= one.iterations * 12,
            "{ranks} ranks: {its} iterations, one process {}",
            one.iterations
        );
        if ranks == 1 {
            assert!(its.abs_diff(one.iterations) <= 1);
        }
    }
}

/// CG as GPU ranks run it, on CPU ranks (`Dist::with_look_ahead(1)`: the
/// scalars on the backend, each iteration's snapshot read while the next is
/// queued, the slots summed over ranks): with the distributed AMG (a
/// preconditioner without a diagonal, applied inside the queued iteration)
/// and with Jacobi (folded into the residual step), against the host-scalar
/// solve of the same ranks: the same iterations within one, the tolerance
/// met by the true residual.
#[test]
fn queued_cg_over_ranks_matches_the_host_scalar_solve() {
    let a = laplace3d::<f64>(16);
    let b = rhs(a.nrows());
    let o = DistAmgOptions {
        gather_below: 150,
        ..DistAmgOptions::default()
    };
    let jacobi = SolverConfig {
        precond: Preconditioner::Jacobi,
        ..cg(1e-8)
    };
    for ranks in [1, 3] {
        let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
        for amg in [true, false] {
            let runs: Vec<(Vec<f64>, SolveReport)> = [0, 1]
                .into_iter()
                .map(|ahead| {
                    let parts = ThreadComm::run(ranks, |comm| {
                        let rank = comm.rank();
                        let dist =
                            Dist::new(CpuBackend::new(), Arc::new(comm)).with_look_ahead(ahead);
                        let rows = rows_of(&a, &p, rank).unwrap();
                        let bs = &b[p.range(rank)];
                        if amg {
                            let h = DistHierarchy::build(dist.comm(), &p, &rows, &o).unwrap();
                            let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
                            let m: &dyn LinearOperator<Dist<CpuBackend>, f64> = &m;
                            solve_rows_with_precond(&dist, &p, &rows, bs, &cg(1e-8), Some(m))
                        } else {
                            solve_rows_with_precond(&dist, &p, &rows, bs, &jacobi, None)
                        }
                        .unwrap()
                    })
                    .unwrap();
                    // Every rank read the same summed scalars.
                    for (_, r) in &parts {
                        assert_eq!(r.residual_history, parts[0].1.residual_history);
                    }
                    let x = parts.iter().flat_map(|(x, _)| x.clone()).collect();
                    (x, parts[0].1.clone())
                })
                .collect();
            for (x, report) in &runs {
                assert!(report.converged, "{ranks} ranks, amg {amg}: {report:?}");
                let res = true_residual(&a, x, &b);
                assert!(
                    res <= 1e-8,
                    "{ranks} ranks, amg {amg}: true residual {res:e}"
                );
            }
            let its = (runs[0].1.iterations, runs[1].1.iterations);
            assert!(
                its.0.abs_diff(its.1) <= 1,
                "{ranks} ranks, amg {amg}: {its:?}"
            );
            // The same global residual norms, iteration by iteration.
            let (h0, h1) = (&runs[0].1.residual_history, &runs[1].1.residual_history);
            for (k, (u, v)) in h0.iter().zip(h1).enumerate() {
                assert!(
                    (u - v).abs() <= 1e-6 * u.abs().max(1e-12),
                    "{ranks} ranks, amg {amg}, iteration {k}: ||r|| {u:e} against {v:e}"
                );
            }
        }
    }
}

#[test]
fn an_f32_cycle_preconditions_an_f64_solve_across_ranks() {
    let a = laplace3d::<f64>(20);
    let b = rhs(a.nrows());
    let o = DistAmgOptions {
        gather_below: 150,
        ..DistAmgOptions::default()
    };
    let one = serial(&a, &b, &o.amg, 1e-8);
    let p = RowPartition::contiguous(a.nrows(), 3).unwrap();
    let parts = ThreadComm::run(3, |comm| {
        let rank = comm.rank();
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        let rows = rows_of(&a, &p, rank).unwrap();
        let h = DistHierarchy::build(dist.comm(), &p, &rows, &o).unwrap();
        let m = mixed_dist_amg::<CpuBackend, f64, f32>(&dist, &h, Layout::Csr).unwrap();
        let m: &dyn LinearOperator<Dist<CpuBackend>, f64> = &m;
        solve_rows_with_precond(&dist, &p, &rows, &b[p.range(rank)], &cg(1e-8), Some(m)).unwrap()
    })
    .unwrap();
    let report = &parts[0].1;
    let x: Vec<f64> = parts.iter().flat_map(|(x, _)| x.clone()).collect();
    assert!(report.converged);
    assert!(true_residual(&a, &x, &b) <= 1e-8);
    assert!(
        report.iterations * 10 <= one.iterations * 12,
        "{} iterations with the f32 cycle, one process {}",
        report.iterations,
        one.iterations
    );
}

#[test]
fn block_systems_and_l1_jacobi_run_distributed() {
    // The 2D elasticity system (two unknowns per node) with the constants of
    // each component, partitioned on node boundaries.
    let g = ProblemSpec::parse("elasticity2d:24")
        .unwrap()
        .build::<f64>()
        .unwrap();
    let (a, b) = (g.matrix, g.rhs.unwrap());
    let o = DistAmgOptions {
        gather_below: 100,
        agglomerate: false,
        check_symmetry: false,
        amg: AmgOptions {
            block: 2,
            smoother: Some(Smoother::L1Jacobi),
            ..AmgOptions::default()
        },
    };
    within_the_serial_solve(&a, &b, &o);
}

#[test]
fn block3_elasticity_with_rigid_body_modes_runs_distributed() {
    // 3D elasticity (three unknowns per node) with its six rigid-body modes,
    // partitioned on node boundaries; the gathered levels have six unknowns
    // per node.
    let e = gpuq_sparse::elasticity3d::Elasticity3d::new(8).unwrap();
    let (a, b) = (e.stiffness::<f64>(), e.load::<f64>());
    let modes = gpuq_amg::rigid_body_modes(&e.free_coordinates()).unwrap();
    let o = DistAmgOptions {
        gather_below: 300,
        agglomerate: false,
        check_symmetry: false,
        amg: AmgOptions {
            block: 3,
            near_null_space: Some(modes),
            ..DistAmgOptions::default().amg
        },
    };
    within_the_serial_solve(&a, &b, &o);
}

/// AMG-PCG over 2 and 3 ranks (partitioned on node boundaries) reaches the
/// true residual 1e-8 in at most 1.2x the one-process solve's iterations.
fn within_the_serial_solve(a: &Csr<f64>, b: &[f64], o: &DistAmgOptions) {
    let one = serial(a, b, &o.amg, 1e-8);
    for ranks in [2, 3] {
        let p = RowPartition::blocks(a.nrows(), ranks, o.amg.block).unwrap();
        let (x, reports, levels) = distributed(a, b, &p, o, 1e-8);
        assert!(levels >= 1);
        assert!(reports[0].converged);
        let res = true_residual(a, &x, b);
        assert!(res <= 1e-8, "{ranks} ranks: true residual {res:e}");
        assert!(
            reports[0].iterations * 10 <= one.iterations * 12,
            "{ranks} ranks: {} iterations, one process {}",
            reports[0].iterations,
            one.iterations
        );
    }
}

/// Every rank's outcome of building the hierarchy of `a` on `p`'s ranks.
fn build_on_ranks(a: &Csr<f64>, p: &RowPartition, o: &DistAmgOptions) -> Vec<Result<(), Error>> {
    ThreadComm::run(p.ranks(), |comm| {
        let rows = rows_of(a, p, comm.rank()).unwrap();
        DistHierarchy::build(&comm, p, &rows, o).map(|_| ())
    })
    .unwrap()
}

#[test]
fn bad_input_is_an_error_on_every_rank() {
    let a = laplace2d::<f64>(12);
    // Rows split inside a 2x2 block.
    let p = RowPartition::from_counts(&[71, 73]).unwrap();
    let o = DistAmgOptions {
        amg: AmgOptions {
            block: 2,
            ..DistAmgOptions::default().amg
        },
        ..DistAmgOptions::default()
    };
    let out = build_on_ranks(&a, &p, &o);
    assert!(out
        .iter()
        .all(|r| matches!(r, Err(Error::InvalidArgument(_)))));
    // A smoother the distributed levels do not take.
    let p = RowPartition::contiguous(a.nrows(), 2).unwrap();
    let o = DistAmgOptions {
        amg: AmgOptions {
            smoother: Some(Smoother::GaussSeidel),
            ..AmgOptions::default()
        },
        ..DistAmgOptions::default()
    };
    let out = build_on_ranks(&a, &p, &o);
    for r in out {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("not distributed"), "{e}");
    }
}

#[test]
fn mcsa_over_1_to_4_ranks_reaches_the_tolerance() {
    let a = laplace2d::<f64>(12);
    let b = rhs(a.nrows());
    let opts = McsaOptions {
        tolerance: 1e-8,
        inner: McOptions {
            histories: 4_000,
            ..McsaOptions::default().inner
        },
        ..McsaOptions::default()
    };
    let cpu = CpuBackend::new();
    let one = mcsa(
        &MonteCarlo::new(&cpu, &a, opts.inner.layout).unwrap(),
        &b,
        &opts,
    )
    .unwrap();
    assert!(one.1.converged);
    for ranks in 1..=4 {
        let runs = ThreadComm::run(ranks, |c| {
            let w = DistWalk::new(CpuBackend::new(), Arc::new(c));
            let mc = MonteCarlo::new(&w, &a, opts.inner.layout).unwrap();
            mcsa(&mc, &b, &opts).unwrap()
        })
        .unwrap();
        for (x, report) in &runs {
            assert!(report.converged, "{ranks} ranks");
            assert!(
                report.iterations * 10 <= one.1.iterations * 12,
                "{ranks} ranks: {} iterations, one rank {}",
                report.iterations,
                one.1.iterations
            );
            assert!(true_residual(&a, x, &b) <= 1e-8);
        }
    }
}

/// A [`DistSetupKernels`] that runs the steps itself on the host, as a device
/// backend would (the stacked operand built, one product of the whole), and
/// counts its calls.
struct CountingSetup {
    products: std::sync::atomic::AtomicUsize,
    aggregations: std::sync::atomic::AtomicUsize,
    prolongators: std::sync::atomic::AtomicUsize,
    /// Products and smoothings handed the rows kept for their A.
    given_kept: std::sync::atomic::AtomicUsize,
}

/// What [`CountingSetup`] keeps of a level: its rows and D^-1's blocks.
type Kept = (Csr<f64>, Vec<f64>);

impl DistSetupKernels for CountingSetup {
    /// The rows' extended form made on the host when first asked for (the
    /// split leaves it out, as for the CUDA backend).
    fn keep_rows(
        &self,
        a: &RankRows<'_>,
        dinv: &gpuq_amg::blockdiag::BlockDiagonal,
    ) -> Result<KeptRows, Error> {
        Ok(KeptRows::new((
            a.extended()?.clone(),
            dinv.blocks()?.to_vec(),
        )))
    }

    /// The owned block is cut from the kept rows (the host's split leaves
    /// it out).
    fn keeps_owned_block(&self) -> bool {
        true
    }

    fn owned_block(&self, kept: &KeptRows) -> Option<LevelMatrix> {
        let (rows, _) = kept.get::<Kept>()?;
        let n = rows.nrows();
        let mut owned = gpuq_sparse::Coo::new(n, n);
        for i in 0..n {
            for (&j, &v) in rows.row(i).0.iter().zip(rows.row(i).1) {
                if (j as usize) < n {
                    owned.push(i, j as usize, v).unwrap();
                }
            }
        }
        Some(LevelMatrix::from_host(Csr::from_coo(&owned).unwrap()))
    }

    fn owned_aggregates(
        &self,
        owned: &LevelMatrix,
        bs: usize,
        eps: f64,
    ) -> Result<Option<gpuq_amg::aggregate::Aggregation>, Error> {
        use gpuq_amg::{aggregate, strength};
        self.aggregations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let s = strength::strong_graph(&strength::norm_matrix(owned.host()?, bs)?, eps)?;
        let (agg, naggs) = aggregate::mis2_aggregates(&s);
        Ok(Some((agg, naggs, aggregate::isolated_nodes(&s))))
    }

    fn stacked_product(
        &self,
        a: &Csr<f64>,
        kept: &KeptRows,
        parts: &[&Csr<f64>],
        ncols: usize,
    ) -> Result<Option<Csr<f64>>, Error> {
        self.products
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some((rows, _)) = kept.get::<Kept>() {
            assert_eq!(rows, a, "the rows kept are not the product's A");
            self.given_kept
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let rows: Vec<(&[u32], &[f64])> = parts
            .iter()
            .flat_map(|p| (0..p.nrows()).map(move |i| p.row(i)))
            .collect();
        assert!(rows
            .iter()
            .all(|(c, _)| c.iter().all(|&j| (j as usize) < ncols)));
        gpuq_amg::galerkin::spgemm_rows(a, ncols, |k| rows[k]).map(Some)
    }

    fn smoothed_prolongator(
        &self,
        a: &RankRows<'_>,
        dinv: &gpuq_amg::blockdiag::BlockDiagonal,
        kept: &KeptRows,
        rho: f64,
        (own, ghost): (&LevelMatrix, &Csr<f64>),
    ) -> Result<Option<LevelMatrix>, Error> {
        let (own, a) = (own.host()?, a.extended()?);
        self.prolongators
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (rows, blocks) = kept.get::<Kept>().expect("the level's rows kept");
        assert_eq!((rows, &blocks[..]), (a, dinv.blocks().unwrap()));
        self.given_kept
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pt = stacked(a, own, ghost)?;
        gpuq_amg::prolong::smooth(a, dinv, rho, &pt).map(|p| Some(LevelMatrix::from_host(p)))
    }
}

/// The tentative prolongator's rows `own` and ghost rows `ghost` stacked
/// into one matrix, a row per column of `a` (the rank's rows over owned
/// then ghost columns).
fn stacked(a: &Csr<f64>, own: &Csr<f64>, ghost: &Csr<f64>) -> Result<Csr<f64>, Error> {
    assert_eq!(
        (own.ncols(), own.nrows() + ghost.nrows()),
        (ghost.ncols(), a.ncols())
    );
    let ptr: Vec<usize> = own.row_ptr()[..own.nrows()]
        .iter()
        .copied()
        .chain(ghost.row_ptr().iter().map(|&e| e + own.nnz()))
        .collect();
    Csr::try_new(
        a.ncols(),
        own.ncols(),
        ptr,
        [own.col_idx(), ghost.col_idx()].concat(),
        [own.values(), ghost.values()].concat(),
    )
}

/// Ranks whose backends take different paths (one on the host, the others
/// keeping their rows and cutting the owned block themselves) still pair
/// every collective, and build the host's hierarchy.
#[test]
fn ranks_on_different_backends_build_the_host_hierarchy() {
    let a = laplace3d::<f64>(16);
    let o = DistAmgOptions {
        gather_below: 150,
        ..DistAmgOptions::default()
    };
    for ranks in [2, 3] {
        let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
        let built = ThreadComm::run(ranks, |comm| {
            let rows = rows_of(&a, &p, comm.rank()).unwrap();
            let host = DistHierarchy::build(&comm, &p, &rows, &o).unwrap();
            let counting = CountingSetup {
                products: Default::default(),
                aggregations: Default::default(),
                prolongators: Default::default(),
                given_kept: Default::default(),
            };
            let cpu = CpuBackend::new();
            let local: &dyn DistSetupKernels = match comm.rank() {
                0 => &cpu,
                _ => &counting,
            };
            let mixed = DistHierarchy::build_on(local, &comm, &p, &rows, &o).unwrap();
            (host, mixed)
        })
        .unwrap();
        for (host, mixed) in &built {
            assert_eq!(host.levels().len(), mixed.levels().len());
            for (x, y) in host.levels().iter().zip(mixed.levels()) {
                assert_eq!(
                    (x.rho, x.a().unwrap(), x.p().unwrap(), x.r().unwrap()),
                    (y.rho, y.a().unwrap(), y.p().unwrap(), y.r().unwrap())
                );
            }
        }
    }
}

#[test]
fn a_local_setup_builds_the_host_hierarchy_on_every_rank() {
    let a = laplace3d::<f64>(20);
    let o = DistAmgOptions {
        gather_below: 200,
        ..DistAmgOptions::default()
    };
    for ranks in [1, 3] {
        let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
        let built = ThreadComm::run(ranks, |comm| {
            let rows = rows_of(&a, &p, comm.rank()).unwrap();
            let host = DistHierarchy::build(&comm, &p, &rows, &o).unwrap();
            let local = CountingSetup {
                products: Default::default(),
                aggregations: Default::default(),
                prolongators: Default::default(),
                given_kept: Default::default(),
            };
            let hooked = DistHierarchy::build_on(&local, &comm, &p, &rows, &o).unwrap();
            (host, hooked, local)
        })
        .unwrap();
        for (host, hooked, local) in &built {
            let levels = host.levels().len();
            assert!(levels >= 1, "{ranks} ranks: nothing distributed");
            assert_eq!(hooked.levels().len(), levels);
            // Two products and at least one aggregation per distributed level.
            assert_eq!(
                local.products.load(std::sync::atomic::Ordering::Relaxed),
                2 * levels
            );
            assert!(
                local
                    .aggregations
                    .load(std::sync::atomic::Ordering::Relaxed)
                    >= levels
            );
            // One smoothed prolongator per distributed level.
            let smoothed = local
                .prolongators
                .load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(smoothed, levels);
            // Each level's smoothing and A P (not R (A P)) were handed its
            // kept rows.
            let given = local.given_kept.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(given, 2 * levels);
            for (x, y) in host.levels().iter().zip(hooked.levels()) {
                assert_eq!(x.a().unwrap(), y.a().unwrap());
                assert_eq!(x.p().unwrap(), y.p().unwrap());
                assert_eq!(x.r().unwrap(), y.r().unwrap());
            }
            assert_eq!(host.tail().coarse_solve(), hooked.tail().coarse_solve());
        }
    }
}

/// A [`DistSetupKernels`] that keeps A P "on the backend" as a device
/// backend does (here: whole, on the host, stored away from the setup),
/// and counts the products R (A P) made from it and the rows of A P other
/// ranks needed, which it gives from its copy; it makes P and holds it as
/// a resident matrix of its own ([`Held`], as a device holds its copy),
/// takes that P for A P and makes the owned blocks of P and R from it
/// (a P it does not hold, it leaves to the host), and counts those. R (A P)
/// it holds too, as the next level's rows, and a copy of the caller's rows
/// as the finest level's: their entries outside the rank's columns, their
/// diagonal blocks and (R (A P)'s) zero rows come from its copy (counted),
/// everything else from the host copy the setup asks for (the caller's
/// rows for the finest level).
#[derive(Default)]
struct KeepingSetup {
    left_products: std::sync::atomic::AtomicUsize,
    fetched_rows: std::sync::atomic::AtomicUsize,
    kept_p_uses: std::sync::atomic::AtomicUsize,
    held_rows_uses: std::sync::atomic::AtomicUsize,
}

/// A P as [`KeepingSetup`] keeps it, with the counters of its uses and of
/// the rows fetched from it for other ranks.
struct HostKept<'s> {
    ap: Csr<f64>,
    uses: &'s std::sync::atomic::AtomicUsize,
    fetched: &'s std::sync::atomic::AtomicUsize,
}

impl KeptProduct for HostKept<'_> {
    fn left_product(
        &self,
        (owned, ghost): (&LevelMatrix, &GhostRows),
        below: &Csr<f64>,
    ) -> Result<LevelMatrix, Error> {
        self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let r = &owned.host()?.beside(&ghost.to_csr()?)?;
        assert_eq!(below.ncols(), self.ap.ncols());
        let n = self.ap.nrows();
        let c = gpuq_amg::galerkin::spgemm_rows(r, self.ap.ncols(), |k| {
            if k < n {
                self.ap.row(k)
            } else {
                below.row(k - n)
            }
        })?;
        Ok(held_matrix(c))
    }

    fn rows(&self, idx: &[usize]) -> Result<Option<Csr<f64>>, Error> {
        self.fetched
            .fetch_add(idx.len(), std::sync::atomic::Ordering::Relaxed);
        self.ap.select_rows(idx).map(Some)
    }
}

/// A matrix as [`KeepingSetup`] holds it (P, or the rank's rows of R (A
/// P)): a resident matrix the setup downloads when it asks for the host
/// copy.
struct Held(Csr<f64>);

/// `m` held by [`KeepingSetup`] only (no host copy).
fn held_matrix(m: Csr<f64>) -> LevelMatrix {
    let (shape, nnz) = (m.shape(), m.nnz());
    LevelMatrix::from_resident(shape, nnz, Arc::new(Held(m)))
}

impl gpuq_amg::ResidentMatrix for Held {
    fn download(&self) -> Result<Csr<f64>, Error> {
        Ok(self.0.clone())
    }

    fn row_lengths(&self) -> Result<Vec<u32>, Error> {
        Ok((0..self.0.nrows())
            .map(|i| self.0.row(i).0.len() as u32)
            .collect())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The entries of `a` whose column j maps to `col(j)` (the others left
/// out), as a matrix of `ncols` columns, rows and order kept.
fn entries_on(
    a: &Csr<f64>,
    ncols: usize,
    col: impl Fn(usize) -> Option<usize>,
) -> Result<Csr<f64>, Error> {
    let mut kept = gpuq_sparse::Coo::new(a.nrows(), ncols);
    for i in 0..a.nrows() {
        let (c, v) = a.row(i);
        for (&j, &x) in c.iter().zip(v) {
            if let Some(k) = col(j as usize) {
                kept.push(i, k, x)?;
            }
        }
    }
    Csr::from_coo(&kept)
}

/// The rows of `p` where [`KeepingSetup`] holds them.
fn held(p: &LevelMatrix) -> Option<&Csr<f64>> {
    Some(&p.resident()?.as_any().downcast_ref::<Held>()?.0)
}

impl DistSetupKernels for KeepingSetup {
    fn hold_rows(&self, rows: &Csr<f64>) -> Result<Option<LevelMatrix>, Error> {
        Ok(Some(held_matrix(rows.clone())))
    }

    fn outside_entries(
        &self,
        a: &LevelMatrix,
        own: std::ops::Range<usize>,
    ) -> Result<Option<GhostRows>, Error> {
        let Some(a) = held(a) else {
            return Ok(None);
        };
        self.held_rows_uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let outside = entries_on(a, a.ncols(), |j| (!own.contains(&j)).then_some(j))?;
        GhostRows::of_csr(&outside).map(Some)
    }

    fn block_diagonal(
        &self,
        a: &LevelMatrix,
        first: usize,
        bs: usize,
    ) -> Result<Option<gpuq_amg::blockdiag::BlockDiagonal>, Error> {
        let Some(a) = held(a) else {
            return Ok(None);
        };
        self.held_rows_uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The blocks from the owned block alone, as a device finds them.
        let own = first..first + a.nrows();
        let owned = entries_on(a, a.nrows(), |j| own.contains(&j).then(|| j - first))?;
        Ok(Some(gpuq_amg::blockdiag::BlockDiagonal::of(
            &owned, bs, false,
        )))
    }

    fn zero_rows(&self, a: &LevelMatrix) -> Result<Option<Vec<usize>>, Error> {
        let Some(a) = held(a) else {
            return Ok(None);
        };
        self.held_rows_uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(
            (0..a.nrows())
                .filter(|&i| a.row(i).1.iter().all(|&v| v == 0.0))
                .collect(),
        ))
    }

    fn smoothed_prolongator(
        &self,
        a: &RankRows<'_>,
        dinv: &gpuq_amg::blockdiag::BlockDiagonal,
        _kept: &KeptRows,
        rho: f64,
        (own, ghost): (&LevelMatrix, &Csr<f64>),
    ) -> Result<Option<LevelMatrix>, Error> {
        let (own, a) = (own.host()?, a.extended()?);
        let p = gpuq_amg::prolong::smooth(a, dinv, rho, &stacked(a, own, ghost)?)?;
        Ok(Some(held_matrix(p)))
    }

    fn owned_transfer(
        &self,
        p: &LevelMatrix,
        cols: std::ops::Range<usize>,
    ) -> Result<Option<OwnedTransfer>, Error> {
        let Some(p) = held(p) else {
            return Ok(None);
        };
        self.kept_p_uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let owned = entries_on(p, cols.len(), |j| cols.contains(&j).then(|| j - cols.start))?;
        let outside = entries_on(p, p.ncols(), |j| (!cols.contains(&j)).then_some(j))?;
        let r = owned.transpose(false);
        Ok(Some(OwnedTransfer {
            p: LevelMatrix::from_host(owned),
            r: LevelMatrix::from_host(r),
            outside: GhostRows::of_csr(&outside)?,
        }))
    }

    fn kept_product(
        &self,
        a: &RankRows<'_>,
        _kept: &KeptRows,
        (p, ghosts): (&LevelMatrix, &Csr<f64>),
        ncols: usize,
    ) -> Result<Option<Box<dyn KeptProduct + '_>>, Error> {
        let Some(top) = held(p) else {
            return Ok(None);
        };
        self.kept_p_uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rows: Vec<(&[u32], &[f64])> = [top, ghosts]
            .iter()
            .flat_map(|p| (0..p.nrows()).map(move |i| p.row(i)))
            .collect();
        let ap = gpuq_amg::galerkin::spgemm_rows(a.extended()?, ncols, |k| rows[k])?;
        Ok(Some(Box::new(HostKept {
            ap,
            uses: &self.left_products,
            fetched: &self.fetched_rows,
        })))
    }
}

/// A P kept on the backend: the ghost rows other ranks need of it computed
/// on the host from A's and P's rows, R (A P) from the kept rows and those
/// fetched. On 1-4 ranks, scalar and 2x2 blocks, the levels are the
/// host's bit for bit, and every distributed level used its kept product.
#[test]
fn a_product_kept_on_the_backend_builds_the_host_hierarchy() {
    for (a, bs) in [
        (laplace3d::<f64>(16), 1),
        (
            ProblemSpec::parse("elasticity2d:24")
                .unwrap()
                .build::<f64>()
                .unwrap()
                .matrix,
            2,
        ),
    ] {
        let mut o = DistAmgOptions {
            gather_below: 40,
            ..DistAmgOptions::default()
        };
        o.amg.block = bs;
        // Two distributed levels somewhere, so that coarse rows held by the
        // backend were split.
        let mut deepest = 0;
        for ranks in [1, 2, 3, 4] {
            let p = RowPartition::blocks(a.nrows(), ranks, bs).unwrap();
            let built = ThreadComm::run(ranks, |comm| {
                let rows = rows_of(&a, &p, comm.rank()).unwrap();
                let host = DistHierarchy::build(&comm, &p, &rows, &o).unwrap();
                let local = KeepingSetup::default();
                let kept = DistHierarchy::build_on(&local, &comm, &p, &rows, &o).unwrap();
                let uses = local.left_products.into_inner();
                // The rows other ranks needed of A P came from the kept product.
                let fetched = local.fetched_rows.into_inner();
                assert_eq!(fetched > 0, comm.size() > 1 && uses > 0);
                assert_eq!(local.kept_p_uses.into_inner(), 2 * uses);
                // Each product's result was looked at for zero rows where it
                // was held; each distributed level's rows (the finest level's
                // from the caller's rows the backend holds) were split and
                // their blocks found there too.
                let held_uses = local.held_rows_uses.into_inner();
                assert_eq!(held_uses, 3 * uses);
                // The cycles (P's and R's owned blocks from the kept P) agree.
                let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
                let b: Vec<f64> = (0..rows.nrows()).map(|i| 1.0 + (i % 5) as f64).collect();
                let apply = |h: &DistHierarchy| {
                    let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
                    let mut x = dist.zeros(b.len()).unwrap();
                    m.apply(&dist.upload(&b).unwrap(), &mut x).unwrap();
                    dist.download(&x).unwrap()
                };
                assert_eq!(apply(&host), apply(&kept));
                (host, kept, uses, rows)
            })
            .unwrap();
            for (host, kept, uses, rows) in &built {
                let levels = host.levels().len();
                // The finest level holds the rank's rows (joined from its split).
                assert_eq!(&host.levels()[0].a().unwrap(), rows);
                assert_eq!(&kept.levels()[0].a().unwrap(), rows);
                assert!(
                    levels >= 1,
                    "{ranks} ranks, block {bs}: nothing distributed"
                );
                assert_eq!(*uses, levels, "{ranks} ranks, block {bs}");
                deepest = deepest.max(levels);
                assert_same_levels(host, kept);
            }
        }
        assert!(deepest >= 2, "block {bs}: one distributed level at most");
    }
}

/// The same levels (rho, A, P and R of each, bit for bit) and the same
/// gathered coarse solve.
fn assert_same_levels(host: &DistHierarchy, kept: &DistHierarchy) {
    assert_eq!(host.levels().len(), kept.levels().len());
    for (x, y) in host.levels().iter().zip(kept.levels()) {
        assert_eq!(
            (x.rho, &x.a().unwrap(), &x.p().unwrap()),
            (y.rho, &y.a().unwrap(), &y.p().unwrap())
        );
        assert_eq!(x.r().unwrap(), y.r().unwrap());
    }
    assert_eq!(host.tail().coarse_solve(), kept.tail().coarse_solve());
}

/// A backend that keeps each rank's aggregates
/// ([`DistSetupKernels::kept_aggregates`]; here a host vector behind the
/// trait) and builds the tentative prolongator from them without a
/// download, noting the levels whose aggregates the setup downloads.
#[derive(Default)]
struct AggregatesKeeping {
    kept: std::sync::atomic::AtomicUsize,
    downloaded: Arc<std::sync::Mutex<Vec<usize>>>,
}

/// Aggregates as [`AggregatesKeeping`] holds them: the nodes' aggregates,
/// the level (the call's number) and the downloads' record.
struct HostHeld(Vec<u32>, usize, Arc<std::sync::Mutex<Vec<usize>>>);

impl gpuq_amg::HeldAggregates for HostHeld {
    fn download(&self) -> Result<Vec<u32>, Error> {
        if let Ok(mut levels) = self.2.lock() {
            levels.push(self.1);
        }
        Ok(self.0.clone())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl DistSetupKernels for AggregatesKeeping {
    fn kept_aggregates(
        &self,
        owned: &LevelMatrix,
        bs: usize,
        eps: f64,
    ) -> Result<Option<KeptAggregates>, Error> {
        use gpuq_amg::aggregate::{isolated_nodes, mis2_aggregates};
        use gpuq_amg::strength::{norm_matrix, strong_graph};
        let s = strong_graph(&norm_matrix(owned.host()?, bs)?, eps)?;
        let (agg, count) = mis2_aggregates(&s);
        let level = self.kept.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let held = Arc::new(HostHeld(agg, level, self.downloaded.clone()));
        Ok(Some(KeptAggregates {
            isolated: isolated_nodes(&s),
            aggregates: gpuq_amg::NodeAggregates::from_held(held, count),
        }))
    }

    /// From the aggregates this backend keeps; `None` (the host) for
    /// aggregates on the host (the finest level's, identity rows dropped).
    fn tentative(
        &self,
        agg: &gpuq_amg::NodeAggregates,
        bs: usize,
        nns: &[Vec<f64>],
        (first, ncols): (usize, usize),
    ) -> Result<Option<(LevelMatrix, Vec<Vec<f64>>)>, Error> {
        let Some(held) = agg
            .held()
            .and_then(|h| h.as_any().downcast_ref::<HostHeld>())
        else {
            return Ok(None);
        };
        let t = gpuq_amg::prolong::tentative(&held.0, agg.count(), bs, nns)?;
        let cols = t.p.col_idx().iter().map(|&j| j + first as u32).collect();
        let shifted = Csr::try_new(
            t.p.nrows(),
            ncols,
            t.p.row_ptr().to_vec(),
            cols,
            t.p.values().to_vec(),
        )?;
        Ok(Some((LevelMatrix::from_host(shifted), t.coarse_null)))
    }
}

/// Aggregates kept on the backend: the tentative prolongator is made from
/// them where no node is dropped (the finest level of laplace3d: no
/// download), and from the aggregates brought to the host where an
/// isolated node (an identity row) is dropped. On 1-3 ranks the levels are
/// the host's bit for bit.
#[test]
fn aggregates_kept_on_the_backend_build_the_host_hierarchy() {
    let a = laplace3d::<f64>(12);
    let fixed = gpuq_sparse::generators::with_identity_rows(&a, |i| i % 37 == 0);
    for (a, dropped) in [(a, false), (fixed, true)] {
        let o = DistAmgOptions {
            gather_below: 40,
            ..DistAmgOptions::default()
        };
        for ranks in [1, 2, 3] {
            let p = RowPartition::blocks(a.nrows(), ranks, 1).unwrap();
            ThreadComm::run(ranks, |comm| {
                let rows = rows_of(&a, &p, comm.rank()).unwrap();
                let host = DistHierarchy::build(&comm, &p, &rows, &o).unwrap();
                let local = AggregatesKeeping::default();
                let kept = DistHierarchy::build_on(&local, &comm, &p, &rows, &o).unwrap();

                assert!(local.kept.into_inner() >= 1, "{ranks} ranks");
                let finest = local.downloaded.lock().unwrap().contains(&0);
                assert_eq!(finest, dropped, "{ranks} ranks");
                assert_same_levels(&host, &kept);
            })
            .unwrap();
        }
    }
}
