//! Sampling designs beyond plain Monte Carlo, as per-(sample, dimension)
//! functions that any thread can evaluate without shared state:
//!
//! * Latin hypercube: in dimension d, sample s falls in stratum pi_d(s) of the
//!   S equal strata of (0, 1), at a uniform position inside it; pi_d is a keyed
//!   pseudo-random permutation of 0..S (a four-round Feistel network on the
//!   smallest even number of bits covering S, walked in cycles until it lands
//!   below S), so no permutation table is stored. The uniforms map to normals by
//!   the inverse normal CDF ([`inv_normal_cdf`]).
//! * Scrambled Sobol, one dimension: the base-2 van der Corput sequence (Sobol's
//!   first coordinate) with hash-based Owen scrambling (Laine-Karras permutation,
//!   Burley 2020), so every power-of-two prefix of the samples is stratified.
//!
//! Cost: a permutation evaluation is 4 x (expected < 4) rounds of a 64-bit mix;
//! the inverse CDF about 20 flops (plus `ln` and `sqrt` in the tails).

use super::real::UqReal;
use crate::chacha::Stream;

/// A 64-bit mix (the finaliser of SplitMix64).
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// pi(s) for a keyed pseudo-random permutation of 0..n (n >= 1, s < n), the
/// permutation chosen by (key, dim).
#[inline(always)]
pub fn permute(key: &[u32; 8], dim: u64, s: u64, n: u64) -> u64 {
    let mut bits = 64 - (n - 1).leading_zeros().min(63);
    bits += bits & 1;
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let k = ((key[1] as u64) << 32 | key[0] as u64) ^ mix(dim.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let mut x = s;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        let mut round = 0u64;
        while round < 4 {
            let f = mix(r ^ k.wrapping_add(round.wrapping_mul(0xd6e8_feb8_6659_fd93))) & mask;
            (l, r) = (r, l ^ f);
            round += 1;
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}

/// Phi^-1(p) for p in (0, 1): Acklam's rational approximations (relative error
/// below 1.2e-9; the tails through sqrt(-2 ln p)).
#[inline(always)]
pub fn inv_normal_cdf<T: UqReal>(p: T) -> T {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let f = T::from_f64;
    let low = f(0.02425);
    let tail = |q: T| {
        let q = (f(-2.0) * q.ln()).sqrt();
        (((((f(C[0]) * q + f(C[1])) * q + f(C[2])) * q + f(C[3])) * q + f(C[4])) * q + f(C[5]))
            / ((((f(D[0]) * q + f(D[1])) * q + f(D[2])) * q + f(D[3])) * q + T::ONE)
    };
    if p < low {
        tail(p)
    } else if p > T::ONE - low {
        -tail(T::ONE - p)
    } else {
        let q = p - f(0.5);
        let r = q * q;
        (((((f(A[0]) * r + f(A[1])) * r + f(A[2])) * r + f(A[3])) * r + f(A[4])) * r + f(A[5])) * q
            / (((((f(B[0]) * r + f(B[1])) * r + f(B[2])) * r + f(B[3])) * r + f(B[4])) * r + T::ONE)
    }
}

/// A source of standard normals for one sample, in dimension order.
pub trait Normals<T> {
    /// The next dimension's normal.
    fn next_normal(&mut self) -> T;
}

impl<T: UqReal> Normals<T> for super::gauss::NormalStream<T> {
    #[inline(always)]
    fn next_normal(&mut self) -> T {
        super::gauss::NormalStream::next_normal(self)
    }
}

/// Latin hypercube normals of sample `s` of `n`: dimension d gives
/// Phi^-1((pi_d(s) + u_d) / n), u_d word d of the sample's stream.
pub struct LhsNormals {
    key: [u32; 8],
    sample: u64,
    samples: u64,
    dim: u64,
    words: Stream,
}

impl LhsNormals {
    /// The normals of sample `sample` of `samples` (>= 1) under `key`.
    #[inline(always)]
    pub fn new(key: [u32; 8], sample: u64, samples: u64) -> Self {
        LhsNormals {
            key,
            sample,
            samples,
            dim: 0,
            words: Stream::new(key, sample),
        }
    }
}

impl<T: UqReal> Normals<T> for LhsNormals {
    #[inline(always)]
    fn next_normal(&mut self) -> T {
        let stratum = permute(&self.key, self.dim, self.sample, self.samples);
        self.dim += 1;
        // In f64 the stratum and the offset are exact; the sum is rounded once.
        let u = (stratum as f64 + self.words.next_unit()) / self.samples as f64;
        let u = if u < 1.0 {
            u
        } else {
            1.0 - 0.5 / 4_294_967_296.0
        };
        inv_normal_cdf(T::from_f64(u))
    }
}

/// Plain Monte Carlo: every normal from the sample's ChaCha8 stream.
pub const MONTE_CARLO: u32 = 0;
/// Latin hypercube in every dimension ([`LhsNormals`]).
pub const LATIN_HYPERCUBE: u32 = 1;
/// The first dimension from the scrambled Sobol sequence ([`sobol_1d`]), the
/// others from the sample's ChaCha8 stream.
pub const SOBOL_FIRST: u32 = 2;

/// The first normal from the scrambled Sobol sequence, the others from the
/// sample's ChaCha8 stream.
pub struct SobolFirst<T> {
    first: Option<T>,
    rest: super::gauss::NormalStream<T>,
}

impl<T: UqReal> SobolFirst<T> {
    /// Sample `sample` under `seed` (Sobol samples wrap after 2^32).
    #[inline(always)]
    pub fn new(seed: u64, sample: u64) -> Self {
        let u = sobol_1d((seed ^ (seed >> 32)) as u32, sample as u32);
        SobolFirst {
            first: Some(inv_normal_cdf(T::from_f64(u))),
            rest: super::gauss::NormalStream::new(crate::chacha::key_from_seed(seed), sample),
        }
    }
}

impl<T: UqReal> Normals<T> for SobolFirst<T> {
    #[inline(always)]
    fn next_normal(&mut self) -> T {
        match self.first.take() {
            Some(z) => z,
            None => self.rest.next_normal(),
        }
    }
}

/// Point `s` of the one-dimensional Owen-scrambled Sobol (van der Corput)
/// sequence, in the open interval (0, 1).
#[inline(always)]
pub fn sobol_1d(seed: u32, s: u32) -> f64 {
    let mut x = s.wrapping_add(seed);
    x ^= x.wrapping_mul(0x6c50_b47c);
    x ^= x.wrapping_mul(0xb82f_1e52);
    x ^= x.wrapping_mul(0xc7af_e638);
    x ^= x.wrapping_mul(0x8d22_f6e6);
    crate::chacha::unit_open(x.reverse_bits())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chacha::key_from_seed;
    extern crate std;
    use std::vec;

    #[test]
    fn permutations_are_bijections() {
        let key = key_from_seed(5);
        for n in [1u64, 2, 3, 7, 64, 100, 1000] {
            for dim in 0..3 {
                let mut seen = vec![false; n as usize];
                for s in 0..n {
                    let p = permute(&key, dim, s, n) as usize;
                    assert!(!seen[p]);
                    seen[p] = true;
                }
            }
        }
        let a: std::vec::Vec<u64> = (0..10).map(|s| permute(&key, 0, s, 10)).collect();
        let b: std::vec::Vec<u64> = (0..10).map(|s| permute(&key, 1, s, 10)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn inverse_cdf_inverts_the_cdf() {
        // Reference values of Phi^-1.
        for (p, z) in [
            (0.5, 0.0),
            (0.975, 1.959_963_984_540_054),
            (0.001, -3.090_232_306_167_813),
            (1e-9, -5.997_807_015_007_686),
            (0.3, -0.524_400_512_708_041),
        ] {
            let x: f64 = inv_normal_cdf(p);
            assert!(
                (x - z).abs() <= 1.2e-9 * z.abs().max(1.0),
                "{p}: {x} vs {z}"
            );
        }
    }

    #[test]
    fn lhs_strata_are_each_hit_once() {
        let n = 50u64;
        let key = key_from_seed(2);
        for dim in 0..4u64 {
            let mut hit = vec![0; n as usize];
            for s in 0..n {
                let mut src = LhsNormals::new(key, s, n);
                let mut z = 0.0f64;
                for _ in 0..=dim {
                    z = src.next_normal();
                }
                // Back to the stratum through the CDF's monotonicity: count by rank.
                hit[permute(&key, dim, s, n) as usize] += 1;
                assert!(z.is_finite());
            }
            assert!(hit.iter().all(|&h| h == 1));
        }
    }

    #[test]
    fn sobol_prefixes_are_stratified() {
        for m in [1u32, 2, 4, 8, 64] {
            let mut hit = vec![0; m as usize];
            for s in 0..m {
                let u = sobol_1d(12345, s);
                assert!(u > 0.0 && u < 1.0);
                hit[(u * m as f64) as usize] += 1;
            }
            assert!(hit.iter().all(|&h| h == 1), "{m}: {hit:?}");
        }
    }
}
