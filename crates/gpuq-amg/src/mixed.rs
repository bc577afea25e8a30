//! The cycle in one precision as the preconditioner of a solve in another:
//! [`MixedAmg`], typically a single-precision cycle inside double-precision
//! PCG (the Krylov method's residuals, dot products and iterates stay in
//! double precision; only the preconditioner's approximation of A^-1 is
//! rounded to single).

use crate::cycle::Amg;
use crate::hierarchy::Hierarchy;
use crate::kernels::AmgKernels;
use crate::options::CycleOptions;
use gpuq_core::{Backend, Error, LinearOperator, Result, Scalar, ScalarKind};
use std::sync::Mutex;

/// A conversion of a vector of precision `F` into one of precision `G` on
/// backend `B` (one pass on the backend: [`AmgKernels::amg_convert`]).
pub type Convert<B, F, G> = Box<
    dyn Fn(&<B as Backend>::Vector<F>, &mut <B as Backend>::Vector<G>) -> Result<()> + Send + Sync,
>;

/// M ~ A^-1 applied in precision `S` to vectors of precision `T`: the
/// right-hand side converted to `S`, one cycle `C` in `S` (by default
/// [`Amg`]`<B, S>`; the distributed cycle of `gpuq-dist` on its backend),
/// the result converted back. One wrapper for every cycle.
///
/// Cost of one application: the cycle in `S` (its matrices and vectors in
/// `S`: for f32 about two thirds of the f64 cycle's bytes) plus two
/// conversion passes over the finest level's vectors. The preconditioner is
/// symmetric to the rounding of `S`; PCG to tolerances well above that
/// rounding (1e-8 with an f32 cycle) converges as with the `T` cycle, give or
/// take an iteration.
pub struct MixedAmg<B: Backend, T: Scalar, S: Scalar, C = Amg<B, S>> {
    cycle: C,
    into_cycle: Convert<B, T, S>,
    from_cycle: Convert<B, S, T>,
    work: Mutex<(B::Vector<S>, B::Vector<S>)>,
    name: String,
}

impl<B: AmgKernels, T: Scalar, S: Scalar> MixedAmg<B, T, S> {
    /// Uploads the hierarchy in precision `S` ([`Amg::new`]) and two work
    /// vectors of the finest level's length.
    pub fn new(backend: &B, h: &Hierarchy, options: &CycleOptions) -> Result<Self> {
        let cycle = Amg::<B, S>::new(backend, h, options)?;
        let n = h.levels()[0].a.nrows();
        let work = (backend.zeros(n)?, backend.zeros(n)?);
        let (into, from) = (backend.clone(), backend.clone());
        Ok(MixedAmg::around(
            cycle,
            "amg",
            work,
            Box::new(move |x, y| into.amg_convert(x, y)),
            Box::new(move |x, y| from.amg_convert(x, y)),
        ))
    }
}

impl<B: Backend, T: Scalar, S: Scalar, C: LinearOperator<B, S>> MixedAmg<B, T, S, C> {
    /// `cycle` (named `what`, as `amg` or `dist-amg`) in precision `S` for
    /// vectors of precision `T`, with two work vectors of its length and the
    /// conversions into and out of `S`.
    pub fn around(
        cycle: C,
        what: &str,
        work: (B::Vector<S>, B::Vector<S>),
        into_cycle: Convert<B, T, S>,
        from_cycle: Convert<B, S, T>,
    ) -> Self {
        let precision = match S::KIND {
            ScalarKind::F32 => "f32 cycle",
            ScalarKind::F64 => "f64 cycle",
            _ => "mixed precision",
        };
        MixedAmg {
            cycle,
            into_cycle,
            from_cycle,
            work: Mutex::new(work),
            name: format!("{what}, {precision}"),
        }
    }

    /// The cycle in precision `S`.
    pub fn cycle(&self) -> &C {
        &self.cycle
    }

    fn through(&self, x: &B::Vector<T>, y: &mut B::Vector<T>, transpose: bool) -> Result<()> {
        let mut w = self
            .work
            .lock()
            .map_err(|_| Error::InvalidArgument("AMG work vectors poisoned by a panic".into()))?;
        let (xs, ys) = &mut *w;
        (self.into_cycle)(x, xs)?;
        if transpose {
            self.cycle.apply_transpose(xs, ys)?;
        } else {
            self.cycle.apply(xs, ys)?;
        }
        (self.from_cycle)(ys, y)
    }
}

impl<B: Backend, T: Scalar, S: Scalar, C: LinearOperator<B, S>> LinearOperator<B, T>
    for MixedAmg<B, T, S, C>
{
    fn shape(&self) -> (usize, usize) {
        self.cycle.shape()
    }

    /// y = M x: x converted to `S`, one cycle, the result converted to `T`.
    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.through(x, y, false)
    }

    /// M^T x by the transposed cycle ([`Amg`]'s, an error for a
    /// nonsymmetric A).
    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.through(x, y, true)
    }

    /// `amg, f32 cycle` (or the cycle's name and its other precision).
    fn name(&self) -> &str {
        &self.name
    }
}
