//! The choices of an AMG setup and cycle, with their parsers.

use gpuq_core::{Error, Result};
use gpuq_sparse::Layout;
use serde::{Deserialize, Serialize};

/// How the coarse levels are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Coarsening {
    /// Smoothed aggregation: distance-2 maximal-independent-set aggregates, a
    /// tentative prolongator from the near-null-space vectors (thin QR per
    /// aggregate), smoothed by one weighted-Jacobi step.
    #[default]
    SmoothedAggregation,
    /// Seed 002's method: greedy coarse-node selection with the Mandel-Brezina
    /// test, interpolation with weights 1/n_i per block from the n_i strongly
    /// connected coarse nodes.
    Seed,
}

impl Coarsening {
    /// Parses `sa` or `seed`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "sa" => Ok(Coarsening::SmoothedAggregation),
            "seed" => Ok(Coarsening::Seed),
            _ => Err(Error::InvalidArgument(format!(
                "unknown AMG coarsening '{s}' (available: sa, seed)"
            ))),
        }
    }

    /// The name used in reports (`sa`, `seed`).
    pub fn name(self) -> &'static str {
        match self {
            Coarsening::SmoothedAggregation => "sa",
            Coarsening::Seed => "seed",
        }
    }
}

/// The smoother of every level but the coarsest ([`Smoother::default_for`]
/// gives the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Smoother {
    /// Damped block Jacobi (block size of the level; 1 is point Jacobi):
    /// x += omega D^-1 (b - A x), omega = `jacobi_damping` / rho(D^-1 A) per
    /// level (4 / (3 rho) by default).
    Jacobi,
    /// l1-Jacobi: D_l1 = D + diag(sum of |a_ij| outside the diagonal block of row
    /// i), undamped; convergent for any symmetric positive definite A.
    L1Jacobi,
    /// Chebyshev polynomial of D^-1 A of the given degree (2 to 4) over
    /// [lambda_max / [`crate::CHEBYSHEV_RATIO`], lambda_max], lambda_max 1.1
    /// times the Lanczos estimate ([`crate::chebyshev_interval`]).
    Chebyshev {
        /// Polynomial degree (matrix products per application).
        degree: usize,
    },
    /// Multicolour symmetric block Gauss-Seidel ([`crate::coloring`]): the
    /// nodes of each colour of a greedy colouring updated together, colours
    /// swept up and back down (2 c - 1 colour updates per application for c
    /// colours; two colours on a 7-point Laplacian). Undamped.
    GaussSeidel,
}

impl Smoother {
    /// The default smoother of a problem with `block` unknowns per node:
    /// Chebyshev of degree 3 for scalar problems, one damped-Jacobi sweep for
    /// blocks. Chosen by measurement on finite-element systems of
    /// unstructured meshes (`docs/benchmarks.md`, "AMG on finite-element
    /// models"): on P1 and P2 Poisson, anisotropic and jumping-coefficient
    /// diffusion, Chebyshev takes at most 1.05x the PCG iterations of
    /// PyAMG's smoothed aggregation (symmetric Gauss-Seidel) where one Jacobi
    /// sweep takes up to 1.8x, at the same time to solution within 6% on the
    /// CPU and the GPU (three products an application, two thirds of the
    /// iterations), and it needs no colouring (Gauss-Seidel's colouring
    /// makes its setup the slowest on both backends). On 2D and 3D
    /// elasticity with their rigid-body modes, one Jacobi sweep already takes
    /// at most PyAMG's iterations and is 4-16% faster than Chebyshev, whose
    /// block steps are not fused. O(1).
    pub fn default_for(block: usize) -> Smoother {
        if block <= 1 {
            Smoother::Chebyshev { degree: 3 }
        } else {
            Smoother::Jacobi
        }
    }

