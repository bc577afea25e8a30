//! `gpuq uq static --stiffness K.mtx ...`: the static response of a user's model
//! read from Matrix Market files (`gpuq_uq::model`, `gpuq_uq::static_model`).

use crate::solve::Chosen;
use crate::uq::{parse_design, StaticArgs};
use gpuq_core::{Error, Result};
use gpuq_sparse::matrix_market as mm;
use gpuq_uq::model::{parse_dofs, Damping, Model};
use gpuq_uq::static_model::{model_static_response, ModelStatic, Theta};
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

/// A vector over the model's DOFs from a number (every free DOF) or a Matrix
/// Market file.
fn model_vector(model: &Model, spec: &str, what: &str) -> Result<Vec<f64>> {
    match spec.parse::<f64>() {
        Ok(v) => model.reduce_vector(&vec![v; model.dofs()], what),
        Err(_) => model.reduce_vector(&mm::read_dense_vector::<f64>(spec)?, what),
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
    if a.common.plot.is_some() {
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
    match Chosen::parse(&a.common.backend)? {
        Chosen::Cpu(_) => {}
        Chosen::Cuda(_) => {
            return Err(Error::InvalidArgument(
                "the static response of a model from files runs on the CPU backend (its device path is not written yet)"
                    .into(),
            ))
        }
    }
    let fixed = a
        .fixed_dofs
        .as_deref()
        .map(parse_dofs)
        .transpose()?
        .unwrap_or_default();
    let model = Model::new(mm::read_csr::<f64>(k_path)?, None, Damping::None, &fixed)?;
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
            model.reduce_matrix(&mm::read_csr::<f64>(p)?, &what)
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
            .map(|p| model.reduce_matrix(&mm::read_csr::<f64>(p)?, "--load-factor"))
            .transpose()?,
        terms: terms.into_iter().zip(theta).collect(),
        outputs: parse_dofs(outputs)?,
        design: parse_design(&a.design)?,
        tol: a.tol,
    };
    let setup_s = start.elapsed().as_secs_f64();
    let r = model_static_response(&problem, a.samples as u64, a.common.seed)?;
    if a.common.json {
        let report = json!({
            "procedure": "static",
            "backend": "cpu",
            "model": {
                "dofs": model.full_dofs(),
                "free_dofs": model.dofs(),
                "nonzeros": model.k.nnz(),
                "stiffness_terms": problem.terms.len(),
                "load_factor_rank": problem.load_factor.as_ref().map(|l| l.ncols()),
            },
            "samples": r.samples,
            "seed": a.common.seed,
            "design": a.design,
            "outputs": r.outputs,
            "iterations": r.iterations,
            "max_residual": r.max_residual,
            "setup_s": setup_s,
            "factor_s": r.factor_s,
            "solve_s": r.solve_s,
            "time_s": r.factor_s + r.solve_s,
        });
        println!("{report}");
    } else {
        println!(
            "static: model of {} DOFs ({} free, {} nonzeros), {} samples on cpu: factor {:.3} s, solves {:.3} s",
            model.full_dofs(),
            model.dofs(),
            model.k.nnz(),
            r.samples,
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
                "PCG iterations per sample: {lo} to {hi} (mean {mean:.1}); largest true residual {:.2e}",
                r.max_residual.unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
