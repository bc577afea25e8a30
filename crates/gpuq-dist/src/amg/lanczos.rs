//! The Lanczos estimate of rho(D^-1 A) across ranks: `gpuq-amg`'s
//! [`LanczosOps`] on the rank's rows, with a halo exchange per product with
//! A and one collective per inner product; on the host ([`DistLanczos`]) or
//! on the rank's GPU (`DeviceDistLanczos`, feature `cuda`: the same values
//! bit for bit; over NCCL the exchanges and the sums stay on the GPUs).

use crate::comm::Communicator;
use crate::halo::HaloPlan;
use gpuq_amg::spectral::{dot_sum, host_root, HostLanczos, LanczosOps};
use gpuq_core::Result;
use gpuq_kernels::amg::{lanczos_start, row_sum};
use rayon::prelude::*;

/// [`LanczosOps`] over the rank's rows of a level: `host` holds them
/// (`host.a` on the owned columns followed by the ghost columns, in the
/// plan's ghost order) and does every step that needs no other rank's data
/// ([`HostLanczos`]'s); the products with A exchange the halo first, and the
/// inner products add the ranks' sums. With one rank every value is the
/// host's, so the estimate is the one-process estimate bit for bit.
pub(crate) struct DistLanczos<'a> {
    pub comm: &'a dyn Communicator,
    pub plan: &'a HaloPlan,
    pub host: HostLanczos<'a>,
    /// The global index of the rank's first row (the start vector's entries
    /// are those of the global rows).
    pub first: usize,
}

impl LanczosOps for DistLanczos<'_> {
    type V = Vec<f64>;
    type S = f64;

    fn start(&self) -> Result<Vec<f64>> {
        Ok((0..self.host.a.nrows())
            .into_par_iter()
            .map(|i| lanczos_start((self.first + i) as u32))
            .collect())
    }

    fn zeros(&self) -> Result<Vec<f64>> {
        self.host.zeros()
    }

    fn a_mul(&self, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        let ghosts = self.plan.exchange_host(self.comm, x)?;
        let (a, n) = (self.host.a, x.len());
        y.par_iter_mut().enumerate().for_each(|(i, yi)| {
            let (c, v) = a.row(i);
            // the order of the device's product (`setup_spmv`)
            *yi = row_sum(c, v, |j| if j < n { x[j] } else { ghosts[j - n] });
        });
        Ok(())
    }

    fn d_mul(&self, inverse: bool, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        self.host.d_mul(inverse, x, y)
    }

    /// The rank's chunk partials summed in order, then summed over ranks
    /// (and its root taken there).
    fn dot(&self, x: &Vec<f64>, y: &Vec<f64>, root: bool) -> Result<f64> {
        let local = dot_sum(x, y);
        Ok(host_root(self.comm.allreduce_sum(&[local])?[0], root))
    }

    fn zero(&self) -> Result<f64> {
        Ok(0.0)
    }

    fn update(&self, w: &mut Vec<f64>, al: f64, v: &Vec<f64>, b: f64, u: &Vec<f64>) -> Result<()> {
        self.host.update(w, al, v, b, u)
    }

    fn divide(&self, w: &mut Vec<f64>, b: f64) -> Result<()> {
        self.host.divide(w, b)
    }

    fn peek(&self, s: f64) -> Option<f64> {
        Some(s)
    }

    fn values(&self, s: &[f64]) -> Result<Vec<f64>> {
        Ok(s.to_vec())
    }
}

#[cfg(feature = "cuda")]
pub(crate) use device::DeviceDistLanczos;

#[cfg(feature = "cuda")]
mod device {
    use super::super::setup::SquaredRows;
    use crate::comm::Communicator;
    use crate::device_comm::{CudaTransport, DeviceComm};
    use crate::halo::HaloPlan;
    use gpuq_amg::blockdiag::BlockDiagonal;
    use gpuq_amg::spectral::{host_root, LanczosOps};
    use gpuq_core::{Error, Result};
    use gpuq_cuda::{CudaBackend, NcclHalo, SetupCsr, SetupVec};
    use gpuq_kernels::amg::DOT_CHUNK;
    use std::cell::{Cell, RefCell};

