//! The cantilever Euler-Bernoulli beam in banded form, one sample at a time.
//!
//! The beam has `ne` cubic Hermite elements of length h (two DOFs per node:
//! deflection w and rotation theta), clamped at node 0, so DOF 2 (i - 1) is w at
//! node i and DOF 2 (i - 1) + 1 its rotation (n = 2 ne DOFs). The element
//! stiffness is (EI / h^3) [12, 6h, -12, 6h; 6h, 4h^2, -6h, 2h^2; ...]; element
//! e couples DOFs 2 e - 2 ..= 2 e + 1, so K has semi-bandwidth 3 and is stored
//! as its lower band: `band(i, d)` = K[i][i - d], d = 0..=3.
//!
//! [`assemble`] fills the band from the element moduli, [`cholesky`] factors it
//! in place (K = L L^T, L in the band) and [`solve`] solves with the factor. The
//! storage is a trait so that the device can keep each sample's band strided
//! across samples (consecutive threads, consecutive addresses).
//! Cost: assembly O(ne), factorisation 16 n flops and n square roots, a solve
//! 14 n flops.

use super::gauss::NormalStream;
use super::real::UqReal;
use super::sampling::{LhsNormals, Normals, SobolFirst, LATIN_HYPERCUBE, SOBOL_FIRST};
use crate::chacha::key_from_seed;

/// Semi-bandwidth of the beam's matrices.
pub const SEMI_BAND: usize = 3;

/// A band (n x 4, entry (i, d) = A[i][i - d]) and a right-hand side (n).
pub trait BandStore<T> {
    /// Band entry (i, d).
    fn band(&self, i: usize, d: usize) -> T;
    /// Sets band entry (i, d).
    fn set_band(&mut self, i: usize, d: usize, v: T);
    /// Right-hand side / solution entry i.
    fn rhs(&self, i: usize) -> T;
    /// Sets right-hand side / solution entry i.
    fn set_rhs(&mut self, i: usize, v: T);
}

/// The 4 x 4 element stiffness of a cubic Hermite element with bending
/// stiffness `ei` and length `h`, DOFs (w1, theta1, w2, theta2).
#[inline(always)]
pub fn element_stiffness<T: UqReal>(ei: T, h: T) -> [[T; 4]; 4] {
    let f = |x: f64| T::from_f64(x);
    let a = ei / (h * h * h);
    let (k12, k6h, k4h2, k2h2) = (
        f(12.0) * a,
        f(6.0) * h * a,
        f(4.0) * h * h * a,
        f(2.0) * h * h * a,
    );
    [
        [k12, k6h, -k12, k6h],
        [k6h, k4h2, -k6h, k2h2],
        [-k12, -k6h, k12, -k6h],
        [k6h, k2h2, -k6h, k4h2],
    ]
}

/// Fills the band of K for `ne` elements of length `h` and second moment
/// `inertia`, element e's modulus given by `modulus(e)`. The right-hand side is
/// not touched.
#[inline(always)]
pub fn assemble<T: UqReal, S: BandStore<T>, E: FnMut(usize) -> T>(
    s: &mut S,
    ne: usize,
    h: T,
    inertia: T,
    mut modulus: E,
) {
    let n = 2 * ne;
    let mut i = 0;
    while i < n {
        let mut d = 0;
        while d <= SEMI_BAND {
            s.set_band(i, d, T::ZERO);
            d += 1;
        }
        i += 1;
    }
    let mut e = 0;
    while e < ne {
        let ke = element_stiffness(modulus(e) * inertia, h);
        // Global DOF of local DOF a: 2 e - 2 + a (the clamped node's are dropped).
        let mut a = 0;
        while a < 4 {
            let mut b = 0;
            while b <= a {
                if 2 * e + a >= 2 && 2 * e + b >= 2 {
                    let (gi, gj) = (2 * e + a - 2, 2 * e + b - 2);
                    s.set_band(gi, gi - gj, s.band(gi, gi - gj) + ke[a][b]);
                }
                b += 1;
            }
            a += 1;
        }
        e += 1;
    }
}

