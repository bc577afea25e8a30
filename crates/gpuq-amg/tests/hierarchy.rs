//! Hierarchy invariants: prolongator columns, aggregates covering every node,
//! R = P^T, R A P against an explicit dense product, determinism, bad inputs.

mod common;

use common::*;
use gpuq_amg::strength::strength_graph;
use gpuq_amg::{AmgOptions, CoarseSolver, Coarsening, Hierarchy};
use gpuq_sparse::generators::{laplace2d, laplace3d};
use gpuq_sparse::Csr;

fn options(coarsening: Coarsening, block: usize) -> AmgOptions {
    AmgOptions {
        coarsening,
        block,
        coarse_size: 20,
        ..AmgOptions::default()
    }
}

fn dense_rap(r: &Csr<f64>, a: &Csr<f64>, p: &Csr<f64>) -> Vec<f64> {
    let (dr, da, dp) = (r.to_dense(), a.to_dense(), p.to_dense());
    let (n, nc) = (a.nrows(), p.ncols());
    let mut ap = vec![0.0; n * nc];
    for i in 0..n {
        for k in 0..n {
            let aik = da[i * n + k];
            if aik != 0.0 {
                for j in 0..nc {
                    ap[i * nc + j] += aik * dp[k * nc + j];
                }
            }
        }
    }
    let mut c = vec![0.0; nc * nc];
    for i in 0..nc {
        for k in 0..n {
            let rik = dr[i * n + k];
            if rik != 0.0 {
                for j in 0..nc {
                    c[i * nc + j] += rik * ap[k * nc + j];
                }
            }
        }
    }
    c
}

/// Whether the symmetric n x n row-major `g` is positive definite (its Cholesky
/// pivots stay above 1e-12 of the largest diagonal entry).
fn cholesky_succeeds(mut g: Vec<f64>, n: usize) -> bool {
    let top = (0..n).map(|i| g[i * n + i]).fold(0.0f64, f64::max);
    for j in 0..n {
        let d = g[j * n + j] - (0..j).map(|k| g[j * n + k] * g[j * n + k]).sum::<f64>();
        if d <= 1e-12 * top {
            return false;
        }
        let d = d.sqrt();
        g[j * n + j] = d;
        for i in j + 1..n {
            let s: f64 = (0..j).map(|k| g[i * n + k] * g[j * n + k]).sum();
            g[i * n + j] = (g[i * n + j] - s) / d;
        }
    }
    true
}

fn check_invariants(a: &Csr<f64>, o: &AmgOptions) -> Hierarchy {
    let h = Hierarchy::build(a, o).unwrap();
    let levels = h.levels();
    assert!(levels.len() >= 2, "{} levels", levels.len());
    for w in levels.windows(2) {
        let (fine, coarse) = (&w[0], &w[1]);
        let p = fine.p.as_ref().unwrap().host().unwrap();
        let r = fine.r.as_ref().unwrap().host().unwrap();
        assert_eq!(p.shape(), (fine.a.nrows(), coarse.a.nrows()));
        assert_eq!(*r, p.transpose(false));
        // Every column of P holds a nonzero (no empty coarse unknown).
        let mut col_has = vec![false; p.ncols()];
        for (&c, &v) in p.col_idx().iter().zip(p.values()) {
            col_has[c as usize] |= v != 0.0;
        }
        assert!(col_has.iter().all(|&x| x));
        // Aggregates (or first parents) cover every node.
        let agg = fine.aggregate_of.as_ref().unwrap().host().unwrap();
        assert_eq!(agg.len(), fine.a.nrows() / fine.block);
        let naggs = coarse.a.nrows() / coarse.block;
        assert_eq!(fine.aggregate_of.as_ref().unwrap().count(), naggs);
        let mut used = vec![false; naggs];
        for (i, &g) in agg.iter().enumerate() {
            if g == gpuq_amg::aggregate::NOT_AGGREGATED {
                // Only a node without strong connections joins none.
                let s = strength_graph(fine.a.host().unwrap(), fine.block, o.strength).unwrap();
                assert!(s.neighbours(i).is_empty(), "node {i} joined no aggregate");
                continue;
            }
            assert!((g as usize) < naggs);
            used[g as usize] = true;
        }
        if o.coarsening == Coarsening::SmoothedAggregation {
            assert!(used.iter().all(|&u| u));
        }
        assert!(coarse.a.nrows() < fine.a.nrows());
        // Full column rank on small levels: P^T P has a Cholesky factor.
        if p.ncols() <= 300 {
            let g = gpuq_amg::galerkin::spgemm(r, p).unwrap().to_dense();
            assert!(cholesky_succeeds(g, p.ncols()), "P is rank deficient");
        }
        // Galerkin: R A P equals the dense product on small levels.
        if fine.a.nrows() <= 800 {
            let want = dense_rap(r, fine.a.host().unwrap(), p);
            let got = coarse.a.host().unwrap().to_dense();
            let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (x, y) in got.iter().zip(&want) {
                assert!((x - y).abs() <= 1e-12 * scale);
            }
        }
    }
    let info = h.info();
    // The seed's selection halves a Laplacian per level with denser coarse
    // stencils; smoothed aggregation coarsens by 5 to 30.
    let most = if o.coarsening == Coarsening::Seed {
        4.5
    } else {
        2.0
    };
    let oc = info.operator_complexity;
    assert!(oc >= 1.0 && oc < most, "operator complexity {oc}");
    assert!(info.grid_complexity >= 1.0 && info.grid_complexity < 2.0);
    h
}