    /// The names [`Smoother::parse`] accepts (`chebyshev` also as `chebyshev:D`).
    pub const NAMES: &'static [&'static str] = &["jacobi", "l1", "chebyshev", "gs"];

    /// Parses `jacobi`, `l1`, `chebyshev` (degree 3), `chebyshev:D` (D in 2..=4) or
    /// `gs` (`gauss-seidel`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.split_once(':') {
            None => match s {
                "jacobi" => Ok(Smoother::Jacobi),
                "l1" | "l1-jacobi" => Ok(Smoother::L1Jacobi),
                "chebyshev" => Ok(Smoother::Chebyshev { degree: 3 }),
                "gs" | "gauss-seidel" => Ok(Smoother::GaussSeidel),
                _ => Err(Self::unknown(s)),
            },
            Some(("chebyshev", d)) => match d.parse::<usize>() {
                Ok(degree @ 2..=4) => Ok(Smoother::Chebyshev { degree }),
                _ => Err(Error::InvalidArgument(format!(
                    "Chebyshev degree '{d}' must be 2, 3 or 4"
                ))),
            },
            Some(_) => Err(Self::unknown(s)),
        }
    }

    fn unknown(s: &str) -> Error {
        Error::InvalidArgument(format!(
            "unknown AMG smoother '{s}' (available: jacobi, l1, chebyshev, chebyshev:D, gs)"
        ))
    }

    /// The name used in reports.
    pub fn name(self) -> String {
        match self {
            Smoother::Jacobi => "jacobi".into(),
            Smoother::L1Jacobi => "l1".into(),
            Smoother::Chebyshev { degree } => format!("chebyshev:{degree}"),
            Smoother::GaussSeidel => "gs".into(),
        }
    }
}

/// How the coarsest level is solved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CoarseSolver {
    /// Exactly: the (pseudo-)inverse of the coarsest matrix, stored dense and
    /// applied as one SpMV. Symmetric matrices get the Moore-Penrose
    /// pseudo-inverse from a rank-revealing pivoted Cholesky factorisation (so
    /// singular ones work);
    /// others an LU-based inverse.
    #[default]
    Direct,
    /// Seed 002's block-diagonal solve: the inverse of the coarsest matrix's
    /// diagonal blocks.
    BlockDiagonal,
}

/// The shape of the cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CycleKind {
    /// One coarse-level cycle per level.
    #[default]
    V,
    /// Two coarse-level cycles per level (the second on the residual the
    /// first left), except into the coarsest level, which is solved exactly.
    W,
}

impl CycleKind {
    /// Parses `v` or `w`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "v" | "V" => Ok(CycleKind::V),
            "w" | "W" => Ok(CycleKind::W),
            _ => Err(Error::InvalidArgument(format!(
                "unknown AMG cycle '{s}' (available: v, w)"
            ))),
        }
    }

    /// The name used in reports (`v`, `w`).
    pub fn name(self) -> &'static str {
        match self {
            CycleKind::V => "v",
            CycleKind::W => "w",
        }
    }
}

/// The largest block size (unknowns per node) and the most near-null-space
/// vectors the setup takes: the device setup's kernels hold a node's rows in
/// fixed arrays of this size.
pub const MAX_BLOCK: usize = gpuq_kernels::amg::MAX_SETUP_BLOCK;

