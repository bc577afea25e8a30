//! (i) The static response, one implementation for every model (the seed's
//! beam is one, made by [`crate::Beam::model`]): K(theta) u = f with
//!
//! * a random load f = mu + D xi + L eta: D = diag(std) (independent Gaussian
//!   loads per DOF), L an n x r factor (a correlated, low-rank load), xi and eta
//!   standard normal;
//! * a stiffness K(theta) = K0 + sum_k theta_k K_k, the affine expansion a
//!   truncated Karhunen-Loeve representation of a random modulus field (or one
//!   random modulus per element) gives, theta_k independent uniform, normal or
//!   (shifted) lognormal ([`Theta`]), or K0 alone.
//!
//! How the samples are solved ([`StaticSolver`]; [`StaticSolver::Auto`] picks
//! from the matrices, never from where the model came from):
//!
//! * K deterministic: the outputs are linear in the load, u_o = g_o^T f with
//!   g_o = K^-1 e_o (K symmetric): one factorisation (banded Cholesky for a
//!   banded K, sparse Cholesky by `faer` otherwise) or one AMG-preconditioned
//!   conjugate-gradient solve per output on the backend gives the g_o, and a
//!   sample is then its draws dotted with them (no solve per sample: the same
//!   values as solving it, to rounding); the outputs' exact mean g_o^T mu and
//!   variance |D g_o|^2 + |L^T g_o|^2 come with the sample statistics as their
//!   check;
//! * K random, banded (semi-bandwidth at most [`BAND_LIMIT`]): each sample
//!   assembles its K(theta_s) as a band and factors it (n b^2 flops) through
//!   [`BandKernels`]: `gpuq_kernels::uq::band::band_sample_designed` per
//!   sample on the host's threads (CPU backend) or one device thread per
//!   sample (CUDA backend), the same bits;
//! * K random otherwise: each sample is solved by `gpuq-krylov`'s conjugate
//!   gradients on the backend, K(theta_s) formed there per sample (K0 and the
//!   K_k stored on the union of their patterns, the values K0 + sum_k
//!   theta_sk K_k by a copy and m axpys over nnz, written into the resident
//!   matrix: one SpMV per iteration whatever m), preconditioned
//!   by `gpuq-amg`'s hierarchy of the mean stiffness K0 + sum_k E\[theta_k\] K_k,
//!   built once on the backend; only the load goes up and the solution comes
//!   down per sample;
//! * [`StaticSolver::Dense`], the seed's reference path: a dense K(theta_s)
//!   per sample and LU with partial pivoting (2 n^3 / 3 flops per sample).
//!
//! With a random K every sample's true relative residual |f - K(theta) u| / |f|
//! is measured (whatever solved it) and held to [`ModelStatic::tol`].
//!
//! Draws: sample s takes, from its normal source (the [`Design`]: Monte Carlo
//! ChaCha8 streams, Latin hypercube, or the first dimension from Sobol), first
//! the r factor normals, then the m theta normals, then the n independent load
//! normals, so the same seed gives the same samples whatever the thread count
//! or the backend (the beam's tip load is its one factor normal, its element
//! moduli the thetas after it: the beam's draws since seed 001's tables).
//! Statistics per output DOF: mean, unbiased standard deviation, 5%, 50% and
//! 95% quantiles, and the sorted values.
//!
//! Cost: deterministic K, one factorisation (or one PCG solve per output),
//! then per sample its draws and O(n) per output; random K, per sample a band
//! assembly and factorisation O(sum nnz(K_k) + n b^2), or per iteration m + 1
//! SpMVs and one AMG cycle.

use crate::cholesky::SparseCholesky;
use crate::design::Design;
use crate::linear_samples::LinearSampleKernels;
use crate::model::Model;
use crate::stats::describe;
use gpuq_amg::{
    default_cycle_precision, f64_cycle, AmgKernels, AmgOptions, Hierarchy, SetupKernels,
};
use gpuq_core::{Backend, Error, LinearOperator, Result, ScalarKind};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::uq::band::{
    band_sample_designed, cholesky, draw_sample, failed_pivot, failure_code, solve, BandModel,
    BandStore, DrawStore, Draws, SampleWork, ThetaLaw, MAX_SEMI_BAND, THETA_LOGNORMAL,
    THETA_NORMAL, THETA_UNIFORM,
};
use gpuq_kernels::uq::dense::{lu_solve, DenseSlices};
use gpuq_kernels::uq::gauss::NormalStream;
use gpuq_kernels::uq::sampling::{LhsNormals, Normals, SobolFirst};
use gpuq_krylov::{cg, KrylovBackend, KrylovOptions};
use gpuq_sparse::{Csr, Layout, MatrixOperator};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// Samples of a random stiffness solved between two looks at a stop request
/// ([`gpuq_core::interrupt`]) by AMG-PCG or the dense LU; the band strategy
/// looks every [`BandRun::block`] samples ([`HOST_BAND_BLOCK`] on the host,
/// a device batch on the GPU).
pub const BLOCK: usize = 32;

/// The widest semi-bandwidth [`StaticSolver::Auto`] factors as a band per
/// sample (n b^2 flops: below a preconditioned iterative solve's cost for
/// such narrow bands).
pub const BAND_LIMIT: usize = MAX_SEMI_BAND;

/// The most DOFs [`StaticSolver::Auto`] factors by sparse Cholesky for a
/// deterministic, non-banded K; above it the adjoints are AMG-PCG solves.
pub const DIRECT_LIMIT: usize = 200_000;

/// The distribution of one stiffness coefficient theta_k.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Theta {
    /// Uniform on [lo, hi].
    Uniform {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
    /// Normal.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// shift + exp of a normal of mean mu and standard deviation sigma (a
    /// lognormal modulus E_e about the nominal E of K0 is the term of K_e(E)
    /// with mu = mu_ln - ln E and shift -1).
    Lognormal {
        /// Mean of the logarithm.
        mu: f64,
        /// Standard deviation of the logarithm.
        sigma: f64,
        /// Added to the exponential (0 for a plain lognormal).
        shift: f64,
    },
}

impl Theta {
    /// Parses `uniform:LO:HI`, `normal:MEAN:STD`, `lognormal:MU:SIGMA` or
    /// `lognormal:MU:SIGMA:SHIFT`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::InvalidArgument(format!(
                "bad theta {s:?}: expected uniform:LO:HI, normal:MEAN:STD or lognormal:MU:SIGMA[:SHIFT]"
            ))
        };
        let parts: Vec<&str> = s.split(':').collect();
        let number = |t: &str| t.parse::<f64>().map_err(|_| bad());
        let t = match parts[..] {
            ["uniform", a, b] => Theta::Uniform {
                lo: number(a)?,
                hi: number(b)?,
            },
            ["normal", a, b] => Theta::Normal {
                mean: number(a)?,
                std: number(b)?,
            },
            ["lognormal", a, b] => Theta::Lognormal {
                mu: number(a)?,
                sigma: number(b)?,
                shift: 0.0,
            },
            ["lognormal", a, b, c] => Theta::Lognormal {
                mu: number(a)?,
                sigma: number(b)?,
                shift: number(c)?,
            },
            _ => return Err(bad()),
        };
        t.check()?;
        Ok(t)
    }

    /// Errors on non-finite parameters, lo > hi or a negative deviation.
    pub fn check(&self) -> Result<()> {
        let (ok, what) = match *self {
            Theta::Uniform { lo, hi } => (
                lo.is_finite() && hi.is_finite() && lo <= hi,
                format!("uniform:{lo}:{hi} (bounds finite, lo <= hi)"),
            ),
            Theta::Normal { mean, std } => (
                mean.is_finite() && std.is_finite() && std >= 0.0,
                format!("normal:{mean}:{std} (finite, std >= 0)"),
            ),
            Theta::Lognormal { mu, sigma, shift } => (
                mu.is_finite() && sigma.is_finite() && sigma >= 0.0 && shift.is_finite(),
                format!("lognormal:{mu}:{sigma}:{shift} (finite, sigma >= 0)"),
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "bad theta distribution {what}"
            )))
        }
    }

    /// The law in the kernels' form (`gpuq_kernels::uq::band::ThetaLaw`).
    /// O(1).
    pub fn law(&self) -> ThetaLaw {
        let (kind, a, b, c) = match *self {
            Theta::Uniform { lo, hi } => (THETA_UNIFORM, lo, hi, 0.0),
            Theta::Normal { mean, std } => (THETA_NORMAL, mean, std, 0.0),
            Theta::Lognormal { mu, sigma, shift } => (THETA_LOGNORMAL, mu, sigma, shift),
        };
        ThetaLaw { kind, a, b, c }
    }

    /// The value for the standard normal draw z (uniform through Phi(z);
    /// the arithmetic of [`ThetaLaw::value`], the device's). O(1).
    pub fn value(&self, z: f64) -> f64 {
        self.law().value(z)
    }

    /// The mean. O(1).
    pub fn mean(&self) -> f64 {
        match *self {
            Theta::Uniform { lo, hi } => 0.5 * (lo + hi),
            Theta::Normal { mean, .. } => mean,
            Theta::Lognormal { mu, sigma, shift } => shift + (mu + 0.5 * sigma * sigma).exp(),
        }
    }
}

