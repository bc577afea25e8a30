//! The bidomain time step's per-node work on the device (kernels in
//! `kernels-rs/src/device/bidomain.rs`, the per-node math shared with the CPU
//! through `gpuq_kernels::ionic`), so a time step keeps its state on the device.

use crate::backend::{dev, CudaBackend};
use crate::vector::CudaVector;
use cudarc::driver::PushKernelArg;
use gpuq_core::{check_same_len, Result};
use gpuq_kernels::ionic::BidomainStep;

impl CudaBackend {
    /// For every node k of `n = w.len()`: the membrane model's step
    /// (`p.model`, any [`gpuq_kernels::ionic::Membrane`]: the kernel takes its
    /// id and parameters) at `v = x[2k+1]`, `w[k]` updated, `rhs[2k] = 0` and
    /// `rhs[2k+1] = mass[k] (kappa v - chi I_ion + stim[k] current)`
    /// ([`gpuq_kernels::ionic::bidomain_rhs`]). One launch, O(n). Errors on
    /// mismatched lengths.
    pub fn bidomain_ionic(
        &self,
        p: &BidomainStep,
        x: &CudaVector<f64>,
        w: &mut CudaVector<f64>,
        mass: &CudaVector<f64>,
        stim: &CudaVector<f64>,
        rhs: &mut CudaVector<f64>,
    ) -> Result<()> {
        let n = w.len;
        check_same_len("bidomain_ionic (x)", 2 * n, x.len)?;
        check_same_len("bidomain_ionic (rhs)", 2 * n, rhs.len)?;
        check_same_len("bidomain_ionic (mass)", n, mass.len)?;
        check_same_len("bidomain_ionic (stim)", n, stim.len)?;
        if n == 0 {
            return Ok(());
        }
        let (model, m) = p.model.params();
        let f = self.function("bidomain_ionic_f64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n).arg(&model);
        for v in &m {
            b.arg(v);
        }
        b.arg(&p.cm)
            .arg(&p.chi)
            .arg(&p.dt)
            .arg(&p.kappa)
            .arg(&p.current)
            .arg(&x.buf)
            .arg(&mut w.buf)
            .arg(&mass.buf)
            .arg(&stim.buf)
            .arg(&mut rhs.buf);
        // SAFETY: the arguments match `bidomain_ionic_f64` in kernels-rs (n,
        // the model's u32 id, its eight f64 parameters, ...); x and
        // rhs hold 2 n f64, w, mass and stim n (checked above); w and rhs are
        // distinct buffers from the inputs (Rust's borrows).
        unsafe { b.launch(CudaBackend::cfg(self.grid_blocks(n))) }
            .map_err(dev("bidomain_ionic"))?;
        self.inner.stats.launch("bidomain_ionic");
        Ok(())
    }

    /// For every node k of `n = act.len()`: the activation time of a step from
    /// `t_old` to `t_old + dt` whose potential went from `v_old[k]` to `x[2k+1]`
    /// ([`gpuq_kernels::ionic::activation_time`]), then `v_old[k] = x[2k+1]`.
    /// One launch, O(n). Errors on mismatched lengths.
    pub fn bidomain_activation(
        &self,
        t_old: f64,
        dt: f64,
        threshold: f64,
        x: &CudaVector<f64>,
        v_old: &mut CudaVector<f64>,
        act: &mut CudaVector<f64>,
    ) -> Result<()> {
        let n = act.len;
        check_same_len("bidomain_activation (x)", 2 * n, x.len)?;
        check_same_len("bidomain_activation (v_old)", n, v_old.len)?;
        if n == 0 {
            return Ok(());
        }
        let f = self.function("bidomain_activation_f64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n)
            .arg(&t_old)
            .arg(&dt)
            .arg(&threshold)
            .arg(&x.buf)
            .arg(&mut v_old.buf)
            .arg(&mut act.buf);
        // SAFETY: the arguments match `bidomain_activation_f64` in kernels-rs; x
        // holds 2 n f64, v_old and act n (checked above), all distinct buffers.
        unsafe { b.launch(CudaBackend::cfg(self.grid_blocks(n))) }
            .map_err(dev("bidomain_activation"))?;
        self.inner.stats.launch("bidomain_activation");
        Ok(())
    }
}
