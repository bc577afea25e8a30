//! A rank's rows split into the block on its own columns and the block on
//! ghost columns, and the halo plan that brings the ghost values in.
//!
//! As in seed 002's shared-node exchange, only the entries a neighbour needs
//! travel: the plan lists, built once, which owned entries go to which
//! neighbour and which ghosts come from whom; an exchange packs those entries
//! ([`HaloBackend::gather`]), sends them while the owned block's SpMV runs, and
//! writes the arrivals into the ghost vector ([`HaloBackend::overwrite`]).

use crate::comm::{comm_error, Communicator};
use crate::device_comm::DeviceComm;
use crate::ghost_rows::GhostRows;
use crate::partition::RowPartition;
use gpuq_core::{
    scalars_as_bytes, scalars_as_bytes_mut, DeviceVector, Error, FusedDot, RealScalar, Result,
    Scalar,
};
use gpuq_cpu::{CpuBackend, CpuVector};
use gpuq_kernels::amg::extend_row;
use gpuq_krylov::KrylovBackend;
use gpuq_sparse::{par_fill_rows, par_row_pointers, Csr};
use rayon::prelude::*;
use std::ops::Range;

/// The tag of the plan's set-up messages.
const PLAN_TAG: u16 = 1;
/// The tag of the halo values.
const HALO_TAG: u16 = 2;
/// The tag of ghost rows ([`HaloPlan::exchange_rows_with`]).
const ROWS_TAG: u16 = 6;

/// The owned entries an exchange sends (in the order the neighbours want
/// them), and the few contiguous ranges of the vector that cover them (runs
/// of entries at most [`Pack::GAP`] apart merged): what a backend that stages
/// its halo through the host copies instead of the whole vector. Built once
/// with the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pack {
    indices: Vec<usize>,
    ranges: Vec<Range<usize>>,
    /// Where each index lies in the concatenation of the ranges.
    positions: Vec<usize>,
}

impl Pack {
    /// The largest gap between two entries that still share a range.
    pub const GAP: usize = 16;

    /// The pack of `indices`. O(k log k) for k indices.
    pub fn new(indices: Vec<usize>) -> Self {
        let mut sorted = indices.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for &i in &sorted {
            match ranges.last_mut() {
                Some(r) if i <= r.end + Self::GAP => r.end = i + 1,
                _ => ranges.push(i..i + 1),
            }
        }
        let mut starts = Vec::with_capacity(ranges.len());
        let mut at = 0;
        for r in &ranges {
            starts.push(at);
            at += r.len();
        }
        let positions = indices
            .iter()
            .map(|&i| {
                let k = ranges.partition_point(|r| r.end <= i);
                starts[k] + (i - ranges[k].start)
            })
            .collect();
        Pack {
            indices,
            ranges,
            positions,
        }
    }

    /// The entries, in sending order.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The covering ranges, increasing and disjoint.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// The number of values the ranges hold together.
    pub fn staged_len(&self) -> usize {
        self.ranges.iter().map(|r| r.len()).sum()
    }

    /// The entries from `staged`, the concatenation of the ranges' values.
    /// O(k).
    pub fn pick_staged<T: Copy>(&self, staged: &[T]) -> Result<Vec<T>> {
        gpuq_core::check_same_len("Pack::pick_staged", self.staged_len(), staged.len())?;
        Ok(self.positions.iter().map(|&p| staged[p]).collect())
    }
}

/// A backend a distributed backend can wrap: every Krylov method's steps (its
/// own or the defaults), plus packing and unpacking halo values, and the
/// transport its vectors take between ranks ([`HaloBackend::transport`]).
///
/// The defaults stage through the host: [`HaloBackend::gather`] downloads the
/// whole vector (n values) and [`HaloBackend::overwrite`] uploads a new one.
/// The CPU backend overrides both (no copy of the whole vector); the CUDA
/// backend (feature `cuda`) downloads only the pack's covering ranges and
/// uploads into the ghost vector in place.
pub trait HaloBackend: KrylovBackend {
    /// How this backend's vectors travel between ranks
    /// ([`crate::HostStaged`] for the CPU; `CudaTransport` for
    /// CUDA ranks).
    type Transport: DeviceComm<Self>;

    /// The transport as this backend stands (for a GPU: NCCL when a
    /// communicator is attached, else through the hosts); a
    /// [`crate::Dist`] takes it once, when it is made.
    fn transport(&self) -> Self::Transport;

    /// `x[i]` for every index of `pack`, in its order. Default: one download
    /// of x, O(n + k).
    fn gather<T: Scalar>(&self, x: &Self::Vector<T>, pack: &Pack) -> Result<Vec<T>> {
        pick(&self.download(x)?, pack.indices())
    }

    /// Overwrites `v` with `host` (same length). Default: one upload that
    /// replaces `v`.
    fn overwrite<T: Scalar>(&self, host: &[T], v: &mut Self::Vector<T>) -> Result<()> {
        gpuq_core::check_same_len("overwrite", v.len(), host.len())?;
        *v = self.upload(host)?;
        Ok(())
    }

    /// Waits until the work queued on this rank's device has finished.
    /// Default: nothing to wait for (the CPU runs each call to its end).
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// y = y + alpha A x for the ghost block `a` (x its ghost values) over
    /// the row ranges `runs`, which hold all of its non-empty rows
    /// ([`ghost_row_runs`]), and with `dot` also `sc[slot] += w^H (alpha A
    /// x)`: the second half of a distributed product whose owned half fused
    /// its dot ([`gpuq_sparse::SparseBackend::spmv_dot`]), so the whole
    /// product's dot needs no pass of its own and the block's empty rows
    /// (most of them) cost nothing. Returns `false`, doing nothing, where the
    /// backend does not do it (the default); the caller then runs the
    /// block's whole product (and the dot) itself.
    fn ghost_add<T: Scalar>(
        &self,
        alpha: T,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        y: &mut Self::Vector<T>,
        dot: Option<FusedDot<'_, Self, T>>,
        runs: &[Range<usize>],
    ) -> Result<bool> {
        let _ = (alpha, a, x, y, dot, runs);
        Ok(false)
    }

    /// The CSR matrix `a` (made by this backend) with row i scaled by `d[i]`
    /// (`d` of a's rows), each value `a_ij * d_i` in T: a ghost block made
    /// where it lies for a one-pass point sweep. `None` (the default) where
    /// the backend does not, the caller then scaling a host copy. O(nnz +
    /// rows).
    fn scaled_rows<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        d: &Self::Vector<T>,
    ) -> Result<Option<Self::Matrix<T>>> {
        let _ = (a, d);
        Ok(None)
    }

    /// The ghost block `g` (given by its non-empty rows) as a CSR matrix of
    /// this backend with values of T, its row pointers expanded where it
    /// lies, so that only the listed rows and their entries travel. `None`
    /// (the default) where the backend does not, the caller then expanding
    /// a host copy. O(rows + nnz).
    fn ghost_matrix<T: Scalar>(&self, g: &GhostRows) -> Result<Option<Self::Matrix<T>>> {
        let _ = g;
        Ok(None)
    }

    /// y = x[start..start + y.len()] (the rank's rows of a whole vector).
    /// Default: through the host (a download of x and an upload of y).
    /// Errors when the block runs past x's end.
    fn copy_rows_from<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        start: usize,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        let host = self.download(x)?;
        let block = rows_block("copy_rows_from", host.len(), start, y.len())?;
        self.overwrite(&host[block], y)
    }
}

/// The range `start..start + len` of a vector of `n`, or an error naming
/// `op` when it runs past the end.
fn rows_block(op: &str, n: usize, start: usize, len: usize) -> Result<Range<usize>> {
    match start.checked_add(len) {
        Some(end) if end <= n => Ok(start..end),
        _ => Err(Error::InvalidArgument(format!(
            "{op}: rows {start}..{start}+{len} of a vector of {n}"
        ))),
    }
}

