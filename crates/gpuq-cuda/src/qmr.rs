//! QMR's steps with device-resident scalars: the kernels read their
//! coefficients from a small device array (`sc`, slots in
//! [`gpuq_kernels::slots::qmr`]); the reductions' last blocks write into it, and
//! that of xi = ||M^T w~|| runs the quasi-minimisation's rotation, so an
//! iteration takes no host value and needs no host round trip until the caller
//! downloads `sc` at its end.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, launch_1d, Dest, FirstPass};
use crate::vector::CudaVector;
use cudarc::driver::{DevicePtr, PushKernelArg};
use gpuq_core::{Result, Scalar};
use gpuq_kernels::slots::qmr::{EPS, LEN};

impl CudaBackend {
    /// The start: `sc[RHO] = rho`, `sc[XI] = xi`, gamma = 1, eta = -1, every
    /// other slot zero (one launch of one warp, thread 0 writing; no upload).
    pub fn qmr_start<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        rho: T::Real,
        xi: T::Real,
    ) -> Result<()> {
        Self::check_slots("qmr_start", LEN, sc, &[])?;
        self.set_slots("qmr_start", sc, &[rho, xi])
    }

    /// v = v~ / rho, w = w~ / xi, z = z / xi (`z` `None`: z is w), and
    /// `sc[DELTA] = z^T v` of the scaled vectors: one kernel (4 or 6 n element
    /// moves) whose last block finishes the reduction.
    pub fn qmr_scale<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        v: &mut CudaVector<T>,
        w: &mut CudaVector<T>,
        z: Option<&mut CudaVector<T>>,
    ) -> Result<()> {
        let zl = z.as_ref().map_or(w.len, |z| z.len);
        Self::check_slots("qmr_scale", LEN, sc, &[v.len, w.len, zl])?;
        let n = v.len;
        let blocks = self.grid_blocks(n);
        let f = self.function(&kernel::<T>("qmr_scale"))?;
        let z_is_w = u32::from(z.is_none());
        // Without a preconditioner the kernel never touches z; w's address only
        // fills the argument.
        let z_ptr = match z {
            Some(z) => {
                let (ptr, _record) = z.buf.device_ptr(&self.inner.stream);
                ptr
            }
            None => {
                let (ptr, _record) = w.buf.device_ptr(&self.inner.stream);
                ptr
            }
        };
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&mut sc.buf)
                .arg(&mut v.buf)
                .arg(&mut w.buf)
                .arg(&z_ptr)
                .arg(&z_is_w);
            reduce.push(&mut b);
            // SAFETY: arguments match `qmr_scale_*`; v, w and z hold n elements
            // and are distinct buffers (z, when given, is borrowed mutably apart
            // from v and w), sc LEN; the scratch holds one partial per block of
            // the grid and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("qmr_scale"))?;
            self.inner.stats.launch("qmr_scale");
            Ok(())
        })
    }

    /// p = y - (xi delta / eps) p and q = z - (rho delta / eps) q (6 n element
    /// moves).
    pub fn qmr_pq<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        y: &CudaVector<T>,
        z: &CudaVector<T>,
        p: &mut CudaVector<T>,
        q: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("qmr_pq", LEN, sc, &[y.len, z.len, p.len, q.len])?;
        launch_1d!(self, T, "qmr_pq", p.len, |b| {
            b.arg(&sc.buf)
                .arg(&y.buf)
                .arg(&z.buf)
                .arg(&mut p.buf)
                .arg(&mut q.buf);
        })
    }

    /// `sc[EPS] = q^T (A p)`, unconjugated: the BLAS-1 dot with its result
    /// written into the slot (2 n reads).
    pub fn qmr_eps<T: Scalar>(
        &self,
        q: &CudaVector<T>,
        ap: &CudaVector<T>,
        sc: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("qmr_eps", LEN, sc, &[q.len, ap.len])?;
        self.reduce_blas1::<T, T>(
            q.len,
            FirstPass::Dot(&q.buf, &ap.buf, 0),
            Dest::Device(&mut sc.buf, EPS * std::mem::size_of::<T>()),
        )
    }

    /// v~ = A p - beta v in place of v and `sc[RHO_NEXT] = ||v~||`: one kernel
    /// (3 n element moves) whose last block finishes the norm.
    pub fn qmr_v<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        ap: &CudaVector<T>,
        v: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("qmr_v", LEN, sc, &[ap.len, v.len])?;
        let n = v.len;
        let blocks = self.grid_blocks(n);
        let f = self.function(&kernel::<T>("qmr_v"))?;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n).arg(&mut sc.buf).arg(&ap.buf).arg(&mut v.buf);
            reduce.push(&mut b);
            // SAFETY: arguments match `qmr_v_*`; ap and v hold n elements and do
            // not alias (v is borrowed mutably), sc LEN; the scratch holds one
            // partial per block of the grid and the counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("qmr_v"))?;
            self.inner.stats.launch("qmr_v");
            Ok(())
        })
    }

    /// w~ = A^T q - beta w in place of w (3 n element moves).
    pub fn qmr_w<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        atq: &CudaVector<T>,
        w: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots("qmr_w", LEN, sc, &[atq.len, w.len])?;
        launch_1d!(self, T, "qmr_w", w.len, |b| {
            b.arg(&sc.buf).arg(&atq.buf).arg(&mut w.buf);
        })
    }

    /// xi = ||z|| for the next iteration, and the rotation (see `qmr_xi_*`):
    /// one kernel (n reads) whose last block finishes the norm and updates `sc`.
    pub fn qmr_rotation<T: Scalar>(&self, z: &CudaVector<T>, sc: &mut CudaVector<T>) -> Result<()> {
        Self::check_slots("qmr_rotation", LEN, sc, &[z.len])?;
        let n = z.len;
        let blocks = self.reduction_blocks(n);
        let f = self.function(&kernel::<T>("qmr_xi"))?;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n).arg(&z.buf).arg(&mut sc.buf);
            reduce.push(&mut b);
            // SAFETY: arguments match `qmr_xi_*`; z holds n elements, sc LEN;
            // the scratch holds one partial per block of this grid and the
            // counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("qmr_xi"))?;
            self.inner.stats.launch("qmr_xi");
            Ok(())
        })
    }

    /// d = eta p + carry d, s = eta A p + carry s, x = x_in + d, r = r - s, and
    /// `sc[RNORM2] = ||r||^2` (a real value): one kernel (10 n element moves)
    /// whose last block finishes the reduction.
    #[allow(clippy::too_many_arguments)]
    pub fn qmr_update<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        p: &CudaVector<T>,
        ap: &CudaVector<T>,
        d: &mut CudaVector<T>,
        s: &mut CudaVector<T>,
        x_in: &CudaVector<T>,
        x: &mut CudaVector<T>,
        r: &mut CudaVector<T>,
    ) -> Result<()> {
        Self::check_slots(
            "qmr_update",
            LEN,
            sc,
            &[p.len, ap.len, d.len, s.len, x_in.len, x.len, r.len],
        )?;
        let n = r.len;
        let blocks = self.grid_blocks(n);
        let f = self.function(&kernel::<T>("qmr_update"))?;
        self.reduce_in_kernel(|reduce| {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&mut sc.buf)
                .arg(&p.buf)
                .arg(&ap.buf)
                .arg(&mut d.buf)
                .arg(&mut s.buf)
                .arg(&x_in.buf)
                .arg(&mut x.buf)
                .arg(&mut r.buf);
            reduce.push(&mut b);
            // SAFETY: arguments match `qmr_update_*`; every vector holds n
            // elements, sc LEN; the outputs are borrowed mutably, so no two
            // alias; the scratch holds one partial per block of the grid and the
            // counter.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("qmr_update"))?;
            self.inner.stats.launch("qmr_update");
            Ok(())
        })
    }
}
