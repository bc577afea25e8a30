//! BiCGSTAB(l)'s steps with device-resident scalars: vector steps
//! `y = sc[a] x + sc[b] y` with slot indices as arguments (up to 16 pairs a
//! launch), dot products into slots followed by the quotients that use them,
//! and a one-thread kernel for the minimal-residual solve (slots in
//! [`gpuq_kernels::slots::bicgstabl`]; after a recorded breakdown the vector
//! steps do nothing), so a cycle needs no host round trip until the caller
//! reads `sc` at its end. Every slot index is checked
//! against `sc`'s length here: the kernels index unchecked.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, launch_1d};
use crate::slots::ONE_WARP;
use crate::vector::CudaVector;
use cudarc::driver::{DevicePtr, DevicePtrMut, DeviceRepr, PushKernelArg};
use gpuq_core::{check_indices, check_same_len, Error, Result, Scalar};
use gpuq_kernels::slots::bicgstabl::{len, Ratio, Ratios, FLAG, MAX_PAIRS, MAX_RATIOS};

/// [`Ratios`] as a kernel argument.
#[repr(transparent)]
struct RatiosArg(Ratios);

// SAFETY: a plain `repr(C)` struct of `u32`s, laid out as the kernels'
// `Ratios` parameter.
unsafe impl DeviceRepr for RatiosArg {}

/// The vector pairs of `axpby_slots_many_*`, as its by-value `Pairs` argument
/// (device addresses).
#[repr(C)]
struct PairsArg {
    x: [u64; MAX_PAIRS],
    y: [u64; MAX_PAIRS],
}

// SAFETY: `repr(C)` arrays of addresses, laid out as the kernels' `Pairs`.
unsafe impl DeviceRepr for PairsArg {}

/// `then` as the kernel's argument, after checking its length and that every
/// slot it names is below `len`.
fn ratios_arg(then: &[Ratio], len: usize) -> Result<RatiosArg> {
    let ratios = Ratios::new(then).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "dotc_into_slot: {} quotients (at most {MAX_RATIOS})",
            then.len()
        ))
    })?;
    for r in then {
        check_indices("dotc_into_slot (quotients)", len, &r.slots())?;
    }
    Ok(RatiosArg(ratios))
}

