//! Cubature kernels: one warp per box applies a rule
//! ([`crate::cubature::lanes`]), or one thread per box runs the second phase's bounded-heap
//! CUHRE ([`crate::cubature::rule::local_cuhre`]) on it; one thread per chunk of
//! a tensor Gauss rule sums its points in index order. The integrand is a
//! [`Builtin`] (kind id + parameters) read once per thread; the rule is read
//! from global memory. All per-item arithmetic is the shared code, so a box
//! gives the same bits as on the CPU.

use super::prelude::{global_id, grid_threads, lane, shfl_down_b32, DeviceScalar};
#[cfg(not(feature = "user-integrand"))]
use crate::cubature::integrand::Builtin;
use crate::cubature::integrand::Integrand;
use crate::cubature::lanes::{combine, finish, lane_sums, LaneSums, RulePoint, LANES};
use crate::cubature::rule::{local_cuhre, BoxResult, LocalOutcome, Rule, LOCAL_HEAP};
#[cfg(not(feature = "user-integrand"))]
use crate::cubature::tensor::TENSOR_GROUP;
use crate::cubature::tensor::{chunk_points, tensor_chunk};
use core::slice::from_raw_parts;

/// out[3 b..3 b + 3] = (estimate, error, axis) of box b, for b < boxes; box b is
/// center[b n..] +- half[b n..], n = rule.dim. One warp per box (grid-stride
/// over boxes by warps): lane l takes the centre (l = 0), axis l's four
/// single-axis points (l < n) or four of the table's head (l >= n), then
/// every 32nd table point ([`lane_sums`]); the lanes' sums meet in a shuffle tree ([`crate::cubature::lanes`], the order the CPU
/// follows) and lane 0 writes the result.
#[cfg(not(feature = "user-integrand"))]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn cub_evaluate(
    rule: *const Rule,
    f: *const Builtin,
    table: *const RulePoint,
    points: usize,
    boxes: usize,
    center: *const f64,
    half: *const f64,
    out: *mut f64,
) {
    let f = *f;
    evaluate(&*rule, &f, table, points, boxes, center, half, out);
}

/// The body of `cub_evaluate` for any integrand (the user integrands' kernel
/// `cubu_evaluate` runs it too).
///
/// # Safety
/// As `cub_evaluate`'s caller: the table holds `points` entries, centre and
/// half-width arrays `boxes x rule.dim` values, `out` 3 x boxes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn evaluate<F: Integrand>(
    rule: &Rule,
    f: &F,
    table: *const RulePoint,
    points: usize,
    boxes: usize,
    center: *const f64,
    half: *const f64,
    out: *mut f64,
) {
    let n = rule.dim as usize;
    let table = from_raw_parts(table, points);
    let l = lane() as usize;
    let warps = grid_threads() / LANES;
    let mut b = global_id() / LANES;
    while b < boxes {
        let c = from_raw_parts(center.add(b * n), n);
        let h = from_raw_parts(half.add(b * n), n);
        let f0 = f.eval(c);
        let mut s = lane_sums(rule, table, f, c, h, l, f0);
        let mut d = LANES as u32 / 2;
        while d > 0 {
            s = combine(s, shfl_down_sums(s, d));
            d /= 2;
        }
        if l == 0 {
            let r = finish(rule, &s, h);
            *out.add(3 * b) = r.estimate;
            *out.add(3 * b + 1) = r.error;
            *out.add(3 * b + 2) = r.axis as f64;
        }
        b += warps;
    }
}

/// Lane `lane + d`'s sums (see [`shfl_down_b32`]); every lane must call it.
#[inline(always)]
fn shfl_down_sums(s: LaneSums, d: u32) -> LaneSums {
    let mut rules = [0.0f64; 5];
    for k in 0..5 {
        rules[k] = s.rules[k].shfl_down(d);
    }
    LaneSums {
        rules,
        difsum: s.difsum.shfl_down(d),
        axis: shfl_down_b32(s.axis, d),
    }
}

