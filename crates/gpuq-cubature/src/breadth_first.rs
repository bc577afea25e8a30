//! The breadth-first algorithm (the approach of later GPU work such as PAGANI):
//! rounds over all live boxes, at most `max_boxes` of them at a time.
//!
//! Each round evaluates the new boxes in one batch; together with the boxes
//! parked from earlier rounds (whose results are kept, not recomputed) they are
//! classified (in the first round every box is bad: its error has not been
//! checked against its children's yet): a box whose error is within its volume's share of the target is
//! retired into the running sums; of the others, the ones of largest error are
//! halved along their split axis: the fewest whose error covers the excess of
//! the total over `split_aim` (default half) of the target, at most as many as memory allows (the bad
//! boxes plus one more per split stay within `max_boxes`), and the rest stay
//! parked. When
//! more than 3/4 of `max_boxes` are bad, the bad boxes of smallest error are
//! retired (the memory-bounded heuristic: their error is the least likely to
//! matter); if the retired error alone then exceeds the target, no refinement
//! can reach it and the run stops with [`Status::MemoryCap`]. The evaluation cap
//! and the time limit are looked at before each round's batch: the run stops
//! with the results so far ([`Status::EvaluationCap`], [`Status::TimeLimit`]).

use crate::func::Func;
use crate::kernels::{Boxes, CubatureKernels};
use crate::outcome::{Clock, Options, Outcome, Status, Timings};
use crate::parallel::{add_all, totals, Retired};
use crate::region::{check_box, initial_partition};
use crate::rules::build_lanes;
use gpuq_core::Result;
use gpuq_kernels::cubature::rule::{adjust_children, BoxResult};
use rayon::prelude::*;
use std::time::Instant;

/// Boxes with their results.
struct Live {
    boxes: Boxes,
    results: Vec<BoxResult>,
}

impl Live {
    /// No boxes in `dim` dimensions.
    fn new(dim: usize) -> Self {
        Live {
            boxes: Boxes::new(dim),
            results: Vec::new(),
        }
    }

    /// Appends `other`'s boxes and their results.
    fn append(&mut self, other: &Boxes, results: &[BoxResult]) {
        self.boxes.center.extend_from_slice(&other.center);
        self.boxes.half.extend_from_slice(&other.half);
        self.results.extend_from_slice(results);
    }

    /// The boxes of `self` whose flag is set, in order, with their results,
    /// written into `dst` (its buffers reused: once they are large enough a
    /// round allocates nothing, and touches no fresh page). Rayon over the
    /// kept boxes; O(kept n).
    fn compact_into(&self, keep: &[bool], dst: &mut Live) {
        let n = self.boxes.dim;
        let kept: Vec<usize> = (0..keep.len()).filter(|&b| keep[b]).collect();
        dst.boxes.resize(n, kept.len());
        dst.results.resize(kept.len(), BoxResult::default());
        dst.boxes
            .center
            .par_chunks_mut(n.max(1))
            .zip(dst.boxes.half.par_chunks_mut(n.max(1)))
            .zip(dst.results.par_iter_mut())
            .zip(kept.par_iter())
            .for_each(|(((c, h), r), &b)| {
                c.copy_from_slice(self.boxes.center_of(b));
                h.copy_from_slice(self.boxes.half_of(b));
                *r = self.results[b];
            });
    }
}

/// The total error once the good boxes are retired: the retired error plus the
/// live bad boxes' (`order`).
fn err_after(done: &Retired, results: &[BoxResult], order: &[usize]) -> f64 {
    done.error + order.iter().map(|&b| results[b].error).sum::<f64>()
}

