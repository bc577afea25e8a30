//! Axis ranges and tick labels.

/// The finite range of `values`, padded by 5% of its width; a flat range is
/// widened around its value, an empty one is (0, 1).
pub(crate) fn linear_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = finite_bounds(values);
    if lo > hi {
        (0.0, 1.0)
    } else if lo == hi {
        (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0))
    } else {
        let pad = 0.05 * (hi - lo);
        (lo - pad, hi + pad)
    }
}

/// The range of the positive finite `values` widened to whole decades
/// (10^floor(log10 lo), 10^ceil(log10 hi)), at least one decade wide; (1, 10)
/// without a positive value.
pub(crate) fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = finite_bounds(values.filter(|v| *v > 0.0));
    if lo > hi {
        return (1.0, 10.0);
    }
    let a = lo.log10().floor();
    let mut b = hi.log10().ceil();
    if b <= a {
        b = a + 1.0;
    }
    (10f64.powi(a as i32), 10f64.powi(b as i32))
}

fn finite_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        })
}

/// A tick label of a linear axis spanning `span`: "0" for values within
/// 1e-9 span of zero; scientific notation (mantissa of at most 4 digits) below
/// 1e-3 or from 1e5 in magnitude; else at most 6 decimals, trailing zeros cut.
pub(crate) fn linear_label(v: f64, span: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v.abs() <= 1e-9 * span.abs() || v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        let s = format!("{v:.3e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        return format!("{}e{exponent}", trim_zeros(mantissa));
    }
    trim_zeros(&format!("{v:.6}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A tick label of a logarithmic axis: "10" with the exponent in superscript
/// digits at a power of ten, nothing elsewhere (the minor ticks).
pub(crate) fn log_label(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let e = v.log10();
    if (e - e.round()).abs() > 1e-6 {
        return String::new();
    }
    let e = e.round() as i64;
    const SUPERSCRIPTS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut s = String::from("10");
    if e < 0 {
        s.push('⁻');
    }
    for d in e.unsigned_abs().to_string().bytes() {
        s.push(SUPERSCRIPTS[(d - b'0') as usize]);
    }
    s
}

/// A tick label of an axis of whole numbers (levels, counts): the number at
/// an integer, nothing between.
pub(crate) fn integer_label(v: f64) -> String {
    if v.is_finite() && (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(linear_label(0.30000000000000004, 1.0), "0.3");
        assert_eq!(linear_label(1e-17, 1.0), "0");
        assert_eq!(linear_label(-2.5, 10.0), "-2.5");
        assert_eq!(linear_label(40.0, 100.0), "40");
        assert_eq!(linear_label(0.00025, 0.001), "2.5e-4");
        assert_eq!(linear_label(250000.0, 1e6), "2.5e5");
        assert_eq!(linear_label(1e-4, 1e-3), "1e-4");
        assert_eq!(log_label(1e-8), "10⁻⁸");
        assert_eq!(log_label(1e12), "10¹²");
        assert_eq!(log_label(1.0), "10⁰");
        assert_eq!(log_label(2e-3), "");
        assert_eq!(integer_label(3.0), "3");
        assert_eq!(integer_label(2.5), "");
    }

    #[test]
    fn ranges() {
        assert_eq!(log_range([2e-3, 8e-3].into_iter()), (1e-3, 1e-2));
        assert_eq!(log_range([0.0, -1.0].into_iter()), (1.0, 10.0));
        let (a, b) = log_range([3e-9, 1.0, f64::NAN].into_iter());
        assert!((a - 1e-9).abs() < 1e-24 && b == 1.0);
        assert_eq!(linear_range(std::iter::empty()), (0.0, 1.0));
        assert_eq!(linear_range([2.0, 2.0].into_iter()), (1.0, 3.0));
        assert_eq!(linear_range([0.0, 10.0].into_iter()), (-0.5, 10.5));
    }
}
