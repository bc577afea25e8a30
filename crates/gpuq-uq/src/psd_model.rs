//! (ii) The response PSD of a user's model to a stationary random load
//! f(t) = p s(t), p the load's shape over the DOFs and s(t) a scalar process
//! of one-sided PSD S_ff(w) ([`LoadPsd`]: white, AR(1), Kanai-Tajimi ground
//! acceleration, or a table):
//!
//! S_yy(w) = |H_o(w)|^2 S_ff(w) for each output DOF o, two ways:
//!
//! * by modal superposition (m > 0 modes): the m lowest modes of
//!   K phi = w^2 M phi ([`crate::eigen::modes`]: shift-invert Lanczos or LOBPCG
//!   with the sparse Cholesky factor of K, or the dense solver for small models),
//!   H_o(w) = sum_i phi_i(o) (phi_i^T p) / (w_i^2 - w^2 + 2 i z_i w_i w), the
//!   modal damping z_i from C projected (z_i = phi_i^T C phi_i / 2 w_i; C given
//!   or Rayleigh a M + b K) or one ratio for every mode. The report gives the
//!   modal mass captured, sum_i (phi_i^T p)^2 / (p^T M^-1 p);
//! * directly (m = 0): one complex sparse LU of K - w^2 M + i w C per frequency
//!   (`faer`, the symbolic analysis shared), the check of the modal path and
//!   the method for small models.
//!
//! RMS values: the square root of the trapezoidal integral of S_yy over the
//! frequency grid. Frequencies are circular (rad/s).
//!
//! Cross-PSDs between the outputs: S_xy(w) = H_x(w) conj(H_y(w)) S_ff(w) for
//! every pair, a Hermitian matrix per frequency ([`PsdMatrix`]) whose
//! diagonal is the outputs' PSDs; its real part is the co-spectrum, its
//! imaginary part the quadrature spectrum. One scalar load process drives
//! every output, so the coherence |S_xy|^2 / (S_xx S_yy) is 1 wherever the
//! outputs respond.
//!
//! On a device ([`model_psd_on`]) the cross-PSD matrices are formed there by
//! the rank-1 kernel every backend shares; not done on the device: the
//! eigensolver and the per-frequency sparse LU (the host's).

use crate::eigen::ModeOptions;
use crate::lobpcg::EigenBackend;
use crate::modal::{modal_basis, ModalSummary};
use crate::model::{Damping, Model};
use crate::psd::{Ar1, PsdKernels};
use faer::linalg::solvers::Solve;
use faer::sparse::linalg::solvers::{Lu, SymbolicLu};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use gpuq_core::{Complex64, Error, Result};
use gpuq_sparse::{Coo, Csr};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// The one-sided PSD of the scalar load process s(t).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum LoadPsd {
    /// S_ff(w) = s0.
    White {
        /// Intensity.
        s0: f64,
    },
    /// The AR(1) process of [`Ar1`].
    Ar1(Ar1),
    /// Kanai-Tajimi ground acceleration: S_ff(w) = s0 (wg^4 + 4 zg^2 wg^2 w^2)
    /// / ((wg^2 - w^2)^2 + 4 zg^2 wg^2 w^2).
    KanaiTajimi {
        /// Bedrock intensity.
        s0: f64,
        /// Ground frequency wg (rad/s).
        wg: f64,
        /// Ground damping ratio zg.
        zg: f64,
    },
    /// Linear interpolation of (w, S) pairs, increasing in w; 0 outside.
    Table(Vec<(f64, f64)>),
}

impl LoadPsd {
    /// S_ff(w).
    pub fn value(&self, w: f64) -> f64 {
        match self {
            LoadPsd::White { s0 } => *s0,
            LoadPsd::Ar1(a) => a.psd(w),
            LoadPsd::KanaiTajimi { s0, wg, zg } => {
                let (w2, g2) = (w * w, wg * wg);
                let c = 4.0 * zg * zg * g2 * w2;
                s0 * (g2 * g2 + c) / ((g2 - w2).powi(2) + c)
            }
            LoadPsd::Table(t) => {
                let i = t.partition_point(|&(x, _)| x < w);
                if i == 0 {
                    if t.first().is_some_and(|&(x, _)| x == w) {
                        t[0].1
                    } else {
                        0.0
                    }
                } else if i == t.len() {
                    0.0
                } else {
                    let ((x0, y0), (x1, y1)) = (t[i - 1], t[i]);
                    y0 + (y1 - y0) * (w - x0) / (x1 - x0)
                }
            }
        }
    }

