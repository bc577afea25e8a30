//! The steps of the parallel algorithms a backend runs, as one trait with
//! host-fallback default bodies: a new backend runs every method at once, and
//! the CPU (Rayon, `cpu.rs`) and CUDA (`cuda.rs`) backends override the
//! expensive ones.

use crate::func::{ClosureIntegrand, Func};
use crate::rules::LaneRule;
use gpuq_core::{Backend, Result};
use gpuq_kernels::cubature::rule::{self, BoxResult, LocalOutcome, Rule};
use gpuq_kernels::cubature::tensor::{tensor_group, TENSOR_CHUNK, TENSOR_GROUP};

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

/// Runs `$body` with `$g` bound to the integrand of `$f` as a concrete
/// `Integrand` (monomorphised per kind of `Func`).
macro_rules! with_integrand {
    ($f:expr, $g:ident, $body:expr) => {
        match $f {
            Func::Builtin(b) => {
                let $g = &b;
                $body
            }
            Func::Closure(c) => {
                let $g = &ClosureIntegrand(c);
                $body
            }
        }
    };
}
pub(crate) use with_integrand;

/// The backend steps of the two-phase and breadth-first algorithms and of the
/// tensor rules. Defaults run on the host, one item after another.
pub trait CubatureKernels: Backend {
    /// Applies `rule` to every box, its points dealt to lanes as a warp of
    /// the device deals them ([`LaneRule::apply`]: the same bits on every
    /// backend). Cost: boxes x rule.points evaluations.
    fn cub_evaluate(&self, rule: &LaneRule, f: Func<'_>, boxes: &Boxes) -> Result<Vec<BoxResult>> {
        Ok(with_integrand!(f, g, {
            (0..boxes.len()).map(|b| rule.apply(g, boxes, b)).collect()
        }))
    }

    /// Runs the bounded-heap sequential CUHRE ([`rule::local_cuhre`], heap of
    /// [`LOCAL_HEAP`]) on every box with absolute tolerance `tol` and at most
    /// `max_evals` evaluations each. Cost: up to boxes x max_evals evaluations.
    fn cub_local(
        &self,
        rule: &Rule,
        f: Func<'_>,
        boxes: &Boxes,
        tol: f64,
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        Ok(with_integrand!(f, g, {
            (0..boxes.len())
                .map(|b| {
                    rule::local_cuhre::<_, LOCAL_HEAP>(
                        rule,
                        g,
                        boxes.center_of(b),
                        boxes.half_of(b),
                        tol,
                        max_evals,
                    )
                })
                .collect()
        }))
    }

    /// The group sums of a tensor rule: partial g is the sum, in chunk order,
    /// of the chunk sums c in g G..min((g + 1) G, chunks), chunk c being the
    /// sum of w_i f(x_i) over points c T..min((c + 1) T, total) in index
    /// order (T = `TENSOR_CHUNK`, G = `TENSOR_GROUP`). Cost: `total`
    /// evaluations.
    fn cub_tensor(
        &self,
        f: Func<'_>,
        dim: usize,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        let chunks = total.div_ceil(TENSOR_CHUNK);
        Ok(with_integrand!(f, g, {
            (0..chunks.div_ceil(TENSOR_GROUP))
                .map(|q| tensor_group(g, dim, nodes, weights, total, q))
                .collect()
        }))
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
