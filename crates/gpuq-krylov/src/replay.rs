//! Recorded iterations and their scalars in flight: a method whose iteration
//! takes every per-iteration value from its scalar array on the backend
//! (BiCGSTAB, BiCGSTAB(l), TFQMR, QMR) enqueues the same work each time, which a
//! backend may record once and replay; and it reads each iteration's scalars
//! from a snapshot, so a backend that runs asynchronously can already be
//! running the next iteration while the host reads them ([`Pipeline`]).

use gpuq_core::{Backend, DeviceVector, Result, Scalar};
use gpuq_cpu::CpuBackend;
use std::sync::{Arc, Mutex};

/// Record-and-replay of an iteration's work, and snapshots of its scalars.
///
/// Its default, for any backend, is [`ReplayByRerun`] (one empty `impl` line):
/// look-ahead 0, the body run again at every replay.
pub trait Replay: Backend {
    /// A recorded iteration.
    type Recording;

    /// Two host slots for copies of a scalar array.
    type Ring<T: Scalar>;

    /// One slot of a [`Replay::Ring`], as a handle that recorded work may keep.
    type Slot<T: Scalar>: Clone;

    /// Iterations a method may enqueue beyond the one whose scalars it waits
    /// for: 0 where every step has run when its call returns (the CPU), 1
    /// where work is queued and runs later (CUDA).
    fn look_ahead(&self) -> usize;

    /// Whether [`Replay::replay`] records its body once and replays the
    /// recording without running the body again (CUDA graphs). Where it does
    /// not, a body may hold work whose launches are not fixed in advance (a
    /// preconditioner's cycle with its own logic). Default: `true` (the
    /// safe answer).
    fn records(&self) -> bool {
        true
    }

    /// Two host slots for copies of a scalar array of `len` elements.
    fn ring<T: Scalar>(&self, len: usize) -> Result<Self::Ring<T>>;

    /// Slot `slot % 2` of `ring`.
    fn ring_slot<T: Scalar>(&self, ring: &Self::Ring<T>, slot: usize) -> Self::Slot<T>;

    /// Enqueues a copy of `sc` into `slot`, after all work enqueued so far; it
    /// neither downloads nor waits, so recorded work may end with it. One
    /// download of `len` scalars in the counters.
    fn copy_to_slot<T: Scalar>(&self, sc: &Self::Vector<T>, slot: &Self::Slot<T>) -> Result<()>;

    /// Marks the completion of the copy into slot `slot % 2` of `ring`, after
    /// all work enqueued so far.
    fn mark_slot<T: Scalar>(&self, ring: &mut Self::Ring<T>, slot: usize) -> Result<()>;

    /// Waits for the copy last marked in slot `slot % 2` and returns its
    /// values in `out`.
    fn read_snapshot<T: Scalar>(
        &self,
        ring: &Self::Ring<T>,
        slot: usize,
        out: &mut [T],
    ) -> Result<()>;

