//! [`Dist`]: a local backend on every rank plus a communicator, seen as one
//! backend whose vectors are split by rows across the ranks.

use crate::comm::Communicator;
use crate::device_comm::{sum_over_ranks, DeviceComm};
use crate::halo::{split_rows, HaloBackend, HaloPlan, SplitRows};
use crate::partition::RowPartition;
use gpuq_core::{Backend, Error, FusedDot, RealScalar, Result, Scalar, Stats};
use gpuq_sparse::{Csr, DeviceMatrix, Layout, SparseBackend};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Time and traffic of a [`Dist`]'s communication since its last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommStats {
    /// Halo exchanges (one per distributed SpMV with neighbours).
    pub halo_exchanges: u64,
    /// Bytes this rank sent and received in halo exchanges.
    pub halo_bytes: u64,
    /// Seconds in halo exchanges, less the time the owned-block SpMV took to
    /// enqueue (on an asynchronous backend its kernel may still run during
    /// the exchange's waits, and that part is counted here). Host time: the
    /// replays of a recorded iteration (`gpuq_krylov::Replay::
    /// replay_device_work`) cost the host nothing here, and only the
    /// recording's exchanges are timed (their counts and bytes are counted
    /// at every replay).
    pub halo_s: f64,
    /// Collectives (allreduces of dot products and norms, and the like).
    pub collectives: u64,
    /// Seconds in collectives (host time, as `halo_s`).
    pub collective_s: f64,
}

/// The counters behind [`CommStats`], shared by the clones of a [`Dist`].
#[derive(Debug, Default)]
struct Counters {
    halo_exchanges: AtomicU64,
    halo_bytes: AtomicU64,
    halo_ns: AtomicU64,
    collectives: AtomicU64,
    collective_ns: AtomicU64,
}

/// A distributed backend: on every rank, the local backend `B` holds the
/// rank's rows of every vector (its owned part) and matrix; operations that
/// need other ranks' data go through the communicator.
///
/// * BLAS-1 updates are local (no communication).
/// * `dotc`, `dotu` and `nrm2` are the local backend's deterministic partial,
///   then one [`Communicator::allreduce_sum`] (gathered in rank order, summed
///   in a fixed order): the same rank count and input give the same bits on
///   every rank and every run. With one rank they are the local backend's bits.
/// * SpMV on a [`DistMatrix`] built by [`DistMatrix::new`] is the halo
///   exchange overlapped with the owned block's SpMV, then the ghost block's.
///   [`SparseBackend::upload_matrix`] uploads a matrix local to the rank (no
///   exchange: a block-diagonal operator such as a block-Jacobi inverse).
/// * `upload`, `download` and `zeros` act on the rank's part, so a method's
///   small scalar arrays are replicated: every rank computes the same values.
///
/// Every Krylov method of `gpuq-krylov` runs on it through the kernel traits'
/// defaults, with CG's, BiCGSTAB's and GMRES's reductions split into the local
/// backend's fused kernel and one collective (see the crate docs). Every rank
/// must run the same sequence of operations.
pub struct Dist<B: HaloBackend> {
    local: B,
    /// How the local backend's vectors travel between ranks, taken from it
    /// when this backend was made.
    transport: B::Transport,
    comm: Arc<dyn Communicator>,
    counters: Arc<Counters>,
    /// The least look-ahead the methods see ([`Dist::with_look_ahead`]).
    look_ahead: usize,
}

impl<B: HaloBackend> Clone for Dist<B> {
    fn clone(&self) -> Self {
        Dist {
            local: self.local.clone(),
            transport: self.transport.clone(),
            comm: self.comm.clone(),
            counters: self.counters.clone(),
            look_ahead: self.look_ahead,
        }
    }
}

impl<B: HaloBackend> Dist<B> {
    /// The distributed backend of this rank: `local` for its data, `comm` to
    /// reach the others, and the local backend's transport as it stands now
    /// ([`HaloBackend::transport`]: attach NCCL to a GPU before, as
    /// `gpuq_dist::launch` does).
    pub fn new(local: B, comm: Arc<dyn Communicator>) -> Self {
        Dist {
            transport: local.transport(),
            local,
            comm,
            counters: Arc::default(),
            look_ahead: 0,
        }
    }

