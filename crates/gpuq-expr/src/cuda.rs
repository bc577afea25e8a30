//! [`Ir`] to CUDA C: the translation unit NVRTC compiles into the device's
//! `gpuq_integrand`.
//!
//! One `const double tK = ...;` per operation (a long fold accumulates into
//! one variable), in the Ir's operations and order: `((a + b) + c)` stays so,
//! an integer power is the explicit chain `((a * a) * a)` of a value computed
//! once, every function is the project's `gpuq_<name>` (never CUDA's own), and
//! every constant is printed so that it reads back to the same bits. The
//! backend compiles with `--fmad=false`, so no multiply-add is contracted.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::func::Op2;
use crate::ir::{Ir, Op1};
use crate::CUDA_ENTRY;

/// Folds with more terms than this accumulate statement by statement instead
/// of as one nested expression.
const NESTED_FOLD: usize = 8;

/// The CUDA C translation unit for `ir`, quoting `text` and `dim` in its first
/// line. Cost: linear in the Ir's size.
pub(crate) fn cuda_source(ir: &Ir, text: &str, dim: usize) -> String {
    let mut w = Writer {
        body: String::new(),
        temps: 0,
        used: BTreeMap::new(),
    };
    let result = w.atom(ir);
    let mut out = format!(
        "// gpuq-expr integrand, dimension {dim}: {}\n",
        sanitize(text)
    );
    for (name, arity) in &w.used {
        let params = vec!["double"; *arity].join(", ");
        let _ = writeln!(out, "extern \"C\" __device__ double {name}({params});");
    }
    let _ = write!(
        out,
        "\nextern \"C\" __device__ double {CUDA_ENTRY}(const double* x, unsigned int n)\n{{\n    (void)n;\n{}    return {result};\n}}\n",
        w.body
    );
    out
}

/// The expression's text as one comment line: printable ASCII only, and no
/// `*/` or line continuation.
fn sanitize(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '\\' {
                c
            } else {
                ' '
            }
        })
        .collect();
    s.replace("*/", "* /")
}

/// `v` as a C double literal with the same bits: Rust's shortest round-trip
/// form (always with a `.` or an exponent), parenthesised when negative; the
/// bit pattern for infinities and NaN.
fn literal(v: f64) -> String {
    if !v.is_finite() {
        format!("__longlong_as_double((long long)0x{:016x}ULL)", v.to_bits())
    } else if v.is_sign_negative() {
        format!("({v:?})")
    } else {
        format!("{v:?}")
    }
}

/// The C function a two-argument operation calls, if it is not an operator.
fn op2_function(op: Op2) -> Result<&'static str, char> {
    match op {
        Op2::Add => Err('+'),
        Op2::Sub => Err('-'),
        Op2::Mul => Err('*'),
        Op2::Div => Err('/'),
        Op2::Pow => Ok("gpuq_pow"),
        Op2::Atan2 => Ok("gpuq_atan2"),
        Op2::Min => Ok("gpuq_min"),
        Op2::Max => Ok("gpuq_max"),
    }
}

/// `((a * a) * a) ...`, `k` factors (`a` itself for k <= 1), written in one
/// pass: linear in the result's length (building it by nesting one product at
/// a time copied the chain once per factor).
fn power_chain(a: &str, k: u32) -> String {
    let products = k.saturating_sub(1) as usize;
    let mut chain = String::with_capacity(products * (a.len() + 5) + a.len());
    chain.extend(std::iter::repeat_n('(', products));
    chain.push_str(a);
    for _ in 0..products {
        chain.push_str(" * ");
        chain.push_str(a);
        chain.push(')');
    }
    chain
}

struct Writer {
    /// The statements so far.
    body: String,
    /// Temporaries declared so far.
    temps: usize,
    /// The `gpuq_*` functions called, with their numbers of arguments.
    used: BTreeMap<String, usize>,
}

impl Writer {
    /// Declares `const double tK = expr;` and returns `tK`.
    fn temp(&mut self, expr: &str) -> String {
        let name = format!("t{}", self.temps);
        self.temps += 1;
        let _ = writeln!(self.body, "    const double {name} = {expr};");
        name
    }

    /// `a op b` as C.
    fn combine(&mut self, op: Op2, a: &str, b: &str) -> String {
        match op2_function(op) {
            Ok(f) => {
                self.used.insert(f.to_string(), 2);
                format!("{f}({a}, {b})")
            }
            Err(symbol) => format!("({a} {symbol} {b})"),
        }
    }

    /// The value of `ir` as an atom (a literal, `x[k]` or a temporary),
    /// writing the statements that compute it.
    fn atom(&mut self, ir: &Ir) -> String {
        match ir {
            Ir::Const(v) => literal(*v),
            Ir::X(k) => format!("x[{k}]"),
            Ir::Unary(op, a) => {
                let a = self.atom(a);
                let expr = match op {
                    Op1::Neg => format!("-{a}"),
                    Op1::Func(f) => {
                        let name = format!("gpuq_{}", f.name());
                        let call = format!("{name}({a})");
                        self.used.insert(name, 1);
                        call
                    }
                    Op1::PowInt(k) => {
                        let chain = power_chain(&a, k.unsigned_abs());
                        if *k < 0 {
                            format!("1.0 / {chain}")
                        } else {
                            chain
                        }
                    }
                };
                self.temp(&expr)
            }
            Ir::Fold(op, terms) => {
                let Some((first, rest)) = terms.split_first() else {
                    return literal(f64::NAN);
                };
                let first = self.atom(first);
                if rest.len() <= NESTED_FOLD {
                    let mut acc = first;
                    let atoms: Vec<String> = rest.iter().map(|t| self.atom(t)).collect();
                    for t in &atoms {
                        acc = self.combine(*op, &acc, t);
                    }
                    self.temp(&acc)
                } else {
                    let name = format!("t{}", self.temps);
                    self.temps += 1;
                    let _ = writeln!(self.body, "    double {name} = {first};");
                    for t in rest {
                        let t = self.atom(t);
                        let step = self.combine(*op, &name, &t);
                        let _ = writeln!(self.body, "    {name} = {step};");
                    }
                    name
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_read_back_as_the_same_doubles() {
        assert_eq!(literal(1.0), "1.0");
        assert_eq!(literal(0.1), "0.1");
        assert_eq!(literal(-2.5), "(-2.5)");
        assert_eq!(literal(-0.0), "(-0.0)");
        assert_eq!(literal(1e300), "1e300");
        assert_eq!(literal(5e-324), "5e-324");
        assert_eq!(
            literal(f64::NEG_INFINITY),
            "__longlong_as_double((long long)0xfff0000000000000ULL)"
        );
        assert!(literal(f64::NAN).starts_with("__longlong_as_double((long long)0x7ff8"));
        for v in [0.1, 1.0 / 3.0, 6.02214076e23, f64::MIN_POSITIVE, f64::MAX] {
            assert_eq!(literal(v).parse::<f64>().unwrap().to_bits(), v.to_bits());
        }
    }

    #[test]
    fn power_chains_nest_from_the_left() {
        assert_eq!(power_chain("x[0]", 1), "x[0]");
        assert_eq!(power_chain("t3", 2), "(t3 * t3)");
        assert_eq!(power_chain("t3", 4), "(((t3 * t3) * t3) * t3)");
    }

    #[test]
    fn the_comment_cannot_be_closed_or_continued() {
        assert_eq!(sanitize("a */ b\\\n\u{e9}"), "a * / b   ");
    }
}
