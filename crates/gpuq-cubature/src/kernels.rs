//! The steps of the parallel algorithms a backend runs, as one trait with
//! host-fallback default bodies: a new backend runs every method at once, and
//! the CPU (Rayon, `cpu.rs`) and CUDA (`cuda.rs`) backends override the
//! expensive ones.

use crate::func::{Func, NonFinite};
use crate::rules::LaneRule;
use gpuq_core::{Backend, Result};
use gpuq_kernels::cubature::rule::{self, BoxResult, LocalOutcome, Rule};
use gpuq_kernels::cubature::tensor::{chunk_points, tensor_group, TENSOR_GROUP};

/// Capacity of a thread's heap in the second phase (regions).
pub const LOCAL_HEAP: usize = 32;

/// A batch of boxes: box b is `center[b n..(b + 1) n] +- half[b n..(b + 1) n]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Boxes {
    /// Dimension n.
    pub dim: usize,
    /// Centres, n per box.
    pub center: Vec<f64>,
    /// Half-widths, n per box.
    pub half: Vec<f64>,
}

impl Boxes {
    /// An empty batch in `dim` dimensions.
    pub fn new(dim: usize) -> Self {
        Boxes {
            dim,
            center: Vec::new(),
            half: Vec::new(),
        }
    }

    /// Number of boxes.
    pub fn len(&self) -> usize {
        self.center.len().checked_div(self.dim).unwrap_or(0)
    }

    /// True when there are no boxes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Centre of box `b`.
    pub fn center_of(&self, b: usize) -> &[f64] {
        &self.center[b * self.dim..(b + 1) * self.dim]
    }

    /// Half-widths of box `b`.
    pub fn half_of(&self, b: usize) -> &[f64] {
        &self.half[b * self.dim..(b + 1) * self.dim]
    }

    /// Volume of box `b` (prod 2 h_i).
    pub fn volume_of(&self, b: usize) -> f64 {
        self.half_of(b).iter().map(|h| 2.0 * h).product()
    }

    /// Makes room for exactly `count` boxes in `dim` dimensions (contents
    /// unspecified, to be overwritten), keeping the allocations. O(growth).
    pub fn resize(&mut self, dim: usize, count: usize) {
        self.dim = dim;
        self.center.resize(count * dim, 0.0);
        self.half.resize(count * dim, 0.0);
    }

    /// Appends a box.
    pub fn push(&mut self, center: &[f64], half: &[f64]) {
        self.center.extend_from_slice(center);
        self.half.extend_from_slice(half);
    }
}

/// Runs `$body` with `$g` bound to the host integrand `$h` (a
/// [`crate::func::HostFunc`]) behind a [`crate::func::Guard`] that records
/// into `$seen` (monomorphised per kind of integrand).
macro_rules! with_host {
    ($h:expr, $seen:expr, $g:ident, $body:expr) => {
        match $h {
            $crate::func::HostFunc::Builtin(b) => {
                let $g = &$crate::func::Guard { f: &b, seen: $seen };
                $body
            }
            $crate::func::HostFunc::Closure(c) => {
                let $g = &$crate::func::Guard {
                    f: &$crate::func::ClosureIntegrand(c),
                    seen: $seen,
                };
                $body
            }
            $crate::func::HostFunc::Expr(e) => {
                let $g = &$crate::func::Guard { f: e, seen: $seen };
                $body
            }
            $crate::func::HostFunc::Batch(batch) => {
                // Two passes (crate::batch): record the points, then replay their values.
                let recorder = $crate::batch::Recorder::default();
                let mut out = {
                    let $g = &recorder;
                    $body
                };
                let replay = recorder.evaluate(batch, $seen);
                let replayed = {
                    let $g = &$crate::func::Guard {
                        f: &replay,
                        seen: $seen,
                    };
                    $body
                };
                // The first pass's results (of zeros) only fix the type.
                let _recorded = std::mem::replace(&mut out, replayed);
                out
            }
        }
    };
}
pub(crate) use with_host;

