//! (ii) Response power spectral density (seed 001's example 2):
//!
//! S_xx(w) = H(w) S_ff(w) H(w)^H,  H(w) = (K - w^2 M + i w C)^-1 B,
//!
//! for a load on one DOF (B = e_dof), so S_xx(w) = S_ff(w) h h^H with h the
//! single column of H: a rank-1 Hermitian update scaled by the real S_ff(w).
//! S_ff is the two-sided PSD of a first-order autoregressive (AR(1)) process.
//!
//! h(w) comes from a banded complex-symmetric LDL^T factorisation of
//! K - w^2 M + i w C on the host (semi-bandwidth 3, O(n) per frequency, no
//! pivoting: the damped dynamic stiffness of the beam has non-zero pivots away
//! from the undamped resonances). The full n x n matrices are formed on the
//! backend by [`PsdKernels::rank1_hermitian`] (a memory-bound kernel writing
//! 16 n^2 bytes per frequency on CUDA; Rayon rows on the CPU). The outputs users
//! usually want are cheaper and computed from h directly: the diagonal
//! S_ff |h_i|^2 (O(n)) and C S_xx C^T = S_ff (C h)(C h)^H (O(r n + r^2)).
//!
//! Not done: single precision (`cherk`), and the comparison with cuBLAS `zherk`.

use crate::beam::Band;
use gpuq_core::{Backend, Complex64, Error, Result};
use gpuq_cpu::CpuBackend;
use rayon::prelude::*;
use serde::Serialize;

/// A stationary AR(1) process f_k = phi f_{k-1} + sigma e_k (e_k ~ N(0, 1))
/// sampled every `dt`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ar1 {
    /// Autoregression coefficient, |phi| < 1.
    pub phi: f64,
    /// Standard deviation of the innovations.
    pub sigma: f64,
    /// Sampling interval.
    pub dt: f64,
}

impl Ar1 {
    /// Checks |phi| < 1, sigma >= 0 and dt > 0.
    pub fn validate(&self) -> Result<()> {
        if !(self.phi.abs() < 1.0 && self.sigma >= 0.0 && self.dt > 0.0 && self.dt.is_finite()) {
            return Err(Error::InvalidArgument(
                "AR(1): need |phi| < 1, sigma >= 0, dt > 0".into(),
            ));
        }
        Ok(())
    }

    /// Two-sided PSD at angular frequency w (|w| <= pi / dt):
    /// sigma^2 dt / (2 pi (1 - 2 phi cos(w dt) + phi^2)).
    pub fn psd(&self, w: f64) -> f64 {
        let d = 1.0 - 2.0 * self.phi * (w * self.dt).cos() + self.phi * self.phi;
        self.sigma * self.sigma * self.dt / (2.0 * std::f64::consts::PI * d)
    }

    /// The stationary variance sigma^2 / (1 - phi^2).
    pub fn variance(&self) -> f64 {
        self.sigma * self.sigma / (1.0 - self.phi * self.phi)
    }
}

/// A linear system K, M, C (banded, order n) loaded on one DOF.
#[derive(Clone, Debug)]
pub struct PsdProblem {
    /// Stiffness.
    pub k: Band,
    /// Mass.
    pub m: Band,
    /// Damping.
    pub c: Band,
    /// The loaded DOF.
    pub load_dof: usize,
    /// The load process.
    pub load: Ar1,
    /// Angular frequencies w.
    pub freqs: Vec<f64>,
    /// Output matrix C (r rows of n values) for C S_xx C^T.
    pub output: Vec<Vec<f64>>,
}

/// The cheap outputs of a PSD run.
#[derive(Clone, Debug, Serialize)]
pub struct PsdResult {
    /// Angular frequencies.
    pub freqs: Vec<f64>,
    /// S_ff(w).
    pub sff: Vec<f64>,
    /// Diagonal of S_xx(w): `diag[f][i]`.
    pub diag: Vec<Vec<f64>>,
    /// C S_xx(w) C^T, r x r row-major per frequency.
    pub output: Vec<Vec<Complex64>>,
}

