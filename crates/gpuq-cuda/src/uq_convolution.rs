//! Procedure (iii)'s FFT convolution on the device: the samples' padded
//! inputs generated in place (`uq_conv_loads`), cuFFT's batched real
//! transforms (D2Z, then Z2D per output), the spectral products, and the
//! statistics over samples (mean and variance per output and step, the peak
//! |y| per sample) reduced on the device, so that only the statistics and the
//! histories asked for come back. Kernels in
//! `kernels-rs/src/device/uq_convolution.rs`.

use crate::backend::{dev, CudaBackend};
use cudarc::cufft::{result as cufft, sys as cufft_sys, CudaFft};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};
use gpuq_core::{Complex64, Error, Result};
use gpuq_kernels::uq::convolution::{LOADS_PER_BLOCK, STATS_GROUP};
use std::sync::Arc;

/// A batch of FFT convolutions of AR(1) loads (see `gpuq_uq::convolution`).
#[derive(Clone, Debug)]
pub struct ConvolutionRun<'a> {
    /// Each output's kernel spectrum, bins 0..=len/2, output-major, already
    /// divided by `len` (the inverse transform is unnormalised).
    pub spectra: &'a [Complex64],
    /// Number of outputs r.
    pub outputs: usize,
    /// Time steps N_t kept per output.
    pub nt: usize,
    /// Transform length L (a power of two, at least 16 and 2 N_t - 1).
    pub len: usize,
    /// Scale of the first normal (1 / sqrt(1 - phi^2)).
    pub first_scale: f64,
    /// Seed of the ChaCha8 streams (stream = sample index).
    pub seed: u64,
    /// Number of samples.
    pub samples: usize,
    /// Samples per batch of transforms: a multiple of [`STATS_GROUP`], or at
    /// least `samples`.
    pub chunk: usize,
    /// Samples 0..keep whose histories come back.
    pub keep: usize,
}

/// What a convolution run brings back.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvolutionSums {
    /// Mean of y over the samples, per output and step (r N_t, output-major).
    pub mean: Vec<f64>,
    /// Sum of squared deviations from the mean, the same layout.
    pub m2: Vec<f64>,
    /// max_k |y_k| per sample and output (samples r, sample-major).
    pub peaks: Vec<f64>,
    /// y of samples 0..keep (sample, output, step).
    pub histories: Vec<f64>,
}

/// The kinds of cuFFT plans the convolution uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FftKind {
    /// Real to complex, f64.
    D2z,
    /// Complex to real, f64.
    Z2d,
}

/// Cached cuFFT plans: (length, kind, batch) and the plan.
pub(crate) type FftCache = Vec<((usize, FftKind, usize), Arc<CudaFft>)>;

fn fft_err(op: &'static str) -> impl Fn(cufft::CufftError) -> Error {
    move |e| Error::Device(format!("cuFFT {op}: {e:?}"))
}

