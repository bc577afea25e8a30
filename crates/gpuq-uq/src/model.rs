//! A user's linear structural model: stiffness K, optionally mass M and damping,
//! from Matrix Market files (or a generator such as the built-in beam), with
//! constrained DOFs eliminated. DOFs are 0-based in the full numbering (the
//! numbering of the files); the model works on the free DOFs and maps outputs
//! and loads between the two.
//!
//! Checks, all before any sampling, each a one-line error: square matrices of
//! one size, finite values, K and M symmetric (to 1e-10 of their largest
//! entry), K's and M's diagonals positive on the free DOFs, fixed DOFs and
//! outputs in range and outputs not fixed. Positive definiteness is checked
//! by the factorisation (or the eigensolver) that needs it, which names the
//! pivot where it fails.

use gpuq_core::{Error, Result};
use gpuq_sparse::{Coo, Csr};

/// How the model is damped (dynamic procedures only).
#[derive(Clone, Debug, PartialEq)]
pub enum Damping {
    /// No damping given.
    None,
    /// A damping matrix C (on the full DOFs as given; reduced with K).
    Matrix(Csr<f64>),
    /// Rayleigh damping C = a M + b K.
    Rayleigh {
        /// Mass coefficient a.
        a: f64,
        /// Stiffness coefficient b.
        b: f64,
    },
    /// The same damping ratio in every mode (modal superposition only).
    Modal(f64),
}

/// A linear structural model on its free DOFs.
#[derive(Clone, Debug)]
pub struct Model {
    /// Stiffness on the free DOFs.
    pub k: Csr<f64>,
    /// Mass on the free DOFs, if given.
    pub m: Option<Csr<f64>>,
    /// Damping (a matrix is reduced to the free DOFs).
    pub damping: Damping,
    /// The full index of each free DOF, increasing.
    free: Vec<usize>,
    /// The free index of each full DOF (`usize::MAX` for a fixed one).
    reduced: Vec<usize>,
}

/// Relative tolerance of the symmetry check.
const SYMMETRY_TOL: f64 = 1e-10;

/// Errors unless `a` is square of size n, finite and symmetric to
/// [`SYMMETRY_TOL`] of its largest entry (`what` names it). O(nnz log(row)).
fn check_symmetric(a: &Csr<f64>, n: usize, what: &str) -> Result<()> {
    if a.nrows() != a.ncols() || a.nrows() != n {
        return Err(Error::InvalidArgument(format!(
            "{what} is {} x {}; the model needs {n} x {n}",
            a.nrows(),
            a.ncols()
        )));
    }
    a.check_finite()?;
    let scale = a.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let at = |i: usize, j: usize| -> f64 {
        let (cols, vals) = a.row(i);
        cols.binary_search(&(j as u32)).map_or(0.0, |p| vals[p])
    };
    for i in 0..n {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let w = at(j as usize, i);
            if (v - w).abs() > SYMMETRY_TOL * scale {
                return Err(Error::InvalidArgument(format!(
                    "{what} is not symmetric: entry ({i}, {j}) is {v:e}, entry ({j}, {i}) is {w:e}"
                )));
            }
        }
    }
    Ok(())
}

/// The rows and columns `keep` (increasing) of `a`, renumbered 0..keep.len().
/// `map[i]` is the new index of old index i (`usize::MAX`: dropped). O(nnz).
fn submatrix(a: &Csr<f64>, keep: &[usize], map: &[usize]) -> Result<Csr<f64>> {
    let mut coo = Coo::new(keep.len(), keep.len());
    for (r, &i) in keep.iter().enumerate() {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let c = map[j as usize];
            if c != usize::MAX {
                coo.push(r, c, v)?;
            }
        }
    }
    Csr::from_coo(&coo)
}

