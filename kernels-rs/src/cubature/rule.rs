//! One application of a fully symmetric cubature rule to a box, with its error
//! estimate and the axis to split along, and the bounded-heap sequential CUHRE
//! the second phase of the two-phase algorithm runs per thread.
//!
//! A [`Rule`] is the data of the Berntsen-Espelid-Genz rules (DCUHRE: a basic
//! rule and four null rules over generators on [-1, 1]^n, the null rules combined
//! into an error estimate with the heuristic coefficients `errcof`) or of the
//! Genz-Malik degree-7 rule with its embedded degree-5 rule (error = |I7 - I5|).
//! The host builds it (`gpuq-cubature`'s `rules` module) and both backends apply
//! it with [`evaluate`], so a box gives the same bits on either.

use super::integrand::{Integrand, MAX_DIM};
use super::math::{abs, max};

/// Most generators of a rule (DCUHRE's degree-13 rule for n = 2 has 14).
pub const MAX_GENERATORS: usize = 14;

/// Error from four null rules and `errcof` (DCUHRE).
pub const ERROR_NULL_RULES: u32 = 0;
/// Error = |basic - embedded| with the embedded rule's weights stored as the
/// difference in null rule 1 (Genz-Malik).
pub const ERROR_EMBEDDED: u32 = 1;

/// A fully symmetric rule on [-1, 1]^n. `#[repr(C)]` without padding: uploaded
/// as bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// Dimension n.
    pub dim: u32,
    /// Generators in use.
    pub generators: u32,
    /// [`ERROR_NULL_RULES`] or [`ERROR_EMBEDDED`].
    pub error_kind: u32,
    /// Polynomial degree of the basic rule.
    pub degree: u32,
    /// Points of one application.
    pub points: u32,
    /// Explicit padding (zero).
    pub pad: u32,
    /// Generator j: non-negative, non-increasing coordinates (the rule sums over
    /// all their distinct permutations and sign changes). Generator 0 is the
    /// centre; generators 1 and 2 are single-axis ones (the fourth difference).
    pub g: [[f64; MAX_DIM]; MAX_GENERATORS],
    /// Weights: row 0 the basic rule (summing to 2^n), rows 1..=4 the null rules.
    pub w: [[f64; MAX_GENERATORS]; 5],
    /// DCUHRE's scale factors for combining successive null rules.
    pub scales: [[f64; MAX_GENERATORS]; 3],
    /// DCUHRE's normalisations of those combinations.
    pub norms: [[f64; MAX_GENERATORS]; 3],
    /// DCUHRE's heuristic error coefficients.
    pub errcof: [f64; 6],
}

/// What one rule application gives for a box.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BoxResult {
    /// Estimate of the integral over the box.
    pub estimate: f64,
    /// Error estimate (non-negative).
    pub error: f64,
    /// The axis with the largest fourth difference (the split axis).
    pub axis: u32,
}

impl BoxResult {
    /// The result of a box the rule cannot apply to (no dimensions, more than
    /// [`MAX_DIM`], or fewer half-widths than centre coordinates): a NaN
    /// estimate with an infinite error.
    pub const INVALID: BoxResult = BoxResult {
        estimate: f64::NAN,
        error: f64::INFINITY,
        axis: 0,
    };
}

/// The product of the half-widths (the volume over 2^n) and the first axis
/// of the largest one. Cost: O(n).
pub fn volume_and_widest(half: &[f64]) -> (f64, usize) {
    let mut vol = 1.0;
    let mut axis = 0usize;
    let mut widest = f64::NEG_INFINITY;
    for (i, &h) in half.iter().enumerate() {
        vol *= h;
        if h > widest {
            widest = h;
            axis = i;
        }
    }
    (vol, axis)
}

/// What the four single-axis points of one axis give: the sums of f at the
/// pair of generator 1 and at the pair of generator 2, and the axis's fourth
/// difference (0 below round-off).
pub struct AxisSums {
    /// f(c - g1 h e_i) + f(c + g1 h e_i).
    pub ab: f64,
    /// f(c - g2 h e_i) + f(c + g2 h e_i).
    pub cd: f64,
    /// |2 (1 - r) f0 - cd + r ab|, r = (g2 / g1)^2, or 0 when it is below
    /// round-off against f0.
    pub difsum: f64,
}

