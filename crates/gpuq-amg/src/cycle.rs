//! The V-cycle as a [`LinearOperator`] on any backend: every level's A, P, R,
//! smoother matrix and the coarsest (pseudo-)inverse are uploaded once; a cycle
//! is then SpMVs, BLAS-1 operations and the [`AmgKernels`] steps on resident
//! vectors, with no transfer and no host round trip.

use crate::coloring::symmetric_order;
use crate::hierarchy::Hierarchy;
use crate::kernels::{convert, AmgKernels};
use crate::options::{CycleKind, CycleOptions, Smoother};
use crate::resident::{host_row_lengths, sell_stored, LevelMatrix};
use crate::trace::Trace;
use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar};
use gpuq_sparse::{Csr, DeviceMatrix, Layout, MAX_BSR_BLOCK};
use std::sync::Mutex;

/// One level of a cycle as backend `B` stores it (every level but the
/// coarsest): built by [`Amg::new`] from a [`Hierarchy`], or by a caller
/// that stores its levels itself (the distributed hierarchy of `gpuq-dist`,
/// whose levels are matrices of its `Dist` backend) for [`Amg::from_levels`].
pub struct CycleLevel<B: AmgKernels, T: Scalar> {
    /// The smoother.
    pub smoother: Smoother,
    /// Smoothing applications before and after the coarse correction.
    pub sweeps: usize,
    /// The level's operator.
    pub a: B::Matrix<T>,
    /// The prolongator from the next coarser level.
    pub p: B::Matrix<T>,
    /// The restriction to the next coarser level.
    pub r: B::Matrix<T>,
    /// The smoother's inverse (block) diagonal D^-1 (l1 for l1 Jacobi).
    pub dinv: B::Matrix<T>,
    /// The diagonal of `dinv` as a vector, where `dinv` is diagonal (block
    /// size one) and the smoother Jacobi-type (times omega) or Chebyshev
    /// (as is, since each step scales it): the fused kernels read it.
    pub diag: Option<B::Vector<T>>,
    /// Unknowns per node.
    pub block: usize,
    /// The Jacobi damping.
    pub omega: T,
    /// Chebyshev: centre and half-width of its interval
    /// ([`chebyshev_interval`]).
    pub theta: f64,
    /// See `theta`.
    pub delta: f64,
    /// Gauss-Seidel: each colour's (scaled, select, scatter) matrices.
    pub colors: Vec<[B::Matrix<T>; 3]>,
}

/// The ratio of the upper to the lower end of Chebyshev's interval. Smoothed
/// aggregation's coarse levels take the lower part of the spectrum, so the
/// smoother aims at the upper tenth: on the finite-element systems of
/// `benches/fem` PCG took 12 iterations instead of 14 (jumping coefficients),
/// 17 instead of 18 (P2 Poisson), 19 instead of 20 (P1 Poisson) and 91
/// instead of 96 (anisotropic diffusion) with 10 rather than 30 (the
/// polynomial-smoothing literature's choice); 6 to 12 did about as well, 4
/// and 45 worse (docs/benchmarks.md, issue 47).
pub const CHEBYSHEV_RATIO: f64 = 10.0;

/// Chebyshev's interval [lambda_max / [`CHEBYSHEV_RATIO`], lambda_max] with
/// lambda_max = 1.1 `rho` (`rho` an estimate of rho(D^-1 A)), as its centre
/// and half-width (theta, delta). O(1).
pub fn chebyshev_interval(rho: f64) -> (f64, f64) {
    let upper = 1.1 * rho;
    let lower = upper / CHEBYSHEV_RATIO;
    (0.5 * (upper + lower), 0.5 * (upper - lower))
}

/// The coarsest level's solve.
pub enum Coarsest<B: AmgKernels, T: Scalar> {
    /// One product with the stored (pseudo-)inverse.
    Inverse(B::Matrix<T>),
    /// An operator of its own (for the distributed cycle, the gathered
    /// levels' one-process cycle on every rank).
    Operator(Box<dyn LinearOperator<B, T> + Send + Sync>),
}

