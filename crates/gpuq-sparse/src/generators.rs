//! Test-problem generators: finite-difference Laplacians with Dirichlet boundaries,
//! a nonsymmetric convection-diffusion operator, a complex-shifted
//! (Helmholtz-like) 3D Laplacian, and [`ProblemSpec`], the spec strings the CLI
//! takes (which also name the finite-element cylinder of [`crate::fem_cylinder`]).
//!
//! All generators build the matrix row by row directly in CSR form, O(nnz) time
//! and memory, with sorted column indices.

use crate::fem_cylinder::{Cylinder, SideWall};
use crate::Csr;
use gpuq_core::{Error, Result, Scalar};

/// Builds a CSR matrix row by row from a closure that appends `(col, value)`
/// pairs in increasing column order.
pub(crate) fn build<T: Scalar>(
    n: usize,
    per_row: usize,
    mut row: impl FnMut(usize, &mut Vec<(u32, T)>),
) -> Csr<T> {
    let mut row_ptr = Vec::with_capacity(n + 1);
    let mut col_idx = Vec::with_capacity(n * per_row);
    let mut vals = Vec::with_capacity(n * per_row);
    let mut buf = Vec::with_capacity(per_row);
    row_ptr.push(0);
    for i in 0..n {
        buf.clear();
        row(i, &mut buf);
        for &(j, v) in &buf {
            col_idx.push(j);
            vals.push(v);
        }
        row_ptr.push(col_idx.len());
    }
    Csr::try_new(n, n, row_ptr, col_idx, vals).expect("generators emit valid CSR")
}

/// The six orders of the three axes: Kuhn's split of a cube into six
/// tetrahedra 000 -> e_p0 -> e_p0 + e_p1 -> 111, one per order p.
pub(crate) const AXIS_ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// A symmetric positive definite matrix of `n` unknowns whose strong
/// couplings form a chain (-1 between neighbours) while each row also holds
/// about 40 weak couplings (-1e-3) to far unknowns, and a diagonal that
/// makes every row sum 1e-2: with a strength threshold that keeps only the
/// chain, aggregates are pieces of the chain and the far couplings fill the
/// coarse operators in, level after level (a test of the coarsening rules).
/// O(n) entries, 41 per row.
pub fn chain_with_far_couplings(n: usize) -> Result<Csr<f64>> {
    let mut coo = crate::Coo::new(n, n);
    let far = |i: usize, k: usize| (i * 7919 + k * 104_729 + 13) % n;
    let mut diag = vec![0.0; n];
    let mut add = |i: usize, j: usize, v: f64, coo: &mut crate::Coo<f64>| -> Result<()> {
        coo.push(i, j, v)?;
        coo.push(j, i, v)?;
        diag[i] -= v;
        diag[j] -= v;
        Ok(())
    };
    for i in 0..n.saturating_sub(1) {
        add(i, i + 1, -1.0, &mut coo)?;
    }
    for i in 0..n {
        for k in 0..20 {
            let j = far(i, k);
            if j.abs_diff(i) > 1 {
                add(i, j, -1e-3, &mut coo)?;
            }
        }
    }
    for (i, d) in diag.iter().enumerate() {
        coo.push(i, i, d + 1e-2)?;
    }
    Csr::from_coo(&coo)
}

/// `a` with the rows and columns of the unknowns `fixed(i)` replaced by those
/// of the identity: how many finite-element codes keep Dirichlet unknowns in
/// the matrix (a row and column of zeros with 1 on the diagonal, the matrix
/// still symmetric). O(nnz).
pub fn with_identity_rows<T: Scalar>(a: &Csr<T>, fixed: impl Fn(usize) -> bool) -> Csr<T> {
    build(a.nrows(), a.max_row_len(), |i, row| {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            if j as usize == i && fixed(i) {
                row.push((j, T::one()));
            } else if !fixed(i) && !fixed(j as usize) {
                row.push((j, v));
            }
        }
    })
}

/// 1D Laplacian tridiag(-1, 2 + shift, -1) of size `n` (Dirichlet ends).
///
/// Its Jacobi iteration matrix H = I - D^-1 A has spectral radius
/// `2 cos(pi / (n + 1)) / (2 + shift)`.
pub fn laplace1d<T: Scalar>(n: usize, shift: f64) -> Csr<T> {
    let (d, o) = (T::from_f64(2.0 + shift), T::from_f64(-1.0));
    build(n, 3, |i, r| {
        if i > 0 {
            r.push((i as u32 - 1, o));
        }
        r.push((i as u32, d));
        if i + 1 < n {
            r.push((i as u32 + 1, o));
        }
    })
}

