//! The setup on the CUDA backend against the host's: the device's sparse
//! products, sums and transposes equal the host's bit for bit (property tests
//! over random matrices), and `Hierarchy::build_on` the device builds the same
//! aggregates and levels as `Hierarchy::build` (matrices equal to rounding) on
//! scalar, 2x2-block, elasticity (three near-null-space vectors) and singular
//! problems. Each test skips (passing, one line on stdout) without a CUDA
//! driver or device.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use gpuq_amg::blockdiag::BlockDiagonal;
use gpuq_amg::galerkin::{add, spgemm};
use gpuq_amg::prolong::smooth;
use gpuq_amg::{AmgOptions, Coarsening, Hierarchy, SetupKernels};
use gpuq_cuda::CudaBackend;
use gpuq_sparse::generators::{convdiff2d, laplace3d};
use gpuq_sparse::{Coo, Csr};
use proptest::prelude::*;

/// `a` and `b` have the same pattern and their values differ by at most
/// `rel` times the largest |value| of `a`; returns whether they are equal bit
/// for bit.
fn assert_close(a: &Csr<f64>, b: &Csr<f64>, rel: f64, what: &str) -> bool {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    assert_eq!(a.row_ptr(), b.row_ptr(), "{what}: row pointers");
    assert_eq!(a.col_idx(), b.col_idx(), "{what}: columns");
    let scale = a.values().iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (k, (x, y)) in a.values().iter().zip(b.values()).enumerate() {
        assert!(
            (x - y).abs() <= rel * scale,
            "{what}: entry {k}: {x} against {y}"
        );
    }
    a == b
}

/// A random `m x n` matrix: each row's length drawn up to `n` (empty rows
/// included), distinct sorted columns, values in [-1, 1].
fn random_csr(m: usize, n: usize, seed: u64) -> Csr<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut coo = Coo::new(m, n);
    for i in 0..m {
        let len = (next() % (n as u64 + 1)) as usize;
        let mut cols: Vec<usize> = (0..len).map(|_| (next() % n as u64) as usize).collect();
        cols.sort_unstable();
        cols.dedup();
        for j in cols {
            let v = (next() % 2001) as f64 / 1000.0 - 1.0;
            coo.push(i, j, v).unwrap();
        }
    }
    Csr::from_coo(&coo).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn device_sparse_kernels_equal_the_host(
        m in 1usize..40, k in 1usize..40, n in 1usize..40, seed in any::<u64>()
    ) {
        let Some(g) = gpu("device_sparse_kernels_equal_the_host") else {
            return Ok(());
        };
        let a = random_csr(m, k, seed);
        let b = random_csr(k, n, seed ^ 0x5555);
        let c = random_csr(m, k, seed ^ 0xaaaa);
        let (da, db, dc) = (
            g.setup_upload(&a).unwrap(),
            g.setup_upload(&b).unwrap(),
            g.setup_upload(&c).unwrap(),
        );
        let prod = g.setup_download(&g.setup_spgemm(&da, &db).unwrap()).unwrap();
        prop_assert_eq!(prod, spgemm(&a, &b).unwrap());
        let sum = g.setup_download(&g.setup_add(0.5, &da, -2.0, &dc).unwrap()).unwrap();
        prop_assert_eq!(sum, add(0.5, &a, -2.0, &c).unwrap());
        let t = g.setup_download(&g.setup_transpose(&da).unwrap()).unwrap();
        prop_assert_eq!(t, a.transpose(false));
        // Rows in chunks of at most 16 table slots (many chunks, and rows
        // alone that need more): the same product.
        let chunked = g.setup_spgemm_within(&da, &db, 16).unwrap();
        prop_assert_eq!(g.setup_download(&chunked).unwrap(), spgemm(&a, &b).unwrap());
        if m != k {
            prop_assert!(g.setup_spgemm(&da, &dc).is_err());
        }
        // The smoothed prolongator of a square matrix with invertible
        // diagonal blocks (block 1 or 2).
        for bs in [1usize, 2] {
            let mm = 2 * m;
            let sq = add(1.0, &random_csr(mm, mm, seed ^ 0x1234), 8.0, &Csr::identity(mm)).unwrap();
            let pt = random_csr(mm, n, seed ^ 0x4321);
            let Ok(dinv) = BlockDiagonal::of(&sq, bs, false).inverse() else {
                continue;
            };
            let want = smooth(&sq, &dinv, 1.7, &pt).unwrap();
            let (dsq, dpt) = (g.setup_upload(&sq).unwrap(), g.setup_upload(&pt).unwrap());
            let omega = 4.0 / (3.0 * 1.7);
            let got = g
                .setup_smoothed_prolongator(&dsq, bs, omega, dinv.blocks(), &dpt)
                .unwrap();
            prop_assert_eq!(g.setup_download(&got).unwrap(), want);
        }
    }
}