/// Evaluates f at the four single-axis points of axis `i` (generators 1 and
/// 2) of the box whose centre is `x[..n]` (restored on return) and
/// half-widths `half`; `f0` is f at the centre. Cost: 4 evaluations.
#[inline]
pub fn axis_sums<F: Integrand + ?Sized>(
    rule: &Rule,
    f: &F,
    x: &mut [f64; MAX_DIM],
    n: usize,
    half: &[f64],
    i: usize,
    f0: f64,
) -> AxisSums {
    let (n, i) = (n.min(MAX_DIM), i & (MAX_DIM - 1));
    let h = half.get(i).copied().unwrap_or(0.0);
    let g2 = rule.g[1][0];
    let g3 = rule.g[2][0];
    let ratio = (g3 / g2) * (g3 / g2);
    let c = x[i];
    x[i] = c - h * g2;
    let fa = f.eval(&x[..n]);
    x[i] = c + h * g2;
    let fb = f.eval(&x[..n]);
    x[i] = c - h * g3;
    let fc = f.eval(&x[..n]);
    x[i] = c + h * g3;
    let fd = f.eval(&x[..n]);
    x[i] = c;
    let frth = 2.0 * (1.0 - ratio) * f0 - (fc + fd) + ratio * (fa + fb);
    AxisSums {
        ab: fa + fb,
        cd: fc + fd,
        difsum: if f0 + frth / 4.0 != f0 {
            abs(frth)
        } else {
            0.0
        },
    }
}

/// Previous permutation in lexicographic order of `a[..n]` (n <= MAX_DIM); false
/// after the smallest one (then left ascending). Indices are masked with
/// `MAX_DIM - 1` (a power of two), which changes nothing for n <= MAX_DIM and
/// lets the compiler drop the bounds checks the device cannot afford.
#[inline(always)]
pub fn prev_permutation(a: &mut [f64; MAX_DIM], n: usize) -> bool {
    const M: usize = MAX_DIM - 1;
    if n < 2 {
        return false;
    }
    let mut i = n - 1;
    while i > 0 && a[(i - 1) & M] <= a[i & M] {
        i -= 1;
    }
    if i == 0 {
        return false;
    }
    let mut j = n - 1;
    while j > i - 1 && a[j & M] >= a[(i - 1) & M] {
        j -= 1;
    }
    a.swap((i - 1) & M, j & M);
    let (mut lo, mut hi) = (i, n - 1);
    while lo < hi {
        a.swap(lo & M, hi & M);
        lo += 1;
        hi -= 1;
    }
    true
}

/// Sum of f over all distinct permutations and sign changes of generator `g`
/// (non-increasing) around `center` scaled by `half`. Points: (distinct
/// permutations) x 2^(nonzero coordinates).
#[inline]
pub fn symmetric_sum<F: Integrand + ?Sized>(f: &F, g: &[f64], center: &[f64], half: &[f64]) -> f64 {
    let n = center.len();
    if n > MAX_DIM || g.len() < n || half.len() < n {
        return f64::NAN;
    }
    let mut p = [0.0f64; MAX_DIM];
    p[..n].copy_from_slice(&g[..n]);
    let mut x = [0.0f64; MAX_DIM];
    let mut sum = 0.0;
    loop {
        let mut nonzero = 0u32;
        for &v in &p[..n] {
            if v != 0.0 {
                nonzero += 1;
            }
        }
        for mask in 0u64..(1u64 << nonzero) {
            let mut bit = 0;
            for i in 0..n {
                let mut d = p[i];
                if d != 0.0 {
                    if (mask >> bit) & 1 == 1 {
                        d = -d;
                    }
                    bit += 1;
                }
                x[i] = center[i] + d * half[i];
            }
            sum += f.eval(&x[..n]);
        }
        if !prev_permutation(&mut p, n) {
            break;
        }
    }
    sum
}

