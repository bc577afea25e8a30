//! [`Ir`] to closures: the fast CPU evaluator.
//!
//! Only the folds of two or more non-constant terms (sums, products, ...)
//! become closures. Everything between them is data their closure runs
//! inline: a leaf (a constant, `x[k]`, `x[k]^2`, `c * x[k]`, or a call of a
//! child fold's closure) followed by a list of steps, each a unary operation
//! or a binary one with a constant operand (`cos`, `^2`, `0.1 + v`, `1 / v`).
//! f1 `1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)` is then two closures: the sum of
//! squares, and the root running `cos`, `^2`, `0.1 +`, `1 /` on its value.
//! Every step performs exactly the operation of its Ir node, in its order.

use gpuq_kernels::cubature::functions as fx;

use crate::func::Op2;
use crate::ir::{pow_int, Ir, Op1};

/// A compiled expression: f(x) for x holding at least the slots it reads.
pub(crate) type Compiled = Box<dyn Fn(&[f64]) -> f64 + Send + Sync>;

/// The evaluator of `ir`. Cost: linear in the Ir's size (one allocation per
/// fold and per list of steps).
pub(crate) fn compile(ir: &Ir) -> Compiled {
    let root = Operand::of(ir);
    match root {
        Operand {
            leaf: Leaf::Call(g),
            steps,
        } if steps.is_empty() => g,
        root => Box::new(move |x| root.eval(x)),
    }
}

/// Where an [`Operand`]'s value starts.
enum Leaf {
    Const(f64),
    /// `x[k]`.
    Slot(usize),
    /// `x[k] * x[k]`.
    Square(usize),
    /// `c * x[k]`.
    Scaled(f64, usize),
    /// A fold's closure.
    Call(Compiled),
}

/// An operation of one value. The four IEEE operations with a constant have
/// variants of their own, so that applying a step is one dispatch.
#[derive(Clone, Copy)]
enum Step {
    Neg,
    /// A unary function, called through its pointer (a compact function of
    /// its own, as in hand-written code, rather than one arm of a large
    /// inlined match).
    Func(fn(f64) -> f64),
    /// `v * v`.
    Square,
    /// [`Op1::PowInt`].
    PowInt(i32),
    /// `c + v`.
    ConstPlus(f64),
    /// `c - v`.
    ConstMinus(f64),
    /// `c * v`.
    ConstTimes(f64),
    /// `c / v`.
    ConstOver(f64),
    /// `v + c`.
    PlusConst(f64),
    /// `v - c`.
    MinusConst(f64),
    /// `v * c`.
    TimesConst(f64),
    /// `v / c`.
    OverConst(f64),
    /// `c op v` for the other operations.
    ConstLeft(Op2, f64),
    /// `v op c` for the other operations.
    ConstRight(Op2, f64),
}

impl Step {
    /// `c op v`.
    fn const_left(op: Op2, c: f64) -> Step {
        match op {
            Op2::Add => Step::ConstPlus(c),
            Op2::Sub => Step::ConstMinus(c),
            Op2::Mul => Step::ConstTimes(c),
            Op2::Div => Step::ConstOver(c),
            op => Step::ConstLeft(op, c),
        }
    }

    /// `v op c`.
    fn const_right(op: Op2, c: f64) -> Step {
        match op {
            Op2::Add => Step::PlusConst(c),
            Op2::Sub => Step::MinusConst(c),
            Op2::Mul => Step::TimesConst(c),
            Op2::Div => Step::OverConst(c),
            op => Step::ConstRight(op, c),
        }
    }

    #[inline(always)]
    fn apply(self, v: f64) -> f64 {
        match self {
            Step::Neg => -v,
            Step::Func(f) => f(v),
            Step::Square => v * v,
            Step::PowInt(k) => pow_int(v, k),
            Step::ConstPlus(c) => c + v,
            Step::ConstMinus(c) => c - v,
            Step::ConstTimes(c) => c * v,
            Step::ConstOver(c) => c / v,
            Step::PlusConst(c) => v + c,
            Step::MinusConst(c) => v - c,
            Step::TimesConst(c) => v * c,
            Step::OverConst(c) => v / c,
            Step::ConstLeft(op, c) => op.apply(c, v),
            Step::ConstRight(op, c) => op.apply(v, c),
        }
    }
}

/// A value its parent computes inline: the leaf, then the steps in order.
struct Operand {
    leaf: Leaf,
    steps: Vec<Step>,
}

impl Operand {
    fn leaf(leaf: Leaf) -> Operand {
        Operand {
            leaf,
            steps: Vec::new(),
        }
    }

    /// `self` followed by `step`.
    fn then(mut self, step: Step) -> Operand {
        self.steps.push(step);
        self
    }

