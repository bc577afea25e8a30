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
use gpuq_amg::{Amg, AmgOptions, Coarsening, CycleOptions, Hierarchy, SetupKernels};
use gpuq_core::{Backend, LinearOperator};
use gpuq_cuda::CudaBackend;
use gpuq_sparse::generators::{convdiff2d, laplace3d, with_identity_rows};
use gpuq_sparse::{Coo, Csr, Layout, SparseBackend};
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

/// The non-empty rows of `a` and their entries (row k being row `rows[k]`).
fn by_rows(a: &Csr<f64>) -> (Vec<u32>, Csr<f64>) {
    let filled: Vec<usize> = (0..a.nrows()).filter(|&i| !a.row(i).0.is_empty()).collect();
    let block = a.select_rows(&filled).unwrap();
    (filled.into_iter().map(|i| i as u32).collect(), block)
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
        // A's columns shifted by 0-4 into that many more columns, as on the host; a
        // shift past the columns is refused.
        let shift = (seed as usize >> 24) % 5;
        let shifted = g.setup_download(&g.setup_shift_columns(&da, shift, k + shift).unwrap()).unwrap();
        let want: Vec<u32> = a.col_idx().iter().map(|&j| j + shift as u32).collect();
        prop_assert_eq!(shifted.shape(), (m, k + shift));
        prop_assert_eq!((shifted.row_ptr(), shifted.col_idx(), shifted.values()), (a.row_ptr(), &want[..], a.values()));
        prop_assert!(g.setup_shift_columns(&da, shift + 1, k + shift).is_err());
        // Rows gathered on the device (out of order, repeated), as the
        // host selects them; an index past the rows is refused.
        let idx: Vec<usize> = (0..m).rev().chain([0, m - 1, m / 2]).collect();
        prop_assert_eq!(g.setup_select_rows(&da, &idx).unwrap(), a.select_rows(&idx).unwrap());
        prop_assert!(g.setup_select_rows(&da, &[m]).is_err());
        // A beside C (both m x k, C given by its non-empty rows), as the
        // host's `beside`; C's rows expanded alone are C; rows past A's, or
        // not increasing, are refused.
        let (c_rows, c_block) = by_rows(&c);
        let beside = g.setup_download(&g.setup_beside(&da, (&c_rows, &c_block)).unwrap()).unwrap();
        prop_assert_eq!(beside, a.beside(&c).unwrap());
        let expanded = g.setup_expand_rows(g.setup_upload(&c_block).unwrap(), &c_rows, m).unwrap();
        prop_assert_eq!(g.setup_download(&expanded).unwrap(), c.clone());
        let one = Csr::try_new(1, k, vec![0, 1], vec![0], vec![1.0]).unwrap();
        prop_assert!(g.setup_beside(&da, (&[m as u32], &one)).is_err());
        if c_rows.len() >= 2 {
            let mut swapped = c_rows.clone();
            swapped.swap(0, 1);
            prop_assert!(g.setup_expand_rows(g.setup_upload(&c_block).unwrap(), &swapped, m).is_err());
        }
        // A block of leading rows and a column range, and the rows stacked
        // on host rows below.
        let (rows, lo) = ((seed as usize) % (m + 1), (seed as usize >> 8) % (k + 1));
        let hi = lo + (seed as usize >> 16) % (k - lo + 1);
        let block = g.setup_download(&g.setup_column_range(&da, rows, lo..hi).unwrap()).unwrap();
        let (mut ptr, mut cols, mut vals) = (vec![0], Vec::new(), Vec::new());
        for i in 0..rows {
            for (&j, &v) in a.row(i).0.iter().zip(a.row(i).1) {
                if (lo..hi).contains(&(j as usize)) {
                    cols.push(j - lo as u32);
                    vals.push(v);
                }
            }
            ptr.push(cols.len());
        }
        prop_assert_eq!(block, Csr::try_new(rows, hi - lo, ptr, cols, vals).unwrap());
        // The entries outside that range, their columns kept, by the rows
        // holding any.
        let outside = g.setup_outside_rows(&da, rows, lo..hi).unwrap();
        let (mut ptr, mut cols, mut vals) = (vec![0], Vec::new(), Vec::new());
        for i in 0..rows {
            for (&j, &v) in a.row(i).0.iter().zip(a.row(i).1) {
                if !(lo..hi).contains(&(j as usize)) {
                    cols.push(j);
                    vals.push(v);
                }
            }
            ptr.push(cols.len());
        }
        prop_assert_eq!(outside, by_rows(&Csr::try_new(rows, k, ptr, cols, vals).unwrap()));
        // Nothing outside all the columns: no rows.
        let none = g.setup_outside_rows(&da, rows, 0..k).unwrap();
        prop_assert_eq!((none.0.len(), none.1.shape(), none.1.nnz()), (0, (0, k), 0));
        // A's rows extended over the columns lo..hi and the others (A's
        // columns outside them, increasing), as a rank's split writes them:
        // each row's entries inside first, then the others numbered after
        // them; an own range past the columns is refused.
        let ghosts: Vec<usize> = (0..k).filter(|j| !(lo..hi).contains(j)).filter(|&j| a.col_idx().contains(&(j as u32))).collect();
        // Followed by 0-3 empty rows.
        let pad = (seed as usize >> 4) % 4;
        let ext = g.setup_download(&g.setup_extend_columns(&da, lo..hi, &ghosts, pad).unwrap()).unwrap();
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for i in 0..m {
            let (c, v) = a.row(i);
            let inside = c.iter().zip(v).filter(|(&j, _)| (lo..hi).contains(&(j as usize)));
            for (&j, &x) in inside {
                cols.push(j - lo as u32);
                vals.push(x);
            }
            for (&j, &x) in c.iter().zip(v).filter(|(&j, _)| !(lo..hi).contains(&(j as usize))) {
                cols.push((hi - lo + ghosts.binary_search(&(j as usize)).unwrap()) as u32);
                vals.push(x);
            }
        }
        let mut ptr = a.row_ptr().to_vec();
        ptr.extend(std::iter::repeat_n(a.nnz(), pad));
        prop_assert_eq!(ext, Csr::try_new(m + pad, hi - lo + ghosts.len(), ptr, cols, vals).unwrap());
        prop_assert!(g.setup_extend_columns(&da, lo..k + 1, &ghosts, 0).is_err());
        // The largest magnitude of A's values, as the host's maximum.
        let largest = a.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        prop_assert_eq!(g.setup_largest_magnitude(&da).unwrap(), largest);
        if a.nnz() > 0 {
            // A NaN value makes it NaN (the f32 check then refuses it).
            let mut vals = a.values().to_vec();
            vals[a.nnz() / 2] = f64::NAN;
            let bad = Csr::try_new_allow_nonfinite(m, k, a.row_ptr().to_vec(), a.col_idx().to_vec(), vals).unwrap();
            prop_assert!(g.setup_largest_magnitude(&g.setup_upload(&bad).unwrap()).unwrap().is_nan());
        }
        prop_assert!(g.setup_outside_rows(&da, m + 1, 0..k).is_err());
        prop_assert!(g.setup_column_range(&da, m + 1, 0..k).is_err());
        prop_assert!(g.setup_column_range(&da, m, 0..k + 1).is_err());
        let stacked = g.setup_download(&g.setup_stack_below(&da, rows, &c).unwrap()).unwrap();
        let top = a.clone().into_first_rows(rows).unwrap();
        let both: Vec<(Vec<u32>, Vec<f64>)> = (0..rows)
            .map(|i| (top.row(i).0.to_vec(), top.row(i).1.to_vec()))
            .chain((0..m).map(|i| (c.row(i).0.to_vec(), c.row(i).1.to_vec())))
            .collect();
        prop_assert_eq!(stacked.nrows(), rows + m);
        for (i, (cc, vv)) in both.iter().enumerate() {
            prop_assert_eq!((stacked.row(i).0, stacked.row(i).1), (&cc[..], &vv[..]));
        }
        prop_assert!(g.setup_stack_below(&da, m + 1, &c).is_err());
        prop_assert_eq!(g.setup_download(&g.setup_first_rows(&da, rows).unwrap()).unwrap(), top);
        prop_assert!(g.setup_first_rows(&da, m + 1).is_err());
        prop_assert!(g.setup_stack_below(&da, rows, &b).is_err() || k == n);
        // Rows in chunks of at most 16 table slots (many chunks, and rows
        // alone that need more): the same product.
        let chunked = g.setup_spgemm_within(&da, &db, 16, None).unwrap();
        prop_assert_eq!(g.setup_download(&chunked).unwrap(), spgemm(&a, &b).unwrap());
        // Every group width, with shared tables (and their overflow into
        // global ones) and with small chunks of global tables.
        for lanes in [1, 2, 4, 8, 16, 32] {
            for budget in [1 << 27, 16] {
                let c = g.setup_spgemm_within(&da, &db, budget, Some(lanes)).unwrap();
                prop_assert_eq!(g.setup_download(&c).unwrap(), spgemm(&a, &b).unwrap(), "lanes {}", lanes);
            }
        }
        prop_assert!(g.setup_spgemm_within(&da, &db, 16, Some(3)).is_err());
        if m != k {
            prop_assert!(g.setup_spgemm(&da, &dc).is_err());
        }
        // What keeps the hierarchy on the device: block diagonals (plain and
        // l1), rows of zeros, and the cycle's matrices built there.
        let mm = 2 * m;
        let sq = random_csr(mm, mm, seed ^ 0x7777);
        let dsq = g.setup_upload(&sq).unwrap();
        // Rows whose columns are numbered from `first`, with entries on
        // either side of their own columns (a rank's rows).
        let wide = random_csr(mm, 3 * mm, seed ^ 0x3333);
        let dwide = g.setup_upload(&wide).unwrap();
        let first = 2 * ((seed as usize >> 12) % (mm + 1));
        for (bs, l1) in [(1, false), (1, true), (2, false), (2, true)] {
            let want = BlockDiagonal::of(&sq, bs, l1);
            prop_assert_eq!(g.setup_vec_download(&g.setup_block_diagonal_on(&dsq, (0, bs), l1).unwrap()).unwrap(), want.blocks().unwrap().to_vec());
            let want = BlockDiagonal::of_rows(&wide, bs, first, l1);
            prop_assert_eq!(g.setup_vec_download(&g.setup_block_diagonal_on(&dwide, (first, bs), l1).unwrap()).unwrap(), want.blocks().unwrap().to_vec());
        }
        // The blocks' inverses on the device: the host's bit for bit, or the
        // same first singular node (random blocks, some singular: zero rows).
        for bs in [1, 2, 3, 5, 8] {
            let d = BlockDiagonal::of(&random_csr(bs * mm, bs * mm, seed ^ 0x5151 ^ bs as u64), bs, false);
            let dv = g.setup_vec_upload(d.blocks().unwrap()).unwrap();
            let (inv, singular) = g.setup_block_inverse(&dv, bs).unwrap();
            match d.inverse() {
                Ok(want) => {
                    prop_assert_eq!(singular, None);
                    let got = g.setup_vec_download(&inv).unwrap();
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    prop_assert_eq!(bits(&got), bits(want.blocks().unwrap()), "bs {}", bs);
                }
                Err(e) => {
                    let k = singular.expect("the host found a singular block");
                    prop_assert_eq!(e.to_string(), gpuq_amg::blockdiag::singular_block(k, bs).to_string());
                }
            }
            // Kept on the device, downloaded only when asked for.
            let kept = gpuq_amg::device_inverse(g, &d);
            prop_assert_eq!(kept.as_ref().map(|k| k.blocks().unwrap().to_vec()).ok(), d.inverse().map(|w| w.blocks().unwrap().to_vec()).ok());
        }
        prop_assert!(g.setup_block_inverse(&g.setup_vec_zeros(8).unwrap(), 0).is_err());
        prop_assert!(g.setup_block_inverse(&g.setup_vec_zeros(8).unwrap(), 3).is_err());
        prop_assert!(g.setup_block_inverse(&g.setup_vec_zeros(81).unwrap(), 9).is_err());
        let zero_rows: Vec<usize> = (0..mm).filter(|&i| sq.row(i).1.iter().all(|&v| v == 0.0)).collect();
        prop_assert_eq!(g.setup_zero_rows(&dsq).unwrap(), zero_rows);
        let lens: Vec<u32> = sq.row_ptr().windows(2).map(|w| (w[1] - w[0]) as u32).collect();
        prop_assert_eq!(g.setup_row_lengths(&dsq).unwrap(), lens.clone());
        let x: Vec<f64> = (0..mm).map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0).collect();
        for layout in [Layout::Csr, Layout::Sell { c: 4, sigma: 1 }, Layout::Sell { c: 4, sigma: 8 }] {
            if let Layout::Sell { c, sigma } = layout {
                // the device's plan stores what the host's does
                let plan = gpuq_sparse::sell_plan(mm, |i| lens[i] as usize, c, sigma);
                prop_assert_eq!(g.setup_sell_stored(&dsq, c, sigma).unwrap(), *plan.1.last().unwrap());
            }
            let built = g.setup_to_matrix::<f64>(&dsq, layout).unwrap().unwrap();
            let uploaded = g.upload_matrix(&sq, layout).unwrap();
            let y = |a| {
                let mut y = g.zeros::<f64>(mm).unwrap();
                g.spmv(1.0, a, &g.upload(&x).unwrap(), 0.0, &mut y).unwrap();
                g.download(&y).unwrap()
            };
            prop_assert_eq!(y(&built), y(&uploaded), "{:?}", layout);
            let single = g.setup_to_matrix::<f32>(&dsq, layout).unwrap().unwrap();
            let host32 = g.upload_matrix(&Csr::try_new(mm, mm, sq.row_ptr().to_vec(), sq.col_idx().to_vec(), sq.values().iter().map(|&v| v as f32).collect()).unwrap(), layout).unwrap();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let y32 = |a| {
                let mut y = g.zeros::<f32>(mm).unwrap();
                g.spmv(1.0, a, &g.upload(&x32).unwrap(), 0.0, &mut y).unwrap();
                g.download(&y).unwrap()
            };
            prop_assert_eq!(y32(&single), y32(&host32), "f32 {:?}", layout);
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
                .setup_smoothed_prolongator(&dsq, bs, omega, &g.setup_vec_upload(dinv.blocks().unwrap()).unwrap(), &dpt)
                .unwrap();
            prop_assert_eq!(g.setup_download(&got).unwrap(), want);
        }
        // The tentative prolongator of one vector (zeros on a whole
        // aggregate give a zero column), block 1 or 2.
        for bs in [1usize, 2] {
            let nodes = m;
            let naggs = 1 + nodes / 3;
            let agg: Vec<u32> = (0..nodes).map(|i| ((i * 7 + seed as usize) % naggs) as u32).collect();
            let b: Vec<f64> = (0..nodes * bs)
                .map(|r| if agg[r / bs] == 0 { 0.0 } else { ((r * 13 % 17) as f64 - 8.0) / 5.0 })
                .collect();
            let want = gpuq_amg::prolong::tentative(&agg, naggs, bs, std::slice::from_ref(&b)).unwrap();
            let (pt, norm) = g.setup_tentative_single(&agg, naggs, bs, &b).unwrap();
            prop_assert_eq!(g.setup_download(&pt).unwrap(), want.p);
            prop_assert_eq!(vec![norm], want.coarse_null);
            // Several vectors: a QR per aggregate. The third vector is the
            // sum of the first two (a zero column after Gram-Schmidt), the
            // second vanishes on aggregate 1.
            let second: Vec<f64> =
                (0..nodes * bs).map(|r| if agg[r / bs] == 1 { 0.0 } else { ((r * 5 % 11) as f64 - 4.0) / 3.0 }).collect();
            let third: Vec<f64> = b.iter().zip(&second).map(|(x, y)| x + y).collect();
            for k in [2, 3] {
                let nns = [b.clone(), second.clone(), third.clone()][..k].to_vec();
                let want = gpuq_amg::prolong::tentative(&agg, naggs, bs, &nns).unwrap();
                let (pt, coarse) = g.setup_tentative_qr(&agg, naggs, bs, &nns).unwrap();
                prop_assert_eq!(g.setup_download(&pt).unwrap(), want.p);
                prop_assert_eq!(coarse, want.coarse_null);
            }
            // Every fifth node in no aggregate (an identity row's): empty
            // rows, the rest as before, one vector or several.
            let some: Vec<u32> = agg
                .iter()
                .enumerate()
                .map(|(i, &a)| if i % 5 == 2 { gpuq_amg::aggregate::NOT_AGGREGATED } else { a })
                .collect();
            for k in [1, 2, 3] {
                let nns = [b.clone(), second.clone(), third.clone()][..k].to_vec();
                let want = gpuq_amg::prolong::tentative(&some, naggs, bs, &nns).unwrap();
                let (pt, coarse) = match k {
                    1 => {
                        let (pt, norm) = g.setup_tentative_single(&some, naggs, bs, &b).unwrap();
                        (pt, vec![norm])
                    }
                    _ => g.setup_tentative_qr(&some, naggs, bs, &nns).unwrap(),
                };
                prop_assert_eq!(g.setup_download(&pt).unwrap(), want.p, "k {}", k);
                prop_assert_eq!(coarse, want.coarse_null, "k {}", k);
            }
            // The vector of ones (the default of one unknown per node):
            // counted on the device, not transposed, the host's values bit
            // for bit; every node in an aggregate, then some in none.
            let ones = vec![1.0; nodes * bs];
            for a in [&agg, &some] {
                let want = gpuq_amg::prolong::tentative(a, naggs, bs, std::slice::from_ref(&ones)).unwrap();
                let (pt, norm) = g.setup_tentative_single(a, naggs, bs, &ones).unwrap();
                prop_assert_eq!(g.setup_download(&pt).unwrap(), want.p);
                prop_assert_eq!(vec![norm], want.coarse_null);
            }
            prop_assert!(g.setup_tentative_qr(&agg, naggs, bs, &[]).is_err());
            prop_assert!(g.setup_tentative_qr(&agg, naggs, bs, &[b.clone(), vec![1.0; b.len() + 1]]).is_err());
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
    // One warp per row (given lanes), and the default: two rows take eight
    // warps each, whose tables hold these rows.
    let one_warp = g.setup_spgemm_within(&da, &db, 1 << 27, Some(32)).unwrap();
    assert_eq!(
        g.setup_download(&one_warp).unwrap(),
        spgemm(&a, &b).unwrap()
    );
    let got = g
        .setup_download(&g.setup_spgemm(&da, &db).unwrap())
        .unwrap();
    assert_eq!(got, spgemm(&a, &b).unwrap());
    // More distinct columns (12,000 and up) than even eight warps' count
    // table holds (8,192 slots): counted again in a global table.
    let n = 20_000;
    let mut coo = Coo::new(2, n);
    for j in 0..12_000 {
        coo.push(0, j, 1.0 + j as f64 * 1e-4).unwrap();
    }
    coo.push(1, 17, 3.0).unwrap();
    let a = Csr::from_coo(&coo).unwrap();
    let mut band = Coo::new(n, n);
    for j in 0..n {
        band.push(j, j, 2.0).unwrap();
        band.push(j, (j * 7 + 3) % n, -0.5).unwrap();
    }
    let b = Csr::from_coo(&band).unwrap();
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
        // the device setup leaves what it built on the device
        for (m, name) in [(Some(&d.a), "A"), (d.p.as_ref(), "P"), (d.r.as_ref(), "R")] {
            if let Some(m) = m.filter(|_| l > 0 || name != "A") {
                assert!(m.resident().is_some(), "{at}: {name} not on the device");
            }
        }
        exact &= assert_close(
            h.a.host().unwrap(),
            d.a.host().unwrap(),
            1e-12,
            &format!("{at}: A"),
        );
        if let (Some(hp), Some(dp)) = (&h.p, &d.p) {
            exact &= assert_close(
                hp.host().unwrap(),
                dp.host().unwrap(),
                1e-12,
                &format!("{at}: P"),
            );
        }
        if let (Some(hr), Some(dr)) = (&h.r, &d.r) {
            exact &= assert_close(
                hr.host().unwrap(),
                dr.host().unwrap(),
                1e-12,
                &format!("{at}: R"),
            );
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

/// A graph Laplacian plus the identity on `n` nodes, node i linked to the
/// `i % 9` nodes `(i + 1 + (7 i + 13 t) % 40) % n` (t = 0, 1, ..) and
/// symmetrised: rows of 2 to 17 entries (for n = 3000), 9 on average. SPD.
fn uneven_rows(n: usize) -> Csr<f64> {
    let mut coo = Coo::new(n, n);
    let mut degree = vec![0.0; n];
    for i in 0..n {
        for t in 0..i % 9 {
            let j = (i + 1 + (i * 7 + t * 13) % 40) % n;
            if j != i {
                coo.push(i, j, -1.0).unwrap();
                coo.push(j, i, -1.0).unwrap();
                degree[i] += 1.0;
                degree[j] += 1.0;
            }
        }
    }
    for (i, d) in degree.iter().enumerate() {
        coo.push(i, i, d + 1.0).unwrap();
    }
    Csr::from_coo(&coo).unwrap()
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
    // The aggregates stay on the device, isolated nodes dropped there too.
    let held = |a: &Csr<f64>, o: &AmgOptions| {
        let h = Hierarchy::build_on(g, a, o).unwrap();
        let agg = h.levels()[0].aggregate_of.as_ref().unwrap();
        gpuq_amg::device_aggregates(g, agg).is_some()
    };
    assert!(held(&laplace3d::<f64>(16), &small(1)));
    let fixed = with_identity_rows(&laplace3d::<f64>(16), |i| i % 7 == 0);
    assert!(held(&fixed, &small(1)));
    same_hierarchy(g, &coupled2d(30, 0.05), &small(2), "coupled2d:30");
    same_hierarchy(g, &neumann2d(30), &small(1), "neumann2d:30");
    // Unsymmetric values on a symmetric pattern.
    same_hierarchy(g, &convdiff2d::<f64>(40, 0.8), &small(1), "convdiff2d:40");
    // Scalar rows of 2 to 17 entries, 9 on average: the strength test's
    // quarter-warp groups take rows of up to three times their lanes.
    same_hierarchy(g, &uneven_rows(3000), &small(1), "uneven rows");
    // Three near-null-space vectors: coarse levels have three unknowns per node.
    let (e, _) = gpuq_sparse::elasticity::elasticity2d::<f64>(24).unwrap();
    let coords = gpuq_sparse::generators::ProblemSpec::Elasticity2d { n: 24 }
        .node_coordinates()
        .unwrap();
    let modes = gpuq_amg::rigid_body_modes(&coords).unwrap();
    let o = AmgOptions {
        near_null_space: Some(modes),
        ..small(2)
    };
    same_hierarchy(g, &e, &o, "elasticity2d:24");
    // Block 3 and six rigid-body modes: coarse levels of six unknowns per node.
    let e3 = gpuq_sparse::elasticity3d::Elasticity3d::new(7).unwrap();
    let o = AmgOptions {
        near_null_space: Some(gpuq_amg::rigid_body_modes(&e3.free_coordinates()).unwrap()),
        ..small(3)
    };
    same_hierarchy(g, &e3.stiffness(), &o, "elasticity3d:7");
    // Dirichlet unknowns kept as identity rows: isolated nodes join no
    // aggregate (empty rows of the tentative prolongator, one vector or the
    // thin QR of the rigid body modes on the device).
    let fixed = with_identity_rows(&laplace3d::<f64>(16), |i| i % 7 == 0);
    same_hierarchy(g, &fixed, &small(1), "laplace3d:16, identity rows");
    let fixed = with_identity_rows(&e3.stiffness(), |i| (i / 3) % 5 == 0);
    let o = AmgOptions {
        near_null_space: Some(gpuq_amg::rigid_body_modes(&e3.free_coordinates()).unwrap()),
        ..small(3)
    };
    same_hierarchy(g, &fixed, &o, "elasticity3d:7, identity rows");
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
fn isolated_nodes_listed_and_dropped_on_the_device_as_on_the_host() {
    let Some(g) = gpu("isolated_nodes_listed_and_dropped_on_the_device_as_on_the_host") else {
        return;
    };
    use gpuq_amg::aggregate::{drop_isolated, isolated_nodes, mis2_aggregates};
    use gpuq_amg::strength::strength_graph;
    let fixed = with_identity_rows(&laplace3d::<f64>(12), |i| i % 11 == 0);
    let s = strength_graph(&fixed, 1, 0.08).unwrap();
    let (agg, naggs) = mis2_aggregates(&s);
    let isolated = isolated_nodes(&s);
    assert!(isolated.len() > 10);
    let d = g.setup_upload(&fixed).unwrap();
    let kept = g.setup_aggregates_kept(&d, 1, 0.08).unwrap().unwrap();
    assert_eq!(kept.isolated, isolated, "the listed isolated nodes");
    assert_eq!(g.setup_aggregates_download(&kept).unwrap(), agg);
    // Every other isolated node dropped (a rank keeps those with ghost
    // entries), then all of them (one process's rule, on the device).
    let half: Vec<u32> = isolated.iter().copied().step_by(2).collect();
    let without = g.setup_aggregates_without(&kept, &half).unwrap();
    let mut want = agg.clone();
    let count = drop_isolated(&mut want, naggs, &half);
    assert_eq!(without.count, count);
    assert_eq!(g.setup_aggregates_download(&without).unwrap(), want);
    let rest: Vec<u32> = isolated.iter().copied().skip(1).step_by(2).collect();
    assert_eq!(without.isolated, rest);
    let all = g.setup_aggregates_dropped(&d, 1, 0.08).unwrap().unwrap();
    let mut want = agg.clone();
    let count = drop_isolated(&mut want, naggs, &isolated);
    assert_eq!((all.count, all.isolated.len()), (count, 0));
    assert_eq!(g.setup_aggregates_download(&all).unwrap(), want);
    // The aggregates kept: nothing dropped, the original count.
    assert_eq!(g.setup_aggregates_without(&kept, &[]).unwrap().count, naggs);
    assert!(g.setup_aggregates_without(&kept, &[1 << 30]).is_err());
}

#[test]
fn a_matrix_already_on_the_device_builds_the_same_hierarchy() {
    let Some(g) = gpu("a_matrix_already_on_the_device_builds_the_same_hierarchy") else {
        return;
    };
    let o = AmgOptions {
        coarse_size: 20,
        ..AmgOptions::default()
    };
    for (a, what) in [
        (laplace3d::<f64>(14), "laplace3d:14"),
        (neumann2d(24), "neumann2d:24 (singular)"),
    ] {
        let on_device = g.upload_matrix(&a, Layout::Csr).unwrap();
        let finest = gpuq_amg::resident_finest(g, &on_device).unwrap();
        let before = g.stats();
        let resident = Hierarchy::build_on_resident(g, finest, &o).unwrap();
        let down = g.stats().bytes_down - before.bytes_down;
        let before = g.stats();
        let uploaded = Hierarchy::build_on(g, &a, &o).unwrap();
        let down_uploaded = g.stats().bytes_down - before.bytes_down;
        // What the setup read back, against A's arrays (12 bytes an entry, 8 a
        // row) and against the setup of an uploaded A (printed: the Python
        // tests bound a CuPy solve's traffic).
        let a_bytes = 12 * a.nnz() as u64 + 8 * (a.nrows() as u64 + 1);
        println!("{what}: {down} bytes down (from an upload: {down_uploaded}; A: {a_bytes})");
        assert_eq!(resident.levels().len(), uploaded.levels().len(), "{what}");
        for (l, (r, u)) in resident.levels().iter().zip(uploaded.levels()).enumerate() {
            assert_eq!(r.aggregate_of, u.aggregate_of, "{what}, level {l}");
            let (ra, ua) = (r.a.host().unwrap(), u.a.host().unwrap());
            assert_eq!(ra.values(), ua.values(), "{what}, level {l}");
        }
        assert_eq!(resident.null_space(), uploaded.null_space(), "{what}");
        assert_eq!(resident.is_symmetric(), uploaded.is_symmetric(), "{what}");
        // A host matrix handed over is uploaded as build_on uploads it.
        let handed = Hierarchy::build_handed_over(g, a.clone(), &o).unwrap();
        assert!(
            handed.levels()[0].a.resident().is_some(),
            "{what}: handed over"
        );
        assert_eq!(handed.levels().len(), uploaded.levels().len(), "{what}");
        for (l, (h, u)) in handed.levels().iter().zip(uploaded.levels()).enumerate() {
            assert_eq!(h.aggregate_of, u.aggregate_of, "{what}, level {l}");
            let (ha, ua) = (h.a.host().unwrap(), u.a.host().unwrap());
            assert_eq!(ha.values(), ua.values(), "{what}, level {l}");
        }
        assert_eq!(handed.null_space(), uploaded.null_space(), "{what}");
    }
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

/// One cycle of `h` on the device applied to a fixed vector.
fn cycle_of<T: gpuq_core::Scalar>(g: &CudaBackend, h: &Hierarchy, layout: Layout) -> Vec<T> {
    let amg = Amg::<CudaBackend, T>::new(g, h, &CycleOptions { layout }).unwrap();
    let n = h.levels()[0].a.nrows();
    let x: Vec<T> = (0..n)
        .map(|i| T::from_f64(((i * 7919 % 101) as f64 - 50.0) / 25.0))
        .collect();
    let mut y = g.zeros::<T>(n).unwrap();
    amg.apply(&g.upload(&x).unwrap(), &mut y).unwrap();
    g.download(&y).unwrap()
}

#[test]
fn the_cycle_of_the_device_hierarchy_is_the_host_hierarchys() {
    let Some(g) = gpu("the_cycle_of_the_device_hierarchy_is_the_host_hierarchys") else {
        return;
    };
    let o = AmgOptions {
        coarse_size: 50,
        ..AmgOptions::default()
    };
    for (a, what) in [
        (laplace3d::<f64>(14), "laplace3d:14"),
        (convdiff2d::<f64>(40, 0.0), "laplace2d:40"),
    ] {
        let host = Hierarchy::build(&a, &o).unwrap();
        let dev = Hierarchy::build_on(g, &a, &o).unwrap();
        for layout in [Layout::Csr, Layout::Sell { c: 32, sigma: 1 }] {
            let (h64, d64) = (
                cycle_of::<f64>(g, &host, layout),
                cycle_of::<f64>(g, &dev, layout),
            );
            let scale = h64.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (x, y) in h64.iter().zip(&d64) {
                assert!(
                    (x - y).abs() <= 1e-12 * scale,
                    "{what} {layout:?}: {x} against {y}"
                );
            }
            let (h32, d32) = (
                cycle_of::<f32>(g, &host, layout),
                cycle_of::<f32>(g, &dev, layout),
            );
            let scale = h32.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            for (x, y) in h32.iter().zip(&d32) {
                assert!(
                    (x - y).abs() <= 1e-5 * scale,
                    "{what} {layout:?} f32: {x} against {y}"
                );
            }
        }
        // the cycle was built from the device copies: the host copies of the
        // coarse levels were never made
        assert!(dev.levels()[1..]
            .iter()
            .all(|l| !l.a.on_host() || l.a.nrows() <= o.coarse_size));
        println!("{what}: the device hierarchy's cycle equals the host's");
    }
}

#[test]
fn update_values_on_the_device_equals_the_hosts() {
    let Some(g) = gpu("update_values_on_the_device_equals_the_hosts") else {
        return;
    };
    let a = laplace3d::<f64>(12);
    let o = AmgOptions {
        coarse_size: 50,
        ..AmgOptions::default()
    };
    let vals: Vec<f64> = a.values().iter().map(|&x| 2.5 * x).collect();
    let a2 = Csr::try_new(
        a.nrows(),
        a.ncols(),
        a.row_ptr().to_vec(),
        a.col_idx().to_vec(),
        vals,
    )
    .unwrap();
    let host = Hierarchy::build(&a, &o)
        .unwrap()
        .update_values(&a2)
        .unwrap();
    let dev = Hierarchy::build_on(g, &a, &o)
        .unwrap()
        .update_values_on(g, &a2)
        .unwrap();
    // Patterns compared on the device: the same, another size, a moved
    // column, an added entry (a different count).
    let d = g.setup_upload(&a).unwrap();
    assert!(g.setup_same_pattern(&d, &a2).unwrap());
    assert!(!g.setup_same_pattern(&d, &laplace3d::<f64>(11)).unwrap());
    let mut cols = a.col_idx().to_vec();
    let end = a.row_ptr()[1];
    let p = (0..end - 1).find(|&p| cols[p] + 1 < cols[p + 1]).unwrap();
    cols[p] += 1;
    let moved = Csr::try_new_allow_nonfinite(
        a.nrows(),
        a.ncols(),
        a.row_ptr().to_vec(),
        cols,
        a.values().to_vec(),
    )
    .unwrap();
    assert!(!g.setup_same_pattern(&d, &moved).unwrap());
    let mut corner = gpuq_sparse::Coo::new(a.nrows(), a.ncols());
    corner.push(0, a.ncols() - 1, -1e-3).unwrap();
    let dense_row =
        gpuq_amg::galerkin::add(1.0, &a, 1.0, &Csr::from_coo(&corner).unwrap()).unwrap();
    assert!(!g.setup_same_pattern(&d, &dense_row).unwrap());
    let built = Hierarchy::build_on(g, &a, &o).unwrap();
    assert!(built.update_values_on(g, &dense_row).is_err());
    assert_eq!(host.levels().len(), dev.levels().len());
    for (l, (h, d)) in host.levels().iter().zip(dev.levels()).enumerate() {
        assert_eq!(h.aggregate_of, d.aggregate_of, "level {l}");
        assert_close(
            h.a.host().unwrap(),
            d.a.host().unwrap(),
            1e-12,
            &format!("level {l}: A"),
        );
    }
    println!("update_values on the device: the host's hierarchy");
}

/// The host's verdicts of the input checks (`Hierarchy::build`'s
/// finiteness, null-space candidates and symmetry), computed directly.
fn host_checks(a: &Csr<f64>, bs: usize) -> (bool, Vec<bool>, bool) {
    let n = a.nrows();
    let finite = a.values().iter().all(|v| v.is_finite());
    let norm = (0..n)
        .map(|i| a.row(i).1.iter().map(|x| x.abs()).sum::<f64>())
        .fold(0.0, f64::max);
    let cands = if bs > 1 { bs + 1 } else { 1 };
    let large = (0..cands)
        .map(|c| {
            (0..n).any(|i| {
                let (cols, vals) = a.row(i);
                let s: f64 = cols
                    .iter()
                    .zip(vals)
                    .filter(|(&j, _)| c == bs || j as usize % bs == c)
                    .map(|(_, &y)| y)
                    .sum();
                s.abs() > 1e-10 * norm
            })
        })
        .collect();
    let scale = a.values().iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let symmetric = (0..n).all(|i| {
        let (c, v) = a.row(i);
        c.iter().zip(v).all(|(&j, &x)| {
            let (cj, vj) = a.row(j as usize);
            let y = cj.binary_search(&(i as u32)).map_or(0.0, |p| vj[p]);
            (x - y).abs() <= 1e-12 * scale
        })
    });
    (finite, large, symmetric)
}

#[test]
fn device_input_checks_match_the_host() {
    let Some(g) = gpu("device_input_checks_match_the_host") else {
        return;
    };
    let r = random_csr(60, 60, 11);
    let sym = add(1.0, &r, 1.0, &r.transpose(false)).unwrap();
    // a pure-Neumann Laplacian: rows sum to zero, all ones in the null space
    let mut coo = Coo::new(60, 60);
    for i in 0..60usize {
        let mut deg = 0.0;
        for j in [i.wrapping_sub(1), i + 1] {
            if j < 60 {
                coo.push(i, j, -1.0).unwrap();
                deg += 1.0;
            }
        }
        coo.push(i, i, deg).unwrap();
    }
    let neumann = Csr::from_coo(&coo).unwrap();
    let mut vals = sym.values().to_vec();
    vals[7] = f64::NAN;
    let bad =
        Csr::try_new_allow_nonfinite(60, 60, sym.row_ptr().to_vec(), sym.col_idx().to_vec(), vals)
            .unwrap();
    for (name, m) in [
        ("random", &r),
        ("symmetric", &sym),
        ("neumann", &neumann),
        ("nan", &bad),
    ] {
        for bs in [1usize, 2, 3] {
            let found = g
                .setup_input_checks(&g.setup_upload(m).unwrap(), bs)
                .unwrap()
                .unwrap();
            let (finite, large, symmetric) = host_checks(m, bs);
            assert_eq!(found.finite, finite, "{name} bs {bs}");
            if finite {
                assert_eq!(found.large, large, "{name} bs {bs}");
                assert_eq!(found.symmetric, symmetric, "{name} bs {bs}");
            }
        }
    }
    // and a whole build: the same null space and symmetry as the host's
    let h = Hierarchy::build(&neumann, &AmgOptions::default()).unwrap();
    let d = Hierarchy::build_on(g, &neumann, &AmgOptions::default()).unwrap();
    assert_eq!(d.null_space(), h.null_space());
    assert_eq!(d.is_symmetric(), h.is_symmetric());
    assert!(!h.null_space().is_empty());
}

#[test]
fn large_transfers_through_the_staging_buffers_round_trip() {
    let Some(g) = gpu("large_transfers_through_the_staging_buffers_round_trip") else {
        return;
    };
    // 6,000,001 values (48 MB: staged both ways, a partial last chunk) and
    // 700,001 (5.6 MB: staged down only); twice, so the buffers are reused.
    for n in [6_000_001usize, 700_001, 6_000_001] {
        let v: Vec<f64> = (0..n).map(|i| (i as f64).sin() * 1e3 + i as f64).collect();
        let d = g.setup_vec_upload(&v).unwrap();
        assert_eq!(g.setup_vec_download(&d).unwrap(), v, "{n} values");
        // The backend's vectors too (a solution's download), in both
        // precisions, and one below the staged size.
        let x = gpuq_core::Backend::upload(g, &v).unwrap();
        assert_eq!(
            gpuq_core::Backend::download(g, &x).unwrap(),
            v,
            "{n} values"
        );
        let w: Vec<f32> = v.iter().map(|&t| t as f32).collect();
        let y = gpuq_core::Backend::upload(g, &w).unwrap();
        assert_eq!(
            gpuq_core::Backend::download(g, &y).unwrap(),
            w,
            "{n} values"
        );
    }
    let small: Vec<f64> = (0..20_000).map(|i| i as f64 * 0.5).collect();
    let x = gpuq_core::Backend::upload(g, &small).unwrap();
    assert_eq!(gpuq_core::Backend::download(g, &x).unwrap(), small);
}

#[test]
fn stacked_and_padded_uploads_equal_the_joined_host_arrays() {
    let Some(g) = gpu("stacked_and_padded_uploads_equal_the_joined_host_arrays") else {
        return;
    };
    // Squared by empty rows (a level's rows as gpuq-dist keeps them):
    // 1,000,000 rows over 1,000,003 columns (row pointers 8 MB: staged, then
    // three copies of nnz), and a small matrix (copied straight).
    for (n, ghosts) in [(1_000_000usize, 3usize), (7, 5), (4, 0)] {
        let m = n + ghosts;
        let mut coo = Coo::new(n, m);
        for i in 0..n {
            coo.push(i, i, 2.0 + i as f64).unwrap();
            coo.push(i, (i * 7 + 3) % m, -1.0).unwrap();
        }
        let a = Csr::from_coo(&coo).unwrap();
        let mut ptr = a.row_ptr().to_vec();
        ptr.resize(m + 1, a.nnz());
        let want = Csr::try_new(m, m, ptr, a.col_idx().to_vec(), a.values().to_vec()).unwrap();
        let empty = Csr::try_new(ghosts, m, vec![0; ghosts + 1], vec![], vec![]).unwrap();
        let squared = g.setup_upload_stacked(&[&a, &empty], m).unwrap();
        let got = g.setup_download(&squared).unwrap();
        assert_eq!(got, want, "{n} rows, {ghosts} ghost columns");
        let head: Vec<f64> = (0..n).map(|i| i as f64 - 0.5).collect();
        let mut joined = head.clone();
        joined.resize(m, 0.0);
        let v = g.setup_vec_upload_padded(&head, ghosts).unwrap();
        assert_eq!(g.setup_vec_download(&v).unwrap(), joined);
        // The same padding of a vector already on the device.
        let up = g.setup_vec_upload(&head).unwrap();
        let v = g.setup_vec_padded(&up, ghosts).unwrap();
        assert_eq!(g.setup_vec_download(&v).unwrap(), joined);
    }
    let wide = Csr::try_new(2, 1, vec![0, 1, 1], vec![0], vec![1.0]).unwrap();
    // Stacked: a large part (staged), an empty one, a small one.
    // (600,001 row pointers: 4.8 MB, staged; about 2.4 x 10^6 entries.)
    let big = random_csr(600_000, 8, 11);
    let empty = Csr::<f64>::try_new(0, 8, vec![0], vec![], vec![]).unwrap();
    let small = random_csr(9, 8, 12);
    let mut coo = Coo::new(big.nrows() + small.nrows(), 8);
    for (first, p) in [(0, &big), (big.nrows(), &small)] {
        for i in 0..p.nrows() {
            let (c, v) = p.row(i);
            for (&j, &x) in c.iter().zip(v) {
                coo.push(first + i, j as usize, x).unwrap();
            }
        }
    }
    let want = Csr::from_coo(&coo).unwrap();
    let got = g.setup_upload_stacked(&[&big, &empty, &small], 8).unwrap();
    assert_eq!(g.setup_download(&got).unwrap(), want);
    assert!(g.setup_upload_stacked(&[&big, &wide], 8).is_err());
    let none = g.setup_upload_stacked(&[], 7).unwrap();
    assert_eq!(g.setup_download(&none).unwrap().shape(), (0, 7));
}

#[test]
fn device_inner_products_fold_their_partials_as_the_host() {
    let Some(g) = gpu("device_inner_products_fold_their_partials_as_the_host") else {
        return;
    };
    // Partials: 1, exactly one chunk (1,024), one chunk and one partial, and
    // 3,908 (three full chunks of partials and part of a fourth).
    for n in [5usize, 1024 * 1024, 1024 * 1024 + 1, 4_000_000] {
        let x: Vec<f64> = (0..n).map(|i| ((i * 37) as f64).sin() * 1e3).collect();
        let y: Vec<f64> = (0..n).map(|i| ((i * 11 + 5) as f64).cos() - 0.25).collect();
        let want = gpuq_amg::spectral::dot_sum(&x, &y);
        let (dx, dy) = (
            g.setup_vec_upload(&x).unwrap(),
            g.setup_vec_upload(&y).unwrap(),
        );
        let chunks = n.div_ceil(gpuq_kernels::amg::DOT_CHUNK);
        let mut partial = g.setup_vec_zeros(chunks).unwrap();
        let mut scalars = g.setup_vec_zeros(4).unwrap();
        g.setup_dot_into((&dx, &dy), &mut partial, false, (&mut scalars, 0))
            .unwrap();
        g.setup_dot_into((&dx, &dy), &mut partial, true, (&mut scalars, 1))
            .unwrap();
        // The same two products as one replayed launch.
        let mut ops = gpuq_cuda::SetupOps::new();
        g.record_dot(&mut ops, (&dx, &dy), &mut partial, false, (&mut scalars, 2))
            .unwrap();
        g.record_dot(&mut ops, (&dx, &dy), &mut partial, true, (&mut scalars, 3))
            .unwrap();
        // SAFETY: every buffer recorded is alive until the read below.
        unsafe { g.setup_replay(ops) }.unwrap();
        let got = g.setup_vec_read(&scalars, 0..4).unwrap();
        let root = want.abs().sqrt();
        let bits: Vec<u64> = got.iter().map(|v| v.to_bits()).collect();
        let wants = [want, root, want, root].map(f64::to_bits);
        assert_eq!(bits, wants, "{n} entries: {got:?} against {want}");
    }
}
