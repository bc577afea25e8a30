//! P1 finite-element Helmholtz matrix on a tetrahedral mesh of a cylinder (an
//! acoustic duct), with a known exact solution.
//!
//! # The problem
//!
//! Find `u` with
//!
//! ```text
//!   -Δu - k² u = 0          in Ω = { x² + y² < R², 0 < z < L }
//!            u = g          on the cap z = 0 (a piston; Dirichlet)
//!   ∂u/∂n - i k u = 0       on the cap z = L (impedance / Robin; absorbing)
//! ```
//!
//! and on the side x² + y² = R² one of two walls ([`SideWall`]):
//!
//! * **hard**, `∂u/∂n = 0` (natural), with the piston `g = 1`: the plane wave
//!   `u = exp(i k z)` satisfies every condition exactly ([`Cylinder::level`]);
//! * **soft**, `u = 0` (Dirichlet), with the piston `g = J0(α r / R)`, α ≈ 2.405 the
//!   first zero of J0: the duct's first mode `u = J0(α r / R) Z(z)` with
//!   `Z = A exp(i κ z) + B exp(-i κ z)`, `κ² = k² - (α / R)²`, `Z(0) = 1` and
//!   `Z'(L) = i k Z(L)` satisfies every condition exactly; it propagates when
//!   k > α / R and decays otherwise ([`Cylinder::soft_level`]).
//!
//! Either way the discrete solution can be compared with the exact one node by
//! node (for the soft wall, the polygonal cross-section adds an O(h²) geometric
//! error of the same order as the discretisation's).
//!
//! The hard wall's details follow. The side faces of the
//! mesh are vertical and the caps are flat, so the plane wave also solves the
//! problem exactly on the polyhedral (meshed) domain: the error is pure
//! discretisation error, O(h²) at the nodes for P1 elements. (Measured for k = 6,
//! R = 0.2, L = 0.8, `cells_across` = 4, 8, 16, 32 and `cells_along = 2
//! cells_across`: the largest nodal error falls by 2.9, 3.25 and 3.4 per halving
//! of h, the root-mean-square nodal error by 3.9, 4.05 and 4.05.)
//!
//! # The discrete system
//!
//! With `K` the P1 stiffness matrix, `M` the P1 consistent mass matrix and `M_Γ` the
//! P1 boundary mass matrix of the triangles on the cap z = L, the weak form on the
//! free (non-Dirichlet) nodes is
//!
//! ```text
//!   (K - k² M - i k M_Γ)_{F,F} u_F = -(K - k² M - i k M_Γ)_{F,D} g_D,
//! ```
//!
//! with g_D the exact solution at the Dirichlet nodes (the piston; for the soft
//! wall also the wall nodes, where it is 0),
//!
//! that is, the Dirichlet nodes are eliminated (removed from the unknowns) and
//! their contribution moves to the right-hand side. Element formulas, for a
//! tetrahedron of volume V with barycentric gradients g_a, and a cap triangle of
//! area S: `K_ab = V g_a·g_b`, `M_ab = V (1 + δ_ab) / 20`,
//! `M_Γ,ab = S (1 + δ_ab) / 12`.
//!
//! The matrix is complex symmetric (`Aᵀ = A`, not Hermitian): its imaginary parts
//! sit only in the rows and columns of the nodes on the cap z = L. It is
//! indefinite for the default wave number: with Neumann sides, the real part
//! `K - k² M` approximates the operator whose axial eigenvalues are
//! `(π (2j + 1) / 2L)²` = 3.9, 34.7, 96.4, ... for L = 0.8, and k² = 90.25 lies
//! between the second and the third. (Moreover the first transverse duct mode has
//! cut-off wave number j'₁₁/R ≈ 1.841/0.2 ≈ 9.21 < 9.5, so it propagates too, and
//! its eigenvalue 84.8 + 3.9 ≈ 88.6 is just below k².) The impedance term keeps the
//! problem uniquely solvable for every k > 0.
//!
//! # The mesh
//!
//! A structured grid of `cells_across × cells_across × cells_along` hexahedral
//! cells: the cross-section square [-1, 1]² is mapped to the disk of radius R by
//! the smooth (elliptical) square-to-disk map
//! `(s, t) -> R (s sqrt(1 - t²/2), t sqrt(1 - s²/2))`, and z is uniform in [0, L].
//! Each cell is split into 6 tetrahedra by the Kuhn (Freudenthal) split along a
//! main diagonal. The map is singular at the four corners of the square (they go
//! to the circle at ±45°, where neighbouring boundary nodes become nearly
//! collinear), so the diagonal is chosen to run through the square's corner in
//! every corner cell: the split of a cell is the Kuhn split mirrored in x when the
//! cell's centre has s < 0 and mirrored in y when it has t < 0. The mirroring in x
//! depends only on the cell's x index and that in y only on its y index, so the
//! face diagonals of neighbouring cells agree and the mesh is conforming. This
//! keeps every angle of the cap triangles below 100° at levels 0-2, where the
//! unmirrored split has angles of 170-177° in two corners. Every
//! tetrahedron is oriented (from its exact position in the reference grid) to
//! have positive volume, and its volume after the map is checked to be positive.
//!
//! Nodes are numbered z slowest, then y, then x, so the matrix is banded (half
//! bandwidth about `(cells_across + 1)²`). The nodes of the layer z = 0 are the
//! Dirichlet nodes; all others are unknowns, `(m + 1)² n_z` of them for
//! `m = cells_across`, `n_z = cells_along`.
//!
//! # Levels
//!
//! [`Cylinder::level`] gives three meshes that resemble seed 003's Cylinder3D-0/1/2
//! matrices (n = 2717, 19041, 142049; mesh sizes 0.034, 0.017, 0.0083; "length
//! wave = 9.5"): R = 0.2, L = 0.8, `cells_along = 2 cells_across`, and k = 9.5. We
//! read "length wave = 9.5" as the wave number k = 9.5: a wavelength of 9.5 would
//! be about 12 times the length of the domain and give a nearly definite matrix.
//!
//! | level | cells_across | cells_along | unknowns | nonzeros  | mesh size | longest edge |
//! |-------|--------------|-------------|----------|-----------|-----------|--------------|
//! | 0     | 11           | 22          | 3 168    | 42 326    | 0.0364    | 0.0629       |
//! | 1     | 21           | 42          | 20 328   | 286 606   | 0.0190    | 0.0330       |
//! | 2     | 40           | 80          | 134 480  | 1 951 918 | 0.0100    | 0.0173       |
//!
//! (mesh size: [`Cylinder::mesh_size`]; rows have at most 19 nonzeros, 14.5 on
//! average at level 2.)
//!
//! These hard-walled ducts are harder for Krylov methods than the seed's
//! matrices (P-BiCGSTAB with Jacobi needs about 167 / 387 / 560 iterations to
//! 1e-9 where the seed reports 49 / 86 / 162, and TFQMR stagnates on level 2):
//! with hard walls k² lies among many eigenvalues of the real part, and only the
//! impedance cap damps the propagating modes. The seed states only "Dirichlet
//! boundary conditions along a part of the boundary", and the share of
//! one-entry rows its matrix statistics suggest points to Dirichlet nodes on much
//! of the boundary. [`Cylinder::soft_level`] therefore gives soft-walled ducts:
//! R = 0.3 (so that α / R ≈ 8.0 < k = 9.5 and the first mode propagates: the
//! real part keeps one eigenvalue, about (α / R)² + (π / 2L)² ≈ 68, below k² =
//! 90.25, so the matrix stays indefinite), L = 0.8, k = 9.5:
//!
//! | level | cells_across | cells_along | unknowns | nonzeros  | mesh size |
//! |-------|--------------|-------------|----------|-----------|-----------|
//! | 0     | 12           | 24          | 2 904    | 38 550    | 0.050     |
//! | 1     | 22           | 44          | 19 404   | 273 090   | 0.027     |
//! | 2     | 42           | 84          | 141 204  | 2 050 170 | 0.014     |
//!
//! With them P-BiCGSTAB needs about the seed's iteration counts (113 at level 1
//! against the seed's 86) and TFQMR converges on every level.

