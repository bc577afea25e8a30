//! Summary statistics of a set of samples.

/// Mean, unbiased standard deviation and quantiles of samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Description {
    /// Number of finite values summarised.
    pub count: usize,
    /// Their mean (0 for none).
    pub mean: f64,
    /// Their unbiased standard deviation (0 for fewer than two).
    pub std: f64,
    /// The requested quantiles, in order (NaN for none).
    pub quantiles: Vec<f64>,
}

/// Describes the finite values of `values`, which it sorts in place (the
/// non-finite ones removed): mean, unbiased standard deviation, and the
/// quantiles `qs` by linear interpolation between order statistics (q (n - 1)
/// as the fractional position). O(n log n).
pub fn describe(values: &mut Vec<f64>, qs: &[f64]) -> Description {
    values.retain(|x| x.is_finite());
    let n = values.len();
    let mean = if n > 0 {
        values.iter().sum::<f64>() / n as f64
    } else {
        0.0
    };
    let var = if n > 1 {
        values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    values.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        if n == 0 {
            return f64::NAN;
        }
        let pos = q * (n - 1) as f64;
        let (i, f) = (pos.floor() as usize, pos.fract());
        if i + 1 < n {
            values[i] + f * (values[i + 1] - values[i])
        } else {
            values[n - 1]
        }
    };
    Description {
        count: n,
        mean,
        std: var.sqrt(),
        quantiles: qs.iter().map(|&q| quantile(q)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_and_drops_nonfinite_values() {
        let mut v = vec![3.0, 1.0, f64::NAN, 2.0, 4.0];
        let d = describe(&mut v, &[0.0, 0.5, 1.0, 0.25]);
        assert_eq!(d.count, 4);
        assert_eq!(d.mean, 2.5);
        assert!((d.std - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(d.quantiles, vec![1.0, 2.5, 4.0, 1.75]);
        assert_eq!(v, vec![1.0, 2.0, 3.0, 4.0]);
        let d = describe(&mut Vec::new(), &[0.5]);
        assert!(d.quantiles[0].is_nan());
    }
}
