//! The extension module `gpuq._gpuq`: the Rust half of the Python package in `python/`.
//! Thin by design: arrays in, one call into the `gpuq` library with the GIL released,
//! arrays and JSON reports out. The Python half (`python/gpuq/`) converts SciPy and NumPy
//! inputs, holds the defaults of the Python spelling and shapes the results.

mod amg;
mod arrays;
mod device;
mod errors;
mod integrand;
mod integrate;
mod interruptible;
mod montecarlo;
mod opened;
mod solve;
mod uq;

use pyo3::prelude::*;

/// The Rust side's large blocks on transparent huge pages once a GPU backend
/// is in use, as in the CLI (`gpuq::core::alloc`; `GPUQ_HUGE_PAGES` read when
/// the module loads).
#[global_allocator]
static ALLOC: gpuq::core::alloc::HugePageAlloc = gpuq::core::alloc::HugePageAlloc;

/// The backends this build can open: `cpu` always, `cuda` when a device is present.
#[pyfunction]
fn backends(py: Python<'_>) -> Vec<&'static str> {
    py.detach(|| {
        let mut names = vec!["cpu"];
        if opened::open(gpuq::BackendChoice::Cuda).is_ok() {
            names.push("cuda");
        }
        names
    })
}

/// The rigid body modes of nodes at `coords` (nodes x d, d = 2 or 3), as an
/// (d nodes) x (3 or 6) array: the near-null space of linear elasticity.
#[pyfunction]
fn rigid_body_modes<'py>(
    py: Python<'py>,
    coords: numpy::PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
    use crate::errors::IntoPy;
    let c = coords.as_array();
    let columns: Vec<Vec<f64>> = (0..c.ncols()).map(|j| c.column(j).to_vec()).collect();
    let modes = gpuq::amg::rigid_body_modes(&columns).py()?;
    let rows = modes.first().map_or(0, Vec::len);
    let out = numpy::ndarray::Array2::from_shape_fn((rows, modes.len()), |(i, j)| modes[j][i]);
    Ok(numpy::IntoPyArray::into_pyarray(out, py))
}

/// The module's contents.
#[pymodule]
fn _gpuq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    gpuq::core::alloc::HugePageAlloc::configure_from_env();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BUILTINS", gpuq::cubature::func::NAMES.to_vec())?;
    m.add("METHODS", gpuq::krylov::Method::NAMES.to_vec())?;
    m.add("MAX_BSR_BLOCK", gpuq::sparse::MAX_BSR_BLOCK)?;
    // The Krylov preconditioners, and AMG (gpuq-amg's, composed by gpuq::solver).
    let mut preconditioners = gpuq::krylov::Preconditioner::NAMES.to_vec();
    preconditioners.push("amg");
    m.add("PRECONDITIONERS", preconditioners)?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    m.add_function(wrap_pyfunction!(rigid_body_modes, m)?)?;
    m.add_function(wrap_pyfunction!(solve::solve, m)?)?;
    m.add_function(wrap_pyfunction!(device::solve_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(device::cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(integrate::integrate, m)?)?;
    m.add_function(wrap_pyfunction!(integrate::uq_expectation, m)?)?;
    m.add_function(wrap_pyfunction!(uq::uq_static_response, m)?)?;
    m.add_function(wrap_pyfunction!(uq::uq_psd, m)?)?;
    m.add_function(wrap_pyfunction!(uq::uq_sdof, m)?)?;
    m.add_function(wrap_pyfunction!(uq::uq_convolution, m)?)?;
    m.add_function(wrap_pyfunction!(montecarlo::mc_solve, m)?)?;
    m.add_class::<amg::AmgParams>()?;
    m.add_class::<amg::AmgHierarchy>()?;
    Ok(())
}
