//! (i) Static response of the cantilever to random loads (seed 001's example 1):
//! S samples of a Gaussian tip load P ~ N(mu_P, sigma_P^2) and, optionally,
//! independent lognormal moduli per element (mean E, coefficient of variation
//! V), solved K u = P e_tip per sample; output the mean, standard deviation and
//! quantiles of u at one DOF (the tip deflection by default).
//!
//! With a deterministic modulus K is factored once (banded Cholesky, 16 n
//! flops) and every sample only solves (14 n flops); with a random modulus each
//! sample assembles and factors its own banded K ("batched banded Cholesky":
//! one sample per thread on the device, its band strided across the batch).
//! Sample draws come from the sample's ChaCha8 stream (normal 0 for P,
//! normals 1..=ne for the moduli), so the CPU and the GPU solve the same samples.
//!
//! Closed forms (the cubic elements are exact for a tip load with elementwise
//! constant EI): u_tip = P sum_e c_e / E_e with c_e = int_e (L - x)^2 dx / I,
//! so `E[u_tip] = mu_P E[1/E] L^3 / (3 I)` and
//! E[u_tip^2] = (mu_P^2 + sigma_P^2) [E[1/E]^2 (L^3 / 3I)^2 + Var(1/E) sum_e c_e^2],
//! with E[1/E] = (1 + V^2) / E and Var(1/E) = V^2 (1 + V^2)^2 / E^2.
//!
//! The seed's dense path ([`StaticSolver::Dense`]: a dense K per sample and LU
//! with partial pivoting, 2 n^3 / 3 flops per sample, one sample per thread on
//! the device) is available for comparison; it solves the same samples.
//!
//! Not done: single precision.

use crate::beam::{Band, Beam};
use crate::design::Design;
use gpuq_core::{Backend, Error, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::uq::beam::{cholesky, static_sample_designed, StaticSampling};
use gpuq_kernels::uq::dense::{static_dense_designed, DenseStore};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// A random static problem.
#[derive(Clone, Debug, Serialize)]
pub struct StaticProblem {
    /// The beam (its `modulus` is the mean modulus).
    pub beam: Beam,
    /// Mean tip load mu_P.
    pub load_mean: f64,
    /// Standard deviation of the tip load sigma_P.
    pub load_std: f64,
    /// Coefficient of variation of the element moduli (`None` or 0:
    /// deterministic modulus, one shared factor).
    pub modulus_cov: Option<f64>,
    /// The DOF whose statistics are reported (the tip deflection by default).
    pub dof: usize,
    /// How the samples draw their normals.
    pub design: Design,
    /// Banded Cholesky (default) or the seed's dense LU.
    pub solver: StaticSolver,
}

/// How each static sample is solved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum StaticSolver {
    /// Banded Cholesky (one shared factor when K is deterministic): O(n).
    #[default]
    Band,
    /// The seed's path: a dense K per sample and LU with partial pivoting,
    /// O(n^3) per sample and n^2 values of storage (small n only).
    Dense,
}

impl StaticProblem {
    /// The per-sample parameters (lognormal: sigma_ln^2 = ln(1 + V^2),
    /// mu_ln = ln E - sigma_ln^2 / 2, so that `E[E_e] = E`).
    pub fn sampling(&self) -> StaticSampling<f64> {
        let v = self.modulus_cov.unwrap_or(0.0);
        let s2 = (1.0 + v * v).ln();
        StaticSampling {
            ne: self.beam.elements,
            h: self.beam.element_length(),
            inertia: self.beam.inertia,
            load_mean: self.load_mean,
            load_std: self.load_std,
            random_modulus: v > 0.0,
            mu_ln: self.beam.modulus.ln() - 0.5 * s2,
            sigma_ln: s2.sqrt(),
        }
    }

    /// Checks the beam, the DOF, sigma_P >= 0 and V >= 0.
    pub fn validate(&self) -> Result<()> {
        self.beam.validate()?;
        let v = self.modulus_cov.unwrap_or(0.0);
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        if self.dof >= self.beam.dofs()
            || !non_negative(self.load_std)
            || !self.load_mean.is_finite()
            || !non_negative(v)
        {
            return Err(Error::InvalidArgument(
                "static: dof must be below 2 ne, load std and modulus cov non-negative".into(),
            ));
        }
        Ok(())
    }

