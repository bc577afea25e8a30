//! # gpuq-expr
//!
//! The integrand expression language of gpuq. A user's integrand arrives as
//! text, e.g. `1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)`; [`Expr::parse`] reads
//! it once for a dimension n, checks it completely (every error is found
//! before any evaluation and reported with the 1-based column, in
//! characters, of the offending token), and prepares
//!
//! * [`Expr::eval`]: the CPU evaluator, a tree of compiled closures with the
//!   sums unrolled, close to hand-written Rust in speed;
//! * [`Expr::cuda_source`]: CUDA C that the CUDA backend compiles with NVRTC
//!   into the device's `gpuq_integrand` ([`CUDA_ENTRY`]);
//! * [`Expr::eval_reference`]: a plain walk over the parsed tree ([`Ast`]),
//!   the definition the other two are tested against.
//!
//! All three compute the same operations in the same order with the same
//! functions (`gpuq_kernels::cubature::functions`, which the device module
//! exports as `gpuq_sin`, ...), so an expression gives the same bits on the
//! CPU and on the GPU, and the expression forms of the built-in integrands
//! f1-f5 give the built-ins' bits.
//!
//! ```
//! use gpuq_expr::Expr;
//! let f = Expr::parse("exp(-sum(i, 1, n, x[i]^2))", 3).unwrap();
//! let v = f.eval(&[0.1, 0.2, 0.3]);
//! assert_eq!(v.to_bits(), f.eval_reference(&[0.1, 0.2, 0.3]).to_bits());
//! assert!((v - (-0.14f64).exp()).abs() < 1e-15);
//! let err = Expr::parse("x1 + y", 3).unwrap_err();
//! assert_eq!(err.to_string(), "expression error at column 6: unknown name 'y'");
//! ```
//!
//! ## The language
//!
//! **Numbers**: `1`, `1.5`, `.5`, `2.`, `1e-3`, `2.5E+10`. Literals are
//! non-negative (`-2` is unary minus applied to `2`); one too large for f64
//! (`1e999`) is an error.
//!
//! **Coordinates**: `x1` ... `xn` (1-based; `x0` or `x{n+1}` is the error
//! "x index 0 is outside 1..n"), and `x[EXPR]`, where EXPR is an index
//! expression: it must not depend on x, and its value must be an integer in
//! 1..=n for every value of the enclosing loop indices (else an error at the
//! column of the `x`, naming the index values). An index expression may use
//! numbers, `n`, `pi`, `e`, the enclosing loop indices, the operators and the
//! functions: `x[i]`, `x[n + 1 - i]`, `x[2*i - 1]`.
//!
//! **Names**: `n` is the dimension (a number), `pi` and `e` the constants;
//! an index variable of an enclosing `sum` or `prod` is its current value.
//! Any other name is an error ("unknown name 'y'", "unknown function 'f'").
//!
//! **Operators**, tightest first:
//!
//! | operators | associativity | note |
//! |---|---|---|
//! | `^` | right: `2^3^2 = 2^9` | the exponent is a unary expression: `2^-1` |
//! | unary `-`, `+` | | `-x^2 = -(x^2)` |
//! | `*` `/` | left | |
//! | `+` `-` | left | |
//!
//! Parentheses group. `+ - * /` and unary minus are single IEEE f64
//! operations; `a ^ b` is `functions::pow(a, b)`.
//!
//! **Functions**, each the function of the same name in
//! `gpuq_kernels::cubature::functions` (exported to the device as
//! `gpuq_<name>`):
//!
//! | functions | arguments |
//! |---|---|
//! | `sin cos tan asin acos atan` | 1 |
//! | `atan2(y, x)` | 2 |
//! | `sinh cosh tanh exp log log10 sqrt abs floor erf` | 1 |
//! | `pow(a, b)` (the same as `a ^ b`) | 2 |
//! | `min max` (C's `fmin`/`fmax`: a NaN argument is skipped) | 2 or more, folded from the left: `min(a, b, c) = min(min(a, b), c)` |
//!
//! A wrong number of arguments is an error at the function's name ("sin
//! takes 1 argument, got 2"). `asin` and `acos` take arguments past +-1 by
//! rounding only (about 1e-12) as +-1, and are NaN further out.
//!
//! **Sums and products**: `sum(i, a, b, EXPR)` and `prod(i, a, b, EXPR)`.
//! `i` is a new index variable: a name that is not reserved (`x`, `xK`, `n`,
//! `pi`, `e`, a function name, `sum`, `prod`) and not an enclosing loop's
//! index (no shadowing); sibling loops may reuse a name. The bounds `a` and
//! `b` are integer expressions that must not depend on x (they may use `n`
//! and the enclosing indices); the body may use `i` as a number and in
//! `x[...]`. The order is part of the meaning: a sum is `((t_a + t_{a+1}) +
//! t_{a+2}) + ...`, starting from the first term (not from 0), a product
//! likewise; an empty range (a > b) gives 0 for a sum and 1 for a product.
//!
//! **Integer powers**: when the exponent of `^` or `pow` is an integer
//! constant k once loops are unrolled and constants folded (`x[i]^i`,
//! `x1^n`, `x1^-2`), `functions::pow` computes the chain `((a a) a) ...` of
//! |k| - 1 multiplications for 1 <= |k| <= 64 (1 / chain for k < 0, 1 for
//! k = 0); the compiled forms perform that chain directly, the CUDA C as
//! written-out multiplications.
//!
//! **Limits**: the dimension is 1..=[`MAX_DIM`]; parentheses, calls, unary
//! operators and exponents nest at most [`MAX_NESTING`] levels; the tree is at
//! most [`MAX_HEIGHT`] operations deep (a longer chain `x1 + x2 + ...` should
//! be a `sum`); the expression expands to at most [`MAX_NODES`] nodes once
//! loops are unrolled. Exceeding one is an error, never a stack overflow.
//! Any string, including garbage and non-ASCII text, gives `Ok` or `Err`,
//! never a panic. Whitespace is free.
//!
//! ## Errors
//!
//! [`Expr::parse`] returns [`gpuq_core::Error::Expression`] with the column
//! (1-based, in characters) of the offending token and a one-line message,
//! e.g. "unknown name 'y'", "sin takes 1 argument, got 2", "x index 9 is
//! outside 1..8", "x index 9 is outside 1..8 when i = 8", "expected ')' but
//! found end of input", "sum bounds must not depend on x" (at the `x`),
//! "index 'i' is already used by an enclosing sum", "number '1e999' is too
//! large", "expression nests more than 200 levels deep". A dimension outside
//! 1..=[`MAX_DIM`] is [`gpuq_core::Error::InvalidArgument`].
//!
//! ## How it evaluates
//!
//! Parsing builds the [`Ast`]; lowering unrolls every loop for the known n
//! (index values become constants, `x[...]` a fixed slot), folds every
//! subtree that does not depend on x to its value (computing the same
//! operations in the same order), and turns constant integer powers into
//! multiplication chains. Nothing is reassociated or reordered. In the CPU
//! evaluator only the sums, products and other folds of two or more
//! non-constant terms are closures; between them each value is a leaf (a
//! constant, `x[k]`, `x[k]^2`, `c*x[k]` or a child fold) followed by a short
//! list of steps (`cos`, `^2`, `0.1 + v`, `1 / v`, ...) that the parent's
//! closure runs inline, so f1 is two closures. The CUDA C is one statement
//! per operation.
//!
#![warn(missing_docs)]