/// The work vectors of one smoothed level, allocated once.
struct LevelWork<B: Backend, T: Scalar> {
    /// The residual / sweep scratch of this level.
    scratch: B::Vector<T>,
    /// Chebyshev's direction, old and new (Chebyshev only: a fused step
    /// reads the old one's neighbours while it writes the new one).
    dir: Option<(B::Vector<T>, B::Vector<T>)>,
    /// Gauss-Seidel: one colour-length vector per colour.
    color_t: Vec<B::Vector<T>>,
    /// The next coarser level's right-hand side and iterate.
    bc: B::Vector<T>,
    xc: B::Vector<T>,
    /// W-cycle only (and not into the coarsest level): the next coarser level's
    /// residual after its first cycle, and the second cycle's correction.
    second: Option<(B::Vector<T>, B::Vector<T>)>,
}

/// The AMG cycle M ~ A^-1 on backend `B`: pre-smoothing from a zero guess,
/// residual and restriction, the coarse cycle (a W-cycle runs it twice, the
/// second time on the residual the first left), prolongation and
/// post-smoothing by the same sweeps (so M is symmetric when A is, and PCG may
/// use it); the coarsest level is one SpMV with its stored (pseudo-)inverse
/// ([`Amg::new`]) or an operator of its own ([`Coarsest::Operator`]: the
/// distributed cycle's gathered levels). One implementation for every
/// backend, `gpuq-dist`'s `Dist` included (its levels' matrices distributed
/// across ranks, [`Amg::from_levels`]).
///
/// Cost of one application: per level, (2 nu + 1) SpMVs with A for Jacobi
/// (nu sweeps before and after, the first from zero needing none; plus the
/// residual), one with R and P, and the smoother's block-diagonal products; for
/// Chebyshev of degree d, about 2 nu d products with A. In total about
/// (operator complexity) x that of the finest level for a V-cycle; a W-cycle
/// visits level l 2^l times (and adds a residual per second visit), which
/// pays when the operator complexity is small.
pub struct Amg<B: AmgKernels, T: Scalar> {
    backend: B,
    levels: Vec<CycleLevel<B, T>>,
    coarse: Coarsest<B, T>,
    n: usize,
    symmetric: bool,
    name: &'static str,
    work: Mutex<Vec<LevelWork<B, T>>>,
}

/// Mean stored entries per row above which a matrix asked for in SELL is kept
/// in CSR unless it has [`SELL_MIN_LONG_ROWS`] rows: SELL gives each row one
/// thread, CSR a group of lanes sized to the mean row. A few thousand rows of
/// hundreds of entries (the coarse operators and restrictions below the first
/// coarse level) leave most of the GPU idle with a thread per row: with every
/// matrix in SELL a V-cycle on laplace3d:200 took 2.87 ms on the H100; with the
/// long-row ones in CSR, 2.12 ms (`docs/benchmarks.md`, AMG).
const SELL_MAX_MEAN_ROW: usize = 16;

/// Rows from which a matrix of long rows is still stored in SELL: enough
/// threads to fill a large GPU a few times over (an H100 holds about 2.7 x
/// 10^5 threads), each row's chain of loads then overlapping many others.
/// The first coarse operator of laplace3d:200 (716,728 rows of 34 entries) and
/// the finest restriction (716,728 rows of 39) took 2.1-2.3x their bytes'
/// time in CSR on the H100 (`docs/benchmarks.md`, AMG).
const SELL_MIN_LONG_ROWS: usize = 1 << 19;

/// Stored entries (padding included) per nonzero above which SELL sorts rows
/// by length within windows of [`SORT_SLICES`] slices, whatever sorting window
/// was asked for: the aggregation operators' rows vary (laplace3d:200's finest
/// prolongator: 1 to 6 entries, 1.48 stored per nonzero with 32-row slices
/// unsorted, 1.10 sorted within 256 rows).
pub(crate) const MAX_PADDING: f64 = 1.1;

/// Slices per sorting window where [`MAX_PADDING`] is exceeded.
pub(crate) const SORT_SLICES: usize = 8;

