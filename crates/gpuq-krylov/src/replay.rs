//! Recorded iterations: a method whose iteration takes every per-iteration value
//! from its scalar array on the backend (BiCGSTAB, TFQMR) enqueues the same work
//! each time, which a backend may record once and replay.

use gpuq_core::{Backend, Result};
use gpuq_cpu::CpuBackend;

/// Record-and-replay of an iteration's work.
pub trait Replay: Backend {
    /// A recorded iteration.
    type Recording;

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
}

impl Replay for CpuBackend {
    type Recording = ();

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

    unsafe fn replay(
        &self,
        recording: &mut Option<gpuq_cuda::Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        // SAFETY: the caller upholds the same contract.
        unsafe { gpuq_cuda::CudaBackend::replay(self, recording, body) }
    }
}
