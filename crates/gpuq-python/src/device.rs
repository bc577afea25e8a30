//! CUDA arrays used in place, through `__cuda_array_interface__` (CuPy's, or any
//! producer's): `gpuq._gpuq.cuda_array` reads and checks one interface, and
//! `gpuq._gpuq.solve_cuda` solves A x = b with b and x in device memory the caller owns,
//! x written in place, and A either as CSR arrays on the same device, read in place, or as
//! SciPy's arrays on the host, uploaded. Nothing of b, x or a device A crosses to the host;
//! the report's `transfers` count what did (the scalars the iterations read back).
//!
//! Streams: before anything is read, the backend's stream waits (an event: the host does
//! not wait) for the stream each interface names, version 3's `stream` (none when it is
//! absent or None; version 2, which names none, is taken to use the legacy default
//! stream). Before returning, the host waits for the backend's stream, so that every
//! stream of the caller sees x and may reuse the arrays' memory.

use crate::arrays::{csr, vector, IndexArray, Indices};
use crate::errors::{json, IntoPy};
use crate::solve::{config, PyReport, Transfers};
use gpuq::core::{Backend, Error, FusedDot, LinearOperator, Result, Scalar, ScalarKind};
use gpuq::core::{DeviceVector, SolveReport};
use gpuq::cuda::{CudaBackend, CudaMatrix, CudaVector, ForeignCsr, ForeignVector};
use gpuq::krylov::{BlockJacobi2, Jacobi, Method, Preconditioner, SolverConfig};
use gpuq::solver::{AmgSpec, AmgSummary};
use gpuq::sparse::{Csr, DeviceMatrix, Layout, MatrixOperator, SparseBackend};
use numpy::Element;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeSet;
use std::time::Instant;

/// The stream handle of `__cuda_array_interface__` for the legacy default stream.
const LEGACY_STREAM: usize = 1;

/// One array's `__cuda_array_interface__`, read and checked: a C-contiguous array of a
/// little-endian boolean, integer, float or complex type, not masked.
pub struct CudaArray {
    /// The device pointer (null only for an empty array).
    ptr: u64,
    /// The extents.
    shape: Vec<usize>,
    /// The type as NumPy spells it (`<f8`, `<c16`, `|b1`, ...).
    typestr: String,
    /// Whether the producer marked the memory read-only.
    readonly: bool,
    /// The stream to wait for before reading (`None`: none needed).
    stream: Option<usize>,
}

/// The size in bytes of the type `typestr` names, when it is a little-endian (or
/// one-byte) boolean, integer, float or complex type NumPy has.
fn item_size(typestr: &str) -> Option<usize> {
    let mut chars = typestr.chars();
    let order = chars.next()?;
    let kind = chars.next()?;
    let size: usize = chars.as_str().parse().ok()?;
    let known = match kind {
        'b' => size == 1,
        'i' | 'u' => matches!(size, 1 | 2 | 4 | 8),
        'f' => matches!(size, 2 | 4 | 8),
        'c' => matches!(size, 8 | 16),
        _ => false,
    };
    let order_ok = order == '<' || (order == '|' && size == 1);
    (known && order_ok).then_some(size)
}

