//! What is integrated: a built-in integrand (runs on every backend) or a Rust
//! closure (CPU backend, and any backend's host fallback).

use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::{self as k, Builtin, Integrand, MAX_DIM};

/// An integrand as the algorithms take it. (`Builtin` is large, 264 bytes, but
/// a `Func` is passed once per batch, not per point.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
pub enum Func<'a> {
    /// One of the integrands compiled into the kernels (see [`builtin`]).
    Builtin(Builtin),
    /// Any function of x; evaluated on the host (the CPU backend).
    Closure(&'a (dyn Fn(&[f64]) -> f64 + Sync)),
}

impl std::fmt::Debug for Func<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Func::Builtin(b) => write!(f, "Builtin({})", name_of(b.kind)),
            Func::Closure(_) => write!(f, "Closure"),
        }
    }
}

/// A closure seen as an [`Integrand`].
pub struct ClosureIntegrand<'a>(pub &'a (dyn Fn(&[f64]) -> f64 + Sync));

impl Integrand for ClosureIntegrand<'_> {
    fn eval(&self, x: &[f64]) -> f64 {
        (self.0)(x)
    }
}

/// The names the CLI and reports use, indexed by kind id.
pub const NAMES: [&str; k::KINDS as usize] = [
    "f1",
    "f2",
    "f3",
    "f4",
    "f5",
    "genz-oscillatory",
    "genz-product-peak",
    "genz-corner-peak",
    "genz-gaussian",
    "genz-c0",
    "genz-discontinuous",
    "sum-of-squares",
];

/// The name of kind id `kind` (`"?"` for an unknown id).
pub fn name_of(kind: u32) -> &'static str {
    NAMES.get(kind as usize).copied().unwrap_or("?")
}

/// The kind id of `name` (one of [`NAMES`]); errors on an unknown name.
pub fn kind_of(name: &str) -> Result<u32> {
    NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as u32)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unknown integrand {name:?}; expected one of {}",
                NAMES.join(", ")
            ))
        })
}

/// Default difficulty parameter a_i of the Genz families when none is given.
pub const DEFAULT_A: f64 = 5.0;
/// Default shift u_i of the Genz families when none is given.
pub const DEFAULT_U: f64 = 0.5;

/// A built-in integrand of kind `kind` in `dim` dimensions with parameters `a`
/// and `u` (each empty = the default for every axis, one value = that value for
/// every axis, or one value per axis). Errors on a dimension outside
/// 1..=16, an unknown kind, or parameter lists of another length.
pub fn builtin(kind: u32, dim: usize, a: &[f64], u: &[f64]) -> Result<Builtin> {
    if dim == 0 || dim > MAX_DIM {
        return Err(Error::InvalidArgument(format!(
            "built-in integrands take 1 to {MAX_DIM} dimensions, not {dim}"
        )));
    }
    if kind >= k::KINDS {
        return Err(Error::InvalidArgument(format!(
            "unknown integrand id {kind}"
        )));
    }
    let expand = |v: &[f64], default: f64, what: &str| -> Result<[f64; MAX_DIM]> {
        let mut out = [0.0; MAX_DIM];
        match v.len() {
            0 => out[..dim].fill(default),
            1 => out[..dim].fill(v[0]),
            l if l == dim => out[..dim].copy_from_slice(v),
            l => {
                return Err(Error::InvalidArgument(format!(
                    "{what} has {l} values; give 1 or {dim}"
                )))
            }
        }
        if out[..dim].iter().any(|x| !x.is_finite()) {
            return Err(Error::InvalidArgument(format!("{what} must be finite")));
        }
        Ok(out)
    };
    Ok(Builtin {
        kind,
        dim: dim as u32,
        a: expand(a, DEFAULT_A, "a")?,
        u: expand(u, DEFAULT_U, "u")?,
    })
}