    /// Parses `white:S0`, `ar1:PHI:SIGMA:DT` (see [`Ar1`]),
    /// `kanai-tajimi:S0:WG:ZG`, or a file of `w,S` lines (`#` comments).
    pub fn parse(spec: &str) -> Result<Self> {
        let nums = |rest: &str, count: usize| -> Result<Vec<f64>> {
            let v: Vec<f64> = rest
                .split(':')
                .map(|t| t.parse::<f64>())
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| Error::InvalidArgument(format!("bad load PSD {spec:?}")))?;
            if v.len() != count || v.iter().any(|x| !x.is_finite()) {
                return Err(Error::InvalidArgument(format!(
                    "bad load PSD {spec:?}: expected {count} finite numbers"
                )));
            }
            Ok(v)
        };
        let psd = if let Some(r) = spec.strip_prefix("white:") {
            LoadPsd::White { s0: nums(r, 1)?[0] }
        } else if let Some(r) = spec.strip_prefix("ar1:") {
            let v = nums(r, 3)?;
            LoadPsd::Ar1(Ar1 {
                phi: v[0],
                sigma: v[1],
                dt: v[2],
            })
        } else if let Some(r) = spec.strip_prefix("kanai-tajimi:") {
            let v = nums(r, 3)?;
            LoadPsd::KanaiTajimi {
                s0: v[0],
                wg: v[1],
                zg: v[2],
            }
        } else {
            let text = std::fs::read_to_string(spec).map_err(|source| Error::Io {
                path: spec.to_string(),
                source,
            })?;
            let mut t = Vec::new();
            for (no, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let mut it = line
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|s| !s.is_empty());
                let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                    return Err(Error::parse(
                        no + 1,
                        format!("{spec}: expected `w,S`, got {line:?}"),
                    ));
                };
                let (w, s) = (a.parse::<f64>(), b.parse::<f64>());
                let (Ok(w), Ok(s)) = (w, s) else {
                    return Err(Error::parse(
                        no + 1,
                        format!("{spec}: not two numbers: {line:?}"),
                    ));
                };
                t.push((w, s));
            }
            LoadPsd::Table(t)
        };
        psd.check()?;
        Ok(psd)
    }

    /// Errors on negative intensities, bad parameters or an unsorted table, naming
    /// the value at fault.
    pub fn check(&self) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidArgument(format!("bad load PSD: {why}")));
        let finite_nonneg = |v: f64| v.is_finite() && v >= 0.0;
        match self {
            LoadPsd::White { s0 } if !finite_nonneg(*s0) => {
                bad(format!("white intensity S0 = {s0} (must be finite and >= 0)"))
            }
            LoadPsd::Ar1(a) => a.validate().or_else(|e| bad(format!("AR(1): {e}"))),
            LoadPsd::KanaiTajimi { s0, .. } if !finite_nonneg(*s0) => bad(format!(
                "Kanai-Tajimi intensity S0 = {s0} (must be finite and >= 0)"
            )),
            LoadPsd::KanaiTajimi { wg, zg, .. } if !(wg.is_finite() && zg.is_finite() && *wg > 0.0 && *zg > 0.0) => {
                bad(format!(
                    "Kanai-Tajimi ground frequency wg = {wg} and damping zg = {zg} (both must be finite and > 0)"
                ))
            }
            LoadPsd::Table(t) if t.is_empty() => bad("the table has no rows".into()),
            LoadPsd::Table(t) => {
                if let Some((w, s)) = t
                    .iter()
                    .find(|&&(w, s)| !(w.is_finite() && finite_nonneg(s)))
                {
                    return bad(format!(
                        "table row w = {w}, S = {s} (w must be finite, S finite and >= 0)"
                    ));
                }
                match t.windows(2).find(|p| p[0].0 >= p[1].0) {
                    Some(p) => bad(format!(
                        "table frequencies must increase ({} is followed by {})",
                        p[0].0, p[1].0
                    )),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }
}

/// The PSD problem on a model (the model must have M and, for the direct
/// path or projected damping, C or Rayleigh coefficients).
#[derive(Clone, Debug)]
pub struct ModelPsd<'a> {
    /// The model.
    pub model: &'a Model,
    /// The load's shape p on the free DOFs.
    pub load_shape: Vec<f64>,
    /// Output DOFs (full numbering).
    pub outputs: Vec<usize>,
    /// Circular frequencies w (rad/s), increasing, >= 0.
    pub frequencies: Vec<f64>,
    /// The load process's PSD.
    pub load: LoadPsd,
    /// Modes (count 0: the direct per-frequency solve).
    pub modes: ModeOptions,
}