    /// This backend with a look-ahead of at least `n` iterations
    /// (`gpuq_krylov::Replay::look_ahead`): the Krylov methods then keep
    /// their scalars on the backend and read each iteration's snapshot while
    /// the next one is queued even where the local backend runs every step
    /// at once (CPU ranks), which is the path GPU ranks take (CG with any
    /// preconditioner included). The same iterates up to rounding; on CPU
    /// ranks one iteration runs past the stop. For checking the GPU ranks'
    /// path on CPU ranks.
    pub fn with_look_ahead(mut self, n: usize) -> Self {
        self.look_ahead = n;
        self
    }

    /// The local backend.
    pub fn local(&self) -> &B {
        &self.local
    }

    /// The least look-ahead set by [`Dist::with_look_ahead`] (0 by default).
    pub(crate) fn min_look_ahead(&self) -> usize {
        self.look_ahead
    }

    /// The communicator.
    pub fn comm(&self) -> &dyn Communicator {
        &*self.comm
    }

    /// The transport of halos, fused reductions and row gathers.
    pub fn transport(&self) -> &B::Transport {
        &self.transport
    }

    /// How halos and fused reductions travel ([`DeviceComm::kind`]): `nccl`
    /// between the devices, else `mpi` (the communicator on the host;
    /// threads for a [`crate::ThreadComm`]).
    pub fn comm_kind(&self) -> &'static str {
        self.transport.kind()
    }

    /// Communication time and traffic since creation or the last
    /// [`Backend::reset_stats`].
    pub fn comm_stats(&self) -> CommStats {
        let c = &self.counters;
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
        CommStats {
            halo_exchanges: c.halo_exchanges.load(Ordering::Relaxed),
            halo_bytes: c.halo_bytes.load(Ordering::Relaxed),
            halo_s: secs(&c.halo_ns),
            collectives: c.collectives.load(Ordering::Relaxed),
            collective_s: secs(&c.collective_ns),
        }
    }

    /// The counts of [`CommStats`]: halo exchanges, halo bytes, collectives.
    pub(crate) fn counts(&self) -> [u64; 3] {
        let c = &self.counters;
        [&c.halo_exchanges, &c.halo_bytes, &c.collectives].map(|a| a.load(Ordering::Relaxed))
    }

    /// Adds `counts` ([`Dist::counts`]'s order) to the counters: the
    /// exchanges and collectives of a replayed recording.
    pub(crate) fn add_counts(&self, counts: &[u64; 3]) {
        let c = &self.counters;
        for (a, &n) in [&c.halo_exchanges, &c.halo_bytes, &c.collectives]
            .iter()
            .zip(counts)
        {
            a.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// [`Communicator::allreduce_sum`], timed and counted.
    pub fn allreduce(&self, local: &[f64]) -> Result<Vec<f64>> {
        self.timed_collective(|| self.comm.allreduce_sum(local))
    }

    /// The sums over ranks of scalar partials (each as its real and imaginary
    /// part, summed in f64), in one collective (timed and counted).
    pub fn sum_scalars<T: Scalar>(&self, partials: &[T]) -> Result<Vec<T>> {
        self.timed_collective(|| sum_over_ranks(self.comm(), partials))
    }

    /// Sums the slots `slots` of a replicated scalar array over ranks, where
    /// a local kernel left this rank's partials, through the transport
    /// ([`DeviceComm::sum_slots`]: NCCL's all-gather and a summing kernel
    /// with no host round trip, or one download, one collective and one
    /// overwrite of `sc`); the same bits either way. Timed and counted as a
    /// collective.
    pub fn sum_slots<T: Scalar>(&self, sc: &mut B::Vector<T>, slots: &[usize]) -> Result<()> {
        self.timed_collective(|| {
            self.transport
                .sum_slots(&self.local, self.comm(), sc, slots)
        })
    }

    /// `whole` = every rank's `mine` (`counts[r]` values from rank r) in
    /// rank order, through the transport ([`DeviceComm::allgather_rows`]).
    /// Collective; timed and counted as one.
    pub fn allgather_rows_into<T: Scalar>(
        &self,
        counts: &[usize],
        mine: &B::Vector<T>,
        whole: &mut B::Vector<T>,
    ) -> Result<()> {
        self.timed_collective(|| {
            self.transport
                .allgather_rows(&self.local, self.comm(), counts, mine, whole)
        })
    }

    /// `f`, one collective: counted, its time added to the collectives'.
    fn timed_collective<X>(&self, f: impl FnOnce() -> Result<X>) -> Result<X> {
        let t = Instant::now();
        let out = f();
        self.counters.collectives.fetch_add(1, Ordering::Relaxed);
        add_ns(&self.counters.collective_ns, t);
        out
    }

    /// Waits for this rank's queued device work, then for every rank (a
    /// barrier): what a timed phase calls before it starts, so that its clock
    /// starts when the slowest rank is ready (the wait counts to the phase
    /// before). Collective.
    pub fn settle(&self) -> Result<()> {
        self.local.synchronize()?;
        self.comm.barrier()
    }

    /// [`crate::agree`] over this backend's communicator.
    pub fn agree<X>(&self, local: Result<X>) -> Result<X> {
        crate::comm::agree(self.comm(), local)
    }

    /// Every rank's flag, in rank order.
    fn allreduce_flags(&self, flag: bool) -> Result<Vec<bool>> {
        let all = self.comm.allgather(&[f64::from(u8::from(flag))])?;
        Ok(all.into_iter().map(|f| f != 0.0).collect())
    }
}

/// Adds the nanoseconds since `t` to `counter`.
fn add_ns(counter: &AtomicU64, t: Instant) {
    counter.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

impl<B: HaloBackend> Backend for Dist<B> {
    type Vector<T: Scalar> = B::Vector<T>;

    fn name(&self) -> String {
        format!("dist{}:{}", self.comm.size(), self.local.name())
    }

    fn upload<T: Scalar>(&self, host: &[T]) -> Result<Self::Vector<T>> {
        self.local.upload(host)
    }

    fn download<T: Scalar>(&self, v: &Self::Vector<T>) -> Result<Vec<T>> {
        self.local.download(v)
    }

    fn zeros<T: Scalar>(&self, n: usize) -> Result<Self::Vector<T>> {
        self.local.zeros(n)
    }

    fn fill<T: Scalar>(&self, x: &mut Self::Vector<T>, value: T) -> Result<()> {
        self.local.fill(x, value)
    }

    fn copy<T: Scalar>(&self, x: &Self::Vector<T>, y: &mut Self::Vector<T>) -> Result<()> {
        self.local.copy(x, y)
    }

    fn scal<T: Scalar>(&self, alpha: T, x: &mut Self::Vector<T>) -> Result<()> {
        self.local.scal(alpha, x)
    }

    fn axpy<T: Scalar>(
        &self,
        alpha: T,
        x: &Self::Vector<T>,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.local.axpy(alpha, x, y)
    }

    fn axpby<T: Scalar>(
        &self,
        alpha: T,
        x: &Self::Vector<T>,
        beta: T,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.local.axpby(alpha, x, beta, y)
    }

    fn mul_elementwise<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        y: &Self::Vector<T>,
        z: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.local.mul_elementwise(x, y, z)
    }

    fn dotc<T: Scalar>(&self, x: &Self::Vector<T>, y: &Self::Vector<T>) -> Result<T> {
        let local = self.local.dotc(x, y)?;
        Ok(self.sum_scalars(&[local])?[0])
    }

    fn dotu<T: Scalar>(&self, x: &Self::Vector<T>, y: &Self::Vector<T>) -> Result<T> {
        let local = self.local.dotu(x, y)?;
        Ok(self.sum_scalars(&[local])?[0])
    }

    /// The local norms gathered in rank order and combined as m sqrt(sum_r
    /// (n_r / m)^2), m the largest (no overflow; with one rank, the local
    /// norm's bits).
    fn nrm2<T: Scalar>(&self, x: &Self::Vector<T>) -> Result<T::Real> {
        let local = self.local.nrm2(x)?.to_f64_lossless();
        let t = Instant::now();
        let norms = self.comm.allgather(&[local]);
        self.counters.collectives.fetch_add(1, Ordering::Relaxed);
        add_ns(&self.counters.collective_ns, t);
        Ok(T::Real::of_f64(combine_norms(&norms?)))
    }

    fn stats(&self) -> Stats {
        self.local.stats()
    }

    fn reset_stats(&self) {
        self.local.reset_stats();
        let c = &self.counters;
        for a in [
            &c.halo_exchanges,
            &c.halo_bytes,
            &c.halo_ns,
            &c.collectives,
            &c.collective_ns,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// sqrt(sum n_r^2) of per-rank norms, scaled by the largest (exact for one
/// rank; NaN or infinity propagate).
fn combine_norms(norms: &[f64]) -> f64 {
    let m = norms
        .iter()
        .fold(0.0f64, |a, &b| if b > a || b.is_nan() { b } else { a });
    if m == 0.0 || !m.is_finite() {
        return m;
    }
    let scaled: Vec<f64> = norms.iter().map(|&n| (n / m) * (n / m)).collect();
    m * crate::comm::ordered_sum(&scaled).sqrt()
}

/// A matrix of a [`Dist`] backend: the rank's rows, as the block on its own
/// columns and, for a matrix built by [`DistMatrix::new`], the block on ghost
/// columns with the halo plan that fills them.
pub struct DistMatrix<B: HaloBackend, T: Scalar> {
    owned: B::Matrix<T>,
    ghost: Option<Ghosts<B, T>>,
    global: (usize, usize),
    /// For an AMG level's A smoothed by point Jacobi: what its one-pass
    /// sweep needs ([`DistMatrix::with_point_sweep`]).
    sweep: Option<PointSweep<B, T>>,
}

/// The data of the one-pass Jacobi sweep of an AMG level whose D^-1 is a
/// point diagonal d (the damping folded in): x_new = x + d o (b - A_owned
/// x) minus (d o A_ghost) x_ghost, the first term the local backend's fused
/// sweep over the owned block while the halo travels, the second this block.
pub(crate) struct PointSweep<B: HaloBackend, T: Scalar> {
    /// d o A_ghost.
    pub(crate) ghost: GhostBlock<B, T>,
    /// The scratch of a local sweep that is not fused
    /// ([`gpuq_amg::AmgKernels::amg_jacobi_into`]'s `tmp`).
    pub(crate) tmp: Mutex<B::Vector<T>>,
}

/// A block on a [`DistMatrix`]'s ghost columns other than its own (its
/// rows scaled, say), for [`Dist::split_apply_ghost`]: uploaded in CSR with
/// the row ranges that hold its non-empty rows.
pub(crate) struct GhostBlock<B: HaloBackend, T: Scalar> {
    matrix: B::Matrix<T>,
    runs: Vec<std::ops::Range<usize>>,
}

impl<B: HaloBackend, T: Scalar> GhostBlock<B, T> {
    /// Uploads `block` (rows: the rank's; columns: a matrix's ghost columns)
    /// to the rank's backend. O(nnz) transfer.
    pub(crate) fn upload(local: &B, block: &Csr<T>) -> Result<Self> {
        Ok(GhostBlock {
            matrix: local.upload_matrix(block, Layout::Csr)?,
            runs: crate::halo::ghost_row_runs(block),
        })
    }
}

/// The ghost side of a [`DistMatrix`].
struct Ghosts<B: HaloBackend, T: Scalar> {
    matrix: B::Matrix<T>,
    /// The row ranges holding the block's non-empty rows
    /// ([`crate::halo::ghost_row_runs`]).
    runs: Vec<std::ops::Range<usize>>,
    plan: HaloPlan,
    /// The ghost values of the latest exchange.
    values: Mutex<B::Vector<T>>,
    /// The transport's data for the exchange ([`DeviceComm::prepare_halo`]).
    halo: <B::Transport as DeviceComm<B>>::Halo,
}

impl<B: HaloBackend, T: Scalar> DistMatrix<B, T> {
    /// Distributes a square matrix: `rows` are the rows `partition` gives this
    /// rank, with global column indices. Splits them into the owned block
    /// (uploaded in `layout`) and the ghost block (CSR), and builds the halo
    /// plan. Collective. Errors (on every rank, through [`Dist::agree`]) when
    /// the partition does not have one block per rank, differs between ranks,
    /// or does not match `rows`.
    pub fn new(
        dist: &Dist<B>,
        partition: &RowPartition,
        rows: &Csr<T>,
        layout: Layout,
    ) -> Result<Self> {
        let checked = partition
            .check(partition.rows(), dist.comm().size())
            .and_then(|_| split_rows(partition, dist.comm().rank(), rows));
        let split = dist.agree(checked)?;
        Self::from_split(dist, partition, &split, layout)
    }

    /// [`DistMatrix::new`] from rows already split by
    /// [`crate::halo::split_rows`] (whose owned block a caller may also need,
    /// for a preconditioner). Collective; the same errors.
    pub fn from_split(
        dist: &Dist<B>,
        partition: &RowPartition,
        split: &SplitRows<T>,
        layout: Layout,
    ) -> Result<Self> {
        Self::from_split_rect(dist, partition, partition, split, layout)
    }

    /// A rectangular matrix (an AMG prolongator or restriction): the rows
    /// `rows` gives this rank, split by [`crate::split_columns`] along the
    /// column partition `columns` (the partition of the vectors it
    /// multiplies); the halo plan brings in the ghost columns' values.
    /// Collective. Errors (on every rank) when either partition does not have
    /// one block per rank or differs between ranks, or the split does not
    /// match them.
    pub fn from_split_rect(
        dist: &Dist<B>,
        rows: &RowPartition,
        columns: &RowPartition,
        split: &SplitRows<T>,
        layout: Layout,
    ) -> Result<Self> {
        let owned = dist.agree(dist.local().upload_matrix(&split.owned, layout))?;
        Self::from_parts(
            dist,
            (rows, columns),
            owned,
            (&split.ghost, &split.ghost_cols),
        )
    }

    /// [`DistMatrix::from_split_rect`] with the owned block already on the
    /// rank's backend (made there as the caller chose: an AMG cycle converts
    /// and lays it out on the device) and the ghost block `ghost` with its
    /// global columns `ghost_cols`. Collective; the same errors.
    pub fn from_parts(
        dist: &Dist<B>,
        partitions: (&RowPartition, &RowPartition),
        owned: B::Matrix<T>,
        (ghost, ghost_cols): (&Csr<T>, &[usize]),
    ) -> Result<Self> {
        let made = dist.local().upload_matrix(ghost, Layout::Csr);
        let ghost_block = (
            dist.agree(made)?,
            crate::halo::ghost_row_runs(ghost),
            ghost_cols,
        );
        Self::from_made_parts(dist, partitions, owned, ghost_block)
    }

    /// [`DistMatrix::from_parts`] with the ghost block too already made on the
    /// rank's backend (CSR), `runs` its non-empty rows
    /// ([`crate::halo::ghost_row_runs`]). Collective; the same errors.
    pub(crate) fn from_made_parts(
        dist: &Dist<B>,
        (rows, columns): (&RowPartition, &RowPartition),
        owned: B::Matrix<T>,
        (matrix, runs, ghost_cols): (B::Matrix<T>, Vec<std::ops::Range<usize>>, &[usize]),
    ) -> Result<Self> {
        let comm = dist.comm();
        let (nrows, ncols) = owned.shape();
        let ghost = matrix.shape();
        dist.agree(
            rows.check(rows.rows(), comm.size())
                .and_then(|_| columns.check(columns.rows(), comm.size()))
                .and_then(|_| {
                    gpuq_core::check_same_len(
                        "DistMatrix (split rows vs partition)",
                        rows.range(comm.rank()).len(),
                        nrows,
                    )
                })
                .and_then(|_| {
                    gpuq_core::check_same_len(
                        "DistMatrix (split columns vs partition)",
                        columns.range(comm.rank()).len(),
                        ncols,
                    )
                })
                .and_then(|_| {
                    gpuq_core::check_same_len(
                        "DistMatrix (ghost block vs owned rows)",
                        nrows,
                        ghost.0,
                    )
                })
                .and_then(|_| {
                    gpuq_core::check_same_len(
                        "DistMatrix (ghost columns)",
                        ghost_cols.len(),
                        ghost.1,
                    )
                }),
        )?;
        // The same partitions on every rank.
        let starts: Vec<f64> = rows
            .starts()
            .iter()
            .chain(columns.starts())
            .map(|&s| s as f64)
            .collect();
        let all = comm.allgather(&starts)?;
        let same = all.chunks_exact(starts.len()).all(|c| c == starts);
        dist.agree(if same {
            Ok(())
        } else {
            Err(Error::InvalidArgument(
                "the ranks were given different partitions".into(),
            ))
        })?;
        let plan = HaloPlan::build(comm, columns, ghost_cols)?;
        let local = dist.local();
        let values = dist.agree(local.zeros(plan.ghosts()))?;
        let halo = dist.agree(dist.transport.prepare_halo(local, &plan))?;
        // Every rank exchanges the same way, or none could pair its messages.
        let between = dist.transport.between_devices();
        let flags = comm.allgather(&[f64::from(u8::from(between))])?;
        if flags.iter().any(|&f| (f != 0.0) != between) {
            return Err(Error::InvalidArgument(
                "some ranks exchange halos between GPUs (NCCL) and others through MPI".into(),
            ));
        }
        Ok(DistMatrix {
            owned,
            ghost: Some(Ghosts {
                matrix,
                runs,
                plan,
                values: Mutex::new(values),
                halo,
            }),
            global: (rows.rows(), columns.rows()),
            sweep: None,
        })
    }

    /// This matrix as an AMG level's A whose point-Jacobi sweeps run in one
    /// pass: its ghost block with row i scaled by d_i, d the sweeps' point
    /// diagonal omega D^-1 (the `diag` that [`gpuq_amg::AmgKernels::amg_jacobi`]
    /// is then given for it), made by the local backend from its ghost block
    /// where it does ([`HaloBackend::scaled_rows`]: no copy through the
    /// host: a copy of the block's arrays there), else `host_scaled()`
    /// uploaded. Allocates one vector of the rank's rows besides. Errors
    /// when the block does not fit.
    pub(crate) fn with_point_sweep(
        mut self,
        local: &B,
        d: &B::Vector<T>,
        host_scaled: impl FnOnce() -> Result<Csr<T>>,
    ) -> Result<Self> {
        let rows = self.owned.shape().0;
        gpuq_core::check_same_len(
            "a point sweep's diagonal",
            rows,
            gpuq_core::DeviceVector::len(d),
        )?;
        let made = match &self.ghost {
            Some(g) => local.scaled_rows(&g.matrix, d)?.map(|matrix| GhostBlock {
                matrix,
                runs: g.runs.clone(),
            }),
            None => None,
        };
        let ghost = match made {
            Some(made) => made,
            None => {
                let scaled_ghost = host_scaled()?;
                let ghost_cols = self.ghost.as_ref().map_or(0, |g| g.matrix.shape().1);
                if scaled_ghost.shape() != (rows, ghost_cols) {
                    return Err(Error::InvalidArgument(format!(
                        "a point sweep's ghost block of shape {:?} does not fit a matrix of {rows} rows and {ghost_cols} ghost columns",
                        scaled_ghost.shape(),
                    )));
                }
                GhostBlock::upload(local, &scaled_ghost)?
            }
        };
        self.sweep = Some(PointSweep {
            ghost,
            tmp: Mutex::new(local.zeros(rows)?),
        });
        Ok(self)
    }

    /// The one-pass sweep's data, where [`DistMatrix::with_point_sweep`]
    /// gave it.
    pub(crate) fn point_sweep(&self) -> Option<&PointSweep<B, T>> {
        self.sweep.as_ref()
    }

    /// `owned` (of shape `shape`) as a matrix local to the rank: no ghost
    /// block, no exchange. O(1).
    pub(crate) fn local(owned: B::Matrix<T>, shape: (usize, usize)) -> Self {
        DistMatrix {
            owned,
            ghost: None,
            global: shape,
            sweep: None,
        }
    }

    /// The halo plan (`None` for a matrix local to the rank).
    pub fn plan(&self) -> Option<&HaloPlan> {
        self.ghost.as_ref().map(|g| &g.plan)
    }

    /// The global shape (the local one for a matrix local to the rank).
    pub fn global_shape(&self) -> (usize, usize) {
        self.global
    }
}

impl<B: HaloBackend, T: Scalar> DeviceMatrix for DistMatrix<B, T> {
    /// The rank's block: (its rows, its rows), as the solvers check it against
    /// the rank's vectors.
    fn shape(&self) -> (usize, usize) {
        self.owned.shape()
    }

    fn nnz(&self) -> usize {
        self.owned.nnz() + self.ghost.as_ref().map_or(0, |g| g.matrix.nnz())
    }

    fn layout(&self) -> Layout {
        self.owned.layout()
    }
}

impl<B: HaloBackend> SparseBackend for Dist<B> {
    type Matrix<T: Scalar> = DistMatrix<B, T>;

    /// Uploads `a` as a matrix local to the rank (its rows and columns are the
    /// rank's own; no exchange). Use [`DistMatrix::new`] for a matrix with
    /// couplings between ranks.
    fn upload_matrix<T: Scalar>(&self, a: &Csr<T>, layout: Layout) -> Result<Self::Matrix<T>> {
        Ok(DistMatrix::local(
            self.local.upload_matrix(a, layout)?,
            a.shape(),
        ))
    }

    /// y = alpha A x + beta y: the halo exchange overlapped with the owned
    /// block's SpMV, then y += alpha A_ghost x_ghost.
    fn spmv<T: Scalar>(
        &self,
        alpha: T,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        beta: T,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.split_apply(a, x, alpha, y, &mut |owned, y| {
            self.local.spmv(alpha, owned, x, beta, y)
        })
    }

    /// y = A x and x^H y: where this rank has no ghosts, the local backend's
    /// fused SpMV and dot product (overlapped with the exchange the other
    /// ranks need), otherwise the SpMV then a local dot product; then one
    /// allreduce. With one rank, the local backend's bits.
    fn spmv_dotc<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        y: &mut Self::Vector<T>,
    ) -> Result<T> {
        let mut fused = None;
        match &a.ghost {
            None => fused = Some(self.local.spmv_dotc(&a.owned, x, y)?),
            Some(g) if g.plan.ghosts() == 0 => {
                self.exchange(g, x, &mut || {
                    fused = Some(self.local.spmv_dotc(&a.owned, x, y)?);
                    Ok(())
                })?;
            }
            Some(_) => self.spmv(T::one(), a, x, T::zero(), y)?,
        }
        let partial = match fused {
            Some(d) => d,
            None => self.local.dotc(x, y)?,
        };
        Ok(self.sum_scalars(&[partial])?[0])
    }

    /// y = A x and, where every rank's local backend fuses it, `sc[slot] =
    /// w^H y` summed over ranks (then `true` on every rank: the ranks agree
    /// in one collective of flags on the host): the owned block's product
    /// with its dot fused while the halo travels, then the ghost block's
    /// product with the dot of its share ([`HaloBackend::ghost_add`]);
    /// otherwise y only and `false` on every rank.
    fn spmv_dot<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        y: &mut Self::Vector<T>,
        dot: FusedDot<'_, Self, T>,
    ) -> Result<bool> {
        let FusedDot { w, sc, slot } = dot;
        let fused = match &a.ghost {
            None => self
                .local
                .spmv_dot(&a.owned, x, y, FusedDot { w, sc, slot })?,
            Some(g) => {
                let mut fused = false;
                self.exchange(g, x, &mut || {
                    let dot = FusedDot {
                        w,
                        sc: &mut *sc,
                        slot,
                    };
                    fused = self.local.spmv_dot(&a.owned, x, y, dot)?;
                    Ok(())
                })?;
                if g.plan.ghosts() > 0 {
                    let ghosts_fused = fused && {
                        let values = g.values.lock().unwrap_or_else(|e| e.into_inner());
                        let dot = FusedDot {
                            w,
                            sc: &mut *sc,
                            slot,
                        };
                        let runs = &g.runs;
                        self.local
                            .ghost_add(T::one(), &g.matrix, &values, y, Some(dot), runs)?
                    };
                    if !ghosts_fused {
                        self.add_ghosts(T::one(), g, y)?;
                        fused = false;
                    }
                }
                fused
            }
        };
        // Every rank fused, or the dot product is left to the caller on all.
        let everywhere = self
            .allreduce_flags(!fused)?
            .iter()
            .all(|&unfused| !unfused);
        if everywhere {
            self.sum_slots(sc, &[slot])?;
        }
        Ok(everywhere)
    }
}

/// The owned block's share of a distributed step ([`Dist::split_apply`]):
/// given the owned block, it writes y.
pub(crate) type OwnedStep<'a, B, T> = dyn FnMut(
        &<B as gpuq_sparse::SparseBackend>::Matrix<T>,
        &mut <B as Backend>::Vector<T>,
    ) -> Result<()>
    + 'a;

impl<B: HaloBackend> Dist<B> {
    /// y = (the owned block's work `owned`, which writes y from x and the
    /// owned block) + alpha A_ghost x_ghost: `owned` runs while the halo of
    /// x travels, then the ghost block adds its share (over its non-empty
    /// rows). A fused local step (an AMG residual b - A x) thus becomes the
    /// distributed one with no pass of its own. `owned` must not change x.
    pub(crate) fn split_apply<T: Scalar>(
        &self,
        a: &DistMatrix<B, T>,
        x: &B::Vector<T>,
        alpha: T,
        y: &mut B::Vector<T>,
        owned: &mut OwnedStep<'_, B, T>,
    ) -> Result<()> {
        let Some(g) = &a.ghost else {
            return owned(&a.owned, y);
        };
        self.exchange(g, x, &mut || owned(&a.owned, &mut *y))?;
        self.add_ghosts(alpha, g, y)
    }

    /// [`Dist::split_apply`] with `ghost`'s block in place of `a`'s (the same
    /// ghost columns: `ghost` was made from `a`'s ghost block, for example
    /// with its rows scaled): y = (`owned`'s work) + alpha ghost x_ghost,
    /// the halo of x travelling while `owned` runs. `owned` must not change
    /// x. Errors when `a` has no ghost side or `ghost` does not fit it.
    pub(crate) fn split_apply_ghost<T: Scalar>(
        &self,
        a: &DistMatrix<B, T>,
        x: &B::Vector<T>,
        alpha: T,
        ghost: &GhostBlock<B, T>,
        y: &mut B::Vector<T>,
        owned: &mut OwnedStep<'_, B, T>,
    ) -> Result<()> {
        let Some(g) = &a.ghost else {
            return Err(Error::InvalidArgument(
                "split_apply_ghost: the matrix has no ghost columns".into(),
            ));
        };
        gpuq_core::check_same_len(
            "split_apply_ghost (ghost block columns)",
            g.matrix.shape().1,
            ghost.matrix.shape().1,
        )?;
        self.exchange(g, x, &mut || owned(&a.owned, &mut *y))?;
        if g.plan.ghosts() == 0 || alpha.is_zero_value() {
            return Ok(());
        }
        let values = g.values.lock().unwrap_or_else(|e| e.into_inner());
        self.add_block(alpha, &ghost.matrix, &ghost.runs, &values, y)
    }

    /// The halo exchange of `x` for the ghost side `g`, with `overlap` (the
    /// owned block's work) run while it travels; leaves the ghost values in
    /// `g`'s vector and counts bytes and time (less the overlap's).
    fn exchange<T: Scalar>(
        &self,
        g: &Ghosts<B, T>,
        x: &B::Vector<T>,
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let t = Instant::now();
        let mut overlap_ns = 0u64;
        let mut timed = || {
            let t0 = Instant::now();
            let out = overlap();
            overlap_ns = t0.elapsed().as_nanos() as u64;
            out
        };
        let mut values = g.values.lock().unwrap_or_else(|e| e.into_inner());
        self.transport.exchange(
            &self.local,
            self.comm(),
            &g.plan,
            &g.halo,
            x,
            &mut values,
            &mut timed,
        )?;
        let c = &self.counters;
        c.halo_exchanges.fetch_add(1, Ordering::Relaxed);
        let bytes = (g.plan.sent() + g.plan.ghosts()) * std::mem::size_of::<T>();
        c.halo_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        let halo_ns = (t.elapsed().as_nanos() as u64).saturating_sub(overlap_ns);
        c.halo_ns.fetch_add(halo_ns, Ordering::Relaxed);
        Ok(())
    }

    /// y += alpha A_ghost x_ghost with the ghost values of the latest exchange.
    fn add_ghosts<T: Scalar>(
        &self,
        alpha: T,
        g: &Ghosts<B, T>,
        y: &mut B::Vector<T>,
    ) -> Result<()> {
        if g.plan.ghosts() == 0 || alpha.is_zero_value() {
            return Ok(());
        }
        let values = g.values.lock().unwrap_or_else(|e| e.into_inner());
        self.add_block(alpha, &g.matrix, &g.runs, &values, y)
    }

    /// y += alpha G v for a ghost block G (its non-empty rows in `runs`)
    /// and ghost values v: the local backend's product over the runs, or
    /// its whole product where it has none.
    fn add_block<T: Scalar>(
        &self,
        alpha: T,
        matrix: &B::Matrix<T>,
        runs: &[std::ops::Range<usize>],
        values: &B::Vector<T>,
        y: &mut B::Vector<T>,
    ) -> Result<()> {
        if self.local.ghost_add(alpha, matrix, values, y, None, runs)? {
            return Ok(());
        }
        self.local.spmv(alpha, matrix, values, T::one(), y)
    }
}

#[cfg(test)]
mod tests {
    use super::combine_norms;

    #[test]
    fn norms_combine_without_overflow_and_keep_one_rank_exact() {
        assert_eq!(combine_norms(&[3.5]), 3.5);
        assert_eq!(combine_norms(&[3.0, 4.0]), 5.0);
        assert_eq!(combine_norms(&[0.0, 0.0]), 0.0);
        assert_eq!(combine_norms(&[1e300, 1e300]), 1e300 * 2f64.sqrt());
        assert!(combine_norms(&[1.0, f64::NAN]).is_nan());
    }
}
