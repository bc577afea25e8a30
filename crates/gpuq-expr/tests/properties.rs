//! Property tests: printed random trees parse back to themselves, the
//! compiled evaluator agrees bit for bit with the reference walk, and no
//! string makes the parser panic.

use gpuq_expr::{Ast, BinOp, Expr, Func, LoopKind, UnaryFunc};
use proptest::prelude::*;

/// An index variable in scope and the range of values it takes.
#[derive(Clone, Debug)]
struct Index {
    name: &'static str,
    /// Its values lie in 1..=dim (or the loop is empty).
    in_range: bool,
}

const INDEX_NAMES: [&str; 4] = ["i", "j", "k", "m"];

fn num(v: f64) -> Box<Ast> {
    Box::new(Ast::Num(v))
}

/// Non-negative finite literals: small integers, short decimals, anything.
fn number() -> BoxedStrategy<f64> {
    use proptest::num::f64::{NORMAL, POSITIVE, SUBNORMAL, ZERO};
    prop_oneof![
        4 => (0u32..12).prop_map(f64::from),
        3 => 0.0..10.0f64,
        1 => Just(0.5),
        1 => POSITIVE | NORMAL | SUBNORMAL | ZERO,
    ]
    .boxed()
}

/// The leaves valid in `scope` for dimension `dim`.
fn leaf(dim: usize, scope: &[Index]) -> BoxedStrategy<Ast> {
    let mut options: Vec<BoxedStrategy<Ast>> = vec![
        number().prop_map(Ast::Num).boxed(),
        (1..=dim).prop_map(Ast::Coord).boxed(),
        (1..=dim).prop_map(|k| Ast::CoordAt(num(k as f64))).boxed(),
        prop_oneof![Just(Ast::Dim), Just(Ast::Pi), Just(Ast::E)].boxed(),
    ];
    for index in scope {
        let name = index.name.to_string();
        options.push(Just(Ast::Index(name.clone())).boxed());
        if index.in_range {
            let i = || Box::new(Ast::Index(name.clone()));
            // x[i] and x[n + 1 - i].
            let reversed = Ast::Binary(
                BinOp::Sub,
                Box::new(Ast::Binary(BinOp::Add, Box::new(Ast::Dim), num(1.0))),
                i(),
            );
            options.push(
                prop_oneof![
                    Just(Ast::CoordAt(i())),
                    Just(Ast::CoordAt(Box::new(reversed)))
                ]
                .boxed(),
            );
        }
    }
    proptest::strategy::Union::new(options).boxed()
}