/// 2D 5-point Laplacian on an `m x m` grid (size m^2, diagonal 4, neighbours -1).
pub fn laplace2d<T: Scalar>(m: usize) -> Csr<T> {
    let (d, o) = (T::from_f64(4.0), T::from_f64(-1.0));
    build(m * m, 5, |i, r| {
        let (x, y) = (i % m, i / m);
        let i = i as u32;
        let mm = m as u32;
        if y > 0 {
            r.push((i - mm, o));
        }
        if x > 0 {
            r.push((i - 1, o));
        }
        r.push((i, d));
        if x + 1 < m {
            r.push((i + 1, o));
        }
        if y + 1 < m {
            r.push((i + mm, o));
        }
    })
}

/// 3D 7-point Laplacian on an `m x m x m` grid (size m^3, diagonal 6, neighbours -1).
pub fn laplace3d<T: Scalar>(m: usize) -> Csr<T> {
    let (d, o) = (T::from_f64(6.0), T::from_f64(-1.0));
    let plane = (m * m) as u32;
    build(m * m * m, 7, |i, r| {
        let (x, y, z) = (i % m, (i / m) % m, i / (m * m));
        let i = i as u32;
        let mm = m as u32;
        if z > 0 {
            r.push((i - plane, o));
        }
        if y > 0 {
            r.push((i - mm, o));
        }
        if x > 0 {
            r.push((i - 1, o));
        }
        r.push((i, d));
        if x + 1 < m {
            r.push((i + 1, o));
        }
        if y + 1 < m {
            r.push((i + mm, o));
        }
        if z + 1 < m {
            r.push((i + plane, o));
        }
    })
}

/// Seed 000's first test matrix: the 2D Laplacian of size 900 (30 x 30 grid);
/// its Jacobi iteration matrix has spectral radius cos(pi/31) = 0.99487.
pub fn seed000_laplace2d_900<T: Scalar>() -> Csr<T> {
    laplace2d(30)
}

/// Seed 000's second test matrix: the 1D Laplacian of size 10^6 shifted by 0.5,
/// whose Jacobi iteration matrix has spectral radius 2/2.5 cos(pi/(10^6+1)) = 0.8.
pub fn seed000_shifted_laplace1d<T: Scalar>() -> Csr<T> {
    laplace1d(1_000_000, 0.5)
}

/// 2D convection-diffusion `-Δu + wind (u_x + u_y)` on an `m x m` grid with
/// Dirichlet boundaries, first-order upwind differences, scaled by h^2
/// (h = 1 / (m + 1)): diagonal 4 + 2 c, west and south neighbours -1 - c, east and
/// north -1, with c = wind h. Nonsymmetric for wind != 0, and an M-matrix for
/// wind >= 0 (weakly diagonally dominant, so every Krylov method of gpuq applies).
pub fn convdiff2d<T: Scalar>(m: usize, wind: f64) -> Csr<T> {
    let c = wind / (m as f64 + 1.0);
    let (d, up, down) = (
        T::from_f64(4.0 + 2.0 * c),
        T::from_f64(-1.0 - c),
        T::from_f64(-1.0),
    );
    build(m * m, 5, |i, r| {
        let (x, y) = (i % m, i / m);
        let i = i as u32;
        let mm = m as u32;
        if y > 0 {
            r.push((i - mm, up));
        }
        if x > 0 {
            r.push((i - 1, up));
        }
        r.push((i, d));
        if x + 1 < m {
            r.push((i + 1, down));
        }
        if y + 1 < m {
            r.push((i + mm, down));
        }
    })
}

