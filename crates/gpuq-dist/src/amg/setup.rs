//! The distributed smoothed-aggregation setup ([`DistHierarchy::build`]).

use super::lanczos::DistLanczos;
use super::rows::{GlobalRows, RankRows};
use super::symmetry::rows_are_symmetric;
use super::transfer::{transfer_operators, LevelSplit};
use crate::comm::{agree, Communicator};
use crate::ghost_rows::GhostRows;
use crate::halo::{
    larger, largest_magnitude, leading_columns, split_outside, split_rows_extended, stack_rows,
    ExtendedSplit, HaloPlan,
};
use crate::partition::RowPartition;
use crate::scatter::{allgather_matrix, move_rows};
use crate::solve::allgather_rows;
use gpuq_amg::aggregate::{drop_isolated, isolated_nodes, mis2_aggregates, without_isolated};
use gpuq_amg::blockdiag::BlockDiagonal;
use gpuq_amg::galerkin::spgemm_rows;
use gpuq_amg::prolong::{smooth, tentative};
use gpuq_amg::spectral::{lanczos_rho, HostLanczos};
use gpuq_amg::strength::{norm_matrix, strong_graph};
use gpuq_amg::trace::Trace;
use gpuq_amg::{
    coarsening_accepted, AmgOptions, Coarsening, Hierarchy, LevelMatrix, NodeAggregates, Smoother,
};
use gpuq_core::{Error, Result};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The choices of a distributed AMG: the one-process options and where the
/// coarse levels are gathered.
#[derive(Clone, Debug, PartialEq)]
pub struct DistAmgOptions {
    /// The setup's and cycle's choices. Distributed levels take smoothed
    /// aggregation, damped or l1 Jacobi and the V-cycle (others are an error);
    /// the gathered levels take every option. `near_null_space`, when given,
    /// holds this rank's rows of each vector (not the whole vectors).
    pub amg: AmgOptions,
    /// A level with fewer rows per rank than this is gathered whole onto every
    /// rank and coarsened further by the one-process setup (default 2000:
    /// below a few thousand rows a rank's SpMV on a CPU costs less than the
    /// messages around it). On GPUs over NCCL a larger value (50,000) made
    /// the solve phase 5-7% faster on two and four H100s, but its gathered
    /// level costs the setup more than that gains in one solve (one rank of
    /// laplace3d:238 on an H200: 0.29-0.32 against 0.19-0.21 s, the solve
    /// 0.045 against 0.041 s; docs/benchmarks.md), so the default is 2000
    /// there too.
    pub gather_below: usize,
    /// Whether coarse levels move onto fewer ranks as they shrink: a coarse
    /// level with fewer than `gather_below` rows per rank holding rows is
    /// agglomerated onto a power-of-two fraction of the ranks (consecutive
    /// groups, each group's rows on its first rank,
    /// [`RowPartition::agglomerated`]), about `gather_below` rows or more on
    /// each; a level that grouping would leave on a single rank of several
    /// (fewer than 2 `gather_below` rows) stays where it is and is gathered
    /// onto every rank, so the gathered levels stay below 2 `gather_below`
    /// rows whatever the rank count (on two ranks nothing moves; a partition
    /// that already holds all rows on one rank stays so until its levels
    /// fall below `gather_below`). Without it (the
    /// default) a level of fewer than `gather_below` rows per rank is
    /// gathered whole onto every rank, so the redundant levels grow with the
    /// rank count.
    pub agglomerate: bool,
    /// Whether the setup checks that A equals its transpose across ranks
    /// (to 1e-12 of its largest entry, as one process's setup does), so that
    /// the cycle of a symmetric A offers its transpose (itself) to methods
    /// that apply one (QMR). Default false: the check costs a sequential
    /// pass over each rank's rows on its host and an exchange of the entries
    /// off its columns ([`DistHierarchy::is_symmetric`] is then `None`).
    pub check_symmetry: bool,
}

impl DistAmgOptions {
    /// These options for preconditioning `method`: the symmetry check
    /// ([`DistAmgOptions::check_symmetry`]) on where the method applies the
    /// preconditioner's transpose (QMR), so that the cycle of a symmetric A
    /// offers it; the others as given. O(1).
    pub fn for_method(self, method: gpuq_krylov::Method) -> Self {
        DistAmgOptions {
            check_symmetry: self.check_symmetry || method == gpuq_krylov::Method::Qmr,
            ..self
        }
    }
}

impl Default for DistAmgOptions {
    /// [`AmgOptions::default`] with one damped-Jacobi sweep, `gather_below`
    /// 2000, no agglomeration, no symmetry check. Jacobi rather than
    /// Chebyshev (the one-process default for block 1, which runs across
    /// ranks too): each Chebyshev step is a product with a halo exchange.
    /// Measured (laplace3d:300, b = 1, two ranks sharing one H200):
    /// Chebyshev's 13 iterations solved in 0.40-0.44 s against Jacobi's 19
    /// in 0.28-0.31 s, with the same setup (docs/benchmarks.md).
    fn default() -> Self {
        DistAmgOptions {
            amg: AmgOptions {
                smoother: Some(Smoother::Jacobi),
                ..AmgOptions::default()
            },
            gather_below: 2000,
            agglomerate: false,
            check_symmetry: false,
        }
    }
}

/// One distributed level: this rank's rows of A, P and R split by their
/// columns ([`DistLevel::a`], [`DistLevel::p`] and [`DistLevel::r`] join
/// them), and its smoother data.
#[derive(Clone, Debug)]
pub struct DistLevel {
    /// The rows of A (and of the level's vectors) per rank.
    pub partition: RowPartition,
    /// The rows of the next coarser level per rank (P's columns, R's rows).
    pub coarse: RowPartition,
    /// Unknowns per node.
    pub block: usize,
    /// The smoother's inverse blocks of the rank's rows.
    pub dinv: BlockDiagonal,
    /// The smoother's damping (1 for l1 Jacobi).
    pub omega: f64,
    /// The Lanczos estimate of rho(D^-1 A).
    pub rho: f64,
    /// Stored entries of A over all ranks.
    pub nnz: usize,
    /// The largest magnitude of an entry of this rank's rows of A.
    pub(crate) a_largest: f64,
    /// The largest magnitude of an entry of this rank's rows of P.
    pub(crate) p_largest: f64,
    /// `a` split by the level's columns (the cycle's A), its owned block
    /// where the setup left it.
    pub(crate) a_split: LevelSplit,
    /// This rank's rows of P split by the coarse columns (the cycle's P),
    /// its owned block where the setup left it.
    pub(crate) p_split: LevelSplit,
    /// This rank's rows of R = P^T split by the level's columns (the cycle's
    /// R), its owned block where the setup left it.
    pub(crate) r_split: LevelSplit,
}

impl DistLevel {
    /// This rank's rows of A (global columns), joined from its owned and
    /// ghost blocks (the owned block downloaded where only the rank's GPU
    /// holds it). O(nnz).
    pub fn a(&self) -> Result<Csr<f64>> {
        self.a_split.global()
    }

    /// This rank's rows of the prolongator P (global coarse columns),
    /// joined from its owned and ghost blocks (the owned block downloaded
    /// where only the rank's GPU holds it). O(nnz).
    pub fn p(&self) -> Result<Csr<f64>> {
        self.p_split.global()
    }

    /// This rank's rows of R = P^T (global fine columns), joined from its
    /// owned and ghost blocks (the owned block downloaded where only the
    /// rank's GPU holds it). O(nnz).
    pub fn r(&self) -> Result<Csr<f64>> {
        self.r_split.global()
    }
}

/// Seconds this rank spent in each phase of [`DistHierarchy::build`],
/// summed over the distributed levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct DistSetupTimings {
    /// The input checks, the rows split and the halo plans.
    pub split_s: f64,
    /// The block diagonals, their inverses and the Lanczos estimates.
    pub smoother_s: f64,
    /// The strength graphs and the aggregates.
    pub aggregation_s: f64,
    /// The tentative prolongators, their ghost rows and the smoothing.
    pub prolongation_s: f64,
    /// R = P^T and the products A P and R (A P) with their ghost rows.
    pub galerkin_s: f64,
    /// Of `galerkin_s`: P split by the coarse columns and R = P^T split by
    /// the fine ones (an exchange of P's ghost-column entries by coarse row).
    pub transpose_s: f64,
    /// Of `galerkin_s`: the products A P and R (A P), each with its ghost
    /// rows' exchange.
    pub products_s: f64,
    /// Gathering the coarse level and the one-process setup of the rest.
    pub gathered_s: f64,
    /// All of the setup.
    pub total_s: f64,
}

/// A rank's rows of a level as its backend keeps them for the level's
/// steps ([`DistSetupKernels::keep_rows`]): empty where the backend keeps
/// nothing (the host computes from the host rows).
/// Clones share the kept value.
#[derive(Clone, Default)]
pub struct KeptRows(Option<Arc<dyn Any + Send + Sync>>);

impl std::fmt::Debug for KeptRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "KeptRows(kept)"
        } else {
            "KeptRows(none)"
        })
    }
}

impl KeptRows {
    /// Nothing kept.
    pub fn none() -> Self {
        KeptRows(None)
    }

    /// `value` kept (a backend's own type).
    pub fn new(value: impl Any + Send + Sync) -> Self {
        KeptRows(Some(Arc::new(value)))
    }

    /// The kept value, if one of type `K` is kept.
    pub fn get<K: Any>(&self) -> Option<&K> {
        self.0.as_ref()?.downcast_ref()
    }
}

/// Where the distributed setup runs the local steps that cost it most: the
/// Lanczos estimates, the aggregation of the rank's owned block, the
/// smoothed prolongator and the sparse products (A P and R (A P), each over
/// the rank's rows with the ghost rows fetched). Every method returns
/// `Ok(None)` by default, and the caller computes on the host (Rayon); the
/// CUDA backend runs them on the rank's GPU with the one-GPU setup's
/// kernels, which give the host's results bit for bit, so the hierarchy is
/// the same wherever it was built.
pub trait DistSetupKernels: Sync {
    /// A copy of the caller's rows `rows` (the finest level's, global
    /// columns) held by the backend, so that the finest level takes the path
    /// of a coarse operator the backend made: its entries outside the
    /// rank's columns, its diagonal blocks and its extended rows found
    /// there ([`DistSetupKernels::outside_entries`],
    /// [`DistSetupKernels::block_diagonal`],
    /// [`DistSetupKernels::keep_rows`]) while the host keeps the rows for
    /// its own steps. `None` (the default) to keep them on the host alone.
    /// The CUDA backend uploads them: O(nnz) across, once.
    fn hold_rows(&self, _rows: &Csr<f64>) -> Result<Option<LevelMatrix>> {
        Ok(None)
    }

