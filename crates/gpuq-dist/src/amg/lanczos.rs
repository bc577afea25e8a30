//! The Lanczos estimate of rho(D^-1 A) across ranks: `gpuq-amg`'s
//! [`LanczosOps`] on the rank's rows, with a halo exchange per product with
//! A and one collective per inner product; on the host ([`DistLanczos`]) or
//! on the rank's GPU (`DeviceDistLanczos`, feature `cuda`: the same values
//! bit for bit).

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
    use crate::halo::HaloPlan;
    use gpuq_amg::blockdiag::BlockDiagonal;
    use gpuq_amg::spectral::{host_root, LanczosOps};
    use gpuq_core::Result;
    use gpuq_cuda::{CudaBackend, SetupCsr, SetupVec};
    use gpuq_kernels::amg::DOT_CHUNK;
    use std::cell::RefCell;

    /// [`LanczosOps`] over the rank's rows of a level on its GPU, the steps
    /// and values of [`super::DistLanczos`] bit for bit: the rank's rows made
    /// square by empty rows for the ghost columns (`SquaredRows`) and the
    /// blocks of D and D^-1 (zero for the ghost nodes) uploaded once; every
    /// vector has the ghost columns' entries after the rank's, zero (a
    /// product with A or D leaves them zero, the recurrence keeps them so),
    /// so an inner product over the whole vector is the rank's. A product
    /// with A reads the entries the neighbours need from the device (the
    /// plan's ranges), exchanges them through the hosts and writes the
    /// ghosts into a scratch copy of the vector; an inner product reads the
    /// rank's sum back and adds the ranks' (one collective, as on the host).
    pub(crate) struct DeviceDistLanczos<'a> {
        g: &'a CudaBackend,
        comm: &'a dyn Communicator,
        plan: &'a HaloPlan,
        a: &'a SetupCsr,
        own: usize,
        first: usize,
        bs: usize,
        d: SetupVec,
        dinv: &'a SetupVec,
        scratch: RefCell<SetupVec>,
        partial: RefCell<SetupVec>,
        /// Slot 0: the rank's inner product; 1, 2: an update's scalars; 3: a
        /// divisor.
        scalars: RefCell<SetupVec>,
    }

    impl<'a> DeviceDistLanczos<'a> {
        /// The operations for the rank's rows squared on the device with
        /// D^-1's blocks (`rows`; `first` the global index of its first row)
        /// and D's blocks `d`. Uploads D's blocks (zero blocks for the ghost
        /// nodes, as D^-1's). O(n bs^2).
        pub(crate) fn new(
            g: &'a CudaBackend,
            (comm, plan): (&'a dyn Communicator, &'a HaloPlan),
            (rows, first): (&'a SquaredRows, usize),
            d: &BlockDiagonal,
        ) -> Result<Self> {
            let m = rows.a.shape().0;
            let padding = (m - rows.own) * d.block();
            Ok(DeviceDistLanczos {
                g,
                comm,
                plan,
                a: &rows.a,
                own: rows.own,
                first,
                bs: d.block(),
                // D's device copy (where the backend found it) padded there.
                d: g.setup_vec_padded(&*gpuq_amg::device_blocks(g, d)?, padding)?,
                dinv: &rows.dinv,
                scratch: RefCell::new(g.setup_vec_zeros(m)?),
                partial: RefCell::new(g.setup_vec_zeros(m.div_ceil(DOT_CHUNK))?),
                scalars: RefCell::new(g.setup_vec_zeros(4)?),
            })
        }
    }

    impl LanczosOps for DeviceDistLanczos<'_> {
        type V = SetupVec;
        type S = f64;

        /// Made on the device (`setup_lanczos_start_at`).
        fn start(&self) -> Result<SetupVec> {
            self.g
                .setup_lanczos_start_at(self.a.shape().0, self.first, self.own)
        }

        fn zeros(&self) -> Result<SetupVec> {
            self.g.setup_vec_zeros(self.a.shape().0)
        }

        fn a_mul(&self, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            let ghosts: Vec<f64> = self
                .plan
                .exchange_read(self.comm, &mut |r| self.g.setup_vec_read(x, r))?;
            let mut scratch = self.scratch.borrow_mut();
            self.g.setup_vec_copy(x, &mut scratch)?;
            self.g.setup_vec_write(&mut scratch, self.own, &ghosts)?;
            self.g.setup_spmv(self.a, &scratch, y)
        }

        fn d_mul(&self, inverse: bool, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
            let blocks = if inverse { self.dinv } else { &self.d };
            self.g.setup_block_mul(self.bs, blocks, x, y)
        }

        /// The rank's chunk partials summed in order on the device, read
        /// back, then summed over ranks (and its root taken there).
        fn dot(&self, x: &SetupVec, y: &SetupVec, root: bool) -> Result<f64> {
            let mut scalars = self.scalars.borrow_mut();
            self.g.setup_dot_into(
                (x, y),
                &mut self.partial.borrow_mut(),
                false,
                (&mut scalars, 0),
            )?;
            let local = self.g.setup_vec_read(&scalars, 0..1)?[0];
            Ok(host_root(self.comm.allreduce_sum(&[local])?[0], root))
        }

        fn zero(&self) -> Result<f64> {
            Ok(0.0)
        }

        fn update(
            &self,
            w: &mut SetupVec,
            al: f64,
            v: &SetupVec,
            b: f64,
            u: &SetupVec,
        ) -> Result<()> {
            let mut scalars = self.scalars.borrow_mut();
            self.g.setup_vec_write(&mut scalars, 1, &[al, b])?;
            self.g.setup_lanczos_update(w, (&scalars, 1, 2), v, u)
        }

        fn divide(&self, w: &mut SetupVec, b: f64) -> Result<()> {
            let mut scalars = self.scalars.borrow_mut();
            self.g.setup_vec_write(&mut scalars, 3, &[b])?;
            self.g.setup_divide(w, (&scalars, 3))
        }

        fn peek(&self, s: f64) -> Option<f64> {
            Some(s)
        }

        fn values(&self, s: &[f64]) -> Result<Vec<f64>> {
            Ok(s.to_vec())
        }
    }
}
