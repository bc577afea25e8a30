//! Symmetric banded systems, one sample at a time: the banded Cholesky of any
//! semi-bandwidth w, and one static sample of a random stiffness
//! K(theta) = K0 + sum_k theta_k K_k (crate `gpuq-uq`'s band strategy, on the
//! host's threads and in the device kernel `uq_band_static_f64`: the same
//! function, so both backends give the same bits).
//!
//! A band is the lower triangle, entry (i, d) = A[i][i - d] for d = 0..=w.
//! [`cholesky`] factors it in place (A = L L^T, L in the band) and [`solve`]
//! solves with the factor; the storage is a trait ([`BandStore`]) so that the
//! device keeps each sample's band strided across the samples (consecutive
//! threads, consecutive addresses).
//!
//! A sample ([`band_sample`]) draws ([`draw_sample`]) its normals in the order of `gpuq-uq`'s
//! static procedure (the r load-factor normals eta, then the m theta normals,
//! then the n independent load normals xi), forms its load
//! f = mu + L eta + diag(std) xi and its K(theta) (K0's band plus theta_k
//! times the lower in-band triplets of K_k), factors and solves, writes the
//! requested entries of u and returns the true relative residual
//! |f - K(theta) u| / |f| (|f - K u| when f = 0).
//!
//! Cost per sample: assembly O(n w + nnz of the K_k), factorisation n w^2
//! flops and n square roots, a solve 4 n w flops, the residual O(n w + nnz).

use super::gauss::NormalStream;
use super::real::UqReal;
use super::sampling::{LhsNormals, Normals, SobolFirst, LATIN_HYPERCUBE, SOBOL_FIRST};
use crate::chacha::key_from_seed;

/// The widest semi-bandwidth the band kernels take (the device's
/// per-thread loops are short; wider bands belong to a sparse factorisation
/// or an iterative solve).
pub const MAX_SEMI_BAND: usize = 16;

/// A band (entry (i, d) = A[i][i - d], d = 0..=w) and a right-hand side (n).
pub trait BandStore<T> {
    /// Band entry (i, d).
    fn band(&self, i: usize, d: usize) -> T;
    /// Sets band entry (i, d).
    fn set_band(&mut self, i: usize, d: usize, v: T);
    /// Right-hand side / solution entry i.
    fn rhs(&self, i: usize) -> T;
    /// Sets right-hand side / solution entry i.
    fn set_rhs(&mut self, i: usize, v: T);
}

/// Factors the band (semi-bandwidth `w`) of an n x n symmetric positive
/// definite matrix in place (Cholesky, L in the band). Returns the first
/// pivot that is not positive, leaving a partial factor, or `None`.
/// n w^2 flops and n square roots.
#[inline(always)]
pub fn cholesky<T: UqReal, S: BandStore<T>>(s: &mut S, n: usize, w: usize) -> Option<usize> {
    let mut j = 0;
    while j < n {
        let mut dj = s.band(j, 0);
        let mut k = j.saturating_sub(w);
        while k < j {
            let l = s.band(j, j - k);
            dj = dj - l * l;
            k += 1;
        }
        if dj.partial_cmp(&T::ZERO) != Some(core::cmp::Ordering::Greater) {
            return Some(j);
        }
        let ljj = dj.sqrt();
        s.set_band(j, 0, ljj);
        let mut i = j + 1;
        while i < n && i <= j + w {
            let mut v = s.band(i, i - j);
            let mut k = i - w.min(i);
            while k < j {
                v = v - s.band(i, i - k) * s.band(j, j - k);
                k += 1;
            }
            s.set_band(i, i - j, v / ljj);
            i += 1;
        }
        j += 1;
    }
    None
}