    /// The rank's rows `a` of a level and the inverse blocks `dinv` of its
    /// rows, kept for the level's Lanczos estimate, prolongator smoothing
    /// and product A P (made once per level; each of those takes it).
    /// Default: nothing kept. The CUDA backend makes their extended form on
    /// the device from the rows it holds (uploading them where it holds
    /// none), squared by empty rows for the ghost columns (the host then
    /// makes it only for the few rows other ranks need of A P).
    fn keep_rows(&self, _a: &RankRows<'_>, _dinv: &BlockDiagonal) -> Result<KeptRows> {
        Ok(KeptRows::none())
    }

    /// The largest magnitude of the values of `m` (0 without values, NaN
    /// where one is NaN: the cycle's f32 range check) where the backend
    /// holds them, O(nnz) there; `None` (the default) to take it from the
    /// host's copy.
    fn largest_magnitude(&self, _m: &LevelMatrix) -> Result<Option<f64>> {
        Ok(None)
    }

    /// Whether [`DistSetupKernels::keep_rows`] makes the rank's extended
    /// rows and cuts its owned block from them ([`DistSetupKernels::owned_block`]),
    /// so that the host's split writes neither (only the ghost block).
    /// Default: no.
    fn keeps_owned_block(&self) -> bool {
        false
    }

    /// The rank's owned block (its rows on its own columns) as the backend
    /// cut it from the rows `kept` ([`DistSetupKernels::keep_rows`]), held
    /// there for the aggregation and the cycle; `None` (the default) where
    /// it cut none (the host's split gives it). O(1).
    fn owned_block(&self, _kept: &KeptRows) -> Option<LevelMatrix> {
        None
    }

    /// The entries of the rank's rows `a` (the level's columns, held by the
    /// backend: a coarse operator it left there) outside the rank's
    /// columns `own`, on the host with their global columns, by the rows
    /// that hold any (most rows of a rank hold none): what the split needs
    /// for the ghost block, without the rows coming to the host. `None` (the
    /// default, and where the backend does not hold `a`) to split the host
    /// copy. O(nnz) where `a` is held, O(rows holding entries outside and
    /// their entries) across.
    fn outside_entries(&self, _a: &LevelMatrix, _own: Range<usize>) -> Result<Option<GhostRows>> {
        Ok(None)
    }

    /// The bs x bs diagonal blocks of the rank's rows `a` (the level's
    /// columns, held by the backend; the rank's first row is the level's
    /// row `first`): [`BlockDiagonal::of_rows`] without `l1`, bit for bit.
    /// `None` (the default, and where the backend does not hold `a`) to
    /// take them from the host copy. O(rows bs) across.
    fn block_diagonal(
        &self,
        _a: &LevelMatrix,
        _first: usize,
        _bs: usize,
    ) -> Result<Option<BlockDiagonal>> {
        Ok(None)
    }

    /// The inverse of `d`'s blocks ([`BlockDiagonal::inverse`], whose errors
    /// it gives). Default: on the host, O(n bs^3).
    fn inverse_blocks(&self, d: &BlockDiagonal) -> Result<BlockDiagonal> {
        d.inverse()
    }

    /// The rows of `a` (held by the backend) that store only zeros or
    /// nothing, increasing (the coarse operator's rows that get a unit
    /// diagonal); `None` (the default, and where the backend does not hold
    /// `a`) to look at the host copy. O(nnz) where held.
    fn zero_rows(&self, _a: &LevelMatrix) -> Result<Option<Vec<usize>>> {
        Ok(None)
    }

    /// The aggregates of the square block `owned` (the rank's rows and
    /// columns, wherever it is held; strong graph of its bs x bs block norms
    /// with threshold `eps`, then the distance-2 aggregation): each node's
    /// aggregate, the count and the nodes without strong connections in the
    /// block (increasing), or `None` to aggregate on the host (the default).
    fn owned_aggregates(
        &self,
        _owned: &LevelMatrix,
        _bs: usize,
        _eps: f64,
    ) -> Result<Option<gpuq_amg::aggregate::Aggregation>> {
        Ok(None)
    }

    /// [`DistSetupKernels::owned_aggregates`] with each node's aggregate left
    /// on the backend ([`KeptAggregates`]), or `None` (the default) where it
    /// keeps none.
    fn kept_aggregates(
        &self,
        _owned: &LevelMatrix,
        _bs: usize,
        _eps: f64,
    ) -> Result<Option<KeptAggregates>> {
        Ok(None)
    }

    /// C = A B where B is `parts` stacked (the rank's rows, then the ghost
    /// rows), each of `ncols` columns, or `None` to multiply on the host (the
    /// default). `kept` is what [`DistSetupKernels::keep_rows`] kept of A,
    /// or nothing.
    fn stacked_product(
        &self,
        _a: &Csr<f64>,
        _kept: &KeptRows,
        _parts: &[&Csr<f64>],
        _ncols: usize,
    ) -> Result<Option<Csr<f64>>> {
        Ok(None)
    }

    /// A P as [`DistSetupKernels::stacked_product`] computes it, left on
    /// the backend as the top rows of R (A P)'s right operand
    /// ([`KeptProduct`]), or `None` (the default) to bring it to the host
    /// (`stacked_product`, else the host's product). `parts` are P's rows
    /// on this rank (wherever they are held: where the backend holds them,
    /// they need not go up again) and its ghost rows. The ghost rows other
    /// ranks need of A P come from the kept product ([`KeptProduct::rows`]),
    /// or where it gives none are computed on the host from A's rows and P's
    /// parts (the same values bit for bit: every backend sums each entry in
    /// the host's order), so the whole product never crosses to the host.
    fn kept_product(
        &self,
        _a: &RankRows<'_>,
        _kept: &KeptRows,
        _parts: (&LevelMatrix, &Csr<f64>),
        _ncols: usize,
    ) -> Result<Option<Box<dyn KeptProduct + '_>>> {
        Ok(None)
    }

    /// The block of the rank's rows `p` of the prolongator, where the
    /// backend holds them ([`DistSetupKernels::smoothed_prolongator`]), on
    /// the coarse columns `cols` (the rank's rows of P on its own coarse
    /// columns, numbered from
    /// `cols.start`) and its transpose (the owned block of R = P^T), both
    /// left on the backend for the cycle and R (A P), and P's entries
    /// outside `cols` on the host (their global columns: what the host
    /// sends to the other ranks); `None` (the default, and where `p` is not
    /// held by the backend) to split and transpose on the host.
    fn owned_transfer(
        &self,
        _p: &LevelMatrix,
        _cols: Range<usize>,
    ) -> Result<Option<OwnedTransfer>> {
        Ok(None)
    }

    /// `agg` with the aggregates of the nodes `drop` dropped (each such
    /// aggregate's nodes in none, the others renumbered in order:
    /// [`gpuq_amg::aggregate::drop_isolated`]), where `agg` is held.
    /// Default: on the host (the aggregates brought there), O(nodes).
    fn drop_nodes(&self, agg: &NodeAggregates, drop: &[u32]) -> Result<NodeAggregates> {
        host_drop_nodes(agg, drop)
    }

    /// The tentative prolongator of the rank's nodes (`agg` each node's
    /// aggregate, on the host or held by the backend; `bs` rows a node, `nns`
    /// the near-null-space vectors' rows), its columns numbered from `cols.0`
    /// of `cols.1` (the rank's first coarse column, the coarse level's
    /// columns), and the coarse near-null-space rows:
    /// [`gpuq_amg::prolong::tentative`] bit for bit, held by the backend (its
    /// host copy made when asked for); `None` (the default) to build it on
    /// the host (the aggregates brought there).
    fn tentative(
        &self,
        _agg: &NodeAggregates,
        _bs: usize,
        _nns: &[Vec<f64>],
        _cols: (usize, usize),
    ) -> Result<Option<(LevelMatrix, Vec<Vec<f64>>)>> {
        Ok(None)
    }

    /// The smoothed prolongator P = (I - omega D^-1 A) P_T of the rank's
    /// rows (`gpuq_amg::prolong::smooth`): `a` the rank's rows (smoothed
    /// over owned then ghost columns), `dinv` the inverse blocks of its rows, `pt` the
    /// tentative prolongator's rows on this rank (wherever they are held)
    /// and its ghost rows (stacked in that order, the same columns), `kept`
    /// what [`DistSetupKernels::keep_rows`] kept of `a` and `dinv`: P's rows,
    /// wherever the backend holds them (a P held on the backend is what
    /// [`DistSetupKernels::kept_product`] and
    /// [`DistSetupKernels::owned_transfer`] take there), or `None` to smooth
    /// on the host (the default).
    fn smoothed_prolongator(
        &self,
        _a: &RankRows<'_>,
        _dinv: &BlockDiagonal,
        _kept: &KeptRows,
        _rho: f64,
        _pt: (&LevelMatrix, &Csr<f64>),
    ) -> Result<Option<LevelMatrix>> {
        Ok(None)
    }

    /// The Lanczos estimate of rho(D^-1 A) over the ranks' rows (the host's
    /// distributed Lanczos steps and values, bit for bit): `rows` the
    /// rank's rows (multiplied over owned then ghost columns, `plan`
    /// bringing the ghosts), `blocks` = (D, D^-1) of
    /// its rows, `size` = (global rows, Lanczos steps), `kept` what
    /// [`DistSetupKernels::keep_rows`] kept of the rows and D^-1; or `None`
    /// to run it on the host (the default). Every rank makes the same
    /// exchanges and collectives either way. Collective.
    fn lanczos_rho(
        &self,
        _comm: &dyn Communicator,
        _plan: &HaloPlan,
        _rows: &RankRows<'_>,
        _blocks: (&BlockDiagonal, &BlockDiagonal),
        _kept: &KeptRows,
        _size: (usize, usize),
    ) -> Result<Option<f64>> {
        Ok(None)
    }

    /// The one-process hierarchy of the gathered level `a` (whole on every
    /// rank) with `options`. Default: [`Hierarchy::build`] on the host; a GPU
    /// rank builds it on its device ([`Hierarchy::build_on`]: the host's
    /// aggregates and matrices to rounding, left on the device for the
    /// cycle).
    fn gathered_hierarchy(&self, a: &Csr<f64>, options: &AmgOptions) -> Result<Hierarchy> {
        Hierarchy::build(a, options)
    }

    /// Where these steps run, for reports (`cpu`, `cuda`).
    fn dist_setup_name(&self) -> &'static str {
        "cpu"
    }
}

