//! Uncertainty quantification on the device (kernels in `kernels-rs/src/device/uq.rs`,
//! the per-sample math shared with the CPU through `gpuq_kernels::uq`).

use crate::backend::{dev, CudaBackend, THREADS};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use gpuq_core::{Complex64, Error, Result, Scalar};
use gpuq_kernels::uq::band::{BandModel, ThetaLaw, MAX_SEMI_BAND, THETA_UNIFORM};
use gpuq_kernels::uq::real::UqReal;
use gpuq_kernels::uq::sdof::SdofParams;

/// The bytes of the oscillator's parameters, uploaded for the kernels.
fn sdof_bytes<T: SdofReal>(p: &SdofParams<T>) -> &[u8] {
    // SAFETY: `SdofParams` is `#[repr(C)]`: a u64 then 18 fields of T (f32 or
    // f64), 80 or 152 bytes without padding, so every byte is initialised; u8
    // has alignment 1.
    unsafe {
        std::slice::from_raw_parts(
            (p as *const SdofParams<T>).cast::<u8>(),
            std::mem::size_of::<SdofParams<T>>(),
        )
    }
}

/// Bytes of per-sample work space one static batch may use.
const STATIC_WORK_BYTES: usize = 512 << 20;

/// The real types of the SDOF kernels (`f32`, `f64`).
pub trait SdofReal: Scalar + UqReal + DeviceRepr {
    /// The Monte Carlo kernel's name for this type.
    const SDOF_KERNEL: &'static str;
    /// The Latin hypercube kernel's name for this type.
    const SDOF_LHS_KERNEL: &'static str;
    /// The ingredient-timing kernel's name for this type.
    const SDOF_PART_KERNEL: &'static str;
}

impl SdofReal for f32 {
    const SDOF_KERNEL: &'static str = "uq_sdof_f32";
    const SDOF_LHS_KERNEL: &'static str = "uq_sdof_lhs_f32";
    const SDOF_PART_KERNEL: &'static str = "uq_sdof_part_f32";
}

impl SdofReal for f64 {
    const SDOF_KERNEL: &'static str = "uq_sdof_f64";
    const SDOF_LHS_KERNEL: &'static str = "uq_sdof_lhs_f64";
    const SDOF_PART_KERNEL: &'static str = "uq_sdof_part_f64";
}

/// An ingredient of the SDOF kernel, timed alone by [`CudaBackend::uq_sdof_part`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdofPart {
    /// The arithmetic of an RK4 step (linear, no noise, no square root).
    Rk4Arithmetic = 0,
    /// Four square roots per step.
    SquareRoots = 1,
    /// One normal per step (ChaCha8 and Box-Muller).
    Normals = 2,
    /// The full nonlinear noisy step without the statistics.
    StepsWithoutStatistics = 3,
}

/// One Monte Carlo run of the SDOF oscillator on the device.
#[derive(Clone, Debug)]
pub struct SdofRun<'a, T> {
    /// The oscillator and its time grid.
    pub params: SdofParams<T>,
    /// sin(j h / 2) for j = 0..=2 steps.
    pub sin: &'a [T],
    /// Seed of the ChaCha8 streams (stream = sample index).
    pub seed: u64,
    /// Number of samples.
    pub samples: u64,
    /// Latin hypercube noise (`gpuq_kernels::uq::sampling::LhsNormals`) instead of
    /// plain Monte Carlo.
    pub latin_hypercube: bool,
    /// Samples 0..keep whose trajectories come back.
    pub keep: usize,
    /// Increasing time indices at which x is histogrammed.
    pub hist_steps: &'a [u64],
    /// Lower edge of the first bin.
    pub hist_lo: f64,
    /// Bin width (> 0).
    pub hist_width: f64,
    /// Number of bins (plus underflow and overflow counters).
    pub bins: usize,
}

/// What an SDOF run brings back.
#[derive(Clone, Debug)]
pub struct SdofSums {
    /// sum_s x_s(t_j) and sum_s x_s(t_j)^2, interleaved, j = 0..=steps.
    pub sums: Vec<f64>,
    /// Trajectories of samples 0..keep, time-major: x_s(t_j) at j keep + s.
    pub trajectories: Vec<f64>,
    /// Histogram counters, hist_steps.len() rows of bins + 2 (underflow first,
    /// overflow last).
    pub counts: Vec<u64>,
}

