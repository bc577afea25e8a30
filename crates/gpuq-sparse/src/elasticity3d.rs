//! 3D isotropic linear elasticity on a perturbed tetrahedral mesh: the
//! `elasticity3d:N` test problem.
//!
//! The unit cube `[0,1]^3` is cut into `N^3` cubes of side `h = 1/N`, each
//! split into six tetrahedra around its main diagonal (Kuhn's subdivision), and
//! every node inside the cube is moved by a pseudo-random offset of up to
//! `0.15 h` per coordinate (a fixed hash of the node, so the mesh is the same
//! on every run and machine): element shapes and sizes vary as on an
//! unstructured mesh, while the nodes keep a grid numbering. Nodes are numbered
//! `node = (iz (N+1) + iy) (N+1) + ix`; coordinates `h (ix, iy, iz)` plus the
//! offset. Linear (P1) elements, exact integration, material `E = 1`,
//! `nu = 0.3` (Lame `lambda = E nu / ((1+nu)(1-2nu))`, `mu = E / (2(1+nu))`).
//!
//! The face `x = 0` is clamped by *eliminating* its nodes, so the system has
//! the `N (N+1)^2` nodes with `ix >= 1`, numbered in the same order, with three
//! unknowns per node interleaved `(u_x, u_y, u_z, u_x, ...)`: symmetric
//! positive definite, a full 3x3 block for every pair of nodes that share an
//! element (explicit zeros kept; 15 blocks per interior node). The load is a
//! uniform body force `(0, 0, -1)`, each element giving a quarter of its volume
//! to the `z` unknown of each of its nodes.
//!
//! The six rigid-body modes of the nodes' coordinates
//! ([`Elasticity3d::free_coordinates`]) span the kernel of the stiffness
//! before the clamp ([`Elasticity3d::unconstrained_stiffness`]); on the free
//! nodes they are the near-null space smoothed aggregation wants.
//!
//! Assembly is row by row over each node's elements (each node's 3x3 blocks
//! computed once for its three rows): O(nnz) time and memory.

use crate::generators::build;
use crate::Csr;
use gpuq_core::{Result, Scalar};

/// Largest offset of an interior node, as a fraction of `h`, per coordinate.
/// The Kuhn tetrahedra's smallest height is `h / sqrt(2)`; four vertices
/// each moved by at most `0.15 sqrt(3) h` cannot flip one.
const JITTER: f64 = 0.15;

/// The `elasticity3d:N` problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elasticity3d {
    /// Cubes per side.
    pub n: usize,
    /// Young's modulus E (> 0).
    pub young: f64,
    /// Poisson ratio nu (in `[0, 0.5)`).
    pub poisson: f64,
}

/// The six tetrahedra of a cube, each as four corner offsets in `{0,1}^3`:
/// the origin, then one axis, then two, then the far corner, for the six
/// orders of the axes.
fn kuhn_tets() -> [[[usize; 3]; 4]; 6] {
    crate::generators::AXIS_ORDERS.map(|[a, b, _]| {
        let mut one = [0; 3];
        one[a] = 1;
        let mut two = one;
        two[b] = 1;
        [[0; 3], one, two, [1; 3]]
    })
}

