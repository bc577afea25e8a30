//! The CUDA backend handle: context, stream, module, launch geometry, counters.

use crate::vector::CudaVector;
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, CudaView, LaunchConfig, PinnedHostSlice,
};
use gpuq_core::{scalars_as_bytes, scalars_as_bytes_mut, Error, Result, Scalar, StatsRecorder};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// What `gpuq info` and reports say about the device.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Global memory in bytes.
    pub total_memory: usize,
    /// Streaming multiprocessors.
    pub multiprocessors: usize,
}

pub(crate) struct Inner {
    pub(crate) stream: Arc<CudaStream>,
    /// Every kernel of the module (each keeps the module loaded).
    functions: HashMap<String, CudaFunction>,
    pub(crate) info: DeviceInfo,
    pub(crate) stats: StatsRecorder,
    /// Scratch for the single-launch reductions: four partials per block of the
    /// largest grid (a kernel reduces up to four values; 16 bytes each, enough
    /// for Complex<f64>), then 16 bytes for the arrival counter (zero between
    /// launches) and 16 for a result.
    pub(crate) scratch: Mutex<CudaSlice<u8>>,
    /// Page-locked landing place for small downloads ([`PINNED_BYTES`]: scalar
    /// results, a method's scalar array, GMRES's inner products): a download
    /// from device memory to pinned memory skips the driver's staging copy.
    pinned: Mutex<PinnedHostSlice<u8>>,
    /// GMRES's Gram-Schmidt: the basis' address table and scratch.
    pub(crate) gs: Mutex<crate::gram_schmidt::GsCache>,
    /// cuFFT plans built so far (the UQ convolution's).
    pub(crate) ffts: Mutex<crate::uq_convolution::FftCache>,
    /// User integrands linked and loaded in this context, by their cache key.
    pub(crate) linked: Mutex<HashMap<String, crate::linked::LinkedIntegrand>>,
    /// The NCCL communicator, once attached ([`CudaBackend::attach_nccl`]).
    pub(crate) nccl: std::sync::OnceLock<crate::nccl::Nccl>,
    /// Page-locked buffers of the large uploads ([`crate::staging`]).
    pub(crate) staging: Mutex<crate::staging::Staging>,
}

/// The CUDA backend. Cheap to clone (clones share the context, stream and counters).
///
/// All work goes to one stream in order; a download waits for the stream.
#[derive(Clone)]
pub struct CudaBackend {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({:?})", self.inner.info)
    }
}

/// Maps a cudarc error to [`Error::Device`] naming the operation.
pub(crate) fn dev(op: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Device(format!("{op}: {e}"))
}

/// Size of the pinned landing buffer for small downloads: room for the scalar
/// arrays of the Krylov methods (BiCGSTAB(l)'s for l up to 20) and the inner
/// products of a GMRES step with up to 500 basis vectors, in `Complex<f64>`.
const PINNED_BYTES: usize = 8192;

/// The names of the kernels (`.entry` directives) of a PTX module.
fn entry_points(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix(".visible .entry ")?;
        rest.split('(').next().map(str::trim)
    })
}

/// The device's default memory pool, which `cuMemAllocAsync` draws from.
fn default_pool(
    device: cudarc::driver::sys::CUdevice,
) -> Result<cudarc::driver::sys::CUmemoryPool> {
    let mut pool = std::mem::MaybeUninit::uninit();
    // SAFETY: `device` is a valid device handle; the call writes the pool handle.
    unsafe { cudarc::driver::sys::cuDeviceGetDefaultMemPool(pool.as_mut_ptr(), device) }
        .result()
        .map_err(dev("querying the default memory pool"))?;
    // SAFETY: written by the successful call above.
    Ok(unsafe { pool.assume_init() })
}