use crate::Csr;
use gpuq_core::{Complex64, Error, RealScalar, Result, Scalar};

/// Radius of the default duct.
const RADIUS: f64 = 0.2;
/// Length of the default duct.
const LENGTH: f64 = 0.8;
/// Wave number of the default duct.
const WAVENUMBER: f64 = 9.5;

/// Radius of the soft-walled duct of [`Cylinder::soft_level`].
const SOFT_RADIUS: f64 = 0.3;

/// The first zero of the Bessel function J0.
pub const J0_FIRST_ZERO: f64 = 2.404_825_557_695_773;

/// The boundary condition on the side x² + y² = R² of the duct.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SideWall {
    /// A hard wall, ∂u/∂n = 0 (natural); the piston is u = 1 and the exact
    /// solution the plane wave exp(i k z).
    #[default]
    Hard,
    /// A soft (pressure-release) wall, u = 0 (Dirichlet); the piston is
    /// u = J0(α r / R), α the first zero of J0, and the exact solution that duct
    /// mode, J0(α r / R) Z(z) (see the [module documentation](self)).
    Soft,
}

/// Geometry, wave number and resolution of the duct.
///
/// `cells_across` cells per side of the cross-section square and `cells_along`
/// cells along the axis; see the [module documentation](self) for the mesh.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cylinder {
    /// Radius R of the cylinder (> 0).
    pub radius: f64,
    /// Length L of the cylinder (> 0).
    pub length: f64,
    /// Wave number k (> 0).
    pub wavenumber: f64,
    /// Cells per side of the cross-section square (>= 1).
    pub cells_across: usize,
    /// Cells along the axis (>= 1).
    pub cells_along: usize,
    /// The side wall's boundary condition.
    pub side_wall: SideWall,
}

/// The assembled system on the free (non-Dirichlet) nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct CylinderProblem<T> {
    /// The complex symmetric matrix `(K - k² M - i k M_Γ)` restricted to the free nodes.
    pub matrix: Csr<T>,
    /// The right-hand side `-A_{free,D} g_D` (the piston's contribution).
    pub rhs: Vec<T>,
    /// The exact solution at the free nodes (`exp(i k z)` for the hard wall,
    /// `J0(α r / R) Z(z)` for the soft one).
    pub exact: Vec<T>,
    /// Coordinates `[x, y, z]` of the free nodes, in unknown order.
    pub coordinates: Vec<[f64; 3]>,
}

impl Cylinder {
    /// `cells_across` of levels 0, 1 and 2 (with `cells_along = 2 cells_across`).
    pub const LEVELS: [usize; 3] = [11, 21, 40];

