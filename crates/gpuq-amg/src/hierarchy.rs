//! The setup: levels of matrices, prolongators and smoother data, built once
//! from a CSR matrix (on the host, or with its heavy steps on a backend that
//! keeps the matrices it builds), deterministic whatever the thread count;
//! and the numeric re-setup for new values on the same pattern.

use crate::aggregate::seed_selection;
use crate::blockdiag::BlockDiagonal;
use crate::coarse::dense_inverse;
use crate::coloring::{color_sweeps, greedy, ColorSweep};
use crate::host_checks::{check_input, component_constants, kernel_with};
use crate::node_aggregates::NodeAggregates;
use crate::options::{AmgOptions, CoarseSolver, Coarsening, Smoother};
use crate::prolong::seed_prolongator;
use crate::resident::LevelMatrix;
use crate::setup::SetupKernels;
use crate::strength::strength_graph;
use crate::trace::Trace;
use gpuq_core::{Error, Result, Scalar};
use gpuq_cpu::CpuBackend;
use gpuq_sparse::Csr;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What a level's smoother needs, computed on the host.
#[derive(Clone, Debug)]
pub struct SmootherData {
    /// The level's smoother.
    pub kind: Smoother,
    /// The inverse block diagonal (of D, or of the l1 matrix for l1-Jacobi)
    /// ([`BlockDiagonal::to_csr`] gives it as a matrix).
    pub dinv: BlockDiagonal,
    /// The Jacobi damping: 4 / (3 rho(D^-1 A)) for damped Jacobi, 1 for l1-Jacobi.
    pub omega: f64,
    /// The estimate of rho(D^-1 A) (largest Lanczos Ritz value).
    pub rho: f64,
    /// Gauss-Seidel only: the colour sweeps, in colour order (empty for the
    /// other smoothers).
    pub colors: Vec<ColorSweep>,
}

/// One level of the hierarchy. A device setup leaves the matrices on the
/// device; [`LevelMatrix::host`] copies one to the host when asked.
#[derive(Clone, Debug)]
pub struct Level {
    /// The level's matrix (the input matrix on level 0).
    pub a: LevelMatrix,
    /// Unknowns per node on this level.
    pub block: usize,
    /// The prolongator to this level from the next coarser one (`None` on the
    /// coarsest level).
    pub p: Option<LevelMatrix>,
    /// The restriction R = P^T (`None` on the coarsest level).
    pub r: Option<LevelMatrix>,
    /// The smoother's data (`None` on the coarsest level).
    pub smoother: Option<SmootherData>,
    /// Aggregate of each node (smoothed aggregation), or for the seed's method the
    /// coarse node each node interpolates from first; `None` on the coarsest level.
    /// A device setup may hold them on the device only
    /// ([`NodeAggregates::host`] brings them over).
    pub aggregate_of: Option<NodeAggregates>,
}

/// Seconds spent in each phase of the setup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupTimings {
    /// Norm matrix and strength graph of the seed's method (smoothed
    /// aggregation times them with the aggregation, which
    /// [`SetupKernels::aggregates`] runs as one step: 0 here).
    pub strength_s: f64,
    /// Coarse selection, or for smoothed aggregation the strength graph and
    /// the aggregation.
    pub aggregation_s: f64,
    /// Prolongators (tentative, smoothing).
    pub prolongation_s: f64,
    /// The restriction R = P^T and the Galerkin products R A P.
    pub galerkin_s: f64,
    /// Block-diagonal inverses and spectral-radius estimates.
    pub smoother_s: f64,
    /// The coarsest solve's (pseudo-)inverse.
    pub coarse_s: f64,
    /// Copies of the level matrices to the setup's backend (0 on the host).
    #[serde(default)]
    pub upload_s: f64,
    /// The finest matrix's null space and symmetry checks and the
    /// hierarchy's copy of it (the finiteness check before is not counted).
    #[serde(default)]
    pub checks_s: f64,
    /// The whole setup.
    pub total_s: f64,
}

/// One level in a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelInfo {
    /// Rows.
    pub rows: usize,
    /// Stored nonzeros.
    pub nnz: usize,
    /// Unknowns per node.
    pub block: usize,
    /// Gauss-Seidel: the colours of the level's smoother (0 otherwise, and
    /// on the coarsest level).
    #[serde(default)]
    pub colors: usize,
}

