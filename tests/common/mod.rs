//! Shared strategies and helpers of the integration tests.
#![allow(dead_code)]

use gpuq::core::{Complex64, RealScalar, Scalar};
use gpuq::sparse::{Coo, Csr};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Builds a random scalar from two reals in [-1, 1).
pub trait RandomScalar: Scalar {
    fn random(rng: &mut ChaCha8Rng) -> Self;
}

impl RandomScalar for f64 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        rng.random_range(-1.0..1.0)
    }
}

impl RandomScalar for f32 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        rng.random_range(-1.0..1.0)
    }
}

impl RandomScalar for Complex64 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        Complex64::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
    }
}

impl RandomScalar for gpuq::core::Complex32 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        gpuq::core::Complex32::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
    }
}

pub fn random_vec<T: RandomScalar>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| T::random(&mut rng)).collect()
}

/// A random sparse matrix of the given shape with some empty rows, possibly one dense
/// row, duplicates in the triplets (summed) and explicit zeros.
pub fn random_csr<T: RandomScalar>(nrows: usize, ncols: usize, density: f64, seed: u64) -> Csr<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut coo = Coo::new(nrows, ncols);
    if ncols > 0 {
        for i in 0..nrows {
            if rng.random_bool(0.15) {
                continue; // empty row
            }
            let dense = rng.random_bool(0.05);
            for j in 0..ncols {
                if dense || rng.random_bool(density) {
                    let v = if rng.random_bool(0.05) {
                        T::zero()
                    } else {
                        T::random(&mut rng)
                    };
                    coo.push(i, j, v).unwrap();
                }
            }
            if rng.random_bool(0.1) {
                let j = rng.random_range(0..ncols);
                coo.push(i, j, T::random(&mut rng)).unwrap();
            }
        }
    }
    Csr::from_coo(&coo).unwrap()
}

/// Strategy: (nrows, ncols, density, seed).
pub fn shapes() -> impl Strategy<Value = (usize, usize, f64, u64)> {
    (0usize..40, 0usize..40, 0.0f64..0.5, any::<u64>())
}

/// Dense reference y = A x from the row-major dense copy.
pub fn dense_mul<T: Scalar>(a: &Csr<T>, x: &[T]) -> Vec<T> {
    let d = a.to_dense();
    (0..a.nrows())
        .map(|i| (0..a.ncols()).map(|j| d[i * a.ncols() + j] * x[j]).sum())
        .collect()
}

/// max_i |y_i - z_i| <= tol * (1 + max_i |z_i|)
pub fn assert_close<T: Scalar>(y: &[T], z: &[T], tol: f64) {
    assert_eq!(y.len(), z.len());
    let scale = 1.0
        + z.iter()
            .map(|v| v.magnitude().to_f64_lossless())
            .fold(0.0, f64::max);
    for (i, (a, b)) in y.iter().zip(z).enumerate() {
        let d = (*a - *b).magnitude().to_f64_lossless();
        assert!(
            d <= tol * scale,
            "entry {i}: {a} vs {b} (diff {d:e}, tol {:e})",
            tol * scale
        );
    }
}

/// A random Hermitian positive definite matrix: symmetric random pattern with
/// conjugate-mirrored values and a dominant positive diagonal.
pub fn random_hpd<T: RandomScalar>(n: usize, density: f64, seed: u64) -> Csr<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut coo = Coo::new(n, n);
    let mut rowsum = vec![0.0f64; n];
    for i in 0..n {
        for j in 0..i {
            if rng.random_bool(density) {
                let v = T::random(&mut rng);
                coo.push(i, j, v).unwrap();
                coo.push(j, i, v.conj()).unwrap();
                let m = v.magnitude().to_f64_lossless();
                rowsum[i] += m;
                rowsum[j] += m;
            }
        }
    }
    for (i, s) in rowsum.iter().enumerate() {
        coo.push(i, i, T::from_f64(s + 1.0 + rng.random_range(0.0..1.0)))
            .unwrap();
    }
    Csr::from_coo(&coo).unwrap()
}

pub fn rel_err<T: Scalar>(x: &[T], y: &[T]) -> f64 {
    let num: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (*a - *b).abs_sqr().to_f64_lossless())
        .sum();
    let den: f64 = y.iter().map(|b| b.abs_sqr().to_f64_lossless()).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}
