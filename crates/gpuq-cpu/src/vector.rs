//! Host-resident vectors of the CPU backend.

use gpuq_core::DeviceVector;

/// A vector of the CPU backend: a plain `Vec<T>` in host memory.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuVector<T>(pub(crate) Vec<T>);

impl<T> CpuVector<T> {
    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }

    /// The elements, mutably (for kernels of solver crates that fuse operations).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T> From<Vec<T>> for CpuVector<T> {
    /// Wraps the elements as a backend vector. O(1): no copy.
    fn from(v: Vec<T>) -> Self {
        CpuVector(v)
    }
}

impl<T> DeviceVector for CpuVector<T> {
    fn len(&self) -> usize {
        self.0.len()
    }
}