impl CudaBackend {
    /// Runs the SDOF Monte Carlo: one launch over a resident grid (one thread per
    /// sample, 32 samples per warp at a time), one launch summing the warps' rows
    /// of partial sums in a fixed order, three downloads. Partial sums take
    /// 16 (steps + 1) bytes per resident warp.
    pub fn uq_sdof<T: SdofReal>(&self, run: &SdofRun<'_, T>) -> Result<SdofSums> {
        let p = &run.params;
        let steps = p.steps as usize;
        let nt = steps + 1;
        if run.sin.len() != 2 * steps + 1 {
            return Err(Error::shape(
                "uq_sdof sine table",
                2 * steps + 1,
                run.sin.len(),
            ));
        }
        if run.hist_steps.windows(2).any(|w| w[0] >= w[1])
            || run.hist_steps.iter().any(|&j| j as usize >= nt)
            || run.hist_width.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        {
            return Err(Error::InvalidArgument(
                "uq_sdof: histogram times must increase within the grid, width > 0".into(),
            ));
        }
        let keep = run.keep.min(run.samples as usize);
        let f = self.function(if run.latin_hypercube {
            T::SDOF_LHS_KERNEL
        } else {
            T::SDOF_KERNEL
        })?;
        let per_sm = self.blocks_per_sm(&f)?;
        let blocks = (run.samples as usize)
            .div_ceil(THREADS as usize)
            .clamp(1, per_sm * self.info().multiprocessors);
        let rows = blocks * THREADS as usize / 32;
        let width = 2 * nt;
        let mut partial = self.zeroed_bytes(8 * rows * width)?;
        let mut traj = self.zeroed_bytes(std::mem::size_of::<T>() * (keep * nt).max(1))?;
        let hist = self.upload_bytes(u64_bytes(run.hist_steps))?;
        let hist_count = run.hist_steps.len();
        let mut counts = self.zeroed_bytes(8 * (hist_count * (run.bins + 2)).max(1))?;
        let sin = self.upload_raw(run.sin)?;
        let d_params = self.upload_bytes(sdof_bytes(p))?;
        let keep64 = keep as u64;
        if run.samples > 0 {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&d_params)
                .arg(&sin.buf)
                .arg(&run.seed)
                .arg(&run.samples)
                .arg(&mut partial)
                .arg(&keep64)
                .arg(&mut traj)
                .arg(&hist)
                .arg(&hist_count)
                .arg(&run.hist_lo)
                .arg(&run.hist_width)
                .arg(&run.bins)
                .arg(&mut counts);
            // SAFETY: arguments match `uq_sdof_*` (the parameters a whole
            // `#[repr(C)]` copy); the sine table holds 2 steps + 1
            // values (checked), partial holds one row of 2 (steps + 1) f64 per warp
            // of the grid launched here, traj keep (steps + 1) values, hist the
            // hist_count increasing indices below steps + 1 (checked) and counts
            // hist_count (bins + 2) counters.
            unsafe { b.launch(cfg(blocks as u32)) }.map_err(dev("uq_sdof"))?;
            self.inner.stats.launch("uq_sdof");
        }
        let mut out = self.zeroed_bytes(8 * width)?;
        let g = self.function("uq_sum_rows")?;
        let mut b = self.inner.stream.launch_builder(&g);
        b.arg(&rows).arg(&width).arg(&partial).arg(&mut out);
        // SAFETY: partial holds rows x width f64 and out width f64.
        unsafe { b.launch(cfg(self.grid_blocks(width))) }.map_err(dev("uq_sum_rows"))?;
        self.inner.stats.launch("uq_sum_rows");

