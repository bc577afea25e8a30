//! [`MixedDistAmg`]: the distributed cycle in one precision preconditioning
//! a solve in another, through the one wrapper of `gpuq-amg`
//! ([`gpuq_amg::MixedAmg`]) around [`DistAmg`].

use super::cycle::DistAmg;
use super::setup::DistHierarchy;
use crate::backend::Dist;
use crate::halo::HaloBackend;
use gpuq_amg::{AmgKernels, MixedAmg};
use gpuq_core::{Backend, LinearOperator, Result, Scalar};
use gpuq_sparse::Layout;

/// The V-cycle of a [`DistHierarchy`] in precision `S` (f32 on a GPU: about
/// two thirds of the f64 cycle's bytes, halos included) preconditioning a
/// solve in precision `T` (f64) on [`Dist`]: [`gpuq_amg::MixedAmg`] around a
/// [`DistAmg`], x converted to `S` on the rank's device, one cycle, the
/// result converted back. Cost: the cycle's in `S`, plus two conversion
/// passes over the rank's rows. Made by [`mixed_dist_amg`].
pub type MixedDistAmg<B, T, S> = MixedAmg<Dist<B>, T, S, DistAmg<B, S>>;

/// Puts the hierarchy on `dist` in precision `S` ([`DistHierarchy::cycle`]) inside
/// [`MixedDistAmg`] (named `dist-amg, f32 cycle`), with two work vectors of
/// the rank's rows. Collective.
pub fn mixed_dist_amg<B: HaloBackend + AmgKernels, T: Scalar, S: Scalar>(
    dist: &Dist<B>,
    h: &DistHierarchy,
    layout: Layout,
) -> Result<MixedDistAmg<B, T, S>> {
    let cycle: DistAmg<B, S> = h.cycle(dist, layout)?;
    let (n, _) = LinearOperator::<Dist<B>, S>::shape(&cycle);
    let work = (dist.zeros(n)?, dist.zeros(n)?);
    let (into, from) = (dist.local().clone(), dist.local().clone());
    Ok(MixedAmg::around(
        cycle,
        "dist-amg",
        work,
        Box::new(move |x, y| into.amg_convert(x, y)),
        Box::new(move |x, y| from.amg_convert(x, y)),
    ))
}