/// Solves L L^T x = b in place in the store's right-hand side, L from
/// [`cholesky`] (semi-bandwidth `w`) in the store's band. 4 n w flops.
#[inline(always)]
pub fn solve<T: UqReal, S: BandStore<T>>(s: &mut S, n: usize, w: usize) {
    let mut i = 0;
    while i < n {
        let mut v = s.rhs(i);
        let mut k = i - w.min(i);
        while k < i {
            v = v - s.band(i, i - k) * s.rhs(k);
            k += 1;
        }
        s.set_rhs(i, v / s.band(i, 0));
        i += 1;
    }
    let mut i = n;
    while i > 0 {
        i -= 1;
        let mut v = s.rhs(i);
        let mut k = i + 1;
        while k < n && k <= i + w {
            v = v - s.band(k, k - i) * s.rhs(k);
            k += 1;
        }
        s.set_rhs(i, v / s.band(i, 0));
    }
}

/// Entry i of an array sized by the model: bounds-checked on the host;
/// unchecked on the device, where a kernel has no panic path and the
/// launcher (`gpuq-cuda`'s `uq_band_static`) uploads arrays of the sizes the
/// model states, with indices below them (from a validated CSR).
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn at<T: Copy>(v: &[T], i: usize) -> T {
    v[i]
}

/// [`at`] on the device: unchecked.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn at<T: Copy>(v: &[T], i: usize) -> T {
    // SAFETY: i < v.len() by the launcher's sizes (see the host version).
    unsafe { *v.get_unchecked(i) }
}

/// [`ThetaLaw::kind`] of a uniform theta on [a, b].
pub const THETA_UNIFORM: u64 = 0;
/// [`ThetaLaw::kind`] of a normal theta of mean a and deviation b.
pub const THETA_NORMAL: u64 = 1;
/// [`ThetaLaw::kind`] of c + exp(a + b z) (a shifted lognormal).
pub const THETA_LOGNORMAL: u64 = 2;

/// The distribution of one stiffness coefficient theta_k as a function of
/// its standard normal draw z (`#[repr(C)]`, no padding: uploaded as is).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThetaLaw {
    /// [`THETA_UNIFORM`], [`THETA_NORMAL`] or [`THETA_LOGNORMAL`].
    pub kind: u64,
    /// Lower end, mean, or mean of the logarithm.
    pub a: f64,
    /// Upper end, deviation, or deviation of the logarithm.
    pub b: f64,
    /// The lognormal's shift (unused otherwise).
    pub c: f64,
}

impl ThetaLaw {
    /// theta for the standard normal draw z: a + (b - a) Phi(z), a + b z or
    /// c + exp(a + b z) (the exponential of [`UqReal`]: the same bits on both
    /// backends). The uniform's Phi is libm's erf, which the main PTX module
    /// does not link: on the device a uniform law gives NaN, and the launcher
    /// (`gpuq-uq`'s CUDA band path) leaves models with uniform thetas to the
    /// host. O(1).
    #[inline(always)]
    pub fn value(&self, z: f64) -> f64 {
        if self.kind == THETA_UNIFORM {
            uniform(self.a, self.b, z)
        } else if self.kind == THETA_NORMAL {
            self.a + self.b * z
        } else {
            self.c + UqReal::exp(self.a + self.b * z)
        }
    }
}

/// lo + (hi - lo) Phi(z).
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn uniform(lo: f64, hi: f64, z: f64) -> f64 {
    lo + (hi - lo) * 0.5 * (1.0 + crate::cubature::functions::erf(z / core::f64::consts::SQRT_2))
}

/// [`uniform`] on the device: NaN (see [`ThetaLaw::value`]).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn uniform(_lo: f64, _hi: f64, _z: f64) -> f64 {
    f64::NAN
}

/// What a static sample draws (any model, banded or not): m thetas and the
/// load f = mu + L eta + diag(std) xi. Indices are free DOFs (u32).
#[derive(Clone, Copy, Debug)]
pub struct Draws<'a> {
    /// The m thetas' distributions.
    pub laws: &'a [ThetaLaw],
    /// Mean load mu (n).
    pub load_mean: &'a [f64],
    /// Deviations of independent loads per DOF (n), or empty.
    pub load_std: &'a [f64],
    /// Rank r of the load factor L (n x r, CSR below; 0: none).
    pub rank: usize,
    /// L's row offsets (n + 1 when r > 0).
    pub factor_start: &'a [u32],
    /// L's columns.
    pub factor_col: &'a [u32],
    /// L's values.
    pub factor_val: &'a [f64],
}

