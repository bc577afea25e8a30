//! The elementary functions of integrand expressions (`gpuq-expr`), defined once
//! for every backend: the CPU evaluator calls these, and the device's user
//! integrand module exports them (`gpuq_sin`, `gpuq_cos`, ... in
//! `device/user_cubature.rs`) for the CUDA C that NVRTC compiles from an
//! expression. Both run the same Rust code, so an expression gives the same bits
//! on the CPU and on the GPU.
//!
//! `sin`, `cos` (for |x| below 2^20 pi / 2), `exp`, `asin`, `sqrt` and `abs` are
//! those of the built-in integrands ([`super::math`]), so f1-f5 written as
//! expressions reproduce the built-ins bit for bit; the others, and `sin`/`cos`
//! of larger arguments, are the `libm` crate's (a port of musl's libm, within
//! about one ulp). Cost: a few tens of flops each; `pow` with an integer
//! exponent k costs |k| - 1 multiplications.

use super::math;

/// |x| at and below which `sin` and `cos` use the built-ins' reduction (where it
/// is accurate to about one ulp); larger arguments go to `libm`.
const TRIG_FAST: f64 = 1_647_099.0;

/// Magnitude by which `asin` and `acos` accept arguments past 1: the rounding of
/// a point on a box's face (`c + h` one ulp past 1). Beyond it they are NaN.
pub const DOMAIN_SLACK: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;

/// Largest |k| for which `pow(a, k)` of an integer k multiplies (above it,
/// `libm::pow`).
pub const MAX_INT_POWER: f64 = 64.0;

/// sin(x).
#[inline]
pub fn sin(x: f64) -> f64 {
    if math::abs(x) <= TRIG_FAST {
        math::sin(x)
    } else {
        libm::sin(x)
    }
}

/// cos(x).
#[inline]
pub fn cos(x: f64) -> f64 {
    if math::abs(x) <= TRIG_FAST {
        math::cos(x)
    } else {
        libm::cos(x)
    }
}

/// tan(x).
#[inline]
pub fn tan(x: f64) -> f64 {
    libm::tan(x)
}

/// x clamped to [-1, 1] when within [`DOMAIN_SLACK`] of it; NaN further out.
#[inline(always)]
fn unit(x: f64) -> f64 {
    if x > 1.0 {
        if x <= DOMAIN_SLACK {
            1.0
        } else {
            f64::NAN
        }
    } else if x < -1.0 {
        if x >= -DOMAIN_SLACK {
            -1.0
        } else {
            f64::NAN
        }
    } else {
        x
    }
}

/// asin(x) on [-1, 1] (arguments past +-1 by rounding only are taken as +-1).
#[inline]
pub fn asin(x: f64) -> f64 {
    math::asin(unit(x))
}

/// acos(x) on [-1, 1] (as [`asin`] past +-1), from the built-ins' `asin`:
/// pi/2 - asin(x) for |x| <= 1/2, 2 asin(sqrt((1 - x) / 2)) above (1 - x exact
/// there), pi - 2 asin(sqrt((1 + x) / 2)) below: about two ulps.
#[inline]
pub fn acos(x: f64) -> f64 {
    let x = unit(x);
    if math::abs(x) <= 0.5 {
        core::f64::consts::FRAC_PI_2 - math::asin(x)
    } else if x > 0.0 {
        2.0 * math::asin(math::sqrt((1.0 - x) * 0.5))
    } else {
        core::f64::consts::PI - 2.0 * math::asin(math::sqrt((1.0 + x) * 0.5))
    }
}

/// atan(x).
#[inline]
pub fn atan(x: f64) -> f64 {
    libm::atan(x)
}

/// atan2(y, x): the angle of the point (x, y).
#[inline]
pub fn atan2(y: f64, x: f64) -> f64 {
    libm::atan2(y, x)
}

/// sinh(x).
#[inline]
pub fn sinh(x: f64) -> f64 {
    libm::sinh(x)
}

/// cosh(x).
#[inline]
pub fn cosh(x: f64) -> f64 {
    libm::cosh(x)
}

/// tanh(x).
#[inline]
pub fn tanh(x: f64) -> f64 {
    libm::tanh(x)
}

/// e^x.
#[inline]
pub fn exp(x: f64) -> f64 {
    math::exp(x)
}

/// The natural logarithm (NaN below 0, -infinity at 0).
#[inline]
pub fn log(x: f64) -> f64 {
    libm::log(x)
}

/// The base-10 logarithm.
#[inline]
pub fn log10(x: f64) -> f64 {
    libm::log10(x)
}

/// The correctly rounded square root.
#[inline]
pub fn sqrt(x: f64) -> f64 {
    math::sqrt(x)
}

/// |x|.
#[inline]
pub fn abs(x: f64) -> f64 {
    math::abs(x)
}

/// The largest integer not above x.
#[inline]
pub fn floor(x: f64) -> f64 {
    libm::floor(x)
}

/// The error function.
#[inline]
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// The smaller of a and b (the other when one is NaN, as C's `fmin`).
#[inline]
pub fn min(a: f64, b: f64) -> f64 {
    libm::fmin(a, b)
}

/// The larger of a and b (the other when one is NaN, as C's `fmax`).
#[inline]
pub fn max(a: f64, b: f64) -> f64 {
    libm::fmax(a, b)
}

/// a^k for an integer k with 0 < k <= [`MAX_INT_POWER`]: k - 1
/// multiplications from the left, ((a a) a) ..., the order of the built-in
/// integrands' powers.
#[inline]
pub fn pow_positive(a: f64, k: u32) -> f64 {
    let mut r = a;
    let mut i = 1;
    while i < k {
        r *= a;
        i += 1;
    }
    r
}

