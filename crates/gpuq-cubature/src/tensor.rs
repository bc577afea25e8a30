//! Tensor-product Gauss rules: Gauss-Legendre on an interval and Gauss-Hermite
//! for the standard normal, N_a points per axis in N dimensions (N_a^N points;
//! seed 001, section 3.5). Point i's coordinates are the base-N_a digits of i
//! (digit k, least significant first, picks axis k's node). The sum is
//! deterministic: chunks of `chunk_points(total)` points (256 for large grids,
//! fewer for small ones, so that a GPU has threads enough) summed in index
//! order by the backend, the chunk sums of each group of `TENSOR_GROUP` chunks added
//! in chunk order (on the device for CUDA), then the group sums added in group
//! order on the host, so the result does not depend on the thread count, and
//! the backends agree.
//!
//! 1D nodes and weights: Newton's method on the three-term recurrence in f64
//! (Legendre from the Chebyshev-like guesses cos(pi (i - 1/4) / (N_a + 1/2));
//! Hermite on the orthonormal physicists' recurrence from the classical
//! asymptotic guesses, then x -> sqrt(2) x, w -> w / sqrt(pi)).

use crate::func::Func;
use crate::kernels::CubatureKernels;
use crate::outcome::{Clock, Options, Outcome, Status, Timings};
use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::MAX_DIM;
use gpuq_kernels::cubature::tensor::tensor_point;
use std::time::Instant;

/// Which 1D rule a tensor rule is built from.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum TensorKind {
    /// Gauss-Legendre on [lo, hi] (weights sum to hi - lo).
    Legendre {
        /// Lower end of every axis.
        lo: f64,
        /// Upper end of every axis.
        hi: f64,
    },
    /// Probabilists' Gauss-Hermite: E[f(Z)], Z ~ N(0, 1) (weights sum to 1).
    Hermite,
}

/// A tensor-product rule: the same 1D rule on each of `dim` axes.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRule {
    /// Number of axes N.
    pub dim: usize,
    /// The 1D nodes (N_a of them, ascending).
    pub nodes: Vec<f64>,
    /// The 1D weights.
    pub weights: Vec<f64>,
    /// Which 1D rule.
    pub kind: TensorKind,
}

/// Most points per axis (the 1D Newton iterations are checked up to here).
pub const MAX_POINTS_PER_AXIS: usize = 64;

fn check(dim: usize, na: usize) -> Result<()> {
    if dim == 0 || dim > MAX_DIM || na == 0 || na > MAX_POINTS_PER_AXIS {
        return Err(Error::InvalidArgument(format!(
            "tensor rules take 1 to {MAX_DIM} axes and 1 to {MAX_POINTS_PER_AXIS} points per axis, not {dim} and {na}"
        )));
    }
    if (na as f64).powi(dim as i32) > u64::MAX as f64 / 2.0 {
        return Err(Error::InvalidArgument(format!(
            "{na}^{dim} points overflow a 64-bit index"
        )));
    }
    Ok(())
}

/// The `na`-point Gauss-Legendre product rule on [lo, hi]^dim (exact for
/// polynomials of degree 2 na - 1 in each variable). Cost: O(na^2) flops.
pub fn gauss_legendre(dim: usize, na: usize, lo: f64, hi: f64) -> Result<TensorRule> {
    check(dim, na)?;
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return Err(Error::InvalidArgument(format!(
            "gauss-legendre needs a finite interval lo < hi, not [{lo}, {hi}]"
        )));
    }
    let (x, w) = legendre_1d(na);
    let (mid, half) = (0.5 * (lo + hi), 0.5 * (hi - lo));
    Ok(TensorRule {
        dim,
        nodes: x.iter().map(|t| mid + half * t).collect(),
        weights: w.iter().map(|v| half * v).collect(),
        kind: TensorKind::Legendre { lo, hi },
    })
}

/// The `na`-point probabilists' Gauss-Hermite product rule in `dim` dimensions:
/// sum w_i f(x_i) approximates E[f(q)], q ~ N(0, I) (exact for polynomials of
/// degree 2 na - 1 in each variable). Cost: O(na^2) flops.
pub fn gauss_hermite(dim: usize, na: usize) -> Result<TensorRule> {
    check(dim, na)?;
    let (x, w) = hermite_1d(na);
    Ok(TensorRule {
        dim,
        nodes: x,
        weights: w,
        kind: TensorKind::Hermite,
    })
}

