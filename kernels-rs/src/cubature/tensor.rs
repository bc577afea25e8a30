//! Tensor-product Gauss rules: point `idx` of an N_a^N grid, its N coordinates read
//! from the base-N_a digits of `idx` (digit k, least significant first, picks
//! the node of axis k; seed 001, section 3.5), and the fixed-order chunk sums
//! both backends reduce with.

use super::integrand::{Integrand, MAX_DIM};

/// Points each chunk of a tensor sum adds in index order (one partial per
/// chunk; the host adds the partials in chunk order). Small enough that a grid
/// of 6^10 points gives a GPU 2.4 x 10^5 chunks (threads) to run.
pub const TENSOR_CHUNK: u64 = 256;

/// Writes the coordinates of point `idx` into `x` (length = dimension) and
/// returns its weight: x_k = nodes[d_k], w = prod weights[d_k], where d_k is
/// digit k of `idx` in base `nodes.len()`. Cost: N divisions.
#[inline]
pub fn tensor_point(mut idx: u64, nodes: &[f64], weights: &[f64], x: &mut [f64]) -> f64 {
    if nodes.is_empty() || weights.len() != nodes.len() {
        return f64::NAN;
    }
    let na = nodes.len() as u64;
    let mut w = 1.0;
    for xk in x.iter_mut() {
        let d = (idx % na) as usize;
        idx /= na;
        *xk = nodes[d];
        w *= weights[d];
    }
    w
}

/// Sum of w_i f(x_i) over points `first..end` (in index order) of the tensor
/// rule with `dim` axes. The first point's digits come from [`tensor_point`]'s
/// divisions; the next ones by incrementing the digits as an odometer (no
/// division), the weight product taken in axis order as [`tensor_point`]
/// does, so every point's x and w are the same bits. Cost: (end - first)
/// evaluations and `dim` divisions.
#[inline]
pub fn tensor_chunk<F: Integrand + ?Sized>(
    f: &F,
    dim: usize,
    nodes: &[f64],
    weights: &[f64],
    first: u64,
    end: u64,
) -> f64 {
    if dim > MAX_DIM || nodes.is_empty() || weights.len() != nodes.len() {
        return f64::NAN;
    }
    if first >= end {
        return 0.0;
    }
    // Lookups by `get` (a digit is always below na, the length of both
    // tables): no bounds-check panic path on the device.
    let node = |d: usize| nodes.get(d).copied().unwrap_or(f64::NAN);
    let weight = |d: usize| weights.get(d).copied().unwrap_or(f64::NAN);
    let na = nodes.len();
    let mut x = [0.0f64; MAX_DIM];
    let mut digit = [0usize; MAX_DIM];
    let mut rest = first;
    for (d, xk) in digit.iter_mut().zip(x.iter_mut()).take(dim) {
        *d = (rest % na as u64) as usize;
        rest /= na as u64;
        *xk = node(*d);
    }
    let xs = x.len().min(dim);
    let mut s = 0.0;
    let mut idx = first;
    loop {
        let w = digit.iter().take(dim).fold(1.0, |w, &d| w * weight(d));
        s += w * f.eval(x.get(..xs).unwrap_or(&[]));
        idx += 1;
        if idx == end {
            return s;
        }
        for (d, xk) in digit.iter_mut().zip(x.iter_mut()).take(dim) {
            *d += 1;
            if *d < na {
                *xk = node(*d);
                break;
            }
            *d = 0;
            *xk = node(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sum;
    impl Integrand for Sum {
        fn eval(&self, x: &[f64]) -> f64 {
            x.iter().enumerate().map(|(k, v)| (k + 1) as f64 * v).sum()
        }
    }

    /// The odometer walk gives the same bits as decoding every index.
    #[test]
    fn chunk_matches_pointwise_decoding() {
        let (nodes, weights) = ([-1.5, 0.25, 2.0], [0.2, 0.5, 0.3]);
        let dim = 4;
        for (first, end) in [(0u64, 81u64), (5, 6), (7, 64), (80, 81), (3, 3)] {
            let mut x = [0.0; 4];
            let want = (first..end).fold(0.0, |s, i| {
                let w = tensor_point(i, &nodes, &weights, &mut x);
                s + w * Sum.eval(&x)
            });
            let got = tensor_chunk(&Sum, dim, &nodes, &weights, first, end);
            assert_eq!(got.to_bits(), want.to_bits(), "{first}..{end}");
        }
    }
}