/// Applies `rule` to the box `center +- half`: the estimate, its error and the
/// split axis. Cost: `rule.points` evaluations of f plus O(points n) flops.
pub fn evaluate<F: Integrand + ?Sized>(
    rule: &Rule,
    f: &F,
    center: &[f64],
    half: &[f64],
) -> BoxResult {
    let n = center.len();
    if n == 0 || n > MAX_DIM || half.len() < n {
        return BoxResult::INVALID;
    }
    let half = &half[..n];
    let gens = (rule.generators as usize).min(MAX_GENERATORS);
    let w = &rule.w;
    let mut x = [0.0f64; MAX_DIM];
    x[..n].copy_from_slice(center);
    let (vol, mut axis) = volume_and_widest(half);
    let f0 = f.eval(&x[..n]);
    let mut basic = w[0][0] * f0;
    let mut null = [w[1][0] * f0, w[2][0] * f0, w[3][0] * f0, w[4][0] * f0];
    let mut difmax = 0.0;
    for i in 0..n {
        let AxisSums { ab, cd, difsum } = axis_sums(rule, f, &mut x, n, half, i, f0);
        for (k, nk) in null.iter_mut().enumerate() {
            *nk += w[k + 1][1] * ab + w[k + 1][2] * cd;
        }
        basic += w[0][1] * ab + w[0][2] * cd;
        if difsum > difmax {
            difmax = difsum;
            axis = i;
        }
    }
    // A range (not an iterator chain) keeps j < MAX_GENERATORS provable, so the
    // device code has no bounds-check panic path.
    #[allow(clippy::needless_range_loop)]
    for j in 3..gens {
        let s = symmetric_sum(f, &rule.g[j][..n], center, half);
        basic += w[0][j] * s;
        for (k, nk) in null.iter_mut().enumerate() {
            *nk += w[k + 1][j] * s;
        }
    }
    let error = error_of(rule, &null);
    BoxResult {
        estimate: vol * basic,
        error: vol * error,
        axis: axis as u32,
    }
}

/// The error estimate of a box (before its volume factor) from its four null
/// rule sums: |null 1| for an embedded rule (Genz-Malik), else DCUHRE's
/// combination of successive null rules with `scales`, `norms` and `errcof`.
/// Cost: O(generators).
pub fn error_of(rule: &Rule, null: &[f64; 4]) -> f64 {
    let gens = (rule.generators as usize).min(MAX_GENERATORS);
    if rule.error_kind == ERROR_EMBEDDED {
        return abs(null[0]);
    }
    let mut e = [0.0f64; 3];
    for i in 0..3 {
        let mut search = 0.0;
        for k in 0..gens {
            search = max(
                search,
                abs(null[i + 1] + rule.scales[i][k] * null[i]) * rule.norms[i][k],
            );
        }
        e[i] = search;
    }
    let c = &rule.errcof;
    if c[0] * e[0] <= e[1] && c[1] * e[1] <= e[2] {
        c[2] * e[0]
    } else {
        c[3] * max(e[0], max(e[1], e[2]))
    }
}

/// DCUHRE's consistency check after a box was split: `parent` is the parent's
/// estimate and `children` its children's (estimate, error); every child's error
/// grows by `errcof[4] est1 / est2` relatively and `errcof[5] est1` absolutely,
/// est1 = |parent - sum of the children|, est2 = sum of their errors.
pub fn adjust_children(errcof: &[f64; 6], parent: f64, children: &mut [BoxResult]) {
    let mut sum = 0.0;
    let mut est2 = 0.0;
    for c in children.iter() {
        sum += c.estimate;
        est2 += c.error;
    }
    let est1 = abs(parent - sum);
    for c in children.iter_mut() {
        if est2 > 0.0 {
            c.error *= 1.0 + errcof[4] * est1 / est2;
        }
        c.error += errcof[5] * est1;
    }
}

