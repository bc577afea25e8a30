//! `gpuq._gpuq.AmgParams` (the AMG options) and `gpuq._gpuq.AmgHierarchy` (a hierarchy
//! built once, its cycle resident on a backend, solved with and applied many times).

use crate::arrays::{copy, csr, csr_of_bsr, to_numpy, IndexArray};
use crate::errors::{json, IntoPy};
use crate::solve::{config, PyReport};
use gpuq::amg::{AmgOptions, Coarsening, CycleKind, Hierarchy, SetupKernels, Smoother};
use gpuq::core::{Error, Result, ScalarKind};
use gpuq::solver::{AmgSpec, ResidentAmg};
use gpuq::sparse::{Csr, Layout};
use gpuq::{BackendChoice, FullBackend, OnBackend};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use std::time::Instant;

/// The options of gpuq's smoothed-aggregation AMG (see `gpuq.amg`'s docstrings).
#[pyclass(module = "gpuq._gpuq", frozen)]
#[derive(Clone)]
pub struct AmgParams {
    spec: AmgSpec,
}

impl AmgParams {
    /// The solver's AMG specification.
    pub fn spec(&self) -> AmgSpec {
        self.spec.clone()
    }
}

#[pymethods]
impl AmgParams {
    /// Checks and keeps the options; `near_null_space` is an (n, k) array.
    #[new]
    #[pyo3(signature = (
        block=1, near_null_space=None, coarsening="sa", strength=0.001, smoother=None,
        coarse_smoother=None, sweeps=1, coarse_sweeps=None, coarse_size=100, max_levels=25,
        cycle="v", jacobi_damping=None, cycle_precision=None, setup="backend"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        block: usize,
        near_null_space: Option<PyReadonlyArray2<'_, f64>>,
        coarsening: &str,
        strength: f64,
        smoother: Option<&str>,
        coarse_smoother: Option<&str>,
        sweeps: usize,
        coarse_sweeps: Option<usize>,
        coarse_size: usize,
        max_levels: usize,
        cycle: &str,
        jacobi_damping: Option<f64>,
        cycle_precision: Option<&str>,
        setup: &str,
    ) -> PyResult<Self> {
        let columns = near_null_space.map(|b| {
            let b = b.as_array();
            (0..b.ncols())
                .map(|j| b.column(j).iter().copied().collect())
                .collect()
        });
        let options = AmgOptions {
            coarsening: Coarsening::parse(coarsening).py()?,
            block,
            strength,
            smoother: smoother.map(Smoother::parse).transpose().py()?,
            coarse_smoother: coarse_smoother.map(Smoother::parse).transpose().py()?,
            sweeps,
            coarse_sweeps,
            coarse_size,
            max_levels,
            cycle: CycleKind::parse(cycle).py()?,
            near_null_space: columns,
            ..AmgOptions::default()
        };
        let options = AmgOptions {
            jacobi_damping: jacobi_damping.unwrap_or(options.jacobi_damping),
            ..options
        };
        options.validate().py()?;
        let cycle_precision = match cycle_precision {
            None => None,
            Some("f32") => Some(ScalarKind::F32),
            Some("f64") => Some(ScalarKind::F64),
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "cycle_precision '{other}': f32 or f64"
                )))
                .py()
            }
        };
        let setup_on_backend = match setup {
            "backend" => true,
            "host" => false,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "setup '{other}': backend (the solve's, the device setup on a GPU) or host"
                )))
                .py()
            }
        };
        Ok(AmgParams {
            spec: AmgSpec {
                options,
                cycle_precision,
                jacobi_damping,
                setup_on_backend,
            },
        })
    }
}

/// A hierarchy built on a backend from a matrix handed over:
/// `Hierarchy::build_handed_over` with the concrete backend.
struct BuildOn<'a> {
    a: Csr<f64>,
    options: &'a AmgOptions,
}

impl OnBackend for BuildOn<'_> {
    type Output = Result<Hierarchy>;
    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        build_on(backend, self.a, self.options)
    }
}

fn build_on<K: SetupKernels>(backend: &K, a: Csr<f64>, options: &AmgOptions) -> Result<Hierarchy> {
    Hierarchy::build_handed_over(backend, a, options)
}

/// A hierarchy's values updated on a backend: `Hierarchy::update_values_on` with the
/// concrete backend.
struct UpdateOn<'a> {
    h: &'a Hierarchy,
    a: &'a Csr<f64>,
}

impl OnBackend for UpdateOn<'_> {
    type Output = Result<Hierarchy>;
    fn run<B: FullBackend>(self, backend: &B) -> Self::Output {
        self.h.update_values_on(backend, self.a)
    }
}