impl CudaArray {
    /// Reads `obj.__cuda_array_interface__` (versions 2 and 3); a `ValueError` naming
    /// `name` for a missing or malformed interface, a masked or non-contiguous array, or a
    /// type other than a little-endian boolean, integer, float or complex one. O(ndim).
    pub fn of(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Self> {
        let bad = |why: String| PyValueError::new_err(format!("{name}: {why}"));
        let interface = obj
            .getattr("__cuda_array_interface__")
            .map_err(|_| bad("it has no __cuda_array_interface__".into()))?;
        let interface = interface
            .cast::<PyDict>()
            .map_err(|_| bad("its __cuda_array_interface__ is not a dict".into()))?;
        let get = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            Ok(interface.get_item(key)?.filter(|v| !v.is_none()))
        };
        let required = |key: &str| {
            get(key)?.ok_or_else(|| bad(format!("its __cuda_array_interface__ has no '{key}'")))
        };
        let version: i64 = required("version")?
            .extract()
            .map_err(|_| bad("the interface's version is not an integer".into()))?;
        if !(2..=3).contains(&version) {
            return Err(bad(format!(
                "__cuda_array_interface__ version {version}: versions 2 and 3 are read"
            )));
        }
        let typestr: String = required("typestr")?
            .extract()
            .map_err(|_| bad("the interface's typestr is not a string".into()))?;
        let item = item_size(&typestr).ok_or_else(|| {
            bad(format!(
                "typestr '{typestr}': a little-endian boolean, integer, float or complex type \
                 is expected"
            ))
        })?;
        let shape: Vec<usize> = required("shape")?
            .extract()
            .map_err(|_| bad("the interface's shape is not a tuple of extents".into()))?;
        if let Some(strides) = get("strides")? {
            let strides: Vec<isize> = strides
                .extract()
                .map_err(|_| bad("the interface's strides are not a tuple of integers".into()))?;
            if !contiguous(&shape, &strides, item) {
                return Err(bad(format!(
                    "strides {strides:?} for shape {shape:?}: a C-contiguous array is expected \
                     (cupy.ascontiguousarray makes one)"
                )));
            }
        }
        if get("mask")?.is_some() {
            return Err(bad("masked arrays are not taken".into()));
        }
        let (ptr, readonly): (u64, bool) = required("data")?
            .extract()
            .map_err(|_| bad("the interface's data is not a (pointer, read-only) pair".into()))?;
        if ptr == 0 && shape.iter().product::<usize>() > 0 {
            return Err(bad("the data pointer is null".into()));
        }
        let stream = match (version, get("stream")?) {
            (2, _) => Some(LEGACY_STREAM),
            (_, None) => None,
            (_, Some(s)) => match s.extract::<usize>() {
                Ok(0) | Err(_) => {
                    return Err(bad(
                        "the interface's stream must be None, 1, 2 or a stream handle \
                         (0 is disallowed by the interface)"
                            .into(),
                    ))
                }
                Ok(s) => Some(s),
            },
        };
        Ok(CudaArray {
            ptr,
            shape,
            typestr,
            readonly,
            stream,
        })
    }

    /// Checks that this is a vector of `len` values of typestr `typestr`, writable when
    /// `write`; a `ValueError` naming `name` otherwise.
    fn check_vector(&self, name: &str, typestr: &str, len: usize, write: bool) -> PyResult<()> {
        if self.shape != [len] || self.typestr != typestr {
            return Err(PyValueError::new_err(format!(
                "{name}: a 1-D array of {len} values of {typestr} is expected, not shape {:?} of {}",
                self.shape, self.typestr
            )));
        }
        if write && self.readonly {
            return Err(PyValueError::new_err(format!(
                "{name}: the array is read-only and the solution is written to it"
            )));
        }
        Ok(())
    }
}

/// Whether `strides` (bytes) lay out `shape` of `item`-byte values in C order without
/// gaps; extents of 1 may have any stride, and an empty array any strides.
fn contiguous(shape: &[usize], strides: &[isize], item: usize) -> bool {
    if strides.len() != shape.len() {
        return false;
    }
    if shape.contains(&0) {
        return true;
    }
    let mut expected = item as isize;
    for (&extent, &stride) in shape.iter().zip(strides).rev() {
        if extent != 1 && stride != expected {
            return false;
        }
        expected *= extent as isize;
    }
    true
}

/// Reads and checks `obj.__cuda_array_interface__` as `solve_cuda` will (see
/// [`CudaArray::of`]); returns its typestr and shape, a `ValueError` naming `name`
/// otherwise.
#[pyfunction]
#[pyo3(signature = (obj, name="array"))]
pub fn cuda_array(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<(String, Vec<usize>)> {
    let a = CudaArray::of(obj, name)?;
    Ok((a.typestr, a.shape))
}

/// The typestr of scalar `T`.
fn typestr_of<T: Scalar>() -> &'static str {
    match T::KIND {
        ScalarKind::F32 => "<f4",
        ScalarKind::F64 => "<f8",
        ScalarKind::C32 => "<c8",
        ScalarKind::C64 => "<c16",
    }
}

