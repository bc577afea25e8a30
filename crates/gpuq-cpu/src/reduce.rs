//! Deterministic parallel reductions.
//!
//! A reduction over `n` items is cut into blocks of [`BLOCK`] items (the last one
//! shorter). Each block is summed by [`lane_sum`] with [`LANES`] accumulators in a
//! fixed order; the block sums are collected in block order and combined by
//! [`pairwise_sum`]. Nothing depends on how Rayon schedules the blocks, so the
//! result is bitwise the same for any number of threads.

use gpuq_core::num_traits::{Float, One, Zero};
use gpuq_core::{RealScalar, Scalar};
use rayon::prelude::*;
use std::ops::Range;

/// Items per block of a reduction (and per task of the elementwise kernels).
pub const BLOCK: usize = 8192;

/// Accumulators per block: enough independent add chains to keep the FPU busy.
pub const LANES: usize = 8;

/// Sums `block(r)` over the fixed blocks `r` of `0..n`, in parallel, deterministically.
/// Cost: the blocks' work plus O(n / BLOCK) for the tree.
pub fn block_reduce<T: Scalar>(n: usize, block: impl Fn(Range<usize>) -> T + Sync) -> T {
    let nblocks = n.div_ceil(BLOCK);
    let partials: Vec<T> = (0..nblocks)
        .into_par_iter()
        .map(|b| block(b * BLOCK..((b + 1) * BLOCK).min(n)))
        .collect();
    pairwise_sum(&partials)
}

/// Sums `term(i)` for `i` in `0..n` with [`LANES`] accumulators: item `i` goes to
/// accumulator `i % LANES`, and the accumulators are combined pairwise. O(n).
#[inline(always)]
pub fn lane_sum<T: Scalar>(n: usize, term: impl Fn(usize) -> T) -> T {
    let mut acc = [T::zero(); LANES];
    let full = n - n % LANES;
    let mut i = 0;
    while i < full {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += term(i + l);
        }
        i += LANES;
    }
    for (l, j) in (full..n).enumerate() {
        acc[l] += term(j);
    }
    pairwise_sum(&acc)
}

/// Sums a slice by recursive halving (a fixed tree). O(n), error O(log n * eps).
pub fn pairwise_sum<T: Scalar>(v: &[T]) -> T {
    match v.len() {
        0 => T::zero(),
        1 => v[0],
        n => pairwise_sum(&v[..n / 2]) + pairwise_sum(&v[n / 2..]),
    }
}

/// ||x|| from `ss`, the plain sum of the squared magnitudes of `x`: its square
/// root when that is trustworthy, else (the sum overflowed, or underflowed
/// below `min_positive / eps`) the norm recomputed with every term scaled by
/// the largest magnitude, which costs two more passes over x. Deterministic:
/// the maximum does not depend on the order.
pub fn norm_from_squares<T: Scalar>(x: &[T], ss: T::Real) -> T::Real {
    let tiny = T::Real::min_positive_value() / T::Real::eps();
    if ss.is_finite() && ss >= tiny || ss == T::Real::zero() && x.iter().all(|v| v.is_zero_value())
    {
        return ss.sqrt();
    }
    // Rescale by the largest magnitude; deterministic (max is order-independent).
    let scale = x
        .par_chunks(BLOCK)
        .map(|c| c.iter().fold(T::Real::zero(), |m, v| m.max(v.magnitude())))
        .reduce(T::Real::zero, |a, b| a.max(b));
    if scale == T::Real::zero() || !scale.is_finite() {
        return if scale.is_nan() { scale } else { ss.sqrt() };
    }
    let inv = T::Real::one() / scale;
    let scaled = block_reduce(x.len(), |r| {
        let xs = &x[r];
        lane_sum(xs.len(), |k| (xs[k] * T::from_real(inv)).abs_sqr())
    });
    scale * scaled.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_exactly_on_integers() {
        for n in [0, 1, 7, 8, 9, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5] {
            let s = block_reduce(n, |r| lane_sum(r.len(), |k| (r.start + k) as f64));
            assert_eq!(s, (n * n.saturating_sub(1) / 2) as f64, "n = {n}");
        }
    }
}
