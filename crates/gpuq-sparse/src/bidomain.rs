//! The bidomain model of cardiac tissue as a coupled 2x2 system: the
//! `bidomain2d:N` and `bidomain3d:N` test problems (seed 002, chapter 8).
//!
//! # Model and units
//!
//! With the transmembrane potential `v_m = phi_i - phi_e` and the extracellular
//! potential `phi_e` as unknowns, the bidomain equations read
//!
//! ```text
//!   chi (Cm dv_m/dt + I_ion(v_m, w)) = div(sigma_i grad(v_m + phi_e)) + I_stim   (parabolic)
//!   0 = div((sigma_i + sigma_e) grad phi_e) + div(sigma_i grad v_m)              (elliptic)
//! ```
//!
//! with no flux through the boundary (`n . sigma_i grad phi_i = n . sigma_e grad
//! phi_e = 0`, pure Neumann). Units, consistent with each other: length in mm,
//! time in ms, potential in mV, conductivity in mS/mm (numerically equal to S/m),
//! surface-to-volume ratio `chi` in 1/mm, membrane capacitance `Cm` in µF/mm²,
//! ionic current `I_ion` in µA/mm² of membrane, stimulus `I_stim` in µA/mm³ of
//! tissue. The conductivity tensors are transversely isotropic about the fibre
//! direction `f` (an angle in the x-y plane, along x by default):
//! `sigma = sigma_t I + (sigma_l - sigma_t) f f^T`, with the literature values
//! `sigma_i = 0.17 / 0.019` and `sigma_e = 0.62 / 0.24` mS/mm along / across the
//! fibres, `chi = 140 /mm`, `Cm = 0.01 µF/mm²` (1 µF/cm²).
//!
//! # The time step this matrix belongs to
//!
//! The semi-implicit (IMEX) Euler step: the ionic current explicit at `t_n`,
//! both diffusion terms and the elliptic constraint implicit at `t_{n+1}`, the
//! two equations solved together (coupled, not the decoupled elliptic-then-
//! parabolic splitting). With `K_i`, `K_e` the stiffness matrices of `sigma_i`,
//! `sigma_e` (`K = int grad(psi_a) . sigma grad(psi_b)`, positive semidefinite),
//! `M` the lumped mass matrix and the membrane scaling `kappa = chi Cm / dt`
//! (mS/mm³), multiplying the parabolic equation and the elliptic one by -1:
//!
//! ```text
//!   [ K_i + K_e   K_i           ] [ phi_e^{n+1} ]   [ 0                                              ]
//!   [ K_i         K_i + kappa M ] [ v_m^{n+1}   ] = [ kappa M v_m^n - chi M I_ion(v_m^n) + M I_stim  ]
//! ```
//!
//! which is the seed's matrix (its `K_i - kappa M_i` with the sign it warns of
//! made explicit). It is symmetric, and
//! `x^T A x = phi^T K_e phi + (phi + v)^T K_i (phi + v) + kappa v^T M v >= 0`:
//! positive semidefinite, zero exactly when `v = 0` and `phi` is constant. The
//! null space is therefore spanned by `z = [1, 0, 1, 0, ...]` (constant `phi_e`,
//! zero `v_m`): `A z = 0` because the Neumann stiffness rows sum to zero. The
//! right-hand side above has a zero `phi_e` block, so `z^T b = 0`: the system is
//! consistent for every step, and `phi_e` is fixed only up to a constant (CG on
//! the singular system converges in the range; a solver may project `z` out).
//! The constant transmembrane vector is *not* in the null space:
//! `A [0, 1, 0, 1, ...] = [0, kappa m_1, 0, kappa m_2, ...]` with `m_j` the
//! lumped masses.
//!
//! # Discretisation
//!
//! Structured grids of spacing `h` (0.1 mm by default): `bidomain2d:N` is a square
//! of `N x N` cells, each cut into two P1 triangles along its diagonal from the
//! lower-left to the upper-right corner; `bidomain3d:N` is a slab of
//! `N x N x max(1, N/4)` trilinear (Q1) hexahedra, integrated exactly by 2x2x2
//! Gauss quadrature. The mass is lumped (row sums; diagonal, as the seed's
//! `C_t`). Nodes are numbered x fastest, then y, then z; the unknowns are
//! interleaved node by node, `(phi_e, v_m)` at `2k, 2k+1`, and every pair of
//! nodes that share an element couples through a full 2x2 block (7 blocks a row
//! in 2D, 27 in 3D). Assembly is row by row over the node stencil, O(nnz).