/// A CSR matrix's three device arrays (64-bit row pointers, 32-bit column indices, the
/// values), checked.
struct DeviceArrays {
    indptr: CudaArray,
    indices: CudaArray,
    data: CudaArray,
}

impl DeviceArrays {
    /// The interfaces of `(indptr, indices, data)`; `what` names the matrix in errors.
    fn of(arrays: [&Bound<'_, PyAny>; 3], what: &str) -> PyResult<Self> {
        Ok(DeviceArrays {
            indptr: CudaArray::of(arrays[0], &format!("{what}'s indptr"))?,
            indices: CudaArray::of(arrays[1], &format!("{what}'s indices"))?,
            data: CudaArray::of(arrays[2], &format!("{what}'s data"))?,
        })
    }

    /// Checks the arrays' types and lengths for a `shape.0`-row matrix of `T`; returns its
    /// stored entries. `what` names the matrix in errors.
    fn check<T: Scalar>(&self, shape: (usize, usize), what: &str) -> PyResult<usize> {
        let nnz = self.data.shape.first().copied().unwrap_or(0);
        let name = |part: &str| format!("{what}'s {part}");
        self.indptr
            .check_vector(&name("indptr"), "<i8", shape.0 + 1, false)?;
        self.indices
            .check_vector(&name("indices"), "<i4", nnz, false)?;
        self.data
            .check_vector(&name("data"), typestr_of::<T>(), nnz, false)?;
        Ok(nnz)
    }

    /// A view of the matrix (checked by [`DeviceArrays::check`]) on `backend`.
    ///
    /// # Safety
    ///
    /// As [`CudaBackend::foreign_csr`]: the arrays must be a valid CSR matrix that
    /// outlives the view.
    unsafe fn view<T: Scalar>(
        &self,
        backend: &CudaBackend,
        shape: (usize, usize),
        nnz: usize,
    ) -> Result<ForeignCsr<T>> {
        // SAFETY: the caller vouches for the arrays.
        unsafe { backend.foreign_csr(shape, self.indptr.ptr, self.indices.ptr, self.data.ptr, nnz) }
    }

    /// The arrays' streams.
    fn streams(&self) -> [Option<usize>; 3] {
        [self.indptr.stream, self.indices.stream, self.data.stream]
    }
}

/// Views of a matrix on the device, read in place.
struct DeviceViews<T> {
    /// A.
    a: ForeignCsr<T>,
    /// A^T, for QMR.
    at: Option<ForeignCsr<T>>,
    /// D^-1, for Jacobi.
    inv_diag: Option<ForeignVector<T>>,
}

/// Where the solve's matrix is.
enum Source<T> {
    /// On the device, read in place.
    Device(Box<DeviceViews<T>>),
    /// On the host (SciPy's), uploaded in the layout.
    Host(Csr<T>),
}

/// A CSR matrix on the device another library owns as the solve's operator (with A^T
/// for QMR when given).
struct DeviceCsr<'a, T> {
    backend: &'a CudaBackend,
    a: &'a CudaMatrix<T>,
    at: Option<&'a CudaMatrix<T>>,
}

impl<T: Scalar> LinearOperator<CudaBackend, T> for DeviceCsr<'_, T> {
    fn shape(&self) -> (usize, usize) {
        self.a.shape()
    }

    fn apply(&self, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        self.backend.spmv(T::one(), self.a, x, T::zero(), y)
    }

    fn apply_dotc(
        &self,
        backend: &CudaBackend,
        x: &CudaVector<T>,
        y: &mut CudaVector<T>,
    ) -> Result<T> {
        backend.spmv_dotc(self.a, x, y)
    }

    fn apply_dot(
        &self,
        backend: &CudaBackend,
        x: &CudaVector<T>,
        y: &mut CudaVector<T>,
        dot: FusedDot<'_, CudaBackend, T>,
    ) -> Result<bool> {
        backend.spmv_dot(self.a, x, y, dot)
    }

    fn apply_transpose(&self, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        let at = self.at.ok_or_else(|| Error::Precondition {
            method: "transpose",
            reason: "the device matrix was given without its transpose".into(),
        })?;
        self.backend.spmv(T::one(), at, x, T::zero(), y)
    }

    fn name(&self) -> &str {
        "csr"
    }
}

