//! Two UQ procedures, each checked against closed forms:
//!
//! * the static response of a user's model: a chain of 40 springs (stiffness
//!   k = 2) fixed at the wall (DOF 0 eliminated), with independent Gaussian
//!   loads of mean 1 and standard deviation 0.2 on every free node. The
//!   displacement of node i is sum_j f_j min(i, j) / k, so the tip's mean is
//!   sum_j j / k and its standard deviation 0.2 sqrt(sum_j j^2) / k;
//! * the static response of the cantilever beam to a random tip load and
//!   lognormal element moduli (10% coefficient of variation), on the backend
//!   chosen at run time, against the exact tip moments
//!   ([`gpuq::uq::StaticProblem::tip_moments`]).
//!
//! ```text
//! cargo run --release --example uq
//! ```
//!
//! Both run the one static procedure, `gpuq::uq::static_response_on` (the
//! beam as a model). `GPUQ_BACKEND=cpu|cuda|auto` (default `auto`) picks the
//! backend. Exits non-zero when a sample mean is more than 5 standard errors
//! from the exact mean or a sample standard deviation more than 5% from the
//! exact one.

use gpuq::prelude::*;
use gpuq::uq::{static_response_on, ModelStaticResult, StaticOptions, StaticResult};
use std::error::Error as StdError;
use std::process::ExitCode;

/// The beam's Monte Carlo on the chosen backend.
struct BeamStatic<'a>(&'a StaticProblem, usize);

impl OnBackend for BeamStatic<'_> {
    type Output = Result<StaticResult>;

    fn run<B: FullBackend>(self, backend: &B) -> Result<StaticResult> {
        static_response(backend, self.0, self.1, 7)
    }
}

/// A model's static response on the chosen backend.
struct ModelRun<'a>(&'a ModelStatic<'a>, StaticOptions);

impl OnBackend for ModelRun<'_> {
    type Output = Result<ModelStaticResult>;

    fn run<B: FullBackend>(self, backend: &B) -> Result<ModelStaticResult> {
        static_response_on(backend, self.0, &self.1)
    }
}

/// Errors unless (mean, std) from `samples` samples match (exact mean, exact std).
fn check(what: &str, samples: usize, mean: f64, std: f64, exact: (f64, f64)) -> Result<()> {
    let (exact_mean, exact_std) = exact;
    let standard_error = exact_std / (samples as f64).sqrt();
    let mean_off = (mean - exact_mean).abs() / standard_error;
    let std_off = (std - exact_std).abs() / exact_std;
    println!(
        "{what}: mean {mean:.6e} (exact {exact_mean:.6e}, {mean_off:.2} standard errors off), \
         std {std:.6e} (exact {exact_std:.6e}, {:.2}% off)",
        100.0 * std_off
    );
    if mean_off > 5.0 || std_off > 0.05 {
        return Err(Error::InvalidArgument(format!(
            "{what}: the sample moments miss the exact ones"
        )));
    }
    Ok(())
}

/// Runs the example; prints the error and exits with status 1 on failure.
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), Box<dyn StdError>> {
    let choice: BackendChoice =
        std::env::var("GPUQ_BACKEND").map_or(Ok(BackendChoice::Auto), |s| s.parse())?;
    let backend = choose(choice)?;
    // A user's model: nodes 0..=40 joined by springs of stiffness k, node 0
    // at the wall.
    let (nodes, k) = (41, 2.0);
    let mut coo = Coo::new(nodes, nodes);
    for i in 1..nodes {
        coo.push(i - 1, i - 1, k)?;
        coo.push(i, i, k)?;
        coo.push(i - 1, i, -k)?;
        coo.push(i, i - 1, -k)?;
    }
    let model = Model::new(Csr::from_coo(&coo)?, None, Damping::None, &[0])?;
    let free = model.dofs();
    let tip = nodes - 1;
    let samples = 20_000;
    let problem = ModelStatic {
        model: &model,
        load_mean: vec![1.0; free],
        load_std: Some(vec![0.2; free]),
        load_factor: None,
        terms: Vec::new(),
        outputs: vec![tip / 2, tip],
        design: Default::default(),
        tol: 1e-10,
    };
    let result = backend.run(ModelRun(
        &problem,
        StaticOptions {
            samples,
            seed: 11,
            solver: Default::default(),
        },
    ))?;
    let out = &result.outputs[1];
    let sum_j: f64 = (1..nodes).map(|j| j as f64).sum();
    let sum_j2: f64 = (1..nodes).map(|j| (j * j) as f64).sum();
    let exact = (sum_j / k, 0.2 * sum_j2.sqrt() / k);
    println!(
        "spring chain on {}: {free} free DOFs, {samples} samples by {}, setup {:.3} s, sampling {:.3} s",
        backend.name(),
        result.solver.name(),
        result.factor_s,
        result.solve_s
    );
    // The library's own exact moments (from the outputs' adjoints) agree with
    // the closed form.
    let (lib_mean, lib_std) = (
        out.exact_mean.unwrap_or(f64::NAN),
        out.exact_std.unwrap_or(f64::NAN),
    );
    if (lib_mean - exact.0).abs() > 1e-9 * exact.0 || (lib_std - exact.1).abs() > 1e-9 * exact.1 {
        return Err(format!(
            "the model's exact moments {lib_mean}, {lib_std} differ from the closed form {exact:?}"
        )
        .into());
    }
    check(
        "spring chain, tip",
        samples as usize,
        out.mean,
        out.std,
        exact,
    )?;

    // The beam on the chosen backend.
    let beam = Beam::unit(64)?;
    let problem = StaticProblem {
        dof: beam.tip(),
        beam,
        load_mean: 1.0,
        load_std: 0.1,
        modulus_cov: Some(0.1),
        design: Default::default(),
        solver: Default::default(),
    };
    let samples = 20_000;
    let r = backend.run(BeamStatic(&problem, samples))?;
    println!(
        "beam on {}: 64 DOFs, {samples} samples by {} ({} not finite), {:.3} s",
        backend.name(),
        r.solver.name(),
        r.failed,
        r.time_s
    );
    if r.failed > 0 {
        return Err("some beam samples failed".into());
    }
    check(
        "beam, tip deflection",
        samples,
        r.mean,
        r.std,
        problem.tip_moments(),
    )?;
    println!("ok");
    Ok(())
}
