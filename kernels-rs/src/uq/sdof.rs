//! One sample of the single-degree-of-freedom oscillator
//!
//! m x'' + c x' + g sgn(x') |x'|^p + k [alpha x + (1 - alpha) z] + k3 x^3
//!     = A [sin(w t) + eps_t],
//! z' = x' [a - |z|^n (gamma + beta sgn(x' z))]   (Bouc-Wen, when alpha < 1),
//!
//! x(0) = x0, x'(0) = v0 (fixed, or normal around them), z(0) = 0, integrated by
//! the classical fourth-order Runge-Kutta method with step h. The seed's system
//! is g = 1, p = 1/2, k3 = 0, alpha = 1, w = 1, x0 = v0 = 0; g = 0 is linear,
//! k3 != 0 a Duffing spring, alpha < 1 a Bouc-Wen hysteretic spring (alpha the
//! post-yield stiffness ratio). The white noise eps_t of unit intensity is
//! discretised as z_j / sqrt(h) held over step j, z_j the j-th normal of the
//! sample's source (the sample's ChaCha8 stream, [`super::gauss::NormalStream`],
//! or a Latin hypercube design, [`super::sampling::LhsNormals`]); random initial
//! conditions take the source's first two normals. A sample is a pure function
//! of (seed, sample index) on every backend.
//!
//! The deterministic forcing sin(w t) is read from a table of sin(w j h / 2),
//! j = 0..=2 steps (the RK4 stage times), which the host fills once: the
//! device then needs no sine, and both backends use the same values.
//! Cost per step: four evaluations of the acceleration (4 square roots when
//! g != 0 and p = 1/2; an `ln` and an `exp` each for another p) and about 60
//! flops (about 40 more with the hysteretic state), plus one normal (half a
//! Box-Muller transform).

use super::real::UqReal;
use super::sampling::Normals;

/// The oscillator and its time grid. `#[repr(C)]` without padding (the host
/// uploads it as bytes): `steps` first, then an even number of `T` fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SdofParams<T> {
    /// Number of steps (time points are 0, h, ..., steps h).
    pub steps: u64,
    /// 1 / m.
    pub inv_m: T,
    /// Linear damping c.
    pub c: T,
    /// Stiffness k.
    pub k: T,
    /// Coefficient g of sgn(x') |x'|^p (1 for the seed's system, 0 for linear).
    pub g: T,
    /// Exponent p of the fractional damping (1/2 in the seed).
    pub p: T,
    /// Cubic (Duffing) stiffness k3.
    pub k3: T,
    /// Share alpha of the linear spring in the restoring force (1: no Bouc-Wen
    /// spring, which is then not integrated).
    pub alpha: T,
    /// Bouc-Wen a.
    pub bw_a: T,
    /// Bouc-Wen beta.
    pub bw_beta: T,
    /// Bouc-Wen gamma.
    pub bw_gamma: T,
    /// Bouc-Wen exponent n.
    pub bw_n: T,
    /// Amplitude A.
    pub amp: T,
    /// A / sqrt(h): the force of a unit normal held over one step.
    pub noise: T,
    /// Step h.
    pub h: T,
    /// Initial displacement (its mean when `x0_std > 0`).
    pub x0: T,
    /// Initial velocity (its mean when `v0_std > 0`).
    pub v0: T,
    /// Standard deviation of the initial displacement (0: fixed).
    pub x0_std: T,
    /// Standard deviation of the initial velocity (0: fixed).
    pub v0_std: T,
}

/// The state of one sample: displacement, velocity, hysteretic displacement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct State<T> {
    /// x.
    pub x: T,
    /// x'.
    pub v: T,
    /// The Bouc-Wen variable z (0 when there is no Bouc-Wen spring).
    pub z: T,
}

/// sgn(s) |y|^e for y of any sign: e = 1/2 by the square root, e = 1, 2 by
/// multiplication, others by exp(e ln |y|); 0 at y = 0.
#[inline(always)]
fn signed_power<T: UqReal>(y: T, e: T, s: T) -> T {
    let a = y.abs();
    let r = if a == T::ZERO {
        T::ZERO
    } else if e == T::from_f64(0.5) {
        a.sqrt()
    } else if e == T::from_f64(1.0) {
        a
    } else if e == T::from_f64(2.0) {
        a * a
    } else {
        (e * a.ln()).exp()
    };
    if s < T::ZERO {
        -r
    } else {
        r
    }
}

