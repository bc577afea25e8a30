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
