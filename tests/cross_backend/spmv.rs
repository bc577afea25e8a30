//! SpMV in every layout against the CPU oracle: random matrices with empty rows,
//! one dense row, wide rows; all four scalars.

use crate::common::{random_csr, random_vec, RandomScalar};
use crate::{gpu, two_gamma};
use gpuq::core::{Backend, Complex32, Complex64, FusedDot, RealScalar};
use gpuq::cpu::CpuBackend;
use gpuq::sparse::{generators, Csr, Layout, SparseBackend};
use proptest::prelude::*;

fn layouts(a_rows: usize, a_cols: usize) -> Vec<Layout> {
    let mut l = vec![
        Layout::Csr,
        Layout::Sell { c: 32, sigma: 1 },
        Layout::Sell { c: 32, sigma: 256 },
        Layout::Sell { c: 7, sigma: 14 },
    ];
    for b in 2..=gpuq::sparse::MAX_BSR_BLOCK {
        if a_rows % b == 0 && a_cols % b == 0 {
            l.push(Layout::Bsr { b });
        }
    }
    l
}

fn check_spmv<T: RandomScalar>(a: &Csr<T>, seed: u64) {
    let Some(g) = gpu("spmv") else { return };
    let c = CpuBackend::new();
    let eps = T::Real::eps().to_f64_lossless();
    let xs: Vec<T> = random_vec(a.ncols(), seed);
    let y0: Vec<T> = random_vec(a.nrows(), seed + 1);
    let (alpha, beta) = (T::from_f64(1.5), T::from_f64(-0.5));
    // Per-row bound: 2 gamma_{len+2} (|alpha| sum_j |a_ij x_j| + |beta y_i|).
    let bound: Vec<f64> = (0..a.nrows())
        .map(|i| {
            let (cols, vals) = a.row(i);
            let s: f64 = cols
                .iter()
                .zip(vals)
                .map(|(&j, v)| (v.magnitude() * xs[j as usize].magnitude()).to_f64_lossless())
                .sum();
            two_gamma(cols.len() + 2, eps, T::IS_COMPLEX)
                * (1.5 * s + 0.5 * y0[i].magnitude().to_f64_lossless())
                + f64::MIN_POSITIVE
        })
        .collect();
    let (xg, xc) = (g.upload(&xs).unwrap(), c.upload(&xs).unwrap());
    for layout in layouts(a.nrows(), a.ncols()) {
        let (mg, mc) = (
            g.upload_matrix(a, layout).unwrap(),
            c.upload_matrix(a, layout).unwrap(),
        );
        let (mut yg, mut yc) = (g.upload(&y0).unwrap(), c.upload(&y0).unwrap());
        g.spmv(alpha, &mg, &xg, beta, &mut yg).unwrap();
        c.spmv(alpha, &mc, &xc, beta, &mut yc).unwrap();
        let (gy, cy) = (g.download(&yg).unwrap(), c.download(&yc).unwrap());
        for i in 0..a.nrows() {
            let d = (gy[i] - cy[i]).magnitude().to_f64_lossless();
            assert!(
                d <= bound[i],
                "{layout:?} row {i}: gpu {} cpu {} differ by {d:e} > {:e}",
                gy[i],
                cy[i],
                bound[i]
            );
        }
        // beta = 0 must not read y (NaN stays out)
        let mut yn = g.upload(&vec![T::from_f64(f64::NAN); a.nrows()]).unwrap();
        g.spmv(T::one(), &mg, &xg, T::zero(), &mut yn).unwrap();
        assert!(
            g.download(&yn).unwrap().iter().all(|v| v.is_finite_value()),
            "{layout:?}: NaN leaked"
        );
        // spmv_dotc agrees with spmv + dotc on the device
        if a.nrows() == a.ncols() {
            let mut q = g.zeros::<T>(a.nrows()).unwrap();
            let pq = g.spmv_dotc(&mg, &xg, &mut q).unwrap();
            let mut q2 = c.zeros::<T>(a.nrows()).unwrap();
            let pq2 = c.spmv_dotc(&mc, &xc, &mut q2).unwrap();
            // |x^H y - x^H y'| <= sum |x_i| |y_i - y'_i| + 2 gamma_n sum |x_i| |y_i|,
            // with the per-row SpMV bound for |y_i - y'_i| (alpha = 1, beta = 0 here,
            // so the alpha = 1.5 bound above is an upper bound).
            let q2h = c.download(&q2).unwrap();
            let scale: f64 = (0..a.nrows())
                .map(|i| {
                    let xi = xs[i].magnitude().to_f64_lossless();
                    xi * bound[i]
                        + two_gamma(a.nrows(), eps, T::IS_COMPLEX)
                            * xi
                            * q2h[i].magnitude().to_f64_lossless()
                })
                .sum();
            assert!(
                (pq - pq2).magnitude().to_f64_lossless() <= 2.0 * scale + f64::MIN_POSITIVE,
                "{layout:?} spmv_dotc {pq} vs {pq2}"
            );
            assert_eq!(
                pq,
                g.spmv_dotc(&mg, &xg, &mut q).unwrap(),
                "{layout:?}: spmv_dotc not deterministic"
            );
            check_fused_dot(a, layout, &xs, &bound, seed);
        }
    }
}

