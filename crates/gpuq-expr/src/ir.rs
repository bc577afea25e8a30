//! The unrolled form of an expression that the CPU compiler and the CUDA C
//! writer share: loops expanded, coordinates resolved to 0-based slots, and
//! every subtree that does not depend on x folded to its value.
//!
//! The builders ([`Ir::unary`], [`Ir::binary`]) fold and specialise without
//! changing a single floating-point operation or its order: a constant
//! subtree is computed by the same operations the tree walk would perform,
//! `((a + b) + c)` becomes one [`Ir::Fold`] of three terms (still added from
//! the left), and `a ^ k` for an integer constant `k` becomes the
//! multiplication chain that `functions::pow` itself performs for such `k`.

use gpuq_kernels::cubature::functions::{pow_positive, MAX_INT_POWER};

use crate::func::{Op2, UnaryFunc};

/// An operation of one argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Op1 {
    /// `-a`.
    Neg,
    /// A unary function.
    Func(UnaryFunc),
    /// `a ^ k` for an integer k, 1 <= |k| <= `MAX_INT_POWER`, k != 1: the chain
    /// `((a a) a) ...` of |k| - 1 multiplications, and 1 / chain for k < 0.
    PowInt(i32),
}

impl Op1 {
    /// The operation applied to `a`.
    #[inline]
    pub(crate) fn apply(self, a: f64) -> f64 {
        match self {
            Op1::Neg => -a,
            Op1::Func(f) => f.apply(a),
            Op1::PowInt(k) => pow_int(a, k),
        }
    }
}

/// `a ^ k` as [`Op1::PowInt`] computes it (the same bits as
/// `functions::pow(a, k)` for 1 <= |k| <= `MAX_INT_POWER`).
#[inline]
pub(crate) fn pow_int(a: f64, k: i32) -> f64 {
    let p = pow_positive(a, k.unsigned_abs());
    if k < 0 {
        1.0 / p
    } else {
        p
    }
}

/// A node of the unrolled expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ir {
    /// A value known before evaluation.
    Const(f64),
    /// The coordinate in slot k (0-based).
    X(usize),
    /// An operation of one argument.
    Unary(Op1, Box<Ir>),
    /// `((t0 op t1) op t2) ...`: at least two terms, combined from the left.
    Fold(Op2, Vec<Ir>),
}

impl Ir {
    /// `op(a)`, folded when `a` is constant.
    pub(crate) fn unary(op: Op1, a: Ir) -> Ir {
        match a {
            Ir::Const(v) => Ir::Const(op.apply(v)),
            a => Ir::Unary(op, Box::new(a)),
        }
    }

    /// `a op b`: folded when both are constant, a power with a constant
    /// exponent specialised ([`Ir::power`]), and appended to `a` when `a` is a
    /// fold of the same operation (which is the same left-to-right order).
    pub(crate) fn binary(op: Op2, a: Ir, b: Ir) -> Ir {
        match (a, b) {
            (Ir::Const(p), Ir::Const(q)) => Ir::Const(op.apply(p, q)),
            (a, Ir::Const(k)) if op == Op2::Pow => Ir::power(a, k),
            (Ir::Fold(fop, mut terms), b) if fop == op => {
                terms.push(b);
                Ir::Fold(op, terms)
            }
            (a, b) => Ir::Fold(op, vec![a, b]),
        }
    }

    /// `a ^ k` for a constant `k`, as `functions::pow(a, k)` computes it:
    /// 1 for k = 0, `a` for k = 1, the multiplication chain for other
    /// integers up to `MAX_INT_POWER` in magnitude, `sqrt(a)` for k = 1/2,
    /// and a call of `pow` otherwise.
    fn power(a: Ir, k: f64) -> Ir {
        if k == 0.0 {
            Ir::Const(1.0)
        } else if k == 1.0 {
            a
        } else if k == 0.5 {
            Ir::unary(Op1::Func(UnaryFunc::Sqrt), a)
        } else if k == k.trunc() && k.abs() <= MAX_INT_POWER {
            Ir::unary(Op1::PowInt(k as i32), a)
        } else {
            Ir::Fold(Op2::Pow, vec![a, Ir::Const(k)])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_kernels::cubature::functions as fx;

    #[test]
    fn power_specialisations_give_the_bits_of_pow() {
        let bases = [
            0.0,
            -0.0,
            0.731,
            -1.37,
            1.0 + f64::EPSILON,
            3.0,
            1e-160,
            1e160,
            5e-324,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let exponents: Vec<f64> = (-70..=70).map(f64::from).chain([0.5, -0.0]).collect();
        for &a in &bases {
            for &k in &exponents {
                let want = fx::pow(a, k);
                let got = match Ir::binary(Op2::Pow, Ir::X(0), Ir::Const(k)) {
                    Ir::Const(v) => v,
                    Ir::X(_) => a,
                    Ir::Unary(op, _) => op.apply(a),
                    Ir::Fold(op, _) => op.apply(a, k),
                };
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{a}^{k}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn folds_keep_their_order() {
        let sum = Ir::binary(
            Op2::Add,
            Ir::binary(Op2::Add, Ir::Const(1.0), Ir::Const(2.0)),
            Ir::X(0),
        );
        let sum = Ir::binary(Op2::Add, sum, Ir::Const(3.0));
        assert_eq!(
            sum,
            Ir::Fold(Op2::Add, vec![Ir::Const(3.0), Ir::X(0), Ir::Const(3.0)])
        );
        // A right-nested operand stays a separate fold.
        let right = Ir::binary(Op2::Sub, Ir::X(0), Ir::binary(Op2::Sub, Ir::X(1), Ir::X(2)));
        assert!(matches!(&right, Ir::Fold(Op2::Sub, t) if t.len() == 2));
    }
}
