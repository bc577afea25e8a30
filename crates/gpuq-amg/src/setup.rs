//! Where the setup's heavy steps run: [`SetupKernels`], a backend's
//! aggregation, block diagonals, prolongator smoothing and Galerkin product.
//! Every method has a default body, the host code of this crate (Rayon), so
//! any backend builds a hierarchy at once; the CUDA backend (feature `cuda`)
//! overrides them with device kernels (`kernels-rs/src/device/amg_setup.rs`)
//! that build the same aggregates and the same matrices to rounding, and
//! keeps what it builds on the device ([`LevelMatrix`] with a resident copy):
//! nothing but the aggregates, the block diagonals and the coarsest matrix
//! comes back to the host during the setup.

use crate::aggregate::aggregates;
use crate::blockdiag::BlockDiagonal;
use crate::galerkin::galerkin;
use crate::node_aggregates::NodeAggregates;
use crate::prolong::{smooth, tentative};
use crate::resident::LevelMatrix;
use crate::spectral::rho_dinv_a;
use crate::strength::strength_graph;
use gpuq_core::Result;
use gpuq_cpu::CpuBackend;
use gpuq_sparse::Csr;

/// The steps of a smoothed-aggregation level a backend may run where its data
/// lives. `Level` is a level's matrix as the backend computes with it during
/// the level's setup ([`SetupKernels::level`]); the default bodies ignore it
/// and compute on the host copy ([`LevelMatrix::host`], downloaded if the
/// matrix lives on the backend only).
pub trait SetupKernels {
    /// A level's matrix where this backend computes (`()` for the host).
    type Level;

    /// The backend's copy of the level matrix `a`: its resident copy where
    /// it has one, else an upload (kept in `a` for the cycle). Cost: an
    /// upload (device backends, once per matrix) or nothing.
    fn level(&self, a: &LevelMatrix) -> Result<Self::Level>;

    /// The finest level's matrix: a copy of `a` on the host (arrays copied in
    /// parallel, O(nnz)) by default; a device backend may hold it on the
    /// device only (one upload; [`LevelMatrix::host`] then copies it back
    /// when a host step asks).
    fn finest(&self, a: &Csr<f64>) -> Result<LevelMatrix> {
        Ok(LevelMatrix::from_host(a.par_clone()))
    }

    /// The finest level's matrix from `a`, a host matrix the caller hands
    /// over ([`LevelMatrix::from_host`]): `a` itself by default, where the
    /// backend computes on the host (no copy); a device backend uploads it
    /// as [`SetupKernels::finest`] does. Cost: nothing, or that upload.
    fn finest_handed_over(&self, a: LevelMatrix) -> Result<LevelMatrix> {
        Ok(a)
    }

    /// Whether `a` has the pattern (shape, row pointers, columns) of
    /// `finest`, the finest matrix of a hierarchy this backend built (for
    /// `Hierarchy::update_values_on`). Default: compared with the host copy
    /// (a download where the level lives only on a device). O(nrows + nnz).
    fn same_pattern(&self, finest: &LevelMatrix, a: &Csr<f64>) -> Result<bool> {
        host_same_pattern(finest, a)
    }

    /// The input checks of a build run where the finest matrix `finest`
    /// (the input, blocks of `bs`) lives: `Some((null-space basis,
    /// symmetric))`, the same as the host's checks, or `None` where this
    /// backend leaves them to the host (the default: they then run on the
    /// host beside the setup). Errors on a non-finite entry (the host's
    /// message).
    fn input_checks(
        &self,
        _finest: &LevelMatrix,
        _bs: usize,
    ) -> Result<Option<(Vec<Vec<f64>>, bool)>> {
        Ok(None)
    }

