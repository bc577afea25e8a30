//! Recursive-descent parser: tokens to a syntax tree whose nodes keep the
//! column of their token, with the checks that need no values (names,
//! arities, coordinates written `xK`, nesting, what may depend on x).
//!
//! Grammar (lowest precedence first):
//!
//! ```text
//! expr    := mul (('+' | '-') mul)*
//! mul     := unary (('*' | '/') unary)*
//! unary   := ('-' | '+') unary | power
//! power   := primary ('^' unary)?
//! primary := NUMBER | '(' expr ')' | 'x' '[' expr ']' | NAME
//!          | FUNC '(' [expr (',' expr)*] ')'
//!          | ('sum' | 'prod') '(' NAME ',' expr ',' expr ',' expr ')'
//! ```

use gpuq_core::Result;

use crate::ast::{Ast, BinOp, LoopKind};
use crate::func::{Arity, Func};
use crate::lexer::{error, tokenize, Tok, Token};
use crate::{MAX_HEIGHT, MAX_NESTING};

/// A node of the syntax tree: an [`Ast`] node that remembers where it was
/// written.
#[derive(Debug)]
pub(crate) struct Node {
    /// Column of the node's token (an operator, a name, a number).
    pub(crate) col: usize,
    /// Nodes on the longest path down from here, this one included.
    height: usize,
    /// Column of the textually first `x` in the subtree, if any.
    first_x: Option<usize>,
    pub(crate) kind: Kind,
}

/// The kinds of [`Node`], one per [`Ast`] variant.
#[derive(Debug)]
pub(crate) enum Kind {
    Num(f64),
    /// `xK`, K in 1..=dim.
    Coord(usize),
    CoordAt(Box<Node>),
    Dim,
    Pi,
    E,
    Index(String),
    Neg(Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    Call(Func, Vec<Node>),
    Loop(Box<Loop>),
}

/// A `sum` or `prod` node's parts.
#[derive(Debug)]
pub(crate) struct Loop {
    pub(crate) kind: LoopKind,
    pub(crate) index: String,
    pub(crate) from: Node,
    /// Column where the `from` expression starts.
    pub(crate) from_col: usize,
    pub(crate) to: Node,
    /// Column where the `to` expression starts.
    pub(crate) to_col: usize,
    pub(crate) body: Node,
}

impl Kind {
    /// Calls `f` on each child, in textual order.
    fn for_each_child(&self, mut f: impl FnMut(&Node)) {
        match self {
            Kind::Num(_) | Kind::Coord(_) | Kind::Dim | Kind::Pi | Kind::E | Kind::Index(_) => {}
            Kind::CoordAt(a) | Kind::Neg(a) => f(a),
            Kind::Binary(_, a, b) => {
                f(a);
                f(b);
            }
            Kind::Call(_, args) => args.iter().for_each(f),
            Kind::Loop(l) => {
                f(&l.from);
                f(&l.to);
                f(&l.body);
            }
        }
    }
}

impl Node {
    /// The node as the public tree (columns dropped). Cost: linear.
    pub(crate) fn to_ast(&self) -> Ast {
        match &self.kind {
            Kind::Num(v) => Ast::Num(*v),
            Kind::Coord(k) => Ast::Coord(*k),
            Kind::CoordAt(a) => Ast::CoordAt(Box::new(a.to_ast())),
            Kind::Dim => Ast::Dim,
            Kind::Pi => Ast::Pi,
            Kind::E => Ast::E,
            Kind::Index(name) => Ast::Index(name.clone()),
            Kind::Neg(a) => Ast::Neg(Box::new(a.to_ast())),
            Kind::Binary(op, a, b) => Ast::Binary(*op, Box::new(a.to_ast()), Box::new(b.to_ast())),
            Kind::Call(f, args) => Ast::Call(*f, args.iter().map(Node::to_ast).collect()),
            Kind::Loop(l) => Ast::Loop {
                kind: l.kind,
                index: l.index.clone(),
                from: Box::new(l.from.to_ast()),
                to: Box::new(l.to.to_ast()),
                body: Box::new(l.body.to_ast()),
            },
        }
    }
}

/// Parses `text` for dimension `dim` into a checked syntax tree. Errors: any
/// syntax error, unknown name, wrong arity, `xK` outside 1..=dim, an index
/// name that is reserved or shadows an enclosing one, x inside a sum bound or
/// an `x[...]` index, nesting beyond [`MAX_NESTING`] or a tree taller than
/// [`MAX_HEIGHT`]. Cost: linear in the text.
pub(crate) fn parse(text: &str, dim: usize) -> Result<Node> {
    let mut parser = Parser {
        tokens: tokenize(text)?,
        pos: 0,
        dim,
        depth: 0,
        scope: Vec::new(),
    };
    let root = parser.expr()?;
    let end = parser.peek();
    match end.tok {
        Tok::End => Ok(root),
        Tok::RParen => Err(error(end.col, "unmatched ')'")),
        ref other => Err(error(
            end.col,
            format!(
                "expected an operator or end of input but found {}",
                other.describe()
            ),
        )),
    }
}

/// Whether `name` is `x` followed by digits only (a coordinate such as `x12`);
/// returns the digits.
fn coordinate_digits(name: &str) -> Option<&str> {
    let digits = name.strip_prefix('x')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// Whether `name` has a meaning of its own and cannot name an index.
fn is_reserved(name: &str) -> bool {
    matches!(name, "x" | "n" | "pi" | "e" | "sum" | "prod")
        || coordinate_digits(name).is_some()
        || Func::from_name(name).is_some()
}

struct Parser {
    /// The tokens, the last one [`Tok::End`].
    tokens: Vec<Token>,
    pos: usize,
    dim: usize,
    /// Current recursion depth of [`Parser::unary`].
    depth: usize,
    /// Index variables of the enclosing loops, outermost first.
    scope: Vec<(String, LoopKind)>,
}

impl Parser {
    /// The current token (the final `End` once past it).
    fn peek(&self) -> &Token {
        let last = self.tokens.len().saturating_sub(1);
        &self.tokens[self.pos.min(last)]
    }

    /// The current token, then moves past it.
    fn advance(&mut self) -> Token {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }

    /// Moves past the current token if it is `want`, else errors with
    /// "expected `what` but found ...".
    fn expect(&mut self, want: Tok, what: &str) -> Result<()> {
        let t = self.peek();
        if t.tok == want {
            self.pos += 1;
            Ok(())
        } else {
            Err(error(
                t.col,
                format!("expected {what} but found {}", t.tok.describe()),
            ))
        }
    }

    /// A node of `kind` at `col`, its height and first x computed from its
    /// children. Errors when the tree grows taller than [`MAX_HEIGHT`].
    fn node(&self, col: usize, kind: Kind) -> Result<Node> {
        let mut height = 0;
        let mut first_x = match kind {
            Kind::Coord(_) | Kind::CoordAt(_) => Some(col),
            _ => None,
        };
        kind.for_each_child(|c| {
            height = height.max(c.height);
            first_x = first_x.or(c.first_x);
        });
        if height >= MAX_HEIGHT {
            return Err(error(
                col,
                format!(
                    "expression is more than {MAX_HEIGHT} operations deep \
                     (write long sums and products with sum(...) or prod(...))"
                ),
            ));
        }
        Ok(Node {
            col,
            height: height + 1,
            first_x,
            kind,
        })
    }

    /// `expr := mul (('+' | '-') mul)*`, folded to the left.
    fn expr(&mut self) -> Result<Node> {
        let mut left = self.mul()?;
        loop {
            let op = match self.peek().tok {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(left),
            };
            let col = self.advance().col;
            let right = self.mul()?;
            left = self.node(col, Kind::Binary(op, Box::new(left), Box::new(right)))?;
        }
    }

    /// `mul := unary (('*' | '/') unary)*`, folded to the left.
    fn mul(&mut self) -> Result<Node> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek().tok {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                _ => return Ok(left),
            };
            let col = self.advance().col;
            let right = self.unary()?;
            left = self.node(col, Kind::Binary(op, Box::new(left), Box::new(right)))?;
        }
    }

