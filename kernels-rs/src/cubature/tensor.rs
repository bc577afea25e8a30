//! Tensor-product Gauss rules: point `idx` of an N_a^N grid, its N coordinates read
//! from the base-N_a digits of `idx` (digit k, least significant first, picks
//! the node of axis k; seed 001, section 3.5), and the fixed-order chunk sums
//! both backends reduce with.

use super::integrand::{Integrand, MAX_DIM};

/// Most points a chunk of a tensor sum adds in index order ([`chunk_points`]).
/// Small enough that a grid of 6^10 points gives a GPU 2.4 x 10^5 chunks
/// (threads) to run.
pub const TENSOR_CHUNK: u64 = 256;

/// Chunks a rule of fewer than `TENSOR_CHUNK x TENSOR_CHUNKS_WANTED` points is
/// cut into at least (about), so that a small grid still gives a GPU threads
/// enough: a thread's points are one dependent chain.
pub const TENSOR_CHUNKS_WANTED: u64 = 1 << 14;

/// The points per chunk of a tensor sum over `total` points: [`TENSOR_CHUNK`]
/// for grids of 2^22 points or more, else the largest power of two p with
/// p x [`TENSOR_CHUNKS_WANTED`] <= total (at least 1). A function of `total`
/// alone, so every backend cuts the sum the same way. O(1).
#[inline]
pub fn chunk_points(total: u64) -> u64 {
    let per = total / TENSOR_CHUNKS_WANTED;
    if per >= TENSOR_CHUNK {
        TENSOR_CHUNK
    } else if per == 0 {
        1
    } else {
        1 << (63 - per.leading_zeros())
    }
}

/// Chunks per group: a backend returns one sum per group of `TENSOR_GROUP`
/// consecutive chunks, the chunk sums added in chunk order ([`group_sum`]);
/// the caller adds the group sums in group order. The bits depend on neither
/// the thread count nor the backend.
pub const TENSOR_GROUP: u64 = 256;

/// Writes the coordinates of point `idx` into `x` (length = dimension) and
/// returns its weight: x_k = nodes\[d_k\], w = w_0 (w_1 (... (w_{N-1}))) with
/// w_k = weights\[d_k\], where d_k is digit k of `idx` in base `nodes.len()`
/// (the product from the last axis down, as [`tensor_chunk`] forms it).
/// Cost: N divisions.
#[inline]
pub fn tensor_point(mut idx: u64, nodes: &[f64], weights: &[f64], x: &mut [f64]) -> f64 {
    if nodes.is_empty() || weights.len() != nodes.len() || x.len() > MAX_DIM {
        return f64::NAN;
    }
    let na = nodes.len() as u64;
    let mut digit = [0usize; MAX_DIM];
    for (xk, d) in x.iter_mut().zip(digit.iter_mut()) {
        *d = (idx % na) as usize;
        idx /= na;
        *xk = nodes[*d];
    }
    digit
        .iter()
        .take(x.len())
        .rev()
        .fold(1.0, |w, &d| weights[d] * w)
}

