//! From A and b to what the walks read: H = I - D^-1 A, b^ = D^-1 b, and the
//! transition data of the forward and adjoint walks in both layouts.

use crate::spectral::{spectral_radius, SpectralEstimate};
use gpuq_core::{Error, Result};
use gpuq_kernels::walk::{AosRows, Record, SoaRows};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How the walk data of one matrix entry is laid out in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// Separate arrays of cumulative probabilities, weights, values and columns.
    #[default]
    Soa,
    /// One 32-byte record `{h, cdf, w, col}` per entry (seed 000 §5).
    Aos,
}

impl Layout {
    /// The name used by the CLI and in reports (`soa`, `aos`).
    pub fn name(self) -> &'static str {
        match self {
            Layout::Soa => "soa",
            Layout::Aos => "aos",
        }
    }
}

/// The transition data of one walk direction over an n-state matrix M (H for the
/// forward walk, H^T for the adjoint walk), in both layouts: per row s the entries
/// j with M_sj != 0, their cumulative probabilities P_sj = |M_sj| / sum_j |M_sj|,
/// weight factors W_sj = M_sj / P_sj (= sign(M_sj) times the row's absolute sum)
/// and values M_sj. Memory: 28 bytes per entry in SoA plus 32 in AoS. Built only
/// by [`McSetup`], so every column is a valid state.
#[derive(Clone, Debug)]
pub struct WalkData {
    /// Row starts, n + 1 entries.
    pub(crate) ptr: Vec<u32>,
    /// Cumulative probabilities; the last of each row is exactly 1.
    pub(crate) cdf: Vec<f64>,
    /// Weight factors.
    pub(crate) w: Vec<f64>,
    /// Matrix values.
    pub(crate) h: Vec<f64>,
    /// Target states.
    pub(crate) col: Vec<u32>,
    /// The same entries as records.
    pub(crate) records: Vec<Record>,
}

impl WalkData {
    /// Builds the data of the rows of `m` (entries equal to zero are dropped).
    /// Cost: O(nnz).
    pub(crate) fn from_rows(m: &Csr<f64>) -> Self {
        let n = m.nrows();
        let mut ptr = Vec::with_capacity(n + 1);
        let (mut cdf, mut w, mut h, mut col) = (vec![], vec![], vec![], vec![]);
        ptr.push(0u32);
        for s in 0..n {
            let (cols, vals) = m.row(s);
            let total: f64 = vals.iter().map(|v| v.abs()).sum();
            let mut acc = 0.0;
            let first = h.len();
            for (&j, &v) in cols.iter().zip(vals) {
                if v == 0.0 {
                    continue;
                }
                acc += v.abs();
                cdf.push(acc / total);
                w.push(v.signum() * total);
                h.push(v);
                col.push(j);
            }
            if h.len() > first {
                *cdf.last_mut().expect("row has an entry") = 1.0;
            }
            ptr.push(h.len() as u32);
        }
        let records = (0..h.len())
            .map(|k| Record {
                h: h[k],
                cdf: cdf[k],
                w: w[k],
                col: col[k],
                pad: 0,
            })
            .collect();
        WalkData {
            ptr,
            cdf,
            w,
            h,
            col,
            records,
        }
    }

    /// Number of states.
    pub fn n(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Number of entries.
    pub fn nnz(&self) -> usize {
        self.h.len()
    }

    /// The structure-of-arrays view the walks read.
    pub fn soa(&self) -> SoaRows<'_> {
        SoaRows {
            ptr: &self.ptr,
            cdf: &self.cdf,
            w: &self.w,
            h: &self.h,
            col: &self.col,
        }
    }

    /// The array-of-records view the walks read.
    pub fn aos(&self) -> AosRows<'_> {
        AosRows {
            ptr: &self.ptr,
            rec: &self.records,
        }
    }

    /// y = M x over the stored rows (M = H or H^T). Cost: one pass over the entries.
    pub fn mul(&self, x: &[f64]) -> Vec<f64> {
        (0..self.n())
            .into_par_iter()
            .map(|s| {
                let (a, b) = (self.ptr[s] as usize, self.ptr[s + 1] as usize);
                (a..b).map(|k| self.h[k] * x[self.col[k] as usize]).sum()
            })
            .collect()
    }

    /// y = M^ x with M^_sj = M_sj^2 / P_sj, the matrix whose spectral radius
    /// decides whether the walk's score has finite variance. Cost: one pass.
    pub fn mul_variance(&self, x: &[f64]) -> Vec<f64> {
        (0..self.n())
            .into_par_iter()
            .map(|s| {
                let (a, b) = (self.ptr[s] as usize, self.ptr[s + 1] as usize);
                (a..b)
                    .map(|k| self.h[k] * self.w[k] * x[self.col[k] as usize])
                    .sum()
            })
            .collect()
    }
}

/// Everything the Monte Carlo methods need about A (not about b): the forward and
/// adjoint walk data, the Jacobi diagonal, and the spectral radii that decide
/// whether the methods converge.
#[derive(Clone, Debug)]
pub struct McSetup {
    diagonal: Vec<f64>,
    forward: Arc<WalkData>,
    adjoint: Arc<WalkData>,
    /// Power-iteration estimate of rho(H).
    pub rho_h: SpectralEstimate,
    /// Power-iteration estimate of rho(H^), H^_sj = H_sj^2 / P_sj with the forward
    /// probabilities: below 1, the forward scores have finite variance.
    pub rho_hat_forward: SpectralEstimate,
    /// The same for the adjoint walk (H^T and its probabilities).
    pub rho_hat_adjoint: SpectralEstimate,
    /// Warnings for the user (infinite variance, an unsettled estimate of rho(H)).
    pub warnings: Vec<String>,
}