/// The requested layout for a matrix of `shape` and `nnz` stored entries
/// whose SELL-c-sigma storage `stored(c, sigma)` counts (asked only for
/// SELL), whose rows and columns come in node blocks of `blocks = [rows,
/// columns]` unknowns: any BSR request becomes BSR with the matrix's own node
/// blocks where rows and columns have the same block size, at least 2, that
/// divides both dimensions (the levels of smoothed aggregation with k
/// near-null-space vectors have k unknowns per coarse node), else CSR; SELL
/// becomes CSR where the matrix has long rows ([`SELL_MAX_MEAN_ROW`]) and few
/// of them ([`SELL_MIN_LONG_ROWS`]), and SELL with rows sorted within windows
/// of [`SORT_SLICES`] slices where the requested window pads by more than
/// [`MAX_PADDING`].
fn layout_for(
    requested: Layout,
    (shape, nnz): ((usize, usize), usize),
    stored: impl FnOnce(usize, usize) -> Result<usize>,
    [rb, cb]: [usize; 2],
) -> Result<Layout> {
    let (nrows, ncols) = shape;
    Ok(match requested {
        Layout::Bsr { .. }
            if rb == cb
                && (2..=MAX_BSR_BLOCK).contains(&rb)
                && nrows % rb == 0
                && ncols % rb == 0 =>
        {
            Layout::Bsr { b: rb }
        }
        Layout::Bsr { .. } => Layout::Csr,
        Layout::Sell { .. } if nnz > SELL_MAX_MEAN_ROW * nrows && nrows < SELL_MIN_LONG_ROWS => {
            Layout::Csr
        }
        Layout::Sell { c, sigma }
            if sigma < SORT_SLICES * c && stored(c, sigma)? as f64 > MAX_PADDING * nnz as f64 =>
        {
            Layout::Sell {
                c,
                sigma: SORT_SLICES * c,
            }
        }
        l => l,
    })
}

/// The layout [`Amg::new`] stores a level matrix `m` in when `requested`
/// is asked for, `blocks` the node blocks of its rows and columns: BSR with
/// those blocks where they are equal and at least 2 (any BSR request), else
/// CSR; CSR where SELL was asked for a matrix of few long rows (a thread per
/// row would leave most of a GPU idle), SELL with rows sorted within windows
/// where the requested window pads by more than 10%, else as asked. The
/// SELL padding is counted from the host copy, else where the backend keeps
/// the matrix ([`LevelMatrix::sell_stored`]; no download). For a caller that
/// stores a level's matrices itself (the distributed cycle: each rank's
/// block). O(rows) for SELL, O(1) otherwise.
pub fn level_cycle_layout(
    requested: Layout,
    m: &LevelMatrix,
    blocks: [usize; 2],
) -> Result<Layout> {
    layout_for(
        requested,
        (m.shape(), m.nnz()),
        |c, sigma| m.sell_stored(c, sigma),
        blocks,
    )
}