#[test]
fn seed_and_sa_hierarchies_on_laplacians() {
    for coarsening in [Coarsening::Seed, Coarsening::SmoothedAggregation] {
        check_invariants(&laplace2d(20), &options(coarsening, 1));
        check_invariants(&laplace3d(8), &options(coarsening, 1));
    }
}

#[test]
fn block2_hierarchies() {
    let a = coupled2d(12, 1.0);
    for coarsening in [Coarsening::Seed, Coarsening::SmoothedAggregation] {
        let h = check_invariants(&a, &options(coarsening, 2));
        assert!(h.levels().iter().all(|l| l.block == 2));
    }
}

/// A chain of strong couplings in rows of 41 entries (40 weak couplings to
/// nodes far away): with a threshold that keeps only the chain, aggregates
/// of about three nodes make coarse operators that fill in (each coarse row
/// reaches the weak neighbours of its aggregate twice over); such a level is
/// coarsened again with every connection strong, so no level holds more
/// entries than the one above.
#[test]
fn a_threshold_that_keeps_few_connections_does_not_fill_in_the_levels() {
    let a = gpuq_sparse::generators::chain_with_far_couplings(3000).unwrap();
    let o = AmgOptions {
        strength: 0.01,
        coarse_size: 50,
        ..AmgOptions::default()
    };
    let h = Hierarchy::build(&a, &o).unwrap();
    for w in h.levels().windows(2) {
        assert!(
            w[1].a.nnz() <= w[0].a.nnz(),
            "a level of {} entries below one of {}",
            w[1].a.nnz(),
            w[0].a.nnz()
        );
    }
}

#[test]
fn seed_prolongator_rows_sum_to_one_per_component() {
    let h = Hierarchy::build(&coupled2d(10, 1.0), &options(Coarsening::Seed, 2)).unwrap();
    let p = h.levels()[0].p.as_ref().unwrap().host().unwrap();
    for i in 0..p.nrows() {
        let (c, v) = p.row(i);
        assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        // Component preserved: row 2k + c only touches coarse columns of component c.
        assert!(c.iter().all(|&j| j as usize % 2 == i % 2));
    }
}

