//! The per-node steps of a bidomain time step, as a backend trait whose
//! default bodies use only core backend operations (download, compute on the
//! host, upload), so any backend runs the simulation at once; the CPU backend
//! overrides them with Rayon passes over its vectors and the CUDA backend with
//! its kernels (`CudaBackend::bidomain_ionic`, `bidomain_activation`). All
//! three run the same per-node arithmetic, [`gpuq_kernels::ionic`].

use gpuq_core::{check_same_len, Backend, Result};
use gpuq_cpu::CpuBackend;
use gpuq_kernels::ionic::{activation_time, bidomain_rhs, BidomainStep};
use gpuq_krylov::KrylovBackend;
use rayon::prelude::*;

/// The per-node work of a bidomain step on a backend.
pub trait BidomainKernels: KrylovBackend {
    /// For every node k of `n = w.len()`, with `v = x[2k+1]`: the ionic step,
    /// `w[k]` updated, `rhs[2k] = 0`, `rhs[2k+1] = mass[k] (kappa v - chi I_ion +
    /// stim[k] current)`. O(n). Default: three downloads, the host loop, two
    /// uploads. Errors on mismatched lengths.
    fn bidomain_ionic(
        &self,
        p: &BidomainStep,
        x: &Self::Vector<f64>,
        w: &mut Self::Vector<f64>,
        mass: &Self::Vector<f64>,
        stim: &Self::Vector<f64>,
        rhs: &mut Self::Vector<f64>,
    ) -> Result<()> {
        ionic_round_trip(self, p, x, w, mass, stim, rhs)
    }

    /// For every node k of `n = act.len()`: the activation time of the step
    /// from `t_old` to `t_old + dt` that took the potential from `v_old[k]` to
    /// `x[2k+1]`, then `v_old[k] = x[2k+1]`. O(n). Default: three downloads,
    /// the host loop, two uploads. Errors on mismatched lengths.
    fn bidomain_activation(
        &self,
        t_old: f64,
        dt: f64,
        threshold: f64,
        x: &Self::Vector<f64>,
        v_old: &mut Self::Vector<f64>,
        act: &mut Self::Vector<f64>,
    ) -> Result<()> {
        activation_round_trip(self, t_old, dt, threshold, x, v_old, act)
    }
}

/// The default [`BidomainKernels::bidomain_ionic`]: downloads, the host pass,
/// uploads.
fn ionic_round_trip<B: Backend>(
    backend: &B,
    p: &BidomainStep,
    x: &B::Vector<f64>,
    w: &mut B::Vector<f64>,
    mass: &B::Vector<f64>,
    stim: &B::Vector<f64>,
    rhs: &mut B::Vector<f64>,
) -> Result<()> {
    let (xh, mut wh) = (backend.download(x)?, backend.download(w)?);
    let (mh, sh) = (backend.download(mass)?, backend.download(stim)?);
    let mut bh = vec![0.0; 2 * wh.len()];
    ionic_host(p, &xh, &mut wh, &mh, &sh, &mut bh)?;
    *w = backend.upload(&wh)?;
    *rhs = backend.upload(&bh)?;
    Ok(())
}

/// The default [`BidomainKernels::bidomain_activation`]: downloads, the host
/// pass, uploads.
fn activation_round_trip<B: Backend>(
    backend: &B,
    t_old: f64,
    dt: f64,
    threshold: f64,
    x: &B::Vector<f64>,
    v_old: &mut B::Vector<f64>,
    act: &mut B::Vector<f64>,
) -> Result<()> {
    let (xh, mut vh) = (backend.download(x)?, backend.download(v_old)?);
    let mut ah = backend.download(act)?;
    activation_host(t_old, dt, threshold, &xh, &mut vh, &mut ah)?;
    *v_old = backend.upload(&vh)?;
    *act = backend.upload(&ah)?;
    Ok(())
}

/// The ionic pass over host slices (Rayon). O(n).
fn ionic_host(
    p: &BidomainStep,
    x: &[f64],
    w: &mut [f64],
    mass: &[f64],
    stim: &[f64],
    rhs: &mut [f64],
) -> Result<()> {
    let n = w.len();
    check_same_len("bidomain_ionic (x)", 2 * n, x.len())?;
    check_same_len("bidomain_ionic (rhs)", 2 * n, rhs.len())?;
    check_same_len("bidomain_ionic (mass)", n, mass.len())?;
    check_same_len("bidomain_ionic (stim)", n, stim.len())?;
    rhs.par_chunks_mut(2)
        .zip(w.par_iter_mut())
        .enumerate()
        .for_each(|(k, (b, w))| {
            let (bv, w_new) = bidomain_rhs(p, x[2 * k + 1], *w, mass[k], stim[k]);
            *w = w_new;
            b[0] = 0.0;
            b[1] = bv;
        });
    Ok(())
}

