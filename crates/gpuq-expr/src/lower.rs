//! Syntax tree to [`Ir`]: unrolls every `sum` and `prod` for the known
//! dimension, resolves `x[EXPR]` to slots and folds constants, with the checks
//! that need values: every x index and loop bound, for every value of the
//! enclosing indices, and the size of the expansion.

use gpuq_core::Result;

use crate::ast::number_text;
use crate::func::{Func, Op2};
use crate::ir::{Ir, Op1};
use crate::lexer::error;
use crate::parser::{Kind, Loop, Node};
use crate::MAX_NODES;

/// Largest loop bound magnitude: every integer up to it is exact in f64.
const MAX_BOUND: f64 = 9_007_199_254_740_992.0;

/// The unrolled, folded form of `root` for dimension `dim`. Errors (at the
/// column of the `x`, the bound or the loop): an x index that is not an
/// integer in 1..=dim, a loop bound that is not an integer, an expansion of
/// more than [`MAX_NODES`] nodes. Cost: linear in the expanded size, which is
/// at most [`MAX_NODES`].
pub(crate) fn lower(root: &Node, dim: usize) -> Result<Ir> {
    Lowering {
        dim,
        env: Vec::new(),
        loops: Vec::new(),
        nodes: 0,
    }
    .lower(root)
}

struct Lowering<'a> {
    dim: usize,
    /// Values of the enclosing loops' indices, outermost first.
    env: Vec<(&'a str, f64)>,
    /// Columns of the enclosing loops, outermost first.
    loops: Vec<usize>,
    /// Nodes lowered so far.
    nodes: usize,
}

impl<'a> Lowering<'a> {
    fn lower(&mut self, node: &'a Node) -> Result<Ir> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            let col = self.loops.first().copied().unwrap_or(node.col);
            return Err(error(
                col,
                format!("expression expands to more than {MAX_NODES} nodes once sums are unrolled"),
            ));
        }
        Ok(match &node.kind {
            Kind::Num(v) => Ir::Const(*v),
            Kind::Coord(k) => Ir::X(k - 1),
            Kind::CoordAt(index) => self.coordinate_at(index, node.col)?,
            Kind::Dim => Ir::Const(self.dim as f64),
            Kind::Pi => Ir::Const(std::f64::consts::PI),
            Kind::E => Ir::Const(std::f64::consts::E),
            Kind::Index(name) => match self.env.iter().rev().find(|(s, _)| s == name) {
                Some(&(_, v)) => Ir::Const(v),
                None => return Err(error(node.col, format!("unknown name '{name}'"))),
            },
            Kind::Neg(a) => Ir::unary(Op1::Neg, self.lower(a)?),
            Kind::Binary(op, a, b) => Ir::binary((*op).into(), self.lower(a)?, self.lower(b)?),
            Kind::Call(func, args) => self.call(*func, args, node.col)?,
            Kind::Loop(parts) => self.unroll(parts, node.col)?,
        })
    }

    /// " when i = 3, j = 1" inside loops, "" outside: the index values an
    /// error happened at.
    fn when(&self) -> String {
        let values: Vec<String> = self.env.iter().map(|(s, v)| format!("{s} = {v}")).collect();
        if values.is_empty() {
            String::new()
        } else {
            format!(" when {}", values.join(", "))
        }
    }

    /// `x[index]`, the `x` at `col`: the slot the index gives.
    fn coordinate_at(&mut self, index: &'a Node, col: usize) -> Result<Ir> {
        let k = match self.lower(index)? {
            Ir::Const(k) => k,
            _ => return Err(error(col, "x index must not depend on x")),
        };
        if k != k.trunc() || !k.is_finite() {
            return Err(error(
                col,
                format!(
                    "x index {} is not an integer{}",
                    number_text(k),
                    self.when()
                ),
            ));
        }
        if k < 1.0 || k > self.dim as f64 {
            return Err(error(
                col,
                format!(
                    "x index {} is outside 1..{}{}",
                    number_text(k),
                    self.dim,
                    self.when()
                ),
            ));
        }
        Ok(Ir::X(k as usize - 1))
    }

    /// A call; min and max of several arguments fold from the left.
    fn call(&mut self, func: Func, args: &'a [Node], col: usize) -> Result<Ir> {
        let arity_error = || {
            error(
                col,
                format!("wrong number of arguments for {}", func.name()),
            )
        };
        match (func, args) {
            (Func::Unary(u), [a]) => Ok(Ir::unary(Op1::Func(u), self.lower(a)?)),
            (Func::Unary(_), _) => Err(arity_error()),
            (_, [first, rest @ ..]) if !rest.is_empty() => {
                let op = Op2::of_func(func).ok_or_else(arity_error)?;
                let mut acc = self.lower(first)?;
                for a in rest {
                    acc = Ir::binary(op, acc, self.lower(a)?);
                }
                Ok(acc)
            }
            _ => Err(arity_error()),
        }
    }

    /// A loop bound's integer value; `which` is "lower" or "upper".
    fn bound(&mut self, node: &'a Node, col: usize, loop_name: &str, which: &str) -> Result<i64> {
        let v = match self.lower(node)? {
            Ir::Const(v) => v,
            _ => {
                return Err(error(
                    col,
                    format!("{loop_name} bounds must not depend on x"),
                ))
            }
        };
        if v != v.trunc() || !v.is_finite() {
            return Err(error(
                col,
                format!(
                    "{loop_name} {which} bound {} is not an integer{}",
                    number_text(v),
                    self.when()
                ),
            ));
        }
        if v.abs() > MAX_BOUND {
            return Err(error(
                col,
                format!(
                    "{loop_name} {which} bound {} is too large{}",
                    number_text(v),
                    self.when()
                ),
            ));
        }
        Ok(v as i64)
    }

    /// The terms of a loop for each index value, combined from the first.
    fn unroll(&mut self, l: &'a Loop, col: usize) -> Result<Ir> {
        let name = l.kind.name();
        let from = self.bound(&l.from, l.from_col, name, "lower")?;
        let to = self.bound(&l.to, l.to_col, name, "upper")?;
        if from > to {
            return Ok(Ir::Const(l.kind.empty_value()));
        }
        let terms = to - from + 1;
        if terms > MAX_NODES as i64 {
            return Err(error(
                col,
                format!("{name} has {terms} terms, more than the {MAX_NODES} allowed"),
            ));
        }
        let op = l.kind.op().into();
        self.loops.push(col);
        let mut acc: Option<Ir> = None;
        for i in from..=to {
            self.env.push((&l.index, i as f64));
            let term = self.lower(&l.body);
            self.env.pop();
            let term = term?;
            acc = Some(match acc {
                None => term,
                Some(a) => Ir::binary(op, a, term),
            });
        }
        self.loops.pop();
        Ok(acc.unwrap_or(Ir::Const(l.kind.empty_value())))
    }
}
