//! Classical Gram-Schmidt steps for GMRES: the inner products of a vector with a
//! set of basis vectors, and the subtraction of their combination, each in
//! launches over [`GS_CHUNK`] basis vectors at a time (kernels in
//! `kernels-rs/src/device/gram_schmidt.rs`). The basis vectors and coefficients
//! travel as kernel arguments, so nothing is uploaded, and the inner products come
//! back in one download however many basis vectors there are.

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchArgs, LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Error, Result, Scalar};
use gpuq_kernels::GS_CHUNK;

impl CudaBackend {
    /// Raw device addresses of `basis`, after checking every vector has length `n`.
    fn basis_ptrs<T: Scalar>(
        &self,
        op: &'static str,
        basis: &[&CudaVector<T>],
        n: usize,
    ) -> Result<Vec<u64>> {
        basis
            .iter()
            .map(|v| {
                check_same_len(op, n, v.len)?;
                let (ptr, _record) = v.buf.device_ptr(&self.inner.stream);
                Ok(ptr)
            })
            .collect()
    }

    /// `h[j] = basis[j]^H w` for every j: per chunk of [`GS_CHUNK`] vectors one
    /// pass over w and the chunk (one partial per block and vector) and one
    /// second pass, then a single download of all of h, which waits for the
    /// stream. Reads (k + ceil(k / 8)) n elements for k basis vectors.
    pub fn gs_project<T: Scalar>(
        &self,
        basis: &[&CudaVector<T>],
        w: &CudaVector<T>,
        h: &mut [T],
    ) -> Result<()> {
        let (n, k) = (w.len, basis.len());
        check_same_len("gs_project", k, h.len())?;
        let ptrs = self.basis_ptrs("gs_project", basis, n)?;
        if k == 0 {
            return Ok(());
        }
        if n == 0 {
            h.fill(T::zero());
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        // Eight loads in flight per thread already: two blocks per SM suffice.
        let blocks = self
            .grid_blocks(n)
            .min(2 * self.inner.info.multiprocessors as u32);
        let stride = blocks as usize;
        // SAFETY: every byte is written before it is read: partials by the first
        // pass of each chunk, the results by its second pass.
        let mut buf: CudaSlice<u8> = unsafe {
            self.inner
                .stream
                .alloc::<u8>(size * (GS_CHUNK * stride + k))
        }
        .map_err(dev("allocating Gram-Schmidt scratch"))?;
        let (mut partials, mut out) = buf.split_at_mut(size * GS_CHUNK * stride);
        let dots = self.function(&kernel::<T>("gs_dots"))?;
        let segments = self.function(&kernel::<T>("reduce_segments"))?;
        for (c, chunk) in ptrs.chunks(GS_CHUNK).enumerate() {
            let kc = chunk.len() as u32;
            let v = chunk_args(chunk);
            let mut b = self.inner.stream.launch_builder(&dots);
            b.arg(&n).arg(&kc);
            for p in &v {
                b.arg(p);
            }
            b.arg(&w.buf).arg(&mut partials).arg(&stride);
            // SAFETY: arguments match `gs_dots_*`; the first kc pointers address
            // vectors of n elements (checked), the rest are null and unread;
            // partials holds 8 x stride elements and stride equals the grid.
            unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("gs_dots"))?;
            self.inner.stats.launch("gs_dots");
            let mut dest = out.slice_mut(c * GS_CHUNK * size..);
            let mut b = self.inner.stream.launch_builder(&segments);
            // partials goes mutably only because the view type demands it; the
            // second pass reads it.
            b.arg(&stride).arg(&mut partials).arg(&mut dest);
            let cfg = LaunchConfig {
                grid_dim: (kc, 1, 1),
                block_dim: (32, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: arguments match `reduce_segments_*`: kc segments of stride
            // partials, and dest has room for kc results.
            unsafe { b.launch(cfg) }.map_err(dev("reduce_segments"))?;
            self.inner.stats.launch("reduce_segments");
        }
        self.download_into(&out.as_view(), h)
    }

    /// `w = w - sum_j h[j] basis[j]`: one pass over w and each chunk of
    /// [`GS_CHUNK`] vectors (the coefficients are kernel arguments). Moves
    /// (k + 2 ceil(k / 8)) n elements for k basis vectors.
    pub fn gs_subtract<T: Scalar>(
        &self,
        basis: &[&CudaVector<T>],
        h: &[T],
        w: &mut CudaVector<T>,
    ) -> Result<()> {
        let (n, k) = (w.len, basis.len());
        check_same_len("gs_subtract", k, h.len())?;
        let ptrs = self.basis_ptrs("gs_subtract", basis, n)?;
        if n == 0 || k == 0 {
            return Ok(());
        }
        if h.iter().any(|v| !v.is_finite_value()) {
            return Err(Error::InvalidArgument(
                "gs_subtract: a coefficient is not finite".into(),
            ));
        }
        let f = self.function(&kernel::<T>("gs_subtract"))?;
        for (chunk, hc) in ptrs.chunks(GS_CHUNK).zip(h.chunks(GS_CHUNK)) {
            let kc = chunk.len() as u32;
            let v = chunk_args(chunk);
            let coef: Vec<ScalarArg> = (0..GS_CHUNK)
                .map(|j| ScalarArg::of(hc.get(j).copied().unwrap_or(T::zero())))
                .collect();
            let mut b: LaunchArgs<'_> = self.inner.stream.launch_builder(&f);
            b.arg(&n).arg(&kc);
            for p in &v {
                b.arg(p);
            }
            for c in &coef {
                c.push(&mut b);
            }
            b.arg(&mut w.buf);
            // SAFETY: arguments match `gs_subtract_*`; the first kc pointers
            // address vectors of n elements (checked) that w, borrowed mutably,
            // does not alias; the rest are null and unread.
            unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("gs_subtract"))?;
            self.inner.stats.launch("gs_subtract");
        }
        Ok(())
    }
}

/// The eight pointer arguments of one chunk: its vectors, then nulls.
fn chunk_args(chunk: &[u64]) -> [u64; GS_CHUNK] {
    let mut v = [0u64; GS_CHUNK];
    v[..chunk.len()].copy_from_slice(chunk);
    v
}