/// The hierarchy in a report: sizes, complexities and timings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HierarchyInfo {
    /// `sa` or `seed`.
    pub coarsening: String,
    /// The finest level's smoother (of every level but the coarsest when
    /// `coarse_smoother` is the same).
    pub smoother: String,
    /// The smoother of the levels below the finest.
    #[serde(default)]
    pub coarse_smoother: String,
    /// Smoothing applications before and after the coarse correction.
    pub sweeps: usize,
    /// Smoothing applications on the levels below the finest.
    #[serde(default)]
    pub coarse_sweeps: usize,
    /// `v` or `w`.
    pub cycle: String,
    /// Strength threshold.
    pub strength: f64,
    /// Damped Jacobi's omega times rho(D^-1 A).
    #[serde(default)]
    pub jacobi_damping: f64,
    /// Per level, finest first.
    pub levels: Vec<LevelInfo>,
    /// Sum of the levels' nonzeros over the finest level's.
    pub operator_complexity: f64,
    /// Sum of the levels' rows over the finest level's.
    pub grid_complexity: f64,
    /// `dense` (pseudo-inverse / LU) or `block-diagonal`.
    pub coarse_solver: String,
    /// Dimension of the null space handled explicitly (0: nonsingular).
    pub null_space_dim: usize,
    /// Near-null-space vectors of smoothed aggregation's tentative
    /// prolongators (the given ones, else the block's component constants):
    /// the unknowns per node below the finest level.
    #[serde(default)]
    pub candidates: usize,
    /// Setup time per phase.
    pub timings: SetupTimings,
    /// Where the setup's aggregation, prolongator and Galerkin products ran
    /// (`cpu` or `cuda`).
    #[serde(default)]
    pub setup_backend: String,
}

/// The AMG hierarchy, built on the host.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    levels: Vec<Level>,
    coarse: Csr<f64>,
    kernel: Vec<Vec<f64>>,
    symmetric: bool,
    options: AmgOptions,
    timings: SetupTimings,
    setup_backend: &'static str,
}

fn time<R>(acc: &mut f64, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed().as_secs_f64();
    r
}

/// [`time`] of a phase whose work `setup` may still be running when `f`
/// returns (device launches): waits for it ([`SetupKernels::wait`]) before
/// the clock stops, so the phase's time holds its own work.
fn time_on<K: SetupKernels, R>(
    setup: &K,
    acc: &mut f64,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    time(acc, || {
        let r = f()?;
        setup.wait()?;
        Ok(r)
    })
}

/// The finest matrix a hierarchy is built from.
enum Input<'a> {
    /// On the host, uploaded by the setup ([`SetupKernels::finest`]).
    Host(&'a Csr<f64>),
    /// On the host, handed over ([`SetupKernels::finest_handed_over`]).
    HandedOver(LevelMatrix),
    /// Already on the setup's backend.
    Resident(LevelMatrix),
}

/// The coarsening rule of every setup (one process and across ranks): a
/// coarse level of `(rows, nnz)` is kept below a level of `fine` when it has
/// rows and at most 90% of the fine level's; for smoothed aggregation
/// (`sa`) it must also hold no more entries than the fine level, since too
/// small aggregates (a threshold that keeps few connections) give coarse
/// operators that fill in level after level. Otherwise the setup coarsens
/// again with every connection strong, and failing that the fine level
/// becomes the coarsest. O(1).
pub fn coarsening_accepted(fine: (usize, usize), (rows, nnz): (usize, usize), sa: bool) -> bool {
    rows > 0 && rows * 10 <= fine.0 * 9 && (!sa || nnz <= fine.1)
}

fn bad(reason: String) -> Error {
    Error::Precondition {
        method: "amg",
        reason,
    }
}

