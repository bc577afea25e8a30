//! One Monte Carlo history of the Neumann-Ulam methods, shared by both backends.
//!
//! The system is x = H x + b^ (H = I - D^-1 A, b^ = D^-1 b), solved through its
//! Neumann series x = sum_m H^m b^ when rho(H) < 1. A history is a random walk on
//! the indices: from state s it moves to j with probability P_sj (the row of |H|,
//! or of |H^T| for the adjoint method, normalised) and multiplies its weight by
//! W_sj = H_sj / P_sj, so that the expected weighted sum of what it tallies is the
//! series. The walk data of one row is a run of entries with their cumulative
//! probability, weight, value and column ([`Rows`]); the next entry is found by
//! binary search on the cumulative probabilities ([`choose`]).
//!
//! Both backends call these functions per history, with the history's random
//! numbers from [`crate::chacha::Stream`], so a seed fixes every walk on every
//! backend; only the order in which the tallies are summed differs.

use crate::chacha::Stream;

/// One entry of the walk data in the array-of-records layout: 32 bytes, so one
/// sector of memory holds everything a step reads about its entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Record {
    /// The entry of the iteration matrix (H_sj; H_js for the adjoint walk).
    pub h: f64,
    /// Cumulative transition probability up to and including this entry.
    pub cdf: f64,
    /// The weight factor W = h / P of a move through this entry.
    pub w: f64,
    /// The state the move goes to.
    pub col: u32,
    /// Padding to 32 bytes.
    pub pad: u32,
}

/// Read access to walk data, whatever its layout or memory.
pub trait Rows {
    /// The entries of row `s`: `start..end` (empty for a row with no way out).
    fn row(&self, s: usize) -> (usize, usize);
    /// The cumulative probability of entry `k`.
    fn cdf(&self, k: usize) -> f64;
    /// Entry `k`'s target state and weight factor.
    fn step(&self, k: usize) -> (usize, f64);
    /// Entry `k`'s target state and matrix value (expected-value tallies).
    fn value(&self, k: usize) -> (usize, f64);
}