    /// Level 0, 1 or 2 with the defaults R = 0.2, L = 0.8, k = 9.5,
    /// `cells_across = LEVELS[level]` and `cells_along = 2 cells_across`
    /// (3 168, 20 328 and 134 480 unknowns). Other levels give
    /// [`Error::InvalidArgument`]. O(1).
    pub fn level(level: usize) -> Result<Self> {
        let &m = Self::LEVELS.get(level).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cylinder level {level} does not exist (valid levels: 0, 1, 2)"
            ))
        })?;
        Ok(Cylinder {
            radius: RADIUS,
            length: LENGTH,
            wavenumber: WAVENUMBER,
            cells_across: m,
            cells_along: 2 * m,
            side_wall: SideWall::Hard,
        })
    }

    /// `cells_across` of the soft-walled levels 0, 1 and 2.
    pub const SOFT_LEVELS: [usize; 3] = [12, 22, 42];

    /// Soft-walled level 0, 1 or 2, closer to seed 003's Cylinder3D-0/1/2 than
    /// [`Cylinder::level`]: R = 0.3, L = 0.8, k = 9.5, a soft side wall,
    /// `cells_across = SOFT_LEVELS[level]` and `cells_along = 2 cells_across`
    /// (2 904, 19 404 and 141 204 unknowns against the seed's 2 717, 19 041 and
    /// 142 049). Other levels give [`Error::InvalidArgument`]. O(1).
    pub fn soft_level(level: usize) -> Result<Self> {
        let &m = Self::SOFT_LEVELS.get(level).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cylinder level {level} does not exist (valid levels: 0, 1, 2)"
            ))
        })?;
        Ok(Cylinder {
            radius: SOFT_RADIUS,
            length: LENGTH,
            wavenumber: WAVENUMBER,
            cells_across: m,
            cells_along: 2 * m,
            side_wall: SideWall::Soft,
        })
    }

    /// Representative mesh size: the nominal cell width
    /// `max(2R / cells_across, L / cells_along)` (cells near the axis have this
    /// width; tetrahedron edges are up to about √3 times longer, and cells near the
    /// corners of the mapped square are flattened). O(1).
    pub fn mesh_size(&self) -> f64 {
        (2.0 * self.radius / self.cells_across as f64).max(self.length / self.cells_along as f64)
    }

    /// Number of unknowns: `(cells_across + 1)² cells_along` with a hard wall,
    /// `(cells_across - 1)² cells_along` with a soft one, whose wall nodes are
    /// Dirichlet nodes (saturating on overflow). O(1).
    pub fn unknowns(&self) -> usize {
        let n1 = match self.side_wall {
            SideWall::Hard => self.cells_across.saturating_add(1),
            SideWall::Soft => self.cells_across.saturating_sub(1),
        };
        n1.saturating_mul(n1).saturating_mul(self.cells_along)
    }

    /// Validates the parameters (radius, length and wave number finite and > 0,
    /// at least one cell each way, node count within 32-bit indices) and assembles
    /// the system on the free nodes, with its right-hand side, exact solution and
    /// node coordinates.
    ///
    /// Errors with [`Error::InvalidArgument`] on bad parameters and when `T` is
    /// real (the impedance term needs a complex scalar). Cost: O(cells) time, one
    /// pass over the 6 tetrahedra per cell (about 0.2 s for level 2's 768 000
    /// tetrahedra in a release build, single-threaded); memory O(nodes): 27 stencil
    /// slots of 17 bytes per node and 16 bytes per tetrahedron while assembling,
    /// plus the result (at most 19 nonzeros per row).
    pub fn assemble<T: Scalar>(&self) -> Result<CylinderProblem<T>> {
        if !T::IS_COMPLEX {
            return Err(Error::InvalidArgument(format!(
                "the cylinder's impedance term -i k M_Γ needs a complex scalar type, not {}",
                T::KIND.name()
            )));
        }
        self.validate()?;
        let mesh = self.mesh();
        let k = self.wavenumber;
        let stencil = mesh.assemble(1.0, -k * k, -k)?;
        let m = self.cells_across as u32;
        let on_wall = |[i, j, _]: [u32; 3]| i == 0 || j == 0 || i == m || j == m;
        let soft = self.side_wall == SideWall::Soft;
        let exact = self.exact_solution();
        // Dirichlet nodes: the piston (z = 0) and, for a soft wall, the wall, where
        // u = 0 exactly (the wall nodes lie on the circle r = R).
        let dirichlet = |a: usize| {
            let p = mesh.lattice[a];
            p[2] == 0 || soft && on_wall(p)
        };
        let value = |a: usize| {
            if soft && on_wall(mesh.lattice[a]) {
                Complex64::new(0.0, 0.0)
            } else {
                exact(mesh.coords[a])
            }
        };
        Ok(stencil.restrict(&mesh, dirichlet, value))
    }

    /// The exact solution as a function of the point `[x, y, z]`: `exp(i k z)`
    /// for the hard wall; for the soft wall `J0(α r / R) Z(z)` with
    /// `Z(z) = A exp(i κ z) + B exp(-i κ z)`, `κ = sqrt(k² - (α / R)²)` (principal
    /// root: imaginary, an evanescent mode, when k < α / R), `Z(0) = 1` and
    /// `Z'(L) = i k Z(L)` (the impedance cap), so `B = A r` with
    /// `r = exp(2 i κ L) (κ - k) / (κ + k)` and `A = 1 / (1 + r)`.
    fn exact_solution(&self) -> impl Fn([f64; 3]) -> Complex64 {
        let (k, big_r, len) = (self.wavenumber, self.radius, self.length);
        let cut = J0_FIRST_ZERO / big_r;
        let kappa = Complex64::new(k * k - cut * cut, 0.0).sqrt();
        let i = Complex64::new(0.0, 1.0);
        let refl = (2.0 * i * kappa * len).exp() * (kappa - k) / (kappa + k);
        let amp = 1.0 / (1.0 + refl);
        let side_wall = self.side_wall;
        move |[x, y, z]: [f64; 3]| match side_wall {
            SideWall::Hard => (i * k * z).exp(),
            SideWall::Soft => {
                let radial = bessel_j0(J0_FIRST_ZERO * (x * x + y * y).sqrt() / big_r);
                radial * amp * ((i * kappa * z).exp() + refl * (-i * kappa * z).exp())
            }
        }
    }

    /// Checks the parameters and that the node count fits 32-bit indices.
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("radius", self.radius),
            ("length", self.length),
            ("wavenumber", self.wavenumber),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::InvalidArgument(format!(
                    "cylinder {name} must be finite and > 0, got {v}"
                )));
            }
        }
        if self.cells_across == 0 || self.cells_along == 0 {
            return Err(Error::InvalidArgument(format!(
                "cylinder needs at least one cell each way, got cells_across = {} and cells_along = {}",
                self.cells_across, self.cells_along
            )));
        }
        let nodes = self
            .cells_across
            .checked_add(1)
            .and_then(|n1| n1.checked_mul(n1))
            .and_then(|n2| n2.checked_mul(self.cells_along.checked_add(1)?));
        match nodes {
            Some(n) if n <= u32::MAX as usize => Ok(()),
            _ => Err(Error::InvalidArgument(format!(
                "cylinder mesh with cells_across = {} and cells_along = {} has too many nodes for 32-bit indices",
                self.cells_across, self.cells_along
            ))),
        }
    }

    /// Builds the mesh: node coordinates, positively oriented tetrahedra and the
    /// triangles of the cap z = L. Assumes [`Cylinder::validate`] passed. O(cells).
    fn mesh(&self) -> Mesh {
        let m = self.cells_across;
        let nz = self.cells_along;
        let n1 = m + 1;
        let r = self.radius;
        let mut coords = Vec::with_capacity(n1 * n1 * (nz + 1));
        let mut lattice = Vec::with_capacity(n1 * n1 * (nz + 1));
        for l in 0..=nz {
            let z = if l == nz {
                self.length
            } else {
                self.length * l as f64 / nz as f64
            };
            for j in 0..n1 {
                let t = -1.0 + 2.0 * j as f64 / m as f64;
                for i in 0..n1 {
                    let s = -1.0 + 2.0 * i as f64 / m as f64;
                    let x = r * s * (1.0 - 0.5 * t * t).sqrt();
                    let y = r * t * (1.0 - 0.5 * s * s).sqrt();
                    coords.push([x, y, z]);
                    lattice.push([i as u32, j as u32, l as u32]);
                }
            }
        }
        let node = |i: usize, j: usize, l: usize| ((l * n1 + j) * n1 + i) as u32;

        let mut tets = Vec::with_capacity(6 * m * m * nz);
        for l in 0..nz {
            for j in 0..m {
                let ry = usize::from(2 * j + 1 < m);
                for i in 0..m {
                    let rx = usize::from(2 * i + 1 < m);
                    let corner = |b: [usize; 3]| node(i + (b[0] ^ rx), j + (b[1] ^ ry), l + b[2]);
                    // Kuhn's split of the cube (one tetrahedron per order of the axes).
                    for p in crate::generators::AXIS_ORDERS {
                        let mut bits = [0usize; 3];
                        let mut local = [[0i64; 3]; 4];
                        let mut tet = [corner(bits); 4];
                        for step in 0..3 {
                            bits[p[step]] = 1;
                            tet[step + 1] = corner(bits);
                            local[step + 1] = [
                                ((bits[0] ^ rx) as i64) - (rx as i64),
                                ((bits[1] ^ ry) as i64) - (ry as i64),
                                bits[2] as i64,
                            ];
                        }
                        // Orientation in the reference grid (exact integers).
                        if det3i(local[1], local[2], local[3]) < 0 {
                            tet.swap(2, 3);
                        }
                        tets.push(tet);
                    }
                }
            }
        }

        // Cap triangles: the faces z = L of the top layer, split by the same
        // diagonal as the tetrahedra below them.
        let mut cap = Vec::with_capacity(2 * m * m);
        for j in 0..m {
            let ry = 2 * j + 1 < m;
            for i in 0..m {
                let rx = 2 * i + 1 < m;
                let v = |a: usize, b: usize| node(i + a, j + b, nz);
                if rx == ry {
                    cap.push([v(0, 0), v(1, 0), v(1, 1)]);
                    cap.push([v(0, 0), v(0, 1), v(1, 1)]);
                } else {
                    cap.push([v(1, 0), v(0, 0), v(0, 1)]);
                    cap.push([v(1, 0), v(1, 1), v(0, 1)]);
                }
            }
        }
        Mesh {
            n1,
            coords,
            lattice,
            tets,
            cap,
        }
    }
}

