//! The cantilever Euler-Bernoulli beam of seed 001's examples 1-3: length L,
//! modulus E, second moment I, mass per length rho A, `ne` cubic Hermite
//! elements (two DOFs per node, w and theta), clamped at x = 0, consistent mass
//! and Rayleigh damping C = alpha M + beta K. DOF 2 (i - 1) is the deflection of
//! node i (i = 1..=ne), DOF 2 (i - 1) + 1 its rotation; the tip deflection is
//! DOF n - 2 (n = 2 ne).
//!
//! K, M and C are available as symmetric lower bands (semi-bandwidth 3, entry
//! (i, d) = A[i][i - d] at `4 i + d`, the layout of
//! [`gpuq_kernels::uq::band`] with w = 3), as dense row-major matrices (small systems)
//! and as [`gpuq_sparse::Csr`]. Assembly is O(ne).
//!
//! As a [`Model`] ([`Beam::model`]) the beam is what every procedure takes:
//! K, M and Rayleigh damping in CSR on its 2 ne free DOFs (the clamped node's
//! are not in it), and [`Beam::element_stiffness_terms`] the per-element
//! stiffness matrices K_e of a random modulus per element.

use crate::model::{Damping, Model};
use gpuq_core::{Error, Result};
use gpuq_kernels::uq::band::BandStore;
use gpuq_kernels::uq::beam::{assemble, element_stiffness};
use gpuq_sparse::{Coo, Csr};
use serde::Serialize;

/// The beam's parameters.
#[derive(Clone, Debug, Serialize)]
pub struct Beam {
    /// Length L.
    pub length: f64,
    /// Young's modulus E (the mean modulus when it is random).
    pub modulus: f64,
    /// Second moment of area I.
    pub inertia: f64,
    /// Mass per unit length rho A.
    pub mass_per_length: f64,
    /// Number of elements (n = 2 ne DOFs).
    pub elements: usize,
    /// Rayleigh coefficient alpha (of M).
    pub alpha: f64,
    /// Rayleigh coefficient beta (of K).
    pub beta: f64,
}

/// A symmetric banded matrix (lower band, semi-bandwidth 3) with an optional
/// right-hand side, in plain host memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    /// Order n.
    pub n: usize,
    /// Entry (i, d) = A[i][i - d] at `4 i + d`.
    pub band: Vec<f64>,
    /// Right-hand side / solution (n values).
    pub rhs: Vec<f64>,
}

impl BandStore<f64> for Band {
    fn band(&self, i: usize, d: usize) -> f64 {
        self.band[4 * i + d]
    }
    fn set_band(&mut self, i: usize, d: usize, v: f64) {
        self.band[4 * i + d] = v;
    }
    fn rhs(&self, i: usize) -> f64 {
        self.rhs[i]
    }
    fn set_rhs(&mut self, i: usize, v: f64) {
        self.rhs[i] = v;
    }
}

impl Band {
    /// A zero band of order n.
    pub fn zeros(n: usize) -> Self {
        Band {
            n,
            band: vec![0.0; 4 * n],
            rhs: vec![0.0; n],
        }
    }

    /// Entry (i, j) of the symmetric matrix (0 outside the band).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let (i, j) = if i >= j { (i, j) } else { (j, i) };
        if i - j > 3 {
            0.0
        } else {
            self.band[4 * i + i - j]
        }
    }

    /// The dense row-major matrix (n^2 values).
    pub fn to_dense(&self) -> Vec<f64> {
        let n = self.n;
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = self.get(i, j);
            }
        }
        a
    }

    /// The matrix in CSR (both triangles, explicit zeros dropped).
    pub fn to_csr(&self) -> Result<Csr<f64>> {
        let mut coo = Coo::with_capacity(self.n, self.n, 7 * self.n);
        for i in 0..self.n {
            for j in i.saturating_sub(3)..(i + 4).min(self.n) {
                let v = self.get(i, j);
                if v != 0.0 {
                    coo.push(i, j, v)?;
                }
            }
        }
        Csr::from_coo(&coo)
    }

    /// alpha self + beta other (same order).
    pub fn combine(&self, alpha: f64, other: &Band, beta: f64) -> Band {
        Band {
            n: self.n,
            band: self
                .band
                .iter()
                .zip(&other.band)
                .map(|(a, b)| alpha * a + beta * b)
                .collect(),
            rhs: vec![0.0; self.n],
        }
    }
}