/// The first entry k of `start..end` with `cdf(k) >= u` (the last entry when
/// rounding left every cumulative value below `u`). `end > start` is required.
/// Cost: ceil(log2(end - start)) cumulative reads.
#[inline(always)]
pub fn choose<R: Rows + ?Sized>(rows: &R, start: usize, end: usize, u: f64) -> usize {
    let (mut lo, mut hi) = (start, end - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if rows.cdf(mid) < u {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// When a history stops: after `max_steps` moves, or once its weight has fallen
/// below `cutoff` times its starting weight (0 disables the cutoff).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Stop {
    /// Most moves a history makes.
    pub max_steps: u32,
    /// Relative weight cutoff.
    pub cutoff: f64,
}

/// A place the adjoint walk adds its tallies to (a dense vector, an atomic
/// vector in device memory, a block's shared memory).
pub trait Tally {
    /// x\[state\] += value.
    fn add(&mut self, state: usize, value: f64);
}

/// A forward history for entry `i` in progress, advanced one move at a time by
/// [`ForwardWalk::step`] (GPU kernels interleave many of them per thread so that
/// no lane idles while its warp's longest history finishes).
///
/// Collision estimator (`EXPECTED = false`): the score is the sum over the
/// visited states s_m of W_m b^\[s_m\]. Expected-value estimator: b^\[i\] + sum_m W_m
/// (H b^)\[s_m\], which replaces each next collision by its mean given the current
/// state. `tally` is b^ or H b^ accordingly. The mean score of many histories
/// estimates x_i.
pub struct ForwardWalk {
    state: usize,
    weight: f64,
    /// The score so far.
    pub score: f64,
    /// Moves made so far.
    pub moves: u32,
    rng: Stream,
}

impl ForwardWalk {
    /// A history at entry `i` with weight 1 (`tally_i` = tally\[i\]).
    #[inline(always)]
    pub fn start<const EXPECTED: bool>(bhat_i: f64, tally_i: f64, i: usize, rng: Stream) -> Self {
        ForwardWalk {
            state: i,
            weight: 1.0,
            score: if EXPECTED { bhat_i + tally_i } else { bhat_i },
            moves: 0,
            rng,
        }
    }

    /// Makes one move (none from a row with no way out) and tallies it; returns
    /// whether the history goes on. Call only while it does, and not at all when
    /// `stop.max_steps` is 0. Cost: one [`choose`], one entry read, one tally read.
    #[inline(always)]
    pub fn step<R: Rows + ?Sized>(
        &mut self,
        rows: &R,
        tally: impl Fn(usize) -> f64,
        stop: Stop,
    ) -> bool {
        let (start, end) = rows.row(self.state);
        if start == end {
            return false;
        }
        let (next, w) = rows.step(choose(rows, start, end, self.rng.next_unit()));
        self.state = next;
        self.weight = flush_subnormal(self.weight * w);
        self.moves += 1;
        self.score += self.weight * tally(next);
        !(self.weight.abs() < stop.cutoff || self.moves >= stop.max_steps)
    }
}

/// Score and moves of one whole forward history for entry `i` ([`ForwardWalk`]
/// stepped to its end).
#[inline(always)]
pub fn forward_history<R: Rows + ?Sized, const EXPECTED: bool>(
    rows: &R,
    bhat_i: f64,
    tally: impl Fn(usize) -> f64,
    i: usize,
    stop: Stop,
    rng: Stream,
) -> (f64, u32) {
    let mut walk = ForwardWalk::start::<EXPECTED>(bhat_i, tally(i), i, rng);
    let mut alive = stop.max_steps > 0;
    while alive {
        alive = walk.step(rows, &tally, stop);
    }
    (walk.score, walk.moves)
}

/// An adjoint history in progress, advanced one move at a time.
///
/// The start state s_0 is drawn from `start_cdf` (the cumulative |b^| / ||b^||_1)
/// with weight W_0 = ||b^||_1 sign(b^\[s_0\]) (`start_weight(s)`); the walk moves on
/// the rows of |H^T|. Collision estimator: W_m is added to x\[s_m\] at every visited
/// state. Expected-value estimator: W_0 at s_0, then at every state s_m the mean
/// of the next collision, W_m H[j, s_m], to every j of the row. Summed over N
/// histories and divided by N, the tallies estimate x.
pub struct AdjointWalk {
    state: usize,
    weight: f64,
    floor: f64,
    /// Moves made so far.
    pub moves: u32,
    rng: Stream,
}

impl AdjointWalk {
    /// Draws the start state (one draw, a binary search over `n` states) and
    /// tallies the start weight.
    #[inline(always)]
    pub fn start<S: Tally + ?Sized>(
        start_cdf: &impl Fn(usize) -> f64,
        n: usize,
        start_weight: impl Fn(usize) -> f64,
        stop: Stop,
        mut rng: Stream,
        out: &mut S,
    ) -> Self {
        let state = choose_start(start_cdf, n, rng.next_unit());
        let weight = start_weight(state);
        out.add(state, weight);
        AdjointWalk {
            state,
            weight,
            floor: weight.abs() * stop.cutoff,
            moves: 0,
            rng,
        }
    }

    /// Makes one move and tallies it; returns whether the history goes on. Call
    /// only while it does, and not at all when `stop.max_steps` is 0. Cost: one
    /// [`choose`] and one tally (the expected-value estimator: one per row entry).
    #[inline(always)]
    pub fn step<R: Rows + ?Sized, S: Tally + ?Sized, const EXPECTED: bool>(
        &mut self,
        rows: &R,
        stop: Stop,
        out: &mut S,
    ) -> bool {
        let (start, end) = rows.row(self.state);
        if start == end {
            return false;
        }
        if EXPECTED {
            let mut k = start;
            while k < end {
                let (j, h) = rows.value(k);
                out.add(j, self.weight * h);
                k += 1;
            }
        }
        let (next, w) = rows.step(choose(rows, start, end, self.rng.next_unit()));
        self.state = next;
        self.weight = flush_subnormal(self.weight * w);
        self.moves += 1;
        if !EXPECTED {
            out.add(next, self.weight);
        }
        !(self.weight.abs() < self.floor || self.moves >= stop.max_steps)
    }
}

/// One whole adjoint history ([`AdjointWalk`] stepped to its end); returns its
/// moves.
#[inline(always)]
pub fn adjoint_history<R: Rows + ?Sized, S: Tally + ?Sized, const EXPECTED: bool>(
    rows: &R,
    start_cdf: &impl Fn(usize) -> f64,
    n: usize,
    start_weight: impl Fn(usize) -> f64,
    stop: Stop,
    rng: Stream,
    out: &mut S,
) -> u32 {
    let mut walk = AdjointWalk::start(start_cdf, n, start_weight, stop, rng, out);
    let mut alive = stop.max_steps > 0;
    while alive {
        alive = walk.step::<R, S, EXPECTED>(rows, stop, out);
    }
    walk.moves
}

/// `w`, or 0 when `|w|` has fallen below the smallest normal f64. A history
/// without a weight cutoff (fixed length) keeps multiplying its weight by factors
/// below 1 and would otherwise spend most of its moves on subnormal numbers, which
/// x86 CPUs handle a hundred times slower than normal ones; what such a weight
/// could still add to a tally is below 2^-1022 and is dropped on every backend
/// alike, so the walks stay identical across backends.
#[inline(always)]
fn flush_subnormal(w: f64) -> f64 {
    if w.abs() < f64::MIN_POSITIVE {
        0.0
    } else {
        w
    }
}

/// The state s with `cdf(s - 1) < u <= cdf(s)` over `0..n` (binary search on a
/// cumulative distribution given by index).
#[inline(always)]
fn choose_start(cdf: &impl Fn(usize) -> f64, n: usize, u: f64) -> usize {
    let (mut lo, mut hi) = (0, n - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cdf(mid) < u {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Walk data in the structure-of-arrays layout, as host slices.
pub struct SoaRows<'a> {
    /// Row starts (n + 1 entries).
    pub ptr: &'a [u32],
    /// Cumulative probabilities.
    pub cdf: &'a [f64],
    /// Weight factors.
    pub w: &'a [f64],
    /// Matrix values.
    pub h: &'a [f64],
    /// Target states.
    pub col: &'a [u32],
}

impl Rows for SoaRows<'_> {
    #[inline(always)]
    fn row(&self, s: usize) -> (usize, usize) {
        (self.ptr[s] as usize, self.ptr[s + 1] as usize)
    }
    #[inline(always)]
    fn cdf(&self, k: usize) -> f64 {
        self.cdf[k]
    }
    #[inline(always)]
    fn step(&self, k: usize) -> (usize, f64) {
        (self.col[k] as usize, self.w[k])
    }
    #[inline(always)]
    fn value(&self, k: usize) -> (usize, f64) {
        (self.col[k] as usize, self.h[k])
    }
}

/// Walk data in the array-of-records layout, as host slices.
pub struct AosRows<'a> {
    /// Row starts (n + 1 entries).
    pub ptr: &'a [u32],
    /// One record per entry.
    pub rec: &'a [Record],
}

impl Rows for AosRows<'_> {
    #[inline(always)]
    fn row(&self, s: usize) -> (usize, usize) {
        (self.ptr[s] as usize, self.ptr[s + 1] as usize)
    }
    #[inline(always)]
    fn cdf(&self, k: usize) -> f64 {
        self.rec[k].cdf
    }
    #[inline(always)]
    fn step(&self, k: usize) -> (usize, f64) {
        (self.rec[k].col as usize, self.rec[k].w)
    }
    #[inline(always)]
    fn value(&self, k: usize) -> (usize, f64) {
        (self.rec[k].col as usize, self.rec[k].h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_32_bytes() {
        assert_eq!(core::mem::size_of::<Record>(), 32);
    }

    #[test]
    fn choose_finds_the_first_cumulative_at_or_above() {
        let rows = SoaRows {
            ptr: &[0, 4],
            cdf: &[0.1, 0.5, 0.5, 1.0],
            w: &[0.0; 4],
            h: &[0.0; 4],
            col: &[0, 1, 2, 3],
        };
        assert_eq!(choose(&rows, 0, 4, 0.05), 0);
        assert_eq!(choose(&rows, 0, 4, 0.1), 0);
        assert_eq!(choose(&rows, 0, 4, 0.3), 1);
        assert_eq!(choose(&rows, 0, 4, 0.7), 3);
        assert_eq!(choose(&rows, 0, 4, 1.5), 3);
        assert_eq!(choose(&rows, 2, 3, 0.9), 2);
    }
}