/// The static problem on a model (vectors and matrices on its free DOFs; see
/// [`Model::reduce_vector`] and [`Model::reduce_matrix`]).
#[derive(Clone, Debug)]
pub struct ModelStatic<'a> {
    /// The model (K0 is its stiffness).
    pub model: &'a Model,
    /// Mean load mu.
    pub load_mean: Vec<f64>,
    /// Standard deviations of independent Gaussian loads per DOF.
    pub load_std: Option<Vec<f64>>,
    /// An n x r factor L of a correlated load L eta.
    pub load_factor: Option<Csr<f64>>,
    /// Symmetric stiffness terms K_k with their coefficients' distributions.
    pub terms: Vec<(Csr<f64>, Theta)>,
    /// Output DOFs (full numbering).
    pub outputs: Vec<usize>,
    /// Sampling design.
    pub design: Design,
    /// Relative residual a random-K sample's solve is held to (an iterative
    /// solve stops there; every sample's true residual is checked against it).
    pub tol: f64,
}

/// How the samples' systems are solved (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StaticSolver {
    /// From the matrices: [`StaticSolver::Band`] when the semi-bandwidth of
    /// K0 and the K_k is at most [`BAND_LIMIT`]; else, for a deterministic K,
    /// [`StaticSolver::Direct`] up to [`DIRECT_LIMIT`] DOFs; else
    /// [`StaticSolver::Pcg`].
    #[default]
    Auto,
    /// Banded Cholesky: one factor on the host for a deterministic K, one
    /// per sample for a random K on the backend ([`BandKernels`]). O(n b^2)
    /// per factorisation.
    Band,
    /// Sparse Cholesky (`faer`) of a deterministic K on the host.
    Direct,
    /// Conjugate gradients on the backend, preconditioned by AMG of the mean
    /// stiffness: one solve per output (deterministic K) or per sample.
    Pcg,
    /// The seed's path: a dense K per sample (deterministic or not) and LU
    /// with partial pivoting on the host, O(n^3) per sample (small n only).
    Dense,
}

impl StaticSolver {
    /// The names [`StaticSolver::parse`] accepts.
    pub const NAMES: &'static [&'static str] = &["auto", "band", "direct", "pcg", "dense"];

    /// Parses one of [`StaticSolver::NAMES`].
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(StaticSolver::Auto),
            "band" => Ok(StaticSolver::Band),
            "direct" => Ok(StaticSolver::Direct),
            "pcg" => Ok(StaticSolver::Pcg),
            "dense" => Ok(StaticSolver::Dense),
            _ => Err(Error::InvalidArgument(format!(
                "unknown static solver '{s}' (available: {})",
                Self::NAMES.join(", ")
            ))),
        }
    }

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            StaticSolver::Auto => "auto",
            StaticSolver::Band => "band",
            StaticSolver::Direct => "direct",
            StaticSolver::Pcg => "pcg",
            StaticSolver::Dense => "dense",
        }
    }
}

/// How many samples, under which seed, solved how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StaticOptions {
    /// Number of samples (at least 1).
    pub samples: u64,
    /// Seed of the draws.
    pub seed: u64,
    /// The solver.
    pub solver: StaticSolver,
}

/// Statistics of one output DOF.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutputStats {
    /// The DOF (full numbering).
    pub dof: usize,
    /// Sample mean.
    pub mean: f64,
    /// Sample standard deviation (unbiased).
    pub std: f64,
    /// 5% quantile.
    pub q05: f64,
    /// Median.
    pub q50: f64,
    /// 95% quantile.
    pub q95: f64,
    /// The exact mean (deterministic K only).
    pub exact_mean: Option<f64>,
    /// The exact standard deviation (deterministic K only).
    pub exact_std: Option<f64>,
}

/// What [`static_response_on`] returns.
#[derive(Clone, Debug, Serialize)]
pub struct ModelStaticResult {
    /// Number of samples.
    pub samples: u64,
    /// One entry per output DOF.
    pub outputs: Vec<OutputStats>,
    /// The solver that ran ([`StaticSolver::Auto`] resolved).
    pub solver: StaticSolver,
    /// Seconds of the setup: the factorisation, or the uploads and the AMG
    /// hierarchy.
    pub factor_s: f64,
    /// Seconds of the sampling and solves.
    pub solve_s: f64,
    /// Conjugate-gradient iterations per solve (a sample's, or an output's
    /// adjoint for deterministic K): (fewest, mean, most); `None` for the
    /// direct solvers.
    pub iterations: Option<(usize, f64, usize)>,
    /// Largest true relative residual |f - K u| / |f| over the samples
    /// (random K; `None` for deterministic K, solved through its adjoints).
    pub max_residual: Option<f64>,
    /// Whether every solve met [`ModelStatic::tol`] (a random K's samples'
    /// true residuals, the adjoints' PCG solves), and no stop cut the run short.
    pub converged: bool,
    /// A stop was requested ([`gpuq_core::interrupt`], Ctrl-C in the CLI)
    /// between two blocks of [`BLOCK`] samples of a random stiffness: the
    /// statistics are those of the `samples` done.
    pub interrupted: bool,
    /// Per output, its finite sample values, sorted (not serialised).
    #[serde(skip)]
    pub values: Vec<Vec<f64>>,
}

/// A backend the static response runs on: sparse matrices, conjugate
/// gradients, the AMG setup and cycle, and the band strategy's per-sample
/// kernel ([`BandKernels`]). Implemented for every backend that
/// has those (the CPU backend, and the CUDA backend with the `cuda` feature).
pub trait StaticBackend:
    KrylovBackend + AmgKernels + SetupKernels + BandKernels + LinearSampleKernels
{
}

impl<B: KrylovBackend + AmgKernels + SetupKernels + BandKernels + LinearSampleKernels> StaticBackend
    for B
{
}

/// A sample's normals source under `design`.
pub(crate) enum Source {
    Mc(NormalStream<f64>),
    Lhs(LhsNormals),
    Sobol(SobolFirst<f64>),
}

impl Source {
    pub(crate) fn new(design: Design, seed: u64, s: u64, samples: u64) -> Self {
        let key = key_from_seed(seed);
        match design {
            Design::MonteCarlo => Source::Mc(NormalStream::new(key, s)),
            Design::LatinHypercube => Source::Lhs(LhsNormals::new(key, s, samples)),
            Design::Sobol => Source::Sobol(SobolFirst::new(seed, s)),
        }
    }

    pub(crate) fn next(&mut self) -> f64 {
        match self {
            Source::Mc(z) => z.next_normal(),
            Source::Lhs(z) => Normals::<f64>::next_normal(z),
            Source::Sobol(z) => z.next_normal(),
        }
    }
}

/// a + alpha b over the union of their patterns. O(nnz log).
fn add_scaled(a: &Csr<f64>, alpha: f64, b: &Csr<f64>) -> Result<Csr<f64>> {
    if alpha == 0.0 {
        return Ok(a.clone());
    }
    let mut c = a.to_coo();
    for i in 0..b.nrows() {
        let (cols, vals) = b.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            c.push(i, j as usize, alpha * v)?;
        }
    }
    Csr::from_coo(&c)
}