impl McSetup {
    /// Checks A (square, finite, non-zero diagonal), builds the walk data and
    /// estimates the spectral radii. Errors when rho(H) >= 1: the Neumann series
    /// the methods sum diverges. rho(H^) >= 1 is a warning (infinite variance).
    /// Cost: O(nnz) plus up to `2 * power_iterations` passes over the entries per
    /// estimate.
    pub fn new(a: &Csr<f64>) -> Result<Self> {
        Self::with_power_iterations(a, 1000)
    }

    /// [`McSetup::new`] with a cap on the power iterations of each estimate.
    pub fn with_power_iterations(a: &Csr<f64>, power_iterations: usize) -> Result<Self> {
        const METHOD: &str = "monte carlo";
        if a.nrows() != a.ncols() {
            return Err(Error::Precondition {
                method: METHOD,
                reason: format!("the matrix is {} x {}, not square", a.nrows(), a.ncols()),
            });
        }
        if a.nnz() > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "{} nonzeros exceed the walk data's 32-bit offsets",
                a.nnz()
            )));
        }
        a.check_finite()?;
        let diagonal = a.diagonal();
        if let Some(i) = diagonal.iter().position(|&d| d == 0.0) {
            return Err(Error::Precondition {
                method: METHOD,
                reason: format!(
                    "the diagonal entry of row {} (1-based) is zero, so H = I - D^-1 A is undefined",
                    i + 1
                ),
            });
        }
        let h = iteration_matrix(a, &diagonal)?;
        let forward = Arc::new(WalkData::from_rows(&h));
        let adjoint = Arc::new(WalkData::from_rows(&h.transpose(false)));
        let rho_h = spectral_radius(a.nrows(), |x| forward.mul(x), power_iterations);
        if rho_h.value >= 1.0 {
            return Err(Error::Precondition {
                method: METHOD,
                reason: format!(
                    "rho(H) = {:.6} >= 1 for H = I - D^-1 A: the Neumann series diverges",
                    rho_h.value
                ),
            });
        }
        let rho_hat_forward =
            spectral_radius(a.nrows(), |x| forward.mul_variance(x), power_iterations);
        let rho_hat_adjoint =
            spectral_radius(a.nrows(), |x| adjoint.mul_variance(x), power_iterations);
        let mut warnings = vec![];
        if !rho_h.settled {
            warnings.push(format!(
                "the power iteration for rho(H) did not settle in {} steps (estimate {:.6}): \
                 the convergence check of the Neumann series is uncertain",
                rho_h.iterations, rho_h.value
            ));
        }
        for (what, r) in [("forward", rho_hat_forward), ("adjoint", rho_hat_adjoint)] {
            if r.value >= 1.0 {
                warnings.push(format!(
                    "rho(H^) = {:.6} >= 1 for the {what} walk: its estimates have infinite variance",
                    r.value
                ));
            }
        }
        Ok(McSetup {
            diagonal,
            forward,
            adjoint,
            rho_h,
            rho_hat_forward,
            rho_hat_adjoint,
            warnings,
        })
    }

    /// Number of unknowns.
    pub fn n(&self) -> usize {
        self.diagonal.len()
    }

    /// The diagonal of A.
    pub fn diagonal(&self) -> &[f64] {
        &self.diagonal
    }

    /// Rows of H = I - D^-1 A: the forward walk's data.
    pub fn forward(&self) -> &Arc<WalkData> {
        &self.forward
    }

    /// Rows of H^T: the adjoint walk's data.
    pub fn adjoint(&self) -> &Arc<WalkData> {
        &self.adjoint
    }

    /// b^ = D^-1 b, after checking b's length and finiteness.
    pub fn scaled_rhs(&self, b: &[f64]) -> Result<Vec<f64>> {
        gpuq_core::check_same_len("monte carlo right-hand side", self.n(), b.len())?;
        if let Some(index) = b.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                what: "right-hand side".into(),
                index,
            });
        }
        let bhat: Vec<f64> = b.iter().zip(&self.diagonal).map(|(b, d)| b / d).collect();
        if let Some(index) = bhat.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                what: "D^-1 b (right-hand side over the diagonal)".into(),
                index,
            });
        }
        Ok(bhat)
    }
}

/// H = I - D^-1 A with the (zero) diagonal dropped.
fn iteration_matrix(a: &Csr<f64>, d: &[f64]) -> Result<Csr<f64>> {
    let n = a.nrows();
    let mut ptr = Vec::with_capacity(n + 1);
    let (mut cols, mut vals) = (vec![], vec![]);
    ptr.push(0);
    for (i, &di) in d.iter().enumerate() {
        let (c, v) = a.row(i);
        for (&j, &aij) in c.iter().zip(v) {
            if j as usize != i && aij != 0.0 {
                cols.push(j);
                vals.push(-aij / di);
            }
        }
        ptr.push(cols.len());
    }
    Csr::try_new(n, n, ptr, cols, vals)
}
