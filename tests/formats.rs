//! Round trips among all formats and SpMV of every format and backend layout
//! against a dense reference.

mod common;

use common::*;
use gpuq::core::{Backend, Complex64, Error, FusedDot};
use gpuq::cpu::CpuBackend;
use gpuq::sparse::{Bsr, Csr, Ell, Layout, Sell, SparseBackend, MAX_BSR_BLOCK};
use proptest::prelude::*;

fn check_round_trips<T: RandomScalar>(a: &Csr<T>, c: usize, sigma: usize) {
    assert_eq!(&Csr::from_coo(&a.to_coo()).unwrap(), a);
    assert_eq!(&Ell::from_csr(a).to_csr().unwrap(), a);
    assert_eq!(&Sell::from_csr(a, c, sigma).unwrap().to_csr().unwrap(), a);
    for b in 1..=MAX_BSR_BLOCK {
        if a.nrows() % b == 0 && a.ncols() % b == 0 {
            assert_eq!(&Bsr::from_csr(a, b).unwrap().to_csr().unwrap(), a);
        } else {
            assert!(Bsr::from_csr(a, b).is_err());
        }
    }
    assert_eq!(&a.transpose(false).transpose(false), a);
}

fn check_products<T: RandomScalar>(a: &Csr<T>, c: usize, sigma: usize, seed: u64, tol: f64) {
    let x: Vec<T> = random_vec(a.ncols(), seed);
    let want = dense_mul(a, &x);
    assert_close(&a.mul_vec(&x).unwrap(), &want, tol);
    assert_close(&Ell::from_csr(a).mul_vec(&x).unwrap(), &want, tol);
    assert_close(
        &Sell::from_csr(a, c, sigma).unwrap().mul_vec(&x).unwrap(),
        &want,
        tol,
    );
    for b in 1..=MAX_BSR_BLOCK {
        if let Ok(m) = Bsr::from_csr(a, b) {
            assert_close(&m.mul_vec(&x).unwrap(), &want, tol);
        }
    }
    let be = CpuBackend::new();
    let xv = be.upload(&x).unwrap();
    let mut layouts = vec![Layout::Csr, Layout::Sell { c, sigma }];
    for b in 1..=MAX_BSR_BLOCK {
        if a.nrows() % b == 0 && a.ncols() % b == 0 {
            layouts.push(Layout::Bsr { b });
        }
    }
    for layout in layouts {
        let m = be.upload_matrix(a, layout).unwrap();
        // beta != 0 path: y = 2 A x - y0
        let y0: Vec<T> = random_vec(a.nrows(), seed ^ 1);
        let mut yv = be.upload(&y0).unwrap();
        be.spmv(T::from_f64(2.0), &m, &xv, -T::one(), &mut yv)
            .unwrap();
        let want2: Vec<T> = want
            .iter()
            .zip(&y0)
            .map(|(&w, &y)| T::from_f64(2.0) * w - y)
            .collect();
        assert_close(&be.download(&yv).unwrap(), &want2, tol);
        // beta == 0 ignores NaN in y
        let mut yn = be.upload(&vec![T::from_f64(f64::NAN); a.nrows()]).unwrap();
        be.spmv(T::one(), &m, &xv, T::zero(), &mut yn).unwrap();
        assert_close(&be.download(&yn).unwrap(), &want, tol);
    }
}

/// `spmv_dot` on the CPU: fused for CSR (y as `spmv` gives it, the slot as
/// the dot product of that y), `false` and y alone for SELL and BSR2; the
/// other slots untouched.
fn check_fused_dot<T: RandomScalar>(a: &Csr<T>, seed: u64, tol: f64) {
    let be = CpuBackend::new();
    let n = a.nrows();
    let (x, w) = (random_vec::<T>(n, seed), random_vec::<T>(n, seed ^ 2));
    let (xv, wv) = (be.upload(&x).unwrap(), be.upload(&w).unwrap());
    let want = dense_mul(a, &x);
    let sentinel = T::from_f64(-7.0);
    let mut layouts = vec![Layout::Csr, Layout::Sell { c: 4, sigma: 8 }];
    for b in [2, 3] {
        if n % b == 0 {
            layouts.push(Layout::Bsr { b });
        }
    }
    for layout in layouts {
        let m = be.upload_matrix(a, layout).unwrap();
        let mut sc = be.upload(&[sentinel; 6]).unwrap();
        let mut y = be.zeros::<T>(n).unwrap();
        let dot = FusedDot {
            w: &wv,
            sc: &mut sc,
            slot: 2,
        };
        let fused = be.spmv_dot(&m, &xv, &mut y, dot).unwrap();
        assert_eq!(fused, layout == Layout::Csr, "{layout:?}");
        let y = be.download(&y).unwrap();
        assert_close(&y, &want, tol);
        let got = be.download(&sc).unwrap();
        if fused {
            let wy: T = w.iter().zip(&y).map(|(p, q)| p.conj() * *q).sum();
            assert_close(&got[2..3], &[wy], tol * (n as f64 + 1.0));
        }
        for (k, v) in got.iter().enumerate() {
            if !(fused && k == 2) {
                assert_eq!(*v, sentinel, "{layout:?} slot {k} written");
            }
        }
    }
}