/// y += alpha A x (sequential: the callers run one per sample in parallel).
fn spmv_add(a: &Csr<f64>, alpha: f64, x: &[f64], y: &mut [f64]) {
    for (i, yi) in y.iter_mut().enumerate() {
        let (cols, vals) = a.row(i);
        let s: f64 = cols
            .iter()
            .zip(vals)
            .map(|(&j, &v)| v * x[j as usize])
            .sum();
        *yi += alpha * s;
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The largest |i - j| over the entries of `a`. O(nnz).
fn semi_bandwidth(a: &Csr<f64>) -> usize {
    (0..a.nrows())
        .flat_map(|i| a.row(i).0.iter().map(move |&j| i.abs_diff(j as usize)))
        .max()
        .unwrap_or(0)
}

impl ModelStatic<'_> {
    /// Checks sizes, finiteness and the outputs against the model; errors
    /// name the field. O(n + nnz of the load factor).
    pub fn validate(&self) -> Result<()> {
        let n = self.model.dofs();
        if self.load_mean.len() != n {
            return Err(Error::shape(
                "ModelStatic::load_mean (free DOFs)",
                n,
                self.load_mean.len(),
            ));
        }
        if let Some(i) = self.load_mean.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                what: "ModelStatic::load_mean".into(),
                index: i,
            });
        }
        if let Some(s) = &self.load_std {
            if s.len() != n {
                return Err(Error::shape(
                    "ModelStatic::load_std (free DOFs)",
                    n,
                    s.len(),
                ));
            }
            if let Some(i) = s.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(Error::InvalidArgument(format!(
                    "ModelStatic::load_std[{i}] is {}: a standard deviation is finite and >= 0",
                    s[i]
                )));
            }
        }
        if let Some(l) = &self.load_factor {
            if l.nrows() != n {
                return Err(Error::shape(
                    "ModelStatic::load_factor rows (free DOFs)",
                    n,
                    l.nrows(),
                ));
            }
            l.check_finite()?;
        }
        for (k, (t, th)) in self.terms.iter().enumerate() {
            if t.nrows() != n || t.ncols() != n {
                return Err(Error::InvalidArgument(format!(
                    "ModelStatic::terms[{k}] is {} x {}; the model has {n} free DOFs",
                    t.nrows(),
                    t.ncols()
                )));
            }
            t.check_finite()?;
            th.check()?;
        }
        if self.outputs.is_empty() {
            return Err(Error::InvalidArgument(
                "ModelStatic::outputs is empty: name at least one output DOF".into(),
            ));
        }
        for &d in &self.outputs {
            self.model.reduced_dof(d)?;
        }
        if !(self.tol > 0.0 && self.tol < 1.0) {
            return Err(Error::InvalidArgument(format!(
                "ModelStatic::tol must be in (0, 1), not {}",
                self.tol
            )));
        }
        Ok(())
    }

    /// Number of normals a sample draws: r + m + (n when `load_std`).
    fn draws(&self) -> (usize, usize, usize) {
        (
            self.load_factor.as_ref().map_or(0, |l| l.ncols()),
            self.terms.len(),
            self.load_std.as_ref().map_or(0, Vec::len),
        )
    }

    /// Sample s's thetas and its load, written into `theta` and `f` (the
    /// draws in the module docs' order: `gpuq_kernels::uq::band::draw_sample`,
    /// the device's). O(n + nnz(L)).
    pub(crate) fn sample(
        &self,
        data: &DrawData,
        source: &mut Source,
        theta: &mut [f64],
        f: &mut [f64],
    ) {
        let (r, m, _) = self.draws();
        let mut draws = vec![0.0; r + m];
        draw_sample(
            &data.draws(self),
            &mut HostDraw {
                f,
                draws: &mut draws,
            },
            || source.next(),
        );
        theta.copy_from_slice(&draws[r..]);
    }

    /// y = K(theta) x = K0 x + sum_k theta_k K_k x on the host.
    fn apply_k(&self, theta: &[f64], x: &[f64], y: &mut [f64]) {
        y.fill(0.0);
        spmv_add(&self.model.k, 1.0, x, y);
        for ((k, _), &t) in self.terms.iter().zip(theta) {
            spmv_add(k, t, x, y);
        }
    }

    /// |f - K(theta) u| / |f| (|f - K u| when f = 0).
    fn residual(&self, theta: &[f64], u: &[f64], f: &[f64]) -> f64 {
        let mut y = vec![0.0; u.len()];
        self.apply_k(theta, u, &mut y);
        let r = y.iter().zip(f).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
        let fnorm = dot(f, f).sqrt();
        if fnorm > 0.0 {
            r.sqrt() / fnorm
        } else {
            r.sqrt()
        }
    }

    /// K0 + sum_k E[theta_k] K_k.
    fn mean_stiffness(&self) -> Result<Csr<f64>> {
        self.terms
            .iter()
            .try_fold(self.model.k.clone(), |acc, (k, th)| {
                add_scaled(&acc, th.mean(), k)
            })
    }

    /// The solver `solver` names for this problem ([`StaticSolver::Auto`]
    /// resolved; the others checked against it).
    fn resolve(&self, solver: StaticSolver) -> Result<StaticSolver> {
        let random = !self.terms.is_empty();
        Ok(match solver {
            StaticSolver::Auto => {
                if band_of(self) <= BAND_LIMIT {
                    StaticSolver::Band
                } else if !random && self.model.dofs() <= DIRECT_LIMIT {
                    StaticSolver::Direct
                } else {
                    StaticSolver::Pcg
                }
            }
            StaticSolver::Direct if random => {
                return Err(Error::InvalidArgument(
                    "StaticOptions::solver direct factors one K: with ModelStatic::terms use band, pcg or dense"
                        .into(),
                ))
            }
            other => other,
        })
    }
}

/// `v` as a u32 index of the kernels, or an error naming `what`.
fn narrow(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| {
        Error::InvalidArgument(format!(
            "{what} ({v}) does not fit the kernels' 32-bit indices"
        ))
    })
}

/// The draws' data in the kernels' form (u32 indices), made once per run:
/// the laws of the thetas and the load factor's CSR.
pub(crate) struct DrawData {
    laws: Vec<ThetaLaw>,
    rank: usize,
    start: Vec<u32>,
    col: Vec<u32>,
    val: Vec<f64>,
}

impl DrawData {
    /// O(n + m + nnz(L)); errors when L's offsets do not fit u32.
    pub(crate) fn new(problem: &ModelStatic<'_>) -> Result<Self> {
        let (start, col, val, rank) = match &problem.load_factor {
            Some(l) => (
                l.row_ptr()
                    .iter()
                    .map(|&e| narrow(e, "ModelStatic::load_factor's entries"))
                    .collect::<Result<_>>()?,
                l.col_idx().to_vec(),
                l.values().to_vec(),
                l.ncols(),
            ),
            None => (Vec::new(), Vec::new(), Vec::new(), 0),
        };
        Ok(DrawData {
            laws: problem.terms.iter().map(|(_, t)| t.law()).collect(),
            rank,
            start,
            col,
            val,
        })
    }

    /// The kernels' view of the draws of `problem`. O(1).
    fn draws<'a>(&'a self, problem: &'a ModelStatic<'_>) -> Draws<'a> {
        Draws {
            laws: &self.laws,
            load_mean: &problem.load_mean,
            load_std: problem.load_std.as_deref().unwrap_or(&[]),
            rank: self.rank,
            factor_start: &self.start,
            factor_col: &self.col,
            factor_val: &self.val,
        }
    }
}

/// A sample's load and draws on the host, for `draw_sample`.
struct HostDraw<'a> {
    f: &'a mut [f64],
    draws: &'a mut [f64],
}

impl DrawStore for HostDraw<'_> {
    fn load(&self, i: usize) -> f64 {
        self.f[i]
    }
    fn set_load(&mut self, i: usize, v: f64) {
        self.f[i] = v;
    }
    fn draw(&self, k: usize) -> f64 {
        self.draws[k]
    }
    fn set_draw(&mut self, k: usize, v: f64) {
        self.draws[k] = v;
    }
}

/// K0's lower band and the terms' triplets (both triangles) in the kernels'
/// form, for [`StaticSolver::Band`].
struct BandData {
    w: usize,
    k0: Vec<f64>,
    start: Vec<u32>,
    row: Vec<u32>,
    col: Vec<u32>,
    val: Vec<f64>,
    outputs: Vec<u32>,
}

impl BandData {
    /// From the CSR matrices of `problem` (semi-bandwidth `w`) and the
    /// outputs `out` (free indices). O(n w + sum of the nnz).
    fn new(problem: &ModelStatic<'_>, w: usize, out: &[usize]) -> Result<Self> {
        let n = problem.model.dofs();
        narrow(n, "the model's free DOFs")?;
        let mut k0 = vec![0.0; n * (w + 1)];
        for i in 0..n {
            let (cols, vals) = problem.model.k.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                let j = j as usize;
                if j <= i {
                    k0[i * (w + 1) + i - j] += v;
                }
            }
        }
        let (mut start, mut row, mut col, mut val) =
            (vec![0u32], Vec::new(), Vec::new(), Vec::new());
        for (k, _) in &problem.terms {
            for i in 0..n {
                let (cols, vals) = k.row(i);
                row.extend(std::iter::repeat_n(i as u32, cols.len()));
                col.extend_from_slice(cols);
                val.extend_from_slice(vals);
            }
            start.push(narrow(row.len(), "the stiffness terms' entries")?);
        }
        Ok(BandData {
            w,
            k0,
            start,
            row,
            col,
            val,
            outputs: out.iter().map(|&o| o as u32).collect(),
        })
    }

    /// The kernels' view of the problem. O(1).
    fn model<'a>(&'a self, problem: &'a ModelStatic<'_>, draws: &'a DrawData) -> BandModel<'a> {
        BandModel {
            n: problem.model.dofs(),
            w: self.w,
            k0: &self.k0,
            term_start: &self.start,
            term_row: &self.row,
            term_col: &self.col,
            term_val: &self.val,
            draws: draws.draws(problem),
            outputs: &self.outputs,
        }
    }
}

/// How a run of [`BandKernels::band_runner`] draws its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandDraws {
    /// The design's code ([`Design::code`]).
    pub design: u32,
    /// Seed of the draws.
    pub seed: u64,
    /// Samples of the whole run (Latin hypercube strata).
    pub samples: u64,
}