/// `spmv_dot` on the device (fused for CSR and SELL, `false` for BSR)
/// against the CPU's fused CSR product: w^H y within the per-row SpMV bound
/// `bound` carried through the sum plus both sides' summation errors; bitwise
/// the same on a second call; the other slots of the scalar array untouched.
fn check_fused_dot<T: RandomScalar>(
    a: &Csr<T>,
    layout: Layout,
    xs: &[T],
    bound: &[f64],
    seed: u64,
) {
    let Some(g) = gpu("spmv_dot") else { return };
    let c = CpuBackend::new();
    let n = a.nrows();
    let eps = T::Real::eps().to_f64_lossless();
    let g2 = 2.0 * two_gamma(n, eps, T::IS_COMPLEX);
    let ws: Vec<T> = random_vec(n, seed ^ 0x5eed);
    let mag = |v: &T| v.magnitude().to_f64_lossless();
    let mg = g.upload_matrix(a, layout).unwrap();
    let mc = c.upload_matrix(a, Layout::Csr).unwrap();
    let (xg, xc) = (g.upload(xs).unwrap(), c.upload(xs).unwrap());
    let (wg, wc) = (g.upload(&ws).unwrap(), c.upload(&ws).unwrap());
    let sentinel = T::from_f64(-3.0);
    let on_gpu = || {
        let mut sc = g.upload(&[sentinel; 6]).unwrap();
        let mut y = g.zeros::<T>(n).unwrap();
        let dot = FusedDot {
            w: &wg,
            sc: &mut sc,
            slot: 1,
        };
        let f = g.spmv_dot(&mg, &xg, &mut y, dot).unwrap();
        (f, g.download(&y).unwrap(), g.download(&sc).unwrap())
    };
    let (fused, gy, gsc) = on_gpu();
    let mut sc = c.upload(&[sentinel; 6]).unwrap();
    let mut y = c.zeros::<T>(n).unwrap();
    let dot = FusedDot {
        w: &wc,
        sc: &mut sc,
        slot: 1,
    };
    assert!(c.spmv_dot(&mc, &xc, &mut y, dot).unwrap());
    let (cy, csc) = (c.download(&y).unwrap(), c.download(&sc).unwrap());
    assert_eq!(
        fused,
        !matches!(layout, Layout::Bsr { .. }) && n > 0,
        "{layout:?}"
    );
    for i in 0..n {
        assert!(mag(&(gy[i] - cy[i])) <= bound[i], "{layout:?} row {i}");
    }
    if fused {
        // |w^H y - w^H y'| <= sum |w_i| (e_i + 2 gamma_n |y'_i|), with e_i the
        // rows' bound.
        let limit: f64 = (0..n)
            .map(|i| mag(&ws[i]) * (bound[i] + g2 * mag(&cy[i])))
            .sum();
        let d = mag(&(gsc[1] - csc[1]));
        assert!(
            d <= limit + f64::MIN_POSITIVE,
            "{layout:?}: gpu {} cpu {} differ by {d:e} > {limit:e}",
            gsc[1],
            csc[1]
        );
    }
    for (k, v) in gsc.iter().enumerate() {
        if !(fused && k == 1) {
            assert_eq!(*v, sentinel, "{layout:?}: slot {k} written");
        }
    }
    assert_eq!(gsc, on_gpu().2, "{layout:?}: spmv_dot not deterministic");
}

#[test]
fn spmv_fixed_shapes_all_scalars() {
    for (m, n, d, seed) in [
        (0, 0, 0.1, 1),
        (1, 1, 1.0, 2),
        (31, 33, 0.2, 3),
        (32, 32, 0.05, 4),
        (1007, 1007, 0.01, 5),
        (64, 3000, 0.3, 6),
    ] {
        check_spmv(&random_csr::<f32>(m, n, d, seed), seed);
        check_spmv(&random_csr::<f64>(m, n, d, seed), seed);
        check_spmv(&random_csr::<Complex32>(m, n, d, seed), seed);
        check_spmv(&random_csr::<Complex64>(m, n, d, seed), seed);
    }
}