impl Beam {
    /// Seed 001's beam shape with `dofs` DOFs (even, >= 2): L = 1, E = 1, I = 1,
    /// rho A = 1, 2 % Rayleigh-like damping (alpha = 0.1, beta = 1e-4).
    pub fn unit(dofs: usize) -> Result<Self> {
        let b = Beam {
            length: 1.0,
            modulus: 1.0,
            inertia: 1.0,
            mass_per_length: 1.0,
            elements: dofs / 2,
            alpha: 0.1,
            beta: 1e-4,
        };
        if dofs % 2 != 0 {
            return Err(Error::InvalidArgument(format!(
                "beam: {dofs} DOFs is odd (two per node)"
            )));
        }
        b.validate()?;
        Ok(b)
    }

    /// Checks positivity and finiteness of the parameters and ne >= 1.
    pub fn validate(&self) -> Result<()> {
        let v = [
            self.length,
            self.modulus,
            self.inertia,
            self.mass_per_length,
        ];
        if self.elements == 0
            || v.iter().any(|x| !(x.is_finite() && *x > 0.0))
            || !(self.alpha >= 0.0 && self.beta >= 0.0)
        {
            return Err(Error::InvalidArgument(
                "beam: L, E, I, rho A must be positive and finite, alpha, beta >= 0, ne >= 1"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Number of DOFs n = 2 ne.
    pub fn dofs(&self) -> usize {
        2 * self.elements
    }

    /// Element length h = L / ne.
    pub fn element_length(&self) -> f64 {
        self.length / self.elements as f64
    }

    /// The tip deflection's DOF, n - 2.
    pub fn tip(&self) -> usize {
        self.dofs() - 2
    }

    /// K with element e's modulus `modulus(e)` (the shared assembly of
    /// [`gpuq_kernels::uq::beam::assemble`]).
    pub fn stiffness_with(&self, modulus: impl FnMut(usize) -> f64) -> Band {
        let mut k = Band::zeros(self.dofs());
        assemble(
            &mut k,
            self.elements,
            self.element_length(),
            self.inertia,
            modulus,
        );
        k
    }

    /// K with the modulus E everywhere.
    pub fn stiffness(&self) -> Band {
        self.stiffness_with(|_| self.modulus)
    }

    /// The consistent mass matrix: (rho A h / 420) [156, 22h, 54, -13h; 22h,
    /// 4h^2, 13h, -3h^2; 54, 13h, 156, -22h; -13h, -3h^2, -22h, 4h^2] per element.
    pub fn mass(&self) -> Band {
        let h = self.element_length();
        let a = self.mass_per_length * h / 420.0;
        let me = [
            [156.0, 22.0 * h, 54.0, -13.0 * h],
            [22.0 * h, 4.0 * h * h, 13.0 * h, -3.0 * h * h],
            [54.0, 13.0 * h, 156.0, -22.0 * h],
            [-13.0 * h, -3.0 * h * h, -22.0 * h, 4.0 * h * h],
        ];
        let mut m = Band::zeros(self.dofs());
        for e in 0..self.elements {
            for (la, row) in me.iter().enumerate() {
                for (lb, v) in row.iter().enumerate().take(la + 1) {
                    if 2 * e + la >= 2 && 2 * e + lb >= 2 {
                        let (gi, gj) = (2 * e + la - 2, 2 * e + lb - 2);
                        m.band[4 * gi + gi - gj] += a * v;
                    }
                }
            }
        }
        m
    }

    /// Rayleigh damping C = alpha M + beta K.
    pub fn damping(&self) -> Band {
        self.mass()
            .combine(self.alpha, &self.stiffness(), self.beta)
    }

    /// The beam as a model: K and M in CSR, Rayleigh damping alpha M + beta K,
    /// no DOF fixed (the clamped node's are not among the 2 ne). O(ne).
    pub fn model(&self) -> Result<Model> {
        self.validate()?;
        Model::new(
            self.stiffness().to_csr()?,
            Some(self.mass().to_csr()?),
            Damping::Rayleigh {
                a: self.alpha,
                b: self.beta,
            },
            &[],
        )
    }

    /// Element e's stiffness K_e with the modulus E, on the model's DOFs, for
    /// every element: K = sum_e K_e, and a modulus E_e in element e gives
    /// K + sum_e (E_e / E - 1) K_e. O(ne) entries in all.
    pub fn element_stiffness_terms(&self) -> Result<Vec<Csr<f64>>> {
        self.validate()?;
        let n = self.dofs();
        let ke = element_stiffness(self.modulus * self.inertia, self.element_length());
        (0..self.elements)
            .map(|e| {
                let mut coo = Coo::with_capacity(n, n, 16);
                for (a, row) in ke.iter().enumerate() {
                    for (b, &v) in row.iter().enumerate() {
                        if 2 * e + a >= 2 && 2 * e + b >= 2 {
                            coo.push(2 * e + a - 2, 2 * e + b - 2, v)?;
                        }
                    }
                }
                Csr::from_coo(&coo)
            })
            .collect()
    }

    /// The exact tip deflection under a tip load P: P L^3 / (3 E I)
    /// (the cubic elements reproduce it exactly).
    pub fn tip_deflection(&self, load: f64) -> f64 {
        load * self.length.powi(3) / (3.0 * self.modulus * self.inertia)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrices_are_symmetric_banded_and_consistent() {
        let b = Beam::unit(8).unwrap();
        let k = b.stiffness();
        let m = b.mass();
        let c = b.damping();
        let kc = k.to_csr().unwrap();
        let dense = kc.to_dense();
        assert_eq!(dense, k.to_dense());
        assert_eq!(kc.nrows(), 8);
        assert!(kc.max_row_len() <= 7);
        // Total mass: the deflection DOFs of a rigid translation w = 1 give
        // 1^T M_ww 1 = rho A L (minus the clamped node's share).
        let n = b.dofs();
        let mut total = 0.0;
        for i in (0..n).step_by(2) {
            for j in (0..n).step_by(2) {
                total += m.get(i, j);
            }
        }
        let h = b.element_length();
        // The clamped node's row and column are dropped: subtract its terms.
        let dropped = b.mass_per_length * h / 420.0 * (156.0 + 2.0 * 54.0);
        assert!((total + dropped - b.mass_per_length * b.length).abs() < 1e-12);
        assert!((c.get(3, 1) - (0.1 * m.get(3, 1) + 1e-4 * k.get(3, 1))).abs() < 1e-15);
        assert!(Beam::unit(7).is_err());
        assert!(Beam::unit(0).is_err());
    }

    #[test]
    fn the_model_and_its_element_terms_are_the_beams_matrices() {
        let b = Beam::unit(10).unwrap();
        let model = b.model().unwrap();
        assert_eq!(model.dofs(), 10);
        assert_eq!(model.k.to_dense(), b.stiffness().to_dense());
        assert_eq!(model.m.as_ref().unwrap().to_dense(), b.mass().to_dense());
        assert_eq!(model.damping, Damping::Rayleigh { a: 0.1, b: 1e-4 });
        let terms = b.element_stiffness_terms().unwrap();
        assert_eq!(terms.len(), 5);
        // The first element loses the clamped node's rows: a 2 x 2 block.
        assert_eq!(terms[0].nnz(), 4);
        assert_eq!(terms[4].nnz(), 16);
        let mut sum = vec![0.0; 100];
        for t in &terms {
            for (s, v) in sum.iter_mut().zip(t.to_dense()) {
                *s += v;
            }
        }
        for (s, k) in sum.iter().zip(b.stiffness().to_dense()) {
            assert!((s - k).abs() <= 1e-12 * k.abs().max(1.0), "{s} vs {k}");
        }
    }
}