/// The activation pass over host slices (Rayon). O(n).
fn activation_host(
    t_old: f64,
    dt: f64,
    threshold: f64,
    x: &[f64],
    v_old: &mut [f64],
    act: &mut [f64],
) -> Result<()> {
    let n = act.len();
    check_same_len("bidomain_activation (x)", 2 * n, x.len())?;
    check_same_len("bidomain_activation (v_old)", n, v_old.len())?;
    act.par_iter_mut()
        .zip(v_old.par_iter_mut())
        .enumerate()
        .for_each(|(k, (a, v))| {
            let new = x[2 * k + 1];
            *a = activation_time(*a, t_old, dt, threshold, *v, new);
            *v = new;
        });
    Ok(())
}

impl BidomainKernels for CpuBackend {
    fn bidomain_ionic(
        &self,
        p: &BidomainStep,
        x: &Self::Vector<f64>,
        w: &mut Self::Vector<f64>,
        mass: &Self::Vector<f64>,
        stim: &Self::Vector<f64>,
        rhs: &mut Self::Vector<f64>,
    ) -> Result<()> {
        ionic_host(
            p,
            x.as_slice(),
            w.as_mut_slice(),
            mass.as_slice(),
            stim.as_slice(),
            rhs.as_mut_slice(),
        )
    }

    fn bidomain_activation(
        &self,
        t_old: f64,
        dt: f64,
        threshold: f64,
        x: &Self::Vector<f64>,
        v_old: &mut Self::Vector<f64>,
        act: &mut Self::Vector<f64>,
    ) -> Result<()> {
        activation_host(
            t_old,
            dt,
            threshold,
            x.as_slice(),
            v_old.as_mut_slice(),
            act.as_mut_slice(),
        )
    }
}

#[cfg(feature = "cuda")]
impl BidomainKernels for gpuq_cuda::CudaBackend {
    fn bidomain_ionic(
        &self,
        p: &BidomainStep,
        x: &Self::Vector<f64>,
        w: &mut Self::Vector<f64>,
        mass: &Self::Vector<f64>,
        stim: &Self::Vector<f64>,
        rhs: &mut Self::Vector<f64>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bidomain_ionic(self, p, x, w, mass, stim, rhs)
    }

    fn bidomain_activation(
        &self,
        t_old: f64,
        dt: f64,
        threshold: f64,
        x: &Self::Vector<f64>,
        v_old: &mut Self::Vector<f64>,
        act: &mut Self::Vector<f64>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bidomain_activation(self, t_old, dt, threshold, x, v_old, act)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_kernels::ionic::AlievPanfilov;

    /// The default bodies (the round trips any new backend gets) and the CPU
    /// overrides give the same bits, and both check lengths.
    #[test]
    fn round_trips_match_the_cpu_passes() {
        let cpu = CpuBackend::new();
        let n = 64;
        let x: Vec<f64> = (0..2 * n).map(|i| -90.0 + 1.7 * i as f64).collect();
        let p = BidomainStep {
            model: AlievPanfilov::STANDARD.into(),
            cm: 0.01,
            chi: 140.0,
            dt: 0.05,
            kappa: 28.0,
            current: 200.0,
        };
        let up = |v: &[f64]| cpu.upload(v).unwrap();
        let xv = up(&x);
        let (mass, stim) = (up(&vec![0.01; n]), up(&vec![1.0; n]));
        let (mut w1, mut r1) = (up(&vec![0.2; n]), cpu.zeros(2 * n).unwrap());
        let (mut w2, mut r2) = (up(&vec![0.2; n]), cpu.zeros(2 * n).unwrap());
        cpu.bidomain_ionic(&p, &xv, &mut w1, &mass, &stim, &mut r1)
            .unwrap();
        ionic_round_trip(&cpu, &p, &xv, &mut w2, &mass, &stim, &mut r2).unwrap();
        assert_eq!(cpu.download(&w1).unwrap(), cpu.download(&w2).unwrap());
        assert_eq!(cpu.download(&r1).unwrap(), cpu.download(&r2).unwrap());
        let (mut v1, mut a1) = (up(&vec![-60.0; n]), up(&vec![f64::NAN; n]));
        let (mut v2, mut a2) = (up(&vec![-60.0; n]), up(&vec![f64::NAN; n]));
        cpu.bidomain_activation(1.0, 0.05, -40.0, &xv, &mut v1, &mut a1)
            .unwrap();
        activation_round_trip(&cpu, 1.0, 0.05, -40.0, &xv, &mut v2, &mut a2).unwrap();
        let (h1, h2) = (cpu.download(&a1).unwrap(), cpu.download(&a2).unwrap());
        assert!(h1.iter().zip(&h2).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(h1.iter().any(|t| t.is_nan()) && h1.iter().any(|t| !t.is_nan()));
        let v_new: Vec<f64> = x.iter().skip(1).step_by(2).copied().collect();
        assert_eq!(cpu.download(&v1).unwrap(), v_new);
        let short = up(&x[..10]);
        assert!(cpu
            .bidomain_ionic(&p, &short, &mut w1, &mass, &stim, &mut r1)
            .is_err());
        assert!(ionic_round_trip(&cpu, &p, &short, &mut w2, &mass, &stim, &mut r2).is_err());
        let late = activation_round_trip(&cpu, 1.0, 0.05, -40.0, &short, &mut v2, &mut a2);
        assert!(late.is_err());
    }
}