/// Factors the band of an n x n symmetric positive definite matrix in place
/// (Cholesky, L in the band). Returns false, leaving a partial factor, when a
/// pivot is not positive.
#[inline(always)]
pub fn cholesky<T: UqReal, S: BandStore<T>>(s: &mut S, n: usize) -> bool {
    let mut j = 0;
    while j < n {
        let mut dj = s.band(j, 0);
        let mut k = j.saturating_sub(SEMI_BAND);
        while k < j {
            let l = s.band(j, j - k);
            dj = dj - l * l;
            k += 1;
        }
        if dj.partial_cmp(&T::ZERO) != Some(core::cmp::Ordering::Greater) {
            return false;
        }
        let ljj = dj.sqrt();
        s.set_band(j, 0, ljj);
        let mut i = j + 1;
        while i < n && i <= j + SEMI_BAND {
            let mut v = s.band(i, i - j);
            let mut k = i - SEMI_BAND.min(i);
            while k < j {
                v = v - s.band(i, i - k) * s.band(j, j - k);
                k += 1;
            }
            s.set_band(i, i - j, v / ljj);
            i += 1;
        }
        j += 1;
    }
    true
}

/// Solves L L^T x = b in place in the store's right-hand side, L from
/// [`cholesky`] in the store's band.
#[inline(always)]
pub fn solve<T: UqReal, S: BandStore<T>>(s: &mut S, n: usize) {
    let mut i = 0;
    while i < n {
        let mut v = s.rhs(i);
        let mut k = i - SEMI_BAND.min(i);
        while k < i {
            v = v - s.band(i, i - k) * s.rhs(k);
            k += 1;
        }
        s.set_rhs(i, v / s.band(i, 0));
        i += 1;
    }
    let mut i = n;
    while i > 0 {
        i -= 1;
        let mut v = s.rhs(i);
        let mut k = i + 1;
        while k < n && k <= i + SEMI_BAND {
            v = v - s.band(k, k - i) * s.rhs(k);
            k += 1;
        }
        s.set_rhs(i, v / s.band(i, 0));
    }
}

/// A factor's band from one store and the right-hand side of another: the
/// shared factor of a deterministic K with one sample's load.
pub struct Shared<'a, F, R> {
    /// The store holding the factor.
    pub factor: &'a F,
    /// The store holding the right-hand side.
    pub rhs: &'a mut R,
}

impl<T, F: BandStore<T>, R: BandStore<T>> BandStore<T> for Shared<'_, F, R> {
    #[inline(always)]
    fn band(&self, i: usize, d: usize) -> T {
        self.factor.band(i, d)
    }
    #[inline(always)]
    fn set_band(&mut self, _i: usize, _d: usize, _v: T) {
        // The shared factor is read-only; `solve` never writes the band.
    }
    #[inline(always)]
    fn rhs(&self, i: usize) -> T {
        self.rhs.rhs(i)
    }
    #[inline(always)]
    fn set_rhs(&mut self, i: usize, v: T) {
        self.rhs.set_rhs(i, v);
    }
}

/// What one static sample draws from its stream: the tip load
/// P = mean + std z_0 and, when `random_modulus`, element moduli
/// E_e = exp(mu_ln + sigma_ln z_{1 + e}).
#[derive(Clone, Copy, Debug)]
pub struct StaticSampling<T> {
    /// Elements.
    pub ne: usize,
    /// Element length.
    pub h: T,
    /// Second moment of area I.
    pub inertia: T,
    /// Mean of the tip load.
    pub load_mean: T,
    /// Standard deviation of the tip load.
    pub load_std: T,
    /// Whether each element's modulus is an independent lognormal.
    pub random_modulus: bool,
    /// Mean of ln E.
    pub mu_ln: T,
    /// Standard deviation of ln E.
    pub sigma_ln: T,
}

