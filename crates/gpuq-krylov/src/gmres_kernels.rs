//! GMRES's Gram-Schmidt against its whole basis: the three batched steps of
//! delayed classical Gram-Schmidt with re-orthogonalisation (DCGS2; see
//! [`crate::gmres()`]), which a backend runs natively. The CPU backend sums with
//! the fixed blocking of its reductions (so an inner product has the bits of its
//! `dotc`); the CUDA backend sweeps the whole basis per launch
//! (`CudaBackend::gs_dots`, `gs_update`, `gs_combine`); any other backend gets
//! default methods built from its BLAS-1 operations (one `dotc` per inner
//! product, one axpy per basis vector).

use crate::kernels::update_slots;
use crate::Replay;
use gpuq_core::num_traits::Float;
use gpuq_core::{check_same_len, DeviceVector, Error, RealScalar, Result, Scalar};
use gpuq_cpu::reduce::{lane_sum, pairwise_sum, BLOCK};
use gpuq_cpu::{CpuBackend, CpuVector};
use rayon::prelude::*;

pub use gpuq_kernels::gs_extra;

/// The batched steps of GMRES's delayed classical Gram-Schmidt.
///
/// Every method has a default built from [`gpuq_core::Backend`] operations
/// (so `impl GmresKernels for MyBackend {}` runs [`crate::gmres()`]): the inner
/// products as separate `dotc` calls (each a pass over two vectors instead of
/// one sweep over the basis), the updates as one axpy per basis vector, and
/// the coefficients computed on the host as the CPU does.
pub trait GmresKernels: Replay {
    /// One step's inner products and coefficients. With V = [basis[0..used],
    /// u]: `gs[g] = V_g^H u` and, when `z` is given, `gs[used + 1 + g] = V_g^H
    /// z`, for g <= used; then, with s = gs[0..used] and t the first `used`
    /// inner products with z, `gs[e + 1]` = rho = sqrt(u^H u - ||s||^2) (the
    /// norm of u - sum_g s_g basis\[g\] by Pythagoras; zero when that is not
    /// positive) and `gs[e]` = (u^H z - s^H t) / rho (zero without z or when
    /// rho is zero), e = [`gs_extra`]`(basis.len())`.
    ///
    /// Reads `used + 2` vectors (`used + 1` without z) once.
    ///
    /// Default: one `dotc` per inner product (`used + 1`, twice that with
    /// z), each reading two vectors, then `gs` downloaded and uploaded.
    fn gs_dots<T: Scalar>(
        &self,
        basis: &[Self::Vector<T>],
        used: usize,
        u: &Self::Vector<T>,
        z: Option<&Self::Vector<T>>,
        gs: &mut Self::Vector<T>,
    ) -> Result<()> {
        let n = u.len();
        check_step("gs_dots", basis, used, false, n, gs.len())?;
        if let Some(z) = z {
            check_same_len("gs_dots (z)", n, z.len())?;
        }
        let vector = |g: usize| if g < used { &basis[g] } else { u };
        let mut totals = (0..=used)
            .map(|g| self.dotc(vector(g), u))
            .collect::<Result<Vec<T>>>()?;
        if let Some(z) = z {
            for g in 0..=used {
                totals.push(self.dotc(vector(g), z)?);
            }
        }
        let e = gs_extra(basis.len());
        update_slots(self, gs, |out| finish_dots(out, &totals, used, e))
    }

