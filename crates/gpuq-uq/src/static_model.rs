//! (i) The static response of a user's model: K(theta) u = f with
//!
//! * a random load f = mu + D xi + L eta: D = diag(std) (independent Gaussian
//!   loads per DOF), L an n x r factor (a correlated, low-rank load), xi and eta
//!   standard normal;
//! * a stiffness K(theta) = K0 + sum_k theta_k K_k, the affine expansion a
//!   truncated Karhunen-Loeve representation of a random modulus field gives,
//!   theta_k independent uniform, normal or lognormal ([`Theta`]), or K0 alone.
//!
//! On the host:
//!
//! * K deterministic: the outputs are linear in the load, u_o = g_o^T f with
//!   g_o = K^-1 e_o (K symmetric): one sparse Cholesky factorisation of K
//!   (`faer`) and one block solve of the outputs' unit vectors give the g_o,
//!   and a sample is then its draws dotted with them (no solve per sample:
//!   the same values as solving it, to rounding); the outputs' exact mean
//!   g_o^T mu and variance |D g_o|^2 + |L^T g_o|^2 come with the sample
//!   statistics as their check;
//! * K random: the samples of a block of [`BLOCK`] advance together through preconditioned
//!   conjugate gradients, each with its own K(theta_s) (applied term by term:
//!   K0 p + sum_k theta_sk K_k p, no per-sample assembly), all preconditioned
//!   by the Cholesky factor of the mean stiffness K0 + sum_k E\[theta_k\] K_k
//!   applied to the block at once; each sample stops at its own relative
//!   residual `tol`, and its true residual is checked at the end.
//!
//! Draws: sample s takes, from its normal source (the [`Design`]: Monte Carlo
//! ChaCha8 streams, Latin hypercube, or the first dimension from Sobol), first
//! the m theta normals, then the r factor normals, then the n independent load
//! normals, so the same seed gives the same samples whatever the thread count.
//! Statistics per output DOF: mean, unbiased standard deviation, 5%, 50% and
//! 95% quantiles.
//!
//! Cost: deterministic K, one factorisation and one solve with one column per
//! output, then per sample its draws and O(n) per output; random K, per
//! sample and iteration (m + 1) SpMVs and a share of one block triangular
//! solve.
//!
//! Not done: the device path (AMG-preconditioned block solves on the GPU); a
//! run on `--backend cuda` is refused by the CLI.

use crate::cholesky::SparseCholesky;
use crate::design::Design;
use crate::model::Model;
use crate::stats::describe;
use gpuq_core::{Error, Result};
use gpuq_kernels::chacha::key_from_seed;
use gpuq_kernels::cubature::functions::erf;
use gpuq_kernels::uq::gauss::NormalStream;
use gpuq_kernels::uq::sampling::{LhsNormals, Normals, SobolFirst};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// Right-hand sides solved together.
pub const BLOCK: usize = 32;

/// Most conjugate-gradient iterations of one sample.
const MAX_ITERATIONS: usize = 1000;

/// The distribution of one stiffness coefficient theta_k.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Theta {
    /// Uniform on [lo, hi].
    Uniform {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
    /// Normal.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// exp of a normal of mean mu and standard deviation sigma.
    Lognormal {
        /// Mean of the logarithm.
        mu: f64,
        /// Standard deviation of the logarithm.
        sigma: f64,
    },
}

