//! 2D isotropic linear elasticity: the `elasticity2d:N` test problem.
//!
//! The unit square `[0,1]^2` is cut into `N x N` square bilinear (Q1) elements of
//! side `h = 1/N`; the `(N+1)^2` grid nodes are numbered row by row
//! (`node = iy (N+1) + ix`, coordinates `(ix h, iy h)`). The material is
//! isotropic, in plane strain, with Young's modulus `E` and Poisson ratio `nu`
//! (Lame parameters `lambda = E nu / ((1+nu)(1-2nu))`, `mu = E / (2(1+nu))`).
//! The element stiffness is integrated exactly by 2x2 Gauss quadrature.
//!
//! The left edge `x = 0` is clamped: its nodes are *eliminated* (not kept as
//! identity rows), so the system has the `N (N+1)` free nodes `ix >= 1`,
//! numbered in the same row-by-row order (`free = iy N + ix - 1`), with two
//! unknowns per node interleaved `(u_x, u_y, u_x, u_y, ...)`: `2 N (N+1)`
//! unknowns, symmetric positive definite, at most 18 nonzeros per row (every
//! node couples to its 3x3 neighbourhood through full 2x2 blocks, explicit zeros
//! kept so that the 2x2 block structure is complete). The load is a uniform
//! body force `(0, -1)` (gravity), lumped consistently: each element gives
//! `-h^2/4` to the `y` unknown of each of its four nodes.
//!
//! The three rigid-body modes (translations in x and y, the rotation
//! `(-y, x)`) span the kernel of the stiffness *before* the clamp; restricted to
//! the free unknowns they are the near-null space a smoothed-aggregation AMG
//! wants (`gpuq_amg::rigid_body_modes` builds them from
//! [`Elasticity2d::free_coordinates`]).
//!
//! Assembly is row by row over the node stencil, O(nnz) time and memory.

use crate::generators::build;
use crate::Csr;
use gpuq_core::{Error, Result, Scalar};

/// Local node order of a Q1 element: counter-clockwise from the lower left.
const CORNERS: [(usize, usize); 4] = [(0, 0), (1, 0), (1, 1), (0, 1)];

/// The `elasticity2d:N` problem: grid size and material.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elasticity2d {
    /// Elements per side.
    pub n: usize,
    /// Young's modulus E (> 0).
    pub young: f64,
    /// Poisson ratio nu (in `[0, 0.5)`).
    pub poisson: f64,
}

impl Elasticity2d {
    /// The default material of the test problem: `E = 1`, `nu = 0.3`.
    ///
    /// Errors with [`Error::InvalidArgument`] when `n` is zero or the system
    /// would exceed 32-bit indices.
    pub fn new(n: usize) -> Result<Self> {
        Self::with_material(n, 1.0, 0.3)
    }

    /// A grid of `n x n` elements of the given material. Errors when `n` is zero,
    /// the size exceeds 32-bit indices, `young` is not positive and finite or
    /// `poisson` is outside `[0, 0.5)`.
    pub fn with_material(n: usize, young: f64, poisson: f64) -> Result<Self> {
        check_problem("elasticity2d", n, 2, (young, poisson))?;
        Ok(Self { n, young, poisson })
    }

    /// Number of free (unclamped) nodes, `N (N+1)`; the system has twice as many
    /// unknowns.
    pub fn free_nodes(&self) -> usize {
        self.n * (self.n + 1)
    }

    /// Coordinates of the free nodes in unknown order (node `k` owns unknowns
    /// `2k` and `2k+1`). O(N^2).
    pub fn free_coordinates(&self) -> Vec<(f64, f64)> {
        let h = 1.0 / self.n as f64;
        (0..=self.n)
            .flat_map(|iy| (1..=self.n).map(move |ix| (ix as f64 * h, iy as f64 * h)))
            .collect()
    }

    /// Lame parameters `(lambda, mu)` of the plane-strain material.
    pub fn lame(&self) -> (f64, f64) {
        lame(self.young, self.poisson)
    }

