//! The CUDA backend's cubature steps: batch evaluation, the second phase and the
//! tensor chunk sums run on the device (`gpuq_cuda::CudaBackend::cubature_*`),
//! for built-in integrands; classification, splitting and compaction run on
//! the host with Rayon (the boxes live on the host between rounds).

use crate::func::Func;
use crate::kernels::{Boxes, CubatureKernels};
use crate::rules::LaneRule;
use gpuq_core::{Error, Result};
use gpuq_cuda::CudaBackend;
use gpuq_kernels::cubature::integrand::Builtin;
use gpuq_kernels::cubature::rule::{BoxResult, LocalOutcome, Rule};

/// The built-in integrand of `f`, or an error for a closure.
fn device_integrand(f: Func<'_>) -> Result<Builtin> {
    match f {
        Func::Builtin(b) => Ok(b),
        Func::Closure(_) => Err(Error::InvalidArgument(
            "the CUDA backend integrates built-in integrands only (closures run on the CPU backend)"
                .into(),
        )),
    }
}

impl CubatureKernels for CudaBackend {
    fn cub_classify(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        share: f64,
        all_bad: bool,
    ) -> Result<Vec<bool>> {
        gpuq_cpu::CpuBackend::new().cub_classify(boxes, results, share, all_bad)
    }

    fn cub_split(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        keep: &[bool],
        parts: u32,
        out: &mut Boxes,
    ) -> Result<()> {
        gpuq_cpu::CpuBackend::new().cub_split(boxes, results, keep, parts, out)
    }

    fn cub_evaluate(&self, rule: &LaneRule, f: Func<'_>, boxes: &Boxes) -> Result<Vec<BoxResult>> {
        self.cubature_evaluate(
            &rule.rule,
            &rule.table,
            &device_integrand(f)?,
            &boxes.center,
            &boxes.half,
        )
    }

    fn cub_local(
        &self,
        rule: &Rule,
        f: Func<'_>,
        boxes: &Boxes,
        tol: f64,
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        self.cubature_local(
            rule,
            &device_integrand(f)?,
            &boxes.center,
            &boxes.half,
            tol,
            max_evals,
        )
    }

    fn cub_tensor(
        &self,
        f: Func<'_>,
        dim: usize,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        let b = device_integrand(f)?;
        if b.dim as usize != dim {
            return Err(Error::shape("tensor rule", dim, b.dim));
        }
        self.cubature_tensor(&b, nodes, weights, total)
    }
}
