//! Sequential CUHRE (Berntsen, Espelid and Genz; seed 004, Algorithm 1): a
//! priority queue of regions on their error estimates; the worst is halved along
//! its split axis until the summed error meets max(abs_tol, rel_tol |I|). The
//! host reference (one core), and what the second phase runs per box (there
//! with a bounded heap: `gpuq_kernels::cubature::rule::local_cuhre`).

use crate::func::{Func, NonFinite};
use crate::kernels::{with_host, Boxes, CubatureKernels};
use crate::outcome::{Clock, Options, Outcome, Status, Timings, CLOCK_EVERY};
use crate::region::check_box;
use crate::rules::{build, build_lanes};
use gpuq_core::Result;
use gpuq_kernels::cubature::rule::{adjust_children, child, evaluate, BoxResult, Rule};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Instant;

/// A heap entry: a region's error and its slot.
struct Entry(f64, usize);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Larger error first; ties to the older slot.
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

/// Integrates `f` over [lo, hi] by sequential CUHRE on the host. Stops when the
/// error estimate meets the tolerance ([`Status::Converged`]), the next split
/// would pass `max_evals` ([`Status::EvaluationCap`]; by default
/// [`Options::host_thread_cap`]), the time limit has passed ([`Status::TimeLimit`]) or a
/// stop was requested ([`Status::Interrupted`]); errors with
/// [`gpuq_core::Error::IntegrandNotFinite`] at a NaN or infinite value, and
/// for device code without a host function (see [`cuhre_on`]). Cost: (2 splits
/// + 1) x rule points evaluations; memory O(regions n).
pub fn cuhre(f: Func<'_>, lo: &[f64], hi: &[f64], opts: &Options) -> Result<Outcome> {
    opts.check()?;
    let opts = &opts.with_cap(Options::host_thread_cap());
    let n = check_box(&f, lo, hi)?;
    let rule = build(opts.rule, n)?;
    let (h, seen) = (f.host()?, NonFinite::default());
    let clock = Clock::start(opts);
    run(
        &rule,
        lo,
        hi,
        opts,
        |boxes: &Boxes| {
            // The integrand per call, so that a batch integrand takes each split's boxes
            // in one call.
            let r: Vec<BoxResult> = with_host!(h, &seen, g, {
                (0..boxes.len())
                    .map(|b| evaluate(&rule, g, boxes.center_of(b), boxes.half_of(b)))
                    .collect()
            });
            seen.check()?;
            Ok(r)
        },
        || Ok(clock.stop_here()),
    )
}

/// Sequential CUHRE for any integrand: on the host ([`cuhre`]) when the host
/// can evaluate `f`, else (device code) with each split's two children
/// evaluated by one batch of `backend` (a launch and a download per split:
/// a reference for device-only integrands, not a fast method).
pub fn cuhre_on<B: CubatureKernels>(
    backend: &B,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    if f.host().is_ok() {
        return cuhre(f, lo, hi, opts);
    }
    opts.check()?;
    let opts = &opts.resolved(backend, f);
    let n = check_box(&f, lo, hi)?;
    let lanes = build_lanes(opts.rule, n)?;
    let clock = Clock::start(opts);
    run(
        &lanes.rule,
        lo,
        hi,
        opts,
        |boxes: &Boxes| backend.cub_evaluate(&lanes, f, boxes),
        || clock.stop(backend),
    )
}

/// The CUHRE loop with `eval` applying the rule to a batch of one or two
/// boxes; `stop` (asked every [`CLOCK_EVERY`] splits) says when the time limit has passed
/// or a stop was requested.
fn run(
    rule: &Rule,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
    mut eval: impl FnMut(&Boxes) -> Result<Vec<BoxResult>>,
    mut stop: impl FnMut() -> Result<Option<Status>>,
) -> Result<Outcome> {
    let start = Instant::now();
    let n = lo.len();
    let pts = rule.points as u64;
    let c0: Vec<f64> = lo.iter().zip(hi).map(|(a, b)| 0.5 * (a + b)).collect();
    let h0: Vec<f64> = lo.iter().zip(hi).map(|(a, b)| 0.5 * (b - a)).collect();
    // Slots: centre, half-widths, result; a split region's slot is reused.
    let mut centers = c0.clone();
    let mut halves = h0.clone();
    let mut batch = Boxes::new(n);
    batch.push(&c0, &h0);
    let first = eval(&batch)?[0];
    let mut results = vec![first];
    let mut heap = BinaryHeap::new();
    heap.push(Entry(first.error, 0));
    let (mut est, mut err) = (first.estimate, first.error);
    let mut evals = pts;
    let mut splits = 0u64;
    let mut kc = vec![vec![0.0; n]; 2];
    let mut kh = vec![vec![0.0; n]; 2];
    let status = loop {
        if err <= opts.target(est) {
            break Status::Converged;
        }
        if evals + 2 * pts > opts.max_evals {
            break Status::EvaluationCap;
        }
        if splits % CLOCK_EVERY == 0 {
            if let Some(status) = stop()? {
                break status;
            }
        }
        let Some(Entry(_, slot)) = heap.pop() else {
            break Status::Converged;
        };
        let parent = results[slot];
        let pc = centers[slot * n..(slot + 1) * n].to_vec();
        let ph = halves[slot * n..(slot + 1) * n].to_vec();
        batch.resize(n, 0);
        for k in 0..2 {
            child(
                &pc,
                &ph,
                parent.axis as usize,
                2,
                k as u32,
                &mut kc[k],
                &mut kh[k],
            );
            batch.push(&kc[k], &kh[k]);
        }
        let got = eval(&batch)?;
        let mut kids = [got[0], got[1]];
        adjust_children(&rule.errcof, parent.estimate, &mut kids);
        evals += 2 * pts;
        splits += 1;
        est += kids[0].estimate + kids[1].estimate - parent.estimate;
        err += kids[0].error + kids[1].error - parent.error;
        // Child 0 takes the parent's slot, child 1 a new one.
        centers[slot * n..(slot + 1) * n].copy_from_slice(&kc[0]);
        halves[slot * n..(slot + 1) * n].copy_from_slice(&kh[0]);
        results[slot] = kids[0];
        heap.push(Entry(kids[0].error, slot));
        centers.extend_from_slice(&kc[1]);
        halves.extend_from_slice(&kh[1]);
        results.push(kids[1]);
        heap.push(Entry(kids[1].error, results.len() - 1));
    };
    // Exact sums in slot order.
    let estimate: f64 = results.iter().map(|r| r.estimate).sum();
    let error: f64 = results.iter().map(|r| r.error).sum();
    let status = if error <= opts.target(estimate) {
        Status::Converged
    } else if status == Status::Converged {
        // The running sums met the target but the exact ones do not.
        Status::EvaluationCap
    } else {
        status
    };
    let s = start.elapsed().as_secs_f64();
    Ok(Outcome {
        estimate,
        error,
        evaluations: evals,
        boxes: results.len() as u64,
        rounds: splits,
        status,
        timings: Timings {
            phase1_s: s,
            phase2_s: 0.0,
            total_s: s,
            evaluate_s: 0.0,
        },
        method: crate::Method::Cuhre,
    })
}
