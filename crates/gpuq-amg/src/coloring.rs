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
use crate::galerkin::par_build;
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
/// lexicographically. The node pattern (for bs > 1) is built in parallel,
/// the colouring in one sequential pass over it (bit masks of the colours taken), again
/// with twice the colour masks when the colours outgrow them. O(nnz) time
/// and O(nnz) memory while the colours stay below 64; c colours take
/// O(nnz c / 64) time and O(n c / 64) memory for the masks, plus the passes
/// whose masks proved too narrow (log2(c / 64) of them).
pub fn greedy(a: &Csr<f64>, bs: usize) -> Result<Coloring> {
    let owned;
    let pattern = if bs <= 1 {
        a
    } else {
        owned = node_pattern(a, bs)?;
        &owned
    };
    let mut words = 1;
    loop {
        if let Some(c) = greedy_marks(pattern, words) {
            return Ok(c);
        }
        words *= 2;
    }
}

/// [`greedy`] on the node graph `pattern` with a mask of `words` 64-bit
/// words per node for the colours its earlier neighbours took: a node's own
/// row gives its earlier neighbours' colours, and once coloured it marks its
/// colour in the masks of the later nodes of its row, so the couplings from
/// later rows need no transposed pattern. None when a node would need colour
/// 64 `words` or above. One sequential pass, O(nnz words) time, O(n words)
/// memory.
fn greedy_marks(pattern: &Csr<f64>, words: usize) -> Option<Coloring> {
    let n = pattern.nrows();
    let mut marks = vec![0u64; n * words];
    let mut color_of = vec![0u32; n];
    let mut taken = vec![0u64; words];
    let mut colors = 0usize;
    for u in 0..n {
        let cols = pattern.row(u).0;
        let split = cols.partition_point(|&v| (v as usize) < u);
        taken.copy_from_slice(&marks[u * words..(u + 1) * words]);
        for &v in &cols[..split] {
            let c = color_of[v as usize] as usize;
            taken[c / 64] |= 1 << (c % 64);
        }
        let (w, bits) = taken.iter().enumerate().find(|(_, &b)| b != u64::MAX)?;
        let c = 64 * w + bits.trailing_ones() as usize;
        color_of[u] = c as u32;
        colors = colors.max(c + 1);
        for &v in &cols[split..] {
            let v = v as usize;
            if v > u && v < n {
                marks[v * words + c / 64] |= 1 << (c % 64);
            }
        }
    }
    Some(Coloring { color_of, colors })
}

/// The node pattern of `a` with `bs` rows and columns per node: row u holds
/// the nodes of the columns of rows bs u .. bs (u + 1) (sorted, unique;
/// values 0). Rows in parallel, O(nnz log(row length)).
fn node_pattern(a: &Csr<f64>, bs: usize) -> Result<Csr<f64>> {
    let nodes = a.nrows() / bs;
    par_build(
        nodes,
        a.ncols() / bs,
        Vec::new,
        |u, cols: &mut Vec<u32>, out| {
            cols.clear();
            for i in bs * u..bs * (u + 1) {
                cols.extend(a.row(i).0.iter().map(|&j| j / bs as u32));
            }
            cols.sort_unstable();
            cols.dedup();
            for &v in cols.iter() {
                out.push(v, 0.0);
            }
        },
    )
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
/// The colours' node lists in one sequential pass over the nodes, then each
/// colour's rows in parallel. O(nnz bs) time; together the colours store
/// A's entries (bs = 1; up to bs times for larger blocks, where a node's
/// rows share one pattern) plus O(n colours) row pointers. Errors when bs
/// exceeds [`MAX_BLOCK`], when A is not square or bs does not divide its
/// size, or when `dinv` or `coloring` does not fit A's nodes.
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
    let bad = |what: String| Err(gpuq_core::Error::InvalidArgument(what));
    if a.ncols() != n || n % bs != 0 {
        return bad(format!(
            "Gauss-Seidel colour sweeps of a {n} x {} matrix in blocks of {bs}",
            a.ncols()
        ));
    }
    if dinv.block() != bs || dinv.rows() != n {
        return bad(format!(
            "Gauss-Seidel colour sweeps: inverse diagonal blocks of {} ({} values) for {n} rows in blocks of {bs}",
            dinv.block(),
            dinv.rows() * dinv.block()
        ));
    }
    let colored_right = coloring.color_of.len() == n / bs
        && coloring
            .color_of
            .iter()
            .all(|&c| (c as usize) < coloring.colors);
    if !colored_right {
        return bad(format!(
            "Gauss-Seidel colour sweeps: a colouring of {} nodes in {} colours for {} nodes",
            coloring.color_of.len(),
            coloring.colors,
            n / bs
        ));
    }
    let mut nodes_of: Vec<Vec<u32>> = vec![Vec::new(); coloring.colors];
    for (u, &c) in coloring.color_of.iter().enumerate() {
        nodes_of[c as usize].push(u as u32);
    }
    let blocks = dinv.blocks()?;
    nodes_of
        .iter()
        .map(|nodes| color_sweep(a, bs, blocks, coloring, nodes))
        .collect()
}

