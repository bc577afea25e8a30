//! Seeded reference solutions for test problems: a solution x* chosen first,
//! so that b = A x* is a non-degenerate right-hand side and the error
//! ||x - x*|| / ||x*|| of a solve can be reported beside its residual.
//!
//! A constant x* (b = A 1) is what smoothed aggregation and the Monte Carlo
//! estimators reproduce exactly on M-matrices; a random one is not.

use gpuq_core::{RealScalar, Scalar};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::Range;

/// Entries `range` of the seeded random vector: each entry (each part of a
/// complex one) uniform in [-1, 1), drawn from a ChaCha8 stream of `seed` at a
/// position fixed by its index, so any range of rows is the same slice of one
/// vector (a rank builds its own rows and its ghost columns). O(range.len()).
pub fn random_vector<T: Scalar>(seed: u64, range: Range<usize>) -> Vec<T> {
    let words_per_entry: u128 = if T::IS_COMPLEX { 4 } else { 2 };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_word_pos(range.start as u128 * words_per_entry);
    let mut part = || {
        // 53 random bits on [0, 1), then onto [-1, 1)
        let unit = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        <T::Real as RealScalar>::of_f64(2.0 * unit - 1.0)
    };
    range
        .map(|_| {
            let re = part();
            let im = if T::IS_COMPLEX {
                part()
            } else {
                <T::Real as gpuq_core::num_traits::Zero>::zero()
            };
            T::from_parts(re, im)
        })
        .collect()
}

/// The relative error ||x - x*|| / ||x*|| in the 2-norm (the absolute error
/// when x* = 0), accumulated in f64. O(n).
pub fn relative_error<T: Scalar>(x: &[T], reference: &[T]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&xi, &ri) in x.iter().zip(reference) {
        diff += (xi - ri).abs_sqr().to_f64_lossless();
        norm += ri.abs_sqr().to_f64_lossless();
    }
    if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_core::Complex64;

    #[test]
    fn any_range_is_a_slice_of_one_vector() {
        let whole: Vec<f64> = random_vector(7, 0..1000);
        assert_eq!(random_vector::<f64>(7, 313..702), whole[313..702]);
        let whole_c: Vec<Complex64> = random_vector(7, 0..100);
        assert_eq!(random_vector::<Complex64>(7, 41..99), whole_c[41..99]);
        assert_ne!(random_vector::<f64>(8, 0..1000), whole);
    }

    #[test]
    fn entries_are_spread_over_the_interval() {
        let v: Vec<f64> = random_vector(1, 0..20_000);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        // uniform on [-1, 1): mean 0, variance 1/3 (standard error ~ 0.004)
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0 / 3.0).abs() < 0.02, "variance {var}");
    }

    #[test]
    fn relative_error_of_known_vectors() {
        assert_eq!(relative_error(&[1.0, 1.0], &[1.0, 1.0]), 0.0);
        assert!((relative_error(&[2.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-15);
        assert!((relative_error(&[3.0, 4.0], &[0.0, 0.0]) - 5.0).abs() < 1e-15);
    }
}