/// How many empty rows make `n` rows over `m` columns (owned then ghost)
/// square with whole blocks of `dinv` for them: its ghost columns, `None`
/// where they do not make whole blocks or `dinv` is not of `n` rows (a
/// kernel written for a square A then cannot take it). O(1).
#[cfg(any(feature = "cuda", test))]
fn padding_rows((n, m): (usize, usize), dinv: &BlockDiagonal) -> Option<usize> {
    let bs = dinv.block();
    (m >= n && (m - n) % bs == 0 && dinv.rows() == n).then_some(m - n)
}

/// `a` (rows over owned then ghost columns) made square by empty rows for
/// the ghost columns, and `dinv`'s blocks followed by zero blocks for them
/// (what [`SquaredRows`] holds on the device): the smoothed prolongator of
/// these has the rank's rows of P first and the tentative prolongator's
/// ghost rows after them (an empty row of A adds nothing), so a kernel
/// written for a square A computes the rank's rows. `None` where
/// [`padding_rows`] finds none. O(nnz).
#[cfg(test)]
fn squared(a: &Csr<f64>, dinv: &BlockDiagonal) -> Result<Option<(Csr<f64>, Vec<f64>)>> {
    let Some(ghosts) = padding_rows(a.shape(), dinv) else {
        return Ok(None);
    };
    let mut ptr = a.row_ptr().to_vec();
    ptr.resize(a.ncols() + 1, a.nnz());
    let square = Csr::try_new_allow_nonfinite(
        a.ncols(),
        a.ncols(),
        ptr,
        a.col_idx().to_vec(),
        a.values().to_vec(),
    )?;
    let mut blocks = dinv.blocks()?.to_vec();
    blocks.resize(blocks.len() + ghosts * dinv.block(), 0.0);
    Ok(Some((square, blocks)))
}

/// A rank's aggregates left on its backend by
/// [`DistSetupKernels::kept_aggregates`]: the isolated nodes on the host,
/// each node's aggregate and their count where the backend made them.
pub struct KeptAggregates {
    /// The nodes without a strong connection in the owned block, increasing.
    pub isolated: Vec<u32>,
    /// Each node's aggregate (every node in one), held by the backend
    /// ([`NodeAggregates::from_held`]).
    pub aggregates: NodeAggregates,
}

/// [`DistSetupKernels::drop_nodes`] on the host: the aggregates brought
/// there, [`drop_isolated`]. O(nodes).
fn host_drop_nodes(agg: &NodeAggregates, drop: &[u32]) -> Result<NodeAggregates> {
    let mut nodes = agg.host()?.to_vec();
    let count = drop_isolated(&mut nodes, agg.count(), drop);
    Ok(NodeAggregates::from_host(nodes, count))
}

/// The tentative prolongator of `agg` with the coarse columns `first..` of
/// `ncols`: the backend's ([`DistSetupKernels::tentative`]) where it makes
/// one, else the host's, its columns shifted. O(n k^2).
fn rank_tentative<K: DistSetupKernels + ?Sized>(
    local: &K,
    agg: &NodeAggregates,
    bs: usize,
    nns: &[Vec<f64>],
    (first, ncols): (usize, usize),
) -> Result<(LevelMatrix, Vec<Vec<f64>>)> {
    if let Some(found) = local.tentative(agg, bs, nns, (first, ncols))? {
        return Ok(found);
    }
    let tent = tentative(agg.host()?, agg.count(), bs, nns)?;
    let pt = shift_columns(tent.p, first, ncols)?;
    Ok((LevelMatrix::from_host(pt), tent.coarse_null))
}

/// The CPU backend: every step on the host.
impl DistSetupKernels for gpuq_cpu::CpuBackend {}

/// What a backend makes of a level's prolongator for its transfer operators
/// ([`DistSetupKernels::owned_transfer`]).
pub struct OwnedTransfer {
    /// The rank's rows of P on its own coarse columns (local numbers).
    pub p: LevelMatrix,
    /// Its transpose: the rank's owned block of R = P^T.
    pub r: LevelMatrix,
    /// The rank's rows of P with only the entries outside its coarse
    /// columns (global numbers), on the host by their non-empty rows.
    pub outside: GhostRows,
}

/// A rank's rows of A P left on its backend by
/// [`DistSetupKernels::kept_product`], for one product R (A P).
pub trait KeptProduct: Send + Sync {
    /// C = R B, where R is the rank's rows `owned` beside `ghost` (its block
    /// on the rank's columns, wherever it is held, and its ghost block) and B
    /// the kept rows (R's owned columns) stacked on the host rows `below`
    /// (R's ghost columns, the same columns as the kept rows): the rows of
    /// C, sorted, left where the backend made them (the next level's rows;
    /// the host copy made when a host step asks for it). Errors when the
    /// shapes do not chain. O(flops) on the backend; `ghost` and `below`
    /// over the link, and `owned` where the backend does not hold it.
    fn left_product(&self, r: (&LevelMatrix, &GhostRows), below: &Csr<f64>) -> Result<LevelMatrix>;

    /// The rows `idx` (the rank's, in that order) of the kept A P on the
    /// host, with its columns: the rows other ranks need for their R (A P),
    /// brought from where the backend holds them. `None` (the default) to
    /// compute them on the host from A's and P's rows (the same values bit
    /// for bit). O(those rows' entries) across.
    fn rows(&self, idx: &[usize]) -> Result<Option<Csr<f64>>> {
        let _ = idx;
        Ok(None)
    }
}

/// A rank's rows of a level on its GPU, made square by an empty row per
/// ghost column, with D^-1's blocks (zero blocks for the ghost nodes): what
/// the CUDA backend's [`DistSetupKernels::keep_rows`] keeps.
#[cfg(feature = "cuda")]
pub(crate) struct SquaredRows {
    /// The rank's rows, then an empty row per ghost column.
    pub(crate) a: gpuq_cuda::SetupCsr,
    /// D^-1's blocks, then zero blocks.
    pub(crate) dinv: gpuq_cuda::SetupVec,
    /// The rank's rows (the first rows of `a`).
    pub(crate) own: usize,
    /// The owned block of the rank's rows (columns below `own`), made on
    /// the device where the level's rows are kept
    /// ([`DistSetupKernels::keep_rows`]): the aggregation's input and the
    /// cycle's A.
    pub(crate) owned: Option<Arc<gpuq_cuda::SetupCsr>>,
}

#[cfg(feature = "cuda")]
impl SquaredRows {
    /// The rank's rows with their global columns uploaded, made extended
    /// on the device and stacked on an empty row per ghost column
    /// (`setup_extend_columns`), with `dinv`'s blocks; `None` where the
    /// ghost columns do not make whole blocks ([`padding_rows`]); with
    /// `owned`, the owned block cut from them on the device too. O(nnz)
    /// across.
    fn upload(
        g: &gpuq_cuda::CudaBackend,
        rows: &RankRows<'_>,
        dinv: &BlockDiagonal,
        owned: bool,
    ) -> Result<Option<Self>> {
        let a = rows.global();
        let Some(ghosts) = padding_rows((a.nrows(), rows.extended_cols()), dinv) else {
            return Ok(None);
        };
        // Rows the device holds (a coarse operator it made) are not uploaded.
        let global = match a.level().and_then(|l| gpuq_amg::device_copy(g, l)) {
            Some(held) => held,
            None => Arc::new(g.setup_upload(a.host()?)?),
        };
        let squared = g.setup_extend_columns(&global, rows.own(), rows.ghost_cols(), ghosts)?;
        drop(global);
        let own = a.nrows();
        let owned = match owned {
            true => Some(Arc::new(g.setup_column_range(&squared, own, 0..own)?)),
            false => None,
        };
        Ok(Some(SquaredRows {
            a: squared,
            // D^-1 uploaded once and kept in `dinv` (its clones too: the
            // level's smoother and its cycle take it there), padded on the
            // device.
            dinv: g.setup_vec_padded(&*gpuq_amg::device_blocks(g, dinv)?, ghosts * dinv.block())?,
            own,
            owned,
        }))
    }

    /// The rows `kept` holds, or those of `a` and `dinv` uploaded into
    /// `fresh` (`None` where they cannot be squared).
    pub(crate) fn of<'k>(
        g: &gpuq_cuda::CudaBackend,
        kept: &'k KeptRows,
        (a, dinv): (&RankRows<'_>, &BlockDiagonal),
        fresh: &'k mut Option<SquaredRows>,
    ) -> Result<Option<&'k SquaredRows>> {
        if let Some(k) = kept.get::<SquaredRows>() {
            return Ok(Some(k));
        }
        *fresh = Self::upload(g, a, dinv, false)?;
        Ok(fresh.as_ref())
    }
}

/// The rank's GPU: the owned block's aggregates (cut on the device from the
/// level's rows, the aggregates back), the Lanczos estimates, the smoothed
/// prolongator (kept on the device, only the rows the host asks for brought
/// back), the owned blocks of P
/// and R = P^T (cut and transposed on the device, kept there for the cycle)
/// and the products (the device's hashed Gustavson product; A P kept for
/// R (A P), whose result stays there as the next level's rows: only ghost
/// rows, the entries outside the rank's columns and D's blocks cross PCIe); a level's
/// rows are uploaded once (squared, [`DistSetupKernels::keep_rows`]) for its
/// Lanczos estimate, smoothing and A P.
#[cfg(feature = "cuda")]
impl DistSetupKernels for gpuq_cuda::CudaBackend {
    /// Uploaded (`setup_upload`).
    fn hold_rows(&self, rows: &Csr<f64>) -> Result<Option<LevelMatrix>> {
        Ok(Some(gpuq_amg::device_level(self, self.setup_upload(rows)?)))
    }

    /// Cut on the device (`setup_outside_rows`): only the rows holding
    /// entries outside, and those entries, downloaded.
    fn outside_entries(&self, a: &LevelMatrix, own: Range<usize>) -> Result<Option<GhostRows>> {
        let Some(held) = gpuq_amg::device_copy(self, a) else {
            return Ok(None);
        };
        let (rows, block) = self.setup_outside_rows(&held, a.nrows(), own)?;
        GhostRows::new(a.nrows(), rows, block).map(Some)
    }

