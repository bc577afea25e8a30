//! Scalar snapshots of iterations in flight: a method that keeps its scalars in
//! a small device array (`sc`) enqueues a copy of it after each iteration into
//! one of two page-locked host slots and reads the slot later, once its event
//! has passed. Meanwhile the next iteration is already queued behind it, so the
//! device does not idle while the host reads and decides.

use crate::backend::{dev, CudaBackend};
use crate::vector::CudaVector;
use cudarc::driver::{CudaEvent, PinnedHostSlice};
use gpuq_core::{check_same_len, scalars_as_bytes_mut, Error, Result, Scalar};
use std::marker::PhantomData;

/// Two host slots for copies of a scalar array of `len` elements of `T`, each
/// with the event that marks its copy's completion.
pub struct ScalarRing<T> {
    pinned: PinnedHostSlice<u8>,
    len: usize,
    events: [CudaEvent; 2],
    _t: PhantomData<T>,
}

impl<T> std::fmt::Debug for ScalarRing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScalarRing(2 x {})", self.len)
    }
}

impl CudaBackend {
    /// Two page-locked host slots for copies of a scalar array of `len`
    /// elements. Cost: one page-locked allocation and two events.
    pub fn scalar_ring<T: Scalar>(&self, len: usize) -> Result<ScalarRing<T>> {
        let ctx = self.inner.stream.context();
        let bytes = 2 * len * std::mem::size_of::<T>();
        // SAFETY: a slot is read only after a copy into it has completed.
        let pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }
            .map_err(dev("allocating pinned host memory"))?;
        let event = || ctx.new_event(None).map_err(dev("creating an event"));
        Ok(ScalarRing {
            pinned,
            len,
            events: [event()?, event()?],
            _t: PhantomData,
        })
    }

    /// Enqueues a copy of `sc` into slot `slot % 2` of `ring`, behind all work
    /// enqueued so far, and marks its completion; nothing waits. Counted as one
    /// download. The slot must not be read before [`CudaBackend::read_snapshot`]
    /// has waited for it.
    pub fn snapshot<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        ring: &mut ScalarRing<T>,
        slot: usize,
    ) -> Result<()> {
        check_same_len("snapshot", ring.len, sc.len)?;
        let bytes = ring.len * std::mem::size_of::<T>();
        let slot = slot % 2;
        // Every copy into this slot has completed: the host read it before
        // asking for another.
        let host = &mut ring.pinned.as_mut_slice().map_err(dev("snapshot"))?
            [slot * bytes..(slot + 1) * bytes];
        if bytes > 0 {
            // A plain slice of page-locked memory: the copy is asynchronous.
            self.inner
                .stream
                .memcpy_dtoh(&sc.buf.slice(0..bytes), host)
                .map_err(dev("snapshot"))?;
        }
        ring.events[slot]
            .record(&self.inner.stream)
            .map_err(dev("recording an event"))?;
        self.inner.stats.download(bytes);
        Ok(())
    }

    /// Waits for the copy last enqueued into slot `slot % 2` and returns its
    /// values in `out`.
    pub fn read_snapshot<T: Scalar>(
        &self,
        ring: &ScalarRing<T>,
        slot: usize,
        out: &mut [T],
    ) -> Result<()> {
        if out.len() != ring.len {
            return Err(Error::shape(
                "read_snapshot",
                ring.len.to_string(),
                out.len().to_string(),
            ));
        }
        let slot = slot % 2;
        ring.events[slot]
            .synchronize()
            .map_err(dev("waiting for a snapshot"))?;
        let bytes = ring.len * std::mem::size_of::<T>();
        let host = &ring.pinned.as_slice().map_err(dev("read_snapshot"))?
            [slot * bytes..(slot + 1) * bytes];
        scalars_as_bytes_mut(out).copy_from_slice(host);
        Ok(())
    }
}
