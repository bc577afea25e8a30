//! BiCGSTAB's fused steps with device-resident scalars: the kernels read alpha,
//! beta and omega from a small device array (`sc`, slots in
//! [`gpuq_kernels::slots::bicgstab`]) that reductions write into, so an iteration
//! needs no host round trip until the caller downloads `sc` once at its end.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, Dest, FirstPass, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Result, Scalar};
use gpuq_kernels::slots::bicgstab::{LEN, RHO, RNORM2, SNORM2, TS, TT};

impl CudaBackend {
    fn check_slot<T: Scalar>(op: &'static str, sc: &CudaVector<T>, slot: usize) -> Result<()> {
        check_same_len(op, LEN, sc.len)?;
        if slot >= LEN {
            return Err(gpuq_core::Error::InvalidArgument(format!(
                "{op}: slot {slot} is outside the {LEN}-slot scalar array"
            )));
        }
        Ok(())
    }

    /// `sc[slot] = x^H y` on the device: no download, no wait. Same kernels and
    /// bits as [`gpuq_core::Backend::dotc`]; reads 2 n elements.
    pub fn dotc_to_slot<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        y: &CudaVector<T>,
        sc: &mut CudaVector<T>,
        slot: usize,
    ) -> Result<()> {
        check_same_len("dotc_to_slot", x.len, y.len)?;
        Self::check_slot("dotc_to_slot", sc, slot)?;
        let at = slot * std::mem::size_of::<T>();
        if x.len == 0 {
            return self.memset_slot::<T>(sc, at);
        }
        self.reduce_blas1::<T, T>(
            x.len,
            FirstPass::Dot(&x.buf, &y.buf, 1),
            Dest::Device(&mut sc.buf, at),
        )
    }

    /// Zeroes one slot (the result of a reduction over no elements).
    fn memset_slot<T: Scalar>(&self, sc: &mut CudaVector<T>, at: usize) -> Result<()> {
        self.memset_slots::<T>(sc, at, 1)
    }

    /// Zeroes `count` slots from byte offset `at`.
    fn memset_slots<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        at: usize,
        count: usize,
    ) -> Result<()> {
        let zero = vec![0u8; count * std::mem::size_of::<T>()];
        let mut slot = sc.buf.slice_mut(at..at + zero.len());
        self.inner
            .stream
            .memcpy_htod(&zero, &mut slot)
            .map_err(dev("memset_slot"))?;
        self.inner.stats.upload(zero.len());
        Ok(())
    }

    /// p = r (`first`) or p = r + beta (p - omega v), beta and omega from the
    /// previous iteration's scalars in `sc`. One kernel, 4 n element moves.
    pub fn bicgstab_p<T: Scalar>(
        &self,
        first: bool,
        sc: &CudaVector<T>,
        r: &CudaVector<T>,
        v: &CudaVector<T>,
        p: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_p", sc, 0)?;
        check_same_len("bicgstab_p", r.len, v.len)?;
        check_same_len("bicgstab_p", r.len, p.len)?;
        let n = r.len;
        if n == 0 {
            return Ok(());
        }
        let f = self.function(&kernel::<T>("bicgstab_p"))?;
        let first = u32::from(first);
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n)
            .arg(&first)
            .arg(&sc.buf)
            .arg(&r.buf)
            .arg(&v.buf)
            .arg(&mut p.buf);
        // SAFETY: arguments match `bicgstab_p_*`; r, v, p hold n elements, sc LEN;
        // p is borrowed mutably, so it aliases none of the others.
        unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("bicgstab_p"))?;
        self.inner.stats.launch("bicgstab_p");
        Ok(())
    }

    /// s = r - alpha v in place of r (alpha = rho / r0v from `sc`, zero when r0v
    /// vanished), and `sc[SNORM2] = ||s||^2`. One kernel (3 n element moves) and
    /// the reduction's second pass.
    pub fn bicgstab_s<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        v: &CudaVector<T>,
        r: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_s", sc, SNORM2)?;
        check_same_len("bicgstab_s", v.len, r.len)?;
        let n = r.len;
        let at = SNORM2 * std::mem::size_of::<T>();
        if n == 0 {
            return self.memset_slot::<T>(sc, at);
        }
        let f = self.function(&kernel::<T>("bicgstab_s"))?;
        let blocks = self.grid_blocks(n);
        // The kernel reads sc while the second pass writes one slot of it: two
        // launches in stream order, so the reads come first. The kernel gets sc's
        // raw address because the second pass holds the buffer's mutable borrow.
        let sc_ptr = self.slots_ptr(sc);
        self.reduce_into::<T::Real>(
            blocks,
            |partials| {
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&n)
                    .arg(&sc_ptr)
                    .arg(&v.buf)
                    .arg(&mut r.buf)
                    .arg(partials);
                // SAFETY: arguments match `bicgstab_s_*`; v and r hold n elements
                // and do not alias (distinct borrows); the scratch has one slot per
                // block of the grid.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("bicgstab_s"))?;
                self.inner.stats.launch("bicgstab_s");
                Ok(())
            },
            Dest::Device(&mut sc.buf, at),
        )
    }

    /// Runs `first_pass` (which writes two segments of `stride` partials of T
    /// into the reduction scratch) and sums each segment into `sc[slot]` and
    /// `sc[slot + 1]` (one second-pass launch of two warps). `stride` must be at
    /// most the largest grid (the scratch holds two segments of it).
    fn reduce_pair_to_slots<T: Scalar>(
        &self,
        stride: usize,
        first_pass: impl FnOnce(&mut CudaSlice<u8>) -> Result<()>,
        sc: &mut CudaVector<T>,
        slot: usize,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let mut scratch = self.inner.scratch.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(2 * stride * size <= scratch.len());
        first_pass(&mut scratch)?;
        let f2 = self.function(&kernel::<T>("reduce_segments"))?;
        let mut out = sc.buf.slice_mut(slot * size..(slot + 2) * size);
        let mut b = self.inner.stream.launch_builder(&f2);
        b.arg(&stride).arg(&mut *scratch).arg(&mut out);
        let two_warps = LaunchConfig {
            grid_dim: (2, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match `reduce_segments_*`: two segments of `stride`
        // partials written by the first pass, two slots of sc to write.
        unsafe { b.launch(two_warps) }.map_err(dev("reduction pass 2"))?;
        self.inner.stats.launch("reduce_segments");
        Ok(())
    }

    /// `sc[TS] = t^H s` and `sc[TT] = ||t||^2` (zero imaginary part) in one
    /// sweep over t and s: one kernel (2 n reads) and one second pass.
    pub fn bicgstab_tt<T: Scalar>(
        &self,
        t: &CudaVector<T>,
        s: &CudaVector<T>,
        sc: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_tt", sc, TT)?;
        check_same_len("bicgstab_tt", t.len, s.len)?;
        let n = t.len;
        let size = std::mem::size_of::<T>();
        if n == 0 {
            return self.memset_slots::<T>(sc, TS * size, 2);
        }
        let f = self.function(&kernel::<T>("bicgstab_tt"))?;
        let blocks = self.grid_blocks(n);
        let stride = blocks as usize;
        self.reduce_pair_to_slots(
            stride,
            |partials| {
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&n).arg(&t.buf).arg(&s.buf).arg(partials).arg(&stride);
                // SAFETY: arguments match `bicgstab_tt_*`; t and s hold n
                // elements; the scratch holds two segments of `stride` = grid
                // partials.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("bicgstab_tt"))?;
                self.inner.stats.launch("bicgstab_tt");
                Ok(())
            },
            sc,
            TS,
        )
    }

    /// x = x + alpha phat + omega shat and r = s - omega t (r holds s; `shat`
    /// `None` means shat is s itself), alpha and omega from `sc` (omega zero when
    /// ||s||^2 <= `target2`); then `sc[RHO] = r0^H r` and `sc[RNORM2] = ||r||^2`
    /// of the new r. One kernel (8 n element moves, 7 without `shat`) and one
    /// second pass.
    #[allow(clippy::too_many_arguments)]
    pub fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        target2: T::Real,
        phat: &CudaVector<T>,
        shat: Option<&CudaVector<T>>,
        t: &CudaVector<T>,
        r0: &CudaVector<T>,
        x: &mut CudaVector<T>,
        r: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_xr", sc, RNORM2)?;
        for len in [
            phat.len,
            t.len,
            r0.len,
            x.len,
            shat.map_or(r.len, |s| s.len),
        ] {
            check_same_len("bicgstab_xr", r.len, len)?;
        }
        let n = r.len;
        let size = std::mem::size_of::<T>();
        if n == 0 {
            return self.memset_slots::<T>(sc, RHO * size, 2);
        }
        let f = self.function(&kernel::<T>("bicgstab_xr"))?;
        let s_in_r = u32::from(shat.is_none());
        // Without a preconditioner the kernel reads s from r; `shat` then only
        // fills the argument slot (t is a valid pointer it never reads there).
        let shat_buf = shat.map_or(&t.buf, |s| &s.buf);
        let blocks = self.grid_blocks(n);
        let stride = blocks as usize;
        // The kernel reads sc while the second pass writes two slots of it: two
        // launches in stream order, so the reads come first. The kernel gets sc's
        // raw address because the second pass holds the buffer's mutable borrow.
        let sc_ptr = self.slots_ptr(sc);
        let target2 = ScalarArg::of(target2);
        self.reduce_pair_to_slots(
            stride,
            |partials| {
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&n).arg(&sc_ptr);
                target2.push_re(&mut b);
                b.arg(&phat.buf)
                    .arg(shat_buf)
                    .arg(&s_in_r)
                    .arg(&t.buf)
                    .arg(&r0.buf)
                    .arg(&mut x.buf)
                    .arg(&mut r.buf)
                    .arg(partials)
                    .arg(&stride);
                // SAFETY: arguments match `bicgstab_xr_*`; every vector holds n
                // elements; x and r are borrowed mutably, so no input aliases
                // them; the scratch holds two segments of `stride` = grid
                // partials.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("bicgstab_xr"))?;
                self.inner.stats.launch("bicgstab_xr");
                Ok(())
            },
            sc,
            RHO,
        )
    }
}
