//! Cubature on the device (kernels in `kernels-rs/src/device/cubature.rs`, the
//! per-box rule, the per-thread CUHRE and the tensor chunk sums shared with the
//! CPU through `gpuq_kernels::cubature`).

use crate::backend::{dev, CudaBackend};
use crate::linked::LinkedIntegrand;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchArgs, PushKernelArg};
use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::{Builtin, MAX_DIM};
use gpuq_kernels::cubature::lanes::{RulePoint, LANES};
use gpuq_kernels::cubature::rule::{BoxResult, LocalOutcome, Rule};
use gpuq_kernels::cubature::tensor::{chunk_points, TENSOR_GROUP};

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

/// The integrand of a device cubature launch: a built-in (its kind and
/// parameters travel to the kernels) or a user integrand linked with the
/// kernels ([`CudaBackend::link_integrand`]) of dimension `dim`.
#[derive(Clone, Copy, Debug)]
pub enum DeviceIntegrand<'a> {
    /// A built-in integrand: the fused kernels of the main module.
    Builtin(&'a Builtin),
    /// A linked user integrand of `dim` variables.
    Linked {
        /// The linked kernels.
        kernels: &'a LinkedIntegrand,
        /// Its number of variables.
        dim: usize,
    },
}

impl DeviceIntegrand<'_> {
    fn dim(&self) -> usize {
        match self {
            DeviceIntegrand::Builtin(b) => b.dim as usize,
            DeviceIntegrand::Linked { dim, .. } => *dim,
        }
    }
}

/// Values of the non-finite record of the linked kernels: a count, the first
/// value, its point (`MAX_DIM` coordinates).
const DIAG: usize = 2 + MAX_DIM;

/// What a launch's integrand argument keeps alive: the uploaded built-in, or
/// the linked kernels' non-finite record.
enum Bound {
    Builtin(CudaSlice<u8>),
    Linked(CudaSlice<u8>),
}

