//! The trait a backend implements to run batches of Monte Carlo histories.

use crate::options::{Estimator, Mapping};
use crate::setup::{Layout, McSetup};
use gpuq_core::Result;
use gpuq_kernels::walk::Stop;

/// The right-hand-side data the walks read: b^ = D^-1 b, what the forward walk
/// tallies (b^, or H b^ for the expected-value estimator) and the adjoint start
/// distribution.
#[derive(Clone, Debug)]
pub struct Source {
    /// b^ = D^-1 b.
    pub bhat: Vec<f64>,
    /// H b^ (the forward expected-value tally).
    pub h_bhat: Vec<f64>,
    /// Cumulative |b^| / ||b^||_1; the last entry is exactly 1.
    pub start_cdf: Vec<f64>,
    /// ||b^||_1.
    pub bhat_l1: f64,
}

impl Source {
    /// Builds the source of b^ for the walk data of `setup`; errors unless b^ has
    /// one entry per unknown. Cost: one pass over H.
    pub fn new(setup: &McSetup, bhat: Vec<f64>) -> Result<Self> {
        gpuq_core::check_same_len("monte carlo source", setup.n(), bhat.len())?;
        let h_bhat = setup.forward().mul(&bhat);
        let bhat_l1: f64 = bhat.iter().map(|v| v.abs()).sum();
        let mut acc = 0.0;
        let mut start_cdf: Vec<f64> = bhat
            .iter()
            .map(|v| {
                acc += v.abs();
                acc / bhat_l1
            })
            .collect();
        if let Some(last) = start_cdf.last_mut() {
            *last = 1.0;
        }
        Ok(Source {
            bhat,
            h_bhat,
            start_cdf,
            bhat_l1,
        })
    }
}

/// One batch of forward histories: for every entry i, histories
/// `first..first + count` of its `per_entry` (stream ids `i * per_entry + j`).
#[derive(Clone, Copy, Debug)]
pub struct ForwardBatch {
    /// Histories each entry has in the whole run (the stream-id stride).
    pub per_entry: u64,
    /// First history of each entry in this batch.
    pub first: u64,
    /// Histories of each entry in this batch.
    pub count: u64,
    /// Collision or expected value.
    pub estimator: Estimator,
    /// Stopping rule.
    pub stop: Stop,
    /// ChaCha key seed.
    pub seed: u64,
    /// Thread mapping (GPU).
    pub mapping: Mapping,
}

/// One batch of adjoint histories: stream ids `first..first + count`.
#[derive(Clone, Copy, Debug)]
pub struct AdjointBatch {
    /// First history id.
    pub first: u64,
    /// Histories in the batch.
    pub count: u64,
    /// Collision or expected value.
    pub estimator: Estimator,
    /// Stopping rule.
    pub stop: Stop,
    /// ChaCha key seed.
    pub seed: u64,
}

/// What a batch gives back: per entry the sum of the histories' scores (forward)
/// or tallies (adjoint), and the moves made.
#[derive(Clone, Debug, Default)]
pub struct BatchSums {
    /// Sums, one per entry.
    pub sums: Vec<f64>,
    /// Moves made by all histories of the batch.
    pub steps: u64,
}

/// A backend that runs Monte Carlo histories. Walk data is made resident once
/// ([`WalkBackend::prepare`]), right-hand-side data once per right-hand side
/// ([`WalkBackend::source`]), then batches run against both. Every backend walks
/// the same walks for the same seed (the histories' random numbers come from
/// `gpuq_kernels::chacha`); sums differ only in their summation order.
pub trait WalkBackend {
    /// Walk data resident on the backend.
    type Prepared: Send + Sync;
    /// Right-hand-side data resident on the backend.
    type Source: Send + Sync;

    /// The backend's name in reports.
    fn walk_backend_name(&self) -> String;
    /// Makes the walk data of `setup` resident in `layout`. Cost: one upload of
    /// the walk data (nothing on the CPU).
    fn prepare(&self, setup: &McSetup, layout: Layout) -> Result<Self::Prepared>;
    /// Makes `source` resident. Cost: one upload of 4 n values.
    fn source(&self, source: &Source) -> Result<Self::Source>;
    /// Runs one batch of forward histories.
    fn forward(
        &self,
        walks: &Self::Prepared,
        source: &Self::Source,
        batch: &ForwardBatch,
    ) -> Result<BatchSums>;
    /// Runs one batch of adjoint histories.
    fn adjoint(
        &self,
        walks: &Self::Prepared,
        source: &Self::Source,
        batch: &AdjointBatch,
    ) -> Result<BatchSums>;
    /// True when `flag` is true on any process of the backend, so that all of them stop at
    /// the same batch (a collective on a distributed backend). Default: `flag`, O(1).
    fn walk_any(&self, flag: bool) -> Result<bool> {
        Ok(flag)
    }
}
