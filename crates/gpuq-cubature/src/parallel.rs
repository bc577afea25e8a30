//! The two parallel adaptive algorithms, each written once for every backend
//! (`B: CubatureKernels`).
//!
//! **Two-phase** (Arumugam, Godunov, Ranjan, Terzic and Zubair; seed 004): the
//! box is split into l^n boxes (l^n <= `initial_boxes`); the FIRST PHASE
//! evaluates all live boxes in parallel, retires the good ones (error at most
//! their volume's share of the error budget left, the target less the errors
//! retired for good; none in the first round, whose estimates have not been
//! checked against children yet) into running sums, and halves each bad one
//! along its axis (the split factor d = 2: `SPLIT_FACTOR`), compacting
//! the bad ones by an exclusive prefix scan of their flags; it ends when the
//! target is met, or when splitting would pass `max_boxes` (L_max). A PASS OF
//! THE SECOND PHASE then runs sequential CUHRE with a bounded heap on every
//! remaining box in parallel (one thread per box), each from its first-phase
//! result and to its share of the budget left, water-filled: a box already
//! within the common share is retired as it is, and its unused share goes to
//! the others. A box whose local run fails (its heap filled, or its
//! evaluations ran out) goes back to the first phase, which refines all such
//! boxes at once, and the phases alternate until the target, the evaluation
//! cap, the time limit or `max_boxes` stops the run.
//!
//! Why (issue 31; `docs/benchmarks.md` has the counts): on seed 004's f5 at
//! n = 8 to 1e-6 the method took 4.7 x 10^9 evaluations where breadth-first
//! takes 1.6 x 10^8; it now takes 1.45 x 10^8. The first phase split every bad
//! box in four along one axis: boxes got over-refined along the axes split
//! and not refined along the others, so L_max = 2^18 boxes cost 3.9 x 10^8
//! evaluations while the error only halved, and every one of them then needed
//! its other axes halved in the second phase. That phase evaluated every box
//! again (2.9 x 10^8 evaluations, also for boxes already within their share)
//! and gave all boxes an equal share; a box whose heap filled kept splitting
//! after the regions it had retired held more than its share (it could no
//! longer converge, and spent its whole budget), and the starved boxes
//! restarted from scratch with the same share (f4 at n = 5 to 1e-5 with
//! L_max = 4096: 2 x 10^9 evaluations, not converged; now 1.3 x 10^8).
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
use crate::outcome::{Clock, Options, Outcome, Status, Timings};
use crate::region::{check_box, initial_partition};
use crate::rules::build_lanes;
use gpuq_core::Result;
use gpuq_kernels::cubature::rule::{
    adjust_children, BoxResult, LocalOutcome, LOCAL_CONVERGED, LOCAL_HEAP_FULL,
};
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
    let opts = &opts.resolved(backend, f);
    let clock = Clock::start(opts);
    let start = Instant::now();
    let n = check_box(&f, lo, hi)?;
    let lanes = build_lanes(opts.rule, n)?;
    let rule = &lanes.rule;
    let pts = rule.points as u64;
    let mut done = Retired::default();
    let (mut evals, mut rounds) = (0u64, 0u64);
    let (mut evaluate_s, mut phase2_s) = (0.0, 0.0);
    // The live boxes and their results (evaluated, consistency-checked).
    let mut live = initial_partition(lo, hi, opts.initial_boxes.min(opts.max_boxes));
    let cost = live.len() as u64 * pts;
    let status = if cost > opts.max_evals {
        Status::EvaluationCap
    } else {
        let t = Instant::now();
        let mut res = backend.cub_evaluate(&lanes, f, &live)?;
        evaluate_s += t.elapsed().as_secs_f64();
        evals += cost;
        rounds += 1;
        let mut first = true;
        loop {
            let (est, err) = totals(&done, &res);
            let target = opts.target(est);
            if err <= target {
                add_all(&mut done, &res);
                break Status::Converged;
            }
            // Good: error within the box's volume share of the budget left.
            let live_volume: f64 = (0..live.len()).map(|b| live.volume_of(b)).sum();
            let share = (target - done.error).max(0.0) / live_volume;
            // The first round's boxes have had no parent-children consistency
            // check yet (their error estimates can be deceptively small): all
            // are bad.
            let bad = backend.cub_classify(&live, &res, share, first)?;
            first = false;
            let m = bad.iter().filter(|&&x| x).count();
            for (r, _) in res.iter().zip(&bad).filter(|(_, b)| !**b) {
                done.estimate += r.estimate;
                done.error += r.error;
                done.boxes += 1;
            }
            if m == 0 {
                // Every box met its share; only round-off can leave err > target.
                break if done.error <= opts.target(done.estimate) {
                    Status::Converged
                } else {
                    Status::MemoryCap
                };
            }
            let kept_res: Vec<BoxResult> = pick(&res, &bad);
            if m * SPLIT_FACTOR as usize > opts.max_boxes {
                // L_max reached: a pass of the second phase over the bad boxes.
                let mut kept = Boxes::new(live.dim);
                backend.cub_split(&live, &res, &bad, 1, &mut kept)?;
                let t = Instant::now();
                let mut state = State {
                    done: &mut done,
                    evals: &mut evals,
                };
                let pass = second_pass(
                    backend, &lanes, f, opts, &clock, &kept, &kept_res, &mut state,
                )?;
                phase2_s += t.elapsed().as_secs_f64();
                match pass {
                    Pass::Done(status) => break status,
                    Pass::Back(boxes, results) => {
                        // The boxes the second phase could not finish go back to
                        // the first phase, which refines them all at once.
                        live = boxes;
                        res = results;
                        continue;
                    }
                }
            }
            let mut children = Boxes::new(live.dim);
            backend.cub_split(&live, &res, &bad, SPLIT_FACTOR, &mut children)?;
            let cost = children.len() as u64 * pts;
            let capped = evals + cost > opts.max_evals;
            let stop = match capped {
                true => Some(Status::EvaluationCap),
                false => clock.stop(backend)?,
            };
            if let Some(status) = stop {
                // The parents stand for the children not evaluated.
                add_all(&mut done, &kept_res);
                break status;
            }
            let t = Instant::now();
            res = backend.cub_evaluate(&lanes, f, &children)?;
            evaluate_s += t.elapsed().as_secs_f64();
            evals += cost;
            rounds += 1;
            let per = SPLIT_FACTOR as usize;
            for (g, p) in kept_res.iter().enumerate() {
                adjust_children(&rule.errcof, p.estimate, &mut res[g * per..(g + 1) * per]);
            }
            live = children;
        }
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
            phase1_s: total_s - phase2_s,
            phase2_s,
            total_s,
            evaluate_s,
        },
        method: crate::Method::TwoPhase,
    })
}

