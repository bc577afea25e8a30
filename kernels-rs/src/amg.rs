//! Per-item math of the AMG setup that both backends share, so that they build
//! the same aggregates: the tie-breaking hash, the keys of the distance-2
//! maximal-independent-set rounds and their update rule, and the hash-table
//! slot of the sparse products.

/// Largest block size (unknowns per node) the device setup's strength kernel
/// takes; coarser levels of smoothed aggregation have as many unknowns per
/// node as near-null-space vectors.
pub const MAX_SETUP_BLOCK: usize = 8;

/// A fixed integer hash (the finaliser of MurmurHash3) for tie-breaking: the
/// same on every machine and backend.
#[inline(always)]
pub fn hash(i: u32) -> u32 {
    let mut h = i ^ 0x9e37_79b9;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// State of a node that is neither a root nor undecided (it sees a root
/// within distance 2).
pub const OUT: u64 = 0;
/// State of a node not yet decided.
pub const UNDECIDED: u64 = 1;
/// State of an aggregate's root.
pub const ROOT: u64 = 2;

/// The key of node i in `state`: the state in the top 2 bits, 30 bits of
/// hash, the index in the low 32 (so keys are distinct and states order them).
#[inline(always)]
pub fn mis2_key(state: u64, i: u32) -> u64 {
    (state << 62) | ((u64::from(hash(i)) >> 2) << 32) | u64::from(i)
}

/// The state a key carries.
#[inline(always)]
pub fn state_of(key: u64) -> u64 {
    key >> 62
}

/// One round's update of node i's key `k` given `far`, the largest key
/// within distance 2 (i included): an undecided node whose own key came back
/// becomes a root, one that sees a root becomes out; others keep their key.
#[inline(always)]
pub fn mis2_next(k: u64, far: u64, i: u32) -> u64 {
    if state_of(k) != UNDECIDED {
        k
    } else if far == k {
        mis2_key(ROOT, i)
    } else if state_of(far) == ROOT {
        mis2_key(OUT, i)
    } else {
        k
    }
}

/// The key by which a node not adjacent to any root picks, among its
/// neighbours that joined an aggregate, the one whose aggregate it joins.
#[inline(always)]
pub fn fine_key(j: u32) -> u64 {
    (u64::from(hash(j)) << 32) | u64::from(j)
}

/// Slots of a sparse product's per-row hash table for a row of at most
/// `bound` distinct columns: the power of two at or above 2 `bound` (0 for an
/// empty row), so linear probing finds a free slot quickly.
#[inline(always)]
pub fn table_slots(bound: u64) -> u64 {
    if bound == 0 {
        0
    } else {
        (2 * bound).next_power_of_two()
    }
}

/// The first slot of column `j` in a table of `slots` slots (a power of two).
#[inline(always)]
pub fn table_home(j: u32, slots: u64) -> u64 {
    u64::from(j.wrapping_mul(0x9e37_79b1)) & (slots - 1)
}

/// Entries per partial sum of the setup's inner products: each chunk is
/// summed in the order of [`chunk_dot`], then the partials by
/// [`fold_partials`], on either backend, so the Lanczos estimates agree bit
/// for bit.
pub const DOT_CHUNK: usize = 1024;

/// Lanes of the warp that sums a chunk on the device.
pub const DOT_LANES: usize = 32;

/// The sum of x_i y_i over a chunk (at most [`DOT_CHUNK`] entries) in the
/// order of one warp, so a device sums it with coalesced loads: lane l adds
/// entries l, l + 32, l + 64, .. in turn, then the lanes' sums combine by
/// halving (lane l adds lane l + d for d = 16, 8, 4, 2, 1) and lane 0's is
/// the result.
#[inline(always)]
pub fn chunk_dot(x: &[f64], y: &[f64]) -> f64 {
    lane_sum(x.iter().zip(y).map(|(a, b)| a * b))
}

/// The sum of `terms` in the order of one warp of [`DOT_LANES`] lanes: lane
/// l adds terms l, l + 32, l + 64, .. in turn from 0, then the lanes' sums
/// combine by [`lanes_total`]. O(terms).
#[inline(always)]
fn lane_sum(terms: impl Iterator<Item = f64>) -> f64 {
    let mut lanes = [0.0f64; DOT_LANES];
    for (i, t) in terms.enumerate() {
        lanes[i % DOT_LANES] += t;
    }
    lanes_total(lanes)
}

/// The sum of an inner product's chunk partials as every backend adds
/// them: the partials in chunks of [`DOT_CHUNK`], each chunk summed in one
/// warp's order ([`chunk_dot`]'s, with the partials as the terms), the
/// chunks' sums added in order from 0. A device folds a chunk with one
/// warp's coalesced loads instead of one thread's serial walk. O(partials).
#[inline(always)]
pub fn fold_partials(partials: &[f64]) -> f64 {
    partials
        .chunks(DOT_CHUNK)
        .fold(0.0, |s, c| s + lane_sum(c.iter().copied()))
}

/// Lanes of the setup's row sums ([`row_sum`]): a device sums a row with
/// this many lanes.
pub const ROW_LANES: usize = 8;

/// The sum of vals\[p\] x(cols\[p\]) over a row's entries in the order of
/// [`ROW_LANES`] lanes, so a device sums a row with coalesced loads (a group
/// of lanes per row) and the host gets the same bits: lane l adds entries
/// l, l + 8, l + 16, .. in turn, then the lanes' sums combine by halving
/// (lane l adds lane l + d for d = 4, 2, 1) and lane 0's is the result.
/// The setup's products with A in its Lanczos estimates sum rows this way.
/// O(row length); on the host eight independent sums, which also keep the
/// additions from waiting on each other.
#[inline(always)]
pub fn row_sum(cols: &[u32], vals: &[f64], x: impl Fn(usize) -> f64) -> f64 {
    let mut lanes = [0.0f64; ROW_LANES];
    let (c8, v8) = (cols.chunks_exact(ROW_LANES), vals.chunks_exact(ROW_LANES));
    let (c_rest, v_rest) = (c8.remainder(), v8.remainder());
    for (c, v) in c8.zip(v8) {
        for l in 0..ROW_LANES {
            lanes[l] += v[l] * x(c[l] as usize);
        }
    }
    for ((s, &c), &v) in lanes.iter_mut().zip(c_rest).zip(v_rest) {
        *s += v * x(c as usize);
    }
    lanes_total(lanes)
}

/// N lanes' sums (N a power of two) combined by halving, as a warp's
/// shuffle tree combines them: lane l adds lane l + d for d = N / 2, ..,
/// 2, 1, and lane 0's is the result ([`chunk_dot`], [`row_sum`]).
#[inline(always)]
pub fn lanes_total<const N: usize>(mut lanes: [f64; N]) -> f64 {
    let mut d = N / 2;
    while d > 0 {
        for l in 0..d {
            lanes[l] += lanes[l + d];
        }
        d /= 2;
    }
    lanes[0]
}

/// Entry i of the Lanczos start vector: a fixed pseudo-random value in
/// [-0.5, 0.5], the same on every run and backend.
#[inline(always)]
pub fn lanczos_start(i: u32) -> f64 {
    f64::from(hash(i)) / f64::from(u32::MAX) - 0.5
}

/// A row of a rank's extended rows: the entries of its row `cols`/`vals`
/// (global columns, increasing) on the rank's own columns `lo..hi` first,
/// numbered from 0, then those on other ranks' columns, numbered `hi - lo`
/// plus `ghost(column)` (its index among the rank's ghost columns), each
/// part in the row's order, into `out_cols` and `out_vals` (the row's
/// length; a shorter output is cut): entry k goes to
/// [`extended_position`]. What the host's split writes per row; the
/// device's `csr_extend_columns` writes the same entries by a group of
/// lanes per row. O(row length) plus a `ghost` call per ghost entry.
#[inline(always)]
pub fn extend_row<V: Copy>(
    (cols, vals): (&[u32], &[V]),
    (lo, hi): (u32, u32),
    ghost: impl Fn(u32) -> u32,
    (out_cols, out_vals): (&mut [u32], &mut [V]),
) {
    let run = own_run(cols, (lo, hi));
    for (k, (&c, &v)) in cols.iter().zip(vals).enumerate() {
        let c = if c >= lo && c < hi {
            c - lo
        } else {
            hi - lo + ghost(c)
        };
        put((out_cols, out_vals), extended_position(k, run), (c, v));
    }
}

/// The run of a row's increasing columns `cols` on `lo..hi`: (the entries
/// below `lo`, the entries below `hi`). O(log row length).
#[inline(always)]
pub fn own_run(cols: &[u32], (lo, hi): (u32, u32)) -> (usize, usize) {
    (
        cols.partition_point(|&c| c < lo),
        cols.partition_point(|&c| c < hi),
    )
}

/// Where entry k of a row whose own run is `(below, end)` ([`own_run`])
/// goes in its extended row: the run first, then the entries before it,
/// then those after it (which keep their places). O(1).
#[inline(always)]
pub fn extended_position(k: usize, (below, end): (usize, usize)) -> usize {
    if k < below {
        end - below + k
    } else if k < end {
        k - below
    } else {
        k
    }
}

/// Where entry k of a row whose own run is `(below, end)` ([`own_run`])
/// goes among the row's entries inside the run (`inside`) or outside it,
/// in the row's order; `None` where it belongs to the other part. O(1).
#[inline(always)]
pub fn column_range_position(
    k: usize,
    (below, end): (usize, usize),
    inside: bool,
) -> Option<usize> {
    match (inside, k >= below && k < end) {
        (true, true) => Some(k - below),
        (false, false) if k < below => Some(k),
        (false, false) => Some(k - (end - below)),
        _ => None,
    }
}

/// Entry `o` of a row being written (nothing beyond its end: no panic
/// path in a kernel).
#[inline(always)]
fn put<V>((cols, vals): (&mut [u32], &mut [V]), o: usize, (c, v): (u32, V)) {
    if let (Some(x), Some(y)) = (cols.get_mut(o), vals.get_mut(o)) {
        (*x, *y) = (c, v);
    }
}

/// The inverse of the dense bs x bs row-major block `b` written to `inv`
/// (bs^2 values) by Gauss-Jordan elimination with partial pivoting (a
/// 1 x 1 block: 1 / b), `m` scratch of at least bs^2 values; `false` when
/// the block is singular (a pivot at or below 1e-12 times the block's
/// largest magnitude) or not finite, or when a slice is shorter than bs^2
/// (then `inv` holds no inverse). The host's `BlockDiagonal::inverse` and
/// the kernel `amg_block_inverse` both call it: the same values bit for
/// bit. O(bs^3).
pub fn invert_block(b: &[f64], bs: usize, m: &mut [f64], inv: &mut [f64]) -> bool {
    let nn = bs * bs;
    let (Some(b), Some(m), Some(inv)) = (b.get(..nn), m.get_mut(..nn), inv.get_mut(..nn)) else {
        return false;
    };
    if let ([x], [y]) = (b, &mut *inv) {
        *y = 1.0 / *x;
        return x.is_finite() && *x != 0.0 && y.is_finite();
    }
    let scale = b.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    if !(scale.is_finite() && scale > 0.0) {
        return false;
    }
    m.copy_from_slice(b);
    inv.fill(0.0);
    for r in 0..bs {
        set(inv, r * bs + r, 1.0);
    }
    for col in 0..bs {
        let pivot = (col..bs).max_by(|&p, &q| {
            get(m, p * bs + col)
                .abs()
                .total_cmp(&get(m, q * bs + col).abs())
        });
        let Some(piv) = pivot else {
            return false;
        };
        if get(m, piv * bs + col).abs() <= 1e-12 * scale {
            return false;
        }
        for c in 0..bs {
            swap(m, col * bs + c, piv * bs + c);
            swap(inv, col * bs + c, piv * bs + c);
        }
        let d = 1.0 / get(m, col * bs + col);
        for c in 0..bs {
            set(m, col * bs + c, get(m, col * bs + c) * d);
            set(inv, col * bs + c, get(inv, col * bs + c) * d);
        }
        for r in 0..bs {
            if r != col {
                let f = get(m, r * bs + col);
                for c in 0..bs {
                    set(m, r * bs + c, get(m, r * bs + c) - f * get(m, col * bs + c));
                    set(
                        inv,
                        r * bs + c,
                        get(inv, r * bs + c) - f * get(inv, col * bs + c),
                    );
                }
            }
        }
    }
    inv.iter().all(|x| x.is_finite())
}

/// `v[i]`, 0 past the end (no panic path in a kernel).
#[inline(always)]
fn get(v: &[f64], i: usize) -> f64 {
    v.get(i).copied().unwrap_or(0.0)
}

/// `v[i] = x`, nothing past the end.
#[inline(always)]
fn set(v: &mut [f64], i: usize, x: f64) {
    if let Some(e) = v.get_mut(i) {
        *e = x;
    }
}

/// Swaps `v[i]` and `v[j]`, nothing where either is past the end.
#[inline(always)]
fn swap(v: &mut [f64], i: usize, j: usize) {
    let (x, y) = (get(v, i), get(v, j));
    if i < v.len() && j < v.len() {
        set(v, i, y);
        set(v, j, x);
    }
}

/// Words of one operation that `setup_replay` runs: its opcode, then up to
/// seven arguments (lengths, slots, device addresses), unused words zero.
pub const REPLAY_WORDS: usize = 8;
/// `setup_replay`: y = A x, rows summed in [`row_sum`]'s order: `[op,
/// nrows, ptr, col, val, x, y]`.
pub const REPLAY_SPMV: u64 = 1;
/// `setup_replay`: y = D x for a block diagonal: `[op, n, bs, blocks, x, y]`.
pub const REPLAY_BLOCK_MUL: u64 = 2;
/// `setup_replay`: scalars\[at\] = x^T y (its root's absolute value when
/// `root` != 0) in [`chunk_dot`]'s chunks: `[op, n, x, y, partial, root, at,
/// scalars]`.
pub const REPLAY_DOT: u64 = 3;
/// `setup_replay`: w_i -= al v_i + b u_i with al, b scalars of the device:
/// `[op, n, scalars, al_at, v, b_at, u, w]`.
pub const REPLAY_UPDATE: u64 = 4;
/// `setup_replay`: w_i /= b with b a scalar of the device: `[op, n, scalars,
/// b_at, w]`.
pub const REPLAY_DIVIDE: u64 = 5;

/// Flag of `amg_cheb_*`: a step (r -= A d_old, ...) rather than a start.
pub const CHEB_STEP: u32 = 1;
/// Flag of `amg_cheb_*`: a start from x = 0 (no product: r = b).
pub const CHEB_ZERO_START: u32 = 2;
/// Flag of `amg_cheb_*`: the step first adds the start's direction to x.
pub const CHEB_PENDING: u32 = 4;
/// Flag of `amg_cheb_*`: x is taken as zero (written, not read).
pub const CHEB_X_ZERO: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    /// The partials' fold: exact on integers across chunks, and in the lane
    /// order (the serial order would lose the 1 beside 1e16).
    #[test]
    fn partials_fold_in_lanes_then_chunks() {
        let p: [f64; 5000] = core::array::from_fn(|i| i as f64);
        assert_eq!(fold_partials(&p), 12_497_500.0);
        assert_eq!(fold_partials(&[]), 0.0);
        let mut q = [0.0f64; 40];
        (q[0], q[1], q[32]) = (1e16, 1.0, -1e16);
        assert_eq!(fold_partials(&q), 1.0);
        assert_eq!(q.iter().fold(0.0, |s, v| s + v), 0.0);
        // A second chunk's sum is added after the first's.
        let mut r = [0.0f64; DOT_CHUNK + 1];
        (r[0], r[DOT_CHUNK]) = (1e16, 1.0);
        r[1] = -1e16;
        assert_eq!(fold_partials(&r), 1.0);
    }

    /// Diagonally dominant blocks of every size up to MAX_SETUP_BLOCK times
    /// their inverses are the identity; a zero pivot column, a NaN and
    /// short slices are refused.
    #[test]
    fn blocks_times_their_inverses_are_the_identity() {
        let mut m = [0.0; MAX_SETUP_BLOCK * MAX_SETUP_BLOCK];
        for bs in 1..=MAX_SETUP_BLOCK {
            let nn = bs * bs;
            let b: [f64; 64] = core::array::from_fn(|e| {
                let (r, c) = (e / bs, e % bs);
                let wobble = ((e * 7 + 3) % 11) as f64 / 11.0 - 0.5;
                if r == c {
                    bs as f64 + 1.0 + wobble
                } else {
                    wobble
                }
            });
            let mut inv = [0.0; 64];
            assert!(
                invert_block(&b[..nn], bs, &mut m, &mut inv[..nn]),
                "bs {bs}"
            );
            for r in 0..bs {
                for c in 0..bs {
                    let p: f64 = (0..bs).map(|k| b[r * bs + k] * inv[k * bs + c]).sum();
                    let want = if r == c { 1.0 } else { 0.0 };
                    assert!((p - want).abs() < 1e-13, "bs {bs} ({r}, {c}): {p}");
                }
            }
            // Too short a scratch or output: refused, not a panic.
            assert!(!invert_block(
                &b[..nn],
                bs,
                &mut m[..nn - 1],
                &mut inv[..nn]
            ));
            assert!(!invert_block(&b[..nn], bs, &mut m, &mut inv[..nn - 1]));
        }
        let singular = [1.0, 2.0, 2.0, 4.0];
        assert!(!invert_block(&singular, 2, &mut m, &mut [0.0; 4]));
        assert!(!invert_block(&[0.0], 1, &mut m, &mut [0.0]));
        assert!(!invert_block(&[f64::NAN], 1, &mut m, &mut [0.0]));
        assert!(!invert_block(
            &[1.0, f64::NAN, 0.0, 1.0],
            2,
            &mut m,
            &mut [0.0; 4]
        ));
        let mut one = [0.0];
        assert!(invert_block(&[4.0], 1, &mut m, &mut one));
        assert_eq!(one[0], 0.25);
    }

    /// Every row of increasing columns of 0..12 (all 4096 subsets) against
    /// every own range: the extended row is the own entries then the others,
    /// each in the row's order, and the positions inside and outside the
    /// range number those parts' entries in order.
    #[test]
    fn positions_in_a_row_follow_the_two_walks() {
        let ghost = |c: u32| c; // any numbering of the other columns
        for set in 0u32..1 << 12 {
            let cols: [u32; 12] = core::array::from_fn(|j| j as u32);
            let mut row = [0u32; 12];
            let mut len = 0;
            for &c in cols.iter().filter(|&&c| set >> c & 1 == 1) {
                row[len] = c;
                len += 1;
            }
            let row = &row[..len];
            let vals: [f64; 12] = core::array::from_fn(|k| k as f64);
            for lo in 0..=12u32 {
                for hi in lo..=12u32 {
                    let own = |c: u32| c >= lo && c < hi;
                    let mut want = [(0u32, 0.0f64); 12];
                    let mut o = 0;
                    for pass in [true, false] {
                        for (k, &c) in row.iter().enumerate() {
                            if own(c) == pass {
                                let c = if pass { c - lo } else { hi - lo + ghost(c) };
                                want[o] = (c, vals[k]);
                                o += 1;
                            }
                        }
                    }
                    let (mut oc, mut ov) = ([0u32; 12], [0.0f64; 12]);
                    extend_row(
                        (row, &vals[..len]),
                        (lo, hi),
                        ghost,
                        (&mut oc[..len], &mut ov[..len]),
                    );
                    for k in 0..len {
                        assert_eq!((oc[k], ov[k]), want[k], "{row:?} on {lo}..{hi}");
                    }
                    let run = own_run(row, (lo, hi));
                    for inside in [true, false] {
                        let mut next = 0;
                        for (k, &c) in row.iter().enumerate() {
                            let at = column_range_position(k, run, inside);
                            if own(c) == inside {
                                assert_eq!(at, Some(next), "{row:?} on {lo}..{hi}, entry {k}");
                                next += 1;
                            } else {
                                assert_eq!(at, None);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn row_sum_is_the_lanes_order() {
        let t = |p: usize| 1.0 / (p as f64 + 1.0) - 0.3;
        for len in [0, 1, 7, 8, 9, 27, 64, 300] {
            // the lanes' sums by hand, then the halving tree
            let mut lanes = [0.0f64; ROW_LANES];
            for p in 0..len {
                lanes[p % ROW_LANES] += t(p);
            }
            let want = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6]))
                + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
            let cols: [u32; 300] = core::array::from_fn(|p| p as u32);
            let vals: [f64; 300] = core::array::from_fn(t);
            let got = row_sum(&cols[..len], &vals[..len], |_| 1.0);
            assert_eq!(got.to_bits(), want.to_bits(), "len {len}");
            let exact: f64 = (0..len).map(t).sum();
            assert!((got - exact).abs() < 1e-12);
        }
    }

    #[test]
    fn extended_rows_put_owned_columns_first() {
        let (cols, vals) = ([1u32, 4, 5, 6, 9], [1.0, 2.0, 3.0, 4.0, 5.0]);
        let (mut oc, mut ov) = ([0u32; 5], [0.0f64; 5]);
        let ghosts = [1u32, 3, 9];
        let at = |c| ghosts.partition_point(|&g| g < c) as u32;
        extend_row((&cols, &vals), (4, 7), at, (&mut oc, &mut ov));
        assert_eq!(oc, [0, 1, 2, 3, 5]);
        assert_eq!(ov, [2.0, 3.0, 4.0, 1.0, 5.0]);
    }

    #[test]
    fn keys_order_by_state_then_hash() {
        assert!(mis2_key(ROOT, 0) > mis2_key(UNDECIDED, 7));
        assert!(mis2_key(UNDECIDED, 3) > mis2_key(OUT, 9));
        assert_eq!(state_of(mis2_key(ROOT, 5)), ROOT);
        assert_eq!(mis2_key(OUT, 5) & 0xffff_ffff, 5);
        // A node whose key is the largest around becomes a root.
        let k = mis2_key(UNDECIDED, 4);
        assert_eq!(state_of(mis2_next(k, k, 4)), ROOT);
        assert_eq!(state_of(mis2_next(k, mis2_key(ROOT, 9), 4)), OUT);
        assert_eq!(table_slots(0), 0);
        assert_eq!(table_slots(5), 16);
        assert!(table_home(12345, 16) < 16);
    }
}