    /// `unary := ('-' | '+') unary | power`. Every nested construct passes
    /// here, so this is where the nesting depth is counted.
    fn unary(&mut self) -> Result<Node> {
        let t = self.peek().clone();
        if self.depth >= MAX_NESTING {
            return Err(error(
                t.col,
                format!("expression nests more than {MAX_NESTING} levels deep"),
            ));
        }
        self.depth += 1;
        let result = match t.tok {
            Tok::Minus => {
                self.pos += 1;
                let a = self.unary()?;
                self.node(t.col, Kind::Neg(Box::new(a)))
            }
            Tok::Plus => {
                self.pos += 1;
                self.unary()
            }
            _ => self.power(),
        };
        self.depth -= 1;
        result
    }

    /// `power := primary ('^' unary)?` (right-associative through `unary`).
    fn power(&mut self) -> Result<Node> {
        let base = self.primary()?;
        if self.peek().tok != Tok::Caret {
            return Ok(base);
        }
        let col = self.advance().col;
        let exponent = self.unary()?;
        self.node(
            col,
            Kind::Binary(BinOp::Pow, Box::new(base), Box::new(exponent)),
        )
    }

    /// A number, a parenthesised expression, or something named.
    fn primary(&mut self) -> Result<Node> {
        let t = self.advance();
        match t.tok {
            Tok::Num(v) => self.node(t.col, Kind::Num(v)),
            Tok::LParen => {
                let inner = self.expr()?;
                self.expect(Tok::RParen, "')'")?;
                Ok(inner)
            }
            Tok::Name(name) => self.named(name, t.col),
            other => Err(error(
                t.col,
                format!("expected an expression but found {}", other.describe()),
            )),
        }
    }