/// Gauss-Legendre nodes (ascending) and weights on [-1, 1].
pub fn legendre_1d(na: usize) -> (Vec<f64>, Vec<f64>) {
    let mut x = vec![0.0; na];
    let mut w = vec![0.0; na];
    let nf = na as f64;
    for i in 0..na.div_ceil(2) {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (nf + 0.5)).cos();
        let mut pp = 0.0;
        for _ in 0..100 {
            let (mut p1, mut p2) = (1.0, 0.0);
            for j in 1..=na {
                let p3 = p2;
                p2 = p1;
                p1 = ((2 * j - 1) as f64 * z * p2 - (j - 1) as f64 * p3) / j as f64;
            }
            pp = nf * (z * p1 - p2) / (z * z - 1.0);
            let dz = p1 / pp;
            z -= dz;
            if dz.abs() <= 1e-16 {
                break;
            }
        }
        let wt = 2.0 / ((1.0 - z * z) * pp * pp);
        x[i] = -z;
        x[na - 1 - i] = z;
        w[i] = wt;
        w[na - 1 - i] = wt;
    }
    if na % 2 == 1 {
        x[na / 2] = 0.0;
    }
    (x, w)
}

/// Probabilists' Gauss-Hermite nodes (ascending) and weights (summing to 1).
pub fn hermite_1d(na: usize) -> (Vec<f64>, Vec<f64>) {
    let nf = na as f64;
    let mut xs = vec![0.0; na];
    let mut ws = vec![0.0; na];
    let pim4 = std::f64::consts::PI.powf(-0.25);
    let m = na.div_ceil(2);
    let mut z = 0.0;
    for i in 0..m {
        z = match i {
            0 => (2.0 * nf + 1.0).sqrt() - 1.85575 * (2.0 * nf + 1.0).powf(-1.0 / 6.0),
            1 => z - 1.14 * nf.powf(0.426) / z,
            2 => 1.86 * z - 0.86 * xs[0],
            3 => 1.91 * z - 0.91 * xs[1],
            _ => 2.0 * z - xs[i - 2],
        };
        let mut pp = 0.0;
        for _ in 0..100 {
            let (mut p1, mut p2) = (pim4, 0.0);
            for j in 1..=na {
                let p3 = p2;
                p2 = p1;
                p1 = z * (2.0 / j as f64).sqrt() * p2 - ((j - 1) as f64 / j as f64).sqrt() * p3;
            }
            pp = (2.0 * nf).sqrt() * p2;
            let dz = p1 / pp;
            z -= dz;
            if dz.abs() <= 1e-15 * z.abs().max(1.0) {
                break;
            }
        }
        xs[i] = z;
        ws[i] = 2.0 / (pp * pp);
    }
    // xs[0..m] descend from the largest root; mirror into ascending order.
    let mut x = vec![0.0; na];
    let mut w = vec![0.0; na];
    let s2 = std::f64::consts::SQRT_2;
    let spi = std::f64::consts::PI.sqrt();
    for i in 0..m {
        x[na - 1 - i] = s2 * xs[i];
        x[i] = -s2 * xs[i];
        w[na - 1 - i] = ws[i] / spi;
        w[i] = ws[i] / spi;
    }
    if na % 2 == 1 {
        x[na / 2] = 0.0;
    }
    (x, w)
}

impl TensorRule {
    /// Points N_a^N.
    pub fn points(&self) -> u64 {
        (self.nodes.len() as u64).pow(self.dim as u32)
    }

    /// Writes point `idx` into `x` (length N) and returns its weight.
    pub fn point(&self, idx: u64, x: &mut [f64]) -> f64 {
        tensor_point(idx, &self.nodes, &self.weights, x)
    }

    /// sum_i w_i f(x_i) on `backend`. Deterministic (see the module docs).
    /// Errors with [`Error::IntegrandNotFinite`] at a NaN or infinite value.
    /// Cost: N_a^N evaluations.
    pub fn integrate<B: CubatureKernels>(&self, backend: &B, f: Func<'_>) -> Result<f64> {
        f.check_dim("tensor rule", self.dim)?;
        let partials =
            backend.cub_tensor(f, self.dim, &self.nodes, &self.weights, self.points())?;
        Ok(partials.iter().sum())
    }

