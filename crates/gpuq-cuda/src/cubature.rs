//! Cubature on the device (kernels in `kernels-rs/src/device/cubature.rs`, the
//! per-box rule, the per-thread CUHRE and the tensor chunk sums shared with the
//! CPU through `gpuq_kernels::cubature`).

use crate::backend::{dev, CudaBackend};
use cudarc::driver::{CudaSlice, PushKernelArg};
use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::{Builtin, MAX_DIM};
use gpuq_kernels::cubature::lanes::{RulePoint, LANES};
use gpuq_kernels::cubature::rule::{BoxResult, LocalOutcome, Rule};
use gpuq_kernels::cubature::tensor::{TENSOR_CHUNK, TENSOR_GROUP};

/// The bytes of a `#[repr(C)]` value without padding.
fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: called with `Rule` and `Builtin` only: `#[repr(C)]` structs of u32
    // and f64 fields laid out without padding (u32 fields come in even counts
    // before the f64 arrays), so every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// The bytes of a slice of values without padding (called with `f64` and
/// `RulePoint`: `#[repr(C)]` u64, u32, u32, 16 bytes).
fn slice_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: the element types named above have no padding, so every byte is
    // initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Checks the batch: dimension within the rule's and the integrand's, box arrays
/// of n values per box; returns the number of boxes.
fn check_batch(rule: &Rule, f: &Builtin, center: &[f64], half: &[f64]) -> Result<usize> {
    let n = rule.dim as usize;
    if n == 0 || n > MAX_DIM || f.dim != rule.dim {
        return Err(Error::InvalidArgument(format!(
            "cubature batch: rule of dimension {} and integrand of dimension {}",
            rule.dim, f.dim
        )));
    }
    if center.len() != half.len() || center.len() % n != 0 {
        return Err(Error::shape(
            "cubature batch",
            format!("centres and half-widths of {n} values per box"),
            format!("{} and {} values", center.len(), half.len()),
        ));
    }
    Ok(center.len() / n)
}

impl CudaBackend {
    fn cub_zeroed(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.inner
            .stream
            .alloc_zeros::<u8>(bytes.max(8))
            .map_err(dev("allocating cubature buffers"))
    }

    /// Applies `rule` (with `table`, its points past the single-axis ones, as
    /// `gpuq_kernels::cubature::lanes::table_points` lists them) with integrand
    /// `f` to every box (centres and half-widths, n per box): one warp per box.
    /// Five uploads (rule, table, integrand, boxes), one launch, one download
    /// of 3 values per box.
    pub fn cubature_evaluate(
        &self,
        rule: &Rule,
        table: &[RulePoint],
        f: &Builtin,
        center: &[f64],
        half: &[f64],
    ) -> Result<Vec<BoxResult>> {
        let boxes = check_batch(rule, f, center, half)?;
        if boxes == 0 {
            return Ok(Vec::new());
        }
        let d_rule = self.upload_bytes(bytes_of(rule))?;
        let d_table = self.upload_bytes(slice_bytes(table))?;
        let points = table.len();
        let d_f = self.upload_bytes(bytes_of(f))?;
        let d_c = self.upload_bytes(slice_bytes(center))?;
        let d_h = self.upload_bytes(slice_bytes(half))?;
        let mut out = self.cub_zeroed(24 * boxes)?;
        let k = self.function("cub_evaluate")?;
        let mut b = self.inner.stream.launch_builder(&k);
        b.arg(&d_rule)
            .arg(&d_f)
            .arg(&d_table)
            .arg(&points)
            .arg(&boxes)
            .arg(&d_c)
            .arg(&d_h)
            .arg(&mut out);
        // SAFETY: arguments match `cub_evaluate`; centre and half-width arrays
        // hold boxes x rule.dim values (checked), out 3 x boxes values, the
        // table `points` entries; the rule and integrand are whole `#[repr(C)]`
        // copies. A warp per box: 32 threads each.
        unsafe { b.launch(Self::cfg(self.grid_blocks(boxes * LANES))) }
            .map_err(dev("cub_evaluate"))?;
        self.inner.stats.launch("cub_evaluate");
        let mut host = vec![0.0f64; 3 * boxes];
        self.download_into(&out.slice(..), &mut host)?;
        Ok(host
            .chunks_exact(3)
            .map(|v| BoxResult {
                estimate: v[0],
                error: v[1],
                axis: v[2] as u32,
            })
            .collect())
    }