    /// [`LanczosOps`] over the rank's rows of a level on its GPU, the steps
    /// and values of [`super::DistLanczos`] bit for bit: the rank's rows made
    /// square by empty rows for the ghost columns (`SquaredRows`) and the
    /// blocks of D and D^-1 (zero for the ghost nodes) uploaded once; every
    /// vector has the ghost columns' entries after the rank's, zero (a
    /// product with A or D leaves them zero, the recurrence keeps them so),
    /// so an inner product over the whole vector is the rank's. The
    /// recurrence's scalars are slots of a device array. Where the ranks'
    /// GPUs are linked by NCCL, a product with A receives the ghosts from
    /// the neighbours' GPUs into a scratch copy of the vector and an inner
    /// product is summed over ranks on the devices (the same bits): no step
    /// waits for the host, and the scalars are read once at the end. Else the
    /// plan's entries are read from the device and exchanged through the
    /// hosts, and each inner product is read back, summed over ranks by one
    /// collective and written into its slot.
    pub(crate) struct DeviceDistLanczos<'a> {
        g: &'a CudaBackend,
        comm: &'a dyn Communicator,
        plan: &'a HaloPlan,
        /// The plan's exchange between the GPUs, where NCCL links them.
        nccl: Option<NcclHalo>,
        a: &'a SetupCsr,
        own: usize,
        first: usize,
        bs: usize,
        d: SetupVec,
        dinv: &'a SetupVec,
        scratch: RefCell<SetupVec>,
        partial: RefCell<SetupVec>,
        /// The rank's part of an inner product (one value).
        local: RefCell<SetupVec>,
        /// The recurrence's scalars, a slot each (taken in turn: `next`).
        scalars: RefCell<SetupVec>,
        next: Cell<usize>,
        /// The slots' values where the host has them (through the hosts).
        known: RefCell<Vec<Option<f64>>>,
    }

    impl<'a> DeviceDistLanczos<'a> {
        /// The operations for the rank's rows squared on the device with
        /// D^-1's blocks (`rows`; `first` the global index of its first row)
        /// and D's blocks `d`, for `steps` Lanczos steps. Uploads D's blocks
        /// (zero blocks for the ghost nodes, as D^-1's) and, where NCCL links
        /// the GPUs, the plan's pack list (linking the neighbours not linked
        /// yet). O(n bs^2).
        pub(crate) fn new(
            g: &'a CudaBackend,
            (comm, plan): (&'a dyn Communicator, &'a HaloPlan),
            (rows, first): (&'a SquaredRows, usize),
            d: &BlockDiagonal,
            steps: usize,
        ) -> Result<Self> {
            let m = rows.a.shape().0;
            let padding = (m - rows.own) * d.block();
            let nccl = match g.has_nccl() {
                true => CudaTransport::Nccl.prepare_halo(g, plan)?,
                false => None,
            };
            // The start's norm, 0, and two per step.
            let slots = 2 * steps + 2;
            Ok(DeviceDistLanczos {
                g,
                comm,
                plan,
                nccl,
                a: &rows.a,
                own: rows.own,
                first,
                bs: d.block(),
                // D's device copy (where the backend found it) padded there.
                d: g.setup_vec_padded(&*gpuq_amg::device_blocks(g, d)?, padding)?,
                dinv: &rows.dinv,
                scratch: RefCell::new(g.setup_vec_zeros(m)?),
                partial: RefCell::new(g.setup_vec_zeros(m.div_ceil(DOT_CHUNK))?),
                local: RefCell::new(g.setup_vec_zeros(1)?),
                scalars: RefCell::new(g.setup_vec_zeros(slots)?),
                next: Cell::new(0),
                known: RefCell::new(vec![None; slots]),
            })
        }

        /// The next free slot of `scalars` (each holds 0 until written).
        fn slot(&self) -> Result<usize> {
            let at = self.next.get();
            if at >= self.scalars.borrow().len() {
                return Err(Error::InvalidArgument(format!(
                    "distributed device Lanczos: more than {at} scalars"
                )));
            }
            self.next.set(at + 1);
            Ok(at)
        }
    }

    impl LanczosOps for DeviceDistLanczos<'_> {
        type V = SetupVec;
        type S = usize;

        /// Made on the device (`setup_lanczos_start_at`).
        fn start(&self) -> Result<SetupVec> {
            self.g
                .setup_lanczos_start_at(self.a.shape().0, self.first, self.own)
        }

        fn zeros(&self) -> Result<SetupVec> {
            self.g.setup_vec_zeros(self.a.shape().0)
        }

        fn a_mul(&self, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            let mut scratch = self.scratch.borrow_mut();
            self.g.setup_vec_copy(x, &mut scratch)?;
            match &self.nccl {
                Some(h) => self.g.nccl_setup_exchange(h, x, (&mut scratch, self.own))?,
                None => {
                    let ghosts: Vec<f64> = self
                        .plan
                        .exchange_read(self.comm, &mut |r| self.g.setup_vec_read(x, r))?;
                    self.g.setup_vec_write(&mut scratch, self.own, &ghosts)?;
                }
            }
            self.g.setup_spmv(self.a, &scratch, y)
        }

        fn d_mul(&self, inverse: bool, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            let blocks = if inverse { self.dinv } else { &self.d };
            self.g.setup_block_mul(self.bs, blocks, x, y)
        }

        /// The rank's chunk partials summed in order on the device, then
        /// summed over ranks (and its root taken): on the devices over
        /// NCCL, else read back and summed by one collective.
        fn dot(&self, x: &SetupVec, y: &SetupVec, root: bool) -> Result<usize> {
            let at = self.slot()?;
            let mut local = self.local.borrow_mut();
            let mut partial = self.partial.borrow_mut();
            self.g
                .setup_dot_into((x, y), &mut partial, false, (&mut local, 0))?;
            let mut scalars = self.scalars.borrow_mut();
            if self.nccl.is_some() && self.g.nccl_sum_setup_slots(&mut local, &[0])? {
                self.g.setup_fold_slot(&local, root, (&mut scalars, at))?;
            } else {
                let mine = self.g.setup_vec_read(&local, 0..1)?[0];
                let s = host_root(self.comm.allreduce_sum(&[mine])?[0], root);
                self.g.setup_vec_write(&mut scalars, at, &[s])?;
                self.known.borrow_mut()[at] = Some(s);
            }
            Ok(at)
        }

        /// A slot left 0.
        fn zero(&self) -> Result<usize> {
            let at = self.slot()?;
            self.known.borrow_mut()[at] = Some(0.0);
            Ok(at)
        }

        fn update(
            &self,
            w: &mut SetupVec,
            al: usize,
            v: &SetupVec,
            b: usize,
            u: &SetupVec,
        ) -> Result<()> {
            let scalars = self.scalars.borrow();
            self.g.setup_lanczos_update(w, (&scalars, al, b), v, u)
        }

        fn divide(&self, w: &mut SetupVec, b: usize) -> Result<()> {
            self.g.setup_divide(w, (&self.scalars.borrow(), b))
        }

        /// Known through the hosts; over NCCL not until the end.
        fn peek(&self, s: usize) -> Option<f64> {
            self.known.borrow().get(s).copied().flatten()
        }

        /// Through the hosts as known; over NCCL the slots read once.
        fn values(&self, s: &[usize]) -> Result<Vec<f64>> {
            let known = self.known.borrow();
            if let Some(v) = s.iter().map(|&k| known.get(k).copied().flatten()).collect() {
                return Ok(v);
            }
            let all = self.g.setup_vec_download(&self.scalars.borrow())?;
            Ok(s.iter().map(|&k| all[k]).collect())
        }
    }
}
