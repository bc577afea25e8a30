//! Partial copies between host and device for a distributed backend's halo
//! exchange (staged through the host): the owned entries a neighbour needs
//! usually form a few contiguous ranges (a grid plane at each end of a
//! row block), so only those ranges cross the bus, not the whole vector.

use crate::backend::{dev, CudaBackend};
use crate::vector::CudaVector;
use gpuq_core::{scalars_as_bytes, Error, Result, Scalar};
use std::ops::Range;

impl CudaBackend {
    /// `x[range]` to the host: one download of `range.len()` values (waits
    /// for the stream). Errors when the range does not lie inside x.
    pub fn download_range<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        range: Range<usize>,
    ) -> Result<Vec<T>> {
        if range.start > range.end || range.end > x.len {
            return Err(Error::InvalidArgument(format!(
                "download_range: {}..{} outside a vector of {}",
                range.start, range.end, x.len
            )));
        }
        let mut out = vec![T::zero(); range.len()];
        if !out.is_empty() {
            let size = std::mem::size_of::<T>();
            let view = x.buf.slice(range.start * size..range.end * size);
            self.download_into(&view, &mut out)?;
        }
        Ok(out)
    }

    /// Overwrites `v` with `host` (same length) in place: one upload of
    /// `host.len()` values, no allocation.
    pub fn upload_into<T: Scalar>(&self, host: &[T], v: &mut CudaVector<T>) -> Result<()> {
        gpuq_core::check_same_len("upload_into", v.len, host.len())?;
        let bytes = scalars_as_bytes(host);
        if bytes.is_empty() {
            return Ok(());
        }
        let mut dst = v.buf.slice_mut(0..bytes.len());
        self.inner
            .stream
            .memcpy_htod(bytes, &mut dst)
            .map_err(dev("upload_into"))?;
        self.inner.stats.upload(bytes.len());
        Ok(())
    }
}