/// out[b] = bounded-heap CUHRE on box b, whose rule result is
/// roots[3 b..3 b + 3] = (estimate, error, axis), with absolute tolerance
/// tols[b] and at most `max_evals` evaluations.
#[cfg(not(feature = "user-integrand"))]
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn cub_local(
    rule: *const Rule,
    f: *const Builtin,
    boxes: usize,
    center: *const f64,
    half: *const f64,
    roots: *const f64,
    tols: *const f64,
    max_evals: u64,
    out: *mut LocalOutcome,
) {
    let f = *f;
    local(&*rule, &f, boxes, center, half, roots, tols, max_evals, out);
}

/// The body of `cub_local` for any integrand.
///
/// # Safety
/// As `cub_evaluate`'s; `roots` holds 3 x boxes values, `tols` and `out`
/// `boxes` items.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn local<F: Integrand>(
    rule: &Rule,
    f: &F,
    boxes: usize,
    center: *const f64,
    half: *const f64,
    roots: *const f64,
    tols: *const f64,
    max_evals: u64,
    out: *mut LocalOutcome,
) {
    let n = rule.dim as usize;
    let mut b = global_id();
    while b < boxes {
        let c = from_raw_parts(center.add(b * n), n);
        let h = from_raw_parts(half.add(b * n), n);
        let root = BoxResult {
            estimate: *roots.add(3 * b),
            error: *roots.add(3 * b + 1),
            axis: *roots.add(3 * b + 2) as u32,
        };
        *out.add(b) = local_cuhre::<_, LOCAL_HEAP>(rule, f, c, h, root, *tols.add(b), max_evals);
        b += grid_threads();
    }
}

/// partials[c] = sum of w_i f(x_i) over points c T..min((c + 1) T, total) of the
/// tensor rule (na = nodes per axis, dim = f.dim), T = `chunk_points(total)`; one
/// thread per chunk, grid-stride. `cub_tensor_groups` then adds them by groups.
#[cfg(not(feature = "user-integrand"))]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn cub_tensor(
    f: *const Builtin,
    nodes: *const f64,
    weights: *const f64,
    na: usize,
    total: u64,
    partials: *mut f64,
) {
    let f = *f;
    tensor(&f, f.dim as usize, nodes, weights, na, total, partials);
}

/// The body of `cub_tensor` for any integrand of `dim` axes.
///
/// # Safety
/// nodes and weights hold na values, partials one value per chunk.
#[inline(always)]
pub(super) unsafe fn tensor<F: Integrand>(
    f: &F,
    dim: usize,
    nodes: *const f64,
    weights: *const f64,
    na: usize,
    total: u64,
    partials: *mut f64,
) {
    let x = from_raw_parts(nodes, na);
    let w = from_raw_parts(weights, na);
    let t = chunk_points(total);
    let chunks = total.div_ceil(t);
    let mut c = global_id() as u64;
    while c < chunks {
        let first = c * t;
        let end = if first + t < total { first + t } else { total };
        *partials.add(c as usize) = tensor_chunk(f, dim, x, w, first, end);
        c += grid_threads() as u64;
    }
}

/// groups[q] = the chunk sums partials[q G..min((q + 1) G, chunks)] added in
/// order (the order of `group_sum`, G = `TENSOR_GROUP`): one thread per
/// group, grid-stride, eight loads in flight before eight ordered adds.
#[cfg(not(feature = "user-integrand"))]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn cub_tensor_groups(
    chunks: u64,
    partials: *const f64,
    groups: *mut f64,
) {
    let count = chunks.div_ceil(TENSOR_GROUP);
    let mut q = global_id() as u64;
    while q < count {
        let first = q * TENSOR_GROUP;
        let end = if first + TENSOR_GROUP < chunks {
            first + TENSOR_GROUP
        } else {
            chunks
        };
        let mut s = 0.0;
        let mut c = first;
        while c + 8 <= end {
            let p = partials.add(c as usize);
            let v = [
                *p,
                *p.add(1),
                *p.add(2),
                *p.add(3),
                *p.add(4),
                *p.add(5),
                *p.add(6),
                *p.add(7),
            ];
            s = s + v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
            c += 8;
        }
        while c < end {
            s += *partials.add(c as usize);
            c += 1;
        }
        *groups.add(q as usize) = s;
        q += grid_threads() as u64;
    }
}
