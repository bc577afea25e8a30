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

    /// Computes y = Op(x) and, where the operator can in the same pass over
    /// memory, the dot product `dot` names, `sc[slot] = w^H y`, written into a
    /// scalar array on the backend; returns whether it did. With `false` only y
    /// was computed, and the caller reduces on its own.
    ///
    /// The default applies and returns `false`; matrix operators whose backend
    /// fuses the dot product into its SpMV kernel override it (BiCGSTAB's
    /// r0^H v then costs one read of r0 instead of a pass over two vectors).
    fn apply_dot(
        &self,
        backend: &B,
        x: &B::Vector<T>,
        y: &mut B::Vector<T>,
        dot: FusedDot<'_, B, T>,
    ) -> Result<bool> {
        let _ = (backend, dot);
        self.apply(x, y)?;
        Ok(false)
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

/// A dot product with the result y of an operator application that an
/// operator may fuse into it ([`LinearOperator::apply_dot`]): `sc[slot] = w^H
/// y`, written into a scalar array `sc` on the backend (the form in which the
/// methods that keep their scalars on the device hold them).
pub struct FusedDot<'a, B: Backend, T: Scalar> {
    /// The vector conjugated.
    pub w: &'a B::Vector<T>,
    /// The scalar array.
    pub sc: &'a mut B::Vector<T>,
    /// Where the result goes.
    pub slot: usize,
}

impl<B: Backend, T: Scalar> FusedDot<'_, B, T> {
    /// Errors unless w has `n` elements and the slot lies inside `sc`.
    pub fn check(&self, op: &'static str, n: usize) -> Result<()> {
        use crate::DeviceVector;
        crate::check_same_len(op, n, self.w.len())?;
        if self.slot >= self.sc.len() {
            return Err(Error::InvalidArgument(format!(
                "{op}: slot {} is outside the {}-slot scalar array",
                self.slot,
                self.sc.len()
            )));
        }
        Ok(())
    }
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
