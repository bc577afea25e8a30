//! The two parallel adaptive algorithms, each written once for every backend
//! (`B: CubatureKernels`).
//!
//! **Two-phase** (Arumugam, Godunov, Ranjan, Terzic and Zubair; seed 004): the
//! box is split into l^n boxes (l^n <= `initial_boxes`); the FIRST PHASE
//! evaluates all live boxes in parallel, adds the good ones (error at most their
//! volume's share of the target; none in the first round, whose estimates have
//! not been checked against children yet) to running sums, and splits each bad one into d
//! parts along its axis (d = clamp(`max_boxes` / bad, 2, 4): the split factor
//! heuristic), compacting the bad ones by an exclusive prefix scan of their flags;
//! it ends when the target is met, or when splitting would pass `max_boxes`
//! (L_max). The SECOND PHASE then runs sequential CUHRE with a bounded heap on
//! every remaining box in parallel (one thread per box), each with an equal share
//! of the remaining error budget and of the remaining evaluations; while the
//! total error misses the target, boxes that ran out of evaluations restart (up
//! to four times) with the evaluations left, shared among fewer boxes.
//!
//! **Breadth-first** ([`mod@crate::breadth_first`]): rounds over all live boxes
//! with parking of the bad boxes memory does not allow to split.
//!
//! After each split, DCUHRE's consistency check adjusts the children's errors by
//! the difference between the parent's estimate and the sum of its children's.
//! All sums run on the host in box order, so the result depends on neither the
//! thread count nor the backend's reduction order.

use crate::func::Func;
use crate::kernels::{Boxes, CubatureKernels};
use crate::outcome::{Options, Outcome, Status, Timings};
use crate::region::{check_box, initial_partition};
use crate::rules::build_lanes;
use gpuq_core::Result;
use gpuq_kernels::cubature::rule::{adjust_children, BoxResult, Rule};
use std::time::Instant;

/// Integrates `f` over [lo, hi] by the two-phase algorithm on `backend`.
/// Cost: per first-phase round one batch evaluation of all live boxes
/// (boxes x rule points evaluations), then one second-phase launch.
pub fn two_phase<B: CubatureKernels>(
    backend: &B,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    run(backend, f, lo, hi, opts)
}

/// Integrates `f` over [lo, hi] by the breadth-first algorithm on `backend`.
/// Cost: per round one batch evaluation of all live boxes; memory at most
/// `max_boxes` live boxes.
pub fn breadth_first<B: CubatureKernels>(
    backend: &B,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    crate::breadth_first::run(backend, f, lo, hi, opts)
}

/// Running sums of the boxes that left the rounds.
#[derive(Default)]
pub(crate) struct Retired {
    pub(crate) estimate: f64,
    pub(crate) error: f64,
    pub(crate) boxes: u64,
}

fn run<B: CubatureKernels>(
    backend: &B,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    opts.check()?;
    let start = Instant::now();
    let n = check_box(&f, lo, hi)?;
    let lanes = build_lanes(opts.rule, n)?;
    let rule = &lanes.rule;
    let pts = rule.points as u64;
    let volume: f64 = lo.iter().zip(hi).map(|(a, b)| b - a).product();
    let mut boxes = initial_partition(lo, hi, opts.initial_boxes.min(opts.max_boxes));
    let mut done = Retired::default();
    let mut evals = 0u64;
    let mut rounds = 0u64;
    let mut evaluate_s = 0.0;
    // Estimates of the parents of the current boxes (children contiguous, `parts`
    // per parent) and their results, the fallback if the cap stops the run.
    let mut parents: Vec<BoxResult> = Vec::new();
    let mut parts = 1u32;
    let mut second: Option<(Boxes, Vec<BoxResult>)> = None;
    let status = loop {
        let cost = boxes.len() as u64 * pts;
        if evals + cost > opts.max_evals {
            // Fall back on the parents' results.
            for p in &parents {
                done.estimate += p.estimate;
                done.error += p.error;
                done.boxes += 1;
            }
            break Status::EvaluationCap;
        }
        let t = Instant::now();
        let mut res = backend.cub_evaluate(&lanes, f, &boxes)?;
        evaluate_s += t.elapsed().as_secs_f64();
        evals += cost;
        rounds += 1;
        if parts > 1 {
            for (g, p) in parents.iter().enumerate() {
                let s = g * parts as usize;
                adjust_children(&rule.errcof, p.estimate, &mut res[s..s + parts as usize]);
            }
        }
        let (est, err) = totals(&done, &res);
        let target = opts.target(est);
        if err <= target {
            add_all(&mut done, &res);
            break Status::Converged;
        }
        // Good: error within the box's volume share of the target.
        let share = target / volume;
        // The first round's boxes have had no parent-children consistency check
        // yet (their error estimates can be deceptively small): all are bad.
        let bad = backend.cub_classify(&boxes, &res, share, rounds == 1)?;
        let m = bad.iter().filter(|&&x| x).count();
        // SPLITFACTOR: enough children to fill L_max, between 2 and 4 per box.
        let next_parts = (opts.max_boxes / m.max(1)).clamp(2, 4) as u32;
        for b in 0..boxes.len() {
            if !bad[b] {
                done.estimate += res[b].estimate;
                done.error += res[b].error;
                done.boxes += 1;
            }
        }
        if m == 0 {
            // Every box met its share; only round-off can leave err > target.
            break if done.error <= opts.target(done.estimate) {
                Status::Converged
            } else {
                Status::MemoryCap
            };
        }
        if m * next_parts as usize > opts.max_boxes {
            let mut kept = Boxes::new(boxes.dim);
            backend.cub_split(&boxes, &res, &bad, 1, &mut kept)?;
            let kept_res = res
                .iter()
                .zip(&bad)
                .filter(|(_, b)| **b)
                .map(|(r, _)| *r)
                .collect();
            second = Some((kept, kept_res));
            break Status::Converged;
        }
        parents = res
            .iter()
            .zip(&bad)
            .filter(|(_, b)| **b)
            .map(|(r, _)| *r)
            .collect();
        let mut children = Boxes::new(boxes.dim);
        backend.cub_split(&boxes, &res, &bad, next_parts, &mut children)?;
        boxes = children;
        parts = next_parts;
    };
    let phase1_s = start.elapsed().as_secs_f64();
    let (status, phase2_s) = match second {
        None => (status, 0.0),
        Some((kept, kept_res)) => {
            let t = Instant::now();
            let s = second_phase(
                backend, rule, f, opts, &kept, &kept_res, &mut done, &mut evals,
            )?;
            (s, t.elapsed().as_secs_f64())
        }
    };
    let status = if done.error <= opts.target(done.estimate) {
        Status::Converged
    } else if status == Status::Converged {
        Status::EvaluationCap
    } else {
        status
    };
    Ok(Outcome {
        estimate: done.estimate,
        error: done.error,
        evaluations: evals,
        boxes: done.boxes,
        rounds,
        status,
        timings: Timings {
            phase1_s,
            phase2_s,
            total_s: start.elapsed().as_secs_f64(),
            evaluate_s,
        },
    })
}