impl PsdProblem {
    /// Checks orders, the loaded DOF, the output rows and the process.
    pub fn validate(&self) -> Result<()> {
        let n = self.k.n;
        if self.m.n != n || self.c.n != n || self.load_dof >= n || n == 0 {
            return Err(Error::InvalidArgument(
                "psd: K, M, C must have one order and the load DOF must be inside".into(),
            ));
        }
        if self.output.iter().any(|r| r.len() != n) {
            return Err(Error::InvalidArgument(
                "psd: every output row needs n values".into(),
            ));
        }
        if self.freqs.iter().any(|w| !w.is_finite()) {
            return Err(Error::InvalidArgument(
                "psd: frequencies must be finite".into(),
            ));
        }
        self.load.validate()
    }

    /// h(w) = (K - w^2 M + i w C)^-1 e_dof by banded complex-symmetric LDL^T.
    /// Cost about 40 n complex flops. Errors on a zero pivot.
    pub fn transfer(&self, w: f64) -> Result<Vec<Complex64>> {
        let n = self.k.n;
        let z = |i: usize, d: usize| {
            Complex64::new(
                self.k.band[4 * i + d] - w * w * self.m.band[4 * i + d],
                w * self.c.band[4 * i + d],
            )
        };
        // L (unit lower, band) and D, complex symmetric: Z = L D L^T.
        let mut l = vec![Complex64::new(0.0, 0.0); 4 * n];
        let mut dg = vec![Complex64::new(0.0, 0.0); n];
        for j in 0..n {
            let mut d = z(j, 0);
            for k in j.saturating_sub(3)..j {
                d -= l[4 * j + j - k] * l[4 * j + j - k] * dg[k];
            }
            if d.norm() == 0.0 || !d.is_finite() {
                return Err(Error::InvalidArgument(format!(
                    "psd: the dynamic stiffness is singular at w = {w}"
                )));
            }
            dg[j] = d;
            for i in j + 1..(j + 4).min(n) {
                let mut v = z(i, i - j);
                for k in i.saturating_sub(3)..j {
                    v -= l[4 * i + i - k] * l[4 * j + j - k] * dg[k];
                }
                l[4 * i + i - j] = v / d;
            }
        }
        let mut x = vec![Complex64::new(0.0, 0.0); n];
        x[self.load_dof] = Complex64::new(1.0, 0.0);
        for i in 0..n {
            for k in i.saturating_sub(3)..i {
                let t = l[4 * i + i - k] * x[k];
                x[i] -= t;
            }
        }
        for (xi, d) in x.iter_mut().zip(&dg) {
            *xi /= d;
        }
        for i in (0..n).rev() {
            for k in i + 1..(i + 4).min(n) {
                let t = l[4 * k + k - i] * x[k];
                x[i] -= t;
            }
        }
        Ok(x)
    }

    /// h(w) for every frequency, frequency-major (nf n values), and S_ff(w).
    pub fn transfers(&self) -> Result<(Vec<Complex64>, Vec<f64>)> {
        self.validate()?;
        let mut h = Vec::with_capacity(self.freqs.len() * self.k.n);
        for &w in &self.freqs {
            h.extend(self.transfer(w)?);
        }
        Ok((h, self.freqs.iter().map(|&w| self.load.psd(w)).collect()))
    }
}

/// The full S_xx(w) matrices on a backend. The default body forms them on the
/// host and uploads them; the CPU backend forms them with Rayon, the CUDA
/// backend with its rank-1 kernel.
pub trait PsdKernels: Backend {
    /// `out[f n^2 + i n + j] = scale[f] h[f n + i] conj(h[f n + j])` for the
    /// nf = scale.len() frequencies. Traffic: 16 n^2 nf bytes written.
    fn rank1_hermitian(
        &self,
        n: usize,
        scale: &[f64],
        h: &[Complex64],
    ) -> Result<Self::Vector<Complex64>> {
        check(n, scale, h)?;
        let mut out = vec![Complex64::new(0.0, 0.0); scale.len() * n * n];
        for (row, o) in out.chunks_mut(n.max(1)).enumerate() {
            fill_row(n, scale, h, row, o);
        }
        self.upload(&out)
    }
}