use crate::generators::build;
use crate::Csr;
use gpuq_core::{Error, Result, Scalar};

/// Conductivities along and across the fibres, in mS/mm (= S/m).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conductivity {
    /// Along the fibre direction.
    pub longitudinal: f64,
    /// Across it (the same in both cross directions in 3D).
    pub transverse: f64,
}

impl Conductivity {
    /// Intracellular literature values: 0.17 along, 0.019 across (mS/mm).
    pub const INTRACELLULAR: Self = Self {
        longitudinal: 0.17,
        transverse: 0.019,
    };
    /// Extracellular literature values: 0.62 along, 0.24 across (mS/mm).
    pub const EXTRACELLULAR: Self = Self {
        longitudinal: 0.62,
        transverse: 0.24,
    };

    /// The 3x3 tensor `sigma_t I + (sigma_l - sigma_t) f f^T` for the fibre
    /// angle `theta` (radians from the x axis, in the x-y plane).
    pub fn tensor(&self, theta: f64) -> [[f64; 3]; 3] {
        let f = [theta.cos(), theta.sin(), 0.0];
        let mut s = [[0.0; 3]; 3];
        for (i, row) in s.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                let id = if i == j { self.transverse } else { 0.0 };
                *v = id + (self.longitudinal - self.transverse) * f[i] * f[j];
            }
        }
        s
    }
}

/// A block of tissue on a structured grid, with its material: what
/// [`Tissue::system`] assembles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tissue {
    /// Cells along x, y and z; `cells[2] == 0` means a 2D sheet of P1 triangles.
    pub cells: [usize; 3],
    /// Grid spacing h in mm.
    pub h: f64,
    /// Fibre angle in radians from the x axis, in the x-y plane.
    pub fibre_angle: f64,
    /// Intracellular conductivity.
    pub sigma_i: Conductivity,
    /// Extracellular conductivity.
    pub sigma_e: Conductivity,
    /// Surface-to-volume ratio chi, 1/mm.
    pub chi: f64,
    /// Membrane capacitance Cm, µF/mm².
    pub cm: f64,
}

/// The assembled one-step operator of [`Tissue::system`].
#[derive(Clone, Debug, PartialEq)]
pub struct BidomainSystem<T: Scalar> {
    /// The interleaved 2x2-block matrix, `2 nodes` rows.
    pub matrix: Csr<T>,
    /// The lumped mass `m_j` of every node, mm^d.
    pub mass: Vec<f64>,
    /// The membrane scaling `kappa = chi Cm / dt`, mS/mm³.
    pub kappa: f64,
}

impl Tissue {
    /// Default grid spacing, mm.
    pub const H: f64 = 0.1;
    /// Default surface-to-volume ratio, 1/mm.
    pub const CHI: f64 = 140.0;
    /// Default membrane capacitance, µF/mm².
    pub const CM: f64 = 0.01;
    /// Default time step of the generated problems, ms.
    pub const DT: f64 = 0.05;

    /// The `bidomain2d:N` sheet: `n x n` cells of side [`Tissue::H`], fibres
    /// along x, literature conductivities. Errors when `n` is zero or the system
    /// exceeds 32-bit indices.
    pub fn square(n: usize) -> Result<Self> {
        Self::with_cells([n, n, 0])
    }

    /// The `bidomain3d:N` slab: `n x n x max(1, n/4)` cells, otherwise as
    /// [`Tissue::square`].
    pub fn slab(n: usize) -> Result<Self> {
        Self::with_cells([n, n, (n / 4).max(1)])
    }

    /// A grid of the given cells (`cells[2] == 0`: 2D) with the default
    /// material. Errors when a cell count is zero (x, y) or the system exceeds
    /// 32-bit indices.
    pub fn with_cells(cells: [usize; 3]) -> Result<Self> {
        let t = Self {
            cells,
            h: Self::H,
            fibre_angle: 0.0,
            sigma_i: Conductivity::INTRACELLULAR,
            sigma_e: Conductivity::EXTRACELLULAR,
            chi: Self::CHI,
            cm: Self::CM,
        };
        t.check()?;
        Ok(t)
    }