    /// Found on the device from the held rows, their columns numbered from
    /// `first` (the one-GPU setup's `setup_block_diagonal_on`; no owned
    /// block cut for it), kept there (downloaded only when a host step asks
    /// for them).
    fn block_diagonal(
        &self,
        a: &LevelMatrix,
        first: usize,
        bs: usize,
    ) -> Result<Option<BlockDiagonal>> {
        let Some(held) = gpuq_amg::device_copy(self, a) else {
            return Ok(None);
        };
        let blocks = self.setup_block_diagonal_on(&held, (first, bs), false)?;
        gpuq_amg::kept_blocks(self, bs, blocks).map(Some)
    }

    /// On the device ([`gpuq_amg::device_inverse`]), kept there.
    fn inverse_blocks(&self, d: &BlockDiagonal) -> Result<BlockDiagonal> {
        gpuq_amg::device_inverse(self, d)
    }

    /// Found on the device (`setup_zero_rows`).
    fn zero_rows(&self, a: &LevelMatrix) -> Result<Option<Vec<usize>>> {
        match gpuq_amg::device_copy(self, a) {
            Some(held) => self.setup_zero_rows(&held).map(Some),
            None => Ok(None),
        }
    }

    fn keep_rows(&self, a: &RankRows<'_>, dinv: &BlockDiagonal) -> Result<KeptRows> {
        Ok(SquaredRows::upload(self, a, dinv, true)?.map_or_else(KeptRows::none, KeptRows::new))
    }

    fn keeps_owned_block(&self) -> bool {
        true
    }

    /// On the device (`setup_largest_magnitude`) for a matrix held there,
    /// 8 bytes back.
    fn largest_magnitude(&self, m: &LevelMatrix) -> Result<Option<f64>> {
        gpuq_amg::device_copy(self, m)
            .map(|d| self.setup_largest_magnitude(&d))
            .transpose()
    }

    fn owned_block(&self, kept: &KeptRows) -> Option<LevelMatrix> {
        let owned = kept.get::<SquaredRows>()?.owned.clone()?;
        Some(gpuq_amg::device_level(self, owned))
    }

    /// On the block's copy on this device (else its host copy uploaded),
    /// the aggregates left there (`setup_aggregates_kept`; the host
    /// aggregates where the device cannot decide).
    fn kept_aggregates(
        &self,
        owned: &LevelMatrix,
        bs: usize,
        eps: f64,
    ) -> Result<Option<KeptAggregates>> {
        let block = match gpuq_amg::device_copy(self, owned) {
            Some(held) => held,
            None => Arc::new(self.setup_upload(owned.host()?)?),
        };
        let Some(mut d) = self.setup_aggregates_kept(&block, bs, eps)? else {
            return Ok(None);
        };
        Ok(Some(KeptAggregates {
            isolated: std::mem::take(&mut d.isolated),
            aggregates: gpuq_amg::kept_aggregates(self, d),
        }))
    }

    /// B's parts uploaded one after the other into one device matrix (no
    /// stacked copy on the host); with A's rows kept (squared): that matrix
    /// times B, the rank's rows of the result back; else A uploaded as it
    /// is.
    fn stacked_product(
        &self,
        a: &Csr<f64>,
        kept: &KeptRows,
        parts: &[&Csr<f64>],
        ncols: usize,
    ) -> Result<Option<Csr<f64>>> {
        let b = self.setup_upload_stacked(parts, ncols)?;
        if let Some(sq) = kept.get::<SquaredRows>() {
            let c = self.setup_spgemm(&sq.a, &b)?;
            return self.setup_download(&c)?.into_first_rows(sq.own).map(Some);
        }
        let c = self.setup_spgemm(&self.setup_upload(a)?, &b)?;
        self.setup_download(&c).map(Some)
    }

    /// With A's rows kept (squared): that matrix times B's parts uploaded
    /// into one device matrix, left there (a `DeviceProduct`).
    fn kept_product(
        &self,
        _a: &RankRows<'_>,
        kept: &KeptRows,
        (p, ghosts): (&LevelMatrix, &Csr<f64>),
        ncols: usize,
    ) -> Result<Option<Box<dyn KeptProduct + '_>>> {
        let Some(sq) = kept.get::<SquaredRows>() else {
            return Ok(None);
        };
        let b = match gpuq_amg::device_copy(self, p) {
            Some(d) if p.ncols() == ncols => self.setup_stack_below(&d, p.nrows(), ghosts)?,
            _ => self.setup_upload_stacked(&[p.host()?, ghosts], ncols)?,
        };
        let c = self.setup_spgemm(&sq.a, &b)?;
        Ok(Some(Box::new(DeviceProduct {
            gpu: self,
            c,
            rows: sq.own,
        })))
    }

    /// On the device where this device holds `agg`
    /// (`setup_aggregates_without`: a copy of the aggregates, the list
    /// uploaded), else on the host.
    fn drop_nodes(&self, agg: &NodeAggregates, drop: &[u32]) -> Result<NodeAggregates> {
        match gpuq_amg::device_aggregates(self, agg) {
            Some(kept) => Ok(gpuq_amg::kept_aggregates(
                self,
                self.setup_aggregates_without(kept, drop)?,
            )),
            None => host_drop_nodes(agg, drop),
        }
    }

    /// On the device as the one-GPU setup builds it
    /// ([`gpuq_amg::SetupKernels::tentative`]: from aggregates kept on this
    /// device without their upload, for the vector of ones without its
    /// upload or a transpose), its columns shifted there
    /// (`setup_shift_columns`).
    fn tentative(
        &self,
        agg: &NodeAggregates,
        bs: usize,
        nns: &[Vec<f64>],
        (first, ncols): (usize, usize),
    ) -> Result<Option<(LevelMatrix, Vec<Vec<f64>>)>> {
        let (local, coarse) = gpuq_amg::SetupKernels::tentative(self, agg, bs, nns)?;
        let Some(pt) = gpuq_amg::device_copy(self, &local) else {
            return Ok(None);
        };
        let shifted = self.setup_shift_columns(&pt, first, ncols)?;
        Ok(Some((gpuq_amg::device_level(self, shifted), coarse)))
    }

    /// On the device, A squared by empty rows for the ghost columns (the
    /// one-GPU kernel takes a square A; kept, or uploaded here), P_T's rows
    /// (kept, or uploaded) with its ghost rows below them, the kernel, the
    /// rank's rows copied from its result there (`setup_first_rows`) and
    /// kept there as the level's P; nothing comes to the host.
    fn smoothed_prolongator(
        &self,
        a: &RankRows<'_>,
        dinv: &BlockDiagonal,
        kept: &KeptRows,
        rho: f64,
        (own, ghost): (&LevelMatrix, &Csr<f64>),
    ) -> Result<Option<LevelMatrix>> {
        let mut fresh = None;
        let Some(sq) = SquaredRows::of(self, kept, (a, dinv), &mut fresh)? else {
            return Ok(None);
        };
        let omega = 4.0 / (3.0 * rho);
        let spt = match gpuq_amg::device_copy(self, own) {
            Some(pt) => self.setup_stack_below(&pt, pt.shape().0, ghost)?,
            None => self.setup_upload_stacked(&[own.host()?, ghost], own.ncols())?,
        };
        let p = self.setup_smoothed_prolongator(&sq.a, dinv.block(), omega, &sq.dinv, &spt)?;
        let p = self.setup_first_rows(&p, sq.own)?;
        Ok(Some(gpuq_amg::device_level(self, p)))
    }

    /// P's first rows on the coarse columns `cols` cut on the device
    /// (`setup_column_range`) and transposed there (`setup_transpose`, the
    /// host's transpose exactly), both kept as level matrices; its entries
    /// outside them cut there too (`setup_outside_columns`) and brought to
    /// the host. `None` where P is not held on this device.
    fn owned_transfer(&self, p: &LevelMatrix, cols: Range<usize>) -> Result<Option<OwnedTransfer>> {
        let Some(p) = gpuq_amg::device_copy(self, p) else {
            return Ok(None);
        };
        let rows = p.shape().0;
        let (filled, block) = self.setup_outside_rows(&p, rows, cols.clone())?;
        let outside = GhostRows::new(rows, filled, block)?;
        let owned = self.setup_column_range(&p, rows, cols)?;
        let r = self.setup_transpose(&owned)?;
        Ok(Some(OwnedTransfer {
            p: gpuq_amg::device_level(self, owned),
            r: gpuq_amg::device_level(self, r),
            outside,
        }))
    }

    /// On the device (`DeviceDistLanczos`): the squared rows and D^-1
    /// (kept, or uploaded here) and D's blocks; the halo and the inner
    /// products' sums over NCCL between the GPUs where it links them, else
    /// through the hosts; `None` where the ghost columns do not make whole
    /// blocks.
    fn lanczos_rho(
        &self,
        comm: &dyn Communicator,
        plan: &HaloPlan,
        a: &RankRows<'_>,
        (d, dinv): (&BlockDiagonal, &BlockDiagonal),
        kept: &KeptRows,
        (n, steps): (usize, usize),
    ) -> Result<Option<f64>> {
        let mut fresh = None;
        let Some(sq) = SquaredRows::of(self, kept, (a, dinv), &mut fresh)? else {
            return Ok(None);
        };
        let first = a.own().start;
        let ops = super::lanczos::DeviceDistLanczos::new(
            self,
            (comm, plan),
            (sq, first),
            d,
            steps.min(n),
        )?;
        lanczos_rho(&ops, n, steps).map(Some)
    }

    fn gathered_hierarchy(&self, a: &Csr<f64>, options: &AmgOptions) -> Result<Hierarchy> {
        Hierarchy::build_on(self, a, options)
    }

    fn dist_setup_name(&self) -> &'static str {
        "cuda"
    }
}

/// A P on a rank's GPU: the product of the squared rows, whose first
/// `rows` rows are the rank's (the rest, of the padding, empty).
#[cfg(feature = "cuda")]
struct DeviceProduct<'g> {
    gpu: &'g gpuq_cuda::CudaBackend,
    c: gpuq_cuda::SetupCsr,
    rows: usize,
}