/// What [`BandRun::run`] returns for `count` samples.
#[derive(Clone, Debug, PartialEq)]
pub struct BandBlock {
    /// The outputs' values, sample-major (count x outputs).
    pub values: Vec<f64>,
    /// Per sample its relative residual, or the failure code of its pivot
    /// (`gpuq_kernels::uq::band::failed_pivot` decodes it).
    pub residuals: Vec<f64>,
}

/// The samples of a random banded K on one backend, in blocks.
pub trait BandRun {
    /// Samples one [`BandRun::run`] should take (a stop request is looked
    /// for between calls). O(1).
    fn block(&self) -> usize;
    /// Samples first..first + count (count at most [`BandRun::block`]):
    /// each drawn, assembled, factored and solved by
    /// `gpuq_kernels::uq::band::band_sample_designed`. O(count n w^2).
    fn run(&mut self, first: u64, count: usize) -> Result<BandBlock>;
}

/// The samples a host [`BandRun`] takes per block, between two looks at a
/// stop request (they are cheap, O(n w^2) each: larger blocks than
/// [`BLOCK`] keep the threads busy).
pub const HOST_BAND_BLOCK: usize = 1024;

/// Random-load samples per call of [`LinearSampleKernels::linear_samples`]
/// (the interrupt is looked at between calls; their values, 8 bytes per
/// output and sample, are what one call holds).
const LINEAR_BLOCK: u64 = 1 << 16;

/// [`BandRun`] on the host's threads (`parallel`: Rayon) or one after the
/// other.
struct HostBand<'a> {
    model: BandModel<'a>,
    draws: BandDraws,
    parallel: bool,
}

impl HostBand<'_> {
    /// Sample s: its outputs and its residual slot. O(n w^2).
    fn one(&self, s: u64) -> (Vec<f64>, f64) {
        let p = &self.model;
        let mut slots = vec![0.0; p.work_len()];
        let mut u = vec![0.0; p.outputs.len()];
        let mut work = SampleWork {
            slots: &mut slots[..],
            n: p.n,
            w: p.w,
        };
        let d = self.draws;
        let r = band_sample_designed(p, &mut work, d.design, d.seed, s, d.samples, |o, v| {
            u[o] = v;
        });
        (u, r.unwrap_or_else(failure_code))
    }
}

impl BandRun for HostBand<'_> {
    fn block(&self) -> usize {
        HOST_BAND_BLOCK
    }

    fn run(&mut self, first: u64, count: usize) -> Result<BandBlock> {
        let range = first..first + count as u64;
        let per: Vec<(Vec<f64>, f64)> = if self.parallel {
            range.into_par_iter().map(|s| self.one(s)).collect()
        } else {
            range.map(|s| self.one(s)).collect()
        };
        let mut b = BandBlock {
            values: Vec::with_capacity(count * self.model.outputs.len()),
            residuals: Vec::with_capacity(count),
        };
        for (u, r) in per {
            b.values.extend(u);
            b.residuals.push(r);
        }
        Ok(b)
    }
}

/// The band strategy's samples of a random K ([`StaticSolver::Band`]) on a
/// backend: the default body solves them on the host one after the other,
/// the CPU backend on Rayon's threads, the CUDA backend one device thread
/// per sample (`uq_band_static_f64`). Every body runs
/// `gpuq_kernels::uq::band::band_sample_designed` per sample: the same bits.
pub trait BandKernels: Backend {
    /// A runner of `model`'s samples drawn as `draws` say. O(size of the
    /// model) (an upload on a device).
    fn band_runner<'a>(
        &'a self,
        model: BandModel<'a>,
        draws: BandDraws,
    ) -> Result<Box<dyn BandRun + 'a>> {
        Ok(Box::new(HostBand {
            model,
            draws,
            parallel: false,
        }))
    }
}

impl BandKernels for CpuBackend {
    fn band_runner<'a>(
        &'a self,
        model: BandModel<'a>,
        draws: BandDraws,
    ) -> Result<Box<dyn BandRun + 'a>> {
        Ok(Box::new(HostBand {
            model,
            draws,
            parallel: true,
        }))
    }
}

#[cfg(feature = "cuda")]
impl BandKernels for gpuq_cuda::CudaBackend {
    /// On the device, except a model with a uniform theta (its erf is not in
    /// the PTX module): that one runs on the host's threads.
    fn band_runner<'a>(
        &'a self,
        model: BandModel<'a>,
        draws: BandDraws,
    ) -> Result<Box<dyn BandRun + 'a>> {
        if model.draws.laws.iter().any(|l| l.kind == THETA_UNIFORM) {
            return Ok(Box::new(HostBand {
                model,
                draws,
                parallel: true,
            }));
        }
        let resident = self.uq_band_upload(&model)?;
        Ok(Box::new(DeviceBand {
            backend: self,
            resident,
            draws,
        }))
    }
}

/// [`BandRun`] on a CUDA device: the model resident, one launch per block.
#[cfg(feature = "cuda")]
struct DeviceBand<'a> {
    backend: &'a gpuq_cuda::CudaBackend,
    resident: gpuq_cuda::BandResident,
    draws: BandDraws,
}

#[cfg(feature = "cuda")]
impl BandRun for DeviceBand<'_> {
    fn block(&self) -> usize {
        self.resident.batch()
    }

    fn run(&mut self, first: u64, count: usize) -> Result<BandBlock> {
        let d = self.draws;
        let (values, residuals) = self.backend.uq_band_static(
            &mut self.resident,
            (d.seed, d.design, d.samples),
            first,
            count,
        )?;
        Ok(BandBlock { values, residuals })
    }
}

/// An output of a deterministic K as a function of the draws: u_o = a + b^T
/// eta + d^T xi (a = g^T mu, b = L^T g, d = diag(std) g), and its exact moments.
struct LinearOutput {
    a: f64,
    b: Vec<f64>,
    d: Vec<f64>,
}

impl LinearOutput {
    fn new(problem: &ModelStatic<'_>, g: &[f64]) -> Self {
        let b = problem.load_factor.as_ref().map_or_else(Vec::new, |l| {
            let mut lt = vec![0.0; l.ncols()];
            for (i, gi) in g.iter().enumerate() {
                let (cols, vals) = l.row(i);
                for (&c, &v) in cols.iter().zip(vals) {
                    lt[c as usize] += v * gi;
                }
            }
            lt
        });
        let d = problem
            .load_std
            .as_ref()
            .map_or_else(Vec::new, |s| g.iter().zip(s).map(|(g, s)| g * s).collect());
        LinearOutput {
            a: dot(g, &problem.load_mean),
            b,
            d,
        }
    }

    /// (mean, standard deviation).
    fn moments(&self) -> (f64, f64) {
        (
            self.a,
            (dot(&self.b, &self.b) + dot(&self.d, &self.d)).sqrt(),
        )
    }
}

/// Where the positions of one matrix's entries land in a per-sample dense
/// matrix: (position, value) of every entry.
type Scatter = Vec<(usize, f64)>;

/// A symmetric K(theta) assembled per sample on the host as a dense
/// row-major matrix from the scatter lists of K0 and the K_k
/// ([`StaticSolver::Dense`]).
struct HostAssembly {
    n: usize,
    base: Scatter,
    terms: Vec<Scatter>,
}

impl HostAssembly {
    fn new(problem: &ModelStatic<'_>) -> Self {
        let n = problem.model.dofs();
        let scatter = |a: &Csr<f64>| -> Scatter {
            let mut out = Vec::with_capacity(a.nnz());
            for i in 0..n {
                let (cols, vals) = a.row(i);
                for (&j, &v) in cols.iter().zip(vals) {
                    out.push((i * n + j as usize, v));
                }
            }
            out
        };
        HostAssembly {
            n,
            base: scatter(&problem.model.k),
            terms: problem.terms.iter().map(|(k, _)| scatter(k)).collect(),
        }
    }

    /// Solves K(theta) x = x in place: assembles K(theta) (O(sum of the
    /// nnz) plus n^2 zeros) and runs LU with partial pivoting (2 n^3 / 3
    /// flops). Errors on a zero pivot.
    fn solve(&self, theta: &[f64], x: &mut [f64], what: &dyn Fn() -> String) -> Result<()> {
        let mut store = vec![0.0; self.n * self.n];
        for &(p, v) in &self.base {
            store[p] += v;
        }
        for (s, &t) in self.terms.iter().zip(theta) {
            for &(p, v) in s {
                store[p] += t * v;
            }
        }
        let mut work = DenseSlices {
            n: self.n,
            a: &mut store,
            rhs: x,
        };
        if !lu_solve(&mut work, self.n) {
            return Err(Error::Precondition {
                method: "static response",
                reason: format!("{} is singular (a zero LU pivot)", what()),
            });
        }
        Ok(())
    }
}