    /// Validates the grid and material.
    fn check(&self) -> Result<()> {
        let unknowns = self
            .grid()
            .iter()
            .try_fold(2usize, |acc, &m| acc.checked_mul(m))
            .filter(|&m| m <= u32::MAX as usize);
        if self.cells[0] == 0 || self.cells[1] == 0 || unknowns.is_none() {
            return Err(Error::InvalidArgument(format!(
                "bidomain: {:?} cells must be at least 1 in x and y and fit 32-bit indices",
                self.cells
            )));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let c = [self.sigma_i, self.sigma_e];
        let valid = positive(self.h)
            && positive(self.chi)
            && positive(self.cm)
            && c.iter()
                .all(|s| positive(s.longitudinal) && positive(s.transverse))
            && self.fibre_angle.is_finite();
        if !valid {
            return Err(Error::InvalidArgument(
                "bidomain: spacing, chi, Cm and conductivities must be positive and finite".into(),
            ));
        }
        Ok(())
    }

    /// Spatial dimension, 2 or 3.
    pub fn dim(&self) -> usize {
        if self.cells[2] == 0 {
            2
        } else {
            3
        }
    }

    /// Nodes along x, y and z (1 in z for a sheet).
    pub fn grid(&self) -> [usize; 3] {
        [self.cells[0] + 1, self.cells[1] + 1, self.cells[2] + 1]
    }

    /// Number of nodes; the system has twice as many unknowns.
    pub fn nodes(&self) -> usize {
        self.grid().iter().product()
    }

    /// Coordinates (mm) of node `k` (x fastest, then y, then z).
    pub fn coordinates(&self, k: usize) -> [f64; 3] {
        let [gx, gy, _] = self.grid();
        let (ix, iy, iz) = (k % gx, (k / gx) % gy, k / (gx * gy));
        [ix as f64 * self.h, iy as f64 * self.h, iz as f64 * self.h]
    }

    /// Which nodes lie within `radius` (mm) of the edge x = y = 0 (a quarter
    /// disc around the corner in 2D, a quarter cylinder through the slab in
    /// 3D): where a corner stimulus is applied. O(nodes).
    pub fn corner_nodes(&self, radius: f64) -> Vec<bool> {
        let r2 = radius * radius * (1.0 + 1e-12);
        (0..self.nodes())
            .map(|k| {
                let [x, y, _] = self.coordinates(k);
                x * x + y * y <= r2
            })
            .collect()
    }

    /// The right-hand side of the first time step from rest: `v_m = v_rest`
    /// everywhere and no ionic current (the state at rest), a stimulus
    /// `current` (µA/mm³) in the nodes within `radius` (mm) of the corner:
    /// `[0, m_k (kappa v_rest + current [k stimulated])]`. Consistent with the
    /// null space (its `phi_e` block is zero). O(nodes).
    pub fn rest_step_rhs<T: Scalar>(
        &self,
        system: &BidomainSystem<T>,
        v_rest: f64,
        radius: f64,
        current: f64,
    ) -> Vec<T> {
        let stimulated = self.corner_nodes(radius);
        system
            .mass
            .iter()
            .zip(stimulated)
            .flat_map(|(&m, s)| {
                let stim = if s { current } else { 0.0 };
                [T::zero(), T::from_f64(m * (system.kappa * v_rest + stim))]
            })
            .collect()
    }

    /// The membrane scaling `kappa = chi Cm / dt` (mS/mm³) for a step `dt` in ms.
    pub fn kappa(&self, dt: f64) -> f64 {
        self.chi * self.cm / dt
    }

    /// Corner offsets of a cell, local corner `a` at bits `(a & 1, a >> 1 & 1,
    /// a >> 2 & 1)`: 4 corners in 2D, 8 in 3D.
    fn corners(&self) -> Vec<[usize; 3]> {
        (0..1usize << self.dim())
            .map(|a| [a & 1, (a >> 1) & 1, (a >> 2) & 1])
            .collect()
    }

    /// The cell matrices: stiffness of `sigma` (corners x corners), the lumped
    /// mass of each corner, and which corner pairs share an element.
    fn cell(&self, sigma: &[[f64; 3]; 3]) -> CellMatrices {
        if self.dim() == 2 {
            p1_square(sigma, self.h)
        } else {
            q1_cube(sigma, self.h)
        }
    }

    /// Assembles the one-step operator for the step `dt` (ms): the matrix of the
    /// module docs, the lumped masses and `kappa`. Errors when `dt` is not
    /// positive and finite or the tissue is invalid. O(nnz): 14 nonzeros a row in
    /// 2D, 54 in 3D (fewer on the boundary).
    pub fn system<T: Scalar>(&self, dt: f64) -> Result<BidomainSystem<T>> {
        self.check()?;
        if !(dt.is_finite() && dt > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "bidomain: the time step must be positive and finite, got {dt}"
            )));
        }
        let kappa = self.kappa(dt);
        let ki = self.cell(&self.sigma_i.tensor(self.fibre_angle));
        let ke = self.cell(&self.sigma_e.tensor(self.fibre_angle));
        let corners = self.corners();
        let [gx, gy, _] = self.grid();
        // Cells along each axis (one layer of "cells" of zero height in 2D, whose
        // corners all have z offset 0).
        let extent = [self.cells[0], self.cells[1], self.cells[2].max(1)];
        let nodes = self.nodes();
        let mut mass = vec![0.0; nodes];
        let per_row = 2 * 3usize.pow(self.dim() as u32);
        let matrix = build(2 * nodes, per_row, |row, out| {
            let (node, comp) = (row / 2, row % 2);
            let p = [node % gx, (node / gx) % gy, node / (gx * gy)];
            // Accumulators over the 3x3x3 neighbourhood, offset + 1 per axis.
            let mut acc_i = [0.0f64; 27];
            let mut acc_e = [0.0f64; 27];
            let mut linked = [false; 27];
            let mut m = 0.0;
            // Corners in reverse visit this node's cells in increasing order, so
            // entry (p, q) and entry (q, p) sum the same cells in the same order:
            // the matrix is symmetric to the bit.
            for (a, ca) in corners.iter().enumerate().rev() {
                // The cell whose corner `a` is this node.
                if (0..3).any(|d| p[d] < ca[d] || p[d] - ca[d] >= extent[d]) {
                    continue;
                }
                m += ki.mass[a];
                for (b, cb) in corners.iter().enumerate() {
                    if !ki.linked[a][b] {
                        continue;
                    }
                    let slot = (0..3).rev().fold(0, |s, d| 3 * s + (1 + cb[d] - ca[d]));
                    acc_i[slot] += ki.stiffness[a][b];
                    acc_e[slot] += ke.stiffness[a][b];
                    linked[slot] = true;
                }
            }
            if comp == 0 {
                mass[node] = m;
            }
            for slot in 0..27 {
                if !linked[slot] {
                    continue;
                }
                let off = [slot % 3, (slot / 3) % 3, slot / 9];
                let q: [usize; 3] = std::array::from_fn(|d| p[d] + off[d] - 1);
                let col = (q[2] * gy + q[1]) * gx + q[0];
                let (kii, kee) = (acc_i[slot], acc_e[slot]);
                let (phi, v) = if comp == 0 {
                    (kii + kee, kii)
                } else if slot == 13 {
                    (kii, kii + kappa * m)
                } else {
                    (kii, kii)
                };
                out.push(((2 * col) as u32, T::from_f64(phi)));
                out.push(((2 * col + 1) as u32, T::from_f64(v)));
            }
        });
        Ok(BidomainSystem {
            matrix,
            mass,
            kappa,
        })
    }
}