impl CudaBackend {
    /// A batched 1D f64 plan of `len` points and `batch` transforms on the
    /// backend's stream, built once and kept (cuFFT's plans hold their work
    /// area; [`CudaBackend::release_cached_memory`] does not free them).
    /// Errors with [`Error::Device`] when the cuFFT library is missing.
    fn fft_plan(&self, len: usize, kind: FftKind, batch: usize) -> Result<Arc<CudaFft>> {
        let mut cache = self.inner.ffts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = cache.iter().find(|(k, _)| *k == (len, kind, batch)) {
            return Ok(p.clone());
        }
        // SAFETY: probing only tries to open the library by name.
        if !unsafe { cufft_sys::is_culib_present() } {
            return Err(Error::Device(
                "the cuFFT library (libcufft) was not found: add its directory to LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let (n, b) = (
            i32::try_from(len).map_err(|_| Error::InvalidArgument("FFT length".into()))?,
            i32::try_from(batch).map_err(|_| Error::InvalidArgument("FFT batch".into()))?,
        );
        let t = match kind {
            FftKind::D2z => cufft_sys::cufftType::CUFFT_D2Z,
            FftKind::Z2d => cufft_sys::cufftType::CUFFT_Z2D,
        };
        let plan = Arc::new(
            CudaFft::plan_1d(n, t, b, self.inner.stream.clone()).map_err(fft_err("plan"))?,
        );
        cache.push(((len, kind, batch), plan.clone()));
        Ok(plan)
    }

    /// Runs `run.samples` convolutions in batches of `run.chunk` samples: per
    /// batch one load launch, one batched D2Z, one product launch, one batched
    /// Z2D over samples x outputs, three statistics launches and one download
    /// of the batch's peaks; at the end two downloads of r N_t values.
    /// Device memory: about 8 L chunk (2 + 3 r) bytes. The statistics fold
    /// groups of [`STATS_GROUP`] samples in order, as the CPU does.
    pub fn uq_convolve(&self, run: &ConvolutionRun<'_>) -> Result<ConvolutionSums> {
        let (r, nt, len) = (run.outputs, run.nt, run.len);
        let half = len / 2 + 1;
        if r == 0
            || nt == 0
            || !len.is_power_of_two()
            || len < LOADS_PER_BLOCK
            || len < 2 * nt - 1
            || !(run.chunk % STATS_GROUP == 0 || run.chunk >= run.samples)
            || run.chunk == 0
        {
            return Err(Error::InvalidArgument(format!(
                "uq_convolve: {r} outputs, {nt} steps, length {len} (a power of two >= 16 and \
                 >= 2 steps - 1), chunk {} (a multiple of {STATS_GROUP} or >= the samples)",
                run.chunk
            )));
        }
        if run.spectra.len() != r * half {
            return Err(Error::shape(
                "uq_convolve spectra",
                r * half,
                run.spectra.len(),
            ));
        }
        let width = r * nt;
        let keep = run.keep.min(run.samples);
        let mut sums = ConvolutionSums {
            mean: vec![0.0; width],
            m2: vec![0.0; width],
            peaks: Vec::with_capacity(run.samples * r),
            histories: vec![0.0; keep * width],
        };
        if run.samples == 0 {
            return Ok(sums);
        }
        let batch = run.chunk.min(run.samples);
        let forward = self.fft_plan(len, FftKind::D2z, batch)?;
        let inverse = self.fft_plan(len, FftKind::Z2d, batch * r)?;
        let spectra = self.upload_raw(run.spectra)?;
        let mut loads = self.zeroed_bytes(8 * len * batch)?;
        let mut spec = self.zeroed_bytes(16 * half * batch)?;
        let mut prod = if r > 1 {
            Some(self.zeroed_bytes(16 * half * batch * r)?)
        } else {
            None
        };
        let mut y = self.zeroed_bytes(8 * len * batch * r)?;
        let mut mean = self.zeroed_bytes(8 * width)?;
        let mut m2 = self.zeroed_bytes(8 * width)?;
        let mut parts = self.zeroed_bytes(16 * batch.div_ceil(STATS_GROUP) * width)?;
        let mut peaks = self.zeroed_bytes(8 * batch * r)?;
        let stream = &self.inner.stream;
        let f_loads = self.function("uq_conv_loads")?;
        let f_mul = self.function("uq_conv_multiply")?;
        let f_groups = self.function("uq_conv_group_moments")?;
        let f_merge = self.function("uq_conv_merge")?;
        let f_peaks = self.function("uq_conv_peaks")?;
        let mut first = 0usize;
        while first < run.samples {
            let count = batch.min(run.samples - first);
            let mut b = stream.launch_builder(&f_loads);
            b.arg(&run.seed)
                .arg(&run.first_scale)
                .arg(&nt)
                .arg(&len)
                .arg(&first)
                .arg(&count)
                .arg(&mut loads);
            // SAFETY: loads holds len batch >= len count f64; len % 16 == 0.
            unsafe { b.launch(Self::cfg(self.grid_blocks(count * len / LOADS_PER_BLOCK))) }
                .map_err(dev("uq_conv_loads"))?;
            self.inner.stats.launch("uq_conv_loads");
            {
                let (src, _a) = loads.device_ptr(stream);
                let (dst, _b) = spec.device_ptr_mut(stream);
                // SAFETY: the plan transforms `batch` rows of len f64 into rows
                // of len / 2 + 1 complex values; both buffers hold that many.
                unsafe { cufft::exec_d2z(forward.handle(), src as *mut f64, dst as *mut _) }
                    .map_err(fft_err("D2Z"))?;
            }
            let count_rows = count;
            let target = prod.as_mut().unwrap_or(&mut spec) as *mut CudaSlice<u8>;
            let mut b = stream.launch_builder(&f_mul);
            // SAFETY (pointer): `target` is `prod` or `spec`, alive for this
            // block; when it is `spec` (r = 1) the kernel reads and writes
            // each element in place, which it allows.
            let target = unsafe { &mut *target };
            b.arg(&count_rows)
                .arg(&r)
                .arg(&half)
                .arg(&spectra.buf)
                .arg(&spec)
                .arg(target);
            // SAFETY: spectra holds r half, spec batch half and the target
            // batch r half complex values.
            unsafe { b.launch(Self::cfg(self.grid_blocks(count * r * half))) }
                .map_err(dev("uq_conv_multiply"))?;
            self.inner.stats.launch("uq_conv_multiply");
            {
                let src_buf = prod.as_ref().unwrap_or(&spec);
                let (src, _a) = src_buf.device_ptr(stream);
                let (dst, _b) = y.device_ptr_mut(stream);
                // SAFETY: batch r rows of len / 2 + 1 complex values into rows of
                // len f64 (the input may be overwritten: it is not read again).
                unsafe { cufft::exec_z2d(inverse.handle(), src as *mut _, dst as *mut f64) }
                    .map_err(fft_err("Z2D"))?;
            }
            let mut b = stream.launch_builder(&f_groups);
            b.arg(&count)
                .arg(&r)
                .arg(&nt)
                .arg(&len)
                .arg(&y)
                .arg(&mut parts);
            // SAFETY: y holds count r rows of len >= nt f64; parts 2 width
            // values per group of the count samples.
            unsafe {
                b.launch(Self::cfg(
                    self.grid_blocks(count.div_ceil(STATS_GROUP) * width),
                ))
            }
            .map_err(dev("uq_conv_group_moments"))?;
            self.inner.stats.launch("uq_conv_group_moments");
            let before = first as f64;
            let mut b = stream.launch_builder(&f_merge);
            b.arg(&count)
                .arg(&width)
                .arg(&parts)
                .arg(&before)
                .arg(&mut mean)
                .arg(&mut m2);
            // SAFETY: parts as written above; mean and m2 hold width f64.
            unsafe { b.launch(Self::cfg(self.grid_blocks(width))) }
                .map_err(dev("uq_conv_merge"))?;
            self.inner.stats.launch("uq_conv_merge");
            let rows = count * r;
            let mut b = stream.launch_builder(&f_peaks);
            b.arg(&rows).arg(&nt).arg(&len).arg(&y).arg(&mut peaks);
            // SAFETY: y holds rows rows of len >= nt f64, peaks rows f64.
            unsafe { b.launch(Self::cfg(self.grid_blocks(32 * rows))) }
                .map_err(dev("uq_conv_peaks"))?;
            self.inner.stats.launch("uq_conv_peaks");
            let mut host = vec![0.0f64; rows];
            self.download_into(&peaks.slice(..), &mut host)?;
            sums.peaks.extend_from_slice(&host);
            for s in first..(first + count).min(keep) {
                for o in 0..r {
                    let row = (s - first) * r + o;
                    let dst = &mut sums.histories[(s * r + o) * nt..(s * r + o + 1) * nt];
                    self.download_into(&y.slice(8 * row * len..), dst)?;
                }
            }
            first += count;
        }
        self.download_into(&mean.slice(..), &mut sums.mean)?;
        self.download_into(&m2.slice(..), &mut sums.m2)?;
        Ok(sums)
    }
}
