//! What is integrated: a built-in integrand (fused into the kernels of every
//! backend), a Rust closure (evaluated on the host), an expression (`gpuq-expr`:
//! compiled closures on the host, CUDA C linked into the kernels on the
//! device), or user device code (CUDA C or PTX defining `gpuq_integrand`, with
//! an optional host twin for host backends).
//!
//! Every host evaluation goes through a [`Guard`], which records the first
//! NaN or infinite value and its point, so that a run stops with
//! [`Error::IntegrandNotFinite`] instead of returning a NaN estimate.

use gpuq_core::{Error, Result};
use gpuq_expr::Expr;
use gpuq_kernels::cubature::integrand::{self as k, Builtin, Integrand, MAX_DIM};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A host function of x.
pub type HostFn<'a> = &'a (dyn Fn(&[f64]) -> f64 + Sync);
pub use crate::batch::BatchFn;

/// An integrand as the algorithms take it. (`Builtin` is large, 264 bytes, but
/// a `Func` is passed once per batch, not per point.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
pub enum Func<'a> {
    /// One of the integrands compiled into the kernels (see [`builtin`]).
    Builtin(Builtin),
    /// Any function of x; evaluated on the host on every backend (the CUDA
    /// backend hands its batches to the CPU backend).
    Closure(HostFn<'a>),
    /// A function of many points at once ([`crate::batch`]): evaluated on the host, one
    /// call per round of boxes (or per tensor rule) rather than per point.
    Batch(BatchFn<'a>),
    /// An expression: compiled closures on the host backends, CUDA C compiled
    /// by NVRTC and linked with the rule kernels on the CUDA backend.
    Expr(&'a Expr),
    /// User device code (CUDA C or PTX); on host backends its host twin, if
    /// it has one.
    Code(&'a UserCode<'a>),
}

impl<'a> Func<'a> {
    /// The integrand of user CUDA C (see [`UserCode::cuda_source`]).
    pub fn cuda_source(code: &'a UserCode<'a>) -> Self {
        Func::Code(code)
    }

    /// The number of variables the integrand fixes (a closure fixes none).
    pub fn dim(&self) -> Option<usize> {
        match self {
            Func::Builtin(b) => Some(b.dim as usize),
            Func::Closure(_) | Func::Batch(_) => None,
            Func::Expr(e) => Some(e.dim()),
            Func::Code(c) => Some(c.dim),
        }
    }

    /// How the integrand is given, as reports name it: "builtin", "closure",
    /// "expr", "cuda-c" or "ptx".
    pub fn kind_name(&self) -> &'static str {
        match self {
            Func::Builtin(_) => "builtin",
            Func::Closure(_) => "closure",
            Func::Batch(_) => "batch",
            Func::Expr(_) => "expr",
            Func::Code(c) => match c.kind {
                CodeKind::CudaC => "cuda-c",
                CodeKind::Ptx => "ptx",
            },
        }
    }

    /// The integrand as the host evaluates it, or an error for device code
    /// without a host twin. O(1).
    pub fn host(&self) -> Result<HostFunc<'a>> {
        Ok(match *self {
            Func::Builtin(b) => HostFunc::Builtin(b),
            Func::Closure(c) => HostFunc::Closure(c),
            Func::Batch(b) => HostFunc::Batch(b),
            Func::Expr(e) => HostFunc::Expr(e),
            Func::Code(c) => HostFunc::Closure(c.host.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "this integrand is device code ({}) without a host function: run it on the CUDA backend, or give one with UserCode::with_host",
                    Func::Code(c).kind_name()
                ))
            })?),
        })
    }

    /// Errors unless the integrand takes `n` variables (a closure takes any).
    pub fn check_dim(&self, op: &'static str, n: usize) -> Result<()> {
        match self.dim() {
            Some(d) if d != n => Err(Error::shape(
                op,
                format!("{n} variables"),
                format!("an integrand of {d}"),
            )),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Debug for Func<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Func::Builtin(b) => write!(f, "Builtin({})", name_of(b.kind)),
            Func::Closure(_) => write!(f, "Closure"),
            Func::Batch(_) => write!(f, "Batch"),
            Func::Expr(e) => write!(f, "Expr({:?}, n = {})", e.text(), e.dim()),
            Func::Code(c) => write!(f, "Code({:?}, n = {})", c.kind, c.dim),
        }
    }
}

