//! Linear outputs of Monte Carlo samples, `u_o(s) = a_o + sum_k c_o[k] z_k(s)`, z(s)
//! the normals of sample s's stream in [`super::gauss::NormalStream`]'s order,
//! taken a ChaCha8 block (16 normals) at a time so that any block of any sample
//! is drawn independently: the static response's random loads through the
//! adjoints, where a load per DOF draws a normal per DOF and sample.

use super::gauss::box_muller;
use crate::chacha::{block, CHACHA8};

/// Normals a ChaCha8 block gives.
pub const BLOCK_NORMALS: usize = 16;

/// Normals 16 c .. 16 c + 16 of stream `stream` under `key`: the words 2 p and
/// 2 p + 1 of block c by [`box_muller`], as `NormalStream` draws them. About
/// 8 Box-Muller transforms and one ChaCha8 block.
#[inline(always)]
pub fn block_normals(key: &[u32; 8], stream: u64, c: u64) -> [f64; BLOCK_NORMALS] {
    let w = block::<CHACHA8>(key, c, stream);
    let mut z = [0.0; BLOCK_NORMALS];
    for p in 0..BLOCK_NORMALS / 2 {
        let (a, b) = box_muller::<f64>(w[2 * p], w[2 * p + 1]);
        z[2 * p] = a;
        z[2 * p + 1] = b;
    }
    z
}

/// sum_j coef(16 c + j) z_j over the block's normals below `len` (the last
/// block of a stream is partial), in j's order. O(16).
#[inline(always)]
pub fn block_dot(z: &[f64; BLOCK_NORMALS], c: u64, len: usize, coef: impl Fn(usize) -> f64) -> f64 {
    let base = BLOCK_NORMALS * c as usize;
    let mut s = 0.0;
    for (j, zj) in z.iter().enumerate() {
        if base + j < len {
            s += coef(base + j) * zj;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chacha::key_from_seed;
    use crate::uq::gauss::NormalStream;

    #[test]
    fn blocks_are_the_streams_normals_in_order() {
        let key = key_from_seed(7);
        for stream in [0u64, 3, 1 << 40] {
            let mut z = NormalStream::<f64>::new(key, stream);
            for c in 0..5 {
                let b = block_normals(&key, stream, c);
                for v in b {
                    assert_eq!(v, z.next_normal());
                }
            }
        }
    }

    #[test]
    fn block_dot_stops_at_the_length() {
        let z = [1.0; BLOCK_NORMALS];
        assert_eq!(block_dot(&z, 0, 40, |k| k as f64), 120.0);
        assert_eq!(
            block_dot(&z, 2, 40, |k| k as f64),
            (32..40).sum::<usize>() as f64
        );
        assert_eq!(block_dot(&z, 3, 40, |_| 1.0), 0.0);
    }
}