impl Hierarchy {
    /// Builds the hierarchy of `a` (square, real, finite, size divisible by the
    /// block size, nonzero diagonal blocks).
    ///
    /// Per level: the block norm matrix and strength graph (O(nnz)); the seed's
    /// greedy selection or the MIS-2 aggregation (O(nnz) per round); the
    /// prolongator (seed: O(n); SA: thin QR per aggregate, O(n k^2), then one
    /// smoothing step, two sparse products); the Galerkin product R (A P) (two
    /// sparse products); the inverse block diagonal and a Lanczos estimate of
    /// rho(D^-1 A) (`lanczos_steps` products). Coarsening stops at
    /// `coarse_size` unknowns, at `max_levels`, or when a level shrinks by less
    /// than 10%; the coarsest matrix is then inverted densely (O(n_c^3)).
    ///
    /// Errors on invalid options, a non-square or non-finite matrix, a size the
    /// block does not divide, near-null-space vectors of the wrong length, and a
    /// singular diagonal block.
    ///
    /// Runs every step on the host; [`Hierarchy::build_on`] runs the
    /// aggregation, prolongator smoothing and Galerkin products on a backend.
    pub fn build(a: &Csr<f64>, options: &AmgOptions) -> Result<Self> {
        Self::build_on(&CpuBackend::new(), a, options)
    }

    /// [`Hierarchy::build`] with the strength graph and aggregation (smoothed
    /// aggregation only; the seed's greedy selection is sequential and stays on
    /// the host), the coarse levels' block diagonals, the Lanczos estimates,
    /// the input checks, the tentative prolongator (one QR per aggregate for
    /// several near-null-space vectors), the prolongator smoothing and the
    /// Galerkin products run by `setup` ([`SetupKernels`]); the inverses of
    /// the diagonal blocks and the coarsest inverse run on the host. The
    /// CUDA backend builds the same aggregates as the host and the same
    /// matrices to rounding, and leaves P, R and the coarse operators on
    /// the device ([`LevelMatrix`]: [`Amg::new`](crate::Amg::new) converts
    /// them there; [`LevelMatrix::host`] copies one back on demand), so they
    /// hold device memory as long as the hierarchy lives.
    pub fn build_on<K: SetupKernels>(
        setup: &K,
        a: &Csr<f64>,
        options: &AmgOptions,
    ) -> Result<Self> {
        Self::build_from(setup, Input::Host(a), options, None)
    }

    /// [`Hierarchy::build_on`] of a matrix the caller hands over: where the
    /// setup computes on the host (the CPU backend) `a` becomes the finest
    /// level as it is, without [`Hierarchy::build_on`]'s copy of its arrays
    /// (one pass over A less: about 2% of a two-core P2 Poisson setup); a
    /// device backend uploads it as [`Hierarchy::build_on`] does. The same
    /// hierarchy as [`Hierarchy::build_on`] of `a`.
    pub fn build_handed_over<K: SetupKernels>(
        setup: &K,
        a: Csr<f64>,
        options: &AmgOptions,
    ) -> Result<Self> {
        let a = LevelMatrix::from_host(a);
        Self::build_from(setup, Input::HandedOver(a), options, None)
    }

    /// [`Hierarchy::build_on`] of a finest matrix that is already on the
    /// setup's backend (`finest`, [`LevelMatrix::from_resident`]: a matrix
    /// another library holds on the GPU, copied there into the setup's
    /// layout): no transfer of A through the host where the backend checks
    /// the input itself (the CUDA backend does, for blocks up to
    /// `gpuq_kernels::amg::MAX_SETUP_BLOCK`); otherwise, and for the message
    /// of a non-finite entry or to test given near-null-space vectors against
    /// A, the host copy is downloaded ([`LevelMatrix::host`]). The same
    /// hierarchy as [`Hierarchy::build_on`] of that matrix.
    pub fn build_on_resident<K: SetupKernels>(
        setup: &K,
        finest: LevelMatrix,
        options: &AmgOptions,
    ) -> Result<Self> {
        Self::build_from(setup, Input::Resident(finest), options, None)
    }

    /// The hierarchy of `a`, a matrix with the pattern of this hierarchy's
    /// finest matrix and new values (a time step's new coefficients, a
    /// Newton step's Jacobian), rebuilt on the host. See
    /// [`Hierarchy::update_values_on`].
    pub fn update_values(&self, a: &Csr<f64>) -> Result<Self> {
        self.update_values_on(&CpuBackend::new(), a)
    }