/// How a backend evaluates an integrand, after [`CubatureKernels::cub_prepare`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Prepared {
    /// "host" (the backend's host threads), "device-builtin" (the built-ins'
    /// fused kernels) or "device-linked" (the user's code linked with the rule
    /// kernels).
    pub evaluation: &'static str,
    /// Seconds spent compiling and linking device code (0 when none, or when
    /// a cache held it).
    pub compile_s: f64,
    /// Where linked device code came from: "compiled", "process-cache" or
    /// "disk-cache"; `None` for other evaluations.
    pub module: Option<&'static str>,
}

impl Prepared {
    /// Evaluation on the host, nothing compiled.
    pub const HOST: Prepared = Prepared {
        evaluation: "host",
        compile_s: 0.0,
        module: None,
    };
}

/// The backend steps of the two-phase and breadth-first algorithms and of the
/// tensor rules. Defaults run on the host, one item after another.
pub trait CubatureKernels: Backend {
    /// Makes `f` ready for this backend and says how it will be evaluated: the
    /// CUDA backend compiles and links an expression or user code (or finds it
    /// in its caches), so that a run's time excludes the compile. Errors when
    /// the backend cannot evaluate `f` (device code without a host function on
    /// a host backend; a compile error). Default: host evaluation.
    fn cub_prepare(&self, f: Func<'_>) -> Result<Prepared> {
        f.host()?;
        Ok(Prepared::HOST)
    }

    /// Applies `rule` to every box, its points dealt to lanes as a warp of
    /// the device deals them ([`LaneRule::apply`]: the same bits on every
    /// backend). Cost: boxes x rule.points evaluations.
    ///
    /// Every step stops with [`gpuq_core::Error::IntegrandNotFinite`] when the
    /// integrand returns NaN or an infinite value.
    fn cub_evaluate(&self, rule: &LaneRule, f: Func<'_>, boxes: &Boxes) -> Result<Vec<BoxResult>> {
        let (h, seen) = (f.host()?, NonFinite::default());
        let out = with_host!(h, &seen, g, {
            (0..boxes.len()).map(|b| rule.apply(g, boxes, b)).collect()
        });
        seen.check()?;
        Ok(out)
    }

    /// Runs the bounded-heap sequential CUHRE ([`rule::local_cuhre`], heap of
    /// [`LOCAL_HEAP`]) on every box from its known rule result `roots[b]`, with
    /// absolute tolerance `tols[b]` and at most `max_evals` evaluations each.
    /// Cost: up to boxes x max_evals evaluations.
    fn cub_local(
        &self,
        rule: &Rule,
        f: Func<'_>,
        boxes: &Boxes,
        roots: &[BoxResult],
        tols: &[f64],
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        check_local(boxes, roots, tols)?;
        let (h, seen) = (f.host()?, NonFinite::default());
        let out = with_host!(h, &seen, g, {
            (0..boxes.len())
                .map(|b| {
                    rule::local_cuhre::<_, LOCAL_HEAP>(
                        rule,
                        g,
                        boxes.center_of(b),
                        boxes.half_of(b),
                        roots[b],
                        tols[b],
                        max_evals,
                    )
                })
                .collect()
        });
        seen.check()?;
        Ok(out)
    }

    /// The backend's nominal cubature throughput for `f` in integrand
    /// evaluations per second, a class figure for the defaults that depend on the backend
    /// (the evaluation cap, [`crate::Method::Auto`]), not a measurement of
    /// the integrand at hand. Default: one host thread,
    /// [`HOST_EVALS_PER_THREAD_S`].
    fn cub_throughput(&self, f: Func<'_>) -> f64 {
        let _ = f;
        HOST_EVALS_PER_THREAD_S
    }

    /// `flag` made the same on every process of a distributed backend (true
    /// when it is true on any), so that a decision taken on a local clock
    /// (the time limit) stops every process at the same step. Default: `flag`.
    fn cub_any(&self, flag: bool) -> Result<bool> {
        Ok(flag)
    }