/// The Helmholtz-like `laplace3d(m) - sigma I` with the complex shift
/// `sigma = kh^2 (1 + i damping)`: complex symmetric (not Hermitian) for
/// damping != 0, and indefinite once kh^2 exceeds the Laplacian's smallest
/// eigenvalue (about 3 pi^2 / (m + 1)^2). O(nnz).
///
/// Errors with [`Error::InvalidArgument`] when `T` is real and `damping` is not
/// zero (the shift would lose its imaginary part).
pub fn helmholtz3d<T: Scalar>(m: usize, kh: f64, damping: f64) -> Result<Csr<T>> {
    if !T::IS_COMPLEX && damping != 0.0 {
        return Err(Error::InvalidArgument(format!(
            "helmholtz3d with damping {damping} needs a complex scalar type, not {}",
            T::KIND.name()
        )));
    }
    let k2 = kh * kh;
    let sigma = T::from_parts(
        <T::Real as gpuq_core::RealScalar>::of_f64(k2),
        <T::Real as gpuq_core::RealScalar>::of_f64(k2 * damping),
    );
    let (nrows, ncols, row_ptr, col_idx, mut vals) = laplace3d::<T>(m).into_parts();
    for i in 0..nrows {
        for k in row_ptr[i]..row_ptr[i + 1] {
            if col_idx[k] as usize == i {
                vals[k] -= sigma;
            }
        }
    }
    Csr::try_new(nrows, ncols, row_ptr, col_idx, vals)
}

/// A generated problem named by a spec string, as the CLI accepts it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProblemSpec {
    /// `laplace1d:N[:SHIFT]`
    Laplace1d {
        /// Size.
        n: usize,
        /// Diagonal shift.
        shift: f64,
    },
    /// `laplace2d:M` (M^2 unknowns)
    Laplace2d {
        /// Grid points per side.
        m: usize,
    },
    /// `laplace3d:M` (M^3 unknowns)
    Laplace3d {
        /// Grid points per side.
        m: usize,
    },
    /// `convdiff2d:M[:WIND]` (M^2 unknowns, wind 10 by default)
    ConvDiff2d {
        /// Grid points per side.
        m: usize,
        /// Convection speed.
        wind: f64,
    },
    /// `helmholtz3d:M[:KH[:DAMPING]]` (M^3 unknowns; by default kh^2 = 0.5 and
    /// damping 0.1, the shift 0.5 + 0.05i of the GPU benchmarks)
    Helmholtz3d {
        /// Grid points per side.
        m: usize,
        /// Wave number times grid spacing.
        kh: f64,
        /// Relative imaginary part of the shift.
        damping: f64,
    },
    /// `helmholtz-cylinder:LEVEL[:hard|soft]` (level 0, 1 or 2: about 3e3, 2e4
    /// and 1.4e5 unknowns; a hard side wall by default; see
    /// [`crate::fem_cylinder`])
    HelmholtzCylinder {
        /// Mesh level.
        level: usize,
        /// The side wall ([`Cylinder::level`] or [`Cylinder::soft_level`]).
        side_wall: SideWall,
    },
    /// `elasticity2d:N` (2 N (N+1) unknowns, two per node; see
    /// [`crate::elasticity`])
    Elasticity2d {
        /// Elements per side.
        n: usize,
    },
    /// `elasticity3d:N` (3 N (N+1)^2 unknowns, three per node, P1 tetrahedra
    /// on a perturbed mesh; see [`crate::elasticity3d`])
    Elasticity3d {
        /// Cubes per side.
        n: usize,
    },
    /// `bidomain2d:N[:DT]` (2 (N+1)^2 unknowns, `(phi_e, v_m)` per node; time
    /// step DT in ms, 0.05 by default; the right-hand side of the first step
    /// from rest with a corner stimulus; see [`crate::bidomain`])
    Bidomain2d {
        /// Cells per side.
        n: usize,
        /// Time step, ms.
        dt: f64,
    },
    /// `bidomain3d:N[:DT]` (a slab of N x N x max(1, N/4) cells; see
    /// [`crate::bidomain`])
    Bidomain3d {
        /// Cells per side.
        n: usize,
        /// Time step, ms.
        dt: f64,
    },
}