#[cfg(feature = "cuda")]
impl KeptProduct for DeviceProduct<'_> {
    /// The kept rows and `below` stacked on the device
    /// (`setup_stack_below`), R's owned block (kept, else uploaded) and its
    /// ghost block side by side there (`setup_beside`), the device product,
    /// C left there as a level matrix (the next level's rows).
    fn left_product(
        &self,
        (owned, ghost): (&LevelMatrix, &GhostRows),
        below: &Csr<f64>,
    ) -> Result<LevelMatrix> {
        let b = self.gpu.setup_stack_below(&self.c, self.rows, below)?;
        let owned = match gpuq_amg::device_copy(self.gpu, owned) {
            Some(kept) => kept,
            None => Arc::new(self.gpu.setup_upload(owned.host()?)?),
        };
        let r = self
            .gpu
            .setup_beside(&owned, (ghost.rows(), ghost.block()))?;
        let c = self.gpu.setup_spgemm(&r, &b)?;
        Ok(gpuq_amg::device_level(self.gpu, c))
    }

    /// Gathered on the device (`setup_select_rows`), only they downloaded.
    fn rows(&self, idx: &[usize]) -> Result<Option<Csr<f64>>> {
        gpuq_core::check_indices("rows of the kept A P", self.rows, idx)?;
        self.gpu.setup_select_rows(&self.c, idx).map(Some)
    }
}

/// The largest magnitude of an entry of `split` (its owned block where the
/// backend holds it, [`DistSetupKernels::largest_magnitude`], its ghost
/// block on the host). O(nnz).
fn split_largest(local: &dyn DistSetupKernels, split: &LevelSplit) -> Result<f64> {
    let owned = match local.largest_magnitude(&split.owned)? {
        Some(found) => found,
        None => largest_magnitude(split.owned.host()?),
    };
    Ok(larger(owned, largest_magnitude(split.ghost.block())))
}

/// Runs `f`, adding its seconds to `acc`.
fn time<R>(acc: &mut f64, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let out = f();
    *acc += t.elapsed().as_secs_f64();
    out
}

/// A smoothed-aggregation hierarchy across ranks: distributed levels, then
/// the coarse levels gathered onto every rank (see the module docs).
pub struct DistHierarchy {
    levels: Vec<DistLevel>,
    gathered: RowPartition,
    tail: Hierarchy,
    options: DistAmgOptions,
    timings: DistSetupTimings,
    symmetric: Option<bool>,
}

/// The errors of options the distributed levels do not take.
fn check_options(o: &DistAmgOptions) -> Result<()> {
    o.amg.validate()?;
    let unsupported = |what: &str| {
        Err(Error::InvalidArgument(format!(
            "distributed AMG: {what} is not distributed (smoothed aggregation with damped or l1 Jacobi or Chebyshev smoothing is)"
        )))
    };
    if o.amg.coarsening != Coarsening::SmoothedAggregation {
        return unsupported("the seed's coarsening");
    }
    for s in [Some(o.amg.smoother_of(0)), o.amg.coarse_smoother]
        .into_iter()
        .flatten()
    {
        if !matches!(
            s,
            Smoother::Jacobi | Smoother::L1Jacobi | Smoother::Chebyshev { .. }
        ) {
            return unsupported(&format!("the smoother {s:?}"));
        }
    }
    if o.gather_below == 0 {
        return Err(Error::InvalidArgument(
            "distributed AMG: gather_below must be positive".into(),
        ));
    }
    Ok(())
}

/// The inputs' errors: the partition against the communicator and the rows,
/// blocks that straddle ranks, near-null-space vectors of the wrong length
/// (non-finite entries: [`check_finite_rows`]).
fn check_input(
    comm: &dyn Communicator,
    partition: &RowPartition,
    rows: &Csr<f64>,
    o: &DistAmgOptions,
) -> Result<()> {
    check_options(o)?;
    partition.check(partition.rows(), comm.size())?;
    if rows.ncols() != partition.rows() {
        return Err(Error::shape(
            "distributed AMG (A is square)",
            partition.rows(),
            rows.ncols(),
        ));
    }
    let own = partition.range(comm.rank());
    gpuq_core::check_same_len("distributed AMG (the rank's rows)", own.len(), rows.nrows())?;
    let bs = o.amg.block;
    if own.start % bs != 0 || own.len() % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "distributed AMG: rank {}'s rows {own:?} split blocks of {bs} (partition with RowPartition::blocks)",
            comm.rank()
        )));
    }
    if let Some(v) = &o.amg.near_null_space {
        if v.is_empty() || v.iter().any(|x| x.len() != own.len()) {
            return Err(Error::InvalidArgument(format!(
                "distributed AMG: near-null-space vectors must be at least one, each of the rank's {} rows",
                own.len()
            )));
        }
    }
    Ok(())
}

/// Errors where a value of the caller's rows `rows` is not finite: judged
/// from the largest magnitude of the backend's copy `held` where it finds
/// one (O(nnz) there, 8 bytes back), else (and to name the entry) by the
/// host's pass over the values.
fn check_finite_rows(
    local: &dyn DistSetupKernels,
    rows: &Csr<f64>,
    held: Option<&LevelMatrix>,
) -> Result<()> {
    if let Some(m) = held.map(|h| local.largest_magnitude(h)).transpose()? {
        if m.is_some_and(f64::is_finite) {
            return Ok(());
        }
    }
    rows.check_finite()
}

/// The constant of each block component on `n` local rows.
fn component_constants(n: usize, bs: usize) -> Vec<Vec<f64>> {
    (0..bs)
        .map(|c| {
            (0..n)
                .into_par_iter()
                .map(|i| f64::from(i % bs == c))
                .collect()
        })
        .collect()
}

/// `a` with its column indices shifted by `offset` and `ncols` columns, in
/// place (its arrays kept). O(nnz), parallel.
fn shift_columns(a: Csr<f64>, offset: usize, ncols: usize) -> Result<Csr<f64>> {
    let (nrows, _, ptr, mut cols, vals) = a.into_parts();
    let offset = u32::try_from(offset)
        .map_err(|_| Error::InvalidArgument(format!("column offset {offset} beyond u32")))?;
    cols.par_iter_mut().for_each(|c| *c += offset);
    Csr::try_new_allow_nonfinite(nrows, ncols, ptr, cols, vals)
}

/// B's ghost rows for a product C = A B whose A has the rank's rows with
/// `cols` = (owned, ghost) columns (split as B's rows, `plan` bringing the
/// ghosts), B having `b_rows` rows on this rank and `ncols` columns,
/// `rows(idx)` giving its rows `idx`. Errors when the shapes do not chain.
/// Collective among neighbours.
fn ghost_rows(
    comm: &dyn Communicator,
    (n_own, n_ghost): (usize, usize),
    plan: &HaloPlan,
    (b_rows, ncols): (usize, usize),
    rows: impl Fn(&[usize]) -> Result<Csr<f64>>,
) -> Result<Csr<f64>> {
    let ghosts = plan.exchange_rows_with(comm, ncols, rows)?;
    if b_rows != n_own || ghosts.nrows() != n_ghost {
        return Err(Error::shape(
            "distributed product (B's rows vs A's columns)",
            n_own + n_ghost,
            b_rows + ghosts.nrows(),
        ));
    }
    Ok(ghosts)
}

/// C = A B on this rank from A's extended rows `a` (`kept` what the backend
/// kept of them), B's rows `b` and its ghost rows `ghosts`: on the backend
/// ([`DistSetupKernels::stacked_product`]), else one host Gustavson product.
fn local_product(
    local: &dyn DistSetupKernels,
    (a, kept): (&Csr<f64>, &KeptRows),
    b: &Csr<f64>,
    ghosts: &Csr<f64>,
) -> Result<Csr<f64>> {
    if let Some(c) = local.stacked_product(a, kept, &[b, ghosts], b.ncols())? {
        return Ok(c);
    }
    let n_own = b.nrows();
    spgemm_rows(a, b.ncols(), |k| {
        if k < n_own {
            b.row(k)
        } else {
            ghosts.row(k - n_own)
        }
    })
}

/// A P on this rank: on the host, or kept on the backend
/// ([`DistSetupKernels::kept_product`]) with P's ghost rows, from which (and
/// A's extended rows and the rows of P they reach, wherever P is held) any
/// of its rows is computed on the host.
enum RankProduct<'k> {
    Host(Csr<f64>),
    Kept {
        product: Box<dyn KeptProduct + 'k>,
        p_ghosts: Csr<f64>,
    },
}

/// A P over the rank's rows `a` (`split` its columns split as P's rows,
/// `kept` what the backend kept of it, `plan` bringing P's ghost rows once;
/// `p` the rank's rows of P, wherever held): one local product, kept on the
/// backend where it keeps it, else over `a`'s extended rows. Collective
/// among neighbours.
fn a_times_p<'k>(
    (comm, local): (&dyn Communicator, &'k dyn DistSetupKernels),
    (split, a, kept): (&LevelSplit, &RankRows<'_>, &KeptRows),
    plan: &HaloPlan,
    p: &LevelMatrix,
) -> Result<RankProduct<'k>> {
    let p_ghosts = ghost_rows(
        comm,
        (split.owned.ncols(), split.ghost.ncols()),
        plan,
        (p.nrows(), p.ncols()),
        |idx| p.rows(idx),
    )?;
    if let Some(product) = local.kept_product(a, kept, (p, &p_ghosts), p.ncols())? {
        return Ok(RankProduct::Kept { product, p_ghosts });
    }
    local_product(local, (a.extended()?, kept), p.host()?, &p_ghosts).map(RankProduct::Host)
}