/// The second phase: bounded-heap CUHRE on every box, each with an equal share
/// of the remaining error budget and evaluations.
#[allow(clippy::too_many_arguments)]
fn second_phase<B: CubatureKernels>(
    backend: &B,
    rule: &Rule,
    f: Func<'_>,
    opts: &Options,
    boxes: &Boxes,
    results: &[BoxResult],
    done: &mut Retired,
    evals: &mut u64,
) -> Result<Status> {
    let m = boxes.len() as u64;
    let pts = rule.points as u64;
    let (est, _) = totals(done, results);
    let budget = (opts.target(est) - done.error).max(0.0);
    let tol = budget / m as f64;
    let each = opts.max_evals.saturating_sub(*evals) / m;
    if each < pts {
        for r in results {
            done.estimate += r.estimate;
            done.error += r.error;
            done.boxes += 1;
        }
        return Ok(Status::EvaluationCap);
    }
    let mut locals = backend.cub_local(rule, f, boxes, tol, each)?;
    *evals += locals.iter().map(|l| l.evaluations).sum::<u64>();
    // Boxes whose share of the evaluations ran out start again with the
    // evaluations left, shared among fewer boxes (their earlier runs are
    // discarded but counted), while that at least doubles a box's budget.
    let mut budget_each = each;
    for _ in 0..RESTARTS {
        let est = done.estimate + locals.iter().map(|l| l.estimate).sum::<f64>();
        let err = done.error + locals.iter().map(|l| l.error).sum::<f64>();
        if err <= opts.target(est) {
            break;
        }
        let failed: Vec<bool> = locals.iter().map(|l| l.converged == 0).collect();
        let mf = failed.iter().filter(|&&x| x).count() as u64;
        if mf == 0 {
            break;
        }
        let more = opts.max_evals.saturating_sub(*evals) / mf;
        if more < 2 * budget_each {
            break;
        }
        budget_each = more;
        let mut again = Boxes::new(boxes.dim);
        backend.cub_split(boxes, results, &failed, 1, &mut again)?;
        let redo = backend.cub_local(rule, f, &again, tol, more)?;
        *evals += redo.iter().map(|l| l.evaluations).sum::<u64>();
        let slots = crate::kernels::exclusive_scan(&failed);
        for (b, l) in locals.iter_mut().enumerate() {
            if failed[b] {
                *l = redo[slots[b]];
            }
        }
    }
    let mut all = true;
    for l in &locals {
        done.estimate += l.estimate;
        done.error += l.error;
        done.boxes += l.regions as u64;
        all &= l.converged == 1;
    }
    Ok(if all {
        Status::Converged
    } else {
        Status::EvaluationCap
    })
}

/// Most restarts of the second phase's unconverged boxes.
const RESTARTS: usize = 4;

/// The retired sums plus the boxes of this round, in box order.
pub(crate) fn totals(done: &Retired, res: &[BoxResult]) -> (f64, f64) {
    let mut est = done.estimate;
    let mut err = done.error;
    for r in res {
        est += r.estimate;
        err += r.error;
    }
    (est, err)
}

pub(crate) fn add_all(done: &mut Retired, res: &[BoxResult]) {
    for r in res {
        done.estimate += r.estimate;
        done.error += r.error;
        done.boxes += 1;
    }
}
