//! Uncertainty quantification on the device (kernels in `kernels-rs/src/device/uq.rs`,
//! the per-sample math shared with the CPU through `gpuq_kernels::uq`).

use crate::backend::{dev, CudaBackend, THREADS};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use gpuq_core::{Complex64, Error, Result, Scalar};
use gpuq_kernels::uq::beam::StaticSampling;
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

    /// Static samples 0..samples of the cantilever (see
    /// `gpuq_kernels::uq::beam::static_sample_designed`: the normals of design
    /// `design` under `seed`): u\[dof\] of each sample, one thread per sample. With a random modulus every sample assembles and
    /// factors its own banded K in device memory (40 n bytes per sample, batches
    /// of at most 512 MiB); otherwise `shared` is the factor of K (4 n values,
    /// band rows) and each sample only solves. One launch per batch, one
    /// download per batch.
    pub fn uq_beam_static(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
        shared: &[f64],
    ) -> Result<Vec<f64>> {
        let n = 2 * p.ne;
        if p.ne == 0 || dof >= n {
            return Err(Error::InvalidArgument(format!(
                "uq_beam_static: dof {dof} outside 0..{n}"
            )));
        }
        if !p.random_modulus && shared.len() != 4 * n {
            return Err(Error::shape("uq_beam_static factor", 4 * n, shared.len()));
        }
        let f = self.function("uq_beam_static_f64")?;
        let factor = self.upload_raw(if p.random_modulus { &[] } else { shared })?;
        let batch = (STATIC_WORK_BYTES / (40 * n)).clamp(1, samples.max(1));
        let mut work = self.zeroed_bytes(40 * n * batch)?;
        let mut out = self.zeroed_bytes(8 * batch)?;
        let mut values = Vec::with_capacity(samples);
        let random = u32::from(p.random_modulus);
        let samples64 = samples as u64;
        let mut first = 0usize;
        while first < samples {
            let count = batch.min(samples - first);
            let first64 = first as u64;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&p.ne)
                .arg(&p.h)
                .arg(&p.inertia)
                .arg(&p.load_mean)
                .arg(&p.load_std)
                .arg(&random)
                .arg(&p.mu_ln)
                .arg(&p.sigma_ln)
                .arg(&seed)
                .arg(&design)
                .arg(&samples64)
                .arg(&first64)
                .arg(&count)
                .arg(&dof)
                .arg(&factor.buf)
                .arg(&mut work)
                .arg(&mut out);
            // SAFETY: arguments match `uq_beam_static_f64`; work holds 5 n batch
            // >= 5 n count f64, out batch >= count, the factor 4 n values when the
            // modulus is deterministic (checked), dof < n (checked).
            unsafe { b.launch(cfg(self.grid_blocks(count))) }.map_err(dev("uq_beam_static"))?;
            self.inner.stats.launch("uq_beam_static");
            let mut host = vec![0.0f64; count];
            self.download_into(&out.slice(..), &mut host)?;
            values.extend_from_slice(&host);
            first += count;
        }
        Ok(values)
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

    /// The seed's dense path for static samples 0..samples: each thread
    /// assembles its sample's dense K and solves by LU with partial pivoting
    /// (`gpuq_kernels::uq::dense::static_dense_designed`); u\[dof\] per sample.
    /// 8 (n^2 + n) bytes of work per sample, batches of at most 512 MiB; one
    /// launch and one download per batch.
    pub fn uq_beam_static_dense(
        &self,
        p: &StaticSampling<f64>,
        (seed, design): (u64, u32),
        samples: usize,
        dof: usize,
    ) -> Result<Vec<f64>> {
        let n = 2 * p.ne;
        if p.ne == 0 || dof >= n {
            return Err(Error::InvalidArgument(format!(
                "uq_beam_static_dense: dof {dof} outside 0..{n}"
            )));
        }
        let per_sample = 8 * (n * n + n);
        let f = self.function("uq_beam_static_dense_f64")?;
        let batch = (STATIC_WORK_BYTES / per_sample).clamp(1, samples.max(1));
        let mut work = self.zeroed_bytes(per_sample * batch)?;
        let mut out = self.zeroed_bytes(8 * batch)?;
        let mut values = Vec::with_capacity(samples);
        let random = u32::from(p.random_modulus);
        let samples64 = samples as u64;
        let mut first = 0usize;
        while first < samples {
            let count = batch.min(samples - first);
            let first64 = first as u64;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&p.ne)
                .arg(&p.h)
                .arg(&p.inertia)
                .arg(&p.load_mean)
                .arg(&p.load_std)
                .arg(&random)
                .arg(&p.mu_ln)
                .arg(&p.sigma_ln)
                .arg(&seed)
                .arg(&design)
                .arg(&samples64)
                .arg(&first64)
                .arg(&count)
                .arg(&dof)
                .arg(&mut work)
                .arg(&mut out);
            // SAFETY: arguments match `uq_beam_static_dense_f64`; work holds
            // (n^2 + n) batch >= (n^2 + n) count f64, out batch >= count, dof < n.
            unsafe { b.launch(cfg(self.grid_blocks(count))) }
                .map_err(dev("uq_beam_static_dense"))?;
            self.inner.stats.launch("uq_beam_static_dense");
            let mut host = vec![0.0f64; count];
            self.download_into(&out.slice(..), &mut host)?;
            values.extend_from_slice(&host);
            first += count;
        }
        Ok(values)
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
