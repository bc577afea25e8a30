//! Recorded launch sequences: an iteration whose launches are the same every
//! time (same kernels, same buffers, scalars read from device memory) is
//! captured once into a CUDA graph and then replayed by one graph launch, which
//! costs the host one driver call instead of one per kernel and lets the device
//! run the kernels back to back.

use crate::backend::{dev, CudaBackend};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream, DriverError};
use gpuq_core::{Error, Result, Stats};
use std::sync::Arc;

/// A recorded launch sequence ([`CudaBackend::replay`]) and the counters one
/// replay adds to the backend's [`Stats`] (those its recording added).
pub struct Recording {
    graph: CudaGraph,
    per_replay: Stats,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recording({} launches)", self.per_replay.launches)
    }
}

impl CudaBackend {
    /// Runs the launches `body` enqueues. The first call (with `recording`
    /// `None`) captures them into a CUDA graph, stores it in `recording` and
    /// launches it; later calls launch the stored graph and do not call `body`.
    /// Either way nothing waits for the device. The counters count every replay
    /// as the launches it stands for (and keep those of a recording that
    /// failed, which never ran).
    ///
    /// Cost: one graph instantiation on the first call, then one driver call per
    /// replay, whatever the number of kernels.
    ///
    /// # Safety
    /// `body` must enqueue the same work on the same buffers each time it would
    /// be called (it is called once), with every per-call value read from
    /// device memory by the kernels, not passed from the host; every buffer it
    /// touches must outlive `recording`; and it must neither download nor wait
    /// (capture forbids both: it then fails with [`Error::Device`]). No other
    /// thread may use this backend (or a clone) while the recording call runs:
    /// its work would join the capture.
    pub unsafe fn replay(
        &self,
        recording: &mut Option<Recording>,
        body: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        if let Some(rec) = recording {
            rec.graph
                .launch()
                .map_err(dev("launching a recorded graph"))?;
            self.inner.stats.add(&rec.per_replay);
            return Ok(());
        }
        let stream = &self.inner.stream;
        let before = self.inner.stats.snapshot();
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(dev("starting a stream capture"))?;
        // The capture ends whatever happens in `body`, a panic included, so the
        // stream is usable again.
        let mut capture = Capture(Some(stream));
        let recorded = body();
        let graph = capture.end();
        recorded?;
        let graph = graph
            .map_err(dev("ending a stream capture"))?
            .ok_or_else(|| Error::Device("a stream capture recorded nothing".into()))?;
        graph.launch().map_err(dev("launching a recorded graph"))?;
        *recording = Some(Recording {
            graph,
            per_replay: self.inner.stats.snapshot().since(&before),
        });
        Ok(())
    }
}

/// An open stream capture, ended on drop if [`Capture::end`] was not called
/// (when the recorded body panics).
struct Capture<'a>(Option<&'a Arc<CudaStream>>);

impl Capture<'_> {
    /// Ends the capture and instantiates what it recorded.
    fn end(&mut self) -> std::result::Result<Option<CudaGraph>, DriverError> {
        match self.0.take() {
            // Each kernel keeps the priority of the stream it was captured
            // on: NCCL's kernels, captured on the communication stream, are
            // dispatched before the owned product's blocks as they are
            // outside a graph (`CudaBackend::communication_stream`).
            Some(stream) => stream.end_capture(
                CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY,
            ),
            None => Ok(None),
        }
    }
}

impl Drop for Capture<'_> {
    fn drop(&mut self) {
        // Only reached with the capture still open after a panic in the body;
        // the partial graph is discarded.
        let _ = self.end();
    }
}
