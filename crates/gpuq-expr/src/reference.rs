//! The reference evaluator: a plain recursive walk over the parsed [`Ast`],
//! loops run as loops, every operation performed as written. It defines
//! what an expression means; the compiled evaluator must return the same
//! bits. Slow (name lookups, recursion, loops re-evaluated per point): for
//! tests.

use crate::ast::Ast;
use crate::func::{Func, Op2};

/// The value of `ast` at `x` for dimension `dim` (the caller checked the
/// expression and that x has `dim` values). Cost: the expanded tree's size.
pub(crate) fn evaluate(ast: &Ast, x: &[f64], dim: usize) -> f64 {
    Walk {
        x,
        dim,
        env: Vec::new(),
    }
    .eval(ast)
}

struct Walk<'a> {
    x: &'a [f64],
    dim: usize,
    /// Values of the enclosing loops' indices, outermost first.
    env: Vec<(&'a str, f64)>,
}

impl<'a> Walk<'a> {
    fn eval(&mut self, ast: &'a Ast) -> f64 {
        match ast {
            Ast::Num(v) => *v,
            Ast::Coord(k) => self.coordinate(*k as f64),
            Ast::CoordAt(index) => {
                let k = self.eval(index);
                self.coordinate(k)
            }
            Ast::Dim => self.dim as f64,
            Ast::Pi => std::f64::consts::PI,
            Ast::E => std::f64::consts::E,
            Ast::Index(name) => self
                .env
                .iter()
                .rev()
                .find(|(s, _)| s == name)
                .map_or(f64::NAN, |&(_, v)| v),
            Ast::Neg(a) => -self.eval(a),
            Ast::Binary(op, a, b) => {
                let a = self.eval(a);
                let b = self.eval(b);
                Op2::from(*op).apply(a, b)
            }
            Ast::Call(Func::Unary(u), args) => match args.as_slice() {
                [a] => u.apply(self.eval(a)),
                _ => f64::NAN,
            },
            Ast::Call(func, args) => {
                let Some(op) = Op2::of_func(*func) else {
                    return f64::NAN;
                };
                let mut args = args.iter();
                let Some(first) = args.next() else {
                    return f64::NAN;
                };
                let mut acc = self.eval(first);
                for a in args {
                    let v = self.eval(a);
                    acc = op.apply(acc, v);
                }
                acc
            }
            Ast::Loop {
                kind,
                index,
                from,
                to,
                body,
            } => {
                let from = self.eval(from);
                let to = self.eval(to);
                let mut acc: Option<f64> = None;
                let mut i = from;
                while i <= to {
                    self.env.push((index, i));
                    let t = self.eval(body);
                    self.env.pop();
                    acc = Some(match acc {
                        None => t,
                        Some(a) => Op2::from(kind.op()).apply(a, t),
                    });
                    i += 1.0;
                }
                acc.unwrap_or(kind.empty_value())
            }
        }
    }

    /// x_k for a 1-based k (NaN when k names no coordinate, which a checked
    /// expression never does).
    fn coordinate(&self, k: f64) -> f64 {
        if k >= 1.0 && k == k.trunc() && k <= self.x.len() as f64 {
            self.x[k as usize - 1]
        } else {
            f64::NAN
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_loops_from_the_first_term() {
        // sum(i, 1, 3, x[i]) at (0.1, 0.2, 0.3): (0.1 + 0.2) + 0.3, not
        // ((0 + 0.1) + 0.2) + 0.3 (the same here) nor 0.1 + (0.2 + 0.3).
        let ast = Ast::Loop {
            kind: crate::ast::LoopKind::Sum,
            index: "i".into(),
            from: Box::new(Ast::Num(1.0)),
            to: Box::new(Ast::Dim),
            body: Box::new(Ast::CoordAt(Box::new(Ast::Index("i".into())))),
        };
        let x = [0.1, 0.2, 0.3];
        assert_eq!(evaluate(&ast, &x, 3), (0.1 + 0.2) + 0.3);
        assert_ne!(evaluate(&ast, &x, 3), 0.1 + (0.2 + 0.3));
    }
}