    /// The 8x8 Q1 element stiffness (unknowns `(u_x, u_y)` of the four
    /// [`CORNERS`] interleaved). It does not depend on `h` in 2D. O(1).
    fn element_stiffness(&self) -> [[f64; 8]; 8] {
        let (lambda, mu) = self.lame();
        let d = [
            [lambda + 2.0 * mu, lambda, 0.0],
            [lambda, lambda + 2.0 * mu, 0.0],
            [0.0, 0.0, mu],
        ];
        let g = 1.0 / 3.0_f64.sqrt();
        let mut ke = [[0.0; 8]; 8];
        for (xi, eta) in [(-g, -g), (g, -g), (g, g), (-g, g)] {
            // Gradients on the reference square [-1,1]^2; the map to an element of
            // side h scales them by 2/h and the weight by h^2/4: the product is
            // independent of h, so h = 2 is used.
            let mut b = [[0.0; 8]; 3];
            for (a, &(cx, cy)) in CORNERS.iter().enumerate() {
                let (sx, sy) = (2.0 * cx as f64 - 1.0, 2.0 * cy as f64 - 1.0);
                let dx = sx * (1.0 + sy * eta) / 4.0;
                let dy = sy * (1.0 + sx * xi) / 4.0;
                b[0][2 * a] = dx;
                b[1][2 * a + 1] = dy;
                b[2][2 * a] = dy;
                b[2][2 * a + 1] = dx;
            }
            for (i, row) in ke.iter_mut().enumerate() {
                for (j, k) in row.iter_mut().enumerate() {
                    let mut s = 0.0;
                    for p in 0..3 {
                        for q in 0..3 {
                            s += b[p][i] * d[p][q] * b[q][j];
                        }
                    }
                    *k += s;
                }
            }
        }
        // Symmetric to the bit (the sums above run in different orders for
        // (i, j) and (j, i)).
        for (i, j) in (0..8).flat_map(|i| (0..i).map(move |j| (i, j))) {
            ke[i][j] = ke[j][i];
        }
        ke
    }

    /// Assembles the stiffness over the nodes with `ix >= first_ix`, numbered row
    /// by row (`first_ix = 1`: the clamped system; `0`: the singular one).
    fn assemble<T: Scalar>(&self, first_ix: usize) -> Csr<T> {
        let n = self.n;
        let ke = self.element_stiffness();
        let width = n + 1 - first_ix;
        let nodes = width * (n + 1);
        build(2 * nodes, 18, |row, out| {
            let (node, comp) = (row / 2, row % 2);
            let (ix, iy) = (node % width + first_ix, node / width);
            // acc[dy][dx][c]: coupling to unknown c of node (ix+dx-1, iy+dy-1).
            let mut acc = [[[0.0f64; 2]; 3]; 3];
            for ey in iy.saturating_sub(1)..(iy + 1).min(n) {
                for ex in ix.saturating_sub(1)..(ix + 1).min(n) {
                    let a = CORNERS
                        .iter()
                        .position(|&(cx, cy)| (ex + cx, ey + cy) == (ix, iy))
                        .expect("the node is a corner of its element");
                    for (b, &(cx, cy)) in CORNERS.iter().enumerate() {
                        let (jx, jy) = (ex + cx, ey + cy);
                        for c in 0..2 {
                            acc[jy + 1 - iy][jx + 1 - ix][c] += ke[2 * a + comp][2 * b + c];
                        }
                    }
                }
            }
            for (dy, line) in acc.iter().enumerate() {
                let jy = iy + dy;
                if jy < 1 || jy > n + 1 {
                    continue;
                }
                for (dx, pair) in line.iter().enumerate() {
                    let jx = ix + dx;
                    if jx < 1 + first_ix || jx > n + 1 {
                        continue;
                    }
                    let col = (jy - 1) * width + (jx - 1 - first_ix);
                    for (c, &v) in pair.iter().enumerate() {
                        out.push(((2 * col + c) as u32, T::from_f64(v)));
                    }
                }
            }
        })
    }

    /// The clamped stiffness matrix: `2 N (N+1)` unknowns, symmetric positive
    /// definite. O(nnz) = O(36 N^2).
    pub fn stiffness<T: Scalar>(&self) -> Csr<T> {
        self.assemble(1)
    }

    /// The stiffness of all `(N+1)^2` nodes before the clamp: symmetric positive
    /// semidefinite, its kernel spanned by the three rigid-body modes. O(nnz).
    pub fn unconstrained_stiffness<T: Scalar>(&self) -> Csr<T> {
        self.assemble(0)
    }