    /// The operand form of `ir` (compiling the folds in it).
    fn of(ir: &Ir) -> Operand {
        match ir {
            Ir::Const(c) => Operand::leaf(Leaf::Const(*c)),
            Ir::X(k) => Operand::leaf(Leaf::Slot(*k)),
            Ir::Unary(Op1::PowInt(2), a) => match **a {
                Ir::X(k) => Operand::leaf(Leaf::Square(k)),
                _ => Operand::of(a).then(Step::Square),
            },
            Ir::Unary(op, a) => Operand::of(a).then(match *op {
                Op1::Neg => Step::Neg,
                Op1::Func(f) => Step::Func(f.function()),
                Op1::PowInt(k) => Step::PowInt(k),
            }),
            Ir::Fold(op, terms) => match (*op, terms.as_slice()) {
                (Op2::Mul, [Ir::Const(c), Ir::X(k)]) => Operand::leaf(Leaf::Scaled(*c, *k)),
                (op, [Ir::Const(c), t]) => Operand::of(t).then(Step::const_left(op, *c)),
                (op, [t, Ir::Const(c)]) => Operand::of(t).then(Step::const_right(op, *c)),
                (op, [first, rest @ ..]) => Operand::leaf(Leaf::Call(fold(
                    op,
                    Operand::of(first),
                    rest.iter().map(Operand::of).collect(),
                ))),
                // A fold has two terms or more; an empty one has no value.
                (_, []) => Operand::leaf(Leaf::Const(f64::NAN)),
            },
        }
    }

    /// The operand's value at x.
    #[inline(always)]
    fn eval(&self, x: &[f64]) -> f64 {
        let mut v = match self.leaf {
            Leaf::Const(c) => c,
            Leaf::Slot(k) => x[k],
            Leaf::Square(k) => x[k] * x[k],
            Leaf::Scaled(c, k) => c * x[k],
            Leaf::Call(ref g) => g(x),
        };
        for s in &self.steps {
            v = s.apply(v);
        }
        v
    }

    /// The slot of a bare `x[k]` (`square` false) or `x[k]^2` (`square` true).
    fn slot(&self, square: bool) -> Option<usize> {
        if !self.steps.is_empty() {
            return None;
        }
        match self.leaf {
            Leaf::Slot(k) if !square => Some(k),
            Leaf::Square(k) if square => Some(k),
            _ => None,
        }
    }
}

/// `((first op t1) op t2) ...` over `rest`, one closure per operation.
fn fold(op: Op2, first: Operand, rest: Vec<Operand>) -> Compiled {
    match op {
        Op2::Add => fold_with(first, rest, |a, b| a + b),
        Op2::Sub => fold_with(first, rest, |a, b| a - b),
        Op2::Mul => fold_with(first, rest, |a, b| a * b),
        Op2::Div => fold_with(first, rest, |a, b| a / b),
        Op2::Pow => fold_with(first, rest, fx::pow),
        Op2::Atan2 => fold_with(first, rest, fx::atan2),
        Op2::Min => fold_with(first, rest, fx::min),
        Op2::Max => fold_with(first, rest, fx::max),
    }
}

/// `((first f t1) f t2) ...` over `rest`: a loop over the operands, a tight
/// one when every term is a bare `x[k]` or every term is `x[k]^2`.
fn fold_with<F>(first: Operand, rest: Vec<Operand>, f: F) -> Compiled
where
    F: Fn(f64, f64) -> f64 + Copy + Send + Sync + 'static,
{
    for square in [true, false] {
        let slots = first.slot(square).and_then(|k0| {
            let ks: Option<Vec<usize>> = rest.iter().map(|t| t.slot(square)).collect();
            ks.map(|ks| (k0, ks))
        });
        if let Some((k0, ks)) = slots {
            return if square {
                fold_slots(k0, ks, f, |v| v * v)
            } else {
                fold_slots(k0, ks, f, |v| v)
            };
        }
    }
    Box::new(move |x| {
        let mut acc = first.eval(x);
        for t in &rest {
            acc = f(acc, t.eval(x));
        }
        acc
    })
}

/// `((g(x[k0]) f g(x[k1])) f g(x[k2])) ...` for the slots `k0` and `ks`,
/// unrolled for up to 8 terms.
fn fold_slots<F, G>(k0: usize, ks: Vec<usize>, f: F, g: G) -> Compiled
where
    F: Fn(f64, f64) -> f64 + Copy + Send + Sync + 'static,
    G: Fn(f64) -> f64 + Copy + Send + Sync + 'static,
{
    /// The fold over a fixed number of slots (unrolled by the compiler).
    fn fixed<const N: usize, F, G>(k0: usize, ks: [usize; N], f: F, g: G) -> Compiled
    where
        F: Fn(f64, f64) -> f64 + Send + Sync + 'static,
        G: Fn(f64) -> f64 + Send + Sync + 'static,
    {
        Box::new(move |x| ks.iter().fold(g(x[k0]), |acc, &k| f(acc, g(x[k]))))
    }
    macro_rules! unrolled {
        ($($n:literal)*) => {
            match ks.len() {
                $($n => if let Ok(ks) = <[usize; $n]>::try_from(ks.as_slice()) {
                    return fixed(k0, ks, f, g);
                },)*
                _ => {}
            }
        };
    }
    unrolled!(1 2 3 4 5 6 7);
    Box::new(move |x| ks.iter().fold(g(x[k0]), |acc, &k| f(acc, g(x[k]))))
}