/// Determinant of the 3x3 integer matrix with columns a, b, c.
fn det3i(a: [i64; 3], b: [i64; 3], c: [i64; 3]) -> i64 {
    a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
        + a[2] * (b[0] * c[1] - b[1] * c[0])
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// The Bessel function J0(x) for 0 <= x <= 3 by its power series
/// `sum_m (-x² / 4)^m / (m!)²`, summed until the terms fall below 1e-17 (at most
/// about 15 terms; the terms' magnitudes stay below 2.3, so the rounding error is
/// a few ulps of 1).
pub fn bessel_j0(x: f64) -> f64 {
    let q = -0.25 * x * x;
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    let mut m = 1.0f64;
    while term.abs() > 1e-17 && m < 60.0 {
        term *= q / (m * m);
        sum += term;
        m += 1.0;
    }
    sum
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// Signed volume of the tetrahedron p0 p1 p2 p3 and the gradients of its four
/// barycentric functions.
fn tet_gradients(p: [[f64; 3]; 4]) -> (f64, [[f64; 3]; 4]) {
    let d1 = sub(p[1], p[0]);
    let d2 = sub(p[2], p[0]);
    let d3 = sub(p[3], p[0]);
    let c1 = cross(d2, d3);
    let c2 = cross(d3, d1);
    let c3 = cross(d1, d2);
    let det = dot(d1, c1);
    let inv = 1.0 / det;
    let g1 = c1.map(|v| v * inv);
    let g2 = c2.map(|v| v * inv);
    let g3 = c3.map(|v| v * inv);
    let g0 = [
        -(g1[0] + g2[0] + g3[0]),
        -(g1[1] + g2[1] + g3[1]),
        -(g1[2] + g2[2] + g3[2]),
    ];
    (det / 6.0, [g0, g1, g2, g3])
}

/// Area of the triangle q0 q1 q2.
fn triangle_area(q: [[f64; 3]; 3]) -> f64 {
    let c = cross(sub(q[1], q[0]), sub(q[2], q[0]));
    0.5 * dot(c, c).sqrt()
}

/// The tetrahedral mesh of the cylinder, all nodes included.
struct Mesh {
    /// Nodes per side of the cross-section grid (`cells_across + 1`).
    n1: usize,
    /// Node coordinates.
    coords: Vec<[f64; 3]>,
    /// Grid position `(i, j, l)` of each node.
    lattice: Vec<[u32; 3]>,
    /// Tetrahedra (node indices), positively oriented.
    tets: Vec<[u32; 4]>,
    /// Triangles of the cap z = L.
    cap: Vec<[u32; 3]>,
}

/// Slots per node of the stencil: the 27 grid neighbours `(di, dj, dl)` in
/// {-1, 0, 1}³, numbered `(di + 1) + 3 (dj + 1) + 9 (dl + 1)`, i.e. in increasing
/// order of the neighbour's node index.
const SLOTS: usize = 27;

/// A global matrix on all nodes stored by stencil slots: real and imaginary parts
/// and whether an edge of the mesh joins the two nodes.
struct Stencil {
    re: Vec<f64>,
    im: Vec<f64>,
    used: Vec<bool>,
}

impl Mesh {
    /// Stencil slot of node `b` in the row of node `a` (they must be grid neighbours).
    fn slot(&self, a: usize, b: usize) -> usize {
        let (pa, pb) = (self.lattice[a], self.lattice[b]);
        let d = |c: usize| (pb[c] as i64 - pa[c] as i64 + 1) as usize;
        d(0) + 3 * d(1) + 9 * d(2)
    }

    /// Node index of the neighbour of `a` in stencil slot `s`.
    fn neighbour(&self, a: usize, s: usize) -> usize {
        let (di, dj, dl) = (s % 3, (s / 3) % 3, s / 9);
        let n1 = self.n1;
        (a + di + dj * n1 + dl * n1 * n1) - (1 + n1 + n1 * n1)
    }

    /// Adds `val` to the real (`imag == false`) or imaginary part of entries
    /// (a, b) and, for a != b, (b, a), marking both as structural nonzeros.
    fn add_sym(&self, st: &mut Stencil, a: usize, b: usize, val: f64, imag: bool) {
        let part = if imag { &mut st.im } else { &mut st.re };
        let ia = a * SLOTS + self.slot(a, b);
        part[ia] += val;
        st.used[ia] = true;
        if a != b {
            let ib = b * SLOTS + self.slot(b, a);
            part[ib] += val;
            st.used[ib] = true;
        }
    }

    /// Assembles `wk K + wm M + i wg M_Γ` on all nodes (no boundary conditions).
    /// Both entries of a symmetric pair receive the same sums in the same order,
    /// so the result is exactly symmetric. Errors if a tetrahedron has
    /// non-positive volume. O(tetrahedra).
    fn assemble(&self, wk: f64, wm: f64, wg: f64) -> Result<Stencil> {
        let n = self.coords.len();
        let mut st = Stencil {
            re: vec![0.0; n * SLOTS],
            im: vec![0.0; n * SLOTS],
            used: vec![false; n * SLOTS],
        };
        for (t, tet) in self.tets.iter().enumerate() {
            let (vol, g) = tet_gradients(tet.map(|v| self.coords[v as usize]));
            if !(vol > 0.0 && vol.is_finite()) {
                return Err(Error::InvalidArgument(format!(
                    "cylinder mesh: tetrahedron {t} (nodes {tet:?}) has volume {vol:e} after the square-to-disk map"
                )));
            }
            for (a, &na) in tet.iter().enumerate() {
                for (b, &nb) in tet.iter().enumerate().skip(a) {
                    let mass = if a == b { vol / 10.0 } else { vol / 20.0 };
                    let val = wk * vol * dot(g[a], g[b]) + wm * mass;
                    self.add_sym(&mut st, na as usize, nb as usize, val, false);
                }
            }
        }
        if wg != 0.0 {
            for tri in &self.cap {
                let area = triangle_area(tri.map(|v| self.coords[v as usize]));
                for (a, &na) in tri.iter().enumerate() {
                    for (b, &nb) in tri.iter().enumerate().skip(a) {
                        let mass = if a == b { area / 6.0 } else { area / 12.0 };
                        self.add_sym(&mut st, na as usize, nb as usize, wg * mass, true);
                    }
                }
            }
        }
        Ok(st)
    }
}

impl Stencil {
    /// Keeps the rows and columns of the free nodes (those not `dirichlet`),
    /// numbered in node order, and moves the columns of the Dirichlet nodes, with
    /// their values `value(c)`, to the right-hand side; `value` at a free node is
    /// the exact solution. O(nodes).
    fn restrict<T: Scalar>(
        &self,
        mesh: &Mesh,
        dirichlet: impl Fn(usize) -> bool,
        value: impl Fn(usize) -> Complex64,
    ) -> CylinderProblem<T> {
        let of = <T::Real as RealScalar>::of_f64;
        let nodes = mesh.coords.len();
        let mut unknown = vec![u32::MAX; nodes];
        let mut n = 0usize;
        for (a, u) in unknown.iter_mut().enumerate() {
            if !dirichlet(a) {
                *u = n as u32;
                n += 1;
            }
        }
        let mut row_ptr = Vec::with_capacity(n + 1);
        let mut col_idx = Vec::with_capacity(15 * n);
        let mut vals = Vec::with_capacity(15 * n);
        let mut rhs = Vec::with_capacity(n);
        let mut exact = Vec::with_capacity(n);
        let mut coordinates = Vec::with_capacity(n);
        row_ptr.push(0);
        for a in (0..nodes).filter(|&a| unknown[a] != u32::MAX) {
            let mut b = Complex64::new(0.0, 0.0);
            for s in 0..SLOTS {
                let idx = a * SLOTS + s;
                if !self.used[idx] {
                    continue;
                }
                let (re, im) = (self.re[idx], self.im[idx]);
                let c = mesh.neighbour(a, s);
                if unknown[c] == u32::MAX {
                    // Dirichlet column: b -= A_ac g_c.
                    b -= Complex64::new(re, im) * value(c);
                } else {
                    col_idx.push(unknown[c]);
                    vals.push(T::from_parts(of(re), of(im)));
                }
            }
            row_ptr.push(col_idx.len());
            rhs.push(T::from_parts(of(b.re), of(b.im)));
            let u = value(a);
            exact.push(T::from_parts(of(u.re), of(u.im)));
            coordinates.push(mesh.coords[a]);
        }
        let matrix = Csr::try_new(n, n, row_ptr, col_idx, vals)
            .expect("the cylinder assembly emits valid CSR");
        CylinderProblem {
            matrix,
            rhs,
            exact,
            coordinates,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::{Complex32, Complex64};
    use std::collections::HashSet;

    fn small(m: usize, nz: usize) -> Cylinder {
        Cylinder {
            radius: RADIUS,
            length: LENGTH,
            wavenumber: WAVENUMBER,
            cells_across: m,
            cells_along: nz,
            side_wall: SideWall::Hard,
        }
    }

    #[test]
    fn bessel_j0_values() {
        // Abramowitz and Stegun, table 9.1.
        for (x, j0) in [
            (0.0, 1.0),
            (0.5, 0.938_469_807_240_813),
            (1.0, 0.765_197_686_557_966_6),
            (2.0, 0.223_890_779_141_235_7),
        ] {
            assert!(
                (bessel_j0(x) - j0).abs() < 1e-15,
                "J0({x}) = {}",
                bessel_j0(x)
            );
        }
        assert!(bessel_j0(J0_FIRST_ZERO).abs() < 1e-15);
    }

    #[test]
    fn soft_exact_solution_meets_its_conditions() {
        // For a propagating (k = 9.5 > α/R = 8.0) and an evanescent (k = 6) mode:
        // u = J0 at z = 0, u = 0 on the wall, ∂u/∂z = i k u at z = L, and
        // -Δu - k² u = 0 inside (by differences, step 1e-4).
        for k in [9.5, 6.0] {
            let cyl = Cylinder {
                wavenumber: k,
                ..Cylinder::soft_level(0).unwrap()
            };
            let u = cyl.exact_solution();
            let (r, l) = (cyl.radius, cyl.length);
            let at = |x: f64, y: f64, z: f64| u([x, y, z]);
            assert!((at(0.0, 0.0, 0.0) - 1.0).norm() < 1e-14);
            let x0 = 0.4 * r;
            assert!((at(x0, 0.0, 0.0) - bessel_j0(J0_FIRST_ZERO * 0.4)).norm() < 1e-14);
            assert!(at(r, 0.0, 0.37).norm() < 1e-14);
            let d = 1e-4;
            let dz = (at(x0, 0.0, l + d) - at(x0, 0.0, l - d)) / (2.0 * d);
            let imp = Complex64::new(0.0, k) * at(x0, 0.0, l);
            assert!(
                (dz - imp).norm() < 1e-6 * imp.norm(),
                "k = {k}: {dz} vs {imp}"
            );
            let (x, y, z) = (0.3 * r, 0.2 * r, 0.5 * l);
            let c = at(x, y, z);
            let lap = (at(x + d, y, z)
                + at(x - d, y, z)
                + at(x, y + d, z)
                + at(x, y - d, z)
                + at(x, y, z + d)
                + at(x, y, z - d)
                - 6.0 * c)
                / (d * d);
            let residual = -lap - k * k * c;
            assert!(
                residual.norm() < 1e-4 * (k * k * c.norm()),
                "k = {k}: {residual}"
            );
        }
    }

    #[test]
    fn soft_levels_have_the_stated_sizes() {
        for (level, n) in [(0, 2904), (1, 19404), (2, 141204)] {
            let cyl = Cylinder::soft_level(level).unwrap();
            assert_eq!(cyl.unknowns(), n);
        }
        let p = Cylinder::soft_level(0)
            .unwrap()
            .assemble::<Complex64>()
            .unwrap();
        assert_eq!(p.matrix.nrows(), 2904);
        assert_eq!(p.matrix.transpose(false), p.matrix, "complex symmetric");
        // No wall node is an unknown: every free node lies strictly inside r < R.
        let r = Cylinder::soft_level(0).unwrap().radius;
        for c in &p.coordinates {
            assert!((c[0] * c[0] + c[1] * c[1]).sqrt() < r * (1.0 - 1e-9));
        }
        assert!(Cylinder::soft_level(3).is_err());
    }

    /// Real part of a stencil as a function applied to a nodal vector.
    fn apply(mesh: &Mesh, st: &Stencil, x: &[f64]) -> Vec<f64> {
        (0..mesh.coords.len())
            .map(|a| {
                (0..SLOTS)
                    .filter(|&s| st.used[a * SLOTS + s])
                    .map(|s| st.re[a * SLOTS + s] * x[mesh.neighbour(a, s)])
                    .sum()
            })
            .collect()
    }

    #[test]
    fn positive_volumes_and_total_volume() {
        for (m, nz) in [(1, 1), (2, 3), (3, 2), (4, 8), (7, 5), (11, 22)] {
            let cyl = small(m, nz);
            let mesh = cyl.mesh();
            assert_eq!(mesh.tets.len(), 6 * m * m * nz);
            assert_eq!(mesh.cap.len(), 2 * m * m);
            let mut total = 0.0;
            for tet in &mesh.tets {
                let (v, _) = tet_gradients(tet.map(|v| mesh.coords[v as usize]));
                assert!(v > 0.0, "m = {m}: tet {tet:?} has volume {v}");
                total += v;
            }
            let exact = std::f64::consts::PI * RADIUS * RADIUS * LENGTH;
            if m == 11 {
                assert!((total - exact).abs() < 0.01 * exact, "{total} vs {exact}");
            }
            assert!(total < exact, "inscribed polygon: {total} vs {exact}");
        }
    }

    #[test]
    fn mesh_is_conforming() {
        // Every interior triangle is shared by exactly two tetrahedra, every
        // boundary triangle lies on the cylinder's surface, and the cap triangles
        // are exactly the boundary faces on z = L.
        let cyl = small(5, 4);
        let mesh = cyl.mesh();
        let mut faces = std::collections::HashMap::new();
        for tet in &mesh.tets {
            for skip in 0..4 {
                let mut f: Vec<u32> = (0..4).filter(|&a| a != skip).map(|a| tet[a]).collect();
                f.sort_unstable();
                *faces.entry([f[0], f[1], f[2]]).or_insert(0) += 1;
            }
        }
        let mut top = HashSet::new();
        for (f, count) in faces {
            assert!(count <= 2, "face {f:?} shared by {count} tetrahedra");
            if count == 1 {
                let z = f.map(|v| mesh.coords[v as usize][2]);
                let on_cap = z.iter().all(|&z| z == 0.0) || z.iter().all(|&z| z == LENGTH);
                let on_side = f.iter().all(|&v| {
                    let [i, j, _] = mesh.lattice[v as usize];
                    i == 0 || j == 0 || i == 5 || j == 5
                });
                assert!(on_cap || on_side, "interior face {f:?} has one tetrahedron");
                if z.iter().all(|&z| z == LENGTH) {
                    top.insert(f);
                }
            }
        }
        let cap: HashSet<[u32; 3]> = mesh
            .cap
            .iter()
            .map(|t| {
                let mut t = *t;
                t.sort_unstable();
                t
            })
            .collect();
        assert_eq!(cap, top);
    }

    #[test]
    fn no_obtuse_cap_angles_near_180() {
        // The corner-aware split keeps the cross-section's largest angle well below
        // 180 degrees even where the square-to-disk map degenerates.
        for m in [11, 21, 40] {
            let mesh = small(m, 1).mesh();
            let mut worst: f64 = 0.0;
            for tri in &mesh.cap {
                let q = tri.map(|v| mesh.coords[v as usize]);
                for a in 0..3 {
                    let u = sub(q[(a + 1) % 3], q[a]);
                    let w = sub(q[(a + 2) % 3], q[a]);
                    let cos = dot(u, w) / (dot(u, u) * dot(w, w)).sqrt();
                    worst = worst.max(cos.acos().to_degrees());
                }
            }
            assert!(worst < 110.0, "m = {m}: largest angle {worst} degrees");
        }
    }

    #[test]
    fn stiffness_mass_and_boundary_mass() {
        let cyl = small(6, 5);
        let mesh = cyl.mesh();
        let nodes = mesh.coords.len();
        let volume: f64 = mesh
            .tets
            .iter()
            .map(|t| tet_gradients(t.map(|v| mesh.coords[v as usize])).0)
            .sum();
        let area: f64 = mesh
            .cap
            .iter()
            .map(|t| triangle_area(t.map(|v| mesh.coords[v as usize])))
            .sum();
        let disk = std::f64::consts::PI * RADIUS * RADIUS;
        assert!((area - disk).abs() < 0.05 * disk);

        // K: constants in the kernel; linear functions give zero in interior rows
        // and the boundary flux in boundary rows.
        let k = mesh.assemble(1.0, 0.0, 0.0).unwrap();
        let ones = vec![1.0; nodes];
        assert!(apply(&mesh, &k, &ones).iter().all(|v| v.abs() < 1e-12));
        for (c, grad) in [
            (0, [1.0, 0.0, 0.0]),
            (1, [0.0, 1.0, 0.0]),
            (2, [0.0, 0.0, 1.0]),
        ] {
            let g: Vec<f64> = mesh.coords.iter().map(|p| 0.3 + p[c]).collect();
            let kg = apply(&mesh, &k, &g);
            let mut top_flux = 0.0;
            for (a, v) in kg.iter().enumerate() {
                let [i, j, l] = mesh.lattice[a];
                let interior = (1..6).contains(&i) && (1..6).contains(&j) && (1..5).contains(&l);
                if interior {
                    assert!(v.abs() < 1e-12, "interior row {a}: {v}");
                }
                if l == 5 {
                    top_flux += v;
                }
            }
            assert!(kg.iter().sum::<f64>().abs() < 1e-12);
            // Flux of grad g through the cap z = L: the cap area for g = z.
            assert!((top_flux - grad[2] * area).abs() < 1e-12, "{top_flux}");
        }

        // M sums to the volume, M_Γ to the cap area; both symmetric.
        let mass = mesh.assemble(0.0, 1.0, 0.0).unwrap();
        assert!((mass.re.iter().sum::<f64>() - volume).abs() < 1e-12 * volume.max(1.0));
        let gamma = mesh.assemble(0.0, 0.0, 1.0).unwrap();
        assert!(gamma.re.iter().all(|&v| v == 0.0));
        assert!((gamma.im.iter().sum::<f64>() - area).abs() < 1e-14);
        for st in [&k, &mass, &gamma] {
            for a in 0..nodes {
                for s in 0..SLOTS {
                    if st.used[a * SLOTS + s] {
                        let b = mesh.neighbour(a, s);
                        let t = b * SLOTS + mesh.slot(b, a);
                        assert!(st.used[t]);
                        assert_eq!(st.re[a * SLOTS + s], st.re[t]);
                        assert_eq!(st.im[a * SLOTS + s], st.im[t]);
                    }
                }
            }
        }
    }

    #[test]
    fn assembled_level0() {
        let cyl = Cylinder::level(0).unwrap();
        assert_eq!(cyl.unknowns(), 3168);
        let p = cyl.assemble::<Complex64>().unwrap();
        let a = &p.matrix;
        assert_eq!(a.shape(), (3168, 3168));
        assert_eq!(
            (p.rhs.len(), p.exact.len(), p.coordinates.len()),
            (3168, 3168, 3168)
        );
        assert_eq!(a.transpose(false), *a, "complex symmetric");
        assert_ne!(a.transpose(true), *a, "not Hermitian");
        assert!(a.max_row_len() <= SLOTS);
        for i in 0..a.nrows() {
            let on_cap = p.coordinates[i][2] == LENGTH;
            let (_, v) = a.row(i);
            let imag = v.iter().any(|v| v.im != 0.0);
            assert_eq!(imag, on_cap, "row {i}");
            assert!(p.coordinates[i][2] > 0.0);
        }
        // Numbering: z slowest, then y, then x.
        assert!(p.coordinates.windows(2).all(|w| w[0][2] <= w[1][2]));
        // The residual of the exact solution is small (O(h²) consistency).
        let r = a.mul_vec(&p.exact).unwrap();
        let bnorm: f64 = p.rhs.iter().map(|v| v.norm_sqr()).sum::<f64>().sqrt();
        assert!(bnorm > 0.0);
        let rnorm: f64 = r
            .iter()
            .zip(&p.rhs)
            .map(|(r, b)| (r - b).norm_sqr())
            .sum::<f64>()
            .sqrt();
        assert!(rnorm < 0.2 * bnorm, "{rnorm} vs {bnorm}");
        // Only the first layer (z = L / 22) has a nonzero right-hand side.
        let dz = LENGTH / 22.0;
        for (b, x) in p.rhs.iter().zip(&p.coordinates) {
            assert_eq!(*b != Complex64::new(0.0, 0.0), x[2] < 1.5 * dz);
        }
        // Complex32 and the smallest meshes work too.
        let q = small(3, 2).assemble::<Complex32>().unwrap();
        assert_eq!(q.matrix.nrows(), 16 * 2);
        assert_eq!(q.matrix.transpose(false), q.matrix);
        let q = small(1, 1).assemble::<Complex64>().unwrap();
        assert_eq!(q.matrix.shape(), (4, 4));
        assert_eq!(q.matrix.transpose(false), q.matrix);
    }

    #[test]
    fn errors() {
        assert!(matches!(
            Cylinder::level(0).unwrap().assemble::<f64>(),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            small(2, 2).assemble::<f32>(),
            Err(Error::InvalidArgument(_))
        ));
        let e = Cylinder::level(3).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(ref s) if s.contains("0, 1, 2")));
        let good = small(2, 2);
        let bad = [
            Cylinder {
                radius: 0.0,
                ..good
            },
            Cylinder {
                radius: -1.0,
                ..good
            },
            Cylinder {
                length: f64::NAN,
                ..good
            },
            Cylinder {
                wavenumber: f64::INFINITY,
                ..good
            },
            Cylinder {
                wavenumber: 0.0,
                ..good
            },
            Cylinder {
                cells_across: 0,
                ..good
            },
            Cylinder {
                cells_along: 0,
                ..good
            },
            Cylinder {
                cells_across: 1 << 20,
                ..good
            },
            Cylinder {
                cells_across: usize::MAX,
                ..good
            },
        ];
        for c in bad {
            assert!(
                matches!(c.assemble::<Complex64>(), Err(Error::InvalidArgument(_))),
                "{c:?}"
            );
        }
        assert!(good.assemble::<Complex64>().is_ok());
    }

    #[test]
    fn levels_and_mesh_size() {
        let sizes: Vec<usize> = (0..3)
            .map(|l| Cylinder::level(l).unwrap().unknowns())
            .collect();
        assert_eq!(sizes, [3168, 20328, 134480]);
        let h: Vec<f64> = (0..3)
            .map(|l| Cylinder::level(l).unwrap().mesh_size())
            .collect();
        assert!((h[0] - 0.4 / 11.0).abs() < 1e-15 && h[1] < h[0] && h[2] < h[1]);
    }

    /// Level 1 and 2 sizes (slow in debug builds: run with
    /// `cargo test --release -p gpuq-sparse -- --ignored`).
    #[test]
    #[ignore]
    fn levels_1_and_2() {
        for (level, n, nnz) in [(1, 20328, 286606), (2, 134480, 1951918)] {
            let p = Cylinder::level(level)
                .unwrap()
                .assemble::<Complex64>()
                .unwrap();
            assert_eq!((p.matrix.nrows(), p.matrix.nnz()), (n, nnz));
            assert_eq!(p.matrix.transpose(false), p.matrix);
            assert!(p.matrix.max_row_len() <= 19);
        }
    }
}