/// Stiffness, lumped mass and element-sharing of one cell's corners.
struct CellMatrices {
    stiffness: Vec<Vec<f64>>,
    mass: Vec<f64>,
    linked: Vec<Vec<bool>>,
}

/// Copies the upper triangle onto the lower one, so that the cell matrix is
/// symmetric to the bit (quadrature sums in different orders differ in the
/// last place).
fn mirror(k: &mut [Vec<f64>]) {
    let n = k.len();
    for (a, b) in (0..n).flat_map(|a| (0..a).map(move |b| (a, b))) {
        k[a][b] = k[b][a];
    }
}

/// A square cell of side `h` cut into the P1 triangles (0, 1, 3) and (0, 3, 2)
/// (corners numbered by [`Tissue::corners`]): corners 1 and 2 share no triangle.
fn p1_square(sigma: &[[f64; 3]; 3], h: f64) -> CellMatrices {
    let pos = |a: usize| [(a & 1) as f64 * h, ((a >> 1) & 1) as f64 * h];
    let mut stiffness = vec![vec![0.0; 4]; 4];
    let mut mass = vec![0.0; 4];
    let mut linked = vec![vec![false; 4]; 4];
    for tri in [[0usize, 1, 3], [0, 3, 2]] {
        let [p0, p1, p2] = tri.map(pos);
        let (e1, e2) = (
            [p1[0] - p0[0], p1[1] - p0[1]],
            [p2[0] - p0[0], p2[1] - p0[1]],
        );
        let det = e1[0] * e2[1] - e1[1] * e2[0];
        let area = det.abs() / 2.0;
        // Gradients of the barycentric coordinates: J^{-T} applied to the
        // reference gradients (-1,-1), (1,0), (0,1).
        let inv = [[e2[1] / det, -e1[1] / det], [-e2[0] / det, e1[0] / det]];
        let grads = [[-1.0, -1.0], [1.0, 0.0], [0.0, 1.0]].map(|g: [f64; 2]| {
            [
                inv[0][0] * g[0] + inv[0][1] * g[1],
                inv[1][0] * g[0] + inv[1][1] * g[1],
            ]
        });
        for (i, &a) in tri.iter().enumerate() {
            mass[a] += area / 3.0;
            for (j, &b) in tri.iter().enumerate() {
                let mut s = 0.0;
                for p in 0..2 {
                    for q in 0..2 {
                        s += grads[i][p] * sigma[p][q] * grads[j][q];
                    }
                }
                stiffness[a][b] += area * s;
                linked[a][b] = true;
            }
        }
    }
    mirror(&mut stiffness);
    CellMatrices {
        stiffness,
        mass,
        linked,
    }
}

