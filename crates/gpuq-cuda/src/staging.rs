//! Large transfers through page-locked staging buffers ([`STAGES`] of
//! them): the host copies one chunk into (or out of) a pinned buffer on all
//! cores while the DMA engine moves the others, so a copy from or to
//! pageable memory runs near the bus's pinned bandwidth instead of the
//! driver's staged pageable path (6.6 GB/s on the H200 machine; on the H100
//! machine, laplace3d:200's 736 MB CSR arrays: see `docs/benchmarks.md`).
//! Each buffer is copied in pieces of [`PIECE_BYTES`] by Rayon's threads,
//! with plain stores: on the H200 machine a throwaway C pipeline of 1.2 GB
//! (`docs/benchmarks.md`, twenty-sixth session) moved 51-53 GB/s with four
//! 16 MB buffers and glibc's copy, 45 GB/s with two, and 14-40 GB/s with
//! non-temporal stores, which an earlier version used; this upload moves
//! 52-53 GB/s with 256 KB pieces, about the bus's pinned bandwidth
//! (twenty-seventh session).
//! The buffers are ordinary cached pinned memory (the host reads them back
//! on downloads, which write-combined memory would make uncached), allocated
//! on a thread of their own when the backend is made, so that the first
//! transfer does not wait for the driver to pin them.

use crate::backend::{dev, CudaBackend};
use cudarc::driver::{
    result, CudaEvent, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, PinnedHostSlice,
};
use gpuq_core::Result;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::MutexGuard;

/// Bytes of each staging buffer.
const STAGE_BYTES: usize = 16 << 20;

/// Staging buffers: a chunk is copied on the host while the copies of the
/// others are queued or running.
const STAGES: usize = 4;

/// Bytes of each piece that one thread copies into or out of a staging
/// buffer: 64 pieces a buffer, so that sixteen threads finish a buffer
/// together. On the H200 machine (16 cores) a throwaway benchmark of the
/// upload alone (1,236 MB, four buffers) moved 51-53 GB/s with 256 KB
/// pieces against 34-41 GB/s with 1 MB pieces (one piece a thread: a
/// thread that starts late holds up the buffer) and 18-25 GB/s with 4 MB.
const PIECE_BYTES: usize = 256 << 10;

/// Uploads below this many bytes go straight through the driver (its own
/// staging is as fast for a few megabytes).
pub(crate) const STAGED_FROM: usize = 4 << 20;

/// Downloads from this many bytes go through the staging buffers (a pinned
/// download and a parallel copy beat the driver's pageable path even for
/// one chunk: on the H200 machine the AMG setup's 740 KB download of the
/// aggregates took 285 us pageable and 92 us staged).
pub(crate) const STAGED_DOWN_FROM: usize = 256 << 10;

/// A staging buffer and the event recorded after the copy that last used
/// it (the backend turns cudarc's own event tracking off, so the buffer's
/// built-in event is never recorded: this one is).
pub(crate) struct Stage {
    buf: PinnedHostSlice<u8>,
    copied: CudaEvent,
}

impl Drop for Stage {
    /// Waits for the last copy of the buffer before it is freed.
    fn drop(&mut self) {
        let _ = self.copied.synchronize();
    }
}

/// The staging buffers, made on the first large transfer.
pub(crate) type Staging = Option<[Stage; STAGES]>;