    /// The backend that runs the setup, for reports (`cpu`, `cuda`).
    fn setup_name(&self) -> &'static str {
        "cpu"
    }

    /// The aggregates of smoothed aggregation: the symmetrised strong graph of
    /// the bs x bs block norms with threshold `eps`, then the distance-2
    /// maximal-independent-set aggregation, isolated nodes in none
    /// ([`crate::aggregate::NOT_AGGREGATED`]). Returns each node's aggregate
    /// and the count, where the backend made them. Default:
    /// [`strength_graph`] and [`aggregates`] on the host, O(nnz) per round.
    fn aggregates(
        &self,
        a: &LevelMatrix,
        _level: &Self::Level,
        bs: usize,
        eps: f64,
    ) -> Result<NodeAggregates> {
        let (agg, count) = aggregates(&strength_graph(a.host()?, bs, eps)?);
        Ok(NodeAggregates::from_host(agg, count))
    }

    /// The bs x bs diagonal blocks of `a` ([`BlockDiagonal::of`]; with `l1`
    /// the l1-Jacobi matrix's). Default: on the host, O(nnz).
    fn block_diagonal(
        &self,
        a: &LevelMatrix,
        _level: &Self::Level,
        bs: usize,
        l1: bool,
    ) -> Result<BlockDiagonal> {
        Ok(BlockDiagonal::of(a.host()?, bs, l1))
    }

    /// The inverse of `d`'s blocks ([`BlockDiagonal::inverse`], whose errors
    /// it gives). Default: on the host, O(n bs^3).
    fn inverse_blocks(&self, d: &BlockDiagonal) -> Result<BlockDiagonal> {
        d.inverse()
    }

    /// The Lanczos estimate of rho(D^-1 A) (`steps` steps), D the block
    /// diagonal of `a` and `dinv` its inverse. Default:
    /// [`crate::spectral::rho_dinv_a`] on the host, O(steps nnz).
    fn rho_dinv_a(
        &self,
        a: &LevelMatrix,
        _level: &Self::Level,
        d: &BlockDiagonal,
        dinv: &BlockDiagonal,
        steps: usize,
    ) -> Result<f64> {
        rho_dinv_a(a.host()?, d, dinv, steps)
    }

    /// The tentative prolongator of the aggregates `agg` (bs rows per node)
    /// and the near-null-space vectors `nns`, and the coarse level's vectors
    /// ([`tentative`]). Default: on the host (the aggregates brought there),
    /// O(nrows k^2).
    fn tentative(
        &self,
        agg: &NodeAggregates,
        bs: usize,
        nns: &[Vec<f64>],
    ) -> Result<(LevelMatrix, Vec<Vec<f64>>)> {
        host_tentative(agg.host()?, agg.count(), bs, nns)
    }

    /// The smoothed prolongator P = (I - omega D^-1 A) P_T, omega = 4 / (3
    /// rho). Default: [`smooth`], one fused row-parallel pass on the host,
    /// O(flops(A P_T) bs).
    fn smoothed_prolongator(
        &self,
        a: &LevelMatrix,
        _level: &Self::Level,
        dinv: &BlockDiagonal,
        rho: f64,
        pt: &LevelMatrix,
    ) -> Result<LevelMatrix> {
        Ok(smooth(a.host()?, dinv, rho, pt.host()?)?.into())
    }

    /// R = P^T and the Galerkin product R (A P). Default: the host's
    /// parallel transpose ([`gpuq_sparse::par_transpose`]) and two Gustavson products,
    /// O(flops(A P) + flops(R A P)).
    fn galerkin(
        &self,
        a: &LevelMatrix,
        _level: &Self::Level,
        p: &LevelMatrix,
    ) -> Result<(LevelMatrix, LevelMatrix)> {
        let p = p.host()?;
        let r = gpuq_sparse::par_transpose(p)?;
        let ac = galerkin(&r, a.host()?, p)?;
        Ok((r.into(), ac.into()))
    }

    /// `ac` with a 1 on the diagonal of each row whose stored entries are
    /// all zero ([`crate::galerkin::with_unit_rows`]). Default: on the host,
    /// O(nnz).
    fn fix_empty_rows(&self, ac: LevelMatrix) -> Result<LevelMatrix> {
        let host = ac.host()?;
        let empty = crate::galerkin::empty_rows(host);
        if empty.is_empty() {
            return Ok(ac);
        }
        Ok(crate::galerkin::with_unit_rows(host, &empty)?.into())
    }

    /// Waits until the work this backend has queued so far is done, so that
    /// each phase of the setup's timings holds its own work and not the
    /// tail of the one before (a device backend's launches return before
    /// their kernels finish). Default: nothing (host steps are done when
    /// they return). Cost: a device synchronisation.
    fn wait(&self) -> Result<()> {
        Ok(())
    }
}

