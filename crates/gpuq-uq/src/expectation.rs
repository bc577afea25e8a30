//! (v) Expectations E[g(q)] of functions of N standard normal variables
//! (seed 001's example 5).
//!
//! * [`tensor_expectation`]: the tensor Gauss-Hermite rule of `gpuq-cubature`
//!   (`gpuq_cubature::tensor::gauss_hermite`: N_a^N points, the flat point index
//!   decoded into base-N_a digits, one digit per axis, as in the seed), on any
//!   backend that implements `CubatureKernels` (the CPU and CUDA). Exact for
//!   polynomials of degree <= 2 N_a - 1 in each variable. Cost N_a^N evaluations.
//! * [`SmolyakRule`]: beyond the seed, the Smolyak sparse grid built from
//!   *non-nested* probabilists' Gauss-Hermite rules with m(i) = i points at
//!   level i, by the combination technique
//!   Q = sum_{|j| <= l} (-1)^(l - |j|) C(N - 1, l - |j|) (x)_k Q^(1 + j_k),
//!   exact for polynomials of total degree <= 2 l + 1 (l the sparse-grid level).
//!   It has C(N + l, l) tensor terms of at most l non-trivial axes each, so N = 30
//!   is cheap where the tensor rule (N_a^30 points) is hopeless. It evaluates
//!   a host closure (Rayon over the terms, summed in a fixed order: the result
//!   does not depend on the thread count). Duplicate points of different terms
//!   are evaluated once per term (not merged).
//!
//! Not done: the Smolyak grid on the device.

use gpuq_core::{Error, Result};
use gpuq_cubature::func::NonFinite;
use gpuq_cubature::tensor::{gauss_hermite, hermite_1d};
use gpuq_cubature::{CubatureKernels, Func};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// An expectation and what it cost.
#[derive(Clone, Debug, Serialize)]
pub struct Expectation {
    /// The estimate of E[g(q)].
    pub estimate: f64,
    /// Integrand evaluations.
    pub points: u64,
    /// Wall time in seconds.
    pub time_s: f64,
}

/// E[g(q)], q ~ N(0, I_N), by the tensor Gauss-Hermite rule with `na` points per
/// axis on `backend`: any integrand of `gpuq-cubature` (built-ins, expressions
/// and user device code on the device, closures on the host). Errors with
/// [`Error::IntegrandNotFinite`] at a NaN or infinite value. Limits of
/// `gpuq-cubature`: 1..=16 axes, 1..=64 points per axis.
pub fn tensor_expectation<B: CubatureKernels>(
    backend: &B,
    dim: usize,
    na: usize,
    f: Func<'_>,
) -> Result<Expectation> {
    let rule = gauss_hermite(dim, na)?;
    let t = Instant::now();
    let estimate = rule.integrate(backend, f)?;
    Ok(Expectation {
        estimate,
        points: rule.points(),
        time_s: t.elapsed().as_secs_f64(),
    })
}

/// A host integrand g(x).
pub type Integrand<'a> = dyn Fn(&[f64]) -> f64 + Sync + 'a;

/// One tensor term of a Smolyak rule: a coefficient and the points per axis
/// (1 on all but at most `level` axes).
#[derive(Clone, Debug)]
struct Term {
    coefficient: f64,
    /// (axis, points) for the axes with more than one point.
    axes: Vec<(usize, usize)>,
}

/// The Smolyak sparse grid of non-nested Gauss-Hermite rules (see the module notes).
#[derive(Clone, Debug)]
pub struct SmolyakRule {
    dim: usize,
    level: usize,
    terms: Vec<Term>,
    /// hermite_1d(m) for m = 1..=level + 1 (index m - 1).
    rules: Vec<(Vec<f64>, Vec<f64>)>,
}

/// Most points a Smolyak rule may have.
const MAX_SMOLYAK_POINTS: u64 = 1 << 32;

/// C(n, k) as f64.
fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