/// Sum of w_i f(x_i) over points `first..end` (in index order) of the tensor
/// rule with `dim` axes. The first point's digits come from divisions; the
/// next ones by incrementing the digits as an odometer. The weight is
/// w_0 times the suffix product w_1 (w_2 (...)), which changes only when
/// digit 1 or a higher one does, so a point costs one node, one weight, one
/// product and the evaluation; x and w are the same bits as
/// [`tensor_point`]'s. Cost: (end - first) evaluations and `dim` divisions.
#[inline]
pub fn tensor_chunk<F: Integrand + ?Sized>(
    f: &F,
    dim: usize,
    nodes: &[f64],
    weights: &[f64],
    first: u64,
    end: u64,
) -> f64 {
    if dim == 0 || dim > MAX_DIM || nodes.is_empty() || weights.len() != nodes.len() {
        return f64::NAN;
    }
    if first >= end {
        return 0.0;
    }
    // Lookups by `get` (a digit is always below na, the length of both
    // tables, and every axis index below dim <= MAX_DIM): no bounds-check
    // panic path on the device.
    let node = |d: usize| nodes.get(d).copied().unwrap_or(f64::NAN);
    let weight = |d: usize| weights.get(d).copied().unwrap_or(f64::NAN);
    let na = nodes.len();
    let mut x = [0.0f64; MAX_DIM];
    let mut digit = [0usize; MAX_DIM];
    // suffix[k] = w_k suffix[k + 1], suffix[dim] = 1.
    let mut suffix = [1.0f64; MAX_DIM + 1];
    let mut rest = first;
    for (d, xk) in digit.iter_mut().zip(x.iter_mut()).take(dim) {
        *d = (rest % na as u64) as usize;
        rest /= na as u64;
        *xk = node(*d);
    }
    for k in (0..dim).rev() {
        let w =
            weight(digit.get(k).copied().unwrap_or(0)) * suffix.get(k + 1).copied().unwrap_or(1.0);
        if let Some(sk) = suffix.get_mut(k) {
            *sk = w;
        }
    }
    let xs = x.len().min(dim);
    let mut s = 0.0;
    let mut idx = first;
    let mut d0 = digit[0];
    loop {
        let tail = suffix[1];
        loop {
            x[0] = node(d0);
            s += weight(d0) * tail * f.eval(x.get(..xs).unwrap_or(&[]));
            idx += 1;
            if idx == end {
                return s;
            }
            d0 += 1;
            if d0 == na {
                break;
            }
        }
        d0 = 0;
        // Carry into digits 1.. (idx < end <= na^dim: some digit takes it).
        let mut top = 1;
        while top < dim {
            let Some(d) = digit.get_mut(top) else {
                break;
            };
            *d += 1;
            if *d < na {
                break;
            }
            *d = 0;
            top += 1;
        }
        let mut j = top.min(dim - 1);
        while j >= 1 {
            let d = digit.get(j).copied().unwrap_or(0);
            if let Some(xj) = x.get_mut(j) {
                *xj = node(d);
            }
            let w = weight(d) * suffix.get(j + 1).copied().unwrap_or(1.0);
            if let Some(sj) = suffix.get_mut(j) {
                *sj = w;
            }
            j -= 1;
        }
    }
}

/// Sum of `chunk(c)` over chunks c in `first..end`, in order. O(end - first).
#[inline]
pub fn group_sum(first: u64, end: u64, chunk: impl Fn(u64) -> f64) -> f64 {
    let mut s = 0.0;
    let mut c = first;
    while c < end {
        s += chunk(c);
        c += 1;
    }
    s
}

/// Sum of group q of a tensor rule over points 0..total: the chunk sums
/// ([`tensor_chunk`]) of chunks q G..min((q + 1) G, chunks) added in order by
/// [`group_sum`] (G = [`TENSOR_GROUP`], T = [`chunk_points`] of `total` points
/// per chunk). Cost: up to G T evaluations.
#[inline]
pub fn tensor_group<F: Integrand + ?Sized>(
    f: &F,
    dim: usize,
    nodes: &[f64],
    weights: &[f64],
    total: u64,
    q: u64,
) -> f64 {
    let t = chunk_points(total);
    let chunks = total.div_ceil(t);
    let first = q * TENSOR_GROUP;
    let end = if first + TENSOR_GROUP < chunks {
        first + TENSOR_GROUP
    } else {
        chunks
    };
    group_sum(first, end, |c| {
        let a = c * t;
        let b = if a + t < total { a + t } else { total };
        tensor_chunk(f, dim, nodes, weights, a, b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_shrink_for_small_grids() {
        assert_eq!(chunk_points(3125), 1);
        assert_eq!(chunk_points(1 << 14), 1);
        assert_eq!(chunk_points(3 << 14), 2);
        assert_eq!(chunk_points(2_097_152), 128);
        assert_eq!(chunk_points(1 << 22), 256);
        assert_eq!(chunk_points(100_000_000), 256);
        assert_eq!(chunk_points(0), 1);
    }

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
        // One axis: no carries.
        let mut x = [0.0; 1];
        let want = (0..3).fold(0.0, |s, i| {
            let w = tensor_point(i, &nodes, &weights, &mut x);
            s + w * Sum.eval(&x)
        });
        let got = tensor_chunk(&Sum, 1, &nodes, &weights, 0, 3);
        assert_eq!(got.to_bits(), want.to_bits());
    }
}