/// Most kernel launches a ghost block's product takes ([`ghost_row_runs`]).
pub const GHOST_RUNS: usize = 8;

/// Empty rows between two runs of a ghost block's non-empty rows below which
/// [`ghost_row_runs`] joins the runs: reading their row pointers (8 bytes a
/// row, 2 MB) costs less than a kernel launch.
pub const GHOST_JOIN_GAP: usize = 1 << 18;

/// The row ranges of `ghost` that hold all of its non-empty rows, at most
/// [`GHOST_RUNS`] of them: the maximal runs of non-empty rows, joined across
/// gaps of fewer than [`GHOST_JOIN_GAP`] empty rows and then across all but
/// the `GHOST_RUNS - 1` widest gaps left (a slab of a structured grid: its
/// first and last planes; a coarse level's scattered rows: one range). Empty
/// when every row is. O(rows + runs log runs).
pub fn ghost_row_runs<T: Scalar>(ghost: &Csr<T>) -> Vec<Range<usize>> {
    row_runs(ghost, GHOST_JOIN_GAP)
}

/// [`ghost_row_runs`] joining across gaps of fewer than `join_gap` rows (the
/// non-empty rows found in parallel, then walked in order).
fn row_runs<T: Scalar>(ghost: &Csr<T>, join_gap: usize) -> Vec<Range<usize>> {
    let ptr = ghost.row_ptr();
    let filled: Vec<usize> = (0..ghost.nrows())
        .into_par_iter()
        .filter(|&i| ptr[i + 1] != ptr[i])
        .collect();
    runs_joined(filled, join_gap)
}

/// [`ghost_row_runs`] of a block whose non-empty rows are `filled`
/// (increasing). O(rows listed + runs log runs).
pub(crate) fn runs_of_rows(filled: impl IntoIterator<Item = usize>) -> Vec<Range<usize>> {
    runs_joined(filled, GHOST_JOIN_GAP)
}