    /// One step's update from the coefficients [`GmresKernels::gs_dots`] left
    /// in `gs` (called with the same basis, `used`, u and z): q = (u - sum_g
    /// s_g basis\[g\]) / rho into `basis[used]`, and u = (z - sum_g t_g basis\[g\]
    /// - t_k q) / rho in place (zero vectors when rho is zero). Moves `used +
    /// 4` vectors.
    ///
    /// Default: `gs` downloaded, then copy, `used` axpy and a scaling for q,
    /// and the same plus one axpy for u (about 6 `used` + 12 vector moves).
    fn gs_update<T: Scalar>(
        &self,
        basis: &mut [Self::Vector<T>],
        used: usize,
        gs: &Self::Vector<T>,
        u: &mut Self::Vector<T>,
        z: &Self::Vector<T>,
    ) -> Result<()> {
        let n = u.len();
        check_step("gs_update", basis, used, true, n, gs.len())?;
        check_same_len("gs_update (z)", n, z.len())?;
        let e = gs_extra(basis.len());
        let g = self.download(gs)?;
        let (s, t, tk) = (&g[..used], &g[used + 1..2 * used + 1], g[e]);
        let inv_rho = inverse_rho(g[e + 1]);
        let (done, rest) = basis.split_at_mut(used);
        let q = &mut rest[0];
        self.copy(u, q)?;
        for (v, &sg) in done.iter().zip(s) {
            self.axpy(-sg, v, q)?;
        }
        self.scal(inv_rho, q)?;
        self.copy(z, u)?;
        for (v, &tg) in done.iter().zip(t) {
            self.axpy(-tg, v, u)?;
        }
        self.axpy(-tk, q, u)?;
        self.scal(inv_rho, u)
    }

    /// w = sum_g y\[g\] basis\[g\], g < y.len(). Moves `y.len() + 1` vectors.
    /// Default: fill and one axpy a coefficient (3 `y.len()` + 1 moves).
    fn gs_combine<T: Scalar>(
        &self,
        basis: &[Self::Vector<T>],
        y: &[T],
        w: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_combine(basis, y, w.len())?;
        self.fill(w, T::zero())?;
        for (v, &yg) in basis.iter().zip(y) {
            self.axpy(yg, v, w)?;
        }
        Ok(())
    }
}

/// Writes a step's inner products `totals` (V_g^H u for g <= used, then V_g^H
/// z when given) into the host copy `gs` of the coefficient array, with the
/// coefficients [`GmresKernels::gs_dots`] derives from them: t_k at `gs[e]`
/// and rho at `gs[e + 1]`, e = [`gs_extra`]`(basis length)`. For backends that
/// sum the inner products themselves (a distributed one sums them over
/// ranks). O(used).
pub fn finish_dots<T: Scalar>(gs: &mut [T], totals: &[T], used: usize, e: usize) {
    let (uh, zh) = totals.split_at(used + 1);
    let (tk, rho) = coefficients(uh, zh);
    gs[..totals.len()].copy_from_slice(totals);
    gs[e] = tk;
    gs[e + 1] = T::from_real(rho);
}

/// 1 / rho, or zero when rho is not positive (then q and u become zero).
fn inverse_rho<T: Scalar>(rho: T) -> T {
    let (rho, zero) = (rho.re(), T::Real::of_f64(0.0));
    T::from_real(if rho > zero {
        T::Real::of_f64(1.0) / rho
    } else {
        zero
    })
}

/// Errors unless `y` has at most one coefficient a basis vector and every
/// basis vector has `n` elements.
fn check_combine<V: DeviceVector, T>(basis: &[V], y: &[T], n: usize) -> Result<()> {
    if y.len() > basis.len() {
        return Err(Error::InvalidArgument(format!(
            "gs_combine: {} coefficients for {} basis vectors",
            y.len(),
            basis.len()
        )));
    }
    for v in basis {
        check_same_len("gs_combine", n, v.len())?;
    }
    Ok(())
}

/// rho and t_k from a step's inner products `uh` (V_g^H u, g <= used) and `zh`
/// (V_g^H z, or empty), as the backends compute them.
fn coefficients<T: Scalar>(uh: &[T], zh: &[T]) -> (T, T::Real) {
    let used = uh.len() - 1;
    let zero = T::Real::of_f64(0.0);
    let (mut ss, mut st) = (zero, T::zero());
    for g in 0..used {
        ss += uh[g].abs_sqr();
        if !zh.is_empty() {
            st += uh[g].conj() * zh[g];
        }
    }
    let rho2 = uh[used].re() - ss;
    let rho = if rho2 > zero { rho2.sqrt() } else { zero };
    let tk = if !zh.is_empty() && rho > zero {
        (zh[used] - st) * T::from_real(T::Real::of_f64(1.0) / rho)
    } else {
        T::zero()
    };
    (tk, rho)
}

