//! Coarse-node selection and aggregation on the strong-connection graph.
//!
//! * [`seed_selection`]: seed 002's greedy pass (section 9.3.2), in node order:
//!   the first undecided node becomes coarse and its strong neighbours fine;
//!   every node then interpolates from all coarse nodes it is strongly connected
//!   to (a coarse node from itself). Sequential by nature.
//! * [`mis2_aggregates`]: a distance-2 maximal independent set by rounds of
//!   max-propagation of a key (state, hash(i), i), the roots becoming aggregate
//!   centres and every other node joining a root within distance 2. Every round
//!   is a parallel map over nodes that reads only the previous round's values, so
//!   the result does not depend on the thread count, and a GPU setup running the
//!   same rounds builds the same aggregates. On few threads one sequential pass
//!   in key order finds the same roots.

use crate::strength::Graph;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// What the seed's greedy pass produced: the coarse nodes in increasing order,
/// and for every node the coarse indices (positions in `coarse`) it
/// interpolates from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The coarse nodes (fine-level node numbers), increasing.
    pub coarse: Vec<u32>,
    /// Per node, the coarse indices it interpolates from (n_i of them), sorted.
    pub parents: Vec<Vec<u32>>,
}

/// Seed 002's coarse selection with the interpolation sets of its 1/n_i
/// prolongator. O(edges).
pub fn seed_selection(s: &Graph) -> Selection {
    const UNDECIDED: u8 = 0;
    const COARSE: u8 = 1;
    const FINE: u8 = 2;
    let n = s.len();
    let mut state = vec![UNDECIDED; n];
    let mut coarse = Vec::new();
    let mut parents: Vec<Vec<u32>> = vec![Vec::new(); n];
    for k in 0..n {
        if state[k] != UNDECIDED {
            continue;
        }
        state[k] = COARSE;
        let c = coarse.len() as u32;
        coarse.push(k as u32);
        parents[k].push(c);
        for &l in s.neighbours(k) {
            let l = l as usize;
            if state[l] == UNDECIDED {
                state[l] = FINE;
            }
            parents[l].push(c);
        }
    }
    Selection { coarse, parents }
}

pub use gpuq_kernels::amg::hash;
use gpuq_kernels::amg::{fine_key, mis2_key, mis2_next, state_of, OUT, ROOT, UNDECIDED};

fn key(state: u64, i: usize) -> u64 {
    mis2_key(state, i as u32)
}

/// The largest of `keys` over i and its neighbours.
fn neighbourhood_max(s: &Graph, keys: &[u64], i: usize) -> u64 {
    s.neighbours(i)
        .iter()
        .map(|&j| keys[j as usize])
        .fold(keys[i], u64::max)
}

/// One round of the MIS-2 rounds from `keys` into `next`: `near` gets the
/// first max-propagation, then each undecided node's key is updated from the
/// second, computed for it alone (a decided node keeps its key). Returns the
/// nodes left undecided, in order. O(edges).
fn mis2_round(s: &Graph, keys: &[u64], near: &mut [u64], next: &mut [u64]) -> Vec<u32> {
    near.par_iter_mut()
        .enumerate()
        .for_each(|(i, m)| *m = neighbourhood_max(s, keys, i));
    let near = &*near;
    next.par_iter_mut().enumerate().for_each(|(i, out)| {
        let k = keys[i];
        *out = if state_of(k) == UNDECIDED {
            mis2_next(k, neighbourhood_max(s, near, i), i as u32)
        } else {
            k
        };
    });
    (0..s.len() as u32)
        .into_par_iter()
        .filter(|&i| state_of(next[i as usize]) == UNDECIDED)
        .collect()
}

