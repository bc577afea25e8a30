//! (i) Static response of the cantilever to random loads (seed 001's example 1):
//! S samples of a Gaussian tip load P ~ N(mu_P, sigma_P^2) and, optionally,
//! independent lognormal moduli per element (mean E, coefficient of variation
//! V), solved K u = P e_tip per sample; output the mean, standard deviation and
//! quantiles of u at one DOF (the tip deflection by default).
//!
//! The beam is a model ([`Beam::model`]) and this problem one
//! [`ModelStatic`] on it ([`StaticProblem::model_static`]): the tip load is
//! the mean mu_P e_tip plus a rank-1 factor sigma_P e_tip, the moduli the
//! terms (E_e / E - 1) K_e of [`Beam::element_stiffness_terms`] with
//! E_e / E lognormal (sigma_ln^2 = ln(1 + V^2), mean 1). [`static_response`]
//! runs the one static procedure, [`static_response_on`]: the beam's K is
//! banded (semi-bandwidth 3), so [`StaticSolver::Auto`] takes one banded
//! Cholesky factor and the tip's adjoint for a deterministic modulus (O(n)
//! per sample), a banded assembly and Cholesky per sample (O(n)) for random
//! moduli. The draws are those of the beam since seed 001's tables: normal
//! 0 of the sample's stream for P, normals 1..=ne for the moduli.
//!
//! Closed forms (the cubic elements are exact for a tip load with elementwise
//! constant EI): u_tip = P sum_e c_e / E_e with c_e = int_e (L - x)^2 dx / I,
//! so `E[u_tip] = mu_P E[1/E] L^3 / (3 I)` and
//! E[u_tip^2] = (mu_P^2 + sigma_P^2) [E[1/E]^2 (L^3 / 3I)^2 + Var(1/E) sum_e c_e^2],
//! with E[1/E] = (1 + V^2) / E and Var(1/E) = V^2 (1 + V^2)^2 / E^2.
//!
//! Not done: single precision.

use crate::beam::Beam;
use crate::design::Design;
use crate::model::Model;
use crate::static_model::{
    static_response_on, ModelStatic, StaticBackend, StaticOptions, StaticSolver, Theta,
};
use gpuq_core::{Error, Result};
use gpuq_sparse::{Coo, Csr};
use serde::Serialize;

/// The relative residual a random-modulus sample is held to (what an
/// iterative solve of the beam stops at; its banded solves meet it).
pub const BEAM_TOL: f64 = 1e-8;

/// A random static problem of the beam.
#[derive(Clone, Debug, Serialize)]
pub struct StaticProblem {
    /// The beam (its `modulus` is the mean modulus).
    pub beam: Beam,
    /// Mean tip load mu_P.
    pub load_mean: f64,
    /// Standard deviation of the tip load sigma_P.
    pub load_std: f64,
    /// Coefficient of variation of the element moduli (`None` or 0:
    /// deterministic modulus).
    pub modulus_cov: Option<f64>,
    /// The DOF whose statistics are reported (the tip deflection by default).
    pub dof: usize,
    /// How the samples draw their normals.
    pub design: Design,
    /// How the samples are solved (the beam's default is the band).
    pub solver: StaticSolver,
}

impl StaticProblem {
    /// Whether the element moduli are random (V > 0).
    pub fn random_modulus(&self) -> bool {
        self.modulus_cov.unwrap_or(0.0) > 0.0
    }

    /// Checks the beam, the DOF, sigma_P >= 0 and V >= 0; errors name the field.
    pub fn validate(&self) -> Result<()> {
        self.beam.validate()?;
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        if self.dof >= self.beam.dofs() {
            return Err(Error::InvalidArgument(format!(
                "StaticProblem::dof {} is outside the beam's 0..{}",
                self.dof,
                self.beam.dofs()
            )));
        }
        if !self.load_mean.is_finite() || !non_negative(self.load_std) {
            return Err(Error::InvalidArgument(format!(
                "StaticProblem::load_mean must be finite and StaticProblem::load_std finite and >= 0, not {} and {}",
                self.load_mean, self.load_std
            )));
        }
        if let Some(v) = self.modulus_cov.filter(|&v| !non_negative(v)) {
            return Err(Error::InvalidArgument(format!(
                "StaticProblem::modulus_cov must be finite and >= 0, not {v}"
            )));
        }
        Ok(())
    }