/// Jacobi from an inverse diagonal on the device: z = D^-1 r.
struct Diagonal<'a, T> {
    backend: &'a CudaBackend,
    inv: &'a CudaVector<T>,
}

impl<T: Scalar> LinearOperator<CudaBackend, T> for Diagonal<'_, T> {
    fn shape(&self) -> (usize, usize) {
        (self.inv.len(), self.inv.len())
    }

    fn apply(&self, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        self.backend.mul_elementwise(self.inv, x, y)
    }

    fn apply_transpose(&self, x: &CudaVector<T>, y: &mut CudaVector<T>) -> Result<()> {
        self.apply(x, y)
    }

    fn diagonal(&self) -> Option<&CudaVector<T>> {
        Some(self.inv)
    }

    fn name(&self) -> &str {
        "jacobi"
    }
}

/// The method of `config` on `a`, preconditioned by `m`, from the `x` given.
fn iterate<T: Scalar>(
    backend: &CudaBackend,
    a: &dyn LinearOperator<CudaBackend, T>,
    m: Option<&dyn LinearOperator<CudaBackend, T>>,
    b: &CudaVector<T>,
    x: &mut CudaVector<T>,
    config: &SolverConfig,
) -> Result<SolveReport> {
    use gpuq::krylov as k;
    let o = &config.options;
    match config.method {
        Method::Cg => k::cg(backend, a, m, b, x, o),
        Method::Bicgstab => k::bicgstab(backend, a, m, b, x, o),
        Method::BicgstabL { l } => k::bicgstab_l(backend, a, m, b, x, l, o),
        Method::Tfqmr => k::tfqmr(backend, a, m, b, x, o),
        Method::Qmr => k::qmr(backend, a, m, b, x, o),
        Method::Gmres { restart } => k::gmres(backend, a, m, b, x, restart, o),
    }
}

/// A finished solve: the report, and the message of the breakdown or stagnation that
/// ended it (x then holds no iterate to return).
struct Solved {
    report: SolveReport,
    stopped: Option<String>,
    /// With AMG: the hierarchy and the choices made for it.
    amg: Option<AmgSummary>,
}

