//! Where the setup's heavy steps run: [`SetupKernels`], a backend's
//! aggregation, prolongator smoothing and Galerkin product. Every method has a
//! default body, the host code of this crate (Rayon), so any backend builds a
//! hierarchy at once; the CUDA backend (feature `cuda`) overrides them with
//! device kernels (`kernels-rs/src/device/amg_setup.rs`) that build the same
//! aggregates and the same matrices to rounding.

use crate::aggregate::mis2_aggregates;
use crate::blockdiag::BlockDiagonal;
use crate::galerkin::galerkin;
use crate::prolong::smooth;
use crate::spectral::rho_dinv_a;
use crate::strength::{norm_matrix, strong_graph};
use gpuq_core::Result;
use gpuq_cpu::CpuBackend;
use gpuq_sparse::Csr;

/// The steps of a smoothed-aggregation level a backend may run where its data
/// lives. `Level` is a level's matrix as the backend keeps it during the
/// level's setup (uploaded once by [`SetupKernels::level`]); the default
/// bodies ignore it and compute on the host copy.
pub trait SetupKernels {
    /// A level's matrix where this backend computes (`()` for the host).
    type Level;

    /// The backend's copy of the level matrix `a`. Cost: an upload (device
    /// backends) or nothing.
    fn level(&self, a: &Csr<f64>) -> Result<Self::Level>;

    /// The backend that runs the setup, for reports (`cpu`, `cuda`).
    fn setup_name(&self) -> &'static str {
        "cpu"
    }

    /// The aggregates of smoothed aggregation: the symmetrised strong graph of
    /// the bs x bs block norms with threshold `eps`, then the distance-2
    /// maximal-independent-set aggregation. Returns each node's aggregate and
    /// the count. Default: [`strong_graph`] and [`mis2_aggregates`] on the
    /// host, O(nnz) per round.
    fn aggregates(
        &self,
        a: &Csr<f64>,
        _level: &Self::Level,
        bs: usize,
        eps: f64,
    ) -> Result<(Vec<u32>, usize)> {
        let s = strong_graph(&norm_matrix(a, bs)?, eps)?;
        Ok(mis2_aggregates(&s))
    }

    /// The Lanczos estimate of rho(D^-1 A) (`steps` steps), D the block
    /// diagonal of `a` and `dinv` its inverse. Default:
    /// [`crate::spectral::rho_dinv_a`] on the host, O(steps nnz).
    fn rho_dinv_a(
        &self,
        a: &Csr<f64>,
        _level: &Self::Level,
        d: &BlockDiagonal,
        dinv: &BlockDiagonal,
        steps: usize,
    ) -> Result<f64> {
        rho_dinv_a(a, d, dinv, steps)
    }

    /// The smoothed prolongator P = (I - omega D^-1 A) P_T, omega = 4 / (3
    /// rho). Default: [`smooth`], one fused row-parallel pass on the host,
    /// O(flops(A P_T) bs).
    fn smoothed_prolongator(
        &self,
        a: &Csr<f64>,
        _level: &Self::Level,
        dinv: &BlockDiagonal,
        rho: f64,
        pt: &Csr<f64>,
    ) -> Result<Csr<f64>> {
        smooth(a, dinv, rho, pt)
    }

    /// R = P^T and the Galerkin product R (A P). Default: the host's
    /// transpose and two Gustavson products, O(flops(A P) + flops(R A P)).
    fn galerkin(
        &self,
        a: &Csr<f64>,
        _level: &Self::Level,
        p: &Csr<f64>,
    ) -> Result<(Csr<f64>, Csr<f64>)> {
        let r = p.transpose(false);
        let ac = galerkin(&r, a, p)?;
        Ok((r, ac))
    }
}

/// Backends that run the whole setup on the host: `impl HostSetup for
/// MyBackend {}` gives them [`SetupKernels`] with every default body (a
/// level needs no copy), so any backend builds hierarchies with one line.
pub trait HostSetup {}

impl<B: HostSetup> SetupKernels for B {
    type Level = ();

    fn level(&self, _a: &Csr<f64>) -> Result<()> {
        Ok(())
    }
}

/// The CPU backend: the host setup.
impl HostSetup for CpuBackend {}

#[cfg(feature = "cuda")]
mod cuda {
    use super::SetupKernels;
    use crate::blockdiag::BlockDiagonal;
    use crate::spectral::{lanczos_rho, LanczosOps};
    use gpuq_core::Result;
    use gpuq_cuda::{CudaBackend, SetupCsr, SetupVec};
    use gpuq_sparse::Csr;