/// The runs of the increasing rows `filled`, joined across gaps of fewer
/// than `join_gap` rows, then across all but the `GHOST_RUNS - 1` widest.
fn runs_joined(filled: impl IntoIterator<Item = usize>, join_gap: usize) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for i in filled {
        match runs.last_mut() {
            Some(r) if i - r.end < join_gap => r.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    if runs.len() <= GHOST_RUNS {
        return runs;
    }
    // Keep the widest gaps (ties: the earlier) as the cuts.
    let mut gaps: Vec<(usize, usize)> = (1..runs.len())
        .map(|k| (runs[k].start - runs[k - 1].end, k))
        .collect();
    gaps.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut cuts: Vec<usize> = gaps[..GHOST_RUNS - 1].iter().map(|g| g.1).collect();
    cuts.sort_unstable();
    let mut joined = Vec::with_capacity(GHOST_RUNS);
    let mut first = 0;
    for &k in cuts.iter().chain(std::iter::once(&runs.len())) {
        joined.push(runs[first].start..runs[k - 1].end);
        first = k;
    }
    joined
}

/// `x[idx[k]]`, or an error naming the first index out of range.
fn pick<T: Scalar>(x: &[T], idx: &[usize]) -> Result<Vec<T>> {
    gpuq_core::check_indices("gather", x.len(), idx)?;
    Ok(idx.iter().map(|&i| x[i]).collect())
}

impl HaloBackend for CpuBackend {
    type Transport = crate::HostStaged;

    fn transport(&self) -> crate::HostStaged {
        crate::HostStaged
    }

    fn gather<T: Scalar>(&self, x: &CpuVector<T>, pack: &Pack) -> Result<Vec<T>> {
        pick(x.as_slice(), pack.indices())
    }

    fn overwrite<T: Scalar>(&self, host: &[T], v: &mut CpuVector<T>) -> Result<()> {
        gpuq_core::check_same_len("overwrite", v.len(), host.len())?;
        v.as_mut_slice().copy_from_slice(host);
        Ok(())
    }

    fn copy_rows_from<T: Scalar>(
        &self,
        x: &CpuVector<T>,
        start: usize,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        let block = rows_block("copy_rows_from", x.len(), start, y.len())?;
        y.as_mut_slice().copy_from_slice(&x.as_slice()[block]);
        Ok(())
    }

    /// One sweep over the rows of `runs` (the block's non-empty rows) for a
    /// CSR block: y_i += alpha (A x)_i and, with a dot, w_i^H times that
    /// increment, reduced in fixed blocks of rows (the same bits for any
    /// thread count) and added to the slot. O(rows in the runs + nnz), no
    /// scratch vector; `false` for a block in another layout.
    fn ghost_add<T: Scalar>(
        &self,
        alpha: T,
        a: &gpuq_cpu::CpuMatrix<T>,
        x: &CpuVector<T>,
        y: &mut CpuVector<T>,
        dot: Option<FusedDot<'_, Self, T>>,
        runs: &[Range<usize>],
    ) -> Result<bool> {
        use gpuq_cpu::reduce::{pairwise_sum, BLOCK};
        use rayon::prelude::*;
        let gpuq_cpu::CpuMatrix::Csr(a) = a else {
            return Ok(false);
        };
        let m = a.nrows();
        gpuq_core::check_same_len("ghost_add (x vs columns)", a.ncols(), x.len())?;
        gpuq_core::check_same_len("ghost_add (y vs rows)", m, y.len())?;
        if let Some(d) = &dot {
            d.check("ghost_add (w vs rows)", m)?;
        }
        if let Some(bad) = runs.iter().find(|r| r.start > r.end || r.end > m) {
            return Err(Error::InvalidArgument(format!(
                "ghost_add: row range {bad:?} outside the {m} rows"
            )));
        }
        let (xs, w) = (x.as_slice(), dot.as_ref().map(|d| d.w.as_slice()));
        let ys = y.as_mut_slice();
        let mut partials = Vec::new();
        for r in runs {
            let start = r.start;
            let sums: Vec<T> = ys[r.clone()]
                .par_chunks_mut(BLOCK)
                .enumerate()
                .map(|(c, chunk)| {
                    let mut d = T::zero();
                    for (k, yi) in chunk.iter_mut().enumerate() {
                        let i = start + c * BLOCK + k;
                        let (cols, vals) = a.row(i);
                        if cols.is_empty() {
                            continue;
                        }
                        let s = cols
                            .iter()
                            .zip(vals)
                            .fold(T::zero(), |acc, (&j, &v)| acc + v * xs[j as usize]);
                        let inc = alpha * s;
                        *yi += inc;
                        if let Some(w) = w {
                            d += w[i].conj() * inc;
                        }
                    }
                    d
                })
                .collect();
            partials.extend(sums);
        }
        if let Some(dot) = dot {
            dot.sc.as_mut_slice()[dot.slot] += pairwise_sum(&partials);
        }
        Ok(true)
    }
}

/// The CUDA backend stages its halo through the host: one download per
/// covering range of the pack (a grid plane per neighbour for a slab of a
/// structured grid; the whole vector when the ranges are many or cover most
/// of it) and one upload of the ghosts into their vector; with an NCCL
/// communicator attached ([`gpuq_cuda::CudaBackend::attach_nccl`]) its
/// transport is NCCL between the GPUs (`CudaTransport`).
#[cfg(feature = "cuda")]
impl HaloBackend for gpuq_cuda::CudaBackend {
    type Transport = crate::CudaTransport;

    fn transport(&self) -> crate::CudaTransport {
        if self.has_nccl() {
            crate::CudaTransport::Nccl
        } else {
            crate::CudaTransport::Host
        }
    }

    fn synchronize(&self) -> Result<()> {
        gpuq_cuda::CudaBackend::synchronize(self)
    }

    fn copy_rows_from<T: Scalar>(
        &self,
        x: &gpuq_cuda::CudaVector<T>,
        start: usize,
        y: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::copy_rows_from(self, x, start, y)
    }

    /// One CSR kernel per two runs ([`gpuq_cuda::CudaBackend::spmv_add_rows`]:
    /// a slab's two planes in one launch), skipping the empty rows within;
    /// nothing waits.
    fn ghost_add<T: Scalar>(
        &self,
        alpha: T,
        a: &gpuq_cuda::CudaMatrix<T>,
        x: &gpuq_cuda::CudaVector<T>,
        y: &mut gpuq_cuda::CudaVector<T>,
        dot: Option<FusedDot<'_, Self, T>>,
        runs: &[Range<usize>],
    ) -> Result<bool> {
        self.spmv_add_rows(alpha, a, x, y, dot, Some(runs))
    }

    fn gather<T: Scalar>(&self, x: &gpuq_cuda::CudaVector<T>, pack: &Pack) -> Result<Vec<T>> {
        if pack.ranges().len() > 64 || 2 * pack.staged_len() > x.len() {
            return pick(&gpuq_core::Backend::download(self, x)?, pack.indices());
        }
        let mut staged = Vec::with_capacity(pack.staged_len());
        for r in pack.ranges() {
            staged.extend(self.download_range(x, r.clone())?);
        }
        pack.pick_staged(&staged)
    }

    fn overwrite<T: Scalar>(&self, host: &[T], v: &mut gpuq_cuda::CudaVector<T>) -> Result<()> {
        self.upload_into(host, v)
    }

    /// On the device ([`gpuq_cuda::CudaBackend::csr_scaled_rows`]): the
    /// pattern copied there, the values scaled by a thread per row.
    fn scaled_rows<T: Scalar>(
        &self,
        a: &gpuq_cuda::CudaMatrix<T>,
        d: &gpuq_cuda::CudaVector<T>,
    ) -> Result<Option<gpuq_cuda::CudaMatrix<T>>> {
        self.csr_scaled_rows(a, d)
    }

    /// On the device: the listed rows and their entries uploaded, the row
    /// pointers expanded there (`setup_expand_rows`), the values converted
    /// (`setup_to_matrix`). `None` where a value does not fit T (the host
    /// conversion reports it).
    fn ghost_matrix<T: Scalar>(&self, g: &GhostRows) -> Result<Option<gpuq_cuda::CudaMatrix<T>>> {
        if !gpuq_amg::device_layout_fits::<T>(g.block(), gpuq_sparse::Layout::Csr) {
            return Ok(None);
        }
        let up = self.setup_upload(g.block())?;
        let whole = self.setup_expand_rows(up, g.rows(), g.nrows())?;
        self.setup_to_matrix::<T>(&whole, gpuq_sparse::Layout::Csr)
    }
}

/// A rank's rows, split: `owned` on the rank's own columns (renumbered from
/// 0), `ghost` on the other columns it touches (numbered by `ghost_cols`,
/// their global indices in increasing order).
#[derive(Clone, Debug)]
pub struct SplitRows<T> {
    /// n_local x (the rank's columns): square for [`split_rows`].
    pub owned: Csr<T>,
    /// n_local x ghost_cols.len().
    pub ghost: Csr<T>,
    /// The global column of each ghost, increasing.
    pub ghost_cols: Vec<usize>,
}

/// Splits rank `rank`'s rows `rows` (global column indices, one row per row
/// the partition gives the rank) into the owned and the ghost block. Errors
/// when the row count or the column count does not match the partition.
/// O(nnz log nnz) on the host.
pub fn split_rows<T: Scalar>(
    partition: &RowPartition,
    rank: usize,
    rows: &Csr<T>,
) -> Result<SplitRows<T>> {
    check_rows(partition, rank, rows)?;
    split_columns(partition, rank, rows)
}

/// A rank's rows split for the distributed setup
/// ([`split_rows_extended`]): the ghost block, and where they were asked
/// for the owned block and the rows over the owned then the ghost columns.
pub(crate) struct ExtendedSplit<T> {
    /// The owned block (n_local x the rank's columns), where asked for.
    pub(crate) owned: Option<Csr<T>>,
    /// n_local x ghost_cols.len(), by its non-empty rows.
    pub(crate) ghost: GhostRows<T>,
    /// The global column of each ghost, increasing.
    pub(crate) ghost_cols: Vec<usize>,
    /// The rows over the rank's columns, then the ghosts (numbered after
    /// them): each row's owned entries, then its ghost entries; where
    /// asked for.
    pub(crate) ext: Option<Csr<T>>,
    /// The largest magnitude of an entry (0 without entries, NaN where an
    /// entry is NaN), where a pass read the values (with the owned block or
    /// the extended rows).
    pub(crate) largest: Option<f64>,
}

/// [`split_rows`]' ghost block and, with `full`, its owned block and the
/// rank's rows over (its columns, then the ghosts) as one matrix (the owned
/// block followed by the ghost block, its columns shifted by the owned
/// count), written in the same pass with the largest magnitude; without,
/// the ghost block alone ([`ghost_block`]: the values not read, for a
/// backend that makes the rest from the rows it keeps). Errors as
/// [`split_rows`].
pub(crate) fn split_rows_extended<T: Scalar>(
    partition: &RowPartition,
    rank: usize,
    rows: &Csr<T>,
    full: bool,
) -> Result<ExtendedSplit<T>> {
    check_rows(partition, rank, rows)?;
    if !full {
        // Only the ghost block: no pass over the values.
        let (ghost, ghost_cols) = ghost_block(partition, rank, rows)?;
        return Ok(ExtendedSplit {
            owned: None,
            ghost: GhostRows::of_csr(&ghost)?,
            ghost_cols,
            ext: None,
            largest: None,
        });
    }
    let (owned, ghost, ghost_cols, ext, largest) = split_parts(partition, rank, rows, true)?;
    Ok(ExtendedSplit {
        owned: Some(owned),
        ghost: GhostRows::of_csr(&ghost)?,
        ghost_cols,
        ext,
        largest: Some(largest),
    })
}

/// [`split_rows_extended`]'s ghost block alone, from `outside`: the rank's
/// rows holding only their entries outside the rank's columns (global
/// numbers, by their non-empty rows, as a backend cuts them from its copy of
/// the rows), its rows and values kept ([`ghost_block_of_outside`]). Errors
/// as [`split_rows`], and when an entry lies in the rank's columns.
pub(crate) fn split_outside<T: Scalar>(
    partition: &RowPartition,
    rank: usize,
    outside: GhostRows<T>,
) -> Result<ExtendedSplit<T>> {
    let n = partition.range(rank).len();
    if outside.nrows() != n || outside.ncols() != partition.rows() {
        return Err(Error::shape(
            "split_rows (the rank's rows vs the partition)",
            format!("{n} x {}", partition.rows()),
            format!("{} x {}", outside.nrows(), outside.ncols()),
        ));
    }
    let (ghost, ghost_cols) = ghost_block_of_outside(partition, rank, outside)?;
    Ok(ExtendedSplit {
        owned: None,
        ghost,
        ghost_cols,
        ext: None,
        largest: None,
    })
}

/// The first `ncols` columns of each row of `ext` (rows over owned then
/// ghost columns, [`ExtendedSplit::ext`]): the owned block, each row's
/// leading entries. O(nnz), rows in parallel.
pub(crate) fn leading_columns<T: Scalar>(ext: &Csr<T>, ncols: usize) -> Result<Csr<T>> {
    let below = |i: usize| ext.row(i).0.partition_point(|&c| (c as usize) < ncols);
    let ptr = par_row_pointers(ext.nrows(), below);
    let (cols, vals) = par_fill_rows(
        &ptr,
        || (),
        |i, _, c, v| {
            let (ec, ev) = ext.row(i);
            c.copy_from_slice(&ec[..c.len()]);
            v.copy_from_slice(&ev[..v.len()]);
        },
    );
    Csr::try_new_allow_nonfinite(ext.nrows(), ncols, ptr, cols, vals)
}

/// Errors unless `rows` has the rows `partition` gives `rank` and one
/// column per row of the partition. O(1).
fn check_rows<T: Scalar>(partition: &RowPartition, rank: usize, rows: &Csr<T>) -> Result<()> {
    let n = partition.range(rank).len();
    if rows.nrows() != n || rows.ncols() != partition.rows() {
        return Err(Error::shape(
            "split_rows (the rank's rows vs the partition)",
            format!("{n} x {}", partition.rows()),
            format!("{} x {}", rows.nrows(), rows.ncols()),
        ));
    }
    Ok(())
}

/// [`split_rows`] for a rectangular matrix: `rows` (any number, global
/// column indices) split by the column partition `columns`, the block on the
/// columns `columns` gives rank `rank` and the block on the others (the
/// rank's rows of a prolongator or restriction, whose columns are split
/// unlike its rows). Errors when the column count does not match `columns`.
/// O(nnz log nnz) on the host, in parallel over rows.
pub fn split_columns<T: Scalar>(
    columns: &RowPartition,
    rank: usize,
    rows: &Csr<T>,
) -> Result<SplitRows<T>> {
    let (owned, ghost, ghost_cols, _, _) = split_parts(columns, rank, rows, false)?;
    Ok(SplitRows {
        owned,
        ghost,
        ghost_cols,
    })
}

/// [`split_columns`], with the extended matrix of [`split_rows_extended`]
/// written in the same pass.
#[cfg(test)]
pub(crate) fn split_columns_extended<T: Scalar>(
    columns: &RowPartition,
    rank: usize,
    rows: &Csr<T>,
) -> Result<(SplitRows<T>, Csr<T>)> {
    let (owned, ghost, ghost_cols, ext, _) = split_parts(columns, rank, rows, true)?;
    let split = SplitRows {
        owned,
        ghost,
        ghost_cols,
    };
    Ok((
        split,
        ext.expect("split_parts writes the extended rows when asked to"),
    ))
}

/// The parts of a split in one parallel pass over the rows: the owned block,
/// the ghost block and its columns, (when `extend`) the extended matrix
/// (each row's owned entries, then its ghost entries numbered after the
/// owned columns), and the largest magnitude of an entry.
type SplitParts<T> = (Csr<T>, Csr<T>, Vec<usize>, Option<Csr<T>>, f64);

/// [`SplitParts`] of `rows` split by `columns` for `rank`.
fn split_parts<T: Scalar>(
    columns: &RowPartition,
    rank: usize,
    rows: &Csr<T>,
    extend: bool,
) -> Result<SplitParts<T>> {
    let own = columns.range(rank);
    let n = rows.nrows();
    if rows.ncols() != columns.rows() {
        return Err(Error::shape(
            "split_columns (the rows' columns vs the partition)",
            columns.rows(),
            rows.ncols(),
        ));
    }
    let ghost_cols = ghost_columns(&own, rows);
    // Each row's owned and ghost entries counted, then written in parallel,
    // each row into its own slices of the blocks (and of the extended rows,
    // laid out as `rows`).
    let counts: Vec<usize> = (0..n)
        .into_par_iter()
        .map(|i| {
            let cols = rows.row(i).0;
            cols.iter()
                .filter(|&&c| own.contains(&(c as usize)))
                .count()
        })
        .collect();
    let optr = par_row_pointers(n, |i| counts[i]);
    let gptr = par_row_pointers(n, |i| rows.row(i).0.len() - counts[i]);
    let eptr = rows.row_ptr();
    let (mut ocol, mut oval) = (vec![0u32; optr[n]], vec![T::zero(); optr[n]]);
    let (mut gcol, mut gval) = (vec![0u32; gptr[n]], vec![T::zero(); gptr[n]]);
    let ext_len = if extend { rows.nnz() } else { 0 };
    let (mut ecol, mut eval) = (vec![0u32; ext_len], vec![T::zero(); ext_len]);
    let (oc, ov) = (task_slices(&mut ocol, &optr), task_slices(&mut oval, &optr));
    let (gc, gv) = (task_slices(&mut gcol, &gptr), task_slices(&mut gval, &gptr));
    let tasks = gc.len();
    let (ec, ev): (Vec<&mut [u32]>, Vec<&mut [T]>) = if extend {
        (task_slices(&mut ecol, eptr), task_slices(&mut eval, eptr))
    } else {
        (
            (0..tasks).map(|_| Default::default()).collect(),
            (0..tasks).map(|_| Default::default()).collect(),
        )
    };
    let bounds = (own.start as u32, own.end as u32);
    let ghost_index = |c: u32| {
        ghost_cols
            .binary_search(&(c as usize))
            .expect("every ghost was listed") as u32
    };
    let largest = oc
        .into_par_iter()
        .zip(ov)
        .zip(gc.into_par_iter().zip(gv))
        .zip(ec.into_par_iter().zip(ev))
        .enumerate()
        .map(|(t, (((oc, ov), (gc, gv)), (ec, ev)))| {
            let mut largest = 0.0f64;
            let first = t * TASK_ROWS;
            let (ob, gb, eb) = (optr[first], gptr[first], eptr[first]);
            for i in first..(first + TASK_ROWS).min(n) {
                let (cols, vals) = rows.row(i);
                let (mut o, mut g) = (optr[i] - ob, gptr[i] - gb);
                for (&c, &v) in cols.iter().zip(vals) {
                    let c = c as usize;
                    largest = larger(largest, v.magnitude().to_f64_lossless());
                    if own.contains(&c) {
                        oc[o] = (c - own.start) as u32;
                        ov[o] = v;
                        o += 1;
                    } else {
                        gc[g] = ghost_index(c as u32);
                        gv[g] = v;
                        g += 1;
                    }
                }
                if extend {
                    // the extended row: owned entries from its start, ghosts after them
                    let at = eptr[i] - eb..eptr[i + 1] - eb;
                    let out = (&mut ec[at.clone()], &mut ev[at]);
                    extend_row((cols, vals), bounds, ghost_index, out);
                }
            }
            largest
        })
        .reduce(|| 0.0, larger);
    let ext = if extend {
        Some(Csr::try_new_allow_nonfinite(
            n,
            own.len() + ghost_cols.len(),
            eptr.to_vec(),
            ecol,
            eval,
        )?)
    } else {
        None
    };
    let owned_block = Csr::try_new_allow_nonfinite(n, own.len(), optr, ocol, oval)?;
    let ghost = Csr::try_new_allow_nonfinite(n, ghost_cols.len(), gptr, gcol, gval)?;
    Ok((owned_block, ghost, ghost_cols, ext, largest))
}

/// The columns of `rows` outside `own`, increasing, each once. O(nnz log
/// nnz) in parallel.
fn ghost_columns<T: Scalar>(own: &Range<usize>, rows: &Csr<T>) -> Vec<usize> {
    let mut ghost_cols: Vec<usize> = rows
        .col_idx()
        .par_iter()
        .map(|&c| c as usize)
        .filter(|c| !own.contains(c))
        .collect();
    ghost_cols.par_sort_unstable();
    ghost_cols.dedup();
    ghost_cols
}

/// The ghost block of [`split_columns`] and its ghost columns, without the
/// owned block (where a backend cuts that from its own copy of `rows`):
/// each row's entries outside the rank's columns (a leading and a trailing
/// run: columns increase within a row) counted in one parallel pass, the
/// ghost columns collected from the rows that have any, and only those rows
/// written. Errors when the column count does not match `columns`. O(nnz)
/// reads in one pass, then O(rows + ghost entries log ghosts).
pub(crate) fn ghost_block<T: Scalar>(
    columns: &RowPartition,
    rank: usize,
    rows: &Csr<T>,
) -> Result<(Csr<T>, Vec<usize>)> {
    check_columns(columns, rows.ncols())?;
    let own = columns.range(rank);
    let (lo, hi) = (own.start as u32, own.end as u32);
    // Row i's entries below the rank's columns are cols[..below], those
    // above them cols[above..].
    let runs = |cols: &[u32]| {
        (
            cols.partition_point(|&c| c < lo),
            cols.partition_point(|&c| c < hi),
        )
    };
    let counts: Vec<u32> = (0..rows.nrows())
        .into_par_iter()
        .with_min_len(TASK_ROWS)
        .map(|i| {
            let cols = rows.row(i).0;
            let (below, above) = runs(cols);
            (below + cols.len() - above) as u32
        })
        .collect();
    let mut ghost_cols: Vec<usize> = (0..rows.nrows())
        .into_par_iter()
        .with_min_len(TASK_ROWS)
        .filter(|&i| counts[i] > 0)
        .flat_map_iter(|i| {
            let cols = rows.row(i).0;
            let (below, above) = runs(cols);
            cols[..below]
                .iter()
                .chain(&cols[above..])
                .map(|&c| c as usize)
        })
        .collect();
    ghost_cols.par_sort_unstable();
    ghost_cols.dedup();
    let ptr = par_row_pointers(rows.nrows(), |i| counts[i] as usize);
    let (cols, vals) = par_fill_rows(
        &ptr,
        || (),
        |i, _, gc, gv| {
            if gc.is_empty() {
                return;
            }
            let (cols, vals) = rows.row(i);
            let (below, above) = runs(cols);
            let entries = cols[..below]
                .iter()
                .zip(&vals[..below])
                .chain(cols[above..].iter().zip(&vals[above..]));
            for (g, (c, &v)) in entries.enumerate() {
                gc[g] = ghost_cols
                    .binary_search(&(*c as usize))
                    .expect("every ghost was listed") as u32;
                gv[g] = v;
            }
        },
    );
    let ghost = Csr::try_new_allow_nonfinite(rows.nrows(), ghost_cols.len(), ptr, cols, vals)?;
    Ok((ghost, ghost_cols))
}

/// Errors unless rows of `ncols` columns have one column per row of
/// `columns` (a ghost block's input). O(1).
fn check_columns(columns: &RowPartition, ncols: usize) -> Result<()> {
    if ncols != columns.rows() {
        return Err(Error::shape(
            "ghost_block (the rows' columns vs the partition)",
            columns.rows(),
            ncols,
        ));
    }
    Ok(())
}

/// [`ghost_block`] of rows that hold only entries outside the rank's
/// columns (`outside`, global numbers, by its non-empty rows): the ghost
/// columns are its columns, sorted, each once, and the block is `outside`
/// with each column renumbered by them, its rows, row pointers and values
/// moved, not copied. Errors when the column count does not match `columns`
/// or an entry lies in the rank's columns. O(entries log entries), nothing
/// per row not listed.
pub(crate) fn ghost_block_of_outside<T: Scalar>(
    columns: &RowPartition,
    rank: usize,
    outside: GhostRows<T>,
) -> Result<(GhostRows<T>, Vec<usize>)> {
    check_columns(columns, outside.ncols())?;
    let own = columns.range(rank);
    if outside
        .block()
        .col_idx()
        .par_iter()
        .any(|&c| own.contains(&(c as usize)))
    {
        return Err(Error::InvalidArgument(
            "ghost block: an entry given as outside lies in the rank's columns".into(),
        ));
    }
    let ghost_cols = ghost_columns(&own, outside.block());
    let ghost = outside.map_block(|block| {
        let (nrows, _, ptr, cols, vals) = block.into_parts();
        let cols = cols
            .par_iter()
            .map(|&c| {
                ghost_cols
                    .binary_search(&(c as usize))
                    .expect("every ghost was listed") as u32
            })
            .collect();
        Csr::try_new_allow_nonfinite(nrows, ghost_cols.len(), ptr, cols, vals)
    })?;
    Ok((ghost, ghost_cols))
}

/// The largest magnitude of `rows`' values (0 without values, NaN where one
/// is NaN). O(nnz), in parallel.
pub(crate) fn largest_magnitude(rows: &Csr<f64>) -> f64 {
    rows.values()
        .par_iter()
        .map(|v| v.abs())
        .reduce(|| 0.0, larger)
}

/// The larger of `a` and `b`, NaN where either is (so a NaN entry is never
/// taken for a value within a range). O(1).
pub(crate) fn larger(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Rows per task of the row-parallel loops that write a CSR matrix's arrays
/// ([`task_slices`]).
pub(crate) const TASK_ROWS: usize = 4096;

/// `data` (laid out by the row pointers `ptr`; `data.len()` its last entry)
/// cut into one mutable slice per task of [`TASK_ROWS`] rows: task t holds
/// rows t TASK_ROWS.. from `ptr[t TASK_ROWS]` on. O(rows / TASK_ROWS).
pub(crate) fn task_slices<'a, X>(data: &'a mut [X], ptr: &[usize]) -> Vec<&'a mut [X]> {
    let n = ptr.len().saturating_sub(1);
    let mut rest = data;
    let mut out = Vec::with_capacity(n.div_ceil(TASK_ROWS));
    for first in (0..n).step_by(TASK_ROWS) {
        let end = (first + TASK_ROWS).min(n);
        let (task, tail) = std::mem::take(&mut rest).split_at_mut(ptr[end] - ptr[first]);
        out.push(task);
        rest = tail;
    }
    out
}