/// Child `k` of `parts` equal pieces of the box (`center`, `half`) along `axis`,
/// written into `c`, `h` (which start as copies of the parent).
#[inline]
pub fn child(
    center: &[f64],
    half: &[f64],
    axis: usize,
    parts: u32,
    k: u32,
    c: &mut [f64],
    h: &mut [f64],
) {
    let n = center.len();
    if axis >= n || half.len() < n || c.len() < n || h.len() < n {
        return;
    }
    c[..n].copy_from_slice(center);
    h[..n].copy_from_slice(&half[..n]);
    let width = 2.0 * half[axis] / parts as f64;
    let lo = center[axis] - half[axis];
    h[axis] = 0.5 * width;
    c[axis] = lo + (k as f64 + 0.5) * width;
}

/// A region with nothing in it (what an empty heap gives back).
const EMPTY: Region = Region {
    center: [0.0; MAX_DIM],
    half: [0.0; MAX_DIM],
    r: BoxResult {
        estimate: 0.0,
        error: 0.0,
        axis: 0,
    },
};

/// One region of a thread's heap.
#[derive(Clone, Copy)]
struct Region {
    center: [f64; MAX_DIM],
    half: [f64; MAX_DIM],
    r: BoxResult,
}

/// Capacity (regions) of the heap the second phase gives each thread on both
/// backends.
pub const LOCAL_HEAP: usize = 32;

/// What [`local_cuhre`] gives back. `#[repr(C)]`, 32 bytes without padding (the
/// device writes it as four 8-byte words).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LocalOutcome {
    /// Sum of the final regions' estimates (in heap order).
    pub estimate: f64,
    /// Sum of their errors.
    pub error: f64,
    /// Integrand evaluations made (the splits' rule applications; the root's
    /// result was given).
    pub evaluations: u64,
    /// Regions at the end.
    pub regions: u32,
    /// [`LOCAL_CONVERGED`] when the error met `tol`, [`LOCAL_OUT_OF_EVALS`]
    /// when the evaluation budget stopped it first, [`LOCAL_HEAP_FULL`] when
    /// the heap was full and retiring more regions would have made `tol`
    /// unreachable.
    pub converged: u32,
}

/// [`LocalOutcome::converged`]: the error met the tolerance.
pub const LOCAL_CONVERGED: u32 = 1;
/// [`LocalOutcome::converged`]: the evaluation budget ran out first.
pub const LOCAL_OUT_OF_EVALS: u32 = 0;
/// [`LocalOutcome::converged`]: the heap was full and the regions it could
/// retire held too much error.
pub const LOCAL_HEAP_FULL: u32 = 2;