/// Where a sample's draws go: its load f (n) and its draws (eta, then theta).
pub trait DrawStore {
    /// Load entry i.
    fn load(&self, i: usize) -> f64;
    /// Sets load entry i.
    fn set_load(&mut self, i: usize, v: f64);
    /// Draw k (eta_k for k < r, theta_{k - r} after).
    fn draw(&self, k: usize) -> f64;
    /// Sets draw k.
    fn set_draw(&mut self, k: usize, v: f64);
}

/// Draws a sample in the order of `gpuq-uq`'s static procedure: eta (r
/// normals, draws 0..r), theta_k = law_k(z) (m normals, draws r..r + m),
/// then the load f = mu + L eta + diag(std) xi (n normals when `load_std` is
/// given) into the load. O(n + nnz(L)).
#[inline(always)]
pub fn draw_sample<S: DrawStore + ?Sized, N: FnMut() -> f64>(
    d: &Draws<'_>,
    s: &mut S,
    mut normal: N,
) {
    let (n, r, m) = (d.load_mean.len(), d.rank, d.laws.len());
    let mut i = 0;
    while i < n {
        s.set_load(i, at(d.load_mean, i));
        i += 1;
    }
    let mut c = 0;
    while c < r {
        s.set_draw(c, normal());
        c += 1;
    }
    if r > 0 {
        let mut i = 0;
        while i < n {
            let mut f = s.load(i);
            let mut e = at(d.factor_start, i) as usize;
            while e < at(d.factor_start, i + 1) as usize {
                f = f + at(d.factor_val, e) * s.draw(at(d.factor_col, e) as usize);
                e += 1;
            }
            s.set_load(i, f);
            i += 1;
        }
    }
    let mut k = 0;
    while k < m {
        s.set_draw(r + k, at(d.laws, k).value(normal()));
        k += 1;
    }
    if !d.load_std.is_empty() {
        let mut i = 0;
        while i < n {
            s.set_load(i, s.load(i) + at(d.load_std, i) * normal());
            i += 1;
        }
    }
}

/// A random banded static problem: what every sample shares. Indices are
/// the model's free DOFs (u32: n < 2^32).
#[derive(Clone, Copy, Debug)]
pub struct BandModel<'a> {
    /// Order n.
    pub n: usize,
    /// Semi-bandwidth w of K0 and every K_k (at most [`MAX_SEMI_BAND`]).
    pub w: usize,
    /// K0's lower band, row-wise: entry (i, d) at `i (w + 1) + d`.
    pub k0: &'a [f64],
    /// Term k's triplets are `term_start[k]..term_start[k + 1]` (m + 1
    /// offsets; `[0]` for no term).
    pub term_start: &'a [u32],
    /// Triplet rows (both triangles: the assembly takes j <= i, the
    /// residual all).
    pub term_row: &'a [u32],
    /// Triplet columns.
    pub term_col: &'a [u32],
    /// Triplet values.
    pub term_val: &'a [f64],
    /// The draws (m laws, one per term).
    pub draws: Draws<'a>,
    /// The output DOFs whose u a sample writes.
    pub outputs: &'a [u32],
}

impl BandModel<'_> {
    /// Number of thetas m.
    #[inline(always)]
    pub fn terms(&self) -> usize {
        self.draws.laws.len()
    }

    /// Values of work space one sample takes: the band n (w + 1), u, f
    /// (n each), then eta and theta (r + m). O(1).
    #[inline(always)]
    pub fn work_len(&self) -> usize {
        self.n * (self.w + 3) + self.draws.rank + self.terms()
    }
}

/// One sample's work space as slots 0..[`BandModel::work_len`]: the band
/// (entry (i, d) at i (w + 1) + d), u at n (w + 1) + i, f at n (w + 2) + i,
/// draw k (eta, then theta) at n (w + 3) + k.
pub trait Slots {
    /// Slot k.
    fn get(&self, k: usize) -> f64;
    /// Sets slot k.
    fn set(&mut self, k: usize, v: f64);
}

