//! The AMG setup on the device: the strength graph of the block-norm matrix,
//! the rounds of the distance-2 maximal-independent-set aggregation, and the
//! sparse-matrix kernels of the prolongator and Galerkin products (product,
//! sum, transpose). Every kernel is grid-stride, one thread per row or node
//! unless its comment names a warp or a group of lanes per row.
//!
//! Each kernel mirrors the host code of `gpuq-amg` operation for operation
//! (the same sums in the same order), so the two backends build the same
//! graph and aggregates and, where the host does not fuse differently, the
//! same matrices bit for bit.
//!
//! Safety contract of every kernel: the CSR arrays describe a validated matrix
//! (row pointers nondecreasing, columns sorted and unique within a row and
//! below the column count), output arrays hold the sizes named in each
//! kernel's comment, and no output aliases an input.

use super::prelude::{
    atomic_add_u64, global_id, grid_threads, lane, ld_volatile_u64, sync_grid, warp_sum,
    DeviceReal, DeviceScalar,
};
use crate::amg::{
    column_range_position, extended_position, fine_key, invert_block, own_run, lanczos_start, mis2_key, mis2_next, state_of, table_home, table_slots,
    DOT_CHUNK, MAX_SETUP_BLOCK, REPLAY_BLOCK_MUL, ROW_LANES, REPLAY_DIVIDE, REPLAY_DOT, REPLAY_SPMV,
    REPLAY_UPDATE, REPLAY_WORDS, ROOT, UNDECIDED,
};
use core::arch::asm;

/// A slot of a hash table that holds no column.
const EMPTY: u32 = u32::MAX;

/// |x| (sign bit cleared).
#[inline(always)]
fn abs(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & !(1u64 << 63))
}

/// The first position p in `[lo, hi)` with `col[p] >= key` (`col` sorted there).
#[inline(always)]
unsafe fn lower_bound(col: *const u32, mut lo: usize, mut hi: usize, key: u32) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if *col.add(mid) < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// e_kl, the Frobenius norm of the bs x bs block (k, l) (|a_kl| for bs = 1),
/// summed row by row and within a row in column order as the host's norm
/// matrix; and whether the block stores any entry.
#[inline(always)]
unsafe fn block_norm(
    k: usize,
    l: usize,
    bs: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
) -> (f64, bool) {
    let (lo_c, hi_c) = ((l * bs) as u32, ((l + 1) * bs) as u32);
    let (mut s, mut any) = (0.0f64, false);
    for r in bs * k..bs * (k + 1) {
        let end = *ptr.add(r + 1) as usize;
        let mut p = lower_bound(col, *ptr.add(r) as usize, end, lo_c);
        while p < end && *col.add(p) < hi_c {
            let x = *val.add(p);
            if bs == 1 {
                return (abs(x), true);
            }
            s += x * x;
            any = true;
            p += 1;
        }
    }
    (s.sqrt_rn(), any)
}

/// diag[k] = e_kk for every node k (`diag` holds `nodes` values).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_block_diag_norm(
    nodes: usize,
    bs: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    diag: *mut f64,
) {
    let mut k = global_id();
    while k < nodes {
        *diag.add(k) = block_norm(k, k, bs, ptr, col, val).0;
        k += grid_threads();
    }
}

/// Whether nodes k and l (l != k) are strongly connected, given e_kl and
/// e_kk: e_kl^2 >= eps e_kk e_ll or e_lk^2 >= eps e_ll e_kk (each with e >
/// 0), e_lk found in node l's rows; counts in `flags[0]` a block (l, k)
/// that is not stored.
#[inline(always)]
unsafe fn strong(
    (k, l): (usize, usize),
    (e_kl, dk): (f64, f64),
    eps: f64,
    bs: usize,
    (ptr, col, val): (*const u64, *const u32, *const f64),
    diag: *const f64,
    flags: *mut u64,
) -> bool {
    let dl = *diag.add(l);
    let forward = e_kl > 0.0 && e_kl * e_kl >= eps * dk * dl;
    let (e_lk, stored) = block_norm(l, k, bs, ptr, col, val);
    if !stored {
        atomic_add_u64(flags, 1);
    }
    let backward = e_lk > 0.0 && e_lk * e_lk >= eps * dl * dk;
    forward || backward
}

/// `amg_strength` for scalar rows (bs = 1), a group of `lanes` lanes per
/// node (a power of two up to 32: a quarter warp for short rows, a warp for
/// long ones): the group's lanes test entries l, l + lanes, .. of the row at
/// once (the same test as `amg_strength`'s), and the strong ones are written
/// in column order by their ranks among the group's lanes (`vote.ballot`).
/// The warp's groups step through their rows together (a loop every lane
/// runs until no row of the warp has entries left). Arguments and results
/// as `amg_strength`'s, without `bs` and with `lanes` (any other value: no
/// work).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn amg_strength_rows(
    nodes: usize,
    lanes: usize,
    eps: f64,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    diag: *const f64,
    gptr: *const u64,
    counts: *mut u64,
    adj: *mut u32,
    flags: *mut u64,
) {
    if lanes == 0 || lanes > 32 || 32 % lanes != 0 {
        return;
    }
    let lane = lane() as usize;
    let (sub, first) = (lane % lanes, (lane - lane % lanes) as u32);
    let group = if lanes == 32 { u32::MAX } else { (1u32 << lanes) - 1 };
    let below = (1u32 << sub) - 1;
    let rows = 32 / lanes;
    let mut w = global_id() / 32;
    while w * rows < nodes {
        let k = w * rows + lane / lanes;
        let (mut lo, mut hi, mut out, mut dk) = (0usize, 0usize, 0usize, 0.0f64);
        if k < nodes {
            dk = *diag.add(k);
            if dk <= 0.0 && sub == 0 {
                atomic_add_u64(flags.add(1), 1);
            }
            (lo, hi) = (*ptr.add(k) as usize, *ptr.add(k + 1) as usize);
            out = if gptr.is_null() { 0 } else { *gptr.add(k) as usize };
        }
        let mut found = 0usize;
        let mut base = lo;
        while warp_ballot(base < hi) != 0 {
            let p = base + sub;
            let keep = p < hi && {
                let l = *col.add(p) as usize;
                l != k && {
                    let e_kl = abs(*val.add(p));
                    strong((k, l), (e_kl, dk), eps, 1, (ptr, col, val), diag, flags)
                }
            };
            let mask = (warp_ballot(keep) >> first) & group;
            if keep && !gptr.is_null() {
                *adj.add(out + found + (mask & below).count_ones() as usize) = *col.add(p);
            }
            found += mask.count_ones() as usize;
            base += lanes;
        }
        if k < nodes && gptr.is_null() && sub == 0 {
            *counts.add(k) = found as u64;
            if found == 0 {
                atomic_add_u64(flags.add(2), 1);
            }
        }
        w += grid_threads() / 32;
    }
}

/// The strong-connection graph, symmetrised: node l (l != k) is a neighbour of
/// node k when block (k, l) is stored and e_kl^2 >= eps e_kk e_ll or e_lk^2 >=
/// eps e_ll e_kk (each with e > 0), neighbours in increasing order. With a
/// null `gptr` it counts each node's neighbours into `counts` (`nodes`
/// values); otherwise it writes them to `adj` from `gptr[k]`. `flags[0]`
/// counts stored blocks (k, l) whose transpose (l, k) is not stored (the
/// host then takes its own path, which symmetrises any pattern), `flags[1]`
/// nodes whose diagonal block is zero, and the counting pass `flags[2]`
/// the isolated nodes (no neighbour). bs <= `MAX_SETUP_BLOCK`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn amg_strength(
    nodes: usize,
    bs: usize,
    eps: f64,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    diag: *const f64,
    gptr: *const u64,
    counts: *mut u64,
    adj: *mut u32,
    flags: *mut u64,
) {
    if bs == 0 || bs > MAX_SETUP_BLOCK {
        return;
    }
    let mut k = global_id();
    while k < nodes {
        let dk = *diag.add(k);
        if dk <= 0.0 {
            atomic_add_u64(flags.add(1), 1);
        }
        let mut pos = [0usize; MAX_SETUP_BLOCK];
        let mut end = [0usize; MAX_SETUP_BLOCK];
        for r in 0..MAX_SETUP_BLOCK {
            if r < bs {
                pos[r] = *ptr.add(bs * k + r) as usize;
                end[r] = *ptr.add(bs * k + r + 1) as usize;
            }
        }
        let mut out = if gptr.is_null() {
            0
        } else {
            *gptr.add(k) as usize
        };
        let start = out;
        loop {
            // The next block column of the node's rows (a merge of bs sorted rows).
            let mut l = u32::MAX;
            for r in 0..MAX_SETUP_BLOCK {
                if r < bs && pos[r] < end[r] {
                    let c = *col.add(pos[r]) / bs as u32;
                    if c < l {
                        l = c;
                    }
                }
            }
            if l == u32::MAX {
                break;
            }
            // e_kl, row by row in column order; the cursors move past block l.
            let (mut s, mut last) = (0.0f64, 0.0f64);
            for r in 0..MAX_SETUP_BLOCK {
                if r < bs {
                    while pos[r] < end[r] && *col.add(pos[r]) / bs as u32 == l {
                        let x = *val.add(pos[r]);
                        s += x * x;
                        last = x;
                        pos[r] += 1;
                    }
                }
            }
            let l = l as usize;
            if l == k {
                continue;
            }
            let e_kl = if bs == 1 { abs(last) } else { s.sqrt_rn() };
            if strong((k, l), (e_kl, dk), eps, bs, (ptr, col, val), diag, flags) {
                if !gptr.is_null() {
                    *adj.add(out) = l as u32;
                }
                out += 1;
            }
        }
        if gptr.is_null() {
            *counts.add(k) = (out - start) as u64;
            if out == start {
                atomic_add_u64(flags.add(2), 1);
            }
        }
        k += grid_threads();
    }
}

/// keys[i] = the undecided key of node i (`n` values).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_mis2_init(n: usize, keys: *mut u64) {
    let mut i = global_id();
    while i < n {
        *keys.add(i) = mis2_key(UNDECIDED, i as u32);
        i += grid_threads();
    }
}

/// out[i] = the largest of `keys` over node i and its graph neighbours, for
/// the nodes `first, first + stride, ..` below n.
#[inline(always)]
unsafe fn mis2_max_nodes(
    (first, stride): (usize, usize),
    n: usize,
    (gptr, adj): (*const u64, *const u32),
    keys: *const u64,
    out: *mut u64,
) {
    let mut i = first;
    while i < n {
        let mut m = *keys.add(i);
        for e in *gptr.add(i) as usize..*gptr.add(i + 1) as usize {
            let v = *keys.add(*adj.add(e) as usize);
            if v > m {
                m = v;
            }
        }
        *out.add(i) = m;
        i += stride;
    }
}

/// The rounds of the distance-2 maximal independent set in one launch, until
/// no node is undecided: per round, `near` = the largest key around each
/// node, `far` = the largest `near` around it (the largest key within
/// distance 2), then each key's update (`mis2_next`) in place, the nodes
/// still undecided counted in `left[round % 2]`; a grid barrier between the
/// steps. At most n + 1 rounds. `keys` hold the start keys (`amg_mis2_init`) and end as roots and
/// nodes out.
///
/// # Safety
/// A cooperative launch (every block resident at once); `near` and `far`
/// hold `n` values; `left` two zeros; `bar` as `sync_grid` asks; the graph's
/// neighbours index the n nodes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_mis2_rounds(
    n: usize,
    gptr: *const u64,
    adj: *const u32,
    keys: *mut u64,
    near: *mut u64,
    far: *mut u64,
    left: *mut u64,
    bar: *mut u32,
) {
    let all = (global_id(), grid_threads());
    let mut round = 0usize;
    loop {
        mis2_max_nodes(all, n, (gptr, adj), keys, near);
        sync_grid(bar);
        // the count of the round before last has been read by every thread
        if all.0 == 0 {
            *left.add((round + 1) % 2) = 0;
        }
        mis2_max_nodes(all, n, (gptr, adj), near, far);
        sync_grid(bar);
        let count = left.add(round % 2);
        let mut undecided = 0u64;
        let mut i = all.0;
        while i < n {
            let k = mis2_next(*keys.add(i), *far.add(i), i as u32);
            *keys.add(i) = k;
            undecided += u64::from(state_of(k) == UNDECIDED);
            i += all.1;
        }
        if undecided > 0 {
            atomic_add_u64(count, undecided);
        }
        sync_grid(bar);
        // Each round decides at least the node of the largest undecided key
        // (the graph is symmetric); the bound only guards against a graph
        // that is not: nodes left undecided join no aggregate, which the
        // host reports.
        if ld_volatile_u64(count) == 0 || round == n {
            return;
        }
        round += 1;
    }
}

/// roots[i] = 1 for a root, 0 otherwise (`n` values of u64, the counts of a
/// prefix sum).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_mis2_roots(n: usize, keys: *const u64, roots: *mut u64) {
    let mut i = global_id();
    while i < n {
        *roots.add(i) = u64::from(state_of(*keys.add(i)) == ROOT);
        i += grid_threads();
    }
}

