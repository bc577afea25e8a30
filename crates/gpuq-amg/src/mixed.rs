//! The cycle in one precision as the preconditioner of a solve in another:
//! [`MixedAmg`], typically a single-precision cycle inside double-precision
//! PCG (the Krylov method's residuals, dot products and iterates stay in
//! double precision; only the preconditioner's approximation of A^-1 is
//! rounded to single).

use crate::cycle::Amg;
use crate::hierarchy::Hierarchy;
use crate::kernels::AmgKernels;
use crate::options::CycleOptions;
use gpuq_core::{Error, LinearOperator, Result, Scalar, ScalarKind};
use std::marker::PhantomData;
use std::sync::Mutex;

/// M ~ A^-1 applied in precision `S` to vectors of precision `T`: the
/// right-hand side converted to `S`, one cycle of [`Amg`]`<B, S>`, the result
/// converted back ([`AmgKernels::amg_convert`]).
///
/// Cost of one application: the cycle in `S` (its matrices and vectors in
/// `S`: for f32 about two thirds of the f64 cycle's bytes) plus two
/// conversion passes over the finest level's vectors. The preconditioner is
/// symmetric to the rounding of `S`; PCG to tolerances well above that
/// rounding (1e-8 with an f32 cycle) converges as with the `T` cycle, give or
/// take an iteration.
pub struct MixedAmg<B: AmgKernels, T: Scalar, S: Scalar> {
    cycle: Amg<B, S>,
    backend: B,
    work: Mutex<(B::Vector<S>, B::Vector<S>)>,
    _t: PhantomData<T>,
}

impl<B: AmgKernels, T: Scalar, S: Scalar> MixedAmg<B, T, S> {
    /// Uploads the hierarchy in precision `S` ([`Amg::new`]) and two work
    /// vectors of the finest level's length.
    pub fn new(backend: &B, h: &Hierarchy, options: &CycleOptions) -> Result<Self> {
        let cycle = Amg::<B, S>::new(backend, h, options)?;
        let n = h.levels()[0].a.nrows();
        Ok(MixedAmg {
            cycle,
            backend: backend.clone(),
            work: Mutex::new((backend.zeros(n)?, backend.zeros(n)?)),
            _t: PhantomData,
        })
    }

    /// The cycle in precision `S`.
    pub fn cycle(&self) -> &Amg<B, S> {
        &self.cycle
    }

    fn through(&self, x: &B::Vector<T>, y: &mut B::Vector<T>, transpose: bool) -> Result<()> {
        let mut w = self
            .work
            .lock()
            .map_err(|_| Error::InvalidArgument("AMG work vectors poisoned by a panic".into()))?;
        let (xs, ys) = &mut *w;
        self.backend.amg_convert(x, xs)?;
        if transpose {
            self.cycle.apply_transpose(xs, ys)?;
        } else {
            self.cycle.apply(xs, ys)?;
        }
        self.backend.amg_convert(ys, y)
    }
}

impl<B: AmgKernels, T: Scalar, S: Scalar> LinearOperator<B, T> for MixedAmg<B, T, S> {
    fn shape(&self) -> (usize, usize) {
        LinearOperator::<B, S>::shape(&self.cycle)
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

    /// `amg, f32 cycle` (or the cycle's other precision).
    fn name(&self) -> &str {
        match S::KIND {
            ScalarKind::F32 => "amg, f32 cycle",
            ScalarKind::F64 => "amg, f64 cycle",
            _ => "amg, mixed precision",
        }
    }
}
