//! TFQMR's steps with device-resident scalars: the kernels read alpha, beta,
//! theta^2 and eta from a small device array (`sc`, slots in
//! [`gpuq_kernels::slots::tfqmr`]), and the last blocks of the reductions of
//! sigma and of each half-step's ||w||^2 update it, so an iteration takes no
//! host value and needs no host round trip until the caller downloads `sc` at
//! its end.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, launch_1d, Dest, FirstPass};
use crate::vector::CudaVector;
use cudarc::driver::PushKernelArg;
use gpuq_core::{Result, Scalar};
use gpuq_kernels::slots::tfqmr::{LEN, RHO_NEXT};

impl CudaBackend {
    /// The start of a cycle: every slot zero but `sc[TAU2] = tau2` (one
    /// launch of one warp, thread 0 writing; no upload).
    pub fn tfqmr_start<T: Scalar>(&self, sc: &mut CudaVector<T>, tau2: T::Real) -> Result<()> {
        Self::check_slots("tfqmr_start", LEN, sc, &[])?;
        self.set_slots("tfqmr_start", sc, &[tau2])
    }

    /// `sc[SIGMA] = rstar^H v` and `sc[RHO] = sc[RHO_NEXT]`: one kernel (2 n
    /// reads) whose last block finishes the dot product and moves rho.
    pub fn tfqmr_sigma<T: Scalar>(
        &self,
        rstar: &CudaVector<T>,
        v: &CudaVector<T>,
        sc: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("tfqmr_sigma", LEN, sc, &[rstar.len, v.len])?;
        let n = rstar.len;
        let blocks = self.reduction_blocks(n);
        let f = self.function(&kernel::<T>("tfqmr_sigma"))?;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n).arg(&rstar.buf).arg(&v.buf).arg(&mut sc.buf);
            reduce.push(&mut b);
            // SAFETY: arguments match `tfqmr_sigma_*`; both vectors hold n
            // elements, sc LEN; the scratch holds one partial per block of this
            // grid and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("tfqmr_sigma"))?;
            self.inner.stats.launch("tfqmr_sigma");
            Ok(())
        })
    }

    /// `u_odd = u_even - alpha v` (3 n element moves).
    pub fn tfqmr_odd<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        u_even: &CudaVector<T>,
        v: &CudaVector<T>,
        u_odd: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("tfqmr_odd", LEN, sc, &[u_even.len, v.len, u_odd.len])?;
        launch_1d!(self, T, "tfqmr_odd", u_odd.len, |b| {
            b.arg(&sc.buf)
                .arg(&u_even.buf)
                .arg(&v.buf)
                .arg(&mut u_odd.buf);
        })
    }

    /// One half-step (`w -= alpha amu`, `md = mu + coef md`, 6 n element moves)
    /// in one kernel whose last block finishes the new ||w||^2 and advances
    /// theta^2, tau^2 and eta in `sc`.
    pub fn tfqmr_half<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        amu: &CudaVector<T>,
        mu: &CudaVector<T>,
        w: &mut CudaVector<T>,
        md: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("tfqmr_half", LEN, sc, &[amu.len, mu.len, w.len, md.len])?;
        let n = w.len;
        let blocks = self.grid_blocks(n);
        let f = self.function(&kernel::<T>("tfqmr_half"))?;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&mut sc.buf)
                .arg(&amu.buf)
                .arg(&mu.buf)
                .arg(&mut w.buf)
                .arg(&mut md.buf);
            reduce.push(&mut b);
            // SAFETY: arguments match `tfqmr_half_*`; every vector holds n
            // elements, sc LEN; w and md are borrowed mutably, so no input
            // aliases them (mu may alias u, never w or md); the scratch holds one
            // partial per block of the grid and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("tfqmr_half"))?;
            self.inner.stats.launch("tfqmr_half");
            Ok(())
        })
    }

    /// `x = x_in + eta md`, or `x = x + eta md` when `x_in` is `None` (3 n
    /// element moves).
    pub fn tfqmr_x<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        md: &CudaVector<T>,
        x_in: Option<&CudaVector<T>>,
        x: &mut CudaVector<T>,
    ) -> Result<()> {
        let xl = x_in.map_or(x.len, |v| v.len);
        Self::check_slots("tfqmr_x", LEN, sc, &[md.len, x.len, xl])?;
        let null = 0u64;
        launch_1d!(self, T, "tfqmr_x", x.len, |b| {
            b.arg(&sc.buf).arg(&md.buf);
            match x_in {
                Some(v) => b.arg(&v.buf),
                None => b.arg(&null),
            };
            b.arg(&mut x.buf);
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
        Self::check_slots("tfqmr_rho", LEN, sc, &[rstar.len, w.len])?;
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
        Self::check_slots("tfqmr_even", LEN, sc, &[w.len, u_odd.len, u_even.len])?;
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
        Self::check_slots("tfqmr_v", LEN, sc, &[amu_even.len, amu_odd.len, v.len])?;
        launch_1d!(self, T, "tfqmr_v", v.len, |b| {
            b.arg(&sc.buf)
                .arg(&amu_even.buf)
                .arg(&amu_odd.buf)
                .arg(&mut v.buf);
        })
    }
}
