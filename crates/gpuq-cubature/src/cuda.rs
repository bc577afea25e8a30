//! The CUDA backend's cubature steps. The batch evaluation, the second phase
//! and the tensor chunk sums run on the device: built-in integrands in the
//! main module's fused kernels, expressions and user code in the rule kernels
//! linked with the user's function (`gpuq_cuda::CudaBackend::link_integrand`:
//! an expression's CUDA C, compiled once per process and machine). Closures
//! run on the host (the CPU backend's Rayon steps). Classification, splitting
//! and compaction run on the host with Rayon (the boxes live on the host
//! between rounds).
//!
//! A built-in's non-finite result is located by evaluating its box (or tensor
//! group) again on the host, which computes the same bits; a linked
//! integrand's kernels record the point themselves.

use crate::func::{CodeKind, Func, NonFinite};
use crate::kernels::{check_local, with_host, Boxes, CubatureKernels, Prepared};
use crate::rules::LaneRule;
use gpuq_core::{Error, Result};
use gpuq_cpu::CpuBackend;
use gpuq_cuda::{CudaBackend, DeviceCode, DeviceIntegrand, LinkedIntegrand};
use gpuq_kernels::cubature::integrand::Builtin;
use gpuq_kernels::cubature::rule::{BoxResult, LocalOutcome, Rule};
use gpuq_kernels::cubature::tensor::tensor_group;

/// Nominal evaluations per second of the device (an H100: the low end of its
/// measured 1.0-8.5 x 10^9 with the built-ins, `docs/benchmarks.md`), for the
/// defaults that depend on the backend.
pub const DEVICE_EVALS_S: f64 = 2.0e9;

/// How the device evaluates an integrand.
enum OnDevice {
    /// The built-ins' fused kernels.
    Builtin(Builtin),
    /// Rule kernels linked with the user's function of `dim` variables.
    Linked(LinkedIntegrand, usize),
    /// Not on the device: the host evaluates (a closure).
    Host,
}

/// Resolves `f` for `backend`: an expression's CUDA C or the user's code is
/// linked (or found in the caches).
fn on_device(backend: &CudaBackend, f: Func<'_>) -> Result<OnDevice> {
    Ok(match f {
        Func::Builtin(b) => OnDevice::Builtin(b),
        Func::Closure(_) | Func::Batch(_) => OnDevice::Host,
        Func::Expr(e) => OnDevice::Linked(
            backend.link_integrand(DeviceCode::CudaC(&e.cuda_source()))?,
            e.dim(),
        ),
        Func::Code(c) => {
            let code = match c.kind {
                CodeKind::CudaC => DeviceCode::CudaC(&c.text),
                CodeKind::Ptx => DeviceCode::Ptx(&c.text),
            };
            OnDevice::Linked(backend.link_integrand(code)?, c.dim)
        }
    })
}

impl OnDevice {
    fn integrand(&self) -> Option<DeviceIntegrand<'_>> {
        match self {
            OnDevice::Builtin(b) => Some(DeviceIntegrand::Builtin(b)),
            OnDevice::Linked(kernels, dim) => Some(DeviceIntegrand::Linked { kernels, dim: *dim }),
            OnDevice::Host => None,
        }
    }
}

/// The boxes `which` of `boxes`, in order.
fn pick(boxes: &Boxes, which: impl Iterator<Item = usize>) -> Boxes {
    let mut out = Boxes::new(boxes.dim);
    for b in which {
        out.push(boxes.center_of(b), boxes.half_of(b));
    }
    out
}

/// Indices of the results whose estimate or error is not finite.
fn nonfinite<T>(results: &[T], values: impl Fn(&T) -> [f64; 2]) -> Vec<usize> {
    results
        .iter()
        .enumerate()
        .filter(|(_, r)| values(r).iter().any(|v| !v.is_finite()))
        .map(|(i, _)| i)
        .collect()
}

/// The error for a built-in's non-finite device result that the host replay
/// (`replay`, which errors at the non-finite value with its point) did not
/// reproduce.
fn unexplained(what: &str) -> Error {
    Error::Device(format!(
        "{what}: a non-finite result on the device that the host replay does not reproduce"
    ))
}