/// Trees of depth at most `depth`, valid for `dim` with `scope` in scope.
fn tree(dim: usize, scope: Vec<Index>, depth: u32) -> BoxedStrategy<Ast> {
    let leaves = leaf(dim, &scope);
    if depth == 0 {
        return leaves;
    }
    let sub = tree(dim, scope.clone(), depth - 1);
    let binop = prop_oneof![
        Just(BinOp::Add),
        Just(BinOp::Sub),
        Just(BinOp::Mul),
        Just(BinOp::Div),
        Just(BinOp::Pow)
    ];
    let unary = proptest::sample::select(UnaryFunc::ALL.to_vec());
    let two = prop_oneof![Just(Func::Atan2), Just(Func::Pow)];
    let many = prop_oneof![Just(Func::Min), Just(Func::Max)];
    let free: Vec<&'static str> = INDEX_NAMES
        .into_iter()
        .filter(|n| scope.iter().all(|s| s.name != *n))
        .collect();
    let mut options = vec![
        (4, leaves),
        (1, sub.clone().prop_map(|a| Ast::Neg(Box::new(a))).boxed()),
        (
            4,
            (binop, sub.clone(), sub.clone())
                .prop_map(|(op, a, b)| Ast::Binary(op, Box::new(a), Box::new(b)))
                .boxed(),
        ),
        (
            2,
            (unary, sub.clone())
                .prop_map(|(f, a)| Ast::Call(Func::Unary(f), vec![a]))
                .boxed(),
        ),
        (
            1,
            (two, sub.clone(), sub.clone())
                .prop_map(|(f, a, b)| Ast::Call(f, vec![a, b]))
                .boxed(),
        ),
        (
            1,
            (many, prop::collection::vec(sub.clone(), 2..=4))
                .prop_map(|(f, args)| Ast::Call(f, args))
                .boxed(),
        ),
    ];
    if !free.is_empty() {
        // A loop over a sub-range of 1..=dim (possibly empty), its bounds
        // written as numbers or with n.
        let looped = (
            proptest::sample::select(free),
            any::<bool>(),
            1..=dim,
            0..=dim,
            any::<bool>(),
        )
            .prop_flat_map(move |(name, is_sum, from, len, to_as_n)| {
                let to = (from + len).min(dim + 1) - 1;
                let in_scope = scope
                    .iter()
                    .cloned()
                    .chain([Index {
                        name,
                        in_range: true,
                    }])
                    .collect();
                let to_ast = if to_as_n && to + 1 >= dim {
                    if to == dim {
                        Ast::Dim
                    } else {
                        Ast::Binary(BinOp::Sub, Box::new(Ast::Dim), num(1.0))
                    }
                } else {
                    Ast::Num(to as f64)
                };
                tree(dim, in_scope, depth - 1).prop_map(move |body| Ast::Loop {
                    kind: if is_sum {
                        LoopKind::Sum
                    } else {
                        LoopKind::Prod
                    },
                    index: name.to_string(),
                    from: num(from as f64),
                    to: Box::new(to_ast.clone()),
                    body: Box::new(body),
                })
            })
            .boxed();
        options.push((2, looped));
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

/// A dimension and a tree valid for it.
fn dim_and_tree() -> impl Strategy<Value = (usize, Ast)> {
    (1usize..=8).prop_flat_map(|dim| (Just(dim), tree(dim, Vec::new(), 4)))
}

/// Points: mostly in [-2, 2]^8, sometimes with small integers (which meet
/// the trees' constants) or special values.
fn point() -> impl Strategy<Value = Vec<f64>> {
    let coordinate = prop_oneof![
        6 => -2.0..2.0f64,
        1 => (-2i32..=2).prop_map(f64::from),
        1 => prop_oneof![
            Just(0.0),
            Just(0.5),
            Just(-0.0),
            Just(1.0),
            Just(f64::from_bits(1.0f64.to_bits() + 1)),
            Just(f64::INFINITY),
            Just(f64::NAN),
            Just(1e300),
        ],
    ];
    prop::collection::vec(coordinate, 8)
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Pieces of expressions, valid and not, for random token soups.
const PIECES: &[&str] = &[
    "x1",
    "x2",
    "x9",
    "x0",
    "x",
    "x[",
    "]",
    "(",
    ")",
    "sum(",
    "prod(",
    "i",
    "j",
    ",",
    "1",
    "2",
    "0.5",
    "1e3",
    "1e999",
    ".",
    "n",
    "pi",
    "e",
    "+",
    "-",
    "*",
    "/",
    "^",
    "sin(",
    "min(",
    "atan2(",
    "pow(",
    "y",
    " ",
    "\u{e9}",
    "\u{1F600}",
    "$",
];

/// The generator reaches loops, nested calls and indexed coordinates.
#[test]
fn generated_trees_are_varied() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = dim_and_tree();
    let texts: Vec<String> = (0..300)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .unwrap()
                .current()
                .1
                .to_string()
        })
        .collect();
    let share = |needle: &str| texts.iter().filter(|t| t.contains(needle)).count();
    if std::env::var_os("SHOW_TREES").is_some() {
        for t in texts.iter().take(15) {
            println!("{t}");
        }
    }
    assert!(share("sum(") + share("prod(") > 30, "few loops");
    assert!(
        share("x[i]") + share("x[j]") + share("x[n + 1 - ") > 15,
        "few indexed coordinates"
    );
    assert!(share("min(") + share("max(") > 15);
    assert!(
        texts.iter().filter(|t| t.len() > 60).count() > 50,
        "trees too small"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn printed_trees_parse_back_to_themselves((dim, ast) in dim_and_tree()) {
        let text = ast.to_string();
        let parsed = Expr::parse(&text, dim);
        prop_assert!(parsed.is_ok(), "{text}: {:?}", parsed.err());
        let parsed = parsed.unwrap();
        prop_assert_eq!(parsed.ast(), &ast, "{}", text);
    }

    #[test]
    fn eval_matches_the_reference_bit_for_bit(
        (dim, ast) in dim_and_tree(),
        points in prop::collection::vec(point(), 1..6),
    ) {
        let f = Expr::parse(&ast.to_string(), dim).unwrap();
        for x in &points {
            let (v, r) = (f.eval(&x[..dim]), f.eval_reference(&x[..dim]));
            prop_assert!(same(v, r), "{}: eval {:e} vs reference {:e} at {:?}", ast, v, r, &x[..dim]);
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>(), dim in 0usize..70) {
        if let Ok(f) = Expr::parse(&text, dim) {
            let _ = f.cuda_source();
        }
    }

    #[test]
    fn token_soups_parse_or_fail_cleanly(
        pieces in prop::collection::vec(proptest::sample::select(PIECES), 0..24),
        dim in 1usize..=8,
        x in point(),
    ) {
        let text: String = pieces.concat();
        match Expr::parse(&text, dim) {
            Ok(f) => {
                prop_assert!(same(f.eval(&x[..dim]), f.eval_reference(&x[..dim])), "{}", text);
                let printed = f.ast().to_string();
                let again = Expr::parse(&printed, dim).unwrap();
                prop_assert_eq!(again.ast(), f.ast());
                prop_assert!(f.cuda_source().contains("gpuq_integrand"));
            }
            Err(gpuq_core::Error::Expression { column, message }) => {
                prop_assert!(column >= 1 && column <= text.chars().count() + 1, "{} {}", column, message);
                prop_assert!(!message.is_empty() && !message.contains('\n'));
            }
            Err(other) => prop_assert!(false, "{}: {}", text, other),
        }
    }
}