impl Theta {
    /// Parses `uniform:LO:HI`, `normal:MEAN:STD` or `lognormal:MU:SIGMA`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::InvalidArgument(format!(
                "bad theta {s:?}: expected uniform:LO:HI, normal:MEAN:STD or lognormal:MU:SIGMA"
            ))
        };
        let parts: Vec<&str> = s.split(':').collect();
        let [kind, a, b] = parts[..] else {
            return Err(bad());
        };
        let (a, b): (f64, f64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        let t = match kind {
            "uniform" => Theta::Uniform { lo: a, hi: b },
            "normal" => Theta::Normal { mean: a, std: b },
            "lognormal" => Theta::Lognormal { mu: a, sigma: b },
            _ => return Err(bad()),
        };
        t.check()?;
        Ok(t)
    }

    /// Errors on non-finite parameters, lo > hi or a negative deviation.
    pub fn check(&self) -> Result<()> {
        let (ok, what) = match *self {
            Theta::Uniform { lo, hi } => (
                lo.is_finite() && hi.is_finite() && lo <= hi,
                format!("uniform:{lo}:{hi} (bounds finite, lo <= hi)"),
            ),
            Theta::Normal { mean, std } => (
                mean.is_finite() && std.is_finite() && std >= 0.0,
                format!("normal:{mean}:{std} (finite, std >= 0)"),
            ),
            Theta::Lognormal { mu, sigma } => (
                mu.is_finite() && sigma.is_finite() && sigma >= 0.0,
                format!("lognormal:{mu}:{sigma} (finite, sigma >= 0)"),
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "bad theta distribution {what}"
            )))
        }
    }

    /// The value for the standard normal draw z (uniform through Phi(z)).
    pub fn value(&self, z: f64) -> f64 {
        match *self {
            Theta::Uniform { lo, hi } => {
                lo + (hi - lo) * 0.5 * (1.0 + erf(z / std::f64::consts::SQRT_2))
            }
            Theta::Normal { mean, std } => mean + std * z,
            Theta::Lognormal { mu, sigma } => (mu + sigma * z).exp(),
        }
    }

    /// The mean.
    pub fn mean(&self) -> f64 {
        match *self {
            Theta::Uniform { lo, hi } => 0.5 * (lo + hi),
            Theta::Normal { mean, .. } => mean,
            Theta::Lognormal { mu, sigma } => (mu + 0.5 * sigma * sigma).exp(),
        }
    }
}

/// The static problem on a model (vectors and matrices on its free DOFs; see
/// [`Model::reduce_vector`] and [`Model::reduce_matrix`]).
#[derive(Clone, Debug)]
pub struct ModelStatic<'a> {
    /// The model (K0 is its stiffness).
    pub model: &'a Model,
    /// Mean load mu.
    pub load_mean: Vec<f64>,
    /// Standard deviations of independent Gaussian loads per DOF.
    pub load_std: Option<Vec<f64>>,
    /// An n x r factor L of a correlated load L eta.
    pub load_factor: Option<Csr<f64>>,
    /// Stiffness terms K_k with their coefficients' distributions.
    pub terms: Vec<(Csr<f64>, Theta)>,
    /// Output DOFs (full numbering).
    pub outputs: Vec<usize>,
    /// Sampling design.
    pub design: Design,
    /// Relative residual at which a random-K sample's solve stops.
    pub tol: f64,
}

/// Statistics of one output DOF.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutputStats {
    /// The DOF (full numbering).
    pub dof: usize,
    /// Sample mean.
    pub mean: f64,
    /// Sample standard deviation (unbiased).
    pub std: f64,
    /// 5% quantile.
    pub q05: f64,
    /// Median.
    pub q50: f64,
    /// 95% quantile.
    pub q95: f64,
    /// The exact mean (deterministic K only).
    pub exact_mean: Option<f64>,
    /// The exact standard deviation (deterministic K only).
    pub exact_std: Option<f64>,
}

/// What [`model_static_response`] returns.
#[derive(Clone, Debug, Serialize)]
pub struct ModelStaticResult {
    /// Number of samples.
    pub samples: u64,
    /// One entry per output DOF.
    pub outputs: Vec<OutputStats>,
    /// Seconds of the factorisation.
    pub factor_s: f64,
    /// Seconds of the sampling and solves.
    pub solve_s: f64,
    /// Conjugate-gradient iterations per sample: (fewest, mean, most); `None`
    /// for deterministic K.
    pub iterations: Option<(usize, f64, usize)>,
    /// Largest true relative residual |f - K u| / |f| over the samples
    /// (random K; `None` for deterministic K, solved directly).
    pub max_residual: Option<f64>,
    /// Whether every sample's true residual met [`ModelStatic::tol`] (always
    /// for deterministic K, solved directly), and no stop cut the run short.
    pub converged: bool,
    /// A stop was requested ([`gpuq_core::interrupt`], Ctrl-C in the CLI) between two blocks
    /// of [`BLOCK`] samples of a random stiffness: the statistics are those of the `samples`
    /// done.
    pub interrupted: bool,
}

/// A sample's normals source under `design`.
enum Source {
    Mc(NormalStream<f64>),
    Lhs(LhsNormals),
    Sobol(SobolFirst<f64>),
}

impl Source {
    fn new(design: Design, seed: u64, s: u64, samples: u64) -> Self {
        let key = key_from_seed(seed);
        match design {
            Design::MonteCarlo => Source::Mc(NormalStream::new(key, s)),
            Design::LatinHypercube => Source::Lhs(LhsNormals::new(key, s, samples)),
            Design::Sobol => Source::Sobol(SobolFirst::new(seed, s)),
        }
    }

