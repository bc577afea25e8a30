//! BiCGSTAB's fused steps with device-resident scalars: the kernels read alpha,
//! beta and omega from a small device array (`sc`, slots in
//! [`gpuq_kernels::slots::bicgstab`]) that reductions write into, so an iteration
//! needs no host round trip until the caller downloads `sc` once at its end.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, launch_1d, Dest, FirstPass, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::{LaunchArgs, PushKernelArg};
use gpuq_core::{check_same_len, Result, Scalar};
use gpuq_kernels::slots::bicgstab::{LEN, RHO, RNORM2, SNORM2, TS, TT};

/// Pushes the diagonal scaling's two arguments (d, and the scaled vector), or
/// two nulls.
fn push_scaled<'a, T: Scalar>(
    b: &mut LaunchArgs<'a>,
    scaled: Option<(&'a CudaVector<T>, &'a mut CudaVector<T>)>,
    null: &'a u64,
) {
    match scaled {
        Some((d, out)) => b.arg(&d.buf).arg(&mut out.buf),
        None => b.arg(null).arg(null),
    };
}

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
        Self::check_slot("dotc_to_slot", sc, slot)?;
        self.dotc_into(x, y, sc, slot)
    }

    /// `sc[slot] = x^H y` for a scalar array of any length (the slot inside
    /// it): [`CudaBackend::dotc_to_slot`] without BiCGSTAB's array length.
    pub fn dotc_into<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        y: &CudaVector<T>,
        sc: &mut CudaVector<T>,
        slot: usize,
    ) -> Result<()> {
        check_same_len("dotc_into", x.len, y.len)?;
        if slot >= sc.len {
            return Err(gpuq_core::Error::InvalidArgument(format!(
                "dotc_into: slot {slot} is outside the {}-slot scalar array",
                sc.len
            )));
        }
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
    pub(crate) fn memset_slot<T: Scalar>(&self, sc: &mut CudaVector<T>, at: usize) -> Result<()> {
        self.memset_slots::<T>(sc, at, 1)
    }

    /// Zeroes `count` slots from byte offset `at`.
    pub(crate) fn memset_slots<T: Scalar>(
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

    /// p = r + beta (p - omega v), beta and omega from the previous
    /// iteration's scalars in `sc` (zero in a fresh one: p = r when p and v are
    /// zero); with `scaled = (d, dp)` also dp = d ⊙ p (a diagonal
    /// preconditioner). One kernel, 4 n element moves (6 n scaled).
    pub fn bicgstab_p<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        r: &CudaVector<T>,
        v: &CudaVector<T>,
        p: &mut CudaVector<T>,
        scaled: Option<(&CudaVector<T>, &mut CudaVector<T>)>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_p", sc, 0)?;
        check_same_len("bicgstab_p", r.len, v.len)?;
        check_same_len("bicgstab_p", r.len, p.len)?;
        Self::check_scaled("bicgstab_p", r.len, &scaled)?;
        let null = 0u64;
        launch_1d!(self, T, "bicgstab_p", r.len, |b| {
            b.arg(&sc.buf).arg(&r.buf).arg(&v.buf).arg(&mut p.buf);
            push_scaled(&mut b, scaled, &null);
        })
    }

    /// s = r - alpha v in place of r (alpha = rho / r0v from `sc`, zero when r0v
    /// vanished); with `scaled = (d, ds)` also ds = d ⊙ s. One kernel, 3 n
    /// element moves (5 n scaled).
    pub fn bicgstab_s<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        v: &CudaVector<T>,
        r: &mut CudaVector<T>,
        scaled: Option<(&CudaVector<T>, &mut CudaVector<T>)>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_s", sc, 0)?;
        check_same_len("bicgstab_s", v.len, r.len)?;
        Self::check_scaled("bicgstab_s", r.len, &scaled)?;
        let null = 0u64;
        launch_1d!(self, T, "bicgstab_s", r.len, |b| {
            b.arg(&sc.buf).arg(&v.buf).arg(&mut r.buf);
            push_scaled(&mut b, scaled, &null);
        })
    }

    /// Errors unless the scaling's vectors have `n` elements.
    fn check_scaled<T: Scalar>(
        op: &'static str,
        n: usize,
        scaled: &Option<(&CudaVector<T>, &mut CudaVector<T>)>,
    ) -> Result<()> {
        if let Some((d, out)) = scaled {
            check_same_len(op, n, d.len)?;
            check_same_len(op, n, out.len)?;
        }
        Ok(())
    }

    /// `sc[TS] = t^H s`, `sc[TT] = ||t||^2` and `sc[SNORM2] = ||s||^2` (zero
    /// imaginary parts) in one sweep over t and s: one kernel (2 n reads) whose
    /// last block finishes the three reductions.
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
            self.memset_slot::<T>(sc, SNORM2 * size)?;
            return self.memset_slots::<T>(sc, TS * size, 2);
        }
        let f = self.function(&kernel::<T>("bicgstab_tt"))?;
        let blocks = self.grid_blocks(n);
        let stride = blocks as usize;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&t.buf)
                .arg(&s.buf)
                .arg(&mut sc.buf)
                .arg(&reduce.partials)
                .arg(&stride)
                .arg(&reduce.counter);
            // SAFETY: arguments match `bicgstab_tt_*`; t and s hold n elements,
            // sc LEN; the scratch holds three segments of `stride` = grid
            // partials and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("bicgstab_tt"))?;
            self.inner.stats.launch("bicgstab_tt");
            Ok(())
        })
    }

    /// x = x_in + alpha phat + omega shat and r = s - omega t (r holds s; `shat`
    /// `None` means shat is s itself), alpha and omega from `sc` (omega zero when
    /// ||s||^2 <= `target2`); then `sc[RHO] = r0^H r` and `sc[RNORM2] = ||r||^2`
    /// of the new r. One kernel (8 n element moves, 7 without `shat`; x_in is
    /// read where x was) whose last
    /// block finishes both reductions.
    #[allow(clippy::too_many_arguments)]
    pub fn bicgstab_xr<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        target2: T::Real,
        phat: &CudaVector<T>,
        shat: Option<&CudaVector<T>>,
        t: &CudaVector<T>,
        r0: &CudaVector<T>,
        x_in: &CudaVector<T>,
        x: &mut CudaVector<T>,
        r: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slot("bicgstab_xr", sc, RNORM2)?;
        for len in [
            phat.len,
            t.len,
            r0.len,
            x_in.len,
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
        let target2 = ScalarArg::of(target2);
        // The kernel's blocks read sc before its last block writes RHO and
        // RNORM2 (only once every block has finished).
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n).arg(&mut sc.buf);
            target2.push_re(&mut b);
            b.arg(&phat.buf)
                .arg(shat_buf)
                .arg(&s_in_r)
                .arg(&t.buf)
                .arg(&r0.buf)
                .arg(&x_in.buf)
                .arg(&mut x.buf)
                .arg(&mut r.buf)
                .arg(&reduce.partials)
                .arg(&stride)
                .arg(&reduce.counter);
            // SAFETY: arguments match `bicgstab_xr_*`; every vector holds n
            // elements, sc LEN; x and r are borrowed mutably, so no input aliases
            // them; the scratch holds two segments of `stride` = grid partials and
            // the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("bicgstab_xr"))?;
            self.inner.stats.launch("bicgstab_xr");
            Ok(())
        })
    }
}