/// Who exchanges what with whom in a halo exchange; built once per matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaloPlan {
    /// Per neighbour that needs owned entries: its rank and the local indices
    /// it needs, in the order it numbers them.
    sends: Vec<(usize, Vec<usize>)>,
    /// Per neighbour the ghosts come from: its rank and the ghost range.
    recvs: Vec<(usize, Range<usize>)>,
    /// All sent indices, concatenated in the order of `sends`.
    packed: Pack,
    n_ghost: usize,
    /// Whether any rank has ghosts (the same on every rank).
    coupled: bool,
}

impl HaloPlan {
    /// Builds the plan for a rank whose ghost columns are `ghost_cols` (global
    /// indices, increasing, none owned by the rank). Collective: every rank
    /// calls it; one allgather of a count per rank pair, then one exchange of
    /// the index lists between neighbours. Errors when a ghost lies outside
    /// the partition or on the rank itself, or the partition does not have one
    /// rank per process.
    pub fn build(
        comm: &dyn Communicator,
        partition: &RowPartition,
        ghost_cols: &[usize],
    ) -> Result<Self> {
        let (rank, size) = (comm.rank(), comm.size());
        partition.check(partition.rows(), size)?;
        let own = partition.range(rank);
        // Ghosts are increasing and blocks contiguous: each owner's ghosts
        // form one range.
        let mut recvs: Vec<(usize, Range<usize>)> = Vec::new();
        for (g, &col) in ghost_cols.iter().enumerate() {
            let q = partition
                .owner(col)
                .filter(|&q| q != rank)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "halo plan: ghost column {col} of rank {rank} is outside the partition or owned by the rank itself"
                    ))
                })?;
            if g > 0 && ghost_cols[g - 1] >= col {
                return Err(Error::InvalidArgument(
                    "halo plan: ghost columns must increase".into(),
                ));
            }
            match recvs.last_mut() {
                Some((last, range)) if *last == q => range.end = g + 1,
                _ => recvs.push((q, g..g + 1)),
            }
        }
        let mut counts = vec![0.0; size];
        for (q, range) in &recvs {
            counts[*q] = range.len() as f64;
        }
        // needs[p * size + q]: how many entries rank p needs from rank q.
        let needs = comm.allgather(&counts)?;
        let senders_to_me: Vec<usize> = (0..size)
            .filter(|&p| p != rank && needs[p * size + rank] > 0.0)
            .collect();
        let requests: Vec<(usize, Vec<u8>)> = recvs
            .iter()
            .map(|(q, range)| {
                let bytes = ghost_cols[range.clone()]
                    .iter()
                    .flat_map(|&c| (c as u64).to_le_bytes())
                    .collect();
                (*q, bytes)
            })
            .collect();
        let views: Vec<(usize, &[u8])> = requests.iter().map(|(q, b)| (*q, &b[..])).collect();
        let asked = comm.exchange(PLAN_TAG, &views, &senders_to_me, &mut || Ok(()))?;
        let mut sends = Vec::with_capacity(asked.len());
        for (&p, bytes) in senders_to_me.iter().zip(&asked) {
            let idx = bytes
                .chunks_exact(8)
                .map(|c| {
                    let g = u64::from_le_bytes(c.try_into().expect("chunks of 8")) as usize;
                    if own.contains(&g) {
                        Ok(g - own.start)
                    } else {
                        Err(comm_error(format!(
                            "halo plan: rank {p} asked rank {rank} for row {g}, which it does not own"
                        )))
                    }
                })
                .collect::<Result<Vec<usize>>>()?;
            if idx.len() as f64 != needs[p * size + rank] {
                return Err(comm_error(format!(
                    "halo plan: rank {p} announced {} entries and asked for {}",
                    needs[p * size + rank],
                    idx.len()
                )));
            }
            sends.push((p, idx));
        }
        let packed = Pack::new(
            sends
                .iter()
                .flat_map(|(_, idx)| idx.iter().copied())
                .collect(),
        );
        Ok(HaloPlan {
            sends,
            recvs,
            packed,
            n_ghost: ghost_cols.len(),
            coupled: needs.iter().any(|&c| c > 0.0),
        })
    }

    /// The number of ghost values the rank receives per exchange.
    pub fn ghosts(&self) -> usize {
        self.n_ghost
    }

    /// Whether any rank has ghosts: `false` when the ranks' blocks are
    /// decoupled (one rank, or a block-diagonal matrix). The same on every rank.
    pub fn coupled(&self) -> bool {
        self.coupled
    }

    /// The number of owned values the rank sends per exchange.
    pub fn sent(&self) -> usize {
        self.packed.indices().len()
    }

    /// Per neighbour that needs owned entries: its rank and the local
    /// indices it needs, in the order it numbers them.
    pub fn sends(&self) -> &[(usize, Vec<usize>)] {
        &self.sends
    }

    /// Per neighbour the ghosts come from: its rank and the ghost range.
    pub fn recvs(&self) -> &[(usize, Range<usize>)] {
        &self.recvs
    }

    /// All sent indices, concatenated in the order of [`HaloPlan::sends`].
    pub fn packed(&self) -> &Pack {
        &self.packed
    }

    /// The ranks the rank sends to, increasing.
    pub fn send_ranks(&self) -> Vec<usize> {
        self.sends.iter().map(|(p, _)| *p).collect()
    }

    /// The ranks the rank receives from, increasing.
    pub fn recv_ranks(&self) -> Vec<usize> {
        self.recvs.iter().map(|(q, _)| *q).collect()
    }

    /// One exchange: packs the owned entries of `x` the neighbours need,
    /// sends them, runs `overlap` (the owned block's SpMV) while they travel,
    /// and returns the ghost values in ghost order. Collective among
    /// neighbours. Costs one gather on the backend, (sent + ghosts) values
    /// through the communicator.
    pub fn exchange<B: HaloBackend, T: Scalar>(
        &self,
        comm: &dyn Communicator,
        backend: &B,
        x: &B::Vector<T>,
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<T>> {
        let values = backend.gather(x, &self.packed)?;
        self.exchange_packed(comm, &values, overlap)
    }

    /// [`HaloPlan::exchange`] of a vector on the host (the setup's vectors).
    pub(crate) fn exchange_host<T: Scalar>(
        &self,
        comm: &dyn Communicator,
        x: &[T],
    ) -> Result<Vec<T>> {
        let values = pick(x, self.packed.indices())?;
        self.exchange_packed(comm, &values, &mut || Ok(()))
    }

    /// [`HaloPlan::exchange_host`] of a vector held elsewhere (a device's):
    /// `read(range)` returns its owned entries `range`, called once per
    /// range of the plan's packed entries (runs of the sent indices, gaps of
    /// at most [`Pack::GAP`] included). Collective among neighbours.
    #[cfg(feature = "cuda")]
    pub(crate) fn exchange_read<T: Scalar>(
        &self,
        comm: &dyn Communicator,
        read: &mut dyn FnMut(Range<usize>) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let mut window = Vec::new();
        for r in &self.packed.ranges {
            window.extend(read(r.clone())?);
        }
        let values: Vec<T> = self.packed.positions.iter().map(|&p| window[p]).collect();
        self.exchange_packed(comm, &values, &mut || Ok(()))
    }

    /// Sends `values` (the packed entries, in the order of the sends) and
    /// returns the ghosts that arrive, running `overlap` meanwhile.
    fn exchange_packed<T: Scalar>(
        &self,
        comm: &dyn Communicator,
        values: &[T],
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<T>> {
        let mut views: Vec<(usize, &[u8])> = Vec::with_capacity(self.sends.len());
        let mut at = 0;
        for (p, idx) in &self.sends {
            views.push((*p, scalars_as_bytes(&values[at..at + idx.len()])));
            at += idx.len();
        }
        let from = self.recv_ranks();
        let arrived = comm.exchange(HALO_TAG, &views, &from, overlap)?;
        let mut ghosts = vec![T::zero(); self.n_ghost];
        for ((q, range), bytes) in self.recvs.iter().zip(&arrived) {
            let dst = scalars_as_bytes_mut(&mut ghosts[range.clone()]);
            if dst.len() != bytes.len() {
                return Err(comm_error(format!(
                    "halo: rank {q} sent {} bytes for {} ghosts",
                    bytes.len(),
                    range.len()
                )));
            }
            dst.copy_from_slice(bytes);
        }
        Ok(ghosts)
    }

    /// The rows of a matrix B whose rows are split like the columns this plan
    /// was built for: the rows the rank's ghost columns name, in ghost order
    /// (the ghost rows an aggregation setup needs for P, A P or R (A P)), B
    /// having `ncols` columns and `rows(idx)` giving B's owned rows `idx` (in
    /// that order; from the host, or gathered where a backend holds them),
    /// once per neighbour that asked for rows: one message each way. An
    /// error of `rows` on any rank is every rank's error (before the
    /// exchange, so no rank waits for its rows). Collective: every rank of
    /// `comm` calls it. O(the rows' nnz) plus what `rows` costs.
    pub(crate) fn exchange_rows_with<T: Scalar>(
        &self,
        comm: &dyn Communicator,
        ncols: usize,
        rows: impl Fn(&[usize]) -> Result<Csr<T>>,
    ) -> Result<Csr<T>> {
        let made = self
            .sends
            .iter()
            .map(|(p, idx)| Ok((*p, crate::scatter::encode(&rows(idx)?, &[]))))
            .collect::<Result<Vec<(usize, Vec<u8>)>>>();
        let messages = crate::comm::agree(comm, made)?;
        let views: Vec<(usize, &[u8])> = messages.iter().map(|(p, m)| (*p, &m[..])).collect();
        let arrived = comm.exchange(ROWS_TAG, &views, &self.recv_ranks(), &mut || Ok(()))?;
        let mut parts = Vec::with_capacity(arrived.len());
        for ((q, range), bytes) in self.recvs.iter().zip(&arrived) {
            let (rows, _) = crate::scatter::decode::<T>(bytes, ncols)?;
            if rows.nrows() != range.len() {
                return Err(comm_error(format!(
                    "halo rows: rank {q} sent {} rows for {} ghosts",
                    rows.nrows(),
                    range.len()
                )));
            }
            parts.push(rows);
        }
        stack_rows(&parts, ncols)
    }
}

/// The matrices of `parts` (each with `ncols` columns) one below the other.
/// O(nnz), the arrays copied in parallel.
pub(crate) fn stack_rows<T: Scalar, M: std::borrow::Borrow<Csr<T>>>(
    parts: &[M],
    ncols: usize,
) -> Result<Csr<T>> {
    const PIECE: usize = 1 << 16;
    let nrows = parts.iter().map(|p| p.borrow().nrows()).sum();
    let nnz = parts.iter().map(|p| p.borrow().nnz()).sum();
    let mut ptr = Vec::with_capacity(nrows + 1);
    ptr.push(0);
    let (mut cols, mut vals) = (vec![0u32; nnz], vec![T::zero(); nnz]);
    let mut at = 0;
    for p in parts {
        let p = p.borrow();
        if p.ncols() != ncols {
            return Err(Error::shape("stack_rows", ncols, p.ncols()));
        }
        ptr.par_extend(p.row_ptr()[1..].par_iter().map(|&e| at + e));
        let end = at + p.nnz();
        cols[at..end]
            .par_chunks_mut(PIECE)
            .zip(p.col_idx().par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
        vals[at..end]
            .par_chunks_mut(PIECE)
            .zip(p.values().par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
        at = end;
    }
    Csr::try_new_allow_nonfinite(nrows, ncols, ptr, cols, vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ghost block of `n` rows whose row i holds one entry where `full(i)`.
    fn block(n: usize, full: impl Fn(usize) -> bool) -> Csr<f64> {
        let mut ptr = vec![0];
        let mut col = Vec::new();
        for i in 0..n {
            if full(i) {
                col.push(0u32);
            }
            ptr.push(col.len());
        }
        let val = vec![1.0; col.len()];
        Csr::try_new(n, 1, ptr, col, val).unwrap()
    }

    #[test]
    fn split_blocks_give_back_every_row() {
        // A 2-D Laplacian with a long-range coupling per row, rows of rank 1
        // of three: owned and ghost entries mapped back give each row.
        let a = gpuq_sparse::generators::laplace2d::<f64>(12);
        let n = a.nrows();
        let (mut ptr, mut col, mut val) = (vec![0usize], Vec::new(), Vec::new());
        for i in 0..n {
            let (c, v) = a.row(i);
            let far = ((i * 37) % n) as u32;
            let mut row: Vec<(u32, f64)> = c.iter().copied().zip(v.iter().copied()).collect();
            if !c.contains(&far) {
                row.push((far, 0.25));
            }
            row.sort_by_key(|e| e.0);
            col.extend(row.iter().map(|e| e.0));
            val.extend(row.iter().map(|e| e.1));
            ptr.push(col.len());
        }
        let a = Csr::try_new(n, n, ptr, col, val).unwrap();
        let part = RowPartition::contiguous(n, 3).unwrap();
        let own = part.range(1);
        let rows = a.select_rows(&own.clone().collect::<Vec<_>>()).unwrap();
        let split = split_rows(&part, 1, &rows).unwrap();
        assert!(split.ghost_cols.windows(2).all(|w| w[0] < w[1]));
        for i in 0..rows.nrows() {
            let (oc, ov) = split.owned.row(i);
            let (gc, gv) = split.ghost.row(i);
            let mut got: Vec<(usize, f64)> = oc
                .iter()
                .map(|&c| c as usize + own.start)
                .chain(gc.iter().map(|&g| split.ghost_cols[g as usize]))
                .zip(ov.iter().chain(gv).copied())
                .collect();
            got.sort_by_key(|e| e.0);
            let (c, v) = rows.row(i);
            let want: Vec<(usize, f64)> = c
                .iter()
                .map(|&c| c as usize)
                .zip(v.iter().copied())
                .collect();
            assert_eq!(got, want, "row {i}");
        }
        // The extended rows written in the same pass: each row's owned
        // entries, then its ghost entries numbered after the owned columns;
        // the split itself is the one split_rows gives. On every rank of
        // three, and over the columns of a rectangular partition.
        for r in 0..3 {
            let rows = a.select_rows(&part.range(r).collect::<Vec<_>>()).unwrap();
            let (split, ext) = split_columns_extended(&part, r, &rows).unwrap();
            let plain = split_rows(&part, r, &rows).unwrap();
            // The ghost block alone: the same ghosts, nothing else written.
            let ghosts = split_rows_extended(&part, r, &rows, false).unwrap();
            assert!(ghosts.owned.is_none() && ghosts.ext.is_none());
            let by_rows = GhostRows::of_csr(&split.ghost).unwrap();
            assert_eq!(
                (&ghosts.ghost, &ghosts.ghost_cols, ghosts.largest),
                (&by_rows, &split.ghost_cols, None)
            );
            assert_eq!(ghosts.ghost.to_csr().unwrap(), split.ghost);
            // Everything: the same blocks and extended rows, the owned block
            // their leading columns.
            let full = split_rows_extended(&part, r, &rows, true).unwrap();
            assert_eq!(
                (full.owned.as_ref(), &full.ghost, &full.ghost_cols),
                (Some(&split.owned), &by_rows, &split.ghost_cols)
            );
            assert_eq!(full.ext.as_ref(), Some(&ext));
            assert_eq!(full.largest, Some(largest_magnitude(&rows)));
            assert_eq!(
                leading_columns(&ext, split.owned.ncols()).unwrap(),
                split.owned
            );
            assert_eq!(
                (&split.owned, &split.ghost, &split.ghost_cols),
                (&plain.owned, &plain.ghost, &plain.ghost_cols)
            );
            let n_own = split.owned.ncols() as u32;
            assert_eq!(
                ext.shape(),
                (rows.nrows(), split.owned.ncols() + split.ghost.ncols())
            );
            for i in 0..rows.nrows() {
                let ((oc, ov), (gc, gv)) = (split.owned.row(i), split.ghost.row(i));
                let want_c: Vec<u32> = oc
                    .iter()
                    .copied()
                    .chain(gc.iter().map(|&g| g + n_own))
                    .collect();
                let want_v: Vec<f64> = ov.iter().chain(gv).copied().collect();
                assert_eq!(ext.row(i), (&want_c[..], &want_v[..]), "rank {r}, row {i}");
            }
        }
        let wide = RowPartition::from_counts(&[100, 0, n - 100]).unwrap();
        for r in 0..3 {
            let (split, ext) = split_columns_extended(&wide, r, &a).unwrap();
            assert_eq!(split.owned, split_columns(&wide, r, &a).unwrap().owned);
            assert_eq!(ext.nnz(), a.nnz());
        }
    }

    /// The entries of `rows` outside `own`, with their global columns.
    fn outside_entries(rows: &Csr<f64>, own: &Range<usize>) -> Csr<f64> {
        let mut coo = gpuq_sparse::Coo::new(rows.nrows(), rows.ncols());
        for i in 0..rows.nrows() {
            let (c, v) = rows.row(i);
            for (&j, &x) in c.iter().zip(v) {
                if !own.contains(&(j as usize)) {
                    coo.push(i, j as usize, x).unwrap();
                }
            }
        }
        Csr::from_coo(&coo).unwrap()
    }

    /// The ghost block alone (one counting pass, only the rows with ghosts
    /// written) is the full split's, on rows enough for many parallel
    /// tasks, with couplings below and above every rank's columns.
    #[test]
    fn the_ghost_block_alone_is_the_full_splits_on_many_rows() {
        let a = gpuq_sparse::generators::laplace3d::<f64>(22);
        let n = a.nrows();
        let mut coo = gpuq_sparse::Coo::new(n, n);
        for i in 0..n {
            let (c, v) = a.row(i);
            for (&j, &x) in c.iter().zip(v) {
                coo.push(i, j as usize, x).unwrap();
            }
            if i % 5 == 0 {
                coo.push(i, (i * 7919) % n, 0.5).unwrap();
            }
        }
        let a = Csr::from_coo(&coo).unwrap();
        let part = RowPartition::contiguous(n, 3).unwrap();
        for r in 0..3 {
            let rows = a.select_rows(&part.range(r).collect::<Vec<_>>()).unwrap();
            let full = split_rows(&part, r, &rows).unwrap();
            let (ghost, ghost_cols) = ghost_block(&part, r, &rows).unwrap();
            assert!(ghost.nnz() > 0);
            assert_eq!(
                (&ghost, &ghost_cols),
                (&full.ghost, &full.ghost_cols),
                "rank {r}"
            );
            // The same block from the rows' outside entries alone (global
            // columns), as a backend cuts them; rows with an inside entry
            // are refused.
            let outside = outside_entries(&rows, &part.range(r));
            let outside = GhostRows::of_csr(&outside).unwrap();
            let split = split_outside(&part, r, outside).unwrap();
            assert_eq!(split.ghost.to_csr().unwrap(), ghost);
            assert_eq!(split.ghost_cols, ghost_cols);
            let inside = GhostRows::of_csr(&rows).unwrap();
            assert!(split_outside(&part, r, inside).is_err());
        }
    }

    #[test]
    fn a_block_of_rows_is_copied_or_refused_past_the_end() {
        let be = CpuBackend::new();
        let whole = be.upload(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let mut mine = be.zeros::<f64>(2).unwrap();
        HaloBackend::copy_rows_from(&be, &whole, 3, &mut mine).unwrap();
        assert_eq!(be.download(&mine).unwrap(), vec![4.0, 5.0]);
        let err = HaloBackend::copy_rows_from(&be, &whole, 4, &mut mine).unwrap_err();
        assert!(err.to_string().contains("copy_rows_from"), "{err}");
    }

    #[test]
    fn ghost_runs_cover_every_non_empty_row_in_few_ranges() {
        assert!(ghost_row_runs(&block(10, |_| false)).is_empty());
        // a slab: its first and last planes, far apart (gaps of 20 or more
        // rows kept)
        let slab = block(100, |i| !(10..90).contains(&i));
        assert_eq!(row_runs(&slab, 20), vec![0..10, 90..100]);
        // the same with a short gap: one range
        let near = block(100, |i| !(10..30).contains(&i));
        assert_eq!(row_runs(&near, 25), vec![0..100]);
        assert_eq!(ghost_row_runs(&slab), vec![0..100]);
        // scattered rows: at most GHOST_RUNS ranges, cut at the widest gaps
        let g = 20;
        let step = |i: usize| if i < 20 * g { 3 } else { 2 * g + i % 7 };
        let scattered = block(60 * g, |i| i % step(i) == 0);
        let runs = row_runs(&scattered, g);
        assert!(runs.len() <= GHOST_RUNS);
        assert!(runs.windows(2).all(|w| w[0].end < w[1].start));
        for i in (0..60 * g).filter(|&i| i % step(i) == 0) {
            assert!(runs.iter().any(|r| r.contains(&i)), "row {i} left out");
        }
        // the rows below 20 g (gaps of 2) stay in one range
        assert!(runs.iter().any(|r| r.start == 0 && r.end > 19 * g));
    }
    use crate::ThreadComm;
    use gpuq_core::Backend;
    use gpuq_sparse::generators;

    /// The rows `range` of `a` (global columns).
    fn rows_of(a: &Csr<f64>, range: Range<usize>) -> Csr<f64> {
        let mut ptr = vec![0];
        let (mut col, mut val) = (Vec::new(), Vec::new());
        for i in range.clone() {
            let (c, v) = a.row(i);
            col.extend_from_slice(c);
            val.extend_from_slice(v);
            ptr.push(col.len());
        }
        Csr::try_new(range.len(), a.ncols(), ptr, col, val).unwrap()
    }

    /// Plans and one exchange of x = global index on every rank of `p`;
    /// returns per rank (plan, ghost values).
    fn plans(a: &Csr<f64>, p: &RowPartition) -> Vec<(HaloPlan, Vec<f64>)> {
        ThreadComm::run(p.ranks(), |c| {
            let range = p.range(c.rank());
            let split = split_rows(p, c.rank(), &rows_of(a, range.clone())).unwrap();
            let plan = HaloPlan::build(&c, p, &split.ghost_cols).unwrap();
            let cpu = CpuBackend::new();
            let x = cpu
                .upload(&range.map(|i| i as f64).collect::<Vec<_>>())
                .unwrap();
            let ghosts = plan.exchange(&c, &cpu, &x, &mut || Ok(())).unwrap();
            let expect: Vec<f64> = split.ghost_cols.iter().map(|&g| g as f64).collect();
            assert_eq!(ghosts, expect);
            (plan, ghosts)
        })
        .unwrap()
    }

    #[test]
    fn a_pack_covers_its_entries_with_few_ranges() {
        let pack = Pack::new(vec![40, 3, 5, 100, 4, 41]);
        assert_eq!(pack.ranges(), &[3..6, 40..42, 100..101]);
        assert_eq!(pack.staged_len(), 6);
        let staged = [3, 4, 5, 40, 41, 100];
        assert_eq!(
            pack.pick_staged(&staged).unwrap(),
            vec![40, 3, 5, 100, 4, 41]
        );
        assert!(pack.pick_staged(&staged[1..]).is_err());
        // Entries at most GAP apart share a range.
        let near = Pack::new(vec![0, Pack::GAP + 1]);
        assert_eq!(near.ranges().len(), 1);
        assert_eq!(near.ranges()[0], 0..Pack::GAP + 2);
        assert!(Pack::new(Vec::new()).ranges().is_empty());
    }

    #[test]
    fn a_tridiagonal_matrix_has_left_and_right_neighbours() {
        let a = generators::laplace1d::<f64>(10, 0.0);
        let p = RowPartition::contiguous(10, 3).unwrap();
        let out = plans(&a, &p);
        assert_eq!(out[0].0.recv_ranks(), vec![1]);
        assert_eq!(out[1].0.recv_ranks(), vec![0, 2]);
        assert_eq!(out[1].0.send_ranks(), vec![0, 2]);
        assert_eq!(out[2].1, vec![6.0]);
        assert_eq!(out[1].0.sent(), 2);
    }

    #[test]
    fn empty_ranks_and_ranks_without_neighbours_exchange_nothing() {
        // Block diagonal: two decoupled 1D Laplacians; rank 1 owns no rows.
        let n = 8;
        let a = generators::laplace1d::<f64>(n, 0.0);
        let full = a.to_coo();
        let mut coo = gpuq_sparse::Coo::with_capacity(n, n, full.nnz());
        for (i, j, v) in full.triplets() {
            if (i < 4) == (j < 4) {
                coo.push(i, j, v).unwrap();
            }
        }
        let a = Csr::from_coo(&coo).unwrap();
        let p = RowPartition::from_counts(&[4, 0, 4]).unwrap();
        let out = plans(&a, &p);
        for (plan, ghosts) in &out {
            assert!(plan.recv_ranks().is_empty() && plan.send_ranks().is_empty());
            assert!(ghosts.is_empty());
        }
        // Coupled, with the empty rank in the middle: ranks 0 and 2 talk past it.
        let a = generators::laplace1d::<f64>(n, 0.0);
        let out = plans(&a, &p);
        assert_eq!(out[0].0.recv_ranks(), vec![2]);
        assert!(out[1].0.recv_ranks().is_empty() && out[1].0.send_ranks().is_empty());
        assert_eq!(out[2].1, vec![3.0]);
    }

    #[test]
    fn rows_that_do_not_match_the_partition_are_errors() {
        let a = generators::laplace1d::<f64>(6, 0.0);
        let p = RowPartition::contiguous(6, 2).unwrap();
        assert!(split_rows(&p, 0, &rows_of(&a, 0..4)).is_err());
        let wrong_cols = Csr::<f64>::identity(3);
        assert!(split_rows(&p, 0, &wrong_cols).is_err());
        let split = split_rows(&p, 0, &rows_of(&a, 0..3)).unwrap();
        assert_eq!(split.ghost_cols, vec![3]);
        assert_eq!(
            split.owned.nnz() + split.ghost.nnz(),
            rows_of(&a, 0..3).nnz()
        );
        // A plan for a communicator of another size.
        let err = ThreadComm::run(3, |c| HaloPlan::build(&c, &p, &[]).is_err()).unwrap();
        assert_eq!(err, vec![true; 3]);
    }
}