/// number[i] = the roots before node i (`prefix`, the exclusive prefix sum
/// of `roots`) for a root, u32::MAX for any other node: the roots numbered
/// in node order. Grid-stride over the n nodes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_root_numbers(
    n: usize,
    roots: *const u64,
    prefix: *const u64,
    number: *mut u32,
) {
    let mut i = global_id();
    while i < n {
        *number.add(i) = if *roots.add(i) == 1 {
            *prefix.add(i) as u32
        } else {
            u32::MAX
        };
        i += grid_threads();
    }
}

/// First pass of the aggregate assignment: a root keeps its number (`number`,
/// u32::MAX for non-roots), any other node joins the adjacent root of largest
/// key, or stays u32::MAX in `first`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_aggregate_first(
    n: usize,
    gptr: *const u64,
    adj: *const u32,
    keys: *const u64,
    number: *const u32,
    first: *mut u32,
) {
    let mut i = global_id();
    while i < n {
        let mut a = *number.add(i);
        if a == u32::MAX {
            let mut best = 0u64;
            for e in *gptr.add(i) as usize..*gptr.add(i + 1) as usize {
                let j = *adj.add(e) as usize;
                let nj = *number.add(j);
                let kj = *keys.add(j);
                if nj != u32::MAX && (a == u32::MAX || kj > best) {
                    a = nj;
                    best = kj;
                }
            }
        }
        *first.add(i) = a;
        i += grid_threads();
    }
}

/// Second pass: a node left out by the first joins the aggregate of its
/// neighbour of largest `fine_key` among those assigned in the first pass;
/// `*missing` counts the nodes that find none (zeroed before; one atomic
/// per such node, none where every node is assigned).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_aggregate_second(
    n: usize,
    gptr: *const u64,
    adj: *const u32,
    first: *const u32,
    out: *mut u32,
    missing: *mut u64,
) {
    let mut i = global_id();
    while i < n {
        let mut a = *first.add(i);
        if a == u32::MAX {
            let mut best = 0u64;
            for e in *gptr.add(i) as usize..*gptr.add(i + 1) as usize {
                let j = *adj.add(e);
                let fj = *first.add(j as usize);
                let kj = fine_key(j);
                if fj != u32::MAX && (a == u32::MAX || kj > best) {
                    a = fj;
                    best = kj;
                }
            }
            if a == u32::MAX {
                atomic_add_u64(missing, 1);
            }
        }
        *out.add(i) = a;
        i += grid_threads();
    }
}

/// The aggregates of the `k` nodes `list` marked for dropping:
/// dropped[agg[node]] = 1 for each listed node in an aggregate (`dropped`
/// holds an aggregate's worth of zeros). Grid-stride over the list.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_drop_mark(
    k: usize,
    list: *const u64,
    agg: *const u32,
    dropped: *mut u64,
) {
    let mut i = global_id();
    while i < k {
        let a = *agg.add(*list.add(i) as usize);
        if a != u32::MAX {
            *dropped.add(a as usize) = 1;
        }
        i += grid_threads();
    }
}

/// Each node's aggregate after the marked ones are dropped (the host's
/// `drop_isolated`): u32::MAX (in none) where `dropped[agg[i]]`, else the
/// aggregate renumbered among the kept ones in order, agg[i] - before[agg[i]]
/// (`before` the prefix sum of `dropped`). Grid-stride over the nodes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_drop_renumber(
    n: usize,
    dropped: *const u64,
    before: *const u64,
    agg: *mut u32,
) {
    let mut i = global_id();
    while i < n {
        let a = *agg.add(i);
        if a != u32::MAX {
            *agg.add(i) = if *dropped.add(a as usize) != 0 {
                u32::MAX
            } else {
                a - *before.add(a as usize) as u32
            };
        }
        i += grid_threads();
    }
}

/// The products of row i of A B (`dinv` null), or of row i of the smoothed
/// prolongator B - omega D^-1 A B (`dinv` the inverse diagonal blocks,
/// row-major, bs^2 per node): B's row i and the rows of A's rows bs k ..
/// bs k + bs - 1 of node k = i / bs. Only the A entries first, first + step,
/// .. of each row count (B's own row with `first` 0): (0, 1) is the whole
/// count, (rank, width) a group lane's share of it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row_products(
    i: usize,
    bs: usize,
    dinv: *const f64,
    a_ptr: *const u64,
    a_col: *const u32,
    b_ptr: *const u64,
    first: usize,
    step: usize,
) -> u64 {
    let len = |k: usize| *b_ptr.add(k + 1) - *b_ptr.add(k);
    let through_a = |r: usize| {
        let mut s = 0u64;
        let mut p = *a_ptr.add(r) as usize + first;
        while p < *a_ptr.add(r + 1) as usize {
            s += len(*a_col.add(p) as usize);
            p += step;
        }
        s
    };
    if dinv.is_null() {
        through_a(i)
    } else {
        let bs = bs.max(1);
        let k = i / bs;
        let mut s = if first == 0 { len(i) } else { 0 };
        for c in 0..bs {
            s += through_a(k * bs + c);
        }
        s
    }
}

/// bound[i] = the products of row i (see `group_rows`), at most B's column
/// count: the size of its hash table is `table_slots(bound[i])` (`nrows`
/// values).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn spgemm_bound(
    nrows: usize,
    bs: usize,
    dinv: *const f64,
    a_ptr: *const u64,
    a_col: *const u32,
    b_ptr: *const u64,
    b_cols: u64,
    bound: *mut u64,
) {
    let mut i = global_id();
    while i < nrows {
        let s = row_products(i, bs, dinv, a_ptr, a_col, b_ptr, 0, 1);
        *bound.add(i) = if s < b_cols { s } else { b_cols };
        i += grid_threads();
    }
}

/// Bytes of shared memory per warp for the hash tables of its rows: a group
/// of `w` lanes (one row) owns `w / 32` of it, room for `32 w` columns in the
/// count pass or `8 w` columns and their values in the fill pass (1024 and
/// 256 for a whole warp).
const WARP_TABLE_BYTES: u32 = 4096;

/// Warps per block of the group-per-row kernels (`crate::BLOCK_THREADS / 32`).
const BLOCK_WARPS: u32 = crate::BLOCK_THREADS / 32;

// The hash tables of the group-per-row product kernels: one region of
// `WARP_TABLE_BYTES` per warp of the block.
core::arch::global_asm!(".shared .align 8 .b8 gpuq_spgemm_tables[32768];");

/// The lanes of one warp that work on one row together: `width` lanes (a
/// power of two, 1 to 32) from lane `first`, this lane being the `rank`-th.
/// The warp's groups run in step: every method is a whole-warp operation
/// that all 32 lanes call from warp-uniform control flow (groups that
/// diverge would run one after another), each group seeing only its own
/// lanes' values.
#[derive(Clone, Copy)]
struct Group {
    width: u32,
    rank: u32,
    first: u32,
}

impl Group {
    /// This lane's group of `width` lanes (a power of two, 1 to 32).
    #[inline(always)]
    fn of(width: u32) -> Group {
        let lane = lane();
        let first = lane & !(width - 1);
        Group {
            width,
            rank: lane - first,
            first,
        }
    }

    /// The group's index within its warp.
    #[inline(always)]
    fn index(&self) -> usize {
        (self.first / self.width) as usize
    }

    /// Generic address of this group's share of the shared regions of the
    /// `spread` warps from the last warp of the block whose index is a
    /// multiple of `spread` (a power of two up to `BLOCK_WARPS`): that warp
    /// itself where only every `spread`-th warp works, the unit's first
    /// where `spread` warps share a row (`spread * width * WARP_TABLE_BYTES
    /// / 32` bytes).
    #[inline(always)]
    fn table(&self, spread: u32) -> *mut u8 {
        let base: u64;
        // SAFETY: converts the address of a declared shared variable to a
        // generic one.
        unsafe { asm!("cvta.shared.u64 {b}, gpuq_spgemm_tables;", b = out(reg64) base) }
        // SAFETY: reading a special register has no preconditions.
        let warp = unsafe { core::arch::nvptx::_thread_idx_x() } as u32 / 32;
        let lead = warp - warp % spread;
        let offset =
            lead % BLOCK_WARPS * WARP_TABLE_BYTES + self.first * spread * (WARP_TABLE_BYTES / 32);
        (base + u64::from(offset)) as *mut u8
    }

    /// `bar.warp.sync` over the warp: waits for every lane and makes their
    /// memory writes visible to each other.
    #[inline(always)]
    fn sync(&self) {
        // SAFETY: a full-warp barrier from warp-uniform control flow.
        unsafe { asm!("bar.warp.sync 0xffffffff;") }
    }

    /// The value of `v` at the group's lane `src` (below `width`).
    #[inline(always)]
    fn broadcast_u32(&self, v: u32, src: u32) -> u32 {
        shfl_idx_b32(v, self.first + src)
    }

    /// The value of `v` at the group's lane `src`.
    #[inline(always)]
    fn broadcast_u64(&self, v: u64, src: u32) -> u64 {
        let (lo, hi) = split(v);
        join(self.broadcast_u32(lo, src), self.broadcast_u32(hi, src))
    }

    /// The sum of `v` over the group's lanes up to and including this one.
    #[inline(always)]
    fn inclusive_u32(&self, v: u32) -> u32 {
        let mut x = v;
        let mut d = 1;
        while d < self.width {
            let y = shfl_up_b32(x, d);
            if self.rank >= d {
                x += y;
            }
            d *= 2;
        }
        x
    }

    /// Sum of `v` over the group's lanes (every lane gets its group's).
    #[inline(always)]
    fn sum_u64(&self, v: u64) -> u64 {
        fold_u64_within(v, self.width, |a, b| a + b)
    }

    /// Bit r set for each rank r of the group whose `v` equals this lane's
    /// (`match.any`).
    #[inline(always)]
    fn match_any(&self, v: u32) -> u32 {
        ((u64::from(warp_match_any(v)) >> self.first) & ((1u64 << self.width) - 1)) as u32
    }

    /// Bit r set for each rank r of the group whose `pred` holds.
    #[inline(always)]
    fn ballot(&self, pred: bool) -> u32 {
        ((u64::from(warp_ballot(pred)) >> self.first) & ((1u64 << self.width) - 1)) as u32
    }
}

// The count pass's per-warp counts of a row taken by several warps.
core::arch::global_asm!(".shared .align 8 .b8 gpuq_spgemm_sums[64];");

/// The `spread` warps of a block (a power of two up to `BLOCK_WARPS`) that
/// take one row together in `group_rows`, this warp being the `index`-th;
/// one warp alone when `spread` is 1.
#[derive(Clone, Copy)]
struct Unit {
    spread: u32,
    index: u32,
    /// The named barrier of the unit (1 + its index in the block).
    barrier: u32,
    /// This warp's index in its block.
    warp: u32,
}

impl Unit {
    /// This warp's unit.
    #[inline(always)]
    fn of(spread: u32) -> Unit {
        // SAFETY: reading a special register has no preconditions.
        let warp = unsafe { core::arch::nvptx::_thread_idx_x() } / 32 % BLOCK_WARPS;
        Unit {
            spread,
            index: warp % spread,
            barrier: 1 + warp / spread,
            warp,
        }
    }

    /// Waits for the unit's warps and makes their shared-memory writes
    /// visible to each other: `bar.warp.sync` for one warp, else the unit's
    /// named barrier (`bar.sync` of its 32 spread threads). Whole-unit.
    #[inline(always)]
    fn sync(&self) {
        if self.spread == 1 {
            // SAFETY: a full-warp barrier from warp-uniform control flow.
            unsafe { asm!("bar.warp.sync 0xffffffff;") }
        } else {
            // SAFETY: every thread of the unit's warps reaches it, from
            // unit-uniform control flow; the barrier is the unit's own.
            unsafe {
                asm!(
                    "bar.sync {b}, {n};",
                    b = in(reg32) self.barrier,
                    n = in(reg32) self.spread * 32,
                )
            }
        }
    }

    /// The generic address of the block's per-warp counts
    /// (`gpuq_spgemm_sums`, one u64 per warp).
    #[inline(always)]
    fn sums(&self) -> *mut u64 {
        let base: u64;
        // SAFETY: converts the address of a declared shared variable to a
        // generic one.
        unsafe { asm!("cvta.shared.u64 {b}, gpuq_spgemm_sums;", b = out(reg64) base) }
        base as *mut u64
    }
}

/// Compare-and-swap of `*p` from `old` to `new` (shared or global memory);
/// returns the value found.
#[inline(always)]
unsafe fn cas_u32(p: *mut u32, old: u32, new: u32) -> u32 {
    let r: u32;
    asm!("atom.cas.b32 {r}, [{p}], {o}, {n};", r = out(reg32) r, p = in(reg64) p, o = in(reg32) old, n = in(reg32) new);
    r
}

