//! One call from a rank's rows and right-hand side to its part of the
//! solution: the distributed twin of `gpuq_krylov::solve_csr`.

use crate::backend::{Dist, DistMatrix};
use crate::comm::Communicator;
use crate::halo::{split_rows, HaloBackend, SplitRows};
use crate::operator::DistOperator;
use crate::partition::RowPartition;
use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar, SolveReport};
use gpuq_krylov::{
    bicgstab, bicgstab_l, cg, gmres, qmr, tfqmr, BlockJacobi2, Jacobi, KrylovOptions, Method,
    Preconditioner, SolverConfig,
};
use gpuq_sparse::{Csr, DeviceMatrix};
use std::time::Instant;

/// Solves A x = b distributed over the ranks of `dist`, from x0 = 0: `rows`
/// are the rows of A that `partition` gives this rank (global column
/// indices), `b` the same rows of the right-hand side. Returns this rank's
/// rows of x and the report (identical on every rank but its timings and
/// stats; `n` is the global size).
///
/// Collective: every rank calls it with the same partition and config. The
/// preconditioners are local by nature: Jacobi from the rank's diagonal,
/// 2x2-block Jacobi from the rank's diagonal blocks (use a partition from
/// [`RowPartition::blocks`] with block 2 so that no block straddles two
/// ranks). QMR builds A^T distributed as well. An unset iteration cap is
/// taken for the global size, so every rank stops together.
///
/// Errors on every rank when any rank's input is wrong (shapes against the
/// partition, non-finite b, a failed preconditioner set-up), and as the
/// method does otherwise.
pub fn solve_rows<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    partition: &RowPartition,
    rows: &Csr<T>,
    b: &[T],
    config: &SolverConfig,
) -> Result<(Vec<T>, SolveReport)> {
    let setup = Instant::now();
    let split = checked_split(dist, partition, rows, b)?;
    let precond: Option<Box<dyn LinearOperator<Dist<B>, T>>> =
        dist.agree(match config.precond {
            Preconditioner::None => Ok(None),
            Preconditioner::Jacobi => {
                Jacobi::new(dist, &split.owned).map(|m| Some(Box::new(m) as Box<_>))
            }
            Preconditioner::Block2 => {
                BlockJacobi2::new(dist, &split.owned).map(|m| Some(Box::new(m) as Box<_>))
            }
        })?;
    solve_split(
        dist,
        (partition, rows, &split),
        b,
        config,
        precond.as_deref(),
        setup,
    )
}

/// [`solve_rows`] with a preconditioner of the caller's (for example a
/// [`crate::DistAmg`]) instead of `config.precond`, which is ignored.
/// Collective; the same errors.
pub fn solve_rows_with_precond<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    partition: &RowPartition,
    rows: &Csr<T>,
    b: &[T],
    config: &SolverConfig,
    precond: Option<&dyn LinearOperator<Dist<B>, T>>,
) -> Result<(Vec<T>, SolveReport)> {
    let setup = Instant::now();
    let split = checked_split(dist, partition, rows, b)?;
    solve_split(dist, (partition, rows, &split), b, config, precond, setup)
}

/// [`solve_rows_with_precond`] with A already distributed: `a`, this
/// rank's part of it (the finest level of a distributed AMG hierarchy,
/// `DistHierarchy::finest_matrix`, say), so the rows are neither split nor
/// uploaded again. QMR, which needs A^T distributed as well, takes
/// [`solve_rows_with_precond`]; here it is an error. Collective; the errors
/// of [`solve_rows`] for b, and A's shape against the partition.
pub fn solve_matrix_with_precond<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    partition: &RowPartition,
    a: DistMatrix<B, T>,
    b: &[T],
    config: &SolverConfig,
    precond: Option<&dyn LinearOperator<Dist<B>, T>>,
) -> Result<(Vec<T>, SolveReport)> {
    let setup = Instant::now();
    let n = partition.rows();
    let checked = check_rhs(dist, partition, b).and_then(|_| {
        if config.method == Method::Qmr {
            return Err(Error::InvalidArgument(
                "QMR needs A^T distributed too: solve from the rows (solve_rows_with_precond)"
                    .into(),
            ));
        }
        let rows = partition.range(dist.comm().rank()).len();
        match a.global_shape() == (n, n) && DeviceMatrix::shape(&a).0 == rows {
            true => Ok(()),
            false => Err(Error::shape(
                "solve_matrix_with_precond (A vs the partition)",
                format!("{n} x {n}, {rows} rows on this rank"),
                format!("{:?}, {} rows", a.global_shape(), DeviceMatrix::shape(&a).0),
            )),
        }
    });
    dist.agree(checked)?;
    let op = DistOperator::from_matrix(dist, a);
    solve_op(dist, (n, &op), b, config, precond, setup)
}

/// Errors unless `b` has the rank's rows and finite values, or the
/// partition does not fit the communicator (this rank's view).
fn check_rhs<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    partition: &RowPartition,
    b: &[T],
) -> Result<()> {
    let comm: &dyn Communicator = dist.comm();
    partition
        .check(partition.rows(), comm.size())
        .and_then(|_| {
            gpuq_core::check_same_len(
                "solve_rows (b vs the rank's rows)",
                partition.range(comm.rank()).len(),
                b.len(),
            )
        })
        .and_then(|_| match b.iter().position(|v| !v.is_finite_value()) {
            Some(k) => Err(Error::NonFinite {
                what: "right-hand side".into(),
                index: partition.range(comm.rank()).start + k,
            }),
            None => Ok(()),
        })
}