/// Errors unless `used` vectors of the basis exist (`strict`: and one more to
/// write), every vector has `n` elements and `gs` has its slots.
fn check_step<V: DeviceVector>(
    op: &'static str,
    basis: &[V],
    used: usize,
    strict: bool,
    n: usize,
    gs_len: usize,
) -> Result<()> {
    if used > basis.len() || (strict && used == basis.len()) {
        return Err(Error::InvalidArgument(format!(
            "{op}: basis vector {used} of {}",
            basis.len()
        )));
    }
    check_same_len(op, gs_extra(basis.len()) + 2, gs_len)?;
    for v in basis {
        check_same_len(op, n, v.len())?;
    }
    Ok(())
}

impl GmresKernels for CpuBackend {
    fn gs_dots<T: Scalar>(
        &self,
        basis: &[CpuVector<T>],
        used: usize,
        u: &CpuVector<T>,
        z: Option<&CpuVector<T>>,
        gs: &mut CpuVector<T>,
    ) -> Result<()> {
        let n = u.len();
        check_step("gs_dots", basis, used, false, n, gs.len())?;
        if let Some(z) = z {
            check_same_len("gs_dots (z)", n, z.len())?;
        }
        let vectors = used as u64 + 1 + u64::from(z.is_some());
        self.record("gs_dots_vectors", vectors);
        let us = u.as_slice();
        let zs = z.map(|z| z.as_slice());
        let kv = used + 1;
        let totals = self.run("gs_dots", || {
            // Per block of the fixed blocking, the partial sums of every value;
            // then, per value, the blocks' sums combined pairwise: the bits of
            // `dotc`.
            let partials: Vec<Vec<T>> = (0..n.div_ceil(BLOCK))
                .into_par_iter()
                .map(|b| {
                    let r = b * BLOCK..((b + 1) * BLOCK).min(n);
                    let ub = &us[r.clone()];
                    let vector = |g: usize| {
                        if g < used {
                            &basis[g].as_slice()[r.clone()]
                        } else {
                            ub
                        }
                    };
                    let mut sums: Vec<T> = (0..kv)
                        .map(|g| {
                            let vb = vector(g);
                            lane_sum(vb.len(), |i| vb[i].conj() * ub[i])
                        })
                        .collect();
                    if let Some(zs) = zs {
                        let zb = &zs[r.clone()];
                        sums.extend((0..kv).map(|g| {
                            let vb = vector(g);
                            lane_sum(vb.len(), |i| vb[i].conj() * zb[i])
                        }));
                    }
                    sums
                })
                .collect();
            let values = if zs.is_some() { 2 * kv } else { kv };
            (0..values)
                .map(|j| pairwise_sum(&partials.iter().map(|p| p[j]).collect::<Vec<T>>()))
                .collect::<Vec<T>>()
        });
        finish_dots(gs.as_mut_slice(), &totals, used, gs_extra(basis.len()));
        Ok(())
    }