impl<B: AmgKernels, T: Scalar> Amg<B, T> {
    /// Uploads the hierarchy to `backend` in `options.layout` (for a BSR
    /// request each level's operators, and its smoother's block diagonal, in
    /// BSR of the level's node blocks, the transfer operators where the fine
    /// and coarse blocks agree, CSR elsewhere; SELL as
    /// [`CycleOptions::layout`] says; the coarsest inverse in CSR) and
    /// allocates the work vectors: O(total nonzeros) transfer, about 4 vectors
    /// per level.
    pub fn new(backend: &B, h: &Hierarchy, options: &CycleOptions) -> Result<Self> {
        let up = |m: &LevelMatrix, blocks: [usize; 2]| -> Result<B::Matrix<T>> {
            let layout = layout_for(
                options.layout,
                (m.shape(), m.nnz()),
                |c, sigma| m.sell_stored(c, sigma),
                blocks,
            )?;
            let layout = backend.amg_cycle_layout(layout, m, blocks[0].max(blocks[1]))?;
            backend.amg_level_matrix(m, layout)
        };
        let up_host = |m: &Csr<f64>, blocks: [usize; 2]| -> Result<B::Matrix<T>> {
            let layout = layout_for(
                options.layout,
                (m.shape(), m.nnz()),
                |c, sigma| Ok(sell_stored(host_row_lengths(m), c, sigma)),
                blocks,
            )?;
            backend.upload_matrix_owned(convert::<T>(m)?, layout)
        };
        let mut trace = Trace::new();
        let o = h.options();
        let all = h.levels();
        let missing = || Error::InvalidArgument("AMG level without its operators".into());
        let mut levels = Vec::new();
        for (l, next) in all.iter().zip(&all[1..]) {
            let (p, r, s) = (
                l.p.as_ref().ok_or_else(missing)?,
                l.r.as_ref().ok_or_else(missing)?,
                l.smoother.as_ref().ok_or_else(missing)?,
            );
            let (theta, delta) = chebyshev_interval(s.rho);
            let chebyshev = matches!(s.kind, Smoother::Chebyshev { .. });
            let k = levels.len();
            let (fb, cb) = (l.block, next.block);
            let a = up(&l.a, [fb, fb])?;
            trace.mark(format_args!("cycle level {k}: A"));
            let (p, r) = (up(p, [fb, cb])?, up(r, [cb, fb])?);
            trace.mark(format_args!("cycle level {k}: P and R"));
            // every row of the block diagonal holds its block's bs entries
            let (n, bs) = (l.a.nrows(), s.dinv.block());
            let layout = layout_for(
                options.layout,
                ((n, n), n * bs),
                |c, _| Ok(n.div_ceil(c.max(1)) * c * bs),
                [bs, bs],
            )?;
            let dinv = backend.amg_block_diagonal_matrix(&s.dinv, layout)?;
            trace.mark(format_args!("cycle level {k}: inverse diagonal"));
            let diag = if bs == 1 && s.kind != Smoother::GaussSeidel {
                Some(backend.amg_scaled_diagonal(&s.dinv, if chebyshev { 1.0 } else { s.omega })?)
            } else {
                None
            };
            trace.mark(format_args!("cycle level {k}: point diagonal"));
            levels.push(CycleLevel {
                smoother: s.kind,
                sweeps: o.sweeps_of(levels.len()),
                a,
                p,
                r,
                dinv,
                diag,
                block: l.block,
                omega: T::from_f64(s.omega),
                theta,
                delta,
                colors: s
                    .colors
                    .iter()
                    .map(|c| {
                        // The selections in CSR: a fused sweep reads the row
                        // index and inverse diagonal from the selection's arrays.
                        let csr = |m: &Csr<f64>| {
                            backend.upload_matrix_owned(convert::<T>(m)?, Layout::Csr)
                        };
                        Ok([
                            up_host(&c.scaled, [fb, fb])?,
                            csr(&c.select)?,
                            csr(&c.scatter)?,
                        ])
                    })
                    .collect::<Result<_>>()?,
            });
            if s.kind == Smoother::GaussSeidel {
                trace.mark(format_args!("cycle level {k}: Gauss-Seidel colours"));
            }
        }
        let coarse = backend.upload_matrix_owned(convert::<T>(h.coarse_solve())?, Layout::Csr)?;
        trace.mark(format_args!("cycle: coarsest inverse"));
        let amg = Self::from_levels(
            backend,
            levels,
            Coarsest::Inverse(coarse),
            (o.cycle, h.is_symmetric()),
            "amg",
        );
        trace.mark(format_args!("cycle: work vectors"));
        amg
    }

