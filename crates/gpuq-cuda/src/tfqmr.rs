//! TFQMR's steps with device-resident scalars: the kernels read alpha, beta,
//! theta^2 and eta from a small device array (`sc`, slots in
//! [`gpuq_kernels::slots::tfqmr`]), and the second passes of sigma and of each
//! half-step's ||w||^2 update it, so an iteration takes no host value and needs
//! no host round trip until the caller downloads `sc` at its end.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, launch_1d, Dest, FirstPass};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Result, Scalar};
use gpuq_kernels::slots::tfqmr::{LEN, RHO_NEXT};

/// One block of one warp: the second passes that update `sc`.
const ONE_WARP: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (32, 1, 1),
    shared_mem_bytes: 0,
};

impl CudaBackend {
    /// Errors unless `sc` has the TFQMR slot count and the vectors agree in length.
    fn check_tfqmr<T: Scalar>(op: &'static str, sc: &CudaVector<T>, lens: &[usize]) -> Result<()> {
        check_same_len(op, LEN, sc.len)?;
        for &len in lens {
            check_same_len(op, lens[0], len)?;
        }
        Ok(())
    }

    /// Runs a first pass writing `blocks` partials into the reduction scratch,
    /// then the one-warp second pass `second(m, partials, sc)` that updates `sc`.
    fn tfqmr_reduce<T: Scalar>(
        &self,
        blocks: u32,
        first_pass: impl FnOnce(&mut CudaSlice<u8>) -> Result<()>,
        second: &'static str,
        sc: &mut CudaVector<T>,
    ) -> Result<()> {
        let mut scratch = self.inner.scratch.lock().unwrap_or_else(|e| e.into_inner());
        first_pass(&mut scratch)?;
        let f2 = self.function(&kernel::<T>(second))?;
        let m = blocks as usize;
        let mut b = self.inner.stream.launch_builder(&f2);
        b.arg(&m).arg(&mut *scratch).arg(&mut sc.buf);
        // SAFETY: arguments match the second-pass kernel (`tfqmr_sigma_*`,
        // `tfqmr_scalars_*`): `m` partials of T written by the first pass, and sc
        // holds LEN slots.
        unsafe { b.launch(ONE_WARP) }.map_err(dev(second))?;
        self.inner.stats.launch(second);
        Ok(())
    }

    /// `sc[SIGMA] = rstar^H v` and `sc[RHO] = sc[RHO_NEXT]`: the dot kernels'
    /// first pass (2 n reads) and a one-warp second pass.
    pub fn tfqmr_sigma<T: Scalar>(
        &self,
        rstar: &CudaVector<T>,
        v: &CudaVector<T>,
        sc: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_sigma", sc, &[rstar.len, v.len])?;
        let n = rstar.len;
        // The grid of the BLAS-1 reductions (`reduce_blas1`).
        let blocks = self.grid_blocks(n).div_ceil(2);
        let f1 = self.function(&kernel::<T>("dot_partials"))?;
        let conj = 1u32;
        self.tfqmr_reduce(
            blocks,
            |partials| {
                let mut b = self.inner.stream.launch_builder(&f1);
                b.arg(&n)
                    .arg(&rstar.buf)
                    .arg(&v.buf)
                    .arg(&conj)
                    .arg(partials);
                // SAFETY: arguments match `dot_partials_*`; both vectors hold n
                // elements; the scratch holds one element per block of this grid.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("reduction pass 1"))?;
                self.inner.stats.launch("reduce_partials");
                Ok(())
            },
            "tfqmr_sigma",
            sc,
        )
    }

    /// `u_odd = u_even - alpha v` (3 n element moves).
    pub fn tfqmr_odd<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        u_even: &CudaVector<T>,
        v: &CudaVector<T>,
        u_odd: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_odd", sc, &[u_even.len, v.len, u_odd.len])?;
        launch_1d!(self, T, "tfqmr_odd", u_odd.len, |b| {
            b.arg(&sc.buf)
                .arg(&u_even.buf)
                .arg(&v.buf)
                .arg(&mut u_odd.buf);
        })
    }

    /// One half-step (`w -= alpha amu`, `md = mu + coef md`, 6 n element moves,
    /// with the partials of the new ||w||^2) and the one-warp second pass that
    /// advances theta^2, tau^2 and eta in `sc`.
    pub fn tfqmr_half<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        amu: &CudaVector<T>,
        mu: &CudaVector<T>,
        w: &mut CudaVector<T>,
        md: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_half", sc, &[amu.len, mu.len, w.len, md.len])?;
        let n = w.len;
        let blocks = self.grid_blocks(n);
        let f = self.function(&kernel::<T>("tfqmr_half"))?;
        // The kernel reads sc while the second pass writes it: two launches in
        // stream order. The kernel gets sc's raw address because the second pass
        // holds the buffer's mutable borrow.
        let sc_ptr: u64 = {
            let (ptr, _record) = sc.buf.device_ptr(&self.inner.stream);
            ptr
        };
        self.tfqmr_reduce(
            blocks,
            |partials| {
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&n)
                    .arg(&sc_ptr)
                    .arg(&amu.buf)
                    .arg(&mu.buf)
                    .arg(&mut w.buf)
                    .arg(&mut md.buf)
                    .arg(partials);
                // SAFETY: arguments match `tfqmr_half_*`; every vector holds n
                // elements; w and md are borrowed mutably, so no input aliases
                // them (mu may alias u, never w or md); the scratch holds one
                // element per block of the grid.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("tfqmr_half"))?;
                self.inner.stats.launch("tfqmr_half");
                Ok(())
            },
            "tfqmr_scalars",
            sc,
        )
    }

    /// `x = x + eta md` (3 n element moves).
    pub fn tfqmr_x<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        md: &CudaVector<T>,
        x: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_x", sc, &[md.len, x.len])?;
        launch_1d!(self, T, "tfqmr_x", x.len, |b| {
            b.arg(&sc.buf).arg(&md.buf).arg(&mut x.buf);
        })
    }

    /// `sc[RHO_NEXT] = rstar^H w`: the BLAS-1 dot with its result written into
    /// the slot (2 n reads).
    pub fn tfqmr_rho<T: Scalar>(
        &self,
        rstar: &CudaVector<T>,
        w: &CudaVector<T>,
        sc: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_rho", sc, &[rstar.len, w.len])?;
        self.reduce_blas1::<T, T>(
            w.len,
            FirstPass::Dot(&rstar.buf, &w.buf, 1),
            Dest::Device(&mut sc.buf, RHO_NEXT * std::mem::size_of::<T>()),
        )
    }

    /// `u_even = w + beta u_odd` (3 n element moves).
    pub fn tfqmr_even<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        w: &CudaVector<T>,
        u_odd: &CudaVector<T>,
        u_even: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_even", sc, &[w.len, u_odd.len, u_even.len])?;
        launch_1d!(self, T, "tfqmr_even", u_even.len, |b| {
            b.arg(&sc.buf)
                .arg(&w.buf)
                .arg(&u_odd.buf)
                .arg(&mut u_even.buf);
        })
    }

    /// `v = amu_even + beta (amu_odd + beta v)` (4 n element moves).
    pub fn tfqmr_v<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        amu_even: &CudaVector<T>,
        amu_odd: &CudaVector<T>,
        v: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_tfqmr("tfqmr_v", sc, &[amu_even.len, amu_odd.len, v.len])?;
        launch_1d!(self, T, "tfqmr_v", v.len, |b| {
            b.arg(&sc.buf)
                .arg(&amu_even.buf)
                .arg(&amu_odd.buf)
                .arg(&mut v.buf);
        })
    }
}