    /// Runs the work `body` enqueues; a backend may record it on the first call
    /// (`recording` `None`) and replay the recording later without calling
    /// `body` (CUDA: a graph, one driver call per replay). The CPU backend calls
    /// `body` every time.
    ///
    /// # Safety
    /// As `gpuq_cuda::CudaBackend::replay`: `body` enqueues the same work on the
    /// same vectors every call, with every per-iteration value read by the
    /// kernels from backend memory; the vectors outlive `recording`; `body`
    /// neither downloads nor waits.
    unsafe fn replay(
        &self,
        recording: &mut Option<Self::Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()>;

    /// [`Replay::replay`] for a body of device work only: fused kernels,
    /// operator products and reductions into slots (CG with no
    /// preconditioner or a diagonal one, BiCGSTAB), never a preconditioner
    /// with logic of its own. A backend whose [`Replay::records`] is false
    /// because other bodies may not be recordable may record this one (the
    /// distributed backend over GPUs that exchange through NCCL, whose
    /// halos and slot sums are then device work too). Default:
    /// [`Replay::replay`].
    ///
    /// # Safety
    /// As [`Replay::replay`].
    unsafe fn replay_device_work(
        &self,
        recording: &mut Option<Self::Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        // SAFETY: the caller's contract, the same.
        unsafe { self.replay(recording, body) }
    }
}

/// The default [`Replay`] of a backend whose every operation has finished when
/// its call returns (the CPU, and any backend built from such operations, such
/// as the distributed one): writing `impl ReplayByRerun for MyBackend {}` gives
/// it [`Replay`] with look-ahead 0, replays that run the body again each time
/// (nothing is recorded), and snapshots that are host copies of the scalar
/// array (one download of its few scalars each).
///
/// Rust has no defaults for associated types, so the default lives in this
/// marker trait and a blanket implementation rather than in [`Replay`] itself;
/// a backend with recordings of its own (CUDA graphs) implements [`Replay`]
/// directly instead.
pub trait ReplayByRerun: Backend {}

impl ReplayByRerun for CpuBackend {}

impl<B: ReplayByRerun> Replay for B {
    type Recording = ();
    type Ring<T: Scalar> = Arc<Mutex<[Vec<T>; 2]>>;
    type Slot<T: Scalar> = (Arc<Mutex<[Vec<T>; 2]>>, usize);

    fn look_ahead(&self) -> usize {
        0
    }

    fn records(&self) -> bool {
        false
    }

    fn ring<T: Scalar>(&self, len: usize) -> Result<Self::Ring<T>> {
        Ok(Arc::new(Mutex::new([
            vec![T::zero(); len],
            vec![T::zero(); len],
        ])))
    }

    fn ring_slot<T: Scalar>(&self, ring: &Self::Ring<T>, slot: usize) -> Self::Slot<T> {
        (ring.clone(), slot % 2)
    }

    fn copy_to_slot<T: Scalar>(&self, sc: &B::Vector<T>, slot: &Self::Slot<T>) -> Result<()> {
        let mut slots = slot.0.lock().unwrap_or_else(|e| e.into_inner());
        gpuq_core::check_same_len("copy_to_slot", slots[slot.1].len(), sc.len())?;
        slots[slot.1].copy_from_slice(&self.download(sc)?);
        Ok(())
    }

    fn mark_slot<T: Scalar>(&self, _ring: &mut Self::Ring<T>, _slot: usize) -> Result<()> {
        Ok(())
    }

    fn read_snapshot<T: Scalar>(
        &self,
        ring: &Self::Ring<T>,
        slot: usize,
        out: &mut [T],
    ) -> Result<()> {
        let slots = ring.lock().unwrap_or_else(|e| e.into_inner());
        gpuq_core::check_same_len("read_snapshot", slots[slot % 2].len(), out.len())?;
        out.copy_from_slice(&slots[slot % 2]);
        Ok(())
    }

    unsafe fn replay(
        &self,
        _recording: &mut Option<()>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        body()
    }
}

#[cfg(feature = "cuda")]
impl Replay for gpuq_cuda::CudaBackend {
    type Recording = gpuq_cuda::Recording;
    type Ring<T: Scalar> = gpuq_cuda::ScalarRing<T>;
    type Slot<T: Scalar> = gpuq_cuda::SnapshotSlot<T>;

    fn look_ahead(&self) -> usize {
        1
    }

    fn ring<T: Scalar>(&self, len: usize) -> Result<Self::Ring<T>> {
        self.scalar_ring(len)
    }

    fn ring_slot<T: Scalar>(&self, ring: &Self::Ring<T>, slot: usize) -> Self::Slot<T> {
        gpuq_cuda::CudaBackend::ring_slot(self, ring, slot)
    }

    fn copy_to_slot<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        slot: &Self::Slot<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::copy_to_slot(self, sc, slot)
    }

    fn mark_slot<T: Scalar>(&self, ring: &mut Self::Ring<T>, slot: usize) -> Result<()> {
        gpuq_cuda::CudaBackend::mark_slot(self, ring, slot)
    }

