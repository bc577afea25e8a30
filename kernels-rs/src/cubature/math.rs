//! Elementary functions for the cubature integrands, written in plain `f64`
//! arithmetic so that the CPU and the device compute the same bits (`core` has
//! no `sin`/`exp` in `no_std`, and the device has no libm).
//!
//! The algorithms are the classical fdlibm ones (Cody-Waite argument reduction and
//! minimax polynomials on the reduced range): `sin`, `cos` and `exp` are within
//! about one unit in the last place of the correctly rounded result for arguments
//! below 2^20 pi / 2 in magnitude (larger arguments lose accuracy in the
//! reduction: the integrands never need them); `asin` within about one ulp on
//! [-1, 1]. `sqrt` is correctly rounded on both backends (`sqrt.rn.f64` on the
//! device, exact integer arithmetic on the host), so it agrees bit for bit.
//! Cost: a few tens of flops each.

// fdlibm's constants are kept digit for digit as published (several equal the
// `core::f64::consts` values bit for bit).
#![allow(clippy::excessive_precision, clippy::approx_constant)]

const SIGN: u64 = 1 << 63;

/// |x| (clears the sign bit).
#[inline(always)]
pub fn abs(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & !SIGN)
}

/// The larger of two values (`b` when either is NaN and `a` is not larger).
#[inline(always)]
pub fn max(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// The nearest integer to `x` (ties away from zero) for |x| < 2^62.
#[inline(always)]
fn round_i64(x: f64) -> i64 {
    if x >= 0.0 {
        (x + 0.5) as i64
    } else {
        (x - 0.5) as i64
    }
}

/// 2^k as an `f64` for -1022 <= k <= 1023.
#[inline(always)]
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The correctly rounded square root (NaN below zero).
#[inline(always)]
pub fn sqrt(x: f64) -> f64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f64;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("sqrt.rn.f64 {r}, {v};", r = out(reg64) r, v = in(reg64) x,
                options(pure, nomem, nostack));
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        sqrt_soft(x)
    }
}

/// Correctly rounded square root by exact integer arithmetic (the host half of
/// [`sqrt`]).
#[cfg(not(target_arch = "nvptx64"))]
fn sqrt_soft(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 || x == f64::INFINITY {
        return x;
    }
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    // x = m 2^e with m an integer.
    let (mut m, mut e) = if biased == 0 {
        (frac, -1074i64)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    };
    // Normalise m to [2^52, 2^53).
    while m < (1u64 << 52) {
        m <<= 1;
        e -= 1;
    }
    let mut big = m as u128;
    if e & 1 != 0 {
        big <<= 1;
        e -= 1;
    }
    // sqrt(big 2^60) has 56 or 57 bits.
    let big = big << 60;
    let r = big.isqrt();
    let exact = r * r == big;
    let width = 128 - r.leading_zeros() as i64;
    let shift = width - 53;
    let mut q = r >> shift;
    let rest = r & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    if rest > half || (rest == half && (!exact || q & 1 == 1)) {
        q += 1;
    }
    let mut exp2 = (e - 60) / 2 + shift;
    if q == (1u128 << 53) {
        q >>= 1;
        exp2 += 1;
    }
    // value = q 2^exp2 with q in [2^52, 2^53).
    let biased_out = exp2 + 52 + 1023;
    f64::from_bits(((biased_out as u64) << 52) | ((q as u64) & ((1u64 << 52) - 1)))
}

// fdlibm's split of pi/2 (33 + 33 + 53 bits) and the reduced-range polynomials.
const INV_PIO2: f64 = 6.366_197_723_675_813_824_33e-01;
const PIO2_1: f64 = 1.570_796_326_734_125_614_17e+00;
const PIO2_1T: f64 = 6.077_100_506_506_192_249_3e-11;
const PIO2_2: f64 = 6.077_100_506_303_965_976_6e-11;
const PIO2_2T: f64 = 2.022_266_248_795_950_631_5e-21;
const PIO2_3: f64 = 2.022_266_248_711_166_455_8e-21;
const PIO2_3T: f64 = 8.478_427_660_368_899_643_9e-32;

const S1: f64 = -1.666_666_666_666_663_243_48e-01;
const S2: f64 = 8.333_333_333_322_489_461_24e-03;
const S3: f64 = -1.984_126_982_985_794_931_34e-04;
const S4: f64 = 2.755_731_370_707_006_767_89e-06;
const S5: f64 = -2.505_076_025_340_686_341_95e-08;
const S6: f64 = 1.589_690_995_211_550_102_21e-10;

const C1: f64 = 4.166_666_666_666_660_190_37e-02;
const C2: f64 = -1.388_888_888_887_410_957_49e-03;
const C3: f64 = 2.480_158_728_947_672_941_78e-05;
const C4: f64 = -2.755_731_435_139_066_330_35e-07;
const C5: f64 = 2.087_572_321_298_174_827_90e-09;
const C6: f64 = -1.135_964_755_778_819_482_65e-11;

/// sin on [-pi/4, pi/4] of y = hi + lo.
#[inline(always)]
fn k_sin(x: f64, y: f64) -> f64 {
    let z = x * x;
    let v = z * x;
    let r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
    x - ((z * (0.5 * y - v * r) - y) - v * S1)
}

/// cos on [-pi/4, pi/4] of y = hi + lo.
#[inline(always)]
fn k_cos(x: f64, y: f64) -> f64 {
    let z = x * x;
    let r = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    w + (((1.0 - w) - hz) + (z * r - x * y))
}

