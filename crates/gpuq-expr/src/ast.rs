//! The parsed expression tree ([`Ast`]) and its printing in the language's
//! own syntax.
//!
//! The tree is what the text says, before any unrolling or folding: `x[i]`
//! stays an indexed coordinate, `sum(...)` stays a loop, literals keep their
//! values. Printing ([`std::fmt::Display`]) puts parentheses only where the
//! precedence rules need them, and numbers in a form that reads back to the
//! same bits, so `Expr::parse(&ast.to_string(), dim)` gives `ast` back.

use std::fmt;

use crate::func::Func;

/// A binary operator of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `a + b`, IEEE addition.
    Add,
    /// `a - b`, IEEE subtraction.
    Sub,
    /// `a * b`, IEEE multiplication.
    Mul,
    /// `a / b`, IEEE division.
    Div,
    /// `a ^ b`, `gpuq_kernels::cubature::functions::pow(a, b)`.
    Pow,
}

impl BinOp {
    /// The operator's symbol, as written in expressions.
    pub fn symbol(self) -> char {
        match self {
            BinOp::Add => '+',
            BinOp::Sub => '-',
            BinOp::Mul => '*',
            BinOp::Div => '/',
            BinOp::Pow => '^',
        }
    }

    /// Binding strength when printing (higher binds tighter).
    fn precedence(self) -> u8 {
        match self {
            BinOp::Add | BinOp::Sub => ADDITIVE,
            BinOp::Mul | BinOp::Div => MULTIPLICATIVE,
            BinOp::Pow => POWER,
        }
    }
}

/// Which loop a [`Ast::Loop`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// `sum(i, a, b, t)` = ((t_a + t_{a+1}) + ...) + t_b; 0 when a > b.
    Sum,
    /// `prod(i, a, b, t)` = ((t_a * t_{a+1}) * ...) * t_b; 1 when a > b.
    Prod,
}

impl LoopKind {
    /// `"sum"` or `"prod"`.
    pub fn name(self) -> &'static str {
        match self {
            LoopKind::Sum => "sum",
            LoopKind::Prod => "prod",
        }
    }

    /// The value of an empty loop: 0 for a sum, 1 for a product.
    pub fn empty_value(self) -> f64 {
        match self {
            LoopKind::Sum => 0.0,
            LoopKind::Prod => 1.0,
        }
    }

    /// The operator that joins consecutive terms.
    pub fn op(self) -> BinOp {
        match self {
            LoopKind::Sum => BinOp::Add,
            LoopKind::Prod => BinOp::Mul,
        }
    }
}

/// A parsed expression: the tree of the text, not unrolled.
///
/// Every tree the parser produces prints (via `Display`) to text that parses
/// back to an equal tree. Trees built by hand print as well; they are
/// meaningful when their numbers are finite and non-negative (a negative value
/// is `Neg(Num(..))`), their coordinates lie in 1..=dim, their calls have the
/// right number of arguments and their index names are in scope and not
/// reserved.
#[derive(Clone, Debug, PartialEq)]
pub enum Ast {
    /// A number literal (finite, non-negative).
    Num(f64),
    /// `xK`: the coordinate K (1-based).
    Coord(usize),
    /// `x[EXPR]`: the coordinate whose 1-based index the (compile-time
    /// integer) expression gives.
    CoordAt(Box<Ast>),
    /// `n`: the dimension.
    Dim,
    /// `pi`.
    Pi,
    /// `e`.
    E,
    /// An index variable of an enclosing `sum` or `prod`.
    Index(String),
    /// `-a`.
    Neg(Box<Ast>),
    /// `a op b`.
    Binary(BinOp, Box<Ast>, Box<Ast>),
    /// `f(a, ...)`.
    Call(Func, Vec<Ast>),
    /// `sum(index, from, to, body)` or `prod(...)`.
    Loop {
        /// Sum or product.
        kind: LoopKind,
        /// The index variable's name.
        index: String,
        /// First index value (a compile-time integer expression).
        from: Box<Ast>,
        /// Last index value (a compile-time integer expression).
        to: Box<Ast>,
        /// The term, evaluated for each index value.
        body: Box<Ast>,
    },
}

/// Printing precedences: a subtree whose precedence is below the slot's
/// minimum is parenthesised.
const ADDITIVE: u8 = 1;
const MULTIPLICATIVE: u8 = 2;
const UNARY: u8 = 3;
const POWER: u8 = 4;
const ATOM: u8 = 5;

impl Ast {
    /// How tightly this node binds when printed.
    fn precedence(&self) -> u8 {
        match self {
            Ast::Binary(op, _, _) => op.precedence(),
            Ast::Neg(_) => UNARY,
            _ => ATOM,
        }
    }

    /// Prints `self`, in parentheses when it binds less tightly than `min`.
    fn fmt_at(&self, f: &mut fmt::Formatter<'_>, min: u8) -> fmt::Result {
        if self.precedence() < min {
            write!(f, "(")?;
            self.fmt_bare(f)?;
            write!(f, ")")
        } else {
            self.fmt_bare(f)
        }
    }

    /// Prints `self` without surrounding parentheses.
    fn fmt_bare(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ast::Num(v) => write!(f, "{}", number_text(*v)),
            Ast::Coord(k) => write!(f, "x{k}"),
            Ast::CoordAt(index) => write!(f, "x[{index}]"),
            Ast::Dim => write!(f, "n"),
            Ast::Pi => write!(f, "pi"),
            Ast::E => write!(f, "e"),
            Ast::Index(name) => write!(f, "{name}"),
            Ast::Neg(a) => {
                write!(f, "-")?;
                // `--a` would read back the same, `-(-a)` reads better.
                let min = if matches!(**a, Ast::Neg(_)) {
                    ATOM
                } else {
                    UNARY
                };
                a.fmt_at(f, min)
            }
            Ast::Binary(BinOp::Pow, a, b) => {
                // Right-associative; the exponent is a unary expression.
                a.fmt_at(f, ATOM)?;
                write!(f, "^")?;
                b.fmt_at(f, UNARY)
            }
            Ast::Binary(op, a, b) => {
                // Left-associative: the right operand must bind tighter.
                let p = op.precedence();
                a.fmt_at(f, p)?;
                write!(f, " {} ", op.symbol())?;
                b.fmt_at(f, p + 1)
            }
            Ast::Call(func, args) => {
                write!(f, "{}(", func.name())?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{a}")?;
                }
                write!(f, ")")
            }
            Ast::Loop {
                kind,
                index,
                from,
                to,
                body,
            } => write!(f, "{}({index}, {from}, {to}, {body})", kind.name()),
        }
    }
}

/// A number as text that reads back to the same bits: plain decimals for
/// moderate magnitudes (`3`, `0.25`), Rust's shortest exponent form otherwise
/// (`1e-300`, `2.5e20`). Also used for the numbers in error messages.
pub(crate) fn number_text(v: f64) -> String {
    if v == 0.0 || (1e-5..1e16).contains(&v.abs()) || !v.is_finite() {
        format!("{v}")
    } else {
        format!("{v:?}")
    }
}

impl fmt::Display for Ast {
    /// The expression in the language's syntax, with the fewest parentheses
    /// the precedences need. Cost: linear in the tree's size.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_bare(f)
    }
}