impl SmolyakRule {
    /// The rule of sparse-grid level `level` in `dim` dimensions (exact to total
    /// degree 2 level + 1). Errors on dim = 0 or more than 2^32 points.
    pub fn new(dim: usize, level: usize) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidArgument("smolyak: dimension 0".into()));
        }
        // Count first (sum over |j| <= level of prod (1 + j_k), by dynamic
        // programming over the axes), so a huge grid is refused before it is built.
        let mut f = vec![0u128; level + 1];
        f[0] = 1;
        for _ in 0..dim {
            let prev = f.clone();
            for s in 0..=level {
                f[s] = (0..=s).map(|t| (1 + t as u128) * prev[s - t]).sum();
            }
        }
        let bound: u128 = f.iter().sum();
        if bound > MAX_SMOLYAK_POINTS as u128 {
            return Err(Error::InvalidArgument(format!(
                "smolyak: about {bound} points at level {level} in {dim} dimensions (limit 2^32)"
            )));
        }
        let mut terms = Vec::new();
        let mut axes = Vec::new();
        enumerate(dim, level, 0, level, &mut axes, &mut |axes, used| {
            let slack = level - used;
            if slack < dim {
                let sign = if slack % 2 == 0 { 1.0 } else { -1.0 };
                terms.push(Term {
                    coefficient: sign * binomial(dim - 1, slack),
                    axes: axes.to_vec(),
                });
            }
        });
        Ok(SmolyakRule {
            dim,
            level,
            terms,
            rules: (1..=level + 1).map(hermite_1d).collect(),
        })
    }

    /// Points evaluated (summed over the terms, duplicates counted).
    pub fn points(&self) -> u64 {
        self.terms
            .iter()
            .map(|t| t.axes.iter().map(|&(_, m)| m as u64).product::<u64>())
            .sum()
    }

    /// Number of tensor terms.
    pub fn terms(&self) -> usize {
        self.terms.len()
    }

    /// The level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// sum over terms and points of coefficient x weight x g(x).
    pub fn integrate(&self, g: &Integrand<'_>) -> f64 {
        let parts: Vec<f64> = self
            .terms
            .par_iter()
            .map(|t| t.coefficient * self.term_sum(t, g))
            .collect();
        parts.iter().sum()
    }

    /// One tensor term's weighted sum (mixed-radix walk over its active axes).
    fn term_sum(&self, t: &Term, g: &Integrand<'_>) -> f64 {
        let mut x = vec![0.0; self.dim];
        let mut digit = vec![0usize; t.axes.len()];
        let mut sum = 0.0;
        loop {
            let mut w = 1.0;
            for (&(axis, m), &d) in t.axes.iter().zip(&digit) {
                let (nodes, weights) = &self.rules[m - 1];
                x[axis] = nodes[d];
                w *= weights[d];
            }
            sum += w * g(&x);
            let mut k = 0;
            loop {
                if k == digit.len() {
                    return sum;
                }
                digit[k] += 1;
                if digit[k] < t.axes[k].1 {
                    break;
                }
                digit[k] = 0;
                k += 1;
            }
        }
    }
}

/// What [`enumerate`] calls for each multi-index: (active axes, |j|).
type Visit<'a> = dyn FnMut(&[(usize, usize)], usize) + 'a;

/// Calls `visit(axes, |j|)` for every j in N^dim with |j| <= budget (from axis
/// `from` on), `axes` listing (axis, 1 + j_axis) for j_axis > 0.
fn enumerate(
    dim: usize,
    level: usize,
    from: usize,
    budget: usize,
    axes: &mut Vec<(usize, usize)>,
    visit: &mut Visit<'_>,
) {
    visit(axes, level - budget);
    for axis in from..dim {
        for j in 1..=budget {
            axes.push((axis, 1 + j));
            enumerate(dim, level, axis + 1, budget - j, axes, visit);
            axes.pop();
        }
    }
}