/// A row's open-addressing hash table (linear probing, `slots` a power of
/// two) in shared or global memory, filled by the lanes of one group.
struct RowTable {
    keys: *mut u32,
    vals: *mut f64,
    slots: usize,
    fill: bool,
}

impl RowTable {
    /// Adds `v()` to column `j` (values only when filling); returns 1 when
    /// `j` is new. When every slot holds another column, sets `full` and
    /// adds nothing. Lanes filling at once must add distinct columns (when
    /// counting, one of several adding the same new column gets the 1).
    #[inline(always)]
    unsafe fn add(&self, j: u32, v: impl FnOnce() -> f64, full: &mut bool) -> u64 {
        let mut first = false;
        let s = self.slot(j, &mut first, full);
        if s == usize::MAX {
            return 0;
        }
        if self.fill {
            *self.vals.add(s) += v();
        }
        u64::from(first)
    }

    /// The slot of column `j`, taken for it where `j` is new (`first` then
    /// set); usize::MAX, with `full` set, when every slot holds another
    /// column. Linear probing by compare-and-swap: lanes may look up the
    /// same column at once.
    #[inline(always)]
    unsafe fn slot(&self, j: u32, first: &mut bool, full: &mut bool) -> usize {
        let mut s = table_home(j, self.slots as u64) as usize;
        let mut probes = 0;
        loop {
            let found = cas_u32(self.keys.add(s), EMPTY, j);
            if found == EMPTY || found == j {
                *first = found == EMPTY;
                return s;
            }
            probes += 1;
            if probes == self.slots {
                *full = true;
                return usize::MAX;
            }
            s = (s + 1) & (self.slots - 1);
        }
    }

    /// Moves the table's columns (and values) to its first slots, in slot
    /// order, and returns how many there are. The group's lanes take
    /// `width` slots at a time; an entry never moves past a slot still to
    /// be read. Whole-warp: the warp runs as many strides as its largest
    /// table needs.
    #[inline(always)]
    unsafe fn compact(&self, g: Group) -> usize {
        let (w, rank) = (g.width as usize, g.rank as usize);
        let most = warp_max_u64(self.slots as u64) as usize;
        let mut out = 0usize;
        let mut base = 0usize;
        while base < most {
            let s = base + rank;
            let j = if s < self.slots { *self.keys.add(s) } else { EMPTY };
            let v = if self.fill && j != EMPTY {
                *self.vals.add(s)
            } else {
                0.0
            };
            let bits = g.ballot(j != EMPTY);
            g.sync();
            if j != EMPTY {
                let below = (bits & ((1u32 << rank) - 1)).count_ones() as usize;
                *self.keys.add(out + below) = j;
                if self.fill {
                    *self.vals.add(out + below) = v;
                }
            }
            out += bits.count_ones() as usize;
            base += w;
        }
        g.sync();
        out
    }
}

/// Entries a lane ranks per sweep of its row in `rank_distinct`.
const RANK_BATCH: usize = 4;

/// Calls `emit(e, place)` for each entry e of the `len` keys `key(0..len)`
/// (distinct values) taken by lane `rank` of `width` (e = rank, rank + width, ..), with
/// `place` the number of smaller keys: the entry's place in sorted order.
/// Each lane holds up to `RANK_BATCH` of its entries at once and compares
/// every key of the row with all of them, so a row costs len *
/// ceil(len / (RANK_BATCH width)) reads per lane.
#[inline(always)]
unsafe fn rank_distinct(
    key: impl Fn(usize) -> u32,
    len: usize,
    rank: usize,
    width: usize,
    mut emit: impl FnMut(usize, usize),
) {
    let mut base = 0usize;
    while base < len {
        let mut mine = [EMPTY; RANK_BATCH];
        let mut place = [0u32; RANK_BATCH];
        for (r, m) in mine.iter_mut().enumerate() {
            let e = base + rank + r * width;
            if e < len {
                *m = key(e);
            }
        }
        for u in 0..len {
            let c = key(u);
            for r in 0..RANK_BATCH {
                place[r] += u32::from(c < mine[r]);
            }
        }
        for (r, &p) in place.iter().enumerate() {
            let e = base + rank + r * width;
            if e < len {
                emit(e, p as usize);
            }
        }
        base += RANK_BATCH * width;
    }
}

/// Adds to `table` the products of the group's next `width` entries of A
/// with the B rows they name (this lane's entry: `q_len` columns of
/// (`b_col`, `b_val`) from `q_lo`, scaled by `a`), flattened over the lanes:
/// product f of the group's `total` (`incl` this lane's inclusive sum of the
/// lengths) goes to lane f % width in round f / width (`rounds` the warp's
/// most), and the lane finds its entry by a binary search over the running
/// lengths (log2 width shuffles). Lanes of a round may meet the same
/// column: counting, the table's compare-and-swap counts it once; filling,
/// they add to it one after another in lane order (`match.any` finds them),
/// which is the products' order, so each column's sum is the host's
/// Gustavson sum bit for bit. Returns the columns this lane added first.
/// Whole-warp: every lane calls it with the same `rounds`.
#[inline(always)]
unsafe fn flat_chunk(
    g: Group,
    table: &RowTable,
    (b_col, b_val): (*const u32, *const f64),
    (q_lo, q_len, a): (u64, u32, f64),
    (incl, total, rounds): (u32, u32, u32),
    full: &mut bool,
) -> u64 {
    let excl = incl - q_len;
    let mut n = 0u64;
    for r in 0..rounds {
        let f = r * g.width + g.rank;
        // The last entry whose products start at or before f.
        let (mut e, mut at) = (0u32, 0u32);
        let mut half = g.width / 2;
        while half > 0 {
            let x = g.broadcast_u32(excl, e + half);
            if x <= f {
                e += half;
                at = x;
            }
            half /= 2;
        }
        let start = g.broadcast_u64(q_lo, e) as usize;
        let valid = f < total;
        if !table.fill {
            if valid {
                n += table.add(*b_col.add(start + (f - at) as usize), || 0.0, full);
            }
            continue;
        }
        let a = f64::from_bits(g.broadcast_u64(a.to_bits(), e));
        let (mut j, mut v, mut slot) = (EMPTY, 0.0, usize::MAX);
        if valid {
            let q = start + (f - at) as usize;
            j = *b_col.add(q);
            v = a * *b_val.add(q);
            let mut first = false;
            slot = table.slot(j, &mut first, full);
            n += u64::from(first);
        }
        let adds = slot != usize::MAX;
        let same = g.match_any(j) & g.ballot(adds);
        let before = (same & ((1u32 << g.rank) - 1)).count_ones();
        let mut turn = 0;
        while warp_any(adds && before >= turn) {
            if adds && before == turn {
                *table.vals.add(slot) += v;
            }
            g.sync();
            turn += 1;
        }
    }
    n
}

/// Rows `row0 .. row0 + rows` of C = A B (`dinv` null) or of the smoothed
/// prolongator P = B - omega D^-1 A B (B the tentative prolongator, `dinv` the
/// inverse diagonal blocks of A, bs^2 per node), one group of `width` lanes
/// (a power of two, 1 to 32) per row, the warp's groups in step. Without
/// `WIDE`, only every `spread`-th warp of a block works (a power of two up
/// to 8), with the shared regions of the idle warps after it: room for
/// larger tables. With `WIDE`, `spread` whole warps take each row together
/// (a `Unit`, `width` ignored), for rows too few to fill the device:
/// counting, each warp takes its own chunks of A's row; filling, all of the
/// unit's lanes take each B row, the unit synchronising by a named barrier
/// between entries, and the row's columns are ranked over the whole table.
/// A row's hash table is in global memory where
/// `toff` gives it slots (`toff[t + 1] - toff[t]` from `toff[t] - toff[0]`
/// of `tkeys`, `tvals`; `toff` null: none does), else in the group's share of
/// the shared regions: in the count pass `min(table_slots(min(products,
/// b_cols)), 32 width spread)` slots, in the fill pass `table_slots(counts[i])` (at most
/// `8 width spread`; larger rows have global tables).
///
/// The group walks A's row `width` entries at a time (its lanes first read
/// the entries and the bounds of the B rows they name together). Where the
/// B rows are long, entry by entry: the lanes take the entries of the B
/// row it names (distinct columns, so no two lanes add to the same column
/// at once), and the group synchronises before the next entry. Where they
/// are short (no more rounds of `width` products than entries; filling,
/// at most half as many), the
/// products of the `width` entries flattened over the lanes (`flat_chunk`:
/// lanes meeting one column add to it in the products' order). Either way
/// each column's products are added in the order of the host's Gustavson
/// accumulators (for a product: A's entries, and within each B's; for P:
/// B's row, then per component c with w = -omega dinv_rc, skipped when 0,
/// A's row bs k + c and the B rows its entries name, adding (w a) b), so
/// every value is the host's bit for bit, whatever the width.
///
/// Without `FILL` (the count pass, kernel `spgemm_count_rows`) it writes
/// each row's distinct columns to `counts[i]` (and their largest to
/// `overflow[1]`), or u64::MAX for a row that fills its table (adding 1 to
/// `overflow[0]`); with `retry` nonzero it skips the rows whose count is not
/// u64::MAX. With `FILL` (the fill pass, `spgemm_fill_rows`) it writes row i
/// from `c_ptr[i]`, sorted by column: the table is compacted, then each entry's place is the number of
/// smaller columns among the row's (`rank_distinct`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn group_rows<const FILL: bool, const WIDE: bool>(
    width: u32,
    spread: u32,
    row0: usize,
    rows: usize,
    retry: u32,
    bs: usize,
    omega: f64,
    dinv: *const f64,
    a_ptr: *const u64,
    a_col: *const u32,
    a_val: *const f64,
    b_ptr: *const u64,
    b_col: *const u32,
    b_val: *const f64,
    b_cols: u64,
    toff: *const u64,
    tkeys: *mut u32,
    tvals: *mut f64,
    c_ptr: *const u64,
    counts: *mut u64,
    overflow: *mut u64,
    c_col: *mut u32,
    c_val: *mut f64,
) {
    let width = if width.is_power_of_two() && width <= 32 {
        width
    } else {
        32
    };
    let spread = if spread.is_power_of_two() && spread <= BLOCK_WARPS {
        spread
    } else {
        1
    };
    // SAFETY: reading a special register has no preconditions.
    if !WIDE && (unsafe { core::arch::nvptx::_thread_idx_x() } / 32) % spread != 0 {
        return;
    }
    // Several warps to a row: whole warps.
    let width = if WIDE { 32 } else { width };
    let unit = Unit::of(if WIDE { spread } else { 1 });
    let g = Group::of(width);
    let (w, rank) = (width as usize, g.rank as usize);
    // The lanes that take a row together, and this lane's rank among them.
    let (uw, urank) = (w * unit.spread as usize, unit.index as usize * w + rank);
    let room = w * spread as usize;
    let per_warp = 32 / w;
    let fill = FILL;
    let shared = g.table(spread);
    let stride = grid_threads() / 32 / spread as usize * per_warp;
    // Warp-uniform: the warp's groups take rows first .. first + per_warp.
    let mut first = global_id() / 32 / spread as usize * per_warp;
    // The most distinct columns of this lane's rows (count pass).
    let mut most = 0u64;
    while first < rows {
        let t = first + g.index();
        first += stride;
        let i = row0 + t;
        let active = t < rows && (retry == 0 || *counts.add(i) == u64::MAX);
        let global = if !active || toff.is_null() {
            0
        } else {
            (*toff.add(t + 1) - *toff.add(t)) as usize
        };
        let mine = if active && !fill && global == 0 {
            row_products(i, bs, dinv, a_ptr, a_col, b_ptr, rank, w)
        } else {
            0
        };
        let products = g.sum_u64(mine);
        let table = if !active {
            RowTable {
                keys: shared as *mut u32,
                vals: core::ptr::null_mut(),
                slots: 0,
                fill,
            }
        } else if global > 0 {
            let base = (*toff.add(t) - *toff) as usize;
            RowTable {
                keys: tkeys.add(base),
                vals: tvals.add(base),
                slots: global,
                fill,
            }
        } else if fill {
            RowTable {
                keys: shared as *mut u32,
                vals: shared.add(32 * room) as *mut f64,
                slots: table_slots(*counts.add(i)) as usize,
                fill,
            }
        } else {
            let bound = if products < b_cols { products } else { b_cols };
            let s = table_slots(bound) as usize;
            RowTable {
                keys: shared as *mut u32,
                vals: core::ptr::null_mut(),
                slots: if s < 32 * room { s } else { 32 * room },
                fill,
            }
        };
        let mut s = urank;
        while s < table.slots {
            *table.keys.add(s) = EMPTY;
            if fill {
                *table.vals.add(s) = 0.0;
            }
            s += uw;
        }
        unit.sync();
        let live = table.slots > 0;
        let mut new = 0u64;
        let mut full = false;
        // The products of A's entries lo..hi (each scaled by `scale` first
        // when `scaled`) with the B rows they name, `width` entries at a
        // time: flattened over the lanes where that takes no more rounds
        // than entries (filling: half as many; short B rows, `flat_chunk`),
        // else entry by entry.
        // The warp takes as many steps as its longest walk.
        let walk = |lo: usize, hi: usize, scale: f64, scaled: bool, full: &mut bool| {
            let hi = if live { hi } else { lo };
            let most = warp_max_u64((hi - lo) as u64) as usize;
            let mut n = 0u64;
            // Counting with several warps to a row, each takes its own
            // chunks of the row (the order does not matter); filling, every
            // warp reads each chunk and the unit's lanes share the B rows.
            let (mut base, chunk_step) = if fill {
                (0, w)
            } else {
                (unit.index as usize * w, uw)
            };
            while base < most {
                let p = lo + base + rank;
                let (mut q_lo, mut q_len, mut aik) = (0u64, 0u32, 0.0f64);
                if p < hi {
                    let k = *a_col.add(p) as usize;
                    q_lo = *b_ptr.add(k);
                    q_len = (*b_ptr.add(k + 1) - q_lo) as u32;
                    if fill {
                        aik = if scaled {
                            scale * *a_val.add(p)
                        } else {
                            *a_val.add(p)
                        };
                    }
                }
                let steps = if most - base < w { most - base } else { w };
                // A unit filling one row never flattens (its warps' adds
                // would not be ordered): no running lengths needed.
                let (incl, total, rounds) = if fill && WIDE {
                    (0, 0, 0)
                } else {
                    let incl = g.inclusive_u32(q_len);
                    let total = g.broadcast_u32(incl, g.width - 1);
                    (incl, total, warp_max_u64(u64::from(total.div_ceil(g.width))) as usize)
                };
                // Filling flattened costs more per round (the adds of one
                // column take turns): it must halve the steps.
                let flat = if fill {
                    !WIDE && 2 * rounds <= steps
                } else {
                    rounds <= steps
                };
                if flat {
                    let entry = (q_lo, q_len, aik);
                    let sums = (incl, total, rounds as u32);
                    n += flat_chunk(g, &table, (b_col, b_val), entry, sums, full);
                } else {
                    for e in 0..steps as u32 {
                        let start = g.broadcast_u64(q_lo, e) as usize;
                        let len = g.broadcast_u32(q_len, e) as usize;
                        let a = if fill {
                            f64::from_bits(g.broadcast_u64(aik.to_bits(), e))
                        } else {
                            0.0
                        };
                        let (mut q, q_step) = if fill { (urank, uw) } else { (rank, w) };
                        while q < len {
                            let at = start + q;
                            n += table.add(*b_col.add(at), || a * *b_val.add(at), full);
                            q += q_step;
                        }
                        if fill {
                            unit.sync();
                        } else {
                            g.sync();
                        }
                    }
                }
                base += chunk_step;
            }
            n
        };
        if dinv.is_null() {
            let (lo, hi) = if active {
                (*a_ptr.add(i) as usize, *a_ptr.add(i + 1) as usize)
            } else {
                (0, 0)
            };
            new += walk(lo, hi, 1.0, false, &mut full);
        } else {
            let bs = bs.max(1);
            let (k, r) = (i / bs, i % bs);
            if live {
                let mut q = *b_ptr.add(i) as usize + urank;
                while q < *b_ptr.add(i + 1) as usize {
                    new += table.add(*b_col.add(q), || *b_val.add(q), &mut full);
                    q += uw;
                }
            }
            unit.sync();
            for c in 0..bs {
                let scale = if live {
                    -omega * *dinv.add((k * bs + r) * bs + c)
                } else {
                    0.0
                };
                let row = k * bs + c;
                let (lo, hi) = if scale != 0.0 {
                    (*a_ptr.add(row) as usize, *a_ptr.add(row + 1) as usize)
                } else {
                    (0, 0)
                };
                new += walk(lo, hi, scale, true, &mut full);
            }
        }
        if fill && !WIDE {
            let count = table.compact(g);
            if active {
                let start = *c_ptr.add(i) as usize;
                rank_distinct(|u| *table.keys.add(u), count, rank, w, |e, place| {
                    *c_col.add(start + place) = *table.keys.add(e);
                    *c_val.add(start + place) = *table.vals.add(e);
                });
            }
        } else if fill {
            // Several warps: each column's place among the whole table's
            // (empty slots hold EMPTY, above every column).
            if active {
                let start = *c_ptr.add(i) as usize;
                let key = |u| *table.keys.add(u);
                rank_distinct(key, table.slots, urank, uw, |e, place| {
                    let j = *table.keys.add(e);
                    if j != EMPTY {
                        *c_col.add(start + place) = j;
                        *c_val.add(start + place) = *table.vals.add(e);
                    }
                });
            }
        } else {
            let mut distinct = g.sum_u64(new);
            let mut overflowed = g.sum_u64(u64::from(full)) > 0;
            if WIDE {
                // The unit's warps' counts, summed by each warp.
                let sums = unit.sums();
                if rank == 0 {
                    *sums.add(unit.warp as usize) = if overflowed { u64::MAX } else { distinct };
                }
                unit.sync();
                let lead = (unit.warp - unit.index) as usize;
                distinct = 0;
                overflowed = false;
                for q in 0..unit.spread as usize {
                    let v = *sums.add(lead + q);
                    if v == u64::MAX {
                        overflowed = true;
                    } else {
                        distinct += v;
                    }
                }
            }
            if rank == 0 && unit.index == 0 && active {
                if overflowed {
                    *counts.add(i) = u64::MAX;
                    atomic_add_u64(overflow, 1);
                } else {
                    *counts.add(i) = distinct;
                    if distinct > most {
                        most = distinct;
                    }
                }
            }
        }
        unit.sync();
    }
    // One atomic per warp for the largest count (one per row would queue
    // millions of atomics on one address).
    let most = warp_max_u64(most);
    if g.first == 0 && rank == 0 && most > 0 {
        atomic_max_u64(overflow.add(1), most);
    }
}

