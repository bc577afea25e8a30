//! The CPU backend handle.

use gpuq_core::{Stats, StatsRecorder};
use std::sync::Arc;

/// The Rayon CPU backend. Cheap to clone (clones share counters and thread pool).
///
/// `CpuBackend::new()` runs on Rayon's global pool; [`CpuBackend::with_threads`]
/// gets a pool of its own (used to show reductions do not depend on the thread count).
#[derive(Clone, Debug, Default)]
pub struct CpuBackend {
    pub(crate) stats: Arc<StatsRecorder>,
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl CpuBackend {
    /// A backend on Rayon's global thread pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend on a pool of its own with `threads` worker threads (at least 1).
    pub fn with_threads(threads: usize) -> gpuq_core::Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
            .map_err(|e| gpuq_core::Error::Device(format!("cannot build thread pool: {e}")))?;
        Ok(CpuBackend {
            stats: Arc::default(),
            pool: Some(Arc::new(pool)),
        })
    }

    /// Number of worker threads this backend uses.
    pub fn threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
    }

    /// Records `units` units of work under `op` (no launch): see
    /// [`StatsRecorder::work`].
    pub fn record(&self, op: &'static str, units: u64) {
        self.stats.work(op, units);
    }

    /// Runs `f` on this backend's pool, counting one launch of `op`. Solver crates use
    /// this for their fused kernels so that they run on the same pool and are counted.
    pub fn run<R: Send>(&self, op: &'static str, f: impl FnOnce() -> R + Send) -> R {
        self.stats.launch(op);
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    /// What the backend did so far.
    pub fn snapshot(&self) -> Stats {
        self.stats.snapshot()
    }
}