    /// Exact mean and standard deviation of the tip deflection (see the module
    /// notes).
    pub fn tip_moments(&self) -> (f64, f64) {
        let b = &self.beam;
        let v = self.modulus_cov.unwrap_or(0.0);
        let inv_mean = (1.0 + v * v) / b.modulus;
        let inv_var = v * v * (1.0 + v * v).powi(2) / (b.modulus * b.modulus);
        let h = b.element_length();
        let (mut sum_c, mut sum_c2) = (0.0, 0.0);
        for e in 0..b.elements {
            let (x0, x1) = (e as f64 * h, (e + 1) as f64 * h);
            let c = ((b.length - x0).powi(3) - (b.length - x1).powi(3)) / (3.0 * b.inertia);
            sum_c += c;
            sum_c2 += c * c;
        }
        let mean = self.load_mean * inv_mean * sum_c;
        let second = (self.load_mean.powi(2) + self.load_std.powi(2))
            * (inv_mean * inv_mean * sum_c * sum_c + inv_var * sum_c2);
        (mean, (second - mean * mean).max(0.0).sqrt())
    }
}

/// Statistics of the chosen DOF over the samples.
#[derive(Clone, Debug, Serialize)]
pub struct StaticResult {
    /// Number of samples.
    pub samples: usize,
    /// Sample mean.
    pub mean: f64,
    /// Sample standard deviation (unbiased variance).
    pub std: f64,
    /// (probability, quantile) at 1, 5, 25, 50, 75, 95 and 99 % (order statistics,
    /// linear interpolation).
    pub quantiles: Vec<(f64, f64)>,
    /// Samples whose K was not positive definite (excluded from the statistics).
    pub failed: usize,
    /// Wall time of the backend's solves in seconds.
    pub time_s: f64,
    /// The finite sample values, sorted.
    pub values: Vec<f64>,
}

/// The per-sample solves on a backend. The default body is a sequential host
/// loop; the CPU backend overrides it with Rayon (the same values), the CUDA
/// backend with one thread per sample.
pub trait StaticKernels: Backend {
    /// `u[dof]` of samples 0..samples under `seed` with the normals of `design`
    /// ([`Design::code`]); `shared` is the factor of the
    /// deterministic K (band rows, 4 n values) and is ignored with a random
    /// modulus. NaN marks a sample whose K is not positive definite.
    fn static_samples(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
        shared: &Band,
    ) -> Result<Vec<f64>> {
        Ok((0..samples)
            .map(|s| host_sample(p, (seed, design), (s, samples), dof, shared))
            .collect())
    }

    /// The seed's dense path: u\[dof\] of samples 0..samples, each with its own
    /// dense K solved by LU with partial pivoting (the same draws as
    /// [`StaticKernels::static_samples`]).
    fn static_samples_dense(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
    ) -> Result<Vec<f64>> {
        Ok((0..samples)
            .map(|s| host_dense(p, (seed, design), (s, samples), dof))
            .collect())
    }
}

impl StaticKernels for CpuBackend {
    fn static_samples(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
        shared: &Band,
    ) -> Result<Vec<f64>> {
        Ok((0..samples)
            .into_par_iter()
            .map(|s| host_sample(p, (seed, design), (s, samples), dof, shared))
            .collect())
    }

    fn static_samples_dense(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
    ) -> Result<Vec<f64>> {
        Ok((0..samples)
            .into_par_iter()
            .map(|s| host_dense(p, (seed, design), (s, samples), dof))
            .collect())
    }
}

/// A dense matrix and right-hand side on the host.
struct DenseWork {
    n: usize,
    a: Vec<f64>,
    rhs: Vec<f64>,
}

impl DenseStore<f64> for DenseWork {
    fn a(&self, i: usize, j: usize) -> f64 {
        self.a[i * self.n + j]
    }
    fn set_a(&mut self, i: usize, j: usize, v: f64) {
        self.a[i * self.n + j] = v;
    }
    fn rhs(&self, i: usize) -> f64 {
        self.rhs[i]
    }
    fn set_rhs(&mut self, i: usize, v: f64) {
        self.rhs[i] = v;
    }
}

