//! One entry point over all methods.

use crate::func::Func;
use crate::kernels::{CubatureKernels, HOST_EVALS_PER_THREAD_S};
use crate::outcome::{Options, Outcome};
use crate::{cuhre, parallel, tensor};
use gpuq_core::{Error, Result};

/// An integration method.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// The default: an adaptive method chosen per backend, dimension and
    /// tolerance by [`Method::choose`].
    Auto,
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
    /// Parses `auto`, `cuhre`, `two-phase`, `breadth-first`, `gauss-legendre:NA`,
    /// `gauss-legendre:auto` or `gauss-hermite:NA`.
    fn from_str(s: &str) -> Result<Self> {
        let points = |rest: &str| {
            rest.parse::<usize>().map_err(|_| {
                Error::InvalidArgument(format!("{s}: expected a number of points per axis"))
            })
        };
        match s {
            "auto" => Ok(Method::Auto),
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
                        "unknown method {s:?}; expected auto, cuhre, two-phase, breadth-first, gauss-legendre:NA, gauss-legendre:auto or gauss-hermite:NA"
                    )))
                }
            }
        }
    }
}

impl std::fmt::Display for Method {
    /// The name [`Method::from_str`](std::str::FromStr) parses.
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::Auto => write!(out, "auto"),
            Method::Cuhre => write!(out, "cuhre"),
            Method::TwoPhase => write!(out, "two-phase"),
            Method::BreadthFirst => write!(out, "breadth-first"),
            Method::GaussLegendre(na) => write!(out, "gauss-legendre:{na}"),
            Method::GaussLegendreAuto => write!(out, "gauss-legendre:auto"),
            Method::GaussHermite(na) => write!(out, "gauss-hermite:{na}"),
        }
    }
}

impl serde::Serialize for Method {
    /// As its name.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Dimensions from which [`Method::Auto`] runs two-phase on a device
/// ([`Method::choose_for`]).
pub const DEVICE_TWO_PHASE_FROM_DIM: usize = 7;

impl Method {
    /// The names `Method::from_str` accepts (`gauss-legendre` and `gauss-hermite` followed by
    /// `:NA`, `gauss-legendre` also by `:auto`).
    pub const NAMES: &'static [&'static str] = &[
        "auto",
        "cuhre",
        "two-phase",
        "breadth-first",
        "gauss-legendre",
        "gauss-hermite",
    ];

    /// The method [`Method::Auto`] runs for `f` in `n` dimensions with `opts`
    /// on `backend` (other methods are returned as they are): breadth-first for a
    /// batch integrand ([`Func::Batch`]: each round is one batch), else
    /// [`Method::choose_for`] with whether the backend evaluates `f` on a
    /// device ([`CubatureKernels::cub_is_device`]) and the host threads its
    /// nominal throughput stands for otherwise.
    pub fn choose<B: CubatureKernels>(
        self,
        backend: &B,
        f: Func<'_>,
        n: usize,
        opts: &Options,
    ) -> Method {
        if self != Method::Auto {
            return self;
        }
        if matches!(f, Func::Batch(_)) {
            return Method::BreadthFirst;
        }
        let device = backend.cub_is_device(f);
        let threads = (backend.cub_throughput(f) / HOST_EVALS_PER_THREAD_S)
            .round()
            .max(1.0) as usize;
        let tol = if opts.rel_tol > 0.0 {
            opts.rel_tol
        } else {
            opts.abs_tol
        };
        Method::choose_for(device, threads, n, tol)
    }