impl Model {
    /// The model of stiffness `k`, mass `m`, damping `damping` (all on the
    /// full DOFs) with the DOFs `fixed` eliminated. Errors as the module docs
    /// say. Cost O(nnz log(row length)).
    pub fn new(
        k: Csr<f64>,
        m: Option<Csr<f64>>,
        damping: Damping,
        fixed: &[usize],
    ) -> Result<Self> {
        let n = k.nrows();
        if n == 0 {
            return Err(Error::InvalidArgument(
                "the stiffness matrix is empty".into(),
            ));
        }
        check_symmetric(&k, n, "the stiffness matrix K")?;
        if let Some(m) = &m {
            check_symmetric(m, n, "the mass matrix M")?;
        }
        match &damping {
            Damping::Matrix(c) => check_symmetric(c, n, "the damping matrix C")?,
            Damping::Rayleigh { a, b }
                if !(a.is_finite() && b.is_finite() && *a >= 0.0 && *b >= 0.0) =>
            {
                return Err(Error::InvalidArgument(format!(
                    "Rayleigh damping needs finite a, b >= 0, not {a}, {b}"
                )))
            }
            Damping::Modal(z) if !(z.is_finite() && *z >= 0.0 && *z < 1.0) => {
                return Err(Error::InvalidArgument(format!(
                    "the modal damping ratio must be in [0, 1), not {z}"
                )))
            }
            _ => {}
        }
        let mut is_fixed = vec![false; n];
        for &d in fixed {
            if d >= n {
                return Err(Error::InvalidArgument(format!(
                    "fixed DOF {d} is outside 0..{n}"
                )));
            }
            is_fixed[d] = true;
        }
        let free: Vec<usize> = (0..n).filter(|&i| !is_fixed[i]).collect();
        if free.is_empty() {
            return Err(Error::InvalidArgument("every DOF is fixed".into()));
        }
        let mut reduced = vec![usize::MAX; n];
        for (r, &i) in free.iter().enumerate() {
            reduced[i] = r;
        }
        let reduce = |a: &Csr<f64>| {
            if free.len() == n {
                Ok(a.clone())
            } else {
                submatrix(a, &free, &reduced)
            }
        };
        let k = reduce(&k)?;
        let m = m.as_ref().map(reduce).transpose()?;
        let damping = match damping {
            Damping::Matrix(c) => Damping::Matrix(reduce(&c)?),
            other => other,
        };
        for (what, a) in [("K", Some(&k)), ("M", m.as_ref())] {
            let Some(a) = a else { continue };
            if let Some(r) = a.diagonal().iter().position(|&d| d <= 0.0) {
                return Err(Error::InvalidArgument(format!(
                    "{what} has a non-positive diagonal entry at DOF {} ({}): it is not positive definite",
                    free[r],
                    a.diagonal()[r]
                )));
            }
        }
        Ok(Model {
            k,
            m,
            damping,
            free,
            reduced,
        })
    }

    /// Free DOFs (the size of the reduced matrices).
    pub fn dofs(&self) -> usize {
        self.free.len()
    }

    /// DOFs of the full numbering.
    pub fn full_dofs(&self) -> usize {
        self.reduced.len()
    }

    /// The full index of free DOF `r`.
    pub fn full_dof(&self, r: usize) -> usize {
        self.free[r]
    }

    /// The free index of full DOF `dof`; errors when it is out of range or fixed.
    pub fn reduced_dof(&self, dof: usize) -> Result<usize> {
        match self.reduced.get(dof) {
            None => Err(Error::InvalidArgument(format!(
                "DOF {dof} is outside 0..{}",
                self.full_dofs()
            ))),
            Some(&usize::MAX) => Err(Error::InvalidArgument(format!(
                "DOF {dof} is fixed (it has no response)"
            ))),
            Some(&r) => Ok(r),
        }
    }

    /// A vector over the DOFs (`what` names it) on the free DOFs: given on
    /// the full DOFs (its fixed entries dropped) or already on the free ones.
    /// Errors on another length or a non-finite value.
    pub fn reduce_vector(&self, v: &[f64], what: &str) -> Result<Vec<f64>> {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(Error::NonFinite {
                what: what.to_string(),
                index: i,
            });
        }
        if v.len() == self.full_dofs() {
            Ok(self.free.iter().map(|&i| v[i]).collect())
        } else if v.len() == self.dofs() {
            Ok(v.to_vec())
        } else {
            Err(Error::shape(
                "model vector",
                format!("{} or {} values ({what})", self.full_dofs(), self.dofs()),
                v.len(),
            ))
        }
    }

    /// A matrix on the full DOFs (`what` names it: a stiffness term, a load
    /// factor's rows) reduced to the free rows (and, when square, columns).
    pub fn reduce_matrix(&self, a: &Csr<f64>, what: &str) -> Result<Csr<f64>> {
        let n = self.full_dofs();
        if a.nrows() != n {
            return Err(Error::InvalidArgument(format!(
                "{what} has {} rows; the model has {n} DOFs",
                a.nrows()
            )));
        }
        a.check_finite()?;
        if self.dofs() == n {
            return Ok(a.clone());
        }
        if a.ncols() == n {
            return submatrix(a, &self.free, &self.reduced);
        }
        // Rows only: keep every column.
        let mut coo = Coo::new(self.dofs(), a.ncols());
        for (r, &i) in self.free.iter().enumerate() {
            let (cols, vals) = a.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                coo.push(r, j as usize, v)?;
            }
        }
        Csr::from_coo(&coo)
    }
}

