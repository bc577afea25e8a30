//! BLAS-1 on the device: the [`Backend`] implementation of [`CudaBackend`].

use crate::backend::{dev, CudaBackend};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchArgs, PushKernelArg};
use gpuq_core::num_traits::Float;
use gpuq_core::{check_same_len, Backend, RealScalar, Result, Scalar, ScalarKind, Stats};
use std::marker::PhantomData;

/// A scalar argument as the kernels take it: `(re, im)` of the real type.
pub(crate) enum ScalarArg {
    F32(f32, f32),
    F64(f64, f64),
}

impl ScalarArg {
    pub(crate) fn of<T: Scalar>(v: T) -> Self {
        let (re, im) = (v.re().to_f64_lossless(), v.im().to_f64_lossless());
        match T::KIND {
            // Exact: the parts of an f32 scalar are f32 values.
            ScalarKind::F32 | ScalarKind::C32 => ScalarArg::F32(re as f32, im as f32),
            ScalarKind::F64 | ScalarKind::C64 => ScalarArg::F64(re, im),
        }
    }

    pub(crate) fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        match self {
            ScalarArg::F32(re, im) => b.arg(re).arg(im),
            ScalarArg::F64(re, im) => b.arg(re).arg(im),
        };
    }

    /// Pushes the real part only (for kernels that take a real scalar).
    pub(crate) fn push_re<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        match self {
            ScalarArg::F32(re, _) => b.arg(re),
            ScalarArg::F64(re, _) => b.arg(re),
        };
    }
}

/// The kernel name of operation `op` for scalar `T` (`axpy_c64`).
pub(crate) fn kernel<T: Scalar>(op: &str) -> String {
    format!("{op}_{}", T::KIND.name())
}

/// Launches the grid-stride kernel `$op` for scalar `$t` over `$n` items: pushes `n`,
/// then runs `$push` on the builder `$b` to push the kernel's other arguments.
macro_rules! launch_1d {
    ($self:ident, $t:ty, $op:literal, $n:expr, |$b:ident| $push:block) => {{
        let n: usize = $n;
        if n > 0 {
            let f = $self.function(&kernel::<$t>($op))?;
            let mut $b = $self.inner.stream.launch_builder(&f);
            $b.arg(&n);
            $push
            // SAFETY: the arguments pushed match the kernel's declaration in
            // kernels-rs, and every buffer holds at least `n` elements (lengths were
            // checked against each other before the launch).
            unsafe { $b.launch(CudaBackend::cfg($self.grid_blocks(n))) }.map_err(dev($op))?;
            $self.inner.stats.launch($op);
        }
        Ok(())
    }};
}
pub(crate) use launch_1d;

/// Where a reduction's result goes.
pub(crate) enum Dest<'a, R> {
    /// Downloaded into this host array.
    Host(&'a mut [R; 1]),
    /// Written into this device buffer at this byte offset.
    Device(&'a mut CudaSlice<u8>, usize),
}

/// The inputs of a BLAS-1 reduction.
pub(crate) enum FirstPass<'v> {
    /// Dot product of two buffers, conjugating the first when the flag is 1.
    Dot(&'v CudaSlice<u8>, &'v CudaSlice<u8>, u32),
    /// Sum of squared magnitudes of one buffer.
    SquaredNorm(&'v CudaSlice<u8>),
}

/// The device addresses a single-launch reduction kernel takes (see
/// `gpuq_kernels`' `reduce_grid`): where its blocks leave their partials, its
/// arrival counter (zero between launches), and where a result with no other
/// home goes. All three lie in the backend's reduction scratch, which stays
/// locked while a [`GridReduce`] exists.
pub(crate) struct GridReduce {
    /// Room for four segments of partials of the largest grid, 16 bytes each.
    pub(crate) partials: u64,
    /// The `u32` arrival counter.
    pub(crate) counter: u64,
    /// 16 bytes for a result.
    pub(crate) out: u64,
}

impl GridReduce {
    /// Pushes `partials` and `counter`, the arguments every reducing kernel ends
    /// with (after `stride` where it sums two values).
    pub(crate) fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(&self.partials).arg(&self.counter);
    }
}

impl CudaBackend {
    /// Runs `body` (which launches one reducing kernel) with the reduction
    /// scratch's addresses, holding the scratch's lock; with the result slot's
    /// view of the scratch, for a download after the launch.
    fn with_scratch<X>(
        &self,
        body: impl FnOnce(&GridReduce, &CudaSlice<u8>) -> Result<X>,
    ) -> Result<X> {
        let scratch = self.inner.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let (base, _record) = scratch.device_ptr(&self.inner.stream);
        let len = scratch.len() as u64;
        let reduce = GridReduce {
            partials: base,
            counter: base + len - 32,
            out: base + len - 16,
        };
        body(&reduce, &scratch)
    }

    /// Runs `launch`, which enqueues one kernel that reduces through the
    /// [`GridReduce`] it is given and writes its result to `sc` itself (the
    /// methods with scalars on the device). Nothing waits.
    pub(crate) fn reduce_in_kernel(
        &self,
        launch: impl FnOnce(&GridReduce) -> Result<()>,
    ) -> Result<()> {
        self.with_scratch(|reduce, _| launch(reduce))
    }

