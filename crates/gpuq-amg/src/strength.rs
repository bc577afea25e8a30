//! Strength of connection (seed 002, sections 9.3.1-9.3.2): the norm matrix E
//! of the bs x bs blocks of A, e_kl = ||A_kl||_F, and the Mandel-Brezina test
//! e_kl^2 >= eps e_kk e_ll, which marks node l strongly connected to node k.

use crate::galerkin::{add, par_build, RowWriter};
use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// The node graph of strong connections: symmetric, without self loops, each
/// node's neighbours sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    ptr: Vec<usize>,
    adj: Vec<u32>,
}

impl Graph {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.ptr.len() - 1
    }

    /// `true` for a graph of no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The neighbours of node `i`, sorted.
    pub fn neighbours(&self, i: usize) -> &[u32] {
        &self.adj[self.ptr[i]..self.ptr[i + 1]]
    }

    /// Number of (directed) edges, twice the undirected count.
    pub fn edges(&self) -> usize {
        self.adj.len()
    }
}

/// Errors unless `a` is square and `bs` (nonzero) divides its size.
fn check_blocks(a: &Csr<f64>, bs: usize) -> Result<()> {
    let n = a.nrows();
    if bs == 0 || n % bs != 0 || a.ncols() != n {
        return Err(Error::Precondition {
            method: "amg",
            reason: format!(
                "a {} x {} matrix cannot be cut into {bs} x {bs} blocks",
                n,
                a.ncols()
            ),
        });
    }
    Ok(())
}

/// The norm matrix E: node k's row holds e_kl = ||A_kl||_F, the Frobenius norm
/// of the bs x bs block (rows bs k.., columns bs l..), for every block that
/// stores an entry (for bs = 1, e_kl = |a_kl|); each block's squares are
/// summed row by row, each row's in column order. O(nnz) time, parallel over
/// nodes. Errors unless A is square and bs divides its size.
pub fn norm_matrix(a: &Csr<f64>, bs: usize) -> Result<Csr<f64>> {
    check_blocks(a, bs)?;
    let n = a.nrows();
    if bs == 1 {
        return Csr::try_new(
            n,
            n,
            a.row_ptr().to_vec(),
            a.col_idx().to_vec(),
            a.values().iter().map(|x| x.abs()).collect(),
        );
    }
    par_build(n / bs, n / bs, Vec::new, |k, cursors, out| {
        block_norms(a, bs, k, cursors, out)
    })
}

/// Row k of the norm matrix ([`norm_matrix`], bs > 1): the bs rows of node k
/// merged by block column (`cursors`: each row's next entry and its end).
fn block_norms(
    a: &Csr<f64>,
    bs: usize,
    k: usize,
    cursors: &mut Vec<(usize, usize)>,
    out: &mut RowWriter<'_>,
) {
    let (ptr, cols, vals) = (a.row_ptr(), a.col_idx(), a.values());
    let block = bs as u32;
    cursors.clear();
    cursors.extend((bs * k..bs * (k + 1)).map(|r| (ptr[r], ptr[r + 1])));
    while let Some(first) = cursors
        .iter()
        .filter(|&&(p, end)| p < end)
        .map(|&(p, _)| cols[p])
        .min()
    {
        let l = first / block;
        let mut sum = None;
        for (p, end) in cursors.iter_mut() {
            while *p < *end && cols[*p] < (l + 1) * block {
                let s = vals[*p] * vals[*p];
                sum = Some(sum.map_or(s, |t: f64| t + s));
                *p += 1;
            }
        }
        out.push(l, sum.unwrap_or(0.0).sqrt());
    }
}

/// The strong-connection graph of the norm matrix E: l is a neighbour of k
/// (k != l) when e_kl^2 >= eps e_kk e_ll and e_kl > 0 (a stored zero block is
/// never strong); the graph is then made symmetric (an edge of either
/// direction counts, which changes nothing for symmetric A). The directed
/// graph is built in one filtering pass; where it is symmetric already (the
/// usual case: E symmetric and no test decided differently in its two
/// directions by rounding) it is the result, checked by a binary search per
/// edge below the diagonal; otherwise it is added to its transpose. The
/// device's kernel builds the same graph in every case. O(nnz(E) + edges
/// log(degree)), parallel over rows. Errors when a diagonal block is zero
/// (e_kk = 0).
pub fn strong_graph(e: &Csr<f64>, eps: f64) -> Result<Graph> {
    graph_of(e, false, eps)
}

