//! Element types: the [`Scalar`] trait and its real counterpart [`RealScalar`].

use num_complex::Complex;
use num_traits::{Float, NumAssign, Zero};
use std::fmt::{Debug, Display};
use std::iter::Sum;

/// Which of the four supported element types a [`Scalar`] is.
///
/// Backends that dispatch to typed kernels (CUDA) use this to pick the kernel
/// name suffix; generic code never needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `Complex<f32>`
    C32,
    /// `Complex<f64>`
    C64,
}

impl ScalarKind {
    /// Short lowercase name (`f32`, `f64`, `c32`, `c64`), used in reports and kernel names.
    pub fn name(self) -> &'static str {
        match self {
            ScalarKind::F32 => "f32",
            ScalarKind::F64 => "f64",
            ScalarKind::C32 => "c32",
            ScalarKind::C64 => "c64",
        }
    }
}

mod sealed {
    /// Restricts [`super::Scalar`] to the four types below, so that every scalar is
    /// plain old data (no padding, every bit pattern valid).
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for num_complex::Complex<f32> {}
    impl Sealed for num_complex::Complex<f64> {}
}

/// An element type of vectors and matrices: `f32`, `f64`, `Complex<f32>` or `Complex<f64>`.
///
/// Every operation here is O(1). Complex types are `#[repr(C)]` pairs
/// `(re, im)`, which is also the layout device kernels use. The trait is sealed:
/// these four types are all there is, which is what lets backends move scalars as
/// raw bytes ([`scalars_as_bytes`]).
pub trait Scalar:
    sealed::Sealed
    + Copy
    + Clone
    + Send
    + Sync
    + Debug
    + Display
    + Default
    + PartialEq
    + NumAssign
    + std::ops::Neg<Output = Self>
    + Sum
    + 'static
{
    /// The real type underlying this scalar (`f32` for `f32` and `Complex<f32>`).
    type Real: RealScalar;

    /// Which of the four element types this is.
    const KIND: ScalarKind;

    /// `true` for the complex types.
    const IS_COMPLEX: bool;

    /// Complex conjugate (identity for real types).
    fn conj(self) -> Self;

    /// Magnitude |z| (absolute value for real types), computed without undue overflow.
    fn magnitude(self) -> Self::Real;

    /// Squared magnitude |z|^2 = re^2 + im^2.
    fn abs_sqr(self) -> Self::Real;

    /// Real part.
    fn re(self) -> Self::Real;

    /// Imaginary part (zero for real types).
    fn im(self) -> Self::Real;

    /// Builds a scalar from real and imaginary parts; for real types `im` must be zero
    /// and is ignored.
    fn from_parts(re: Self::Real, im: Self::Real) -> Self;

    /// Embeds a real number.
    fn from_real(re: Self::Real) -> Self {
        Self::from_parts(re, Self::Real::zero())
    }

    /// Converts an `f64` (rounding to the nearest representable value).
    fn from_f64(x: f64) -> Self {
        Self::from_real(Self::Real::of_f64(x))
    }

    /// `true` when neither part is NaN nor infinite.
    fn is_finite_value(self) -> bool {
        self.re().is_finite() && self.im().is_finite()
    }

    /// `true` when the scalar is exactly zero.
    fn is_zero_value(self) -> bool {
        self == Self::zero()
    }

    /// Size in bytes of one element (for traffic accounting).
    fn size_bytes() -> usize {
        std::mem::size_of::<Self>()
    }
}

/// A real element type (`f32` or `f64`): a [`Scalar`] that is its own real type
/// and supports the usual floating-point functions.
pub trait RealScalar: Scalar<Real = Self> + Float + PartialOrd + std::fmt::LowerExp {
    /// Converts an `f64` to this type (rounding).
    fn of_f64(x: f64) -> Self;
    /// Converts this value to `f64` (exact).
    fn to_f64_lossless(self) -> f64;
    /// Machine epsilon of the type.
    fn eps() -> Self {
        <Self as Float>::epsilon()
    }
}