#[test]
fn setup_is_deterministic_across_thread_counts() {
    let a = laplace3d::<f64>(10);
    let o = options(Coarsening::SmoothedAggregation, 1);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let four = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let h1 = one.install(|| Hierarchy::build(&a, &o).unwrap());
    let h4 = four.install(|| Hierarchy::build(&a, &o).unwrap());
    assert_eq!(h1.levels().len(), h4.levels().len());
    for (x, y) in h1.levels().iter().zip(h4.levels()) {
        assert_eq!(x.a.host().unwrap(), y.a.host().unwrap());
        let host =
            |m: &Option<gpuq_amg::LevelMatrix>| m.as_ref().map(|m| m.host().unwrap().clone());
        assert_eq!(host(&x.p), host(&y.p));
        assert_eq!(x.aggregate_of, y.aggregate_of);
    }
    assert_eq!(h1.coarse_solve(), h4.coarse_solve());
}

#[test]
fn null_space_is_detected() {
    let h = Hierarchy::build(&neumann2d(12), &options(Coarsening::SmoothedAggregation, 1)).unwrap();
    assert_eq!(h.null_space().len(), 1);
    let h = Hierarchy::build(&laplace2d(12), &options(Coarsening::SmoothedAggregation, 1)).unwrap();
    assert!(h.null_space().is_empty());
    let mut v = vec![1.0; 144];
    v[0] = 2.0;
    let h = Hierarchy::build(&neumann2d(12), &AmgOptions::default()).unwrap();
    h.project(&mut v);
    assert!(v.iter().sum::<f64>().abs() < 1e-12);
}

#[test]
fn bad_inputs_are_errors() {
    let o = AmgOptions::default();
    let rect = Csr::<f64>::try_new(2, 3, vec![0, 1, 2], vec![0, 1], vec![1.0, 1.0]).unwrap();
    assert!(Hierarchy::build(&rect, &o).is_err());
    let odd = laplace2d::<f64>(3);
    assert!(Hierarchy::build(
        &odd,
        &AmgOptions {
            block: 2,
            ..o.clone()
        }
    )
    .is_err());
    // 9 divides the 9 unknowns but exceeds the largest block, 8.
    assert!(Hierarchy::build(
        &odd,
        &AmgOptions {
            block: 9,
            ..o.clone()
        }
    )
    .is_err());
    assert!(Hierarchy::build(
        &odd,
        &AmgOptions {
            strength: 2.0,
            ..o.clone()
        }
    )
    .is_err());
    assert!(Hierarchy::build(
        &odd,
        &AmgOptions {
            sweeps: 0,
            ..o.clone()
        }
    )
    .is_err());
    // A zero diagonal entry (row 1 has only an off-diagonal entry).
    let zero_diag = Csr::<f64>::try_new(
        3,
        3,
        vec![0, 2, 3, 5],
        vec![0, 1, 0, 1, 2],
        vec![2.0, -1.0, -1.0, -1.0, 2.0],
    )
    .unwrap();
    let small = AmgOptions {
        coarse_size: 1,
        ..o.clone()
    };
    assert!(Hierarchy::build(&zero_diag, &small).is_err());
    let nan =
        Csr::<f64>::try_new_allow_nonfinite(1, 1, vec![0, 1], vec![0], vec![f64::NAN]).unwrap();
    assert!(Hierarchy::build(&nan, &o).is_err());
    let bad_nns = AmgOptions {
        near_null_space: Some(vec![vec![1.0; 5]]),
        ..o
    };
    assert!(Hierarchy::build(&odd, &bad_nns).is_err());
}

#[test]
fn block_diagonal_coarse_solve_builds() {
    let o = AmgOptions {
        coarse_solver: CoarseSolver::BlockDiagonal,
        ..options(Coarsening::Seed, 2)
    };
    let h = Hierarchy::build(&coupled2d(8, 1.0), &o).unwrap();
    let c = h.coarse_solve();
    assert_eq!(c.nnz(), 2 * c.nrows());
}

/// The matrices of two hierarchies, level by level, on the host.
fn same_levels(x: &Hierarchy, y: &Hierarchy) {
    assert_eq!(x.levels().len(), y.levels().len());
    let host = |m: &Option<gpuq_amg::LevelMatrix>| m.as_ref().map(|m| m.host().unwrap().clone());
    for (u, v) in x.levels().iter().zip(y.levels()) {
        assert_eq!(u.a.host().unwrap(), v.a.host().unwrap());
        assert_eq!(host(&u.p), host(&v.p));
        assert_eq!(host(&u.r), host(&v.r));
        assert_eq!(u.aggregate_of, v.aggregate_of);
    }
    assert_eq!(x.coarse_solve(), y.coarse_solve());
}

