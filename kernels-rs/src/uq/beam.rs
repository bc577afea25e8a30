//! The cantilever Euler-Bernoulli beam in banded form, one sample at a time.
//!
//! The beam has `ne` cubic Hermite elements of length h (two DOFs per node:
//! deflection w and rotation theta), clamped at node 0, so DOF 2 (i - 1) is w at
//! node i and DOF 2 (i - 1) + 1 its rotation (n = 2 ne DOFs). The element
//! stiffness is (EI / h^3) [12, 6h, -12, 6h; 6h, 4h^2, -6h, 2h^2; ...]; element
//! e couples DOFs 2 e - 2 ..= 2 e + 1, so K has semi-bandwidth 3 and is stored
//! as its lower band: `band(i, d)` = K[i][i - d], d = 0..=3.
//!
//! [`assemble`] fills the band from the element moduli; [`super::band`]
//! factors and solves it (the general banded Cholesky with w = 3).
//! Cost: assembly O(ne).

use super::band::BandStore;
use super::real::UqReal;

/// Semi-bandwidth of the beam's matrices.
pub const SEMI_BAND: usize = 3;

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

#[cfg(test)]
mod tests {
    use super::super::band::{cholesky, solve};
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
            assert_eq!(cholesky(&mut s, n, SEMI_BAND), None);
            s.rhs[n - 2] = p;
            solve(&mut s, n, SEMI_BAND);
            let exact = p * l * l * l / (3.0 * e * i);
            assert!((s.rhs[n - 2] / exact - 1.0).abs() < 1e-10, "{ne}");
            // Tip rotation P L^2 / (2 E I).
            let rot = p * l * l / (2.0 * e * i);
            assert!((s.rhs[n - 1] / rot - 1.0).abs() < 1e-10);
        }
    }
}