    /// [`Hierarchy::update_values`] with the numeric steps on `setup`: the
    /// aggregates of smoothed aggregation (and so the number of levels and
    /// their sizes) are kept; the tentative and smoothed prolongators, the
    /// smoothers' block diagonals and spectral estimates, the Galerkin
    /// products and the coarsest inverse are recomputed from the new values
    /// (AmgX's "replace coefficients"). Cost: the setup without the strength
    /// graphs and the aggregation; the result equals a fresh
    /// [`Hierarchy::build_on`] of `a` whenever that would aggregate as this
    /// one did. Errors when the pattern differs from the finest matrix's
    /// (row pointers and columns), on the input checks of a build, and for
    /// the seed's coarsening (its selection is not kept: rebuild instead).
    pub fn update_values_on<K: SetupKernels>(&self, setup: &K, a: &Csr<f64>) -> Result<Self> {
        if self.options.coarsening != Coarsening::SmoothedAggregation {
            return Err(bad(
                "update_values needs smoothed aggregation (the seed's selection is not kept)"
                    .into(),
            ));
        }
        if !setup.same_pattern(&self.levels[0].a, a)? {
            return Err(Error::InvalidArgument(
                "update_values: the matrix's pattern differs from the hierarchy's finest matrix"
                    .into(),
            ));
        }
        let reuse: Vec<NodeAggregates> = self
            .levels
            .iter()
            .map_while(|l| l.aggregate_of.clone())
            .collect();
        Self::build_from(setup, Input::Host(a), &self.options, Some(&reuse))
    }