impl CudaBackend {
    /// Starts allocating the staging buffers on a thread of its own (pinning
    /// 64 MB takes the driver milliseconds); a transfer that needs them first
    /// waits for it at the buffers' lock, and an allocation that failed there
    /// is retried, and its error reported, by that transfer.
    pub(crate) fn stage_in_background(&self) {
        let backend = self.clone();
        let started = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Ok(mut staging) = backend.inner.staging.lock() {
                let _ = started.0.send(());
                if staging.is_none() {
                    *staging = backend.make_stages().ok();
                }
            }
        });
        // The lock is held before the backend is handed out, so no transfer
        // can find it free and allocate a second pair.
        let _ = started.1.recv();
    }

    /// The staging buffers with their events.
    fn make_stages(&self) -> Result<[Stage; STAGES]> {
        let ctx = self.inner.stream.context();
        let make = || -> Result<Stage> {
            Ok(Stage {
                // SAFETY: a buffer is written before each copy reads it.
                buf: unsafe { ctx.alloc_pinned_with_flags::<u8>(STAGE_BYTES, 0) }
                    .map_err(dev("allocating staging buffers"))?,
                copied: ctx.new_event(None).map_err(dev("staging event"))?,
            })
        };
        let made = (0..STAGES)
            .map(|_| make())
            .collect::<Result<Vec<Stage>>>()?;
        made.try_into()
            .map_err(|_| gpuq_core::Error::Device("staging buffers: a short set".into()))
    }

    /// The staging buffers, made here if the background allocation failed.
    fn stages(&self) -> Result<MutexGuard<'_, Staging>> {
        let mut staging =
            self.inner.staging.lock().map_err(|_| {
                gpuq_core::Error::InvalidArgument("staging buffers poisoned".into())
            })?;
        if staging.is_none() {
            *staging = Some(self.make_stages()?);
        }
        Ok(staging)
    }

    /// Copies `src` into `dst` (the same length) through the staging
    /// buffers: per chunk (the last one possibly shorter), wait for the
    /// buffer's previous copy, fill it in parallel, queue its copy on the
    /// stream. Returns when the last copy is queued (the stream orders
    /// everything after it).
    pub(crate) fn staged_upload(&self, src: &[u8], dst: &mut CudaViewMut<'_, u8>) -> Result<()> {
        let stream = &self.inner.stream;
        let mut staging = self.stages()?;
        let stages = staging.as_mut().expect("made by stages()");
        for (k, chunk) in src.chunks(STAGE_BYTES).enumerate() {
            let stage = &mut stages[k % STAGES];
            // the buffer's previous copy must have read it
            stage.copied.synchronize().map_err(dev("staging event"))?;
            let buf = &mut stage.buf.as_mut_slice().map_err(dev("staging buffer"))?[..chunk.len()];
            buf.par_chunks_mut(PIECE_BYTES)
                .zip(chunk.par_chunks(PIECE_BYTES))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let at = k * STAGE_BYTES;
            let mut part = dst.slice_mut(at..at + chunk.len());
            let (to, _guard) = part.device_ptr_mut(stream);
            // SAFETY: `to` addresses chunk.len() device bytes (the view) and
            // `buf` as many bytes of the pinned buffer, which stays untouched
            // until the event recorded below has passed (cudarc's own copy
            // would move the whole buffer's length).
            unsafe { result::memcpy_htod_async(to, buf, stream.cu_stream()) }
                .map_err(dev("upload"))?;
            stage.copied.record(stream).map_err(dev("staging event"))?;
        }
        Ok(())
    }

    /// Queues the download of `src` (at most a buffer's length) into
    /// `stage`, after the buffer's previous copy, and records its event.
    fn stage_down(&self, stage: &mut Stage, src: &CudaView<'_, u8>) -> Result<()> {
        let stream = &self.inner.stream;
        stage.copied.synchronize().map_err(dev("staging event"))?;
        let len = src.len();
        let buf = &mut stage.buf.as_mut_slice().map_err(dev("staging buffer"))?[..len];
        let (from, _guard) = src.device_ptr(stream);
        // SAFETY: `from` addresses `len` device bytes (the view) and `buf`
        // `len` bytes of the pinned buffer, which stays untouched until the
        // event recorded below has passed (cudarc's own copy would move the
        // whole buffer's length).
        unsafe { result::memcpy_dtoh_async(buf, from, stream.cu_stream()) }
            .map_err(dev("download"))?;
        stage.copied.record(stream).map_err(dev("staging event"))
    }

    /// Copies the device bytes `src` into `dst` (the same length, possibly
    /// uninitialised) through the staging buffers: the next chunk's download
    /// runs while the host copies the last one out on all cores. Returns
    /// when every byte of `dst` is written.
    pub(crate) fn staged_download(
        &self,
        src: &CudaView<'_, u8>,
        dst: &mut [MaybeUninit<u8>],
    ) -> Result<()> {
        let n = dst.len();
        let chunks = n.div_ceil(STAGE_BYTES);
        let mut staging = self.stages()?;
        let stages = staging.as_mut().expect("made by stages()");
        let range = |k: usize| k * STAGE_BYTES..((k + 1) * STAGE_BYTES).min(n);
        for (k, stage) in stages.iter_mut().enumerate().take(chunks) {
            self.stage_down(stage, &src.slice(range(k)))?;
        }
        for k in 0..chunks {
            let stage = &mut stages[k % STAGES];
            stage.copied.synchronize().map_err(dev("staging event"))?;
            let r = range(k);
            let from = &stage.buf.as_slice().map_err(dev("staging buffer"))?[..r.len()];
            dst[r]
                .par_chunks_mut(PIECE_BYTES)
                .zip(from.par_chunks(PIECE_BYTES))
                // SAFETY: d and s have the same length and do not overlap
                // (host memory against the pinned buffer).
                .for_each(|(d, s)| unsafe {
                    std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr().cast::<u8>(), s.len())
                });
            if k + STAGES < chunks {
                self.stage_down(stage, &src.slice(range(k + STAGES)))?;
            }
        }
        Ok(())
    }
}