/// The rank's rows split, after the checks of [`solve_rows`] (on every rank).
fn checked_split<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    partition: &RowPartition,
    rows: &Csr<T>,
    b: &[T],
) -> Result<SplitRows<T>> {
    let checked =
        check_rhs(dist, partition, b).and_then(|_| split_rows(partition, dist.comm().rank(), rows));
    dist.agree(checked)
}

/// The solve of [`solve_rows`] once its input is checked and split.
fn solve_split<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    (partition, rows, split): (&RowPartition, &Csr<T>, &SplitRows<T>),
    b: &[T],
    config: &SolverConfig,
    m: Option<&dyn LinearOperator<Dist<B>, T>>,
    setup: Instant,
) -> Result<(Vec<T>, SolveReport)> {
    let op = if config.method == Method::Qmr {
        DistOperator::with_transpose(dist, partition, rows, split, config.layout)?
    } else {
        DistOperator::new(dist, partition, split, config.layout)?
    };
    solve_op(dist, (partition.rows(), &op), b, config, m, setup)
}

/// The solve once the operator `op` of global size `n` is made: `setup`
/// started the setup's clock.
fn solve_op<B: HaloBackend, T: Scalar>(
    dist: &Dist<B>,
    (n, op): (usize, &DistOperator<B, T>),
    b: &[T],
    config: &SolverConfig,
    m: Option<&dyn LinearOperator<Dist<B>, T>>,
    setup: Instant,
) -> Result<(Vec<T>, SolveReport)> {
    let opts = KrylovOptions {
        max_iter: Some(config.options.max_iter_for(n)),
        ..config.options.clone()
    };
    let bv = dist.upload(b)?;
    let mut x = dist.zeros::<T>(b.len())?;
    // The solve's clock starts when every rank is ready: a rank that ends
    // its setup early waits here, not inside the solve's first collective.
    dist.settle()?;
    let setup_s = setup.elapsed().as_secs_f64();
    let x0 = &mut x;
    let report = match config.method {
        Method::Cg => cg(dist, op, m, &bv, x0, &opts),
        Method::Bicgstab => bicgstab(dist, op, m, &bv, x0, &opts),
        Method::BicgstabL { l } => bicgstab_l(dist, op, m, &bv, x0, l, &opts),
        Method::Tfqmr => tfqmr(dist, op, m, &bv, x0, &opts),
        Method::Qmr => qmr(dist, op, m, &bv, x0, &opts),
        Method::Gmres { restart } => gmres(dist, op, m, &bv, x0, restart, &opts),
    };
    let mut report = report?;
    report.n = n;
    report.setup_time_s = setup_s;
    report.layout = config.layout.spelling();
    Ok((dist.download(&x)?, report))
}

/// The rows `partition` gives rank `rank` of a matrix every rank holds
/// whole (global column indices kept): the input [`solve_rows`] wants, for
/// tests and for matrices small enough to replicate. O(rows' nnz).
pub fn rows_of<T: Scalar>(a: &Csr<T>, partition: &RowPartition, rank: usize) -> Result<Csr<T>> {
    let range = partition.range(rank);
    if range.end > a.nrows() {
        return Err(Error::shape(
            "rows_of (partition vs matrix rows)",
            a.nrows(),
            partition.rows(),
        ));
    }
    let mut ptr = Vec::with_capacity(range.len() + 1);
    ptr.push(0);
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for i in range.clone() {
        let (c, v) = a.row(i);
        cols.extend_from_slice(c);
        vals.extend_from_slice(v);
        ptr.push(cols.len());
    }
    Csr::try_new_allow_nonfinite(range.len(), a.ncols(), ptr, cols, vals)
}

/// Every rank's part of a vector split by `partition`, concatenated: the
/// whole vector on every rank (collective; each part padded to the largest
/// and sent as f64 pairs, so O(ranks * largest part) values per rank).
pub fn allgather_rows<T: Scalar>(
    comm: &dyn Communicator,
    partition: &RowPartition,
    local: &[T],
) -> Result<Vec<T>> {
    use gpuq_core::RealScalar;
    let size = comm.size();
    partition.check(partition.rows(), size)?;
    gpuq_core::check_same_len(
        "allgather_rows (the rank's part)",
        partition.range(comm.rank()).len(),
        local.len(),
    )?;
    let width = (0..size)
        .map(|r| partition.range(r).len())
        .max()
        .unwrap_or(0);
    let mut flat = vec![0.0; 2 * width];
    for (k, v) in local.iter().enumerate() {
        flat[2 * k] = v.re().to_f64_lossless();
        flat[2 * k + 1] = v.im().to_f64_lossless();
    }
    let all = comm.allgather(&flat)?;
    let mut out = Vec::with_capacity(partition.rows());
    for r in 0..size {
        let part = &all[r * 2 * width..];
        out.extend((0..partition.range(r).len()).map(|k| {
            T::from_parts(
                <T::Real as RealScalar>::of_f64(part[2 * k]),
                <T::Real as RealScalar>::of_f64(part[2 * k + 1]),
            )
        }));
    }
    Ok(out)
}