/// Sequential CUHRE over one box whose rule result `root` is known (the first
/// phase computed it, with the parent-children consistency check applied), with a
/// heap of at most `CAP` regions: splits the region of largest error in two
/// along its axis until the summed error is at most `tol` or `max_evals` would
/// be passed. When the heap is full, the region of smallest error leaves it for
/// good (its estimate and error stay in the sums) while the retired errors stay
/// within half of `tol`; past that the run stops with [`LOCAL_HEAP_FULL`]
/// instead of spending its budget on a tolerance it can no longer meet. A box
/// whose root already meets `tol` costs nothing. Both backends run this routine
/// per box in the second phase. Cost: (regions made - 1) x `rule.points`
/// evaluations; memory CAP x (16 MAX_DIM + 24) bytes.
pub fn local_cuhre<F: Integrand + ?Sized, const CAP: usize>(
    rule: &Rule,
    f: &F,
    center: &[f64],
    half: &[f64],
    root: BoxResult,
    tol: f64,
    max_evals: u64,
) -> LocalOutcome {
    let n = center.len();
    if n == 0 || n > MAX_DIM || half.len() < n {
        return LocalOutcome::default();
    }
    let pts = rule.points as u64;
    let empty = EMPTY;
    let mut heap = [empty; CAP];
    let mut len = 0usize;
    let mut first = empty;
    first.center[..n].copy_from_slice(center);
    first.half[..n].copy_from_slice(half);
    first.r = root;
    let mut evals = 0u64;
    let mut err = root.error;
    push(&mut heap, &mut len, first);
    // Regions retired from a full heap: their sums, in retirement order.
    let mut retired_est = 0.0;
    let mut retired_err = 0.0;
    let mut retired = 0u32;
    let mut full = false;
    while err > tol && evals + 2 * pts <= max_evals && CAP >= 2 {
        if len == CAP {
            if retired_err + smallest_error(&heap, len) > 0.5 * tol {
                full = true;
                break;
            }
            let out = remove_smallest(&mut heap, &mut len);
            retired_est += out.r.estimate;
            retired_err += out.r.error;
            retired += 1;
        }
        let top = pop(&mut heap, &mut len);
        let axis = top.r.axis as usize;
        let mut kids = [empty; 2];
        let mut res = [BoxResult::default(); 2];
        for k in 0..2 {
            child(
                &top.center[..n],
                &top.half[..n],
                axis,
                2,
                k as u32,
                &mut kids[k].center,
                &mut kids[k].half,
            );
            res[k] = evaluate(rule, f, &kids[k].center[..n], &kids[k].half[..n]);
        }
        evals += 2 * pts;
        adjust_children(&rule.errcof, top.r.estimate, &mut res);
        err += res[0].error + res[1].error - top.r.error;
        for k in 0..2 {
            kids[k].r = res[k];
            push(&mut heap, &mut len, kids[k]);
        }
    }
    // Exact sums in heap order (the running sum drifts by round-off).
    let mut e = retired_err;
    let mut s = retired_est;
    for r in heap.iter().take(len) {
        s += r.r.estimate;
        e += r.r.error;
    }
    LocalOutcome {
        estimate: s,
        error: e,
        evaluations: evals,
        regions: len as u32 + retired,
        converged: if e <= tol {
            LOCAL_CONVERGED
        } else if full {
            LOCAL_HEAP_FULL
        } else {
            LOCAL_OUT_OF_EVALS
        },
    }
}

/// The smallest error of the heap's regions (found among its leaves).
fn smallest_error<const CAP: usize>(heap: &[Region; CAP], len: usize) -> f64 {
    let mut m = f64::INFINITY;
    for r in heap.iter().take(len.min(CAP)).skip(len / 2) {
        if r.r.error < m {
            m = r.r.error;
        }
    }
    m
}

/// Removes the region of smallest error (a leaf of the max-heap).
fn remove_smallest<const CAP: usize>(heap: &mut [Region; CAP], len: &mut usize) -> Region {
    if *len == 0 || *len > CAP {
        return EMPTY;
    }
    let mut m = *len / 2;
    for i in *len / 2..*len {
        if heap[i].r.error < heap[m].r.error {
            m = i;
        }
    }
    let out = heap[m];
    *len -= 1;
    if m < *len {
        // Move the last region into the leaf slot and let it rise.
        let last = heap[*len];
        let mut i = m;
        while i > 0 {
            let parent = (i - 1) / 2;
            if heap[parent].r.error >= last.r.error {
                break;
            }
            heap[i] = heap[parent];
            i = parent;
        }
        heap[i] = last;
    }
    out
}

fn push<const CAP: usize>(heap: &mut [Region; CAP], len: &mut usize, r: Region) {
    if *len >= CAP {
        return;
    }
    let mut i = *len;
    *len += 1;
    while i > 0 {
        let parent = (i - 1) / 2;
        if heap[parent].r.error >= r.r.error {
            break;
        }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = r;
}

fn pop<const CAP: usize>(heap: &mut [Region; CAP], len: &mut usize) -> Region {
    if *len == 0 || *len > CAP {
        return EMPTY;
    }
    let top = heap[0];
    *len -= 1;
    let last = heap[*len];
    let mut i = 0;
    loop {
        let mut c = 2 * i + 1;
        if c >= *len || c >= CAP {
            break;
        }
        if c + 1 < *len && c + 1 < CAP && heap[c + 1].r.error > heap[c].r.error {
            c += 1;
        }
        let Some(&larger) = heap.get(c) else {
            break;
        };
        if last.r.error >= larger.r.error {
            break;
        }
        heap[i] = larger;
        i = c;
    }
    if *len > 0 {
        heap[i] = last;
    }
    top
}