/// The passes of `group_rows` as kernels of their own (count or fill, one
/// group or whole warps per row), so that no pass's registers weigh on
/// another's.
macro_rules! product_pass {
    ($(#[$doc:meta])* $name:ident, $fill:literal, $wide:literal) => {
        $(#[$doc])*
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            width: u32,
            spread: u32,
            row0: usize,
            rows: usize,
            retry: u32,
            bs: usize,
            omega: f64,
            dinv: *const f64,
            a_ptr: *const u64,
            a_col: *const u32,
            a_val: *const f64,
            b_ptr: *const u64,
            b_col: *const u32,
            b_val: *const f64,
            b_cols: u64,
            toff: *const u64,
            tkeys: *mut u32,
            tvals: *mut f64,
            c_ptr: *const u64,
            counts: *mut u64,
            overflow: *mut u64,
            c_col: *mut u32,
            c_val: *mut f64,
        ) {
            group_rows::<$fill, $wide>(
                width, spread, row0, rows, retry, bs, omega, dinv, a_ptr, a_col, a_val, b_ptr,
                b_col, b_val, b_cols, toff, tkeys, tvals, c_ptr, counts, overflow, c_col, c_val,
            );
        }
    };
}

product_pass!(
    /// The count pass of `group_rows` (see there): each row's distinct
    /// columns into `counts`; `tvals`, `c_ptr`, `c_col` and `c_val` unused.
    spgemm_count_rows,
    false,
    false
);

product_pass!(
    /// The fill pass of `group_rows` (see there): row i's columns and
    /// values, sorted, from `c_ptr[i]`.
    spgemm_fill_rows,
    true,
    false
);

product_pass!(
    /// `spgemm_count_rows` with `spread` whole warps per row (few rows).
    spgemm_count_wide,
    false,
    true
);

product_pass!(
    /// `spgemm_fill_rows` with `spread` whole warps per row (few rows).
    spgemm_fill_wide,
    true,
    true
);

/// `op` folded over the warp's lanes by a butterfly (every lane gets the
/// result; `op` associative and commutative). Every lane must call it.
#[inline(always)]
fn warp_fold_u64(v: u64, op: impl Fn(u64, u64) -> u64) -> u64 {
    fold_u64_within(v, 32, op)
}

/// `op` folded by a butterfly over each aligned group of `width` lanes (a
/// power of two up to 32; every lane gets its group's result). Full-warp
/// shuffles: every lane of the warp must call it, from warp-uniform control
/// flow.
#[inline(always)]
fn fold_u64_within(mut v: u64, width: u32, op: impl Fn(u64, u64) -> u64) -> u64 {
    let mut d = width / 2;
    while d > 0 {
        let (lo, hi) = split(v);
        let (l2, h2): (u32, u32);
        // SAFETY: full-warp shuffles from uniform control flow; d < width
        // keeps each within its group.
        unsafe {
            asm!("shfl.sync.bfly.b32 {r}, {v}, {d}, 31, 0xffffffff;", r = out(reg32) l2, v = in(reg32) lo, d = in(reg32) d);
            asm!("shfl.sync.bfly.b32 {r}, {v}, {d}, 31, 0xffffffff;", r = out(reg32) h2, v = in(reg32) hi, d = in(reg32) d);
        }
        v = op(v, join(l2, h2));
        d /= 2;
    }
    v
}

/// C = alpha A + beta B (same shape): row i is the merge of the two sorted
/// rows, an entry present in both summed as `0 + alpha a + beta b` as on the
/// host. With a null `c_ptr` it counts each row's entries into `counts`;
/// otherwise it writes them from `c_ptr[i]`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_add(
    nrows: usize,
    alpha: f64,
    a_ptr: *const u64,
    a_col: *const u32,
    a_val: *const f64,
    beta: f64,
    b_ptr: *const u64,
    b_col: *const u32,
    b_val: *const f64,
    c_ptr: *const u64,
    counts: *mut u64,
    c_col: *mut u32,
    c_val: *mut f64,
) {
    let mut i = global_id();
    while i < nrows {
        let (mut p, pe) = (*a_ptr.add(i) as usize, *a_ptr.add(i + 1) as usize);
        let (mut q, qe) = (*b_ptr.add(i) as usize, *b_ptr.add(i + 1) as usize);
        let mut out = if c_ptr.is_null() {
            0
        } else {
            *c_ptr.add(i) as usize
        };
        let start = out;
        while p < pe || q < qe {
            let take_a = q == qe || (p < pe && *a_col.add(p) <= *b_col.add(q));
            let take_b = p == pe || (q < qe && *b_col.add(q) <= *a_col.add(p));
            let (mut j, mut v) = (0u32, 0.0f64);
            if take_a {
                j = *a_col.add(p);
                v += alpha * *a_val.add(p);
                p += 1;
            }
            if take_b {
                j = *b_col.add(q);
                v += beta * *b_val.add(q);
                q += 1;
            }
            if !c_ptr.is_null() {
                *c_col.add(out) = j;
                *c_val.add(out) = v;
            }
            out += 1;
        }
        if c_ptr.is_null() {
            *counts.add(i) = (out - start) as u64;
        }
        i += grid_threads();
    }
}

/// With `inside` 1, the entries of rows 0..nrows (columns increasing)
/// whose column lies in lo..hi, their columns less lo (a rank's owned block
/// of its rows, or the block of one column range); with `inside` 0, those
/// whose column lies outside it, their columns kept (the ghost entries of a
/// rank's rows). `ROW_LANES` lanes per row, each finding the row's run on
/// lo..hi (`own_run`). With a null `c_ptr` the first lane counts the row's
/// entries into `counts`; otherwise the lanes write every `ROW_LANES`th
/// entry at its `column_range_position` from `c_ptr[i]`, in the row's
/// order.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_column_range(
    nrows: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    lo: u32,
    hi: u32,
    inside: u32,
    c_ptr: *const u64,
    counts: *mut u64,
    c_col: *mut u32,
    c_val: *mut f64,
) {
    let inside = inside != 0;
    let (lane, groups) = (global_id() % ROW_LANES, grid_threads() / ROW_LANES);
    let mut i = global_id() / ROW_LANES;
    while i < nrows {
        let (start, end) = (*ptr.add(i) as usize, *ptr.add(i + 1) as usize);
        let cols = core::slice::from_raw_parts(col.add(start), end - start);
        let (below, above) = own_run(cols, (lo, hi));
        if c_ptr.is_null() {
            if lane == 0 {
                let run = above - below;
                *counts.add(i) = if inside { run } else { cols.len() - run } as u64;
            }
        } else {
            let out = *c_ptr.add(i) as usize;
            cut_row(lane, (cols, val.add(start)), (below, above, inside, lo), out, (c_col, c_val));
        }
        i += groups;
    }
}

/// This lane's share (every `ROW_LANES`th entry from `lane`) of one row's
/// cut: the row's entries inside (`inside`) or outside the run
/// `below..above` of its columns on lo..hi, written in the row's order from
/// `out` (`column_range_position`), the columns less lo inside.
#[inline(always)]
unsafe fn cut_row(
    lane: usize,
    (cols, vals): (&[u32], *const f64),
    (below, above, inside, lo): (usize, usize, bool, u32),
    out: usize,
    (c_col, c_val): (*mut u32, *mut f64),
) {
    let mut k = lane;
    while k < cols.len() {
        if let Some(o) = column_range_position(k, (below, above), inside) {
            let j = cols[k];
            *c_col.add(out + o) = if inside { j - lo } else { j };
            *c_val.add(out + o) = *vals.add(k);
        }
        k += ROW_LANES;
    }
}