    /// The load vector of the uniform body force `(0, -1)` on the free unknowns:
    /// `-h^2` on every interior `y` unknown, `-h^2/2` on edge nodes and `-h^2/4`
    /// on the free corners. O(N^2).
    pub fn load<T: Scalar>(&self) -> Vec<T> {
        let n = self.n;
        let h2 = 1.0 / (n * n) as f64;
        let mut b = vec![T::zero(); 2 * self.free_nodes()];
        for iy in 0..=n {
            for ix in 1..=n {
                let ny = if iy == 0 || iy == n { 1 } else { 2 };
                let nx = if ix == n { 1 } else { 2 };
                let k = iy * n + ix - 1;
                b[2 * k + 1] = T::from_f64(-h2 * (nx * ny) as f64 / 4.0);
            }
        }
        b
    }
}

/// Lame parameters `(lambda, mu)` of Young's modulus `e` and Poisson ratio `nu`.
pub(crate) fn lame(e: f64, nu: f64) -> (f64, f64) {
    (
        e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu)),
        e / (2.0 * (1.0 + nu)),
    )
}

/// Errors unless `n >= 1` elements per side of a `dim`-dimensional grid
/// ((n+1)^dim nodes of dim unknowns) fit 32-bit indices, `young` is positive
/// and finite and `poisson` lies in `[0, 0.5)`; `name` starts the message.
pub(crate) fn check_problem(
    name: &str,
    n: usize,
    dim: u32,
    (young, poisson): (f64, f64),
) -> Result<()> {
    let unknowns = (n + 1)
        .checked_pow(dim)
        .and_then(|m| m.checked_mul(dim as usize))
        .filter(|&m| m <= u32::MAX as usize);
    if n == 0 || unknowns.is_none() {
        return Err(Error::InvalidArgument(format!(
            "{name}: {n} elements per side must be at least 1 and fit 32-bit indices"
        )));
    }
    if !(young.is_finite() && young > 0.0 && (0.0..0.5).contains(&poisson)) {
        return Err(Error::InvalidArgument(format!(
            "{name}: need E > 0 and 0 <= nu < 0.5, got E = {young}, nu = {poisson}"
        )));
    }
    Ok(())
}