/// The node a [`color_sweep`] scratch merged last and its block row: the
/// union of its rows' patterns, each column with its bs values (one per row
/// of the node).
struct MergedRow {
    node: usize,
    entries: Vec<(u32, [f64; MAX_BLOCK])>,
}

/// One colour's [`ColorSweep`]: `nodes` (increasing) are its nodes, `inv`
/// the inverse diagonal blocks (bs x bs each, row-major). Rows in parallel.
/// O(the colour's entries bs).
fn color_sweep(
    a: &Csr<f64>,
    bs: usize,
    inv: &[f64],
    coloring: &Coloring,
    nodes: &[u32],
) -> Result<ColorSweep> {
    let (n, rows) = (a.nrows(), nodes.len() * bs);
    let scaled = if bs == 1 {
        // A's rows at the colour's nodes, times d_u: their lengths known,
        // written in place.
        let ptr = gpuq_sparse::par_row_pointers(rows, |k| a.row(nodes[k] as usize).0.len());
        fill_rows(rows, n, ptr, |k, cols, vals| {
            let u = nodes[k] as usize;
            let (c, v) = a.row(u);
            cols.copy_from_slice(c);
            vals.iter_mut().zip(v).for_each(|(y, x)| *y = inv[u] * x);
        })?
    } else {
        par_build(
            rows,
            n,
            || MergedRow {
                node: usize::MAX,
                entries: Vec::new(),
            },
            |k, m, out| {
                let (u, r) = (nodes[k / bs] as usize, k % bs);
                if m.node != u {
                    merge_block_row(a, bs, u, m);
                }
                let blk = &inv[u * bs * bs + r * bs..u * bs * bs + (r + 1) * bs];
                for (j, e) in &m.entries {
                    out.push(*j, blk.iter().zip(e).map(|(b, x)| b * x).sum());
                }
            },
        )?
    };
    let ptr = (0..=rows).into_par_iter().map(|k| k * bs).collect();
    let select = fill_rows(rows, n, ptr, |k, cols, vals| {
        let (u, r) = (nodes[k / bs] as usize, k % bs);
        for (s, (c, v)) in cols.iter_mut().zip(vals).enumerate() {
            *c = (bs * u + s) as u32;
            *v = inv[u * bs * bs + r * bs + s];
        }
    })?;
    let color = coloring.color_of[nodes.first().map_or(0, |&u| u as usize)];
    let in_color = |i: usize| usize::from(!nodes.is_empty() && coloring.color_of[i / bs] == color);
    let tp = gpuq_sparse::par_row_pointers(n, in_color);
    let scatter = Csr::try_new(n, rows, tp, (0..rows as u32).collect(), vec![1.0; rows])?;
    Ok(ColorSweep {
        scaled,
        select,
        scatter,
    })
}

/// Node u's block row into `m`: the union of the patterns of its `bs` rows,
/// each column with its bs values (row s's value at position s, 0 where row
/// s has no entry). O(entries log entries).
fn merge_block_row(a: &Csr<f64>, bs: usize, u: usize, m: &mut MergedRow) {
    m.node = u;
    m.entries.clear();
    for s in 0..bs {
        let (cols, vals) = a.row(bs * u + s);
        for (&j, &v) in cols.iter().zip(vals) {
            let mut e = [0.0; MAX_BLOCK];
            e[s] = v;
            m.entries.push((j, e));
        }
    }
    m.entries.sort_by_key(|e| e.0);
    m.entries.dedup_by(|later, first| {
        if later.0 == first.0 {
            for (f, l) in first.1.iter_mut().zip(&later.1).take(bs) {
                *f += l;
            }
            true
        } else {
            false
        }
    });
}