/// R (A P) over the rank's rows of R (`r` split by its columns, A P's
/// rows, `r_plan` bringing the ghosts), A P as [`a_times_p`] left it (`a`
/// and `p` the rows it came from): A P's ghost rows fetched (the rows others
/// need of a kept A P computed on the host from those of `a`'s extended
/// rows and the rows of `p` they reach, gathered where `p` is held), then
/// the product on the backend or the host. Collective among neighbours.
fn r_times_ap(
    (comm, local): (&dyn Communicator, &dyn DistSetupKernels),
    r: &LevelSplit,
    r_plan: &HaloPlan,
    ap: &RankProduct<'_>,
    (a, p): (&RankRows<'_>, &LevelMatrix),
    trace: &mut Trace,
) -> Result<LevelMatrix> {
    let cols = (r.owned.ncols(), r.ghost.ncols());
    match ap {
        RankProduct::Host(ap) => {
            let ghosts = ghost_rows(comm, cols, r_plan, (ap.nrows(), ap.ncols()), |idx| {
                ap.select_rows(idx)
            })?;
            local_product(local, (&r.extended()?, &KeptRows::none()), ap, &ghosts)
                .map(LevelMatrix::from_host)
        }
        RankProduct::Kept { product, p_ghosts } => {
            let n_own = p.nrows();
            // The rows of A P asked for: from the kept product where the
            // backend gives them, else made here from the rows of A asked
            // for and only the rows of P they reach (from wherever P is
            // held).
            let ap_rows = |idx: &[usize]| {
                if let Some(kept) = product.rows(idx)? {
                    return Ok(kept);
                }
                let ext = a.extended_rows(idx)?;
                let mut reached: Vec<usize> = ext
                    .col_idx()
                    .iter()
                    .map(|&k| k as usize)
                    .filter(|&k| k < n_own)
                    .collect();
                reached.par_sort_unstable();
                reached.dedup();
                let p_rows = p.rows(&reached)?;
                // The product's accumulator spans only the coarse columns
                // these rows reach, not all of the level's.
                let (used, parts) = compact_columns(&[&p_rows, p_ghosts])?;
                let c = spgemm_rows(&ext, used.len(), |k| match reached.binary_search(&k) {
                    Ok(at) if k < n_own => parts[0].row(at),
                    _ => parts[1].row(k - n_own),
                })?;
                widen_columns(&c, &used, p.ncols())
            };
            // How many rows were made for the other ranks, and in how many
            // microseconds (the trace's).
            let asked = [AtomicUsize::new(0), AtomicUsize::new(0)];
            let rows_of_ap = |idx: &[usize]| {
                let t = Instant::now();
                let rows = ap_rows(idx);
                asked[0].fetch_add(idx.len(), Ordering::Relaxed);
                asked[1].fetch_add(t.elapsed().as_micros() as usize, Ordering::Relaxed);
                rows
            };
            let below = ghost_rows(comm, cols, r_plan, (p.nrows(), p.ncols()), rows_of_ap)?;
            trace.mark(format_args!(
                "  R (A P): {} rows of A P made for other ranks in {:.2} ms, {} received",
                asked[0].load(Ordering::Relaxed),
                asked[1].load(Ordering::Relaxed) as f64 * 1e-3,
                below.nrows()
            ));
            product.left_product((&r.owned, &r.ghost), &below)
        }
    }
}

/// The columns `parts` hold (increasing, each once) and the parts with each
/// column renumbered by its position among them: a product of a few rows
/// ([`spgemm_rows`], whose accumulator spans its column count) then
/// accumulates over the columns reached alone, not over a whole coarse
/// level's. The renumbering keeps the columns' order, so the product's
/// entries, sums and order are unchanged ([`widen_columns`] numbers them
/// back). O(nnz log nnz).
fn compact_columns(parts: &[&Csr<f64>]) -> Result<(Vec<u32>, Vec<Csr<f64>>)> {
    let mut used: Vec<u32> = parts
        .iter()
        .flat_map(|m| m.col_idx().iter().copied())
        .collect();
    used.par_sort_unstable();
    used.dedup();
    let compact = parts
        .iter()
        .map(|m| {
            let cols = m
                .col_idx()
                .par_iter()
                .map(|c| used.binary_search(c).expect("every column was listed") as u32)
                .collect();
            Csr::try_new_allow_nonfinite(
                m.nrows(),
                used.len(),
                m.row_ptr().to_vec(),
                cols,
                m.values().to_vec(),
            )
        })
        .collect::<Result<_>>()?;
    Ok((used, compact))
}

/// `c` (columns numbered by position in `used`, [`compact_columns`]) with
/// its columns numbered back, of `ncols` columns. O(nnz).
fn widen_columns(c: &Csr<f64>, used: &[u32], ncols: usize) -> Result<Csr<f64>> {
    let cols = c.col_idx().par_iter().map(|&j| used[j as usize]).collect();
    Csr::try_new_allow_nonfinite(
        c.nrows(),
        ncols,
        c.row_ptr().to_vec(),
        cols,
        c.values().to_vec(),
    )
}

/// `ac` (this rank's rows of a coarse operator, global columns, the rank's
/// first row being global row `first`, wherever held) with a 1 on the
/// diagonal of each row whose stored entries are all zero, as the
/// one-process setup does: left as it is where the backend holding it finds
/// no such row ([`DistSetupKernels::zero_rows`]), else on the host.
fn fix_empty_rows_of(
    local: &dyn DistSetupKernels,
    ac: LevelMatrix,
    first: usize,
) -> Result<LevelMatrix> {
    if !ac.on_host() {
        if let Some(zero) = local.zero_rows(&ac)? {
            if zero.is_empty() {
                return Ok(ac);
            }
        }
    }
    let empty = |a: &Csr<f64>, i: usize| a.row(i).1.iter().all(|&v| v == 0.0);
    let host = ac.host()?;
    if !(0..host.nrows()).into_par_iter().any(|i| empty(host, i)) {
        return Ok(ac);
    }
    fix_empty_rows(host, first).map(LevelMatrix::from_host)
}

/// [`fix_empty_rows_of`] on the host, for rows with an all-zero row.
/// O(nnz), one pass.
fn fix_empty_rows(ac: &Csr<f64>, first: usize) -> Result<Csr<f64>> {
    let empty = |i: usize| ac.row(i).1.iter().all(|&v| v == 0.0);
    let mut ptr = vec![0];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for i in 0..ac.nrows() {
        if empty(i) {
            cols.push((first + i) as u32);
            vals.push(1.0);
        } else {
            let (c, v) = ac.row(i);
            cols.extend_from_slice(c);
            vals.extend_from_slice(v);
        }
        ptr.push(cols.len());
    }
    Csr::try_new_allow_nonfinite(ac.nrows(), ac.ncols(), ptr, cols, vals)
}

impl DistHierarchy {
    /// Builds the hierarchy of the matrix whose rows `partition` gives this
    /// rank are `rows` (global columns). Collective: every rank calls it with
    /// the same partition and options.
    ///
    /// Per distributed level: one halo plan, `lanczos_steps` Lanczos steps (a halo
    /// exchange and two collectives each), the aggregation on the rank's
    /// rows (O(nnz) per round, no communication), three exchanges of ghost
    /// rows (P_T's, P's, A P's), one of R's entries; the gathered levels cost
    /// one broadcast per rank and the one-process setup on every rank.
    ///
    /// Every step runs on the host; on GPU ranks,
    /// [`DistHierarchy::build_on`] with the rank's backend moves the
    /// Lanczos estimates, the aggregation, the prolongator and the products
    /// to its GPU (the same hierarchy).
    ///
    /// Errors on every rank when any rank's input is wrong: a partition that
    /// does not match the communicator or the rows, blocks split between
    /// ranks, non-finite entries, options the distributed levels do not take,
    /// rho(D^-1 A) not positive (A not positive definite).
    pub fn build(
        comm: &dyn Communicator,
        partition: &RowPartition,
        rows: &Csr<f64>,
        options: &DistAmgOptions,
    ) -> Result<Self> {
        Self::build_on(&gpuq_cpu::CpuBackend::new(), comm, partition, rows, options)
    }

    /// [`DistHierarchy::build`] with the steps of [`DistSetupKernels`] (the
    /// Lanczos estimates, A's extended rows and owned block, its aggregation, the
    /// tentative and smoothed prolongators, the owned blocks of P and
    /// R = P^T, the Galerkin products, the gathered levels' one-process
    /// setup) where `local` runs them (the rank's GPU for a CUDA backend;
    /// the same hierarchy, bit for bit). A backend that holds a copy of the
    /// caller's rows ([`DistSetupKernels::hold_rows`]) also finds the
    /// finest level's entries outside the rank's columns, diagonal blocks
    /// and largest magnitude (the finiteness check) there, as for the
    /// coarse operators it makes. The rest (the ghost blocks, halo plans,
    /// the inverse blocks, the exchanges) stays on the host. Collective.
    pub fn build_on(
        local: &dyn DistSetupKernels,
        comm: &dyn Communicator,
        partition: &RowPartition,
        rows: &Csr<f64>,
        options: &DistAmgOptions,
    ) -> Result<Self> {
        let t0 = Instant::now();
        let mut t = DistSetupTimings::default();
        let mut trace = Trace::when(comm.rank() == 0);
        time(&mut t.split_s, || {
            agree(comm, check_input(comm, partition, rows, options))
        })?;
        let o = &options.amg;
        let rank = comm.rank();
        let mut part = partition.clone();
        // The caller's rows (and the backend's copy, where it holds one),
        // then each coarse level's where the backend left them (no copy: a
        // level keeps A only as its split).
        let held = time(&mut t.split_s, || {
            let held = match rows.nrows() {
                0 => None,
                _ => local.hold_rows(rows)?,
            };
            check_finite_rows(local, rows, held.as_ref())?;
            Ok(held)
        });
        let mut input_held = agree(comm, held)?;
        let mut coarse_rows: Option<LevelMatrix> = None;
        let mut bs = o.block;
        let mut nns = o
            .near_null_space
            .clone()
            .unwrap_or_else(|| component_constants(rows.nrows(), bs));
        let mut levels = Vec::new();
        loop {
            let a = match (&coarse_rows, &input_held) {
                (Some(l), _) => GlobalRows::Level(l),
                (None, Some(held)) => GlobalRows::Held(rows, held),
                (None, None) => GlobalRows::Host(rows),
            };
            let n = part.rows();
            // Rows per rank holding rows (all ranks without agglomeration).
            let holders = if options.agglomerate {
                part.active_ranks().max(1)
            } else {
                comm.size()
            };
            let small = n <= o.coarse_size
                || levels.len() + 1 >= o.max_levels
                || n < holders.saturating_mul(options.gather_below);
            let next = if small {
                None
            } else {
                coarsen(
                    (comm, local),
                    (&part, a),
                    (bs, &nns),
                    levels.len(),
                    options,
                    (&mut t, &mut trace),
                )?
            };
            let Some((level, ac, next_nns)) = next else {
                let tail = time(&mut t.gathered_s, || {
                    gather_tail(
                        (comm, local),
                        (&part, agree(comm, a.host())?),
                        (bs, &nns),
                        (levels.len(), &mut trace),
                        options,
                    )
                })?;
                trace.mark(format_args!("gathered levels"));
                let symmetric = match options.check_symmetry {
                    true => Some(time(&mut t.split_s, || {
                        symmetric_input(comm, (partition, rows), &levels, &tail)
                    })?),
                    false => None,
                };
                t.total_s = t0.elapsed().as_secs_f64();
                return Ok(DistHierarchy {
                    levels,
                    gathered: part,
                    tail,
                    options: options.clone(),
                    timings: t,
                    symmetric,
                });
            };
            part = level.coarse.clone();
            bs = nns.len();
            debug_assert_eq!(ac.nrows(), part.range(rank).len());
            coarse_rows = Some(ac);
            input_held = None;
            levels.push(level);
            nns = next_nns;
        }
    }

    /// The distributed levels, finest first.
    pub fn levels(&self) -> &[DistLevel] {
        &self.levels
    }

    /// The partition of the first gathered level (the distributed levels'
    /// last coarse partition, or the input's when nothing was distributed).
    pub fn gathered_partition(&self) -> &RowPartition {
        &self.gathered
    }

    /// The one-process hierarchy of the gathered levels (the same on every
    /// rank).
    pub fn tail(&self) -> &Hierarchy {
        &self.tail
    }

    /// Whether A equals its transpose (to 1e-12 of its largest entry) where
    /// the setup checked it ([`DistAmgOptions::check_symmetry`]), else
    /// `None`. The cycle offers its transpose only for `Some(true)`.
    pub fn is_symmetric(&self) -> Option<bool> {
        self.symmetric
    }

    /// The options it was built with.
    pub fn options(&self) -> &DistAmgOptions {
        &self.options
    }

    /// Seconds the setup took on this rank.
    pub fn setup_seconds(&self) -> f64 {
        self.timings.total_s
    }

    /// Seconds per phase of the setup on this rank.
    pub fn timings(&self) -> DistSetupTimings {
        self.timings
    }

    /// Every level's global rows and rows per rank (the gathered levels list
    /// every row on every rank), finest first.
    pub fn rows_per_rank(&self) -> Vec<(usize, Vec<usize>)> {
        let ranks = self.gathered.ranks();
        let split = |p: &RowPartition| (p.rows(), (0..ranks).map(|r| p.range(r).len()).collect());
        let mut out: Vec<(usize, Vec<usize>)> =
            self.levels.iter().map(|l| split(&l.partition)).collect();
        out.extend(
            self.tail
                .levels()
                .iter()
                .map(|l| (l.a.nrows(), vec![l.a.nrows(); ranks])),
        );
        out
    }

    /// The operator complexity: stored entries of all levels over the finest
    /// level's (the gathered levels counted once).
    pub fn operator_complexity(&self) -> f64 {
        let tail: usize = self.tail.levels().iter().map(|l| l.a.nnz()).sum();
        let dist: usize = self.levels.iter().map(|l| l.nnz).sum();
        let finest = self
            .levels
            .first()
            .map_or_else(|| self.tail.levels()[0].a.nnz(), |l| l.nnz);
        (dist + tail) as f64 / finest.max(1) as f64
    }
}

/// Whether the input A (this rank's `rows` of `partition`) equals its
/// transpose to 1e-12 of its largest entry: checked across ranks
/// ([`rows_are_symmetric`]) where levels are distributed (the largest entry
/// from the finest level's, gathered), else the gathered hierarchy's own
/// check of the whole A. Collective where levels are distributed. O(nnz)
/// per rank.
fn symmetric_input(
    comm: &dyn Communicator,
    (partition, rows): (&RowPartition, &Csr<f64>),
    levels: &[DistLevel],
    tail: &Hierarchy,
) -> Result<bool> {
    let Some(finest) = levels.first() else {
        return Ok(tail.is_symmetric());
    };
    let largest = comm
        .allgather(&[finest.a_largest])?
        .into_iter()
        .fold(0.0, f64::max);
    rows_are_symmetric(comm, partition, rows, 1e-12 * largest)
}

/// A distributed level, this rank's rows of the next coarser operator and
/// its rows of the coarse near-null-space vectors.
type Coarsened = (DistLevel, LevelMatrix, Vec<Vec<f64>>);

/// What one aggregation of a distributed level gives: the coarse level's
/// partition, this rank's rows of P split by the coarse columns (and their
/// largest magnitude), of R = P^T split by the fine columns and of the
/// coarse operator, and the coarse near-null-space vectors.
struct Projected {
    coarse: RowPartition,
    p_largest: f64,
    p_split: LevelSplit,
    r_split: LevelSplit,
    ac: LevelMatrix,
    coarse_null: Vec<Vec<f64>>,
}

/// One distributed coarsening of the level whose rank's rows are `a`: the
/// level (with its smoother data and transfers), this rank's rows of the
/// coarse operator and its near-null-space vectors; `None` when the
/// aggregation does not shrink the level by 10% even with every connection
/// strong (the level is then gathered and becomes the coarsest there).
fn coarsen(
    (comm, local): (&dyn Communicator, &dyn DistSetupKernels),
    (part, a): (&RowPartition, GlobalRows<'_>),
    (bs, nns): (usize, &[Vec<f64>]),
    index: usize,
    options: &DistAmgOptions,
    (t, trace): (&mut DistSetupTimings, &mut Trace),
) -> Result<Option<Coarsened>> {
    let o = &options.amg;
    trace.mark(format_args!(
        "level {index} ({} rows on this rank): begin",
        a.nrows()
    ));
    let rank = comm.rank();
    let own = part.range(rank);
    let n = part.rows();
    // The owned block and the extended rows are left to the backend where
    // it makes them from the rows it keeps.
    let (split, plan) = time(&mut t.split_s, || -> Result<_> {
        let host = !local.keeps_owned_block();
        // Rows the backend holds (a coarse operator it made) are split from
        // their entries outside the rank's columns, which it cuts there;
        // where it cuts none, the host copy is split.
        let outside = match a.level() {
            Some(l) => local.outside_entries(l, own.clone()),
            None => Ok(None),
        };
        let made = outside.and_then(|outside| match outside {
            Some(outside) => split_outside(part, rank, outside),
            None => split_rows_extended(part, rank, a.host()?, host),
        });
        let split = agree(comm, made)?;
        trace.mark(format_args!("  split and extended"));
        let plan = HaloPlan::build(comm, part, &split.ghost_cols)?;
        trace.mark(format_args!("  halo plan"));
        Ok((split, plan))
    })?;
    let ExtendedSplit {
        owned: host_owned,
        ghost,
        ghost_cols,
        ext,
        largest,
    } = split;
    let rows = RankRows::new(a, own.clone(), ghost_cols.clone(), ext);
    // Smoother data: D from the rank's rows (its blocks lie in its columns),
    // found by the backend where it holds them.
    let (dinv, rho, smoother_dinv, omega, kept) = time(&mut t.smoother_s, || -> Result<_> {
        let held = match a.level() {
            Some(l) => local.block_diagonal(l, own.start, bs),
            None => Ok(None),
        };
        let d = held.and_then(|held| match held {
            Some(d) => Ok(d),
            None => Ok(BlockDiagonal::of_rows(a.host()?, bs, own.start, false)),
        });
        let d = agree(comm, d)?;
        let dinv = agree(comm, local.inverse_blocks(&d))?;
        trace.mark(format_args!("  block diagonal and inverse"));
        let steps = o.lanczos_steps;
        // A rank that keeps nothing multiplies on the host: its extended
        // rows are made (and an error agreed) before the Lanczos steps.
        let kept = agree(
            comm,
            local.keep_rows(&rows, &dinv).and_then(|kept| {
                if kept.0.is_none() {
                    rows.extended()?;
                }
                Ok(kept)
            }),
        )?;
        let rho = match local.lanczos_rho(comm, &plan, &rows, (&d, &dinv), &kept, (n, steps))? {
            Some(rho) => rho,
            None => {
                let ops = DistLanczos {
                    comm,
                    plan: &plan,
                    host: HostLanczos {
                        a: rows.extended()?,
                        d: &d,
                        dinv: &dinv,
                    },
                    first: own.start,
                };
                lanczos_rho(&ops, n, steps)?
            }
        };
        trace.mark(format_args!("  Lanczos"));
        if !(rho > 0.0 && rho.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "AMG: rho(D^-1 A) estimated as {rho}: is A positive definite?"
            )));
        }
        let (smoother_dinv, omega) = match o.smoother_of(index) {
            Smoother::L1Jacobi => (
                agree(
                    comm,
                    a.host()
                        .and_then(|h| BlockDiagonal::of_rows(h, bs, own.start, true).inverse()),
                )?,
                1.0,
            ),
            _ => (dinv.clone(), o.jacobi_damping / rho),
        };
        Ok((dinv, rho, smoother_dinv, omega, kept))
    })?;
    // The owned block: the host's split, or the backend's cut of the kept
    // rows, else cut from the extended rows here.
    let owned = agree(
        comm,
        match (host_owned, local.owned_block(&kept)) {
            (Some(host), _) => Ok(LevelMatrix::from_host(host)),
            (None, Some(kept)) => Ok(kept),
            (None, None) => rows
                .extended()
                .and_then(|ext| leading_columns(ext, own.len()))
                .map(LevelMatrix::from_host),
        },
    )?;
    let split = LevelSplit {
        owned,
        ghost,
        ghost_cols,
        first: own.start,
        ncols: n,
    };
    // A's largest magnitude where the split did not read the values
    // (agreed on every rank, whichever path it took).
    let largest = time(&mut t.split_s, || {
        agree(
            comm,
            match largest {
                Some(known) => Ok(known),
                None => split_largest(local, &split),
            },
        )
    })?;
    // Aggregates on the rank's own block, the prolongator and the coarse
    // operator; again with every connection strong where the coarse level
    // breaks the coarsening rule of every setup
    // ([`gpuq_amg::coarsening_accepted`]), as on one process.
    let k = nns.len();
    let nnz = comm.allreduce_sum(&[a.nnz() as f64])?[0] as usize;
    let mut project = |eps: f64, t: &mut DistSetupTimings| -> Result<Option<Projected>> {
        // A node isolated in the owned block and without ghost entries is
        // isolated in A: it joins no aggregate, as on one process. Aggregates
        // the backend keeps stay there unless such a node is dropped.
        let keep = |i: usize| (i * bs..(i + 1) * bs).any(|r| !split.ghost.row(r).0.is_empty());
        let mine = time(&mut t.aggregation_s, || -> Result<NodeAggregates> {
            if let Some(kept) = local.kept_aggregates(&split.owned, bs, eps)? {
                let drop: Vec<u32> = kept
                    .isolated
                    .iter()
                    .copied()
                    .filter(|&i| !keep(i as usize))
                    .collect();
                return match drop.is_empty() {
                    true => Ok(kept.aggregates),
                    false => local.drop_nodes(&kept.aggregates, &drop),
                };
            }
            let found = match local.owned_aggregates(&split.owned, bs, eps)? {
                Some(found) => found,
                None => {
                    let s = strong_graph(&norm_matrix(split.owned.host()?, bs)?, eps)?;
                    let (agg, naggs) = mis2_aggregates(&s);
                    (agg, naggs, isolated_nodes(&s))
                }
            };
            let (agg, naggs) = without_isolated(found, keep);
            Ok(NodeAggregates::from_host(agg, naggs))
        });
        let aggregates = agree(comm, mine)?;
        let naggs = aggregates.count();
        trace.mark(format_args!("  aggregates"));
        let coarse_rows = comm.allreduce_sum(&[(naggs * k) as f64])?[0] as usize;
        // The rows' part of the rule before the products (no entries yet).
        if !coarsening_accepted((n, nnz), (coarse_rows, 0), true) {
            return Ok(None);
        }
        // Each rank numbers its aggregates after those of the ranks before it
        // (`numbering`); with agglomeration the coarse rows of a group of ranks
        // belong to its first rank (`coarse`), numbered the same, unless that
        // leaves one rank of several: such a level (fewer than 2 gather_below
        // rows) is gathered instead, as without agglomeration (held by one rank
        // it would cost exchanges with idle ranks and the distributed setup's
        // host steps, where the gathered level runs the one-process setup).
        let counts = comm.allgather(&[(naggs * k) as f64])?;
        let numbering =
            RowPartition::from_counts(&counts.iter().map(|&c| c as usize).collect::<Vec<_>>())?;
        let coarse = match numbering.agglomerated(options.gather_below) {
            grouped if options.agglomerate && grouped.active_ranks() > 1 => grouped,
            _ => numbering.clone(),
        };
        let cfirst = numbering.range(rank).start;
        let nc = numbering.rows();
        trace.mark(format_args!("  coarse partition"));
        // P_T with global coarse columns, its ghost rows, then P.
        let (p, coarse_null) = time(&mut t.prolongation_s, || -> Result<_> {
            let made = rank_tentative(local, &aggregates, bs, nns, (cfirst, nc));
            let (pt, coarse_null) = agree(comm, made)?;
            trace.mark(format_args!("  tentative"));
            // Only the rows other ranks need come from the backend.
            let pt_ghosts = plan.exchange_rows_with(comm, pt.ncols(), |idx| pt.rows(idx))?;
            trace.mark(format_args!("  its ghost rows exchanged"));
            let smoothed = local
                .smoothed_prolongator(&rows, &dinv, &kept, rho, (&pt, &pt_ghosts))
                .and_then(|p| match p {
                    Some(p) => Ok(p),
                    None => smooth(
                        rows.extended()?,
                        &dinv,
                        rho,
                        &stack_rows(&[pt.host()?, &pt_ghosts], nc)?,
                    )
                    .map(LevelMatrix::from_host),
                });
            let p = agree(comm, smoothed)?;
            trace.mark(format_args!("  smoothed prolongator"));
            // The coarse near-null-space rows go where their coarse rows are.
            let coarse_null = if coarse == numbering {
                coarse_null
            } else {
                coarse_null
                    .iter()
                    .map(|v| move_rows(comm, (&numbering, &coarse), v))
                    .collect::<Result<_>>()?
            };
            Ok((p, coarse_null))
        })?;
        // P split, R = P^T split, and R (A P) with the ghost rows of P, then
        // of A P.
        let (p_split, r_split, ac) = time(&mut t.galerkin_s, || -> Result<_> {
            let (p_split, r_split) = time(&mut t.transpose_s, || {
                transfer_operators((comm, local), (part, &coarse), &p)
            })?;
            trace.mark(format_args!("  P split, R = P^T split"));
            // A rank's error after an exchange is every rank's (agreed)
            // before the next collective.
            let ap = time(&mut t.products_s, || {
                agree(
                    comm,
                    a_times_p((comm, local), (&split, &rows, &kept), &plan, &p),
                )
            })?;
            trace.mark(format_args!("  A P"));
            let r_plan = HaloPlan::build(comm, part, &r_split.ghost_cols)?;
            trace.mark(format_args!("  R planned"));
            let ac = time(&mut t.products_s, || {
                agree(
                    comm,
                    r_times_ap((comm, local), &r_split, &r_plan, &ap, (&rows, &p), trace),
                )
            })?;
            trace.mark(format_args!("  R (A P): the product"));
            let ac = agree(comm, fix_empty_rows_of(local, ac, coarse.range(rank).start))?;
            trace.mark(format_args!("  rows of zeros"));
            Ok((p_split, r_split, ac))
        })?;
        let p_largest = time(&mut t.transpose_s, || {
            agree(comm, split_largest(local, &p_split))
        })?;
        Ok(Some(Projected {
            coarse,
            p_largest,
            p_split,
            r_split,
            ac,
            coarse_null,
        }))
    };
    let mut chosen = None;
    for eps in [o.strength, 0.0] {
        if let Some(found) = project(eps, t)? {
            let coarse_nnz = comm.allreduce_sum(&[found.ac.nnz() as f64])?[0] as usize;
            if coarsening_accepted((n, nnz), (found.coarse.rows(), coarse_nnz), true) {
                chosen = Some(found);
                break;
            }
        }
    }
    let Some(Projected {
        coarse,
        p_largest,
        p_split,
        r_split,
        ac,
        coarse_null,
    }) = chosen
    else {
        return Ok(None);
    };
    let level = DistLevel {
        partition: part.clone(),
        coarse,
        block: bs,
        dinv: smoother_dinv,
        omega,
        rho,
        nnz,
        a_largest: largest,
        p_largest,
        a_split: split,
        p_split,
        r_split,
    };
    trace.mark(format_args!("  the level's data"));
    Ok(Some((level, ac, coarse_null)))
}