    /// What a name at `col` stands for: a coordinate, a constant, a call, a
    /// loop or an index variable.
    fn named(&mut self, name: String, col: usize) -> Result<Node> {
        if name == "x" {
            return self.coordinate_at(col);
        }
        if let Some(digits) = coordinate_digits(&name) {
            return match digits.parse::<usize>() {
                Ok(k) if (1..=self.dim).contains(&k) => self.node(col, Kind::Coord(k)),
                _ => Err(error(
                    col,
                    format!("x index {digits} is outside 1..{}", self.dim),
                )),
            };
        }
        match name.as_str() {
            "n" => return self.node(col, Kind::Dim),
            "pi" => return self.node(col, Kind::Pi),
            "e" => return self.node(col, Kind::E),
            "sum" => return self.parse_loop(LoopKind::Sum, col),
            "prod" => return self.parse_loop(LoopKind::Prod, col),
            _ => {}
        }
        if let Some(func) = Func::from_name(&name) {
            return self.call(func, col);
        }
        if self.scope.iter().any(|(s, _)| *s == name) {
            return self.node(col, Kind::Index(name));
        }
        let what = if self.peek().tok == Tok::LParen {
            "function"
        } else {
            "name"
        };
        Err(error(col, format!("unknown {what} '{name}'")))
    }

    /// `x[EXPR]`, the `x` at `col`.
    fn coordinate_at(&mut self, col: usize) -> Result<Node> {
        if self.peek().tok != Tok::LBracket {
            return Err(error(
                col,
                format!("'x' needs an index: write x1..x{} or x[...]", self.dim),
            ));
        }
        self.pos += 1;
        let index = self.expr()?;
        self.expect(Tok::RBracket, "']'")?;
        if let Some(c) = index.first_x {
            return Err(error(c, "x index must not depend on x"));
        }
        self.node(col, Kind::CoordAt(Box::new(index)))
    }

    /// `func(args)`, the name at `col`.
    fn call(&mut self, func: Func, col: usize) -> Result<Node> {
        let name = func.name();
        if self.peek().tok != Tok::LParen {
            return Err(error(
                col,
                format!("'{name}' is a function: expected '(' after it"),
            ));
        }
        self.pos += 1;
        let mut args = Vec::new();
        if self.peek().tok == Tok::RParen {
            self.pos += 1;
        } else {
            loop {
                args.push(self.expr()?);
                let t = self.advance();
                match t.tok {
                    Tok::Comma => {}
                    Tok::RParen => break,
                    other => {
                        return Err(error(
                            t.col,
                            format!("expected ',' or ')' but found {}", other.describe()),
                        ))
                    }
                }
            }
        }
        let arity = func.arity();
        if !arity.accepts(args.len()) {
            let (least, k) = match arity {
                Arity::Exactly(k) => ("", k),
                Arity::AtLeast(k) => ("at least ", k),
            };
            let plural = if k == 1 { "" } else { "s" };
            return Err(error(
                col,
                format!(
                    "{name} takes {least}{k} argument{plural}, got {}",
                    args.len()
                ),
            ));
        }
        self.node(col, Kind::Call(func, args))
    }

    /// `sum(i, from, to, body)` or `prod(...)`, the name at `col`.
    fn parse_loop(&mut self, kind: LoopKind, col: usize) -> Result<Node> {
        let name = kind.name();
        let form = format!("{name}(index, from, to, body)");
        if self.peek().tok != Tok::LParen {
            return Err(error(col, format!("'{name}' must be written {form}")));
        }
        self.pos += 1;
        let t = self.advance();
        let index = match t.tok {
            Tok::Name(index) => index,
            other => {
                return Err(error(
                    t.col,
                    format!("expected an index name but found {}", other.describe()),
                ))
            }
        };
        if is_reserved(&index) {
            return Err(error(
                t.col,
                format!("'{index}' is reserved and cannot be an index"),
            ));
        }
        if let Some((_, outer)) = self.scope.iter().find(|(s, _)| *s == index) {
            return Err(error(
                t.col,
                format!(
                    "index '{index}' is already used by an enclosing {}",
                    outer.name()
                ),
            ));
        }
        let comma = format!("',' ({form})");
        self.expect(Tok::Comma, &comma)?;
        let from_col = self.peek().col;
        let from = self.bound(name)?;
        self.expect(Tok::Comma, &comma)?;
        let to_col = self.peek().col;
        let to = self.bound(name)?;
        self.expect(Tok::Comma, &comma)?;
        self.scope.push((index.clone(), kind));
        let body = self.expr();
        self.scope.pop();
        let body = body?;
        self.expect(Tok::RParen, &format!("')' ({form})"))?;
        let parts = Loop {
            kind,
            index,
            from,
            from_col,
            to,
            to_col,
            body,
        };
        self.node(col, Kind::Loop(Box::new(parts)))
    }

    /// A loop bound: an expression free of x.
    fn bound(&mut self, name: &str) -> Result<Node> {
        let b = self.expr()?;
        match b.first_x {
            Some(c) => Err(error(c, format!("{name} bounds must not depend on x"))),
            None => Ok(b),
        }
    }
}