/// The round of [`mis2_round`] once few nodes are undecided, computing only
/// what they read: the first max-propagation `near` at them and their
/// neighbours, from the current keys, then their keys, in place. The same
/// values as a whole round (a decided node keeps its key, and an undecided one
/// reads only those entries of `near`). Returns the nodes left undecided.
/// O(edges within distance 2 of `undecided`), `stamp` (one slot per node,
/// `round` unique to this call) marking the entries of `near` recomputed.
fn mis2_round_on(
    s: &Graph,
    keys: &mut [u64],
    near: &mut [u64],
    undecided: &[u32],
    (stamp, round): (&[AtomicU32], u32),
) -> Vec<u32> {
    let around: Vec<u32> = undecided
        .par_iter()
        .flat_map_iter(|&i| {
            std::iter::once(i)
                .chain(s.neighbours(i as usize).iter().copied())
                .filter(|&j| stamp[j as usize].swap(round, Ordering::Relaxed) != round)
        })
        .collect();
    let keys_now = &*keys;
    let fresh: Vec<u64> = around
        .par_iter()
        .map(|&j| neighbourhood_max(s, keys_now, j as usize))
        .collect();
    for (&j, v) in around.iter().zip(fresh) {
        near[j as usize] = v;
    }
    let near = &*near;
    let updated: Vec<u64> = undecided
        .par_iter()
        .map(|&i| {
            let i = i as usize;
            mis2_next(keys_now[i], neighbourhood_max(s, near, i), i as u32)
        })
        .collect();
    for (&i, k) in undecided.iter().zip(updated) {
        keys[i as usize] = k;
    }
    undecided
        .iter()
        .copied()
        .filter(|&i| state_of(keys[i as usize]) == UNDECIDED)
        .collect()
}

/// Most threads for which [`mis2_keys`] takes the sequential pass
/// ([`mis2_keys_in_order`]) rather than the rounds: on two cores
/// [`mis2_aggregates`] took 17-20 ms with the pass against 37-41 ms with the
/// rounds on P2 Poisson's strong graph (185,193 nodes, 2.8 million edges),
/// and 11 against 27 ms on the jumping-coefficient system's (1.2 million
/// edges). The rounds' work divides among the threads, the pass's does not:
/// on the H200 machine's 16-core host, laplace3d:150's graph (3.4 million
/// nodes) took 317 ms with the pass on 4 threads against 221, 144 and 95 ms
/// with the rounds on 5, 8 and 16 (laplace3d:60's, 216,000 nodes: 8.8 ms
/// against 10-12 ms).
const IN_ORDER_THREADS: usize = 4;

/// The keys the MIS-2 rounds end with ([`mis2_rounds`], the device's rule):
/// found by one sequential pass where the pool has few threads
/// ([`IN_ORDER_THREADS`]), else by the rounds. Every node ends a root or
/// out; both give the same keys.
fn mis2_keys(s: &Graph) -> Vec<u64> {
    if rayon::current_num_threads() <= IN_ORDER_THREADS {
        mis2_keys_in_order(s)
    } else {
        mis2_rounds(s)
    }
}

/// The keys the MIS-2 rounds end with, found in one sequential pass: the
/// nodes in decreasing key order, each a root unless a root lies within
/// distance 2, then every node within distance 2 of it marked out. On a
/// symmetric graph the rounds end with these roots: an undecided node cannot
/// become a root while a node of larger key within distance 2 is undecided or
/// a root (that key is the largest it sees), nor be put out by a root of
/// smaller key (which saw its key), so it becomes a root exactly when no
/// node of larger key within distance 2 is one. O(n log n) for the order,
/// plus the roots' distance-2 neighbourhoods.
fn mis2_keys_in_order(s: &Graph) -> Vec<u64> {
    let n = s.len();
    let mut order: Vec<u64> = (0..n).into_par_iter().map(|i| key(UNDECIDED, i)).collect();
    order.par_sort_unstable_by(|x, y| y.cmp(x));
    let mut root = vec![false; n];
    let mut out = vec![false; n];
    for k in order {
        // a key's low 32 bits are its node
        let i = k as u32 as usize;
        if out[i] {
            continue;
        }
        root[i] = true;
        out[i] = true;
        for &j in s.neighbours(i) {
            out[j as usize] = true;
            for &l in s.neighbours(j as usize) {
                out[l as usize] = true;
            }
        }
    }
    root.into_par_iter()
        .enumerate()
        .map(|(i, r)| key(if r { ROOT } else { OUT }, i))
        .collect()
}

