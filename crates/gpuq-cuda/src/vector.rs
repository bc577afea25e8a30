//! Device-resident vectors.

use cudarc::driver::CudaSlice;
use gpuq_core::DeviceVector;
use std::marker::PhantomData;

/// A vector of `T` in device memory (stored as raw bytes; `T` is a sealed
/// plain-old-data scalar, so the bytes are its values).
pub struct CudaVector<T> {
    pub(crate) buf: CudaSlice<u8>,
    pub(crate) len: usize,
    pub(crate) _t: PhantomData<T>,
}

impl<T> DeviceVector for CudaVector<T> {
    fn len(&self) -> usize {
        self.len
    }
}

impl<T> std::fmt::Debug for CudaVector<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaVector(len = {})", self.len)
    }
}