/// The first phase's SPLITFACTOR: a bad box is halved along its axis, as
/// CUHRE does. (Four parts along one axis, the earlier choice that filled
/// L_max in fewer rounds, over-refines that axis while the box's error sits
/// in the others: seed 004's f5 at n = 8 reached L_max = 2^18 boxes with
/// 3.9 x 10^8 evaluations and its error only halved.)
const SPLIT_FACTOR: u32 = 2;

/// The running sums the second phase adds to.
struct State<'a> {
    done: &'a mut Retired,
    evals: &'a mut u64,
}

/// How a pass of the second phase ended.
enum Pass {
    /// The run is over, for this reason.
    Done(Status),
    /// These boxes (with their first-phase results) go back to the first
    /// phase.
    Back(Boxes, Vec<BoxResult>),
}

/// A pass of the second phase (seed 004, Algorithm 3): every box left by the
/// first phase continues by sequential CUHRE on its own (one thread per box,
/// a bounded heap, [`CubatureKernels::cub_local`], starting from its
/// first-phase result) until its error meets its share of the error budget
/// left (the target less the errors retired for good). The shares are
/// water-filled ([`shares`]): a box whose error already meets the common
/// share is retired as it is (no evaluation), and what it leaves unused goes
/// to the others. The converged boxes are retired; when the failed ones'
/// local results still give a total within the target they are kept, else
/// they go back to the first phase ([`Pass::Back`], their local work
/// discarded, counted), unless the evaluations left cannot halve them or they
/// are too many to halve within `max_boxes` (then their local results are
/// kept and the run stops). A pass's evaluations are bounded by the cap and by
/// the time left at the backend's nominal throughput.
#[allow(clippy::too_many_arguments)]
fn second_pass<B: CubatureKernels>(
    backend: &B,
    lanes: &crate::rules::LaneRule,
    f: Func<'_>,
    opts: &Options,
    clock: &Clock,
    boxes: &Boxes,
    results: &[BoxResult],
    st: &mut State<'_>,
) -> Result<Pass> {
    let rule = &lanes.rule;
    let pts = rule.points as u64;
    let (est, _) = totals(st.done, results);
    let target = opts.target(est);
    if let Some(status) = clock.stop(backend)? {
        add_all(st.done, results);
        return Ok(Pass::Done(status));
    }
    // The budget of these boxes, with a margin for the target's move with
    // the estimate.
    let budget = (1.0 - MARGIN) * target - st.done.error;
    if budget <= 0.0 {
        // The errors retired for good already exceed the target.
        add_all(st.done, results);
        return Ok(Pass::Done(Status::MemoryCap));
    }
    let errs: Vec<f64> = results.iter().map(|r| r.error).collect();
    let tols = shares(&errs, budget);
    let go: Vec<bool> = errs.iter().zip(&tols).map(|(e, t)| e > t).collect();
    for (r, _) in results.iter().zip(&go).filter(|(_, g)| !**g) {
        st.done.estimate += r.estimate;
        st.done.error += r.error;
        st.done.boxes += 1;
    }
    let k = go.iter().filter(|&&g| g).count() as u64;
    if k == 0 {
        return Ok(Pass::Done(Status::Converged));
    }
    let mut run = Boxes::new(boxes.dim);
    backend.cub_split(boxes, results, &go, 1, &mut run)?;
    let roots: Vec<BoxResult> = pick(results, &go);
    let run_tols: Vec<f64> = pick(&tols, &go);
    let mut each = opts.max_evals.saturating_sub(*st.evals) / k;
    let timed = opts.max_time.is_some_and(|_| {
        let fit = clock.left().max(0.0) * backend.cub_throughput(f) / k as f64;
        let short = (fit as u64) < each;
        each = each.min(fit as u64);
        short
    });
    let stopped = if timed {
        Status::TimeLimit
    } else {
        Status::EvaluationCap
    };
    if each < 2 * pts {
        add_all(st.done, &roots);
        return Ok(Pass::Done(stopped));
    }
    let locals = backend.cub_local(rule, f, &run, &roots, &run_tols, each)?;
    *st.evals += locals.iter().map(|l| l.evaluations).sum::<u64>();
    let failed: Vec<bool> = locals
        .iter()
        .map(|l| l.converged != LOCAL_CONVERGED)
        .collect();
    let idx: Vec<usize> = (0..locals.len()).filter(|&i| failed[i]).collect();
    let ok: Vec<usize> = (0..locals.len()).filter(|&i| !failed[i]).collect();
    keep(st, &locals, &ok);
    // With the failed boxes' local results, the total may meet the target.
    let est2 = st.done.estimate + idx.iter().map(|&i| locals[i].estimate).sum::<f64>();
    let err2 = st.done.error + idx.iter().map(|&i| locals[i].error).sum::<f64>();
    if idx.is_empty() || err2 <= opts.target(est2) {
        keep(st, &locals, &idx);
        return Ok(Pass::Done(Status::Converged));
    }
    let heap_full = idx.iter().any(|&i| locals[i].converged == LOCAL_HEAP_FULL);
    let halving = 2 * idx.len() as u64 * pts;
    if 2 * idx.len() > opts.max_boxes || *st.evals + halving > opts.max_evals {
        keep(st, &locals, &idx);
        return Ok(Pass::Done(if 2 * idx.len() > opts.max_boxes && heap_full {
            Status::MemoryCap
        } else {
            stopped
        }));
    }
    let mut back = Boxes::new(boxes.dim);
    backend.cub_split(&run, &roots, &failed, 1, &mut back)?;
    Ok(Pass::Back(back, pick(&roots, &failed)))
}

