//! [`DistAmg`]: the V-cycle of a [`DistHierarchy`] over [`Dist`].

use super::setup::DistHierarchy;
use crate::backend::{Dist, DistMatrix, GhostBlock};
use crate::halo::{split_columns, HaloBackend, SplitRows};
use crate::partition::RowPartition;
use gpuq_amg::{cycle_layout, Amg, AmgKernels, CycleOptions};
use gpuq_core::{Backend, LinearOperator, Result, Scalar};
use gpuq_sparse::{Csr, Layout, SparseBackend};
use std::sync::Mutex;

/// One distributed level on the backend.
struct CycleLevel<B: HaloBackend, T: Scalar> {
    a: DistMatrix<B, T>,
    p: DistMatrix<B, T>,
    r: DistMatrix<B, T>,
    /// The inverse (block) diagonal of the rank's rows, as the sweeps use it.
    diagonal: Diagonal<B, T>,
    omega: T,
    sweeps: usize,
}

/// A level's inverse diagonal D^-1, in the form its sweeps use.
enum Diagonal<B: HaloBackend, T: Scalar> {
    /// A point diagonal: one pass per sweep.
    Point(PointSweep<B, T>),
    /// 2x2 blocks, local to the rank: a sweep is the residual, then
    /// x += omega D^-1 r.
    Blocks(DistMatrix<B, T>),
}

/// The one-pass Jacobi sweep of a level whose D^-1 is a point diagonal:
/// x_new = x + d o (b - A_owned x) - (d o A_ghost) x_ghost, the first term
/// the local backend's fused sweep over the owned block while the halo
/// travels, the second the ghost block with its rows scaled by d.
struct PointSweep<B: HaloBackend, T: Scalar> {
    /// omega D^-1 as a vector (the rank's rows).
    d: B::Vector<T>,
    /// omega D^-1 A_ghost.
    ghost: GhostBlock<B, T>,
}