impl std::fmt::Display for ProblemSpec {
    /// The spec as [`ProblemSpec::parse`] reads it (`laplace3d:100`, ...).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ProblemSpec::Laplace1d { n, shift } => write!(f, "laplace1d:{n}:{shift}"),
            ProblemSpec::Laplace2d { m } => write!(f, "laplace2d:{m}"),
            ProblemSpec::Laplace3d { m } => write!(f, "laplace3d:{m}"),
            ProblemSpec::ConvDiff2d { m, wind } => write!(f, "convdiff2d:{m}:{wind}"),
            ProblemSpec::Helmholtz3d { m, kh, damping } => {
                write!(f, "helmholtz3d:{m}:{kh}:{damping}")
            }
            ProblemSpec::HelmholtzCylinder { level, side_wall } => {
                let wall = match side_wall {
                    SideWall::Hard => "hard",
                    SideWall::Soft => "soft",
                };
                write!(f, "helmholtz-cylinder:{level}:{wall}")
            }
            ProblemSpec::Elasticity2d { n } => write!(f, "elasticity2d:{n}"),
            ProblemSpec::Elasticity3d { n } => write!(f, "elasticity3d:{n}"),
            ProblemSpec::Bidomain2d { n, dt } => write!(f, "bidomain2d:{n}:{dt}"),
            ProblemSpec::Bidomain3d { n, dt } => write!(f, "bidomain3d:{n}:{dt}"),
        }
    }
}

/// A generated system: the matrix and, when the problem defines one (the
/// cylinder's piston), its right-hand side.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated<T: Scalar> {
    /// The matrix A.
    pub matrix: Csr<T>,
    /// The problem's own right-hand side, if it has one.
    pub rhs: Option<Vec<T>>,
}

impl ProblemSpec {
    /// What [`ProblemSpec::parse`] accepts.
    pub const SPELLINGS: &'static str = "laplace1d:N[:SHIFT], laplace2d:M, laplace3d:M, convdiff2d:M[:WIND], helmholtz3d:M[:KH[:DAMPING]] helmholtz-cylinder:LEVEL[:hard|soft], elasticity2d:N, elasticity3d:N, bidomain2d:N[:DT] or bidomain3d:N[:DT]";