    fn gs_update<T: Scalar>(
        &self,
        basis: &mut [CpuVector<T>],
        used: usize,
        gs: &CpuVector<T>,
        u: &mut CpuVector<T>,
        z: &CpuVector<T>,
    ) -> Result<()> {
        let n = u.len();
        check_step("gs_update", basis, used, true, n, gs.len())?;
        check_same_len("gs_update (z)", n, z.len())?;
        self.record("gs_update_vectors", used as u64 + 4);
        let e = gs_extra(basis.len());
        let g = gs.as_slice();
        let (s, t, tk) = (&g[..used], &g[used + 1..2 * used + 1], g[e]);
        let inv_rho = inverse_rho(g[e + 1]);
        let (done, rest) = basis.split_at_mut(used);
        let q = &mut rest[0];
        let zs = z.as_slice();
        self.run("gs_update", || {
            q.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(u.as_mut_slice().par_chunks_mut(BLOCK))
                .enumerate()
                .for_each(|(c, (qc, uc))| {
                    let base = c * BLOCK;
                    for (k, (qi, ui)) in qc.iter_mut().zip(uc.iter_mut()).enumerate() {
                        let i = base + k;
                        let (mut qv, mut uv) = (*ui, zs[i]);
                        for (gi, v) in done.iter().enumerate() {
                            let vi = v.as_slice()[i];
                            qv -= s[gi] * vi;
                            uv -= t[gi] * vi;
                        }
                        let qv = qv * inv_rho;
                        *qi = qv;
                        *ui = (uv - tk * qv) * inv_rho;
                    }
                })
        });
        Ok(())
    }

    fn gs_combine<T: Scalar>(
        &self,
        basis: &[CpuVector<T>],
        y: &[T],
        w: &mut CpuVector<T>,
    ) -> Result<()> {
        check_combine(basis, y, w.len())?;
        self.record("gs_combine_vectors", y.len() as u64 + 1);
        self.run("gs_combine", || {
            w.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .enumerate()
                .for_each(|(c, wc)| {
                    let base = c * BLOCK;
                    for (k, wi) in wc.iter_mut().enumerate() {
                        let mut acc = T::zero();
                        for (v, &yg) in basis.iter().zip(y) {
                            acc += yg * v.as_slice()[base + k];
                        }
                        *wi = acc;
                    }
                })
        });
        Ok(())
    }
}

/// The CUDA backend: the same steps as whole-basis launches (see
/// `CudaBackend::gs_dots` and the others).
#[cfg(feature = "cuda")]
impl GmresKernels for gpuq_cuda::CudaBackend {
    fn gs_dots<T: Scalar>(
        &self,
        basis: &[gpuq_cuda::CudaVector<T>],
        used: usize,
        u: &gpuq_cuda::CudaVector<T>,
        z: Option<&gpuq_cuda::CudaVector<T>>,
        gs: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::gs_dots(self, basis, used, u, z, gs)
    }

    fn gs_update<T: Scalar>(
        &self,
        basis: &mut [gpuq_cuda::CudaVector<T>],
        used: usize,
        gs: &gpuq_cuda::CudaVector<T>,
        u: &mut gpuq_cuda::CudaVector<T>,
        z: &gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::gs_update(self, basis, used, gs, u, z)
    }

