//! [`DistAmg`]: the one-process AMG cycle of `gpuq-amg` ([`Amg`]) on
//! [`Dist`], its levels a [`DistHierarchy`]'s, its coarsest solve the
//! gathered levels' one-process cycle on every rank.

use super::setup::DistHierarchy;
use crate::backend::{Dist, DistMatrix};
use crate::ghost_rows::GhostRows;
use crate::halo::HaloBackend;
use crate::partition::RowPartition;
use gpuq_amg::blockdiag::BlockDiagonal;
use gpuq_amg::trace::Trace;
use gpuq_amg::{
    chebyshev_interval, device_largest_fits, device_lays_out, level_cycle_layout, Amg, AmgKernels,
    Coarsest, CycleLevel, CycleOptions, LevelMatrix, Smoother,
};
use gpuq_core::{Backend, LinearOperator, Result, Scalar};
use gpuq_krylov::Method;
use gpuq_sparse::{Csr, Layout, SparseBackend};
use rayon::prelude::*;
use std::sync::Mutex;

/// The AMG cycle across ranks, M ~ A^-1, as a [`LinearOperator`] of
/// [`Dist`]: the one-process cycle ([`Amg`], its smoothers and the
/// mixed-precision wrapper [`gpuq_amg::MixedAmg`] shared) over distributed
/// levels, made by [`DistHierarchy::cycle`]. On each distributed level the
/// smoothing (damped or l1 Jacobi, or Chebyshev), the residual, restriction
/// and prolongation are products with [`DistMatrix`]es, one halo exchange
/// each, overlapped with the local backend's fused step over the owned block
/// ([`crate::amg`]'s [`AmgKernels`] for [`Dist`]; a point-Jacobi sweep is
/// one pass: the new iterate beside the old, the ghost rows' share scaled by
/// omega D^-1); the first gathered level's right-hand side is all-gathered
/// and every rank runs the one-process cycle on its local backend, keeping
/// its own rows of the result. M is symmetric when A is (the same smoothing
/// before and after), so PCG may use it.
///
/// Cost of one application per distributed level: as the one-process
/// cycle's ([`Amg`]), each product with A, P or R one halo exchange; at the
/// gathered level one all-gather of its vector (on the devices with NCCL:
/// the host waits for nothing) and the one-process cycle. No collective
/// reduction.
pub type DistAmg<B, T> = Amg<Dist<B>, T>;

/// A ghost block made on the rank's backend and its runs of non-empty
/// rows ([`GhostRows::runs`]).
type GhostParts<B, T> = (<B as SparseBackend>::Matrix<T>, Vec<std::ops::Range<usize>>);

/// Whether `dinv` is a point diagonal: blocks of 1, or no rows. O(1).
fn point_diagonal(dinv: &BlockDiagonal) -> bool {
    dinv.block() == 1 || dinv.rows() == 0
}

/// `ghost` converted to `T` with row i scaled by `omega d[i]` (each value
/// converted, then multiplied in `T`), in CSR: each entry finds its listed
/// row by binary search in the listed rows' pointers. Errors where a scaled
/// value is not finite. O(nnz log rows listed + rows), parallel.
fn scale_rows<T: Scalar>(ghost: &GhostRows, d: &[f64], omega: f64) -> Result<Csr<T>> {
    let (rows, block) = (ghost.rows(), ghost.block());
    let ptr = block.row_ptr();
    let row = |k: usize| rows[ptr.partition_point(|&p| p <= k) - 1] as usize;
    let values = block
        .values()
        .par_iter()
        .enumerate()
        .map(|(k, &v)| T::from_f64(v) * T::from_f64(omega * d[row(k)]))
        .collect();
    let scaled = Csr::try_new(
        block.nrows(),
        block.ncols(),
        ptr.to_vec(),
        block.col_idx().to_vec(),
        values,
    )?;
    GhostRows::new(ghost.nrows(), rows.to_vec(), scaled)?.to_csr()
}

/// The gathered levels as the coarsest solve of a [`DistAmg`]: b
/// all-gathered (through the transport: between the devices or through the
/// hosts), the one-process cycle of the gathered hierarchy on every rank,
/// the rank's rows of its result copied into x on the backend.
struct GatheredCycle<B: HaloBackend + AmgKernels, T: Scalar> {
    dist: Dist<B>,
    partition: RowPartition,
    cycle: Amg<B, T>,
    /// The whole right-hand side and result.
    work: Mutex<(B::Vector<T>, B::Vector<T>)>,
}

