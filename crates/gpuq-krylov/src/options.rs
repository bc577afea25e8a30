//! Solver options and choices.

use gpuq_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Stopping rules of an iterative solve. Stops when
/// `||r_k|| <= max(rtol * ||b||, atol)` or after `max_iter` iterations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KrylovOptions {
    /// Relative residual tolerance (default 1e-8).
    pub rtol: f64,
    /// Absolute residual tolerance (default 0: relative only).
    pub atol: f64,
    /// Iteration cap (default `None`: 10 n, at least 100).
    pub max_iter: Option<usize>,
    /// Keep the residual history in the report (default true; 8 bytes per iteration).
    pub record_history: bool,
    /// Stagnation: the solve ends with [`Error::Breakdown`] (quantity
    /// [`STAGNATION`](crate::STAGNATION)) when the smallest residual seen has not
    /// decreased by 1% for this many iterations (default 500; 0 never).
    pub stagnation_window: usize,
    /// Residual replacements: when the recurrence meets the tolerance but the
    /// true residual b - A x does not, the method restarts from the true residual
    /// (keeping x), at most this many times (default 3), before it reports
    /// [`gpuq_core::SolveStatus::AccuracyLimit`] with `converged: false`.
    pub max_residual_replacements: usize,
}

impl Default for KrylovOptions {
    fn default() -> Self {
        KrylovOptions {
            rtol: 1e-8,
            atol: 0.0,
            max_iter: None,
            record_history: true,
            stagnation_window: 500,
            max_residual_replacements: 3,
        }
    }
}

impl KrylovOptions {
    /// Checks the tolerances are finite and non-negative and not both zero.
    pub fn validate(&self) -> Result<()> {
        let ok = |t: f64| t.is_finite() && t >= 0.0;
        if !ok(self.rtol) || !ok(self.atol) || (self.rtol == 0.0 && self.atol == 0.0) {
            return Err(Error::InvalidArgument(format!(
                "tolerances must be finite, non-negative and not both zero (rtol = {}, atol = {})",
                self.rtol, self.atol
            )));
        }
        Ok(())
    }

    /// The iteration cap for a system of `n` unknowns.
    pub fn max_iter_for(&self, n: usize) -> usize {
        self.max_iter.unwrap_or_else(|| (10 * n).max(100))
    }
}

/// The Krylov method to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Method {
    /// Conjugate gradients (Hermitian positive definite systems).
    #[default]
    Cg,
    /// BiCGSTAB (any nonsingular system).
    Bicgstab,
    /// BiCGSTAB(l): `l` BiCG steps per cycle, then a degree-`l` minimal-residual
    /// polynomial (any nonsingular system).
    BicgstabL {
        /// BiCG steps per cycle (1 is BiCGSTAB).
        l: usize,
    },
    /// Transpose-free QMR (any nonsingular system).
    Tfqmr,
    /// QMR on the two-sided Lanczos process; needs the operator's transpose.
    Qmr,
    /// GMRES restarted every `restart` steps (any nonsingular system).
    Gmres {
        /// Basis vectors kept before a restart.
        restart: usize,
    },
}

impl Method {
    /// The restart length of plain `gmres`.
    pub const DEFAULT_GMRES_RESTART: usize = 30;
    /// The `l` of plain `bicgstab-l` (seed 003's choice).
    pub const DEFAULT_BICGSTAB_L: usize = 8;
    /// The names [`Method::parse`] accepts, each alone or, for `bicgstab-l` and `gmres`,
    /// followed by `:` and its parameter.
    pub const NAMES: &'static [&'static str] =
        &["cg", "bicgstab", "bicgstab-l", "tfqmr", "qmr", "gmres"];
    /// What [`Method::parse`] accepts.
    pub const SPELLINGS: &'static str = "cg, bicgstab, bicgstab-l[:L], tfqmr, qmr, gmres[:M]";

    /// Parses `cg` (or `pcg`), `bicgstab`, `bicgstab-l` (l = 8), `bicgstab-l:L`,
    /// `tfqmr`, `qmr`, `gmres` (restart 30) or `gmres:M`.
    pub fn parse(s: &str) -> Result<Self> {
        let positive = |what: &str, v: &str| match v.parse::<usize>() {
            Ok(k) if k > 0 => Ok(k),
            _ => Err(Error::InvalidArgument(format!(
                "{what} '{v}' is not a positive integer (in '{s}')"
            ))),
        };
        match s.split_once(':') {
            None => match s {
                "cg" | "pcg" => Ok(Method::Cg),
                "bicgstab" => Ok(Method::Bicgstab),
                "bicgstab-l" => Ok(Method::BicgstabL {
                    l: Self::DEFAULT_BICGSTAB_L,
                }),
                "tfqmr" => Ok(Method::Tfqmr),
                "qmr" => Ok(Method::Qmr),
                "gmres" => Ok(Method::Gmres {
                    restart: Self::DEFAULT_GMRES_RESTART,
                }),
                _ => Err(Self::unknown(s)),
            },
            Some(("bicgstab-l", l)) => Ok(Method::BicgstabL {
                l: positive("BiCGSTAB l", l)?,
            }),
            Some(("gmres", m)) => Ok(Method::Gmres {
                restart: positive("GMRES restart", m)?,
            }),
            Some(_) => Err(Self::unknown(s)),
        }
    }

    fn unknown(s: &str) -> Error {
        Error::InvalidArgument(format!(
            "unknown method '{s}' (available: {})",
            Self::SPELLINGS
        ))
    }
}

/// The preconditioner to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Preconditioner {
    /// No preconditioning.
    #[default]
    None,
    /// Jacobi: the inverse of the diagonal.
    Jacobi,
    /// 2x2-block Jacobi: the inverse of the 2x2 block diagonal.
    Block2,
}

impl Preconditioner {
    /// The names [`Preconditioner::parse`] accepts.
    pub const NAMES: &'static [&'static str] = &["none", "jacobi", "block2"];

    /// Parses `none`, `jacobi` or `block2`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Preconditioner::None),
            "jacobi" => Ok(Preconditioner::Jacobi),
            "block2" => Ok(Preconditioner::Block2),
            _ => Err(Error::InvalidArgument(format!(
                "unknown preconditioner '{s}' (available: none, jacobi, block2)"
            ))),
        }
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Preconditioner::None => "none",
            Preconditioner::Jacobi => "jacobi",
            Preconditioner::Block2 => "block2",
        }
    }
}