/// An AMG hierarchy of a real matrix and its cycle, resident on a backend.
#[pyclass(module = "gpuq._gpuq")]
pub struct AmgHierarchy {
    hierarchy: Hierarchy,
    cycle: ResidentAmg,
    params: AmgParams,
    layout: Option<Layout>,
    setup_s: f64,
}

/// The hierarchy of `a` (handed over: on the host it becomes the finest level without a
/// copy) as `params` say on `backend`, and its cycle there.
fn build(
    a: Csr<f64>,
    params: &AmgParams,
    backend: gpuq::AnyBackend,
    layout: Option<Layout>,
) -> Result<(Hierarchy, ResidentAmg)> {
    let spec = &params.spec;
    let gpu = backend.is_cuda();
    let options = AmgOptions {
        jacobi_damping: spec
            .jacobi_damping
            .unwrap_or_else(|| gpuq::amg::default_jacobi_damping(gpu, spec.options.block)),
        ..spec.options.clone()
    };
    let h = if spec.setup_on_backend {
        backend.run(BuildOn {
            a,
            options: &options,
        })?
    } else {
        Hierarchy::build_handed_over(&gpuq::cpu::CpuBackend::new(), a, &options)?
    };
    let cycle = ResidentAmg::new(backend, &h, layout, spec.cycle_precision)?;
    Ok((h, cycle))
}

/// The hierarchy `h` with the values of `a` (its finest matrix's pattern) and its cycle:
/// for smoothed aggregation the aggregates are kept and the numeric setup (tentative and
/// smoothed prolongators, Galerkin products, spectral estimates, smoother data) redone
/// where `params` put the setup (`Hierarchy::update_values_on`); the seed's coarsening,
/// which keeps nothing, is set up again ([`build`]). Cost: the setup without the
/// aggregation, then the cycle's conversion.
fn update(
    h: &Hierarchy,
    a: &Csr<f64>,
    params: &AmgParams,
    backend: gpuq::AnyBackend,
    layout: Option<Layout>,
) -> Result<(Hierarchy, ResidentAmg)> {
    if h.options().coarsening != Coarsening::SmoothedAggregation {
        return build(a.clone(), params, backend, layout);
    }
    let h = if params.spec.setup_on_backend {
        backend.run(UpdateOn { h, a })?
    } else {
        h.update_values(a)?
    };
    let cycle = ResidentAmg::new(backend, &h, layout, params.spec.cycle_precision)?;
    Ok((h, cycle))
}