/// K0 and the K_k on the union of their patterns: the pattern with K0's
/// values, and each term's values on it (zero where it has no entry).
/// O(total nnz log) on the host, rows in parallel.
fn on_union(k0: &Csr<f64>, terms: &[&Csr<f64>]) -> Result<(Csr<f64>, Vec<Vec<f64>>)> {
    let n = k0.nrows();
    type Row = (Vec<u32>, Vec<f64>, Vec<Vec<f64>>);
    let rows: Vec<Row> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut cols: Vec<u32> = k0.row(i).0.to_vec();
            for t in terms {
                cols.extend_from_slice(t.row(i).0);
            }
            cols.sort_unstable();
            cols.dedup();
            let scatter = |a: &Csr<f64>| {
                let mut v = vec![0.0; cols.len()];
                let (c, x) = a.row(i);
                for (j, &w) in c.iter().zip(x) {
                    if let Ok(p) = cols.binary_search(j) {
                        v[p] += w;
                    }
                }
                v
            };
            let base = scatter(k0);
            let parts = terms.iter().map(|t| scatter(t)).collect();
            (cols, base, parts)
        })
        .collect();
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0);
    for (c, _, _) in &rows {
        row_ptr.push(row_ptr.last().copied().unwrap_or(0) + c.len());
    }
    let nnz = row_ptr[n];
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    let mut parts = vec![Vec::with_capacity(nnz); terms.len()];
    for (c, v, t) in rows {
        col_idx.extend(c);
        vals.extend(v);
        for (dst, src) in parts.iter_mut().zip(t) {
            dst.extend(src);
        }
    }
    Ok((Csr::try_new(n, n, row_ptr, col_idx, vals)?, parts))
}

/// K(theta) = K0 + sum_k theta_k K_k resident on the backend on the union
/// of the patterns: per sample its values are formed there (a copy and m
/// axpys over nnz) and written into the matrix, so a PCG iteration costs one
/// SpMV whatever the number of terms.
struct RandomStiffness<B: StaticBackend> {
    base: B::Vector<f64>,
    terms: Vec<B::Vector<f64>>,
    values: B::Vector<f64>,
}

/// The matrices and the AMG cycle of [`StaticSolver::Pcg`] on the backend.
struct DeviceSolver<B: StaticBackend> {
    k: MatrixOperator<B, f64>,
    random: Option<RandomStiffness<B>>,
    /// The last right-hand side on the backend, reused by a solve with
    /// `same_load`.
    load: Option<B::Vector<f64>>,
    amg: Box<dyn LinearOperator<B, f64> + Send + Sync>,
    options: KrylovOptions,
}

impl<B: StaticBackend> DeviceSolver<B> {
    /// Uploads K0 (with the K_k: their values on the union pattern) and
    /// builds the AMG hierarchy of the mean stiffness on `backend`. O(total
    /// nnz) transfer plus the AMG setup.
    fn new(backend: &B, problem: &ModelStatic<'_>) -> Result<Self> {
        let hierarchy =
            Hierarchy::build_on(backend, &problem.mean_stiffness()?, &AmgOptions::default())?;
        let (k, random) = if problem.terms.is_empty() {
            (
                MatrixOperator::new(backend, &problem.model.k, Layout::Csr)?,
                None,
            )
        } else {
            let terms: Vec<&Csr<f64>> = problem.terms.iter().map(|(k, _)| k).collect();
            let (k0, parts) = on_union(&problem.model.k, &terms)?;
            let random = RandomStiffness {
                base: backend.upload(k0.values())?,
                terms: parts
                    .iter()
                    .map(|v| backend.upload(v))
                    .collect::<Result<_>>()?,
                values: backend.zeros::<f64>(k0.nnz())?,
            };
            (
                MatrixOperator::new(backend, &k0, Layout::Csr)?,
                Some(random),
            )
        };
        Ok(DeviceSolver {
            k,
            random,
            load: None,
            amg: f64_cycle(
                backend,
                &hierarchy,
                Layout::Csr,
                default_cycle_precision(ScalarKind::F64, 1),
            )?,
            options: KrylovOptions {
                rtol: problem.tol,
                record_history: false,
                ..KrylovOptions::default()
            },
        })
    }

    /// K(theta)^-1 f on the backend from x = 0 (K(theta) formed there first
    /// when K is random; f uploaded unless `same_load` says it is the last
    /// solve's): the solution, iterations, true relative residual and
    /// whether it met the tolerance.
    fn solve(
        &mut self,
        backend: &B,
        theta: &[f64],
        f: &[f64],
        same_load: bool,
    ) -> Result<(Vec<f64>, usize, f64, bool)> {
        if let Some(r) = &mut self.random {
            backend.copy(&r.base, &mut r.values)?;
            for (t, &th) in r.terms.iter().zip(theta) {
                backend.axpy(th, t, &mut r.values)?;
            }
            self.k.set_csr_values(&r.values)?;
        }
        let b = match self.load.take() {
            Some(b) if same_load => b,
            _ => backend.upload(f)?,
        };
        let mut x = backend.zeros::<f64>(f.len())?;
        let report = cg(
            backend,
            &self.k,
            Some(&*self.amg),
            &b,
            &mut x,
            &self.options,
        );
        self.load = Some(b);
        let report = report?;
        Ok((
            backend.download(&x)?,
            report.iterations,
            report.relative_residual,
            report.converged,
        ))
    }
}

/// The adjoints g_o = K^-1 e_o of the outputs `out` (free indices) of a
/// deterministic K by `solver`, with the PCG iterations per output.
fn adjoints<B: StaticBackend>(
    backend: &B,
    problem: &ModelStatic<'_>,
    solver: StaticSolver,
    out: &[usize],
) -> Result<(Vec<Vec<f64>>, Vec<usize>, bool)> {
    let n = problem.model.dofs();
    let unit = |o: usize| {
        let mut e = vec![0.0; n];
        e[o] = 1.0;
        e
    };
    match solver {
        StaticSolver::Band => {
            let w = band_of(problem);
            let band = BandData::new(problem, w, out)?;
            let mut slots = vec![0.0; n * (w + 2)];
            slots[..band.k0.len()].copy_from_slice(&band.k0);
            let mut s = SampleWork {
                slots: &mut slots[..],
                n,
                w,
            };
            if let Some(j) = cholesky(&mut s, n, w) {
                return Err(Error::Precondition {
                    method: "static response",
                    reason: format!("the stiffness matrix K is not positive definite (pivot {j})"),
                });
            }
            let g = out
                .iter()
                .map(|&o| {
                    for i in 0..n {
                        s.set_rhs(i, if i == o { 1.0 } else { 0.0 });
                    }
                    solve(&mut s, n, w);
                    (0..n).map(|i| s.rhs(i)).collect()
                })
                .collect();
            Ok((g, Vec::new(), true))
        }
        StaticSolver::Direct => {
            let chol = SparseCholesky::new(&problem.model.k, "the stiffness matrix K")?;
            let mut g = vec![0.0; n * out.len()];
            for (j, &o) in out.iter().enumerate() {
                g[j * n + o] = 1.0;
            }
            chol.solve_block(faer::MatMut::from_column_major_slice_mut(
                &mut g,
                n,
                out.len(),
            ));
            Ok((g.chunks(n).map(<[f64]>::to_vec).collect(), Vec::new(), true))
        }
        _ => {
            let mut device = DeviceSolver::new(backend, problem)?;
            let mut g = Vec::with_capacity(out.len());
            let (mut its, mut met) = (Vec::with_capacity(out.len()), true);
            for &o in out {
                let (x, it, _, ok) = device.solve(backend, &[], &unit(o), false)?;
                g.push(x);
                its.push(it);
                met &= ok;
            }
            Ok((g, its, met))
        }
    }
}

/// The semi-bandwidth of K0 and every K_k together.
fn band_of(problem: &ModelStatic<'_>) -> usize {
    problem
        .terms
        .iter()
        .map(|(k, _)| semi_bandwidth(k))
        .fold(semi_bandwidth(&problem.model.k), usize::max)
}

/// One block of per-sample solves: per sample its output values, true
/// relative residual, PCG iterations (`None` for the host's direct solves)
/// and whether it met the tolerance.
type Block = Vec<(Vec<f64>, f64, Option<usize>, bool)>;

/// Who solves a random K's samples (or the dense path's).
enum Runner<'a, B: StaticBackend> {
    /// Band assembly, factorisation and solve per sample on the backend
    /// ([`BandKernels`]).
    Band(Box<dyn BandRun + 'a>),
    /// Dense assembly and LU per sample on the host.
    Dense(HostAssembly),
    /// AMG-PCG on the backend.
    Device(DeviceSolver<B>),
}