/// The `elasticity2d:N` system (default material `E = 1`, `nu = 0.3`): the
/// clamped stiffness and the gravity load. Errors as [`Elasticity2d::new`].
/// O(N^2).
pub fn elasticity2d<T: Scalar>(n: usize) -> Result<(Csr<T>, Vec<T>)> {
    let p = Elasticity2d::new(n)?;
    Ok((p.stiffness(), p.load()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense Cholesky factor of a symmetric matrix; `None` when a pivot is not
    /// positive beyond rounding (below 1e-10 of its diagonal entry: the matrix
    /// is not positive definite).
    fn cholesky(a: &Csr<f64>) -> Option<Vec<f64>> {
        let n = a.nrows();
        let mut l = a.to_dense();
        for j in 0..n {
            let mut d = l[j * n + j];
            let scale = d;
            for k in 0..j {
                d -= l[j * n + k] * l[j * n + k];
            }
            if d <= 1e-10 * scale {
                return None;
            }
            let d = d.sqrt();
            l[j * n + j] = d;
            for i in j + 1..n {
                let mut s = l[i * n + j];
                for k in 0..j {
                    s -= l[i * n + k] * l[j * n + k];
                }
                l[i * n + j] = s / d;
            }
        }
        Some(l)
    }

    fn cholesky_solve(l: &[f64], b: &[f64]) -> Vec<f64> {
        let n = b.len();
        let mut y = b.to_vec();
        for i in 0..n {
            for k in 0..i {
                y[i] -= l[i * n + k] * y[k];
            }
            y[i] /= l[i * n + i];
        }
        for i in (0..n).rev() {
            for k in i + 1..n {
                y[i] -= l[k * n + i] * y[k];
            }
            y[i] /= l[i * n + i];
        }
        y
    }

    #[test]
    fn sizes_symmetry_and_positive_definiteness() {
        for n in [1, 2, 5] {
            let p = Elasticity2d::new(n).unwrap();
            let k = p.stiffness::<f64>();
            assert_eq!(k.nrows(), 2 * n * (n + 1));
            assert!(k.max_row_len() <= 18);
            assert_eq!(k.transpose(false), k);
            assert!(cholesky(&k).is_some(), "n = {n}");
            let full = p.unconstrained_stiffness::<f64>();
            assert_eq!(full.nrows(), 2 * (n + 1) * (n + 1));
            assert_eq!(full.transpose(false), full);
            // Without the clamp the matrix is singular.
            assert!(cholesky(&full).is_none());
            // The total weight 1 minus the half column of elements at the clamp.
            let total: f64 = p.load::<f64>().iter().sum();
            assert!((total + 1.0 - 0.5 / n as f64).abs() < 1e-14, "{total}");
        }
        // Full 2x2 blocks of the 3x3 node stencil on the 4 x 5 free nodes.
        let k4 = Elasticity2d::new(4).unwrap().stiffness::<f64>();
        assert_eq!(k4.nnz(), 4 * (3 * 4 - 2) * (3 * 5 - 2));
        assert!(Elasticity2d::new(0).is_err());
        assert!(Elasticity2d::with_material(3, 1.0, 0.5).is_err());
        assert!(Elasticity2d::with_material(3, -1.0, 0.3).is_err());
    }

    #[test]
    fn patch_test_reproduces_uniform_strain() {
        // u = (eps x, 0): zero on the clamp, uniform strain eps_xx = eps, stress
        // sigma_xx = (lambda + 2 mu) eps, sigma_yy = lambda eps, sigma_xy = 0.
        // The consistent tractions on the right, top and bottom edges must give
        // back the field exactly at every node.
        let n = 4;
        let p = Elasticity2d::new(n).unwrap();
        let (lambda, mu) = p.lame();
        let eps = 1e-3;
        let h = 1.0 / n as f64;
        let coords = p.free_coordinates();
        let mut f = vec![0.0; 2 * coords.len()];
        for iy in 0..=n {
            for ix in 1..=n {
                let k = iy * n + ix - 1;
                let end = |i: usize| if i == 0 || i == n { 0.5 } else { 1.0 };
                if ix == n {
                    f[2 * k] += (lambda + 2.0 * mu) * eps * h * end(iy);
                }
                let half = if ix == n { 0.5 } else { 1.0 };
                if iy == n {
                    f[2 * k + 1] += lambda * eps * h * half;
                }
                if iy == 0 {
                    f[2 * k + 1] -= lambda * eps * h * half;
                }
            }
        }
        let k = p.stiffness::<f64>();
        let u = cholesky_solve(&cholesky(&k).unwrap(), &f);
        for (i, &(x, _)) in coords.iter().enumerate() {
            assert!((u[2 * i] - eps * x).abs() < 1e-15, "u_x at node {i}");
            assert!(u[2 * i + 1].abs() < 1e-15, "u_y at node {i}");
        }
        // And K times the field gives exactly those tractions.
        let exact: Vec<f64> = coords.iter().flat_map(|&(x, _)| [eps * x, 0.0]).collect();
        let r = k.mul_vec(&exact).unwrap();
        for (a, b) in r.iter().zip(&f) {
            assert!((a - b).abs() < 1e-15);
        }
    }

    #[test]
    fn spec_string() {
        use crate::generators::ProblemSpec;
        let spec = ProblemSpec::parse("elasticity2d:3").unwrap();
        assert_eq!(spec, ProblemSpec::Elasticity2d { n: 3 });
        assert!(!spec.is_complex());
        let g = spec.build::<f64>().unwrap();
        assert_eq!(g.matrix.nrows(), 24);
        assert_eq!(g.rhs.map(|b| b.len()), Some(24));
        for bad in ["elasticity2d", "elasticity2d:0", "elasticity2d:70000"] {
            assert!(ProblemSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generic_in_the_scalar_type() {
        let (k, b) = elasticity2d::<f32>(3).unwrap();
        let (k64, b64) = elasticity2d::<f64>(3).unwrap();
        assert_eq!(k.nnz(), k64.nnz());
        assert_eq!(b.len(), b64.len());
    }
}