impl CubatureKernels for CudaBackend {
    fn cub_prepare(&self, f: Func<'_>) -> Result<Prepared> {
        Ok(match on_device(self, f)? {
            OnDevice::Builtin(_) => Prepared {
                evaluation: "device-builtin",
                compile_s: 0.0,
                module: None,
            },
            OnDevice::Linked(l, _) => Prepared {
                evaluation: "device-linked",
                compile_s: l.compile_s,
                module: Some(l.source.name()),
            },
            OnDevice::Host => Prepared::HOST,
        })
    }

    fn cub_classify(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        share: f64,
        all_bad: bool,
    ) -> Result<Vec<bool>> {
        CpuBackend::new().cub_classify(boxes, results, share, all_bad)
    }

    fn cub_split(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        keep: &[bool],
        parts: u32,
        out: &mut Boxes,
    ) -> Result<()> {
        CpuBackend::new().cub_split(boxes, results, keep, parts, out)
    }

    fn cub_evaluate(&self, rule: &LaneRule, f: Func<'_>, boxes: &Boxes) -> Result<Vec<BoxResult>> {
        let dev = on_device(self, f)?;
        let Some(d) = dev.integrand() else {
            return CpuBackend::new().cub_evaluate(rule, f, boxes);
        };
        let out = self.cubature_evaluate(&rule.rule, &rule.table, d, &boxes.center, &boxes.half)?;
        let bad = nonfinite(&out, |r| [r.estimate, r.error]);
        if !bad.is_empty() {
            CpuBackend::new().cub_evaluate(rule, f, &pick(boxes, bad.into_iter()))?;
            return Err(unexplained("cubature batch"));
        }
        Ok(out)
    }

    fn cub_local(
        &self,
        rule: &Rule,
        f: Func<'_>,
        boxes: &Boxes,
        roots: &[BoxResult],
        tols: &[f64],
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        check_local(boxes, roots, tols)?;
        let dev = on_device(self, f)?;
        let Some(d) = dev.integrand() else {
            return CpuBackend::new().cub_local(rule, f, boxes, roots, tols, max_evals);
        };
        let out =
            self.cubature_local(rule, d, &boxes.center, &boxes.half, roots, tols, max_evals)?;
        let bad = nonfinite(&out, |r| [r.estimate, r.error]);
        if !bad.is_empty() {
            let r: Vec<BoxResult> = bad.iter().map(|&b| roots[b]).collect();
            let t: Vec<f64> = bad.iter().map(|&b| tols[b]).collect();
            CpuBackend::new().cub_local(
                rule,
                f,
                &pick(boxes, bad.into_iter()),
                &r,
                &t,
                max_evals,
            )?;
            return Err(unexplained("second phase"));
        }
        Ok(out)
    }

    /// The H100's measured rates with the built-ins (1.0-8.5 x 10^9
    /// evaluations per second, rule arithmetic and the rounds' host work
    /// included: `docs/benchmarks.md`), [`DEVICE_EVALS_S`]; a closure runs on
    /// the host threads.
    fn cub_throughput(&self, f: Func<'_>) -> f64 {
        match f {
            Func::Closure(_) | Func::Batch(_) => CpuBackend::new().cub_throughput(f),
            _ => DEVICE_EVALS_S,
        }
    }

    fn cub_is_device(&self, f: Func<'_>) -> bool {
        !matches!(f, Func::Closure(_) | Func::Batch(_))
    }

    fn cub_tensor(
        &self,
        f: Func<'_>,
        dim: usize,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        f.check_dim("tensor rule", dim)?;
        let dev = on_device(self, f)?;
        let Some(d) = dev.integrand() else {
            return CpuBackend::new().cub_tensor(f, dim, nodes, weights, total);
        };
        let out = self.cubature_tensor(d, nodes, weights, total)?;
        let bad: Vec<u64> = (0..out.len() as u64)
            .filter(|&q| !out[q as usize].is_finite())
            .collect();
        if !bad.is_empty() {
            // The host sums the non-finite groups again and stops at the value.
            let (h, seen) = (f.host()?, NonFinite::default());
            with_host!(h, &seen, g, {
                for &q in &bad {
                    tensor_group(g, dim, nodes, weights, total, q);
                }
            });
            seen.check()?;
            return Err(unexplained("tensor rule"));
        }
        Ok(out)
    }
}
