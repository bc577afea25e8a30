//! Which precision an AMG cycle runs in, and the cycle of a hierarchy built in
//! it: one policy for every caller (the solve path, the UQ procedures' PCG and
//! LOBPCG), on every backend.

use crate::{Amg, AmgKernels, CycleOptions, Hierarchy, MixedAmg};
use gpuq_core::{Error, LinearOperator, Result, Scalar, ScalarKind};
use gpuq_sparse::Layout;

/// The cycle precision AMG takes by default for a solve in `solve` precision with
/// `block`-sized unknowns, on every backend: f32 for scalar unknowns in an f64 solve (an
/// f32 cycle reads about two thirds of the bytes for the same iterations: the fastest
/// configuration measured on the H100 and H200, and on the host's cores; see
/// `docs/benchmarks.md`), else the solve's. The same on both backends, so that the CPU
/// runs what the GPU runs. O(1).
pub fn default_cycle_precision(solve: ScalarKind, block: usize) -> ScalarKind {
    if solve == ScalarKind::F64 && block == 1 {
        ScalarKind::F32
    } else {
        solve
    }
}

/// The AMG cycle of `h` on `backend` in precision `S` for vectors of precision `T` (the
/// cycle itself when they agree, else [`MixedAmg`]), its matrices in `layout`. Cost: the
/// level matrices converted to the layout and precision on the backend (uploaded on a
/// device when the setup ran on the host).
pub fn amg_cycle<B, T, S>(
    backend: &B,
    h: &Hierarchy,
    layout: Layout,
) -> Result<Box<dyn LinearOperator<B, T> + Send + Sync>>
where
    B: AmgKernels,
    T: Scalar,
    S: Scalar,
{
    let co = CycleOptions { layout };
    Ok(if S::KIND == T::KIND {
        Box::new(Amg::<B, T>::new(backend, h, &co)?)
    } else {
        Box::new(MixedAmg::<B, T, S>::new(backend, h, &co)?)
    })
}

/// The cycle of `h` on `backend` for f64 vectors in precision `precision`
/// ([`amg_cycle`] in f32 or f64; an error for a complex precision), its
/// matrices in `layout`.
pub fn f64_cycle<B: AmgKernels>(
    backend: &B,
    h: &Hierarchy,
    layout: Layout,
    precision: ScalarKind,
) -> Result<Box<dyn LinearOperator<B, f64> + Send + Sync>> {
    match precision {
        ScalarKind::F32 => amg_cycle::<B, f64, f32>(backend, h, layout),
        ScalarKind::F64 => amg_cycle::<B, f64, f64>(backend, h, layout),
        other => Err(Error::InvalidArgument(format!(
            "AMG cycle precision {}: f32 or f64",
            other.name()
        ))),
    }
}