    /// [`Hierarchy::build_on`], with each level's aggregates and their count
    /// taken from `reuse` when given (then exactly that many coarsenings).
    fn build_from<K: SetupKernels>(
        setup: &K,
        input: Input<'_>,
        options: &AmgOptions,
        reuse: Option<&[NodeAggregates]>,
    ) -> Result<Self> {
        options.validate()?;
        let total = Instant::now();
        let mut trace = Trace::new();
        let (n, ncols) = match &input {
            Input::Host(a) => a.shape(),
            Input::HandedOver(m) | Input::Resident(m) => (m.nrows(), m.ncols()),
        };
        if n != ncols || n == 0 {
            return Err(bad(format!(
                "matrix is {n} x {ncols}, not square and non-empty"
            )));
        }
        if n % options.block != 0 {
            return Err(bad(format!(
                "block size {} does not divide the {n} unknowns",
                options.block
            )));
        }
        let nns: Vec<Vec<f64>> = match &options.near_null_space {
            Some(v) => {
                let k = v.len();
                for (c, x) in v.iter().enumerate() {
                    if x.len() != n {
                        return Err(Error::InvalidArgument(format!(
                            "near-null-space vector {} of {k} has {} entries; the matrix has {n} rows",
                            c + 1,
                            x.len()
                        )));
                    }
                    if let Some(i) = x.iter().position(|y| !y.is_finite()) {
                        return Err(Error::InvalidArgument(format!(
                            "near-null-space vector {} of {k}: entry {} (1-based) is not finite",
                            c + 1,
                            i + 1
                        )));
                    }
                }
                v.clone()
            }
            None => component_constants(n, options.block),
        };
        trace.mark(format_args!("validation and near-null-space vectors"));
        let upload = Instant::now();
        let finest = match &input {
            Input::Host(a) => setup.finest(a)?,
            Input::HandedOver(m) => setup.finest_handed_over(m.clone())?,
            Input::Resident(m) => m.clone(),
        };
        let upload_s = upload.elapsed().as_secs_f64();
        trace.mark(format_args!("finest level"));
        let start = Instant::now();
        let on_backend = setup.input_checks(&finest, options.block)?;
        let backend_checks_s = start.elapsed().as_secs_f64();
        trace.mark(format_args!("checks on the backend"));
        // A on the host: the input, or the resident matrix's host copy,
        // downloaded once where a check on the host needs it.
        let host = || -> Result<&Csr<f64>> {
            match &input {
                Input::Host(a) => Ok(a),
                Input::HandedOver(m) | Input::Resident(m) => m.host(),
            }
        };
        let host_checks = match on_backend {
            None => Some(host()?),
            Some(_) => None,
        };
        // Where the backend does not check, the finiteness, null-space and
        // symmetry checks (they only read `a`) run on the host beside the
        // levels' setup, and their errors come first (a setup of non-finite
        // values ends in an error or in levels that are dropped).
        let (checked, built) = std::thread::scope(|scope| {
            let checks = host_checks.map(|a| {
                scope.spawn(move || -> Result<_> {
                    let start = Instant::now();
                    // On a pool of their own (half the cores), so that the
                    // setup's parallel steps do not queue behind them.
                    let threads = (rayon::current_num_threads() / 2).max(1);
                    let run = || check_input(a, options.block);
                    let (kernel, symmetric) =
                        match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                            Ok(pool) => pool.install(run)?,
                            Err(_) => run()?,
                        };
                    Ok((kernel, symmetric, start.elapsed().as_secs_f64()))
                })
            });
            let built = Self::levels_of(setup, finest, options, reuse, nns, &mut trace);
            (checks.map(|c| c.join()), built)
        });
        trace.mark(format_args!("input checks on the host joined"));
        let checked = match (on_backend, checked) {
            (Some((kernel, symmetric)), _) => Ok((kernel, symmetric, backend_checks_s)),
            (None, Some(joined)) => joined
                .map_err(|_| Error::InvalidArgument("the AMG input checks panicked".into()))?,
            (None, None) => unreachable!("the host checks run when the backend's do not"),
        };
        let (mut kernel, symmetric, mut checks_s) = checked?;
        if let Some(given) = &options.near_null_space {
            let start = Instant::now();
            kernel = kernel_with(host()?, kernel, given);
            checks_s += start.elapsed().as_secs_f64();
        }
        let (levels, coarse, mut t) = built?;
        t.checks_s = checks_s;
        t.upload_s += upload_s;
        t.total_s = total.elapsed().as_secs_f64();
        Ok(Hierarchy {
            levels,
            coarse,
            kernel,
            symmetric,
            options: options.clone(),
            timings: t,
            setup_backend: setup.setup_name(),
        })
    }

    /// The levels of the hierarchy of `a` (finest first) and the coarsest
    /// solve's matrix, with the setup's timings (all but the checks and the
    /// total).
    fn levels_of<K: SetupKernels>(
        setup: &K,
        finest: LevelMatrix,
        options: &AmgOptions,
        reuse: Option<&[NodeAggregates]>,
        mut nns: Vec<Vec<f64>>,
        trace: &mut Trace,
    ) -> Result<(Vec<Level>, Csr<f64>, SetupTimings)> {
        let mut t = SetupTimings::default();
        let mut cur = finest;
        let mut levels = Vec::new();
        let mut bs = options.block;
        let coarse = loop {
            let rows = cur.nrows();
            let last = match reuse {
                Some(r) => levels.len() == r.len(),
                None => rows <= options.coarse_size || levels.len() + 1 >= options.max_levels,
            };
            if last {
                break time(&mut t.coarse_s, || coarse_matrix(cur.host()?, bs, options))?;
            }
            let kind = options.smoother_of(levels.len());
            let level = time_on(setup, &mut t.upload_s, || setup.level(&cur))?;
            trace.mark(format_args!("level {} ({rows} rows): upload", levels.len()));
            let (smoother, dinv) = time_on(setup, &mut t.smoother_s, || {
                smoother_data(setup, (&cur, &level), bs, kind, options, trace)
            })?;
            let given = reuse.map(|r| &r[levels.len()]);
            let mut attempt = None;
            for eps in [options.strength, 0.0] {
                let built = coarsen(
                    setup,
                    (&cur, &level),
                    (bs, &nns),
                    (eps, given),
                    (&dinv, smoother.rho),
                    options,
                    (&mut t, trace),
                )?;
                let sa = options.coarsening == Coarsening::SmoothedAggregation;
                let shrinks = |b: &Coarsened| {
                    coarsening_accepted((rows, cur.nnz()), (b.ac.nrows(), b.ac.nnz()), sa)
                };
                if let Some(built) = built.filter(|b| shrinks(b) || given.is_some()) {
                    attempt = Some(built);
                    break;
                }
                if eps == 0.0 {
                    break;
                }
            }
            let Some(Coarsened {
                p,
                r,
                ac,
                aggregate_of,
                next_bs,
                next_nns,
            }) = attempt
            else {
                break time(&mut t.coarse_s, || coarse_matrix(cur.host()?, bs, options))?;
            };
            let next = std::mem::replace(&mut cur, ac);
            levels.push(Level {
                a: next,
                block: bs,
                p: Some(p),
                r: Some(r),
                smoother: Some(smoother),
                aggregate_of: Some(aggregate_of),
            });
            bs = next_bs;
            nns = next_nns;
        };
        levels.push(Level {
            a: cur,
            block: bs,
            p: None,
            r: None,
            smoother: None,
            aggregate_of: None,
        });
        trace.mark(format_args!("coarsest level"));
        Ok((levels, coarse, t))
    }

    /// The levels, finest first; the last is the coarsest.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// The coarsest solve as a matrix: the dense (pseudo-)inverse, or the
    /// inverse block diagonal for [`CoarseSolver::BlockDiagonal`].
    pub fn coarse_solve(&self) -> &Csr<f64> {
        &self.coarse
    }

    /// Whether the finest matrix is symmetric (to 1e-12 of its largest entry):
    /// then so is every level and the cycle.
    pub fn is_symmetric(&self) -> bool {
        self.symmetric
    }

    /// The options it was built with.
    pub fn options(&self) -> &AmgOptions {
        &self.options
    }

    /// An orthonormal basis of the null space of the finest matrix found among
    /// the constants of each block component and their sum (empty when A is
    /// nonsingular there).
    pub fn null_space(&self) -> &[Vec<f64>] {
        &self.kernel
    }

    /// Removes the null-space components from `v` on the host: v -= (q^T v) q for
    /// each basis vector q. O(n) per vector; does nothing for nonsingular A.
    /// Apply it to the right-hand side of a singular system (to make it
    /// consistent) and to the solution (to pick the minimal-norm one).
    pub fn project<T: Scalar>(&self, v: &mut [T]) {
        for q in &self.kernel {
            let dot = q
                .iter()
                .zip(v.iter())
                .fold(T::zero(), |s, (&qi, &vi)| s + T::from_f64(qi) * vi);
            for (vi, &qi) in v.iter_mut().zip(q) {
                *vi -= dot * T::from_f64(qi);
            }
        }
    }

    /// Sizes, complexities and setup timings.
    pub fn info(&self) -> HierarchyInfo {
        let levels: Vec<LevelInfo> = self
            .levels
            .iter()
            .map(|l| LevelInfo {
                rows: l.a.nrows(),
                nnz: l.a.nnz(),
                block: l.block,
                colors: l.smoother.as_ref().map_or(0, |s| s.colors.len()),
            })
            .collect();
        let (r0, z0) = (levels[0].rows as f64, levels[0].nnz.max(1) as f64);
        HierarchyInfo {
            coarsening: self.options.coarsening.name().into(),
            smoother: self.options.smoother_of(0).name(),
            coarse_smoother: self.options.smoother_of(1).name(),
            sweeps: self.options.sweeps,
            coarse_sweeps: self.options.sweeps_of(1),
            cycle: self.options.cycle.name().into(),
            strength: self.options.strength,
            jacobi_damping: self.options.jacobi_damping,
            operator_complexity: levels.iter().map(|l| l.nnz as f64).sum::<f64>() / z0,
            grid_complexity: levels.iter().map(|l| l.rows as f64).sum::<f64>() / r0,
            levels,
            coarse_solver: match self.options.coarse_solver {
                CoarseSolver::Direct => "dense".into(),
                CoarseSolver::BlockDiagonal => "block-diagonal".into(),
            },
            null_space_dim: self.kernel.len(),
            candidates: self
                .options
                .near_null_space
                .as_ref()
                .map_or(self.options.block, Vec::len),
            timings: self.timings.clone(),
            setup_backend: self.setup_backend.into(),
        }
    }
}

