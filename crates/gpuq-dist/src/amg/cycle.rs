//! [`DistAmg`]: the V-cycle of a [`DistHierarchy`] over [`Dist`].

use super::setup::DistHierarchy;
use crate::backend::{Dist, DistMatrix};
use crate::halo::{split_columns, HaloBackend, SplitRows};
use crate::partition::RowPartition;
use crate::solve::allgather_rows;
use gpuq_amg::{Amg, AmgKernels, CycleOptions};
use gpuq_core::{Backend, LinearOperator, Result, Scalar};
use gpuq_sparse::{Csr, Layout, SparseBackend};
use std::sync::Mutex;

/// One distributed level on the backend.
struct CycleLevel<B: HaloBackend, T: Scalar> {
    a: DistMatrix<B, T>,
    p: DistMatrix<B, T>,
    r: DistMatrix<B, T>,
    /// The inverse block diagonal of the rank's rows (local to the rank).
    dinv: DistMatrix<B, T>,
    omega: T,
    sweeps: usize,
}

/// A level's work vectors: the residual, and the coarser level's right-hand
/// side and correction.
struct Work<B: Backend, T: Scalar> {
    scratch: B::Vector<T>,
    bc: B::Vector<T>,
    xc: B::Vector<T>,
}

/// The gathered levels' right-hand side and correction (whole on every rank).
struct TailWork<B: Backend, T: Scalar> {
    b: B::Vector<T>,
    x: B::Vector<T>,
}

/// Every distributed level's work vectors and the gathered levels'.
type CycleWork<B, T> = (Vec<Work<B, T>>, TailWork<B, T>);

/// The AMG V-cycle across ranks, M ~ A^-1, as a [`LinearOperator`] of
/// [`Dist`]: on each distributed level, smoothing from a zero guess by
/// damped (or l1) Jacobi, the residual, restriction, the coarser level's
/// cycle, prolongation and the same smoothing again (M is symmetric when A
/// is, so PCG may use it); the first gathered level's right-hand side is
/// all-gathered and every rank runs the one-process cycle ([`Amg`]) on its
/// local backend, keeping its own rows of the result.
///
/// Cost of one application per distributed level: 2 nu residuals b - A x
/// (each the local backend's fused residual over the owned block while the
/// halo travels, then the ghost block's rows; the first sweep from zero
/// needs none), one product with R and with P (one exchange each), the
/// block-diagonal products; at the gathered level one all-gather of its
/// vector (on the devices with NCCL: the host waits for nothing) and the
/// one-process cycle. No collective reduction.
pub struct DistAmg<B: HaloBackend + AmgKernels, T: Scalar> {
    dist: Dist<B>,
    levels: Vec<CycleLevel<B, T>>,
    gathered: RowPartition,
    tail: Amg<B, T>,
    work: Mutex<CycleWork<B, T>>,
    n: usize,
}

/// `a` with its values converted to `T`.
fn convert<T: Scalar>(a: &Csr<f64>) -> Result<Csr<T>> {
    Csr::try_new(
        a.nrows(),
        a.ncols(),
        a.row_ptr().to_vec(),
        a.col_idx().to_vec(),
        a.values().iter().map(|&v| T::from_f64(v)).collect(),
    )
}

/// `split` with its values converted to `T`.
fn convert_split<T: Scalar>(split: &SplitRows<f64>) -> Result<SplitRows<T>> {
    Ok(SplitRows {
        owned: convert(&split.owned)?,
        ghost: convert(&split.ghost)?,
        ghost_cols: split.ghost_cols.clone(),
    })
}

impl<B: HaloBackend + AmgKernels, T: Scalar> DistAmg<B, T> {
    /// Puts the hierarchy `h` on `dist`: each distributed level's A, P and R
    /// split and planned (owned blocks in `layout`, ghost blocks in CSR), the
    /// smoother's block diagonal local to the rank, the gathered levels
    /// uploaded whole to the local backend ([`Amg::new`], `layout` as its
    /// [`CycleOptions`] say); about three vectors per level. Collective.
    pub fn new(dist: &Dist<B>, h: &DistHierarchy, layout: Layout) -> Result<Self> {
        let rank = dist.comm().rank();
        let mut levels = Vec::with_capacity(h.levels().len());
        let mut work = Vec::with_capacity(h.levels().len());
        for l in h.levels() {
            let (fine, coarse) = (&l.partition, &l.coarse);
            let split = |cols: &RowPartition, rows: &Csr<f64>| {
                dist.agree(split_columns(cols, rank, rows).and_then(|s| convert_split::<T>(&s)))
            };
            // A and R were split by the setup; P (split by coarse columns) here.
            let a_split = dist.agree(convert_split::<T>(&l.a_split))?;
            let r_split = dist.agree(convert_split::<T>(&l.r_split))?;
            levels.push(CycleLevel {
                a: DistMatrix::from_split(dist, fine, &a_split, layout)?,
                p: DistMatrix::from_split_rect(dist, fine, coarse, &split(coarse, &l.p)?, layout)?,
                r: DistMatrix::from_split_rect(dist, coarse, fine, &r_split, layout)?,
                dinv: dist.agree(
                    convert::<T>(&l.dinv).and_then(|d| dist.upload_matrix(&d, Layout::Csr)),
                )?,
                omega: T::from_f64(l.omega),
                sweeps: h.options().amg.sweeps_of(levels.len()),
            });
            let (n, nc) = (fine.range(rank).len(), coarse.range(rank).len());
            work.push(Work {
                scratch: dist.zeros(n)?,
                bc: dist.zeros(nc)?,
                xc: dist.zeros(nc)?,
            });
        }
        let tail = dist.agree(Amg::new(dist.local(), h.tail(), &CycleOptions { layout }))?;
        let whole = h.gathered_partition().rows();
        let tail_work = TailWork {
            b: dist.zeros(whole)?,
            x: dist.zeros(whole)?,
        };
        let n = h
            .levels()
            .first()
            .map_or(h.gathered_partition(), |l| &l.partition)
            .range(rank)
            .len();
        Ok(DistAmg {
            dist: dist.clone(),
            levels,
            gathered: h.gathered_partition().clone(),
            tail,
            work: Mutex::new((work, tail_work)),
            n,
        })
    }

