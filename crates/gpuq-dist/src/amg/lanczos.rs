//! The Lanczos estimate of rho(D^-1 A) across ranks: `gpuq-amg`'s
//! [`LanczosOps`] on the rank's rows, with a halo exchange per product with
//! A and one collective per inner product.

use crate::comm::Communicator;
use crate::halo::HaloPlan;
use gpuq_amg::blockdiag::BlockDiagonal;
use gpuq_amg::spectral::LanczosOps;
use gpuq_core::Result;
use gpuq_kernels::amg::{chunk_dot, lanczos_start, DOT_CHUNK};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// [`LanczosOps`] over the rank's rows of a level: `a_ext` holds them on the
/// owned columns followed by the ghost columns (in the plan's ghost order).
/// With one rank every value is the host's ([`gpuq_amg::spectral::HostLanczos`]),
/// so the estimate is the one-process estimate bit for bit.
pub(crate) struct DistLanczos<'a> {
    pub comm: &'a dyn Communicator,
    pub plan: &'a HaloPlan,
    pub a_ext: &'a Csr<f64>,
    pub d: &'a BlockDiagonal,
    pub dinv: &'a BlockDiagonal,
    /// The global index of the rank's first row (the start vector's entries
    /// are those of the global rows).
    pub first: usize,
}

impl LanczosOps for DistLanczos<'_> {
    type V = Vec<f64>;

    fn start(&self) -> Result<Vec<f64>> {
        Ok((0..self.a_ext.nrows())
            .into_par_iter()
            .map(|i| lanczos_start((self.first + i) as u32))
            .collect())
    }

    fn zeros(&self) -> Result<Vec<f64>> {
        Ok(vec![0.0; self.a_ext.nrows()])
    }

    fn a_mul(&self, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        let ghosts = self.plan.exchange_host(self.comm, x)?;
        let n = x.len();
        y.par_iter_mut().enumerate().for_each(|(i, yi)| {
            let (c, v) = self.a_ext.row(i);
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
        let d = if inverse { self.dinv } else { self.d };
        d.mul_into(x, y);
        Ok(())
    }

    /// The rank's chunk partials summed in order, then summed over ranks:
    /// one value.
    fn dot_partials(&self, x: &Vec<f64>, y: &Vec<f64>) -> Result<Vec<f64>> {
        let partials: Vec<f64> = x
            .par_chunks(DOT_CHUNK)
            .zip(y.par_chunks(DOT_CHUNK))
            .map(|(a, b)| chunk_dot(a, b))
            .collect();
        let local = partials.iter().fold(0.0, |s, p| s + p);
        self.comm.allreduce_sum(&[local])
    }

    fn update(&self, w: &mut Vec<f64>, al: f64, v: &Vec<f64>, b: f64, u: &Vec<f64>) -> Result<()> {
        w.par_iter_mut()
            .zip(v.par_iter().zip(u))
            .for_each(|(wi, (vi, ui))| *wi -= al * vi + b * ui);
        Ok(())
    }

    fn divide(&self, w: &mut Vec<f64>, b: f64) -> Result<()> {
        w.par_iter_mut().for_each(|x| *x /= b);
        Ok(())
    }
}
