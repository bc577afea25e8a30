//! The Lanczos estimate of rho(D^-1 A) across ranks: `gpuq-amg`'s
//! [`LanczosOps`] on the rank's rows, with a halo exchange per product with
//! A and one collective per inner product.

use crate::comm::Communicator;
use crate::halo::HaloPlan;
use gpuq_amg::spectral::{dot_sum, host_root, HostLanczos, LanczosOps};
use gpuq_core::Result;
use gpuq_kernels::amg::lanczos_start;
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
            let mut s = 0.0;
            for (&j, &aij) in c.iter().zip(v) {
                let j = j as usize;
                s += aij * if j < n { x[j] } else { ghosts[j - n] };
            }
            *yi = s;
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