impl PsdKernels for CpuBackend {
    fn rank1_hermitian(
        &self,
        n: usize,
        scale: &[f64],
        h: &[Complex64],
    ) -> Result<Self::Vector<Complex64>> {
        check(n, scale, h)?;
        // Each entry written once, in parallel, straight into the new vector
        // (no zero-fill pass first): the same products as `fill_row`.
        let n1 = n.max(1);
        let out: Vec<Complex64> = (0..scale.len() * n * n)
            .into_par_iter()
            .map(|k| {
                let (row, j) = (k / n1, k % n1);
                let f = row / n1;
                h[row] * scale[f] * h[f * n + j].conj()
            })
            .collect();
        Ok(out.into())
    }
}

#[cfg(feature = "cuda")]
impl PsdKernels for gpuq_cuda::CudaBackend {
    fn rank1_hermitian(
        &self,
        n: usize,
        scale: &[f64],
        h: &[Complex64],
    ) -> Result<Self::Vector<Complex64>> {
        check(n, scale, h)?;
        let s = self.upload(scale)?;
        let hv = self.upload(h)?;
        let mut out = self.zeros::<Complex64>(scale.len() * n * n)?;
        self.uq_rank1_c64(n, &s, &hv, &mut out)?;
        Ok(out)
    }
}

fn check(n: usize, scale: &[f64], h: &[Complex64]) -> Result<()> {
    gpuq_core::check_same_len("rank1_hermitian", scale.len() * n, h.len())
}

/// Row `row` (= f n + i) of the stacked matrices.
fn fill_row(n: usize, scale: &[f64], h: &[Complex64], row: usize, out: &mut [Complex64]) {
    let (f, i) = (row / n, row % n);
    let hi = h[f * n + i] * scale[f];
    for (o, hj) in out.iter_mut().zip(&h[f * n..(f + 1) * n]) {
        *o = hi * hj.conj();
    }
}

/// The diagonal of S_xx and C S_xx C^T at every frequency (host, O(nf r n)).
pub fn response_psd(problem: &PsdProblem) -> Result<PsdResult> {
    let (h, sff) = problem.transfers()?;
    let n = problem.k.n;
    let mut diag = Vec::with_capacity(sff.len());
    let mut output = Vec::with_capacity(sff.len());
    for (f, &s) in sff.iter().enumerate() {
        let hf = &h[f * n..(f + 1) * n];
        diag.push(hf.iter().map(|x| s * x.norm_sqr()).collect());
        let ch: Vec<Complex64> = problem
            .output
            .iter()
            .map(|row| row.iter().zip(hf).map(|(c, x)| x * c).sum())
            .collect();
        output.push(
            ch.iter()
                .flat_map(|a| ch.iter().map(move |b| a * b.conj() * s))
                .collect(),
        );
    }
    Ok(PsdResult {
        freqs: problem.freqs.clone(),
        sff,
        diag,
        output,
    })
}