/// A level's work vectors: the residual, and the coarser level's right-hand
/// side and correction.
struct Work<B: Backend, T: Scalar> {
    scratch: B::Vector<T>,
    /// The fallback of the one-pass sweep ([`AmgKernels::amg_jacobi_into`];
    /// empty on levels of 2x2 blocks, which never read it).
    tmp: B::Vector<T>,
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
/// Cost of one application per distributed level: 2 nu - 1 sweeps (the
/// first from zero is x = omega D^-1 b, no product) and one residual, each
/// one halo exchange and one pass of the local backend's fused kernel over
/// the owned block while the halo travels, then the ghost block's rows
/// (with a point diagonal a sweep is that one pass, writing the new iterate
/// beside the old and subtracting the ghost rows' share scaled by omega
/// D^-1; with 2x2 blocks the residual, then the block-diagonal product);
/// one product with R and with P (one exchange each), each owned block
/// stored in the layout the one-process cycle gives it
/// ([`gpuq_amg::cycle_layout`]: CSR for few long rows); at the gathered
/// level one all-gather of its vector (on the devices with NCCL: the host
/// waits for nothing) and the one-process cycle. No collective reduction.
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

/// The diagonal of `dinv` times `omega`, where `dinv` is a point diagonal
/// (one entry per row, on the diagonal); `None` for 2x2 blocks.
fn point_diagonal(dinv: &Csr<f64>, omega: f64) -> Option<Vec<f64>> {
    let (ptr, col, val) = (dinv.row_ptr(), dinv.col_idx(), dinv.values());
    (0..dinv.nrows())
        .map(|i| match ptr[i + 1] - ptr[i] {
            1 if col[ptr[i]] as usize == i => Some(omega * val[ptr[i]]),
            _ => None,
        })
        .collect()
}

/// `ghost` with row i scaled by `d[i]`.
fn scale_rows<T: Scalar>(ghost: &Csr<T>, d: &[f64]) -> Result<Csr<T>> {
    let ptr = ghost.row_ptr();
    let mut values = ghost.values().to_vec();
    for (i, &di) in d.iter().enumerate() {
        for v in &mut values[ptr[i]..ptr[i + 1]] {
            *v *= T::from_f64(di);
        }
    }
    Csr::try_new(
        ghost.nrows(),
        ghost.ncols(),
        ptr.to_vec(),
        ghost.col_idx().to_vec(),
        values,
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
        for (i, l) in h.levels().iter().enumerate() {
            let (fine, coarse) = (&l.partition, &l.coarse);
            // The coarse node blocks where the next level is distributed too
            // (0 otherwise: its transfer operators are not node-blocked).
            let (fb, cb) = (l.block, h.levels().get(i + 1).map_or(0, |n| n.block));
            let split = |cols: &RowPartition, rows: &Csr<f64>| {
                dist.agree(split_columns(cols, rank, rows).and_then(|s| convert_split::<T>(&s)))
            };
            // A and R were split by the setup; P (split by coarse columns) here.
            let a_split = dist.agree(convert_split::<T>(&l.a_split))?;
            let r_split = dist.agree(convert_split::<T>(&l.r_split))?;
            let p_split = split(coarse, &l.p)?;
            // Each owned block in the layout the one-process cycle would give it.
            let owned = |m: &Csr<T>, blocks| dist.agree(cycle_layout(layout, m, blocks));
            // Every rank takes the same path (a rank without rows has a
            // point diagonal whatever the blocks), so that the collectives
            // below pair up.
            let point = point_diagonal(&l.dinv, l.omega);
            let all_point = dist.allreduce(&[f64::from(u8::from(point.is_none()))])?[0] == 0.0;
            let diagonal = match point.filter(|_| all_point) {
                Some(d) => Diagonal::Point(PointSweep {
                    ghost: dist.agree(
                        scale_rows(&a_split.ghost, &d)
                            .and_then(|g| GhostBlock::upload(dist.local(), &g)),
                    )?,
                    d: dist.upload(&d.iter().map(|&v| T::from_f64(v)).collect::<Vec<_>>())?,
                }),
                None => Diagonal::Blocks(dist.agree(
                    convert::<T>(&l.dinv).and_then(|d| dist.upload_matrix(&d, Layout::Csr)),
                )?),
            };
            levels.push(CycleLevel {
                a: DistMatrix::from_split(dist, fine, &a_split, owned(&a_split.owned, [fb, fb])?)?,
                p: DistMatrix::from_split_rect(
                    dist,
                    fine,
                    coarse,
                    &p_split,
                    owned(&p_split.owned, [fb, cb])?,
                )?,
                r: DistMatrix::from_split_rect(
                    dist,
                    coarse,
                    fine,
                    &r_split,
                    owned(&r_split.owned, [cb, fb])?,
                )?,
                diagonal,
                omega: T::from_f64(l.omega),
                sweeps: h.options().amg.sweeps_of(levels.len()),
            });
            let (n, nc) = (fine.range(rank).len(), coarse.range(rank).len());
            // Only the point sweep's fallback reads `tmp`.
            let point = matches!(levels.last().map(|l| &l.diagonal), Some(Diagonal::Point(_)));
            work.push(Work {
                scratch: dist.zeros(n)?,
                tmp: dist.zeros(if point { n } else { 0 })?,
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

    /// One damped Jacobi sweep x += omega D^-1 (b - A x) (`s` and `tmp`
    /// overwritten): with a point diagonal one pass, the new iterate written
    /// into `s` while the halo of x travels, the ghost rows' share
    /// subtracted, then `s` and x swapped; with 2x2 blocks the residual,
    /// then x += omega D^-1 r.
    fn jacobi(
        &self,
        lev: &CycleLevel<B, T>,
        b: &B::Vector<T>,
        x: &mut B::Vector<T>,
        s: &mut B::Vector<T>,
        tmp: &mut B::Vector<T>,
    ) -> Result<()> {
        let pt = match &lev.diagonal {
            Diagonal::Point(pt) => pt,
            Diagonal::Blocks(dinv) => {
                self.residual(lev, b, x, s)?;
                return self.dist.spmv(lev.omega, dinv, s, T::one(), x);
            }
        };
        let local = self.dist.local();
        self.dist
            .split_apply_ghost(&lev.a, x, -T::one(), &pt.ghost, s, &mut |owned, s| {
                local.amg_jacobi_into(owned, &pt.d, b, x, s, tmp)
            })?;
        std::mem::swap(x, s);
        Ok(())
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
        // The first sweep from x = 0: x = omega D^-1 b.
        match &lev.diagonal {
            Diagonal::Point(pt) => d.local().mul_elementwise(&pt.d, b, x)?,
            Diagonal::Blocks(dinv) => d.spmv(lev.omega, dinv, b, T::zero(), x)?,
        }
        for _ in 1..lev.sweeps {
            self.jacobi(lev, b, x, &mut w.scratch, &mut w.tmp)?;
        }
        self.residual(lev, b, x, &mut w.scratch)?;
        d.spmv(T::one(), &lev.r, &w.scratch, T::zero(), &mut w.bc)?;
        self.cycle(l + 1, &w.bc, &mut w.xc, rest, tail)?;
        d.spmv(T::one(), &lev.p, &w.xc, T::one(), x)?;
        for _ in 0..lev.sweeps {
            self.jacobi(lev, b, x, &mut w.scratch, &mut w.tmp)?;
        }
        Ok(())
    }

    /// The gathered levels: b all-gathered (through the transport: between
    /// the devices or through the hosts), the one-process cycle on every
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
        d.allgather_rows_into(&counts, b, &mut tail.b)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{rows_of, Communicator, DistAmgOptions, ThreadComm};
    use gpuq_cpu::CpuBackend;
    use gpuq_sparse::generators::laplace3d;
    use std::sync::Arc;

    /// The cycle applied to b on every rank of `p`, with the one-pass point
    /// sweeps and with the two-pass sweeps (the residual, then D^-1), in
    /// `layout`: each rank's two results.
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
            let run = |m: &DistAmg<CpuBackend, f64>| {
                let mut x = dist.zeros(b.len()).unwrap();
                m.apply(&bv, &mut x).unwrap();
                dist.download(&x).unwrap()
            };
            let mut m = DistAmg::<CpuBackend, f64>::new(&dist, &h, layout).unwrap();
            let points = m
                .levels
                .iter()
                .filter(|l| matches!(l.diagonal, Diagonal::Point(_)))
                .count();
            let one_pass = run(&m);
            for (l, hl) in m.levels.iter_mut().zip(h.levels()) {
                l.diagonal = Diagonal::Blocks(dist.upload_matrix(&hl.dinv, Layout::Csr).unwrap());
            }
            (one_pass, run(&m), points)
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
            for (one, two, points) in both_sweeps(&a, &p, layout) {
                assert!(points >= 1, "{ranks} ranks: no point sweep");
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
    fn point_diagonals_are_recognised_and_blocks_are_not() {
        let d = Csr::try_new(3, 3, vec![0, 1, 2, 3], vec![0, 1, 2], vec![2.0, 4.0, 8.0]).unwrap();
        assert_eq!(point_diagonal(&d, 0.5), Some(vec![1.0, 2.0, 4.0]));
        let blocks = Csr::try_new(
            2,
            2,
            vec![0, 2, 4],
            vec![0, 1, 0, 1],
            vec![1.0, 0.5, 0.5, 1.0],
        )
        .unwrap();
        assert_eq!(point_diagonal(&blocks, 1.0), None);
        let off = Csr::try_new(2, 2, vec![0, 1, 2], vec![1, 0], vec![1.0, 1.0]).unwrap();
        assert_eq!(point_diagonal(&off, 1.0), None);
        let g = Csr::try_new(2, 3, vec![0, 2, 3], vec![0, 2, 1], vec![1.0, 2.0, 3.0]).unwrap();
        let s = scale_rows(&g, &[2.0, -1.0]).unwrap();
        assert_eq!(s.values(), &[2.0, 4.0, -3.0]);
        assert_eq!(s.col_idx(), g.col_idx());
    }
}