/// One output's PSD.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutputPsd {
    /// The DOF (full numbering).
    pub dof: usize,
    /// RMS: sqrt of the trapezoidal integral of `psd` over the frequencies.
    pub rms: f64,
    /// S_yy at each frequency.
    pub psd: Vec<f64>,
}

/// The cross-PSD matrix of the outputs at one frequency: S_xy for outputs
/// x (row) and y (column) in the order of [`ModelPsd::outputs`], Hermitian,
/// the outputs' PSDs on its diagonal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PsdMatrix {
    /// Re S_xy, the co-spectrum (row by row).
    pub re: Vec<Vec<f64>>,
    /// Im S_xy, the quadrature spectrum (row by row).
    pub im: Vec<Vec<f64>>,
}

/// What [`model_psd`] returns.
#[derive(Clone, Debug, Serialize)]
pub struct ModelPsdResult {
    /// The frequencies (rad/s).
    pub frequencies: Vec<f64>,
    /// One entry per output DOF.
    pub outputs: Vec<OutputPsd>,
    /// The cross-PSD matrix of the outputs at each frequency.
    pub cross: Vec<PsdMatrix>,
    /// The modal path's modes (`None` for the direct path).
    pub modal: Option<ModalSummary>,
    /// Seconds of the eigensolver (0 for the direct path).
    pub eig_s: f64,
    /// Seconds of the whole computation.
    pub time_s: f64,
}

/// The trapezoidal integral of `y` over the increasing grid `x`.
fn trapezoid(x: &[f64], y: &[f64]) -> f64 {
    x.windows(2)
        .zip(y.windows(2))
        .map(|(a, b)| 0.5 * (a[1] - a[0]) * (b[0] + b[1]))
        .sum()
}

impl ModelPsd<'_> {
    /// Checks sizes, the frequency grid, the outputs and the load.
    pub fn validate(&self) -> Result<()> {
        let n = self.model.dofs();
        if self.model.m.is_none() {
            return Err(Error::InvalidArgument(
                "the PSD needs the mass matrix (Model::m)".into(),
            ));
        }
        if self.load_shape.len() != n {
            return Err(Error::shape("load shape", n, self.load_shape.len()));
        }
        if self.load_shape.iter().all(|&v| v == 0.0) {
            return Err(Error::InvalidArgument("the load's shape is zero".into()));
        }
        if self.frequencies.is_empty()
            || self
                .frequencies
                .iter()
                .any(|w| !(w.is_finite() && *w >= 0.0))
            || self.frequencies.windows(2).any(|p| p[0] >= p[1])
        {
            return Err(Error::InvalidArgument(
                "the frequencies must be finite, >= 0 and increasing".into(),
            ));
        }
        if self.outputs.is_empty() {
            return Err(Error::InvalidArgument("no output DOFs".into()));
        }
        for &d in &self.outputs {
            self.model.reduced_dof(d)?;
        }
        self.load.check()?;
        match (&self.model.damping, self.modes.count) {
            (Damping::None, _) => Err(Error::InvalidArgument(
                "the PSD needs damping: a damping matrix, Rayleigh coefficients or a modal ratio"
                    .into(),
            )),
            (Damping::Modal(_), 0) => Err(Error::InvalidArgument(
                "a modal damping ratio needs modes (ModelPsd::modes.count > 0); the direct solve needs C or Rayleigh coefficients"
                    .into(),
            )),
            _ => Ok(()),
        }
    }
}

/// The response PSD of `problem` (see the module docs) on the CPU backend:
/// [`model_psd_on`]. Errors on an invalid problem, K or M not positive
/// definite (naming the pivot or the LOBPCG step), or a singular
/// K - w^2 M + i w C at a frequency.
pub fn model_psd(problem: &ModelPsd<'_>) -> Result<ModelPsdResult> {
    model_psd_on(&gpuq_cpu::CpuBackend::new(), problem)
}