    /// Runs the bounded-heap sequential CUHRE on every box (one thread per box)
    /// with absolute tolerance `tol` and at most `max_evals` evaluations each.
    /// Four uploads, one launch, one download of 32 bytes per box.
    pub fn cubature_local(
        &self,
        rule: &Rule,
        f: &Builtin,
        center: &[f64],
        half: &[f64],
        tol: f64,
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        let boxes = check_batch(rule, f, center, half)?;
        if boxes == 0 {
            return Ok(Vec::new());
        }
        let d_rule = self.upload_bytes(bytes_of(rule))?;
        let d_f = self.upload_bytes(bytes_of(f))?;
        let d_c = self.upload_bytes(slice_bytes(center))?;
        let d_h = self.upload_bytes(slice_bytes(half))?;
        let mut out = self.cub_zeroed(32 * boxes)?;
        let k = self.function("cub_local")?;
        let mut b = self.inner.stream.launch_builder(&k);
        b.arg(&d_rule)
            .arg(&d_f)
            .arg(&boxes)
            .arg(&d_c)
            .arg(&d_h)
            .arg(&tol)
            .arg(&max_evals)
            .arg(&mut out);
        // SAFETY: arguments match `cub_local`; sizes as in `cubature_evaluate`,
        // out holds one 32-byte `LocalOutcome` per box.
        unsafe { b.launch(Self::cfg(self.grid_blocks(boxes))) }.map_err(dev("cub_local"))?;
        self.inner.stats.launch("cub_local");
        // The outcomes travel as four 8-byte words each: estimate, error,
        // evaluations (u64 bits), regions | converged << 32.
        let mut host = vec![0.0f64; 4 * boxes];
        self.download_into(&out.slice(..), &mut host)?;
        Ok(host
            .chunks_exact(4)
            .map(|v| {
                let packed = v[3].to_bits();
                LocalOutcome {
                    estimate: v[0],
                    error: v[1],
                    evaluations: v[2].to_bits(),
                    regions: packed as u32,
                    converged: (packed >> 32) as u32,
                }
            })
            .collect())
    }

    /// The group sums of the tensor rule with 1D `nodes` and `weights` on
    /// `f.dim` axes over points 0..total (chunks of `TENSOR_CHUNK` points, one
    /// thread per chunk; then groups of `TENSOR_GROUP` chunks added in order,
    /// one thread per group). Three uploads, two launches, one download of one
    /// value per group.
    pub fn cubature_tensor(
        &self,
        f: &Builtin,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        if nodes.is_empty() || nodes.len() != weights.len() {
            return Err(Error::shape("tensor rule", nodes.len(), weights.len()));
        }
        let chunks = total.div_ceil(TENSOR_CHUNK);
        if chunks == 0 {
            return Ok(Vec::new());
        }
        let groups = chunks.div_ceil(TENSOR_GROUP) as usize;
        let d_f = self.upload_bytes(bytes_of(f))?;
        let d_x = self.upload_bytes(slice_bytes(nodes))?;
        let d_w = self.upload_bytes(slice_bytes(weights))?;
        let mut partials = self.cub_zeroed(8 * chunks as usize)?;
        let mut out = self.cub_zeroed(8 * groups)?;
        let na = nodes.len();
        let k = self.function("cub_tensor")?;
        let mut b = self.inner.stream.launch_builder(&k);
        b.arg(&d_f)
            .arg(&d_x)
            .arg(&d_w)
            .arg(&na)
            .arg(&total)
            .arg(&mut partials);
        // SAFETY: arguments match `cub_tensor`; nodes and weights hold na
        // values, partials one value per chunk of `total` points.
        unsafe { b.launch(Self::cfg(self.grid_blocks(chunks as usize))) }
            .map_err(dev("cub_tensor"))?;
        self.inner.stats.launch("cub_tensor");
        let k = self.function("cub_tensor_groups")?;
        let mut b = self.inner.stream.launch_builder(&k);
        b.arg(&chunks).arg(&partials).arg(&mut out);
        // SAFETY: partials holds `chunks` values, out one per group of them.
        unsafe { b.launch(Self::cfg(self.grid_blocks(groups))) }
            .map_err(dev("cub_tensor_groups"))?;
        self.inner.stats.launch("cub_tensor_groups");
        let mut host = vec![0.0f64; groups];
        self.download_into(&out.slice(..), &mut host)?;
        Ok(host)
    }
}
