//! gpuq's errors as Python exceptions.

use gpuq::core::Error;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::PyErr;

/// `e` as the Python exception a user expects: `MemoryError` for memory that is not
/// there, `RuntimeError` for a missing or failing device, `ValueError` for everything the
/// input decides (shapes, NaN, malformed text, a method's precondition). A device out of
/// memory also gives the opened CUDA backends' cached memory back to the driver
/// ([`crate::opened::release_cached_device_memory`]): the failed call has ended, and what
/// it allocated would otherwise stay reserved by gpuq.
pub fn to_py(e: Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::HostMemory { .. } => PyMemoryError::new_err(message),
        Error::DeviceMemory { .. } => {
            crate::opened::release_cached_device_memory();
            PyMemoryError::new_err(message)
        }
        Error::NoCudaDevice(_) | Error::Device(_) | Error::Compile(_) => {
            PyRuntimeError::new_err(message)
        }
        _ => PyValueError::new_err(message),
    }
}

/// A `Result` of gpuq as a `PyResult`.
pub trait IntoPy<T> {
    /// Converts the error with [`to_py`].
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPy<T> for gpuq::core::Result<T> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}

/// The report of a run as the JSON text the CLI prints (pretty), for the Python layer.
pub fn json<R: serde::Serialize>(report: &R) -> pyo3::PyResult<String> {
    serde_json::to_string_pretty(report)
        .map_err(|e| PyValueError::new_err(format!("cannot serialise the report: {e}")))
}