/// The response PSD of `problem` with the outputs' cross-PSD matrices formed
/// on `backend` ([`PsdKernels::rank1_hermitian`] over the outputs' transfer
/// values, then read back: the same bits on every backend). The transfer
/// values come from the modal basis (its modes found on `backend` when the
/// method is LOBPCG, on the host by Lanczos) or per-frequency LU (host).
/// Errors as
/// [`model_psd`]. Cost: the transfer values, then 16 o^2 nf bytes formed
/// and read back for o outputs and nf frequencies.
pub fn model_psd_on<B: PsdKernels + EigenBackend>(
    backend: &B,
    problem: &ModelPsd<'_>,
) -> Result<ModelPsdResult> {
    problem.validate()?;
    let start = Instant::now();
    let out: Vec<usize> = problem
        .outputs
        .iter()
        .map(|&d| problem.model.reduced_dof(d))
        .collect::<Result<_>>()?;
    let s_ff: Vec<f64> = problem
        .frequencies
        .iter()
        .map(|&w| problem.load.value(w))
        .collect();
    let (h, modal, eig_s) = if problem.modes.count == 0 {
        (direct(problem, &out)?, None, 0.0)
    } else {
        let (h, summary, eig_s) = modal(backend, problem, &out)?;
        (h, Some(summary), eig_s)
    };
    let outputs = out
        .iter()
        .enumerate()
        .map(|(k, _)| {
            let psd: Vec<f64> = h
                .iter()
                .zip(&s_ff)
                .map(|(h, s)| h[k].norm_sqr() * s)
                .collect();
            OutputPsd {
                dof: problem.outputs[k],
                rms: trapezoid(&problem.frequencies, &psd).sqrt(),
                psd,
            }
        })
        .collect();
    let o = out.len();
    let stacked: Vec<Complex64> = h.iter().flatten().copied().collect();
    let formed = backend.rank1_hermitian(o, &s_ff, &stacked)?;
    let cross = backend
        .download(&formed)?
        .chunks(o * o)
        .map(|m| PsdMatrix {
            re: m
                .chunks(o)
                .map(|row| row.iter().map(|z| z.re).collect())
                .collect(),
            im: m
                .chunks(o)
                .map(|row| row.iter().map(|z| z.im).collect())
                .collect(),
        })
        .collect();
    Ok(ModelPsdResult {
        frequencies: problem.frequencies.clone(),
        outputs,
        cross,
        modal,
        eig_s,
        time_s: start.elapsed().as_secs_f64(),
    })
}

/// The transfer vectors h(w) = (K - w^2 M + i w C)^-1 p of `problem` at
/// every free DOF (the model's reduced numbering) and every frequency,
/// frequency-major (nf n values), by the direct solve, and S_ff(w) at each
/// frequency. Cost: one complex sparse LU per frequency (its symbolic
/// analysis shared), O(nf n) values kept. Errors as [`model_psd`]'s direct
/// path.
pub fn transfer_vectors(problem: &ModelPsd<'_>) -> Result<(Vec<Complex64>, Vec<f64>)> {
    problem.validate()?;
    if matches!(problem.model.damping, Damping::Modal(_)) {
        return Err(Error::InvalidArgument(
            "the transfer vectors come from the direct solve, which needs C or Rayleigh coefficients (not a modal damping ratio)".into(),
        ));
    }
    let every: Vec<usize> = (0..problem.model.dofs()).collect();
    let h = direct(problem, &every)?.into_iter().flatten().collect();
    let s_ff = problem
        .frequencies
        .iter()
        .map(|&w| problem.load.value(w))
        .collect();
    Ok((h, s_ff))
}

/// The full response PSD matrices S_xx(w) = S_ff(w) h(w) h(w)^H over the
/// free DOFs at every frequency, formed on `backend` ([`PsdKernels::
/// rank1_hermitian`]) and left resident there: nf n^2 complex values,
/// frequency-major, each matrix row-major. Cost: [`transfer_vectors`], then
/// 16 n^2 nf bytes written on the backend.
pub fn response_psd_full<B: PsdKernels>(
    backend: &B,
    problem: &ModelPsd<'_>,
) -> Result<B::Vector<Complex64>> {
    let (h, s_ff) = transfer_vectors(problem)?;
    backend.rank1_hermitian(problem.model.dofs(), &s_ff, &h)
}