impl CudaBackend {
    /// The start of a solve: every slot zero but the constant 1, rho0 = 1 and
    /// omega = 1 (one launch of one warp, thread 0 writing; no upload).
    pub fn bicgstabl_start<T: Scalar>(&self, sc: &mut CudaVector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_start", len(l), sc.len)?;
        let f = self.function(&kernel::<T>("bicgstabl_start"))?;
        let n = sc.len;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mut sc.buf).arg(&n);
        // SAFETY: arguments match `bicgstabl_start_*`; sc holds `n` slots.
        unsafe { b.launch(ONE_WARP) }.map_err(dev("bicgstabl_start"))?;
        self.inner.stats.launch("bicgstabl_start");
        Ok(())
    }

    /// `sc[k] = x^H y`, then the guarded quotients `then` in order (at most
    /// [`MAX_RATIOS`]; see `gpuq_kernels::slots::bicgstabl::Ratio`): one kernel
    /// (2 n reads) whose last block writes the slot and computes the
    /// quotients; no download.
    pub fn dotc_into_slot<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        y: &CudaVector<T>,
        sc: &mut CudaVector<T>,
        k: usize,
        then: &[Ratio],
    ) -> Result<()> {
        check_same_len("dotc_into_slot", x.len, y.len)?;
        check_indices("dotc_into_slot", sc.len, &[k, FLAG])?;
        let ratios = ratios_arg(then, sc.len)?;
        let n = x.len;
        let blocks = self.reduction_blocks(n);
        let f = self.function(&kernel::<T>("dot_ratios"))?;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&x.buf)
                .arg(&y.buf)
                .arg(&mut sc.buf)
                .arg(&k)
                .arg(&ratios);
            reduce.push(&mut b);
            // SAFETY: arguments match `dot_ratios_*`: x and y hold n elements,
            // k and every slot the ratios name are inside sc (checked); the
            // scratch holds one partial per block of the grid and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("dot_ratios"))?;
            self.inner.stats.launch("dot_ratios");
            Ok(())
        })
    }

    /// `y = sc[ka] x + sc[kb] y` (3 n element moves), or nothing once
    /// `sc[FLAG]` records a breakdown.
    pub fn axpby_slots<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        ka: usize,
        x: &CudaVector<T>,
        kb: usize,
        y: &mut CudaVector<T>,
    ) -> Result<()> {
        check_same_len("axpby_slots", x.len, y.len)?;
        check_indices("axpby_slots", sc.len, &[ka, kb, FLAG])?;
        launch_1d!(self, T, "axpby_slots", y.len, |b| {
            b.arg(&sc.buf).arg(&ka).arg(&x.buf).arg(&kb).arg(&mut y.buf);
        })
    }

    /// `ys[p] = sc[ka] xs[p] + sc[kb] ys[p]` for every pair, or nothing once
    /// `sc[FLAG]` records a breakdown: one launch per [`MAX_PAIRS`] pairs, 3 n
    /// element moves a pair.
    pub fn axpby_slots_many<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        ka: usize,
        xs: &[CudaVector<T>],
        kb: usize,
        ys: &mut [CudaVector<T>],
    ) -> Result<()> {
        check_same_len("axpby_slots_many (pairs)", xs.len(), ys.len())?;
        check_indices("axpby_slots_many", sc.len, &[ka, kb, FLAG])?;
        let Some(n) = ys.first().map(|y| y.len) else {
            return Ok(());
        };
        for (x, y) in xs.iter().zip(ys.iter()) {
            check_same_len("axpby_slots_many", n, x.len)?;
            check_same_len("axpby_slots_many", n, y.len)?;
        }
        if n == 0 {
            return Ok(());
        }
        let f = self.function(&kernel::<T>("axpby_slots_many"))?;
        for (xc, yc) in xs.chunks(MAX_PAIRS).zip(ys.chunks_mut(MAX_PAIRS)) {
            let mut pairs = PairsArg {
                x: [0; MAX_PAIRS],
                y: [0; MAX_PAIRS],
            };
            for (p, x) in xc.iter().enumerate() {
                pairs.x[p] = x.buf.device_ptr(&self.inner.stream).0;
            }
            for (p, y) in yc.iter_mut().enumerate() {
                pairs.y[p] = y.buf.device_ptr_mut(&self.inner.stream).0;
            }
            let count = xc.len() as u32;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&sc.buf)
                .arg(&ka)
                .arg(&kb)
                .arg(&count)
                .arg(&pairs);
            // SAFETY: arguments match `axpby_slots_many_*`: `count` pairs of
            // vectors of n elements; every y is borrowed mutably, so no y
            // aliases another vector of the call; ka, kb and FLAG are inside sc.
            unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("axpby_slots_many"))?;
            self.inner.stats.launch("axpby_slots_many");
        }
        Ok(())
    }

    /// One thread: the minimal-residual solve of a BiCGSTAB(l) cycle from the
    /// tau and gamma' slots (see `bicgstabl_mr_*`).
    pub fn bicgstabl_mr<T: Scalar>(&self, sc: &mut CudaVector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_mr", len(l), sc.len)?;
        let f = self.function(&kernel::<T>("bicgstabl_mr"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mut sc.buf).arg(&l);
        // SAFETY: arguments match `bicgstabl_mr_*`; sc holds the len(l) slots
        // the kernel indexes.
        unsafe { b.launch(ONE_WARP) }.map_err(dev("bicgstabl_mr"))?;
        self.inner.stats.launch("bicgstabl_mr");
        Ok(())
    }
}