    /// Runs a deterministic single-launch reduction whose result has type `R`:
    /// `launch` enqueues the kernel, which writes its result to `out` of the
    /// [`GridReduce`] it is given; the result is then downloaded (one download of
    /// one `R`, which waits for the stream). The kernel's grid must not exceed
    /// [`CudaBackend::grid_blocks`]'s cap, for which the scratch is sized.
    pub(crate) fn reduce_with<R: Scalar>(
        &self,
        launch: impl FnOnce(&GridReduce) -> Result<()>,
    ) -> Result<R> {
        let mut result = [R::zero()];
        self.reduce_into(launch, Dest::Host(&mut result))?;
        Ok(result[0])
    }

    /// As [`CudaBackend::reduce_with`], delivering the result to `dest`: the host
    /// (a download that waits for the stream) or a device buffer (written by the
    /// kernel's last block; nothing waits).
    pub(crate) fn reduce_into<R: Scalar>(
        &self,
        launch: impl FnOnce(&GridReduce) -> Result<()>,
        dest: Dest<'_, R>,
    ) -> Result<()> {
        self.with_scratch(|reduce, scratch| match dest {
            Dest::Host(result) => {
                launch(reduce)?;
                let len = scratch.len();
                self.download_into(&scratch.slice(len - 16..), &mut result[..])
            }
            Dest::Device(buf, at) => {
                debug_assert!(at + std::mem::size_of::<R>() <= buf.len());
                let (ptr, _record) = buf.device_ptr_mut(&self.inner.stream);
                let reduce = GridReduce {
                    out: ptr + at as u64,
                    ..*reduce
                };
                launch(&reduce)
            }
        })
    }

    /// Deterministic BLAS-1 reduction over `n > 0` items of scalar `T`.
    fn reduce<T: Scalar, R: Scalar>(&self, n: usize, first: FirstPass<'_>) -> Result<R> {
        let mut result = [R::zero()];
        self.reduce_blas1::<T, R>(n, first, Dest::Host(&mut result))?;
        Ok(result[0])
    }

    /// The BLAS-1 reduction `first` over `n > 0` items, result to `dest`.
    pub(crate) fn reduce_blas1<T: Scalar, R: Scalar>(
        &self,
        n: usize,
        first: FirstPass<'_>,
        dest: Dest<'_, R>,
    ) -> Result<()> {
        let (name, op) = match first {
            FirstPass::Dot(..) => (kernel::<T>("dot"), "dot"),
            FirstPass::SquaredNorm(_) => (kernel::<T>("squared_norm"), "squared_norm"),
        };
        let blocks = self.reduction_blocks(n);
        let f = self.function(&name)?;
        self.reduce_into(
            |reduce| {
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&n);
                match &first {
                    FirstPass::Dot(x, y, conj) => b.arg(*x).arg(*y).arg(conj),
                    FirstPass::SquaredNorm(x) => b.arg(*x),
                };
                reduce.push(&mut b);
                b.arg(&reduce.out);
                // SAFETY: arguments match the kernel's declaration (`dot_*`,
                // `squared_norm_*`); the inputs hold n elements; the scratch holds
                // one partial per block of this grid and the counter; `out` has
                // room for one R.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev(op))?;
                self.inner.stats.launch(op);
                Ok(())
            },
            dest,
        )
    }

    /// Blocks of a BLAS-1 reduction over `n` items: half the grid of an
    /// elementwise kernel. Each thread keeps four loads in flight (the kernels
    /// unroll), so half the threads move the bytes as fast, and half the
    /// partials shorten the last block's sum. Measured on the H100 against the
    /// full grid and a quarter grid (docs/benchmarks.md).
    pub(crate) fn reduction_blocks(&self, n: usize) -> u32 {
        self.grid_blocks(n).div_ceil(2)
    }

    /// x^H y written to the first element of `out` on the device, with no download
    /// and no wait: for methods that keep their scalars on the device, and for
    /// timing the reduction kernels alone. Same kernels and bits as
    /// [`Backend::dotc`]; reads 2 n elements.
    pub fn dotc_on_device<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        y: &CudaVector<T>,
        out: &mut CudaVector<T>,
    ) -> Result<()> {
        check_same_len("dotc_on_device", x.len, y.len)?;
        check_same_len("dotc_on_device (out)", 1, out.len)?;
        if x.len == 0 {
            return self.fill(out, T::zero());
        }
        self.reduce_blas1::<T, T>(
            x.len,
            FirstPass::Dot(&x.buf, &y.buf, 1),
            Dest::Device(&mut out.buf, 0),
        )
    }

    /// ||x||^2 written to the first element of `out` on the device (see
    /// [`CudaBackend::dotc_on_device`]); reads n elements.
    pub fn squared_norm_on_device<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        out: &mut CudaVector<T::Real>,
    ) -> Result<()> {
        check_same_len("squared_norm_on_device (out)", 1, out.len)?;
        if x.len == 0 {
            return self.fill(out, T::Real::of_f64(0.0));
        }
        self.reduce_blas1::<T, T::Real>(
            x.len,
            FirstPass::SquaredNorm(&x.buf),
            Dest::Device(&mut out.buf, 0),
        )
    }

    fn dot<T: Scalar>(&self, x: &CudaVector<T>, y: &CudaVector<T>, conjugate: bool) -> Result<T> {
        check_same_len(if conjugate { "dotc" } else { "dotu" }, x.len, y.len)?;
        if x.len == 0 {
            return Ok(T::zero());
        }
        self.reduce::<T, T>(x.len, FirstPass::Dot(&x.buf, &y.buf, u32::from(conjugate)))
    }
}