    fn read_snapshot<T: Scalar>(
        &self,
        ring: &Self::Ring<T>,
        slot: usize,
        out: &mut [T],
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::read_snapshot(self, ring, slot, out)
    }

    unsafe fn replay(
        &self,
        recording: &mut Option<gpuq_cuda::Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        // SAFETY: the caller upholds the same contract.
        unsafe { gpuq_cuda::CudaBackend::replay(self, recording, body) }
    }
}

/// Copies `sc` into slot `slot % 2` of `ring` and marks it, after all work
/// enqueued so far (outside recorded work).
pub(crate) fn snapshot<B: Replay, T: Scalar>(
    backend: &B,
    sc: &B::Vector<T>,
    ring: &mut B::Ring<T>,
    slot: usize,
) -> Result<()> {
    let target = backend.ring_slot(ring, slot);
    backend.copy_to_slot(sc, &target)?;
    backend.mark_slot(ring, slot)
}

/// The iterate's buffers of iteration `k` (from 1; see [`Pipeline`]): odd
/// iterations read `x` and write `alt`, even ones the reverse.
pub(crate) fn iterate_buffers<'a, V>(k: usize, x: &'a mut V, alt: &'a mut V) -> (&'a V, &'a mut V) {
    if k % 2 == 1 {
        (x, alt)
    } else {
        (alt, x)
    }
}

/// Leaves the iterate of iteration `k` in `x`: copies it from `alt`, where odd
/// iterations write it, after whatever is still queued (which may write `x`).
pub(crate) fn settle_iterate<B: Backend, T: Scalar>(
    backend: &B,
    k: usize,
    alt: &B::Vector<T>,
    x: &mut B::Vector<T>,
) -> Result<()> {
    if k % 2 == 1 {
        backend.copy(alt, x)?;
    }
    Ok(())
}

/// Which recording an enqueued iteration runs through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// The recording of the iteration's parity (methods whose iterate
    /// alternates between two vectors).
    PerParity,
    /// One recording for every iteration.
    Once,
}

/// The iterations of a method with its scalars on the backend, enqueued up to
/// [`Replay::look_ahead`] ahead of the one the host reads.
///
/// Iteration k (from 1) is enqueued by [`Pipeline::enqueue`] (its work, recorded
/// and replayed per parity of k: methods alternate their iterate's buffer
/// between odd and even iterations, so that the iterate of an iteration the host
/// stops at survives the one already queued behind it), whose work ends with
/// the copy of its scalars into [`Pipeline::next_slot`], and
/// [`Pipeline::mark`] (or, for [`Record::Once`], whose one recording cannot
/// keep a slot, [`Pipeline::snapshot`] after it); the host then takes the
/// iterations' scalars in order
/// from [`Pipeline::next`]. Iterations are only ever enqueued, never undone:
/// after the host stops, the work queued behind runs on, on buffers the result
/// no longer needs.
pub(crate) struct Pipeline<B: Replay, T: Scalar> {
    ring: B::Ring<T>,
    /// The recordings: of odd and even iterations, or one in slot 0.
    recordings: [Option<B::Recording>; 2],
    ahead: usize,
    /// Iterations enqueued.
    launched: usize,
    /// Iterations whose scalars the host has taken.
    taken: usize,
    /// The last iteration to enqueue before the host takes another, where
    /// the caller expects the method to stop there ([`Pipeline::expect_last`]).
    last: Option<usize>,
    /// Whether every body is device work only ([`Pipeline::device_work`]).
    device_work: bool,
}

impl<B: Replay, T: Scalar> Pipeline<B, T> {
    /// A pipeline for a scalar array of `len` elements, numbering iterations
    /// from 1.
    pub fn new(backend: &B, len: usize) -> Result<Self> {
        Ok(Pipeline {
            ring: backend.ring(len)?,
            recordings: [None, None],
            ahead: backend.look_ahead(),
            launched: 0,
            taken: 0,
            last: None,
            device_work: false,
        })
    }