/// The language of [`UserCode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeKind {
    /// CUDA C, compiled at run time by NVRTC.
    CudaC,
    /// PTX (e.g. a Rust `no_std` crate built for `nvptx64-nvidia-cuda`).
    Ptx,
}

/// User device code defining
/// `extern "C" __device__ double gpuq_integrand(const double *x, unsigned int n)`
/// (x holds the n coordinates of one point), for the CUDA backend, which links
/// it with its rule kernels; `host`, when given, is the same function for host
/// backends (the CPU, a `Dist` of CPU ranks) and sequential CUHRE.
#[derive(Clone)]
pub struct UserCode<'a> {
    /// The code's language.
    pub kind: CodeKind,
    /// Its text (for CUDA C given as a function body, the body wrapped into
    /// `gpuq_integrand`).
    pub text: Cow<'a, str>,
    /// Number of variables n.
    pub dim: usize,
    /// The same function on the host, if any.
    pub host: Option<HostFn<'a>>,
}

/// The elementary functions of `gpuq_kernels::cubature::functions` as the user
/// module exports them, declared for a CUDA C body: (name, arguments).
const DEVICE_FUNCTIONS: [(&str, usize); 20] = [
    ("sin", 1),
    ("cos", 1),
    ("tan", 1),
    ("asin", 1),
    ("acos", 1),
    ("atan", 1),
    ("atan2", 2),
    ("sinh", 1),
    ("cosh", 1),
    ("tanh", 1),
    ("exp", 1),
    ("log", 1),
    ("log10", 1),
    ("sqrt", 1),
    ("abs", 1),
    ("floor", 1),
    ("erf", 1),
    ("min", 2),
    ("max", 2),
    ("pow", 2),
];

/// A CUDA C function body made the translation unit that defines
/// `gpuq_integrand`, with gpuq's elementary functions declared.
fn wrap_body(body: &str) -> String {
    let mut out = String::from("// a gpuq_integrand body given by the user\n");
    for (name, args) in DEVICE_FUNCTIONS {
        let params = vec!["double"; args].join(", ");
        out += &format!("extern \"C\" __device__ double gpuq_{name}({params});\n");
    }
    out += &format!(
        "extern \"C\" __device__ double {}(const double* x, unsigned int n)\n{{\n{body}\n}}\n",
        gpuq_expr::CUDA_ENTRY
    );
    out
}

impl<'a> UserCode<'a> {
    fn new(kind: CodeKind, text: Cow<'a, str>, dim: usize) -> Result<Self> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::InvalidArgument(format!(
                "user integrands take 1 to {MAX_DIM} variables, not {dim}"
            )));
        }
        if !text.contains(gpuq_expr::CUDA_ENTRY) {
            return Err(Error::InvalidArgument(format!(
                "the {kind:?} code does not define {}(const double *x, unsigned int n)",
                gpuq_expr::CUDA_ENTRY
            )));
        }
        if text.contains('\0') {
            return Err(Error::InvalidArgument(
                "device code contains a NUL character".into(),
            ));
        }
        Ok(UserCode {
            kind,
            text,
            dim,
            host: None,
        })
    }

    /// CUDA C of `dim` variables: either a translation unit that defines
    /// `extern "C" __device__ double gpuq_integrand(const double *x, unsigned
    /// int n)`, or only that function's body (`return exp(-x[0] * x[1]);`),
    /// which is wrapped into it. NVRTC checks the code when the CUDA backend
    /// first uses it. The code may call CUDA's math functions and gpuq's
    /// (`gpuq_sin`, `gpuq_exp`, ... of `gpuq_kernels::cubature::functions`,
    /// the same bits as on the host; declared for a body, to be declared
    /// `extern "C" __device__ double gpuq_sin(double);` in a whole unit).
    pub fn cuda_source(src: &'a str, dim: usize) -> Result<Self> {
        let text = if src.contains(gpuq_expr::CUDA_ENTRY) {
            Cow::Borrowed(src)
        } else {
            Cow::Owned(wrap_body(src))
        };
        Self::new(CodeKind::CudaC, text, dim)
    }

    /// PTX of `dim` variables defining `gpuq_integrand` as a `.visible .func`
    /// (see `examples/rust-integrand` for a Rust crate built to such PTX).
    pub fn ptx(ptx: &'a str, dim: usize) -> Result<Self> {
        Self::new(CodeKind::Ptx, Cow::Borrowed(ptx), dim)
    }

    /// The same code with `host` as its host twin.
    pub fn with_host(self, host: HostFn<'a>) -> Self {
        UserCode {
            host: Some(host),
            ..self
        }
    }
}

