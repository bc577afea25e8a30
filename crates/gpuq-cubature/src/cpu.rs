//! The CPU backend's cubature steps: Rayon over boxes (or tensor chunks), results
//! in index order, so they do not depend on the number of threads.

use crate::func::{Func, NonFinite};
use crate::kernels::{
    check_local, with_host, Boxes, CubatureKernels, HOST_EVALS_PER_THREAD_S, LOCAL_HEAP,
};
use crate::rules::LaneRule;
use gpuq_core::Result;
use gpuq_cpu::CpuBackend;
use gpuq_kernels::cubature::rule::{self, BoxResult, LocalOutcome, Rule};
use gpuq_kernels::cubature::tensor::{chunk_points, tensor_group, TENSOR_GROUP};
use rayon::prelude::*;

impl CubatureKernels for CpuBackend {
    fn cub_evaluate(&self, rule: &LaneRule, f: Func<'_>, boxes: &Boxes) -> Result<Vec<BoxResult>> {
        self.record("cub_evaluate", boxes.len() as u64 * rule.rule.points as u64);
        let (h, seen) = (f.host()?, NonFinite::default());
        let out = self.run("cub_evaluate", || {
            with_host!(h, &seen, g, {
                (0..boxes.len())
                    .into_par_iter()
                    .map(|b| rule.apply(g, boxes, b))
                    .collect()
            })
        });
        seen.check()?;
        Ok(out)
    }

    fn cub_classify(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        share: f64,
        all_bad: bool,
    ) -> Result<Vec<bool>> {
        gpuq_core::check_same_len("cubature classify", boxes.len(), results.len())?;
        Ok(self.run("cub_classify", || {
            (0..boxes.len())
                .into_par_iter()
                .map(|b| all_bad || results[b].error > share * boxes.volume_of(b))
                .collect()
        }))
    }

    fn cub_split(
        &self,
        boxes: &Boxes,
        results: &[BoxResult],
        keep: &[bool],
        parts: u32,
        out: &mut Boxes,
    ) -> Result<()> {
        gpuq_core::check_same_len("cubature split", boxes.len(), keep.len())?;
        self.run("cub_split", || {
            parallel_split(boxes, results, keep, parts, out)
        });
        Ok(())
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
        let (h, seen) = (f.host()?, NonFinite::default());
        let out = self.run("cub_local", || {
            with_host!(h, &seen, g, {
                (0..boxes.len())
                    .into_par_iter()
                    .map(|b| {
                        rule::local_cuhre::<_, LOCAL_HEAP>(
                            rule,
                            g,
                            boxes.center_of(b),
                            boxes.half_of(b),
                            roots[b],
                            tols[b],
                            max_evals,
                        )
                    })
                    .collect()
            })
        });
        seen.check()?;
        Ok(out)
    }

    fn cub_throughput(&self, _f: Func<'_>) -> f64 {
        HOST_EVALS_PER_THREAD_S * self.threads() as f64
    }

    fn cub_tensor(
        &self,
        f: Func<'_>,
        dim: usize,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        let chunks = total.div_ceil(chunk_points(total));
        self.record("cub_tensor", total);
        let (h, seen) = (f.host()?, NonFinite::default());
        let out = self.run("cub_tensor", || {
            with_host!(h, &seen, g, {
                (0..chunks.div_ceil(TENSOR_GROUP))
                    .into_par_iter()
                    .map(|q| tensor_group(g, dim, nodes, weights, total, q))
                    .collect()
            })
        });
        seen.check()?;
        Ok(out)
    }
}

/// [`CubatureKernels::cub_split`] with Rayon over the kept boxes (the same
/// output as the default body: kept boxes in order, children contiguous),
/// into `out`'s reused buffers.
fn parallel_split(
    boxes: &Boxes,
    results: &[BoxResult],
    keep: &[bool],
    parts: u32,
    out: &mut Boxes,
) {
    let n = boxes.dim;
    let per = parts as usize;
    let kept: Vec<usize> = (0..boxes.len()).filter(|&b| keep[b]).collect();
    out.resize(n, kept.len() * per);
    let width = (per * n).max(1);
    out.center
        .par_chunks_mut(width)
        .zip(out.half.par_chunks_mut(width))
        .zip(kept.par_iter())
        .for_each(|((c, h), &b)| {
            for k in 0..per {
                let o = k * n;
                rule::child(
                    boxes.center_of(b),
                    boxes.half_of(b),
                    results[b].axis as usize,
                    parts,
                    k as u32,
                    &mut c[o..o + n],
                    &mut h[o..o + n],
                );
            }
        });
}
