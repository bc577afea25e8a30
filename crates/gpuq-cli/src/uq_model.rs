//! `gpuq uq static --stiffness K.mtx ...`: the static response of a user's model
//! read from Matrix Market files (`gpuq_uq::model`, `gpuq_uq::static_model`).

use crate::solve::Chosen;
use crate::uq::{backend_name, parse_design, ConvolutionArgs, ModelArgs, PsdArgs, StaticArgs};
use gpuq_core::{Error, Result};
use gpuq_uq::convolution_model::{model_convolution, ModelConvolution};
use gpuq_uq::eigen::{EigenMethod, ModeOptions};
use gpuq_uq::modal::ModalSummary;
use gpuq_uq::model::{parse_dofs, Damping, Model};
use gpuq_uq::psd::Ar1;
use gpuq_uq::psd_model::{model_psd_on, LoadPsd, ModelPsd, OutputPsd, PsdMatrix};
use gpuq_uq::static_model::{
    static_response_on, ModelStatic, OutputStats, StaticOptions, StaticSolver, Theta,
};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

/// A vector over the model's DOFs from a number (every free DOF) or a Matrix
/// Market file.
fn model_vector(model: &Model, spec: &str, what: &str) -> Result<Vec<f64>> {
    match spec.parse::<f64>() {
        Ok(v) => model.reduce_vector(&vec![v; model.dofs()], what),
        Err(_) => model.reduce_vector(&gpuq_sparse::file::read_vector::<f64>(spec)?, what),
    }
}

/// The theta distributions for `terms` terms: one for all or one each.
fn thetas(specs: &[String], terms: usize) -> Result<Vec<Theta>> {
    let parsed: Vec<Theta> = specs
        .iter()
        .map(|s| Theta::parse(s))
        .collect::<Result<_>>()?;
    match (parsed.len(), terms) {
        (0, 0) => Ok(Vec::new()),
        (1, t) => Ok(vec![parsed[0]; t]),
        (p, t) if p == t => Ok(parsed),
        (p, t) => Err(Error::InvalidArgument(format!(
            "--theta gives {p} distributions for {t} stiffness terms (give 1 or {t})"
        ))),
    }
}