impl Slots for [f64] {
    #[inline(always)]
    fn get(&self, k: usize) -> f64 {
        self[k]
    }
    #[inline(always)]
    fn set(&mut self, k: usize, v: f64) {
        self[k] = v;
    }
}

/// A sample's slots seen as a band store (band and u) with its load and draws.
pub struct SampleWork<'s, S: ?Sized> {
    /// The slots.
    pub slots: &'s mut S,
    /// Order n.
    pub n: usize,
    /// Semi-bandwidth w.
    pub w: usize,
}

impl<S: Slots + ?Sized> DrawStore for SampleWork<'_, S> {
    #[inline(always)]
    fn load(&self, i: usize) -> f64 {
        self.slots.get(self.n * (self.w + 2) + i)
    }
    #[inline(always)]
    fn set_load(&mut self, i: usize, v: f64) {
        self.slots.set(self.n * (self.w + 2) + i, v);
    }
    #[inline(always)]
    fn draw(&self, k: usize) -> f64 {
        self.slots.get(self.n * (self.w + 3) + k)
    }
    #[inline(always)]
    fn set_draw(&mut self, k: usize, v: f64) {
        self.slots.set(self.n * (self.w + 3) + k, v);
    }
}

impl<S: Slots + ?Sized> BandStore<f64> for SampleWork<'_, S> {
    #[inline(always)]
    fn band(&self, i: usize, d: usize) -> f64 {
        self.slots.get(i * (self.w + 1) + d)
    }
    #[inline(always)]
    fn set_band(&mut self, i: usize, d: usize, v: f64) {
        self.slots.set(i * (self.w + 1) + d, v);
    }
    #[inline(always)]
    fn rhs(&self, i: usize) -> f64 {
        self.slots.get(self.n * (self.w + 1) + i)
    }
    #[inline(always)]
    fn set_rhs(&mut self, i: usize, v: f64) {
        self.slots.set(self.n * (self.w + 1) + i, v);
    }
}

/// Writes K(theta) = K0 + sum_k theta_k K_k into the band, theta from the
/// draws (a deterministic K0 alone with m = 0). O(n w + nnz of the K_k).
#[inline(always)]
pub fn assemble<S: Slots + ?Sized>(p: &BandModel<'_>, s: &mut SampleWork<'_, S>) {
    let mut q = 0;
    while q < p.n * (p.w + 1) {
        s.slots.set(q, at(p.k0, q));
        q += 1;
    }
    let mut k = 0;
    while k < p.terms() {
        let t = s.draw(p.draws.rank + k);
        let mut e = at(p.term_start, k) as usize;
        while e < at(p.term_start, k + 1) as usize {
            let (i, j) = (at(p.term_row, e) as usize, at(p.term_col, e) as usize);
            if j <= i {
                s.set_band(i, i - j, s.band(i, i - j) + t * at(p.term_val, e));
            }
            e += 1;
        }
        k += 1;
    }
}

/// |f - K(theta) u| / |f| (|f - K u| when f = 0) of the solution in the
/// right-hand side; overwrites the load slots with the residual. O(n w + nnz).
#[inline(always)]
fn relative_residual<S: Slots + ?Sized>(p: &BandModel<'_>, s: &mut SampleWork<'_, S>) -> f64 {
    let (n, w1) = (p.n, p.w + 1);
    let mut f2 = 0.0;
    let mut i = 0;
    while i < n {
        let f = s.load(i);
        f2 = f2 + f * f;
        // (K0 u)_i from the symmetric band: the row's lower part, then its upper.
        let mut v = f;
        let mut d = 0;
        while d <= p.w && d <= i {
            v = v - at(p.k0, i * w1 + d) * s.rhs(i - d);
            d += 1;
        }
        let mut d = 1;
        while d <= p.w && i + d < n {
            v = v - at(p.k0, (i + d) * w1 + d) * s.rhs(i + d);
            d += 1;
        }
        s.set_load(i, v);
        i += 1;
    }
    let mut k = 0;
    while k < p.terms() {
        let t = s.draw(p.draws.rank + k);
        let mut e = at(p.term_start, k) as usize;
        while e < at(p.term_start, k + 1) as usize {
            let (i, j) = (at(p.term_row, e) as usize, at(p.term_col, e) as usize);
            s.set_load(i, s.load(i) - t * at(p.term_val, e) * s.rhs(j));
            e += 1;
        }
        k += 1;
    }
    let mut r2 = 0.0;
    let mut i = 0;
    while i < n {
        let r = s.load(i);
        r2 = r2 + r * r;
        i += 1;
    }
    if f2 > 0.0 {
        UqReal::sqrt(r2) / UqReal::sqrt(f2)
    } else {
        UqReal::sqrt(r2)
    }
}