        let mut sums = vec![0.0f64; width];
        self.download_into(&out.slice(..), &mut sums)?;
        let mut traj_host = vec![T::zero(); keep * nt];
        self.download_into(&traj.slice(..), &mut traj_host)?;
        // Counters travel as the bits of f64 (downloads are typed by scalar).
        let mut bits = vec![0.0f64; hist_count * (run.bins + 2)];
        self.download_into(&counts.slice(..), &mut bits)?;
        Ok(SdofSums {
            sums,
            trajectories: traj_host.iter().map(|x| x.to_f64()).collect(),
            counts: bits.iter().map(|b| b.to_bits()).collect(),
        })
    }

    /// Times one ingredient of the SDOF kernel alone over `samples` samples of
    /// `params.steps` steps (one thread per sample, the same grid as
    /// [`CudaBackend::uq_sdof`]): returns the seconds from launch to completion
    /// (one launch, then a wait). `sin` as for [`CudaBackend::uq_sdof`].
    pub fn uq_sdof_part<T: SdofReal>(
        &self,
        part: SdofPart,
        params: &SdofParams<T>,
        sin: &[T],
        seed: u64,
        samples: u64,
    ) -> Result<f64> {
        let steps = params.steps as usize;
        if sin.len() != 2 * steps + 1 {
            return Err(Error::shape(
                "uq_sdof_part sine table",
                2 * steps + 1,
                sin.len(),
            ));
        }
        let f = self.function(T::SDOF_PART_KERNEL)?;
        let per_sm = self.blocks_per_sm(&f)?;
        let blocks = (samples as usize)
            .div_ceil(THREADS as usize)
            .clamp(1, per_sm * self.info().multiprocessors);
        let table = self.upload_raw(sin)?;
        let mut out = self.zeroed_bytes(std::mem::size_of::<T>() * (samples as usize).max(1))?;
        let mode = part as u32;
        let d_params = self.upload_bytes(sdof_bytes(params))?;
        self.synchronize()?;
        let start = std::time::Instant::now();
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mode)
            .arg(&d_params)
            .arg(&table.buf)
            .arg(&seed)
            .arg(&samples)
            .arg(&mut out);
        // SAFETY: arguments match `uq_sdof_part_*`; the table holds 2 steps + 1
        // values (checked) and out one value per sample.
        unsafe { b.launch(cfg(blocks as u32)) }.map_err(dev("uq_sdof_part"))?;
        self.inner.stats.launch("uq_sdof_part");
        self.synchronize()?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// Uploads a random banded static problem (`model`: see
    /// `gpuq_kernels::uq::band::BandModel`) and allocates the work space of
    /// one batch: at most 512 MiB of per-sample work (8 (n (w + 3) + r + m)
    /// bytes a sample). Checks every size and index the kernel reads
    /// unchecked; errors on a semi-bandwidth above `MAX_SEMI_BAND`, n or an
    /// offset beyond u32, or a uniform theta law (its erf is not in the PTX
    /// module: the caller solves such models on the host). O(size of the
    /// model) transfer.
    pub fn uq_band_upload(&self, model: &BandModel<'_>) -> Result<BandResident> {
        check_band(model)?;
        let d = &model.draws;
        let per_sample = 8 * model.work_len();
        let batch = (STATIC_WORK_BYTES / per_sample.max(1)).max(1);
        Ok(BandResident {
            n: model.n,
            w: model.w,
            m: model.terms(),
            rank: d.rank,
            std_len: d.load_std.len(),
            outputs: model.outputs.len(),
            batch,
            k0: self.upload_raw(model.k0)?.buf,
            term_start: self.upload_bytes(u32_bytes(model.term_start))?,
            term_row: self.upload_bytes(u32_bytes(model.term_row))?,
            term_col: self.upload_bytes(u32_bytes(model.term_col))?,
            term_val: self.upload_raw(model.term_val)?.buf,
            laws: self.upload_bytes(law_bytes(d.laws))?,
            load_mean: self.upload_raw(d.load_mean)?.buf,
            load_std: self.upload_raw(d.load_std)?.buf,
            factor_start: self.upload_bytes(u32_bytes(d.factor_start))?,
            factor_col: self.upload_bytes(u32_bytes(d.factor_col))?,
            factor_val: self.upload_raw(d.factor_val)?.buf,
            output_dofs: self.upload_bytes(u32_bytes(model.outputs))?,
            work: self.zeroed_bytes(per_sample * batch)?,
            values: self.zeroed_bytes(8 * (model.outputs.len() * batch).max(1))?,
            residuals: self.zeroed_bytes(8 * batch)?,
        })
    }

    /// Static samples first..first + count (count at most
    /// [`BandResident::batch`]) of the problem in `r`, drawn under `seed` with
    /// the normals of `design` (`gpuq_kernels::uq::sampling` codes) out of
    /// `samples`: one thread per sample (`uq_band_static_f64`, the host's
    /// `band_sample_designed`), one launch and two downloads. Returns the
    /// outputs' values sample-major (count x outputs) and per sample its
    /// relative residual or the failure code of its pivot
    /// (`gpuq_kernels::uq::band::failed_pivot`). Cost per sample: n w^2 flops
    /// sequentially in its thread.
    pub fn uq_band_static(
        &self,
        r: &mut BandResident,
        (seed, design, samples): (u64, u32, u64),
        first: u64,
        count: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        if count > r.batch {
            return Err(Error::InvalidArgument(format!(
                "uq_band_static: {count} samples exceed the batch of {}",
                r.batch
            )));
        }
        if count == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let f = self.function("uq_band_static_f64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&r.n)
            .arg(&r.w)
            .arg(&r.k0)
            .arg(&r.m)
            .arg(&r.term_start)
            .arg(&r.term_row)
            .arg(&r.term_col)
            .arg(&r.term_val)
            .arg(&r.laws)
            .arg(&r.load_mean)
            .arg(&r.std_len)
            .arg(&r.load_std)
            .arg(&r.rank)
            .arg(&r.factor_start)
            .arg(&r.factor_col)
            .arg(&r.factor_val)
            .arg(&r.outputs)
            .arg(&r.output_dofs)
            .arg(&seed)
            .arg(&design)
            .arg(&samples)
            .arg(&first)
            .arg(&count)
            .arg(&mut r.work)
            .arg(&mut r.values)
            .arg(&mut r.residuals);
        // SAFETY: arguments match `uq_band_static_f64`; `uq_band_upload`
        // checked every array's size and index against the model (the kernel
        // reads them unchecked) and sized work, values and residuals for
        // `batch` >= count samples.
        unsafe { b.launch(cfg(self.grid_blocks(count))) }.map_err(dev("uq_band_static"))?;
        self.inner.stats.launch("uq_band_static");
        let outputs = r.outputs;
        let mut by_output = vec![0.0f64; outputs * count];
        self.download_into(&r.values.slice(..8 * outputs * count), &mut by_output)?;
        let mut residuals = vec![0.0f64; count];
        self.download_into(&r.residuals.slice(..8 * count), &mut residuals)?;
        let mut values = vec![0.0f64; outputs * count];
        for t in 0..count {
            for o in 0..outputs {
                values[t * outputs + o] = by_output[o * count + t];
            }
        }
        Ok((values, residuals))
    }

    /// Linear outputs of the Monte Carlo samples `first .. first + count`
    /// under `seed` (`gpuq_kernels::uq::linear`): `out[t outputs + o] +=
    /// sum_k coef[o len + k] z_k(first + t)`, z(s) the normals of stream s,
    /// `out` (count outputs values) holding the outputs' constant parts on
    /// entry. One launch, a warp per 32 ChaCha8 blocks of a sample.
    #[allow(clippy::too_many_arguments)]
    pub fn uq_linear_samples(
        &self,
        seed: u64,
        first: u64,
        count: usize,
        len: usize,
        coef: &CudaVector<f64>,
        out: &mut CudaVector<f64>,
    ) -> Result<()> {
        let outputs = coef.len.checked_div(len).unwrap_or(0);
        if coef.len != outputs * len {
            return Err(Error::shape(
                "uq_linear_samples coef",
                outputs * len,
                coef.len,
            ));
        }
        if out.len != count * outputs {
            return Err(Error::shape(
                "uq_linear_samples out",
                count * outputs,
                out.len,
            ));
        }
        if out.len == 0 {
            return Ok(());
        }
        let f = self.function("uq_linear_samples")?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&seed)
            .arg(&first)
            .arg(&count)
            .arg(&len)
            .arg(&outputs)
            .arg(&coef.buf)
            .arg(&mut out.buf);
        let threads = count * len.div_ceil(16).div_ceil(32) * 32;
        // SAFETY: arguments match `uq_linear_samples`; coef holds outputs len
        // values and out count outputs, checked above.
        unsafe { b.launch(cfg(self.grid_blocks(threads))) }.map_err(dev("uq_linear_samples"))?;
        self.inner.stats.launch("uq_linear_samples");
        Ok(())
    }

    /// The response PSD's rank-1 Hermitian updates for nf frequencies:
    /// out[f n^2 + i n + j] = scale\[f\] h[f n + i] conj(h[f n + j]) (`scale` holds
    /// nf values, `h` nf n, `out` nf n^2). One launch, a block per output row;
    /// traffic 16 n^2 nf bytes written, 16 n nf read.
    pub fn uq_rank1_c64(
        &self,
        n: usize,
        scale: &CudaVector<f64>,
        h: &CudaVector<Complex64>,
        out: &mut CudaVector<Complex64>,
    ) -> Result<()> {
        let nf = scale.len;
        if h.len != nf * n {
            return Err(Error::shape("uq_rank1_c64 h", nf * n, h.len));
        }
        if out.len != nf * n * n {
            return Err(Error::shape("uq_rank1_c64 out", nf * n * n, out.len));
        }
        if out.len == 0 {
            return Ok(());
        }
        let f = self.function("uq_rank1_c64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n)
            .arg(&nf)
            .arg(&scale.buf)
            .arg(&h.buf)
            .arg(&mut out.buf);
        // SAFETY: arguments match `uq_rank1_c64`; the lengths are checked above.
        unsafe { b.launch(cfg(self.grid_blocks(nf * n * THREADS as usize))) }
            .map_err(dev("uq_rank1_c64"))?;
        self.inner.stats.launch("uq_rank1_c64");
        Ok(())
    }

    /// A zeroed device buffer of `bytes` bytes.
    pub(crate) fn zeroed_bytes(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.inner
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(dev("allocating UQ buffers"))
    }
}