/// A cube cell of side `h` with trilinear shape functions, stiffness by 2x2x2
/// Gauss quadrature (exact), mass lumped to `h^3/8` per corner.
fn q1_cube(sigma: &[[f64; 3]; 3], h: f64) -> CellMatrices {
    let g = [0.5 - 0.5 / 3.0_f64.sqrt(), 0.5 + 0.5 / 3.0_f64.sqrt()];
    let mut stiffness = vec![vec![0.0; 8]; 8];
    for gp in 0..8 {
        let xi = [g[gp & 1], g[(gp >> 1) & 1], g[(gp >> 2) & 1]];
        // Reference gradients on [0,1]^3; physical ones are 1/h times these,
        // and the weight is h^3/8: the product scales with h.
        let grads: Vec<[f64; 3]> = (0..8)
            .map(|a| {
                let f = |d: usize| {
                    if (a >> d) & 1 == 1 {
                        xi[d]
                    } else {
                        1.0 - xi[d]
                    }
                };
                let df = |d: usize| if (a >> d) & 1 == 1 { 1.0 } else { -1.0 };
                [
                    df(0) * f(1) * f(2),
                    f(0) * df(1) * f(2),
                    f(0) * f(1) * df(2),
                ]
            })
            .collect();
        for a in 0..8 {
            for b in 0..8 {
                let mut s = 0.0;
                for p in 0..3 {
                    for q in 0..3 {
                        s += grads[a][p] * sigma[p][q] * grads[b][q];
                    }
                }
                stiffness[a][b] += h * s / 8.0;
            }
        }
    }
    mirror(&mut stiffness);
    CellMatrices {
        stiffness,
        mass: vec![h * h * h / 8.0; 8],
        linked: vec![vec![true; 8]; 8],
    }
}

/// The generated problems' right-hand side: the first step from rest
/// ([`Tissue::rest_step_rhs`]) at -80 mV with 200 µA/mm³ injected within
/// 0.6 mm of the corner (the resting potential and the default stimulus of
/// the `gpuq-bidomain` time stepper).
fn generated<T: Scalar>(tissue: Tissue, dt: f64) -> Result<(Csr<T>, Vec<T>)> {
    let system = tissue.system(dt)?;
    let rhs = tissue.rest_step_rhs(&system, -80.0, 0.6, 200.0);
    Ok((system.matrix, rhs))
}

/// The `bidomain2d:N` matrix for the step `dt` (ms) and the right-hand side of
/// its first step from rest with a corner stimulus: see the module docs.
/// Errors as [`Tissue::square`] and [`Tissue::system`]. O(N^2).
pub fn bidomain2d<T: Scalar>(n: usize, dt: f64) -> Result<(Csr<T>, Vec<T>)> {
    generated(Tissue::square(n)?, dt)
}

