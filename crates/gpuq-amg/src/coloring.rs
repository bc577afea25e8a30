//! Multicolour symmetric Gauss-Seidel, the data of the smoother
//! [`crate::Smoother::GaussSeidel`]: a greedy colouring of a level's node
//! graph (no two nodes of one colour coupled by A in either direction), and
//! per colour the three sparse matrices a sweep over its nodes needs, so that
//! any backend runs the sweep with SpMVs and a backend may fuse it
//! ([`crate::AmgKernels::amg_gs_color`]).
//!
//! The nodes of one colour are independent: updating all of them at once from
//! the current x is exactly the sequential Gauss-Seidel update of those nodes
//! (block Gauss-Seidel with the level's bs x bs diagonal blocks). Sweeping the
//! colours 0, 1, .., c - 1 and back down to 0 is a symmetric Gauss-Seidel
//! step (the last colour is not repeated: a second update of it in a row
//! changes nothing), so pre- and post-smoothing mirror each other and the
//! cycle stays symmetric for PCG.

use crate::blockdiag::BlockDiagonal;
use crate::options::MAX_BLOCK;
use gpuq_core::Result;
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// A colouring of the nodes (groups of `bs` consecutive rows) of a matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coloring {
    /// The colour of each node, 0..colors.
    pub color_of: Vec<u32>,
    /// Number of colours.
    pub colors: usize,
}

/// Greedy colouring in node order of the symmetrised node graph of `a` (node
/// u is coupled to node v when a row of u has an entry in a column of v, or a
/// row of v in a column of u): each node takes the smallest colour none of its
/// already coloured neighbours has. Deterministic; at most the largest
/// degree plus one colours, two for a 5- or 7-point Laplacian numbered
/// lexicographically. O(nnz) time and memory.
pub fn greedy(a: &Csr<f64>, bs: usize) -> Coloring {
    let nodes = a.nrows() / bs.max(1);
    let node_cols = |u: usize| {
        (bs * u..bs * (u + 1)).flat_map(move |i| a.row(i).0.iter().map(move |&j| j as usize / bs))
    };
    // The transposed node pattern (u in the rows of v => v in t[u]), by
    // counting: only the couplings to earlier nodes are needed.
    let mut count = vec![0usize; nodes + 1];
    for v in 0..nodes {
        for u in node_cols(v) {
            if u > v {
                count[u + 1] += 1;
            }
        }
    }
    for u in 0..nodes {
        count[u + 1] += count[u];
    }
    let mut fill = count.clone();
    let mut earlier = vec![0u32; count[nodes]];
    for v in 0..nodes {
        for u in node_cols(v) {
            if u > v {
                earlier[fill[u]] = v as u32;
                fill[u] += 1;
            }
        }
    }
    let mut color_of = vec![u32::MAX; nodes];
    // forbidden[c] == u + 1: colour c is taken by a neighbour of node u.
    let mut forbidden: Vec<usize> = Vec::new();
    let mut colors = 0usize;
    for u in 0..nodes {
        let coupled = node_cols(u)
            .filter(|&v| v < u)
            .chain(earlier[count[u]..count[u + 1]].iter().map(|&v| v as usize));
        for v in coupled {
            let c = color_of[v] as usize;
            if forbidden.len() <= c {
                forbidden.resize(c + 1, 0);
            }
            forbidden[c] = u + 1;
        }
        let c = (0..).find(|&c| forbidden.get(c).is_none_or(|&f| f != u + 1));
        let c = c.unwrap_or(0);
        color_of[u] = c as u32;
        colors = colors.max(c + 1);
    }
    Coloring { color_of, colors }
}

/// The matrices of one colour's Gauss-Seidel update x <- x + S^T D_c^-1 S (b
/// - A x), S selecting the colour's rows (n_c of them, n_c a multiple of bs).
#[derive(Clone, Debug)]
pub struct ColorSweep {
    /// D_c^-1 S A (n_c x n): the colour's rows of A, each node's block row
    /// multiplied by the inverse of its diagonal block.
    pub scaled: Csr<f64>,
    /// D_c^-1 S (n_c x n): row k holds the inverse diagonal block's row at the
    /// columns of its node (for bs = 1 one entry, d_i at column i: a fused
    /// kernel reads the row index and d_i from here).
    pub select: Csr<f64>,
    /// S^T (n x n_c): one unit entry in each row of the colour, empty rows
    /// elsewhere.
    pub scatter: Csr<f64>,
}

