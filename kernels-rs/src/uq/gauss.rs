//! Standard normal draws from the keyed ChaCha8 streams, by the Box-Muller
//! transform: the words `2 j` and `2 j + 1` of a stream give normals `2 j` and
//! `2 j + 1`. Normal number `k` of stream `s` under a seed is therefore a pure
//! function of (seed, s, k), on every backend.

use super::real::UqReal;
use crate::chacha::Stream;

/// pi / 2.
const HALF_PI: f64 = core::f64::consts::FRAC_PI_2;

/// Two independent N(0, 1) values from two random words:
/// r = sqrt(-2 ln u1) with u1 = unit_open(w1), and the angle q pi/2 + theta with
/// the quadrant q from the top two bits of `w2` and theta uniform in
/// (-pi/4, pi/4) from the rest, so (cos, sin) need only the reduced series and a
/// rotation by quarter turns (exact). Cost: one `ln`, one `sqrt`, one
/// `cos_sin_eighth`, about 70 flops in `f64`.
#[inline(always)]
pub fn box_muller<T: UqReal>(w1: u32, w2: u32) -> (T, T) {
    let u1 = T::unit_open(w1);
    let r = (T::from_f64(-2.0) * u1.ln()).sqrt();
    // 30 fraction bits to (0, 1) (24 of them in f32: unit_open of the shifted word).
    let frac = T::unit_open(w2 << 2);
    let theta = (frac - T::from_f64(0.5)) * T::from_f64(HALF_PI);
    let (c, s) = theta.cos_sin_eighth();
    // Rotate by q quarter turns as two conditional steps (selects, not a
    // branch table: the lanes of a warp take different quadrants).
    let q = w2 >> 30;
    let (c, s) = if q & 1 == 1 { (-s, c) } else { (c, s) };
    let (c, s) = if q & 2 == 2 { (-c, -s) } else { (c, s) };
    (r * c, r * s)
}

/// Normals of one stream in order, two per Box-Muller transform.
pub struct NormalStream<T> {
    words: Stream,
    spare: T,
    has_spare: bool,
}

impl<T: UqReal> NormalStream<T> {
    /// The normals of stream `stream` under `key`, from the first.
    #[inline(always)]
    pub fn new(key: [u32; 8], stream: u64) -> Self {
        NormalStream {
            words: Stream::new(key, stream),
            spare: T::ZERO,
            has_spare: false,
        }
    }

    /// The next normal (one Box-Muller transform every second call).
    #[inline(always)]
    pub fn next_normal(&mut self) -> T {
        if self.has_spare {
            self.has_spare = false;
            return self.spare;
        }
        let w1 = self.words.next_u32();
        let w2 = self.words.next_u32();
        let (a, b) = box_muller(w1, w2);
        self.spare = b;
        self.has_spare = true;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chacha::key_from_seed;

    #[test]
    fn normals_have_unit_moments() {
        let mut s = NormalStream::<f64>::new(key_from_seed(11), 5);
        let n = 200_000;
        let (mut m1, mut m2, mut m4) = (0.0, 0.0, 0.0);
        for _ in 0..n {
            let z = s.next_normal();
            m1 += z;
            m2 += z * z;
            m4 += z * z * z * z;
        }
        let n = n as f64;
        assert!((m1 / n).abs() < 0.01);
        assert!((m2 / n - 1.0).abs() < 0.015);
        assert!((m4 / n - 3.0).abs() < 0.08);
    }

    #[test]
    fn f32_and_f64_draws_agree_closely() {
        let mut a = NormalStream::<f64>::new(key_from_seed(3), 0);
        let mut b = NormalStream::<f32>::new(key_from_seed(3), 0);
        for _ in 0..1000 {
            let (x, y) = (a.next_normal(), b.next_normal());
            assert!((x - y as f64).abs() < 1e-4 * (1.0 + x.abs()));
        }
    }
}