#[test]
fn spmv_laplacians() {
    check_spmv(&generators::laplace3d::<f64>(20), 7);
    check_spmv(&generators::laplace2d::<Complex64>(40), 8);
    check_spmv(&generators::laplace1d::<f32>(10_001, 0.5), 9);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn spmv_random_matrices(m in 0usize..300, n in 0usize..300, d in 0.0f64..0.3, seed in any::<u64>()) {
        check_spmv(&random_csr::<f64>(m, n, d, seed), seed);
        check_spmv(&random_csr::<Complex64>(m, n, d, seed), seed);
    }
}

/// `spmv_add_rows` (a distributed product's ghost half: y += A x over the
/// runs of non-empty rows, the increment's dot added to a slot) on the device
/// against the CPU: random rectangular CSR blocks with many empty rows, whose
/// y must stay as it was, over all rows and over `ghost_row_runs`; `false`
/// and nothing done for the other layouts.
fn check_add_dot<T: RandomScalar>(m: usize, n: usize, density: f64, seed: u64, runs: bool) {
    let Some(g) = gpu("spmv_add_rows") else {
        return;
    };
    let a = random_csr::<T>(m, n, density, seed);
    let eps = T::Real::eps().to_f64_lossless();
    let mag = |v: &T| v.magnitude().to_f64_lossless();
    let (xs, y0, ws) = (
        random_vec::<T>(n, seed + 1),
        random_vec::<T>(m, seed + 2),
        random_vec::<T>(m, seed + 3),
    );
    let sentinel = T::from_f64(-3.0);
    let mg = g.upload_matrix(&a, Layout::Csr).unwrap();
    let (xg, wg) = (g.upload(&xs).unwrap(), g.upload(&ws).unwrap());
    let mut yg = g.upload(&y0).unwrap();
    let mut scg = g.upload(&[sentinel; 4]).unwrap();
    let dot = FusedDot {
        w: &wg,
        sc: &mut scg,
        slot: 2,
    };
    let ranges = gpuq::dist::ghost_row_runs(&a);
    let runs = runs.then_some(&ranges[..]);
    assert!(g
        .spmv_add_rows(T::one(), &mg, &xg, &mut yg, Some(dot), runs)
        .unwrap());
    let (gy, gsc) = (g.download(&yg).unwrap(), g.download(&scg).unwrap());
    // the CPU: t = A x, y0 + t, sentinel + w^H t
    let t = a.mul_vec(&xs).unwrap();
    let mut want = sentinel;
    for i in 0..m {
        want += ws[i].conj() * t[i];
        let (cols, vals) = a.row(i);
        let row: f64 = cols
            .iter()
            .zip(vals)
            .map(|(&j, v)| mag(v) * mag(&xs[j as usize]))
            .sum();
        if cols.is_empty() {
            assert_eq!(gy[i], y0[i], "row {i}: an empty row's y changed");
        } else {
            let bound = 2.0 * two_gamma(cols.len() + 1, eps, T::IS_COMPLEX) * (row + mag(&y0[i]));
            assert!(mag(&(gy[i] - (y0[i] + t[i]))) <= bound, "row {i}");
        }
    }
    let scale: f64 = (0..m).map(|i| mag(&ws[i]) * mag(&t[i])).sum::<f64>() + 3.0;
    let limit = 4.0 * two_gamma(m + a.max_row_len() + 1, eps, T::IS_COMPLEX) * scale;
    assert!(
        mag(&(gsc[2] - want)) <= limit,
        "slot {:?} vs {want:?}",
        gsc[2]
    );
    assert_eq!((gsc[0], gsc[1], gsc[3]), (sentinel, sentinel, sentinel));
    // other layouts: not fused, nothing done
    let ms = g
        .upload_matrix(&a, Layout::Sell { c: 32, sigma: 1 })
        .unwrap();
    let dot = FusedDot {
        w: &wg,
        sc: &mut scg,
        slot: 2,
    };
    assert!(!g
        .spmv_add_rows(T::one(), &ms, &xg, &mut yg, Some(dot), runs)
        .unwrap());
    assert_eq!(g.download(&yg).unwrap(), gy);
}

#[test]
fn spmv_add_rows_adds_the_ghost_block_and_its_dot() {
    for (m, n, d, seed) in [
        (0, 5, 0.1, 11),
        (1000, 40, 0.002, 12),
        (4096, 300, 0.01, 13),
    ] {
        for runs in [false, true] {
            check_add_dot::<f64>(m, n, d, seed, runs);
            check_add_dot::<Complex64>(m, n, d, seed, runs);
            check_add_dot::<f32>(m, n, d, seed, runs);
        }
    }
}