/// The entries outside the columns lo..hi of the listed rows `idx[0..k]`
/// (increasing) of a CSR matrix, their columns kept, written compactly:
/// listed row j's from `offs[idx[j]]` (the prefix sum, over all rows, of
/// the counts of `csr_column_range`'s count pass: rows not listed hold
/// none), with `c_ptr[j]` that offset and `c_ptr[k] = total`.
/// `ROW_LANES` lanes per listed row, placing entries as `csr_column_range`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_outside_listed(
    k: usize,
    idx: *const u64,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    lo: u32,
    hi: u32,
    offs: *const u64,
    total: u64,
    c_ptr: *mut u64,
    c_col: *mut u32,
    c_val: *mut f64,
) {
    let (lane, groups) = (global_id() % ROW_LANES, grid_threads() / ROW_LANES);
    if global_id() == 0 {
        *c_ptr.add(k) = total;
    }
    let mut j = global_id() / ROW_LANES;
    while j < k {
        let i = *idx.add(j) as usize;
        let (start, end) = (*ptr.add(i) as usize, *ptr.add(i + 1) as usize);
        let cols = core::slice::from_raw_parts(col.add(start), end - start);
        let (below, above) = own_run(cols, (lo, hi));
        let out = *offs.add(i) as usize;
        if lane == 0 {
            *c_ptr.add(j) = out as u64;
        }
        cut_row(lane, (cols, val.add(start)), (below, above, false, lo), out, (c_col, c_val));
        j += groups;
    }
}

/// C = [A | B] for A and B of `nrows` rows, B's columns numbered after
/// A's (`shift` added to each): row i of C is row i of A, then row i of B
/// shifted, so its columns stay increasing and `c_ptr[i] = a_ptr[i] +
/// b_ptr[i]` (written here, entry `nrows` too). `ROW_LANES` lanes per row,
/// each copying every `ROW_LANES`th entry of the joined row.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_beside(
    nrows: usize,
    a_ptr: *const u64,
    a_col: *const u32,
    a_val: *const f64,
    b_ptr: *const u64,
    b_col: *const u32,
    b_val: *const f64,
    shift: u32,
    c_ptr: *mut u64,
    c_col: *mut u32,
    c_val: *mut f64,
) {
    let (lane, groups) = (global_id() % ROW_LANES, grid_threads() / ROW_LANES);
    if global_id() == 0 {
        *c_ptr = *a_ptr + *b_ptr;
    }
    let mut i = global_id() / ROW_LANES;
    while i < nrows {
        let (a0, a1) = (*a_ptr.add(i) as usize, *a_ptr.add(i + 1) as usize);
        let (b0, b1) = (*b_ptr.add(i) as usize, *b_ptr.add(i + 1) as usize);
        let out = a0 + b0;
        if lane == 0 {
            *c_ptr.add(i + 1) = (a1 + b1) as u64;
        }
        let mut k = lane;
        while k < a1 - a0 {
            *c_col.add(out + k) = *a_col.add(a0 + k);
            *c_val.add(out + k) = *a_val.add(a0 + k);
            k += ROW_LANES;
        }
        let out = out + (a1 - a0);
        let mut k = lane;
        while k < b1 - b0 {
            *c_col.add(out + k) = *b_col.add(b0 + k) + shift;
            *c_val.add(out + k) = *b_val.add(b0 + k);
            k += ROW_LANES;
        }
        i += groups;
    }
}

/// counts[j] += the entries of column j (`counts` zeroed, one per column),
/// and pos[p] = a place for entry p among its column's entries, distinct
/// within the column (in no particular order: `csr_rank_rows` orders the
/// rows after the scatter). Each warp takes 32 consecutive entries at a
/// time; the lanes meeting one column (`match.any`) add their number with
/// one atomic and take consecutive places from its old value.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn csr_column_counts(
    nnz: usize,
    col: *const u32,
    counts: *mut u64,
    pos: *mut u32,
) {
    let lane = lane();
    let mut first = global_id() - lane as usize;
    while first < nnz {
        let p = first + lane as usize;
        let here = p < nnz;
        let c = if here { *col.add(p) } else { 0 };
        let same = warp_match_any(c) & warp_ballot(here);
        let before = (same & ((1u32 << lane) - 1)).count_ones();
        let mut base = 0u64;
        if here && before == 0 {
            base = atomic_add_u64(counts.add(c as usize), u64::from(same.count_ones()));
        }
        let leader = same.trailing_zeros().min(31);
        let (lo, hi) = split(base);
        let base = join(shfl_idx_b32(lo, leader), shfl_idx_b32(hi, leader));
        if here {
            *pos.add(p) = base as u32 + before;
        }
        first += grid_threads();
    }
}

/// Scatters A into its transpose: entry p = (i, j) goes to row j at
/// `t_ptr[j] + pos[p]` (the places `csr_column_counts` handed out), no
/// atomics, as one 16-byte store of (i, value bits) into `entries` (two
/// u64 per entry: one memory sector per entry where separate column and
/// value arrays take two). The order within a row is then arbitrary:
/// `csr_rank_rows` fixes it and splits the pairs.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_transpose_scatter(
    nrows: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    t_ptr: *const u64,
    pos: *const u32,
    entries: *mut u64,
) {
    let mut i = global_id();
    while i < nrows {
        for p in *ptr.add(i) as usize..*ptr.add(i + 1) as usize {
            let slot = *t_ptr.add(*col.add(p) as usize) as usize + *pos.add(p) as usize;
            store_pair(entries.add(2 * slot), i as u64, (*val.add(p)).to_bits());
        }
        i += grid_threads();
    }
}

/// Stores (a, b) at `p` (16-byte aligned) in one `st.global.v2.u64`.
#[inline(always)]
unsafe fn store_pair(p: *mut u64, a: u64, b: u64) {
    asm!(
        "st.global.v2.u64 [{p}], {{{a}, {b}}};",
        p = in(reg64) p,
        a = in(reg64) a,
        b = in(reg64) b,
    );
}

/// Writes every row of the (column, value bits) pairs `entries` (two u64
/// per entry, the rows given by `ptr`) sorted by column into (`out_col`,
/// `out_val`), one warp per row: each entry goes to the place given by the
/// number of smaller columns in its row (columns distinct within a row;
/// `rank_distinct`: len * ceil(len / 128) reads per lane).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn csr_rank_rows(
    nrows: usize,
    ptr: *const u64,
    entries: *const u64,
    out_col: *mut u32,
    out_val: *mut f64,
) {
    let lane = lane() as usize;
    let mut i = global_id() / 32;
    while i < nrows {
        let (start, end) = (*ptr.add(i) as usize, *ptr.add(i + 1) as usize);
        let pairs = entries.add(2 * start);
        let key = |u: usize| *pairs.add(2 * u) as u32;
        rank_distinct(key, end - start, lane, 32, |e, place| {
            *out_col.add(start + place) = key(e);
            *out_val.add(start + place) = f64::from_bits(*pairs.add(2 * e + 1));
        });
        i += grid_threads() / 32;
    }
}

/// Rows of y = A x, `ROW_LANES` lanes per row in `row_sum`'s order (lane l
/// of a row's group adds entries l, l + 8, .., then the halving tree by
/// shuffles): the warps `first, first + stride, ..` each take the next
/// 32 / `ROW_LANES` rows. Every lane of the warp calls it.
#[inline(always)]
unsafe fn spmv_rows(
    (first, stride): (usize, usize),
    nrows: usize,
    (ptr, col, val): (*const u64, *const u32, *const f64),
    x: *const f64,
    y: *mut f64,
) {
    const ROWS: usize = 32 / ROW_LANES;
    let lane = lane() as usize;
    let (g, l) = (lane / ROW_LANES, lane % ROW_LANES);
    let mut w = first;
    while w * ROWS < nrows {
        let i = w * ROWS + g;
        let mut s = 0.0f64;
        if i < nrows {
            let (lo, hi) = (*ptr.add(i) as usize, *ptr.add(i + 1) as usize);
            let mut p = lo + l;
            while p < hi {
                s += *val.add(p) * *x.add(*col.add(p) as usize);
                p += ROW_LANES;
            }
        }
        let mut d = ROW_LANES as u32 / 2;
        while d > 0 {
            s = s + s.shfl_down(d);
            d /= 2;
        }
        if i < nrows && l == 0 {
            *y.add(i) = s;
        }
        w += stride;
    }
}

/// y = A x, `ROW_LANES` lanes per row, each row summed in `row_sum`'s order
/// (as the host's Lanczos products).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_spmv(
    nrows: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    x: *const f64,
    y: *mut f64,
) {
    let warps = (global_id() / 32, grid_threads() / 32);
    spmv_rows(warps, nrows, (ptr, col, val), x, y);
}

/// Entries `first, first + stride, ..` (below `n`) of y = D x for the block
/// diagonal D (`blocks` row-major, bs^2 per node), each summed over its
/// block row in column order.
#[inline(always)]
unsafe fn block_mul_rows(
    (first, stride): (usize, usize),
    n: usize,
    bs: usize,
    blocks: *const f64,
    x: *const f64,
    y: *mut f64,
) {
    let bs = bs.max(1);
    let mut i = first;
    while i < n {
        let (k, r) = (i / bs, i % bs);
        let mut s = 0.0;
        for c in 0..bs {
            s += *blocks.add((k * bs + r) * bs + c) * *x.add(k * bs + c);
        }
        *y.add(i) = s;
        i += stride;
    }
}

/// y = D x for the block diagonal D (`blocks` row-major, bs^2 per node), one
/// thread per row, each entry summed over its block row in column order.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_block_mul(
    n: usize,
    bs: usize,
    blocks: *const f64,
    x: *const f64,
    y: *mut f64,
) {
    block_mul_rows((global_id(), grid_threads()), n, bs, blocks, x, y);
}

/// partial[c] for the chunks c = `first, first + stride, ..` of
/// `setup_dot_chunks`, one warp per chunk (`first` and `stride` count warps;
/// every lane of the warp calls it).
#[inline(always)]
unsafe fn dot_chunks(
    (first, stride): (usize, usize),
    n: usize,
    x: *const f64,
    y: *const f64,
    partial: *mut f64,
) {
    let chunks = n.div_ceil(DOT_CHUNK);
    let lane = lane() as usize;
    let mut c = first;
    while c < chunks {
        let lo = c * DOT_CHUNK;
        let hi = if n - lo < DOT_CHUNK { n } else { lo + DOT_CHUNK };
        let mut s = 0.0f64;
        let mut i = lo + lane;
        while i < hi {
            s += *x.add(i) * *y.add(i);
            i += 32;
        }
        let s = warp_sum(s);
        if lane == 0 {
            *partial.add(c) = s;
        }
        c += stride;
    }
}

/// partial[c] = the sum of x_i y_i over chunk c of `DOT_CHUNK` entries in
/// `chunk_dot`'s order, one warp per chunk (lane l adds entries l, l + 32,
/// .., then the fixed shuffle tree of `warp_sum`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_dot_chunks(
    n: usize,
    x: *const f64,
    y: *const f64,
    partial: *mut f64,
) {
    dot_chunks((global_id() / 32, grid_threads() / 32), n, x, y, partial);
}

/// v[i] = `lanczos_start(first + i)` for i below `own`, 0 for the rest of
/// the n entries (a rank's rows of the start vector, then its ghosts).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_lanczos_start(n: usize, first: usize, own: usize, v: *mut f64) {
    let mut i = global_id();
    while i < n {
        *v.add(i) = if i < own { lanczos_start((first + i) as u32) } else { 0.0 };
        i += grid_threads();
    }
}

/// scalars[at] = `fold_partials` of partial[0..m] (chunks of `DOT_CHUNK`
/// partials, each summed in one warp's lane order, the chunks' sums added in
/// order from 0), or the square root of its absolute value when `root`. One
/// warp: every lane of it calls this; a full chunk's 32 loads per lane are
/// issued together, so the fold waits for memory once per chunk.
#[inline(always)]
unsafe fn fold_partials(m: usize, partial: *const f64, root: bool, at: usize, scalars: *mut f64) {
    let lane = lane() as usize;
    let mut s = 0.0f64;
    let mut lo = 0;
    while lo < m {
        let mut t = 0.0f64;
        if m - lo >= DOT_CHUNK {
            let p = partial.add(lo + lane);
            let v: [f64; DOT_CHUNK / 32] = core::array::from_fn(|k| *p.add(32 * k));
            t = v.iter().fold(t, |t, x| t + x);
        } else {
            let mut i = lo + lane;
            while i < m {
                t += *partial.add(i);
                i += 32;
            }
        }
        // lane 0 holds the chunk's sum (and so the running total)
        s += warp_sum(t);
        lo += DOT_CHUNK;
    }
    if lane == 0 {
        *scalars.add(at) = if root { abs(s).sqrt_rn() } else { s };
    }
}