#[pymethods]
impl AmgHierarchy {
    /// Builds the hierarchy of the real CSR matrix (SciPy's arrays) on `backend`; with
    /// `blocksize` r > 1 the arrays are a BSR matrix's (block rows, block columns, the
    /// r x r blocks flattened), expanded to CSR in Rust on all threads.
    #[new]
    #[pyo3(signature = (shape, indptr, indices, data, params, backend="auto", layout="auto", blocksize=1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        shape: (usize, usize),
        indptr: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        data: PyReadonlyArray1<'_, f64>,
        params: PyRef<'_, AmgParams>,
        backend: &str,
        layout: &str,
        blocksize: usize,
    ) -> PyResult<Self> {
        let choice: BackendChoice = backend.parse().py()?;
        let layout = Layout::parse_or_auto(layout).py()?;
        let params = params.clone();
        let (indptr, indices) = (IndexArray::of(indptr)?, IndexArray::of(indices)?);
        let (ip, ix, values) = (indptr.entries()?, indices.entries()?, data.as_slice()?);
        let start = Instant::now();
        let (hierarchy, cycle) = crate::interruptible::run(py, || {
            let a = match blocksize {
                1 => csr(shape, ip, ix, copy(values))?,
                r => csr_of_bsr(shape, r, ip, ix, values)?,
            };
            build(a, &params, crate::opened::open(choice)?, layout)
        })?
        .py()?;
        Ok(AmgHierarchy {
            hierarchy,
            cycle,
            params,
            layout,
            setup_s: start.elapsed().as_secs_f64(),
        })
    }

    /// Solves A x = b preconditioned by the cycle; returns x (None after a breakdown), the
    /// report as JSON text.
    #[pyo3(signature = (b, x0=None, method="cg", tol=1e-8, atol=0.0, maxiter=None, stagnation_window=500))]
    #[allow(clippy::too_many_arguments)]
    fn solve<'py>(
        &self,
        py: Python<'py>,
        b: PyReadonlyArray1<'py, f64>,
        x0: Option<PyReadonlyArray1<'py, f64>>,
        method: &str,
        tol: f64,
        atol: f64,
        maxiter: Option<usize>,
        stagnation_window: usize,
    ) -> PyResult<(Option<Bound<'py, PyAny>>, String)> {
        let config = config(method, tol, atol, maxiter, stagnation_window).py()?;
        let b = b.as_slice()?;
        let x0 = match &x0 {
            Some(x) => Some(x.as_slice()?),
            None => None,
        };
        let mut solution = crate::interruptible::run(py, || {
            self.cycle
                .solve(&self.hierarchy, b, x0, &config, &mut |_, _| {})
        })?
        .py()?;
        if let Some(summary) = &mut solution.amg {
            summary.setup_s = self.setup_s;
        }
        let report = json(&PyReport::of(&solution))?;
        Ok((solution.x.map(|x| to_numpy(py, x)), report))
    }

    /// Iterates the cycle alone (stationary) from x0 to ||b - A x|| <= max(tol ||b||, atol)
    /// or `maxiter` cycles (100); x and the report as JSON text.
    #[pyo3(signature = (b, x0=None, tol=1e-8, atol=0.0, maxiter=None))]
    fn iterate<'py>(
        &self,
        py: Python<'py>,
        b: PyReadonlyArray1<'py, f64>,
        x0: Option<PyReadonlyArray1<'py, f64>>,
        tol: f64,
        atol: f64,
        maxiter: Option<usize>,
    ) -> PyResult<(Option<Bound<'py, PyAny>>, String)> {
        let options = gpuq::krylov::KrylovOptions {
            rtol: tol,
            atol,
            max_iter: maxiter,
            ..gpuq::krylov::KrylovOptions::default()
        };
        let b = b.as_slice()?;
        let x0 = match &x0 {
            Some(x) => Some(x.as_slice()?),
            None => None,
        };
        let mut solution =
            crate::interruptible::run(py, || self.cycle.iterate(&self.hierarchy, b, x0, &options))?
                .py()?;
        if let Some(summary) = &mut solution.amg {
            summary.setup_s = self.setup_s;
        }
        let report = json(&PyReport::of(&solution))?;
        Ok((solution.x.map(|x| to_numpy(py, x)), report))
    }

    /// One cycle: z = M^-1 r.
    fn cycle<'py>(
        &self,
        py: Python<'py>,
        r: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = r.as_slice()?;
        let z = py.detach(|| self.cycle.apply(r)).py()?;
        Ok(to_numpy(py, z))
    }

    /// New values on the same sparsity pattern: the hierarchy keeps its aggregates and
    /// redoes the numeric setup ([`update`]), then its cycle is remade.
    fn update_values(&mut self, py: Python<'_>, data: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        let values = data.as_slice()?;
        let fine = self.hierarchy.levels()[0].a.host().py()?;
        if values.len() != fine.nnz() {
            return Err(Error::ShapeMismatch {
                op: "update_values",
                expected: format!("{} values (the pattern's)", fine.nnz()),
                found: values.len().to_string(),
            })
            .py();
        }
        let a = Csr::try_new(
            fine.nrows(),
            fine.ncols(),
            fine.row_ptr().to_vec(),
            fine.col_idx().to_vec(),
            values.to_vec(),
        )
        .py()?;
        let backend = self.cycle.backend().clone();
        let start = Instant::now();
        let (hierarchy, cycle) = crate::interruptible::run(py, || {
            update(&self.hierarchy, &a, &self.params, backend, self.layout)
        })?
        .py()?;
        self.hierarchy = hierarchy;
        self.cycle = cycle;
        self.setup_s = start.elapsed().as_secs_f64();
        Ok(())
    }

    /// The hierarchy's levels and complexities, the cycle's precision and the setup time,
    /// as JSON text.
    fn info_json(&self) -> PyResult<String> {
        #[derive(serde::Serialize)]
        struct Info<'a> {
            #[serde(flatten)]
            info: gpuq::amg::HierarchyInfo,
            cycle_precision: &'a str,
            jacobi_damping: f64,
            backend: &'a str,
            setup_s: f64,
        }
        json(&Info {
            info: self.hierarchy.info(),
            cycle_precision: self.cycle.cycle_precision().name(),
            jacobi_damping: self.hierarchy.options().jacobi_damping,
            backend: self.cycle.backend().name(),
            setup_s: self.setup_s,
        })
    }

    /// The backend the cycle lives on: `cpu` or `cuda`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.cycle.backend().name()
    }

    /// The number of unknowns.
    #[getter]
    fn n(&self) -> usize {
        self.hierarchy.levels()[0].a.nrows()
    }
}