/// One coarsening step's products.
struct Coarsened {
    p: LevelMatrix,
    r: LevelMatrix,
    ac: LevelMatrix,
    aggregate_of: NodeAggregates,
    next_bs: usize,
    next_nns: Vec<Vec<f64>>,
}

/// Strength graph with threshold `eps`, selection or aggregation (or the
/// `given` aggregates and their count), prolongator,
/// restriction and Galerkin product of one level (the matrix and `setup`'s
/// copy of it), timed into `t`; `None` when no node joins an aggregate
/// (every node isolated).
#[allow(clippy::too_many_arguments)]
fn coarsen<K: SetupKernels>(
    setup: &K,
    (cur, level): (&LevelMatrix, &K::Level),
    (bs, nns): (usize, &[Vec<f64>]),
    (eps, given): (f64, Option<&NodeAggregates>),
    (dinv, rho): (&BlockDiagonal, f64),
    options: &AmgOptions,
    (t, trace): (&mut SetupTimings, &mut Trace),
) -> Result<Option<Coarsened>> {
    let (p, aggregate_of, next_bs, next_nns) = match options.coarsening {
        Coarsening::Seed => {
            let s = time(&mut t.strength_s, || strength_graph(cur.host()?, bs, eps))?;
            let sel = time(&mut t.aggregation_s, || seed_selection(&s));
            let p = time(&mut t.prolongation_s, || seed_prolongator(&sel, bs))?.into();
            let first = sel.parents.iter().map(|p| p[0]).collect();
            let count = sel.coarse.len();
            (p, NodeAggregates::from_host(first, count), bs, Vec::new())
        }
        Coarsening::SmoothedAggregation => {
            let agg = match given {
                Some(agg) => agg.clone(),
                None => time_on(setup, &mut t.aggregation_s, || {
                    setup.aggregates(cur, level, bs, eps)
                })?,
            };
            trace.mark(format_args!("  aggregates"));
            if agg.count() == 0 {
                return Ok(None);
            }
            let (p, cn) = time_on(setup, &mut t.prolongation_s, || -> Result<_> {
                let (pt, coarse_null) = setup.tentative(&agg, bs, nns)?;
                trace.mark(format_args!("  tentative prolongator"));
                let p = setup.smoothed_prolongator(cur, level, dinv, rho, &pt)?;
                Ok((p, coarse_null))
            })?;
            trace.mark(format_args!("  smoothed prolongator"));
            (p, agg, nns.len(), cn)
        }
    };
    let (r, ac) = time_on(setup, &mut t.galerkin_s, || -> Result<_> {
        let (r, ac) = setup.galerkin(cur, level, &p)?;
        trace.mark(format_args!("  Galerkin product"));
        let ac = setup.fix_empty_rows(ac)?;
        trace.mark(format_args!("  rows of zeros"));
        Ok((r, ac))
    })?;
    Ok(Some(Coarsened {
        p,
        r,
        ac,
        aggregate_of,
        next_bs,
        next_nns,
    }))
}

