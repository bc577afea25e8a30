//! The cubature steps on [`Dist`]: a batch of boxes is dealt to the ranks in
//! contiguous slices, each rank applies the rule (or runs the second phase) to
//! its slice on its local backend, and one all-gather gives every rank every
//! result in box order. A box's result is the same bits on every backend
//! (built-ins and expressions alike), so a run gives the one-rank estimate
//! whatever the rank count. Tensor sums, classification and splitting run on
//! every rank in full (the defaults: the local backend's tensor kernel, the
//! host's bookkeeping).
//!
//! A rank whose slice meets a NaN or infinite value still joins the
//! all-gather, carrying the value and its point, so every rank stops with the
//! same [`Error::IntegrandNotFinite`] instead of waiting for it.

use crate::backend::Dist;
use crate::halo::HaloBackend;
use gpuq_core::{Error, Result};
use gpuq_cubature::kernels::{Boxes, CubatureKernels, Prepared};
use gpuq_cubature::rules::LaneRule;
use gpuq_cubature::{Func, Rule};
use gpuq_kernels::cubature::integrand::MAX_DIM;
use gpuq_kernels::cubature::rule::{BoxResult, LocalOutcome};

/// Values of a rank's status ahead of its results: a code (0 done, 1 a
/// non-finite value, 2 another error), the value, its point.
const STATUS: usize = 2 + MAX_DIM;

/// Rank `rank`'s slice `start..end` of `count` items dealt to `size` ranks.
fn slice_of(count: usize, size: usize, rank: usize) -> (usize, usize) {
    let per = count.div_ceil(size.max(1));
    ((rank * per).min(count), ((rank + 1) * per).min(count))
}

/// The boxes `start..end` of `boxes`.
fn sub_boxes(boxes: &Boxes, start: usize, end: usize) -> Boxes {
    let n = boxes.dim;
    Boxes {
        dim: n,
        center: boxes.center[start * n..end * n].to_vec(),
        half: boxes.half[start * n..end * n].to_vec(),
    }
}

impl<B: HaloBackend + CubatureKernels> Dist<B> {
    /// Runs `work` on this rank's slice of `count` items, each result packed
    /// into `width` values by `pack`, and gathers every rank's (padded to the
    /// longest slice) in rank order; unpacks the `count` results. Errors on
    /// every rank when one rank's work failed. One all-gather of
    /// `size x (STATUS + width x ceil(count / size))` values.
    fn dealt<T>(
        &self,
        count: usize,
        width: usize,
        work: impl FnOnce(usize, usize) -> Result<Vec<T>>,
        pack: impl Fn(&T, &mut [f64]),
        unpack: impl Fn(&[f64]) -> T,
    ) -> Result<Vec<T>> {
        let (size, rank) = (self.comm().size(), self.comm().rank());
        let per = count.div_ceil(size.max(1));
        let (start, end) = slice_of(count, size, rank);
        let mut mine = vec![0.0; STATUS + width * per];
        let local = work(start, end);
        match &local {
            Ok(items) => {
                for (k, item) in items.iter().enumerate() {
                    let at = STATUS + k * width;
                    pack(item, &mut mine[at..at + width]);
                }
            }
            Err(Error::IntegrandNotFinite { value, point }) => {
                mine[0] = 1.0;
                mine[1] = *value;
                for (m, p) in mine[2..STATUS].iter_mut().zip(point) {
                    *m = *p;
                }
            }
            Err(_) => mine[0] = 2.0,
        }
        let all = self.comm().allgather(&mine)?;
        let chunk = mine.len();
        if all.len() != chunk * size {
            return Err(Error::shape("cubature all-gather", chunk * size, all.len()));
        }
        local?;
        let mut out = Vec::with_capacity(count);
        for r in 0..size {
            let block = &all[r * chunk..(r + 1) * chunk];
            match block[0] as u32 {
                0 => {}
                1 => {
                    return Err(Error::IntegrandNotFinite {
                        value: block[1],
                        point: block[2..STATUS].to_vec(),
                    })
                }
                _ => {
                    return Err(Error::Device(format!(
                        "rank {r} failed its share of a cubature batch (its own error says why)"
                    )))
                }
            }
            let (s, e) = slice_of(count, size, r);
            for k in 0..e - s {
                out.push(unpack(&block[STATUS + k * width..STATUS + (k + 1) * width]));
            }
        }
        Ok(out)
    }
}

/// Every rank prepares its local backend; the batch steps are dealt to the
/// ranks, the rest runs on each rank in full.
impl<B: HaloBackend + CubatureKernels> CubatureKernels for Dist<B> {
    fn cub_prepare(&self, f: Func<'_>) -> Result<Prepared> {
        self.local().cub_prepare(f)
    }

    fn cub_evaluate(&self, rule: &LaneRule, f: Func<'_>, boxes: &Boxes) -> Result<Vec<BoxResult>> {
        self.dealt(
            boxes.len(),
            3,
            |s, e| self.local().cub_evaluate(rule, f, &sub_boxes(boxes, s, e)),
            |r, v| {
                v[0] = r.estimate;
                v[1] = r.error;
                v[2] = r.axis as f64;
            },
            |v| BoxResult {
                estimate: v[0],
                error: v[1],
                axis: v[2] as u32,
            },
        )
    }

    fn cub_local(
        &self,
        rule: &Rule,
        f: Func<'_>,
        boxes: &Boxes,
        roots: &[BoxResult],
        tols: &[f64],
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        gpuq_cubature::kernels::check_local(boxes, roots, tols)?;
        self.dealt(
            boxes.len(),
            5,
            |s, e| {
                self.local().cub_local(
                    rule,
                    f,
                    &sub_boxes(boxes, s, e),
                    &roots[s..e],
                    &tols[s..e],
                    max_evals,
                )
            },
            |l, v| {
                v[0] = l.estimate;
                v[1] = l.error;
                v[2] = f64::from_bits(l.evaluations);
                v[3] = l.regions as f64;
                v[4] = l.converged as f64;
            },
            |v| LocalOutcome {
                estimate: v[0],
                error: v[1],
                evaluations: v[2].to_bits(),
                regions: v[3] as u32,
                converged: v[4] as u32,
            },
        )
    }

    /// The local backend's, times the ranks (the batches are dealt to them).
    fn cub_throughput(&self, f: Func<'_>) -> f64 {
        self.local().cub_throughput(f) * self.comm().size() as f64
    }

    fn cub_is_device(&self, f: Func<'_>) -> bool {
        self.local().cub_is_device(f)
    }

    /// True on every rank when it is on one (one all-gather): ranks whose
    /// clocks disagree about a time limit stop at the same round.
    fn cub_any(&self, flag: bool) -> Result<bool> {
        let all = self.comm().allgather(&[f64::from(u8::from(flag))])?;
        Ok(all.into_iter().any(|v| v != 0.0))
    }

    fn cub_tensor(
        &self,
        f: Func<'_>,
        dim: usize,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        self.local().cub_tensor(f, dim, nodes, weights, total)
    }
}