/// a^k for an integer k >= 1 by binary powering (about log2 k roundings).
#[inline]
fn pow_binary(a: f64, mut k: u64) -> f64 {
    let mut r = 1.0;
    let mut p = a;
    while k > 0 {
        if k & 1 == 1 {
            r *= p;
        }
        k >>= 1;
        if k > 0 {
            p *= p;
        }
    }
    r
}

/// a^k for any integer-valued k: [`pow_positive`] for |k| <= [`MAX_INT_POWER`]
/// (the built-ins' order), binary powering above; 1 / a^|k| for k < 0.
#[inline]
fn pow_integer(a: f64, k: f64) -> f64 {
    let m = math::abs(k);
    let p = if m == 0.0 {
        1.0
    } else if m <= MAX_INT_POWER {
        pow_positive(a, m as u32)
    } else {
        pow_binary(a, m as u64)
    };
    if k < 0.0 {
        1.0 / p
    } else {
        p
    }
}

/// a^b. An integer b multiplies (`pow_positive` in order for |b| <=
/// [`MAX_INT_POWER`], binary powering above; 1 / a^|b| for b < 0); b = 1/2 is
/// the correctly rounded square root; any other b is a^floor(b) exp(f log a)
/// with f = b - floor(b) in (0, 1) (NaN for a negative a). Each multiplication
/// rounds once, so a^b is within about |b| / 2 + |log a| + 3 ulps (libm's
/// extra-precision `pow` would be within one). The rule depends on b's value only, so a
/// constant and a computed exponent agree. (libm's `pow` is not used: on the
/// device its square-root path needs a table the PTX cannot hold.)
#[inline]
pub fn pow(a: f64, b: f64) -> f64 {
    let k = libm::floor(b);
    if b == k && math::abs(b) < 9.007_199_254_740_992e15 {
        pow_integer(a, b)
    } else if b == 0.5 {
        math::sqrt(a)
    } else if a.is_nan() || b.is_nan() || a < 0.0 {
        f64::NAN
    } else if a == 0.0 {
        if b > 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else if !b.is_finite() || !a.is_finite() {
        math::exp(b * libm::log(a))
    } else {
        pow_integer(a, k) * math::exp((b - k) * libm::log(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_match_the_platform_within_ulps() {
        let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-300);
        for i in -200..=200 {
            let x = i as f64 * 0.0371;
            assert!(rel(sin(x), x.sin()) < 4e-16 || (sin(x) - x.sin()).abs() < 1e-17);
            assert!(rel(cos(x), x.cos()) < 4e-16 || (cos(x) - x.cos()).abs() < 1e-17);
            assert!(rel(exp(x), x.exp()) < 4e-16);
            assert!(rel(atan(x), x.atan()) < 4e-16 || x == 0.0);
            assert!(rel(tanh(x), x.tanh()) < 4e-16 || x == 0.0);
            let y = x * 0.13;
            if y.abs() <= 1.0 {
                assert!(rel(asin(y), y.asin()) < 4e-16 || y == 0.0);
                assert!(rel(acos(y), y.acos()) < 4e-16);
            }
        }
        // Large arguments leave the built-ins' reduction for libm's.
        assert!(rel(cos(1e7), 1e7f64.cos()) < 1e-15);
        assert!(rel(sin(-3e9), (-3e9f64).sin()) < 1e-15);
    }

    #[test]
    fn asin_takes_rounding_past_one_and_rejects_more() {
        let past = f64::from_bits(1.0f64.to_bits() + 1);
        assert_eq!(asin(past), asin(1.0));
        assert_eq!(acos(-past), acos(-1.0));
        assert!(asin(1.001).is_nan());
        assert!(acos(-2.0).is_nan());
    }

    #[test]
    fn integer_powers_multiply_in_order() {
        let a = 0.731_f64;
        assert_eq!(pow(a, 3.0), a * a * a);
        assert_eq!(pow(a, -2.0), 1.0 / (a * a));
        assert_eq!(pow(a, 0.0), 1.0);
        assert_eq!(pow(-2.0, 3.0), -8.0);
        assert_eq!(pow(a, 0.5), a.sqrt());
        assert!(pow(-2.0, 0.5).is_nan());
        assert!(pow(-2.0, 1.5).is_nan());
        for (a, b) in [(0.3, 1.7), (2.5, -0.3), (1e-3, 2.5), (7.0, 10.5)] {
            let want: f64 = f64::powf(a, b);
            assert!((pow(a, b) - want).abs() <= 4e-15 * want, "{a}^{b}");
        }
        // A large exponent: each multiplication rounds.
        let want: f64 = f64::powf(1.1, 300.25);
        assert!((pow(1.1, 300.25) - want).abs() <= 1e-13 * want);
        assert_eq!(pow(3.0, -70.0), 1.0 / 3f64.powi(70));
        assert_eq!(pow(0.0, 1.5), 0.0);
        assert_eq!(pow(0.0, -1.5), f64::INFINITY);
        assert_eq!(pow(2.0, 70.0), 2f64.powi(70));
    }

    #[test]
    fn min_and_max_skip_nan() {
        assert_eq!(min(f64::NAN, 2.0), 2.0);
        assert_eq!(max(1.0, f64::NAN), 1.0);
        assert_eq!(min(-1.0, 2.0), -1.0);
        assert_eq!(max(-1.0, 2.0), 2.0);
    }
}
