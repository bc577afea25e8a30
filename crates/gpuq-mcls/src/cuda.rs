//! The CUDA backend's walks: the walk data uploaded once in the chosen layout,
//! the right-hand-side data once per right-hand side, one kernel per batch.

use crate::options::{Estimator, Mapping};
use crate::setup::{Layout, McSetup};
use crate::walker::{AdjointBatch, BatchSums, ForwardBatch, Source, WalkBackend};
use gpuq_core::{Backend, Result};
use gpuq_cuda::{CudaBackend, CudaVector, DeviceWalkData, ForwardMapping};

/// Forward and adjoint walk data on the device.
pub struct CudaWalks {
    forward: DeviceWalkData,
    adjoint: DeviceWalkData,
}

/// Right-hand-side data on the device.
pub struct CudaSource {
    bhat: CudaVector<f64>,
    h_bhat: CudaVector<f64>,
    start_cdf: CudaVector<f64>,
    bhat_l1: f64,
}

impl WalkBackend for CudaBackend {
    type Prepared = CudaWalks;
    type Source = CudaSource;

    fn walk_backend_name(&self) -> String {
        self.name()
    }

    fn prepare(&self, setup: &McSetup, layout: Layout) -> Result<CudaWalks> {
        let up = |d: &crate::WalkData| match layout {
            Layout::Soa => self.upload_walks_soa(&d.ptr, &d.cdf, &d.w, &d.h, &d.col),
            Layout::Aos => self.upload_walks_aos(&d.ptr, &d.records),
        };
        Ok(CudaWalks {
            forward: up(setup.forward())?,
            adjoint: up(setup.adjoint())?,
        })
    }

    fn source(&self, s: &Source) -> Result<CudaSource> {
        Ok(CudaSource {
            bhat: self.upload(&s.bhat)?,
            h_bhat: self.upload(&s.h_bhat)?,
            start_cdf: self.upload(&s.start_cdf)?,
            bhat_l1: s.bhat_l1,
        })
    }

    fn forward(&self, w: &CudaWalks, s: &CudaSource, batch: &ForwardBatch) -> Result<BatchSums> {
        let expected = batch.estimator == Estimator::Expected;
        let mapping = match batch.mapping {
            Mapping::ThreadPerEntry => ForwardMapping::PerEntry,
            Mapping::ThreadPerHistory => ForwardMapping::PerHistory,
        };
        let (sums, steps) = self.mc_forward(
            &w.forward,
            &s.bhat,
            if expected { &s.h_bhat } else { &s.bhat },
            (batch.per_entry, batch.first, batch.count),
            expected,
            mapping,
            batch.seed,
            batch.stop,
        )?;
        Ok(BatchSums { sums, steps })
    }

    fn adjoint(&self, w: &CudaWalks, s: &CudaSource, batch: &AdjointBatch) -> Result<BatchSums> {
        let (sums, steps) = self.mc_adjoint(
            &w.adjoint,
            &s.start_cdf,
            &s.bhat,
            s.bhat_l1,
            (batch.first, batch.count),
            batch.estimator == Estimator::Expected,
            batch.seed,
            batch.stop,
        )?;
        Ok(BatchSums { sums, steps })
    }
}
