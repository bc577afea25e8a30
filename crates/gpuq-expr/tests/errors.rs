//! Malformed expressions are rejected with the column of the offending token
//! and a specific message.

use gpuq_core::Error;
use gpuq_expr::{Expr, MAX_HEIGHT, MAX_NESTING};

/// Parses `text` for dimension `dim`, expecting an expression error; returns
/// its column and message.
fn rejection(text: &str, dim: usize) -> (usize, String) {
    match Expr::parse(text, dim) {
        Err(Error::Expression { column, message }) => (column, message),
        Err(other) => panic!("{text:?}: not an expression error: {other}"),
        Ok(e) => panic!("{text:?} was accepted: {:?}", e.ast()),
    }
}

#[test]
fn malformed_expressions_are_rejected_at_the_right_column() {
    // (text, dim, column, message or the start of it)
    let cases: &[(&str, usize, usize, &str)] = &[
        ("x1 + y", 8, 6, "unknown name 'y'"),
        ("foo(x1)", 8, 1, "unknown function 'foo'"),
        ("sin(x1, x2)", 8, 1, "sin takes 1 argument, got 2"),
        ("cos()", 8, 1, "cos takes 1 argument, got 0"),
        ("atan2(x1)", 8, 1, "atan2 takes 2 arguments, got 1"),
        ("pow(x1, 2, 3)", 8, 1, "pow takes 2 arguments, got 3"),
        ("1 + min(x1)", 8, 5, "min takes at least 2 arguments, got 1"),
        ("sin", 8, 1, "'sin' is a function: expected '(' after it"),
        ("x0 + 1", 8, 1, "x index 0 is outside 1..8"),
        ("x1 + x9", 8, 6, "x index 9 is outside 1..8"),
        (
            "x123456789012345678901234567890",
            8,
            1,
            "x index 123456789012345678901234567890 is outside 1..8",
        ),
        (
            "sum(i, 1, n, x[i+1])",
            8,
            14,
            "x index 9 is outside 1..8 when i = 8",
        ),
        (
            "sum(i, 1, n, sum(j, 1, i, x[i + j]))",
            8,
            27,
            "x index 9 is outside 1..8 when i = 5, j = 4",
        ),
        ("x[1.5]", 8, 1, "x index 1.5 is not an integer"),
        (
            "2 * x[n / 3]",
            8,
            5,
            "x index 2.6666666666666665 is not an integer",
        ),
        ("x[x1]", 8, 3, "x index must not depend on x"),
        ("x[1e300]", 8, 1, "x index 1e300 is outside 1..8"),
        ("x[0/0]", 8, 1, "x index NaN is not an integer"),
        (
            "sum(i, 1e300, 1e300, x1)",
            8,
            8,
            "sum lower bound 1e300 is too large",
        ),
        (
            "sum(i, 1, 1/0, x1)",
            8,
            11,
            "sum upper bound inf is not an integer",
        ),
        ("x + 1", 8, 1, "'x' needs an index: write x1..x8 or x[...]"),
        ("sum(i, 1, x1, i)", 8, 11, "sum bounds must not depend on x"),
        (
            "prod(i, x[2], 3, i)",
            8,
            9,
            "prod bounds must not depend on x",
        ),
        (
            "sum(i, 0.5, 2, x1)",
            8,
            8,
            "sum lower bound 0.5 is not an integer",
        ),
        (
            "sum(i, 1, 3, prod(j, 1, i / 2, x1))",
            8,
            25,
            "prod upper bound 0.5 is not an integer when i = 1",
        ),
        (
            "sum(i, 1, n, prod(i, 1, 2, x[i]))",
            8,
            19,
            "index 'i' is already used by an enclosing sum",
        ),
        (
            "sum(n, 1, 2, 3)",
            8,
            5,
            "'n' is reserved and cannot be an index",
        ),
        (
            "prod(cos, 1, 2, 3)",
            8,
            6,
            "'cos' is reserved and cannot be an index",
        ),
        (
            "sum(x2, 1, 2, 3)",
            8,
            5,
            "'x2' is reserved and cannot be an index",
        ),
        (
            "sum(1, 1, 2, 3)",
            8,
            5,
            "expected an index name but found number 1",
        ),
        (
            "sum(i, 1, 2)",
            8,
            12,
            "expected ',' (sum(index, from, to, body)) but found ')'",
        ),
        (
            "sum(i, 1, 2, i",
            8,
            15,
            "expected ')' (sum(index, from, to, body)) but found end of input",
        ),
        (
            "sum + 1",
            8,
            1,
            "'sum' must be written sum(index, from, to, body)",
        ),
        ("i + 1", 8, 1, "unknown name 'i'"),
        ("sum(i, 1, i, 1)", 8, 11, "unknown name 'i'"),
        ("(x1 + 2", 8, 8, "expected ')' but found end of input"),
        ("((x1 + 2)", 8, 10, "expected ')' but found end of input"),
        ("x1 + 2)", 8, 7, "unmatched ')'"),
        ("x[2", 8, 4, "expected ']' but found end of input"),
        (
            "min(x1, x2",
            8,
            11,
            "expected ',' or ')' but found end of input",
        ),
        (
            "x1 x2",
            8,
            4,
            "expected an operator or end of input but found name 'x2'",
        ),
        (
            "2pi",
            8,
            2,
            "expected an operator or end of input but found name 'pi'",
        ),
        ("x1 + * 2", 8, 6, "expected an expression but found '*'"),
        (
            "x1 ^",
            8,
            5,
            "expected an expression but found end of input",
        ),
        ("", 8, 1, "expected an expression but found end of input"),
        ("   ", 8, 4, "expected an expression but found end of input"),
        ("1e999 + x1", 8, 1, "number '1e999' is too large"),
        ("x1 + 1e", 8, 6, "malformed number '1e'"),
        ("2 $ 3", 8, 3, "unexpected character '$'"),
        ("x1 + \u{e9}", 8, 6, "unexpected character '\u{e9}'"),
        ("\u{3c0} * x1", 8, 1, "unexpected character '\u{3c0}'"),
        (
            "sum(i, 1, 1e9, x1)",
            8,
            1,
            "sum has 1000000000 terms, more than the 1000000 allowed",
        ),
        (
            "1 + sum(i, 1, 1000, sum(j, 1, 1001, x1))",
            8,
            5,
            "expression expands to more than 1000000 nodes",
        ),
    ];
    assert!(cases.len() >= 15);
    for &(text, dim, column, message) in cases {
        let (col, msg) = rejection(text, dim);
        assert!(
            col == column && msg.starts_with(message),
            "{text:?}: got column {col} \"{msg}\", want column {column} \"{message}\""
        );
        assert!(
            !msg.contains('\n'),
            "{text:?}: message spans lines: {msg:?}"
        );
    }
}