impl Backend for CudaBackend {
    type Vector<T: Scalar> = CudaVector<T>;

    fn name(&self) -> String {
        format!("cuda:{}", self.inner.info.ordinal)
    }

    fn upload<T: Scalar>(&self, host: &[T]) -> Result<CudaVector<T>> {
        self.upload_raw(host)
    }

    fn download<T: Scalar>(&self, v: &CudaVector<T>) -> Result<Vec<T>> {
        let mut out = vec![T::zero(); v.len];
        if v.len > 0 {
            self.download_into(&v.buf.as_view(), &mut out)?;
        }
        Ok(out)
    }

    fn zeros<T: Scalar>(&self, n: usize) -> Result<CudaVector<T>> {
        let bytes = n * std::mem::size_of::<T>();
        let buf = if bytes == 0 {
            self.inner.stream.null::<u8>()
        } else {
            self.inner.stream.alloc_zeros::<u8>(bytes)
        }
        .map_err(|e| self.alloc_error("a vector", bytes, e))?;
        Ok(CudaVector {
            buf,
            len: n,
            _t: PhantomData,
        })
    }

    fn fill<T: Scalar>(&self, x: &mut CudaVector<T>, value: T) -> Result<()> {
        let v = ScalarArg::of(value);
        launch_1d!(self, T, "fill", x.len, |b| {
            v.push(&mut b);
            b.arg(&mut x.buf);
        })
    }

    fn copy<T: Scalar>(&self, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        check_same_len("copy", x.len, y.len)?;
        launch_1d!(self, T, "copy", x.len, |b| {
            b.arg(&x.buf).arg(&mut y.buf);
        })
    }

    fn scal<T: Scalar>(&self, alpha: T, x: &mut CudaVector<T>) -> Result<()> {
        let a = ScalarArg::of(alpha);
        launch_1d!(self, T, "scal", x.len, |b| {
            a.push(&mut b);
            b.arg(&mut x.buf);
        })
    }

    fn axpy<T: Scalar>(&self, alpha: T, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        check_same_len("axpy", x.len, y.len)?;
        let a = ScalarArg::of(alpha);
        launch_1d!(self, T, "axpy", x.len, |b| {
            a.push(&mut b);
            b.arg(&x.buf).arg(&mut y.buf);
        })
    }

    fn axpby<T: Scalar>(
        &self,
        alpha: T,
        x: &CudaVector<T>,
        beta: T,
        y: &mut CudaVector<T>,
    ) -> Result<()> {
        check_same_len("axpby", x.len, y.len)?;
        let (a, bb) = (ScalarArg::of(alpha), ScalarArg::of(beta));
        launch_1d!(self, T, "axpby", x.len, |b| {
            a.push(&mut b);
            b.arg(&x.buf);
            bb.push(&mut b);
            b.arg(&mut y.buf);
        })
    }

    fn mul_elementwise<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        y: &CudaVector<T>,
        z: &mut CudaVector<T>,
    ) -> Result<()> {
        check_same_len("mul_elementwise", x.len, y.len)?;
        check_same_len("mul_elementwise", x.len, z.len)?;
        launch_1d!(self, T, "mul", x.len, |b| {
            b.arg(&x.buf).arg(&y.buf).arg(&mut z.buf);
        })
    }

    fn dotc<T: Scalar>(&self, x: &CudaVector<T>, y: &CudaVector<T>) -> Result<T> {
        self.dot(x, y, true)
    }

    fn dotu<T: Scalar>(&self, x: &CudaVector<T>, y: &CudaVector<T>) -> Result<T> {
        self.dot(x, y, false)
    }

    /// Square root of the deterministic sum of |x_i|^2. Unlike the CPU backend it
    /// does not rescale: entries beyond about 1e154 (f64) or 1e19 (f32) overflow.
    fn nrm2<T: Scalar>(&self, x: &CudaVector<T>) -> Result<T::Real> {
        if x.len == 0 {
            return Ok(T::Real::of_f64(0.0));
        }
        let ss: T::Real = self.reduce::<T, T::Real>(x.len, FirstPass::SquaredNorm(&x.buf))?;
        Ok(ss.sqrt())
    }

    fn stats(&self) -> Stats {
        self.inner.stats.snapshot()
    }

    fn reset_stats(&self) {
        self.inner.stats.reset()
    }

    fn device_memory(&self) -> Result<Option<(u64, u64)>> {
        self.memory().map(Some)
    }
}
