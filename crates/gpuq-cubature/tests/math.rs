//! The shared elementary functions against std: sin, cos, exp, asin within two
//! ulps (sin and cos also within 1e-15 absolutely), sqrt bit for bit.

use gpuq_kernels::cubature::math::{asin, cos, exp, sin, sqrt};

fn ulps(a: f64, b: f64) -> f64 {
    if a == b {
        return 0.0;
    }
    (a - b).abs() / (f64::EPSILON * b.abs().max(f64::MIN_POSITIVE))
}

#[test]
fn elementary_functions_match_std() {
    let mut worst = [0.0f64; 4];
    let mut s = 0x1234_5678_9abc_def0u64;
    for i in 0..100_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let u = (s >> 11) as f64 / (1u64 << 53) as f64;
        let x = (u - 0.5) * if i % 2 == 0 { 20.0 } else { 4000.0 };
        // Relative accuracy near the zeros of sin and cos is limited by the
        // reduction (absolute error ~1e-17); compare in ulps away from them.
        if x.sin().abs() > 1e-3 {
            worst[0] = worst[0].max(ulps(sin(x), x.sin()));
        }
        if x.cos().abs() > 1e-3 {
            worst[1] = worst[1].max(ulps(cos(x), x.cos()));
        }
        assert!(
            (sin(x) - x.sin()).abs() < 1e-15 && (cos(x) - x.cos()).abs() < 1e-15,
            "{x}"
        );
        let xe = (u - 0.5) * 1400.0;
        worst[2] = worst[2].max(ulps(exp(xe), xe.exp()));
        let xa = 2.0 * u - 1.0;
        worst[3] = worst[3].max(ulps(asin(xa), xa.asin()));
        let xs = u * 1e7;
        assert_eq!(sqrt(xs).to_bits(), xs.sqrt().to_bits(), "sqrt({xs})");
    }
    assert!(
        worst.iter().all(|&w| w <= 2.0),
        "worst ulps (sin, cos, exp, asin) {worst:?}"
    );
    for x in [
        0.0,
        1.0,
        2.0,
        4.0,
        1e-310,
        5e-324,
        1e300,
        0.5,
        0.25,
        f64::MAX,
        f64::INFINITY,
    ] {
        assert_eq!(sqrt(x).to_bits(), x.sqrt().to_bits(), "sqrt({x})");
    }
    assert!(sqrt(-1.0).is_nan() && asin(1.5).is_nan() && sin(f64::INFINITY).is_nan());
    assert_eq!(asin(1.0), std::f64::consts::FRAC_PI_2);
    assert_eq!(exp(0.0), 1.0);
    assert_eq!(exp(-800.0), 0.0);
    assert_eq!(exp(800.0), f64::INFINITY);
    assert!((exp(-740.0) - (-740.0f64).exp()).abs() <= 1e-5 * (-740.0f64).exp());
}
