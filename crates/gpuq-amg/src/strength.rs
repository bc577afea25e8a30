//! Strength of connection (seed 002, sections 9.3.1-9.3.2): the norm matrix E
//! of the bs x bs blocks of A, e_kl = ||A_kl||_F, and the Mandel-Brezina test
//! e_kl^2 >= eps e_kk e_ll, which marks node l strongly connected to node k.

use crate::galerkin::{add, par_build};
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

/// The norm matrix E: node k's row holds e_kl = ||A_kl||_F, the Frobenius norm
/// of the bs x bs block (rows bs k.., columns bs l..), for every block that
/// stores an entry (for bs = 1, e_kl = |a_kl|). O(nnz) time, parallel over
/// nodes. Errors unless A is square and bs divides its size.
pub fn norm_matrix(a: &Csr<f64>, bs: usize) -> Result<Csr<f64>> {
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
    let nodes = n / bs;
    if bs == 1 {
        return Csr::try_new(
            n,
            n,
            a.row_ptr().to_vec(),
            a.col_idx().to_vec(),
            a.values().iter().map(|x| x.abs()).collect(),
        );
    }
    par_build(nodes, nodes, Vec::<(u32, f64)>::new, |k, pairs, out| {
        pairs.clear();
        for r in bs * k..bs * (k + 1) {
            let (c, v) = a.row(r);
            pairs.extend(c.iter().zip(v).map(|(&j, &x)| (j / bs as u32, x * x)));
        }
        pairs.sort_by_key(|p| p.0);
        for &(l, s) in pairs.iter() {
            match out.last_mut() {
                Some(last) if last.0 == l => last.1 += s,
                _ => out.push((l, s)),
            }
        }
        for e in out.iter_mut() {
            e.1 = e.1.sqrt();
        }
    })
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
    let diag = e.diagonal();
    if let Some(k) = diag.iter().position(|&d| d <= 0.0) {
        return Err(Error::Precondition {
            method: "amg",
            reason: format!("the diagonal block of node {} (1-based) is zero", k + 1),
        });
    }
    let strong = |k: usize, l: usize, x: f64| l != k && x > 0.0 && x * x >= eps * diag[k] * diag[l];
    // e_lk, or None when row l does not store column k.
    let entry = |l: usize, k: usize| {
        let (c, v) = e.row(l);
        c.binary_search(&(k as u32)).ok().map(|p| v[p])
    };
    let pattern_symmetric = (0..e.nrows())
        .into_par_iter()
        .all(|k| e.row(k).0.iter().all(|&l| entry(l as usize, k).is_some()));
    let graph = if pattern_symmetric {
        par_build(
            e.nrows(),
            e.ncols(),
            || (),
            |k, _, out| {
                let (c, v) = e.row(k);
                for (&l, &x) in c.iter().zip(v) {
                    let l = l as usize;
                    if l != k && (strong(k, l, x) || strong(l, k, entry(l, k).unwrap_or(0.0))) {
                        out.push((l as u32, 1.0));
                    }
                }
            },
        )?
    } else {
        let directed = par_build(
            e.nrows(),
            e.ncols(),
            || (),
            |k, _, out| {
                let (c, v) = e.row(k);
                out.extend(
                    c.iter()
                        .zip(v)
                        .filter(|&(&l, &x)| strong(k, l as usize, x))
                        .map(|(&l, _)| (l, 1.0)),
                );
            },
        )?;
        let transposed = directed.transpose(false);
        add(1.0, &directed, 1.0, &transposed)?
    };
    Ok(Graph {
        ptr: graph.row_ptr().to_vec(),
        adj: graph.col_idx().to_vec(),
    })
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
