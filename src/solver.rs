//! A linear solve as a program asks for it, in one call: a Krylov method with no, a Jacobi
//! or an AMG preconditioner, an initial guess, the matrix layout chosen for the backend,
//! and the result of a solve that broke down or stagnated returned as a report rather than
//! an error. The faces of gpuq (the Python package; the CLI's AMG solve) call this, so
//! that they cannot drift apart.
//!
//! * [`solve`]: `A x = b` for a [`Csr`] of any scalar with a [`SolveSpec`];
//! * [`amg_solve`]: the AMG-preconditioned solve on a [`Hierarchy`] already built (built
//!   once, reused across right-hand sides);
//! * [`Solution`]: the iterate (absent after a breakdown), the report, and the message of
//!   the breakdown when there was one.
//!
//! ```
//! use gpuq::prelude::*;
//! use gpuq::solver::{solve, SolveSpec};
//!
//! let a = gpuq::sparse::generators::laplace2d::<f64>(16);
//! let b = a.mul_vec(&vec![1.0; a.nrows()])?;
//! let spec = SolveSpec::default(); // CG, no preconditioner, 1e-8
//! let s = solve(&CpuBackend::new(), &a, &b, None, &spec)?;
//! assert!(s.report.converged);
//! # Ok::<(), gpuq::core::Error>(())
//! ```

use crate::backend::{AnyBackend, FullBackend};
pub use gpuq_amg::{amg_cycle, default_cycle_precision, f64_cycle};
use gpuq_amg::{AmgKernels, AmgOptions, Hierarchy};
use gpuq_core::{
    Error, LinearOperator, RealScalar, Result, Scalar, ScalarKind, SolveReport, SolveStatus,
};
use gpuq_krylov::{
    solve_csr_with_precond, solve_resident_with_precond, KrylovBackend, Method, SolverConfig,
};
use gpuq_sparse::{Csr, Layout};
use std::any::Any;
use std::borrow::Cow;
use std::time::Instant;

/// What [`solve`] runs.
#[derive(Clone, Debug, Default)]
pub struct SolveSpec {
    /// Method, tolerances, iteration cap and the Krylov preconditioner (`precond` is
    /// ignored when `amg` is set).
    pub config: SolverConfig,
    /// The matrix layout on the backend; `None`: [`Layout::auto`] for the matrix and the
    /// backend (`config.layout` is not consulted).
    pub layout: Option<Layout>,
    /// AMG preconditioning instead of `config.precond`: the hierarchy's options (real
    /// matrices only).
    pub amg: Option<AmgSpec>,
}

/// The AMG preconditioner of a [`SolveSpec`].
#[derive(Clone, Debug, Default)]
pub struct AmgSpec {
    /// The hierarchy's options (block size, near-null space, smoothers, ...).
    pub options: AmgOptions,
    /// The cycle's precision; `None`: [`default_cycle_precision`].
    pub cycle_precision: Option<ScalarKind>,
    /// The damped-Jacobi smoother's omega rho(D^-1 A), replacing `options.jacobi_damping`;
    /// `None`: [`gpuq_amg::default_jacobi_damping`] for the backend.
    pub jacobi_damping: Option<f64>,
    /// Build the hierarchy on the solve's backend (`true`, the device setup on a GPU) or on
    /// the host.
    pub setup_on_backend: bool,
}

impl AmgSpec {
    /// The hierarchy's options on a backend (`gpu`: a device): the backend's
    /// Jacobi damping ([`gpuq_amg::default_jacobi_damping`]) where
    /// `jacobi_damping` is unset. O(1) plus a copy of the options.
    pub fn options_on(&self, gpu: bool) -> AmgOptions {
        AmgOptions {
            jacobi_damping: self
                .jacobi_damping
                .unwrap_or_else(|| gpuq_amg::default_jacobi_damping(gpu, self.options.block)),
            ..self.options.clone()
        }
    }

