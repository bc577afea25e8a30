//! Spectral radius estimates by power iteration.

use serde::{Deserialize, Serialize};

/// A power-iteration estimate of a spectral radius.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpectralEstimate {
    /// The estimate.
    pub value: f64,
    /// Operator applications spent.
    pub iterations: usize,
    /// Whether two successive estimates agreed to 1e-7 before the cap.
    pub settled: bool,
}

/// Estimates rho(M) for an n x n operator `apply` (y = M x) by power iteration
/// from a fixed positive start vector: the geometric mean of the norm growth over
/// the second half of the iterations. Averaging over many steps makes it correct
/// also when the dominant eigenvalues are a pair +-lambda (bipartite walks, such
/// as Laplacians) or a complex pair, where a one-step ratio oscillates. Stops when
/// the estimate changes by less than 1e-7 between checks (every 20 iterations)
/// or after `max_iterations`. Cost: up to `max_iterations` applications.
pub fn spectral_radius(
    n: usize,
    mut apply: impl FnMut(&[f64]) -> Vec<f64>,
    max_iterations: usize,
) -> SpectralEstimate {
    if n == 0 {
        return SpectralEstimate {
            value: 0.0,
            iterations: 0,
            settled: true,
        };
    }
    // A positive start with a little variation, so no eigenvector is missed by
    // symmetry (the all-ones vector is orthogonal to the odd modes).
    let mut x: Vec<f64> = (0..n)
        .map(|i| 1.0 + 0.5 * ((i as f64 * 0.618_033_988_75).fract() - 0.5))
        .collect();
    normalise(&mut x);
    let mut log_growth: Vec<f64> = Vec::with_capacity(max_iterations);
    let mut previous = f64::NAN;
    for it in 1..=max_iterations.max(1) {
        let mut y = apply(&x);
        let norm = normalise(&mut y);
        if norm == 0.0 || !norm.is_finite() {
            let value = if norm == 0.0 { 0.0 } else { f64::INFINITY };
            return SpectralEstimate {
                value,
                iterations: it,
                settled: true,
            };
        }
        log_growth.push(norm.ln());
        x = y;
        if it % 20 == 0 {
            let estimate = mean_tail(&log_growth).exp();
            if (estimate - previous).abs() < 1e-7 * estimate {
                return SpectralEstimate {
                    value: estimate,
                    iterations: it,
                    settled: true,
                };
            }
            previous = estimate;
        }
    }
    SpectralEstimate {
        value: mean_tail(&log_growth).exp(),
        iterations: log_growth.len(),
        settled: false,
    }
}

/// Mean of the last `2 floor(len / 4)` entries (at least one): about the second
/// half, an even count so that a +-lambda pair's alternation cancels.
fn mean_tail(v: &[f64]) -> f64 {
    let k = ((v.len() / 2) & !1).max(1);
    let tail = &v[v.len() - k..];
    tail.iter().sum::<f64>() / k as f64
}

/// Scales `x` to unit Euclidean norm; returns the norm it had.
fn normalise(x: &mut [f64]) -> f64 {
    let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        x.iter_mut().for_each(|v| *v /= norm);
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagonal_operator() {
        let d = [0.3, -0.9, 0.5];
        let e = spectral_radius(3, |x| x.iter().zip(&d).map(|(a, b)| a * b).collect(), 2000);
        assert!((e.value - 0.9).abs() < 1e-6, "{e:?}");
    }

    #[test]
    fn plus_minus_pair() {
        // [[0, a], [a, 0]] has eigenvalues +-a: a one-step ratio is exact here but
        // add a smaller mode so the start is not an eigenvector.
        let e = spectral_radius(3, |x| vec![0.7 * x[1], 0.7 * x[0], 0.2 * x[2]], 2000);
        assert!((e.value - 0.7).abs() < 1e-6, "{e:?}");
    }

    #[test]
    fn rotation_pair() {
        // A scaled rotation: complex pair 0.8 e^{+-i theta}.
        let (c, s) = (0.8 * 0.3f64.cos(), 0.8 * 0.3f64.sin());
        let e = spectral_radius(2, |x| vec![c * x[0] - s * x[1], s * x[0] + c * x[1]], 2000);
        assert!((e.value - 0.8).abs() < 1e-6, "{e:?}");
    }

    #[test]
    fn zero_operator() {
        let e = spectral_radius(4, |x| vec![0.0; x.len()], 10);
        assert_eq!(e.value, 0.0);
    }
}
