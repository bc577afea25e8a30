//! What a Monte Carlo solve is asked to do.

use crate::setup::Layout;
use gpuq_core::{Error, Result};
use gpuq_kernels::walk::Stop;
use serde::{Deserialize, Serialize};

/// Which Neumann-Ulam method estimates the solution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum McMethod {
    /// Histories start at the entry they estimate and walk the rows of H; each
    /// entry gets its own histories.
    Forward,
    /// Histories start at states drawn from |b^| and walk the rows of H^T,
    /// tallying into every state they visit; one set of histories estimates all
    /// entries.
    #[default]
    Adjoint,
}

impl McMethod {
    /// The name used by the CLI and in reports (`mc-forward`, `mc-adjoint`).
    pub fn name(self) -> &'static str {
        match self {
            McMethod::Forward => "mc-forward",
            McMethod::Adjoint => "mc-adjoint",
        }
    }
}

/// How a history turns into a score.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Estimator {
    /// Tally at every state the walk collides with.
    #[default]
    Collision,
    /// Tally the mean of the next collision given the current state (lower
    /// variance; the adjoint form costs one tally per row entry per move).
    Expected,
}

impl Estimator {
    /// Parses `collision` or `expected`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "collision" => Ok(Estimator::Collision),
            "expected" | "expected-value" => Ok(Estimator::Expected),
            _ => Err(Error::InvalidArgument(format!(
                "unknown estimator '{s}' (expected collision or expected)"
            ))),
        }
    }

    /// The name used by the CLI and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Estimator::Collision => "collision",
            Estimator::Expected => "expected",
        }
    }
}

/// How the forward method's histories map to GPU threads (seed 000 §6). The CPU
/// backend runs one entry's histories in one task either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mapping {
    /// One thread runs all histories of an entry and stores its sum: no atomics.
    #[default]
    ThreadPerEntry,
    /// One thread per history; histories of one entry add into it atomically.
    ThreadPerHistory,
}

impl Mapping {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::ThreadPerEntry => "thread-per-entry",
            Mapping::ThreadPerHistory => "thread-per-history",
        }
    }
}

/// Options of a Monte Carlo solve. `Default` gives the adjoint collision method
/// with 10^5 histories, weight cutoff 1e-9, at most 10^4 moves, seed 1, 10
/// batches, the structure-of-arrays layout and no tolerance.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct McOptions {
    /// Forward or adjoint.
    pub method: McMethod,
    /// Total histories. The forward method runs `max(1, round(histories / n))`
    /// per entry.
    pub histories: u64,
    /// Collision or expected value.
    pub estimator: Estimator,
    /// Most moves of one history (the seed's fixed length 10^4 by default).
    pub max_steps: u32,
    /// Relative weight cutoff (0: none, histories run `max_steps` moves).
    pub cutoff: f64,
    /// Seed of the ChaCha8 streams (the key); history h uses stream h.
    pub seed: u64,
    /// Independent batches for the standard error (at least 2 for an error bar).
    pub batches: u32,
    /// Memory layout of the walk data.
    pub layout: Layout,
    /// Forward method's thread mapping on the GPU.
    pub mapping: Mapping,
    /// The relative residual the estimate is held to (its [`crate::McStatus`]
    /// is `converged` or `not_converged`); `None`: no tolerance, the status
    /// says only whether the estimate beats x = 0.
    pub tolerance: Option<f64>,
}

impl Default for McOptions {
    fn default() -> Self {
        McOptions {
            method: McMethod::Adjoint,
            histories: 100_000,
            estimator: Estimator::Collision,
            max_steps: 10_000,
            cutoff: 1e-9,
            seed: 1,
            batches: 10,
            layout: Layout::Soa,
            mapping: Mapping::ThreadPerEntry,
            tolerance: None,
        }
    }
}

impl McOptions {
    /// Errors unless the options make sense (at least one history, one batch, a
    /// finite non-negative cutoff below 1).
    pub fn validate(&self) -> Result<()> {
        if self.histories == 0 {
            return Err(Error::InvalidArgument(
                "histories must be at least 1".into(),
            ));
        }
        if self.batches == 0 {
            return Err(Error::InvalidArgument("batches must be at least 1".into()));
        }
        if !(self.cutoff.is_finite() && (0.0..1.0).contains(&self.cutoff)) {
            return Err(Error::InvalidArgument(format!(
                "weight cutoff {} is not in [0, 1)",
                self.cutoff
            )));
        }
        if let Some(t) = self.tolerance {
            if !(t.is_finite() && t > 0.0) {
                return Err(Error::InvalidArgument(format!(
                    "tolerance {t} is not a positive number"
                )));
            }
        }
        Ok(())
    }

    /// The stopping rule of one history.
    pub fn stop(&self) -> Stop {
        Stop {
            max_steps: self.max_steps,
            cutoff: self.cutoff,
        }
    }
}