/// scalars[at] = the partials' sum as the host's `fold_partials` adds them
/// (the fold of `setup_dot_chunks`' partials), or the square root of its
/// absolute value when `root` != 0: a Lanczos scalar kept on the device. The
/// first warp of the grid, O(m / 32) per lane.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_fold_partials(
    m: usize,
    partial: *const f64,
    root: u32,
    at: usize,
    scalars: *mut f64,
) {
    if global_id() < 32 {
        fold_partials(m, partial, root != 0, at, scalars);
    }
}

/// Entries `first, first + stride, ..` of w -= al v + b u, with al =
/// scalars[al_at] and b = scalars[b_at].
#[inline(always)]
unsafe fn lanczos_update_rows(
    (first, stride): (usize, usize),
    n: usize,
    (scalars, al_at, b_at): (*const f64, usize, usize),
    v: *const f64,
    u: *const f64,
    w: *mut f64,
) {
    let (al, b) = (*scalars.add(al_at), *scalars.add(b_at));
    let mut i = first;
    while i < n {
        *w.add(i) -= al * *v.add(i) + b * *u.add(i);
        i += stride;
    }
}

/// w_i -= al v_i + b u_i, with al = scalars[al_at] and b = scalars[b_at].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_lanczos_update(
    n: usize,
    scalars: *const f64,
    al_at: usize,
    v: *const f64,
    b_at: usize,
    u: *const f64,
    w: *mut f64,
) {
    let at = (scalars, al_at, b_at);
    lanczos_update_rows((global_id(), grid_threads()), n, at, v, u, w);
}

/// Entries `first, first + stride, ..` of w /= b, with b = scalars[b_at].
#[inline(always)]
unsafe fn divide_rows((first, stride): (usize, usize), n: usize, b: f64, w: *mut f64) {
    let mut i = first;
    while i < n {
        *w.add(i) /= b;
        i += stride;
    }
}

/// w_i /= b, with b = scalars[b_at].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_divide(
    n: usize,
    scalars: *const f64,
    b_at: usize,
    w: *mut f64,
) {
    divide_rows((global_id(), grid_threads()), n, *scalars.add(b_at), w);
}

/// Runs `count` recorded operations (`ops`, `REPLAY_WORDS` words each; the
/// opcodes `REPLAY_*` of `crate::amg` name them and their words) in order,
/// each over the whole grid with the per-item code of its own kernel above
/// (`setup_spmv`, `setup_block_mul`, `setup_dot_chunks` then
/// `setup_fold_partials` by the first warp, `setup_lanczos_update`,
/// `setup_divide`), a grid barrier after each: a sequence of small launches
/// (a Lanczos estimate's steps) in one, with the same results bit for bit.
///
/// # Safety
/// A cooperative launch (every block resident at once); `bar` as
/// `sync_grid` asks; each operation's addresses and lengths as its kernel
/// asks.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn setup_replay(ops: *const u64, count: usize, bar: *mut u32) {
    let all = (global_id(), grid_threads());
    for k in 0..count {
        let w = |j: usize| *ops.add(k * REPLAY_WORDS + j);
        let (n, f) = (w(1) as usize, |j: usize| w(j) as *mut f64);
        match w(0) {
            REPLAY_SPMV => {
                let a = (w(2) as *const u64, w(3) as *const u32, f(4) as *const f64);
                spmv_rows((all.0 / 32, all.1 / 32), n, a, f(5), f(6));
            }
            REPLAY_BLOCK_MUL => block_mul_rows(all, n, w(2) as usize, f(3), f(4), f(5)),
            REPLAY_DOT => {
                dot_chunks((all.0 / 32, all.1 / 32), n, f(2), f(3), f(4));
                sync_grid(bar);
                if all.0 < 32 {
                    fold_partials(n.div_ceil(DOT_CHUNK), f(4), w(5) != 0, w(6) as usize, f(7));
                }
            }
            REPLAY_UPDATE => {
                let at = (f(2) as *const f64, w(3) as usize, w(5) as usize);
                lanczos_update_rows(all, n, at, f(4), f(6), f(7));
            }
            REPLAY_DIVIDE => divide_rows(all, n, *f(2).add(w(3) as usize), f(4)),
            _ => {}
        }
        sync_grid(bar);
    }
}

/// Entries of one warp's tile of the exclusive scan (16 per lane).
const SCAN_TILE: usize = 512;

/// `shfl.sync.up.b32` over the full warp: the value of lane `lane - delta`
/// (own value below `delta`).
#[inline(always)]
fn shfl_up_b32(v: u32, delta: u32) -> u32 {
    let r: u32;
    // SAFETY: a full-warp shuffle, called from converged warps only.
    unsafe {
        asm!(
            "shfl.sync.up.b32 {r}, {v}, {d}, 0, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            d = in(reg32) delta,
        );
    }
    r
}

/// `shfl.sync.idx.b32` over the full warp: the value of lane `src`.
#[inline(always)]
fn shfl_idx_b32(v: u32, src: u32) -> u32 {
    let r: u32;
    // SAFETY: as above.
    unsafe {
        asm!(
            "shfl.sync.idx.b32 {r}, {v}, {s}, 31, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            s = in(reg32) src,
        );
    }
    r
}

#[inline(always)]
fn split(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

#[inline(always)]
fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// The inclusive prefix sum of `v` over the warp's lanes.
#[inline(always)]
fn warp_inclusive(mut v: u64, lane: u32) -> u64 {
    let mut d = 1;
    while d < 32 {
        let (lo, hi) = split(v);
        let t = join(shfl_up_b32(lo, d), shfl_up_b32(hi, d));
        if lane >= d {
            v += t;
        }
        d *= 2;
    }
    v
}

/// Lane `src`'s value of `v`.
#[inline(always)]
fn warp_broadcast(v: u64, src: u32) -> u64 {
    let (lo, hi) = split(v);
    join(shfl_idx_b32(lo, src), shfl_idx_b32(hi, src))
}

/// First pass of the exclusive scan of `x` (n values, then an implied 0 at
/// index n): sums[w] = the sum of warp tile w (`SCAN_TILE` entries),
/// grid-stride over tiles; any grid of whole warps.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn scan_tile_sums(n: usize, x: *const u64, sums: *mut u64) {
    let lane = (global_id() & 31) as u32;
    let tiles = (n + 1).div_ceil(SCAN_TILE);
    let warps = grid_threads() / 32;
    let mut w = global_id() / 32;
    while w < tiles {
        let mut s = 0u64;
        for j in 0..SCAN_TILE / 32 {
            let idx = w * SCAN_TILE + j * 32 + lane as usize;
            if idx < n {
                s += *x.add(idx);
            }
        }
        let total = warp_inclusive(s, lane);
        if lane == 31 {
            *sums.add(w) = total;
        }
        w += warps;
    }
}

/// Second pass: the exclusive scan of the `tiles` tile sums in place, by one
/// warp (launch a single warp).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn scan_tile_offsets(tiles: usize, sums: *mut u64) {
    if global_id() >= 32 {
        return;
    }
    let lane = global_id() as u32;
    let mut carry = 0u64;
    let mut base = 0usize;
    while base < tiles {
        let idx = base + lane as usize;
        let v = if idx < tiles { *sums.add(idx) } else { 0 };
        let incl = warp_inclusive(v, lane);
        if idx < tiles {
            *sums.add(idx) = carry + incl - v;
        }
        carry += warp_broadcast(incl, 31);
        base += 32;
    }
}

/// Third pass: out[i] = the sum of x[0..i] for i in 0..=n (out holds n + 1
/// values: out[n] is the total), from the tiles' offsets; the same grid as
/// the first pass.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn scan_tile_apply(
    n: usize,
    x: *const u64,
    offsets: *const u64,
    out: *mut u64,
) {
    let lane = (global_id() & 31) as u32;
    let tiles = (n + 1).div_ceil(SCAN_TILE);
    let warps = grid_threads() / 32;
    let mut w = global_id() / 32;
    while w < tiles {
        let mut carry = *offsets.add(w);
        for j in 0..SCAN_TILE / 32 {
            let idx = w * SCAN_TILE + j * 32 + lane as usize;
            let v = if idx < n { *x.add(idx) } else { 0 };
            let incl = warp_inclusive(v, lane);
            if idx <= n {
                *out.add(idx) = carry + incl - v;
            }
            carry += warp_broadcast(incl, 31);
        }
        w += warps;
    }
}

/// slots[i] = the global hash-table slots of row i of a sparse product:
/// `table_slots(per_row[i])`, at most `cap`, and 0 where that is at most
/// `shared_max` (the row's table fits its group's shared share) or, with a
/// non-null `only_max`, where `only_max[i]` is not u64::MAX (a row whose
/// count is known).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn spgemm_slots(
    n: usize,
    per_row: *const u64,
    cap: u64,
    shared_max: u64,
    only_max: *const u64,
    slots: *mut u64,
) {
    let mut i = global_id();
    while i < n {
        let s = table_slots(*per_row.add(i));
        let s = if s < cap { s } else { cap };
        let skip = s <= shared_max || (!only_max.is_null() && *only_max.add(i) != u64::MAX);
        *slots.add(i) = if skip { 0 } else { s };
        i += grid_threads();
    }
}

/// The diagonal blocks of a CSR matrix whose columns are numbered from
/// `first` (0 for a whole matrix, a rank's first row for its rows) as
/// `BlockDiagonal::of_rows` builds them: row i (node k = i / bs, component
/// r = i % bs) adds each entry a_ij with j >= first and (j - first) / bs ==
/// k into blocks[(k bs + r) bs + (j - first) % bs] and, with `l1` nonzero,
/// |a_ij| of every other column into its diagonal entry, in column order
/// (the host's sums in the host's order). One thread per row, each writing
/// only its own block row; `blocks` holds n bs values, zeroed.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_block_diagonal(
    n: usize,
    first: usize,
    bs: usize,
    l1: u32,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    blocks: *mut f64,
) {
    let bs = bs.max(1);
    let mut i = global_id();
    while i < n {
        let (k, r) = (i / bs, i % bs);
        let row = blocks.add((k * bs + r) * bs);
        for p in *ptr.add(i) as usize..*ptr.add(i + 1) as usize {
            let j = *col.add(p) as usize;
            let x = *val.add(p);
            if j >= first && (j - first) / bs == k {
                *row.add((j - first) % bs) += x;
            } else if l1 != 0 {
                *row.add(r) += abs(x);
            }
        }
        i += grid_threads();
    }
}

/// The inverse of each of `nodes` bs x bs row-major blocks of `blocks`
/// into `inv` (`gpuq_kernels::amg::invert_block`: the host's
/// `BlockDiagonal::inverse` bit for bit), and the smallest node whose block
/// is singular or not finite into `*singular` (u64::MAX before: none; a
/// block size of 0 or above `MAX_SETUP_BLOCK` marks node 0). Grid-stride,
/// a thread per node, one atomic per thread that finds any.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_block_inverse(
    nodes: usize,
    bs: usize,
    blocks: *const f64,
    inv: *mut f64,
    singular: *mut u64,
) {
    let mut k = global_id();
    if bs == 0 || bs > MAX_SETUP_BLOCK {
        if k == 0 && nodes > 0 {
            atomic_min_u64(singular, 0);
        }
        return;
    }
    let nn = bs * bs;
    let mut m = [0.0f64; MAX_SETUP_BLOCK * MAX_SETUP_BLOCK];
    let mut first = u64::MAX;
    while k < nodes {
        let b = core::slice::from_raw_parts(blocks.add(k * nn), nn);
        let out = core::slice::from_raw_parts_mut(inv.add(k * nn), nn);
        if !invert_block(b, bs, &mut m, out) && first == u64::MAX {
            first = k as u64;
        }
        k += grid_threads();
    }
    if first != u64::MAX {
        atomic_min_u64(singular, first);
    }
}

/// `*differ` = 1 where the patterns of two CSR matrices of n rows and nnz
/// entries differ: their n + 1 row pointers and nnz columns compared entry
/// by entry (`*differ` zeroed before). Grid-stride over max(n + 1, nnz).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn csr_same_pattern(
    n: usize,
    nnz: usize,
    a_ptr: *const u64,
    a_col: *const u32,
    b_ptr: *const u64,
    b_col: *const u32,
    differ: *mut u32,
) {
    let mut i = global_id();
    while i <= n || i < nnz {
        let ptr_differs = i <= n && *a_ptr.add(i) != *b_ptr.add(i);
        if ptr_differs || (i < nnz && *a_col.add(i) != *b_col.add(i)) {
            *differ = 1;
        }
        i += grid_threads();
    }
}

