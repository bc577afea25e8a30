//! Linear operators on backend vectors.

use crate::{Backend, Error, Result, Scalar};
use std::marker::PhantomData;

/// A linear map y = Op(x) on vectors that live on backend `B`: matrices,
/// preconditioners and (later) AMG cycles all implement it.
pub trait LinearOperator<B: Backend, T: Scalar> {
    /// (rows, columns).
    fn shape(&self) -> (usize, usize);

    /// Computes y = Op(x), overwriting `y`. Errors on a shape mismatch.
    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()>;

    /// Computes y = Op(x) and returns the conjugated dot product x^H y.
    ///
    /// The default applies then reduces (two passes over memory); matrix
    /// operators override it with one fused pass, which is what CG needs for
    /// p^H A p.
    fn apply_dotc(&self, backend: &B, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<T> {
        self.apply(x, y)?;
        backend.dotc(x, y)
    }

    /// Computes y = Op^T x (the transpose, not conjugated), overwriting `y`.
    ///
    /// Methods built on two-sided Lanczos (QMR) need it. The default returns
    /// [`Error::Precondition`] saying the operator has no transpose; operators that
    /// can apply it (symmetric ones at the cost of `apply`) override it.
    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        let _ = (x, y);
        Err(Error::Precondition {
            method: "transpose",
            reason: format!("operator '{}' cannot apply its transpose", self.name()),
        })
    }

    /// When the operator is a diagonal scaling y = d ⊙ x, its diagonal d, so
    /// that a method can fold the scaling into the vector step that produces
    /// x (one pass over memory instead of two). The default, `None`, means the
    /// operator must be applied with [`LinearOperator::apply`].
    fn diagonal(&self) -> Option<&B::Vector<T>> {
        None
    }

    /// A short name for reports (`"csr"`, `"jacobi"`, ...).
    fn name(&self) -> &str;
}

/// The identity operator of a given size: y = x. Cost: one copy.
#[derive(Clone, Debug)]
pub struct IdentityOperator<B> {
    backend: B,
    n: usize,
    _b: PhantomData<B>,
}

impl<B: Backend> IdentityOperator<B> {
    /// The n-by-n identity on `backend`.
    pub fn new(backend: &B, n: usize) -> Self {
        IdentityOperator {
            backend: backend.clone(),
            n,
            _b: PhantomData,
        }
    }
}

impl<B: Backend, T: Scalar> LinearOperator<B, T> for IdentityOperator<B> {
    fn shape(&self) -> (usize, usize) {
        (self.n, self.n)
    }

    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.backend.copy(x, y)
    }

    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.backend.copy(x, y)
    }

    fn name(&self) -> &str {
        "none"
    }
}