/// One static sample: draws P (and the moduli), assembles and factors its own
/// K when the modulus is random (else uses `shared`, the factor of the
/// deterministic K), solves K u = P e_tip and returns u[dof] (NaN when the
/// sample's K is not positive definite). `normal` gives the stream's normals
/// in order.
#[inline(always)]
pub fn static_sample<T: UqReal, S: BandStore<T>, F: BandStore<T>, N: FnMut() -> T>(
    p: &StaticSampling<T>,
    work: &mut S,
    shared: &F,
    dof: usize,
    mut normal: N,
) -> T {
    let n = 2 * p.ne;
    let load = p.load_mean + p.load_std * normal();
    let mut i = 0;
    while i < n {
        work.set_rhs(i, T::ZERO);
        i += 1;
    }
    work.set_rhs(n - 2, load);
    if p.random_modulus {
        assemble(work, p.ne, p.h, p.inertia, |_| {
            (p.mu_ln + p.sigma_ln * normal()).exp()
        });
        if !cholesky(work, n) {
            return T::NAN;
        }
        solve(work, n);
    } else {
        solve(
            &mut Shared {
                factor: shared,
                rhs: work,
            },
            n,
        );
    }
    work.rhs(dof)
}

/// [`static_sample`] of sample `sample` of `samples` under `seed` with the
/// normals of `design` (`sampling::MONTE_CARLO`, `LATIN_HYPERCUBE` over every
/// dimension, or `SOBOL_FIRST`: the load from the scrambled Sobol sequence, the
/// moduli by Monte Carlo).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn static_sample_designed<T: UqReal, S: BandStore<T>, F: BandStore<T>>(
    p: &StaticSampling<T>,
    work: &mut S,
    shared: &F,
    dof: usize,
    design: u32,
    seed: u64,
    sample: u64,
    samples: u64,
) -> T {
    let key = key_from_seed(seed);
    if design == LATIN_HYPERCUBE {
        let mut z = LhsNormals::new(key, sample, samples.max(1));
        static_sample(p, work, shared, dof, || z.next_normal())
    } else if design == SOBOL_FIRST {
        let mut z = SobolFirst::<T>::new(seed, sample);
        static_sample(p, work, shared, dof, || z.next_normal())
    } else {
        let mut z = NormalStream::<T>::new(key, sample);
        static_sample(p, work, shared, dof, || z.next_normal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    /// A band and right-hand side in plain vectors.
    struct Plain {
        band: Vec<f64>,
        rhs: Vec<f64>,
    }

    impl BandStore<f64> for Plain {
        fn band(&self, i: usize, d: usize) -> f64 {
            self.band[4 * i + d]
        }
        fn set_band(&mut self, i: usize, d: usize, v: f64) {
            self.band[4 * i + d] = v;
        }
        fn rhs(&self, i: usize) -> f64 {
            self.rhs[i]
        }
        fn set_rhs(&mut self, i: usize, v: f64) {
            self.rhs[i] = v;
        }
    }

    #[test]
    fn tip_deflection_is_p_l3_over_3ei() {
        for ne in [1usize, 2, 7, 40] {
            let (l, e, i, p) = (2.5, 210e9, 3e-6, 1500.0);
            let n = 2 * ne;
            let mut s = Plain {
                band: vec![0.0; 4 * n],
                rhs: vec![0.0; n],
            };
            assemble(&mut s, ne, l / ne as f64, i, |_| e);
            assert!(cholesky(&mut s, n));
            s.rhs[n - 2] = p;
            solve(&mut s, n);
            let exact = p * l * l * l / (3.0 * e * i);
            assert!((s.rhs[n - 2] / exact - 1.0).abs() < 1e-10, "{ne}");
            // Tip rotation P L^2 / (2 E I).
            let rot = p * l * l / (2.0 * e * i);
            assert!((s.rhs[n - 1] / rot - 1.0).abs() < 1e-10);
        }
    }
}