/// A value in [-1, 1) from a hash of `key` (splitmix64's finaliser).
fn unit_hash(key: u64) -> f64 {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

impl Elasticity3d {
    /// `n` cubes per side, `E = 1`, `nu = 0.3`. Errors when `n` is zero or the
    /// system would exceed 32-bit indices.
    pub fn new(n: usize) -> Result<Self> {
        Self::with_material(n, 1.0, 0.3)
    }

    /// `n` cubes per side of the given material. Errors when `n` is zero, the
    /// size exceeds 32-bit indices, `young` is not positive and finite or
    /// `poisson` is outside `[0, 0.5)`.
    pub fn with_material(n: usize, young: f64, poisson: f64) -> Result<Self> {
        crate::elasticity::check_problem("elasticity3d", n, 3, (young, poisson))?;
        Ok(Self { n, young, poisson })
    }

    /// Lame parameters `(lambda, mu)`.
    pub fn lame(&self) -> (f64, f64) {
        crate::elasticity::lame(self.young, self.poisson)
    }

    /// The coordinates of grid node `(ix, iy, iz)`, offset inside the cube.
    fn point(&self, p: [usize; 3]) -> [f64; 3] {
        let n = self.n;
        let h = 1.0 / n as f64;
        let interior = p.iter().all(|&c| c > 0 && c < n);
        let node = ((p[2] * (n + 1) + p[1]) * (n + 1) + p[0]) as u64;
        std::array::from_fn(|d| {
            let offset = if interior {
                JITTER * unit_hash(3 * node + d as u64)
            } else {
                0.0
            };
            (p[d] as f64 + offset) * h
        })
    }

    /// Number of free (unclamped) nodes, `N (N+1)^2`; three unknowns each.
    pub fn free_nodes(&self) -> usize {
        self.n * (self.n + 1) * (self.n + 1)
    }

    /// The coordinates of the free nodes as three columns `[x, y, z]` (node
    /// `k` owns unknowns `3k..3k+3`), the form of a coordinates file. O(N^3).
    pub fn free_coordinates(&self) -> Vec<Vec<f64>> {
        self.coordinates(1)
    }

    /// The coordinates of the nodes with `ix >= first_ix`, as three columns.
    fn coordinates(&self, first_ix: usize) -> Vec<Vec<f64>> {
        let n = self.n;
        let pts: Vec<[f64; 3]> = (0..=n)
            .flat_map(|iz| (0..=n).flat_map(move |iy| (first_ix..=n).map(move |ix| [ix, iy, iz])))
            .map(|p| self.point(p))
            .collect();
        (0..3).map(|d| pts.iter().map(|p| p[d]).collect()).collect()
    }

    /// The P1 element stiffness (12 x 12, unknowns of the four vertices
    /// interleaved) and the volume of the tetrahedron `x`. O(1).
    fn element(&self, x: &[[f64; 3]; 4]) -> ([[f64; 12]; 12], f64) {
        let (lambda, mu) = self.lame();
        let e: [[f64; 3]; 3] =
            std::array::from_fn(|k| std::array::from_fn(|d| x[k + 1][d] - x[0][d]));
        // Rows of J^-1 (J's columns are the edges e_k) are the gradients of
        // the barycentric coordinates of vertices 1..3: cross products of the
        // edges over det J.
        let cross = |a: [f64; 3], b: [f64; 3]| {
            [
                a[1] * b[2] - a[2] * b[1],
                a[2] * b[0] - a[0] * b[2],
                a[0] * b[1] - a[1] * b[0],
            ]
        };
        let c = [cross(e[1], e[2]), cross(e[2], e[0]), cross(e[0], e[1])];
        let det: f64 = (0..3).map(|d| e[0][d] * c[0][d]).sum();
        let mut g = [[0.0; 3]; 4];
        for k in 0..3 {
            for d in 0..3 {
                g[k + 1][d] = c[k][d] / det;
                g[0][d] -= c[k][d] / det;
            }
        }
        let volume = det.abs() / 6.0;
        // K_ab = V (lambda g_a g_b^T + mu g_b g_a^T + mu (g_a . g_b) I).
        let mut ke = [[0.0; 12]; 12];
        for a in 0..4 {
            for b in 0..4 {
                let dot: f64 = (0..3).map(|d| g[a][d] * g[b][d]).sum();
                for i in 0..3 {
                    for j in 0..3 {
                        let iso = if i == j { mu * dot } else { 0.0 };
                        ke[3 * a + i][3 * b + j] =
                            volume * (lambda * g[a][i] * g[b][j] + mu * g[a][j] * g[b][i] + iso);
                    }
                }
            }
        }
        (ke, volume)
    }

    /// The tetrahedra with grid node `p` as a vertex: each as its four grid
    /// nodes and `p`'s position among them.
    fn tets_at(&self, p: [usize; 3]) -> Vec<([[usize; 3]; 4], usize)> {
        let n = self.n;
        let mut out = Vec::with_capacity(24);
        for corner in 0..8 {
            let o = [corner & 1, (corner >> 1) & 1, (corner >> 2) & 1];
            if (0..3).any(|d| p[d] < o[d] || p[d] - o[d] >= n) {
                continue;
            }
            let origin: [usize; 3] = std::array::from_fn(|d| p[d] - o[d]);
            for tet in kuhn_tets() {
                if let Some(at) = tet.iter().position(|&v| v == o) {
                    let nodes = tet.map(|v| std::array::from_fn(|d| origin[d] + v[d]));
                    out.push((nodes, at));
                }
            }
        }
        out
    }

    /// The stiffness of the nodes with `ix >= first_ix` (1: clamped; 0: all).
    fn assemble<T: Scalar>(&self, first_ix: usize) -> Csr<T> {
        let n = self.n;
        let width = n + 1 - first_ix;
        let nodes = width * (n + 1) * (n + 1);
        let index = |p: [usize; 3]| ((p[2] * (n + 1) + p[1]) * width + p[0] - first_ix) as u32;
        // The current node's 3x3 blocks by neighbour offset (+1 per axis),
        // filled when its first row is built.
        let mut blocks = [[[[0.0f64; 3]; 3]; 3]; 9];
        let mut touched = [false; 27];
        let matrix = build(3 * nodes, 45, |row, out| {
            let (node, comp) = (row / 3, row % 3);
            let p = [
                node % width + first_ix,
                node / width % (n + 1),
                node / width / (n + 1),
            ];
            if comp == 0 {
                blocks = [[[[0.0; 3]; 3]; 3]; 9];
                touched = [false; 27];
                for (tet, at) in self.tets_at(p) {
                    let x = tet.map(|v| self.point(v));
                    let (ke, _) = self.element(&x);
                    for (b, v) in tet.iter().enumerate() {
                        let slot = (0..3).fold(0, |s, d| 3 * s + (v[2 - d] + 1 - p[2 - d]));
                        touched[slot] = true;
                        for i in 0..3 {
                            for j in 0..3 {
                                blocks[slot / 3][slot % 3][i][j] += ke[3 * at + i][3 * b + j];
                            }
                        }
                    }
                }
            }
            // Neighbours in node order: z, then y, then x offsets.
            for slot in 0..27 {
                if !touched[slot] {
                    continue;
                }
                let off = [slot % 3, slot / 3 % 3, slot / 9];
                let q: [usize; 3] = std::array::from_fn(|d| p[d] + off[d] - 1);
                if q[0] < first_ix {
                    continue;
                }
                let col = index(q);
                for (c, &v) in blocks[slot / 3][slot % 3][comp].iter().enumerate() {
                    out.push((3 * col + c as u32, T::from_f64(v)));
                }
            }
        });
        symmetrised(matrix)
    }

    /// The clamped stiffness matrix: `3 N (N+1)^2` unknowns, symmetric
    /// positive definite. O(nnz).
    pub fn stiffness<T: Scalar>(&self) -> Csr<T> {
        self.assemble(1)
    }

    /// The stiffness of all `(N+1)^3` nodes before the clamp: symmetric
    /// positive semidefinite, its kernel the six rigid-body modes. O(nnz).
    pub fn unconstrained_stiffness<T: Scalar>(&self) -> Csr<T> {
        self.assemble(0)
    }

    /// The coordinates of all `(N+1)^3` nodes (the unconstrained system's),
    /// as three columns. O(N^3).
    pub fn all_coordinates(&self) -> Vec<Vec<f64>> {
        self.coordinates(0)
    }

    /// The load of the body force `(0, 0, -1)` on the free unknowns: minus a
    /// quarter of each element's volume on the `z` unknown of each of its
    /// free nodes. O(N^3).
    pub fn load<T: Scalar>(&self) -> Vec<T> {
        let n = self.n;
        (0..self.free_nodes())
            .flat_map(|k| {
                let p = [k % n + 1, k / n % (n + 1), k / n / (n + 1)];
                let weight: f64 = self
                    .tets_at(p)
                    .iter()
                    .map(|(tet, _)| self.element(&tet.map(|v| self.point(v))).1)
                    .sum();
                [T::zero(), T::zero(), T::from_f64(-weight / 4.0)]
            })
            .collect()
    }
}

/// `a` with each entry below the diagonal replaced by its mirror above, so
/// that the matrix is symmetric to the bit (a pair's two sums run over the
/// same elements in different orders). O(nnz log row length).
fn symmetrised<T: Scalar>(a: Csr<T>) -> Csr<T> {
    let upper = a.clone();
    let (n, m, row_ptr, col_idx, mut vals) = a.into_parts();
    for i in 0..n {
        for e in row_ptr[i]..row_ptr[i + 1] {
            let j = col_idx[e] as usize;
            if j < i {
                let (cj, vj) = upper.row(j);
                if let Ok(p) = cj.binary_search(&(i as u32)) {
                    vals[e] = vj[p];
                }
            }
        }
    }
    Csr::try_new(n, m, row_ptr, col_idx, vals).expect("the pattern is unchanged")
}

/// The `elasticity3d:N` system: the clamped stiffness and the body-force
/// load. Errors as [`Elasticity3d::new`]. O(N^3).
pub fn elasticity3d<T: Scalar>(n: usize) -> Result<(Csr<T>, Vec<T>)> {
    let p = Elasticity3d::new(n)?;
    Ok((p.stiffness(), p.load()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_blocks_symmetry_and_load() {
        for n in [1, 2, 4] {
            let p = Elasticity3d::new(n).unwrap();
            let (k, b) = (p.stiffness::<f64>(), p.load::<f64>());
            assert_eq!(k.nrows(), 3 * n * (n + 1) * (n + 1));
            assert_eq!(k.nrows() % 3, 0);
            assert_eq!(k.transpose(false), k);
            // Every row holds whole 3x3 blocks.
            assert!((0..k.nrows()).all(|i| k.row(i).0.len() % 3 == 0));
            // The load is the weight of the free nodes' share of the cube.
            let total: f64 = b.iter().sum();
            assert!(total < 0.0 && total > -1.0, "{total}");
            let full = p.unconstrained_stiffness::<f64>();
            assert_eq!(full.nrows(), 3 * p.all_coordinates()[0].len());
            assert_eq!(full.transpose(false), full);
        }
    }

    #[test]
    fn the_mesh_is_perturbed_and_no_element_is_flat() {
        let p = Elasticity3d::new(6).unwrap();
        let h = 1.0 / 6.0;
        let mut min_v = f64::MAX;
        let mut max_v = 0.0f64;
        for iz in 0..6 {
            for iy in 0..6 {
                for ix in 0..6 {
                    for tet in kuhn_tets() {
                        let x = tet.map(|v| p.point([ix + v[0], iy + v[1], iz + v[2]]));
                        let (_, v) = p.element(&x);
                        min_v = min_v.min(v);
                        max_v = max_v.max(v);
                    }
                }
            }
        }
        let regular = h * h * h / 6.0;
        assert!(min_v > 0.2 * regular, "{min_v} vs {regular}");
        assert!(max_v > 1.2 * regular && min_v < 0.8 * regular);
    }

    #[test]
    fn bad_sizes_are_errors() {
        assert!(Elasticity3d::new(0).is_err());
        assert!(Elasticity3d::new(2000).is_err());
        assert!(Elasticity3d::with_material(2, 1.0, 0.5).is_err());
    }
}