/// An integrand the host can evaluate ([`Func::host`]).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
pub enum HostFunc<'a> {
    /// A built-in.
    Builtin(Builtin),
    /// A closure.
    Closure(HostFn<'a>),
    /// A batch function ([`crate::batch`]).
    Batch(BatchFn<'a>),
    /// A compiled expression.
    Expr(&'a Expr),
}

/// A closure seen as an [`Integrand`].
pub struct ClosureIntegrand<'a>(pub HostFn<'a>);

impl Integrand for ClosureIntegrand<'_> {
    fn eval(&self, x: &[f64]) -> f64 {
        (self.0)(x)
    }
}

/// The first non-finite value seen by the [`Guard`]s of a batch, and its point.
#[derive(Default)]
pub struct NonFinite {
    seen: AtomicBool,
    first: Mutex<Option<(f64, Vec<f64>)>>,
    failed: Mutex<Option<Error>>,
}

impl NonFinite {
    /// Records `v` at `x` unless a value was recorded already.
    #[cold]
    pub fn record(&self, x: &[f64], v: f64) {
        if !self.seen.swap(true, Ordering::Relaxed) {
            if let Ok(mut first) = self.first.lock() {
                *first = Some((v, x.to_vec()));
            }
        }
    }

    /// Records the first error of a batch integrand ([`crate::batch`]); [`NonFinite::check`]
    /// returns it before any non-finite value. O(1).
    #[cold]
    pub fn fail(&self, e: Error) {
        self.seen.store(true, Ordering::Relaxed);
        if let Ok(mut failed) = self.failed.lock() {
            failed.get_or_insert(e);
        }
    }

    /// The first error of a batch integrand ([`NonFinite::fail`]), else
    /// `Err(IntegrandNotFinite)` when a value was recorded. O(1).
    pub fn check(&self) -> Result<()> {
        if let Some(e) = self.failed.lock().ok().and_then(|mut f| f.take()) {
            return Err(e);
        }
        if !self.seen.load(Ordering::Relaxed) {
            return Ok(());
        }
        let first = self.first.lock().ok().and_then(|f| f.clone());
        let (value, point) = first.unwrap_or((f64::NAN, Vec::new()));
        Err(Error::IntegrandNotFinite { value, point })
    }
}

/// An integrand that records its first NaN or infinite value (one comparison
/// per evaluation).
pub struct Guard<'a, F: ?Sized> {
    /// The integrand.
    pub f: &'a F,
    /// Where the first non-finite value goes.
    pub seen: &'a NonFinite,
}

impl<F: Integrand + ?Sized> Integrand for Guard<'_, F> {
    #[inline]
    fn eval(&self, x: &[f64]) -> f64 {
        let v = self.f.eval(x);
        if !v.is_finite() {
            self.seen.record(x, v);
        }
        v
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