    /// True when the backend evaluates `f` on an accelerator (thousands of
    /// boxes in flight), false for host threads. Default: false.
    fn cub_is_device(&self, f: Func<'_>) -> bool {
        let _ = f;
        false
    }

    /// The group sums of a tensor rule: partial g is the sum, in chunk order,
    /// of the chunk sums c in g G..min((g + 1) G, chunks), chunk c being the
    /// sum of w_i f(x_i) over points c T..min((c + 1) T, total) in index
    /// order (T = `chunk_points(total)`, G = `TENSOR_GROUP`). Cost: `total`
    /// evaluations.
    fn cub_tensor(
        &self,
        f: Func<'_>,
        dim: usize,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        let chunks = total.div_ceil(chunk_points(total));
        let (h, seen) = (f.host()?, NonFinite::default());
        let out = with_host!(h, &seen, g, {
            (0..chunks.div_ceil(TENSOR_GROUP))
                .map(|q| tensor_group(g, dim, nodes, weights, total, q))
                .collect()
        });
        seen.check()?;
        Ok(out)
    }

    /// Classifies the boxes: true (bad, to refine) when a box's error exceeds
    /// `share` times its volume, or for every box when `all_bad`. Cost: O(boxes n).
    fn cub_classify(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        share: f64,
        all_bad: bool,
    ) -> Result<Vec<bool>> {
        gpuq_core::check_same_len("cubature classify", boxes.len(), results.len())?;
        Ok((0..boxes.len())
            .map(|b| all_bad || results[b].error > share * boxes.volume_of(b))
            .collect())
    }

    /// Keeps the boxes whose flag is set (compaction: the exclusive prefix sum
    /// of the flags gives each kept box its slot) and splits each into `parts`
    /// equal pieces along its axis, into `out` (its buffers reused: once they
    /// are large enough a round allocates nothing). Children of one parent are
    /// contiguous. Cost: O(kept x parts x n).
    fn cub_split(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        keep: &[bool],
        parts: u32,
        out: &mut Boxes,
    ) -> Result<()> {
        gpuq_core::check_same_len("cubature split", boxes.len(), keep.len())?;
        let n = boxes.dim;
        let slots = exclusive_scan(keep);
        let kept = slots.last().copied().unwrap_or(0) + keep.last().map_or(0, |&k| usize::from(k));
        let per = parts as usize;
        out.resize(n, kept * per);
        for b in 0..boxes.len() {
            if !keep[b] {
                continue;
            }
            for k in 0..per {
                let o = (slots[b] * per + k) * n;
                rule::child(
                    boxes.center_of(b),
                    boxes.half_of(b),
                    results[b].axis as usize,
                    parts,
                    k as u32,
                    &mut out.center[o..o + n],
                    &mut out.half[o..o + n],
                );
            }
        }
        Ok(())
    }
}

/// Nominal evaluations per second of one host thread (seed 004's f1-f5 at
/// n = 5-8 with the degree-9 rule: 2.5-3.5 x 10^6 on the development
/// machine's cores, `docs/benchmarks.md`).
pub const HOST_EVALS_PER_THREAD_S: f64 = 3.0e6;

/// Errors unless `roots` and `tols` hold one item per box.
pub fn check_local(boxes: &Boxes, roots: &[BoxResult], tols: &[f64]) -> Result<()> {
    gpuq_core::check_same_len("second phase roots", boxes.len(), roots.len())?;
    gpuq_core::check_same_len("second phase tolerances", boxes.len(), tols.len())
}

/// Exclusive prefix sum of the flags (slot of each kept item).
pub fn exclusive_scan(flags: &[bool]) -> Vec<usize> {
    let mut acc = 0;
    flags
        .iter()
        .map(|&f| {
            let s = acc;
            acc += usize::from(f);
            s
        })
        .collect()
}