#[test]
fn update_values_keeps_the_aggregates_and_recomputes_the_rest() {
    let a = laplace3d::<f64>(10);
    for block in [1, 2] {
        let o = options(Coarsening::SmoothedAggregation, block);
        let h = Hierarchy::build(&a, &o).unwrap();
        // new values, same pattern: scaled by 3 (the same strength graphs on
        // every level, so a fresh build aggregates alike and equals the
        // update), then also shifted on the diagonal (aggregates kept, no
        // longer a fresh build's)
        let with_values = |f: &dyn Fn(usize, usize, f64) -> f64| {
            let vals: Vec<f64> = (0..a.nrows())
                .flat_map(|i| {
                    let (c, v) = a.row(i);
                    c.iter()
                        .zip(v)
                        .map(move |(&j, &x)| (i, j as usize, x))
                        .collect::<Vec<_>>()
                })
                .map(|(i, j, x)| f(i, j, x))
                .collect();
            Csr::try_new(
                a.nrows(),
                a.ncols(),
                a.row_ptr().to_vec(),
                a.col_idx().to_vec(),
                vals,
            )
            .unwrap()
        };
        let scaled = with_values(&|_, _, x| 3.0 * x);
        same_levels(
            &h.update_values(&scaled).unwrap(),
            &Hierarchy::build(&scaled, &o).unwrap(),
        );
        let a2 = with_values(&|i, j, x| if i == j { 3.0 * x + 0.5 } else { 3.0 * x });
        let updated = h.update_values(&a2).unwrap();
        for (u, v) in updated.levels().iter().zip(h.levels()) {
            assert_eq!(u.aggregate_of, v.aggregate_of);
            assert_eq!(u.a.shape(), v.a.shape());
        }
        assert_ne!(
            updated.levels()[1].a.host().unwrap(),
            h.levels()[1].a.host().unwrap()
        );
        // the cycle built for the old values, updated in place, solves the
        // new system
        let cpu = gpuq_cpu::CpuBackend::new();
        let co = gpuq_amg::CycleOptions {
            layout: gpuq_sparse::Layout::Csr,
        };
        let mut hh = h.clone();
        let mut cycle = gpuq_amg::Amg::<_, f64>::new(&cpu, &hh, &co).unwrap();
        cycle.update_values(&mut hh, &a2, &co).unwrap();
        same_levels(&hh, &updated);
        let b = vec![1.0; a2.nrows()];
        let (x, report) = pcg(&cpu, &a2, &b, &cycle);
        assert!(report.converged, "{report:?}");
        assert!(true_residual(&a2, &x, &b) <= 1e-8);
    }
}

#[test]
fn update_values_refuses_another_pattern_and_the_seed_coarsening() {
    let a = laplace3d::<f64>(6);
    let h = Hierarchy::build(&a, &options(Coarsening::SmoothedAggregation, 1)).unwrap();
    let other = laplace3d::<f64>(5);
    assert!(h.update_values(&other).is_err());
    let wider = gpuq_amg::galerkin::add(1.0, &a, 1.0, &Csr::identity(a.nrows())).unwrap();
    assert!(
        h.update_values(&wider).is_ok(),
        "the identity adds no entry"
    );
    let dense_row = {
        let mut coo = gpuq_sparse::Coo::new(a.nrows(), a.ncols());
        for i in 0..a.nrows() {
            let (c, v) = a.row(i);
            for (&j, &x) in c.iter().zip(v) {
                coo.push(i, j as usize, x).unwrap();
            }
        }
        coo.push(0, a.ncols() - 1, -1e-3).unwrap();
        Csr::from_coo(&coo).unwrap()
    };
    assert!(h.update_values(&dense_row).is_err());
    let seed = Hierarchy::build(&a, &options(Coarsening::Seed, 1)).unwrap();
    assert!(seed.update_values(&a).is_err());
}