/// flags[i] = 1 where row i of a CSR matrix stores only zeros (or nothing),
/// else 0, for i < n, and `*found` += the rows flagged. Grid-stride.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_zero_rows(
    n: usize,
    ptr: *const u64,
    val: *const f64,
    flags: *mut u32,
    found: *mut u64,
) {
    let mut i = global_id();
    while i < n {
        let mut zero = 1u32;
        for p in *ptr.add(i) as usize..*ptr.add(i + 1) as usize {
            if *val.add(p) != 0.0 {
                zero = 0;
                break;
            }
        }
        *flags.add(i) = zero;
        if zero != 0 {
            atomic_add_u64(found, 1);
        }
        i += grid_threads();
    }
}

/// A setup matrix (CSR, 64-bit row pointers, f64 values) as the cycle's
/// matrices: the same CSR with values of the cycle's precision, or SELL.
macro_rules! level_layouts {
    ($t:ty, $csr:ident, $sell:ident) => {
        /// The CSR arrays copied (row pointers, n + 1 of them, and columns)
        /// and the values converted: grid-stride over max(n + 1, nnz).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $csr(
            n: usize,
            nnz: usize,
            ptr: *const u64,
            col: *const u32,
            val: *const f64,
            ptr_out: *mut u64,
            col_out: *mut u32,
            val_out: *mut $t,
        ) {
            let mut i = global_id();
            while i < nnz.max(n + 1) {
                if i <= n {
                    *ptr_out.add(i) = *ptr.add(i);
                }
                if i < nnz {
                    *col_out.add(i) = *col.add(i);
                    *val_out.add(i) = *val.add(i) as $t;
                }
                i += grid_threads();
            }
        }

        /// SELL-c-sigma from CSR as `Sell::from_csr` lays it out: position
        /// q (slice q / c, lane q % c) holds row perm[q] (row q when
        /// `has_perm` is 0), its k-th entry at slice_ptr[slice] + k c + lane
        /// for k below the slice's width (slice_ptr's difference over c),
        /// the padding column 0 and value 0. Grid-stride over the n rows.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sell(
            n: usize,
            c: usize,
            has_perm: u32,
            perm: *const u32,
            slice_ptr: *const u64,
            ptr: *const u64,
            col: *const u32,
            val: *const f64,
            col_out: *mut u32,
            val_out: *mut $t,
        ) {
            let c = c.max(1);
            let mut q = global_id();
            while q < n {
                let row = if has_perm != 0 {
                    *perm.add(q) as usize
                } else {
                    q
                };
                let (s, lane) = (q / c, q % c);
                let base = *slice_ptr.add(s) as usize;
                let width = (*slice_ptr.add(s + 1) as usize - base) / c;
                let (lo, hi) = (*ptr.add(row) as usize, *ptr.add(row + 1) as usize);
                for k in 0..width {
                    let at = base + k * c + lane;
                    if lo + k < hi {
                        *col_out.add(at) = *col.add(lo + k);
                        *val_out.add(at) = *val.add(lo + k) as $t;
                    } else {
                        *col_out.add(at) = 0;
                        *val_out.add(at) = 0.0;
                    }
                }
                q += grid_threads();
            }
        }
    };
}

level_layouts!(f32, setup_to_csr_f32, setup_to_sell_f32);
level_layouts!(f64, setup_to_csr_f64, setup_to_sell_f64);

/// The row order of SELL-c-sigma for a CSR matrix (`sell_plan` of the host):
/// perm[w sigma + rank] = i for row i of window w = i / sigma, rank the rows
/// of its window that are longer, or as long and before it (a stable sort by
/// decreasing length). One thread per row, O(sigma); `perm` holds n values.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn sell_window_perm(
    n: usize,
    sigma: usize,
    ptr: *const u64,
    perm: *mut u32,
) {
    let len = |r: usize| *ptr.add(r + 1) - *ptr.add(r);
    let sigma = sigma.max(1);
    let mut i = global_id();
    while i < n {
        let first = i / sigma * sigma;
        let end = if first + sigma < n { first + sigma } else { n };
        let li = len(i);
        let mut rank = 0usize;
        for r in first..end {
            let lr = len(r);
            rank += usize::from(lr > li || (lr == li && r < i));
        }
        *perm.add(first + rank) = i as u32;
        i += grid_threads();
    }
}

/// widths[s] = c times the longest row of slice s of SELL-c-sigma: rows
/// perm[s c ..] (`has_perm` nonzero) or s c .. in order, at most c of them.
/// One thread per slice; `widths` holds n.div_ceil(c) values.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn sell_slice_widths(
    n: usize,
    c: usize,
    has_perm: u32,
    perm: *const u32,
    ptr: *const u64,
    widths: *mut u64,
) {
    let c = c.max(1);
    let slices = n.div_ceil(c);
    let mut s = global_id();
    while s < slices {
        let mut widest = 0u64;
        let end = if (s + 1) * c < n { (s + 1) * c } else { n };
        for p in s * c..end {
            let r = if has_perm != 0 {
                *perm.add(p) as usize
            } else {
                p
            };
            let l = *ptr.add(r + 1) - *ptr.add(r);
            if l > widest {
                widest = l;
            }
        }
        *widths.add(s) = widest * c as u64;
        s += grid_threads();
    }
}

/// The smoother's inverse block diagonal (bs x bs blocks, row-major, one per
/// node) as the cycle's matrix and vector.
macro_rules! smoother_diagonals {
    ($t:ty, $csr:ident, $scaled:ident) => {
        /// The block-diagonal matrix of `blocks` in CSR (`BlockDiagonal::
        /// to_csr`): row i holds columns (i / bs) bs .. + bs, its values
        /// converted. Grid-stride over max(n + 1, n bs) for n rows.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $csr(
            n: usize,
            bs: usize,
            blocks: *const f64,
            ptr_out: *mut u64,
            col_out: *mut u32,
            val_out: *mut $t,
        ) {
            let bs = bs.max(1);
            let nnz = n * bs;
            let mut e = global_id();
            while e < nnz.max(n + 1) {
                if e <= n {
                    *ptr_out.add(e) = (e * bs) as u64;
                }
                if e < nnz {
                    let (i, c) = (e / bs, e % bs);
                    *col_out.add(e) = (i / bs * bs + c) as u32;
                    *val_out.add(e) = *blocks.add(e) as $t;
                }
                e += grid_threads();
            }
        }

        /// y = omega x converted (the point diagonal of a block-1 level
        /// scaled by the smoother's damping). Grid-stride over n.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $scaled(n: usize, omega: f64, x: *const f64, y: *mut $t) {
            let mut i = global_id();
            while i < n {
                *y.add(i) = (omega * *x.add(i)) as $t;
                i += grid_threads();
            }
        }
    };
}

smoother_diagonals!(f32, amg_block_diag_csr_f32, amg_scaled_diag_f32);
smoother_diagonals!(f64, amg_block_diag_csr_f64, amg_scaled_diag_f64);

/// The tentative prolongator of one near-null-space vector `b`, before its
/// scaling: row r holds column agg[r / bs] with value b[r] (1 where `b` is
/// null: the vector of ones) (row pointers 0, 1, .., nrows). Grid-stride
/// over the rows; `ptr` holds nrows + 1 values.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_pattern(
    nrows: usize,
    bs: usize,
    agg: *const u32,
    b: *const f64,
    ptr: *mut u64,
    col: *mut u32,
    val: *mut f64,
) {
    let bs = bs.max(1);
    let mut r = global_id();
    while r <= nrows {
        *ptr.add(r) = r as u64;
        if r < nrows {
            *col.add(r) = *agg.add(r / bs);
            *val.add(r) = if b.is_null() { 1.0 } else { *b.add(r) };
        }
        r += grid_threads();
    }
}

/// counts[r] = 1 where row r's node is in an aggregate (agg[r / bs] !=
/// u32::MAX), else 0: the tentative prolongator's row lengths, whose prefix
/// sum is `tentative_pattern_at`'s `ptr`. Grid-stride over the rows.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_row_counts(
    nrows: usize,
    bs: usize,
    agg: *const u32,
    counts: *mut u64,
) {
    let bs = bs.max(1);
    let mut r = global_id();
    while r < nrows {
        *counts.add(r) = u64::from(*agg.add(r / bs) != u32::MAX);
        r += grid_threads();
    }
}

/// The tentative prolongator's pattern where some nodes are in no aggregate
/// (`agg` u32::MAX): the row offsets `ptr` given (one entry per row of a
/// node in an aggregate, none for the others), row r's entry (if any) is
/// column agg[r / bs] with value b[r] (1 where `b` is null). Grid-stride
/// over the rows.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_pattern_at(
    nrows: usize,
    bs: usize,
    agg: *const u32,
    b: *const f64,
    ptr: *const u64,
    col: *mut u32,
    val: *mut f64,
) {
    let bs = bs.max(1);
    let mut r = global_id();
    while r < nrows {
        let a = *agg.add(r / bs);
        if a != u32::MAX {
            let e = *ptr.add(r) as usize;
            *col.add(e) = a;
            *val.add(e) = if b.is_null() { 1.0 } else { *b.add(r) };
        }
        r += grid_threads();
    }
}

/// norm[a] = sqrt(sum of v^2 over row a of the transposed pattern), the
/// rows in increasing order (the host's sum in its order). One thread per
/// aggregate.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_norms(
    naggs: usize,
    t_ptr: *const u64,
    t_val: *const f64,
    norm: *mut f64,
) {
    let mut a = global_id();
    while a < naggs {
        let mut s = 0.0f64;
        for p in *t_ptr.add(a) as usize..*t_ptr.add(a + 1) as usize {
            let v = *t_val.add(p);
            s += v * v;
        }
        *norm.add(a) = s.sqrt_rn();
        a += grid_threads();
    }
}

/// counts[col[e]] += 1 for the `nnz` entries of a tentative prolongator's
/// pattern: the rows of each aggregate (one atomic per entry). Grid-stride
/// over the entries.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_counts(nnz: usize, col: *const u32, counts: *mut u64) {
    let mut e = global_id();
    while e < nnz {
        atomic_add_u64(counts.add(*col.add(e) as usize), 1);
        e += grid_threads();
    }
}

/// norm[a] = sqrt(counts[a]): the norm of the vector of ones over each
/// aggregate's rows, the host's sum of squares of ones being exact (the
/// same value as [`tentative_norms`] gives). Grid-stride over the
/// aggregates.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_count_norms(
    naggs: usize,
    counts: *const u64,
    norm: *mut f64,
) {
    let mut a = global_id();
    while a < naggs {
        *norm.add(a) = (*counts.add(a) as f64).sqrt_rn();
        a += grid_threads();
    }
}

/// val[e] = val[e] / norm[col[e]] (0 where the norm is 0) for the `nrows`
/// entries: the tentative prolongator's values. Grid-stride over the entries.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn tentative_scale(
    nrows: usize,
    col: *const u32,
    norm: *const f64,
    val: *mut f64,
) {
    let mut r = global_id();
    while r < nrows {
        let nrm = *norm.add(*col.add(r) as usize);
        *val.add(r) = if nrm == 0.0 { 0.0 } else { *val.add(r) / nrm };
        r += grid_threads();
    }
}

/// 1 for each row of the `n` rows of `ptr` holding an entry (with `empty`
/// != 0: holding none), else 0, into `flags` (counts for the prefix sum of
/// `listed_rows_scatter`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn listed_rows_flags(
    n: usize,
    ptr: *const u64,
    empty: u32,
    flags: *mut u64,
) {
    let mut i = global_id();
    while i < n {
        *flags.add(i) = u64::from((*ptr.add(i + 1) > *ptr.add(i)) != (empty != 0));
        i += grid_threads();
    }
}

/// Each row of the `n` rows of `ptr` that `listed_rows_flags` flags (with
/// the same `empty`) written at its position `offs[i]` (the exclusive
/// prefix sum of the flags) of `rows`: those rows, increasing.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn listed_rows_scatter(
    n: usize,
    ptr: *const u64,
    empty: u32,
    offs: *const u64,
    rows: *mut u64,
) {
    let mut i = global_id();
    while i < n {
        if (*ptr.add(i + 1) > *ptr.add(i)) != (empty != 0) {
            *rows.add(*offs.add(i) as usize) = i as u64;
        }
        i += grid_threads();
    }
}

/// The row pointers of an `nrows`-row matrix whose non-empty rows are
/// `rows[0..k]` (increasing) with row pointers `cptr` (k + 1 values): entry
/// i of `out` (nrows + 1 values) is `cptr` at the number of listed rows
/// below i, one thread per pointer, a binary search each.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn csr_expand_rows(
    nrows: usize,
    k: usize,
    rows: *const u32,
    cptr: *const u64,
    out: *mut u64,
) {
    let mut i = global_id();
    while i <= nrows {
        // Rows below i: every listed row is below 2^32, so a key of i past
        // that counts them all.
        let below = if i > u32::MAX as usize {
            k
        } else {
            lower_bound(rows, 0, k, i as u32)
        };
        *out.add(i) = *cptr.add(below);
        i += grid_threads();
    }
}

