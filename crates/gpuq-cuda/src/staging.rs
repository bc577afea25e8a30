//! Large uploads through two page-locked staging buffers: the host copies
//! one chunk into a pinned buffer (all cores) while the DMA engine moves the
//! previous one, so a copy from pageable memory runs near the bus's pinned
//! bandwidth instead of the driver's staged pageable path (on the H100
//! machine, laplace3d:200's 736 MB CSR arrays: see `docs/benchmarks.md`).

use crate::backend::{dev, CudaBackend};
use cudarc::driver::{CudaEvent, CudaViewMut, PinnedHostSlice};
use gpuq_core::Result;
use rayon::prelude::*;

/// Bytes of each staging buffer.
const STAGE_BYTES: usize = 16 << 20;

/// Uploads below this many bytes go straight through the driver (two
/// buffers' worth: below it the pipeline has nothing to overlap).
pub(crate) const STAGED_FROM: usize = 2 * STAGE_BYTES;

/// A staging buffer and the event recorded after the copy that last read
/// it (the backend turns cudarc's own event tracking off, so the buffer's
/// built-in event is never recorded: this one is).
pub(crate) struct Stage {
    buf: PinnedHostSlice<u8>,
    copied: CudaEvent,
}

impl Drop for Stage {
    /// Waits for the last copy out of the buffer before it is freed.
    fn drop(&mut self) {
        let _ = self.copied.synchronize();
    }
}

/// The two staging buffers, made on the first large upload.
pub(crate) type Staging = Option<[Stage; 2]>;

impl CudaBackend {
    /// Copies `src` into `dst` (the same length) through the staging
    /// buffers: per chunk, wait for the buffer's previous copy, fill it in
    /// parallel, queue its copy on the stream; the tail below a chunk goes
    /// straight. Returns when the last copy is queued (the stream orders
    /// everything after it).
    pub(crate) fn staged_upload(&self, src: &[u8], dst: &mut CudaViewMut<'_, u8>) -> Result<()> {
        let stream = &self.inner.stream;
        let mut staging =
            self.inner.staging.lock().map_err(|_| {
                gpuq_core::Error::InvalidArgument("staging buffers poisoned".into())
            })?;
        if staging.is_none() {
            let ctx = stream.context();
            let make = || -> Result<Stage> {
                Ok(Stage {
                    // SAFETY: a buffer is written before each copy reads it.
                    buf: unsafe { ctx.alloc_pinned::<u8>(STAGE_BYTES) }
                        .map_err(dev("allocating staging buffers"))?,
                    copied: ctx.new_event(None).map_err(dev("staging event"))?,
                })
            };
            *staging = Some([make()?, make()?]);
        }
        let stages = staging.as_mut().expect("made above");
        let full = src.len() / STAGE_BYTES;
        for k in 0..full {
            let stage = &mut stages[k % 2];
            // the buffer's previous copy must have read it
            stage.copied.synchronize().map_err(dev("staging event"))?;
            let chunk = &src[k * STAGE_BYTES..(k + 1) * STAGE_BYTES];
            stage
                .buf
                .as_mut_slice()
                .map_err(dev("staging buffer"))?
                .par_chunks_mut(1 << 20)
                .zip(chunk.par_chunks(1 << 20))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let mut part = dst.slice_mut(k * STAGE_BYTES..(k + 1) * STAGE_BYTES);
            stream
                .memcpy_htod(&stage.buf, &mut part)
                .map_err(dev("upload"))?;
            stage.copied.record(stream).map_err(dev("staging event"))?;
        }
        if full * STAGE_BYTES < src.len() {
            let mut part = dst.slice_mut(full * STAGE_BYTES..);
            stream
                .memcpy_htod(&src[full * STAGE_BYTES..], &mut part)
                .map_err(dev("upload"))?;
        }
        Ok(())
    }
}