/// [`strong_graph`] of [`norm_matrix`]`(a, bs)`; for bs = 1 read from `a`
/// itself (e_kl = |a_kl|), without the norm matrix's copy. Errors as both.
pub fn strength_graph(a: &Csr<f64>, bs: usize, eps: f64) -> Result<Graph> {
    if bs == 1 {
        check_blocks(a, bs)?;
        graph_of(a, true, eps)
    } else {
        graph_of(&norm_matrix(a, bs)?, false, eps)
    }
}

/// Rows per task of [`filtered_graph`].
const FILL_ROWS: usize = 2048;

/// The graph whose node k has the neighbours l (in column order) of the
/// entries e_kl of row k for which `keep(k, l, e_kl)`: one parallel pass
/// over E's rows in tasks of [`FILL_ROWS`] rows, each writing its rows'
/// neighbours and ends into arrays of its own (each entry tested once),
/// then the row pointers by a prefix sum and the tasks' neighbours copied
/// into place in parallel. O(nnz(E)).
fn filtered_graph(e: &Csr<f64>, keep: impl Fn(usize, usize, f64) -> bool + Sync) -> Graph {
    let n = e.nrows();
    let tasks: Vec<(Vec<usize>, Vec<u32>)> = (0..n.div_ceil(FILL_ROWS))
        .into_par_iter()
        .map(|t| {
            let rows = t * FILL_ROWS..((t + 1) * FILL_ROWS).min(n);
            let mut ends = Vec::with_capacity(rows.len());
            let first = e.row_ptr()[rows.start];
            let mut adj = Vec::with_capacity(e.row_ptr()[rows.end] - first);
            for k in rows {
                let (c, v) = e.row(k);
                adj.extend(
                    c.iter()
                        .zip(v)
                        .filter(|&(&l, &x)| keep(k, l as usize, x))
                        .map(|(&l, _)| l),
                );
                ends.push(adj.len());
            }
            (ends, adj)
        })
        .collect();
    let mut ptr = Vec::with_capacity(n + 1);
    ptr.push(0);
    for (ends, _) in &tasks {
        let base = ptr[ptr.len() - 1];
        ptr.extend(ends.iter().map(|&x| base + x));
    }
    let mut adj = vec![0u32; ptr[n]];
    // Each task's rows own a contiguous piece of `adj`.
    let mut pieces = Vec::with_capacity(tasks.len());
    let mut rest = adj.as_mut_slice();
    for (_, part) in &tasks {
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(part.len());
        pieces.push((piece, part));
        rest = tail;
    }
    pieces
        .into_par_iter()
        .for_each(|(piece, part)| piece.copy_from_slice(part));
    Graph { ptr, adj }
}

/// [`strong_graph`] of E, or with `abs` of the matrix of E's absolute
/// values.
fn graph_of(e: &Csr<f64>, abs: bool, eps: f64) -> Result<Graph> {
    let value = |x: f64| if abs { x.abs() } else { x };
    let diag: Vec<f64> = (0..e.nrows())
        .into_par_iter()
        .map(|k| {
            let (c, v) = e.row(k);
            c.binary_search(&(k as u32)).map_or(0.0, |p| value(v[p]))
        })
        .collect();
    if let Some(k) = diag.iter().position(|&d| d <= 0.0) {
        return Err(Error::Precondition {
            method: "amg",
            reason: format!("the diagonal block of node {} (1-based) is zero", k + 1),
        });
    }
    let strong = |k: usize, l: usize, x: f64| l != k && x > 0.0 && x * x >= eps * diag[k] * diag[l];
    let directed = filtered_graph(e, |k, l, x| strong(k, l, value(x)));
    if is_structurally_symmetric(&directed) {
        return Ok(directed);
    }
    let n = e.nrows();
    let edges = directed.adj.len();
    let d = Csr::try_new(n, n, directed.ptr, directed.adj, vec![1.0; edges])?;
    let (_, _, ptr, adj, _) = add(1.0, &d, 1.0, &d.transpose(false))?.into_parts();
    Ok(Graph { ptr, adj })
}

