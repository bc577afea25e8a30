//! A model's modal basis under a load shape p: the m lowest modes
//! ([`crate::eigen::modes`]), their circular frequencies w_i, damping ratios z_i
//! (from C projected, z_i = phi_i^T C phi_i / 2 w_i; Rayleigh a / 2 w_i +
//! b w_i / 2; or one ratio for all), participation Gamma_i = phi_i^T p, and
//! the share of the load's modal mass they carry, sum_i Gamma_i^2 / (p^T M^-1 p)
//! (1 for all modes). Shared by the modal PSD and the modal convolution.

use crate::cholesky::SparseCholesky;
use crate::eigen::{modes_on, ModeOptions};
use crate::lobpcg::EigenBackend;
use crate::model::{Damping, Model};
use gpuq_core::{Error, Result};
use serde::Serialize;
use std::time::Instant;

/// What the modal path found, as reports give it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModalSummary {
    /// Natural circular frequencies w_i (rad/s).
    pub omega: Vec<f64>,
    /// Modal damping ratios z_i.
    pub damping: Vec<f64>,
    /// sum_i (phi_i^T p)^2 / (p^T M^-1 p): the share of the load's modal mass
    /// the modes carry.
    pub mass_captured: f64,
    /// The eigensolver's iterations (0: dense solver).
    pub iterations: usize,
    /// The eigensolver that found the modes: `dense`, `lanczos` or `lobpcg`.
    pub eigensolver: &'static str,
    /// Largest relative residual of a mode.
    pub max_residual: f64,
    /// Seconds of the eigensolver.
    pub eig_s: f64,
}

/// The modal basis of a model under a load shape.
#[derive(Clone, Debug)]
pub struct ModalBasis {
    /// Participation Gamma_i = phi_i^T p.
    pub gamma: Vec<f64>,
    /// phi_i(o) for each output o (rows) and mode i (columns).
    pub at_outputs: Vec<Vec<f64>>,
    /// Frequencies, damping and the mass captured.
    pub summary: ModalSummary,
}

/// y = A x.
fn spmv(a: &gpuq_sparse::Csr<f64>, x: &[f64]) -> Vec<f64> {
    (0..a.nrows())
        .map(|i| {
            let (c, v) = a.row(i);
            c.iter().zip(v).map(|(&j, &w)| w * x[j as usize]).sum()
        })
        .collect()
}

/// The modal basis of `model` (which needs M and damping) under the load
/// shape `p` on its free DOFs, with the mode shapes at the free DOFs `outputs`,
/// the modes found on `backend` ([`crate::eigen::modes_on`]: LOBPCG runs
/// there; Lanczos and the dense solver on the host). Errors as
/// [`crate::eigen::modes_on`] does, and when M is not positive definite
/// (naming the pivot).
pub fn modal_basis<B: EigenBackend>(
    backend: &B,
    model: &Model,
    p: &[f64],
    outputs: &[usize],
    opts: &ModeOptions,
) -> Result<ModalBasis> {
    let mass = model
        .m
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument("modes need the mass matrix (Model::m)".into()))?;
    let t = Instant::now();
    let modes = modes_on(backend, &model.k, mass, opts)?;
    let eig_s = t.elapsed().as_secs_f64();
    let n = model.dofs();
    let omega: Vec<f64> = modes.values.iter().map(|l| l.sqrt()).collect();
    let mut damping = Vec::with_capacity(omega.len());
    let mut gamma = Vec::with_capacity(omega.len());
    for (i, &w) in omega.iter().enumerate() {
        let v: Vec<f64> = (0..n).map(|r| modes.vectors[(r, i)]).collect();
        damping.push(match &model.damping {
            Damping::Matrix(c) => {
                spmv(c, &v).iter().zip(&v).map(|(a, b)| a * b).sum::<f64>() / (2.0 * w)
            }
            Damping::Rayleigh { a, b } => a / (2.0 * w) + b * w / 2.0,
            Damping::Modal(z) => *z,
            Damping::None => 0.0,
        });
        gamma.push(v.iter().zip(p).map(|(a, b)| a * b).sum::<f64>());
    }
    let minv_p = SparseCholesky::new(mass, "the mass matrix M")?.solve(p);
    let total: f64 = minv_p.iter().zip(p).map(|(a, b)| a * b).sum();
    let mass_captured = gamma.iter().map(|g| g * g).sum::<f64>() / total;
    let at_outputs = outputs
        .iter()
        .map(|&o| (0..omega.len()).map(|i| modes.vectors[(o, i)]).collect())
        .collect();
    Ok(ModalBasis {
        gamma,
        at_outputs,
        summary: ModalSummary {
            omega,
            damping,
            mass_captured,
            iterations: modes.iterations,
            eigensolver: modes.solver,
            max_residual: modes.residuals.iter().cloned().fold(0.0, f64::max),
            eig_s,
        },
    })
}
