//! The real types of the UQ kernels (`f32`, `f64`) and the elementary functions
//! they need, written in plain IEEE arithmetic (no fused multiply-add, no libm)
//! so that the CPU and the device compute the same bits.
//!
//! * `sqrt` is correctly rounded everywhere: `sqrt.rn` on the device, the SSE2
//!   (`x86_64`) or NEON (`aarch64`) instruction on the host. On other host
//!   architectures it is three Newton steps from a bit-level guess, within an
//!   ulp but not guaranteed to match the device bit for bit.
//! * `ln` reduces to a mantissa in [sqrt(1/2), sqrt(2)) and sums the series
//!   2 atanh(s), s = (m - 1)/(m + 1) (10 terms in `f64`, 5 in `f32`): within
//!   a few ulps for positive normal arguments.
//! * `exp` reduces by multiples of ln 2 (Cody-Waite, two-part constant) and sums
//!   the Taylor series on |r| <= ln 2 / 2 (degree 13 in `f64`, 7 in `f32`);
//!   arguments beyond the finite range give 0 or infinity.
//! * [`UqReal::cos_sin_eighth`] is (cos, sin) of theta in [-pi/4, pi/4] by Taylor
//!   series (degrees 16/15 in `f64`, 8/7 in `f32`).
//!
//! Cost: `ln` and `exp` about 30 flops in `f64`, `cos_sin_eighth` about 20.

use core::ops::{Add, Div, Mul, Neg, Sub};

/// ln 2 split for Cody-Waite reduction in `f64` (fdlibm): `LN2_HI_64` has 21
/// trailing zero bits, so `k * LN2_HI_64` is exact for the exponents that occur.
const LN2_HI_64: f64 = 6.931_471_803_691_238e-1;
const LN2_LO_64: f64 = 1.908_214_929_270_587_7e-10;
/// The same split for `f32` (fdlibm's `expf`): 12 significant bits in the high part.
const LN2_HI_32: f32 = 6.931_457_5e-1;
const LN2_LO_32: f32 = 1.428_606_8e-6;

/// A real type of the UQ kernels.
pub trait UqReal:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + core::ops::MulAssign
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Not a number.
    const NAN: Self;
    /// The value nearest `x`.
    fn from_f64(x: f64) -> Self;
    /// The value as `f64` (exact).
    fn to_f64(self) -> f64;
    /// The value nearest `n`.
    fn from_usize(n: usize) -> Self;
    /// The correctly rounded square root (see the module notes for other hosts).
    fn sqrt(self) -> Self;
    /// The natural logarithm of a positive normal value.
    fn ln(self) -> Self;
    /// e^self (0 below the smallest normal's logarithm, infinity above the largest).
    fn exp(self) -> Self;
    /// (cos theta, sin theta) for |theta| <= pi / 4.
    fn cos_sin_eighth(self) -> (Self, Self);
    /// A uniform draw in the open interval (0, 1) from one random word, exact in
    /// the type (23 bits for `f32`, 32 for `f64`).
    fn unit_open(w: u32) -> Self;
    /// |self|.
    fn abs(self) -> Self;
}

/// Horner evaluation of sum_k c[k] z^k.
#[inline(always)]
fn horner<T: UqReal>(c: &[f64], z: T) -> T {
    let mut acc = T::from_f64(c[c.len() - 1]);
    let mut i = c.len() - 1;
    while i > 0 {
        i -= 1;
        acc = acc * z + T::from_f64(c[i]);
    }
    acc
}

/// 2 atanh series coefficients 2/(2k+1), k = 0..9.
const ATANH2: [f64; 10] = [
    2.0,
    2.0 / 3.0,
    2.0 / 5.0,
    2.0 / 7.0,
    2.0 / 9.0,
    2.0 / 11.0,
    2.0 / 13.0,
    2.0 / 15.0,
    2.0 / 17.0,
    2.0 / 19.0,
];