impl<T: UqReal> SdofParams<T> {
    /// Seed 001's kind of oscillator in type `T`: mass, damping, stiffness,
    /// coefficient g of sgn(x') |x'|^(1/2), amplitude, step and number of
    /// steps; no Duffing or Bouc-Wen spring, from rest. The other fields are
    /// set by assignment.
    pub fn new(m: f64, c: f64, k: f64, g: f64, amp: f64, h: f64, steps: usize) -> Self {
        let zero = T::ZERO;
        SdofParams {
            steps: steps as u64,
            inv_m: T::from_f64(1.0 / m),
            c: T::from_f64(c),
            k: T::from_f64(k),
            g: T::from_f64(g),
            p: T::from_f64(0.5),
            k3: zero,
            alpha: T::from_f64(1.0),
            bw_a: T::from_f64(1.0),
            bw_beta: zero,
            bw_gamma: zero,
            bw_n: T::from_f64(1.0),
            amp: T::from_f64(amp),
            noise: T::from_f64(amp / UqReal::sqrt(h)),
            h: T::from_f64(h),
            x0: zero,
            v0: zero,
            x0_std: zero,
            v0_std: zero,
        }
    }

    /// Whether the Bouc-Wen variable is integrated (alpha != 1).
    #[inline(always)]
    fn hysteretic(&self) -> bool {
        self.alpha != T::from_f64(1.0)
    }

    /// (x'', z') at state `s` under force f.
    #[inline(always)]
    fn rates(&self, s: State<T>, f: T) -> (T, T) {
        let mut damp = self.c * s.v;
        if self.g != T::ZERO {
            damp = damp + self.g * signed_power(s.v, self.p, s.v);
        }
        let mut spring = if self.hysteretic() {
            self.k * (self.alpha * s.x + (T::from_f64(1.0) - self.alpha) * s.z)
        } else {
            self.k * s.x
        };
        if self.k3 != T::ZERO {
            spring = spring + self.k3 * s.x * s.x * s.x;
        }
        let a = (f - damp - spring) * self.inv_m;
        let dz = if self.hysteretic() {
            let zn = signed_power(s.z, self.bw_n, T::from_f64(1.0));
            let turn = if s.v * s.z < T::ZERO {
                -self.bw_beta
            } else {
                self.bw_beta
            };
            s.v * (self.bw_a - zn * (self.bw_gamma + turn))
        } else {
            T::ZERO
        };
        (a, dz)
    }

    /// One RK4 step from state `s` with forces f0, f_half, f1 at the step's
    /// start, middle and end.
    #[inline(always)]
    pub fn rk4(&self, s: State<T>, f0: T, fh: T, f1: T) -> State<T> {
        let h = self.h;
        let h2 = h * T::from_f64(0.5);
        let at = |base: State<T>, dx: T, dv: T, dz: T, w: T| State {
            x: base.x + w * dx,
            v: base.v + w * dv,
            z: base.z + w * dz,
        };
        let (a1, z1) = self.rates(s, f0);
        let s2 = at(s, s.v, a1, z1, h2);
        let (a2, z2) = self.rates(s2, fh);
        let s3 = at(s, s2.v, a2, z2, h2);
        let (a3, z3) = self.rates(s3, fh);
        let s4 = at(s, s3.v, a3, z3, h);
        let (a4, z4) = self.rates(s4, f1);
        let two = T::from_f64(2.0);
        let h6 = h * T::from_f64(1.0 / 6.0);
        State {
            x: s.x + h6 * (s.v + two * s2.v + two * s3.v + s4.v),
            v: s.v + h6 * (a1 + two * a2 + two * a3 + a4),
            z: if self.hysteretic() {
                s.z + h6 * (z1 + two * z2 + two * z3 + z4)
            } else {
                s.z
            },
        }
    }

    /// The initial state: (x0, v0), or with `x0_std`/`v0_std` > 0 normal
    /// around them from the source's first two normals.
    #[inline(always)]
    pub fn initial<N: Normals<T>>(&self, normals: &mut N) -> State<T> {
        let (mut x, mut v) = (self.x0, self.v0);
        if self.x0_std != T::ZERO || self.v0_std != T::ZERO {
            x = x + self.x0_std * normals.next_normal();
            v = v + self.v0_std * normals.next_normal();
        }
        State { x, v, z: T::ZERO }
    }
}