/// The rows `idx[0..n]` of a CSR matrix, in that order, one thread per
/// selected row. With a null `c_ptr` it counts each selected row's entries
/// into `counts`; otherwise it copies them from `c_ptr[i]`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_select_rows(
    n: usize,
    idx: *const u64,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    c_ptr: *const u64,
    counts: *mut u64,
    c_col: *mut u32,
    c_val: *mut f64,
) {
    let mut i = global_id();
    while i < n {
        let r = *idx.add(i) as usize;
        let (lo, hi) = (*ptr.add(r) as usize, *ptr.add(r + 1) as usize);
        if c_ptr.is_null() {
            *counts.add(i) = (hi - lo) as u64;
        } else {
            let out = *c_ptr.add(i) as usize;
            for p in lo..hi {
                *c_col.add(out + p - lo) = *col.add(p);
                *c_val.add(out + p - lo) = *val.add(p);
            }
        }
        i += grid_threads();
    }
}

/// A rank's extended rows (`extend_row`'s entries, `ROW_LANES` lanes per
/// row: each lane finds the row's own run, then places every `ROW_LANES`th
/// entry at its `extended_position`): row r of the `nrows` rows (`ptr`,
/// `col`, `val`; global columns, increasing) into the same positions of
/// `out_col` and `out_val`, its entries on the columns `lo..hi` first
/// (numbered from 0), then the others numbered `hi - lo` plus their index
/// in the `nghosts` increasing columns `ghosts`. O(nnz log nghosts) in all.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn csr_extend_columns(
    nrows: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    lo: u32,
    hi: u32,
    ghosts: *const u32,
    nghosts: usize,
    out_col: *mut u32,
    out_val: *mut f64,
) {
    let ghosts = core::slice::from_raw_parts(ghosts, nghosts);
    let (lane, groups) = (global_id() % ROW_LANES, grid_threads() / ROW_LANES);
    let mut r = global_id() / ROW_LANES;
    while r < nrows {
        let (start, end) = (*ptr.add(r) as usize, *ptr.add(r + 1) as usize);
        let cols = core::slice::from_raw_parts(col.add(start), end - start);
        let run = own_run(cols, (lo, hi));
        let mut k = lane;
        while k < cols.len() {
            let c = cols[k];
            let c = if c >= lo && c < hi {
                c - lo
            } else {
                // every ghost column is listed: the search ends on it
                hi - lo + ghosts.partition_point(|&g| g < c) as u32
            };
            let o = start + extended_position(k, run);
            *out_col.add(o) = c;
            *out_val.add(o) = *val.add(start + k);
            k += ROW_LANES;
        }
        r += groups;
    }
}

/// `*out` = the largest of its value and the bits of |val[e]| over the `nnz`
/// values: for non-negative doubles the bits order as the values, and a
/// NaN's (sign cleared) lie above infinity's, so a NaN value leaves NaN
/// (the host's `larger`). Each thread folds its grid-stride share, then
/// one atomic maximum. O(nnz).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn largest_magnitude(nnz: usize, val: *const f64, out: *mut u64) {
    let mut e = global_id();
    let mut m = 0u64;
    while e < nnz {
        let bits = (*val.add(e)).to_bits() & !(1u64 << 63);
        m = if bits > m { bits } else { m };
        e += grid_threads();
    }
    atomic_max_u64(out, m);
}

/// out[e] = col[e] + offset for the `nnz` entries: a rank's tentative
/// prolongator numbered by the global coarse columns. Grid-stride over the
/// entries.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn csr_shift_columns(
    nnz: usize,
    col: *const u32,
    offset: u32,
    out: *mut u32,
) {
    let mut e = global_id();
    while e < nnz {
        *out.add(e) = *col.add(e) + offset;
        e += grid_threads();
    }
}

/// The tentative prolongator of k near-null-space vectors, one thread per
/// aggregate a: the thin QR of the vectors restricted to a's rows (rows
/// `t_col[t_ptr[a]..t_ptr[a + 1]]`, increasing: the transposed pattern), by
/// classical Gram-Schmidt applied twice, as the host's `tentative_qr`
/// computes it (the same operations in the same order, sums from -0.0 as
/// Rust's `Sum`): the same values bit for bit. `b` holds the k vectors of
/// `nrows` one after another, `q` is scratch of nrows k values. Writes row r
/// of the prolongator (k entries: columns a k + c, Q's row) and R's entries
/// into the k coarse vectors (`coarse`, k of naggs k values, zeros: vector c
/// at c naggs k, entry a k + i = R[i][c]). With `ptr_given` 0 every row is
/// in an aggregate and the kernel writes the row pointers (row r from r k);
/// otherwise `p_ptr` holds them (k entries for a row in an aggregate, none
/// for a row in no aggregate, whose row stays empty).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn tentative_qr(
    naggs: usize,
    k: usize,
    nrows: usize,
    t_ptr: *const u64,
    t_col: *const u32,
    b: *const f64,
    q: *mut f64,
    p_ptr: *mut u64,
    p_col: *mut u32,
    p_val: *mut f64,
    coarse: *mut f64,
    ptr_given: u32,
) {
    let mut a = global_id();
    if a == 0 && ptr_given == 0 {
        *p_ptr.add(nrows) = (nrows * k) as u64;
    }
    while a < naggs {
        let lo = *t_ptr.add(a) as usize;
        let m = *t_ptr.add(a + 1) as usize - lo;
        let q = q.add(lo * k);
        let row = |i: usize| *t_col.add(lo + i) as usize;
        for c in 0..k {
            for i in 0..m {
                *q.add(c * m + i) = *b.add(c * nrows + row(i));
            }
        }
        let r_entry = |i: usize, c: usize| coarse.add(c * naggs * k + a * k + i);
        let norm = |c: usize| {
            let mut s = -0.0f64;
            for i in 0..m {
                let x = *q.add(c * m + i);
                s += x * x;
            }
            s.sqrt_rn()
        };
        for c in 0..k {
            let orig = norm(c);
            for _ in 0..2 {
                for p in 0..c {
                    let mut d = -0.0f64;
                    for i in 0..m {
                        d += *q.add(p * m + i) * *q.add(c * m + i);
                    }
                    *r_entry(p, c) += d;
                    for i in 0..m {
                        *q.add(c * m + i) -= d * *q.add(p * m + i);
                    }
                }
            }
            let nrm = norm(c);
            if nrm <= 1e-10 * orig || nrm == 0.0 {
                for i in 0..m {
                    *q.add(c * m + i) = 0.0;
                }
            } else {
                *r_entry(c, c) = nrm;
                for i in 0..m {
                    *q.add(c * m + i) /= nrm;
                }
            }
        }
        for i in 0..m {
            let r = row(i);
            let first = if ptr_given == 0 {
                *p_ptr.add(r) = (r * k) as u64;
                r * k
            } else {
                *p_ptr.add(r) as usize
            };
            for c in 0..k {
                *p_col.add(first + c) = (a * k + c) as u32;
                *p_val.add(first + c) = *q.add(c * m + i);
            }
        }
        a += grid_threads();
    }
}

/// Slots of the input checks' statistics (u64 each): a non-finite entry
/// seen, the largest row sum of |a_ij|, the largest |a_ij|, the largest
/// |(A v)_i| of each candidate null vector (the bs block-component constants,
/// then all ones), and an asymmetric pair seen.
pub const CHECK_SLOTS: usize = MAX_SETUP_BLOCK + 5;

/// `*p = max(*p, v)` for u64 values (`atom.global.max.u64`): the maximum of
/// non-negative f64 values by their bits.
#[inline(always)]
unsafe fn atomic_max_u64(p: *mut u64, v: u64) {
    asm!("red.global.max.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v);
}

/// `*p = min(*p, v)`, atomically (no result).
#[inline(always)]
unsafe fn atomic_min_u64(p: *mut u64, v: u64) {
    asm!("red.global.min.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v);
}

/// First pass of the AMG input checks (the host's `check_finite`,
/// `detect_kernel` and the scale of `is_symmetric`), one thread per row,
/// each thread's maxima combined over its warp before one atomic each:
/// stats[0] = 1 where a row holds a non-finite value (the other values are
/// then meaningless); stats[1] = max over rows of sum |a_ij| (column order);
/// stats[2] = max |a_ij|; stats[3 + c] = max over rows of |sum over j % bs
/// == c of a_ij| (column order) for c < bs, and stats[3 + bs] the same for
/// every j when bs > 1. Maxima of non-negative values as f64 bits; `stats`
/// holds `CHECK_SLOTS` zeros, bs <= MAX_SETUP_BLOCK.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_check_rows(
    n: usize,
    bs: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    stats: *mut u64,
) {
    let bs = bs.clamp(1, MAX_SETUP_BLOCK);
    // this thread's maxima over its rows: norm, largest entry, candidates
    let mut most = [0u64; MAX_SETUP_BLOCK + 3];
    let mut bad = 0u64;
    let mut i = global_id();
    while i < n {
        let (lo, hi) = (*ptr.add(i) as usize, *ptr.add(i + 1) as usize);
        let (mut abs_sum, mut biggest, mut all) = (0.0f64, 0.0f64, 0.0f64);
        let mut sums = [0.0f64; MAX_SETUP_BLOCK];
        for p in lo..hi {
            let x = *val.add(p);
            if x - x != 0.0 {
                bad = 1;
                break;
            }
            let ax = abs(x);
            abs_sum += ax;
            if ax > biggest {
                biggest = ax;
            }
            sums[*col.add(p) as usize % bs] += x;
            all += x;
        }
        let mut row = [0u64; MAX_SETUP_BLOCK + 3];
        row[0] = abs_sum.to_bits();
        row[1] = biggest.to_bits();
        for c in 0..bs {
            row[2 + c] = abs(sums[c]).to_bits();
        }
        row[2 + bs] = abs(all).to_bits();
        for (m, r) in most.iter_mut().zip(row) {
            if r > *m {
                *m = r;
            }
        }
        i += grid_threads();
    }
    // one atomic per warp and statistic
    bad = warp_max_u64(bad);
    let lane = lane();
    if lane == 0 && bad != 0 {
        atomic_max_u64(stats, 1);
    }
    for (k, m) in most.iter().enumerate().take(3 + bs) {
        let m = warp_max_u64(*m);
        let slot = if k == 2 + bs && bs == 1 { None } else { Some(1 + k) };
        if let (0, Some(slot)) = (lane, slot) {
            atomic_max_u64(stats.add(slot), m);
        }
    }
}

/// Whether `pred` holds on some lane of the warp (`vote.any`). Every lane
/// must call it.
#[inline(always)]
fn warp_any(pred: bool) -> bool {
    let r: u32;
    // SAFETY: a full-warp vote from warp-uniform control flow.
    unsafe {
        asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; vote.sync.any.pred q, p, 0xffffffff; selp.u32 {r}, 1, 0, q; }}",
            r = out(reg32) r,
            x = in(reg32) u32::from(pred),
        );
    }
    r != 0
}

/// Bit l set for each lane l of the warp whose `pred` holds (`vote.ballot`).
/// Every lane must call it.
#[inline(always)]
fn warp_ballot(pred: bool) -> u32 {
    let r: u32;
    // SAFETY: a full-warp vote from warp-uniform control flow.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {r}, p, 0xffffffff; }}",
            r = out(reg32) r,
            x = in(reg32) u32::from(pred),
        );
    }
    r
}

/// Bit l set for each lane l of the warp whose `v` equals this lane's
/// (`match.any`). Every lane must call it.
#[inline(always)]
fn warp_match_any(v: u32) -> u32 {
    let r: u32;
    // SAFETY: a full-warp match from warp-uniform control flow.
    unsafe {
        asm!(
            "match.any.sync.b32 {r}, {v}, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
        );
    }
    r
}

/// The largest `v` over the warp's lanes (every lane gets it). Every lane
/// must call it.
#[inline(always)]
fn warp_max_u64(v: u64) -> u64 {
    warp_fold_u64(v, |a, b| if a > b { a } else { b })
}

/// Second pass: stats[CHECK_SLOTS - 1] = 1 where some a_ij differs from a_ji
/// (0 where row j does not store column i) by more than 1e-12 times the
/// largest |a_ij| (stats[2], from the first pass): the host's `is_symmetric`.
/// One thread per row, a binary search per entry.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amg_check_symmetry(
    n: usize,
    ptr: *const u64,
    col: *const u32,
    val: *const f64,
    stats: *mut u64,
) {
    let tol = 1e-12 * f64::from_bits(*stats.add(2));
    let mut i = global_id();
    while i < n {
        for p in *ptr.add(i) as usize..*ptr.add(i + 1) as usize {
            let j = *col.add(p) as usize;
            let (lo, hi) = (*ptr.add(j) as usize, *ptr.add(j + 1) as usize);
            let q = lower_bound(col, lo, hi, i as u32);
            let y = if q < hi && *col.add(q) == i as u32 {
                *val.add(q)
            } else {
                0.0
            };
            if abs(*val.add(p) - y) > tol {
                atomic_max_u64(stats.add(CHECK_SLOTS - 1), 1);
                break;
            }
        }
        i += grid_threads();
    }
}