/// The full S_xx(w) for every frequency on `backend` (nf n^2 complex values,
/// frequency-major, each matrix row-major), left resident there.
pub fn response_psd_full<B: PsdKernels>(
    backend: &B,
    problem: &PsdProblem,
) -> Result<B::Vector<Complex64>> {
    let (h, sff) = problem.transfers()?;
    backend.rank1_hermitian(problem.k.n, &sff, &h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beam::Beam;

    fn one_dof(k: f64, m: f64, c: f64) -> PsdProblem {
        let band = |v: f64| Band {
            n: 1,
            band: vec![v, 0.0, 0.0, 0.0],
            rhs: vec![0.0],
        };
        PsdProblem {
            k: band(k),
            m: band(m),
            c: band(c),
            load_dof: 0,
            load: Ar1 {
                phi: 0.8,
                sigma: 1.0,
                dt: 0.05,
            },
            freqs: (0..50).map(|i| 0.2 * i as f64).collect(),
            output: vec![vec![2.0]],
        }
    }

    #[test]
    fn one_dof_psd_is_h_squared_times_sff() {
        let p = one_dof(62.84, 2.0, 1.6);
        let r = response_psd(&p).unwrap();
        for (f, &w) in p.freqs.iter().enumerate() {
            let h2 = 1.0 / ((62.84 - 2.0 * w * w).powi(2) + (1.6 * w).powi(2));
            let want = h2 * p.load.psd(w);
            assert!((r.diag[f][0] / want - 1.0).abs() < 1e-13);
            assert!((r.output[f][0].re / (4.0 * want) - 1.0).abs() < 1e-13);
        }
        let full = response_psd_full(&CpuBackend::new(), &p).unwrap();
        for (f, v) in full.as_slice().iter().enumerate() {
            assert!((v.re - r.diag[f][0]).abs() <= 1e-15 * r.diag[f][0]);
        }
    }

    #[test]
    fn beam_psd_is_hermitian_and_consistent() {
        let beam = Beam::unit(12).unwrap();
        let n = beam.dofs();
        let mut c_row = vec![0.0; n];
        c_row[beam.tip()] = 1.0;
        let p = PsdProblem {
            k: beam.stiffness(),
            m: beam.mass(),
            c: beam.damping(),
            load_dof: beam.tip(),
            load: Ar1 {
                phi: 0.5,
                sigma: 1.0,
                dt: 0.01,
            },
            freqs: vec![0.0, 1.0, 3.5, 20.0],
            output: vec![c_row, vec![0.5; n]],
        };
        // h solves the dynamic system.
        let w = 3.5;
        let h = p.transfer(w).unwrap();
        for i in 0..n {
            let mut r = Complex64::new(0.0, 0.0);
            for (j, hj) in h.iter().enumerate() {
                let z = Complex64::new(p.k.get(i, j) - w * w * p.m.get(i, j), w * p.c.get(i, j));
                r += z * hj;
            }
            let e = if i == p.load_dof { 1.0 } else { 0.0 };
            assert!((r - e).norm() < 1e-9, "{i}: {r}");
        }
        let r = response_psd(&p).unwrap();
        let full = response_psd_full(&CpuBackend::new(), &p).unwrap();
        let seq = <Sequential as PsdKernels>::rank1_hermitian(
            &Sequential,
            n,
            &r.sff,
            &p.transfers().unwrap().0,
        )
        .unwrap();
        assert_eq!(full.as_slice(), seq.as_slice());
        let s = full.as_slice();
        for f in 0..p.freqs.len() {
            for i in 0..n {
                let d = s[f * n * n + i * n + i];
                assert!((d.re - r.diag[f][i]).abs() <= 1e-14 * d.re.abs());
                assert!(d.im.abs() <= 1e-15 * d.re.abs());
                for j in 0..n {
                    let a = s[f * n * n + i * n + j];
                    let b = s[f * n * n + j * n + i];
                    assert!((a - b.conj()).norm() <= 1e-15 * a.norm());
                }
            }
            // The tip row of C picks S_xx[tip][tip].
            let t = beam.tip();
            assert!((r.output[f][0].re - r.diag[f][t]).abs() <= 1e-14 * r.diag[f][t]);
        }
        // Static limit: |h_tip(0)|^2 = (L^3 / 3EI)^2.
        let tip0 = r.diag[0][beam.tip()] / r.sff[0];
        assert!((tip0.sqrt() / beam.tip_deflection(1.0) - 1.0).abs() < 1e-10);
    }

    /// The default (host) body.
    #[derive(Clone)]
    struct Sequential;
    crate::test_backend::forward_backend!(Sequential);
    impl PsdKernels for Sequential {}
}