    fn next(&mut self) -> f64 {
        match self {
            Source::Mc(z) => z.next_normal(),
            Source::Lhs(z) => Normals::<f64>::next_normal(z),
            Source::Sobol(z) => z.next_normal(),
        }
    }
}

/// a + alpha b over the union of their patterns. O(nnz log).
fn add_scaled(a: &Csr<f64>, alpha: f64, b: &Csr<f64>) -> Result<Csr<f64>> {
    if alpha == 0.0 {
        return Ok(a.clone());
    }
    let mut c = a.to_coo();
    for i in 0..b.nrows() {
        let (cols, vals) = b.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            c.push(i, j as usize, alpha * v)?;
        }
    }
    Csr::from_coo(&c)
}

/// y = A x (sequential: the callers run one per sample in parallel).
fn spmv(a: &Csr<f64>, x: &[f64], y: &mut [f64]) {
    for (i, yi) in y.iter_mut().enumerate() {
        let (cols, vals) = a.row(i);
        let mut s = 0.0;
        for (&j, &v) in cols.iter().zip(vals) {
            s += v * x[j as usize];
        }
        *yi = s;
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl ModelStatic<'_> {
    /// Checks sizes, finiteness and the outputs against the model.
    pub fn validate(&self) -> Result<()> {
        let n = self.model.dofs();
        if self.load_mean.len() != n {
            return Err(Error::shape("static load mean", n, self.load_mean.len()));
        }
        if let Some(s) = &self.load_std {
            if s.len() != n {
                return Err(Error::shape("static load std", n, s.len()));
            }
            if let Some(i) = s.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(Error::InvalidArgument(format!(
                    "load standard deviation {} at free DOF {i} is not a finite value >= 0",
                    s[i]
                )));
            }
        }
        if let Some(l) = &self.load_factor {
            if l.nrows() != n {
                return Err(Error::shape("static load factor rows", n, l.nrows()));
            }
        }
        for (k, (t, th)) in self.terms.iter().enumerate() {
            if t.nrows() != n || t.ncols() != n {
                return Err(Error::InvalidArgument(format!(
                    "stiffness term {} is {} x {}; the model has {n} free DOFs",
                    k + 1,
                    t.nrows(),
                    t.ncols()
                )));
            }
            th.check()?;
        }
        if self.outputs.is_empty() {
            return Err(Error::InvalidArgument("no output DOFs".into()));
        }
        for &d in &self.outputs {
            self.model.reduced_dof(d)?;
        }
        if !(self.tol > 0.0 && self.tol < 1.0) {
            return Err(Error::InvalidArgument(format!(
                "the solve tolerance must be in (0, 1), not {}",
                self.tol
            )));
        }
        Ok(())
    }

    /// Sample s's thetas and its load, written into `f`.
    fn sample(&self, source: &mut Source, theta: &mut [f64], f: &mut [f64]) {
        for (t, (_, th)) in theta.iter_mut().zip(&self.terms) {
            *t = th.value(source.next());
        }
        f.copy_from_slice(&self.load_mean);
        if let Some(l) = &self.load_factor {
            let eta: Vec<f64> = (0..l.ncols()).map(|_| source.next()).collect();
            for (i, fi) in f.iter_mut().enumerate() {
                let (cols, vals) = l.row(i);
                for (&c, &v) in cols.iter().zip(vals) {
                    *fi += v * eta[c as usize];
                }
            }
        }
        if let Some(s) = &self.load_std {
            for (fi, si) in f.iter_mut().zip(s) {
                *fi += si * source.next();
            }
        }
    }

    /// The adjoint solutions g_o = K^-1 e_o of the outputs (deterministic K):
    /// one block solve.
    fn adjoints(&self, chol: &SparseCholesky, out: &[usize]) -> Vec<Vec<f64>> {
        let n = self.model.dofs();
        let mut g = vec![0.0; n * out.len()];
        for (j, &o) in out.iter().enumerate() {
            g[j * n + o] = 1.0;
        }
        chol.solve_block(faer::MatMut::from_column_major_slice_mut(
            &mut g,
            n,
            out.len(),
        ));
        g.chunks(n).map(<[f64]>::to_vec).collect()
    }
}

/// An output of a deterministic K as a function of the draws: u_o = a + b^T
/// eta + d^T xi (a = g^T mu, b = L^T g, d = diag(std) g), and its exact moments.
struct LinearOutput {
    a: f64,
    b: Vec<f64>,
    d: Vec<f64>,
}

