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