/// The `bidomain3d:N` matrix for the step `dt` (ms) and the right-hand side of
/// its first step from rest with a corner stimulus: see the module docs.
/// Errors as [`Tissue::slab`] and [`Tissue::system`]. O(N^3).
pub fn bidomain3d<T: Scalar>(n: usize, dt: f64) -> Result<(Csr<T>, Vec<T>)> {
    generated(Tissue::slab(n)?, dt)
}

/// The null-space vector `[1, 0, 1, 0, ...]` of a bidomain matrix with `nodes`
/// nodes (constant `phi_e`, zero `v_m`). O(nodes).
pub fn null_space<T: Scalar>(nodes: usize) -> Vec<T> {
    (0..2 * nodes)
        .map(|i| if i % 2 == 0 { T::one() } else { T::zero() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random vector in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    fn dot(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// Sheets (fibres along x and rotated) and slabs.
    fn tissues() -> Vec<Tissue> {
        let mut rotated = Tissue::square(5).unwrap();
        rotated.fibre_angle = 0.7;
        vec![
            Tissue::square(4).unwrap(),
            rotated,
            Tissue::slab(4).unwrap(),
            Tissue::with_cells([3, 2, 2]).unwrap(),
        ]
    }

    #[test]
    fn sizes_and_symmetry() {
        let t = Tissue::square(4).unwrap();
        let s = t.system::<f64>(0.05).unwrap();
        assert_eq!(s.matrix.nrows(), 2 * 25);
        // 7 node couplings inside, 4 unknowns each, fewer on the boundary:
        // per node row pair 2 * 2 * (#linked neighbours).
        assert!(s.matrix.max_row_len() == 14);
        let t3 = Tissue::slab(8).unwrap();
        assert_eq!(t3.nodes(), 9 * 9 * 3);
        let s3 = t3.system::<f64>(0.05).unwrap();
        assert_eq!(s3.matrix.max_row_len(), 54);
        for t in tissues() {
            let s = t.system::<f64>(0.1).unwrap();
            assert_eq!(s.matrix.transpose(false), s.matrix);
            // The lumped masses fill the tissue volume.
            let volume: f64 = t
                .cells
                .iter()
                .filter(|&&c| c > 0)
                .map(|&c| c as f64 * t.h)
                .product();
            let total: f64 = s.mass.iter().sum();
            assert!(
                (total - volume).abs() < 1e-12 * volume,
                "{total} vs {volume}"
            );
            assert!((s.kappa - 140.0 * 0.01 / 0.1).abs() < 1e-12);
        }
    }

    #[test]
    fn null_space_is_the_constant_extracellular_potential() {
        for t in tissues() {
            let s = t.system::<f64>(0.05).unwrap();
            let a = &s.matrix;
            let n = t.nodes();
            let z = null_space::<f64>(n);
            let scale = a.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let az = a.mul_vec(&z).unwrap();
            assert!(az.iter().all(|v| v.abs() < 1e-13 * scale), "A z != 0");
            // The constant transmembrane vector is not in the kernel:
            // A [0,1,0,1,...] = [0, kappa m_1, 0, kappa m_2, ...].
            let w: Vec<f64> = z.iter().map(|v| 1.0 - v).collect();
            let aw = a.mul_vec(&w).unwrap();
            for k in 0..n {
                assert!(aw[2 * k].abs() < 1e-13 * scale);
                let want = s.kappa * s.mass[k];
                assert!((aw[2 * k + 1] - want).abs() < 1e-12 * want.max(scale));
            }
        }
    }

    #[test]
    fn energy_identity_and_semidefiniteness() {
        // x^T A x = phi^T K_e phi + (phi+v)^T K_i (phi+v) + kappa v^T M v, each
        // part read off the block matrix assembled for two different steps
        // (the kappa M term is the only difference) and for sigma_e = sigma_i.
        for t in tissues() {
            let n = t.nodes();
            let a = t.system::<f64>(0.05).unwrap();
            for seed in 1..4 {
                let x = noise(2 * n, seed);
                let ax = a.matrix.mul_vec(&x).unwrap();
                let energy = dot(&x, &ax);
                assert!(energy > 0.0);
                // Remove the null-space component: still positive; add it: unchanged.
                let mean = x.iter().step_by(2).sum::<f64>() / n as f64;
                let shifted: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if i % 2 == 0 { v + 3.0 * mean } else { *v })
                    .collect();
                let e2 = dot(&shifted, &a.matrix.mul_vec(&shifted).unwrap());
                assert!((e2 - energy).abs() < 1e-10 * energy);
                // The membrane term: kappa sum m_j v_j^2 is what separates two steps.
                let b = t.system::<f64>(0.1).unwrap();
                let eb = dot(&x, &b.matrix.mul_vec(&x).unwrap());
                let membrane: f64 = (0..n)
                    .map(|k| a.mass[k] * x[2 * k + 1] * x[2 * k + 1])
                    .sum();
                let want = (a.kappa - b.kappa) * membrane;
                assert!((energy - eb - want).abs() < 1e-10 * energy);
                assert!(eb > 0.0);
            }
        }
    }

    #[test]
    fn isotropic_sheet_has_the_five_point_stencil() {
        // With fibres along x the P1 right triangles give the 5-point stencil:
        // K_i row of an interior node = sigma_l (2, -1, -1) along x and
        // sigma_t (2, -1, -1) along y, the diagonal couplings vanish.
        let t = Tissue::square(4).unwrap();
        let a = t.system::<f64>(0.05).unwrap().matrix;
        let node = 2 * 5 + 2;
        let (cols, vals) = a.row(2 * node + 1);
        let ki = |q: usize| {
            let k = cols.iter().position(|&c| c as usize == 2 * q).unwrap();
            vals[k]
        };
        let (sl, st) = (0.17, 0.019);
        assert!((ki(node) - 2.0 * (sl + st)).abs() < 1e-15);
        assert!((ki(node + 1) + sl).abs() < 1e-15);
        assert!((ki(node + 5) + st).abs() < 1e-15);
        assert!(ki(node + 6).abs() < 1e-15);
        assert_eq!(cols.len(), 14);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(Tissue::square(0).is_err());
        assert!(Tissue::with_cells([3, 0, 0]).is_err());
        assert!(Tissue::square(100_000).is_err());
        let t = Tissue::square(2).unwrap();
        assert!(t.system::<f64>(0.0).is_err());
        assert!(t.system::<f64>(f64::NAN).is_err());
        let mut bad = t;
        bad.sigma_e.transverse = -1.0;
        assert!(bad.system::<f64>(0.1).is_err());
        assert_eq!(bidomain2d::<f64>(3, 0.1).unwrap().0.nrows(), 32);
        assert_eq!(bidomain3d::<f64>(3, 0.1).unwrap().1.len(), 2 * 16 * 2);
    }

    #[test]
    fn spec_strings() {
        use crate::generators::ProblemSpec;
        let s = ProblemSpec::parse("bidomain2d:6").unwrap();
        assert_eq!(
            s,
            ProblemSpec::Bidomain2d {
                n: 6,
                dt: Tissue::DT
            }
        );
        let g = s.build::<f64>().unwrap();
        assert_eq!(g.matrix.nrows(), 2 * 49);
        // The first step from rest: zero phi_e block (consistent), the
        // membrane term everywhere, the stimulus at the corner.
        let b = g.rhs.unwrap();
        let t = Tissue::square(6).unwrap();
        let sys = t.system::<f64>(Tissue::DT).unwrap();
        assert!(b.iter().step_by(2).all(|&v| v == 0.0));
        let kappa = sys.kappa;
        assert_eq!(b[1], sys.mass[0] * (kappa * -80.0 + 200.0));
        assert_eq!(b[2 * 48 + 1], sys.mass[48] * kappa * -80.0);
        // Lattice points (i, j) of 0..=6 with i^2 + j^2 <= 36, by i.
        assert_eq!(
            t.corner_nodes(0.6).iter().filter(|&&s| s).count(),
            7 + 6 + 6 + 6 + 5 + 4 + 1
        );
        let s3 = ProblemSpec::parse("bidomain3d:4:0.02").unwrap();
        assert_eq!(s3, ProblemSpec::Bidomain3d { n: 4, dt: 0.02 });
        assert_eq!(s3.build::<f64>().unwrap().matrix.nrows(), 2 * 50);
        for bad in [
            "bidomain2d",
            "bidomain2d:0",
            "bidomain3d:4:0",
            "bidomain3d:4:x",
            "bidomain2d:3:0.1:1",
        ] {
            assert!(ProblemSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
