//! One rule application to a box with its points dealt to [`LANES`] lanes: the
//! batch evaluation of the parallel algorithms. On the device a warp takes a
//! box (its points dealt evenly to the 32 lanes; the lanes' sums meet in a
//! shuffle tree); the CPU runs the same lanes one after another and adds them
//! in the same tree, so a box gives the same bits on both backends.
//!
//! The points other than the centre and the single-axis ones are listed once
//! per rule in a table of [`RulePoint`]s ([`table_points`]), so a lane finds
//! its points without walking the permutations of the generators. Lane i < n
//! also evaluates the four single-axis points of axis i and their fourth
//! difference (the split axis is the largest difference's).

use super::integrand::{Integrand, MAX_DIM};
use super::rule::{
    axis_sums, error_of, prev_permutation, volume_and_widest, AxisSums, BoxResult, Rule,
    MAX_GENERATORS,
};

/// Lanes one box's points are dealt to (a warp).
pub const LANES: usize = 32;

/// One point of a fully symmetric rule on [-1, 1]^n: axis i's coordinate is
/// `g[gen][k - 1]`, k the 4-bit code `(values >> 4 i) & 15` (0: the coordinate
/// is zero), negated when bit i of `signs` is set. `#[repr(C)]`, 16 bytes
/// without padding (uploaded as bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RulePoint {
    /// Per-axis codes, four bits each.
    pub values: u64,
    /// Per-axis signs (bit i set: axis i negative).
    pub signs: u32,
    /// The generator the point belongs to (its weights `w[..][gen]`).
    pub gen: u32,
}

/// What one lane adds up for a box: the basic rule and the four null rules,
/// and its axis's fourth difference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneSums {
    /// Weighted sums: row 0 the basic rule, rows 1..=4 the null rules.
    pub rules: [f64; 5],
    /// The lane's axis's fourth difference (0 when none or below round-off).
    pub difsum: f64,
    /// That axis (`u32::MAX` for a lane without one).
    pub axis: u32,
}

impl Default for LaneSums {
    fn default() -> Self {
        LaneSums {
            rules: [0.0; 5],
            difsum: 0.0,
            axis: u32::MAX,
        }
    }
}

/// Calls `emit` for every point of the generators 3.. of `rule` (those after
/// the centre and the two single-axis generators), each generator's distinct
/// permutations in decreasing lexicographic order, each with its sign changes
/// in binary order. False, after emitting nothing, when a generator has a
/// nonzero coordinate past the 15th distinct position (no rule of
/// `gpuq-cubature` has). Cost: O(points n).
pub fn table_points(rule: &Rule, mut emit: impl FnMut(RulePoint)) -> bool {
    let n = rule.dim as usize;
    let gens = (rule.generators as usize).min(MAX_GENERATORS);
    if n == 0 || n > MAX_DIM {
        return false;
    }
    for g in rule.g.iter().take(gens).skip(3) {
        for &v in &g[..n] {
            if v != 0.0 && first_index(g, v) >= 15 {
                return false;
            }
        }
    }
    for (j, g) in rule.g.iter().enumerate().take(gens).skip(3) {
        let mut p = [0.0f64; MAX_DIM];
        p[..n].copy_from_slice(&g[..n]);
        loop {
            let mut values = 0u64;
            let mut nonzero = [0usize; MAX_DIM];
            let mut count = 0usize;
            for i in 0..n {
                if p[i] != 0.0 {
                    values |= ((first_index(g, p[i]) + 1) as u64) << (4 * i);
                    nonzero[count] = i;
                    count += 1;
                }
            }
            for mask in 0u64..(1u64 << count) {
                let mut signs = 0u32;
                for (bit, &i) in nonzero[..count].iter().enumerate() {
                    if (mask >> bit) & 1 == 1 {
                        signs |= 1 << i;
                    }
                }
                emit(RulePoint {
                    values,
                    signs,
                    gen: j as u32,
                });
            }
            if !prev_permutation(&mut p, n) {
                break;
            }
        }
    }
    true
}

/// Position of the first coordinate of `g` equal to `v`.
fn first_index(g: &[f64; MAX_DIM], v: f64) -> usize {
    g.iter().position(|&e| e == v).unwrap_or(MAX_DIM)
}