/// Solves A x = b on `backend` from the `x` given, A from `source`, in `layout` (`None`:
/// [`Layout::auto`] for a host matrix; a device matrix is CSR). The report's setup time
/// covers the upload and the preconditioner's construction.
fn solve_views<T: Scalar>(
    backend: &CudaBackend,
    source: &Source<T>,
    b: &CudaVector<T>,
    x: &mut CudaVector<T>,
    config: &SolverConfig,
    layout: Option<Layout>,
    amg: Option<&AmgSpec>,
) -> Result<Solved> {
    let setup = Instant::now();
    let ((n, ncols), nnz, layout) = match source {
        Source::Host(a) => (a.shape(), a.nnz(), layout.unwrap_or(Layout::auto(a, true))),
        Source::Device(d) => (d.a.shape(), d.a.nnz(), layout.unwrap_or(Layout::Csr)),
    };
    if n != ncols {
        return Err(Error::Precondition {
            method: "solve",
            reason: format!("matrix is {n} x {ncols}, not square"),
        });
    }
    let device = matches!(source, Source::Device(_));
    if device && layout != Layout::Csr {
        return Err(Error::InvalidArgument(format!(
            "layout '{}': a matrix on the device is used in place, in CSR (layout auto or csr)",
            layout.spelling()
        )));
    }
    backend.check_fits(
        &format!(
            "this solve ({n} unknowns, {nnz} non-zeros, {})",
            T::KIND.name()
        ),
        config.work_bytes(n, if device { 0 } else { nnz }, size_of::<T>()),
    )?;
    if let Some(spec) = amg {
        return amg_views(backend, source, b, x, config, layout, spec, setup);
    }
    let op: Box<dyn LinearOperator<CudaBackend, T> + '_> = match source {
        Source::Host(a) if config.method == Method::Qmr => {
            Box::new(MatrixOperator::with_transpose(backend, a, layout)?)
        }
        Source::Host(a) => Box::new(MatrixOperator::new(backend, a, layout)?),
        Source::Device(d) => Box::new(DeviceCsr {
            backend,
            a: &d.a,
            at: d.at.as_deref(),
        }),
    };
    let m: Option<Box<dyn LinearOperator<CudaBackend, T> + '_>> = match (config.precond, source) {
        (Preconditioner::None, _) => None,
        (Preconditioner::Jacobi, Source::Host(a)) => Some(Box::new(Jacobi::new(backend, a)?)),
        (Preconditioner::Block2, Source::Host(a)) => Some(Box::new(BlockJacobi2::new(backend, a)?)),
        (Preconditioner::Jacobi, Source::Device(d)) => {
            let inv = d.inv_diag.as_deref().ok_or_else(|| {
                Error::InvalidArgument("jacobi on a device matrix needs its D^-1".into())
            })?;
            Some(Box::new(Diagonal { backend, inv }))
        }
        (Preconditioner::Block2, Source::Device(_)) => {
            return Err(Error::InvalidArgument(
                "block2 with a matrix on the device: not done (none or jacobi)".into(),
            ))
        }
    };
    let setup_s = setup.elapsed().as_secs_f64();
    solved(
        iterate(backend, op.as_ref(), m.as_deref(), b, x, config),
        setup_s,
        layout,
        None,
    )
}

/// A solve's outcome with its setup time and layout in the report: a
/// breakdown or stagnation as a report without iterate, other errors passed
/// through.
fn solved(
    result: Result<SolveReport>,
    setup_s: f64,
    layout: Layout,
    amg: Option<AmgSummary>,
) -> Result<Solved> {
    let finish = |mut report: SolveReport| {
        report.setup_time_s = setup_s;
        report.layout = layout.spelling();
        report
    };
    match result {
        Ok(report) => Ok(Solved {
            report: finish(report),
            stopped: None,
            amg,
        }),
        Err(e @ Error::Breakdown { .. }) => {
            let message = e.to_string();
            let Error::Breakdown { report, .. } = e else {
                unreachable!("matched as a breakdown above")
            };
            Ok(Solved {
                report: finish(*report),
                stopped: Some(message),
                amg,
            })
        }
        Err(e) => Err(e),
    }
}