/// The keys after the MIS-2 rounds: whole rounds while many nodes are
/// undecided, then rounds around the undecided ones; each node ends a root or
/// out. A round around u nodes of degree d recomputes about u d^2 maxima
/// where a whole one computes 2 n d: the rounds go around once u d is below
/// n / 4. O(edges) per whole round, a handful in practice.
fn mis2_rounds(s: &Graph) -> Vec<u64> {
    let n = s.len();
    let mut keys: Vec<u64> = (0..n).into_par_iter().map(|i| key(UNDECIDED, i)).collect();
    let (mut near, mut next) = (vec![0u64; n], vec![0u64; n]);
    let mut undecided: Vec<u32> = (0..n as u32).collect();
    let degree = s.edges() / n.max(1) + 1;
    while !undecided.is_empty() && 4 * undecided.len() * degree >= n {
        undecided = mis2_round(s, &keys, &mut near, &mut next);
        std::mem::swap(&mut keys, &mut next);
    }
    let stamp: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let mut round = 0;
    while !undecided.is_empty() {
        round += 1;
        undecided = mis2_round_on(s, &mut keys, &mut near, &undecided, (&stamp, round));
    }
    keys
}

/// Aggregates from a distance-2 maximal independent set of `s`: returns the
/// aggregate of every node and the number of aggregates (numbered in the order
/// of their roots). Isolated nodes become aggregates of their own
/// ([`aggregates`] leaves them out).
///
/// Rounds: two max-propagations of the keys, then an undecided node whose own
/// key came back becomes a root, one that sees a root's key becomes out. Then
/// each non-root joins the adjacent root of largest key, and each node still
/// unassigned joins the neighbour (assigned in that first pass) of largest key.
/// O(edges) per whole round (rounds around the few undecided
/// nodes cost their neighbourhoods'), a handful of whole rounds in practice.
pub fn mis2_aggregates(s: &Graph) -> (Vec<u32>, usize) {
    let n = s.len();
    let keys = mis2_keys(s);
    // Number the roots in node order.
    let mut agg = vec![u32::MAX; n];
    let mut count = 0u32;
    for (i, &k) in keys.iter().enumerate() {
        if state_of(k) == ROOT {
            agg[i] = count;
            count += 1;
        }
    }
    // Pass 1: join the adjacent root of largest key.
    let first: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| {
            if agg[i] != u32::MAX {
                return agg[i];
            }
            s.neighbours(i)
                .iter()
                .filter(|&&j| agg[j as usize] != u32::MAX)
                .max_by_key(|&&j| keys[j as usize])
                .map_or(u32::MAX, |&j| agg[j as usize])
        })
        .collect();
    // Pass 2: join the neighbour of largest key assigned in pass 1.
    let second: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| {
            if first[i] != u32::MAX {
                return first[i];
            }
            s.neighbours(i)
                .iter()
                .filter(|&&j| first[j as usize] != u32::MAX)
                .max_by_key(|&&j| fine_key(j))
                .map_or(u32::MAX, |&j| first[j as usize])
        })
        .collect();
    debug_assert!(second.iter().all(|&a| a != u32::MAX));
    (second, count as usize)
}