#[test]
fn a_finest_level_given_resident_builds_the_hierarchy_of_its_matrix() {
    use gpuq_amg::LevelMatrix;
    // A nonsymmetric matrix (the host checks find it) and a singular one (its
    // null space found), given as a level matrix instead of a host CSR.
    let mut neumann = gpuq_sparse::generators::laplace2d::<f64>(12);
    let n = neumann.nrows();
    let sums: Vec<f64> = (0..n).map(|i| neumann.row(i).1.iter().sum()).collect();
    neumann = gpuq_sparse::Csr::try_new(
        n,
        n,
        neumann.row_ptr().to_vec(),
        neumann.col_idx().to_vec(),
        (0..n)
            .flat_map(|i| {
                let (c, v) = neumann.row(i);
                let s = sums[i];
                c.iter()
                    .zip(v)
                    .map(move |(&j, &x)| if j as usize == i { x - s } else { x })
                    .collect::<Vec<_>>()
            })
            .collect(),
    )
    .unwrap();
    let o = options(Coarsening::SmoothedAggregation, 1);
    for a in [gpuq_sparse::generators::convdiff2d::<f64>(20, 0.7), neumann] {
        let given = Hierarchy::build_on_resident(
            &gpuq_cpu::CpuBackend::new(),
            LevelMatrix::from_host(a.clone()),
            &o,
        )
        .unwrap();
        let built = Hierarchy::build(&a, &o).unwrap();
        assert_eq!(given.levels().len(), built.levels().len());
        for (g, b) in given.levels().iter().zip(built.levels()) {
            assert_eq!(g.a.host().unwrap().values(), b.a.host().unwrap().values());
        }
        assert_eq!(given.null_space(), built.null_space());
        assert_eq!(given.is_symmetric(), built.is_symmetric());
    }
    let bad = LevelMatrix::from_host(gpuq_sparse::Csr::<f64>::identity(3));
    let o3 = AmgOptions { block: 2, ..o };
    assert!(Hierarchy::build_on_resident(&gpuq_cpu::CpuBackend::new(), bad, &o3).is_err());
}

#[test]
fn a_finest_matrix_handed_over_builds_the_hierarchy_a_copy_would() {
    use gpuq_sparse::generators;
    let cpu = gpuq_cpu::CpuBackend::new();
    let cases = [
        (
            generators::laplace3d::<f64>(12),
            options(Coarsening::SmoothedAggregation, 1),
        ),
        (
            generators::laplace2d::<f64>(20),
            options(Coarsening::Seed, 1),
        ),
        (
            generators::convdiff2d::<f64>(20, 0.7),
            options(Coarsening::SmoothedAggregation, 2),
        ),
    ];
    for (a, o) in cases {
        let handed = Hierarchy::build_handed_over(&cpu, a.clone(), &o).unwrap();
        let built = Hierarchy::build(&a, &o).unwrap();
        same_levels(&handed, &built);
        assert_eq!(handed.is_symmetric(), built.is_symmetric());
        assert_eq!(handed.null_space(), built.null_space());
    }
    // The input checks see the handed-over matrix: a NaN is the build's error.
    let mut values = generators::laplace2d::<f64>(8).values().to_vec();
    values[5] = f64::NAN;
    let l = generators::laplace2d::<f64>(8);
    let nan = gpuq_sparse::Csr::try_new_allow_nonfinite(
        l.nrows(),
        l.ncols(),
        l.row_ptr().to_vec(),
        l.col_idx().to_vec(),
        values,
    )
    .unwrap();
    let o = options(Coarsening::SmoothedAggregation, 1);
    let (x, y) = (
        Hierarchy::build_handed_over(&cpu, nan.clone(), &o).unwrap_err(),
        Hierarchy::build(&nan, &o).unwrap_err(),
    );
    assert_eq!(x.to_string(), y.to_string());
}