impl<B: HaloBackend + AmgKernels, T: Scalar> LinearOperator<Dist<B>, T> for GatheredCycle<B, T> {
    /// The rank's rows of the gathered level.
    fn shape(&self) -> (usize, usize) {
        let n = self.partition.range(self.dist.comm().rank()).len();
        (n, n)
    }

    fn apply(&self, b: &B::Vector<T>, x: &mut B::Vector<T>) -> Result<()> {
        let comm = self.dist.comm();
        let counts: Vec<usize> = (0..comm.size())
            .map(|r| self.partition.range(r).len())
            .collect();
        let mut guard = self.work.lock().unwrap_or_else(|e| e.into_inner());
        let (whole_b, whole_x) = &mut *guard;
        self.dist.allgather_rows_into(&counts, b, whole_b)?;
        self.cycle.apply(whole_b, whole_x)?;
        let mine = self.partition.range(comm.rank());
        self.dist.local().copy_rows_from(whole_x, mine.start, x)
    }

    fn name(&self) -> &str {
        "amg (gathered levels)"
    }
}

impl DistHierarchy {
    /// The cycle of this hierarchy on `dist` in precision `T`
    /// ([`DistAmg`]): each distributed level's A, P and R split and planned
    /// (owned blocks in the layout the one-process cycle would give them,
    /// [`level_cycle_layout`], laid out where the setup left them; ghost blocks in CSR), the smoother's (block)
    /// diagonal local to the rank, the gathered levels uploaded whole to the
    /// local backend ([`Amg::new`] with `layout`); about four vectors per
    /// level. Collective.
    pub fn cycle<B: HaloBackend + AmgKernels, T: Scalar>(
        &self,
        dist: &Dist<B>,
        layout: Layout,
    ) -> Result<DistAmg<B, T>> {
        cycle_of(dist, self, layout, true)
    }
}

impl DistHierarchy {
    /// The finest level's A on `dist` in precision `T`, from the setup's
    /// split of the caller's rows (the owned block laid out in `layout`
    /// where the setup left it: on the device for a GPU rank; the ghost
    /// block made in CSR by the local backend): the operator of a solve
    /// preconditioned by this hierarchy, without splitting the rows or
    /// uploading them again. `None` where no level is distributed (the
    /// rows were gathered at once). Collective.
    pub fn finest_matrix<B: HaloBackend + AmgKernels, T: Scalar>(
        &self,
        dist: &Dist<B>,
        layout: Layout,
    ) -> Result<Option<DistMatrix<B, T>>> {
        let Some(l) = self.levels().first() else {
            return Ok(None);
        };
        let (ghost, runs) = ghost_of(dist, &l.a_split.ghost)?;
        let fits = device_largest_fits::<T>(l.a_largest);
        let owned = laid_out(dist, &l.a_split.owned, layout, fits)?;
        let parts = (ghost, runs, &l.a_split.ghost_cols[..]);
        DistMatrix::from_made_parts(dist, (&l.partition, &l.partition), owned, parts).map(Some)
    }

    /// The operator for a solve by `method` of the rows this hierarchy was
    /// built from, in precision `T` and `layout`: the finest level
    /// ([`DistHierarchy::finest_matrix`], for
    /// [`crate::solve_matrix_with_precond`]) where that level holds A itself
    /// (T real: a complex matrix's setup takes its real parts) and the
    /// method needs no A^T (QMR does); `None` otherwise, and where no level
    /// is distributed, for [`crate::solve_rows_with_precond`] to split the
    /// rows. Collective.
    pub fn solve_operator<B: HaloBackend + AmgKernels, T: Scalar>(
        &self,
        dist: &Dist<B>,
        layout: Layout,
        method: Method,
    ) -> Result<Option<DistMatrix<B, T>>> {
        match method {
            Method::Qmr => Ok(None),
            _ if T::IS_COMPLEX => Ok(None),
            _ => self.finest_matrix(dist, layout),
        }
    }
}

/// A ghost block `g` made in CSR by the rank's backend (its row pointers
/// expanded where it lies, [`HaloBackend::ghost_matrix`]: on the device for
/// a GPU rank, from the listed rows uploaded; else expanded on the host and
/// made by [`AmgKernels::amg_host_matrix`]), with its runs of non-empty
/// rows. Collective (its error agreed).
fn ghost_of<B: HaloBackend + AmgKernels, T: Scalar>(
    dist: &Dist<B>,
    g: &GhostRows,
) -> Result<GhostParts<B, T>> {
    let local = dist.local();
    let made = local.ghost_matrix::<T>(g).and_then(|m| match m {
        Some(m) => Ok(m),
        None => local.amg_host_matrix::<T>(&g.to_csr()?, Layout::Csr),
    });
    Ok((dist.agree(made)?, g.runs()))
}

