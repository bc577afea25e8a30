//! Scalar snapshots of iterations in flight: a method that keeps its scalars in
//! a small device array (`sc`) has a kernel copy it, at the end of each
//! iteration, into one of two page-locked host slots that the device can write
//! (mapped memory), marks the copy's completion with an event, and reads the
//! slot later, once its event has passed. Meanwhile the next iteration is
//! already queued behind it, so the device does not idle while the host reads
//! and decides. The copy is a kernel rather than a device-to-host memcpy so
//! that it can sit inside an iteration's recorded graph: on the H100 a memcpy
//! after each graph launch added about 5 us to a replay (`--kernel-costs` of
//! `bench-krylov`).

use crate::backend::{dev, CudaBackend};
use crate::blas1::kernel;
use crate::vector::CudaVector;
use cudarc::driver::sys::{cuMemHostGetDevicePointer_v2, CUresult, CU_MEMHOSTALLOC_DEVICEMAP};
use cudarc::driver::{CudaEvent, CudaStream, PinnedHostSlice, PushKernelArg};
use gpuq_core::{check_same_len, scalars_as_bytes_mut, Error, Result, Scalar};
use std::marker::PhantomData;
use std::sync::Arc;

/// Two host slots for copies of a scalar array of `len` elements of `T`, each
/// with the event that marks its copy's completion. The slots are mapped into
/// the device's address space, where kernels write them.
pub struct ScalarRing<T> {
    pinned: PinnedHostSlice<u8>,
    /// The slots' device address.
    device: u64,
    len: usize,
    events: [CudaEvent; 2],
    /// The stream whose kernels write the slots, drained before they are freed.
    stream: Arc<CudaStream>,
    _t: PhantomData<T>,
}

impl<T> std::fmt::Debug for ScalarRing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScalarRing(2 x {})", self.len)
    }
}

impl<T> Drop for ScalarRing<T> {
    fn drop(&mut self) {
        // Iterations enqueued but never read (a solve that stopped, or failed,
        // with one in flight) may still write a slot: let them finish first.
        let _ = self.stream.synchronize();
    }
}

/// Where one iteration's copy of the scalars goes: slot `slot % 2` of a
/// [`ScalarRing`], as a device address that recorded work can keep.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotSlot<T> {
    device: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl CudaBackend {
    /// Two page-locked host slots, mapped for the device, for copies of a
    /// scalar array of `len` elements. Cost: one page-locked allocation and two
    /// events.
    pub fn scalar_ring<T: Scalar>(&self, len: usize) -> Result<ScalarRing<T>> {
        let ctx = self.inner.stream.context();
        let bytes = 2 * len * std::mem::size_of::<T>();
        // SAFETY: a slot is read only after a copy into it has completed.
        let mut pinned =
            unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), CU_MEMHOSTALLOC_DEVICEMAP) }
                .map_err(dev("allocating mapped page-locked host memory"))?;
        let host = pinned.as_mut_ptr().map_err(dev("scalar_ring"))?;
        let mut device = 0u64;
        // SAFETY: `host` is the start of a live allocation made with
        // CU_MEMHOSTALLOC_DEVICEMAP in the context bound to this thread by the
        // allocation above.
        let status = unsafe { cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) };
        if status != CUresult::CUDA_SUCCESS {
            return Err(Error::Device(format!(
                "mapping page-locked host memory for the device: {status:?}"
            )));
        }
        let event = || ctx.new_event(None).map_err(dev("creating an event"));
        Ok(ScalarRing {
            pinned,
            device,
            len,
            events: [event()?, event()?],
            stream: self.inner.stream.clone(),
            _t: PhantomData,
        })
    }

    /// Slot `slot % 2` of `ring`, for [`CudaBackend::copy_to_slot`].
    pub fn ring_slot<T: Scalar>(&self, ring: &ScalarRing<T>, slot: usize) -> SnapshotSlot<T> {
        let bytes = ring.len * std::mem::size_of::<T>();
        SnapshotSlot {
            device: ring.device + ((slot % 2) * bytes) as u64,
            len: ring.len,
            _t: PhantomData,
        }
    }

    /// Enqueues a kernel that copies `sc` into `slot` (host memory) behind all
    /// work enqueued so far; nothing waits, so a recorded iteration may end
    /// with it. Counted as one download. The slot must not be read before
    /// [`CudaBackend::read_snapshot`] has waited for the event that
    /// [`CudaBackend::mark_slot`] records after it.
    pub fn copy_to_slot<T: Scalar>(
        &self,
        sc: &CudaVector<T>,
        slot: &SnapshotSlot<T>,
    ) -> Result<()> {
        check_same_len("copy_to_slot", slot.len, sc.len)?;
        if sc.len == 0 {
            return Ok(());
        }
        let f = self.function(&kernel::<T>("copy"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&sc.len).arg(&sc.buf).arg(&slot.device);
        // SAFETY: arguments match `copy_*` (n, x, y); `slot.device` addresses
        // `len` elements of a mapped page-locked slot that outlives the work
        // (the ring drains the stream before it is freed).
        unsafe { b.launch(Self::cfg(1)) }.map_err(dev("copy_to_slot"))?;
        self.inner.stats.launch("copy_to_slot");
        self.inner.stats.download(sc.len * std::mem::size_of::<T>());
        Ok(())
    }

    /// Records slot `slot % 2`'s event behind all work enqueued so far (the
    /// copy into it included).
    pub fn mark_slot<T: Scalar>(&self, ring: &mut ScalarRing<T>, slot: usize) -> Result<()> {
        ring.events[slot % 2]
            .record(&self.inner.stream)
            .map_err(dev("recording an event"))
    }

    /// Waits for the copy last marked in slot `slot % 2` and returns its values
    /// in `out`.
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
