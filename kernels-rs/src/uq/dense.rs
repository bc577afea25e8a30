//! Dense LU with partial pivoting, one system at a time (what a batched
//! `getrf`/`getrs` does): `gpuq-uq`'s dense static strategy, the seed's
//! reference path, solves each sample's K(theta) with it. Cost per system:
//! 2 n^3 / 3 flops and n^2 values of storage.

use super::real::UqReal;

/// A dense matrix (n x n) and a right-hand side (n).
pub trait DenseStore<T> {
    /// Entry (i, j).
    fn a(&self, i: usize, j: usize) -> T;
    /// Sets entry (i, j).
    fn set_a(&mut self, i: usize, j: usize, v: T);
    /// Right-hand side / solution entry i.
    fn rhs(&self, i: usize) -> T;
    /// Sets right-hand side / solution entry i.
    fn set_rhs(&mut self, i: usize, v: T);
}

/// A [`DenseStore`] over borrowed slices: A row-major (n x n) and the
/// right-hand side (n), for the host's callers and the tests.
pub struct DenseSlices<'a> {
    /// Order n.
    pub n: usize,
    /// A, row-major.
    pub a: &'a mut [f64],
    /// The right-hand side, then the solution.
    pub rhs: &'a mut [f64],
}

impl DenseStore<f64> for DenseSlices<'_> {
    #[inline(always)]
    fn a(&self, i: usize, j: usize) -> f64 {
        self.a[i * self.n + j]
    }
    #[inline(always)]
    fn set_a(&mut self, i: usize, j: usize, v: f64) {
        self.a[i * self.n + j] = v;
    }
    #[inline(always)]
    fn rhs(&self, i: usize) -> f64 {
        self.rhs[i]
    }
    #[inline(always)]
    fn set_rhs(&mut self, i: usize, v: f64) {
        self.rhs[i] = v;
    }
}

/// Solves A x = b in place (LU with partial pivoting, the factors overwrite A,
/// the solution the right-hand side). Returns false on a zero pivot.
#[inline(always)]
pub fn lu_solve<T: UqReal, S: DenseStore<T>>(s: &mut S, n: usize) -> bool {
    let mut k = 0;
    while k < n {
        let mut p = k;
        let mut best = s.a(k, k).abs();
        let mut i = k + 1;
        while i < n {
            let v = s.a(i, k).abs();
            if v > best {
                best = v;
                p = i;
            }
            i += 1;
        }
        if best.partial_cmp(&T::ZERO) != Some(core::cmp::Ordering::Greater) {
            return false;
        }
        if p != k {
            let mut j = k;
            while j < n {
                let t = s.a(k, j);
                s.set_a(k, j, s.a(p, j));
                s.set_a(p, j, t);
                j += 1;
            }
            let t = s.rhs(k);
            s.set_rhs(k, s.rhs(p));
            s.set_rhs(p, t);
        }
        let pivot = s.a(k, k);
        let mut i = k + 1;
        while i < n {
            let l = s.a(i, k) / pivot;
            if l != T::ZERO {
                let mut j = k + 1;
                while j < n {
                    s.set_a(i, j, s.a(i, j) - l * s.a(k, j));
                    j += 1;
                }
                s.set_rhs(i, s.rhs(i) - l * s.rhs(k));
            }
            i += 1;
        }
        k += 1;
    }
    let mut i = n;
    while i > 0 {
        i -= 1;
        let mut v = s.rhs(i);
        let mut j = i + 1;
        while j < n {
            v = v - s.a(i, j) * s.rhs(j);
            j += 1;
        }
        s.set_rhs(i, v / s.a(i, i));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn lu_solves_a_small_system() {
        // [[4, 1, 0], [1, 3, 1], [0, 1, 2]] x = A (1, 2, 3).
        let (mut a, mut rhs) = (
            vec![4.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 2.0],
            vec![6.0, 10.0, 8.0],
        );
        let mut s = DenseSlices {
            n: 3,
            a: &mut a,
            rhs: &mut rhs,
        };
        assert!(lu_solve(&mut s, 3));
        for (x, want) in rhs.iter().zip([1.0, 2.0, 3.0]) {
            assert!((x - want).abs() < 1e-14, "{x} vs {want}");
        }
    }

    #[test]
    fn pivoting_handles_a_zero_leading_entry() {
        let (mut a, mut rhs) = (vec![0.0, 1.0, 1.0, 0.0], vec![2.0, 3.0]);
        let mut s = DenseSlices {
            n: 2,
            a: &mut a,
            rhs: &mut rhs,
        };
        assert!(lu_solve(&mut s, 2));
        assert_eq!(rhs, vec![3.0, 2.0]);
        let (mut a, mut rhs) = (vec![0.0], vec![1.0]);
        let mut z = DenseSlices {
            n: 1,
            a: &mut a,
            rhs: &mut rhs,
        };
        assert!(!lu_solve(&mut z, 1));
    }
}
