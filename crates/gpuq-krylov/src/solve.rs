//! One call from host data to a solution: upload, build the preconditioner, solve, download.

use crate::{
    bicgstab_l_monitored, bicgstab_monitored, cg_monitored, gmres_monitored, qmr_monitored,
    tfqmr_monitored, BicgstabKernels, BicgstablKernels, BlockJacobi2, CgKernels, GmresKernels,
    Jacobi, KrylovOptions, Method, Preconditioner, QmrKernels, TfqmrKernels,
};
use gpuq_core::{Error, LinearOperator, Result, Scalar, SolveReport};
use gpuq_sparse::{Csr, DeviceMatrix, Layout, MatrixOperator, SparseBackend};
use std::time::Instant;

/// A backend every method of this crate runs on: sparse matrices, the fused steps
/// of CG, the steps of BiCGSTAB, TFQMR and QMR with their scalars on the backend,
/// and GMRES's batched Gram-Schmidt. Implemented for every backend that has
/// those.
pub trait KrylovBackend:
    SparseBackend
    + CgKernels
    + BicgstabKernels
    + BicgstablKernels
    + GmresKernels
    + QmrKernels
    + TfqmrKernels
{
}

impl<B> KrylovBackend for B where
    B: SparseBackend
        + CgKernels
        + BicgstabKernels
        + BicgstablKernels
        + GmresKernels
        + QmrKernels
        + TfqmrKernels
{
}

/// Everything [`solve_csr`] needs besides the data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolverConfig {
    /// The Krylov method.
    pub method: Method,
    /// The preconditioner.
    pub precond: Preconditioner,
    /// Stopping rules.
    pub options: KrylovOptions,
    /// How the backend stores the matrix.
    pub layout: Layout,
}

impl SolverConfig {
    /// An estimate of the bytes a solve of `n` unknowns and `nnz` non-zeros of
    /// `scalar_bytes`-byte scalars holds on the backend: the matrix in CSR form
    /// (twice for QMR, which keeps A^T; SELL's padding is not counted), b, x, the
    /// method's work vectors, the preconditioner's and the residual replacement's
    /// copy. What [`solve_csr`] checks against a device's free memory. O(1).
    pub fn work_bytes(&self, n: usize, nnz: usize, scalar_bytes: usize) -> u64 {
        let matrix = (nnz * (scalar_bytes + 4) + (n + 1) * 4) as u64;
        let matrices = if self.method == Method::Qmr { 2 } else { 1 };
        let vectors =
            3 + match self.method {
                Method::Cg => 5,
                Method::Bicgstab => 9,
                Method::BicgstabL { l } => 2 * l + 6,
                Method::Tfqmr => 11,
                Method::Qmr => 13,
                Method::Gmres { restart } => restart + 6,
            } + match self.precond {
                Preconditioner::None => 0,
                Preconditioner::Jacobi => 1,
                Preconditioner::Block2 => 2,
            };
        matrices * matrix + (vectors * n * scalar_bytes) as u64
    }
}

/// Solves A x = b for host data on `backend`: uploads A (in `config.layout`) and b,
/// builds the preconditioner, runs the method from x0 = 0 and downloads x.
///
/// Errors on non-finite entries of b (naming the index), shape mismatches, a
/// problem larger than a device's free memory (before anything is allocated; see
/// [`SolverConfig::work_bytes`]), a failed preconditioner setup and breakdown. Non-convergence is `Ok` with
/// `report.converged == false`. `report.time_s` covers the solve only; `report.setup_time_s`
/// the upload and preconditioner construction, O(nnz).
pub fn solve_csr<B, T>(
    backend: &B,
    a: &Csr<T>,
    b: &[T],
    config: &SolverConfig,
) -> Result<(Vec<T>, SolveReport)>
where
    B: KrylovBackend,
    T: Scalar,
{
    solve_csr_monitored(backend, a, b, config, &mut |_, _| {})
}

