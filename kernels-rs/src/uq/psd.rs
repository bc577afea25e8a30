//! The response PSD's cross-spectral entries S_ij = s h_i conj(h_j).

use crate::scalar::C64;

/// S_ij = s h_i conj(h_j) for transfer values h_i = a_i + i b_i, h_j and the
/// load's PSD s, written as s (a_i a_j + b_i b_j) + i s (b_i a_j - a_i b_j):
/// the products commute, so S_ji is exactly conj(S_ij) and S_ii is exactly
/// s |h_i|^2 (a_i^2 + b_i^2, then s) with a zero imaginary part, on either
/// backend. O(1).
#[inline(always)]
pub fn cross_entry(hi: C64, hj: C64, s: f64) -> C64 {
    C64 {
        re: s * (hi.re * hj.re + hi.im * hj.im),
        im: s * (hi.im * hj.re - hi.re * hj.im),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_exactly_hermitian_with_a_real_diagonal() {
        let h: [C64; 5] = [
            C64 {
                re: 1.0 / 3.0,
                im: -2.0 / 7.0,
            },
            C64 {
                re: 1e-9,
                im: 3.5e4,
            },
            C64 { re: -0.1, im: 0.1 },
            C64 { re: 12.25, im: 0.0 },
            C64 {
                re: 1e-300,
                im: -1e-300,
            },
        ];
        for s in [0.5, 1.0 / 3.0, 2.75e7] {
            for (i, &hi) in h.iter().enumerate() {
                for (j, &hj) in h.iter().enumerate() {
                    let (a, b) = (cross_entry(hi, hj, s), cross_entry(hj, hi, s));
                    assert_eq!((a.re, a.im), (b.re, -b.im), "({i}, {j})");
                    // (s h_i) conj(h_j) in the usual order, to rounding.
                    let (sr, si) = (s * hi.re, s * hi.im);
                    let (re, im) = (sr * hj.re + si * hj.im, si * hj.re - sr * hj.im);
                    let scale = s * (hi.re.hypot(hi.im) * hj.re.hypot(hj.im));
                    assert!((a.re - re).abs() <= 4.0 * f64::EPSILON * scale);
                    assert!((a.im - im).abs() <= 4.0 * f64::EPSILON * scale);
                }
                let d = cross_entry(hi, hi, s);
                assert_eq!(d.im, 0.0);
                assert_eq!(d.re, s * (hi.re * hi.re + hi.im * hi.im));
            }
        }
    }
}