    /// The beam as a model ([`Beam::model`]). O(ne).
    pub fn model(&self) -> Result<Model> {
        self.validate()?;
        self.beam.model()
    }

    /// This problem on `model` (the beam's, from [`StaticProblem::model`]):
    /// load mean mu_P e_tip, the rank-1 factor sigma_P e_tip (one draw even
    /// when sigma_P = 0), and with random moduli one term per element,
    /// (E_e / E - 1) K_e with E_e / E = exp(-sigma_ln^2 / 2 + sigma_ln z).
    /// O(ne).
    pub fn model_static<'a>(&self, model: &'a Model) -> Result<ModelStatic<'a>> {
        self.validate()?;
        let n = self.beam.dofs();
        let tip = self.beam.tip();
        let mut load_mean = vec![0.0; n];
        load_mean[tip] = self.load_mean;
        let mut factor = Coo::new(n, 1);
        if self.load_std != 0.0 {
            factor.push(tip, 0, self.load_std)?;
        }
        let terms = if self.random_modulus() {
            let v = self.modulus_cov.unwrap_or(0.0);
            let s2 = (1.0 + v * v).ln();
            let theta = Theta::Lognormal {
                mu: -0.5 * s2,
                sigma: s2.sqrt(),
                shift: -1.0,
            };
            self.beam
                .element_stiffness_terms()?
                .into_iter()
                .map(|k| (k, theta))
                .collect()
        } else {
            Vec::new()
        };
        Ok(ModelStatic {
            model,
            load_mean,
            load_std: None,
            load_factor: Some(Csr::from_coo(&factor)?),
            terms,
            outputs: vec![self.dof],
            design: self.design,
            tol: BEAM_TOL,
        })
    }

    /// Exact mean and standard deviation of the tip deflection (see the module
    /// notes). O(ne).
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
    /// Samples whose value is not finite (excluded from the statistics).
    pub failed: usize,
    /// The solver that ran.
    pub solver: StaticSolver,
    /// Wall time of the setup and the solves in seconds.
    pub time_s: f64,
    /// Whether every random-modulus sample met [`BEAM_TOL`].
    pub converged: bool,
    /// The finite sample values, sorted.
    pub values: Vec<f64>,
}