/// [`solve_csr`] with a per-iteration monitor `(iteration, relative residual)`.
pub fn solve_csr_monitored<B, T>(
    backend: &B,
    a: &Csr<T>,
    b: &[T],
    config: &SolverConfig,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<(Vec<T>, SolveReport)>
where
    B: KrylovBackend,
    T: Scalar,
{
    solve_csr_inner(backend, Source::Host(a), b, config, None, monitor)
}

/// [`solve_csr_monitored`] with a preconditioner the caller built (an AMG
/// hierarchy, say) in place of `config.precond`: `precond` is applied as given
/// (`None`: no preconditioning). Its construction is not part of
/// `report.setup_time_s`, which covers the uploads only.
pub fn solve_csr_with_precond<B, T>(
    backend: &B,
    a: &Csr<T>,
    b: &[T],
    config: &SolverConfig,
    precond: Option<&dyn LinearOperator<B, T>>,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<(Vec<T>, SolveReport)>
where
    B: KrylovBackend,
    T: Scalar,
{
    solve_csr_inner(backend, Source::Host(a), b, config, Some(precond), monitor)
}

/// [`solve_csr_with_precond`] with A already on the backend (`a`, in the
/// layout it was made in, for example the finest matrix an AMG setup left on
/// the device and the cycle converted there): no upload of A. Every method
/// but QMR, which needs A^T from the host matrix (an error here).
pub fn solve_resident_with_precond<B, T>(
    backend: &B,
    a: B::Matrix<T>,
    b: &[T],
    config: &SolverConfig,
    precond: Option<&dyn LinearOperator<B, T>>,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<(Vec<T>, SolveReport)>
where
    B: KrylovBackend,
    T: Scalar,
{
    if config.method == Method::Qmr {
        return Err(Error::Precondition {
            method: "qmr",
            reason: "QMR needs A^T, made from the host matrix: use solve_csr_with_precond".into(),
        });
    }
    solve_csr_inner(
        backend,
        Source::Resident(a),
        b,
        config,
        Some(precond),
        monitor,
    )
}

/// Where the solve's matrix comes from.
enum Source<'a, B: KrylovBackend, T: Scalar> {
    /// A host matrix, uploaded in the configured layout.
    Host(&'a Csr<T>),
    /// A matrix already on the backend.
    Resident(B::Matrix<T>),
}

/// The solve, with `prebuilt` (when `Some`) replacing `config.precond`.
fn solve_csr_inner<B, T>(
    backend: &B,
    a: Source<'_, B, T>,
    b: &[T],
    config: &SolverConfig,
    prebuilt: Option<Option<&dyn LinearOperator<B, T>>>,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<(Vec<T>, SolveReport)>
where
    B: KrylovBackend,
    T: Scalar,
{
    if let Some(index) = b.iter().position(|v| !v.is_finite_value()) {
        return Err(Error::NonFinite {
            what: "right-hand side".into(),
            index,
        });
    }
    let ((nrows, ncols), nnz) = match &a {
        Source::Host(a) => (a.shape(), a.nnz()),
        Source::Resident(m) => (m.shape(), m.nnz()),
    };
    if nrows != ncols {
        return Err(Error::Precondition {
            method: "solve",
            reason: format!("matrix is {nrows} x {ncols}, not square"),
        });
    }
    gpuq_core::check_same_len("solve (b vs matrix rows)", nrows, b.len())?;
    // a resident matrix is already allocated: only the vectors are to come
    let to_allocate = match &a {
        Source::Host(_) => nnz,
        Source::Resident(_) => 0,
    };
    backend.check_fits(
        &format!(
            "this solve ({nrows} unknowns, {nnz} non-zeros, {})",
            T::KIND.name()
        ),
        config.work_bytes(nrows, to_allocate, std::mem::size_of::<T>()),
    )?;
    let setup = Instant::now();
    let (op, host) = match a {
        Source::Host(a) if config.method == Method::Qmr => (
            MatrixOperator::with_transpose(backend, a, config.layout)?,
            Some(a),
        ),
        Source::Host(a) => (MatrixOperator::new(backend, a, config.layout)?, Some(a)),
        Source::Resident(m) => (MatrixOperator::from_resident(backend, m), None),
    };
    let precond: Option<Box<dyn LinearOperator<B, T>>> = match (prebuilt, config.precond, host) {
        (Some(_), _, _) | (None, Preconditioner::None, _) => None,
        (None, Preconditioner::Jacobi, Some(a)) => Some(Box::new(Jacobi::new(backend, a)?)),
        (None, Preconditioner::Block2, Some(a)) => Some(Box::new(BlockJacobi2::new(backend, a)?)),
        (None, _, None) => {
            return Err(Error::InvalidArgument(
                "a resident matrix needs the caller's preconditioner".into(),
            ))
        }
    };
    let bv = backend.upload(b)?;
    let mut x = backend.zeros::<T>(ncols)?;
    let setup_s = setup.elapsed().as_secs_f64();
    let m = prebuilt.unwrap_or(precond.as_deref());
    let (x0, opts) = (&mut x, &config.options);
    let report = match config.method {
        Method::Cg => cg_monitored(backend, &op, m, &bv, x0, opts, monitor),
        Method::Bicgstab => bicgstab_monitored(backend, &op, m, &bv, x0, opts, monitor),
        Method::BicgstabL { l } => bicgstab_l_monitored(backend, &op, m, &bv, x0, l, opts, monitor),
        Method::Tfqmr => tfqmr_monitored(backend, &op, m, &bv, x0, opts, monitor),
        Method::Qmr => qmr_monitored(backend, &op, m, &bv, x0, opts, monitor),
        Method::Gmres { restart } => {
            gmres_monitored(backend, &op, m, &bv, x0, restart, opts, monitor)
        }
    };
    // The setup time and the layout in every report, a breakdown's too
    let finish = |report: &mut SolveReport| {
        report.setup_time_s = setup_s;
        report.layout = config.layout.spelling();
    };
    let mut report = report.map_err(|e| match e {
        Error::Breakdown {
            method,
            quantity,
            iteration,
            mut report,
        } => {
            finish(&mut report);
            Error::Breakdown {
                method,
                quantity,
                iteration,
                report,
            }
        }
        other => other,
    })?;
    finish(&mut report);
    Ok((backend.download(&x)?, report))
}