/// H_o(w) per frequency (rows) and output (columns) by the modes.
#[allow(clippy::type_complexity)]
fn modal<B: EigenBackend>(
    backend: &B,
    problem: &ModelPsd<'_>,
    out: &[usize],
) -> Result<(Vec<Vec<Complex64>>, ModalSummary, f64)> {
    let basis = modal_basis(
        backend,
        problem.model,
        &problem.load_shape,
        out,
        &problem.modes,
    )?;
    let s = &basis.summary;
    let (omega, zeta) = (&s.omega, &s.damping);
    // phi_i(o) Gamma_i per output and mode.
    let coef: Vec<Vec<f64>> = basis
        .at_outputs
        .iter()
        .map(|row| row.iter().zip(&basis.gamma).map(|(a, b)| a * b).collect())
        .collect();
    let h2 = problem
        .frequencies
        .par_iter()
        .map(|&w| {
            coef.iter()
                .map(|c| {
                    let mut h = Complex64::new(0.0, 0.0);
                    for ((ci, wi), zi) in c.iter().zip(omega).zip(zeta) {
                        h += ci / Complex64::new(wi * wi - w * w, 2.0 * zi * wi * w);
                    }
                    h
                })
                .collect()
        })
        .collect();
    let eig_s = s.eig_s;
    Ok((h2, basis.summary, eig_s))
}