/// The smoother's data of a level (inverse block diagonal, rho(D^-1 A) from
/// `setup`'s Lanczos, omega) and the inverse of D, the plain block diagonal.
fn smoother_data<K: SetupKernels>(
    setup: &K,
    (a, level): (&LevelMatrix, &K::Level),
    bs: usize,
    kind: Smoother,
    o: &AmgOptions,
    trace: &mut Trace,
) -> Result<(SmootherData, BlockDiagonal)> {
    let d = setup.block_diagonal(a, level, bs, false)?;
    trace.mark(format_args!("  block diagonal"));
    let dinv = setup.inverse_blocks(&d)?;
    trace.mark(format_args!("  its inverse"));
    let rho = setup.rho_dinv_a(a, level, &d, &dinv, o.lanczos_steps)?;
    trace.mark(format_args!("  Lanczos"));
    if !(rho > 0.0 && rho.is_finite()) {
        return Err(bad(format!(
            "rho(D^-1 A) estimated as {rho}: is A positive definite?"
        )));
    }
    let (smoother_dinv, omega, colors) = match kind {
        Smoother::L1Jacobi => (
            setup.inverse_blocks(&setup.block_diagonal(a, level, bs, true)?)?,
            1.0,
            Vec::new(),
        ),
        Smoother::GaussSeidel => {
            let a = a.host()?;
            let colors = color_sweeps(a, bs, &dinv, &greedy(a, bs)?)?;
            (dinv.clone(), 1.0, colors)
        }
        _ => (dinv.clone(), o.jacobi_damping / rho, Vec::new()),
    };
    trace.mark(format_args!("  smoother's inverse"));
    Ok((
        SmootherData {
            kind,
            dinv: smoother_dinv,
            omega,
            rho,
            colors,
        },
        dinv,
    ))
}

/// The coarsest solve's matrix.
fn coarse_matrix(a: &Csr<f64>, bs: usize, o: &AmgOptions) -> Result<Csr<f64>> {
    match o.coarse_solver {
        CoarseSolver::Direct => Ok(dense_inverse(a)?.matrix),
        CoarseSolver::BlockDiagonal => BlockDiagonal::of(a, bs, false).inverse()?.to_csr(),
    }
}