mod ast;
mod compile;
mod cuda;
mod func;
mod ir;
mod lexer;
mod lower;
mod parser;
mod reference;

use std::fmt;
use std::sync::Arc;

use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::Integrand;

pub use ast::{Ast, BinOp, LoopKind};
pub use func::{Arity, Func, UnaryFunc};

/// The name of the device function [`Expr::cuda_source`] defines:
/// `extern "C" __device__ double gpuq_integrand(const double* x, unsigned int n)`.
pub const CUDA_ENTRY: &str = "gpuq_integrand";

/// Largest dimension an expression may have.
pub const MAX_DIM: usize = 64;

/// Deepest nesting of parentheses, calls, unary operators and exponents.
pub const MAX_NESTING: usize = 200;

/// Most operations on one path from the root of the parsed tree to a leaf.
pub const MAX_HEIGHT: usize = 500;

/// Most nodes an expression may expand to once its loops are unrolled.
pub const MAX_NODES: usize = 1_000_000;

/// The CPU evaluator of an expression.
type Evaluator = Arc<dyn Fn(&[f64]) -> f64 + Send + Sync>;

/// A checked integrand expression for a fixed dimension, ready to evaluate on
/// the CPU and to translate into CUDA C. Cloning is cheap (shared).
#[derive(Clone)]
pub struct Expr {
    text: String,
    dim: usize,
    ast: Arc<Ast>,
    ir: Arc<ir::Ir>,
    evaluator: Evaluator,
}

