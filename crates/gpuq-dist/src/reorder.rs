//! A graph partition for matrices whose numbering does not follow their
//! geometry (unstructured meshes, scrambled orderings): recursive bisection
//! of the matrix graph by breadth-first level structures, then a renumbering
//! that makes every part a contiguous block of rows.
//!
//! Why this partitioner: it needs no external library (METIS would need C
//! bindings built here), is deterministic (the same matrix and rank count
//! give the same parts on every rank, so every rank can compute it), and
//! on a mesh a breadth-first front from a far-away node cuts it along a level
//! set, which keeps each part compact and its boundary (the halo) small. For
//! the generators' lexicographically numbered grids contiguous row ranges
//! are already such slabs, and this pays only for other numberings.

use crate::partition::RowPartition;
use gpuq_core::{Error, Result, Scalar};
use gpuq_sparse::Csr;
use std::collections::VecDeque;

/// A renumbering of the unknowns with a row-block partition of the new
/// numbering: new row i is old row `order[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reordering {
    order: Vec<usize>,
    position: Vec<usize>,
    partition: RowPartition,
}

impl Reordering {
    /// Recursive bisection of the graph of `a` (its pattern, symmetrised)
    /// into `ranks` parts of sizes as even as [`RowPartition::contiguous`]'s.
    /// Each bisection orders its part breadth-first from a pseudo-peripheral
    /// node (unreached nodes start new searches, in increasing index) and
    /// cuts that order at the part sizes; each final part keeps its rows in
    /// their old order. Errors as [`RowPartition::contiguous`] and on a
    /// matrix that is not square. O(nnz log ranks).
    pub fn bisection<T: Scalar>(a: &Csr<T>, ranks: usize) -> Result<Self> {
        let n = a.nrows();
        if n != a.ncols() {
            return Err(Error::Precondition {
                method: "bisection",
                reason: format!("matrix is {} x {}, not square", n, a.ncols()),
            });
        }
        let partition = RowPartition::contiguous(n, ranks)?;
        let graph = Graph::of(a);
        let mut label = vec![0usize; n];
        let mut order = Vec::with_capacity(n);
        let mut stack = vec![((0..n).collect::<Vec<usize>>(), 0usize, ranks)];
        let mut next_label = 1;
        // Depth first, left part first, so that parts come out in rank order.
        while let Some((mut nodes, first_rank, k)) = stack.pop() {
            if k == 1 {
                nodes.sort_unstable();
                order.extend_from_slice(&nodes);
                continue;
            }
            let k1 = k / 2;
            let size1: usize = (first_rank..first_rank + k1)
                .map(|r| partition.range(r).len())
                .sum();
            let here = next_label;
            next_label += 1;
            for &v in &nodes {
                label[v] = here;
            }
            let bfs = graph.breadth_first(&nodes, &label, here);
            let (left, right) = bfs.split_at(size1);
            stack.push((right.to_vec(), first_rank + k1, k - k1));
            stack.push((left.to_vec(), first_rank, k1));
        }
        let mut position = vec![0; n];
        for (new, &old) in order.iter().enumerate() {
            position[old] = new;
        }
        Ok(Reordering {
            order,
            position,
            partition,
        })
    }

    /// The partition of the new numbering.
    pub fn partition(&self) -> &RowPartition {
        &self.partition
    }

    /// New row i is old row `order()[i]`.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// P A P^T and P b in the new numbering (columns sorted per row). O(nnz
    /// log row length).
    #[allow(clippy::type_complexity)]
    pub fn apply<T: Scalar>(&self, a: &Csr<T>, b: &[T]) -> Result<(Csr<T>, Vec<T>)> {
        let n = self.order.len();
        if a.nrows() != n || a.ncols() != n || b.len() != n {
            return Err(Error::shape(
                "Reordering::apply",
                format!("{n} x {n} and {n} entries"),
                format!("{} x {} and {} entries", a.nrows(), a.ncols(), b.len()),
            ));
        }
        let mut ptr = Vec::with_capacity(n + 1);
        ptr.push(0);
        let (mut cols, mut vals) = (Vec::with_capacity(a.nnz()), Vec::with_capacity(a.nnz()));
        let mut row: Vec<(u32, T)> = Vec::new();
        for &old in &self.order {
            let (c, v) = a.row(old);
            row.clear();
            row.extend(
                c.iter()
                    .zip(v)
                    .map(|(&j, &x)| (self.position[j as usize] as u32, x)),
            );
            row.sort_unstable_by_key(|e| e.0);
            for &(j, x) in &row {
                cols.push(j);
                vals.push(x);
            }
            ptr.push(cols.len());
        }
        let pb = self.order.iter().map(|&old| b[old]).collect();
        Ok((Csr::try_new_allow_nonfinite(n, n, ptr, cols, vals)?, pb))
    }

    /// A vector in the old numbering from one in the new. O(n).
    pub fn restore<T: Copy>(&self, x: &[T]) -> Result<Vec<T>> {
        gpuq_core::check_same_len("Reordering::restore", self.order.len(), x.len())?;
        Ok(self.position.iter().map(|&new| x[new]).collect())
    }
}

/// The symmetrised pattern of a square matrix, as adjacency lists.
struct Graph {
    ptr: Vec<usize>,
    adj: Vec<usize>,
}

