//! Tensor-product Gauss rules: point `idx` of an N_a^N grid, its N coordinates read
//! from the base-N_a digits of `idx` (digit k, least significant first, picks
//! the node of axis k; seed 001, section 3.5), and the fixed-order chunk sums
//! both backends reduce with.

use super::integrand::{Integrand, MAX_DIM};

/// Points each chunk of a tensor sum adds in index order (one partial per
/// chunk; the host adds the partials in chunk order).
pub const TENSOR_CHUNK: u64 = 1024;

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
/// rule with `dim` axes. Cost: (end - first) evaluations.
#[inline]
pub fn tensor_chunk<F: Integrand + ?Sized>(
    f: &F,
    dim: usize,
    nodes: &[f64],
    weights: &[f64],
    first: u64,
    end: u64,
) -> f64 {
    if dim > MAX_DIM {
        return f64::NAN;
    }
    let mut x = [0.0f64; MAX_DIM];
    let mut s = 0.0;
    for idx in first..end {
        let w = tensor_point(idx, nodes, weights, &mut x[..dim]);
        s += w * f.eval(&x[..dim]);
    }
    s
}