    /// [`LanczosOps`] on the device: the level matrix, block size and the
    /// blocks of D and D^-1 uploaded once.
    struct DeviceLanczos<'a> {
        g: &'a CudaBackend,
        a: &'a SetupCsr,
        bs: usize,
        d: SetupVec,
        dinv: SetupVec,
    }

    impl LanczosOps for DeviceLanczos<'_> {
        type V = SetupVec;

        fn start(&self) -> Result<SetupVec> {
            self.g.setup_lanczos_start(self.a.shape().0)
        }

        fn zeros(&self) -> Result<SetupVec> {
            self.g.setup_vec_zeros(self.a.shape().0)
        }

        fn a_mul(&self, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            self.g.setup_spmv(self.a, x, y)
        }

        fn d_mul(&self, inverse: bool, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            let blocks = if inverse { &self.dinv } else { &self.d };
            self.g.setup_block_mul(self.bs, blocks, x, y)
        }

        fn dot_partials(&self, x: &SetupVec, y: &SetupVec) -> Result<Vec<f64>> {
            self.g.setup_dot_partials(x, y)
        }

        fn update(
            &self,
            w: &mut SetupVec,
            al: f64,
            v: &SetupVec,
            b: f64,
            u: &SetupVec,
        ) -> Result<()> {
            self.g.setup_lanczos_update(w, al, v, b, u)
        }

        fn divide(&self, w: &mut SetupVec, b: f64) -> Result<()> {
            self.g.setup_divide(w, b)
        }
    }

    /// The setup on the device: aggregation, prolongator smoothing (two
    /// products and a sum), transpose and Galerkin products in device
    /// kernels; each result comes back to the host hierarchy.
    impl SetupKernels for CudaBackend {
        type Level = SetupCsr;

        fn level(&self, a: &Csr<f64>) -> Result<SetupCsr> {
            self.setup_upload(a)
        }

        fn setup_name(&self) -> &'static str {
            "cuda"
        }

        /// The device aggregation ([`CudaBackend::setup_aggregates`]); the
        /// host's where the device declines (block size above 8, a zero
        /// diagonal block, a block pattern that is not symmetric).
        fn aggregates(
            &self,
            a: &Csr<f64>,
            level: &SetupCsr,
            bs: usize,
            eps: f64,
        ) -> Result<(Vec<u32>, usize)> {
            match self.setup_aggregates(level, bs, eps)? {
                Some(found) => Ok(found),
                None => {
                    let s =
                        crate::strength::strong_graph(&crate::strength::norm_matrix(a, bs)?, eps)?;
                    Ok(crate::aggregate::mis2_aggregates(&s))
                }
            }
        }

        /// The Lanczos estimate with the device's vector operations (the
        /// host's order of operations: the same estimate bit for bit).
        fn rho_dinv_a(
            &self,
            a: &Csr<f64>,
            level: &SetupCsr,
            d: &BlockDiagonal,
            dinv: &BlockDiagonal,
            steps: usize,
        ) -> Result<f64> {
            let ops = DeviceLanczos {
                g: self,
                a: level,
                bs: d.block(),
                d: self.setup_vec_upload(d.blocks())?,
                dinv: self.setup_vec_upload(dinv.blocks())?,
            };
            lanczos_rho(&ops, a.nrows(), steps)
        }

        /// P = P_T - omega D^-1 (A P_T) in one device pass with the host's
        /// order of operations ([`CudaBackend::setup_smoothed_prolongator`]).
        fn smoothed_prolongator(
            &self,
            _a: &Csr<f64>,
            level: &SetupCsr,
            dinv: &BlockDiagonal,
            rho: f64,
            pt: &Csr<f64>,
        ) -> Result<Csr<f64>> {
            let omega = 4.0 / (3.0 * rho);
            let d_pt = self.setup_upload(pt)?;
            let p =
                self.setup_smoothed_prolongator(level, dinv.block(), omega, dinv.blocks(), &d_pt)?;
            self.setup_download(&p)
        }

        /// R = P^T and R (A P) on the device: a transpose and two products.
        fn galerkin(
            &self,
            _a: &Csr<f64>,
            level: &SetupCsr,
            p: &Csr<f64>,
        ) -> Result<(Csr<f64>, Csr<f64>)> {
            let d_p = self.setup_upload(p)?;
            let r = self.setup_transpose(&d_p)?;
            let ap = self.setup_spgemm(level, &d_p)?;
            let ac = self.setup_spgemm(&r, &ap)?;
            Ok((self.setup_download(&r)?, self.setup_download(&ac)?))
        }
    }
}