    /// [`Method::Auto`]'s rule, for a backend that evaluates on a device or
    /// on `threads` host threads, `n` dimensions and tolerance `tol`:
    ///
    /// * on a device: two-phase from [`DEVICE_TWO_PHASE_FROM_DIM`]
    ///   dimensions, breadth-first below. Measured on an H100 with the
    ///   defaults (`docs/benchmarks.md`, issue 31): two-phase was faster on
    ///   f1 at n = 7 (0.22 s against 0.33 s) and f5 at n = 8 (0.23 against
    ///   0.28 s to 1e-7), and on f1 breadth-first stopped with a true error
    ///   of 1.6e-4 against a tolerance of 1e-5 (its box errors underestimate
    ///   the oscillatory integrand; two-phase's second phase met it);
    ///   breadth-first was 2.6-8x faster on f3 at n = 5 and f4 at n = 6.
    ///   Six cases: a rule of thumb, not a law;
    /// * on the host: breadth-first when `threads` is at least
    ///   [`Method::host_threads_for_breadth_first`]`(n, tol)`, else
    ///   sequential CUHRE (one core, the fewest evaluations: at n <= 4 and
    ///   loose tolerances the parallel methods' first rounds alone cost more
    ///   than CUHRE's whole run).
    pub fn choose_for(device: bool, threads: usize, n: usize, tol: f64) -> Method {
        if device && n >= DEVICE_TWO_PHASE_FROM_DIM {
            Method::TwoPhase
        } else if device || threads >= Method::host_threads_for_breadth_first(n, tol) {
            Method::BreadthFirst
        } else {
            Method::Cuhre
        }
    }

    /// The fewest host threads with which [`Method::Auto`] runs
    /// breadth-first rather than sequential CUHRE in `n` dimensions at
    /// tolerance `tol`. From 165 cases on the CPU (f1-f5 and Genz's six
    /// families over [0, 1]^n, n = 3-7, tolerances 1e-3, 1e-5 and 1e-7, each
    /// method capped at 3 x 10^7 evaluations and 8 s;
    /// `examples/cub_method_grid.rs`, `docs/benchmarks.md`): breadth-first on
    /// 2 threads took R = 23, 15 and 5.3 times CUHRE's time at n = 3; 5.1, 3.1
    /// and 1.0 times at n = 4; 2.8, 1.4 and 1.2 times at n = 5-7 (geometric
    /// means over the cases both converged, n = 5-7 pooled). The threads at
    /// which it breaks even, 2 R, times 4/3 for imperfect scaling, rounded to
    /// the nearest power of two:
    ///
    /// | n | tol > 1e-4 | 1e-6 < tol <= 1e-4 | tol <= 1e-6 |
    /// | --- | --- | --- | --- |
    /// | <= 3 | 64 | 32 | 16 |
    /// | 4 | 16 | 8 | 2 |
    /// | >= 5 | 8 | 4 | 4 |
    pub fn host_threads_for_breadth_first(n: usize, tol: f64) -> usize {
        let class = if tol > 1e-4 {
            0
        } else if tol > 1e-6 {
            1
        } else {
            2
        };
        let table: [usize; 3] = match n {
            0..=3 => [64, 32, 16],
            4 => [16, 8, 2],
            _ => [8, 4, 4],
        };
        table[class]
    }
}

/// What [`integrate`] runs for `method` on `f` in `n` dimensions: the method
/// ([`Method::choose`]) and the options with the evaluation cap resolved
/// ([`Options::BACKEND_CAP`] becomes the backend's cap, or one host thread's
/// for sequential CUHRE on the host).
pub fn plan<B: CubatureKernels>(
    backend: &B,
    method: Method,
    f: Func<'_>,
    n: usize,
    opts: &Options,
) -> (Method, Options) {
    let chosen = method.choose(backend, f, n, &opts.resolved(backend, f));
    let opts = if chosen == Method::Cuhre && f.host().is_ok() {
        opts.with_cap(Options::host_thread_cap())
    } else {
        opts.resolved(backend, f)
    };
    (chosen, opts)
}

/// Integrates `f` over [lo, hi] (ignored by Gauss-Hermite, which needs `lo.len()`
/// as the dimension only) with `method` on `backend` (sequential CUHRE runs on
/// the host, or for device code through the backend's batches: see
/// [`cuhre::cuhre_on`]). Tensor rules need the same interval on every axis.
/// [`Method::Auto`] runs [`Method::choose`]'s method, and
/// [`Options::BACKEND_CAP`] becomes the backend's cap
/// ([`Options::resolved`]); [`Outcome::method`] says what ran.
pub fn integrate<B: CubatureKernels>(
    backend: &B,
    method: Method,
    f: Func<'_>,
    lo: &[f64],
    hi: &[f64],
    opts: &Options,
) -> Result<Outcome> {
    let (chosen, opts) = plan(backend, method, f, lo.len(), opts);
    let opts = &opts;
    match chosen {
        Method::Auto => Err(Error::InvalidArgument(
            "Method::choose left the method undecided".into(),
        )),
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