/// One dense-path sample on the host.
fn host_dense(
    p: &StaticSampling<f64>,
    (seed, design): (u64, u32),
    (s, samples): (usize, usize),
    dof: usize,
) -> f64 {
    let n = 2 * p.ne;
    let mut work = DenseWork {
        n,
        a: vec![0.0; n * n],
        rhs: vec![0.0; n],
    };
    static_dense_designed(p, &mut work, dof, design, (seed, s as u64, samples as u64))
}

/// One sample on the host (its own band when the modulus is random).
fn host_sample(
    p: &StaticSampling<f64>,
    (seed, design): (u64, u32),
    (s, samples): (usize, usize),
    dof: usize,
    shared: &Band,
) -> f64 {
    let mut work = Band::zeros(2 * p.ne);
    static_sample_designed(
        p,
        &mut work,
        shared,
        dof,
        design,
        seed,
        s as u64,
        samples as u64,
    )
}

#[cfg(feature = "cuda")]
impl StaticKernels for gpuq_cuda::CudaBackend {
    fn static_samples(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
        shared: &Band,
    ) -> Result<Vec<f64>> {
        self.uq_beam_static(p, (seed, design), samples, dof, &shared.band)
    }

    fn static_samples_dense(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
    ) -> Result<Vec<f64>> {
        self.uq_beam_static_dense(p, (seed, design), samples, dof)
    }
}

/// Solves `samples` random static problems on `backend` and summarises `u[dof]`.
/// Errors on invalid parameters or when the deterministic K is not positive
/// definite.
pub fn static_response<B: StaticKernels>(
    backend: &B,
    problem: &StaticProblem,
    samples: usize,
    seed: u64,
) -> Result<StaticResult> {
    problem.validate()?;
    let p = problem.sampling();
    let mut shared = problem.beam.stiffness();
    if !p.random_modulus && !cholesky(&mut shared, problem.beam.dofs()) {
        return Err(Error::InvalidArgument(
            "static: the stiffness matrix is not positive definite".into(),
        ));
    }
    let start = Instant::now();
    let draws = (seed, problem.design.code());
    let values = match problem.solver {
        StaticSolver::Band => backend.static_samples(&p, draws, samples, problem.dof, &shared)?,
        StaticSolver::Dense => backend.static_samples_dense(&p, draws, samples, problem.dof)?,
    };
    let time_s = start.elapsed().as_secs_f64();
    Ok(summarise(values, time_s))
}