/// A random banded static problem on the device with one batch's work space
/// ([`CudaBackend::uq_band_upload`]).
pub struct BandResident {
    n: usize,
    w: usize,
    m: usize,
    rank: usize,
    std_len: usize,
    outputs: usize,
    batch: usize,
    k0: CudaSlice<u8>,
    term_start: CudaSlice<u8>,
    term_row: CudaSlice<u8>,
    term_col: CudaSlice<u8>,
    term_val: CudaSlice<u8>,
    laws: CudaSlice<u8>,
    load_mean: CudaSlice<u8>,
    load_std: CudaSlice<u8>,
    factor_start: CudaSlice<u8>,
    factor_col: CudaSlice<u8>,
    factor_val: CudaSlice<u8>,
    output_dofs: CudaSlice<u8>,
    work: CudaSlice<u8>,
    values: CudaSlice<u8>,
    residuals: CudaSlice<u8>,
}

impl BandResident {
    /// The most samples one [`CudaBackend::uq_band_static`] call takes. O(1).
    pub fn batch(&self) -> usize {
        self.batch
    }
}

/// Every size and index `uq_band_static_f64` reads unchecked. O(size of the model).
fn check_band(p: &BandModel<'_>) -> Result<()> {
    let bad = |what: &str| Err(Error::InvalidArgument(format!("uq_band_upload: {what}")));
    let (n, d) = (p.n, &p.draws);
    let m = p.terms();
    if n == 0 || u32::try_from(n).is_err() || p.w > MAX_SEMI_BAND {
        return bad("n must be in 1..2^32 and the semi-bandwidth at most MAX_SEMI_BAND");
    }
    if p.k0.len() != n * (p.w + 1) || d.load_mean.len() != n {
        return bad("K0's band or the load mean does not match n");
    }
    if !(d.load_std.is_empty() || d.load_std.len() == n) {
        return bad("the load deviations are neither empty nor n");
    }
    let nt = p.term_row.len();
    if p.term_start.len() != m + 1
        || p.term_start.first() != Some(&0)
        || p.term_start.windows(2).any(|w| w[0] > w[1])
        || p.term_start[m] as usize != nt
        || p.term_col.len() != nt
        || p.term_val.len() != nt
    {
        return bad("the terms' offsets do not match their triplets");
    }
    if p.term_row
        .iter()
        .chain(p.term_col)
        .any(|&i| i as usize >= n)
        || p.term_row
            .iter()
            .zip(p.term_col)
            .any(|(&i, &j)| i.abs_diff(j) as usize > p.w)
    {
        return bad("a term's entry is outside the matrix or the band");
    }
    if d.laws.iter().any(|l| l.kind == THETA_UNIFORM) {
        return bad("a uniform theta (solve it on the host)");
    }
    if d.rank > 0 {
        let nnz = d.factor_col.len();
        if d.factor_start.len() != n + 1
            || d.factor_start[0] != 0
            || d.factor_start.windows(2).any(|w| w[0] > w[1])
            || d.factor_start[n] as usize != nnz
            || d.factor_val.len() != nnz
            || d.factor_col.iter().any(|&c| c as usize >= d.rank)
        {
            return bad("the load factor's CSR does not match n and its rank");
        }
    }
    if p.outputs.iter().any(|&o| o as usize >= n) {
        return bad("an output DOF is outside 0..n");
    }
    Ok(())
}

fn u32_bytes(v: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding; every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn law_bytes(v: &[ThetaLaw]) -> &[u8] {
    // SAFETY: `ThetaLaw` is `#[repr(C)]`, a u64 and three f64: 32 bytes, no
    // padding, every byte initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn u64_bytes(v: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding; every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn cfg(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}