/// [`SetupKernels::same_pattern`] on the host: `finest`'s host copy
/// against `a`.
fn host_same_pattern(finest: &LevelMatrix, a: &Csr<f64>) -> Result<bool> {
    let old = finest.host()?;
    Ok(old.shape() == a.shape() && old.row_ptr() == a.row_ptr() && old.col_idx() == a.col_idx())
}

/// [`tentative`] on the host as [`SetupKernels::tentative`] returns it.
fn host_tentative(
    agg: &[u32],
    naggs: usize,
    bs: usize,
    nns: &[Vec<f64>],
) -> Result<(LevelMatrix, Vec<Vec<f64>>)> {
    let t = tentative(agg, naggs, bs, nns)?;
    Ok((t.p.into(), t.coarse_null))
}

/// Backends that run the whole setup on the host: `impl HostSetup for
/// MyBackend {}` gives them [`SetupKernels`] with every default body (a
/// level needs no copy), so any backend builds hierarchies with one line.
pub trait HostSetup {}

impl<B: HostSetup> SetupKernels for B {
    type Level = ();

    fn level(&self, _a: &LevelMatrix) -> Result<()> {
        Ok(())
    }
}

/// The CPU backend: the host setup.
impl HostSetup for CpuBackend {}

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::SetupKernels;
    use crate::blockdiag::BlockDiagonal;
    use crate::node_aggregates::NodeAggregates;
    use crate::resident::{LevelMatrix, ResidentMatrix};
    use crate::spectral::{lanczos_rho, LanczosOps};
    use gpuq_core::Result;
    use gpuq_cuda::{CudaBackend, DeviceAggregates, SetupCsr, SetupOps, SetupVec};

    /// Levels of at most this many rows run their Lanczos steps in one
    /// launch ([`CudaBackend::setup_replay`]). Measured on the H200 machine
    /// (P2 Poisson and jumping coefficients, `docs/benchmarks.md`): the
    /// levels of 316 to 15490 rows took 0.46-0.62 ms instead of 0.75-0.86
    /// ms; on the finest level of 185193 rows the grid barriers cost more
    /// than the launches they save (1.81 against 1.49 ms).
    const REPLAY_ROWS: usize = 50_000;
    use gpuq_sparse::Csr;
    use std::any::Any;
    use std::cell::{Cell, RefCell};
    use std::sync::Arc;

    /// [`LanczosOps`] on the device: the level matrix, block size and the
    /// blocks of D and D^-1 uploaded once; the recurrence's scalars in slots
    /// of a device vector (`scalars`, taken in turn: `next`), the inner
    /// products' chunk partials in `partial`, so no step waits for the host.
    /// With `recorded`, the steps' operations are recorded and run by one
    /// launch when the scalars are read ([`CudaBackend::setup_replay`]),
    /// instead of a launch each.
    struct DeviceLanczos<'a> {
        g: &'a CudaBackend,
        a: &'a SetupCsr,
        bs: usize,
        d: Arc<SetupVec>,
        dinv: Arc<SetupVec>,
        scalars: RefCell<SetupVec>,
        next: Cell<usize>,
        partial: RefCell<SetupVec>,
        recorded: Option<RefCell<SetupOps>>,
    }

    impl DeviceLanczos<'_> {
        /// The next free slot of `scalars` (each holds 0 until written).
        fn slot(&self) -> Result<usize> {
            let at = self.next.get();
            if at >= self.scalars.borrow().len() {
                return Err(gpuq_core::Error::InvalidArgument(format!(
                    "device Lanczos: more than {at} scalars"
                )));
            }
            self.next.set(at + 1);
            Ok(at)
        }
    }

    impl LanczosOps for DeviceLanczos<'_> {
        type V = SetupVec;
        type S = usize;

        fn start(&self) -> Result<SetupVec> {
            self.g.setup_lanczos_start(self.a.shape().0)
        }

        fn zeros(&self) -> Result<SetupVec> {
            self.g.setup_vec_zeros(self.a.shape().0)
        }

        fn a_mul(&self, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            match &self.recorded {
                Some(ops) => self.g.record_spmv(&mut ops.borrow_mut(), self.a, x, y),
                None => self.g.setup_spmv(self.a, x, y),
            }
        }

        fn d_mul(&self, inverse: bool, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            let blocks = if inverse { &self.dinv } else { &self.d };
            match &self.recorded {
                Some(ops) => {
                    let mut ops = ops.borrow_mut();
                    self.g.record_block_mul(&mut ops, self.bs, blocks, x, y)
                }
                None => self.g.setup_block_mul(self.bs, blocks, x, y),
            }
        }

        fn dot(&self, x: &SetupVec, y: &SetupVec, root: bool) -> Result<usize> {
            let at = self.slot()?;
            let (mut partial, mut scalars) = (self.partial.borrow_mut(), self.scalars.borrow_mut());
            let slot = (&mut *scalars, at);
            match &self.recorded {
                Some(ops) => {
                    let mut ops = ops.borrow_mut();
                    self.g
                        .record_dot(&mut ops, (x, y), &mut partial, root, slot)?
                }
                None => self.g.setup_dot_into((x, y), &mut partial, root, slot)?,
            }
            Ok(at)
        }

        fn zero(&self) -> Result<usize> {
            self.slot()
        }

        fn update(
            &self,
            w: &mut SetupVec,
            al: usize,
            v: &SetupVec,
            b: usize,
            u: &SetupVec,
        ) -> Result<()> {
            let at = (&*self.scalars.borrow(), al, b);
            match &self.recorded {
                Some(ops) => {
                    let mut ops = ops.borrow_mut();
                    self.g.record_lanczos_update(&mut ops, w, at, v, u)
                }
                None => self.g.setup_lanczos_update(w, at, v, u),
            }
        }

        fn divide(&self, w: &mut SetupVec, b: usize) -> Result<()> {
            let at = (&*self.scalars.borrow(), b);
            match &self.recorded {
                Some(ops) => self.g.record_divide(&mut ops.borrow_mut(), w, at),
                None => self.g.setup_divide(w, at),
            }
        }

        fn peek(&self, _: usize) -> Option<f64> {
            None
        }

        /// Runs the recorded steps first, once (they are taken), while
        /// every vector they name is alive (`lanczos_rho` reads the values
        /// before it drops its vectors).
        fn values(&self, s: &[usize]) -> Result<Vec<f64>> {
            if let Some(ops) = &self.recorded {
                // SAFETY: the operations name the vectors of the estimate in
                // progress, all still allocated, and `scalars` and `partial`.
                unsafe { self.g.setup_replay(ops.take())? };
            }
            let all = self.g.setup_vec_download(&self.scalars.borrow())?;
            Ok(s.iter().map(|&at| all[at]).collect())
        }
    }

    /// A matrix the device setup built, kept on the device in the hierarchy.
    pub(crate) struct DeviceCopy {
        pub(crate) backend: CudaBackend,
        pub(crate) m: Arc<SetupCsr>,
    }

    impl ResidentMatrix for DeviceCopy {
        fn download(&self) -> Result<Csr<f64>> {
            self.backend.setup_download(&self.m)
        }

        fn row_lengths(&self) -> Result<Vec<u32>> {
            self.backend.setup_row_lengths(&self.m)
        }

        /// Gathered on the device, only those rows downloaded
        /// ([`CudaBackend::setup_select_rows`]).
        fn rows(&self, idx: &[usize]) -> Result<Csr<f64>> {
            self.backend.setup_select_rows(&self.m, idx)
        }

        /// Counted on the device ([`CudaBackend::setup_sell_stored`]).
        fn sell_stored(&self, c: usize, sigma: usize) -> Result<usize> {
            self.backend.setup_sell_stored(&self.m, c, sigma)
        }

        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    /// A block diagonal's values on `g`'s device.
    struct DeviceBlocks {
        backend: CudaBackend,
        v: Arc<SetupVec>,
    }

    impl crate::blockdiag::ResidentBlocks for DeviceBlocks {
        /// Downloaded (`setup_vec_download`).
        fn download(&self) -> Result<Vec<f64>> {
            self.backend.setup_vec_download(&self.v)
        }

        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    /// The device copy of `d`'s blocks: the one kept in `d` (and its clones)
    /// when `g` made or uploaded it, else an upload, kept in `d` when it
    /// holds no other backend's copy. O(1) when kept, else O(n bs^2)
    /// transfer.
    pub fn device_blocks(g: &CudaBackend, d: &BlockDiagonal) -> Result<Arc<SetupVec>> {
        let mine = |r: &dyn crate::blockdiag::ResidentBlocks| {
            r.as_any()
                .downcast_ref::<DeviceBlocks>()
                .filter(|b| b.backend.same_backend(g))
                .map(|b| b.v.clone())
        };
        if let Some(v) = d.resident().and_then(mine) {
            return Ok(v);
        }
        let up = Arc::new(g.setup_vec_upload(d.blocks()?)?);
        let kept = d.resident_or_init(|| {
            Ok(Arc::new(DeviceBlocks {
                backend: g.clone(),
                v: up.clone(),
            }))
        })?;
        Ok(mine(kept).unwrap_or(up))
    }

    /// `blocks` (on the device) as a block diagonal held there: its host
    /// copy downloaded only when something asks for it
    /// ([`BlockDiagonal::blocks`]). O(1).
    pub fn kept_blocks(g: &CudaBackend, bs: usize, blocks: SetupVec) -> Result<BlockDiagonal> {
        let len = blocks.len();
        let resident = Arc::new(DeviceBlocks {
            backend: g.clone(),
            v: Arc::new(blocks),
        });
        BlockDiagonal::from_resident(bs, len, resident)
    }

    /// The inverse of `d`'s blocks on `g`'s device
    /// ([`CudaBackend::setup_block_inverse`], the host's values bit for bit),
    /// kept there ([`kept_blocks`]): `d`'s device copy (uploaded where it has
    /// none), nothing downloaded but the first singular node. Errors as
    /// [`BlockDiagonal::inverse`].
    pub fn device_inverse(g: &CudaBackend, d: &BlockDiagonal) -> Result<BlockDiagonal> {
        let bs = d.block();
        let (inv, singular) = g.setup_block_inverse(&*device_blocks(g, d)?, bs)?;
        match singular {
            Some(k) => Err(crate::blockdiag::singular_block(k, bs)),
            None => kept_blocks(g, bs, inv),
        }
    }

    /// Each node's aggregate on `g`'s device.
    struct DeviceNodeAggregates {
        backend: CudaBackend,
        kept: DeviceAggregates,
    }

    impl crate::node_aggregates::HeldAggregates for DeviceNodeAggregates {
        /// Downloaded (`setup_aggregates_download`).
        fn download(&self) -> Result<Vec<u32>> {
            self.backend.setup_aggregates_download(&self.kept)
        }

        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    /// Aggregates left on `g`'s device by
    /// [`CudaBackend::setup_aggregates_kept`] (every node in one) as
    /// aggregates held there: brought to the host only when something asks
    /// ([`NodeAggregates::host`]). Their isolated-node list is dropped. O(1).
    pub fn kept_aggregates(g: &CudaBackend, kept: DeviceAggregates) -> NodeAggregates {
        let count = kept.count;
        NodeAggregates::from_held(
            Arc::new(DeviceNodeAggregates {
                backend: g.clone(),
                kept,
            }),
            count,
        )
    }

    /// The device copy of `agg` when `g` (the same context) made it
    /// ([`kept_aggregates`]). O(1).
    pub fn device_aggregates<'a>(
        g: &CudaBackend,
        agg: &'a NodeAggregates,
    ) -> Option<&'a DeviceAggregates> {
        agg.held()?
            .as_any()
            .downcast_ref::<DeviceNodeAggregates>()
            .filter(|d| d.backend.same_backend(g))
            .map(|d| &d.kept)
    }

    /// The device copy of `a` made by `g` (the same context), if there is
    /// one: what [`device_level`] or `g`'s setup keeps. O(1).
    pub fn device_copy(g: &CudaBackend, a: &LevelMatrix) -> Option<Arc<SetupCsr>> {
        a.resident()?
            .as_any()
            .downcast_ref::<DeviceCopy>()
            .filter(|d| d.backend.same_backend(g))
            .map(|d| d.m.clone())
    }

    /// A CSR matrix already on `g`'s device (another library's arrays
    /// viewed by `gpuq_cuda::CudaBackend::foreign_csr`) as the finest level
    /// of [`crate::Hierarchy::build_on_resident`]: copied on the device into
    /// the setup's layout ([`CudaBackend::setup_copy`]), nothing through the
    /// host. O(n + nnz) on the device.
    pub fn resident_finest(g: &CudaBackend, m: &gpuq_cuda::CudaMatrix<f64>) -> Result<LevelMatrix> {
        Ok(device_level(g, g.setup_copy(m)?))
    }

    /// `m`, a matrix on `g`'s device, as a level matrix held there (the
    /// host copy made on first need, [`LevelMatrix::host`]; the cycle
    /// converts it in place, [`crate::AmgKernels::amg_level_matrix`]). O(1).
    pub fn device_level(g: &CudaBackend, m: impl Into<Arc<SetupCsr>>) -> LevelMatrix {
        let m = m.into();
        let (shape, nnz) = (m.shape(), m.nnz());
        LevelMatrix::from_resident(
            shape,
            nnz,
            Arc::new(DeviceCopy {
                backend: g.clone(),
                m,
            }),
        )
    }

    /// The setup on the device: aggregation, block diagonals of the coarse
    /// levels, prolongator smoothing (two products and a sum), transpose and
    /// Galerkin products in device kernels; P, R and the coarse operators
    /// stay on the device (the cycle converts them there).
    impl SetupKernels for CudaBackend {
        type Level = Arc<SetupCsr>;

        /// A synchronisation of the backend's stream.
        fn wait(&self) -> Result<()> {
            self.synchronize()
        }

        /// The device copy made by this setup, or an upload of the host
        /// copy, kept in `a`.
        fn level(&self, a: &LevelMatrix) -> Result<Arc<SetupCsr>> {
            if let Some(m) = device_copy(self, a) {
                return Ok(m);
            }
            let up = Arc::new(self.setup_upload(a.host()?)?);
            a.resident_or_init(|| {
                Ok(Arc::new(DeviceCopy {
                    backend: self.clone(),
                    m: up.clone(),
                }))
            })?;
            Ok(up)
        }

        /// The upload of `a`, held on the device only.
        fn finest(&self, a: &Csr<f64>) -> Result<LevelMatrix> {
            Ok(device_level(self, self.setup_upload(a)?))
        }

        /// The upload of [`SetupKernels::finest`] (the caller's host copy
        /// is not kept in the level).
        fn finest_handed_over(&self, a: LevelMatrix) -> Result<LevelMatrix> {
            self.finest(a.host()?)
        }

        /// On the device where `finest` lives there
        /// ([`CudaBackend::setup_same_pattern`]: `a`'s pattern uploaded and
        /// compared, no download), else the host's comparison.
        fn same_pattern(&self, finest: &LevelMatrix, a: &Csr<f64>) -> Result<bool> {
            match device_copy(self, finest).filter(|_| !finest.on_host()) {
                Some(m) => self.setup_same_pattern(&m, a),
                None => super::host_same_pattern(finest, a),
            }
        }

        /// On the device ([`CudaBackend::setup_input_checks`]: two passes
        /// over the finest matrix, a few values back); the basis from the
        /// flags as the host builds it. Blocks above
        /// `gpuq_kernels::amg::MAX_SETUP_BLOCK` are left to the host.
        fn input_checks(
            &self,
            finest: &LevelMatrix,
            bs: usize,
        ) -> Result<Option<(Vec<Vec<f64>>, bool)>> {
            let Some(m) = device_copy(self, finest) else {
                return Ok(None);
            };
            let Some(found) = self.setup_input_checks(&m, bs)? else {
                return Ok(None);
            };
            if !found.finite {
                // the host finds the entry for the message
                finest.host()?.check_finite()?;
            }
            let basis = crate::host_checks::kernel_basis(finest.nrows(), bs, &found.large);
            Ok(Some((basis, found.symmetric)))
        }

        fn setup_name(&self) -> &'static str {
            "cuda"
        }

        /// The device aggregation with the isolated nodes dropped there
        /// ([`CudaBackend::setup_aggregates_dropped`]), kept on the device
        /// ([`kept_aggregates`]); the host's where the device declines
        /// (block size above 8, a zero diagonal block, a block pattern that
        /// is not symmetric).
        fn aggregates(
            &self,
            a: &LevelMatrix,
            level: &Arc<SetupCsr>,
            bs: usize,
            eps: f64,
        ) -> Result<NodeAggregates> {
            match self.setup_aggregates_dropped(level, bs, eps)? {
                Some(kept) => Ok(kept_aggregates(self, kept)),
                None => {
                    let (agg, count) = crate::aggregate::aggregates(
                        &crate::strength::strength_graph(a.host()?, bs, eps)?,
                    );
                    Ok(NodeAggregates::from_host(agg, count))
                }
            }
        }

        /// The device's extraction ([`CudaBackend::setup_block_diagonal_on`],
        /// the host's sums in the host's order), kept there: the host copy
        /// is downloaded only when a host step asks for it.
        fn block_diagonal(
            &self,
            _a: &LevelMatrix,
            level: &Arc<SetupCsr>,
            bs: usize,
            l1: bool,
        ) -> Result<BlockDiagonal> {
            kept_blocks(self, bs, self.setup_block_diagonal_on(level, (0, bs), l1)?)
        }

        /// On the device ([`device_inverse`]), kept there.
        fn inverse_blocks(&self, d: &BlockDiagonal) -> Result<BlockDiagonal> {
            device_inverse(self, d)
        }

        /// The Lanczos estimate with the device's vector operations (the
        /// host's order of operations: the same estimate bit for bit), its
        /// scalars kept on the device and read once.
        fn rho_dinv_a(
            &self,
            a: &LevelMatrix,
            level: &Arc<SetupCsr>,
            d: &BlockDiagonal,
            dinv: &BlockDiagonal,
            steps: usize,
        ) -> Result<f64> {
            let n = a.nrows();
            let ops = DeviceLanczos {
                g: self,
                a: level,
                bs: d.block(),
                d: device_blocks(self, d)?,
                dinv: device_blocks(self, dinv)?,
                // The start's norm, 0, and two per step.
                scalars: RefCell::new(self.setup_vec_zeros(2 * steps.min(n) + 2)?),
                next: Cell::new(0),
                partial: RefCell::new(
                    self.setup_vec_zeros(n.div_ceil(gpuq_kernels::amg::DOT_CHUNK))?,
                ),
                recorded: (n <= REPLAY_ROWS).then(|| RefCell::new(SetupOps::new())),
            };
            lanczos_rho(&ops, n, steps)
        }

        /// On the device, kept there, the host's values bit for bit: one
        /// vector from aggregates kept on the device
        /// ([`CudaBackend::setup_tentative_single_kept`], nothing uploaded
        /// for the vector of ones) or from the host's
        /// ([`CudaBackend::setup_tentative_single`]), several by
        /// [`CudaBackend::setup_tentative_qr`] (a thread per aggregate; on
        /// the host where a node is in no aggregate) from the host's
        /// aggregates.
        fn tentative(
            &self,
            agg: &NodeAggregates,
            bs: usize,
            nns: &[Vec<f64>],
        ) -> Result<(LevelMatrix, Vec<Vec<f64>>)> {
            let (pt, coarse) = match (device_aggregates(self, agg), nns) {
                (Some(kept), [single]) => {
                    let (pt, norm) = self.setup_tentative_single_kept(kept, bs, single)?;
                    (pt, vec![norm])
                }
                (_, [single]) => {
                    let (pt, norm) =
                        self.setup_tentative_single(agg.host()?, agg.count(), bs, single)?;
                    (pt, vec![norm])
                }
                _ => self.setup_tentative_qr(agg.host()?, agg.count(), bs, nns)?,
            };
            Ok((device_level(self, pt), coarse))
        }

        /// P = P_T - omega D^-1 (A P_T) in one device pass with the host's
        /// order of operations ([`CudaBackend::setup_smoothed_prolongator`]),
        /// kept on the device (the tentative prolongator from its device
        /// copy, or uploaded).
        fn smoothed_prolongator(
            &self,
            _a: &LevelMatrix,
            level: &Arc<SetupCsr>,
            dinv: &BlockDiagonal,
            rho: f64,
            pt: &LevelMatrix,
        ) -> Result<LevelMatrix> {
            let omega = 4.0 / (3.0 * rho);
            let d_pt = self.level(pt)?;
            let blocks = device_blocks(self, dinv)?;
            let p = self.setup_smoothed_prolongator(level, dinv.block(), omega, &blocks, &d_pt)?;
            Ok(device_level(self, p))
        }

        /// R = P^T and R (A P) on the device: a transpose and two products,
        /// both results kept on the device.
        fn galerkin(
            &self,
            _a: &LevelMatrix,
            level: &Arc<SetupCsr>,
            p: &LevelMatrix,
        ) -> Result<(LevelMatrix, LevelMatrix)> {
            // a host prolongator (the seed's) is uploaded once and kept in
            // `p` for the cycle
            let d_p = self.level(p)?;
            let r = self.setup_transpose(&d_p)?;
            let ap = self.setup_spgemm(level, &d_p)?;
            let ac = self.setup_spgemm(&r, &ap)?;
            Ok((device_level(self, r), device_level(self, ac)))
        }

        /// The rows of zeros found on the device
        /// ([`CudaBackend::setup_zero_rows`], 4 bytes per row read back);
        /// a matrix that has some is fixed on the host.
        fn fix_empty_rows(&self, ac: LevelMatrix) -> Result<LevelMatrix> {
            let Some(m) = device_copy(self, &ac).filter(|_| !ac.on_host()) else {
                let host = ac.host()?;
                let empty = crate::galerkin::empty_rows(host);
                if empty.is_empty() {
                    return Ok(ac);
                }
                return Ok(crate::galerkin::with_unit_rows(host, &empty)?.into());
            };
            let empty = self.setup_zero_rows(&m)?;
            if empty.is_empty() {
                return Ok(ac);
            }
            Ok(crate::galerkin::with_unit_rows(ac.host()?, &empty)?.into())
        }
    }
}