impl Expr {
    /// Parses and checks `text` as an expression of `dim` coordinates, and
    /// compiles it. Errors: [`Error::InvalidArgument`] for `dim` outside
    /// 1..=[`MAX_DIM`]; [`Error::Expression`] (column and message) for
    /// anything wrong with the text (see the crate documentation). Cost:
    /// linear in the text plus the unrolled size (at most [`MAX_NODES`]).
    pub fn parse(text: &str, dim: usize) -> Result<Expr> {
        if !(1..=MAX_DIM).contains(&dim) {
            return Err(Error::InvalidArgument(format!(
                "expression dimension {dim} is outside 1..={MAX_DIM}"
            )));
        }
        let build = || -> Result<Expr> {
            let node = parser::parse(text, dim)?;
            let ir = lower::lower(&node, dim)?;
            let evaluator: Evaluator = Arc::from(compile::compile(&ir));
            Ok(Expr {
                text: text.to_string(),
                dim,
                ast: Arc::new(node.to_ast()),
                ir: Arc::new(ir),
                evaluator,
            })
        };
        on_large_stack(text, build).unwrap_or_else(|| {
            Err(Error::InvalidArgument(
                "the expression could not be parsed (no thread to parse it on)".into(),
            ))
        })
    }

    /// The text the expression was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The dimension n: how many coordinates a point has.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The parsed tree (loops not unrolled, nothing folded).
    pub fn ast(&self) -> &Ast {
        &self.ast
    }

    /// f(x) by the compiled closures: the fast CPU path. `x` must hold
    /// [`Expr::dim`] values (extra ones are ignored; with fewer the result is
    /// NaN). Same bits as [`Expr::eval_reference`]. Cost: the unrolled
    /// expression's operations plus a few indirect calls.
    #[inline]
    pub fn eval(&self, x: &[f64]) -> f64 {
        if x.len() < self.dim {
            return f64::NAN;
        }
        (self.evaluator)(x)
    }

    /// f(x) by a plain recursive walk over [`Expr::ast`], loops run as loops:
    /// the definition [`Expr::eval`] is tested against. `x` as for `eval`.
    /// Cost: several times `eval`'s (name lookups, no folding).
    pub fn eval_reference(&self, x: &[f64]) -> f64 {
        if x.len() < self.dim {
            return f64::NAN;
        }
        reference::evaluate(&self.ast, &x[..self.dim], self.dim)
    }

    /// One self-contained CUDA C++ translation unit (no `#include`) defining
    /// `extern "C" __device__ double gpuq_integrand(const double* x, unsigned
    /// int n)` ([`CUDA_ENTRY`]; `n` unused), which computes the same
    /// operations in the same order as [`Expr::eval`], calling the project's
    /// `gpuq_<function>` device functions it declares. Its first line is a
    /// comment quoting the expression and the dimension. Cost: linear in the
    /// unrolled size.
    pub fn cuda_source(&self) -> String {
        on_large_stack(&self.text, || {
            cuda::cuda_source(&self.ir, &self.text, self.dim)
        })
        .unwrap_or_default()
    }
}

/// Stack for the recursive passes over a tree (parsing, lowering, compiling,
/// writing C): ample for [`MAX_NESTING`] and [`MAX_HEIGHT`] even in an
/// unoptimised build, whose frames are several times larger. Only the pages
/// touched are committed.
const WORK_STACK: usize = 64 << 20;

/// Texts up to this many characters nest too little to need [`WORK_STACK`]
/// (a tree is at most as deep as its text is long).
const SHORT_TEXT: usize = 64;

/// `work()`, on a scoped thread with a [`WORK_STACK`] stack when `text` is
/// long enough to nest deeply (on the calling thread if it is short or no
/// thread can be started), so that the deepest tree the limits allow cannot
/// overflow the caller's stack. None only if `work` could not run. Cost: a
/// thread start for long texts, some tens of microseconds.
fn on_large_stack<T: Send>(text: &str, work: impl FnOnce() -> T + Send) -> Option<T> {
    let mut slot = Some(work);
    if text.chars().count() > SHORT_TEXT {
        let slot = &mut slot;
        let from_thread = std::thread::scope(|scope| {
            let thread = std::thread::Builder::new()
                .name("gpuq-expr".into())
                .stack_size(WORK_STACK)
                .spawn_scoped(scope, move || slot.take().map(|w| w()));
            match thread.map(|t| t.join()) {
                Ok(Ok(v)) => v,
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                Err(_) => None,
            }
        });
        if from_thread.is_some() {
            return from_thread;
        }
    }
    // Short, or the thread did not start (the work is then still here).
    slot.take().map(|w| w())
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expr")
            .field("text", &self.text)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl Integrand for Expr {
    /// [`Expr::eval`].
    #[inline]
    fn eval(&self, x: &[f64]) -> f64 {
        Expr::eval(self, x)
    }
}