/// Runs the static response of the model the arguments name.
pub fn run_static_model(a: &StaticArgs) -> Result<ExitCode> {
    let start = Instant::now();
    let Some(k_path) = &a.stiffness else {
        return Err(Error::InvalidArgument("--stiffness is required".into()));
    };
    if a.plot.is_some() {
        return Err(Error::InvalidArgument(
            "--plot draws the beam's histogram only (a model reports its outputs in the JSON)"
                .into(),
        ));
    }
    if a.modulus_cov.is_some() || a.dof.is_some() {
        return Err(Error::InvalidArgument(
            "--modulus-cov and --dof are the beam's: a model takes --stiffness-terms/--theta and --outputs"
                .into(),
        ));
    }
    let chosen = Chosen::parse(&a.common.backend)?;
    let fixed = a
        .fixed_dofs
        .as_deref()
        .map(parse_dofs)
        .transpose()?
        .unwrap_or_default();
    let model = Model::new(
        gpuq_sparse::file::read_csr::<f64>(k_path)?,
        None,
        Damping::None,
        &fixed,
    )?;
    let Some(mean) = a.load_mean.as_deref() else {
        return Err(Error::InvalidArgument(
            "a model needs --load-mean (a Matrix Market vector or one number)".into(),
        ));
    };
    let Some(outputs) = a.outputs.as_deref() else {
        return Err(Error::InvalidArgument(
            "a model needs --outputs (DOFs, 0-based)".into(),
        ));
    };
    let terms: Vec<_> = a
        .stiffness_terms
        .iter()
        .map(|p| {
            let what = format!("stiffness term {}", p.display());
            model.reduce_matrix(&gpuq_sparse::file::read_csr::<f64>(p)?, &what)
        })
        .collect::<Result<_>>()?;
    let theta = thetas(&a.theta, terms.len())?;
    let problem = ModelStatic {
        model: &model,
        load_mean: model_vector(&model, mean, "--load-mean")?,
        load_std: a
            .load_std
            .as_deref()
            .map(|s| model_vector(&model, s, "--load-std"))
            .transpose()?,
        load_factor: a
            .load_factor
            .as_ref()
            .map(|p| model.reduce_matrix(&gpuq_sparse::file::read_csr::<f64>(p)?, "--load-factor"))
            .transpose()?,
        terms: terms.into_iter().zip(theta).collect(),
        outputs: parse_dofs(outputs)?,
        design: parse_design(&a.design)?,
        tol: a.tol,
    };
    let setup_s = start.elapsed().as_secs_f64();
    let options = StaticOptions {
        samples: a.samples as u64,
        seed: a.common.seed,
        solver: StaticSolver::parse(&a.solver)?,
    };
    let r = match &chosen {
        Chosen::Cpu(b) => static_response_on(b, &problem, &options)?,
        Chosen::Cuda(b) => static_response_on(b, &problem, &options)?,
    };
    // A sample whose true residual missed --tol is said, and the run ends
    // with status 3.
    let met = r.converged;
    let status = match (r.interrupted, met) {
        (true, _) => "interrupted",
        (false, true) => "converged",
        (false, false) => "not_converged",
    };
    if a.common.json {
        crate::solve::print_json(&StaticModelReport {
            procedure: "static",
            backend: backend_name(&chosen),
            solver: r.solver.name(),
            model: StaticModelSize {
                size: ModelSize::of(&model),
                stiffness_terms: problem.terms.len(),
                load_factor_rank: problem.load_factor.as_ref().map(|l| l.ncols()),
            },
            samples: r.samples,
            seed: a.common.seed,
            design: &a.design,
            outputs: &r.outputs,
            iterations: r.iterations,
            max_residual: r.max_residual,
            tol: a.tol,
            status,
            setup_s,
            factor_s: r.factor_s,
            solve_s: r.solve_s,
            time_s: r.factor_s + r.solve_s,
        })?;
    } else {
        println!(
            "static: model of {} DOFs ({} free, {} nonzeros), {} samples on {} by {}: setup {:.3} s, solves {:.3} s",
            model.full_dofs(),
            model.dofs(),
            model.k.nnz(),
            r.samples,
            backend_name(&chosen),
            r.solver.name(),
            r.factor_s,
            r.solve_s
        );
        for o in &r.outputs {
            print!(
                "DOF {}: mean {:.6e}, std {:.6e}, q05 {:.6e}, q50 {:.6e}, q95 {:.6e}",
                o.dof, o.mean, o.std, o.q05, o.q50, o.q95
            );
            if let (Some(m), Some(s)) = (o.exact_mean, o.exact_std) {
                print!(" (exact mean {m:.6e}, std {s:.6e})");
            }
            println!();
        }
        if let Some((lo, mean, hi)) = r.iterations {
            println!(
                "PCG iterations per solve: {lo} to {hi} (mean {mean:.1}); largest true residual {:.2e} (tolerance {:.1e}: {status})",
                r.max_residual.unwrap_or(0.0),
                a.tol
            );
        }
    }
    if met {
        return Ok(ExitCode::SUCCESS);
    }
    if r.interrupted {
        eprintln!(
            "gpuq: interrupted by Ctrl-C after {} of {} samples (the statistics are theirs)",
            r.samples, a.samples
        );
        return Ok(ExitCode::from(130));
    }
    eprintln!(
        "gpuq: not converged: a sample's true relative residual {:.3e} misses the tolerance {:.1e} \
         (the attainable accuracy of the solves lies above it)",
        r.max_residual.unwrap_or(f64::NAN),
        a.tol
    );
    Ok(ExitCode::from(3))
}

