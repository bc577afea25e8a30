//! The [`Backend`] trait: where vectors live and how BLAS-1 runs on them.

use crate::{Error, Result, Scalar, Stats};

/// A vector resident on some backend; only its length is visible to generic code.
pub trait DeviceVector {
    /// Number of elements.
    fn len(&self) -> usize;
    /// `true` when the vector has no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Returns a [`Error::ShapeMismatch`] for `op` unless `a == b`.
pub fn check_same_len(op: &'static str, a: usize, b: usize) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::shape(
            op,
            format!("length {a}"),
            format!("length {b}"),
        ))
    }
}

/// Returns [`Error::InvalidArgument`] for `op` unless every index in `indices`
/// is below `len` (for kernels that index a small array unchecked). O(indices).
pub fn check_indices(op: &'static str, len: usize, indices: &[usize]) -> Result<()> {
    match indices.iter().find(|&&k| k >= len) {
        Some(k) => Err(Error::InvalidArgument(format!(
            "{op}: index {k} is outside an array of {len}"
        ))),
        None => Ok(()),
    }
}

/// A place where vectors live and BLAS-1 operations run: the Rayon CPU backend,
/// the CUDA backend, ...
///
/// Vectors are uploaded once and stay resident; only scalars (dot products, norms)
/// come back per operation. Every operation checks lengths and returns
/// [`Error::ShapeMismatch`] instead of panicking. Each BLAS-1 operation reads and
/// writes each element once: cost O(n) time and the stated memory traffic.
///
/// Reductions (`dotc`, `dotu`, `nrm2`) are deterministic on every backend: the same
/// input gives bitwise the same result on every run, whatever the thread count.
pub trait Backend: Clone + Send + Sync + 'static {
    /// A vector of `T` resident on this backend.
    type Vector<T: Scalar>: DeviceVector + Send + Sync;

    /// The backend's name in reports (`"cpu"`, `"cuda:0"`).
    fn name(&self) -> String;

    /// Copies a host slice to a new resident vector (one upload).
    fn upload<T: Scalar>(&self, host: &[T]) -> Result<Self::Vector<T>>;

    /// Copies a resident vector back to the host (one download).
    fn download<T: Scalar>(&self, v: &Self::Vector<T>) -> Result<Vec<T>>;

    /// A new resident vector of `n` zeros.
    fn zeros<T: Scalar>(&self, n: usize) -> Result<Self::Vector<T>>;

    /// x_i = value for all i. Traffic: n writes.
    fn fill<T: Scalar>(&self, x: &mut Self::Vector<T>, value: T) -> Result<()>;

    /// y = x. Traffic: n reads, n writes.
    fn copy<T: Scalar>(&self, x: &Self::Vector<T>, y: &mut Self::Vector<T>) -> Result<()>;

    /// x = alpha x. Traffic: n reads, n writes.
    fn scal<T: Scalar>(&self, alpha: T, x: &mut Self::Vector<T>) -> Result<()>;

    /// y = alpha x + y. Traffic: 2n reads, n writes.
    fn axpy<T: Scalar>(&self, alpha: T, x: &Self::Vector<T>, y: &mut Self::Vector<T>)
        -> Result<()>;

    /// y = alpha x + beta y. Traffic: 2n reads, n writes.
    fn axpby<T: Scalar>(
        &self,
        alpha: T,
        x: &Self::Vector<T>,
        beta: T,
        y: &mut Self::Vector<T>,
    ) -> Result<()>;

    /// z_i = x_i y_i (elementwise product). Traffic: 2n reads, n writes.
    fn mul_elementwise<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        y: &Self::Vector<T>,
        z: &mut Self::Vector<T>,
    ) -> Result<()>;

    /// Conjugated dot product sum_i conj(x_i) y_i. Traffic: 2n reads.
    fn dotc<T: Scalar>(&self, x: &Self::Vector<T>, y: &Self::Vector<T>) -> Result<T>;

    /// Unconjugated dot product sum_i x_i y_i (equals `dotc` for real types). Traffic: 2n reads.
    fn dotu<T: Scalar>(&self, x: &Self::Vector<T>, y: &Self::Vector<T>) -> Result<T>;

    /// Euclidean norm sqrt(sum_i |x_i|^2), computed without overflow for finite
    /// inputs of any magnitude the type can hold squared. Traffic: n reads.
    fn nrm2<T: Scalar>(&self, x: &Self::Vector<T>) -> Result<T::Real>;

    /// What the backend did so far (transfers, launches).
    fn stats(&self) -> Stats;

    /// Resets the counters behind [`Backend::stats`].
    fn reset_stats(&self);

    /// The backend's memory as `(free, total)` bytes when it is a separate device
    /// memory that a problem can overflow (a GPU's); `None` (the default) for host
    /// memory, which the operating system manages. One driver query.
    fn device_memory(&self) -> Result<Option<(u64, u64)>> {
        Ok(None)
    }

    /// Refuses, before anything is allocated, work that needs more device memory
    /// than is free: [`Error::DeviceMemory`] naming `what`, the bytes it needs and
    /// what the device has. `Ok` on backends without [`Backend::device_memory`].
    fn check_fits(&self, what: &str, needed: u64) -> Result<()> {
        match self.device_memory()? {
            Some((free, total)) if needed > free => Err(Error::DeviceMemory {
                what: what.to_string(),
                needed,
                free,
                total,
            }),
            _ => Ok(()),
        }
    }
}