/// 1/k!, k = 0..13.
const INV_FACT: [f64; 14] = [
    1.0,
    1.0,
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// cos series in theta^2: (-1)^k / (2k)!, k = 0..8.
const COS_C: [f64; 9] = [
    1.0,
    -1.0 / 2.0,
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40320.0,
    -1.0 / 3_628_800.0,
    1.0 / 479_001_600.0,
    -1.0 / 87_178_291_200.0,
    1.0 / 20_922_789_888_000.0,
];

/// sin series in theta^2 (times theta): (-1)^k / (2k+1)!, k = 0..7.
const SIN_C: [f64; 8] = [
    1.0,
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5040.0,
    1.0 / 362_880.0,
    -1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    -1.0 / 1_307_674_368_000.0,
];

macro_rules! real_impl {
    ($t:ty, $hi:expr, $lo:expr, $bits:ty, $mant:expr, $bias:expr, $ln_terms:expr, $exp_terms:expr,
     $cos_terms:expr, $sin_terms:expr, $unit:expr) => {
        impl UqReal for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const NAN: $t = <$t>::NAN;
            #[inline(always)]
            fn from_f64(x: f64) -> $t {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_usize(n: usize) -> $t {
                n as $t
            }
            #[inline(always)]
            fn sqrt(self) -> $t {
                sqrt_impl(self)
            }
            #[inline(always)]
            fn ln(self) -> $t {
                // self = 2^e m with m in [1, 2); move m to [sqrt(1/2), sqrt(2)).
                let bits = self.to_bits();
                let mut e = ((bits >> $mant) as i32) - $bias;
                let mut m =
                    <$t>::from_bits((bits & ((1 << $mant) - 1)) | (($bias as $bits) << $mant));
                if m > core::f64::consts::SQRT_2 as $t {
                    m *= 0.5;
                    e += 1;
                }
                let s = (m - 1.0) / (m + 1.0);
                let series: $t = horner(&ATANH2[..$ln_terms], s * s);
                let e = e as $t;
                e * $hi + (s * series + e * $lo)
            }
            #[inline(always)]
            fn exp(self) -> $t {
                const HI: $t = <$t>::MAX_EXP as $t * core::f64::consts::LN_2 as $t;
                const LO: $t = (<$t>::MIN_EXP - 1) as $t * core::f64::consts::LN_2 as $t;
                if self != self {
                    return self;
                }
                if self > HI {
                    return <$t>::INFINITY;
                }
                if self < LO {
                    return 0.0;
                }
                let kf = self * (core::f64::consts::LOG2_E as $t);
                let k = if kf >= 0.0 {
                    (kf + 0.5) as i32
                } else {
                    (kf - 0.5) as i32
                };
                let kt = k as $t;
                let r = (self - kt * $hi) - kt * $lo;
                let p: $t = horner(&INV_FACT[..$exp_terms], r);
                // 2^k in two halves, so k = MAX_EXP or MIN_EXP - 1 stays finite/normal.
                let k1 = k / 2;
                let k2 = k - k1;
                let pow = |j: i32| <$t>::from_bits(((j + $bias) as $bits) << $mant);
                p * pow(k1) * pow(k2)
            }
            #[inline(always)]
            fn cos_sin_eighth(self) -> ($t, $t) {
                let z = self * self;
                let c: $t = horner(&COS_C[..$cos_terms], z);
                let s: $t = horner(&SIN_C[..$sin_terms], z);
                (c, self * s)
            }
            #[inline(always)]
            fn unit_open(w: u32) -> $t {
                $unit(w)
            }
            #[inline(always)]
            fn abs(self) -> $t {
                <$t>::from_bits(self.to_bits() & !(1 << (core::mem::size_of::<$t>() * 8 - 1)))
            }
        }
    };
}

real_impl!(
    f64,
    LN2_HI_64,
    LN2_LO_64,
    u64,
    52,
    1023,
    10,
    14,
    9,
    8,
    |w: u32| (w as f64 + 0.5) * (1.0 / 4_294_967_296.0)
);
real_impl!(
    f32,
    LN2_HI_32,
    LN2_LO_32,
    u32,
    23,
    127,
    5,
    8,
    5,
    5,
    |w: u32| ((w >> 9) as f32 + 0.5) * (1.0 / 8_388_608.0)
);

/// Correctly rounded square roots per target.
trait SqrtImpl: Sized {
    fn sqrt_impl(self) -> Self;
}

#[inline(always)]
fn sqrt_impl<T: SqrtImpl>(x: T) -> T {
    x.sqrt_impl()
}

#[cfg(target_arch = "nvptx64")]
impl SqrtImpl for f64 {
    #[inline(always)]
    fn sqrt_impl(self) -> f64 {
        let r: f64;
        // SAFETY: a register-to-register instruction with no preconditions.
        unsafe {
            core::arch::asm!("sqrt.rn.f64 {r}, {v};", r = out(reg64) r, v = in(reg64) self,
                options(pure, nomem, nostack));
        }
        r
    }
}

#[cfg(target_arch = "nvptx64")]
impl SqrtImpl for f32 {
    #[inline(always)]
    fn sqrt_impl(self) -> f32 {
        let r: f32;
        // SAFETY: a register-to-register instruction with no preconditions.
        unsafe {
            core::arch::asm!("sqrt.rn.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) self,
                options(pure, nomem, nostack));
        }
        r
    }
}

#[cfg(target_arch = "x86_64")]
impl SqrtImpl for f64 {
    #[inline(always)]
    fn sqrt_impl(self) -> f64 {
        use core::arch::x86_64::{_mm_cvtsd_f64, _mm_set_sd, _mm_sqrt_pd};
        // SSE2 is part of the x86_64 baseline: `sqrtpd` is IEEE correctly rounded.
        // SAFETY: the target always has SSE2 (baseline feature of the architecture).
        unsafe { _mm_cvtsd_f64(_mm_sqrt_pd(_mm_set_sd(self))) }
    }
}

#[cfg(target_arch = "x86_64")]
impl SqrtImpl for f32 {
    #[inline(always)]
    fn sqrt_impl(self) -> f32 {
        use core::arch::x86_64::{_mm_cvtss_f32, _mm_set_ss, _mm_sqrt_ss};
        // SSE is part of the x86_64 baseline: `sqrtss` is IEEE correctly rounded.
        // SAFETY: the target always has SSE (baseline feature of the architecture).
        unsafe { _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(self))) }
    }
}