/// The table sin(w j h / 2), j = 0..=2 steps, as the sample reads it.
pub trait SinTable<T> {
    /// sin(w j h / 2).
    fn at(&self, j: usize) -> T;
}

impl<T: Copy> SinTable<T> for &[T] {
    #[inline(always)]
    fn at(&self, j: usize) -> T {
        self[j]
    }
}

/// Runs one sample of the oscillator from its initial state with the noise
/// normals from `normals` (one per step, in order, after the initial state's)
/// and calls `observe(j, x_j)` for every time point j = 0..=steps.
#[inline(always)]
pub fn run_sample<T: UqReal, S: SinTable<T>, N: Normals<T>, O: FnMut(usize, T)>(
    p: &SdofParams<T>,
    sin: &S,
    normals: &mut N,
    mut observe: O,
) {
    let mut s = p.initial(normals);
    observe(0, s.x);
    let steps = p.steps as usize;
    let mut j = 0;
    while j < steps {
        let e = p.noise * normals.next_normal();
        let f0 = p.amp * sin.at(2 * j) + e;
        let fh = p.amp * sin.at(2 * j + 1) + e;
        let f1 = p.amp * sin.at(2 * j + 2) + e;
        s = p.rk4(s, f0, fh, f1);
        j += 1;
        observe(j, s.x);
    }
}

/// The histogram bin of `x` among `bins` bins of width `width` from `lo`, with
/// bin 0 for underflow (and NaN) and bin `bins + 1` for overflow: `bins + 2`
/// counters in all.
#[inline(always)]
pub fn hist_bin(x: f64, lo: f64, width: f64, bins: usize) -> usize {
    let u = (x - lo) / width;
    if u.partial_cmp(&0.0)
        .is_none_or(|o| o == core::cmp::Ordering::Less)
    {
        0
    } else if u >= bins as f64 {
        bins + 1
    } else {
        u as usize + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chacha::key_from_seed;
    use crate::uq::gauss::NormalStream;
    extern crate std;
    use std::vec::Vec;

    #[test]
    fn free_linear_oscillation_matches_the_exact_solution() {
        // No forcing, unit initial displacement via one step of a large force
        // is awkward; instead check x'' + k/m x = 0 from (1, 0) with rk4 directly.
        let p = SdofParams::<f64>::new(2.0, 0.0, 62.84, 0.0, 0.0, 1e-3, 0);
        let mut s = State {
            x: 1.0,
            v: 0.0,
            z: 0.0,
        };
        for _ in 0..1000 {
            s = p.rk4(s, 0.0, 0.0, 0.0);
        }
        let w = (62.84f64 / 2.0).sqrt();
        assert!((s.x - w.cos()).abs() < 1e-9);
        assert!((s.v + w * w.sin()).abs() < 1e-8);
    }

    #[test]
    fn samples_are_reproducible_and_distinct() {
        let steps = 100;
        let h = 0.01;
        let sin: Vec<f64> = (0..=2 * steps)
            .map(|j| (j as f64 * h / 2.0).sin())
            .collect();
        let p = SdofParams::<f64>::new(2.0, 1.6, 62.84, 1.0, 1.0, h, steps);
        let run = |s| {
            let mut xs = Vec::new();
            let mut z = NormalStream::<f64>::new(key_from_seed(1), s);
            run_sample(&p, &sin.as_slice(), &mut z, |_, x| xs.push(x));
            xs
        };
        assert_eq!(run(4), run(4));
        assert_ne!(run(4), run(5));
        assert_eq!(run(4).len(), steps + 1);
    }

    #[test]
    fn histogram_bins_cover_the_line() {
        assert_eq!(hist_bin(-1.0, 0.0, 0.5, 4), 0);
        assert_eq!(hist_bin(f64::NAN, 0.0, 0.5, 4), 0);
        assert_eq!(hist_bin(0.0, 0.0, 0.5, 4), 1);
        assert_eq!(hist_bin(1.99, 0.0, 0.5, 4), 4);
        assert_eq!(hist_bin(2.0, 0.0, 0.5, 4), 5);
    }
}