    /// Parses one of [`ProblemSpec::SPELLINGS`].
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::InvalidArgument(format!(
                "problem spec '{spec}': {why} (expected {})",
                Self::SPELLINGS
            ))
        };
        let number = |s: &str, what: &str| -> Result<f64> {
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(bad(&format!("{what} must be a finite non-negative number"))),
            }
        };
        let parts: Vec<&str> = spec.split(':').collect();
        let size = |s: &str| -> Result<usize> {
            match s.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad("size must be a positive integer")),
            }
        };
        let checked = |m: usize, d: u32| -> Result<usize> {
            m.checked_pow(d)
                .filter(|&n| n <= u32::MAX as usize)
                .map(|_| m)
                .ok_or_else(|| bad("too many unknowns for 32-bit indices"))
        };
        match parts.as_slice() {
            ["laplace1d", n] => Ok(ProblemSpec::Laplace1d {
                n: checked(size(n)?, 1)?,
                shift: 0.0,
            }),
            ["laplace1d", n, s] => {
                let shift: f64 = s.parse().map_err(|_| bad("shift must be a number"))?;
                if !shift.is_finite() {
                    return Err(bad("shift must be finite"));
                }
                Ok(ProblemSpec::Laplace1d {
                    n: checked(size(n)?, 1)?,
                    shift,
                })
            }
            ["laplace2d", m] => Ok(ProblemSpec::Laplace2d {
                m: checked(size(m)?, 2)?,
            }),
            ["laplace3d", m] => Ok(ProblemSpec::Laplace3d {
                m: checked(size(m)?, 3)?,
            }),
            ["convdiff2d", m] => Ok(ProblemSpec::ConvDiff2d {
                m: checked(size(m)?, 2)?,
                wind: 10.0,
            }),
            ["convdiff2d", m, w] => Ok(ProblemSpec::ConvDiff2d {
                m: checked(size(m)?, 2)?,
                wind: number(w, "wind")?,
            }),
            ["helmholtz3d", m, rest @ ..] if rest.len() <= 2 => Ok(ProblemSpec::Helmholtz3d {
                m: checked(size(m)?, 3)?,
                kh: rest
                    .first()
                    .map_or(Ok(0.5_f64.sqrt()), |k| number(k, "kh"))?,
                damping: rest.get(1).map_or(Ok(0.1), |d| number(d, "damping"))?,
            }),
            ["helmholtz-cylinder", level, rest @ ..] if rest.len() <= 1 => {
                let side_wall = match rest.first() {
                    None | Some(&"hard") => SideWall::Hard,
                    Some(&"soft") => SideWall::Soft,
                    Some(_) => return Err(bad("the cylinder's side wall must be hard or soft")),
                };
                match level.parse::<usize>() {
                    Ok(level) if level < Cylinder::LEVELS.len() => {
                        Ok(ProblemSpec::HelmholtzCylinder { level, side_wall })
                    }
                    _ => Err(bad("the cylinder level must be 0, 1 or 2")),
                }
            }
            ["elasticity2d", n] => {
                let n = size(n)?;
                crate::elasticity::Elasticity2d::new(n)
                    .map_err(|_| bad("too many unknowns for 32-bit indices"))?;
                Ok(ProblemSpec::Elasticity2d { n })
            }
            ["elasticity3d", n] => {
                let n = size(n)?;
                crate::elasticity3d::Elasticity3d::new(n)
                    .map_err(|_| bad("too many unknowns for 32-bit indices"))?;
                Ok(ProblemSpec::Elasticity3d { n })
            }
            [name @ ("bidomain2d" | "bidomain3d"), n, rest @ ..] if rest.len() <= 1 => {
                use crate::bidomain::Tissue;
                let n = size(n)?;
                let dt = match rest.first() {
                    None => Tissue::DT,
                    Some(d) => match number(d, "dt")? {
                        dt if dt > 0.0 => dt,
                        _ => return Err(bad("dt must be positive")),
                    },
                };
                if *name == "bidomain2d" {
                    Tissue::square(n).map_err(|_| bad("too many unknowns for 32-bit indices"))?;
                    Ok(ProblemSpec::Bidomain2d { n, dt })
                } else {
                    Tissue::slab(n).map_err(|_| bad("too many unknowns for 32-bit indices"))?;
                    Ok(ProblemSpec::Bidomain3d { n, dt })
                }
            }
            _ => Err(bad("unknown generator")),
        }
    }

    /// The coordinates of the problem's nodes, one column per dimension (node
    /// `k` owns unknowns `d k..d (k+1)` of a `d`-dimensional problem), for the
    /// elasticity problems (whose rigid-body modes they give); `None` for the
    /// others. O(nodes).
    pub fn node_coordinates(&self) -> Option<Vec<Vec<f64>>> {
        match *self {
            ProblemSpec::Elasticity2d { n } => {
                let xy = crate::elasticity::Elasticity2d::new(n)
                    .ok()?
                    .free_coordinates();
                Some(vec![
                    xy.iter().map(|p| p.0).collect(),
                    xy.iter().map(|p| p.1).collect(),
                ])
            }
            ProblemSpec::Elasticity3d { n } => Some(
                crate::elasticity3d::Elasticity3d::new(n)
                    .ok()?
                    .free_coordinates(),
            ),
            _ => None,
        }
    }

    /// `true` when the problem needs a complex scalar type (its matrix has
    /// imaginary parts).
    pub fn is_complex(&self) -> bool {
        match *self {
            ProblemSpec::Helmholtz3d { damping, .. } => damping != 0.0,
            ProblemSpec::HelmholtzCylinder { .. } => true,
            _ => false,
        }
    }

    /// The unknowns and an upper bound of the stored entries of the matrix,
    /// from the sizes alone (no assembly), as u128 so that no size
    /// overflows. O(1).
    pub fn size_bounds(&self) -> (u128, u128) {
        let cube = |m: usize| (m as u128).pow(3);
        let square = |m: usize| (m as u128).pow(2);
        let (n, per_row) = match *self {
            ProblemSpec::Laplace1d { n, .. } => (n as u128, 3),
            ProblemSpec::Laplace2d { m } | ProblemSpec::ConvDiff2d { m, .. } => (square(m), 5),
            ProblemSpec::Laplace3d { m } | ProblemSpec::Helmholtz3d { m, .. } => (cube(m), 7),
            ProblemSpec::HelmholtzCylinder { .. } => (150_000, 27),
            ProblemSpec::Elasticity2d { n } => (2 * square(n + 1), 18),
            ProblemSpec::Elasticity3d { n } => (3 * cube(n + 1), 81),
            ProblemSpec::Bidomain2d { n, .. } => (2 * square(n + 1), 18),
            ProblemSpec::Bidomain3d { n, .. } => (2 * cube(n + 1), 54),
        };
        (n, n * per_row)
    }

    /// Errors with [`Error::HostMemory`] when assembling the problem in `T`
    /// (its entries twice, as triplets and in CSR, and a few vectors) would
    /// not fit in the host's available memory. O(1).
    pub fn check_memory<T: Scalar>(&self, spec: &str) -> Result<()> {
        let (n, nnz) = self.size_bounds();
        let entry = (std::mem::size_of::<T>() + 2 * std::mem::size_of::<u32>()) as u128;
        let bytes = 2 * nnz * entry + 8 * n * std::mem::size_of::<T>() as u128;
        gpuq_core::memory::check_host_memory(
            &format!("generating {spec} ({n} unknowns, up to {nnz} entries)"),
            bytes,
        )
    }

    /// Assembles the matrix (and the problem's own right-hand side, if any).
    /// O(nnz). Errors when `T` is real and the problem is complex
    /// ([`ProblemSpec::is_complex`]), or when the problem would not fit in
    /// the host's memory ([`ProblemSpec::check_memory`]).
    pub fn build<T: Scalar>(&self) -> Result<Generated<T>> {
        self.check_memory::<T>(&self.to_string())?;
        let matrix = match *self {
            ProblemSpec::Laplace1d { n, shift } => laplace1d(n, shift),
            ProblemSpec::Laplace2d { m } => laplace2d(m),
            ProblemSpec::Laplace3d { m } => laplace3d(m),
            ProblemSpec::ConvDiff2d { m, wind } => convdiff2d(m, wind),
            ProblemSpec::Helmholtz3d { m, kh, damping } => helmholtz3d(m, kh, damping)?,
            ProblemSpec::HelmholtzCylinder { level, side_wall } => {
                let cylinder = match side_wall {
                    SideWall::Hard => Cylinder::level(level)?,
                    SideWall::Soft => Cylinder::soft_level(level)?,
                };
                let p = cylinder.assemble::<T>()?;
                return Ok(Generated {
                    matrix: p.matrix,
                    rhs: Some(p.rhs),
                });
            }
            ProblemSpec::Bidomain2d { n, dt } => {
                let (matrix, rhs) = crate::bidomain::bidomain2d(n, dt)?;
                return Ok(Generated {
                    matrix,
                    rhs: Some(rhs),
                });
            }
            ProblemSpec::Bidomain3d { n, dt } => {
                let (matrix, rhs) = crate::bidomain::bidomain3d(n, dt)?;
                return Ok(Generated {
                    matrix,
                    rhs: Some(rhs),
                });
            }
            ProblemSpec::Elasticity2d { n } => {
                let (matrix, rhs) = crate::elasticity::elasticity2d(n)?;
                return Ok(Generated {
                    matrix,
                    rhs: Some(rhs),
                });
            }
            ProblemSpec::Elasticity3d { n } => {
                let (matrix, rhs) = crate::elasticity3d::elasticity3d(n)?;
                return Ok(Generated {
                    matrix,
                    rhs: Some(rhs),
                });
            }
        };
        Ok(Generated { matrix, rhs: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_symmetric(a: &Csr<f64>) -> bool {
        a.transpose(false) == *a
    }

    #[test]
    fn specs_print_as_they_parse_and_huge_ones_are_refused() {
        for text in [
            "laplace1d:10:0.5",
            "laplace3d:7",
            "helmholtz3d:4:0.7:0.1",
            "helmholtz-cylinder:1:soft",
            "elasticity3d:3",
            "bidomain2d:8:0.05",
        ] {
            let spec = ProblemSpec::parse(text).unwrap();
            assert_eq!(ProblemSpec::parse(&spec.to_string()).unwrap(), spec);
        }
        let huge = ProblemSpec::parse("laplace3d:1250").unwrap();
        let e = huge.build::<f64>().unwrap_err().to_string();
        assert!(
            e.contains("laplace3d:1250") && e.contains("host memory"),
            "{e}"
        );
    }

    #[test]
    fn sizes_and_symmetry() {
        let a = laplace1d::<f64>(5, 0.5);
        assert_eq!((a.nrows(), a.nnz()), (5, 13));
        assert_eq!(a.diagonal(), vec![2.5; 5]);
        let b = laplace2d::<f64>(4);
        assert_eq!((b.nrows(), b.nnz()), (16, 16 * 5 - 4 * 4));
        let c = laplace3d::<f64>(3);
        assert_eq!((c.nrows(), c.nnz()), (27, 27 * 7 - 6 * 9));
        assert!(is_symmetric(&a) && is_symmetric(&b) && is_symmetric(&c));
        // Row sums vanish in the interior of the 3D grid.
        let ones = vec![1.0; 27];
        assert_eq!(c.mul_vec(&ones).unwrap()[13], 0.0);
    }

    #[test]
    fn convection_diffusion_is_a_nonsymmetric_m_matrix() {
        let a = convdiff2d::<f64>(6, 10.0);
        assert!(!is_symmetric(&a));
        for i in 0..a.nrows() {
            let (cols, vals) = a.row(i);
            let off: f64 = cols
                .iter()
                .zip(vals)
                .filter(|(&j, _)| j as usize != i)
                .map(|(_, v)| v.abs())
                .sum();
            let d = a.diagonal()[i];
            assert!(d >= off - 1e-12, "row {i}: {d} < {off}");
        }
        assert!(is_symmetric(&convdiff2d::<f64>(6, 0.0)));
    }

    #[test]
    fn helmholtz_is_complex_symmetric_and_needs_a_complex_type() {
        use num_complex::Complex64;
        let h = helmholtz3d::<Complex64>(4, 0.5, 0.1).unwrap();
        assert_eq!(h.transpose(false), h);
        assert_ne!(h.transpose(true), h);
        assert_eq!(h.diagonal()[0], Complex64::new(6.0 - 0.25, -0.025));
        assert!(helmholtz3d::<f64>(4, 0.5, 0.1).is_err());
        assert!(helmholtz3d::<f64>(4, 0.5, 0.0).is_ok());
    }

    #[test]
    fn specs_parse() {
        assert_eq!(
            ProblemSpec::parse("laplace1d:10:0.5").unwrap(),
            ProblemSpec::Laplace1d { n: 10, shift: 0.5 }
        );
        assert_eq!(
            ProblemSpec::parse("laplace3d:7").unwrap(),
            ProblemSpec::Laplace3d { m: 7 }
        );
        for bad in [
            "laplace3d",
            "laplace3d:0",
            "laplace2d:x",
            "poisson:3",
            "laplace3d:100000",
            "laplace1d:3:nan",
            "helmholtz3d:4:-1",
            "helmholtz3d:4:0.5:0.1:2",
            "helmholtz-cylinder:3",
            "helmholtz-cylinder:x",
            "helmholtz-cylinder:1:wet",
            "helmholtz-cylinder:1:soft:2",
        ] {
            assert!(ProblemSpec::parse(bad).is_err(), "{bad}");
        }
        let h = ProblemSpec::parse("helmholtz3d:5").unwrap();
        assert_eq!(
            h,
            ProblemSpec::Helmholtz3d {
                m: 5,
                kh: 0.5_f64.sqrt(),
                damping: 0.1
            }
        );
        assert!(
            h.is_complex()
                && !ProblemSpec::parse("helmholtz3d:5:1:0")
                    .unwrap()
                    .is_complex()
        );
        assert!(h.build::<f64>().is_err());
        let g = h.build::<gpuq_core::Complex64>().unwrap();
        let d = g.matrix.diagonal()[0] - gpuq_core::Complex64::new(5.5, -0.05);
        assert!(d.norm() < 1e-14, "{d}");
        assert!(g.rhs.is_none());
        let c = ProblemSpec::parse("helmholtz-cylinder:0").unwrap();
        assert!(c.is_complex() && c.build::<f64>().is_err());
        assert_eq!(c, ProblemSpec::parse("helmholtz-cylinder:0:hard").unwrap());
        let soft = ProblemSpec::parse("helmholtz-cylinder:0:soft").unwrap();
        assert_eq!(
            soft,
            ProblemSpec::HelmholtzCylinder {
                level: 0,
                side_wall: SideWall::Soft
            }
        );
        let g = soft.build::<gpuq_core::Complex64>().unwrap();
        assert_eq!(g.matrix.nrows(), 2904);
        assert_eq!(g.rhs.map(|b| b.len()), Some(2904));
    }

    #[test]
    fn seed000_matrices() {
        let a = seed000_laplace2d_900::<f64>();
        assert_eq!(a.nrows(), 900);
        let rho = 2.0 / 2.5 * (std::f64::consts::PI / 1_000_001.0).cos();
        assert!((rho - 0.8).abs() < 1e-6);
    }
}