impl Graph {
    /// The graph with an edge i - j for every off-diagonal entry (i, j) or
    /// (j, i). O(nnz).
    fn of<T: Scalar>(a: &Csr<T>) -> Self {
        let n = a.nrows();
        let mut degree = vec![0usize; n];
        for i in 0..n {
            for &j in a.row(i).0 {
                let j = j as usize;
                if j != i {
                    degree[i] += 1;
                    degree[j] += 1;
                }
            }
        }
        let mut ptr = vec![0usize; n + 1];
        for i in 0..n {
            ptr[i + 1] = ptr[i] + degree[i];
        }
        let mut fill = ptr.clone();
        let mut adj = vec![0usize; ptr[n]];
        for i in 0..n {
            for &j in a.row(i).0 {
                let j = j as usize;
                if j != i {
                    adj[fill[i]] = j;
                    fill[i] += 1;
                    adj[fill[j]] = i;
                    fill[j] += 1;
                }
            }
        }
        Graph { ptr, adj }
    }

    fn neighbours(&self, v: usize) -> &[usize] {
        &self.adj[self.ptr[v]..self.ptr[v + 1]]
    }

    /// The nodes labelled `here` (listed in `nodes`) in breadth-first order
    /// within them, from a pseudo-peripheral node of the smallest one's
    /// component (two searches to find it); components not reached are
    /// searched next, in increasing index of their first node.
    fn breadth_first(&self, nodes: &[usize], label: &[usize], here: usize) -> Vec<usize> {
        let mut sorted = nodes.to_vec();
        sorted.sort_unstable();
        let mut start = sorted.first().copied().unwrap_or(0);
        for _ in 0..2 {
            if let Some(&far) = self.search(start, label, here).last() {
                start = far;
            }
        }
        let mut out = Vec::with_capacity(nodes.len());
        let mut seen = std::collections::HashSet::with_capacity(nodes.len());
        let mut roots = std::iter::once(start).chain(sorted.iter().copied());
        while out.len() < nodes.len() {
            let Some(root) = roots.find(|v| !seen.contains(v)) else {
                break;
            };
            for v in self.search(root, label, here) {
                if seen.insert(v) {
                    out.push(v);
                }
            }
        }
        out
    }

    /// Breadth-first order from `root` over the nodes labelled `here`
    /// (neighbours in their stored order).
    fn search(&self, root: usize, label: &[usize], here: usize) -> Vec<usize> {
        let mut seen = std::collections::HashSet::from([root]);
        let mut queue = VecDeque::from([root]);
        let mut out = Vec::new();
        while let Some(v) = queue.pop_front() {
            out.push(v);
            for &w in self.neighbours(v) {
                if label[w] == here && seen.insert(w) {
                    queue.push_back(w);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::halo::split_rows;
    use crate::rows_of;
    use gpuq_sparse::generators;

    /// Total ghosts over ranks of `a` under `p`.
    fn ghosts(a: &Csr<f64>, p: &RowPartition) -> usize {
        (0..p.ranks())
            .map(|r| {
                split_rows(p, r, &rows_of(a, p, r).unwrap())
                    .unwrap()
                    .ghost_cols
                    .len()
            })
            .sum()
    }

    /// A 2D Laplacian with its unknowns numbered by a fixed scramble.
    fn scrambled(m: usize) -> Csr<f64> {
        let a = generators::laplace2d::<f64>(m);
        let n = a.nrows();
        // A fixed permutation: multiply by a number coprime to n.
        let step = (1..n)
            .rev()
            .find(|s| gcd(*s, n) == 1 && *s < n / 2 + 7)
            .unwrap();
        let order: Vec<usize> = (0..n).map(|i| (i * step) % n).collect();
        let mut position = vec![0; n];
        for (new, &old) in order.iter().enumerate() {
            position[old] = new;
        }
        let r = Reordering {
            order,
            position,
            partition: RowPartition::contiguous(n, 1).unwrap(),
        };
        r.apply(&a, &vec![0.0; n]).unwrap().0
    }

    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    #[test]
    fn bisection_is_a_permutation_with_even_parts() {
        let a = generators::laplace2d::<f64>(9);
        let r = Reordering::bisection(&a, 3).unwrap();
        let mut seen = r.order().to_vec();
        seen.sort_unstable();
        assert_eq!(seen, (0..81).collect::<Vec<_>>());
        assert_eq!(r.partition(), &RowPartition::contiguous(81, 3).unwrap());
        let b: Vec<f64> = (0..81).map(|i| i as f64).collect();
        let (pa, pb) = r.apply(&a, &b).unwrap();
        assert_eq!(r.restore(&pb).unwrap(), b);
        assert_eq!(pa.nnz(), a.nnz());
        assert_eq!(Reordering::bisection(&a, 3).unwrap(), r, "deterministic");
        assert!(Reordering::bisection(&a, 82).is_err());
        assert!(r.restore(&b[1..]).is_err());
    }

    #[test]
    fn bisection_pays_on_a_scrambled_numbering() {
        let a = scrambled(16);
        let contiguous = RowPartition::contiguous(a.nrows(), 4).unwrap();
        let r = Reordering::bisection(&a, 4).unwrap();
        let (pa, _) = r.apply(&a, &vec![0.0; a.nrows()]).unwrap();
        let (before, after) = (ghosts(&a, &contiguous), ghosts(&pa, r.partition()));
        println!("ghosts: {before} contiguous, {after} after bisection");
        assert!(4 * after < before, "{after} ghosts after, {before} before");
    }

    #[test]
    fn disconnected_graphs_are_covered() {
        let a = Csr::<f64>::identity(10);
        let r = Reordering::bisection(&a, 4).unwrap();
        let mut seen = r.order().to_vec();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }
}