/// The second phase aims at this fraction less than the target (the target
/// moves with the estimate).
const MARGIN: f64 = 1e-3;

/// Retires the local results `which` of `locals`.
fn keep(st: &mut State<'_>, locals: &[LocalOutcome], which: &[usize]) {
    for &i in which {
        st.done.estimate += locals[i].estimate;
        st.done.error += locals[i].error;
        st.done.boxes += locals[i].regions as u64;
    }
}

/// The items of `v` whose flag is set, in order.
fn pick<T: Copy>(v: &[T], flags: &[bool]) -> Vec<T> {
    v.iter()
        .zip(flags)
        .filter(|(_, f)| **f)
        .map(|(x, _)| *x)
        .collect()
}

/// Tolerance shares of `budget` for boxes of errors `errs`, water-filled: the
/// common share s is such that the boxes whose error is at most s keep their
/// error (they need no refinement) and the others get s each, the shares
/// adding up to `budget`. A box's share is at least its error exactly when it
/// needs no refinement. Cost: O(m log m).
pub(crate) fn shares(errs: &[f64], budget: f64) -> Vec<f64> {
    let m = errs.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_unstable_by(|&a, &b| errs[a].total_cmp(&errs[b]).then(a.cmp(&b)));
    let mut used = 0.0;
    let mut s = budget / m.max(1) as f64;
    for (i, &b) in order.iter().enumerate() {
        s = (budget - used) / (m - i) as f64;
        if errs[b] <= s {
            used += errs[b];
        } else {
            break;
        }
    }
    errs.iter().map(|&e| if e <= s { e } else { s }).collect()
}

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

#[cfg(test)]
mod tests {
    use super::shares;

    #[test]
    fn shares_are_water_filled() {
        // Budget 10 over errors 1, 2, 8, 20: 1 and 2 need no refinement (their
        // errors are below the common share), 8 and 20 share the rest, 3.5 each.
        let t = shares(&[8.0, 1.0, 20.0, 2.0], 10.0);
        assert_eq!(t, vec![3.5, 1.0, 3.5, 2.0]);
        assert!((t.iter().sum::<f64>() - 10.0).abs() < 1e-12);
        // Equal errors: equal shares.
        assert_eq!(shares(&[4.0; 4], 2.0), vec![0.5; 4]);
        // Everything fits: every box keeps its error.
        assert_eq!(shares(&[1.0, 2.0], 5.0), vec![1.0, 2.0]);
    }
}
