//! The functions an expression may call, their names, arities and values.
//!
//! Every value comes from `gpuq_kernels::cubature::functions`, the code the
//! device module exports as `gpuq_<name>`, so the CPU and the GPU agree bit
//! for bit.

use gpuq_kernels::cubature::functions as fx;

use crate::ast::BinOp;

/// Declares [`UnaryFunc`] with its names and values from one table.
macro_rules! unary_functions {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $f:path;)+) => {
        /// A function of one argument.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryFunc {
            $($(#[$doc])* $variant,)+
        }

        impl UnaryFunc {
            /// Every unary function, in declaration order.
            pub const ALL: &'static [UnaryFunc] = &[$(UnaryFunc::$variant,)+];

            /// The function's name in expressions (and in `gpuq_<name>`).
            pub fn name(self) -> &'static str {
                match self {
                    $(UnaryFunc::$variant => $name,)+
                }
            }

            /// The function's value at `a` (`functions::<name>(a)`). Cost: one
            /// call, a few tens of flops.
            #[inline]
            pub fn apply(self, a: f64) -> f64 {
                (self.function())(a)
            }

            /// `functions::<name>` itself.
            pub(crate) fn function(self) -> fn(f64) -> f64 {
                match self {
                    $(UnaryFunc::$variant => $f,)+
                }
            }
        }
    };
}

unary_functions! {
    /// `sin(a)`.
    Sin = "sin" => fx::sin;
    /// `cos(a)`.
    Cos = "cos" => fx::cos;
    /// `tan(a)`.
    Tan = "tan" => fx::tan;
    /// `asin(a)` (arguments past +-1 by rounding only are taken as +-1).
    Asin = "asin" => fx::asin;
    /// `acos(a)` (as `asin` past +-1).
    Acos = "acos" => fx::acos;
    /// `atan(a)`.
    Atan = "atan" => fx::atan;
    /// `sinh(a)`.
    Sinh = "sinh" => fx::sinh;
    /// `cosh(a)`.
    Cosh = "cosh" => fx::cosh;
    /// `tanh(a)`.
    Tanh = "tanh" => fx::tanh;
    /// `exp(a)`.
    Exp = "exp" => fx::exp;
    /// `log(a)`, the natural logarithm.
    Log = "log" => fx::log;
    /// `log10(a)`.
    Log10 = "log10" => fx::log10;
    /// `sqrt(a)`, correctly rounded.
    Sqrt = "sqrt" => fx::sqrt;
    /// `abs(a)`.
    Abs = "abs" => fx::abs;
    /// `floor(a)`.
    Floor = "floor" => fx::floor;
    /// `erf(a)`, the error function.
    Erf = "erf" => fx::erf;
}

/// A function an expression may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// One of the functions of one argument.
    Unary(UnaryFunc),
    /// `atan2(y, x)`: the angle of the point (x, y).
    Atan2,
    /// `pow(a, b)`: the same as `a ^ b`.
    Pow,
    /// `min(a, b, ...)`: C's `fmin`, folded from the left.
    Min,
    /// `max(a, b, ...)`: C's `fmax`, folded from the left.
    Max,
}

/// How many arguments a function takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many.
    Exactly(usize),
    /// This many or more.
    AtLeast(usize),
}

impl Arity {
    /// Whether `count` arguments are right.
    pub fn accepts(self, count: usize) -> bool {
        match self {
            Arity::Exactly(k) => count == k,
            Arity::AtLeast(k) => count >= k,
        }
    }
}

impl Func {
    /// Every function: the unary ones, then atan2, pow, min, max.
    pub fn all() -> impl Iterator<Item = Func> {
        UnaryFunc::ALL.iter().map(|&u| Func::Unary(u)).chain([
            Func::Atan2,
            Func::Pow,
            Func::Min,
            Func::Max,
        ])
    }

    /// The function's name in expressions.
    pub fn name(self) -> &'static str {
        match self {
            Func::Unary(u) => u.name(),
            Func::Atan2 => "atan2",
            Func::Pow => "pow",
            Func::Min => "min",
            Func::Max => "max",
        }
    }

    /// The function called `name`, if any. Cost: a scan of the 20 names.
    pub fn from_name(name: &str) -> Option<Func> {
        Func::all().find(|f| f.name() == name)
    }

    /// How many arguments the function takes.
    pub fn arity(self) -> Arity {
        match self {
            Func::Unary(_) => Arity::Exactly(1),
            Func::Atan2 | Func::Pow => Arity::Exactly(2),
            Func::Min | Func::Max => Arity::AtLeast(2),
        }
    }
}

/// An operation of two arguments, as the evaluators see it: the binary
/// operators and the two-argument functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op2 {
    Add,
    Sub,
    Mul,
    Div,
    /// `functions::pow` (`^` and `pow`).
    Pow,
    Atan2,
    Min,
    Max,
}

impl Op2 {
    /// The operation applied to `a` and `b`: one IEEE operation or one call
    /// of `functions`.
    #[inline]
    pub(crate) fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Op2::Add => a + b,
            Op2::Sub => a - b,
            Op2::Mul => a * b,
            Op2::Div => a / b,
            Op2::Pow => fx::pow(a, b),
            Op2::Atan2 => fx::atan2(a, b),
            Op2::Min => fx::min(a, b),
            Op2::Max => fx::max(a, b),
        }
    }

    /// The operation of a function of two or more arguments (None for the
    /// unary functions).
    pub(crate) fn of_func(f: Func) -> Option<Op2> {
        match f {
            Func::Unary(_) => None,
            Func::Atan2 => Some(Op2::Atan2),
            Func::Pow => Some(Op2::Pow),
            Func::Min => Some(Op2::Min),
            Func::Max => Some(Op2::Max),
        }
    }
}

impl From<BinOp> for Op2 {
    fn from(op: BinOp) -> Op2 {
        match op {
            BinOp::Add => Op2::Add,
            BinOp::Sub => Op2::Sub,
            BinOp::Mul => Op2::Mul,
            BinOp::Div => Op2::Div,
            BinOp::Pow => Op2::Pow,
        }
    }
}
