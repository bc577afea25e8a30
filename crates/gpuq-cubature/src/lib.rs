//! # gpuq-cubature
//!
//! Adaptive multidimensional cubature over boxes, and tensor Gauss rules, on
//! the CPU (Rayon) and CUDA backends.
//!
//! * [`rules`]: the Berntsen-Espelid-Genz rules of DCUHRE (degree 13 for n = 2,
//!   11 for n = 3, 9 for n >= 4, each with four null rules for the error
//!   estimate and the fourth divided difference choosing the split axis) and the
//!   Genz-Malik degree-7/5 pair, for n = 2..=16; one application of a rule to a
//!   box is `gpuq_kernels::cubature::rule::evaluate`, shared by both backends,
//!   and in the parallel methods' batches `gpuq_kernels::cubature::lanes`
//!   (the points dealt to the 32 lanes of a warp, which the CPU runs in turn).
//! * [`cuhre()`]: sequential CUHRE (priority queue on the error) on the host.
//! * [`two_phase()`] ([`parallel`]) and [`breadth_first()`] ([`mod@breadth_first`]): the
//!   parallel algorithms, written once over [`CubatureKernels`], the trait of backend
//!   steps (batch evaluation, classification, compaction and splitting,
//!   second-phase local CUHRE from each box's known result with a tolerance
//!   per box, tensor chunk sums) whose default bodies run on the host and
//!   which the CPU and CUDA backends override.
//! * [`tensor`]: Gauss-Legendre and Gauss-Hermite product rules, N_a^N points with
//!   the index read as base-N_a digits, deterministic reduction; and
//!   Gauss-Legendre of rising order with an error estimate
//!   ([`tensor::gauss_legendre_auto`]).
//! * [`func`]: the integrands ([`Func`]): seed 004's f1-f5, Genz's six families
//!   and q^T q compiled into the kernels; any Rust closure (evaluated on the
//!   host, on every backend); an expression ([`Expr`], the language of
//!   `gpuq-expr`: compiled closures on the host, its CUDA C translation
//!   compiled by NVRTC and linked with the rule kernels on the device); user
//!   device code ([`UserCode`]: CUDA C, or PTX such as a Rust `no_std` crate's,
//!   see `examples/rust-integrand`), linked the same way, with an optional
//!   host twin for host backends.
//! * [`mod@reference`]: exact integrals of the Genz families over any box and the
//!   reference values of f1-f5.
//!
//! ## Defaults
//!
//! * **Method**: [`Method::Auto`] runs an adaptive method chosen per backend,
//!   dimension and tolerance by the rule of [`Method::choose`] (derived from
//!   the measurements in `docs/benchmarks.md`); [`Outcome::method`] says
//!   which.
//! * **Evaluation cap**: [`Options::max_evals`] is [`Options::BACKEND_CAP`] by
//!   default, about a minute ([`outcome::DEFAULT_BUDGET_S`]) of the backend's
//!   nominal throughput ([`CubatureKernels::cub_throughput`]): 1.8 x 10^8
//!   evaluations per host thread (one thread for sequential CUHRE on the
//!   host), 1.2 x 10^11 on the CUDA backend. The seed's cap of 10^8 was about
//!   a minute of its sequential code and 0.03 s of an H100.
//! * **Time limit**: [`Options::max_time`] (none by default) stops the
//!   adaptive loops between rounds.
//!
//! Every method returns an [`Outcome`]: estimate, error estimate, evaluations,
//! boxes, rounds, phase timings, the method that ran and a [`Status`] that
//! says why it stopped ([`Status::reason`]: tolerance met, evaluation cap,
//! region cap, time limit). An integrand that
//! returns NaN or an infinite value stops the run with
//! [`gpuq_core::Error::IntegrandNotFinite`] naming a point where it did (host
//! evaluations through a [`func::Guard`]; the linked device kernels record the
//! point; a built-in's box is evaluated again on the host, which gives the
//! same bits).
//!
//! ## Example
//!
//! A closure and an expression on the CPU backend, against their closed forms:
//!
//! ```
//! use gpuq_cpu::CpuBackend;
//! use gpuq_cubature::{integrate, Expr, Func, Method, Options};
//!
//! let cpu = CpuBackend::new();
//! let opts = Options { rel_tol: 1e-9, ..Options::default() };
//! // prod cos(x_i) over [0, 1]^3 = sin(1)^3, by the two-phase algorithm.
//! let f = |x: &[f64]| x.iter().map(|v| v.cos()).product::<f64>();
//! let out = integrate(&cpu, Method::TwoPhase, Func::Closure(&f), &[0.0; 3], &[1.0; 3], &opts)?;
//! assert!(out.converged() && (out.estimate - 1f64.sin().powi(3)).abs() < 1e-9);
//! // exp(-(x1 + x2 + x3 + x4)) over [0, 1]^4 = (1 - 1/e)^4, by sequential CUHRE.
//! let e = Expr::parse("exp(-sum(i, 1, n, x[i]))", 4)?;
//! let out = integrate(&cpu, Method::Cuhre, Func::Expr(&e), &[0.0; 4], &[1.0; 4], &opts)?;
//! assert!(out.converged() && (out.estimate - (1.0 - (-1f64).exp()).powi(4)).abs() < 1e-9);
//! # Ok::<(), gpuq_core::Error>(())
//! ```
//!
//! ## User integrands on the device
//!
//! [`CubatureKernels::cub_prepare`] makes an integrand ready for a backend and
//! says how it will be evaluated. On the CUDA backend an expression's CUDA C
//! (or the user's code) is compiled by NVRTC and linked by the driver's JIT
//! linker with `gpuq_user_cubature.ptx` (the rule kernels of
//! `kernels-rs/src/device/user_cubature.rs`, which call an external
//! `gpuq_integrand`) into one module, cached per process and on disk
//! (`gpuq_cuda::cache_dir`). The rule kernels then evaluate the user's
//! function in place, as they do the built-ins; the call crosses the link
//! and is not inlined. Expressions call the elementary functions of
//! `gpuq_kernels::cubature::functions` on both backends, so an expression
//! gives the same bits on the CPU and the GPU, and f1-f5 written as
//! expressions give the built-ins' bits.
//!
//! ## Costs
//!
//! A rule application costs its points in evaluations: 65 (n = 2), 127 (n = 3),
//! 2^n + 4 n^3 / 3 + 2 n^2 + 8/3 n + 1 (degree 9), 2^n + 2 n^2 + 2 n + 1
//! (Genz-Malik). Sequential CUHRE makes two applications per split; the parallel
//! methods one per live box per round, plus the second phase's local runs
//! (two per split; a box's first application is the first phase's).
//!
//! ## Determinism
//!
//! Each box's estimate, error and axis are computed by the same code on both
//! backends (the integrands' `sin`, `cos`, `exp`, `asin` are our own in
//! `gpuq_kernels::cubature::math`, `sqrt` is correctly rounded); the sums over boxes
//! and over tensor chunks are added on the host in a fixed order. Results do not
//! depend on the thread count.
//!
//! ## Provenance of the rules
//!
//! DCUHRE: J. Berntsen, T. O. Espelid and A. Genz, "An adaptive algorithm for the
//! approximate calculation of multiple integrals" and "DCUHRE" (ACM TOMS 17(4),
//! 1991); the degree-13 rule is S. Eriksen's (1984), the degree-11 rule Berntsen
//! and Espelid's (SIAM J. Numer. Anal. 25, 1988), the degree-9 rule and its null
//! rules Genz and Malik's construction (SIAM J. Numer. Anal. 20, 1983), with
//! DCUHRE's error heuristics. Genz-Malik: J. Comput. Appl. Math. 6 (1980).
//! Constants were transcribed from the publications' tables and formulas; the
//! tests check that every rule integrates every monomial up to its degree
//! exactly and every null rule annihilates the monomials of its degree.
//!
//! ## Not done
//!
//! * The CUDA backend runs the batch evaluation (one warp per box), the second
//!   phase (one thread per box, bounded heap in local memory) and the tensor sums
//!   on the device, but the rounds' classification, compaction and splitting run
//!   on the host (Rayon, into buffers reused from round to round): each round
//!   uploads the new boxes (2 n values each) and downloads three values per box.
//!   A device-resident breadth-first loop (boxes kept on the device between
//!   rounds) is not written. On seed 004's Table III the adaptive methods reach
//!   107-738x the seed's GPU times on f1-f4 but 46-51x on f5, whose evaluations
//!   alone take the whole budget of 100x; the rising-order product rule
//!   (`Method::GaussLegendreAuto`) takes f5 at 104-106x (`docs/benchmarks.md`).
//! * Closures run on the host on every backend (the CUDA backend hands their
//!   batches to the CPU backend): a function for the device is an expression or
//!   device code.
//! * Infinite bounds are refused with a clear error (no variable transformation
//!   is applied); Gauss-Hermite integrates against the standard normal on R^n.
//! * Reference values for f1 at n other than 7 and for f3 are not computed in
//!   closed form (see [`mod@reference`]).

#![warn(missing_docs)]

pub mod batch;
pub mod breadth_first;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod cuhre;
pub mod func;
pub mod kernels;
pub mod method;
pub mod outcome;
pub mod parallel;
pub mod reference;
pub mod region;
pub mod rules;
pub mod tensor;

pub use cuhre::{cuhre, cuhre_on};
pub use func::{builtin, kind_of, CodeKind, Func, HostFunc, UserCode};
pub use gpuq_expr::Expr;
pub use gpuq_kernels::cubature::integrand::Builtin;
pub use gpuq_kernels::cubature::rule::{BoxResult, Rule};
pub use kernels::{Boxes, CubatureKernels, Prepared};
pub use method::{integrate, plan, Method, DEVICE_TWO_PHASE_FROM_DIM};
pub use outcome::{Options, Outcome, Status, Timings};
pub use parallel::{breadth_first, two_phase};
pub use rules::RuleKind;
pub use tensor::{gauss_hermite, gauss_legendre, TensorRule};
