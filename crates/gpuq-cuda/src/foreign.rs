//! Device memory another library owns (CuPy's arrays, handed over through
//! `__cuda_array_interface__`): vectors and CSR matrices as views that the
//! backend's kernels read and write in place and never free, the checks that a
//! pointer is device memory of this backend's device, and the ordering of this
//! backend's stream after the owner's.
//!
//! A view is a [`CudaVector`] or a [`CudaMatrix`] over the owner's pointer
//! (`cudarc`'s `upgrade_device_ptr`); dropping it gives the pointer back
//! (`leak`) instead of freeing it. The owner must keep the memory allocated and
//! leave it alone while a view lives and while work this backend queued on it
//! runs ([`CudaBackend::synchronize`] before handing it back).

use crate::backend::{dev, CudaBackend};
use crate::spmv::{csr_lanes_log2, Arrays, CudaMatrix};
use crate::vector::CudaVector;
use cudarc::driver::sys;
use gpuq_core::{Error, Result, Scalar};
use gpuq_sparse::Layout;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// A [`CudaVector`] over device memory another library owns (CuPy's array,
/// say), made by [`CudaBackend::foreign_vector`]: usable wherever the backend
/// takes its vectors (it dereferences to one) and written in place. Dropping it
/// gives the pointer back, never frees it: the owner keeps the memory allocated
/// while the view and the work queued on it live ([`CudaBackend::synchronize`]
/// before handing the memory back).
pub struct ForeignVector<T> {
    v: ManuallyDrop<CudaVector<T>>,
}

impl<T> Deref for ForeignVector<T> {
    type Target = CudaVector<T>;
    fn deref(&self) -> &CudaVector<T> {
        &self.v
    }
}

impl<T> DerefMut for ForeignVector<T> {
    fn deref_mut(&mut self) -> &mut CudaVector<T> {
        &mut self.v
    }
}

impl<T> Drop for ForeignVector<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and not used again.
        let v = unsafe { ManuallyDrop::take(&mut self.v) };
        // The owner frees the memory: only cudarc's handle is released.
        let _ = v.buf.leak();
    }
}

/// A CSR [`CudaMatrix`] over arrays another library owns, made by
/// [`CudaBackend::foreign_csr`]: 64-bit row pointers, 32-bit column indices and
/// the values, read in place by the backend's CSR kernels (it dereferences to
/// the matrix). Dropping it gives the pointers back, never frees them, as
/// [`ForeignVector`].
pub struct ForeignCsr<T> {
    m: ManuallyDrop<CudaMatrix<T>>,
}

impl<T> Deref for ForeignCsr<T> {
    type Target = CudaMatrix<T>;
    fn deref(&self) -> &CudaMatrix<T> {
        &self.m
    }
}

impl<T> Drop for ForeignCsr<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and not used again.
        let m = unsafe { ManuallyDrop::take(&mut self.m) };
        if let Arrays::Csr {
            row_ptr, col, val, ..
        } = m.arrays
        {
            let _ = (row_ptr.leak(), col.leak(), val.leak());
        }
    }
}

/// The current context of the calling thread, made current again when
/// dropped.
struct CurrentContext(sys::CUcontext);

impl CurrentContext {
    /// The calling thread's current context (null when none). One driver call.
    fn save() -> Result<Self> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: the call writes one context handle.
        unsafe { sys::cuCtxGetCurrent(&mut ctx) }
            .result()
            .map_err(dev("querying the current context"))?;
        Ok(CurrentContext(ctx))
    }
}

impl Drop for CurrentContext {
    fn drop(&mut self) {
        // SAFETY: the handle was current on this thread when saved (or null,
        // which unbinds); a failure leaves the backend's context current, as
        // every other call of the backend does.
        let _ = unsafe { sys::cuCtxSetCurrent(self.0) };
    }
}

/// One attribute of the allocation holding `ptr` (`cuPointerGetAttribute`).
fn pointer_attribute<V: Default>(ptr: u64, attribute: sys::CUpointer_attribute) -> Option<V> {
    let mut value = V::default();
    // SAFETY: each attribute asked for here writes one value of the type the
    // caller gives (int, CUdeviceptr or size_t).
    let result =
        unsafe { sys::cuPointerGetAttribute((&mut value as *mut V).cast(), attribute, ptr as _) };
    result.result().ok().map(|_| value)
}

