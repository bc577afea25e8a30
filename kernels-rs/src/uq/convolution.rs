//! Per-item math of the FFT convolution (crate `gpuq-uq`, procedure (iii)),
//! shared by the CPU and the CUDA backend.
//!
//! A sample's AR(1) load is f = a * z' (a linear convolution) with
//! a_j = sigma phi^j, z'_0 = z_0 / sqrt(1 - phi^2) and z'_k = z_k, the z_k
//! the normals of the sample's ChaCha8 stream. The procedure folds `a` into
//! the output kernel once, so a sample's input to the FFT is z' itself,
//! zero-padded: [`load_block`] gives sixteen consecutive entries of it from
//! one ChaCha8 block, independent of every other block (a GPU thread each).
//!
//! Statistics over samples go by groups of [`STATS_GROUP`] samples:
//! [`chunk_moments`] gives a group's mean and sum of squared deviations (two
//! passes, samples in order) and [`merge_moments`] folds the groups, in
//! order, into the running pair (Chan's update): the same operations in the
//! same order on both backends.

use super::gauss::box_muller;
use crate::chacha::{block, CHACHA8};

/// Samples per group of the statistics: each group's moments come from
/// [`chunk_moments`], and groups are folded in sample order by
/// [`merge_moments`] (so the result does not depend on how a backend
/// batches its samples, as long as batches hold whole groups).
pub const STATS_GROUP: usize = 64;

/// Load entries per ChaCha8 block: sixteen words, eight Box-Muller pairs.
pub const LOADS_PER_BLOCK: usize = 16;

/// Entries 16 b .. 16 b + 16 of the zero-padded input z' of stream `stream`
/// under `key` (see the module notes): the normals of
/// [`super::gauss::NormalStream`] at those positions, entry 0 scaled by
/// `first_scale`, positions at or past `nt` zero. Cost: one ChaCha8 block and
/// eight Box-Muller transforms, or nothing past `nt`.
#[inline(always)]
pub fn load_block(key: &[u32; 8], stream: u64, b: u64, nt: u64, first_scale: f64) -> [f64; 16] {
    let first = b * LOADS_PER_BLOCK as u64;
    if first >= nt {
        return [0.0; 16];
    }
    let w = block::<CHACHA8>(key, b, stream);
    // Constant indices only (a dynamic index would put the block in local
    // memory on the GPU).
    let p = [
        box_muller::<f64>(w[0], w[1]),
        box_muller::<f64>(w[2], w[3]),
        box_muller::<f64>(w[4], w[5]),
        box_muller::<f64>(w[6], w[7]),
        box_muller::<f64>(w[8], w[9]),
        box_muller::<f64>(w[10], w[11]),
        box_muller::<f64>(w[12], w[13]),
        box_muller::<f64>(w[14], w[15]),
    ];
    let mut out = [
        p[0].0, p[0].1, p[1].0, p[1].1, p[2].0, p[2].1, p[3].0, p[3].1, p[4].0, p[4].1, p[5].0,
        p[5].1, p[6].0, p[6].1, p[7].0, p[7].1,
    ];
    if first == 0 {
        out[0] *= first_scale;
    }
    if first + LOADS_PER_BLOCK as u64 > nt {
        let mut j = 0;
        while j < LOADS_PER_BLOCK {
            if first + j as u64 >= nt {
                out[j] = 0.0;
            }
            j += 1;
        }
    }
    out
}

/// Mean and sum of squared deviations of `count` values `value(0..count)`,
/// each pass in index order. O(count).
#[inline(always)]
pub fn chunk_moments(count: usize, value: impl Fn(usize) -> f64) -> (f64, f64) {
    let mut sum = 0.0;
    let mut i = 0;
    while i < count {
        sum += value(i);
        i += 1;
    }
    let mean = sum / count as f64;
    let mut m2 = 0.0;
    let mut i = 0;
    while i < count {
        let d = value(i) - mean;
        m2 += d * d;
        i += 1;
    }
    (mean, m2)
}

/// Folds the moments (mean_b, m2_b) of nb new values into (mean_a, m2_a) of
/// na earlier ones (Chan, Golub and LeVeque's pairwise update). O(1).
#[inline(always)]
pub fn merge_moments(
    na: f64,
    (mean_a, m2_a): (f64, f64),
    nb: f64,
    (mean_b, m2_b): (f64, f64),
) -> (f64, f64) {
    if na == 0.0 {
        return (mean_b, m2_b);
    }
    let n = na + nb;
    let delta = mean_b - mean_a;
    (
        mean_a + delta * (nb / n),
        m2_a + m2_b + delta * delta * (na * nb / n),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chacha::key_from_seed;
    use crate::uq::gauss::NormalStream;

    #[test]
    fn blocks_are_the_stream_in_order() {
        let key = key_from_seed(9);
        let mut z = NormalStream::<f64>::new(key, 4);
        let nt = 37;
        let scale = 2.5;
        for b in 0..4u64 {
            let got = load_block(&key, 4, b, nt, scale);
            for (j, v) in got.iter().enumerate() {
                let k = b * 16 + j as u64;
                let want = if k >= nt {
                    0.0
                } else if k == 0 {
                    scale * z.next_normal()
                } else {
                    z.next_normal()
                };
                assert_eq!(v.to_bits(), want.to_bits(), "entry {k}");
            }
        }
    }

    #[test]
    fn merged_moments_equal_one_pass_over_all() {
        let v: [f64; 23] = core::array::from_fn(|i| ((i * 7919) % 31) as f64 * 0.37 - 4.0);
        let whole = chunk_moments(v.len(), |i| v[i]);
        let mut acc = (0.0, 0.0);
        let mut n = 0.0;
        for c in v.chunks(5) {
            acc = merge_moments(n, acc, c.len() as f64, chunk_moments(c.len(), |i| c[i]));
            n += c.len() as f64;
        }
        assert!((acc.0 - whole.0).abs() < 1e-13);
        assert!((acc.1 - whole.1).abs() < 1e-11 * whole.1);
    }
}