/// One sample: draws it ([`draw_sample`]), assembles ([`assemble`]), factors
/// and solves K(theta) u = f, calls `out(o, u[outputs[o]])` for every output
/// and returns the relative residual, or `Err(j)` when pivot j of K(theta)
/// is not positive (no output written). `normal` gives the sample's normals
/// in order. Cost: see the module docs.
#[inline(always)]
pub fn band_sample<S: Slots + ?Sized, N: FnMut() -> f64, O: FnMut(usize, f64)>(
    p: &BandModel<'_>,
    s: &mut SampleWork<'_, S>,
    normal: N,
    mut out: O,
) -> Result<f64, usize> {
    draw_sample(&p.draws, s, normal);
    assemble(p, s);
    if let Some(j) = cholesky(s, p.n, p.w) {
        return Err(j);
    }
    let mut i = 0;
    while i < p.n {
        s.set_rhs(i, s.load(i));
        i += 1;
    }
    solve(s, p.n, p.w);
    let mut o = 0;
    while o < p.outputs.len() {
        out(o, s.rhs(at(p.outputs, o) as usize));
        o += 1;
    }
    Ok(relative_residual(p, s))
}

/// A sample's residual slot when pivot j failed: -1 - j (exact below
/// 2^53; a residual is never negative). O(1).
#[inline(always)]
pub fn failure_code(j: usize) -> f64 {
    -1.0 - j as f64
}

/// The failed pivot a residual slot encodes ([`failure_code`]), or `None`
/// for a residual. O(1).
#[inline(always)]
pub fn failed_pivot(slot: f64) -> Option<usize> {
    (slot < 0.0).then(|| (-1.0 - slot) as usize)
}