/// Whether every edge of `g` has its reverse: each edge below the diagonal
/// (l < k) finds k among l's neighbours by binary search, and the edges
/// below and above the diagonal are as many (so the map from the ones to the
/// others is onto). O(edges log(degree)), parallel over nodes.
fn is_structurally_symmetric(g: &Graph) -> bool {
    let (lower, upper) = (0..g.len())
        .into_par_iter()
        .with_min_len(1024)
        .map(|k| {
            let adj = g.neighbours(k);
            let below = adj.partition_point(|&l| (l as usize) < k);
            let above = adj.len() - adj[below..].partition_point(|&l| l as usize <= k) - below;
            (below, above)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    lower == upper
        && (0..g.len()).into_par_iter().with_min_len(1024).all(|k| {
            let adj = g.neighbours(k);
            adj[..adj.partition_point(|&l| (l as usize) < k)]
                .iter()
                .all(|&l| g.neighbours(l as usize).binary_search(&(k as u32)).is_ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::is_symmetric;

    #[test]
    fn norm_matrix_of_blocks() {
        // 4 x 4 with 2 x 2 blocks: [[1 2 | 0 3], [2 1 | 4 0], [0 4 | 5 0], [3 0 | 0 5]].
        let dense = [
            1.0, 2.0, 0.0, 3.0, 2.0, 1.0, 4.0, 0.0, 0.0, 4.0, 5.0, 0.0, 3.0, 0.0, 0.0, 5.0,
        ];
        let mut coo = gpuq_sparse::Coo::new(4, 4);
        for (k, &v) in dense.iter().enumerate() {
            if v != 0.0 {
                coo.push(k / 4, k % 4, v).unwrap();
            }
        }
        let a = Csr::from_coo(&coo).unwrap();
        let e = norm_matrix(&a, 2).unwrap().to_dense();
        assert!((e[0] - 10f64.sqrt()).abs() < 1e-14);
        assert!((e[1] - 5.0).abs() < 1e-14);
        assert!((e[2] - 5.0).abs() < 1e-14);
        assert!((e[3] - 50f64.sqrt()).abs() < 1e-14);
        assert!(norm_matrix(&a, 3).is_err());
        // e_01^2 = 25 >= eps sqrt(10) sqrt(50) holds for eps <= 1.118 only.
        assert_eq!(
            strong_graph(&norm_matrix(&a, 2).unwrap(), 1.1)
                .unwrap()
                .edges(),
            2
        );
        assert_eq!(
            strong_graph(&norm_matrix(&a, 2).unwrap(), 1.2)
                .unwrap()
                .edges(),
            0
        );
    }

    #[test]
    fn a_rounding_apart_from_symmetric_builds_the_symmetric_graph() {
        // convdiff2d's symmetric part, exactly symmetric, keeps its directed
        // graph; the same part with one pair of entries a rounding apart
        // builds the same graph (here no test decides differently).
        let a = gpuq_sparse::generators::convdiff2d::<f64>(9, 0.4);
        let sym = add(0.5, &a, 0.5, &a.transpose(false)).unwrap();
        assert!(is_symmetric(&sym, 0.0) && !is_symmetric(&a, 0.0));
        let (m, n, ptr, cols, mut vals) = sym.clone().into_parts();
        vals[ptr[3]] *= 1.0 + f64::EPSILON; // a_32, off the diagonal
        let nudged = Csr::try_new(m, n, ptr, cols, vals).unwrap();
        assert!(!is_symmetric(&nudged, 0.0));
        let diag = |i: usize| {
            let (c, v) = sym.row(i);
            v[c.binary_search(&(i as u32)).unwrap()].abs()
        };
        for eps in [0.0, 0.01, 0.3] {
            let shortcut = strength_graph(&sym, 1, eps).unwrap();
            assert_eq!(shortcut, strength_graph(&nudged, 1, eps).unwrap());
            assert!(shortcut.edges() > 0 || eps > 0.0);
            // Each node's neighbours: the strong ones of its row.
            for k in 0..sym.nrows() {
                let (c, v) = sym.row(k);
                let strong: Vec<u32> = c
                    .iter()
                    .zip(v)
                    .filter(|&(&l, &x)| {
                        l as usize != k && x != 0.0 && x * x >= eps * diag(k) * diag(l as usize)
                    })
                    .map(|(&l, _)| l)
                    .collect();
                assert_eq!(shortcut.neighbours(k), &strong[..]);
            }
        }
    }

    /// The definition: l is k's neighbour when either stored direction is
    /// strong, each found by search.
    fn union_by_search(e: &Csr<f64>, eps: f64) -> Vec<Vec<u32>> {
        let entry = |l: usize, k: usize| {
            let (c, v) = e.row(l);
            c.binary_search(&(k as u32)).ok().map(|p| v[p].abs())
        };
        let d = |k: usize| entry(k, k).unwrap();
        let strong = |k: usize, l: usize| {
            entry(k, l).is_some_and(|x| l != k && x > 0.0 && x * x >= eps * d(k) * d(l))
        };
        (0..e.nrows())
            .map(|k| {
                (0..e.nrows() as u32)
                    .filter(|&l| strong(k, l as usize) || strong(l as usize, k))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_graph_is_the_union_of_both_directions_on_any_pattern() {
        let values = gpuq_sparse::generators::convdiff2d::<f64>(8, 0.7);
        let sym = add(0.5, &values, 0.5, &values.transpose(false)).unwrap();
        // convdiff2d's pattern with every third entry off the diagonal dropped.
        let mut coo = gpuq_sparse::Coo::new(values.nrows(), values.ncols());
        for k in 0..values.nrows() {
            let (c, v) = values.row(k);
            for (p, (&l, &x)) in c.iter().zip(v).enumerate() {
                if l as usize == k || (k + p) % 3 != 0 {
                    coo.push(k, l as usize, x).unwrap();
                }
            }
        }
        let pattern = Csr::from_coo(&coo).unwrap();
        for a in [&sym, &values, &pattern] {
            for eps in [0.0, 0.05, 0.3, 0.6] {
                let g = strength_graph(a, 1, eps).unwrap();
                let want = union_by_search(a, eps);
                for (k, w) in want.iter().enumerate() {
                    assert_eq!(g.neighbours(k), &w[..], "row {k}, eps {eps}");
                }
            }
        }
        assert!(!is_symmetric(&values, 0.0));
        let asymmetric = strength_graph(&pattern, 1, 0.0).unwrap();
        assert!(is_structurally_symmetric(&asymmetric));
        let directed = filtered_graph(&pattern, |k, l, _| l != k);
        assert!(!is_structurally_symmetric(&directed));
    }

    /// Rows over several of the filter's tasks ([`FILL_ROWS`]): each node's
    /// neighbours are its row's strong entries, in order.
    #[test]
    fn the_filter_over_many_tasks_keeps_each_rows_strong_entries() {
        let values = gpuq_sparse::generators::convdiff2d::<f64>(70, 0.7);
        let a = add(0.5, &values, 0.5, &values.transpose(false)).unwrap();
        assert!(a.nrows() > 2 * FILL_ROWS);
        let d: Vec<f64> = (0..a.nrows())
            .map(|k| {
                let (c, v) = a.row(k);
                v[c.binary_search(&(k as u32)).unwrap()].abs()
            })
            .collect();
        for eps in [0.0, 0.2] {
            let g = strength_graph(&a, 1, eps).unwrap();
            for k in 0..a.nrows() {
                let (c, v) = a.row(k);
                let want: Vec<u32> = c
                    .iter()
                    .zip(v)
                    .filter(|&(&l, &x)| {
                        l as usize != k && x != 0.0 && x * x >= eps * d[k] * d[l as usize]
                    })
                    .map(|(&l, _)| l)
                    .collect();
                assert_eq!(g.neighbours(k), &want[..], "row {k}, eps {eps}");
            }
        }
    }

    #[test]
    fn the_shortcut_tests_both_directions_as_the_search_does() {
        // 9 >= 0.001 * 125 * 72 holds, 9 >= 0.001 * 72 * 125 does not (one
        // ulp above 9): the edge is strong one way only, and kept both ways.
        let a = Csr::try_new(
            2,
            2,
            vec![0, 2, 4],
            vec![0, 1, 0, 1],
            vec![72.0, -3.0, -3.0, 125.0],
        )
        .unwrap();
        let g = strength_graph(&a, 1, 0.001).unwrap();
        assert_eq!(
            (g.neighbours(0), g.neighbours(1)),
            (&[1u32][..], &[0u32][..])
        );
    }
}