/// The AMG-preconditioned solve of [`solve_views`] (real f64 only): the
/// hierarchy built on the device from A where it is (a device A copied there
/// into the setup's layout, [`gpuq::amg::resident_finest`]; a SciPy A
/// uploaded), the cycle in the spec's precision, the method on A in place (a
/// device A) or on the setup's copy of A's finest level; for a singular A
/// (a null space the hierarchy found or was given) b projected in a device
/// copy and x after the solve, as the host path does.
#[allow(clippy::too_many_arguments)]
fn amg_views<T: Scalar>(
    backend: &CudaBackend,
    source: &Source<T>,
    b: &CudaVector<T>,
    x: &mut CudaVector<T>,
    config: &SolverConfig,
    layout: Layout,
    spec: &AmgSpec,
    setup: Instant,
) -> Result<Solved> {
    use gpuq::amg::{AmgKernels, Hierarchy};
    // T is f64 here (the caller's checks): the casts are identities.
    let (Some(b), Some(x)) = (
        (b as &dyn std::any::Any).downcast_ref::<CudaVector<f64>>(),
        (x as &mut dyn std::any::Any).downcast_mut::<CudaVector<f64>>(),
    ) else {
        return Err(Error::Precondition {
            method: "AMG",
            reason: format!(
                "AMG with CUDA arrays solves in float64 (this solve is {})",
                T::KIND.name()
            ),
        });
    };
    let options = spec.options_on(true);
    let h = match source {
        Source::Device(d) => Hierarchy::build_on_resident(
            backend,
            gpuq::amg::resident_finest(backend, f64_view(&d.a)?)?,
            &options,
        )?,
        Source::Host(a) => {
            let a = (a as &dyn std::any::Any)
                .downcast_ref::<Csr<f64>>()
                .ok_or_else(|| Error::InvalidArgument("AMG: A is not float64".into()))?;
            match spec.setup_on_backend {
                true => Hierarchy::build_on(backend, a, &options)?,
                false => Hierarchy::build(a, &options)?,
            }
        }
    };
    let hierarchy_s = setup.elapsed().as_secs_f64();
    let precision = spec.cycle_for(ScalarKind::F64);
    let cycle_start = Instant::now();
    let cycle = gpuq::solver::f64_cycle(backend, &h, layout, precision)?;
    let resident;
    let (a, at): (&CudaMatrix<f64>, Option<&CudaMatrix<f64>>) = match source {
        Source::Device(d) => (f64_view(&d.a)?, d.at.as_ref().map(f64_view).transpose()?),
        Source::Host(_) => {
            resident = backend.amg_level_matrix::<f64>(&h.levels()[0].a, layout)?;
            (&resident, None)
        }
    };
    let op = DeviceCsr { backend, a, at };
    let projected;
    let b = if h.null_space().is_empty() {
        b
    } else {
        let mut copy = backend.zeros::<f64>(b.len())?;
        backend.copy(b, &mut copy)?;
        project_on(backend, &h, &mut copy)?;
        projected = copy;
        &projected
    };
    let cycle_setup_s = cycle_start.elapsed().as_secs_f64();
    let setup_s = setup.elapsed().as_secs_f64();
    let result = iterate(backend, &op, Some(cycle.as_ref()), b, x, config);
    if result.is_ok() {
        project_on(backend, &h, x)?;
    }
    let mut summary = AmgSummary::of(&h, true, precision);
    summary.cycle_setup_s = cycle_setup_s;
    summary.setup_s = hierarchy_s + cycle_setup_s;
    let mut out = solved(result, setup_s, layout, Some(summary))?;
    out.report.preconditioner = cycle.name().into();
    Ok(out)
}

/// A device CSR view as float64 (an error for another type).
fn f64_view<T: Scalar>(m: &ForeignCsr<T>) -> Result<&CudaMatrix<f64>> {
    (m as &dyn std::any::Any)
        .downcast_ref::<ForeignCsr<f64>>()
        .map(|a| &**a)
        .ok_or_else(|| Error::InvalidArgument("AMG: A is not float64".into()))
}

/// v -= (q^T v) q on the device for each vector q of `h`'s null space (each
/// uploaded once). O(n) per vector; nothing for a nonsingular A.
fn project_on(
    backend: &CudaBackend,
    h: &gpuq::amg::Hierarchy,
    v: &mut CudaVector<f64>,
) -> Result<()> {
    for q in h.null_space() {
        let q = backend.upload(q)?;
        let d = backend.dotc(&q, v)?;
        backend.axpy(-d, &q, v)?;
    }
    Ok(())
}