/// [`band_sample`] of sample `sample` of `samples` under `seed` with the
/// normals of `design` (`sampling::MONTE_CARLO`, `LATIN_HYPERCUBE` over every
/// dimension, or `SOBOL_FIRST`: the first normal from the scrambled Sobol
/// sequence, the others by Monte Carlo).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn band_sample_designed<S: Slots + ?Sized, O: FnMut(usize, f64)>(
    p: &BandModel<'_>,
    s: &mut SampleWork<'_, S>,
    design: u32,
    seed: u64,
    sample: u64,
    samples: u64,
    out: O,
) -> Result<f64, usize> {
    let key = key_from_seed(seed);
    if design == LATIN_HYPERCUBE {
        let mut z = LhsNormals::new(key, sample, samples.max(1));
        band_sample(p, s, || Normals::<f64>::next_normal(&mut z), out)
    } else if design == SOBOL_FIRST {
        let mut z = SobolFirst::<f64>::new(seed, sample);
        band_sample(p, s, || z.next_normal(), out)
    } else {
        let mut z = NormalStream::<f64>::new(key, sample);
        band_sample(p, s, || z.next_normal(), out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::dense::{lu_solve, DenseStore};
    use super::*;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    /// A band of semi-bandwidth w and a right-hand side in plain vectors.
    struct Plain {
        w: usize,
        band: Vec<f64>,
        rhs: Vec<f64>,
    }

    impl BandStore<f64> for Plain {
        fn band(&self, i: usize, d: usize) -> f64 {
            self.band[(self.w + 1) * i + d]
        }
        fn set_band(&mut self, i: usize, d: usize, v: f64) {
            self.band[(self.w + 1) * i + d] = v;
        }
        fn rhs(&self, i: usize) -> f64 {
            self.rhs[i]
        }
        fn set_rhs(&mut self, i: usize, v: f64) {
            self.rhs[i] = v;
        }
    }

    /// A small deterministic generator of values in [-1, 1).
    fn lcg(state: &mut u64) -> f64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (*state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// A dense row-major matrix and right-hand side for `lu_solve`.
    struct Dense {
        n: usize,
        a: Vec<f64>,
        x: Vec<f64>,
    }

    impl DenseStore<f64> for Dense {
        fn a(&self, i: usize, j: usize) -> f64 {
            self.a[i * self.n + j]
        }
        fn set_a(&mut self, i: usize, j: usize, v: f64) {
            self.a[i * self.n + j] = v;
        }
        fn rhs(&self, i: usize) -> f64 {
            self.x[i]
        }
        fn set_rhs(&mut self, i: usize, v: f64) {
            self.x[i] = v;
        }
    }

    /// x = A^-1 b by dense LU with partial pivoting: the independent solver.
    fn dense_solve(a: Vec<f64>, x: Vec<f64>, n: usize) -> Vec<f64> {
        let mut d = Dense { n, a, x };
        assert!(lu_solve(&mut d, n));
        d.x
    }

    #[test]
    fn banded_cholesky_matches_a_dense_solve_for_several_widths() {
        let mut state = 7u64;
        for (n, w) in [
            (1usize, 0usize),
            (9, 1),
            (20, 3),
            (33, 7),
            (40, 16),
            (12, 16),
        ] {
            // A random symmetric band made diagonally dominant: SPD.
            let mut dense = vec![0.0; n * n];
            let mut s = Plain {
                w,
                band: vec![0.0; n * (w + 1)],
                rhs: (0..n).map(|_| lcg(&mut state)).collect(),
            };
            for i in 0..n {
                for d in 1..=w.min(i) {
                    let v = lcg(&mut state);
                    s.band[i * (w + 1) + d] = v;
                    dense[i * n + i - d] = v;
                    dense[(i - d) * n + i] = v;
                }
            }
            for i in 0..n {
                let row: f64 = (0..n).map(|j| dense[i * n + j].abs()).sum();
                let d = row + 1.0 + lcg(&mut state).abs();
                s.band[i * (w + 1)] = d;
                dense[i * n + i] = d;
            }
            let want = dense_solve(dense, s.rhs.clone(), n);
            assert_eq!(cholesky(&mut s, n, w), None);
            solve(&mut s, n, w);
            for (a, b) in s.rhs.iter().zip(&want) {
                assert!(
                    (a - b).abs() < 1e-13 * b.abs().max(1.0),
                    "{n} {w}: {a} vs {b}"
                );
            }
        }
        // An indefinite matrix names its first non-positive pivot.
        let mut s = Plain {
            w: 1,
            band: vec![1.0, 0.0, 1.0, 2.0],
            rhs: vec![0.0; 2],
        };
        assert_eq!(cholesky(&mut s, 2, 1), Some(1));
    }

    #[test]
    fn the_beams_band_keeps_its_old_bits() {
        // The beam (w = 3) with element moduli 1 + e / 10: the tip deflection
        // and rotation of the fixed-width factorisation this one replaced.
        let ne = 7;
        let n = 2 * ne;
        let mut s = Plain {
            w: 3,
            band: vec![0.0; 4 * n],
            rhs: vec![0.0; n],
        };
        super::super::beam::assemble(&mut s, ne, 1.0 / ne as f64, 1.0, |e| 1.0 + e as f64 / 10.0);
        assert_eq!(cholesky(&mut s, n, 3), None);
        s.rhs[n - 2] = 1.0;
        solve(&mut s, n, 3);
        assert_eq!(s.rhs[n - 2].to_bits(), TIP_BITS, "{:e}", s.rhs[n - 2]);
        assert_eq!(s.rhs[n - 1].to_bits(), ROTATION_BITS, "{:e}", s.rhs[n - 1]);
    }

    const TIP_BITS: u64 = 0x3fd3_263a_2878_23aa;
    const ROTATION_BITS: u64 = 0x3fdb_7b43_7585_bbaa;

    /// A 1D Laplacian-like model (w = 1) with two terms and a rank-1 load.
    #[test]
    fn a_sample_solves_its_own_system() {
        let n = 6;
        let w = 1;
        let mut k0 = vec![0.0; n * (w + 1)];
        for i in 0..n {
            k0[i * 2] = 2.0;
            if i > 0 {
                k0[i * 2 + 1] = -1.0;
            }
        }
        // K_0 = diag(1) on DOF 2; K_1 = [[1, -1], [-1, 1]] on DOFs 4, 5.
        let term_start = [0u32, 1, 5];
        let term_row = [2u32, 4, 4, 5, 5];
        let term_col = [2u32, 4, 5, 4, 5];
        let term_val = [1.0, 1.0, -1.0, -1.0, 1.0];
        let laws = [
            ThetaLaw {
                kind: THETA_NORMAL,
                a: 0.5,
                b: 0.1,
                c: 0.0,
            },
            ThetaLaw {
                kind: THETA_LOGNORMAL,
                a: 0.0,
                b: 0.2,
                c: 0.0,
            },
        ];
        let mean = [1.0, 0.5, 0.0, -0.5, 1.0, 2.0];
        let std = [0.1; 6];
        let factor_start = [0u32, 1, 1, 1, 2, 2, 3];
        let factor_col = [0u32, 0, 0];
        let factor_val = [0.3, -0.2, 0.1];
        let outputs = [0u32, 3, 5];
        let p = BandModel {
            n,
            w,
            k0: &k0,
            term_start: &term_start,
            term_row: &term_row,
            term_col: &term_col,
            term_val: &term_val,
            draws: Draws {
                laws: &laws,
                load_mean: &mean,
                load_std: &std,
                rank: 1,
                factor_start: &factor_start,
                factor_col: &factor_col,
                factor_val: &factor_val,
            },
            outputs: &outputs,
        };
        let mut slots = vec![0.0; p.work_len()];
        let mut got = [0.0; 3];
        let mut s = SampleWork {
            slots: &mut slots[..],
            n,
            w,
        };
        let res = band_sample_designed(&p, &mut s, 0, 5, 3, 10, |o, v| got[o] = v).unwrap();
        assert!(res < 1e-14, "{res}");
        // The same draws, assembled densely and solved independently.
        let mut z = NormalStream::<f64>::new(key_from_seed(5), 3);
        let eta = z.next_normal();
        let th = [
            laws[0].value(z.next_normal()),
            laws[1].value(z.next_normal()),
        ];
        let mut f: Vec<f64> = mean.to_vec();
        for i in 0..n {
            for e in factor_start[i] as usize..factor_start[i + 1] as usize {
                f[i] += factor_val[e] * eta;
            }
        }
        for (fi, si) in f.iter_mut().zip(std) {
            *fi += si * z.next_normal();
        }
        let mut dense = vec![0.0; n * n];
        for i in 0..n {
            dense[i * n + i] = 2.0;
            if i > 0 {
                dense[i * n + i - 1] = -1.0;
                dense[(i - 1) * n + i] = -1.0;
            }
        }
        for k in 0..2 {
            for e in term_start[k] as usize..term_start[k + 1] as usize {
                dense[term_row[e] as usize * n + term_col[e] as usize] += th[k] * term_val[e];
            }
        }
        let u = dense_solve(dense, f, n);
        for (o, &d) in outputs.iter().enumerate() {
            let want = u[d as usize];
            assert!((got[o] - want).abs() < 1e-13 * want.abs().max(1.0));
        }
        // A negative definite K names its pivot.
        let neg = [-1.0; 12];
        let bad = BandModel { k0: &neg, ..p };
        let mut s = SampleWork {
            slots: &mut slots[..],
            n,
            w,
        };
        assert_eq!(
            band_sample_designed(&bad, &mut s, 0, 5, 3, 10, |_, _| ()),
            Err(0)
        );
        assert_eq!(failed_pivot(failure_code(12)), Some(12));
        assert_eq!(failed_pivot(0.0), None);
    }
}
