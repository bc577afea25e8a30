//! Sampling designs: plain Monte Carlo, Latin hypercube and scrambled Sobol
//! (the per-sample draws are in [`gpuq_kernels::uq::sampling`], shared by the
//! backends).

use gpuq_kernels::uq::sampling::{LATIN_HYPERCUBE, MONTE_CARLO, SOBOL_FIRST};
use serde::Serialize;

/// How samples draw their normals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Design {
    /// Independent draws from each sample's ChaCha8 stream.
    #[default]
    MonteCarlo,
    /// Latin hypercube in every dimension: each of the S equal-probability
    /// strata of every variable holds exactly one sample (keyed permutations,
    /// uniform position inside the stratum, inverse normal CDF).
    LatinHypercube,
    /// The first variable (the static tip load) from the Owen-scrambled
    /// one-dimensional Sobol sequence, the others by Monte Carlo. Static
    /// response only (Sobol over the SDOF's per-step noise is not done).
    Sobol,
}

impl Design {
    /// The code the kernels take.
    pub fn code(self) -> u32 {
        match self {
            Design::MonteCarlo => MONTE_CARLO,
            Design::LatinHypercube => LATIN_HYPERCUBE,
            Design::Sobol => SOBOL_FIRST,
        }
    }

    /// `mc`, `lhs` or `sobol`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "mc" => Some(Design::MonteCarlo),
            "lhs" => Some(Design::LatinHypercube),
            "sobol" => Some(Design::Sobol),
            _ => None,
        }
    }
}