    /// The cycle's precision for a solve in precision `solve`: the one asked
    /// for, else [`default_cycle_precision`]. O(1).
    pub fn cycle_for(&self, solve: ScalarKind) -> ScalarKind {
        self.cycle_precision
            .unwrap_or_else(|| default_cycle_precision(solve, self.options.block))
    }
}

/// The result of [`solve`] or [`amg_solve`].
#[derive(Clone, Debug)]
pub struct Solution<T> {
    /// The iterate; `None` when the method broke down or stagnated (see `stopped`).
    pub x: Option<Vec<T>>,
    /// The solve report (status, iterations, true residual, times, ...); with AMG its
    /// `setup_time_s` includes the hierarchy's setup.
    pub report: SolveReport,
    /// The message of the breakdown or stagnation that ended the solve, if one did.
    pub stopped: Option<String>,
    /// With AMG: the hierarchy (levels, complexities) and the choices made for it.
    pub amg: Option<AmgSummary>,
}

/// What an AMG solve reports beside the solve report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AmgSummary {
    /// The hierarchy's levels and complexities.
    #[serde(flatten)]
    pub info: gpuq_amg::HierarchyInfo,
    /// The cycle's precision, `f32` or `f64`.
    pub cycle_precision: String,
    /// The damped-Jacobi smoother's omega rho(D^-1 A).
    pub jacobi_damping: f64,
    /// Whose defaults filled the options left unset: `gpu` ([`gpuq_amg::device_defaults`])
    /// or `cpu`.
    pub defaults: String,
    /// Seconds to build the cycle from the hierarchy (its matrices in the cycle's layout
    /// and precision on the backend).
    pub cycle_setup_s: f64,
    /// Seconds of the whole AMG setup: hierarchy and cycle.
    pub setup_s: f64,
}

/// Solves A x = b on `backend` as `spec` says, from `x0` (zero when `None`). With an
/// initial guess the method solves A e = b - A x0 to the tolerance relative to ||b||, and
/// the report's residuals are relative to ||b||. A breakdown or stagnation is returned as a
/// [`Solution`] without iterate, not as an error; other errors (shape, NaN, a method's
/// precondition, memory) are errors. Cost: the method's iterations, plus the AMG setup when
/// asked.
pub fn solve<B: FullBackend, T: Scalar>(
    backend: &B,
    a: &Csr<T>,
    b: &[T],
    x0: Option<&[T]>,
    spec: &SolveSpec,
) -> Result<Solution<T>> {
    if a.nrows() != a.ncols() {
        return Err(Error::Precondition {
            method: "solve",
            reason: format!("matrix is {} x {}, not square", a.nrows(), a.ncols()),
        });
    }
    gpuq_core::check_same_len("solve: b", a.nrows(), b.len())?;
    let layout = match spec.layout {
        Some(layout) => layout,
        None => Layout::auto(a, backend.device_memory()?.is_some()),
    };
    let config = SolverConfig {
        layout,
        ..spec.config.clone()
    };
    config.options.validate()?;
    with_initial_guess(a, b, x0, &config, |b, config| match &spec.amg {
        // The preconditioner `config` names (Jacobi, 2x2 blocks, ...), built by the solver.
        None => ended(gpuq_krylov::solve_csr_monitored(
            backend,
            a,
            b,
            config,
            &mut |_, _| {},
        )),
        Some(amg) => {
            let a64 = real_f64(a)?;
            let options = amg.options_on(backend.device_memory()?.is_some());
            let setup = Instant::now();
            let h = if amg.setup_on_backend {
                Hierarchy::build_on(backend, &a64, &options)?
            } else {
                Hierarchy::build(&a64, &options)?
            };
            let hierarchy_s = setup.elapsed().as_secs_f64();
            let cycle = amg.cycle_for(T::KIND);
            let b64: Vec<f64> = b.iter().map(|v| v.re().to_f64_lossless()).collect();
            let mut s = amg_solve_in(backend, &h, &b64, config, cycle)?;
            s.report.setup_time_s += hierarchy_s;
            if let Some(summary) = &mut s.amg {
                summary.setup_s += hierarchy_s;
            }
            Ok(Solution {
                x: s.x.map(|x| x.into_iter().map(T::from_f64).collect()),
                report: s.report,
                stopped: s.stopped,
                amg: s.amg,
            })
        }
    })
}