/// Solves `samples` random static problems of the beam on `backend` through
/// [`static_response_on`] and summarises `u[dof]`. Errors on invalid
/// parameters (naming the field) or a stiffness that is not positive
/// definite. Cost: that of [`static_response_on`] on the beam's model, O(n)
/// per sample with the band.
pub fn static_response<B: StaticBackend>(
    backend: &B,
    problem: &StaticProblem,
    samples: usize,
    seed: u64,
) -> Result<StaticResult> {
    let model = problem.model()?;
    let r = static_response_on(
        backend,
        &problem.model_static(&model)?,
        &StaticOptions {
            samples: samples as u64,
            seed,
            solver: problem.solver,
        },
    )?;
    let mut values = r.values.into_iter().next().unwrap_or_default();
    let qs = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99];
    let d = crate::stats::describe(&mut values, &qs);
    Ok(StaticResult {
        samples,
        mean: d.mean,
        std: d.std,
        quantiles: qs.iter().copied().zip(d.quantiles).collect(),
        failed: samples - d.count,
        solver: r.solver,
        time_s: r.factor_s + r.solve_s,
        converged: r.converged,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::static_model::Source;
    use gpuq_cpu::CpuBackend;
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
        // Each sample's value is P L^3 / (3 E I) with P drawn from its stream.
        let p = problem(10, None);
        let r = static_response(&CpuBackend::new(), &p, 3, 8).unwrap();
        for s in 0..3u64 {
            let z = NormalStream::<f64>::new(key_from_seed(8), s).next_normal();
            let exact = p.beam.tip_deflection(p.load_mean + p.load_std * z);
            assert!(
                r.values.iter().any(|x| (x / exact - 1.0).abs() < 1e-12),
                "{exact} not in {:?}",
                r.values
            );
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
        assert!(r.converged);
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
            assert_eq!(dense.solver, StaticSolver::Dense);
            for (a, b) in band.values.iter().zip(&dense.values) {
                assert!((a / b - 1.0).abs() < 1e-10, "{a} vs {b}");
            }
        }
    }

    /// The beam's statistics before its static response went through the
    /// model (the beam-only banded and dense kernels, seed 001's tables):
    /// (DOFs, V, design, solver, samples, seed, mean, std, the 7 quantiles).
    #[allow(clippy::type_complexity)]
    const BEFORE: &[(
        usize,
        Option<f64>,
        Design,
        StaticSolver,
        usize,
        u64,
        f64,
        f64,
        [f64; 7],
    )] = &[
        (
            32,
            None,
            Design::MonteCarlo,
            StaticSolver::Band,
            500,
            7,
            3.3446514173830283e-1,
            3.3650782416748036e-2,
            [
                2.5811776963330146e-1,
                2.814801781857612e-1,
                3.1234092084051623e-1,
                3.315700478419387e-1,
                3.5706377658574695e-1,
                3.938971669739302e-1,
                4.137499132200513e-1,
            ],
        ),
        (
            1024,
            Some(0.1),
            Design::MonteCarlo,
            StaticSolver::Band,
            200,
            11,
            3.350609162158541e-1,
            3.0134509966056582e-2,
            [
                2.687627767266869e-1,
                2.925559333660981e-1,
                3.1342888253729584e-1,
                3.3306831418291166e-1,
                3.554404989430209e-1,
                3.8355521640606227e-1,
                4.070793717760048e-1,
            ],
        ),
        (
            4096,
            None,
            Design::LatinHypercube,
            StaticSolver::Band,
            200,
            13,
            3.334413883439405e-1,
            3.3682104979326125e-2,
            [
                2.5888784172066465e-1,
                2.798240340289861e-1,
                3.110718820510534e-1,
                3.332909618364372e-1,
                3.5571508939796664e-1,
                3.8784565268941046e-1,
                4.1068572625736266e-1,
            ],
        ),
        (
            32,
            Some(0.1),
            Design::MonteCarlo,
            StaticSolver::Band,
            500,
            7,
            3.3814562876159276e-1,
            3.5891410090138284e-2,
            [
                2.5711829660978425e-1,
                2.800378604266246e-1,
                3.129863701038898e-1,
                3.363569359444244e-1,
                3.6299079794214756e-1,
                4.005134372730238e-1,
                4.2132330021155984e-1,
            ],
        ),
        (
            64,
            Some(0.2),
            Design::LatinHypercube,
            StaticSolver::Band,
            300,
            3,
            3.467290838862041e-1,
            3.774325079063929e-2,
            [
                2.5519673916893826e-1,
                2.878074769548723e-1,
                3.20968810650044e-1,
                3.471456109167078e-1,
                3.7136461351670164e-1,
                4.088612610762597e-1,
                4.320321081815316e-1,
            ],
        ),
        (
            16,
            None,
            Design::Sobol,
            StaticSolver::Band,
            256,
            5,
            3.333657581618311e-1,
            3.3412970564437997e-2,
            [
                2.5843443664170457e-1,
                2.787056042543484e-1,
                3.1096583001686645e-1,
                3.333541950534237e-1,
                3.5580316698163394e-1,
                3.872783590042727e-1,
                4.099990627407393e-1,
            ],
        ),
        (
            16,
            Some(0.3),
            Design::Sobol,
            StaticSolver::Dense,
            100,
            9,
            3.601502116529696e-1,
            6.313132438067737e-2,
            [
                2.4449978582706738e-1,
                2.72019188480150e-1,
                3.053369509014715e-1,
                3.610566994831127e-1,
                4.070582948303498e-1,
                4.49919419373175e-1,
                5.040597460574353e-1,
            ],
        ),
    ];

    /// Per sample its exact tip deflection P sum_e c_e / E_e (module notes)
    /// from the sample's draws, for the statistics the rounding of a solve
    /// is measured against.
    fn exact_tip_samples(p: &StaticProblem, samples: usize, seed: u64) -> Vec<f64> {
        let b = &p.beam;
        let v = p.modulus_cov.unwrap_or(0.0);
        let s2 = (1.0 + v * v).ln();
        let h = b.element_length();
        let c: Vec<f64> = (0..b.elements)
            .map(|e| {
                let (x0, x1) = (e as f64 * h, (e + 1) as f64 * h);
                ((b.length - x0).powi(3) - (b.length - x1).powi(3)) / (3.0 * b.inertia)
            })
            .collect();
        (0..samples as u64)
            .map(|s| {
                let mut src = Source::new(p.design, seed, s, samples as u64);
                let load = p.load_mean + p.load_std * src.next();
                let flexibility: f64 = if p.random_modulus() {
                    let mu_ln = b.modulus.ln() - 0.5 * s2;
                    c.iter()
                        .map(|ce| ce / (mu_ln + s2.sqrt() * src.next()).exp())
                        .sum()
                } else {
                    c.iter().sum::<f64>() / b.modulus
                };
                load * flexibility
            })
            .collect()
    }

    #[test]
    fn the_beam_through_the_model_keeps_its_statistics() {
        // The same samples: the statistics agree to 1e-10 relative, except
        // where the beam-only kernels' own values were less accurate than
        // that: with a random modulus on a long beam the tip deflection loses
        // about eps kappa(K) to the rounding of the assembled entries (1e-6
        // at 1024 DOFs, old and new alike), and the generic assembly
        // K0 + sum theta_e K_e rounds differently from the per-element one.
        // There they agree within 10 times the old values' largest distance
        // to the statistics of the exact per-sample deflections.
        let rel = |a: f64, b: f64| (a / b - 1.0).abs();
        let qs = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99];
        for &(dofs, cov, design, solver, samples, seed, mean, std, q) in BEFORE {
            let beam = Beam::unit(dofs).unwrap();
            let p = StaticProblem {
                dof: beam.tip(),
                beam,
                load_mean: 1.0,
                load_std: 0.1,
                modulus_cov: cov,
                design,
                solver,
            };
            let r = static_response(&CpuBackend::new(), &p, samples, seed).unwrap();
            let mut exact = exact_tip_samples(&p, samples, seed);
            let e = crate::stats::describe(&mut exact, &qs);
            let case = format!("{dofs} DOFs, V {cov:?}, {design:?}, {solver:?}");
            let mut triples = vec![(r.mean, mean, e.mean), (r.std, std, e.std)];
            triples.extend(
                r.quantiles
                    .iter()
                    .zip(q)
                    .zip(&e.quantiles)
                    .map(|(((_, got), want), exact)| (*got, want, *exact)),
            );
            let old_error = triples
                .iter()
                .map(|&(_, want, exact)| rel(want, exact))
                .fold(0.0, f64::max);
            let allowed = if p.random_modulus() {
                1e-10f64.max(10.0 * old_error)
            } else {
                1e-10
            };
            for (got, want, exact) in triples {
                assert!(
                    rel(got, want) <= allowed,
                    "{case}: {got:e} vs {want:e} (exact {exact:e}, allowed {allowed:e})"
                );
            }
        }
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut p = problem(8, None);
        p.dof = 8;
        let e = static_response(&CpuBackend::new(), &p, 10, 0).unwrap_err();
        assert!(e.to_string().contains("StaticProblem::dof"), "{e}");
        let mut p = problem(8, Some(-1.0));
        p.dof = 0;
        let e = static_response(&CpuBackend::new(), &p, 10, 0).unwrap_err();
        assert!(e.to_string().contains("StaticProblem::modulus_cov"), "{e}");
        let e = static_response(&CpuBackend::new(), &problem(8, None), 0, 0).unwrap_err();
        assert!(e.to_string().contains("StaticOptions::samples"), "{e}");
    }
}
