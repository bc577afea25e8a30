//! Monte Carlo across ranks: [`DistWalk`] splits every batch of histories
//! over the ranks and sums their tallies, so `gpuq_mcls::MonteCarlo` and
//! `gpuq_mcls::mcsa` run distributed unchanged.

use crate::comm::Communicator;
use gpuq_core::Result;
use gpuq_mcls::{AdjointBatch, BatchSums, ForwardBatch, Layout, McSetup, Source, WalkBackend};
use std::ops::Range;
use std::sync::Arc;

/// A walk backend over ranks: each rank runs its share of every batch's
/// histories (a contiguous range of the batch's history ids) on the local
/// walk backend `W`, then the per-entry sums and the step counts are summed
/// over ranks ([`Communicator::allreduce_sum`]: rank order, fixed order).
///
/// The histories keep their ids, so their random streams (keyed by seed and
/// id) and walks are those of a single-rank run: the same seed gives the same
/// estimate as one rank to rounding (the tallies are summed in another order),
/// and the same bits for the same rank count. Every rank holds the walk data
/// whole (walks jump to any row); every rank gets the whole estimate. Cost per
/// batch: 1/size of the histories, one allreduce of n + 1 values.
pub struct DistWalk<W> {
    local: W,
    comm: Arc<dyn Communicator>,
}

impl<W: WalkBackend> DistWalk<W> {
    /// The walk backend of this rank.
    pub fn new(local: W, comm: Arc<dyn Communicator>) -> Self {
        DistWalk { local, comm }
    }

    /// This rank's share of `count` histories: an even split, the first
    /// `count % size` ranks taking one more.
    fn share(&self, count: u64) -> Range<u64> {
        let (size, rank) = (self.comm.size() as u64, self.comm.rank() as u64);
        let (q, extra) = (count / size, count % size);
        let start = rank * q + rank.min(extra);
        start..start + q + u64::from(rank < extra)
    }

    /// The local sums, summed over ranks.
    fn reduce(&self, local: BatchSums) -> Result<BatchSums> {
        let mut flat = local.sums;
        flat.push(local.steps as f64);
        let mut total = self.comm.allreduce_sum(&flat)?;
        let steps = total.pop().unwrap_or(0.0);
        Ok(BatchSums {
            sums: total,
            steps: steps as u64,
        })
    }
}

impl<W: WalkBackend> WalkBackend for DistWalk<W> {
    type Prepared = W::Prepared;
    type Source = W::Source;

    fn walk_backend_name(&self) -> String {
        format!(
            "dist{}:{}",
            self.comm.size(),
            self.local.walk_backend_name()
        )
    }

    fn prepare(&self, setup: &McSetup, layout: Layout) -> Result<W::Prepared> {
        self.local.prepare(setup, layout)
    }

    fn source(&self, source: &Source) -> Result<W::Source> {
        self.local.source(source)
    }

    /// Every entry's histories `first..first + count` split over the ranks.
    fn forward(
        &self,
        walks: &W::Prepared,
        source: &W::Source,
        batch: &ForwardBatch,
    ) -> Result<BatchSums> {
        let mine = self.share(batch.count);
        let local = ForwardBatch {
            first: batch.first + mine.start,
            count: mine.end - mine.start,
            ..*batch
        };
        self.reduce(self.local.forward(walks, source, &local)?)
    }

    /// Histories `first..first + count` split over the ranks.
    fn adjoint(
        &self,
        walks: &W::Prepared,
        source: &W::Source,
        batch: &AdjointBatch,
    ) -> Result<BatchSums> {
        let mine = self.share(batch.count);
        let local = AdjointBatch {
            first: batch.first + mine.start,
            count: mine.end - mine.start,
            ..*batch
        };
        self.reduce(self.local.adjoint(walks, source, &local)?)
    }

    /// True on every rank when it is on one (one all-gather).
    fn walk_any(&self, flag: bool) -> Result<bool> {
        let all = self.comm.allgather(&[f64::from(u8::from(flag))])?;
        Ok(all.into_iter().any(|v| v != 0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ThreadComm;
    use gpuq_cpu::CpuBackend;
    use gpuq_mcls::{mcsa, McMethod, McOptions, McsaOptions, MonteCarlo};
    use gpuq_sparse::generators;

    #[test]
    fn shares_cover_the_batch_once() {
        let out = ThreadComm::run(3, |c| {
            let w = DistWalk::new(CpuBackend::new(), Arc::new(c));
            (w.share(10), w.share(2))
        })
        .unwrap();
        assert_eq!(out[0], (0..4, 0..1));
        assert_eq!(out[1], (4..7, 1..2));
        assert_eq!(out[2], (7..10, 2..2));
    }

    #[test]
    fn the_estimate_over_ranks_is_the_single_rank_estimate() {
        let a = generators::laplace1d::<f64>(40, 1.0);
        let b: Vec<f64> = (0..40).map(|i| 1.0 + (i % 3) as f64).collect();
        for method in [McMethod::Forward, McMethod::Adjoint] {
            let opts = McOptions {
                method,
                histories: 2_000,
                ..Default::default()
            };
            let cpu = CpuBackend::new();
            let serial = MonteCarlo::new(&cpu, &a, opts.layout)
                .unwrap()
                .solve(&b, &opts)
                .unwrap();
            for ranks in [1, 2, 4] {
                let runs = ThreadComm::run(ranks, |c| {
                    let w = DistWalk::new(CpuBackend::new(), Arc::new(c));
                    let mc = MonteCarlo::new(&w, &a, opts.layout).unwrap();
                    let r = mc.solve(&b, &opts).unwrap();
                    (r.x, r.steps, r.histories)
                })
                .unwrap();
                for (x, steps, histories) in &runs {
                    assert_eq!(x, &runs[0].0, "every rank has the same bits");
                    assert_eq!((*steps, *histories), (serial.steps, serial.histories));
                    for (u, v) in x.iter().zip(&serial.x) {
                        assert!(
                            (u - v).abs() <= 1e-12 * v.abs().max(1.0),
                            "{method:?} {ranks}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn mcsa_runs_over_ranks() {
        let a = generators::laplace1d::<f64>(30, 1.0);
        let b = vec![1.0; 30];
        let opts = McsaOptions {
            inner: McOptions {
                histories: 2_000,
                ..McsaOptions::default().inner
            },
            ..McsaOptions::default()
        };
        let serial = {
            let cpu = CpuBackend::new();
            let mc = MonteCarlo::new(&cpu, &a, opts.inner.layout).unwrap();
            mcsa(&mc, &b, &opts).unwrap()
        };
        let runs = ThreadComm::run(3, |c| {
            let w = DistWalk::new(CpuBackend::new(), Arc::new(c));
            let mc = MonteCarlo::new(&w, &a, opts.inner.layout).unwrap();
            mcsa(&mc, &b, &opts).unwrap()
        })
        .unwrap();
        for (x, report) in &runs {
            assert!(report.converged);
            assert!(report.iterations.abs_diff(serial.1.iterations) <= 1);
            for (u, v) in x.iter().zip(&serial.0) {
                assert!((u - v).abs() <= 1e-8 * v.abs().max(1.0));
            }
        }
    }
}