/// The AMG-preconditioned solve of A x = b, A the finest level of `h`, in precision `T`
/// with the cycle in precision `S` (the cycle itself when they agree, else
/// [`gpuq_amg::MixedAmg`]). b and x lose their component in the hierarchy's projected null space, if
/// it has one (a singular A). Cost: the cycle's setup on the backend (the level matrices in
/// its layout and precision), then the iterations.
pub fn amg_solve<B, T, S>(
    backend: &B,
    h: &Hierarchy,
    b: &[f64],
    config: &SolverConfig,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<Solution<T>>
where
    B: KrylovBackend + AmgKernels,
    T: Scalar,
    S: Scalar,
{
    with_new_cycle(backend, h, b, config, monitor, S::KIND, || {
        amg_cycle::<B, T, S>(backend, h, config.layout)
    })
}

/// [`amg_solve_with`] on the cycle `build` makes (in precision `precision`), its setup
/// time in the report and the summary.
fn with_new_cycle<B, T>(
    backend: &B,
    h: &Hierarchy,
    b: &[f64],
    config: &SolverConfig,
    monitor: &mut dyn FnMut(usize, f64),
    precision: ScalarKind,
    build: impl FnOnce() -> Result<Box<dyn LinearOperator<B, T> + Send + Sync>>,
) -> Result<Solution<T>>
where
    B: KrylovBackend + AmgKernels,
    T: Scalar,
{
    let start = Instant::now();
    let cycle = build()?;
    let cycle_setup_s = start.elapsed().as_secs_f64();
    let mut s = amg_solve_with(backend, h, cycle.as_ref(), b, config, monitor)?;
    s.report.setup_time_s += cycle_setup_s;
    if let Some(summary) = &mut s.amg {
        summary.cycle_precision = precision.name().into();
        summary.cycle_setup_s = cycle_setup_s;
        summary.setup_s = cycle_setup_s;
    }
    Ok(s)
}

/// [`amg_solve`] with a cycle already built ([`amg_cycle`]), reused across solves. The
/// summary's cycle fields are the caller's to fill (zero times, the cycle's precision as
/// `T`'s). Cost: the iterations.
pub fn amg_solve_with<B, T>(
    backend: &B,
    h: &Hierarchy,
    cycle: &dyn LinearOperator<B, T>,
    b: &[f64],
    config: &SolverConfig,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<Solution<T>>
where
    B: KrylovBackend + AmgKernels,
    T: Scalar,
{
    let mut b: Vec<f64> = b.to_vec();
    h.project(&mut b);
    let bt: Vec<T> = b.iter().map(|&v| T::from_f64(v)).collect();
    let result = if config.method == Method::Qmr {
        // QMR applies A^T: from the host matrix.
        let fine = h.levels()[0].a.host()?;
        let a = Csr::try_new(
            fine.nrows(),
            fine.ncols(),
            fine.row_ptr().to_vec(),
            fine.col_idx().to_vec(),
            fine.values().iter().map(|&v| T::from_f64(v)).collect(),
        )?;
        solve_csr_with_precond(backend, &a, &bt, config, Some(cycle), monitor)
    } else {
        // A from the hierarchy's finest level: on a device, converted from the copy the
        // setup made there (no second upload).
        let resident = backend.amg_level_matrix::<T>(&h.levels()[0].a, config.layout)?;
        solve_resident_with_precond(backend, resident, &bt, config, Some(cycle), monitor)
    };
    let mut s = ended(result)?;
    if let Some(x) = &mut s.x {
        h.project(x);
    }
    let gpu = backend.device_memory()?.is_some();
    s.amg = Some(AmgSummary::of(h, gpu, T::KIND));
    Ok(s)
}

impl AmgSummary {
    /// The summary of `h` on a backend (`gpu`: a device) with the cycle in
    /// `cycle_precision`; the times zero, for the caller to fill. O(levels).
    pub fn of(h: &Hierarchy, gpu: bool, cycle_precision: ScalarKind) -> Self {
        let defaults = match gpuq_amg::device_defaults(gpu, h.options().block) {
            true => "gpu",
            false => "cpu",
        };
        AmgSummary {
            info: h.info(),
            cycle_precision: cycle_precision.name().into(),
            jacobi_damping: h.options().jacobi_damping,
            defaults: defaults.into(),
            cycle_setup_s: 0.0,
            setup_s: 0.0,
        }
    }
}

/// An AMG hierarchy made resident as a cycle on a backend opened at run time, for f64
/// vectors: built once, then applied ([`ResidentAmg::apply`], a preconditioner for
/// another library's solver) or used to solve ([`ResidentAmg::solve`]) any number of times.
pub struct ResidentAmg {
    backend: AnyBackend,
    cycle: AnyCycle,
    layout: Layout,
    cycle_precision: ScalarKind,
    cycle_setup_s: f64,
}

/// The cycle of a [`ResidentAmg`] on its backend.
enum AnyCycle {
    Cpu(Box<dyn LinearOperator<gpuq_cpu::CpuBackend, f64> + Send + Sync>),
    #[cfg(feature = "cuda")]
    Cuda(Box<dyn LinearOperator<gpuq_cuda::CudaBackend, f64> + Send + Sync>),
}

/// z = M^-1 r for one cycle on `backend`.
fn apply_cycle<B: gpuq_core::Backend>(
    backend: &B,
    cycle: &dyn LinearOperator<B, f64>,
    r: &[f64],
) -> Result<Vec<f64>> {
    gpuq_core::check_same_len("AMG cycle", cycle.shape().1, r.len())?;
    let x = backend.upload(r)?;
    let mut y = backend.zeros::<f64>(r.len())?;
    cycle.apply(&x, &mut y)?;
    backend.download(&y)
}

impl ResidentAmg {
    /// The cycle of `h` on `backend`, its matrices in `layout` (`None`: [`Layout::auto`] for
    /// the finest level and the backend), in precision `cycle` (`None`:
    /// [`default_cycle_precision`]). Cost: the level matrices converted (and on a device
    /// uploaded, when the setup ran on the host) once.
    pub fn new(
        backend: AnyBackend,
        h: &Hierarchy,
        layout: Option<Layout>,
        cycle: Option<ScalarKind>,
    ) -> Result<Self> {
        let start = Instant::now();
        let gpu = backend.is_cuda();
        let layout = match layout {
            Some(layout) => layout,
            None => Layout::auto(h.levels()[0].a.host()?, gpu),
        };
        let block = h.options().block;
        let precision = cycle.unwrap_or_else(|| default_cycle_precision(ScalarKind::F64, block));
        let cycle = match &backend {
            AnyBackend::Cpu(b) => AnyCycle::Cpu(f64_cycle(b, h, layout, precision)?),
            #[cfg(feature = "cuda")]
            AnyBackend::Cuda(b) => AnyCycle::Cuda(f64_cycle(b, h, layout, precision)?),
        };
        Ok(ResidentAmg {
            backend,
            cycle,
            layout,
            cycle_precision: precision,
            cycle_setup_s: start.elapsed().as_secs_f64(),
        })
    }

    /// The backend the cycle lives on.
    pub fn backend(&self) -> &AnyBackend {
        &self.backend
    }

    /// The cycle's precision.
    pub fn cycle_precision(&self) -> ScalarKind {
        self.cycle_precision
    }

    /// One application of the cycle: z = M^-1 r (from z = 0). Cost: one cycle, plus the
    /// upload of r and the download of z on a device.
    pub fn apply(&self, r: &[f64]) -> Result<Vec<f64>> {
        match (&self.backend, &self.cycle) {
            (AnyBackend::Cpu(b), AnyCycle::Cpu(c)) => apply_cycle(b, c.as_ref(), r),
            #[cfg(feature = "cuda")]
            (AnyBackend::Cuda(b), AnyCycle::Cuda(c)) => apply_cycle(b, c.as_ref(), r),
            #[cfg(feature = "cuda")]
            _ => unreachable!("the cycle is built on its backend"),
        }
    }

    /// Iterates the cycle alone from `x0` (zero when `None`): x <- x + M^-1 (b - A x), A the
    /// finest level of `h`, until the true residual meets max(rtol ||b||, atol) of `options`
    /// or `options.max_iter` cycles have run (default 100), or a stop is requested
    /// ([`gpuq_core::interrupt`]). The report's method is `stationary`, its history the true
    /// relative residual before the first cycle and after each. Cost per cycle: one cycle,
    /// one SpMV on the host, the residual's upload and the correction's download.
    pub fn iterate(
        &self,
        h: &Hierarchy,
        b: &[f64],
        x0: Option<&[f64]>,
        options: &gpuq_krylov::KrylovOptions,
    ) -> Result<Solution<f64>> {
        options.validate()?;
        let a = h.levels()[0].a.host()?;
        gpuq_core::check_same_len("AMG iteration: b", a.nrows(), b.len())?;
        let mut x = match x0 {
            Some(x0) => {
                gpuq_core::check_same_len("AMG iteration: x0", a.ncols(), x0.len())?;
                x0.to_vec()
            }
            None => vec![0.0; a.ncols()],
        };
        let start = Instant::now();
        let b_norm = norm(b);
        let scale = if b_norm > 0.0 { b_norm } else { 1.0 };
        let target = (options.rtol * b_norm).max(options.atol);
        let residual = |x: &[f64]| -> Result<Vec<f64>> {
            let ax = a.mul_vec(x)?;
            Ok(b.iter().zip(&ax).map(|(bi, ai)| bi - ai).collect())
        };
        let mut r = residual(&x)?;
        let mut history = vec![norm(&r) / scale];
        let cap = options.max_iter.unwrap_or(100);
        let status = loop {
            if norm(&r) <= target {
                break SolveStatus::Converged;
            }
            if history.len() > cap {
                break SolveStatus::MaxIterations;
            }
            if gpuq_core::interrupt::requested() {
                break SolveStatus::Interrupted;
            }
            let z = self.apply(&r)?;
            x.iter_mut().zip(&z).for_each(|(xi, zi)| *xi += zi);
            r = residual(&x)?;
            history.push(norm(&r) / scale);
        };
        let relative = norm(&r) / scale;
        let report = SolveReport {
            method: "stationary".into(),
            preconditioner: "amg".into(),
            backend: self.backend.name().into(),
            scalar: "f64".into(),
            n: a.nrows(),
            layout: self.layout.spelling(),
            converged: status == SolveStatus::Converged,
            status,
            tolerance: target / scale,
            iterations: history.len() - 1,
            relative_residual: relative,
            recurrence_residual: relative,
            residual_history: if options.record_history {
                history
            } else {
                vec![]
            },
            time_s: start.elapsed().as_secs_f64(),
            ..SolveReport::default()
        };
        let mut s = Solution {
            x: Some(x),
            report,
            stopped: None,
            amg: None,
        };
        s.amg = Some(AmgSummary {
            cycle_setup_s: self.cycle_setup_s,
            ..AmgSummary::of(h, self.backend.is_cuda(), self.cycle_precision)
        });
        Ok(s)
    }

    /// Solves A x = b, A the finest level of `h` (the hierarchy this cycle was built from),
    /// preconditioned by the cycle, from `x0` (zero when `None`), with `config`'s method and
    /// tolerances (its layout replaced by the cycle's). The result as [`solve`]'s. Cost: the
    /// iterations.
    pub fn solve(
        &self,
        h: &Hierarchy,
        b: &[f64],
        x0: Option<&[f64]>,
        config: &SolverConfig,
        monitor: &mut dyn FnMut(usize, f64),
    ) -> Result<Solution<f64>> {
        let config = SolverConfig {
            layout: self.layout,
            ..config.clone()
        };
        config.options.validate()?;
        let a = h.levels()[0].a.host()?;
        gpuq_core::check_same_len("AMG solve: b", a.nrows(), b.len())?;
        let mut s = with_initial_guess(a, b, x0, &config, |b, config| {
            match (&self.backend, &self.cycle) {
                (AnyBackend::Cpu(be), AnyCycle::Cpu(c)) => {
                    amg_solve_with(be, h, c.as_ref(), b, config, monitor)
                }
                #[cfg(feature = "cuda")]
                (AnyBackend::Cuda(be), AnyCycle::Cuda(c)) => {
                    amg_solve_with(be, h, c.as_ref(), b, config, monitor)
                }
                #[cfg(feature = "cuda")]
                _ => unreachable!("the cycle is built on its backend"),
            }
        })?;
        if let Some(summary) = &mut s.amg {
            summary.cycle_precision = self.cycle_precision.name().into();
            summary.cycle_setup_s = self.cycle_setup_s;
        }
        Ok(s)
    }
}

/// [`amg_solve`] in f64 with the cycle in precision `cycle`.
fn amg_solve_in<B: FullBackend>(
    backend: &B,
    h: &Hierarchy,
    b: &[f64],
    config: &SolverConfig,
    cycle: ScalarKind,
) -> Result<Solution<f64>> {
    with_new_cycle(backend, h, b, config, &mut |_, _| {}, cycle, || {
        f64_cycle(backend, h, config.layout, cycle)
    })
}

/// A real matrix as f64 (AMG's setup works in f64): `a` itself when it is f64, else a
/// converted copy; an error for a complex one.
fn real_f64<T: Scalar>(a: &Csr<T>) -> Result<Cow<'_, Csr<f64>>> {
    if matches!(T::KIND, ScalarKind::C32 | ScalarKind::C64) {
        return Err(Error::Precondition {
            method: "AMG",
            reason: "the matrix is complex: AMG takes real matrices (use jacobi or none)".into(),
        });
    }
    if let Some(a) = (a as &dyn Any).downcast_ref::<Csr<f64>>() {
        return Ok(Cow::Borrowed(a));
    }
    let values = a.values().iter().map(|v| v.re().to_f64_lossless());
    Csr::try_new(
        a.nrows(),
        a.ncols(),
        a.row_ptr().to_vec(),
        a.col_idx().to_vec(),
        values.collect(),
    )
    .map(Cow::Owned)
}

/// A solve's result with the breakdown or stagnation that ended it as a report without
/// iterate; other errors pass through. O(1).
pub fn ended<T>(result: Result<(Vec<T>, SolveReport)>) -> Result<Solution<T>> {
    match result {
        Ok((x, report)) => Ok(Solution {
            x: Some(x),
            report,
            stopped: None,
            amg: None,
        }),
        Err(e @ Error::Breakdown { .. }) => {
            let message = e.to_string();
            let Error::Breakdown { report, .. } = e else {
                unreachable!("matched as a breakdown above")
            };
            Ok(Solution {
                x: None,
                report: *report,
                stopped: Some(message),
                amg: None,
            })
        }
        Err(e) => Err(e),
    }
}

/// Runs `run` on A e = b - A x0 (tolerances scaled so that they stay relative to ||b||)
/// and returns x0 + e with the report's residuals relative to ||b||; without `x0`, `run` on
/// b itself. Cost: one SpMV on the host and O(n).
fn with_initial_guess<T: Scalar>(
    a: &Csr<T>,
    b: &[T],
    x0: Option<&[T]>,
    config: &SolverConfig,
    run: impl FnOnce(&[T], &SolverConfig) -> Result<Solution<T>>,
) -> Result<Solution<T>> {
    let Some(x0) = x0 else {
        return run(b, config);
    };
    gpuq_core::check_same_len("solve: x0", a.ncols(), x0.len())?;
    let ax0 = a.mul_vec(x0)?;
    let r0: Vec<T> = b.iter().zip(&ax0).map(|(&bi, &ai)| bi - ai).collect();
    let (b_norm, r0_norm) = (norm(b), norm(&r0));
    if r0_norm == 0.0 || b_norm == 0.0 {
        return run(b, config).map(|mut s| {
            if r0_norm == 0.0 {
                s.x = Some(x0.to_vec());
            }
            s
        });
    }
    // ||b - A x|| <= rtol ||b||  <=>  ||r0 - A e|| <= (rtol ||b|| / ||r0||) ||r0||.
    let ratio = b_norm / r0_norm;
    let mut shifted = config.clone();
    shifted.options.rtol = config.options.rtol * ratio;
    let mut s = run(&r0, &shifted)?;
    if let Some(e) = &mut s.x {
        for (ei, &x0i) in e.iter_mut().zip(x0) {
            *ei += x0i;
        }
    }
    let r = &mut s.report;
    r.relative_residual /= ratio;
    r.recurrence_residual /= ratio;
    r.tolerance /= ratio;
    r.residual_history.iter_mut().for_each(|v| *v /= ratio);
    Ok(s)
}

/// The Euclidean norm. O(n).
fn norm<T: Scalar>(v: &[T]) -> f64 {
    v.iter()
        .map(|x| x.abs_sqr().to_f64_lossless())
        .sum::<f64>()
        .sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_cpu::CpuBackend;
    use gpuq_krylov::Preconditioner;
    use gpuq_sparse::generators::laplace2d;

    fn problem() -> (Csr<f64>, Vec<f64>, Vec<f64>) {
        let a = laplace2d::<f64>(12);
        let x: Vec<f64> = (0..a.nrows())
            .map(|i| ((i * 7) % 11) as f64 - 5.0)
            .collect();
        let b = a.mul_vec(&x).unwrap();
        (a, b, x)
    }

    fn error(x: &[f64], y: &[f64]) -> f64 {
        let d: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
        norm(&d) / norm(y)
    }

    #[test]
    fn a_krylov_and_an_amg_solve_find_the_known_solution() {
        let (a, b, x) = problem();
        let cpu = CpuBackend::new();
        let plain = solve(&cpu, &a, &b, None, &SolveSpec::default()).unwrap();
        let amg = SolveSpec {
            amg: Some(AmgSpec::default()),
            ..SolveSpec::default()
        };
        let with_amg = solve(&cpu, &a, &b, None, &amg).unwrap();
        for s in [&plain, &with_amg] {
            assert!(s.report.converged, "{:?}", s.report.status);
            assert!(error(s.x.as_ref().unwrap(), &x) < 1e-6);
        }
        assert!(with_amg.report.iterations < plain.report.iterations);
        let summary = with_amg.amg.unwrap();
        assert!(summary.info.levels.len() > 1);
        // Scalar unknowns in an f64 solve: an f32 cycle on every backend.
        assert_eq!(summary.cycle_precision, "f32");
    }

    #[test]
    fn the_preconditioner_the_spec_names_is_the_one_applied() {
        let (a, b, x) = problem();
        let cpu = CpuBackend::new();
        let jacobi = SolveSpec {
            config: SolverConfig {
                precond: Preconditioner::Jacobi,
                ..SolverConfig::default()
            },
            ..SolveSpec::default()
        };
        let s = solve(&cpu, &a, &b, None, &jacobi).unwrap();
        assert_eq!(s.report.preconditioner, "jacobi");
        assert!(s.report.converged);
        assert!(error(s.x.as_ref().unwrap(), &x) < 1e-6);
    }

    #[test]
    fn an_initial_guess_keeps_the_tolerance_relative_to_b() {
        let (a, b, x) = problem();
        let cpu = CpuBackend::new();
        let near: Vec<f64> = x.iter().map(|v| v + 1e-3).collect();
        let from_zero = solve(&cpu, &a, &b, None, &SolveSpec::default()).unwrap();
        let from_near = solve(&cpu, &a, &b, Some(&near), &SolveSpec::default()).unwrap();
        assert!(from_near.report.converged);
        assert!(from_near.report.iterations < from_zero.report.iterations);
        let xs = from_near.x.unwrap();
        let r: Vec<f64> = b
            .iter()
            .zip(a.mul_vec(&xs).unwrap())
            .map(|(b, ax)| b - ax)
            .collect();
        let true_rel = norm(&r) / norm(&b);
        assert!(true_rel <= 1e-8, "{true_rel}");
        let reported = from_near.report.relative_residual;
        assert!((reported - true_rel).abs() <= 1e-3 * true_rel + 1e-15);
        // The exact solution as the guess: nothing to do.
        let exact = solve(&cpu, &a, &b, Some(&x), &SolveSpec::default()).unwrap();
        assert!(error(exact.x.as_ref().unwrap(), &x) < 1e-12);
    }

    #[test]
    fn a_resident_cycle_is_reused_across_solves_and_applications() {
        let (a, b, x) = problem();
        let h = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
        let amg = ResidentAmg::new(AnyBackend::Cpu(CpuBackend::new()), &h, None, None).unwrap();
        assert_eq!(amg.cycle_precision(), ScalarKind::F32);
        let config = SolverConfig::default();
        let once = amg.solve(&h, &b, None, &config, &mut |_, _| {}).unwrap();
        let again = amg.solve(&h, &b, None, &config, &mut |_, _| {}).unwrap();
        assert!(once.report.converged);
        assert_eq!(once.x, again.x);
        assert!(error(once.x.as_ref().unwrap(), &x) < 1e-6);
        let fresh =
            amg_solve::<_, f64, f32>(&CpuBackend::new(), &h, &b, &config, &mut |_, _| {}).unwrap();
        assert_eq!(fresh.report.iterations, once.report.iterations);
        // One cycle on the residual of zero reduces the error of the zero guess.
        let z = amg.apply(&b).unwrap();
        assert!(error(&z, &x) < 1.0, "{}", error(&z, &x));
        assert!(amg.apply(&b[1..]).is_err());
    }

    #[test]
    fn the_cycle_alone_converges_and_reports_its_true_residuals() {
        let (a, b, x) = problem();
        let h = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
        let amg = ResidentAmg::new(AnyBackend::Cpu(CpuBackend::new()), &h, None, None).unwrap();
        let options = gpuq_krylov::KrylovOptions {
            rtol: 1e-8,
            max_iter: Some(200),
            ..gpuq_krylov::KrylovOptions::default()
        };
        let s = amg.iterate(&h, &b, None, &options).unwrap();
        assert!(s.report.converged, "{:?}", s.report.status);
        assert_eq!(s.report.method, "stationary");
        assert_eq!(s.report.residual_history.len(), s.report.iterations + 1);
        assert!(s.report.residual_history.windows(2).all(|w| w[1] < w[0]));
        assert!(error(s.x.as_ref().unwrap(), &x) < 1e-6);
        let capped = gpuq_krylov::KrylovOptions {
            max_iter: Some(2),
            ..options
        };
        let s = amg.iterate(&h, &b, None, &capped).unwrap();
        assert_eq!(s.report.iterations, 2);
        assert_eq!(s.report.status, SolveStatus::MaxIterations);
    }

    #[test]
    fn amg_refuses_a_complex_matrix_and_shapes_are_checked() {
        let a = gpuq_sparse::generators::laplace2d::<gpuq_core::Complex<f64>>(4);
        let b = vec![gpuq_core::Complex::new(1.0, 0.0); a.nrows()];
        let amg = SolveSpec {
            amg: Some(AmgSpec::default()),
            ..SolveSpec::default()
        };
        let e = solve(&CpuBackend::new(), &a, &b, None, &amg).unwrap_err();
        assert!(e.to_string().contains("complex"), "{e}");
        let (a, b, _) = problem();
        let short = &b[1..];
        assert!(solve(&CpuBackend::new(), &a, short, None, &SolveSpec::default()).is_err());
    }
}