/// The sums of lane `lane` for the box `center +- half` (n = `center.len()`):
/// the centre value `f0` on lane 0, the four single-axis points of axis `lane`
/// on lanes below n; lanes at or past n instead take four points each of the
/// table's first 4 (LANES - n) (points `lane - n`, `lane - n + LANES - n`,
/// ...); then every lane takes points `4 (LANES - n) + lane`, `+ LANES`, ...
/// Cost: about `(table.len() + 4 n) / LANES` evaluations of f.
pub fn lane_sums<F: Integrand + ?Sized>(
    rule: &Rule,
    table: &[RulePoint],
    f: &F,
    center: &[f64],
    half: &[f64],
    lane: usize,
    f0: f64,
) -> LaneSums {
    let n = center.len();
    let mut out = LaneSums::default();
    if n == 0 || n > MAX_DIM || half.len() < n {
        return out;
    }
    let w = &rule.w;
    let s = &mut out.rules;
    if lane == 0 {
        for k in 0..5 {
            s[k] = w[k][0] * f0;
        }
    }
    let mut x = [0.0f64; MAX_DIM];
    x[..n].copy_from_slice(center);
    if lane < n {
        let AxisSums { ab, cd, difsum } = axis_sums(rule, f, &mut x, n, half, lane, f0);
        out.difsum = difsum;
        out.axis = lane as u32;
        for k in 0..5 {
            s[k] += w[k][1] * ab + w[k][2] * cd;
        }
    }
    // Lanes at or past n take four points each of the table's head first, as
    // lanes below n took their axis's four; then the rest goes round robin.
    let head = 4 * (LANES - n);
    let mut add = |p: usize| {
        let Some(&pt) = table.get(p) else {
            return;
        };
        let j = pt.gen as usize;
        if j < MAX_GENERATORS {
            let g = &rule.g[j];
            for (i, (xi, (&c, &h))) in x.iter_mut().zip(center.iter().zip(half)).enumerate() {
                let code = ((pt.values >> (4 * i)) & 15) as usize;
                let mut d = if code == 0 { 0.0 } else { g[(code - 1) & 15] };
                if (pt.signs >> i) & 1 == 1 {
                    d = -d;
                }
                *xi = c + d * h;
            }
            let v = f.eval(&x[..n]);
            for k in 0..5 {
                s[k] += w[k][j] * v;
            }
        }
    };
    if lane >= n {
        let mut p = lane - n;
        while p < head && p < table.len() {
            add(p);
            p += LANES - n;
        }
    }
    let mut p = head + lane;
    while p < table.len() {
        add(p);
        p += LANES;
    }
    out
}

/// Lane `a`'s sums plus lane `b`'s (in that order), keeping the larger fourth
/// difference (ties to the lower axis): one step of the lanes' tree.
#[inline(always)]
pub fn combine(a: LaneSums, b: LaneSums) -> LaneSums {
    let mut rules = [0.0f64; 5];
    for k in 0..5 {
        rules[k] = a.rules[k] + b.rules[k];
    }
    let take_b = b.difsum > a.difsum || (b.difsum == a.difsum && b.axis < a.axis);
    LaneSums {
        rules,
        difsum: if take_b { b.difsum } else { a.difsum },
        axis: if take_b { b.axis } else { a.axis },
    }
}

/// The box's result from the sums of all its lanes: the estimate and error
/// scaled by the volume of `half`, the split axis the largest fourth
/// difference's (the widest axis when every difference is zero).
pub fn finish(rule: &Rule, s: &LaneSums, half: &[f64]) -> BoxResult {
    let (vol, widest_axis) = volume_and_widest(half);
    let null = [s.rules[1], s.rules[2], s.rules[3], s.rules[4]];
    BoxResult {
        estimate: vol * s.rules[0],
        error: vol * error_of(rule, &null),
        axis: if s.difsum > 0.0 {
            s.axis
        } else {
            widest_axis as u32
        },
    }
}

/// Applies `rule` (its table points `table`) to the box `center +- half` as
/// the device's warp does: the [`LANES`] lanes' sums one after another, added
/// in the shuffle tree (lane l takes lane l + d's for d = 16, 8, 4, 2, 1).
/// Cost: `rule.points` evaluations of f plus O(points n).
pub fn evaluate_lanes<F: Integrand + ?Sized>(
    rule: &Rule,
    table: &[RulePoint],
    f: &F,
    center: &[f64],
    half: &[f64],
) -> BoxResult {
    let n = center.len();
    if n == 0 || n > MAX_DIM || half.len() < n {
        return BoxResult::INVALID;
    }
    let f0 = f.eval(center);
    let mut lanes = [LaneSums::default(); LANES];
    for (l, s) in lanes.iter_mut().enumerate() {
        *s = lane_sums(rule, table, f, center, half, l, f0);
    }
    let mut d = LANES / 2;
    while d > 0 {
        for l in 0..d {
            lanes[l] = combine(lanes[l], lanes[l + d]);
        }
        d /= 2;
    }
    finish(rule, &lanes[0], &half[..n])
}