    /// [`TensorRule::integrate`] with a report (evaluations, timing; error 0:
    /// a tensor rule has no error estimate).
    pub fn run<B: CubatureKernels>(&self, backend: &B, f: Func<'_>) -> Result<Outcome> {
        let t = Instant::now();
        let estimate = self.integrate(backend, f)?;
        let s = t.elapsed().as_secs_f64();
        Ok(Outcome {
            estimate,
            error: 0.0,
            evaluations: self.points(),
            boxes: 1,
            rounds: 1,
            status: Status::Converged,
            timings: Timings {
                phase1_s: s,
                phase2_s: 0.0,
                total_s: s,
                evaluate_s: s,
            },
            method: match self.kind {
                TensorKind::Legendre { .. } => crate::Method::GaussLegendre(self.nodes.len()),
                TensorKind::Hermite => crate::Method::GaussHermite(self.nodes.len()),
            },
        })
    }
}

/// Product Gauss-Legendre of rising order on [lo, hi]^dim: N_a = 2, 3, ...
/// points per axis until the error estimate of two successive orders is
/// within the target (`opts.target` of the newer estimate). The estimate is
/// the last order's; its error estimate is twice the tail of the differences
/// d_k = |I_k - I_(k-1)| taken as geometric with ratio r = d_k / d_(k-1):
/// 2 d_k / (1 - r) (infinite when r >= 1). The tail is the error itself for
/// an analytic integrand (d_k ~ q^k) and p / (p + 1) of it for a singular one
/// (algebraic decay: e_k ~ k^-p, d_k ~ p e_k / k, r ~ 1 - (p + 1) / k), hence
/// the factor 2; a bare difference there claims convergence early (f4 at n = 6:
/// a true error of 6e-5 at a difference of 8e-6).
/// Stops with [`Status::EvaluationCap`] when the next order would pass
/// `opts.max_evals` (by default the backend's cap, [`Options::resolved`]) or
/// [`MAX_POINTS_PER_AXIS`], with [`Status::TimeLimit`] when the time limit has
/// passed before an order. Cost: the sum of N_a^dim over the orders tried
/// (dominated by the last two).
pub fn gauss_legendre_auto<B: CubatureKernels>(
    backend: &B,
    f: Func<'_>,
    dim: usize,
    lo: f64,
    hi: f64,
    opts: &Options,
) -> Result<Outcome> {
    opts.check()?;
    let opts = &opts.resolved(backend, f);
    let clock = Clock::start(opts);
    let t = Instant::now();
    let (mut evaluations, mut rounds, mut agreed) = (0u64, 0u64, 0u32);
    let (mut estimate, mut error) = (f64::NAN, f64::INFINITY);
    let mut last_diff: Option<f64> = None;
    let mut status = Status::EvaluationCap;
    for na in 2..=MAX_POINTS_PER_AXIS {
        let points = (na as u64)
            .checked_pow(dim as u32)
            .filter(|p| evaluations.saturating_add(*p) <= opts.max_evals);
        let Some(points) = points else {
            break;
        };
        // The first order always runs: a stop has an estimate.
        if rounds > 0 {
            if let Some(stop) = clock.stop(backend)? {
                status = stop;
                break;
            }
        }
        let next = gauss_legendre(dim, na, lo, hi)?.integrate(backend, f)?;
        evaluations += points;
        rounds += 1;
        if rounds > 1 {
            let diff = (next - estimate).abs();
            error = match last_diff {
                Some(prev) => geometric_tail(diff, prev),
                None => f64::INFINITY,
            };
            last_diff = Some(diff);
            agreed = if error <= opts.target(next) {
                agreed + 1
            } else {
                0
            };
        }
        estimate = next;
        if agreed >= 2 {
            status = Status::Converged;
            break;
        }
    }
    let s = t.elapsed().as_secs_f64();
    Ok(Outcome {
        estimate,
        error,
        evaluations,
        boxes: 1,
        rounds,
        status,
        timings: Timings {
            phase1_s: s,
            phase2_s: 0.0,
            total_s: s,
            evaluate_s: s,
        },
        method: crate::Method::GaussLegendreAuto,
    })
}

/// 2 d / (1 - r), r = d / prev: twice the sum of a geometric series of
/// differences from d on (0 when d is 0; infinite when they do not shrink).
fn geometric_tail(d: f64, prev: f64) -> f64 {
    if d == 0.0 {
        return 0.0;
    }
    let r = d / prev;
    if r < 1.0 {
        2.0 * d / (1.0 - r)
    } else {
        f64::INFINITY
    }
}