/// Runs `options.samples` samples of `problem` on `backend` (see the module
/// docs). Errors on an invalid problem or options (naming the field), a
/// stiffness that is not positive definite (naming the pivot, and the sample
/// for a random K), or a backend failure; a solve that misses
/// [`ModelStatic::tol`] is reported (`converged: false`), not an error.
pub fn static_response_on<B: StaticBackend>(
    backend: &B,
    problem: &ModelStatic<'_>,
    options: &StaticOptions,
) -> Result<ModelStaticResult> {
    problem.validate()?;
    let (samples, seed) = (options.samples, options.seed);
    if samples == 0 {
        return Err(Error::InvalidArgument(
            "StaticOptions::samples must be at least 1".into(),
        ));
    }
    let solver = problem.resolve(options.solver)?;
    let n = problem.model.dofs();
    let out: Vec<usize> = problem
        .outputs
        .iter()
        .map(|&d| problem.model.reduced_dof(d))
        .collect::<Result<_>>()?;
    let m = problem.terms.len();
    let mut values = vec![Vec::with_capacity(samples as usize); out.len()];
    let mut iterations = Vec::new();
    let mut max_residual = 0.0f64;
    let mut exact = None;
    let mut interrupted = false;
    let mut met = true;
    let (factor_s, solve_s);
    if m == 0 && solver != StaticSolver::Dense {
        // Linear outputs: each sample is its draws dotted with the adjoints.
        let start = Instant::now();
        let (g, its, ok) = adjoints(backend, problem, solver, &out)?;
        factor_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        iterations = its;
        met = ok;
        let lin: Vec<LinearOutput> = g.iter().map(|g| LinearOutput::new(problem, g)).collect();
        if problem.design == Design::MonteCarlo {
            // The normals on the backend: the load factor's r, then one per
            // DOF with a load deviation, weighted by the adjoints.
            let base: Vec<f64> = lin.iter().map(|o| o.a).collect();
            let coef: Vec<Vec<f64>> = lin.iter().map(|o| [&o.b[..], &o.d[..]].concat()).collect();
            let mut first = 0u64;
            while first < samples {
                if first > 0 && gpuq_core::interrupt::requested() {
                    interrupted = true;
                    break;
                }
                let count = (samples - first).min(LINEAR_BLOCK);
                let u = backend.linear_samples(seed, first, count as usize, &base, &coef)?;
                for row in u.chunks(lin.len().max(1)) {
                    for (vals, &v) in values.iter_mut().zip(row) {
                        vals.push(v);
                    }
                }
                first += count;
            }
        } else {
            let (r, _, nstd) = problem.draws();
            let per_sample: Vec<Vec<f64>> = (0..samples)
                .into_par_iter()
                .map(|s| {
                    let mut src = Source::new(problem.design, seed, s, samples);
                    let eta: Vec<f64> = (0..r).map(|_| src.next()).collect();
                    let mut u: Vec<f64> = lin.iter().map(|o| o.a + dot(&o.b, &eta)).collect();
                    for i in 0..nstd {
                        let xi = src.next();
                        for (ui, o) in u.iter_mut().zip(&lin) {
                            *ui += o.d[i] * xi;
                        }
                    }
                    u
                })
                .collect();
            for u in per_sample {
                for (vals, v) in values.iter_mut().zip(u) {
                    vals.push(v);
                }
            }
        }
        exact = Some(lin.iter().map(LinearOutput::moments).collect::<Vec<_>>());
        solve_s = start.elapsed().as_secs_f64();
    } else {
        let start = Instant::now();
        let data = DrawData::new(problem)?;
        let band = match solver {
            StaticSolver::Band => Some(BandData::new(problem, band_of(problem), &out)?),
            _ => None,
        };
        let mut runner = match (solver, &band) {
            (StaticSolver::Band, Some(band)) => Runner::Band(backend.band_runner(
                band.model(problem, &data),
                BandDraws {
                    design: problem.design.code(),
                    seed,
                    samples,
                },
            )?),
            (StaticSolver::Dense, _) => Runner::Dense(HostAssembly::new(problem)),
            _ => Runner::Device(DeviceSolver::new(backend, problem)?),
        };
        factor_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let draw = |s: u64| {
            let mut src = Source::new(problem.design, seed, s, samples);
            let (mut theta, mut f) = (vec![0.0; m], vec![0.0; n]);
            problem.sample(&data, &mut src, &mut theta, &mut f);
            (theta, f)
        };
        let pick = |u: &[f64]| out.iter().map(|&o| u[o]).collect::<Vec<f64>>();
        let per_block = match &runner {
            Runner::Band(b) => b.block().max(1),
            _ => BLOCK,
        } as u64;
        let mut first = 0u64;
        while first < samples {
            if first > 0 && gpuq_core::interrupt::requested() {
                interrupted = true;
                break;
            }
            let count = (samples - first).min(per_block);
            let block: Block = match &mut runner {
                Runner::Band(run) => {
                    let b = run.run(first, count as usize)?;
                    let k = out.len();
                    b.residuals
                        .iter()
                        .enumerate()
                        .map(|(t, &res)| match failed_pivot(res) {
                            Some(j) => Err(Error::Precondition {
                                method: "static response",
                                reason: format!(
                                    "K(theta) of sample {} is not positive definite (pivot {j})",
                                    first + t as u64
                                ),
                            }),
                            None => Ok((
                                b.values[t * k..(t + 1) * k].to_vec(),
                                res,
                                None,
                                res <= problem.tol,
                            )),
                        })
                        .collect::<Result<_>>()?
                }
                Runner::Dense(host) => (first..first + count)
                    .into_par_iter()
                    .map(|s| {
                        let (theta, mut u) = draw(s);
                        let f = u.clone();
                        let what = || format!("K(theta) of sample {s}");
                        host.solve(&theta, &mut u, &what)?;
                        let res = problem.residual(&theta, &u, &f);
                        Ok((pick(&u), res, None, res <= problem.tol))
                    })
                    .collect::<Result<_>>()?,
                Runner::Device(device) => {
                    // A deterministic load (no factor, none per DOF) goes up once.
                    let (r, _, per_dof) = problem.draws();
                    let same = r == 0 && per_dof == 0;
                    let (mut theta, mut f) = (vec![0.0; m], vec![0.0; n]);
                    let mut block = Vec::with_capacity(count as usize);
                    for s in first..first + count {
                        let mut src = Source::new(problem.design, seed, s, samples);
                        problem.sample(&data, &mut src, &mut theta, &mut f);
                        let (u, it, res, ok) = device.solve(backend, &theta, &f, same && s > 0)?;
                        block.push((pick(&u), res, Some(it), ok));
                    }
                    block
                }
            };
            for (u, res, it, ok) in block {
                for (vals, v) in values.iter_mut().zip(u) {
                    vals.push(v);
                }
                max_residual = max_residual.max(res);
                met &= ok;
                iterations.extend(it);
            }
            first += count;
        }
        solve_s = start.elapsed().as_secs_f64();
    }
    // The samples done: all of them unless a stop cut the run short.
    let done = values.first().map_or(samples, |v| v.len() as u64);
    let outputs = values
        .iter_mut()
        .enumerate()
        .map(|(k, v)| {
            let d = describe(v, &[0.05, 0.5, 0.95]);
            OutputStats {
                dof: problem.outputs[k],
                mean: d.mean,
                std: d.std,
                q05: d.quantiles[0],
                q50: d.quantiles[1],
                q95: d.quantiles[2],
                exact_mean: exact.as_ref().map(|e| e[k].0),
                exact_std: exact.as_ref().map(|e| e[k].1),
            }
        })
        .collect();
    let iterations = (!iterations.is_empty()).then(|| {
        let lo = *iterations.iter().min().unwrap_or(&0);
        let hi = *iterations.iter().max().unwrap_or(&0);
        let mean = iterations.iter().sum::<usize>() as f64 / iterations.len() as f64;
        (lo, mean, hi)
    });
    let random = m > 0 || solver == StaticSolver::Dense;
    Ok(ModelStaticResult {
        samples: done,
        outputs,
        solver,
        factor_s,
        solve_s,
        iterations,
        max_residual: random.then_some(max_residual),
        converged: !interrupted && met,
        interrupted,
        values,
    })
}