/// The dynamic model the options name: K, M and damping read, fixed DOFs
/// eliminated; its load shape on the free DOFs and the output DOFs.
fn dynamic_model(o: &ModelArgs, what: &str) -> Result<(Model, Vec<f64>, Vec<usize>)> {
    let (Some(k_path), Some(m_path)) = (&o.stiffness, &o.mass) else {
        return Err(Error::InvalidArgument(format!(
            "the {what} of a model needs --stiffness and --mass"
        )));
    };
    let damping = match (&o.damping, &o.rayleigh, o.modal_damping) {
        (Some(c), _, _) => Damping::Matrix(gpuq_sparse::file::read_csr::<f64>(c)?),
        (_, Some(r), _) => match r[..] {
            [a, b] => Damping::Rayleigh { a, b },
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "--rayleigh takes A,B (2 values), not {}",
                    r.len()
                )))
            }
        },
        (_, _, Some(z)) => Damping::Modal(z),
        _ => Damping::None,
    };
    let fixed = o
        .fixed_dofs
        .as_deref()
        .map(parse_dofs)
        .transpose()?
        .unwrap_or_default();
    let model = Model::new(
        gpuq_sparse::file::read_csr::<f64>(k_path)?,
        Some(gpuq_sparse::file::read_csr::<f64>(m_path)?),
        damping,
        &fixed,
    )?;
    let load_shape = match (&o.load_dofs, &o.load_shape) {
        (Some(list), _) => {
            let mut p = vec![0.0; model.dofs()];
            for d in parse_dofs(list)? {
                p[model.reduced_dof(d)?] += 1.0;
            }
            p
        }
        (_, Some(path)) => model.reduce_vector(
            &gpuq_sparse::file::read_vector::<f64>(path)?,
            "--load-shape",
        )?,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "the {what} of a model needs --load-dofs or --load-shape"
            )))
        }
    };
    let Some(outputs) = o.outputs.as_deref() else {
        return Err(Error::InvalidArgument(
            "a model needs --outputs (DOFs, 0-based)".into(),
        ));
    };
    Ok((model, load_shape, parse_dofs(outputs)?))
}

/// The mode options the arguments give (`auto`: the backend's choice,
/// [`gpuq_uq::EigenKernels::auto_eigen_method`]).
fn mode_options(o: &ModelArgs, seed: u64) -> Result<ModeOptions> {
    let method = EigenMethod::parse(&o.eigensolver)?;
    Ok(ModeOptions {
        count: o.modes,
        seed,
        method,
        block: o.block,
        ..ModeOptions::default()
    })
}