/// Solves A x = b on CUDA device `device` with b and x CUDA arrays (x, the initial guess,
/// overwritten with the solution), A as CSR arrays on that device (`indptr` int64,
/// `indices` int32, `data` of b's type; `transpose`: A^T's three arrays, for QMR;
/// `inv_diag`: D^-1, for Jacobi) or as SciPy's arrays on the host; `precond="amg"` with
/// `amg` the options (real float64 only; the hierarchy built on the device from A where it
/// is, no host copy of a device A). The caller vouches
/// that device CSR arrays are a valid matrix (row pointers from 0 to nnz, non-decreasing;
/// columns below the column count): the kernels read them unchecked. Returns whether x
/// holds the solve's iterate (not after a breakdown) and the report as JSON text.
#[pyfunction]
#[pyo3(signature = (
    device, shape, indptr, indices, data, b, x, transpose=None, inv_diag=None, method="cg",
    precond="none", tol=1e-8, atol=0.0, maxiter=None, stagnation_window=500, layout="auto",
    amg=None
))]
#[allow(clippy::too_many_arguments)]
pub fn solve_cuda(
    py: Python<'_>,
    device: usize,
    shape: (usize, usize),
    indptr: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    transpose: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>)>,
    inv_diag: Option<&Bound<'_, PyAny>>,
    method: &str,
    precond: &str,
    tol: f64,
    atol: f64,
    maxiter: Option<usize>,
    stagnation_window: usize,
    layout: &str,
    amg: Option<PyRef<'_, crate::amg::AmgParams>>,
) -> PyResult<(bool, String)> {
    let mut config = config(method, tol, atol, maxiter, stagnation_window).py()?;
    let amg = crate::solve::preconditioner(&mut config, precond, amg)?;
    let layout = Layout::parse_or_auto(layout).py()?;
    let (bv, xv) = (CudaArray::of(b, "b")?, CudaArray::of(x, "x")?);
    let on_device = data.hasattr("__cuda_array_interface__")?;
    let matrix = match on_device {
        true => Matrix::Device(Box::new(DeviceInputs {
            a: DeviceArrays::of([indptr, indices, data], "A")?,
            at: match &transpose {
                Some((p, i, d)) => Some(DeviceArrays::of([p, i, d], "A^T")?),
                None => None,
            },
            inv_diag: inv_diag.map(|d| CudaArray::of(d, "D^-1")).transpose()?,
        })),
        false => Matrix::Host {
            indptr: IndexArray::of(indptr)?,
            indices: IndexArray::of(indices)?,
            data,
        },
    };
    let job = Job {
        device,
        shape,
        matrix,
        b: bv,
        x: xv,
        config,
        layout,
        amg,
    };
    macro_rules! typed {
        ($t:ty) => {
            job.run::<$t>(py)
        };
    }
    match job.b.typestr.as_str() {
        "<f8" => typed!(f64),
        "<f4" => typed!(f32),
        "<c16" => typed!(num_complex::Complex<f64>),
        "<c8" => typed!(num_complex::Complex<f32>),
        other => Err(PyValueError::new_err(format!(
            "b: typestr '{other}': float32, float64, complex64 or complex128 is expected"
        ))),
    }
}

/// The interfaces of a matrix on the device.
struct DeviceInputs {
    /// A's CSR arrays.
    a: DeviceArrays,
    /// A^T's, for QMR.
    at: Option<DeviceArrays>,
    /// D^-1, for Jacobi.
    inv_diag: Option<CudaArray>,
}

/// The matrix of a [`solve_cuda`] call, as given.
enum Matrix<'a, 'py> {
    /// CSR arrays on the device (with A^T's and D^-1 when given).
    Device(Box<DeviceInputs>),
    /// SciPy's arrays.
    Host {
        indptr: IndexArray<'py>,
        indices: IndexArray<'py>,
        data: &'a Bound<'py, PyAny>,
    },
}

/// A [`solve_cuda`] call, its interfaces read.
struct Job<'a, 'py> {
    device: usize,
    shape: (usize, usize),
    matrix: Matrix<'a, 'py>,
    b: CudaArray,
    x: CudaArray,
    config: SolverConfig,
    layout: Option<Layout>,
    /// `precond="amg"`: its options.
    amg: Option<AmgSpec>,
}

/// The matrix of a solve, ready for the worker thread.
enum Given<'a, T> {
    /// Views of the device arrays.
    Device(Source<T>),
    /// Copies of SciPy's arrays, made into a matrix off the GIL.
    Host(Indices<'a>, Indices<'a>, Vec<T>),
}