impl LinearOutput {
    fn new(problem: &ModelStatic<'_>, g: &[f64]) -> Self {
        let b = problem.load_factor.as_ref().map_or_else(Vec::new, |l| {
            let mut lt = vec![0.0; l.ncols()];
            for (i, gi) in g.iter().enumerate() {
                let (cols, vals) = l.row(i);
                for (&c, &v) in cols.iter().zip(vals) {
                    lt[c as usize] += v * gi;
                }
            }
            lt
        });
        let d = problem
            .load_std
            .as_ref()
            .map_or_else(Vec::new, |s| g.iter().zip(s).map(|(g, s)| g * s).collect());
        LinearOutput {
            a: dot(g, &problem.load_mean),
            b,
            d,
        }
    }

    /// (mean, standard deviation).
    fn moments(&self) -> (f64, f64) {
        (
            self.a,
            (dot(&self.b, &self.b) + dot(&self.d, &self.d)).sqrt(),
        )
    }
}

/// Runs `samples` samples of `problem` under `seed` (see the module docs).
/// Errors on an invalid problem, a stiffness that is not positive definite
/// (naming the pivot), zero samples, or a sample whose solve does not converge.
pub fn model_static_response(
    problem: &ModelStatic<'_>,
    samples: u64,
    seed: u64,
) -> Result<ModelStaticResult> {
    problem.validate()?;
    if samples == 0 {
        return Err(Error::InvalidArgument(
            "--samples must be at least 1".into(),
        ));
    }
    let n = problem.model.dofs();
    let out: Vec<usize> = problem
        .outputs
        .iter()
        .map(|&d| problem.model.reduced_dof(d))
        .collect::<Result<_>>()?;
    let start = Instant::now();
    let mean_k = problem
        .terms
        .iter()
        .try_fold(problem.model.k.clone(), |acc, (k, th)| {
            add_scaled(&acc, th.mean(), k)
        })?;
    let what = if problem.terms.is_empty() {
        "the stiffness matrix K"
    } else {
        "the mean stiffness K0 + sum E[theta_k] K_k"
    };
    let chol = SparseCholesky::new(&mean_k, what)?;
    let factor_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let m = problem.terms.len();
    let mut values = vec![Vec::with_capacity(samples as usize); out.len()];
    let mut iterations = Vec::new();
    let mut max_residual = 0.0f64;
    let mut exact = None;
    let mut interrupted = false;
    if m == 0 {
        // Linear outputs: each sample is its draws dotted with the adjoints.
        let lin: Vec<LinearOutput> = problem
            .adjoints(&chol, &out)
            .iter()
            .map(|g| LinearOutput::new(problem, g))
            .collect();
        let r = problem.load_factor.as_ref().map_or(0, |l| l.ncols());
        let per_sample: Vec<Vec<f64>> = (0..samples)
            .into_par_iter()
            .map(|s| {
                let mut src = Source::new(problem.design, seed, s, samples);
                let eta: Vec<f64> = (0..r).map(|_| src.next()).collect();
                let mut u: Vec<f64> = lin.iter().map(|o| o.a + dot(&o.b, &eta)).collect();
                if problem.load_std.is_some() {
                    for i in 0..n {
                        let xi = src.next();
                        for (ui, o) in u.iter_mut().zip(&lin) {
                            *ui += o.d[i] * xi;
                        }
                    }
                }
                u
            })
            .collect();
        for u in per_sample {
            for (vals, v) in values.iter_mut().zip(u) {
                vals.push(v);
            }
        }
        exact = Some(lin.iter().map(LinearOutput::moments).collect::<Vec<_>>());
    } else {
        let mut first = 0u64;
        while first < samples {
            if first > 0 && gpuq_core::interrupt::requested() {
                interrupted = true;
                break;
            }
            let count = (samples - first).min(BLOCK as u64) as usize;
            let mut f = vec![0.0; n * count];
            let mut theta = vec![0.0; m * count];
            f.par_chunks_mut(n)
                .zip(theta.par_chunks_mut(m))
                .enumerate()
                .for_each(|(j, (fj, tj))| {
                    let s = first + j as u64;
                    let mut src = Source::new(problem.design, seed, s, samples);
                    problem.sample(&mut src, tj, fj);
                });
            let (u, its, res) = block_pcg(problem, &chol, &f, &theta, count, first)?;
            iterations.extend(its);
            max_residual = max_residual.max(res);
            for (o, vals) in out.iter().zip(values.iter_mut()) {
                vals.extend((0..count).map(|j| u[j * n + o]));
            }
            first += count as u64;
        }
    }
    let solve_s = start.elapsed().as_secs_f64();
    // The samples done: all of them unless a stop cut the run short.
    let done = values.first().map_or(samples, |v| v.len() as u64);
    let outputs = values
        .into_iter()
        .enumerate()
        .map(|(k, mut v)| {
            let d = describe(&mut v, &[0.05, 0.5, 0.95]);
            OutputStats {
                dof: problem.outputs[k],
                mean: d.mean,
                std: d.std,
                q05: d.quantiles[0],
                q50: d.quantiles[1],
                q95: d.quantiles[2],
                exact_mean: exact.as_ref().map(|e| e[k].0),
                exact_std: exact.as_ref().map(|e| e[k].1),
            }
        })
        .collect();
    let iterations = (!iterations.is_empty()).then(|| {
        let lo = *iterations.iter().min().unwrap_or(&0);
        let hi = *iterations.iter().max().unwrap_or(&0);
        let mean = iterations.iter().sum::<usize>() as f64 / iterations.len() as f64;
        (lo, mean, hi)
    });
    Ok(ModelStaticResult {
        samples: done,
        outputs,
        factor_s,
        solve_s,
        iterations,
        max_residual: (m > 0).then_some(max_residual),
        converged: !interrupted && (m == 0 || max_residual <= problem.tol),
        interrupted,
    })
}

