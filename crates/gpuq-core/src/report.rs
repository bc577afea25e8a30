//! The serialisable result of an iterative solve.

use crate::Stats;
use serde::{Deserialize, Serialize};

/// Why a solve ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SolveStatus {
    /// The true residual ||b - A x|| met the tolerance.
    Converged,
    /// The iteration cap was reached first.
    #[default]
    MaxIterations,
    /// The residual stopped decreasing (no 1% decrease within the stagnation window).
    Stagnated,
    /// A scalar the method divides by vanished or turned non-finite.
    Breakdown,
    /// The recurrence met the tolerance but the true residual did not, even after
    /// restarting from the true residual (residual replacement): the accuracy the
    /// arithmetic can attain on this system lies above the tolerance.
    AccuracyLimit,
    /// A stop was requested ([`crate::interrupt::request`], Ctrl-C in the CLI)
    /// and the solve ended at the next iteration with the iterate so far.
    Interrupted,
}

impl SolveStatus {
    /// The name used in reports (`"converged"`, `"max_iterations"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SolveStatus::Converged => "converged",
            SolveStatus::MaxIterations => "max_iterations",
            SolveStatus::Stagnated => "stagnated",
            SolveStatus::Breakdown => "breakdown",
            SolveStatus::AccuracyLimit => "accuracy_limit",
            SolveStatus::Interrupted => "interrupted",
        }
    }
}

/// What a solver reports: how it went, measured honestly.
///
/// `relative_residual` is the *true* residual ||b - A x|| / ||b|| of the returned
/// iterate, recomputed with a fresh operator application at the end, not the
/// value the recurrence carried (that one is `recurrence_residual`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SolveReport {
    /// Method name (`"cg"`, `"pcg"`, ...).
    pub method: String,
    /// Preconditioner name (`"none"`, `"jacobi"`, ...).
    pub preconditioner: String,
    /// Backend name (`"cpu"`, `"cuda:0"`, ...).
    pub backend: String,
    /// Element type (`"f64"`, `"c64"`, ...).
    pub scalar: String,
    /// Number of unknowns.
    pub n: usize,
    /// How the backend stored the matrix (`csr`, `sell:32:1`, `bsr:3`; empty when the
    /// solve was given an operator rather than a matrix).
    pub layout: String,
    /// Whether the true residual met the tolerance (`relative_residual <=
    /// tolerance`); never `true` on the recurrence's word alone.
    pub converged: bool,
    /// Why the solve ended; [`SolveStatus::Converged`] exactly when `converged`.
    pub status: SolveStatus,
    /// The relative tolerance the true residual was held to: max(rtol ||b||, atol) / ||b||
    /// (the absolute one when b = 0).
    pub tolerance: f64,
    /// How many times the solve restarted from its true residual because the
    /// recurrence had met the tolerance and the true residual had not.
    pub residual_replacements: usize,
    /// Iterations performed.
    pub iterations: usize,
    /// True relative residual ||b - A x|| / ||b|| of the returned iterate
    /// (the absolute residual when b = 0).
    pub relative_residual: f64,
    /// Relative residual as carried by the method's recurrence at the last iteration.
    pub recurrence_residual: f64,
    /// Recurrence relative residual after each iteration (index 0: the initial guess).
    pub residual_history: Vec<f64>,
    /// Wall-clock time of the solve in seconds (setup excluded).
    pub time_s: f64,
    /// Wall-clock time of the setup (uploads, preconditioner construction) in seconds,
    /// when the solve was started from host data; 0 otherwise.
    pub setup_time_s: f64,
    /// What the backend did during the solve.
    pub stats: Stats,
}

impl SolveReport {
    /// Whether the true residual of the returned iterate meets the tolerance.
    pub fn tolerance_met(&self) -> bool {
        self.relative_residual <= self.tolerance
    }
}