#[test]
fn device_product_of_a_long_row_counts_again_with_full_tables() {
    let Some(g) = gpu("device_product_of_a_long_row_counts_again_with_full_tables") else {
        return;
    };
    // Row 0 of A B has 1500 distinct columns, more than the count pass's
    // capped table holds; row 1 has 3.
    let mut coo = Coo::new(2, 2000);
    for j in 0..1500 {
        coo.push(0, j, 1.0 + j as f64 * 1e-3).unwrap();
    }
    for j in [5, 700, 1999] {
        coo.push(1, j, -2.0).unwrap();
    }
    let a = Csr::from_coo(&coo).unwrap();
    let b = add(1.0, &Csr::identity(2000), 0.5, &random_csr(2000, 2000, 7)).unwrap();
    let (da, db) = (g.setup_upload(&a).unwrap(), g.setup_upload(&b).unwrap());
    let got = g
        .setup_download(&g.setup_spgemm(&da, &db).unwrap())
        .unwrap();
    assert_eq!(got, spgemm(&a, &b).unwrap());
}

/// Builds `a` on the host and on the device and compares every level: the
/// same aggregates and patterns, values within 1e-12 of the largest. The
/// kernels mirror the host's order of operations, so the values are expected
/// to be equal bit for bit; the line printed says whether they were.
fn same_hierarchy(g: &CudaBackend, a: &Csr<f64>, o: &AmgOptions, what: &str) {
    let host = Hierarchy::build(a, o).unwrap();
    let dev = Hierarchy::build_on(g, a, o).unwrap();
    assert_eq!(dev.info().setup_backend, g.setup_name());
    assert_eq!(host.levels().len(), dev.levels().len(), "{what}: levels");
    let mut exact = true;
    for (l, (h, d)) in host.levels().iter().zip(dev.levels()).enumerate() {
        let at = format!("{what}, level {l}");
        assert_eq!(h.aggregate_of, d.aggregate_of, "{at}: aggregates");
        assert_eq!(h.block, d.block, "{at}: block");
        exact &= assert_close(&h.a, &d.a, 1e-12, &format!("{at}: A"));
        if let (Some(hp), Some(dp)) = (&h.p, &d.p) {
            exact &= assert_close(hp, dp, 1e-12, &format!("{at}: P"));
        }
        if let (Some(hr), Some(dr)) = (&h.r, &d.r) {
            exact &= assert_close(hr, dr, 1e-12, &format!("{at}: R"));
        }
        assert_eq!(h.p.is_some(), d.p.is_some(), "{at}: P present");
    }
    assert_eq!(host.null_space().len(), dev.null_space().len());
    println!(
        "{what}: {} levels, same aggregates, matrices {}",
        host.levels().len(),
        if exact { "bit for bit" } else { "to rounding" }
    );
}

#[test]
fn device_setup_builds_the_host_hierarchy() {
    let Some(g) = gpu("device_setup_builds_the_host_hierarchy") else {
        return;
    };
    let small = |block| AmgOptions {
        block,
        coarse_size: 20,
        ..AmgOptions::default()
    };
    same_hierarchy(g, &laplace3d::<f64>(16), &small(1), "laplace3d:16");
    same_hierarchy(g, &coupled2d(30, 0.05), &small(2), "coupled2d:30");
    same_hierarchy(g, &neumann2d(30), &small(1), "neumann2d:30");
    // Unsymmetric values on a symmetric pattern.
    same_hierarchy(g, &convdiff2d::<f64>(40, 0.8), &small(1), "convdiff2d:40");
    // Three near-null-space vectors: coarse levels have three unknowns per node.
    let (e, _) = gpuq_sparse::elasticity::elasticity2d::<f64>(24).unwrap();
    let modes = gpuq_sparse::elasticity::elasticity2d_rigid_body_modes(24).unwrap();
    let o = AmgOptions {
        near_null_space: Some(modes),
        ..small(2)
    };
    same_hierarchy(g, &e, &o, "elasticity2d:24");
    // A strength threshold that keeps few connections, and the seed's method
    // (selection on the host, Galerkin products on the device).
    let o = AmgOptions {
        strength: 0.25,
        ..small(1)
    };
    same_hierarchy(g, &laplace3d::<f64>(12), &o, "laplace3d:12, eps 0.25");
    let o = AmgOptions {
        coarsening: Coarsening::Seed,
        ..small(2)
    };
    same_hierarchy(g, &coupled2d(20, 0.05), &o, "coupled2d:20, seed");
}

#[test]
fn device_setup_reports_bad_input_as_the_host_does() {
    let Some(g) = gpu("device_setup_reports_bad_input_as_the_host_does") else {
        return;
    };
    // A zero diagonal block: the device declines, the host reports.
    let mut coo = Coo::new(4, 4);
    for (i, j, v) in [
        (0, 1, 1.0),
        (1, 0, 1.0),
        (1, 1, 2.0),
        (2, 2, 2.0),
        (3, 3, 2.0),
    ] {
        coo.push(i, j, v).unwrap();
    }
    let a = Csr::from_coo(&coo).unwrap();
    let o = AmgOptions {
        coarse_size: 1,
        ..AmgOptions::default()
    };
    assert!(Hierarchy::build_on(g, &a, &o).is_err());
    assert!(Hierarchy::build(&a, &o).is_err());
}