/// Everything the setup and the cycle need besides the matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct AmgOptions {
    /// How coarse levels are made (default smoothed aggregation).
    pub coarsening: Coarsening,
    /// Unknowns per node, 1 to [`MAX_BLOCK`], numbered node by node
    /// (default 1): 3 for 3D elasticity, 2 for 2D elasticity or the
    /// bidomain system. Strength, aggregation and the smoothers' diagonal
    /// blocks work on nodes.
    pub block: usize,
    /// Strength threshold eps of the seed's test e_kl^2 >= eps e_kk e_ll on the
    /// block Frobenius-norm matrix (default 0.001; the test is squared, so this
    /// is the classical |a_kl| >= 0.032 sqrt(a_kk a_ll), PyAMG's symmetric
    /// measure with theta = sqrt(eps)). A level that would shrink by less
    /// than 10%, or (smoothed aggregation) hold more entries than the level
    /// above, is coarsened again with eps = 0 (every nonzero block strong).
    /// Nodes without strong connections join no aggregate.
    pub strength: f64,
    /// Smoother of the finest level, and of every level when
    /// `coarse_smoother` is `None` (default `None`: the default of the block
    /// size, [`Smoother::default_for`]: Chebyshev of degree 3 for block 1,
    /// damped Jacobi for larger blocks).
    pub smoother: Option<Smoother>,
    /// Smoother of the levels below the finest (default `None`: `smoother`).
    /// A multicolour Gauss-Seidel sweep launches 2 c - 1 colour updates and
    /// the coarse levels of smoothed aggregation need many colours (18-64 on
    /// a 3D Laplacian), so on a GPU Gauss-Seidel pays on the finest level and
    /// a Chebyshev or Jacobi smoother below it.
    pub coarse_smoother: Option<Smoother>,
    /// Smoothing applications before and after the coarse correction on the
    /// finest level, and on every level when `coarse_sweeps` is `None`
    /// (default 1).
    pub sweeps: usize,
    /// Smoothing applications on the levels below the finest (default
    /// `None`: `sweeps`).
    pub coarse_sweeps: Option<usize>,
    /// Stop coarsening at or below this many unknowns (default 100).
    pub coarse_size: usize,
    /// At most this many levels, the finest included (default 25).
    pub max_levels: usize,
    /// The coarsest solve (default exact).
    pub coarse_solver: CoarseSolver,
    /// V- or W-cycle (default V).
    pub cycle: CycleKind,
    /// Near-null-space vectors of the finest level for smoothed aggregation,
    /// 1 to [`MAX_BLOCK`] of them, each of length n (default: the constant of
    /// each block component, i.e. `block` vectors), such as the rigid-body
    /// modes of elasticity ([`crate::rigid_body_modes`]: 3 in 2D, 6 in 3D).
    /// The levels below the finest have one unknown per node and vector.
    /// Those of the vectors that A maps to zero (a floating structure's rigid
    /// motions) join the null space the setup handles explicitly
    /// ([`crate::Hierarchy::null_space`]).
    pub near_null_space: Option<Vec<Vec<f64>>>,
    /// Lanczos steps of the spectral-radius estimates (default 10, the
    /// iteration count MueLu and Ifpack2 give their eigenvalue estimates for
    /// prolongator damping and Chebyshev; the Chebyshev interval's upper end
    /// is 1.1 times the estimate, as their boost factor). On the
    /// finite-element systems of `benches/fem` the estimate of 10 steps is
    /// within 5% of 60 steps' on every level (15 steps: within 3%), and PCG
    /// takes the same iterations or one fewer; on two cores setup + solve of
    /// the jumping-coefficient system fell by about 7% (docs/benchmarks.md,
    /// issue 47).
    pub lanczos_steps: usize,
    /// The damped-Jacobi smoother's omega times rho(D^-1 A), in (0, 2)
    /// (default 4/3, the smoothed-aggregation literature's and PyAMG's
    /// choice). Larger values damp the high frequencies of a 3D Laplacian
    /// better (its optimal point-Jacobi smoother has 12/7 ~ 1.71: 19 PCG
    /// iterations instead of 22 on laplace3d:200 at 1.7, 20 at 1.6, and 21
    /// instead of 19 on laplace3d:100 at 1.87); approaching 2 the
    /// sweep stops smoothing and, at 2, an underestimated rho makes the cycle
    /// indefinite. The prolongator's smoothing keeps 4/3.
    pub jacobi_damping: f64,
}

/// The Jacobi damping of the device defaults ([`device_defaults`]): 1.7, the best measured
/// on the H100 for scalar problems (see [`AmgOptions::jacobi_damping`]).
pub const DEVICE_JACOBI_DAMPING: f64 = 1.7;

/// Whether the per-backend defaults of a device apply: a run on a GPU (`gpu`) with scalar
/// unknowns (`block` 1), the configuration they were measured on: a Jacobi damping of
/// [`DEVICE_JACOBI_DAMPING`]. (The cycle's precision is the same on every backend: f32 for
/// scalar unknowns in an f64 solve, `gpuq::solver::default_cycle_precision`.) O(1).
pub fn device_defaults(gpu: bool, block: usize) -> bool {
    gpu && block == 1
}

/// The Jacobi damping AMG takes by default on a GPU (`gpu`) or not with `block`-sized
/// unknowns: [`DEVICE_JACOBI_DAMPING`] under [`device_defaults`], else 4/3. O(1).
pub fn default_jacobi_damping(gpu: bool, block: usize) -> f64 {
    if device_defaults(gpu, block) {
        DEVICE_JACOBI_DAMPING
    } else {
        AmgOptions::default().jacobi_damping
    }
}

