//! The Rayon CPU backend's walks: the oracle the GPU walks are tested against.
//!
//! Forward: one task per range of entries; an entry's histories run in order, so
//! its sum is the same whatever the thread count. Adjoint: the batch's histories
//! are cut into a fixed number of chunks (from n, the batch size and the stopping
//! rule, not from the thread count), each tallying into its own dense vector; the chunks are then
//! added in chunk order. The result is therefore bitwise reproducible on any
//! number of threads.

use crate::options::Estimator;
use crate::setup::{Layout, McSetup, WalkData};
use crate::walker::{AdjointBatch, BatchSums, ForwardBatch, Source, WalkBackend};
use gpuq_core::Result;
use gpuq_cpu::CpuBackend;
use gpuq_kernels::chacha::{key_from_seed, Stream};
use gpuq_kernels::walk::{adjoint_history, forward_history, Rows, Stop, Tally};
use rayon::prelude::*;
use std::sync::Arc;

/// Walk data as the CPU reads it: the setup's data (shared, not copied) and the
/// layout to read it in.
pub struct CpuWalks {
    forward: Arc<WalkData>,
    adjoint: Arc<WalkData>,
    layout: Layout,
}

/// Bytes of tally vectors the adjoint walk keeps live at once.
const TALLY_BUDGET: usize = 256 << 20;

/// Most chunks of one adjoint batch.
const MAX_CHUNKS: u64 = 64;

/// Fewest histories per chunk.
const MIN_CHUNK: u64 = 16;

/// Moves assumed per history when a weight cutoff may end it early (histories of
/// fixed length make exactly `max_steps`).
const CUTOFF_MOVES_GUESS: u64 = 64;

/// Chunks of an adjoint batch of `count` histories over `n` states: each chunk
/// zeroes and sums a whole tally vector, n streamed elements, which we weigh at a
/// sixteenth of a walk's move (a dependent random read), so a chunk gets enough
/// histories to make that cost small next to its moves, and at most [`MAX_CHUNKS`]
/// and the tally budget allow. A function of the problem and the batch only, never
/// of the thread count, so the sums are reproducible.
fn adjoint_chunks(n: usize, count: u64, stop: Stop) -> u64 {
    let moves = if stop.cutoff == 0.0 {
        u64::from(stop.max_steps)
    } else {
        CUTOFF_MOVES_GUESS.min(u64::from(stop.max_steps))
    };
    let per_chunk = (n as u64 / (16 * moves.max(1))).max(MIN_CHUNK);
    let by_memory = (TALLY_BUDGET / (8 * n.max(1))).max(1) as u64;
    (count / per_chunk).clamp(1, MAX_CHUNKS.min(by_memory))
}

impl WalkBackend for CpuBackend {
    type Prepared = CpuWalks;
    type Source = Source;

    fn walk_backend_name(&self) -> String {
        gpuq_core::Backend::name(self)
    }

    fn prepare(&self, setup: &McSetup, layout: Layout) -> Result<CpuWalks> {
        Ok(CpuWalks {
            forward: setup.forward().clone(),
            adjoint: setup.adjoint().clone(),
            layout,
        })
    }

    fn source(&self, source: &Source) -> Result<Source> {
        Ok(source.clone())
    }

    fn forward(&self, walks: &CpuWalks, src: &Source, batch: &ForwardBatch) -> Result<BatchSums> {
        let data = &walks.forward;
        check_source(data.n(), src)?;
        Ok(match (walks.layout, batch.estimator) {
            (Layout::Soa, Estimator::Collision) => forward::<_, false>(&data.soa(), src, batch),
            (Layout::Soa, Estimator::Expected) => forward::<_, true>(&data.soa(), src, batch),
            (Layout::Aos, Estimator::Collision) => forward::<_, false>(&data.aos(), src, batch),
            (Layout::Aos, Estimator::Expected) => forward::<_, true>(&data.aos(), src, batch),
        })
    }

    fn adjoint(&self, walks: &CpuWalks, src: &Source, batch: &AdjointBatch) -> Result<BatchSums> {
        let data = &walks.adjoint;
        check_source(data.n(), src)?;
        Ok(match (walks.layout, batch.estimator) {
            (Layout::Soa, Estimator::Collision) => adjoint::<_, false>(&data.soa(), src, batch),
            (Layout::Soa, Estimator::Expected) => adjoint::<_, true>(&data.soa(), src, batch),
            (Layout::Aos, Estimator::Collision) => adjoint::<_, false>(&data.aos(), src, batch),
            (Layout::Aos, Estimator::Expected) => adjoint::<_, true>(&data.aos(), src, batch),
        })
    }
}

/// Errors unless every vector of `src` has one entry per state.
fn check_source(n: usize, src: &Source) -> Result<()> {
    for len in [src.bhat.len(), src.h_bhat.len(), src.start_cdf.len()] {
        gpuq_core::check_same_len("monte carlo source", n, len)?;
    }
    Ok(())
}

/// Every entry's forward histories of the batch, in parallel over entries.
fn forward<R: Rows + Sync, const EXPECTED: bool>(
    rows: &R,
    src: &Source,
    batch: &ForwardBatch,
) -> BatchSums {
    let key = key_from_seed(batch.seed);
    let tally = if EXPECTED { &src.h_bhat } else { &src.bhat };
    let (sums, steps): (Vec<f64>, Vec<u64>) = (0..src.bhat.len())
        .into_par_iter()
        .with_min_len(64)
        .map(|i| {
            let (mut sum, mut steps) = (0.0, 0u64);
            for j in batch.first..batch.first + batch.count {
                let rng = Stream::new(key, i as u64 * batch.per_entry + j);
                let (score, moves) = forward_history::<_, EXPECTED>(
                    rows,
                    src.bhat[i],
                    |s| tally[s],
                    i,
                    batch.stop,
                    rng,
                );
                sum += score;
                steps += u64::from(moves);
            }
            (sum, steps)
        })
        .unzip();
    BatchSums {
        sums,
        steps: steps.iter().sum(),
    }
}

/// A dense tally vector.
struct Dense<'a>(&'a mut [f64]);

impl Tally for Dense<'_> {
    #[inline(always)]
    fn add(&mut self, state: usize, value: f64) {
        self.0[state] += value;
    }
}

/// The batch's adjoint histories in fixed chunks, each into its own tallies.
fn adjoint<R: Rows + Sync, const EXPECTED: bool>(
    rows: &R,
    src: &Source,
    batch: &AdjointBatch,
) -> BatchSums {
    let n = src.bhat.len();
    let key = key_from_seed(batch.seed);
    let chunks = adjoint_chunks(n, batch.count, batch.stop);
    let start_weight = |s: usize| src.bhat_l1 * src.bhat[s].signum();
    let cdf = |s: usize| src.start_cdf[s];
    let parts: Vec<(Vec<f64>, u64)> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let lo = batch.first + batch.count * c / chunks;
            let hi = batch.first + batch.count * (c + 1) / chunks;
            let mut tallies = vec![0.0; n];
            let mut steps = 0u64;
            for h in lo..hi {
                steps += u64::from(adjoint_history::<_, _, EXPECTED>(
                    rows,
                    &cdf,
                    n,
                    start_weight,
                    batch.stop,
                    Stream::new(key, h),
                    &mut Dense(&mut tallies),
                ));
            }
            (tallies, steps)
        })
        .collect();
    let sums = (0..n)
        .into_par_iter()
        .with_min_len(4096)
        .map(|i| parts.iter().map(|(t, _)| t[i]).sum())
        .collect();
    BatchSums {
        sums,
        steps: parts.iter().map(|(_, s)| s).sum(),
    }
}