/// H_o(w) per frequency and output by one complex sparse LU of
/// K - w^2 M + i w C per frequency.
fn direct(problem: &ModelPsd<'_>, out: &[usize]) -> Result<Vec<Vec<Complex64>>> {
    let model = problem.model;
    let n = model.dofs();
    let mass = model
        .m
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument("no mass matrix".into()))?;
    let c_mat = match &model.damping {
        Damping::Matrix(c) => Some(c.clone()),
        _ => None,
    };
    let (ra, rb) = match model.damping {
        Damping::Rayleigh { a, b } => (a, b),
        _ => (0.0, 0.0),
    };
    // The union pattern, each matrix's values scattered into it.
    let mut coo = Coo::new(n, n);
    for a in [Some(&model.k), Some(mass), c_mat.as_ref()]
        .into_iter()
        .flatten()
    {
        for i in 0..n {
            for &j in a.row(i).0 {
                coo.push(i, j as usize, 0.0)?;
            }
        }
    }
    let pattern = Csr::from_coo(&coo)?;
    let scatter = |a: &Csr<f64>| -> Vec<f64> {
        let mut v = vec![0.0; pattern.nnz()];
        for i in 0..n {
            let (pc, _) = pattern.row(i);
            let base = pattern.row_ptr()[i];
            let (c, vals) = a.row(i);
            for (&j, &x) in c.iter().zip(vals) {
                if let Ok(p) = pc.binary_search(&j) {
                    v[base + p] = x;
                }
            }
        }
        v
    };
    let (kv, mv) = (scatter(&model.k), scatter(mass));
    let cv = c_mat.as_ref().map(scatter);
    let col_ptr: Vec<u32> = pattern
        .row_ptr()
        .iter()
        .map(|&p| u32::try_from(p))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::InvalidArgument("the model has 2^32 entries or more".into()))?;
    // Complex symmetric: the CSR rows are the CSC columns.
    let sym = SymbolicSparseColMatRef::new_checked(n, n, &col_ptr, None, pattern.col_idx());
    let symbolic = SymbolicLu::try_new(sym)
        .map_err(|e| Error::Device(format!("sparse LU analysis: {e:?}")))?;
    problem
        .frequencies
        .par_iter()
        .map(|&w| {
            let vals: Vec<Complex64> = (0..pattern.nnz())
                .map(|q| {
                    let damp = cv.as_ref().map_or(ra * mv[q] + rb * kv[q], |c| c[q]);
                    Complex64::new(kv[q] - w * w * mv[q], w * damp)
                })
                .collect();
            let mat = SparseColMatRef::new(sym, &vals);
            let lu = Lu::try_new_with_symbolic(symbolic.clone(), mat).map_err(|e| {
                Error::Precondition {
                    method: "PSD (direct)",
                    reason: format!("K - w^2 M + i w C is singular at w = {w} ({e:?})"),
                }
            })?;
            let mut rhs =
                faer::Mat::from_fn(n, 1, |i, _| Complex64::new(problem.load_shape[i], 0.0));
            lu.solve_in_place(rhs.as_mut());
            Ok(out.iter().map(|&o| rhs[(o, 0)]).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beam::Beam;
    use crate::test_matrices::diag;

    fn grid(lo: f64, hi: f64, count: usize) -> Vec<f64> {
        (0..count)
            .map(|i| lo + (hi - lo) * i as f64 / (count - 1) as f64)
            .collect()
    }

    #[test]
    fn decoupled_oscillators_have_their_closed_form() {
        // Three uncoupled oscillators; the load on DOF 0, the softest.
        let (k, m) = ([4.0, 50.0, 90.0], [1.0, 2.0, 1.5]);
        let (a, b) = (0.05, 0.002);
        let model = Model::new(diag(&k), Some(diag(&m)), Damping::Rayleigh { a, b }, &[]).unwrap();
        let w = grid(0.0, 6.0, 121);
        let mut problem = ModelPsd {
            model: &model,
            load_shape: vec![1.0, 0.0, 0.0],
            outputs: vec![0],
            frequencies: w.clone(),
            load: LoadPsd::White { s0: 2.0 },
            modes: ModeOptions {
                count: 1,
                ..ModeOptions::default()
            },
        };
        let c = a * m[0] + b * k[0];
        let exact: Vec<f64> = w
            .iter()
            .map(|&w| 2.0 / ((k[0] - m[0] * w * w).powi(2) + (c * w).powi(2)))
            .collect();
        let modal = model_psd(&problem).unwrap();
        problem.modes.count = 0;
        let direct = model_psd(&problem).unwrap();
        for r in [&modal, &direct] {
            for (x, y) in r.outputs[0].psd.iter().zip(&exact) {
                assert!((x - y).abs() <= 1e-10 * y, "{x} vs {y}");
            }
        }
        let s = modal.modal.unwrap();
        assert!((s.omega[0] - 2.0).abs() < 1e-12);
        assert!((s.damping[0] - c / (2.0 * 2.0 * m[0])).abs() < 1e-12);
        assert!((s.mass_captured - 1.0).abs() < 1e-12);
    }

    #[test]
    fn one_dof_psd_is_h_squared_times_the_ar1_psd() {
        let (k, m, c) = (62.84, 2.0, 1.6);
        let model = Model::new(
            diag(&[k]),
            Some(diag(&[m])),
            Damping::Matrix(diag(&[c])),
            &[],
        )
        .unwrap();
        let ar1 = Ar1 {
            phi: 0.8,
            sigma: 1.0,
            dt: 0.05,
        };
        let problem = ModelPsd {
            model: &model,
            load_shape: vec![1.0],
            outputs: vec![0],
            frequencies: grid(0.0, 9.8, 50),
            load: LoadPsd::Ar1(ar1),
            modes: ModeOptions {
                count: 0,
                ..ModeOptions::default()
            },
        };
        let r = model_psd(&problem).unwrap();
        let full = response_psd_full(&gpuq_cpu::CpuBackend::new(), &problem).unwrap();
        for (f, &w) in problem.frequencies.iter().enumerate() {
            let want = ar1.psd(w) / ((k - m * w * w).powi(2) + (c * w).powi(2));
            assert!((r.outputs[0].psd[f] / want - 1.0).abs() < 1e-13);
            let v = full.as_slice()[f];
            assert!((v.re / want - 1.0).abs() < 1e-13 && v.im.abs() <= 1e-15 * v.re);
        }
    }

    /// The beam's full S_xx (seed 001's example 2, `uq psd --full`):
    /// Hermitian, its diagonal the outputs' PSDs, h the solution of the
    /// dynamic system, and the static limit the tip deflection.
    #[test]
    fn the_beams_full_psd_matrices_are_hermitian_and_consistent() {
        let beam = Beam::unit(12).unwrap();
        let model = beam.model().unwrap();
        let n = model.dofs();
        let mut shape = vec![0.0; n];
        shape[beam.tip()] = 1.0;
        let problem = ModelPsd {
            model: &model,
            load_shape: shape,
            outputs: (0..n).collect(),
            frequencies: vec![0.0, 1.0, 3.5, 20.0],
            load: LoadPsd::Ar1(Ar1 {
                phi: 0.5,
                sigma: 1.0,
                dt: 0.01,
            }),
            modes: ModeOptions {
                count: 0,
                ..ModeOptions::default()
            },
        };
        let (h, s_ff) = transfer_vectors(&problem).unwrap();
        // h solves (K - w^2 M + i w C) h = e_tip, C = a M + b K.
        let (k, m) = (&model.k, model.m.as_ref().unwrap());
        for (f, &w) in problem.frequencies.iter().enumerate() {
            let hf = &h[f * n..(f + 1) * n];
            for i in 0..n {
                let (kc, kv) = k.row(i);
                let (mc, mv) = m.row(i);
                let mut r = Complex64::new(0.0, 0.0);
                for (&j, &x) in kc.iter().zip(kv) {
                    r += hf[j as usize] * Complex64::new(x, w * beam.beta * x);
                }
                for (&j, &x) in mc.iter().zip(mv) {
                    r += hf[j as usize] * Complex64::new(-w * w * x, w * beam.alpha * x);
                }
                let e = if i == beam.tip() { 1.0 } else { 0.0 };
                assert!((r - e).norm() < 1e-9, "w = {w}, row {i}: {r}");
            }
        }
        let r = model_psd(&problem).unwrap();
        let full = response_psd_full(&gpuq_cpu::CpuBackend::new(), &problem).unwrap();
        let s = full.as_slice();
        for f in 0..problem.frequencies.len() {
            for i in 0..n {
                let d = s[f * n * n + i * n + i];
                let want = r.outputs[i].psd[f];
                assert!((d.re - want).abs() <= 1e-14 * want);
                assert!(d.im.abs() <= 1e-15 * d.re.abs());
                for j in 0..n {
                    let (a, b) = (s[f * n * n + i * n + j], s[f * n * n + j * n + i]);
                    assert!((a - b.conj()).norm() <= 1e-15 * a.norm());
                }
            }
        }
        // Static limit: |h_tip(0)|^2 = (L^3 / 3EI)^2.
        let tip0 = r.outputs[beam.tip()].psd[0] / s_ff[0];
        assert!((tip0.sqrt() / beam.tip_deflection(1.0) - 1.0).abs() < 1e-10);
    }

    #[test]
    fn modal_psd_converges_to_the_direct_solve() {
        let beam = Beam::unit(60).unwrap();
        let model = Model::new(
            beam.stiffness().to_csr().unwrap(),
            Some(beam.mass().to_csr().unwrap()),
            Damping::Rayleigh {
                a: beam.alpha,
                b: beam.beta,
            },
            &[],
        )
        .unwrap();
        let n = model.dofs();
        // Base excitation: p = M r, r = 1 on the translations (even DOFs), for
        // which the modal mass is the classical effective mass.
        let r: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 1.0 } else { 0.0 }).collect();
        let shape = model.m.as_ref().unwrap().mul_vec(&r).unwrap();
        let mut problem = ModelPsd {
            model: &model,
            load_shape: shape,
            outputs: vec![beam.tip(), n / 2],
            frequencies: grid(0.1, 200.0, 400),
            load: LoadPsd::KanaiTajimi {
                s0: 1.0,
                wg: 15.0,
                zg: 0.6,
            },
            modes: ModeOptions::default(),
        };
        problem.modes.count = 0;
        let direct = model_psd(&problem).unwrap();
        let mut last_error = f64::INFINITY;
        let mut checked = false;
        for count in [1, 2, 3, 6, 12, 24, 40] {
            problem.modes.count = count;
            let r = model_psd(&problem).unwrap();
            let summary = r.modal.as_ref().unwrap();
            let err = r
                .outputs
                .iter()
                .zip(&direct.outputs)
                .map(|(a, b)| (a.rms - b.rms).abs() / b.rms)
                .fold(0.0, f64::max);
            // Decreasing, down to the round-off of the two paths.
            assert!(
                err < last_error || err < 1e-7,
                "{count} modes: {err} after {last_error}"
            );
            last_error = err;
            if summary.mass_captured >= 0.99 {
                checked = true;
                assert!(
                    err < 0.01,
                    "{count} modes capture {} but err {err}",
                    summary.mass_captured
                );
                // The tip's PSD pointwise, where it matters (above 1e-3 of its peak).
                let (a, b) = (&r.outputs[0].psd, &direct.outputs[0].psd);
                let peak = b.iter().cloned().fold(0.0, f64::max);
                for (x, y) in a.iter().zip(b) {
                    if *y > 1e-3 * peak {
                        assert!((x - y).abs() < 0.01 * y, "{x} vs {y}");
                    }
                }
            }
        }
        assert!(checked && last_error < 0.01);
        // The cross-PSDs: Hermitian, the PSDs on the diagonal, coherence 1,
        // and the modal path's (all modes) the direct path's, phase included.
        problem.modes.count = n;
        let all = model_psd(&problem).unwrap();
        for (k, (m, d)) in all.cross.iter().zip(&direct.cross).enumerate() {
            let (sxx, syy) = (d.re[0][0], d.re[1][1]);
            assert_eq!(sxx, direct.outputs[0].psd[k]);
            assert_eq!(syy, direct.outputs[1].psd[k]);
            assert_eq!((d.re[0][1], d.im[0][1]), (d.re[1][0], -d.im[1][0]));
            assert_eq!((d.im[0][0], d.im[1][1]), (0.0, 0.0));
            let sxy2 = d.re[0][1].powi(2) + d.im[0][1].powi(2);
            assert!(
                (sxy2 - sxx * syy).abs() <= 1e-12 * sxx * syy,
                "coherence at {k}"
            );
            let scale = (sxx * syy).sqrt();
            for (x, y) in [(m.re[0][1], d.re[0][1]), (m.im[0][1], d.im[0][1])] {
                assert!((x - y).abs() <= 1e-6 * scale, "{k}: {x} vs {y} ({scale})");
            }
        }
    }

    #[test]
    fn load_spectra_and_bad_problems() {
        let kt = LoadPsd::parse("kanai-tajimi:0.5:10:0.3").unwrap();
        assert!((kt.value(0.0) - 0.5).abs() < 1e-15);
        assert!(kt.value(10.0) > kt.value(0.0));
        assert!(LoadPsd::parse("white:-1").is_err());
        assert!(LoadPsd::parse("ar1:1.5:1:0.1").is_err());
        assert!(LoadPsd::parse("kanai-tajimi:1:2").is_err());
        let path = std::env::temp_dir().join(format!("gpuq-psd-{}.csv", std::process::id()));
        std::fs::write(&path, "# w, S\n0, 1\n2, 3\n4, 0\n").unwrap();
        let t = LoadPsd::parse(path.to_str().unwrap()).unwrap();
        assert_eq!(t.value(1.0), 2.0);
        assert_eq!(t.value(3.0), 1.5);
        assert_eq!(t.value(5.0), 0.0);
        std::fs::write(&path, "0, 1\n0, 3\n").unwrap();
        assert!(LoadPsd::parse(path.to_str().unwrap()).is_err());
        let _ = std::fs::remove_file(&path);
        let (k, m) = (diag(&[1.0, 2.0, 3.0]), diag(&[1.0; 3]));
        let ok_model = Model::new(k.clone(), Some(m.clone()), Damping::Modal(0.05), &[1]).unwrap();
        let ok = ModelPsd {
            model: &ok_model,
            load_shape: vec![1.0, 1.0],
            outputs: vec![0],
            frequencies: vec![0.5, 1.0],
            load: LoadPsd::White { s0: 1.0 },
            modes: ModeOptions {
                count: 1,
                ..ModeOptions::default()
            },
        };
        assert!(model_psd(&ok).is_ok());
        let no_mass = Model::new(k.clone(), None, Damping::Modal(0.05), &[]).unwrap();
        let undamped = Model::new(k, Some(m), Damping::None, &[]).unwrap();
        for bad in [
            ModelPsd {
                outputs: vec![1],
                ..ok.clone()
            },
            ModelPsd {
                frequencies: vec![1.0, 0.5],
                ..ok.clone()
            },
            ModelPsd {
                load_shape: vec![0.0, 0.0],
                ..ok.clone()
            },
            ModelPsd {
                modes: ModeOptions {
                    count: 0,
                    ..ok.modes
                },
                ..ok.clone()
            },
            ModelPsd {
                modes: ModeOptions {
                    count: 3,
                    ..ok.modes
                },
                ..ok.clone()
            },
            ModelPsd {
                model: &no_mass,
                load_shape: vec![1.0; 3],
                ..ok.clone()
            },
            ModelPsd {
                model: &undamped,
                load_shape: vec![1.0; 3],
                ..ok.clone()
            },
        ] {
            assert!(model_psd(&bad).is_err());
        }
    }
}