/// y = K(theta) x = K0 x + sum_k theta_k K_k x.
fn apply_k(problem: &ModelStatic<'_>, theta: &[f64], x: &[f64], y: &mut [f64], tmp: &mut [f64]) {
    spmv(&problem.model.k, x, y);
    for ((k, _), &t) in problem.terms.iter().zip(theta) {
        spmv(k, x, tmp);
        for (yi, ti) in y.iter_mut().zip(tmp.iter()) {
            *yi += t * ti;
        }
    }
}

/// The block's samples through conjugate gradients together (see the module
/// docs); returns the solutions (column-major), each sample's iterations and
/// the largest true relative residual. Errors when a sample does not
/// converge in [`MAX_ITERATIONS`] (naming it) or meets a non-positive p^T K p.
fn block_pcg(
    problem: &ModelStatic<'_>,
    chol: &SparseCholesky,
    f: &[f64],
    theta: &[f64],
    count: usize,
    first: u64,
) -> Result<(Vec<f64>, Vec<usize>, f64)> {
    let n = problem.model.dofs();
    let m = problem.terms.len();
    let th = |j: usize| &theta[j * m..(j + 1) * m];
    let fnorm: Vec<f64> = f.chunks(n).map(|c| dot(c, c).sqrt()).collect();
    let mut x = vec![0.0; n * count];
    let mut r = f.to_vec();
    let mut z = r.clone();
    chol.solve_block(faer::MatMut::from_column_major_slice_mut(&mut z, n, count));
    let mut p = z.clone();
    let mut rz: Vec<f64> = r
        .chunks(n)
        .zip(z.chunks(n))
        .map(|(a, b)| dot(a, b))
        .collect();
    let mut q = vec![0.0; n * count];
    let mut active: Vec<bool> = fnorm.iter().map(|&v| v > 0.0).collect();
    let mut its = vec![0usize; count];
    for it in 1..=MAX_ITERATIONS {
        if !active.iter().any(|&a| a) {
            break;
        }
        let steps: Vec<Result<bool>> = x
            .par_chunks_mut(n)
            .zip(r.par_chunks_mut(n))
            .zip(p.par_chunks(n).zip(q.par_chunks_mut(n)))
            .enumerate()
            .map(|(j, ((xj, rj), (pj, qj)))| {
                if !active[j] {
                    return Ok(false);
                }
                let mut tmp = vec![0.0; n];
                apply_k(problem, th(j), pj, qj, &mut tmp);
                let pq = dot(pj, qj);
                if pq.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                    return Err(Error::Precondition {
                        method: "static response",
                        reason: format!(
                            "K(theta) of sample {} is not positive definite (p^T K p = {pq:e} at iteration {it})",
                            first + j as u64
                        ),
                    });
                }
                let alpha = rz[j] / pq;
                for i in 0..n {
                    xj[i] += alpha * pj[i];
                    rj[i] -= alpha * qj[i];
                }
                Ok(dot(rj, rj).sqrt() <= problem.tol * fnorm[j])
            })
            .collect();
        for (j, s) in steps.into_iter().enumerate() {
            if s? {
                active[j] = false;
                its[j] = it;
            }
        }
        if !active.iter().any(|&a| a) {
            break;
        }
        z.copy_from_slice(&r);
        chol.solve_block(faer::MatMut::from_column_major_slice_mut(&mut z, n, count));
        p.par_chunks_mut(n)
            .zip(z.par_chunks(n).zip(r.par_chunks(n)))
            .zip(rz.par_iter_mut())
            .enumerate()
            .for_each(|(j, ((pj, (zj, rj)), rzj))| {
                if active[j] {
                    let new = dot(rj, zj);
                    let beta = new / *rzj;
                    *rzj = new;
                    for i in 0..n {
                        pj[i] = zj[i] + beta * pj[i];
                    }
                }
            });
    }
    if let Some(j) = active.iter().position(|&a| a) {
        return Err(Error::Precondition {
            method: "static response",
            reason: format!(
                "the solve of sample {} did not converge in {MAX_ITERATIONS} iterations",
                first + j as u64
            ),
        });
    }
    // The true residual of every sample.
    let worst = x
        .par_chunks(n)
        .zip(f.par_chunks(n))
        .enumerate()
        .map(|(j, (xj, fj))| {
            let (mut y, mut tmp) = (vec![0.0; n], vec![0.0; n]);
            apply_k(problem, th(j), xj, &mut y, &mut tmp);
            let r: f64 = y
                .iter()
                .zip(fj)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
                .sqrt();
            if fnorm[j] > 0.0 {
                r / fnorm[j]
            } else {
                0.0
            }
        })
        .reduce(|| 0.0, f64::max);
    Ok((x, its, worst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Damping;
    use gpuq_sparse::generators::laplace2d;

    /// x = A^-1 b for a dense row-major A (Gaussian elimination, partial
    /// pivoting): the tests' independent solver.
    fn dense_solve(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut a = a.to_vec();
        let mut x = b.to_vec();
        for c in 0..n {
            let p = (c..n)
                .max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs()))
                .unwrap();
            for k in 0..n {
                a.swap(c * n + k, p * n + k);
            }
            x.swap(c, p);
            for i in c + 1..n {
                let f = a[i * n + c] / a[c * n + c];
                for k in c..n {
                    a[i * n + k] -= f * a[c * n + k];
                }
                x[i] -= f * x[c];
            }
        }
        for c in (0..n).rev() {
            let s: f64 = (c + 1..n).map(|k| a[c * n + k] * x[k]).sum();
            x[c] = (x[c] - s) / a[c * n + c];
        }
        x
    }

    fn model(m: usize, fixed: &[usize]) -> Model {
        Model::new(laplace2d::<f64>(m), None, Damping::None, fixed).unwrap()
    }

    fn problem(model: &Model) -> ModelStatic<'_> {
        let n = model.dofs();
        ModelStatic {
            model,
            load_mean: (0..n).map(|i| 1.0 + 0.01 * i as f64).collect(),
            load_std: Some(vec![0.3; n]),
            load_factor: None,
            terms: Vec::new(),
            outputs: vec![model.full_dof(n / 2), model.full_dof(n - 1)],
            design: Design::MonteCarlo,
            tol: 1e-12,
        }
    }

    #[test]
    fn deterministic_k_matches_the_exact_moments() {
        let md = model(12, &[0, 5, 143]);
        let mut p = problem(&md);
        // A rank-2 correlated load as well.
        let n = md.dofs();
        let mut c = gpuq_sparse::Coo::new(n, 2);
        for i in 0..n {
            c.push(i, 0, 0.2).unwrap();
            if i % 3 == 0 {
                c.push(i, 1, -0.5).unwrap();
            }
        }
        p.load_factor = Some(Csr::from_coo(&c).unwrap());
        let samples = 20_000;
        let r = model_static_response(&p, samples, 3).unwrap();
        // The exact mean against a dense solve.
        let dense = md.k.to_dense();
        let u = dense_solve(&dense, &p.load_mean, n);
        for o in &r.outputs {
            let em = o.exact_mean.unwrap();
            let es = o.exact_std.unwrap();
            let want = u[md.reduced_dof(o.dof).unwrap()];
            assert!((em - want).abs() < 1e-10 * want.abs(), "{em} vs {want}");
            let se = es / (samples as f64).sqrt();
            assert!((o.mean - em).abs() < 4.0 * se, "{} vs {em}", o.mean);
            assert!(
                (o.std / es - 1.0).abs() < 4.0 * (0.5 / samples as f64).sqrt(),
                "{} vs {es}",
                o.std
            );
            // Gaussian outputs: the quantiles are mean +- 1.645 std.
            assert!((o.q95 - (em + 1.6449 * es)).abs() < 0.05 * es);
            assert!(o.q05 < o.q50 && o.q50 < o.q95);
        }
        assert!(r.iterations.is_none() && r.max_residual.is_none());
        assert!(r.converged);
        // Latin hypercube and Sobol designs give the same moments.
        for design in [Design::LatinHypercube, Design::Sobol] {
            let q = ModelStatic {
                design,
                ..p.clone()
            };
            let r2 = model_static_response(&q, 5000, 3).unwrap();
            for (a, b) in r.outputs.iter().zip(&r2.outputs) {
                let es = a.exact_std.unwrap();
                assert!((b.mean - a.exact_mean.unwrap()).abs() < 5.0 * es / (5000f64).sqrt());
            }
        }
    }

    #[test]
    fn the_adjoint_path_equals_solving_every_sample() {
        let md = model(7, &[3, 20]);
        let n = md.dofs();
        let mut p = problem(&md);
        let mut c = gpuq_sparse::Coo::new(n, 3);
        for i in 0..n {
            c.push(i, i % 3, 0.1 + 0.01 * i as f64).unwrap();
        }
        p.load_factor = Some(Csr::from_coo(&c).unwrap());
        p.outputs = (0..md.full_dofs())
            .filter(|d| ![3, 20].contains(d))
            .collect();
        let samples = 40;
        for design in [Design::MonteCarlo, Design::LatinHypercube, Design::Sobol] {
            let q = ModelStatic {
                design,
                ..p.clone()
            };
            let r = model_static_response(&q, samples, 9).unwrap();
            let dense = md.k.to_dense();
            let mut per_output = vec![Vec::new(); q.outputs.len()];
            for s in 0..samples {
                let mut src = Source::new(design, 9, s, samples);
                let mut f = vec![0.0; n];
                q.sample(&mut src, &mut [], &mut f);
                let u = dense_solve(&dense, &f, n);
                for (k, &d) in q.outputs.iter().enumerate() {
                    per_output[k].push(u[md.reduced_dof(d).unwrap()]);
                }
            }
            for (o, mut vals) in r.outputs.iter().zip(per_output) {
                let d = describe(&mut vals, &[0.05, 0.5, 0.95]);
                let tol = 1e-10 * d.mean.abs().max(1.0);
                assert!(
                    (o.mean - d.mean).abs() < tol,
                    "{design:?}: {} vs {}",
                    o.mean,
                    d.mean
                );
                assert!((o.std - d.std).abs() < tol);
                assert!((o.q05 - d.quantiles[0]).abs() < tol);
                assert!((o.q95 - d.quantiles[2]).abs() < tol);
            }
        }
    }

    #[test]
    fn a_scaled_modulus_has_its_closed_form() {
        // K(theta) = (1 + 0.3 theta) K0, theta uniform on [-1, 1], load
        // deterministic: u = K0^-1 mu / (1 + 0.3 theta), so
        // E[u] = K0^-1 mu ln(1.3 / 0.7) / 0.6.
        let md = model(10, &[]);
        let mut p = problem(&md);
        p.load_std = None;
        let scaled = add_scaled(&md.k, 0.3 - 1.0, &md.k).unwrap();
        p.terms = vec![(scaled, Theta::Uniform { lo: -1.0, hi: 1.0 })];
        let samples = 40_000;
        let r = model_static_response(&p, samples, 7).unwrap();
        let u0 = SparseCholesky::new(&md.k, "K").unwrap().solve(&p.load_mean);
        let factor = (1.3f64 / 0.7).ln() / 0.6;
        let second = (1.0 / 0.7 - 1.0 / 1.3) / 0.6; // E[1 / (1 + 0.3 theta)^2]
        for o in &r.outputs {
            let base = u0[md.reduced_dof(o.dof).unwrap()];
            let mean = base * factor;
            let std = base.abs() * (second - factor * factor).sqrt();
            assert!(
                (o.mean - mean).abs() < 4.0 * std / (samples as f64).sqrt(),
                "{} vs {mean}",
                o.mean
            );
            assert!((o.std / std - 1.0).abs() < 0.03, "{} vs {std}", o.std);
            assert!(o.exact_mean.is_none());
        }
        let (lo, _, hi) = r.iterations.unwrap();
        assert!(lo >= 1 && hi <= 30, "{lo} {hi}");
        assert!(r.max_residual.unwrap() < 1e-10);
        assert!(r.converged);
    }

    #[test]
    fn the_affine_expansion_matches_per_sample_assembly() {
        let md = model(6, &[7]);
        let n = md.dofs();
        let mut p = problem(&md);
        let diag = Csr::from_coo(&{
            let mut c = gpuq_sparse::Coo::new(n, n);
            for i in 0..n {
                c.push(i, i, 0.5 + 0.01 * i as f64).unwrap();
            }
            c
        })
        .unwrap();
        let half = {
            let mut c = gpuq_sparse::Coo::new(n, n);
            for i in 0..n / 2 {
                let (cols, vals) = md.k.row(i);
                for (&j, &v) in cols.iter().zip(vals) {
                    if (j as usize) < n / 2 {
                        c.push(i, j as usize, 0.2 * v).unwrap();
                    }
                }
            }
            Csr::from_coo(&c).unwrap()
        };
        p.terms = vec![
            (
                diag.clone(),
                Theta::Lognormal {
                    mu: 0.0,
                    sigma: 0.3,
                },
            ),
            (
                half.clone(),
                Theta::Normal {
                    mean: 0.0,
                    std: 0.5,
                },
            ),
        ];
        p.outputs = (0..md.full_dofs()).filter(|&d| d != 7).collect();
        let samples = 70;
        let r = model_static_response(&p, samples, 11).unwrap();
        // The same draws, each system assembled densely and solved directly.
        let mut per_output = vec![Vec::new(); p.outputs.len()];
        for s in 0..samples {
            let mut src = Source::new(p.design, 11, s, samples);
            let (mut theta, mut f) = (vec![0.0; 2], vec![0.0; n]);
            p.sample(&mut src, &mut theta, &mut f);
            let mut a = md.k.to_dense();
            for ((t, _), th) in p.terms.iter().zip(&theta) {
                for (x, y) in a.iter_mut().zip(t.to_dense()) {
                    *x += th * y;
                }
            }
            let u = dense_solve(&a, &f, n);
            for (k, &d) in p.outputs.iter().enumerate() {
                per_output[k].push(u[md.reduced_dof(d).unwrap()]);
            }
        }
        for (o, mut vals) in r.outputs.iter().zip(per_output) {
            let d = describe(&mut vals, &[0.05, 0.5, 0.95]);
            assert!(
                (o.mean - d.mean).abs() < 1e-9 * d.mean.abs().max(1.0),
                "{} vs {}",
                o.mean,
                d.mean
            );
            assert!((o.std - d.std).abs() < 1e-8 * d.std.max(1e-3));
            assert!((o.q50 - d.quantiles[1]).abs() < 1e-9 * d.mean.abs().max(1.0));
        }
    }

    #[test]
    fn bad_problems_are_refused() {
        let md = model(5, &[3]);
        let ok = problem(&md);
        assert!(model_static_response(&ok, 0, 1).is_err());
        for bad in [
            ModelStatic {
                outputs: vec![3],
                ..ok.clone()
            },
            ModelStatic {
                outputs: vec![99],
                ..ok.clone()
            },
            ModelStatic {
                outputs: vec![],
                ..ok.clone()
            },
            ModelStatic {
                load_mean: vec![1.0; 3],
                ..ok.clone()
            },
            ModelStatic {
                load_std: Some(vec![-1.0; md.dofs()]),
                ..ok.clone()
            },
            ModelStatic {
                tol: 0.0,
                ..ok.clone()
            },
        ] {
            assert!(model_static_response(&bad, 10, 1).is_err());
        }
        // K symmetric with a positive diagonal but indefinite: the pivot is named.
        let mut c = laplace2d::<f64>(5).to_coo();
        c.push(0, 1, 10.0).unwrap();
        c.push(1, 0, 10.0).unwrap();
        let bad_model = Model::new(Csr::from_coo(&c).unwrap(), None, Damping::None, &[]).unwrap();
        let e = model_static_response(&problem(&bad_model), 10, 1).unwrap_err();
        assert!(e.to_string().contains("pivot"), "{e}");
        assert!(Theta::parse("uniform:1:0").is_err());
        assert!(Theta::parse("beta:1:2").is_err());
        assert!(Theta::parse("normal:0").is_err());
        let t = Theta::parse("lognormal:0:0.5").unwrap();
        assert!((t.mean() - 0.125f64.exp()).abs() < 1e-15);
        assert_eq!(Theta::parse("uniform:2:4").unwrap().value(0.0), 3.0);
    }
}