/// Runs the response PSD of the model the arguments name over `frequencies`.
pub fn run_psd_model(a: &PsdArgs, frequencies: Vec<f64>) -> Result<ExitCode> {
    let o = &a.model;
    if a.full {
        return Err(Error::InvalidArgument(
            "--full is the beam's: a model reports its outputs' PSDs and cross-PSDs in the JSON"
                .into(),
        ));
    }
    let chosen = Chosen::parse(&a.common.backend)?;
    let (model, load_shape, outputs) = dynamic_model(o, "PSD")?;
    let load = match &a.load_psd {
        Some(spec) => LoadPsd::parse(spec)?,
        None => LoadPsd::Ar1(Ar1 {
            phi: a.load.phi,
            sigma: a.load.sigma,
            dt: a.load.dt,
        }),
    };
    let problem = ModelPsd {
        model: &model,
        load_shape,
        outputs,
        frequencies,
        load,
        modes: mode_options(o, a.common.seed)?,
    };
    let r = match &chosen {
        Chosen::Cpu(b) => model_psd_on(b, &problem)?,
        Chosen::Cuda(b) => model_psd_on(b, &problem)?,
    };
    if let Some(path) = &a.plot {
        let f = gpuq_uq::plot::model_psd_chart(&r).save(path)?;
        crate::uq::report_plot(
            path,
            "the outputs' PSDs and the cross-PSDs' magnitudes",
            f,
            a.common.json,
        );
    }
    if a.common.json {
        crate::solve::print_json(&PsdModelReport {
            procedure: "psd",
            backend: backend_name(&chosen),
            model: ModelSize::of(&model),
            method: if o.modes == 0 { "direct" } else { "modal" },
            load_psd: &problem.load,
            frequencies: &r.frequencies,
            outputs: &r.outputs,
            cross_psd: &r.cross,
            modes: r.modal.as_ref(),
            eig_s: r.eig_s,
            time_s: r.time_s,
        })?;
    } else {
        let method = match &r.modal {
            Some(m) => format!(
                "{} modes (capturing {:.2}% of the load's modal mass, {} {} iterations)",
                m.omega.len(),
                100.0 * m.mass_captured,
                m.iterations,
                match m.eigensolver {
                    "dense" => "dense eigensolver",
                    other => other,
                }
            ),
            None => "the direct per-frequency solve".into(),
        };
        println!(
            "psd on {}: model of {} DOFs ({} free), {} frequencies by {method} in {:.3} s",
            backend_name(&chosen),
            model.full_dofs(),
            model.dofs(),
            r.frequencies.len(),
            r.time_s
        );
        for out in &r.outputs {
            println!("DOF {}: RMS {:.6e}", out.dof, out.rms);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the convolution of the model the arguments name on the chosen backend.
pub fn run_convolution_model(a: &ConvolutionArgs) -> Result<ExitCode> {
    let o = &a.model;
    if a.plot.is_some() {
        return Err(Error::InvalidArgument(
            "a model's convolution samples the AR(1) load of --phi, --sigma, --dt and draws no figure (no --plot)"
                .into(),
        ));
    }
    if a.repeat == 0 {
        return Err(Error::InvalidArgument("--repeat must be at least 1".into()));
    }
    let chosen = Chosen::parse(&a.common.backend)?;
    let (model, load_shape, outputs) = dynamic_model(o, "convolution")?;
    let problem = ModelConvolution {
        model: &model,
        load_shape,
        outputs,
        modes: mode_options(o, a.common.seed)?,
        load: Ar1 {
            phi: a.load.phi,
            sigma: a.load.sigma,
            dt: a.load.dt,
        },
        steps: a.steps,
    };
    let mut runs = Vec::with_capacity(a.repeat);
    for _ in 0..a.repeat {
        runs.push(match &chosen {
            Chosen::Cpu(b) => model_convolution(b, &problem, a.samples, a.common.seed, 0)?,
            Chosen::Cuda(b) => model_convolution(b, &problem, a.samples, a.common.seed, 0)?,
        });
    }
    let first_s = runs[0].response.time_s;
    let fastest = runs
        .iter()
        .map(|r| r.response.time_s)
        .fold(f64::INFINITY, f64::min);
    let r = runs.swap_remove(0);
    let steps = a.steps;
    let resp = &r.response;
    let per_output: Vec<_> = problem
        .outputs
        .iter()
        .enumerate()
        .map(|(k, &dof)| {
            let peaks: Vec<f64> = resp
                .peaks
                .iter()
                .skip(k)
                .step_by(problem.outputs.len())
                .copied()
                .collect();
            let n = peaks.len().max(1) as f64;
            OutputResponse {
                dof,
                final_mean: resp.mean[k * steps + steps - 1],
                final_std: resp.std[k * steps + steps - 1],
                peak_max: peaks.iter().fold(0.0f64, |m, v| m.max(*v)),
                peak_mean: peaks.iter().sum::<f64>() / n,
            }
        })
        .collect();
    if a.common.json {
        crate::solve::print_json(&ConvolutionModelReport {
            procedure: "convolution",
            backend: backend_name(&chosen),
            model: ModelSize::of(&model),
            steps,
            samples: a.samples,
            seed: a.common.seed,
            outputs: &per_output,
            modes: &r.modal,
            setup_s: resp.setup_s,
            time_s: fastest,
            first_s,
            repeat: a.repeat,
        })?;
    } else {
        println!(
            "convolution: model of {} DOFs ({} free) on {} modes capturing {:.2}% of the load's modal mass, {steps} steps, {} samples on {} in {fastest:.4} s (set-up {:.3} s)",
            model.full_dofs(),
            model.dofs(),
            r.modal.omega.len(),
            100.0 * r.modal.mass_captured,
            a.samples,
            backend_name(&chosen),
            resp.setup_s
        );
        for v in &per_output {
            crate::solve::print_json(v)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The size of a model in the JSON reports.
#[derive(Serialize)]
struct ModelSize {
    /// DOFs of the model as read.
    dofs: usize,
    /// DOFs left after the fixed ones are eliminated.
    free_dofs: usize,
    /// Nonzeros of the reduced K.
    nonzeros: usize,
}

impl ModelSize {
    fn of(model: &Model) -> Self {
        ModelSize {
            dofs: model.full_dofs(),
            free_dofs: model.dofs(),
            nonzeros: model.k.nnz(),
        }
    }
}

/// The model of `gpuq uq static --stiffness`'s report: its size and random inputs.
#[derive(Serialize)]
struct StaticModelSize {
    /// DOFs, free DOFs and nonzeros.
    #[serde(flatten)]
    size: ModelSize,
    /// Number of stiffness terms K_k.
    stiffness_terms: usize,
    /// Columns of the load factor L, when given.
    load_factor_rank: Option<usize>,
}

/// The JSON report of `gpuq uq static --stiffness ... --json`.
#[derive(Serialize)]
struct StaticModelReport<'a> {
    /// "static".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// The solver that ran: band, direct, pcg or dense (`--solver`, auto resolved).
    solver: &'static str,
    /// The model.
    model: StaticModelSize,
    /// Number of samples.
    samples: u64,
    /// Seed of the random streams.
    seed: u64,
    /// `--design`.
    design: &'a str,
    /// Statistics per output DOF.
    outputs: &'a [OutputStats],
    /// PCG iterations per solve (fewest, mean, most), the pcg solver only.
    iterations: Option<(usize, f64, usize)>,
    /// Largest true relative residual of a sample, random K (or dense) only.
    max_residual: Option<f64>,
    /// `--tol`.
    tol: f64,
    /// "converged", "not_converged" or "interrupted".
    status: &'static str,
    /// Seconds reading and reducing the model.
    setup_s: f64,
    /// Seconds of the solver's setup (factorisation, or uploads and AMG).
    factor_s: f64,
    /// Seconds of the sampling and solves.
    solve_s: f64,
    /// factor_s + solve_s.
    time_s: f64,
}

/// The JSON report of `gpuq uq psd --stiffness ... --json`.
#[derive(Serialize)]
struct PsdModelReport<'a> {
    /// "psd".
    procedure: &'static str,
    /// "cpu".
    backend: &'static str,
    /// The model's size.
    model: ModelSize,
    /// "direct" (`--modes 0`) or "modal".
    method: &'static str,
    /// The load process's PSD.
    load_psd: &'a LoadPsd,
    /// Angular frequencies (rad/s).
    frequencies: &'a [f64],
    /// The PSD and RMS per output DOF.
    outputs: &'a [OutputPsd],
    /// The outputs' cross-PSD matrix at each frequency (`re`, `im`: rows and
    /// columns in the order of `outputs`).
    cross_psd: &'a [PsdMatrix],
    /// The modes (modal method only).
    modes: Option<&'a ModalSummary>,
    /// Seconds of the eigensolver.
    eig_s: f64,
    /// Seconds of the whole computation.
    time_s: f64,
}

/// One output DOF of a model's convolution (fields in the order of its text output).
#[derive(Serialize)]
struct OutputResponse {
    /// The DOF (full numbering).
    dof: usize,
    /// Mean response at the last step.
    final_mean: f64,
    /// Its standard deviation.
    final_std: f64,
    /// Largest peak |y| over the samples.
    peak_max: f64,
    /// Mean over the samples of the peak |y|.
    peak_mean: f64,
}

/// The JSON report of `gpuq uq convolution --stiffness ... --json`.
#[derive(Serialize)]
struct ConvolutionModelReport<'a> {
    /// "convolution".
    procedure: &'static str,
    /// "cpu" or "cuda".
    backend: &'static str,
    /// The model's size.
    model: ModelSize,
    /// Time steps.
    steps: usize,
    /// Load samples.
    samples: usize,
    /// Seed of the random streams.
    seed: u64,
    /// Statistics per output DOF.
    outputs: &'a [OutputResponse],
    /// The modes.
    modes: &'a ModalSummary,
    /// Seconds of the set-up.
    setup_s: f64,
    /// Seconds of the fastest run.
    time_s: f64,
    /// Seconds of the first run.
    first_s: f64,
    /// `--repeat`.
    repeat: usize,
}