/// E[g(q)] by the Smolyak rule of `level` in `dim` dimensions (host). Errors
/// with [`Error::IntegrandNotFinite`] when g returns NaN or an infinite value.
pub fn smolyak_expectation(dim: usize, level: usize, g: &Integrand<'_>) -> Result<Expectation> {
    let rule = SmolyakRule::new(dim, level)?;
    let seen = NonFinite::default();
    let guarded = |x: &[f64]| {
        let v = g(x);
        if !v.is_finite() {
            seen.record(x, v);
        }
        v
    };
    let t = Instant::now();
    let estimate = rule.integrate(&guarded);
    seen.check()?;
    Ok(Expectation {
        estimate,
        points: rule.points(),
        time_s: t.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_cpu::CpuBackend;
    use gpuq_cubature::builtin;
    use gpuq_kernels::cubature::integrand::SUM_OF_SQUARES;

    /// E[q^k] for a standard normal: (k - 1)!! for even k, 0 for odd.
    fn moment(k: u32) -> f64 {
        if k % 2 == 1 {
            0.0
        } else {
            (1..k).step_by(2).map(f64::from).product()
        }
    }

    #[test]
    fn tensor_rule_is_exact_to_degree_2na_minus_1() {
        let cpu = CpuBackend::new();
        let na = 3;
        for powers in [[5u32, 4, 0], [2, 2, 2], [4, 1, 3], [0, 0, 5]] {
            let g = move |x: &[f64]| {
                x.iter()
                    .zip(powers)
                    .map(|(v, p)| v.powi(p as i32))
                    .product()
            };
            let e = tensor_expectation(&cpu, 3, na, Func::Closure(&g)).unwrap();
            let exact: f64 = powers.iter().map(|&p| moment(p)).product();
            assert!(
                (e.estimate - exact).abs() < 1e-12,
                "{powers:?}: {}",
                e.estimate
            );
            assert_eq!(e.points, 27);
        }
        // Degree 6 = 2 na is not integrated exactly (15 vs 9).
        let g = |x: &[f64]| x[0].powi(6);
        let e = tensor_expectation(&cpu, 1, na, Func::Closure(&g)).unwrap();
        assert!((e.estimate - 15.0).abs() > 1.0);
    }

    #[test]
    fn tensor_sum_of_squares_is_n() {
        let cpu = CpuBackend::new();
        for dim in [1, 4, 6] {
            let f = builtin(SUM_OF_SQUARES, dim, &[], &[]).unwrap();
            let e = tensor_expectation(&cpu, dim, 4, Func::Builtin(f)).unwrap();
            assert!((e.estimate - dim as f64).abs() < 1e-12 * dim as f64);
        }
    }

    #[test]
    fn smolyak_is_exact_to_total_degree_2l_plus_1() {
        let dim = 30;
        let sq = |x: &[f64]| x.iter().map(|v| v * v).sum::<f64>();
        let r = smolyak_expectation(dim, 1, &sq).unwrap();
        assert!((r.estimate - 30.0).abs() < 1e-11, "{}", r.estimate);
        // Level 1 has 1 + 30 terms: the centre and one 2-point rule per axis.
        assert_eq!(SmolyakRule::new(dim, 1).unwrap().terms(), 31);
        let rule = SmolyakRule::new(dim, 2).unwrap();
        let cases: [(&Integrand<'_>, f64); 4] = [
            (&|x: &[f64]| x[0].powi(4), 3.0),
            (&|x: &[f64]| x[3] * x[3] * x[17] * x[17], 1.0),
            (&|x: &[f64]| x[3].powi(3) * x[5] * x[5] + 2.0 * x[9], 0.0),
            (&|x: &[f64]| 1.0 + x[29] * x[29], 2.0),
        ];
        for (g, want) in cases {
            assert!((rule.integrate(g) - want).abs() < 1e-10);
        }
        // The same as the tensor rule in low dimension at a high level for a
        // smooth integrand.
        let g = |x: &[f64]| (0.3 * x[0] - 0.2 * x[1] + 0.1 * x[2]).cos();
        let exact = (-0.5f64 * (0.09 + 0.04 + 0.01)).exp();
        let s = smolyak_expectation(3, 8, &g).unwrap().estimate;
        assert!((s - exact).abs() < 1e-9, "{s} vs {exact}");
    }

    #[test]
    fn smolyak_rejects_bad_sizes() {
        assert!(SmolyakRule::new(0, 2).is_err());
        assert!(SmolyakRule::new(30, 40).is_err());
    }
}