/// The per-colour sweeps of `a` with bs x bs diagonal blocks `dinv` (the
/// inverse block diagonal; bs at most [`MAX_BLOCK`]) under `coloring`.
/// O(nnz bs) time; together the colours store A's entries (bs = 1; up to bs
/// times for larger blocks, where a node's rows share one pattern) plus
/// O(n colours) row pointers. Errors when bs exceeds [`MAX_BLOCK`].
pub fn color_sweeps(
    a: &Csr<f64>,
    bs: usize,
    dinv: &BlockDiagonal,
    coloring: &Coloring,
) -> Result<Vec<ColorSweep>> {
    if bs == 0 || bs > MAX_BLOCK {
        return Err(gpuq_core::Error::InvalidArgument(format!(
            "Gauss-Seidel colour sweeps of blocks of {bs} (at most {MAX_BLOCK})"
        )));
    }
    let n = a.nrows();
    let inv = dinv.blocks();
    (0..coloring.colors)
        .into_par_iter()
        .map(|c| {
            let nodes: Vec<usize> = (0..coloring.color_of.len())
                .filter(|&u| coloring.color_of[u] as usize == c)
                .collect();
            let rows = nodes.len() * bs;
            let (mut sp, mut sc, mut sv) = (vec![0usize], Vec::new(), Vec::new());
            let (mut qp, mut qc, mut qv) = (vec![0usize], Vec::new(), Vec::new());
            let mut merged: Vec<(u32, [f64; MAX_BLOCK])> = Vec::new();
            for &u in &nodes {
                let blk = &inv[u * bs * bs..(u + 1) * bs * bs];
                // The node's block row: the union of its rows' patterns, each
                // entry a vector of bs values (one per row of the node).
                merged.clear();
                for s in 0..bs {
                    let (cols, vals) = a.row(bs * u + s);
                    for (&j, &v) in cols.iter().zip(vals) {
                        let mut e = [0.0; MAX_BLOCK];
                        e[s] = v;
                        merged.push((j, e));
                    }
                }
                merged.sort_by_key(|e| e.0);
                merged.dedup_by(|later, first| {
                    if later.0 == first.0 {
                        for (f, l) in first.1.iter_mut().zip(&later.1).take(bs) {
                            *f += l;
                        }
                        true
                    } else {
                        false
                    }
                });
                for r in 0..bs {
                    for (j, e) in &merged {
                        sc.push(*j);
                        sv.push((0..bs).map(|s| blk[r * bs + s] * e[s]).sum());
                    }
                    sp.push(sc.len());
                    for s in 0..bs {
                        qc.push((bs * u + s) as u32);
                        qv.push(blk[r * bs + s]);
                    }
                    qp.push(qc.len());
                }
            }
            let mut tp = vec![0usize; n + 1];
            let mut tc = Vec::with_capacity(rows);
            let mut k = 0u32;
            for &u in &nodes {
                for s in 0..bs {
                    tp[bs * u + s + 1] = 1;
                    tc.push(k);
                    k += 1;
                }
            }
            for i in 0..n {
                tp[i + 1] += tp[i];
            }
            Ok(ColorSweep {
                scaled: Csr::try_new(rows, n, sp, sc, sv)?,
                select: Csr::try_new(rows, n, qp, qc, qv)?,
                scatter: Csr::try_new(n, rows, tp, tc, vec![1.0; rows])?,
            })
        })
        .collect()
}

/// The colour order of one symmetric Gauss-Seidel step over `colors`
/// colours: 0, 1, .., c - 1, c - 2, .., 0 (2 c - 1 colour updates).
pub fn symmetric_order(colors: usize) -> impl Iterator<Item = usize> + Clone {
    (0..colors).chain((0..colors.saturating_sub(1)).rev())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_sparse::generators::{laplace2d, laplace3d};

    fn check_proper(a: &Csr<f64>, bs: usize, col: &Coloring) {
        for i in 0..a.nrows() {
            for &j in a.row(i).0 {
                let (u, v) = (i / bs, j as usize / bs);
                if u != v {
                    assert_ne!(col.color_of[u], col.color_of[v], "nodes {u} and {v}");
                }
            }
        }
    }

    #[test]
    fn laplacians_take_two_colours() {
        for a in [laplace2d::<f64>(9), laplace3d::<f64>(6)] {
            let col = greedy(&a, 1);
            assert_eq!(col.colors, 2);
            check_proper(&a, 1, &col);
        }
    }

    #[test]
    fn a_nonsymmetric_pattern_is_coloured_both_ways() {
        // Row 0 couples to node 2 only; row 2 does not couple back.
        let a = Csr::try_new(
            3,
            3,
            vec![0, 2, 3, 4],
            vec![0, 2, 1, 2],
            vec![2.0, 1.0, 2.0, 2.0],
        )
        .unwrap();
        let col = greedy(&a, 1);
        assert_ne!(col.color_of[0], col.color_of[2]);
        assert_eq!(col.color_of[1], col.color_of[0]);
    }

    #[test]
    fn colour_sweeps_partition_the_rows_and_scale_by_the_block_inverse() {
        let (e2, _) = gpuq_sparse::elasticity::elasticity2d::<f64>(5).unwrap();
        let (e3, _) = gpuq_sparse::elasticity3d::elasticity3d::<f64>(3).unwrap();
        for (a, bs) in [(e2, 2), (e3, 3)] {
            let d = BlockDiagonal::of(&a, bs, false).inverse().unwrap();
            let col = greedy(&a, bs);
            check_proper(&a, bs, &col);
            let sweeps = color_sweeps(&a, bs, &d, &col).unwrap();
            assert_eq!(sweeps.len(), col.colors);
            assert_eq!(
                sweeps.iter().map(|s| s.scaled.nrows()).sum::<usize>(),
                a.nrows()
            );
            // The scaled rows have the identity as their diagonal blocks.
            for s in &sweeps {
                let rows_of = s.scatter.transpose(false);
                for k in 0..s.scaled.nrows() {
                    let i = rows_of.row(k).0[0] as usize;
                    let (cols, vals) = s.scaled.row(k);
                    for (&j, &v) in cols.iter().zip(vals) {
                        if j as usize / bs == i / bs {
                            let want = if j as usize == i { 1.0 } else { 0.0 };
                            assert!((v - want).abs() < 1e-12, "bs {bs} row {i} col {j}: {v}");
                        }
                    }
                }
            }
        }
        let (a, _) = gpuq_sparse::elasticity3d::elasticity3d::<f64>(1).unwrap();
        let d = BlockDiagonal::of(&a, 12, false);
        assert!(color_sweeps(&a, 12, &d, &greedy(&a, 12)).is_err());
    }

    #[test]
    fn the_symmetric_order_mirrors() {
        assert_eq!(symmetric_order(3).collect::<Vec<_>>(), vec![0, 1, 2, 1, 0]);
        assert_eq!(symmetric_order(1).collect::<Vec<_>>(), vec![0]);
    }
}