    fn gs_combine<T: Scalar>(
        &self,
        basis: &[gpuq_cuda::CudaVector<T>],
        y: &[T],
        w: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::gs_combine(self, basis, y, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_core::{Backend, Complex64};

    /// `k` vectors of length `n`, independent (each with its own frequencies).
    fn vectors(n: usize, k: usize) -> Vec<Vec<Complex64>> {
        (0..k)
            .map(|j| {
                let f = 1.0 + j as f64;
                (0..n)
                    .map(|i| {
                        let t = i as f64;
                        Complex64::new((0.37 * f * t + f).sin(), (0.11 * (f + 1.0) * t).cos())
                    })
                    .collect()
            })
            .collect()
    }

    fn norm(v: &[Complex64]) -> f64 {
        v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt()
    }

    /// An orthonormal basis of `k` vectors of length `n` (classical
    /// Gram-Schmidt twice on the host).
    fn orthonormal(n: usize, k: usize) -> Vec<Vec<Complex64>> {
        let mut out: Vec<Vec<Complex64>> = Vec::new();
        for mut v in vectors(n, k) {
            for _ in 0..2 {
                for q in &out {
                    let h: Complex64 = q.iter().zip(&v).map(|(a, b)| a.conj() * b).sum();
                    for (vi, qi) in v.iter_mut().zip(q) {
                        *vi -= h * qi;
                    }
                }
            }
            let nv = norm(&v);
            v.iter_mut().for_each(|x| *x /= nv);
            out.push(v);
        }
        out
    }

    #[test]
    fn a_step_orthonormalises_and_projects() {
        let cpu = CpuBackend::new();
        for (n, used) in [(40, 0), (37, 3), (BLOCK + 5, 4), (3 * BLOCK, 9)] {
            let capacity = used + 2;
            let q = orthonormal(n, used);
            let extra = vectors(n, used + 3);
            // u: once projected, so not quite orthogonal; z: anything.
            let (u_host, z_host) = (&extra[used + 1], &extra[used + 2]);
            let mut basis: Vec<CpuVector<Complex64>> =
                q.iter().map(|v| cpu.upload(v).unwrap()).collect();
            basis.extend((used..capacity).map(|_| cpu.zeros(n).unwrap()));
            let mut u = cpu.upload(u_host).unwrap();
            let z = cpu.upload(z_host).unwrap();
            let mut gs = cpu.zeros::<Complex64>(gs_extra(capacity) + 2).unwrap();
            cpu.gs_dots(&basis, used, &u, Some(&z), &mut gs).unwrap();
            let g = gs.as_slice().to_vec();
            // The inner products have the bits of dotc.
            for j in 0..used {
                assert_eq!(g[j], cpu.dotc(&basis[j], &u).unwrap());
                assert_eq!(g[used + 1 + j], cpu.dotc(&basis[j], &z).unwrap());
            }
            assert_eq!(g[used], cpu.dotc(&u, &u).unwrap());
            cpu.gs_update(&mut basis, used, &gs, &mut u, &z).unwrap();
            // The new vector is orthonormal to the basis, with rho its norm
            // before scaling.
            let qn = cpu.download(&basis[used]).unwrap();
            assert!((norm(&qn) - 1.0).abs() < 1e-13, "n {n} used {used}");
            for qj in &q {
                let h: Complex64 = qj.iter().zip(&qn).map(|(a, b)| a.conj() * b).sum();
                assert!(h.norm() < 1e-13, "n {n} used {used}: {h}");
            }
            // u = (z - Q Q^H z - q q^H z) / rho: orthogonal to the basis and q.
            let un = cpu.download(&u).unwrap();
            let rho = g[gs_extra(capacity) + 1].re;
            for qj in q.iter().chain(std::iter::once(&qn)) {
                let h: Complex64 = qj.iter().zip(&un).map(|(a, b)| a.conj() * b).sum();
                assert!(
                    h.norm() * rho < 1e-12 * norm(z_host),
                    "n {n} used {used}: {h}"
                );
            }
        }
    }

    #[test]
    fn combine_sums_the_basis_and_bad_shapes_are_errors() {
        let cpu = CpuBackend::new();
        let vs = vectors(50, 3);
        let basis: Vec<CpuVector<Complex64>> = vs.iter().map(|v| cpu.upload(v).unwrap()).collect();
        let y = [Complex64::new(1.0, 2.0), Complex64::new(-0.5, 0.0)];
        let mut w = cpu.zeros::<Complex64>(50).unwrap();
        cpu.gs_combine(&basis, &y, &mut w).unwrap();
        let got = cpu.download(&w).unwrap();
        for i in 0..50 {
            let want = y[0] * vs[0][i] + y[1] * vs[1][i];
            assert!((got[i] - want).norm() < 1e-14);
        }
        let mut gs = cpu.zeros::<Complex64>(gs_extra(3) + 2).unwrap();
        let u = cpu.zeros::<Complex64>(50).unwrap();
        let short = cpu.zeros::<Complex64>(49).unwrap();
        assert!(cpu.gs_dots(&basis, 4, &u, None, &mut gs).is_err());
        assert!(cpu.gs_dots(&basis, 1, &short, None, &mut gs).is_err());
        let mut small = cpu.zeros::<Complex64>(3).unwrap();
        assert!(cpu.gs_dots(&basis, 1, &u, None, &mut small).is_err());
        assert!(cpu.gs_combine(&basis, &[y[0]; 4], &mut w).is_err());
    }
}