    /// The number of levels: the distributed ones and the gathered ones.
    pub fn num_levels(&self) -> usize {
        self.levels.len() + self.tail.num_levels()
    }

    /// r = b - A x: the owned block's fused residual
    /// ([`AmgKernels::amg_residual`], one pass) while the halo travels, then
    /// the ghost block's share.
    fn residual(
        &self,
        lev: &CycleLevel<B, T>,
        b: &B::Vector<T>,
        x: &B::Vector<T>,
        r: &mut B::Vector<T>,
    ) -> Result<()> {
        let local = self.dist.local();
        self.dist
            .split_apply(&lev.a, x, -T::one(), r, &mut |owned, r| {
                local.amg_residual(owned, b, x, r)
            })
    }

    /// One damped Jacobi sweep x += omega D^-1 (b - A x) (`s` overwritten).
    fn jacobi(
        &self,
        lev: &CycleLevel<B, T>,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        s: &mut B::Vector<T>,
    ) -> Result<()> {
        self.residual(lev, b, x, s)?;
        self.dist.spmv(lev.omega, &lev.dinv, s, T::one(), x)
    }

    /// x = the cycle of level `l` applied to b (x overwritten).
    fn cycle(
        &self,
        l: usize,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        work: &mut [Work<B, T>],
        tail: &mut TailWork<B, T>,
    ) -> Result<()> {
        let Some(lev) = self.levels.get(l) else {
            return self.gathered_cycle(b, x, tail);
        };
        let (w, rest) = work
            .split_first_mut()
            .expect("one work set per distributed level");
        let d = &self.dist;
        d.spmv(lev.omega, &lev.dinv, b, T::zero(), x)?;
        for _ in 1..lev.sweeps {
            self.jacobi(lev, b, x, &mut w.scratch)?;
        }
        self.residual(lev, b, x, &mut w.scratch)?;
        d.spmv(T::one(), &lev.r, &w.scratch, T::zero(), &mut w.bc)?;
        self.cycle(l + 1, &w.bc, &mut w.xc, rest, tail)?;
        d.spmv(T::one(), &lev.p, &w.xc, T::one(), x)?;
        for _ in 0..lev.sweeps {
            self.jacobi(lev, b, x, &mut w.scratch)?;
        }
        Ok(())
    }

    /// The gathered levels: b all-gathered (on the devices where the local
    /// backend can, else through the hosts), the one-process cycle on every
    /// rank, the rank's rows of its result copied into x on the backend.
    fn gathered_cycle(
        &self,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        tail: &mut TailWork<B, T>,
    ) -> Result<()> {
        let d = &self.dist;
        let comm = d.comm();
        let counts: Vec<usize> = (0..comm.size())
            .map(|r| self.gathered.range(r).len())
            .collect();
        if !d
            .local()
            .allgather_rows_on_device(&counts, b, &mut tail.b)?
        {
            let whole = allgather_rows(comm, &self.gathered, &d.download(b)?)?;
            d.local().overwrite(&whole, &mut tail.b)?;
        }
        self.tail.apply(&tail.b, &mut tail.x)?;
        let mine = self.gathered.range(comm.rank());
        d.local().copy_rows_from(&tail.x, mine.start, x)
    }
}

impl<B: HaloBackend + AmgKernels, T: Scalar> LinearOperator<Dist<B>, T> for DistAmg<B, T> {
    /// The rank's block, (its rows, its rows).
    fn shape(&self) -> (usize, usize) {
        (self.n, self.n)
    }

    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        let mut guard = self.work.lock().unwrap_or_else(|e| e.into_inner());
        let (work, tail) = &mut *guard;
        self.cycle(0, x, y, work, tail)
    }

    fn name(&self) -> &str {
        "dist-amg"
    }
}