/// The owned block `m` in precision `T` and `layout`, laid out by the local
/// backend where the setup left it ([`AmgKernels::amg_level_matrix`]) when
/// it lays out that layout and the values fit `T` (`fits`), else from the
/// host copy, where a value beyond T's range is reported. Collective (its
/// error agreed).
fn laid_out<B: HaloBackend + AmgKernels, T: Scalar>(
    dist: &Dist<B>,
    m: &LevelMatrix,
    layout: Layout,
    fits: bool,
) -> Result<B::Matrix<T>> {
    let made = match fits && device_lays_out(layout) {
        true => dist.local().amg_level_matrix::<T>(m, layout),
        false => m
            .host()
            .and_then(|h| dist.local().amg_host_matrix::<T>(h, layout)),
    };
    dist.agree(made)
}

/// [`DistHierarchy::cycle`], with the point-Jacobi sweeps in one pass
/// (`one_pass`) or as the residual and a diagonal product.
fn cycle_of<B: HaloBackend + AmgKernels, T: Scalar>(
    dist: &Dist<B>,
    h: &DistHierarchy,
    layout: Layout,
    one_pass: bool,
) -> Result<DistAmg<B, T>> {
    let rank = dist.comm().rank();
    let o = &h.options().amg;
    let mut trace = Trace::when(rank == 0);
    let mut levels = Vec::with_capacity(h.levels().len());
    for (i, l) in h.levels().iter().enumerate() {
        trace.mark(format_args!("cycle level {i}: begin"));
        let (fine, coarse) = (&l.partition, &l.coarse);
        // The coarse node blocks where the next level is distributed too
        // (0 otherwise: its transfer operators are not node-blocked).
        let (fb, cb) = (l.block, h.levels().get(i + 1).map_or(0, |n| n.block));
        let fine_rows = fine.range(rank).len();
        // A, P and R were split by the setup. The ghost blocks (the halo's
        // rows) are converted and made in CSR by the local backend
        // ([`AmgKernels::amg_host_matrix`]: on the device for a GPU rank,
        // from the f64 rows uploaded); each owned block is converted and
        // laid out by the local backend where the setup left it
        // ([`AmgKernels::amg_level_matrix`]), in the layout the one-process
        // cycle would give it.
        let (a_ghost, p_ghost, r_ghost) = (
            ghost_of(dist, &l.a_split.ghost)?,
            ghost_of(dist, &l.p_split.ghost)?,
            ghost_of(dist, &l.r_split.ghost)?,
        );
        trace.mark(format_args!("  the ghost blocks made"));
        // A value beyond T's range is found in the host rows holding the
        // block's values (A's for A, P's for P and R): the host path reports
        // it, as for any layout a device does not lay out itself.
        let a_fits = device_largest_fits::<T>(l.a_largest);
        let p_fits = device_largest_fits::<T>(l.p_largest);
        let owned = |m: &LevelMatrix, blocks, fits: bool| -> Result<B::Matrix<T>> {
            let layout = dist.agree(level_cycle_layout(layout, m, blocks))?;
            laid_out(dist, m, layout, fits)
        };
        let smoother = o.smoother_of(i);
        let chebyshev = matches!(smoother, Smoother::Chebyshev { .. });
        let mut a = DistMatrix::from_made_parts(
            dist,
            (fine, fine),
            owned(&l.a_split.owned, [fb, fb], a_fits)?,
            (a_ghost.0, a_ghost.1, &l.a_split.ghost_cols),
        )?;
        trace.mark(format_args!("  A laid out and uploaded"));
        // A point diagonal (times omega for the Jacobi sweeps, as is for
        // Chebyshev's steps) where every rank has one (a rank without rows
        // has one whatever the blocks), so that every rank takes the same
        // path and the collectives pair up.
        let scale = if chebyshev { 1.0 } else { l.omega };
        let point = point_diagonal(&l.dinv);
        let all_point = dist.allreduce(&[f64::from(u8::from(!point))])?[0] == 0.0;
        let diag = match all_point {
            true => {
                // omega D^-1 made by the local backend (on the device for a
                // GPU rank, from the blocks it may already hold).
                let d = dist.local().amg_scaled_diagonal::<T>(&l.dinv, scale);
                let d = dist.agree(d)?;
                if one_pass && !chebyshev {
                    // A's ghost block scaled by d where it lies, else on the host.
                    let host = || scale_rows::<T>(&l.a_split.ghost, l.dinv.blocks()?, scale);
                    a = dist.agree(a.with_point_sweep(dist.local(), &d, host))?;
                }
                Some(d)
            }
            false => None,
        };
        trace.mark(format_args!("  the sweep's diagonal"));
        let (theta, delta) = chebyshev_interval(l.rho);
        levels.push(CycleLevel {
            smoother,
            sweeps: o.sweeps_of(i),
            a,
            p: DistMatrix::from_made_parts(
                dist,
                (fine, coarse),
                owned(&l.p_split.owned, [fb, cb], p_fits)?,
                (p_ghost.0, p_ghost.1, &l.p_split.ghost_cols),
            )?,
            r: DistMatrix::from_made_parts(
                dist,
                (coarse, fine),
                owned(&l.r_split.owned, [cb, fb], p_fits)?,
                (r_ghost.0, r_ghost.1, &l.r_split.ghost_cols),
            )?,
            dinv: dist.agree(
                dist.local()
                    .amg_block_diagonal_matrix::<T>(&l.dinv, Layout::Csr)
                    .map(|m| DistMatrix::local(m, (fine_rows, fine_rows))),
            )?,
            diag,
            block: l.block,
            omega: T::from_f64(l.omega),
            theta,
            delta,
            colors: Vec::new(),
        });
        trace.mark(format_args!("  P, R and D^-1 laid out and uploaded"));
    }
    let tail = dist.agree(Amg::new(dist.local(), h.tail(), &CycleOptions { layout }))?;
    trace.mark(format_args!("the gathered levels' cycle"));
    let whole = h.gathered_partition().rows();
    let gathered = GatheredCycle {
        dist: dist.clone(),
        partition: h.gathered_partition().clone(),
        cycle: tail,
        work: Mutex::new((dist.zeros(whole)?, dist.zeros(whole)?)),
    };
    Amg::from_levels(
        dist,
        levels,
        Coarsest::Operator(Box::new(gathered)),
        // Symmetric (M^T = M) only where the setup checked A across ranks
        // ([`crate::DistAmgOptions::check_symmetry`]).
        (o.cycle, h.is_symmetric() == Some(true)),
        "dist-amg",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{rows_of, Communicator, DistAmgOptions, ThreadComm};
    use gpuq_amg::CycleKind;
    use gpuq_cpu::CpuBackend;
    use gpuq_sparse::generators::laplace3d;
    use std::sync::Arc;

    /// The cycle applied to b on every rank of `p`, with the one-pass point
    /// sweeps and with the two-pass sweeps (the residual, then D^-1), in
    /// `layout`: each rank's two results and the number of distributed
    /// levels.
    fn both_sweeps(
        a: &Csr<f64>,
        p: &RowPartition,
        layout: Layout,
    ) -> Vec<(Vec<f64>, Vec<f64>, usize)> {
        let o = DistAmgOptions {
            gather_below: 100,
            ..DistAmgOptions::default()
        };
        ThreadComm::run(p.ranks(), |comm| {
            let rank = comm.rank();
            let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
            let rows = rows_of(a, p, rank).unwrap();
            let h = DistHierarchy::build(dist.comm(), p, &rows, &o).unwrap();
            let b: Vec<f64> = p.range(rank).map(|i| 1.0 + (i % 11) as f64).collect();
            let bv = dist.upload(&b).unwrap();
            let run = |one_pass: bool| {
                let m = cycle_of::<CpuBackend, f64>(&dist, &h, layout, one_pass).unwrap();
                let mut x = dist.zeros(b.len()).unwrap();
                m.apply(&bv, &mut x).unwrap();
                dist.download(&x).unwrap()
            };
            (run(true), run(false), h.levels().len())
        })
        .unwrap()
    }

    #[test]
    fn the_one_pass_sweep_is_the_two_pass_sweep_across_ranks() {
        let a = laplace3d::<f64>(14);
        for (ranks, layout) in [
            (1, Layout::Csr),
            (3, Layout::Csr),
            (4, Layout::Sell { c: 32, sigma: 1 }),
        ] {
            let p = RowPartition::contiguous(a.nrows(), ranks).unwrap();
            for (one, two, distributed) in both_sweeps(&a, &p, layout) {
                assert!(distributed >= 1, "{ranks} ranks: no distributed level");
                let scale = two.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let diff = one
                    .iter()
                    .zip(&two)
                    .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
                assert!(scale > 0.0);
                assert!(
                    diff <= 1e-13 * scale,
                    "{ranks} ranks: {diff:e} of {scale:e}"
                );
            }
        }
    }

    #[test]
    fn one_rank_runs_the_one_process_cycle_of_the_same_hierarchy() {
        // One rank's distributed hierarchy is the one-process hierarchy
        // (tested in setup), so the cycles agree to rounding, for Jacobi and
        // for Chebyshev, V and W.
        let a = laplace3d::<f64>(12);
        for (smoother, cycle) in [
            (Smoother::Jacobi, CycleKind::V),
            (Smoother::Chebyshev { degree: 3 }, CycleKind::V),
            (Smoother::Jacobi, CycleKind::W),
        ] {
            let o = DistAmgOptions {
                amg: gpuq_amg::AmgOptions {
                    smoother: Some(smoother),
                    cycle,
                    ..gpuq_amg::AmgOptions::default()
                },
                gather_below: 100,
                ..DistAmgOptions::default()
            };
            let (dist_x, one_x) = ThreadComm::run(1, |comm| {
                let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
                let p = RowPartition::contiguous(a.nrows(), 1).unwrap();
                let h = DistHierarchy::build(dist.comm(), &p, &a, &o).unwrap();
                assert!(!h.levels().is_empty());
                let b: Vec<f64> = (0..a.nrows()).map(|i| 1.0 + (i % 7) as f64).collect();
                let m = h.cycle::<CpuBackend, f64>(&dist, Layout::Csr).unwrap();
                let mut x = dist.zeros(b.len()).unwrap();
                m.apply(&dist.upload(&b).unwrap(), &mut x).unwrap();
                let one = gpuq_amg::Hierarchy::build(&a, &o.amg).unwrap();
                let cpu = CpuBackend::new();
                let m1 = Amg::<CpuBackend, f64>::new(&cpu, &one, &CycleOptions::default()).unwrap();
                let mut y = cpu.zeros(b.len()).unwrap();
                m1.apply(&cpu.upload(&b).unwrap(), &mut y).unwrap();
                (dist.download(&x).unwrap(), cpu.download(&y).unwrap())
            })
            .unwrap()
            .remove(0);
            let scale = one_x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let diff = dist_x
                .iter()
                .zip(&one_x)
                .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
            assert!(
                scale > 0.0 && diff <= 1e-12 * scale,
                "{smoother:?}: {diff:e} of {scale:e}"
            );
        }
    }

    #[test]
    fn point_diagonals_are_recognised_and_blocks_are_not() {
        let d = BlockDiagonal::from_blocks(1, vec![2.0, 4.0, 8.0]).unwrap();
        assert!(point_diagonal(&d));
        let blocks = BlockDiagonal::from_blocks(2, vec![1.0, 0.5, 0.5, 1.0]).unwrap();
        assert!(!point_diagonal(&blocks));
        // A rank without rows has a point diagonal whatever its blocks.
        let none = BlockDiagonal::from_blocks(3, Vec::new()).unwrap();
        assert!(point_diagonal(&none));
        let g = Csr::try_new(2, 3, vec![0, 2, 3], vec![0, 2, 1], vec![1.0, 2.0, 3.0]).unwrap();
        let s = scale_rows::<f64>(&GhostRows::of_csr(&g).unwrap(), &[4.0, -2.0], 0.5).unwrap();
        assert_eq!(s.values(), &[2.0, 4.0, -3.0]);
        assert_eq!(s.col_idx(), g.col_idx());
        // Empty rows first, between and last.
        let g = Csr::try_new(
            6,
            3,
            vec![0, 0, 2, 2, 2, 3, 3],
            vec![0, 2, 1],
            vec![1.0, 2.0, 3.0],
        )
        .unwrap();
        let by_rows = GhostRows::of_csr(&g).unwrap();
        let s = scale_rows::<f64>(&by_rows, &[9.0, 2.0, 9.0, 9.0, -1.0, 9.0], 1.0).unwrap();
        assert_eq!(s.values(), &[2.0, 4.0, -3.0]);
        assert_eq!(s.row_ptr(), g.row_ptr());
    }
}