    /// This pipeline with every body it enqueues declared device work only
    /// (replayed through [`Replay::replay_device_work`], which the
    /// distributed backend over NCCL records): for a method whose iteration
    /// is fused kernels, operator products and slot reductions.
    pub fn device_work(mut self) -> Self {
        self.device_work = true;
        self
    }

    /// The number the next enqueued iteration gets.
    pub fn next_number(&self) -> usize {
        self.launched + 1
    }

    /// Whether to enqueue another iteration now: one is due when fewer than
    /// `1 + look_ahead` are in flight and the cap `max_iter` is not reached.
    pub fn wants(&self, max_iter: usize) -> bool {
        let cap = self.last.map_or(max_iter, |last| last.min(max_iter));
        self.launched < cap && self.launched <= self.taken + self.ahead
    }

    /// Tells the pipeline that the method is expected to stop at iteration
    /// `last` (`None`: no expectation): nothing past it is enqueued until the
    /// host has taken it and said otherwise. An iteration queued behind the
    /// last one is work thrown away (an AMG-preconditioned iteration across
    /// four GPUs: 2 ms of a 40 ms solve); a wrong expectation costs one
    /// iteration that waits for the host instead.
    pub fn expect_last(&mut self, last: Option<usize>) {
        self.last = last;
    }

    /// Enqueues iteration [`Pipeline::next_number`] through the recording of
    /// its parity ([`Record::PerParity`]) or the one recording
    /// ([`Record::Once`]).
    ///
    /// # Safety
    /// As [`Replay::replay`], for each recording: `body` enqueues the same work
    /// on the same vectors for every iteration it serves, and the vectors
    /// outlive the pipeline.
    pub unsafe fn enqueue(
        &mut self,
        backend: &B,
        record: Record,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let k = self.launched + 1;
        let slot = match record {
            Record::PerParity => k % 2,
            Record::Once => 0,
        };
        let recording = &mut self.recordings[slot];
        // SAFETY: the caller's contract.
        if self.device_work {
            unsafe { backend.replay_device_work(recording, body)? };
        } else {
            unsafe { backend.replay(recording, body)? };
        }
        self.launched = k;
        Ok(())
    }

    /// The slot the next enqueued iteration copies its scalars into, for a
    /// body that ends with [`Replay::copy_to_slot`] (then [`Pipeline::mark`]
    /// follows [`Pipeline::enqueue`]); recorded per parity, each recording
    /// keeps its own slot.
    pub fn next_slot(&self, backend: &B) -> B::Slot<T> {
        backend.ring_slot(&self.ring, self.launched + 1)
    }

    /// Marks the end of the iteration just enqueued, whose body copied its
    /// scalars into [`Pipeline::next_slot`].
    pub fn mark(&mut self, backend: &B) -> Result<()> {
        backend.mark_slot(&mut self.ring, self.launched)
    }

    /// Copies `sc` into the slot of the iteration just enqueued (its body did
    /// not) and marks it: for work recorded once for every iteration, which
    /// cannot keep one slot.
    pub fn snapshot(&mut self, backend: &B, sc: &B::Vector<T>) -> Result<()> {
        snapshot(backend, sc, &mut self.ring, self.launched)
    }

    /// Waits for the scalars of the next iteration not yet taken, into `out`,
    /// and returns its number; `None` when every enqueued one was taken.
    pub fn next(&mut self, backend: &B, out: &mut [T]) -> Result<Option<usize>> {
        if self.taken == self.launched {
            return Ok(None);
        }
        self.taken += 1;
        backend.read_snapshot(&self.ring, self.taken, out)?;
        Ok(Some(self.taken))
    }

    /// Forgets the iterations enqueued but not taken (their work still runs,
    /// before anything enqueued later): for a method that restarts from the
    /// last iteration taken.
    pub fn discard(&mut self) {
        self.launched = self.taken;
    }
}