impl Job<'_, '_> {
    /// The solve in scalar `T`: the views made and the streams ordered on the calling
    /// thread (the per-thread default stream is that thread's), the solve with the GIL
    /// released, the backend's stream waited for on every path before returning.
    fn run<T: Scalar + Element>(self, py: Python<'_>) -> PyResult<(bool, String)> {
        let (n, ncols) = self.shape;
        let typestr = typestr_of::<T>();
        self.b.check_vector("b", typestr, n, false)?;
        self.x.check_vector("x", typestr, ncols, true)?;
        let mut streams: BTreeSet<usize> = [self.b.stream, self.x.stream]
            .into_iter()
            .flatten()
            .collect();
        let backend = py.detach(|| crate::opened::cuda(self.device)).py()?;
        // SAFETY (the views below): the interfaces were checked (type, length,
        // contiguity), the views check the memory (device, extent, alignment), and the
        // Python caller holds the arrays for the whole call, which waits for the backend's
        // stream before it returns; the caller vouches for the device CSR arrays' contents.
        let given = match &self.matrix {
            Matrix::Host {
                indptr,
                indices,
                data,
            } => Given::Host(indptr.entries()?, indices.entries()?, vector::<T>(data)?),
            Matrix::Device(inputs) => {
                let DeviceInputs { a, at, inv_diag } = inputs.as_ref();
                let nnz = a.check::<T>(self.shape, "A")?;
                streams.extend(a.streams().into_iter().flatten());
                let at = match at {
                    Some(at) => {
                        streams.extend(at.streams().into_iter().flatten());
                        Some((at, at.check::<T>((ncols, n), "A^T")?))
                    }
                    None => None,
                };
                if let Some(d) = inv_diag {
                    d.check_vector("D^-1", typestr, n, false)?;
                    streams.extend(d.stream);
                }
                // SAFETY: as said above.
                let source = backend.with_context(|| unsafe {
                    Ok(DeviceViews {
                        a: a.view::<T>(&backend, self.shape, nnz)?,
                        at: match at {
                            Some((at, k)) => Some(at.view::<T>(&backend, (ncols, n), k)?),
                            None => None,
                        },
                        inv_diag: match inv_diag {
                            Some(d) => Some(backend.foreign_vector::<T>("D^-1", d.ptr, n)?),
                            None => None,
                        },
                    })
                });
                Given::Device(Source::Device(Box::new(source.py()?)))
            }
        };
        // On this thread: the interfaces' streams (the per-thread one) are this thread's.
        // SAFETY: as said above; the handles are the interfaces' streams (1, 2, or their
        // producers' streams of this device).
        let (b, mut x) = backend
            .with_context(|| unsafe {
                let b = backend.foreign_vector::<T>("b", self.b.ptr, n)?;
                let x = backend.foreign_vector::<T>("x", self.x.ptr, ncols)?;
                for &s in &streams {
                    backend.wait_for_stream(s)?;
                }
                Ok((b, x))
            })
            .py()?;
        let (shape, config, layout, amg) = (self.shape, &self.config, self.layout, &self.amg);
        let (solved, transfers) = crate::interruptible::run(py, || {
            let before = backend.stats();
            let source = match given {
                Given::Device(source) => Ok(source),
                Given::Host(indptr, indices, data) => {
                    csr(shape, indptr, indices, data).map(Source::Host)
                }
            };
            let solved = source.and_then(|source| {
                solve_views(&backend, &source, &b, &mut x, config, layout, amg.as_ref())
            });
            // Every path: the caller may reuse the arrays once this returns.
            let synced = backend.synchronize();
            let transfers = Transfers::since(&backend, &before);
            (solved.and_then(|s| synced.map(|_| s)), transfers)
        })?;
        let solved = solved.py()?;
        let report = json(&PyReport {
            report: &solved.report,
            stopped: solved.stopped.as_deref(),
            amg: solved.amg.as_ref(),
            amg_setup_s: solved.amg.as_ref().map(|a| a.setup_s),
            transfers: Some(transfers),
        })?;
        Ok((solved.stopped.is_none(), report))
    }
}