impl CudaBackend {
    /// Runs `f` with this backend's context current on the calling thread,
    /// then makes current again the context that was (so that the caller's
    /// own CUDA runtime, CuPy's say, keeps its current device). Two driver
    /// calls besides `f`.
    pub fn with_context<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _saved = CurrentContext::save()?;
        self.inner
            .stream
            .context()
            .bind_to_thread()
            .map_err(dev("binding the context"))?;
        f()
    }

    /// Checks that `bytes` bytes from `ptr` are device memory of this
    /// backend's device, inside one allocation, aligned to `align` bytes:
    /// [`Error::InvalidArgument`] naming `what` otherwise. Nothing to check
    /// for zero bytes. Three driver queries; this backend's context must be
    /// current ([`CudaBackend::with_context`]).
    pub fn check_device_memory(
        &self,
        what: &str,
        ptr: u64,
        bytes: usize,
        align: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let bad = |why: String| Error::InvalidArgument(format!("{what}: {why}"));
        if ptr == 0 || ptr % align.max(1) as u64 != 0 {
            return Err(bad(format!(
                "the pointer {ptr:#x} is null or not aligned to {align} bytes"
            )));
        }
        use sys::CUpointer_attribute as A;
        let ordinal: i32 = pointer_attribute(ptr, A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            .ok_or_else(|| bad(format!("{ptr:#x} is not memory the CUDA driver knows")))?;
        let device = self.inner.info.ordinal;
        if usize::try_from(ordinal) != Ok(device) {
            return Err(bad(format!(
                "the memory is on CUDA device {ordinal}, the solve runs on device {device}"
            )));
        }
        let start: u64 = pointer_attribute(ptr, A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            .ok_or_else(|| bad(format!("{ptr:#x}: no allocation range")))?;
        let size: usize = pointer_attribute(ptr, A::CU_POINTER_ATTRIBUTE_RANGE_SIZE)
            .ok_or_else(|| bad(format!("{ptr:#x}: no allocation range")))?;
        let end = start.saturating_add(size as u64);
        if ptr.checked_add(bytes as u64).is_none_or(|last| last > end) {
            return Err(bad(format!(
                "{bytes} bytes from {ptr:#x} run past the end of their allocation \
                 ({size} bytes from {start:#x})"
            )));
        }
        Ok(())
    }

    /// A view of `len` values of `T` at `ptr`, device memory another library
    /// owns, checked by [`CudaBackend::check_device_memory`] (aligned to
    /// `T`'s size). O(1); no transfer.
    ///
    /// # Safety
    ///
    /// The memory must hold `len` values of `T`, stay allocated while the view
    /// and any work queued on it live, and not be used by others meanwhile
    /// unless ordered with this backend's stream.
    pub unsafe fn foreign_vector<T: Scalar>(
        &self,
        what: &str,
        ptr: u64,
        len: usize,
    ) -> Result<ForeignVector<T>> {
        let size = std::mem::size_of::<T>();
        self.check_device_memory(what, ptr, len * size, size)?;
        // SAFETY: checked above to lie in one allocation of this device; the
        // caller vouches for its contents and lifetime. The view is leaked,
        // not freed (ForeignVector's Drop).
        let buf = unsafe { self.inner.stream.upgrade_device_ptr::<u8>(ptr, len * size) };
        Ok(ForeignVector {
            v: ManuallyDrop::new(CudaVector {
                buf,
                len,
                _t: PhantomData,
            }),
        })
    }

    /// A view of the `shape.0` x `shape.1` CSR matrix of `nnz` entries whose
    /// arrays another library owns: `row_ptr` (shape.0 + 1 64-bit offsets),
    /// `col` (`nnz` 32-bit column indices) and `val` (`nnz` values of `T`),
    /// each checked by [`CudaBackend::check_device_memory`]. Read in place by
    /// the CSR kernels; O(1), no transfer.
    ///
    /// # Safety
    ///
    /// As [`CudaBackend::foreign_vector`] for each array, and the arrays must
    /// be a valid CSR matrix: offsets non-decreasing from 0 to `nnz`, column
    /// indices below `shape.1` (the kernels read unchecked).
    pub unsafe fn foreign_csr<T: Scalar>(
        &self,
        shape: (usize, usize),
        row_ptr: u64,
        col: u64,
        val: u64,
        nnz: usize,
    ) -> Result<ForeignCsr<T>> {
        let size = std::mem::size_of::<T>();
        let n = shape.0;
        self.check_device_memory("A's row pointers", row_ptr, 8 * (n + 1), 8)?;
        self.check_device_memory("A's column indices", col, 4 * nnz, 4)?;
        self.check_device_memory("A's values", val, size * nnz, size)?;
        let stream = &self.inner.stream;
        // SAFETY: checked above; the caller vouches for the contents and the
        // lifetime. The views are leaked, not freed (ForeignCsr's Drop).
        let arrays = unsafe {
            Arrays::Csr {
                row_ptr: stream.upgrade_device_ptr::<u8>(row_ptr, 8 * (n + 1)),
                col: stream.upgrade_device_ptr::<u8>(col, 4 * nnz),
                val: stream.upgrade_device_ptr::<u8>(val, size * nnz),
                lanes_log2: csr_lanes_log2(nnz, n),
            }
        };
        Ok(ForeignCsr {
            m: ManuallyDrop::new(CudaMatrix::from_arrays(arrays, shape, nnz, Layout::Csr)),
        })
    }

    /// Orders this backend's stream after the work queued so far on the
    /// stream `handle` names, as `__cuda_array_interface__` (version 3)
    /// gives it: 1 the legacy default stream, 2 the calling thread's
    /// per-thread default stream, any other value a `CUstream` of this
    /// device's primary context. An event recorded there and waited on here:
    /// the host does not wait. This backend's context must be current
    /// ([`CudaBackend::with_context`]).
    ///
    /// # Safety
    ///
    /// `handle` must be 1, 2 or a live stream of this backend's context.
    pub unsafe fn wait_for_stream(&self, handle: usize) -> Result<()> {
        let ctx = self.inner.stream.context();
        // SAFETY: the caller vouches for the handle; the wrapper does not
        // destroy the stream when dropped.
        let theirs = unsafe { ctx.wrap_borrowed_stream(handle as sys::CUstream) };
        self.inner
            .stream
            .join(&theirs)
            .map_err(dev("waiting for the arrays' stream"))
    }
}