    /// The cycle of `levels` (finest first) and the `coarsest` solve on
    /// `backend`, of kind `cycle` (V or W), symmetric as `symmetric` says
    /// (then [`LinearOperator::apply_transpose`] is one cycle), named
    /// `name`: allocates the work vectors, about 4 per level (6 per level
    /// above the second coarsest for a W-cycle, 2 more for Chebyshev, one
    /// per colour for Gauss-Seidel). Errors when a level's sizes do not
    /// chain (P's columns the next level's rows).
    pub fn from_levels(
        backend: &B,
        levels: Vec<CycleLevel<B, T>>,
        coarse: Coarsest<B, T>,
        (cycle, symmetric): (CycleKind, bool),
        name: &'static str,
    ) -> Result<Self> {
        let coarse_n = match &coarse {
            Coarsest::Inverse(m) => m.shape().0,
            Coarsest::Operator(op) => op.shape().0,
        };
        let sizes: Vec<usize> = levels.iter().map(|l| l.a.shape().0).collect();
        let mut work = Vec::with_capacity(levels.len());
        for (k, l) in levels.iter().enumerate() {
            let (n, nc) = (sizes[k], l.p.shape().1);
            let next = sizes.get(k + 1).copied().unwrap_or(coarse_n);
            if l.p.shape().0 != n || l.r.shape() != (nc, n) || nc != next {
                return Err(Error::InvalidArgument(format!(
                    "AMG level {k}: A of {n} rows, P {:?} and R {:?} do not chain to a next level of {next} rows",
                    l.p.shape(),
                    l.r.shape()
                )));
            }
            let color_t = l
                .colors
                .iter()
                .map(|c| backend.zeros(c[0].shape().0))
                .collect::<Result<_>>()?;
            let chebyshev = matches!(l.smoother, Smoother::Chebyshev { .. });
            let second = if cycle == CycleKind::W && k + 1 < levels.len() {
                Some((backend.zeros(nc)?, backend.zeros(nc)?))
            } else {
                None
            };
            work.push(LevelWork {
                scratch: backend.zeros(n)?,
                dir: if chebyshev {
                    Some((backend.zeros(n)?, backend.zeros(n)?))
                } else {
                    None
                },
                color_t,
                bc: backend.zeros(nc)?,
                xc: backend.zeros(nc)?,
                second,
            });
        }
        Ok(Amg {
            backend: backend.clone(),
            n: sizes.first().copied().unwrap_or(coarse_n),
            levels,
            coarse,
            symmetric,
            name,
            work: Mutex::new(work),
        })
    }

    /// The numeric re-setup for a matrix `a` with the pattern of `h`'s
    /// finest matrix and new values (time stepping, nonlinear solves): `h`
    /// becomes [`Hierarchy::update_values_on`] `backend` (aggregates kept,
    /// everything else recomputed where the backend's setup runs), and this
    /// cycle's matrices are rebuilt from it in `options.layout` (its work
    /// vectors kept). Cost: the setup without the aggregation, plus the
    /// cycle's conversion. Errors as `update_values_on` does, and when the
    /// new hierarchy's levels differ in number or size from this cycle's.
    pub fn update_values(
        &mut self,
        h: &mut Hierarchy,
        a: &Csr<f64>,
        options: &CycleOptions,
    ) -> Result<()>
    where
        B: crate::setup::SetupKernels,
    {
        let updated = h.update_values_on(&self.backend, a)?;
        let fresh = Amg::<B, T>::new(&self.backend, &updated, options)?;
        let sizes = |l: &[CycleLevel<B, T>]| -> Vec<(usize, usize)> {
            l.iter().map(|d| d.p.shape()).collect()
        };
        if fresh.n != self.n || sizes(&fresh.levels) != sizes(&self.levels) {
            return Err(Error::InvalidArgument(
                "Amg::update_values: the updated hierarchy's levels differ from the cycle's".into(),
            ));
        }
        self.levels = fresh.levels;
        self.coarse = fresh.coarse;
        self.symmetric = fresh.symmetric;
        *h = updated;
        Ok(())
    }

    /// Number of levels, the coarsest included.
    pub fn num_levels(&self) -> usize {
        self.levels.len() + 1
    }