/// Checks the batch: dimension within the rule's and the integrand's, box arrays
/// of n values per box; returns the number of boxes.
fn check_batch(
    rule: &Rule,
    f: &DeviceIntegrand<'_>,
    center: &[f64],
    half: &[f64],
) -> Result<usize> {
    let n = rule.dim as usize;
    if n == 0 || n > MAX_DIM || f.dim() != n {
        return Err(Error::InvalidArgument(format!(
            "cubature batch: rule of dimension {} and integrand of dimension {}",
            rule.dim,
            f.dim()
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

    /// The kernel `name` of the main module (built-in) or `linked` for a user
    /// integrand, with the integrand's argument uploaded: the built-in's bytes,
    /// or a zeroed non-finite record.
    fn cub_kernel(
        &self,
        f: &DeviceIntegrand<'_>,
        name: &str,
        linked: fn(&LinkedIntegrand) -> &CudaFunction,
    ) -> Result<(CudaFunction, Bound)> {
        Ok(match f {
            DeviceIntegrand::Builtin(b) => (
                self.function(name)?,
                Bound::Builtin(self.upload_bytes(bytes_of(*b))?),
            ),
            DeviceIntegrand::Linked { kernels, .. } => (
                linked(kernels).clone(),
                Bound::Linked(self.cub_zeroed(8 * DIAG)?),
            ),
        })
    }

    /// For a linked integrand, an error when one of the launch's result
    /// `values` (those of `what`) is not finite, naming the point its kernels
    /// recorded (one more download). Built-ins pass: the caller locates theirs.
    fn check_linked(
        &self,
        bound: &Bound,
        what: &str,
        mut values: impl Iterator<Item = f64>,
        dim: usize,
    ) -> Result<()> {
        let Bound::Linked(diag) = bound else {
            return Ok(());
        };
        let Some(value) = values.find(|v| !v.is_finite()) else {
            return Ok(());
        };
        let mut host = vec![0.0f64; DIAG];
        self.download_into(&diag.slice(..), &mut host)?;
        Err(if host[0].to_bits() == 0 {
            Error::InvalidArgument(format!(
                "{what}: the rule's weighted sums reached {value} although every integrand value was finite (values too large to add)"
            ))
        } else {
            Error::IntegrandNotFinite {
                value: host[1],
                point: host[2..2 + dim.min(MAX_DIM)].to_vec(),
            }
        })
    }

    /// Applies `rule` (with `table`, its points past the single-axis ones, as
    /// `gpuq_kernels::cubature::lanes::table_points` lists them) with integrand
    /// `f` to every box (centres and half-widths, n per box): one warp per box.
    /// Five uploads (rule, table, integrand, boxes), one launch, one download
    /// of 3 values per box. A linked integrand that returns NaN or an infinite
    /// value stops with [`Error::IntegrandNotFinite`] naming a point (one more
    /// download); a built-in's non-finite results are returned as they are.
    pub fn cubature_evaluate(
        &self,
        rule: &Rule,
        table: &[RulePoint],
        f: DeviceIntegrand<'_>,
        center: &[f64],
        half: &[f64],
    ) -> Result<Vec<BoxResult>> {
        let boxes = check_batch(rule, &f, center, half)?;
        if boxes == 0 {
            return Ok(Vec::new());
        }
        let d_rule = self.upload_bytes(bytes_of(rule))?;
        let d_table = self.upload_bytes(slice_bytes(table))?;
        let points = table.len();
        let (k, bound) = self.cub_kernel(&f, "cub_evaluate", |l| &l.evaluate)?;
        let d_c = self.upload_bytes(slice_bytes(center))?;
        let d_h = self.upload_bytes(slice_bytes(half))?;
        let mut out = self.cub_zeroed(24 * boxes)?;
        let mut b = self.inner.stream.launch_builder(&k);
        b.arg(&d_rule);
        push_integrand(&mut b, &bound);
        b.arg(&d_table)
            .arg(&points)
            .arg(&boxes)
            .arg(&d_c)
            .arg(&d_h)
            .arg(&mut out);
        // SAFETY: arguments match `cub_evaluate` (and `cubu_evaluate`, whose
        // second argument is the 2 + MAX_DIM-value record); centre and
        // half-width arrays hold boxes x rule.dim values (checked), out 3 x
        // boxes values, the table `points` entries; the rule and integrand are
        // whole `#[repr(C)]` copies. A warp per box: 32 threads each.
        unsafe { b.launch(Self::cfg(self.grid_blocks(boxes * LANES))) }
            .map_err(dev("cub_evaluate"))?;
        self.inner.stats.launch("cub_evaluate");
        let mut host = vec![0.0f64; 3 * boxes];
        self.download_into(&out.slice(..), &mut host)?;
        let values = host.chunks_exact(3).flat_map(|r| [r[0], r[1]]);
        self.check_linked(&bound, "cubature batch", values, f.dim())?;
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
    /// from its known rule result `roots[b]`, with absolute tolerance `tols[b]`
    /// and at most `max_evals` evaluations each. Five uploads, one launch, one
    /// download of 32 bytes per box; non-finite values of a linked integrand
    /// as in [`CudaBackend::cubature_evaluate`].
    #[allow(clippy::too_many_arguments)]
    pub fn cubature_local(
        &self,
        rule: &Rule,
        f: DeviceIntegrand<'_>,
        center: &[f64],
        half: &[f64],
        roots: &[BoxResult],
        tols: &[f64],
        max_evals: u64,
    ) -> Result<Vec<LocalOutcome>> {
        let boxes = check_batch(rule, &f, center, half)?;
        if roots.len() != boxes || tols.len() != boxes {
            return Err(Error::shape(
                "second phase",
                format!("{boxes} root results and tolerances"),
                format!("{} and {}", roots.len(), tols.len()),
            ));
        }
        if boxes == 0 {
            return Ok(Vec::new());
        }
        let d_rule = self.upload_bytes(bytes_of(rule))?;
        let (k, bound) = self.cub_kernel(&f, "cub_local", |l| &l.local)?;
        let d_c = self.upload_bytes(slice_bytes(center))?;
        let d_h = self.upload_bytes(slice_bytes(half))?;
        let flat: Vec<f64> = roots
            .iter()
            .flat_map(|r| [r.estimate, r.error, r.axis as f64])
            .collect();
        let d_roots = self.upload_bytes(slice_bytes(&flat))?;
        let d_tols = self.upload_bytes(slice_bytes(tols))?;
        let mut out = self.cub_zeroed(32 * boxes)?;
        let mut b = self.inner.stream.launch_builder(&k);
        b.arg(&d_rule);
        push_integrand(&mut b, &bound);
        b.arg(&boxes)
            .arg(&d_c)
            .arg(&d_h)
            .arg(&d_roots)
            .arg(&d_tols)
            .arg(&max_evals)
            .arg(&mut out);
        // SAFETY: arguments match `cub_local` (`cubu_local`); sizes as in
        // `cubature_evaluate`, roots hold 3 values per box, tols one, out one
        // 32-byte `LocalOutcome` per box.
        unsafe { b.launch(Self::cfg(self.grid_blocks(boxes))) }.map_err(dev("cub_local"))?;
        self.inner.stats.launch("cub_local");
        // The outcomes travel as four 8-byte words each: estimate, error,
        // evaluations (u64 bits), regions | converged << 32.
        let mut host = vec![0.0f64; 4 * boxes];
        self.download_into(&out.slice(..), &mut host)?;
        let values = host.chunks_exact(4).flat_map(|r| [r[0], r[1]]);
        self.check_linked(&bound, "second phase", values, f.dim())?;
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
    /// `f`'s axes over points 0..total (chunks of `chunk_points(total)` points,
    /// one thread per chunk; then groups of `TENSOR_GROUP` chunks added in order,
    /// one thread per group). Three uploads, two launches, one download of one
    /// value per group; non-finite values of a linked integrand as in
    /// [`CudaBackend::cubature_evaluate`].
    pub fn cubature_tensor(
        &self,
        f: DeviceIntegrand<'_>,
        nodes: &[f64],
        weights: &[f64],
        total: u64,
    ) -> Result<Vec<f64>> {
        if nodes.is_empty() || nodes.len() != weights.len() {
            return Err(Error::shape("tensor rule", nodes.len(), weights.len()));
        }
        let dim = f.dim();
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::InvalidArgument(format!(
                "tensor rule: integrand of dimension {dim}"
            )));
        }
        let chunks = total.div_ceil(chunk_points(total));
        if chunks == 0 {
            return Ok(Vec::new());
        }
        let groups = chunks.div_ceil(TENSOR_GROUP) as usize;
        let (k, bound) = self.cub_kernel(&f, "cub_tensor", |l| &l.tensor)?;
        let d_x = self.upload_bytes(slice_bytes(nodes))?;
        let d_w = self.upload_bytes(slice_bytes(weights))?;
        let mut partials = self.cub_zeroed(8 * chunks as usize)?;
        let mut out = self.cub_zeroed(8 * groups)?;
        let na = nodes.len();
        let mut b = self.inner.stream.launch_builder(&k);
        if matches!(bound, Bound::Linked(_)) {
            b.arg(&dim);
        }
        push_integrand(&mut b, &bound);
        b.arg(&d_x)
            .arg(&d_w)
            .arg(&na)
            .arg(&total)
            .arg(&mut partials);
        // SAFETY: arguments match `cub_tensor` (`cubu_tensor` takes the
        // dimension first); nodes and weights hold na values, partials one
        // value per chunk of `total` points.
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
        self.check_linked(&bound, "tensor rule", host.iter().copied(), dim)?;
        Ok(host)
    }
}

/// Pushes the integrand's argument: the uploaded built-in or the record.
fn push_integrand<'a>(b: &mut LaunchArgs<'a>, bound: &'a Bound) {
    match bound {
        Bound::Builtin(d) | Bound::Linked(d) => {
            b.arg(d);
        }
    }
}