#[cfg(target_arch = "aarch64")]
impl SqrtImpl for f64 {
    #[inline(always)]
    fn sqrt_impl(self) -> f64 {
        use core::arch::aarch64::{vdup_n_f64, vget_lane_f64, vsqrt_f64};
        // NEON is part of the aarch64 baseline: `fsqrt` is IEEE correctly rounded.
        // SAFETY: the target always has NEON (baseline feature of the architecture).
        unsafe { vget_lane_f64::<0>(vsqrt_f64(vdup_n_f64(self))) }
    }
}

#[cfg(target_arch = "aarch64")]
impl SqrtImpl for f32 {
    #[inline(always)]
    fn sqrt_impl(self) -> f32 {
        use core::arch::aarch64::{vdup_n_f32, vget_lane_f32, vsqrt_f32};
        // NEON is part of the aarch64 baseline: `fsqrt` is IEEE correctly rounded.
        // SAFETY: the target always has NEON (baseline feature of the architecture).
        unsafe { vget_lane_f32::<0>(vsqrt_f32(vdup_n_f32(self))) }
    }
}

#[cfg(not(any(
    target_arch = "nvptx64",
    target_arch = "x86_64",
    target_arch = "aarch64"
)))]
macro_rules! newton_sqrt {
    ($t:ty, $bits:ty, $bias:expr, $mant:expr) => {
        impl SqrtImpl for $t {
            #[inline(always)]
            fn sqrt_impl(self) -> $t {
                if !(self > 0.0) || self == <$t>::INFINITY {
                    return if self == 0.0 || self == <$t>::INFINITY {
                        self
                    } else {
                        <$t>::NAN
                    };
                }
                // Halve the exponent for the first guess, then three Newton steps.
                let mut y =
                    <$t>::from_bits((self.to_bits() >> 1) + (($bias as $bits) << ($mant - 1)));
                let mut i = 0;
                while i < 4 {
                    y = 0.5 * (y + self / y);
                    i += 1;
                }
                y
            }
        }
    };
}

#[cfg(not(any(
    target_arch = "nvptx64",
    target_arch = "x86_64",
    target_arch = "aarch64"
)))]
newton_sqrt!(f64, u64, 1023, 52);
#[cfg(not(any(
    target_arch = "nvptx64",
    target_arch = "x86_64",
    target_arch = "aarch64"
)))]
newton_sqrt!(f32, u32, 127, 23);

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    #[test]
    fn ln_exp_sqrt_match_reference() {
        extern crate std;
        for &x in &[1e-300, 1e-10, 0.3, 0.999, 1.0, 1.5, 2.0, 3.7, 1e10, 1e300] {
            assert!(rel(UqReal::ln(x), std::primitive::f64::ln(x)) < 4e-16 || x == 1.0);
            assert_eq!(UqReal::ln(1.0f64), 0.0);
            assert_eq!(UqReal::sqrt(x), std::primitive::f64::sqrt(x));
            let xf = x as f32;
            if xf > 0.0 && xf.is_normal() {
                assert!(
                    (UqReal::ln(xf) - std::primitive::f32::ln(xf)).abs()
                        <= 2e-7 * std::primitive::f32::ln(xf).abs().max(1.0)
                );
                assert_eq!(UqReal::sqrt(xf), std::primitive::f32::sqrt(xf));
            }
        }
        for &x in &[-700.0, -20.0, -1.0, -1e-3, 0.0, 0.5, 1.0, 10.0, 700.0] {
            assert!(rel(UqReal::exp(x), std::primitive::f64::exp(x)) < 4e-16);
            let xf = (x / 10.0) as f32;
            assert!(
                ((UqReal::exp(xf) - std::primitive::f32::exp(xf)) / std::primitive::f32::exp(xf))
                    .abs()
                    < 4e-7
            );
        }
        assert_eq!(UqReal::exp(-800.0f64), 0.0);
        assert_eq!(UqReal::exp(800.0f64), f64::INFINITY);
        for i in -10..=10 {
            let t = i as f64 * core::f64::consts::FRAC_PI_4 / 10.0;
            let (c, s) = t.cos_sin_eighth();
            assert!((c - std::primitive::f64::cos(t)).abs() < 3e-16);
            let (cf, sf) = (t as f32).cos_sin_eighth();
            assert!((s - std::primitive::f64::sin(t)).abs() < 3e-16);
            assert!((cf as f64 - std::primitive::f64::cos(t)).abs() < 2e-7);
            assert!((sf as f64 - std::primitive::f64::sin(t)).abs() < 2e-7);
        }
    }

    #[test]
    fn unit_open_stays_inside() {
        for w in [0u32, 1, 255, 256, u32::MAX - 1, u32::MAX] {
            let a = <f64 as UqReal>::unit_open(w);
            let b = <f32 as UqReal>::unit_open(w);
            assert!(a > 0.0 && a < 1.0 && b > 0.0 && b < 1.0);
        }
    }
}