/// Marks the nodes that join no aggregate: `agg` (`naggs` aggregates, as
/// [`mis2_aggregates`] leaves them) with the aggregate of every node of
/// `isolated` (nodes without a strong connection) removed, its node set to
/// [`NOT_AGGREGATED`] and the other aggregates renumbered in order; returns
/// their count. An isolated node (a Dirichlet row kept in the matrix as an
/// identity row, a decoupled unknown) needs no coarse unknown: the smoother
/// solves its row, and keeping it would carry one coarse row per such node
/// down every level, as PyAMG's standard aggregation avoids too. A node of
/// `isolated` past `agg` is ignored. O(isolated + naggs), and a parallel
/// O(n) pass only where an aggregate is removed.
pub fn drop_isolated(agg: &mut [u32], naggs: usize, isolated: &[u32]) -> usize {
    let mut dropped = vec![false; naggs];
    let mut any = false;
    for &i in isolated {
        if let Some(&a) = agg.get(i as usize) {
            if let Some(d) = dropped.get_mut(a as usize) {
                *d = true;
                any = true;
            }
        }
    }
    if !any {
        return naggs;
    }
    let mut number = vec![NOT_AGGREGATED; naggs];
    let mut kept = 0u32;
    for (a, &d) in dropped.iter().enumerate() {
        if !d {
            number[a] = kept;
            kept += 1;
        }
    }
    agg.par_chunks_mut(RENUMBER_TASK).for_each(|chunk| {
        for a in chunk.iter_mut() {
            if let Some(&to) = number.get(*a as usize) {
                *a = to;
            }
        }
    });
    kept as usize
}

/// Nodes per parallel task of [`drop_isolated`]'s renumbering.
const RENUMBER_TASK: usize = 1 << 16;

/// The aggregate of a node that joins none (see [`drop_isolated`]): its row
/// of the tentative prolongator is zero.
pub const NOT_AGGREGATED: u32 = u32::MAX;

/// An aggregation before the isolated nodes are dropped: each node's
/// aggregate, the number of aggregates, and the isolated nodes (no strong
/// connection), increasing.
pub type Aggregation = (Vec<u32>, usize, Vec<u32>);

/// The nodes of `s` without neighbours, in increasing order. O(n), in
/// parallel.
pub fn isolated_nodes(s: &Graph) -> Vec<u32> {
    (0..s.len())
        .into_par_iter()
        .filter(|&i| s.neighbours(i).is_empty())
        .map(|i| i as u32)
        .collect()
}

/// An [`Aggregation`] without its isolated nodes ([`drop_isolated`]),
/// except those that `keep` (a rank's node whose connections are all to
/// other ranks): the one rule of the host, device and distributed setups.
/// O(isolated + naggs), and [`drop_isolated`]'s parallel pass over the nodes
/// only where an aggregate is removed.
pub fn without_isolated(
    (mut agg, naggs, isolated): Aggregation,
    keep: impl Fn(usize) -> bool,
) -> (Vec<u32>, usize) {
    let dropped: Vec<u32> = isolated
        .into_iter()
        .filter(|&i| !keep(i as usize))
        .collect();
    let naggs = drop_isolated(&mut agg, naggs, &dropped);
    (agg, naggs)
}