    /// Pre-smoothing from x = 0 (`zero`) or post-smoothing from the given x.
    fn smooth(
        &self,
        lev: &CycleLevel<B, T>,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        w: &mut LevelWork<B, T>,
        zero: bool,
    ) -> Result<()> {
        let be = &self.backend;
        let scratch = &mut w.scratch;
        if lev.smoother == Smoother::GaussSeidel {
            let mut first = zero;
            for _ in 0..lev.sweeps {
                for c in symmetric_order(lev.colors.len()) {
                    let [scaled, select, scatter] = &lev.colors[c];
                    be.amg_gs_color(scaled, select, scatter, b, x, &mut w.color_t[c], first)?;
                    first = false;
                }
            }
            return Ok(());
        }
        match (lev.smoother, w.dir.as_mut()) {
            (Smoother::Chebyshev { degree }, Some((d0, d1))) => {
                for s in 0..lev.sweeps {
                    self.chebyshev(lev, degree, b, x, scratch, [d0, d1], zero && s == 0)?;
                }
                Ok(())
            }
            _ => {
                let mut first = 0;
                if zero {
                    // A sweep from x = 0 is x = omega D^-1 b (seed's zero_iteration).
                    match &lev.diag {
                        Some(d) => be.mul_elementwise(d, b, x)?,
                        None => be.spmv(lev.omega, &lev.dinv, b, T::zero(), x)?,
                    }
                    first = 1;
                }
                for _ in first..lev.sweeps {
                    be.amg_jacobi(
                        &lev.a,
                        &lev.dinv,
                        lev.diag.as_ref(),
                        lev.block,
                        lev.omega,
                        b,
                        x,
                        scratch,
                    )?;
                }
                Ok(())
            }
        }
    }

    /// One application of the Chebyshev polynomial (Saad, Iterative Methods,
    /// algorithm 12.1, preconditioned by D^-1): `degree` products with A
    /// (`degree - 1` from zero), as a start and `degree - 1` steps of
    /// [`AmgKernels`], the two direction vectors swapped between steps.
    #[allow(clippy::too_many_arguments)]
    fn chebyshev(
        &self,
        lev: &CycleLevel<B, T>,
        degree: usize,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        r: &mut B::Vector<T>,
        [mut old, mut new]: [&mut B::Vector<T>; 2],
        zero: bool,
    ) -> Result<()> {
        let be = &self.backend;
        let (theta, delta) = (lev.theta, lev.delta);
        let sigma = theta / delta;
        let mut rho = 1.0 / sigma;
        let (a, dinv, diag) = (&lev.a, &lev.dinv, lev.diag.as_ref());
        let alpha = T::from_f64(1.0 / theta);
        be.amg_chebyshev_start(a, dinv, diag, alpha, b, x, r, old, zero)?;
        for k in 1..degree {
            let rho_new = 1.0 / (2.0 * sigma - rho);
            let coef = [
                T::from_f64(2.0 * rho_new / delta),
                T::from_f64(rho_new * rho),
            ];
            let first = k == 1;
            be.amg_chebyshev_step(a, dinv, diag, coef, r, old, new, x, [first, zero && first])?;
            std::mem::swap(&mut old, &mut new);
            rho = rho_new;
        }
        match (degree, zero) {
            (2.., _) => Ok(()),
            (_, true) => be.copy(old, x),
            (_, false) => be.axpy(T::one(), old, x),
        }
    }

    /// The cycle from level `l` down: x = M_l b, with `work` the work of
    /// levels l and coarser.
    fn cycle(
        &self,
        l: usize,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        work: &mut [LevelWork<B, T>],
    ) -> Result<()> {
        let be = &self.backend;
        let Some((w, rest)) = work.split_first_mut() else {
            return match &self.coarse {
                Coarsest::Inverse(m) => be.spmv(T::one(), m, b, T::zero(), x),
                Coarsest::Operator(op) => op.apply(b, x),
            };
        };
        let lev = &self.levels[l];
        self.smooth(lev, b, x, w, true)?;
        be.amg_residual_restrict(&lev.a, &lev.r, b, x, &mut w.scratch, &mut w.bc)?;
        self.cycle(l + 1, &w.bc, &mut w.xc, rest)?;
        if let Some((rc, ec)) = w.second.as_mut() {
            be.amg_residual(&self.levels[l + 1].a, &w.bc, &w.xc, rc)?;
            self.cycle(l + 1, rc, ec, rest)?;
            be.axpy(T::one(), ec, &mut w.xc)?;
        }
        be.spmv(T::one(), &lev.p, &w.xc, T::one(), x)?;
        self.smooth(lev, b, x, w, false)
    }
}

