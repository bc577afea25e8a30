//! Element types as the kernels see them, and the per-item arithmetic shared by
//! the host and the device.

use core::ops::{Add, Mul, Sub};

/// A complex `f32`, `#[repr(C)]` `(re, im)`: the layout of `num_complex::Complex<f32>`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct C32 {
    /// Real part.
    pub re: f32,
    /// Imaginary part.
    pub im: f32,
}

/// A complex `f64`, `#[repr(C)]` `(re, im)`: the layout of `num_complex::Complex<f64>`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct C64 {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

/// The arithmetic a kernel needs of an element type. Every operation is O(1) and
/// written so that host and device evaluate it in the same order.
pub trait KScalar: Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> {
    /// The real type (`f32` or `f64`).
    type Real: KScalar<Real = Self::Real> + PartialOrd;
    /// Additive identity.
    fn zero() -> Self;
    /// Builds a value from real and imaginary parts (`im` ignored for real types).
    fn from_parts(re: Self::Real, im: Self::Real) -> Self;
    /// Complex conjugate (identity for real types).
    fn conj(self) -> Self;
    /// |x|^2.
    fn abs_sqr(self) -> Self::Real;
    /// Embeds a real value.
    fn from_real(re: Self::Real) -> Self;
    /// Real part.
    fn re(self) -> Self::Real;
    /// self / o (the textbook formula for complex values, as num-complex uses).
    fn div(self, o: Self) -> Self;
    /// `true` when every part is finite.
    fn is_finite(self) -> bool;
    /// `true` when every part is zero.
    fn is_zero(self) -> bool;
}

macro_rules! real {
    ($t:ty) => {
        impl KScalar for $t {
            type Real = $t;
            #[inline(always)]
            fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            fn from_parts(re: $t, _im: $t) -> Self {
                re
            }
            #[inline(always)]
            fn conj(self) -> Self {
                self
            }
            #[inline(always)]
            fn abs_sqr(self) -> $t {
                self * self
            }
            #[inline(always)]
            fn from_real(re: $t) -> Self {
                re
            }
            #[inline(always)]
            fn re(self) -> $t {
                self
            }
            #[inline(always)]
            fn div(self, o: $t) -> $t {
                self / o
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0.0
            }
        }
    };
}
real!(f32);
real!(f64);

macro_rules! complex {
    ($c:ident, $t:ty) => {
        impl Add for $c {
            type Output = $c;
            #[inline(always)]
            fn add(self, o: $c) -> $c {
                $c {
                    re: self.re + o.re,
                    im: self.im + o.im,
                }
            }
        }
        impl Sub for $c {
            type Output = $c;
            #[inline(always)]
            fn sub(self, o: $c) -> $c {
                $c {
                    re: self.re - o.re,
                    im: self.im - o.im,
                }
            }
        }
        impl Mul for $c {
            type Output = $c;
            /// (a + ib)(c + id) = (ac - bd) + i(ad + bc), the order num-complex uses.
            #[inline(always)]
            fn mul(self, o: $c) -> $c {
                $c {
                    re: self.re * o.re - self.im * o.im,
                    im: self.re * o.im + self.im * o.re,
                }
            }
        }
        impl KScalar for $c {
            type Real = $t;
            #[inline(always)]
            fn zero() -> Self {
                $c { re: 0.0, im: 0.0 }
            }
            #[inline(always)]
            fn from_parts(re: $t, im: $t) -> Self {
                $c { re, im }
            }
            #[inline(always)]
            fn conj(self) -> Self {
                $c {
                    re: self.re,
                    im: -self.im,
                }
            }
            #[inline(always)]
            fn abs_sqr(self) -> $t {
                self.re * self.re + self.im * self.im
            }
            #[inline(always)]
            fn from_real(re: $t) -> Self {
                $c { re, im: 0.0 }
            }
            #[inline(always)]
            fn re(self) -> $t {
                self.re
            }
            #[inline(always)]
            fn div(self, o: $c) -> $c {
                let d = o.re * o.re + o.im * o.im;
                $c {
                    re: (self.re * o.re + self.im * o.im) / d,
                    im: (self.im * o.re - self.re * o.im) / d,
                }
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                self.re.is_finite() && self.im.is_finite()
            }
            #[inline(always)]
            fn is_zero(self) -> bool {
                self.re == 0.0 && self.im == 0.0
            }
        }
    };
}
complex!(C32, f32);
complex!(C64, f64);

/// alpha x + beta y: the item of `axpby`.
#[inline(always)]
pub fn axpby<T: KScalar>(alpha: T, x: T, beta: T, y: T) -> T {
    alpha * x + beta * y
}

/// `num / den`, or zero when `den` vanished or the quotient is not finite: the
/// guarded step coefficient of methods whose scalars stay on the device (a
/// vanished denominator is a breakdown the host reports after the iteration; the
/// zero coefficient leaves the vectors as they were).
#[inline(always)]
pub fn guarded_quotient<T: KScalar>(num: T, den: T) -> T {
    let q = num.div(den);
    if den.is_zero() || !q.is_finite() {
        T::zero()
    } else {
        q
    }
}

/// CG's step length `rho / pq`, or zero unless p^H A p = `pq` has a positive
/// real part and the quotient is finite: a breakdown the host reports after
/// the iteration (A not positive definite), the zero step leaving the iterate
/// as it was.
#[inline(always)]
pub fn cg_alpha<T: KScalar>(rho: T, pq: T) -> T {
    if pq.re() > <T::Real as KScalar>::zero() {
        guarded_quotient(rho, pq)
    } else {
        T::zero()
    }
}

/// alpha s + beta y, reading y only when `beta_is_zero` is false (so a NaN in an
/// uninitialised output does not leak): the output item of every SpMV.
#[inline(always)]
pub fn spmv_out<T: KScalar>(
    alpha: T,
    s: T,
    beta: T,
    y: impl FnOnce() -> T,
    beta_is_zero: bool,
) -> T {
    if beta_is_zero {
        alpha * s
    } else {
        alpha * s + beta * y()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_quotient_divides_or_gives_zero() {
        let q = guarded_quotient(C64 { re: 1.0, im: 2.0 }, C64 { re: 3.0, im: -1.0 });
        // (1 + 2i) / (3 - i) = (1 + 7i) / 10
        assert!((q.re - 0.1).abs() < 1e-15 && (q.im - 0.7).abs() < 1e-15);
        assert!(guarded_quotient(1.0f64, 0.0).is_zero());
        assert!(guarded_quotient(f64::NAN, 1.0).is_zero());
        assert!(guarded_quotient(C32 { re: 1.0, im: 0.0 }, C32::zero()).is_zero());
    }

    #[test]
    fn complex_arithmetic_matches_the_textbook() {
        let a = C64 { re: 1.0, im: 2.0 };
        let b = C64 { re: 3.0, im: -1.0 };
        assert_eq!(a * b, C64 { re: 5.0, im: 5.0 });
        assert_eq!(a.conj() * a, C64 { re: 5.0, im: 0.0 });
        assert_eq!(a.abs_sqr(), 5.0);
        assert_eq!(axpby(2.0f64, 3.0, -1.0, 4.0), 2.0);
        assert_eq!(spmv_out(2.0f64, 3.0, 0.0, || f64::NAN, true), 6.0);
    }

    #[test]
    fn layout_is_a_pair() {
        assert_eq!(core::mem::size_of::<C64>(), 16);
        assert_eq!(core::mem::align_of::<C64>(), 8);
        assert_eq!(core::mem::size_of::<C32>(), 8);
    }
}
