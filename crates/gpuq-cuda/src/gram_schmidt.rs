//! GMRES's Gram-Schmidt against its whole basis on the device, delayed
//! classical Gram-Schmidt with re-orthogonalisation (DCGS2; the algorithm is in
//! `gpuq_krylov::gmres`): one step's inner products and coefficients in three
//! launches, its update of the basis in one, the solution's combination of the
//! basis in one (kernels in `kernels-rs/src/device/gram_schmidt.rs`). No
//! coefficient crosses the bus inside a cycle: the host downloads the inner
//! products (to build the Hessenberg matrix) while the device goes on. The
//! basis vectors' addresses go up once per basis: the table is cached.

use crate::backend::{dev, CudaBackend};
use crate::blas1::kernel;
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Backend, Error, Result, Scalar};
use gpuq_kernels::gs_extra;

/// The device copy of the last basis' address table, and scratch for the
/// partial sums, reused across steps.
#[derive(Default)]
pub(crate) struct GsCache {
    /// Addresses of the basis vectors, as uploaded to `table`.
    addresses: Vec<u64>,
    table: Option<CudaSlice<u64>>,
    scratch: Option<CudaSlice<u8>>,
}

/// A launch of `blocks` blocks of one warp each (the segment sums).
fn warps(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl CudaBackend {
    /// Makes `cache.table` the basis' address table on the device, uploading
    /// it when it changed since the last call (one upload of 8 bytes a
    /// vector); errors unless every vector has `n` elements.
    fn gs_table<T: Scalar>(
        cache: &mut GsCache,
        backend: &CudaBackend,
        basis: &[CudaVector<T>],
        n: usize,
    ) -> Result<()> {
        let mut addresses = Vec::with_capacity(basis.len());
        for v in basis {
            check_same_len("Gram-Schmidt (basis)", n, v.len)?;
            let (ptr, _record) = v.buf.device_ptr(&backend.inner.stream);
            addresses.push(ptr);
        }
        if cache.table.is_none() || cache.addresses != addresses {
            // An empty basis gets a null table (the driver refuses empty
            // allocations); the kernels then read no address.
            let table = if addresses.is_empty() {
                backend.inner.stream.null::<u64>()
            } else {
                backend.inner.stream.clone_htod(&addresses)
            }
            .map_err(dev("uploading the basis' address table"))?;
            backend.inner.stats.upload(8 * addresses.len());
            cache.addresses = addresses;
            cache.table = Some(table);
        }
        Ok(())
    }

    /// One step's inner products and coefficients: with V = [basis[0..used],
    /// u], `gs[g] = V_g^H u` and, when `z` is given, `gs[used + 1 + g] = V_g^H
    /// z` (g <= used); then, with s = gs[0..used] and t the first `used` inner
    /// products with z, `gs[e + 1]` = rho = sqrt(u^H u - ||s||^2) (zero when
    /// that is not positive) and `gs[e]` = (u^H z - s^H t) / rho, where e =
    /// `gpuq_kernels::gs_extra(basis.len())`. `gs` must hold `e + 2` elements and `used`
    /// be at most `basis.len()`.
    ///
    /// Three launches, nothing waits: one sweep over the `used` vectors, u and
    /// z (a two-dimensional grid: chunks of eight vectors by rows and
    /// right-hand side), the partials' sums (one warp per value), and one warp
    /// for rho and t_k.
    pub fn gs_dots<T: Scalar>(
        &self,
        basis: &[CudaVector<T>],
        used: usize,
        u: &CudaVector<T>,
        z: Option<&CudaVector<T>>,
        gs: &mut CudaVector<T>,
    ) -> Result<()> {
        let n = u.len;
        if used > basis.len() {
            return Err(Error::InvalidArgument(format!(
                "gs_dots: {used} basis vectors used of {}",
                basis.len()
            )));
        }
        let e = gs_extra(basis.len());
        check_same_len("gs_dots (gs)", e + 2, gs.len)?;
        if let Some(z) = z {
            check_same_len("gs_dots (z)", n, z.len)?;
        }
        let size = std::mem::size_of::<T>();
        let kv = used + 1;
        let values = if z.is_some() { 2 * kv } else { kv };
        let chunks = kv.div_ceil(gpuq_kernels::GS_CHUNK) as u32;
        let sides = if z.is_some() { 2 } else { 1 };
        // About four blocks per SM in all, whatever the number of chunks.
        let sms = self.inner.info.multiprocessors as u32;
        let rows_blocks = (4 * sms)
            .div_ceil(chunks * sides)
            .clamp(1, self.grid_blocks(n));
        let stride = rows_blocks as usize;
        let need = size * values * stride;
        let mut cache = self.inner.gs.lock().unwrap_or_else(|e| e.into_inner());
        let cache = &mut *cache;
        if cache.scratch.as_ref().is_none_or(|s| s.len() < need) {
            // SAFETY: every partial is written by the first pass before the
            // second reads it.
            let s = unsafe { self.inner.stream.alloc::<u8>(need) }
                .map_err(dev("allocating Gram-Schmidt scratch"))?;
            cache.scratch = Some(s);
        }
        Self::gs_table(cache, self, basis, n)?;
        let (Some(table), Some(partials)) = (cache.table.as_ref(), cache.scratch.as_mut()) else {
            unreachable!("both were just set");
        };
        let (has_z, z_buf) = match z {
            Some(z) => (1u32, &z.buf),
            None => (0u32, &u.buf),
        };
        let k = used as u32;
        if n > 0 {
            let f = self.function(&kernel::<T>("gs_dots"))?;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n)
                .arg(&k)
                .arg(table)
                .arg(&u.buf)
                .arg(z_buf)
                .arg(&has_z)
                .arg(&mut *partials)
                .arg(&stride);
            let cfg = LaunchConfig {
                grid_dim: (rows_blocks * sides, chunks, 1),
                block_dim: (crate::backend::THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: arguments match `gs_dots_*`: the table holds `used`
            // addresses of vectors of n elements (checked), u and z hold n;
            // the partials hold `values` segments of `stride` blocks, and
            // gridDim.x is `stride` times the sides.
            unsafe { b.launch(cfg) }.map_err(dev("gs_dots"))?;
            self.inner.stats.launch("gs_dots");
            let f = self.function(&kernel::<T>("reduce_segments"))?;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&stride).arg(&mut *partials).arg(&mut gs.buf);
            // SAFETY: arguments match `reduce_segments_*`: `values` segments of
            // `stride` partials, and gs has room for `values` results.
            unsafe { b.launch(warps(values as u32)) }.map_err(dev("reduce_segments"))?;
            self.inner.stats.launch("reduce_segments");
        } else {
            self.fill(gs, T::zero())?;
        }
        let f = self.function(&kernel::<T>("gs_coef"))?;
        let (base, _record) = gs.buf.device_ptr_mut(&self.inner.stream);
        let extra = base + (e * size) as u64;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&k).arg(&has_z).arg(&base).arg(&extra);
        // SAFETY: arguments match `gs_coef_*`: gs holds the `values` inner
        // products from its start and two more elements at e (checked).
        unsafe { b.launch(warps(1)) }.map_err(dev("gs_coef"))?;
        self.inner.stats.launch("gs_coef");
        Ok(())
    }

    /// One step's update from the coefficients [`CudaBackend::gs_dots`] left
    /// in `gs` (it must have been called with the same `basis`, `used`, u and
    /// z): q = (u - sum_g s_g basis\[g\]) / rho written to `basis[used]`, and u
    /// = (z - sum_g t_g basis\[g\] - t_k q) / rho in place. One launch, `used + 4`
    /// vectors moved.
    pub fn gs_update<T: Scalar>(
        &self,
        basis: &mut [CudaVector<T>],
        used: usize,
        gs: &CudaVector<T>,
        u: &mut CudaVector<T>,
        z: &CudaVector<T>,
    ) -> Result<()> {
        let n = u.len;
        if used >= basis.len() {
            return Err(Error::InvalidArgument(format!(
                "gs_update: basis vector {used} of {}",
                basis.len()
            )));
        }
        let e = gs_extra(basis.len());
        check_same_len("gs_update (gs)", e + 2, gs.len)?;
        check_same_len("gs_update (z)", n, z.len)?;
        let mut cache = self.inner.gs.lock().unwrap_or_else(|e| e.into_inner());
        Self::gs_table(&mut cache, self, basis, n)?;
        let table = cache.table.as_ref().expect("just set");
        if n == 0 {
            return Ok(());
        }
        let size = std::mem::size_of::<T>() as u64;
        let (base, _record) = gs.buf.device_ptr(&self.inner.stream);
        let t = base + (used as u64 + 1) * size;
        let extra = base + e as u64 * size;
        let k = used as u32;
        let f = self.function(&kernel::<T>("gs_update"))?;
        let q = &mut basis[used];
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n)
            .arg(&k)
            .arg(table)
            .arg(&base)
            .arg(&t)
            .arg(&extra)
            .arg(&mut u.buf)
            .arg(&z.buf)
            .arg(&mut q.buf);
        // SAFETY: arguments match `gs_update_*`: the table's first `used`
        // addresses are vectors of n elements other than q (basis[used]), u
        // and z (borrowed apart); gs holds s, t and the extras (checked).
        unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("gs_update"))?;
        self.inner.stats.launch("gs_update");
        Ok(())
    }

    /// w = sum_g y\[g\] basis\[g\] for g < y.len(): the solution's update from the
    /// basis. One upload of the coefficients and one launch, `y.len() + 1`
    /// vectors moved.
    pub fn gs_combine<T: Scalar>(
        &self,
        basis: &[CudaVector<T>],
        y: &[T],
        w: &mut CudaVector<T>,
    ) -> Result<()> {
        let n = w.len;
        if y.len() > basis.len() {
            return Err(Error::InvalidArgument(format!(
                "gs_combine: {} coefficients for {} basis vectors",
                y.len(),
                basis.len()
            )));
        }
        let mut cache = self.inner.gs.lock().unwrap_or_else(|e| e.into_inner());
        Self::gs_table(&mut cache, self, basis, n)?;
        let table = cache.table.as_ref().expect("just set");
        if n == 0 {
            return Ok(());
        }
        if y.is_empty() {
            return self.fill(w, T::zero());
        }
        let coef = self.upload_raw(y)?;
        let k = y.len() as u32;
        let f = self.function(&kernel::<T>("gs_combine"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n).arg(&k).arg(table).arg(&coef.buf).arg(&mut w.buf);
        // SAFETY: arguments match `gs_combine_*`: the table's first k
        // addresses are vectors of n elements, w (borrowed mutably) is none of
        // them, coef holds k values.
        unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("gs_combine"))?;
        self.inner.stats.launch("gs_combine");
        Ok(())
    }
}