impl Default for AmgOptions {
    fn default() -> Self {
        AmgOptions {
            coarsening: Coarsening::default(),
            block: 1,
            strength: 0.001,
            smoother: None,
            coarse_smoother: None,
            sweeps: 1,
            coarse_sweeps: None,
            coarse_size: 100,
            max_levels: 25,
            coarse_solver: CoarseSolver::default(),
            cycle: CycleKind::default(),
            near_null_space: None,
            lanczos_steps: 10,
            jacobi_damping: 4.0 / 3.0,
        }
    }
}

impl AmgOptions {
    /// Checks the ranges: block 1 to [`MAX_BLOCK`], 1 to [`MAX_BLOCK`]
    /// near-null-space vectors, eps in [0, 1], at least one sweep, a coarse
    /// size of at least 1, at least one level, at least 2 Lanczos steps, a
    /// Jacobi damping in (0, 2). (The vectors' lengths are checked against
    /// the matrix by the setup.)
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(1..=MAX_BLOCK).contains(&self.block) {
            return bad(format!(
                "AMG block size {} (must be 1 to {MAX_BLOCK})",
                self.block
            ));
        }
        if let Some(b) = &self.near_null_space {
            if !(1..=MAX_BLOCK).contains(&b.len()) {
                return bad(format!(
                    "{} near-null-space vectors (AMG takes 1 to {MAX_BLOCK})",
                    b.len()
                ));
            }
        }
        if !(self.strength.is_finite() && (0.0..=1.0).contains(&self.strength)) {
            return bad(format!(
                "AMG strength threshold {} (must lie in [0, 1])",
                self.strength
            ));
        }
        if self.sweeps == 0
            || self.coarse_sweeps == Some(0)
            || self.coarse_size == 0
            || self.max_levels == 0
        {
            return bad("AMG sweeps, coarse size and levels must be positive".into());
        }
        if !(self.jacobi_damping > 0.0 && self.jacobi_damping < 2.0) {
            return bad(format!(
                "AMG Jacobi damping {} (omega rho(D^-1 A) must lie in (0, 2))",
                self.jacobi_damping
            ));
        }
        if self.lanczos_steps < 2 {
            return bad("AMG needs at least 2 Lanczos steps".into());
        }
        for s in [self.smoother, self.coarse_smoother].into_iter().flatten() {
            if let Smoother::Chebyshev { degree } = s {
                if !(2..=4).contains(&degree) {
                    return bad(format!("Chebyshev degree {degree} (must be 2, 3 or 4)"));
                }
            }
        }
        Ok(())
    }

    /// The smoothing applications of level `level` (0 the finest).
    pub fn sweeps_of(&self, level: usize) -> usize {
        match self.coarse_sweeps {
            Some(s) if level > 0 => s,
            _ => self.sweeps,
        }
    }

    /// The smoother of level `level` (0 the finest): `coarse_smoother` below
    /// the finest when set, else `smoother`, else the block size's default.
    pub fn smoother_of(&self, level: usize) -> Smoother {
        match (self.coarse_smoother, self.smoother) {
            (Some(s), _) if level > 0 => s,
            (_, Some(s)) => s,
            _ => Smoother::default_for(self.block),
        }
    }
}

/// How the cycle stores its matrices on the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CycleOptions {
    /// Layout of every level's A, P, R and smoother matrix: CSR, SELL, or BSR
    /// (any `Bsr { b }` means each level's own node blocks, whatever `b`:
    /// 3 x 3 for the finest level of 3D elasticity, 6 x 6 below it with six
    /// rigid body modes; CSR for scalar levels and for transfer operators
    /// whose fine and coarse blocks differ; SELL to CSR for a matrix of more than 16
    /// entries per row on average and fewer than 2^19 rows, such as the
    /// coarse levels' restrictions; SELL with rows sorted by length within
    /// windows of 8 slices where the requested window pads the stored
    /// entries by more than 10%, such as the prolongators).
    pub layout: Layout,
}
