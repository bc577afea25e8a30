//! [`MixedDistAmg`]: the distributed cycle in one precision preconditioning
//! a solve in another.

use super::cycle::DistAmg;
use super::setup::DistHierarchy;
use crate::backend::Dist;
use crate::halo::HaloBackend;
use gpuq_amg::AmgKernels;
use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar, ScalarKind};
use gpuq_sparse::Layout;
use std::marker::PhantomData;
use std::sync::Mutex;

/// The V-cycle of a [`DistHierarchy`] in precision `S` (f32 on a GPU: about
/// two thirds of the f64 cycle's bytes, halos included) preconditioning a
/// solve in precision `T` (f64) on [`Dist`], as `gpuq_amg::MixedAmg` does on
/// one process: x converted to `S` on the rank's device, one [`DistAmg`]
/// cycle, the result converted back. Cost: the cycle's in `S`, plus two
/// conversion passes over the rank's rows.
pub struct MixedDistAmg<B: HaloBackend + AmgKernels, T: Scalar, S: Scalar> {
    cycle: DistAmg<B, S>,
    local: B,
    work: Mutex<(B::Vector<S>, B::Vector<S>)>,
    _t: PhantomData<T>,
}

impl<B: HaloBackend + AmgKernels, T: Scalar, S: Scalar> MixedDistAmg<B, T, S> {
    /// Puts the hierarchy on `dist` in precision `S` ([`DistAmg::new`]) and
    /// allocates two work vectors of the rank's rows. Collective.
    pub fn new(dist: &Dist<B>, h: &DistHierarchy, layout: Layout) -> Result<Self> {
        let cycle = DistAmg::<B, S>::new(dist, h, layout)?;
        let (n, _) = LinearOperator::<Dist<B>, S>::shape(&cycle);
        Ok(MixedDistAmg {
            cycle,
            local: dist.local().clone(),
            work: Mutex::new((dist.zeros(n)?, dist.zeros(n)?)),
            _t: PhantomData,
        })
    }

    /// The number of levels of the cycle.
    pub fn num_levels(&self) -> usize {
        self.cycle.num_levels()
    }
}

impl<B: HaloBackend + AmgKernels, T: Scalar, S: Scalar> LinearOperator<Dist<B>, T>
    for MixedDistAmg<B, T, S>
{
    /// The rank's block, (its rows, its rows).
    fn shape(&self) -> (usize, usize) {
        LinearOperator::<Dist<B>, S>::shape(&self.cycle)
    }

    /// y = M x: x converted to `S`, one cycle, the result converted to `T`.
    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        let mut w = self
            .work
            .lock()
            .map_err(|_| Error::InvalidArgument("AMG work vectors poisoned by a panic".into()))?;
        let (xs, ys) = &mut *w;
        self.local.amg_convert(x, xs)?;
        self.cycle.apply(xs, ys)?;
        self.local.amg_convert(ys, y)
    }

    /// `dist-amg, f32 cycle` (or the cycle's other precision).
    fn name(&self) -> &str {
        match S::KIND {
            ScalarKind::F32 => "dist-amg, f32 cycle",
            ScalarKind::F64 => "dist-amg, f64 cycle",
            _ => "dist-amg, mixed precision",
        }
    }
}