/// DOFs from a list "3,5,10-20" (ranges inclusive) or, when `spec` names a
/// file, from its whitespace- or comma-separated integers (lines starting with
/// `%` or `#` ignored). 0-based. Errors on anything else.
pub fn parse_dofs(spec: &str) -> Result<Vec<usize>> {
    let path = std::path::Path::new(spec);
    let text = if path.is_file() {
        std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: spec.to_string(),
            source,
        })?
    } else {
        spec.to_string()
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('%') || line.starts_with('#') {
            continue;
        }
        for item in line.split(|c: char| c == ',' || c.is_whitespace()) {
            if item.is_empty() {
                continue;
            }
            let bad = || Error::InvalidArgument(format!("bad DOF {item:?} in {spec:?}"));
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b): (usize, usize) =
                        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                    if a > b {
                        return Err(bad());
                    }
                    out.extend(a..=b);
                }
                None => out.push(item.parse().map_err(|_| bad())?),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn laplace(n: usize) -> Csr<f64> {
        let mut c = Coo::new(n, n);
        for i in 0..n {
            c.push(i, i, 2.0).unwrap();
            if i > 0 {
                c.push(i, i - 1, -1.0).unwrap();
                c.push(i - 1, i, -1.0).unwrap();
            }
        }
        Csr::from_coo(&c).unwrap()
    }

    #[test]
    fn fixed_dofs_are_eliminated_and_mapped() {
        let m = Model::new(laplace(6), Some(Csr::identity(6)), Damping::None, &[0, 4]).unwrap();
        assert_eq!(m.dofs(), 4);
        assert_eq!(m.full_dofs(), 6);
        assert_eq!(m.reduced_dof(5).unwrap(), 3);
        assert_eq!(m.full_dof(2), 3);
        assert!(m.reduced_dof(4).is_err());
        assert!(m.reduced_dof(6).is_err());
        // Row 3 (full) keeps its neighbour 2 and its diagonal, loses 4.
        let (cols, vals) = m.k.row(2);
        assert_eq!(cols, &[1, 2]);
        assert_eq!(vals, &[-1.0, 2.0]);
        assert_eq!(
            m.reduce_vector(&[0., 1., 2., 3., 4., 5.], "f").unwrap(),
            vec![1., 2., 3., 5.]
        );
        assert_eq!(m.reduce_vector(&[1., 2., 3., 5.], "f").unwrap().len(), 4);
        assert!(m.reduce_vector(&[1., 2.], "f").is_err());
        assert!(m.reduce_vector(&[1., 2., f64::NAN, 5.], "f").is_err());
    }

    #[test]
    fn bad_models_are_refused() {
        let mut c = Coo::new(3, 3);
        for (i, j, v) in [
            (0, 0, 2.0),
            (0, 1, -1.0),
            (1, 0, -0.5),
            (1, 1, 2.0),
            (2, 2, 1.0),
        ] {
            c.push(i, j, v).unwrap();
        }
        let unsym = Csr::from_coo(&c).unwrap();
        let e = Model::new(unsym, None, Damping::None, &[]).unwrap_err();
        assert!(e.to_string().contains("not symmetric"), "{e}");
        let e = Model::new(laplace(3), Some(Csr::identity(4)), Damping::None, &[]).unwrap_err();
        assert!(e.to_string().contains("4 x 4"), "{e}");
        let e = Model::new(laplace(3), None, Damping::None, &[7]).unwrap_err();
        assert!(e.to_string().contains("fixed DOF 7"), "{e}");
        let e = Model::new(laplace(3), None, Damping::None, &[0, 1, 2]).unwrap_err();
        assert!(e.to_string().contains("every DOF"), "{e}");
        let mut neg = laplace(3).to_coo();
        neg.push(1, 1, -5.0).unwrap();
        let e = Model::new(Csr::from_coo(&neg).unwrap(), None, Damping::None, &[]).unwrap_err();
        assert!(e.to_string().contains("DOF 1"), "{e}");
        let e = Model::new(laplace(3), None, Damping::Modal(1.5), &[]).unwrap_err();
        assert!(e.to_string().contains("[0, 1)"), "{e}");
    }

    #[test]
    fn dof_lists_parse() {
        assert_eq!(parse_dofs("3,5, 7-9").unwrap(), vec![3, 5, 7, 8, 9]);
        assert!(parse_dofs("3,x").is_err());
        assert!(parse_dofs("9-3").is_err());
        let path = std::env::temp_dir().join(format!("gpuq-dofs-{}.txt", std::process::id()));
        std::fs::write(&path, "% fixed\n0 1\n2,10-11\n").unwrap();
        assert_eq!(
            parse_dofs(path.to_str().unwrap()).unwrap(),
            vec![0, 1, 2, 10, 11]
        );
        let _ = std::fs::remove_file(&path);
    }
}
