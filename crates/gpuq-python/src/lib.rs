//! The extension module `gpuq._gpuq`: the Rust half of the Python package in `python/`.

use pyo3::prelude::*;

/// The module's contents.
#[pymodule]
fn _gpuq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