#[test]
fn nesting_and_height_limits_are_errors_not_overflows() {
    // Parentheses: the one past the limit is reported.
    let deep = format!("{}x1{}", "(".repeat(5000), ")".repeat(5000));
    let (col, msg) = rejection(&deep, 2);
    assert_eq!(col, MAX_NESTING + 1);
    assert!(msg.contains("nests more than 200 levels"), "{msg}");
    let ok = format!(
        "{}x1{}",
        "(".repeat(MAX_NESTING - 1),
        ")".repeat(MAX_NESTING - 1)
    );
    assert_eq!(Expr::parse(&ok, 2).unwrap().eval(&[0.5, 0.0]), 0.5);
    // Unary minus, calls and exponents nest the same way.
    for deep in [
        "-".repeat(100_000) + "x1",
        "sin(".repeat(10_000) + "x1" + &")".repeat(10_000),
        "x1^".repeat(10_000) + "x1",
    ] {
        let (_, msg) = rejection(&deep, 2);
        assert!(msg.contains("nests more than"), "{msg}");
    }
    // A flat chain is limited by the tree's height, at the operator that
    // passes it.
    let chain = vec!["x1"; 100_000].join("+");
    let (col, msg) = rejection(&chain, 2);
    assert_eq!(col, 3 * MAX_HEIGHT);
    assert!(
        msg.starts_with("expression is more than 500 operations deep"),
        "{msg}"
    );
    let chain = vec!["x1"; MAX_HEIGHT - 1].join("+");
    let f = Expr::parse(&chain, 2).unwrap();
    assert_eq!(f.eval(&[1.0, 0.0]), (MAX_HEIGHT - 1) as f64);
    assert_eq!(f.eval_reference(&[1.0, 0.0]), (MAX_HEIGHT - 1) as f64);
    assert!(f.cuda_source().contains("gpuq_integrand"));
    assert_eq!(f.ast().to_string(), chain.replace('+', " + "));
}

#[test]
fn the_dimension_must_be_1_to_64() {
    for dim in [0, 65, usize::MAX] {
        assert!(matches!(
            Expr::parse("x1", dim),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(Expr::parse("x64", 64).is_ok());
}

#[test]
fn the_error_displays_its_column() {
    let e = Expr::parse("sin(x1, x2)", 3).unwrap_err();
    assert_eq!(
        e.to_string(),
        "expression error at column 1: sin takes 1 argument, got 2"
    );
}