/// Makes the default memory pool keep what freed vectors release instead of
/// returning it to the driver at the next synchronisation (the pool's default
/// release threshold is 0). Every solve allocates its work vectors and frees them
/// at the end; without this, each solve maps its memory afresh (for GMRES(150)
/// on 1.4e5 complex unknowns, 340 MB). [`CudaBackend::release_cached_memory`]
/// gives it back.
fn keep_freed_memory(device: cudarc::driver::sys::CUdevice) -> Result<()> {
    let pool = default_pool(device)?;
    let mut threshold = u64::MAX;
    // SAFETY: the attribute takes a u64 threshold, read during the call.
    unsafe {
        cudarc::driver::sys::cuMemPoolSetAttribute(
            pool,
            cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    }
    .result()
    .map_err(dev("setting the memory pool's release threshold"))
}

/// Threads per block of every 1D kernel.
pub(crate) const THREADS: u32 = gpuq_kernels::BLOCK_THREADS;

impl CudaBackend {
    /// The number of CUDA devices the driver reports: 0 when the driver
    /// library is missing; an error only when the driver fails the query. O(1).
    pub fn device_count() -> Result<usize> {
        // SAFETY: probing only tries to open the driver library by name.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Ok(0);
        }
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoCudaDevice(format!("cannot query devices: {e}")))?;
        Ok(count.max(0) as usize)
    }

    /// Opens device `ordinal`: loads the driver library, creates a context and a
    /// stream, and loads the embedded PTX (JIT-compiled by the driver for the device);
    /// the pinned buffers of large transfers are allocated on a thread of their own
    /// meanwhile (the caller typically reads its input in that time).
    /// Vectors come from the device's default memory pool, set to keep freed
    /// memory for reuse, as CuPy's pool does (see
    /// [`CudaBackend::release_cached_memory`]).
    ///
    /// Errors with [`Error::NoCudaDevice`] when the driver library is missing, no
    /// device is present, or `ordinal` is out of range; with [`Error::Device`] when
    /// the driver rejects the PTX.
    pub fn new(ordinal: usize) -> Result<Self> {
        // SAFETY: probing only tries to open the driver library by name.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoCudaDevice(
                "the CUDA driver library (libcuda) was not found".into(),
            ));
        }
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoCudaDevice(format!("cannot query devices: {e}")))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoCudaDevice(format!(
                "device {ordinal} requested, {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoCudaDevice(format!("{e}")))?;
        // The host steps around a GPU setup gain from huge pages (where the
        // program's allocator is gpuq's: `gpuq_core::alloc`).
        gpuq_core::alloc::HugePageAlloc::gpu_in_use();
        if ctx.has_async_alloc() {
            keep_freed_memory(ctx.cu_device())?;
        }
        // One stream, in order: cudarc's per-buffer event tracking is not needed.
        // SAFETY: every buffer of this backend is used on `stream` only.
        unsafe { ctx.disable_event_tracking() };
        // A stream of our own, not the legacy default stream: only such a stream
        // can be captured into a CUDA graph (`CudaBackend::replay`).
        let stream = ctx.new_stream().map_err(dev("creating a stream"))?;
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(crate::PTX))
            .map_err(dev("loading the kernels' PTX"))?;
        // Every kernel is loaded now, not at its first use: a first use may
        // then fall inside a graph capture (`CudaBackend::replay`).
        let mut functions = HashMap::new();
        for name in entry_points(crate::PTX) {
            let f = module
                .load_function(name)
                .map_err(|e| Error::Device(format!("kernel {name} in the PTX: {e}")))?;
            functions.insert(name.to_string(), f);
        }
        // The group-per-row sparse products keep their hash tables in shared
        // memory (32 KB a block): the largest shared carveout lets their
        // register caps (`.maxnreg`, set by `cargo xtask ptx`), not the
        // carveout the driver would pick, bound their blocks per SM.
        for name in [
            "spgemm_count_rows",
            "spgemm_fill_rows",
            "spgemm_count_wide",
            "spgemm_fill_wide",
        ] {
            if let Some(f) = functions.get(name) {
                let carveout =
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
                f.set_attribute(carveout, 100)
                    .map_err(dev("shared-memory carveout of the sparse products"))?;
            }
        }
        let attr = |a| ctx.attribute(a).map_err(dev("device attribute"));
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(dev("device name"))?,
            compute_capability: ctx
                .compute_capability()
                .map_err(dev("compute capability"))?,
            total_memory: ctx.total_mem().map_err(dev("device memory"))?,
            multiprocessors: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
                as usize,
        };
        // One partial per block of the largest reduction grid (8 blocks per SM)
        // and value: fused steps reduce up to four values at once.
        let max_partials = 4 * 8 * info.multiprocessors;
        let scratch = stream
            .alloc_zeros::<u8>(16 * (max_partials + 2))
            .map_err(dev("allocating reduction scratch"))?;
        // SAFETY: the bytes are written by a download before they are read.
        let pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(PINNED_BYTES, 0) }
            .map_err(dev("allocating pinned host memory"))?;
        let backend = CudaBackend {
            inner: Arc::new(Inner {
                stream,
                functions,
                info,
                stats: StatsRecorder::default(),
                scratch: Mutex::new(scratch),
                pinned: Mutex::new(pinned),
                gs: Mutex::default(),
                ffts: Mutex::default(),
                linked: Mutex::default(),
                nccl: std::sync::OnceLock::new(),
                staging: Mutex::new(None),
            }),
        };
        backend.stage_in_background();
        Ok(backend)
    }

    /// Returns the device memory that freed vectors left in the allocator's pool
    /// to the driver (`cuMemPoolTrimTo`); the pool otherwise keeps it for the
    /// next allocations (see [`CudaBackend::new`]). Memory still in use is not
    /// touched. The stream is synchronised first: what its work freed counts as
    /// in use until then. Cost: a synchronisation and one driver call.
    pub fn release_cached_memory(&self) -> Result<()> {
        if !self.inner.stream.context().has_async_alloc() {
            return Ok(());
        }
        self.synchronize()?;
        let pool = default_pool(self.inner.stream.context().cu_device())?;
        // SAFETY: trimming a valid pool only unmaps memory no allocation holds.
        unsafe { cudarc::driver::sys::cuMemPoolTrimTo(pool, 0) }
            .result()
            .map_err(dev("releasing cached device memory"))
    }

    /// The error of a failed allocation of `bytes` for `op`: [`Error::DeviceMemory`]
    /// with the device's free and total memory when the driver ran out of memory,
    /// a device error naming `op` otherwise.
    pub(crate) fn alloc_error(
        &self,
        op: &str,
        bytes: usize,
        e: cudarc::driver::DriverError,
    ) -> Error {
        if e.0 != cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return dev(op)(e);
        }
        let (free, total) = self
            .memory()
            .unwrap_or((0, self.inner.info.total_memory as u64));
        Error::DeviceMemory {
            what: op.to_string(),
            needed: bytes as u64,
            free,
            total,
        }
    }

    /// `(free, total)` device memory in bytes, counting as free what freed
    /// vectors left in the allocator's pool (reserved by this process, reusable by
    /// its next allocations). Two or three driver calls.
    pub fn memory(&self) -> Result<(u64, u64)> {
        let ctx = self.inner.stream.context();
        let (free, total) = ctx.mem_get_info().map_err(dev("device memory query"))?;
        let mut pooled = 0u64;
        if ctx.has_async_alloc() {
            let pool = default_pool(ctx.cu_device())?;
            let attribute = |a| -> Result<u64> {
                let mut v = 0u64;
                // SAFETY: both attributes write one u64 during the call.
                unsafe {
                    cudarc::driver::sys::cuMemPoolGetAttribute(pool, a, (&mut v as *mut u64).cast())
                }
                .result()
                .map_err(dev("memory pool query"))?;
                Ok(v)
            };
            use cudarc::driver::sys::CUmemPool_attribute as A;
            let reserved = attribute(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
            let used = attribute(A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
            pooled = reserved.saturating_sub(used);
        }
        Ok((free as u64 + pooled, total as u64))
    }

    /// Whether `other` is this backend (the same context and stream), so
    /// that device data one made the other may use.
    pub fn same_backend(&self, other: &CudaBackend) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The device this backend runs on.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// Waits until all queued work has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.stream.synchronize().map_err(dev("synchronize"))
    }

    /// y = x through the driver's device-to-device copy (`cuMemcpyDtoDAsync`), not a
    /// gpuq kernel: the bandwidth reference the benchmarks compare kernels with.
    /// Moves 2 n elements; counted as one launch named `memcpy_dtod`.
    pub fn memcpy_dtod<T: Scalar>(&self, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        gpuq_core::check_same_len("memcpy_dtod", x.len, y.len)?;
        if x.len == 0 {
            return Ok(());
        }
        self.inner
            .stream
            .memcpy_dtod(&x.buf, &mut y.buf)
            .map_err(dev("memcpy_dtod"))?;
        self.inner.stats.launch("memcpy_dtod");
        Ok(())
    }

    /// y = x[start..start + y.len()] (a block of rows of a longer vector)
    /// through the driver's device-to-device copy; moves 2 y.len() elements.
    /// Errors when the block runs past x's end.
    pub fn copy_rows_from<T: Scalar>(
        &self,
        x: &CudaVector<T>,
        start: usize,
        y: &mut CudaVector<T>,
    ) -> Result<()> {
        let end = start
            .checked_add(y.len)
            .filter(|&e| e <= x.len)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "copy_rows_from: rows {start}.. of {} into a vector of {} run past the end",
                    x.len, y.len
                ))
            })?;
        if y.len == 0 {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        self.inner
            .stream
            .memcpy_dtod(&x.buf.slice(start * size..end * size), &mut y.buf)
            .map_err(dev("copy_rows_from"))?;
        self.inner.stats.launch("copy_rows_from");
        Ok(())
    }

    /// The kernel `name` (every kernel is loaded by [`CudaBackend::new`]).
    pub(crate) fn function(&self, name: &str) -> Result<CudaFunction> {
        self.inner
            .functions
            .get(name)
            .cloned()
            .ok_or_else(|| Error::Device(format!("kernel {name} not found in the PTX")))
    }

    /// Blocks of [`THREADS`] threads of `f` that can be resident on one SM at
    /// once (the driver's occupancy calculator; at least 1). The context is bound
    /// to the calling thread first: the driver call needs it, and a thread that
    /// has not yet touched the device has none. Cost: two driver calls.
    pub(crate) fn blocks_per_sm(&self, f: &CudaFunction) -> Result<usize> {
        self.inner
            .stream
            .context()
            .bind_to_thread()
            .map_err(dev("binding the context"))?;
        Ok(
            f.occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)
                .map_err(dev("occupancy"))?
                .max(1) as usize,
        )
    }

    /// Blocks for a grid-stride kernel over `n` items: enough to fill the device
    /// (8 blocks per SM), never more than the items need, at least 1.
    pub(crate) fn grid_blocks(&self, n: usize) -> u32 {
        let cap = 8 * self.inner.info.multiprocessors;
        n.div_ceil(THREADS as usize).clamp(1, cap) as u32
    }

    /// A launch of `blocks` blocks of [`THREADS`] threads.
    pub(crate) fn cfg(blocks: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Copies host scalars to a new device buffer (counted as one upload).
    pub(crate) fn upload_raw<T: Scalar>(&self, host: &[T]) -> Result<CudaVector<T>> {
        let bytes = scalars_as_bytes(host);
        let buf = self.upload_bytes(bytes)?;
        Ok(CudaVector {
            buf,
            len: host.len(),
            _t: PhantomData,
        })
    }

    /// Copies bytes to a new device buffer (counted as one upload).
    pub(crate) fn upload_bytes(&self, bytes: &[u8]) -> Result<CudaSlice<u8>> {
        self.inner.stats.upload(bytes.len());
        if bytes.is_empty() {
            return self.inner.stream.null::<u8>().map_err(dev("upload"));
        }
        if bytes.len() < crate::staging::STAGED_FROM {
            return self
                .inner
                .stream
                .clone_htod(bytes)
                .map_err(|e| self.alloc_error("an upload", bytes.len(), e));
        }
        // SAFETY: every byte is written by the staged copy below before any
        // kernel reads it (the stream orders them).
        let mut buf = unsafe { self.inner.stream.alloc::<u8>(bytes.len()) }
            .map_err(|e| self.alloc_error("an upload", bytes.len(), e))?;
        self.staged_upload(bytes, &mut buf.slice_mut(..))?;
        Ok(buf)
    }

    /// Copies the first bytes of a device buffer back into host scalars (counted as
    /// one download); waits for the stream.
    pub(crate) fn download_into<T: Scalar>(
        &self,
        buf: &CudaView<'_, u8>,
        out: &mut [T],
    ) -> Result<()> {
        let bytes = scalars_as_bytes_mut(out);
        self.inner.stats.download(bytes.len());
        if bytes.is_empty() {
            return Ok(());
        }
        let view = buf.slice(0..bytes.len());
        if bytes.len() <= PINNED_BYTES {
            let mut pinned = self.inner.pinned.lock().unwrap_or_else(|e| e.into_inner());
            // A plain slice of the pinned buffer, exactly as long as the copy: the
            // driver recognises page-locked memory by its address.
            let landing = &mut pinned.as_mut_slice().map_err(dev("download"))?[..bytes.len()];
            self.inner
                .stream
                .memcpy_dtoh(&view, landing)
                .map_err(dev("download"))?;
            self.synchronize()?;
            bytes.copy_from_slice(landing);
            return Ok(());
        }
        if bytes.len() < crate::staging::STAGED_DOWN_FROM {
            self.inner
                .stream
                .memcpy_dtoh(&view, bytes)
                .map_err(dev("download"))?;
            return self.synchronize();
        }
        // Large ones through the staging buffers, copied out on all cores
        // (the driver's pageable path took 44 ms for a solution of 108 MB on
        // the H200 machine).
        let len = bytes.len();
        // SAFETY: `[MaybeUninit<u8>]` has the layout of `[u8]`, and the staged
        // download writes every byte (it never writes an uninitialised one).
        let landing = unsafe {
            std::slice::from_raw_parts_mut(
                bytes.as_mut_ptr().cast::<std::mem::MaybeUninit<u8>>(),
                len,
            )
        };
        self.staged_download(&view, landing)
    }
}