/// The aggregates of one process's setup: [`mis2_aggregates`] of `s`
/// without the isolated nodes ([`without_isolated`]). O(edges) per round.
pub fn aggregates(s: &Graph) -> (Vec<u32>, usize) {
    let (agg, naggs) = mis2_aggregates(s);
    without_isolated((agg, naggs, isolated_nodes(s)), |_| false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strength::{norm_matrix, strong_graph};

    #[test]
    fn isolated_nodes_join_no_aggregate() {
        // laplace2d with every third node fixed (an identity row).
        let cut = |i: usize| i % 3 == 0;
        let a = gpuq_sparse::generators::laplace2d::<f64>(12);
        let fixed = gpuq_sparse::generators::with_identity_rows(&a, cut);
        let s = strong_graph(&norm_matrix(&fixed, 1).unwrap(), 0.01).unwrap();
        let (all, n_all) = mis2_aggregates(&s);
        let (agg, naggs) = aggregates(&s);
        assert_eq!(n_all - naggs, (0..a.nrows()).filter(|&i| cut(i)).count());
        for (i, (&x, &y)) in agg.iter().zip(&all).enumerate() {
            // Isolated nodes join none; the others keep their aggregates,
            // renumbered in the same order.
            assert_eq!(x == NOT_AGGREGATED, cut(i), "node {i}");
            if !cut(i) {
                assert!((x as usize) < naggs);
                let before = agg
                    .iter()
                    .zip(&all)
                    .filter(|&(&p, &q)| q < y && p != NOT_AGGREGATED);
                let distinct: std::collections::BTreeSet<_> = before.map(|(&p, _)| p).collect();
                assert_eq!(x as usize, distinct.len());
            }
        }
    }

    fn graph(m: usize) -> Graph {
        let a = gpuq_sparse::generators::laplace2d::<f64>(m);
        strong_graph(&norm_matrix(&a, 1).unwrap(), 0.01).unwrap()
    }

    #[test]
    fn mis2_roots_are_three_apart_and_cover_all() {
        let s = graph(12);
        let (agg, na) = mis2_aggregates(&s);
        assert!(agg.iter().all(|&a| (a as usize) < na));
        // Every aggregate is non-empty and connected to its root within distance 2.
        let mut size = vec![0; na];
        for &a in &agg {
            size[a as usize] += 1;
        }
        assert!(size.iter().all(|&c| c > 0));
        // A 2D 5-point grid coarsens by a factor of about 5 to 9.
        assert!(na * 4 < 144 && na * 12 > 144, "{na} aggregates");
        // Deterministic: the same again.
        assert_eq!(mis2_aggregates(&s), (agg, na));
    }

    /// The keys of whole rounds only, until no node is undecided.
    fn keys_by_whole_rounds(s: &Graph) -> Vec<u64> {
        let n = s.len();
        let mut keys: Vec<u64> = (0..n).map(|i| key(UNDECIDED, i)).collect();
        let (mut near, mut next) = (vec![0u64; n], vec![0u64; n]);
        while keys.iter().any(|&k| state_of(k) == UNDECIDED) {
            mis2_round(s, &keys, &mut near, &mut next);
            std::mem::swap(&mut keys, &mut next);
        }
        keys
    }

    #[test]
    fn rounds_around_the_undecided_nodes_give_the_whole_rounds_keys() {
        let graphs = [
            graph(40),
            strong_graph(
                &norm_matrix(&gpuq_sparse::generators::laplace3d::<f64>(14), 1).unwrap(),
                0.01,
            )
            .unwrap(),
            strong_graph(
                &norm_matrix(
                    &gpuq_sparse::elasticity::elasticity2d::<f64>(12).unwrap().0,
                    2,
                )
                .unwrap(),
                0.01,
            )
            .unwrap(),
        ];
        for s in &graphs {
            let whole = keys_by_whole_rounds(s);
            assert_eq!(mis2_rounds(s), whole);
            assert_eq!(mis2_keys_in_order(s), whole);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// The sequential pass ends with the rounds' keys on random
        /// symmetric graphs of any density, isolated nodes included.
        #[test]
        fn the_pass_in_key_order_ends_as_the_rounds(
            n in 1usize..120,
            density in 0.0f64..0.5,
            seed in 0u64..1_000_000,
        ) {
            let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut coo = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                coo.push(i, i, 4.0).unwrap();
                for j in 0..i {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if ((state >> 11) as f64 / (1u64 << 53) as f64) < density * density {
                        coo.push(i, j, -1.0).unwrap();
                        coo.push(j, i, -1.0).unwrap();
                    }
                }
            }
            let a = gpuq_sparse::Csr::from_coo(&coo).unwrap();
            let s = strong_graph(&norm_matrix(&a, 1).unwrap(), 0.0).unwrap();
            proptest::prop_assert_eq!(mis2_keys_in_order(&s), keys_by_whole_rounds(&s));
        }
    }

    #[test]
    fn seed_selection_first_node_coarse_and_weights_cover() {
        let s = graph(6);
        let sel = seed_selection(&s);
        assert_eq!(sel.coarse[0], 0);
        assert!(sel.parents.iter().all(|p| !p.is_empty()));
        for (c, &node) in sel.coarse.iter().enumerate() {
            assert_eq!(sel.parents[node as usize], vec![c as u32]);
        }
    }
}