/// The `nrows x ncols` CSR matrix with row pointers `ptr` whose row i's
/// columns and values `fill(i, cols, vals)` writes (sorted, unique columns),
/// in place, rows in parallel ([`gpuq_sparse::par_fill_rows`]). O(nnz).
fn fill_rows(
    nrows: usize,
    ncols: usize,
    ptr: Vec<usize>,
    fill: impl Fn(usize, &mut [u32], &mut [f64]) + Sync,
) -> Result<Csr<f64>> {
    let (cols, vals) = gpuq_sparse::par_fill_rows(&ptr, || (), |i, _, c, v| fill(i, c, v));
    Csr::try_new(nrows, ncols, ptr, cols, vals)
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
            let col = greedy(&a, 1).unwrap();
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
        let col = greedy(&a, 1).unwrap();
        assert_ne!(col.color_of[0], col.color_of[2]);
        assert_eq!(col.color_of[1], col.color_of[0]);
    }

    /// The definition: nodes in order, each the smallest colour absent from
    /// its already coloured neighbours in the symmetrised node graph.
    fn greedy_by_definition(a: &Csr<f64>, bs: usize) -> Coloring {
        let nodes = a.nrows() / bs;
        let mut adj = vec![std::collections::BTreeSet::new(); nodes];
        for i in 0..a.nrows() {
            for &j in a.row(i).0 {
                let (u, v) = (i / bs, j as usize / bs);
                if u != v {
                    adj[u].insert(v);
                    adj[v].insert(u);
                }
            }
        }
        let mut color_of = vec![u32::MAX; nodes];
        for u in 0..nodes {
            let used: std::collections::BTreeSet<u32> = adj[u]
                .iter()
                .filter(|&&v| v < u)
                .map(|&v| color_of[v])
                .collect();
            color_of[u] = (0..).find(|c| !used.contains(c)).unwrap();
        }
        let colors = color_of.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        Coloring { color_of, colors }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn greedy_is_the_sequential_greedy_of_the_symmetrised_graph(
            nodes in 1usize..60,
            bs in 1usize..4,
            density in 0.0f64..1.0,
            seed in 0u64..1_000_000,
        ) {
            // A pseudo-random pattern, not symmetric, diagonal included.
            let n = nodes * bs;
            let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut coo = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                coo.push(i, i, 1.0).unwrap();
                for j in 0..n {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if j != i && ((state >> 11) as f64 / (1u64 << 53) as f64) < density * density {
                        coo.push(i, j, 0.5).unwrap();
                    }
                }
            }
            let a = Csr::from_coo(&coo).unwrap();
            let col = greedy(&a, bs).unwrap();
            proptest::prop_assert_eq!(&col, &greedy_by_definition(&a, bs));
            check_proper(&a, bs, &col);
        }
    }

    #[test]
    fn more_than_64_colours_take_wider_masks() {
        // 150 nodes all coupled (upper entries only): 150 colours.
        let n = 150;
        let mut coo = gpuq_sparse::Coo::new(n, n);
        for i in 0..n {
            for j in i..n {
                coo.push(i, j, 1.0).unwrap();
            }
        }
        let a = Csr::from_coo(&coo).unwrap();
        let col = greedy(&a, 1).unwrap();
        assert_eq!(col.colors, n);
        assert_eq!(col, greedy_by_definition(&a, 1));
    }

    #[test]
    fn colour_sweeps_partition_the_rows_and_scale_by_the_block_inverse() {
        let (e2, _) = gpuq_sparse::elasticity::elasticity2d::<f64>(5).unwrap();
        let (e3, _) = gpuq_sparse::elasticity3d::elasticity3d::<f64>(3).unwrap();
        for (a, bs) in [(e2, 2), (e3, 3), (laplace3d::<f64>(5), 1)] {
            let d = BlockDiagonal::of(&a, bs, false).inverse().unwrap();
            let col = greedy(&a, bs).unwrap();
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
        assert!(color_sweeps(&a, 12, &d, &greedy(&a, 12).unwrap()).is_err());
    }

    #[test]
    fn colour_sweeps_are_the_selected_rows_scaled_on_many_tasks() {
        // Over 4096 rows per colour matrix (several fill tasks): scaled =
        // select A, select = the colour's rows of D^-1, scatter = select's
        // rows placed back at their nodes.
        let (e3, _) = gpuq_sparse::elasticity3d::elasticity3d::<f64>(24).unwrap();
        for (a, bs) in [(laplace3d::<f64>(26), 1), (e3, 3)] {
            let n = a.nrows();
            let d = BlockDiagonal::of(&a, bs, false).inverse().unwrap();
            let col = greedy(&a, bs).unwrap();
            for (c, s) in color_sweeps(&a, bs, &d, &col).unwrap().iter().enumerate() {
                let want = crate::galerkin::spgemm(&s.select, &a).unwrap();
                assert_eq!(s.scaled.row_ptr(), want.row_ptr(), "bs {bs} colour {c}");
                assert_eq!(s.scaled.col_idx(), want.col_idx());
                for (x, y) in s.scaled.values().iter().zip(want.values()) {
                    assert!((x - y).abs() <= 1e-14 * y.abs().max(1.0), "{x} {y}");
                }
                let nodes: Vec<usize> = (0..n / bs)
                    .filter(|&u| col.color_of[u] as usize == c)
                    .collect();
                assert_eq!(s.select.nrows(), nodes.len() * bs);
                let rows_of = s.scatter.transpose(false);
                for (k, &u) in nodes.iter().enumerate() {
                    for r in 0..bs {
                        let row = k * bs + r;
                        let (cols, vals) = s.select.row(row);
                        let want_cols: Vec<u32> = (0..bs).map(|t| (bs * u + t) as u32).collect();
                        assert_eq!(cols, &want_cols[..]);
                        let blk =
                            &d.blocks().unwrap()[u * bs * bs + r * bs..u * bs * bs + (r + 1) * bs];
                        assert_eq!(vals, blk);
                        assert_eq!(rows_of.row(row).0, &[(bs * u + r) as u32]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_symmetric_order_mirrors() {
        assert_eq!(symmetric_order(3).collect::<Vec<_>>(), vec![0, 1, 2, 1, 0]);
        assert_eq!(symmetric_order(1).collect::<Vec<_>>(), vec![0]);
    }
}