impl<B: AmgKernels, T: Scalar> LinearOperator<B, T> for Amg<B, T> {
    fn shape(&self) -> (usize, usize) {
        (self.n, self.n)
    }

    /// y = M x: one cycle with right-hand side x from a zero guess.
    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        gpuq_core::check_same_len("amg (x)", self.n, gpuq_core::DeviceVector::len(x))?;
        gpuq_core::check_same_len("amg (y)", self.n, gpuq_core::DeviceVector::len(y))?;
        let mut w = self
            .work
            .lock()
            .map_err(|_| Error::InvalidArgument("AMG work vectors poisoned by a panic".into()))?;
        self.cycle(0, x, y, &mut w)
    }

    /// For symmetric A the cycle is symmetric, M^T = M: one cycle. For A
    /// not known to be symmetric (nonsymmetric, or not checked: the
    /// distributed setup checks it across ranks only when asked) the
    /// transposed cycle is not implemented: an error naming the cycle.
    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        if !self.symmetric {
            return Err(Error::Precondition {
                method: "transpose",
                reason: format!(
                    "the AMG cycle ({}) of a matrix not known to be symmetric has no transpose here",
                    self.name
                ),
            });
        }
        self.apply(x, y)
    }

    fn name(&self) -> &str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix whose row i holds `len(i)` entries in its first columns.
    fn rows_of(n: usize, len: impl Fn(usize) -> usize) -> Csr<f64> {
        let mut ptr = vec![0];
        let mut col = Vec::new();
        for i in 0..n {
            col.extend(0..len(i) as u32);
            ptr.push(col.len());
        }
        let val = vec![1.0; col.len()];
        Csr::try_new(n, n, ptr, col, val).unwrap()
    }

    #[test]
    fn layouts_follow_row_lengths() {
        let sell = Layout::Sell { c: 32, sigma: 1 };
        // uniform short rows: as asked
        let uniform = rows_of(4096, |_| 7);
        let layout = |req: Layout, a: &Csr<f64>, blocks: [usize; 2]| {
            layout_for(
                req,
                (a.shape(), a.nnz()),
                |c, sigma| Ok(sell_stored(host_row_lengths(a), c, sigma)),
                blocks,
            )
            .unwrap()
        };
        assert_eq!(layout(sell, &uniform, [1, 1]), sell);
        assert_eq!(
            sell_stored(host_row_lengths(&uniform), 32, 1),
            uniform.nnz()
        );
        // rows of 1 to 6 entries in a repeating pattern pad by far more than
        // 10% unsorted: sorted within 8 slices
        let varied = rows_of(4096, |i| 1 + (i * 7) % 6);
        let sorted = Layout::Sell { c: 32, sigma: 256 };
        assert_eq!(layout(sell, &varied, [1, 1]), sorted);
        let lens = host_row_lengths(&varied);
        assert!(sell_stored(lens.clone(), 32, 256) <= sell_stored(lens, 32, 1));
        // few long rows: CSR
        assert_eq!(layout(sell, &rows_of(1000, |_| 40), [1, 1]), Layout::Csr);
        // BSR: the matrix's own node blocks where rows and columns agree,
        // CSR where they differ, are scalar or do not divide the size
        let bsr = Layout::Bsr { b: 2 };
        assert_eq!(layout(bsr, &uniform, [4, 4]), Layout::Bsr { b: 4 });
        assert_eq!(layout(bsr, &uniform, [2, 3]), Layout::Csr);
        assert_eq!(layout(bsr, &uniform, [1, 1]), Layout::Csr);
        assert_eq!(layout(bsr, &rows_of(4095, |_| 7), [2, 2]), Layout::Csr);
    }
}