/// The level whose rank's rows are `a`, gathered onto every rank, and the
/// one-process hierarchy built from it there by `local` (its options those of level
/// `index` and below; a level of more than 2 unknowns per node is
/// aggregated point by point with its near-null-space vectors); `trace` marks
/// the rows' arrival on the host and their all-gather.
fn gather_tail(
    (comm, local): (&dyn Communicator, &dyn DistSetupKernels),
    (part, a): (&RowPartition, &Csr<f64>),
    (bs, nns): (usize, &[Vec<f64>]),
    (index, trace): (usize, &mut Trace),
    options: &DistAmgOptions,
) -> Result<Hierarchy> {
    trace.mark(format_args!("  the level's rows on the host"));
    let o = &options.amg;
    let whole = allgather_matrix(comm, part, a)?;
    let nns_whole = nns
        .iter()
        .map(|v| allgather_rows(comm, part, v))
        .collect::<Result<Vec<_>>>()?;
    trace.mark(format_args!("  the gathered level's rows all-gathered"));
    let tail_options = AmgOptions {
        block: bs,
        near_null_space: Some(nns_whole),
        smoother: Some(o.smoother_of(index)),
        coarse_smoother: Some(o.smoother_of(index.max(1))),
        sweeps: o.sweeps_of(index),
        coarse_sweeps: Some(o.sweeps_of(index.max(1))),
        max_levels: o.max_levels.saturating_sub(index).max(1),
        ..o.clone()
    };
    agree(comm, local.gathered_hierarchy(&whole, &tail_options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_sparse::generators::laplace2d;

    /// A few rows times B held in two parts, over B's columns renumbered
    /// compactly and numbered back: the product over all columns, bit for
    /// bit.
    #[test]
    fn a_product_over_the_columns_reached_is_the_whole_product() {
        let a = laplace2d::<f64>(9);
        let wide = 5_000_000;
        let b = |rows: usize, seed: usize| {
            let mut coo = gpuq_sparse::Coo::new(rows, wide);
            for i in 0..rows {
                for k in 0..3 {
                    let j = (i * 7919 + k * 104_729 + seed) % wide;
                    coo.push(i, j, 1.0 / (1.0 + (i + k) as f64)).unwrap();
                }
            }
            Csr::from_coo(&coo).unwrap()
        };
        let (top, below) = (b(60, 1), b(a.ncols() - 60, 2));
        let rows = a.select_rows(&[3, 40, 41, 80]).unwrap();
        fn row(m: [&Csr<f64>; 2], k: usize) -> (&[u32], &[f64]) {
            match k < 60 {
                true => m[0].row(k),
                false => m[1].row(k - 60),
            }
        }
        let whole = spgemm_rows(&rows, wide, |k| row([&top, &below], k)).unwrap();
        let (used, parts) = compact_columns(&[&top, &below]).unwrap();
        let compact = spgemm_rows(&rows, used.len(), |k| row([&parts[0], &parts[1]], k)).unwrap();
        assert!(used.len() < 1000);
        assert_eq!(widen_columns(&compact, &used, wide).unwrap(), whole);
    }

    #[test]
    fn the_squared_level_smooths_the_ranks_rows_bit_for_bit() {
        // Rows 0..40 of a 10 x 10 grid's Laplacian over owned columns 0..40
        // and 20 ghost columns (blocks of 2 nodes), as a rank's level holds them.
        let a = laplace2d::<f64>(10);
        let rows = a.select_rows(&(0..40).collect::<Vec<_>>()).unwrap();
        let ext = Csr::try_new(
            40,
            60,
            rows.row_ptr().to_vec(),
            rows.col_idx().iter().map(|&c| c.min(59)).collect(),
            rows.values().to_vec(),
        )
        .unwrap();
        let dinv = BlockDiagonal::of(&ext, 2, false).inverse().unwrap();
        let pt = Csr::try_new(
            60,
            30,
            (0..=60).collect(),
            (0..60).map(|i| (i / 2) as u32).collect(),
            vec![0.5f64.sqrt(); 60],
        )
        .unwrap();
        let want = smooth(&ext, &dinv, 1.7, &pt).unwrap();
        let (square, blocks) = squared(&ext, &dinv).unwrap().unwrap();
        assert_eq!(square.shape(), (60, 60));
        let padded = BlockDiagonal::from_blocks(2, blocks).unwrap();
        let got = smooth(&square, &padded, 1.7, &pt)
            .unwrap()
            .into_first_rows(40)
            .unwrap();
        assert_eq!(got, want);
        // Ghost columns that split a block: the host smooths.
        let odd = Csr::try_new(
            40,
            61,
            ext.row_ptr().to_vec(),
            ext.col_idx().to_vec(),
            ext.values().to_vec(),
        )
        .unwrap();
        assert!(squared(&odd, &dinv).unwrap().is_none());
    }
}
