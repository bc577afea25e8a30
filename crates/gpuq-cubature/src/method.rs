//! One entry point over all methods.

use crate::func::Func;
use crate::kernels::CubatureKernels;
use crate::outcome::{Options, Outcome};
use crate::{cuhre, parallel, tensor};
use gpuq_core::{Error, Result};

/// An integration method.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// Sequential CUHRE on the host (one core; the reference).
    Cuhre,
    /// The two-phase parallel algorithm on the backend.
    TwoPhase,
    /// The breadth-first parallel algorithm on the backend.
    BreadthFirst,
    /// Tensor Gauss-Legendre with this many points per axis on the box.
    GaussLegendre(usize),
    /// Tensor Gauss-Legendre of rising order until successive orders agree
    /// ([`tensor::gauss_legendre_auto`]).
    GaussLegendreAuto,
    /// Tensor Gauss-Hermite (standard normal expectation) with this many points
    /// per axis; the box is ignored.
    GaussHermite(usize),
}

impl std::str::FromStr for Method {
    type Err = Error;
    /// Parses `cuhre`, `two-phase`, `breadth-first`, `gauss-legendre:NA`,
    /// `gauss-legendre:auto` or `gauss-hermite:NA`.
    fn from_str(s: &str) -> Result<Self> {
        let points = |rest: &str| {
            rest.parse::<usize>().map_err(|_| {
                Error::InvalidArgument(format!("{s}: expected a number of points per axis"))
            })
        };
        match s {
            "cuhre" => Ok(Method::Cuhre),
            "two-phase" => Ok(Method::TwoPhase),
            "breadth-first" => Ok(Method::BreadthFirst),
            _ => {
                if s == "gauss-legendre:auto" {
                    Ok(Method::GaussLegendreAuto)
                } else if let Some(r) = s.strip_prefix("gauss-legendre:") {
                    Ok(Method::GaussLegendre(points(r)?))
                } else if let Some(r) = s.strip_prefix("gauss-hermite:") {
                    Ok(Method::GaussHermite(points(r)?))
                } else {
                    Err(Error::InvalidArgument(format!(
                        "unknown method {s:?}; expected cuhre, two-phase, breadth-first, gauss-legendre:NA, gauss-legendre:auto or gauss-hermite:NA"
                    )))
                }
            }
        }
    }
}

/// Integrates `f` over [lo, hi] (ignored by Gauss-Hermite, which needs `lo.len()`
/// as the dimension only) with `method` on `backend` (sequential CUHRE runs on
/// the host, or for device code through the backend's batches: see
/// [`cuhre::cuhre_on`]). Tensor rules need the same interval on every axis.
pub fn integrate<B: CubatureKernels>(
    backend: &B,
    method: Method,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    match method {
        Method::Cuhre => cuhre::cuhre_on(backend, f, lo, hi, opts),
        Method::TwoPhase => parallel::two_phase(backend, f, lo, hi, opts),
        Method::BreadthFirst => parallel::breadth_first(backend, f, lo, hi, opts),
        Method::GaussLegendre(na) => {
            let (a, b) = same_interval(lo, hi)?;
            tensor::gauss_legendre(lo.len(), na, a, b)?.run(backend, f)
        }
        Method::GaussLegendreAuto => {
            let (a, b) = same_interval(lo, hi)?;
            tensor::gauss_legendre_auto(backend, f, lo.len(), a, b, opts)
        }
        Method::GaussHermite(na) => tensor::gauss_hermite(lo.len(), na)?.run(backend, f),
    }
}

/// The interval shared by every axis of [lo, hi], or an error.
fn same_interval(lo: &[f64], hi: &[f64]) -> Result<(f64, f64)> {
    let (a, b) = (
        lo.first().copied().unwrap_or(0.0),
        hi.first().copied().unwrap_or(1.0),
    );
    if lo.iter().any(|v| *v != a) || hi.iter().any(|v| *v != b) || lo.len() != hi.len() {
        return Err(Error::InvalidArgument(
            "tensor Gauss-Legendre needs the same interval on every axis".into(),
        ));
    }
    Ok((a, b))
}
