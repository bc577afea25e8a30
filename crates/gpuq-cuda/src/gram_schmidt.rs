//! One classical Gram-Schmidt pass of GMRES against its whole basis: the inner
//! products and ||w||^2 (one first-pass launch over every basis vector, one
//! second pass), the subtraction with the new ||w||^2 (one launch reading the
//! coefficients from the device, one second pass), and a single download of
//! all the results (kernels in `kernels-rs/src/device/gram_schmidt.rs`). The
//! basis vectors' addresses go up once per basis: the table is cached.

use crate::backend::{dev, CudaBackend};
use crate::blas1::kernel;
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use gpuq_core::num_traits::Float;
use gpuq_core::{check_same_len, Error, RealScalar, Result, Scalar};

/// The device copy of the last basis' address table, and scratch for the
/// partial sums, reused across passes.
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
    /// One classical Gram-Schmidt pass of `w` against the first `used` vectors
    /// of `basis`: `h[j] = basis[j]^H w`, then `w = w - sum_j h[j] basis[j]`.
    /// Returns `(||w|| before, ||w|| after)`.
    ///
    /// Four launches and one download (which waits for the stream) whatever
    /// `used` is; reads `used + 1` vectors for the inner products (w once per
    /// eight of them, from L2) and moves `used + 2` for the subtraction. `basis`
    /// may hold more vectors than `used`: passing the whole basis every time
    /// keeps its address table cached on the device.
    pub fn gs_pass<T: Scalar>(
        &self,
        basis: &[&CudaVector<T>],
        used: usize,
        w: &mut CudaVector<T>,
        h: &mut [T],
    ) -> Result<(T::Real, T::Real)> {
        let n = w.len;
        check_same_len("gs_pass", used, h.len())?;
        if used > basis.len() {
            return Err(Error::InvalidArgument(format!(
                "gs_pass: {used} basis vectors used of {}",
                basis.len()
            )));
        }
        let mut addresses = Vec::with_capacity(basis.len());
        for v in basis {
            check_same_len("gs_pass", n, v.len)?;
            let (ptr, _record) = v.buf.device_ptr(&self.inner.stream);
            addresses.push(ptr);
        }
        let zero = <T::Real as RealScalar>::of_f64(0.0);
        if n == 0 {
            h.fill(T::zero());
            return Ok((zero, zero));
        }
        let size = std::mem::size_of::<T>();
        let k = used as u32;
        // Eight loads in flight per thread: two blocks per SM suffice.
        let dot_blocks = self
            .grid_blocks(n)
            .min(2 * self.inner.info.multiprocessors as u32);
        let sub_blocks = self.grid_blocks(n);
        let stride = dot_blocks as usize;
        // Scratch: the inner products' partials ((used + 1) segments of
        // `stride`), the norm's partials (`sub_blocks`), the results (used + 2).
        let partial_bytes = size * (used + 1) * stride;
        let norm_bytes = size * sub_blocks as usize;
        let need = partial_bytes + norm_bytes + size * (used + 2);
        let mut cache = self.inner.gs.lock().unwrap_or_else(|e| e.into_inner());
        let cache = &mut *cache;
        if cache.table.is_none() || cache.addresses != addresses {
            // An empty basis gets a null table (the driver refuses empty
            // allocations); the kernels then read no address.
            let table = if addresses.is_empty() {
                self.inner.stream.null::<u64>()
            } else {
                self.inner.stream.clone_htod(&addresses)
            }
            .map_err(dev("uploading the basis' address table"))?;
            self.inner.stats.upload(8 * addresses.len());
            cache.addresses = addresses;
            cache.table = Some(table);
        }
        if cache.scratch.as_ref().is_none_or(|s| s.len() < need) {
            // SAFETY: every byte is written before it is read: the partials by the
            // first passes, the results by the second passes.
            let s = unsafe { self.inner.stream.alloc::<u8>(need) }
                .map_err(dev("allocating Gram-Schmidt scratch"))?;
            cache.scratch = Some(s);
        }
        let (Some(table), Some(scratch)) = (cache.table.as_ref(), cache.scratch.as_mut()) else {
            unreachable!("both were just set");
        };
        let (mut partials, mut rest) = scratch.split_at_mut(partial_bytes);
        let (mut norm_partials, mut out) = rest.split_at_mut(norm_bytes);
        let segments = self.function(&kernel::<T>("reduce_segments"))?;

        let dots = self.function(&kernel::<T>("gs_dots"))?;
        let mut b = self.inner.stream.launch_builder(&dots);
        b.arg(&n)
            .arg(&k)
            .arg(table)
            .arg(&w.buf)
            .arg(&mut partials)
            .arg(&stride);
        // SAFETY: arguments match `gs_dots_*`: the table holds at least `used`
        // addresses of vectors of n elements (checked), partials (used + 1) x
        // stride elements, and stride equals the grid.
        unsafe { b.launch(Self::cfg(dot_blocks)) }.map_err(dev("gs_dots"))?;
        self.inner.stats.launch("gs_dots");
        let mut b = self.inner.stream.launch_builder(&segments);
        b.arg(&stride).arg(&mut partials).arg(&mut out);
        // SAFETY: arguments match `reduce_segments_*`: used + 1 segments of
        // stride partials, and out has room for used + 2 results.
        unsafe { b.launch(warps(k + 1)) }.map_err(dev("reduce_segments"))?;
        self.inner.stats.launch("reduce_segments");

        let subtract = self.function(&kernel::<T>("gs_subtract"))?;
        let mut b = self.inner.stream.launch_builder(&subtract);
        b.arg(&n)
            .arg(&k)
            .arg(table)
            .arg(&mut out)
            .arg(&mut w.buf)
            .arg(&mut norm_partials);
        // SAFETY: arguments match `gs_subtract_*`: the first `used` results are
        // the coefficients; w, borrowed mutably, is not one of the basis vectors
        // the table addresses; norm_partials holds one element per block.
        unsafe { b.launch(Self::cfg(sub_blocks)) }.map_err(dev("gs_subtract"))?;
        self.inner.stats.launch("gs_subtract");
        let mut last = out.slice_mut((used + 1) * size..);
        let sub_stride = sub_blocks as usize;
        let mut b = self.inner.stream.launch_builder(&segments);
        b.arg(&sub_stride).arg(&mut norm_partials).arg(&mut last);
        // SAFETY: one segment of sub_blocks partials into the last result.
        unsafe { b.launch(warps(1)) }.map_err(dev("reduce_segments"))?;
        self.inner.stats.launch("reduce_segments");

        let mut results = vec![T::zero(); used + 2];
        self.download_into(&out.as_view(), &mut results)?;
        h.copy_from_slice(&results[..used]);
        let norm = |s: T| s.re().sqrt();
        Ok((norm(results[used]), norm(results[used + 1])))
    }
}
