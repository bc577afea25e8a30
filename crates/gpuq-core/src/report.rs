//! The serialisable result of an iterative solve.

use crate::Stats;
use serde::{Deserialize, Serialize};

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
    /// Whether the stopping criterion was met.
    pub converged: bool,
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
