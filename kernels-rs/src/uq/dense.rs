//! The seed's dense path for the static response: each sample assembles the
//! cantilever's stiffness as a dense n x n matrix and solves by LU with partial
//! pivoting (what a batched `getrf`/`getrs` does), the alternative to the
//! banded Cholesky of [`super::beam`]. The draws are those of
//! [`super::beam::static_sample`] (the load first, then one modulus per
//! element), so both paths solve the same samples. Cost per sample: 2 n^3 / 3
//! flops and n^2 values of storage, against O(n) for the band.

use super::beam::{element_stiffness, StaticSampling};
use super::gauss::NormalStream;
use super::real::UqReal;
use super::sampling::{LhsNormals, Normals, SobolFirst, LATIN_HYPERCUBE, SOBOL_FIRST};
use crate::chacha::key_from_seed;

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

/// Fills the dense K of `ne` elements (element e's modulus `modulus(e)`).
#[inline(always)]
pub fn assemble_dense<T: UqReal, S: DenseStore<T>, E: FnMut(usize) -> T>(
    s: &mut S,
    ne: usize,
    h: T,
    inertia: T,
    mut modulus: E,
) {
    let n = 2 * ne;
    let mut i = 0;
    while i < n {
        let mut j = 0;
        while j < n {
            s.set_a(i, j, T::ZERO);
            j += 1;
        }
        i += 1;
    }
    let mut e = 0;
    while e < ne {
        let ke = element_stiffness(modulus(e) * inertia, h);
        let mut a = 0;
        while a < 4 {
            let mut b = 0;
            while b < 4 {
                if 2 * e + a >= 2 && 2 * e + b >= 2 {
                    let (gi, gj) = (2 * e + a - 2, 2 * e + b - 2);
                    s.set_a(gi, gj, s.a(gi, gj) + ke[a][b]);
                }
                b += 1;
            }
            a += 1;
        }
        e += 1;
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

/// One static sample by the dense path: the draws of
/// [`super::beam::static_sample`], a dense K (the modulus exp(mu_ln) when it is
/// deterministic), LU, u[dof] (NaN on a zero pivot).
#[inline(always)]
pub fn static_sample_dense<T: UqReal, S: DenseStore<T>, N: FnMut() -> T>(
    p: &StaticSampling<T>,
    work: &mut S,
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
    let fixed = p.mu_ln.exp();
    assemble_dense(work, p.ne, p.h, p.inertia, |_| {
        if p.random_modulus {
            (p.mu_ln + p.sigma_ln * normal()).exp()
        } else {
            fixed
        }
    });
    if !lu_solve(work, n) {
        return T::NAN;
    }
    work.rhs(dof)
}

/// [`static_sample_dense`] with the normals of `design` (as
/// [`super::beam::static_sample_designed`]).
#[inline(always)]
pub fn static_dense_designed<T: UqReal, S: DenseStore<T>>(
    p: &StaticSampling<T>,
    work: &mut S,
    dof: usize,
    design: u32,
    (seed, sample, samples): (u64, u64, u64),
) -> T {
    let key = key_from_seed(seed);
    if design == LATIN_HYPERCUBE {
        let mut z = LhsNormals::new(key, sample, samples.max(1));
        static_sample_dense(p, work, dof, || z.next_normal())
    } else if design == SOBOL_FIRST {
        let mut z = SobolFirst::<T>::new(seed, sample);
        static_sample_dense(p, work, dof, || z.next_normal())
    } else {
        let mut z = NormalStream::<T>::new(key, sample);
        static_sample_dense(p, work, dof, || z.next_normal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    struct Plain {
        n: usize,
        a: Vec<f64>,
        rhs: Vec<f64>,
    }

    impl DenseStore<f64> for Plain {
        fn a(&self, i: usize, j: usize) -> f64 {
            self.a[i * self.n + j]
        }
        fn set_a(&mut self, i: usize, j: usize, v: f64) {
            self.a[i * self.n + j] = v;
        }
        fn rhs(&self, i: usize) -> f64 {
            self.rhs[i]
        }
        fn set_rhs(&mut self, i: usize, v: f64) {
            self.rhs[i] = v;
        }
    }

    #[test]
    fn dense_tip_deflection_is_exact() {
        let (ne, l, e, i, p) = (6usize, 2.0, 7e10, 2e-6, 300.0);
        let n = 2 * ne;
        let mut s = Plain {
            n,
            a: vec![0.0; n * n],
            rhs: vec![0.0; n],
        };
        assemble_dense(&mut s, ne, l / ne as f64, i, |_| e);
        s.rhs[n - 2] = p;
        assert!(lu_solve(&mut s, n));
        let exact = p * l * l * l / (3.0 * e * i);
        assert!((s.rhs[n - 2] / exact - 1.0).abs() < 1e-10);
    }

    #[test]
    fn pivoting_handles_a_zero_leading_entry() {
        let mut s = Plain {
            n: 2,
            a: vec![0.0, 1.0, 1.0, 0.0],
            rhs: vec![2.0, 3.0],
        };
        assert!(lu_solve(&mut s, 2));
        assert_eq!(s.rhs, vec![3.0, 2.0]);
        let mut z = Plain {
            n: 1,
            a: vec![0.0],
            rhs: vec![1.0],
        };
        assert!(!lu_solve(&mut z, 1));
    }
}
