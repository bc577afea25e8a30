//! Large transfers through two page-locked staging buffers: the host copies
//! one chunk into (or out of) a pinned buffer on all cores (into it with
//! non-temporal stores: on the H200 machine P2 Poisson's 62 MB upload went
//! from 3.9-4.3 ms (one run 7.5) to 2.4-2.6 ms) while the DMA engine moves
//! the other, so a copy from or to pageable memory runs near
//! the bus's pinned bandwidth instead of the driver's staged pageable path
//! (on the H100 machine, laplace3d:200's 736 MB CSR arrays: see
//! `docs/benchmarks.md`). The buffers are ordinary cached pinned memory (the
//! host reads them back on downloads, which write-combined memory would make
//! uncached), allocated on a thread of their own when the backend is made, so
//! that the first transfer does not wait for the driver to pin them.

use crate::backend::{dev, CudaBackend};
use cudarc::driver::{result, CudaEvent, CudaView, CudaViewMut, DevicePtr, PinnedHostSlice};
use gpuq_core::Result;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::MutexGuard;

/// Bytes of each staging buffer.
const STAGE_BYTES: usize = 16 << 20;

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

/// The two staging buffers, made on the first large transfer.
pub(crate) type Staging = Option<[Stage; 2]>;

impl CudaBackend {
    /// Starts allocating the staging buffers on a thread of its own (pinning
    /// 32 MB takes the driver milliseconds); a transfer that needs them first
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

    /// Two staging buffers with their events.
    fn make_stages(&self) -> Result<[Stage; 2]> {
        let ctx = self.inner.stream.context();
        let make = || -> Result<Stage> {
            Ok(Stage {
                // SAFETY: a buffer is written before each copy reads it.
                buf: unsafe { ctx.alloc_pinned_with_flags::<u8>(STAGE_BYTES, 0) }
                    .map_err(dev("allocating staging buffers"))?,
                copied: ctx.new_event(None).map_err(dev("staging event"))?,
            })
        };
        Ok([make()?, make()?])
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
    /// buffers: per chunk, wait for the buffer's previous copy, fill it in
    /// parallel, queue its copy on the stream; the tail below a chunk goes
    /// straight. Returns when the last copy is queued (the stream orders
    /// everything after it).
    pub(crate) fn staged_upload(&self, src: &[u8], dst: &mut CudaViewMut<'_, u8>) -> Result<()> {
        let stream = &self.inner.stream;
        let mut staging = self.stages()?;
        let stages = staging.as_mut().expect("made by stages()");
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
                .for_each(|(d, s)| stream_copy(d, s));
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
            let stage = &mut stages[k % 2];
            stage.copied.synchronize().map_err(dev("staging event"))?;
            let r = range(k);
            let from = &stage.buf.as_slice().map_err(dev("staging buffer"))?[..r.len()];
            dst[r]
                .par_chunks_mut(1 << 20)
                .zip(from.par_chunks(1 << 20))
                // SAFETY: d and s have the same length and do not overlap
                // (host memory against the pinned buffer).
                .for_each(|(d, s)| unsafe {
                    std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr().cast::<u8>(), s.len())
                });
            if k + 2 < chunks {
                self.stage_down(stage, &src.slice(range(k + 2)))?;
            }
        }
        Ok(())
    }
}

/// `dst.copy_from_slice(src)` (equal lengths) with non-temporal stores where
/// the CPU has them (x86-64: SSE2's `movntdq`, 16 bytes at a time into the
/// 16-byte aligned part of `dst`), so that the staging buffer's lines are
/// not read into the caches only to be overwritten; then a store fence, so
/// the bytes are in memory before the copy's DMA is queued. O(len).
fn stream_copy(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let body = (dst.len() - head) / 16 * 16;
        dst[..head].copy_from_slice(&src[..head]);
        // SAFETY: SSE2 is part of x86-64; the 16-byte stores go to the
        // aligned range dst[head..head + body], the loads (unaligned) come
        // from src's range of the same bounds, and src is as long as dst.
        unsafe {
            let d = dst.as_mut_ptr().add(head).cast::<__m128i>();
            let s = src.as_ptr().add(head).cast::<__m128i>();
            for i in 0..body / 16 {
                _mm_stream_si128(d.add(i), _mm_loadu_si128(s.add(i)));
            }
            _mm_sfence();
        }
        dst[head + body..].copy_from_slice(&src[head + body..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::stream_copy;

    #[test]
    fn the_streamed_copy_is_a_copy_at_any_alignment_and_length() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for at in 0..17 {
            for len in [0, 1, 15, 16, 17, 33, 200] {
                let mut dst = vec![0u8; at + len + 3];
                stream_copy(&mut dst[at..at + len], &src[5..5 + len]);
                assert_eq!(&dst[at..at + len], &src[5..5 + len]);
                assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0));
            }
        }
    }
}