/// Reduces x to y0 + y1 in [-pi/4, pi/4] and the quadrant n (x = n pi/2 + y).
#[inline(always)]
fn reduce(x: f64) -> (i64, f64, f64) {
    if abs(x) <= 7.853_981_633_974_483e-01 {
        return (0, x, 0.0);
    }
    let n = round_i64(x * INV_PIO2);
    let fnn = n as f64;
    // Three-step Cody-Waite reduction: each step subtracts a further piece of pi/2.
    let mut r = x - fnn * PIO2_1;
    let mut w = fnn * PIO2_1T;
    let mut y0 = r - w;
    if abs(y0) < 1e-3 * abs(x) {
        let t = r;
        w = fnn * PIO2_2;
        r = t - w;
        w = fnn * PIO2_2T - ((t - r) - w);
        y0 = r - w;
        if abs(y0) < 1e-9 * abs(x) {
            let t = r;
            w = fnn * PIO2_3;
            r = t - w;
            w = fnn * PIO2_3T - ((t - r) - w);
            y0 = r - w;
        }
    }
    let y1 = (r - y0) - w;
    (n, y0, y1)
}

/// sin(x).
#[inline]
pub fn sin(x: f64) -> f64 {
    if !x.is_finite() {
        return f64::NAN;
    }
    let (n, y0, y1) = reduce(x);
    match n & 3 {
        0 => k_sin(y0, y1),
        1 => k_cos(y0, y1),
        2 => -k_sin(y0, y1),
        _ => -k_cos(y0, y1),
    }
}

/// cos(x).
#[inline]
pub fn cos(x: f64) -> f64 {
    if !x.is_finite() {
        return f64::NAN;
    }
    let (n, y0, y1) = reduce(x);
    match n & 3 {
        0 => k_cos(y0, y1),
        1 => -k_sin(y0, y1),
        2 => -k_cos(y0, y1),
        _ => k_sin(y0, y1),
    }
}

const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
const INV_LN2: f64 = 1.442_695_040_888_963_387_00e+00;
const P1: f64 = 1.666_666_666_666_660_190_37e-01;
const P2: f64 = -2.777_777_777_701_559_338_42e-03;
const P3: f64 = 6.613_756_321_437_934_361_17e-05;
const P4: f64 = -1.653_390_220_546_525_153_90e-06;
const P5: f64 = 4.138_136_797_057_238_460_39e-08;

/// e^x (0 below -745, infinity above 709.78).
#[inline]
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_383_9 {
        return f64::INFINITY;
    }
    if x < -745.133_219_101_941_1 {
        return 0.0;
    }
    if abs(x) < 3.725_290_298_461_914e-9 {
        return 1.0 + x;
    }
    let k = round_i64(x * INV_LN2);
    let fk = k as f64;
    let hi = x - fk * LN2_HI;
    let lo = fk * LN2_LO;
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    // Scale by 2^k in two steps so that subnormal results and k = 1024 work.
    if k < -1000 {
        y * pow2(k + 1000) * pow2(-1000)
    } else if k > 1000 {
        y * pow2(k - 1000) * pow2(1000)
    } else {
        y * pow2(k)
    }
}

const PIO2_HI: f64 = 1.570_796_326_794_896_558_00e+00;
const PIO2_LO: f64 = 6.123_233_995_736_766_035_87e-17;
const PIO4_HI: f64 = 7.853_981_633_974_482_789_99e-01;
const PS0: f64 = 1.666_666_666_666_666_574_15e-01;
const PS1: f64 = -3.255_658_186_224_009_154_05e-01;
const PS2: f64 = 2.012_125_321_348_629_258_81e-01;
const PS3: f64 = -4.005_553_450_067_941_140_27e-02;
const PS4: f64 = 7.915_349_942_898_145_321_76e-04;
const PS5: f64 = 3.479_331_075_960_211_675_70e-05;
const QS1: f64 = -2.403_394_911_734_414_218_78e+00;
const QS2: f64 = 2.020_945_760_233_505_694_71e+00;
const QS3: f64 = -6.882_839_716_054_532_930_30e-01;
const QS4: f64 = 7.703_815_055_590_193_527_91e-02;

/// The rational approximation R(t) of asin on its two ranges.
#[inline(always)]
fn asin_r(t: f64) -> f64 {
    let p = t * (PS0 + t * (PS1 + t * (PS2 + t * (PS3 + t * (PS4 + t * PS5)))));
    let q = 1.0 + t * (QS1 + t * (QS2 + t * (QS3 + t * QS4)));
    p / q
}

/// asin(x) for |x| <= 1 (NaN outside).
#[inline]
pub fn asin(x: f64) -> f64 {
    let ax = abs(x);
    if ax.is_nan() || ax > 1.0 {
        return f64::NAN;
    }
    if ax == 1.0 {
        return x * PIO2_HI + x * PIO2_LO;
    }
    if ax < 0.5 {
        if ax < 1.490_116_119_384_765_6e-8 {
            return x;
        }
        return x + x * asin_r(x * x);
    }
    let w = 1.0 - ax;
    let t = w * 0.5;
    let r = asin_r(t);
    let s = sqrt(t);
    let v = if ax >= 0.975 {
        PIO2_HI - (2.0 * (s + s * r) - PIO2_LO)
    } else {
        // s split into a high part with 26 trailing zero bits and a correction.
        let hi = f64::from_bits(s.to_bits() & 0xffff_ffff_0000_0000);
        let c = (t - hi * hi) / (s + hi);
        let p = 2.0 * s * r - (PIO2_LO - 2.0 * c);
        let q = PIO4_HI - 2.0 * hi;
        PIO4_HI - (p - q)
    };
    if x < 0.0 {
        -v
    } else {
        v
    }
}