/// Mean, standard deviation and quantiles of the finite values.
fn summarise(values: Vec<f64>, time_s: f64) -> StaticResult {
    let total = values.len();
    let mut v = values;
    let qs = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99];
    let d = crate::stats::describe(&mut v, &qs);
    StaticResult {
        samples: total,
        mean: d.mean,
        std: d.std,
        quantiles: qs.iter().copied().zip(d.quantiles).collect(),
        failed: total - d.count,
        time_s,
        values: v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_kernels::chacha::key_from_seed;
    use gpuq_kernels::uq::gauss::NormalStream;

    fn problem(dofs: usize, cov: Option<f64>) -> StaticProblem {
        let mut beam = Beam::unit(dofs).unwrap();
        beam.length = 2.0;
        beam.modulus = 200e9;
        beam.inertia = 4e-6;
        StaticProblem {
            dof: beam.tip(),
            beam,
            load_mean: 1000.0,
            load_std: 150.0,
            modulus_cov: cov,
            design: Design::MonteCarlo,
            solver: StaticSolver::Band,
        }
    }

    #[test]
    fn deterministic_modulus_gives_the_exact_tip_statistics() {
        let p = problem(16, None);
        let samples = 4000;
        let r = static_response(&CpuBackend::new(), &p, samples, 3).unwrap();
        let (mean, std) = p.tip_moments();
        assert!((mean / p.beam.tip_deflection(p.load_mean) - 1.0).abs() < 1e-14);
        // Tip deflection is P L^3 / 3EI exactly for every sample: the sample
        // moments are those of the loads, within Monte Carlo error.
        let se = std / (samples as f64).sqrt();
        assert!((r.mean - mean).abs() < 4.0 * se, "{} vs {mean}", r.mean);
        assert!((r.std / std - 1.0).abs() < 4.0 * (0.5 / samples as f64).sqrt());
        assert_eq!(r.failed, 0);
        let median = r.quantiles[3].1;
        assert!((median - mean).abs() < 4.0 * 1.25 * se);
    }

    #[test]
    fn each_sample_is_exact() {
        // One sample's value equals P L^3 / (3 E I) with P drawn from its stream.
        let p = problem(10, None);
        let mut shared = p.beam.stiffness();
        assert!(cholesky(&mut shared, p.beam.dofs()));
        let v = CpuBackend::new()
            .static_samples(&p.sampling(), (8, 0), 3, p.dof, &shared)
            .unwrap();
        for (s, x) in v.iter().enumerate() {
            let z = NormalStream::<f64>::new(key_from_seed(8), s as u64).next_normal();
            let exact = p.beam.tip_deflection(p.load_mean + p.load_std * z);
            assert!((x / exact - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn lognormal_modulus_matches_the_closed_form() {
        let p = problem(8, Some(0.2));
        let samples = 4000;
        let r = static_response(&CpuBackend::new(), &p, samples, 11).unwrap();
        let (mean, std) = p.tip_moments();
        // E[1/E] = (1 + V^2) / E: 4 % above the deterministic deflection.
        assert!((mean / p.beam.tip_deflection(p.load_mean) - 1.04).abs() < 1e-12);
        let se = std / (samples as f64).sqrt();
        assert!((r.mean - mean).abs() < 4.0 * se, "{} vs {mean}", r.mean);
        assert!((r.std / std - 1.0).abs() < 0.1, "{} vs {std}", r.std);
        // The host fallback (default body) gives the same values as Rayon.
        let seq = static_response(&Sequential, &p, 50, 11).unwrap();
        let par = static_response(&CpuBackend::new(), &p, 50, 11).unwrap();
        assert_eq!(seq.mean, par.mean);
    }

    #[test]
    fn stratified_designs_reduce_the_error_of_the_mean() {
        // Deterministic modulus: the tip deflection is linear in the load, so the
        // sample mean's error is that of the load draws: O(sigma / sqrt(S)) for
        // Monte Carlo, far smaller for one-dimensional Latin hypercube or
        // scrambled Sobol points.
        let samples = 1024;
        let mut p = problem(8, None);
        let (mean, std) = p.tip_moments();
        let se = std / (samples as f64).sqrt();
        for design in [Design::LatinHypercube, Design::Sobol] {
            p.design = design;
            let r = static_response(&CpuBackend::new(), &p, samples, 21).unwrap();
            assert!(
                (r.mean - mean).abs() < 0.05 * se,
                "{design:?}: {} vs {mean}",
                r.mean
            );
            assert!((r.std / std - 1.0).abs() < 0.02, "{design:?}: {}", r.std);
        }
        // With random moduli the Latin hypercube stays unbiased.
        let mut p = problem(6, Some(0.2));
        p.design = Design::LatinHypercube;
        let (mean, std) = p.tip_moments();
        let r = static_response(&CpuBackend::new(), &p, 2000, 4).unwrap();
        assert!((r.mean - mean).abs() < 4.0 * std / 2000f64.sqrt());
    }

    #[test]
    fn dense_lu_path_solves_the_same_samples() {
        for (cov, design) in [
            (None, Design::MonteCarlo),
            (Some(0.3), Design::LatinHypercube),
        ] {
            let mut p = problem(10, cov);
            p.design = design;
            let band = static_response(&CpuBackend::new(), &p, 64, 5).unwrap();
            p.solver = StaticSolver::Dense;
            let dense = static_response(&CpuBackend::new(), &p, 64, 5).unwrap();
            let seq = static_response(&Sequential, &p, 64, 5).unwrap();
            assert_eq!(seq.values, dense.values);
            for (a, b) in band.values.iter().zip(&dense.values) {
                assert!((a / b - 1.0).abs() < 1e-10, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut p = problem(8, None);
        p.dof = 8;
        assert!(static_response(&CpuBackend::new(), &p, 10, 0).is_err());
        let mut p = problem(8, Some(-1.0));
        p.dof = 0;
        assert!(static_response(&CpuBackend::new(), &p, 10, 0).is_err());
    }

    /// A backend that keeps the default (sequential host) bodies.
    #[derive(Clone)]
    struct Sequential;

    crate::test_backend::forward_backend!(Sequential);

    impl StaticKernels for Sequential {}
}