pub(crate) fn run<B: CubatureKernels>(
    backend: &B,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    opts.check()?;
    let opts = &opts.resolved(backend, f);
    let clock = Clock::start(opts);
    let start = Instant::now();
    let n = check_box(&f, lo, hi)?;
    let lanes = build_lanes(opts.rule, n)?;
    let rule = &lanes.rule;
    let pts = rule.points as u64;
    let volume: f64 = lo.iter().zip(hi).map(|(a, b)| b - a).product();
    let cap = opts.max_boxes;
    let mut fresh = initial_partition(lo, hi, opts.initial_boxes.min(cap));
    // The parents of `fresh` (two children each) once the first split happened.
    let mut parents: Vec<BoxResult> = Vec::new();
    // The live boxes (parked ones first, then each round's), and the buffers
    // the next round's parked boxes are compacted into (swapped each round).
    let mut parked = Live::new(n);
    let mut spare = Live::new(n);
    let mut done = Retired::default();
    let (mut evals, mut rounds) = (0u64, 0u64);
    let mut evaluate_s = 0.0;
    let status = loop {
        let cost = fresh.len() as u64 * pts;
        let capped = evals + cost > opts.max_evals;
        // The first round always runs: a stop has an estimate and an error.
        let stop = match capped {
            true => Some(Status::EvaluationCap),
            false if rounds > 0 => clock.stop(backend)?,
            false => None,
        };
        if let Some(status) = stop {
            // The parents of the boxes not evaluated stand for them.
            add_all(&mut done, &parents);
            add_all(&mut done, &parked.results);
            break status;
        }
        let t = Instant::now();
        let mut res = backend.cub_evaluate(&lanes, f, &fresh)?;
        evaluate_s += t.elapsed().as_secs_f64();
        evals += cost;
        rounds += 1;
        for (g, p) in parents.iter().enumerate() {
            adjust_children(&rule.errcof, p.estimate, &mut res[2 * g..2 * g + 2]);
        }
        // Parked boxes first, then this round's, in order.
        parked.append(&fresh, &res);
        let all = &parked;
        let (est, err) = totals(&done, &all.results);
        let target = opts.target(est);
        if err <= target {
            add_all(&mut done, &all.results);
            break Status::Converged;
        }
        let share = target / volume;
        let m = all.results.len();
        // The first round's boxes have had no parent-children consistency check
        // yet (their error estimates can be deceptively small): all are bad.
        let mut bad = backend.cub_classify(&all.boxes, &all.results, share, rounds == 1)?;
        // Bad boxes by decreasing error (ties to the lower index).
        let mut order: Vec<usize> = (0..m).filter(|&b| bad[b]).collect();
        // A total order (ties by index): the parallel sort gives one answer.
        order.par_sort_unstable_by(|&a, &b| {
            all.results[b]
                .error
                .total_cmp(&all.results[a].error)
                .then(a.cmp(&b))
        });
        let limit = (cap * 3 / 4).max(1);
        for &b in order.iter().skip(limit) {
            bad[b] = false;
        }
        order.truncate(limit);
        for (r, _) in all.results.iter().zip(&bad).filter(|(_, b)| !**b) {
            done.estimate += r.estimate;
            done.error += r.error;
            done.boxes += 1;
        }
        if order.is_empty() {
            break if done.error <= opts.target(done.estimate) {
                Status::Converged
            } else {
                Status::MemoryCap
            };
        }
        if done.error > target {
            for &b in &order {
                let r = all.results[b];
                done.estimate += r.estimate;
                done.error += r.error;
                done.boxes += 1;
            }
            break Status::MemoryCap;
        }
        // Split the fewest worst boxes whose error covers the excess over
        // `split_aim` of the target (splitting every bad box wastes evaluations on boxes whose
        // error would not decide convergence), as many as memory allows; the
        // other bad boxes stay parked with their results.
        let need = err_after(&done, &all.results, &order) - opts.split_aim * target;
        let mut covered = 0.0;
        let wanted = order
            .iter()
            .take_while(|&&b| {
                let go = covered < need;
                covered += all.results[b].error;
                go
            })
            .count();
        let k = wanted.min(cap - order.len()).max(1);
        let mut split = vec![false; m];
        for &b in &order[..k] {
            split[b] = true;
        }
        let stay: Vec<bool> = (0..m).map(|b| bad[b] && !split[b]).collect();
        parents = (0..m)
            .filter(|&b| split[b])
            .map(|b| all.results[b])
            .collect();
        backend.cub_split(&all.boxes, &all.results, &split, 2, &mut fresh)?;
        all.compact_into(&stay, &mut spare);
        std::mem::swap(&mut parked, &mut spare);
    };
    // (A run stopped before its first batch has nothing to show.)
    let status = if done.boxes > 0 && done.error <= opts.target(done.estimate) {
        Status::Converged
    } else if status == Status::Converged {
        Status::EvaluationCap
    } else {
        status
    };
    let total_s = start.elapsed().as_secs_f64();
    Ok(Outcome {
        estimate: done.estimate,
        error: done.error,
        evaluations: evals,
        boxes: done.boxes,
        rounds,
        status,
        timings: Timings {
            phase1_s: total_s,
            phase2_s: 0.0,
            total_s,
            evaluate_s,
        },
        method: crate::Method::BreadthFirst,
    })
}
