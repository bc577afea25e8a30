//! Strength of connection (seed 002, sections 9.3.1-9.3.2): the norm matrix E
//! of the bs x bs blocks of A, e_kl = ||A_kl||_F, and the Mandel-Brezina test
//! e_kl^2 >= eps e_kk e_ll, which marks node l strongly connected to node k.

use crate::galerkin::{add, par_build, RowWriter};
use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

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
/// direction counts, which changes nothing for symmetric A). When E's pattern
/// is symmetric (the usual case), row k is built at once from both tests on
/// each stored e_kl, finding e_lk by binary search (the device's kernel does
/// the same); otherwise the directed graph is added to its transpose. O(nnz(E)
/// log(row length)), parallel over rows. Errors when a diagonal block is zero
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

/// [`strong_graph`] of E, or with `abs` of the matrix of E's absolute
/// values. The symmetric build runs first and notes any e_kl whose e_lk is
/// not stored; then the directed graph is added to its transpose instead.
fn graph_of(e: &Csr<f64>, abs: bool, eps: f64) -> Result<Graph> {
    let value = |x: f64| if abs { x.abs() } else { x };
    // e_lk, or None when row l does not store column k.
    let entry = |l: usize, k: usize| {
        let (c, v) = e.row(l);
        c.binary_search(&(k as u32)).ok().map(|p| value(v[p]))
    };
    let diag: Vec<f64> = (0..e.nrows())
        .into_par_iter()
        .map(|k| entry(k, k).unwrap_or(0.0))
        .collect();
    if let Some(k) = diag.iter().position(|&d| d <= 0.0) {
        return Err(Error::Precondition {
            method: "amg",
            reason: format!("the diagonal block of node {} (1-based) is zero", k + 1),
        });
    }
    let strong = |k: usize, l: usize, x: f64| l != k && x > 0.0 && x * x >= eps * diag[k] * diag[l];
    let asymmetric = AtomicBool::new(false);
    let symmetric = par_build(
        e.nrows(),
        e.ncols(),
        || (),
        |k, _, out| {
            let (c, v) = e.row(k);
            for (&l, &x) in c.iter().zip(v) {
                let l = l as usize;
                if l == k {
                    continue;
                }
                match entry(l, k) {
                    Some(y) if strong(k, l, value(x)) || strong(l, k, y) => out.push(l as u32, 1.0),
                    Some(_) => {}
                    None => asymmetric.store(true, Ordering::Relaxed),
                }
            }
        },
    )?;
    let graph = if asymmetric.into_inner() {
        let directed = par_build(
            e.nrows(),
            e.ncols(),
            || (),
            |k, _, out| {
                let (c, v) = e.row(k);
                for (&l, &x) in c.iter().zip(v) {
                    if strong(k, l as usize, value(x)) {
                        out.push(l, 1.0);
                    }
                }
            },
        )?;
        let transposed = directed.transpose(false);
        add(1.0, &directed, 1.0, &transposed)?
    } else {
        symmetric
    };
    let (_, _, ptr, adj, _) = graph.into_parts();
    Ok(Graph { ptr, adj })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