/// Slice heights and windows to exercise: sigma = 1 (interleaved ELLPACK) and sorted.
fn sell_params() -> impl Strategy<Value = (usize, usize)> {
    (1usize..18, 0usize..4).prop_map(|(c, k)| (c, if k == 0 { 1 } else { c * k }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trips_f64((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        check_round_trips(&random_csr::<f64>(m, n, d, seed), c, sigma);
    }

    #[test]
    fn round_trips_c64((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        check_round_trips(&random_csr::<Complex64>(m, n, d, seed), c, sigma);
    }

    /// SELL built from f64 CSR with the values converted as they are placed
    /// is the SELL of the converted CSR, entry for entry.
    #[test]
    fn sell_from_converted_values((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        let a = random_csr::<f64>(m, n, d, seed);
        let direct = Sell::from_csr_map(&a, c, sigma, |v| v as f32).unwrap();
        let copied = Sell::from_csr(&a.map_values(|v| v as f32).unwrap(), c, sigma).unwrap();
        prop_assert_eq!(direct.values(), copied.values());
        prop_assert_eq!(direct.col_idx(), copied.col_idx());
        prop_assert_eq!(direct.perm(), copied.perm());
        prop_assert_eq!(direct.slice_ptr(), copied.slice_ptr());
    }

    #[test]
    fn spmv_f64((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        check_products(&random_csr::<f64>(m, n, d, seed), c, sigma, seed, 64.0 * f64::EPSILON * (n as f64 + 1.0));
    }

    #[test]
    fn spmv_f32((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        check_products(&random_csr::<f32>(m, n, d, seed), c, sigma, seed, 64.0 * f32::EPSILON as f64 * (n as f64 + 1.0));
    }

    #[test]
    fn spmv_c64((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        check_products(&random_csr::<Complex64>(m, n, d, seed), c, sigma, seed, 64.0 * f64::EPSILON * (n as f64 + 1.0));
    }

    #[test]
    fn spmv_c32((m, n, d, seed) in shapes(), (c, sigma) in sell_params()) {
        check_products(&random_csr::<gpuq::core::Complex32>(m, n, d, seed), c, sigma, seed, 64.0 * f32::EPSILON as f64 * (n as f64 + 1.0));
    }

    #[test]
    fn fused_dot_f64(n in 0usize..300, d in 0.0f64..0.3, seed in any::<u64>()) {
        check_fused_dot(&random_csr::<f64>(n, n, d, seed), seed, 64.0 * f64::EPSILON * (n as f64 + 1.0));
    }

    #[test]
    fn fused_dot_c64(n in 0usize..300, d in 0.0f64..0.3, seed in any::<u64>()) {
        check_fused_dot(&random_csr::<Complex64>(n, n, d, seed), seed, 64.0 * f64::EPSILON * (n as f64 + 1.0));
    }

    #[test]
    fn nalgebra_round_trip((m, n, d, seed) in shapes()) {
        let a = random_csr::<f64>(m, n, d, seed);
        prop_assert_eq!(Csr::from_nalgebra(&a.to_nalgebra()).unwrap(), a);
    }
}

#[test]
fn spmv_rejects_wrong_shapes() {
    let be = CpuBackend::new();
    let a = gpuq::sparse::generators::laplace1d::<f64>(5, 0.0);
    let m = be.upload_matrix(&a, Layout::Csr).unwrap();
    let x = be.upload(&[1.0; 4]).unwrap();
    let mut y = be.zeros::<f64>(5).unwrap();
    assert!(matches!(
        be.spmv(1.0, &m, &x, 0.0, &mut y),
        Err(gpuq::core::Error::ShapeMismatch { .. })
    ));
    assert!(be
        .upload_matrix(&a, Layout::Sell { c: 4, sigma: 6 })
        .is_err());
}

#[test]
fn fused_dot_rejects_bad_shapes_and_slots() {
    let be = CpuBackend::new();
    let a = gpuq::sparse::generators::laplace1d::<f64>(5, 0.0);
    let m = be.upload_matrix(&a, Layout::Csr).unwrap();
    let x = be.upload(&[1.0; 5]).unwrap();
    let (w4, w5) = (be.upload(&[1.0; 4]).unwrap(), be.upload(&[1.0; 5]).unwrap());
    let mut y = be.zeros::<f64>(5).unwrap();
    let mut sc = be.zeros::<f64>(6).unwrap();
    let short = FusedDot {
        w: &w4,
        sc: &mut sc,
        slot: 0,
    };
    assert!(matches!(
        be.spmv_dot(&m, &x, &mut y, short),
        Err(Error::ShapeMismatch { .. })
    ));
    let outside = FusedDot {
        w: &w5,
        sc: &mut sc,
        slot: 6,
    };
    assert!(matches!(
        be.spmv_dot(&m, &x, &mut y, outside),
        Err(Error::InvalidArgument(_))
    ));
    let mut coo = gpuq::sparse::Coo::new(5, 4);
    coo.push(0, 0, 1.0).unwrap();
    let rect = Csr::<f64>::from_coo(&coo).unwrap();
    let mr = be.upload_matrix(&rect, Layout::Csr).unwrap();
    let x4 = be.upload(&[1.0; 4]).unwrap();
    let dot = FusedDot {
        w: &w5,
        sc: &mut sc,
        slot: 0,
    };
    assert!(be.spmv_dot(&mr, &x4, &mut y, dot).is_err());
}