macro_rules! real_scalar {
    ($t:ty, $kind:expr) => {
        impl Scalar for $t {
            type Real = $t;
            const KIND: ScalarKind = $kind;
            const IS_COMPLEX: bool = false;
            #[inline(always)]
            fn conj(self) -> Self {
                self
            }
            #[inline(always)]
            fn magnitude(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn abs_sqr(self) -> Self {
                self * self
            }
            #[inline(always)]
            fn re(self) -> Self {
                self
            }
            #[inline(always)]
            fn im(self) -> Self {
                0.0
            }
            #[inline(always)]
            fn from_parts(re: Self, _im: Self) -> Self {
                re
            }
        }
        impl RealScalar for $t {
            #[inline(always)]
            fn of_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64_lossless(self) -> f64 {
                self as f64
            }
        }
    };
}

real_scalar!(f32, ScalarKind::F32);
real_scalar!(f64, ScalarKind::F64);

macro_rules! complex_scalar {
    ($t:ty, $kind:expr) => {
        impl Scalar for Complex<$t> {
            type Real = $t;
            const KIND: ScalarKind = $kind;
            const IS_COMPLEX: bool = true;
            #[inline(always)]
            fn conj(self) -> Self {
                Complex::conj(&self)
            }
            #[inline(always)]
            fn magnitude(self) -> $t {
                self.re.hypot(self.im)
            }
            #[inline(always)]
            fn abs_sqr(self) -> $t {
                self.re * self.re + self.im * self.im
            }
            #[inline(always)]
            fn re(self) -> $t {
                self.re
            }
            #[inline(always)]
            fn im(self) -> $t {
                self.im
            }
            #[inline(always)]
            fn from_parts(re: $t, im: $t) -> Self {
                Complex::new(re, im)
            }
        }
    };
}

complex_scalar!(f32, ScalarKind::C32);
complex_scalar!(f64, ScalarKind::C64);

/// Views a slice of scalars as its bytes (for host/device copies). O(1).
pub fn scalars_as_bytes<T: Scalar>(s: &[T]) -> &[u8] {
    // SAFETY: `Scalar` is sealed to f32, f64 and `Complex<f32|f64>` (`#[repr(C)]`
    // pairs of floats): no padding, so every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Views a mutable slice of scalars as its bytes (for device-to-host copies). O(1).
pub fn scalars_as_bytes_mut<T: Scalar>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `scalars_as_bytes`; moreover every bit pattern is a valid value
    // of these float types, so any bytes written through the view leave valid scalars.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    #[test]
    fn complex_basics() {
        let z = Complex64::new(3.0, -4.0);
        assert_eq!(Scalar::magnitude(z), 5.0);
        assert_eq!(z.abs_sqr(), 25.0);
        assert_eq!(Scalar::conj(z), Complex64::new(3.0, 4.0));
        assert_eq!(<Complex64 as Scalar>::KIND, ScalarKind::C64);
        assert!(!Scalar::is_finite_value(Complex64::new(f64::NAN, 0.0)));
    }

    #[test]
    fn byte_views() {
        let mut v = [Complex64::new(1.0, -2.0)];
        assert_eq!(scalars_as_bytes(&v).len(), 16);
        assert_eq!(&scalars_as_bytes(&v)[..8], &1.0f64.to_ne_bytes());
        scalars_as_bytes_mut(&mut v)[8..].copy_from_slice(&3.0f64.to_ne_bytes());
        assert_eq!(v[0], Complex64::new(1.0, 3.0));
    }

    #[test]
    fn real_basics() {
        assert_eq!(Scalar::magnitude(-2.5f32), 2.5);
        assert_eq!(Scalar::conj(-2.5f64), -2.5);
        assert_eq!(f64::from_parts(1.0, 7.0), 1.0);
        assert_eq!(<f32 as Scalar>::from_f64(0.5), 0.5f32);
        assert!(!Scalar::is_finite_value(f64::INFINITY));
    }
}