/// [`static_response_on`] on the CPU backend with [`StaticSolver::Auto`]:
/// `samples` samples under `seed`.
pub fn model_static_response(
    problem: &ModelStatic<'_>,
    samples: u64,
    seed: u64,
) -> Result<ModelStaticResult> {
    static_response_on(
        &CpuBackend::new(),
        problem,
        &StaticOptions {
            samples,
            seed,
            solver: StaticSolver::Auto,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Damping;
    use gpuq_sparse::generators::laplace2d;

    /// x = A^-1 b for a dense row-major A (Gaussian elimination, partial
    /// pivoting): the tests' independent solver.
    fn dense_solve(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut a = a.to_vec();
        let mut x = b.to_vec();
        for c in 0..n {
            let p = (c..n)
                .max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs()))
                .unwrap();
            for k in 0..n {
                a.swap(c * n + k, p * n + k);
            }
            x.swap(c, p);
            for i in c + 1..n {
                let f = a[i * n + c] / a[c * n + c];
                for k in c..n {
                    a[i * n + k] -= f * a[c * n + k];
                }
                x[i] -= f * x[c];
            }
        }
        for c in (0..n).rev() {
            let s: f64 = (c + 1..n).map(|k| a[c * n + k] * x[k]).sum();
            x[c] = (x[c] - s) / a[c * n + c];
        }
        x
    }

    fn run(
        p: &ModelStatic<'_>,
        solver: StaticSolver,
        samples: u64,
        seed: u64,
    ) -> ModelStaticResult {
        let options = StaticOptions {
            samples,
            seed,
            solver,
        };
        static_response_on(&CpuBackend::new(), p, &options).unwrap()
    }

    fn model(m: usize, fixed: &[usize]) -> Model {
        Model::new(laplace2d::<f64>(m), None, Damping::None, fixed).unwrap()
    }

    fn problem(model: &Model) -> ModelStatic<'_> {
        let n = model.dofs();
        ModelStatic {
            model,
            load_mean: (0..n).map(|i| 1.0 + 0.01 * i as f64).collect(),
            load_std: Some(vec![0.3; n]),
            load_factor: None,
            terms: Vec::new(),
            outputs: vec![model.full_dof(n / 2), model.full_dof(n - 1)],
            design: Design::MonteCarlo,
            tol: 1e-12,
        }
    }

    #[test]
    fn deterministic_k_matches_the_exact_moments() {
        let md = model(12, &[0, 5, 143]);
        let mut p = problem(&md);
        // A rank-2 correlated load as well.
        let n = md.dofs();
        let mut c = gpuq_sparse::Coo::new(n, 2);
        for i in 0..n {
            c.push(i, 0, 0.2).unwrap();
            if i % 3 == 0 {
                c.push(i, 1, -0.5).unwrap();
            }
        }
        p.load_factor = Some(Csr::from_coo(&c).unwrap());
        let samples = 20_000;
        let r = model_static_response(&p, samples, 3).unwrap();
        // laplace2d:12 has semi-bandwidth 12: the band; the sparse Cholesky
        // and AMG-PCG adjoints give the same samples to rounding.
        assert_eq!(r.solver, StaticSolver::Band);
        for solver in [StaticSolver::Direct, StaticSolver::Pcg] {
            let q = ModelStatic {
                tol: 1e-12,
                ..p.clone()
            };
            let other = run(&q, solver, samples, 3);
            assert_eq!(other.solver, solver);
            for (a, b) in r.outputs.iter().zip(&other.outputs) {
                assert!((a.mean - b.mean).abs() < 1e-9 * a.mean.abs(), "{solver:?}");
                assert!((a.q95 - b.q95).abs() < 1e-9 * a.q95.abs(), "{solver:?}");
            }
            assert_eq!(other.iterations.is_some(), solver == StaticSolver::Pcg);
            assert!(other.converged);
        }
        // The exact mean against a dense solve.
        let dense = md.k.to_dense();
        let u = dense_solve(&dense, &p.load_mean, n);
        for o in &r.outputs {
            let em = o.exact_mean.unwrap();
            let es = o.exact_std.unwrap();
            let want = u[md.reduced_dof(o.dof).unwrap()];
            assert!((em - want).abs() < 1e-10 * want.abs(), "{em} vs {want}");
            let se = es / (samples as f64).sqrt();
            assert!((o.mean - em).abs() < 4.0 * se, "{} vs {em}", o.mean);
            assert!(
                (o.std / es - 1.0).abs() < 4.0 * (0.5 / samples as f64).sqrt(),
                "{} vs {es}",
                o.std
            );
            // Gaussian outputs: the quantiles are mean +- 1.645 std.
            assert!((o.q95 - (em + 1.6449 * es)).abs() < 0.05 * es);
            assert!(o.q05 < o.q50 && o.q50 < o.q95);
        }
        assert!(r.iterations.is_none() && r.max_residual.is_none());
        assert!(r.converged);
        // Latin hypercube and Sobol designs give the same moments.
        for design in [Design::LatinHypercube, Design::Sobol] {
            let q = ModelStatic {
                design,
                ..p.clone()
            };
            let r2 = model_static_response(&q, 5000, 3).unwrap();
            for (a, b) in r.outputs.iter().zip(&r2.outputs) {
                let es = a.exact_std.unwrap();
                assert!((b.mean - a.exact_mean.unwrap()).abs() < 5.0 * es / (5000f64).sqrt());
            }
        }
    }

    #[test]
    fn the_adjoint_path_equals_solving_every_sample() {
        let md = model(7, &[3, 20]);
        let n = md.dofs();
        let mut p = problem(&md);
        let mut c = gpuq_sparse::Coo::new(n, 3);
        for i in 0..n {
            c.push(i, i % 3, 0.1 + 0.01 * i as f64).unwrap();
        }
        p.load_factor = Some(Csr::from_coo(&c).unwrap());
        p.outputs = (0..md.full_dofs())
            .filter(|d| ![3, 20].contains(d))
            .collect();
        let samples = 40;
        for (design, solver) in [
            (Design::MonteCarlo, StaticSolver::Auto),
            (Design::LatinHypercube, StaticSolver::Direct),
            (Design::Sobol, StaticSolver::Dense),
        ] {
            let q = ModelStatic {
                design,
                ..p.clone()
            };
            let r = run(&q, solver, samples, 9);
            let dense = md.k.to_dense();
            let data = DrawData::new(&q).unwrap();
            let mut per_output = vec![Vec::new(); q.outputs.len()];
            for s in 0..samples {
                let mut src = Source::new(design, 9, s, samples);
                let mut f = vec![0.0; n];
                q.sample(&data, &mut src, &mut [], &mut f);
                let u = dense_solve(&dense, &f, n);
                for (k, &d) in q.outputs.iter().enumerate() {
                    per_output[k].push(u[md.reduced_dof(d).unwrap()]);
                }
            }
            for (o, mut vals) in r.outputs.iter().zip(per_output) {
                let d = describe(&mut vals, &[0.05, 0.5, 0.95]);
                let tol = 1e-10 * d.mean.abs().max(1.0);
                assert!(
                    (o.mean - d.mean).abs() < tol,
                    "{design:?}: {} vs {}",
                    o.mean,
                    d.mean
                );
                assert!((o.std - d.std).abs() < tol);
                assert!((o.q05 - d.quantiles[0]).abs() < tol);
                assert!((o.q95 - d.quantiles[2]).abs() < tol);
            }
        }
    }

    #[test]
    fn a_scaled_modulus_has_its_closed_form() {
        // K(theta) = (1 + 0.3 theta) K0, theta uniform on [-1, 1], load
        // deterministic: u = K0^-1 mu / (1 + 0.3 theta), so
        // E[u] = K0^-1 mu ln(1.3 / 0.7) / 0.6.
        let md = model(10, &[]);
        let mut p = problem(&md);
        p.load_std = None;
        let scaled = add_scaled(&md.k, 0.3 - 1.0, &md.k).unwrap();
        p.terms = vec![(scaled, Theta::Uniform { lo: -1.0, hi: 1.0 })];
        let samples = 40_000;
        let r = model_static_response(&p, samples, 7).unwrap();
        assert_eq!(r.solver, StaticSolver::Band);
        assert!(r.iterations.is_none());
        let u0 = SparseCholesky::new(&md.k, "K").unwrap().solve(&p.load_mean);
        let factor = (1.3f64 / 0.7).ln() / 0.6;
        let second = (1.0 / 0.7 - 1.0 / 1.3) / 0.6; // E[1 / (1 + 0.3 theta)^2]
        for o in &r.outputs {
            let base = u0[md.reduced_dof(o.dof).unwrap()];
            let mean = base * factor;
            let std = base.abs() * (second - factor * factor).sqrt();
            assert!(
                (o.mean - mean).abs() < 4.0 * std / (samples as f64).sqrt(),
                "{} vs {mean}",
                o.mean
            );
            assert!((o.std / std - 1.0).abs() < 0.03, "{} vs {std}", o.std);
            assert!(o.exact_mean.is_none());
        }
        assert!(r.max_residual.unwrap() < 1e-10);
        assert!(r.converged);
        // AMG-PCG on the backend solves the same samples to its tolerance.
        let pcg = run(&p, StaticSolver::Pcg, 500, 7);
        let band = run(&p, StaticSolver::Band, 500, 7);
        for (a, b) in pcg.outputs.iter().zip(&band.outputs) {
            assert!((a.mean - b.mean).abs() < 1e-9 * b.mean.abs());
            assert!((a.q05 - b.q05).abs() < 1e-9 * b.q05.abs());
        }
        let (lo, _, hi) = pcg.iterations.unwrap();
        assert!(lo >= 1 && hi <= 30, "{lo} {hi}");
        assert!(pcg.max_residual.unwrap() <= p.tol);
        assert!(pcg.converged);
    }

    #[test]
    fn the_affine_expansion_matches_per_sample_assembly() {
        let md = model(6, &[7]);
        let n = md.dofs();
        let mut p = problem(&md);
        let diag = Csr::from_coo(&{
            let mut c = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                c.push(i, i, 0.5 + 0.01 * i as f64).unwrap();
            }
            c
        })
        .unwrap();
        let half = {
            let mut c = gpuq_sparse::Coo::new(n, n);
            for i in 0..n / 2 {
                let (cols, vals) = md.k.row(i);
                for (&j, &v) in cols.iter().zip(vals) {
                    if (j as usize) < n / 2 {
                        c.push(i, j as usize, 0.2 * v).unwrap();
                    }
                }
            }
            Csr::from_coo(&c).unwrap()
        };
        p.terms = vec![
            (
                diag.clone(),
                Theta::Lognormal {
                    mu: 0.0,
                    sigma: 0.3,
                    shift: 0.0,
                },
            ),
            (
                half.clone(),
                Theta::Normal {
                    mean: 0.0,
                    std: 0.5,
                },
            ),
        ];
        p.outputs = (0..md.full_dofs()).filter(|&d| d != 7).collect();
        let samples = 70;
        let results = [
            run(&p, StaticSolver::Band, samples, 11),
            run(&p, StaticSolver::Pcg, samples, 11),
            run(&p, StaticSolver::Dense, samples, 11),
        ];
        // The same draws, each system assembled densely and solved directly.
        let data = DrawData::new(&p).unwrap();
        let mut per_output = vec![Vec::new(); p.outputs.len()];
        for s in 0..samples {
            let mut src = Source::new(p.design, 11, s, samples);
            let (mut theta, mut f) = (vec![0.0; 2], vec![0.0; n]);
            p.sample(&data, &mut src, &mut theta, &mut f);
            let mut a = md.k.to_dense();
            for ((t, _), th) in p.terms.iter().zip(&theta) {
                for (x, y) in a.iter_mut().zip(t.to_dense()) {
                    *x += th * y;
                }
            }
            let u = dense_solve(&a, &f, n);
            for (k, &d) in p.outputs.iter().enumerate() {
                per_output[k].push(u[md.reduced_dof(d).unwrap()]);
            }
        }
        for (k, mut vals) in per_output.into_iter().enumerate() {
            let d = describe(&mut vals, &[0.05, 0.5, 0.95]);
            for r in &results {
                let o = &r.outputs[k];
                assert!(
                    (o.mean - d.mean).abs() < 1e-9 * d.mean.abs().max(1.0),
                    "{:?}: {} vs {}",
                    r.solver,
                    o.mean,
                    d.mean
                );
                assert!((o.std - d.std).abs() < 1e-8 * d.std.max(1e-3));
                assert!((o.q50 - d.quantiles[1]).abs() < 1e-9 * d.mean.abs().max(1.0));
            }
        }
    }

    /// The trait's default body (one sample after the other).
    #[derive(Clone)]
    struct Sequential;
    crate::test_backend::forward_backend!(Sequential);
    impl BandKernels for Sequential {}
    impl crate::linear_samples::LinearSampleKernels for Sequential {}

    #[test]
    fn the_band_kernel_gives_the_same_bits_on_every_body() {
        // A banded model (laplace2d:6, w = 6) with a normal, a lognormal and
        // a uniform theta, a rank-1 factor and independent loads.
        let md = model(6, &[7]);
        let n = md.dofs();
        let mut p = problem(&md);
        let diag = |scale: f64| {
            let mut c = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                c.push(i, i, scale * (1.0 + 0.01 * i as f64)).unwrap();
            }
            Csr::from_coo(&c).unwrap()
        };
        p.terms = vec![
            (
                diag(0.5),
                Theta::Normal {
                    mean: 0.2,
                    std: 0.1,
                },
            ),
            (
                md.k.clone(),
                Theta::Lognormal {
                    mu: -0.02,
                    sigma: 0.2,
                    shift: -1.0,
                },
            ),
            (diag(0.3), Theta::Uniform { lo: 0.0, hi: 1.0 }),
        ];
        let mut c = gpuq_sparse::Coo::new(n, 1);
        c.push(n - 1, 0, 0.7).unwrap();
        p.load_factor = Some(Csr::from_coo(&c).unwrap());
        let out: Vec<usize> = p
            .outputs
            .iter()
            .map(|&d| md.reduced_dof(d).unwrap())
            .collect();
        let data = DrawData::new(&p).unwrap();
        let band = BandData::new(&p, band_of(&p), &out).unwrap();
        let draws = BandDraws {
            design: Design::LatinHypercube.code(),
            seed: 4,
            samples: 50,
        };
        let cpu = CpuBackend::new();
        let mut a = cpu.band_runner(band.model(&p, &data), draws).unwrap();
        let mut b = Sequential
            .band_runner(band.model(&p, &data), draws)
            .unwrap();
        let (x, y) = (a.run(0, 50).unwrap(), b.run(0, 50).unwrap());
        assert_eq!(x, y);
        assert!(x.residuals.iter().all(|&r| (0.0..1e-13).contains(&r)));
        // Samples 20..30 alone are the same samples.
        let z = a.run(20, 10).unwrap();
        assert_eq!(z.values, x.values[20 * out.len()..30 * out.len()]);
        // Through the procedure: the samples of the kernel, and the same
        // values as a dense LU of the same draws.
        let band_r = run(&p, StaticSolver::Band, 50, 4);
        let dense_r = run(&p, StaticSolver::Dense, 50, 4);
        let q = ModelStatic {
            design: Design::LatinHypercube,
            ..p.clone()
        };
        let band_q = run(&q, StaticSolver::Band, 50, 4);
        for k in 0..out.len() {
            let mut mine: Vec<f64> = (0..50).map(|t| x.values[t * out.len() + k]).collect();
            mine.sort_by(f64::total_cmp);
            assert_eq!(band_q.values[k], mine);
            for (u, v) in band_r.values[k].iter().zip(&dense_r.values[k]) {
                assert!((u - v).abs() < 1e-12 * v.abs().max(1.0), "{u} vs {v}");
            }
        }
    }

    #[test]
    fn bad_problems_are_refused() {
        let md = model(5, &[3]);
        let ok = problem(&md);
        let e = model_static_response(&ok, 0, 1).unwrap_err();
        assert!(e.to_string().contains("StaticOptions::samples"), "{e}");
        let e = static_response_on(
            &CpuBackend::new(),
            &ModelStatic {
                terms: vec![(
                    md.k.clone(),
                    Theta::Normal {
                        mean: 0.0,
                        std: 0.1,
                    },
                )],
                ..ok.clone()
            },
            &StaticOptions {
                samples: 10,
                seed: 1,
                solver: StaticSolver::Direct,
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("StaticOptions::solver"), "{e}");
        for (bad, field) in [
            (
                ModelStatic {
                    outputs: vec![3],
                    ..ok.clone()
                },
                "fixed",
            ),
            (
                ModelStatic {
                    outputs: vec![99],
                    ..ok.clone()
                },
                "outside",
            ),
            (
                ModelStatic {
                    outputs: vec![],
                    ..ok.clone()
                },
                "ModelStatic::outputs",
            ),
            (
                ModelStatic {
                    load_mean: vec![1.0; 3],
                    ..ok.clone()
                },
                "ModelStatic::load_mean",
            ),
            (
                ModelStatic {
                    load_std: Some(vec![-1.0; md.dofs()]),
                    ..ok.clone()
                },
                "ModelStatic::load_std",
            ),
            (
                ModelStatic {
                    tol: 0.0,
                    ..ok.clone()
                },
                "ModelStatic::tol",
            ),
        ] {
            let e = model_static_response(&bad, 10, 1).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
        // K symmetric with a positive diagonal but indefinite: the pivot is named.
        let mut c = laplace2d::<f64>(5).to_coo();
        c.push(0, 1, 10.0).unwrap();
        c.push(1, 0, 10.0).unwrap();
        let bad_model = Model::new(Csr::from_coo(&c).unwrap(), None, Damping::None, &[]).unwrap();
        let e = model_static_response(&problem(&bad_model), 10, 1).unwrap_err();
        assert!(e.to_string().contains("pivot"), "{e}");
        assert!(Theta::parse("uniform:1:0").is_err());
        assert!(Theta::parse("beta:1:2").is_err());
        assert!(Theta::parse("normal:0").is_err());
        let t = Theta::parse("lognormal:0:0.5").unwrap();
        assert!((t.mean() - 0.125f64.exp()).abs() < 1e-15);
        let t = Theta::parse("lognormal:0:0.5:-1").unwrap();
        assert!((t.mean() - (0.125f64.exp() - 1.0)).abs() < 1e-15);
        assert_eq!(t.value(0.0), 0.0);
        assert_eq!(Theta::parse("uniform:2:4").unwrap().value(0.0), 3.0);
    }
}
