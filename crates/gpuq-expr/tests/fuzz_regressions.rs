//! Inputs that fuzzing the expression parser (`benches/fuzz.sh`, target
//! `expr`) or examining its slowest cases turned up, each pinned to what it
//! must now do.

use gpuq_expr::Expr;

/// An expression within the size limits whose CUDA C took seconds: every
/// integer power's chain of products was rebuilt one factor at a time
/// (quadratic in the exponent), here 400 000 chains of 64 factors, which ran
/// past the fuzzer's 10 s timeout. The chain is now written in one pass.
#[test]
fn long_sums_of_integer_powers_translate_in_linear_time() {
    let e = Expr::parse("sum(i, 1, 199999, (x1^64)^64)", 1).unwrap();
    let source = e.cuda_source();
    let chain = |a: &str| format!("{}{a}{}", "(".repeat(63), format!(" * {a})").repeat(63));
    assert!(source.contains(&format!("const double t0 = {};", chain("x[0]"))));
    assert!(source.contains(&format!("const double t1 = {};", chain("t0"))));
    // 2 powers per term, each one statement of 63 products.
    let statements = source.matches("const double t").count();
    assert_eq!(statements, 2 * 199_999);
    let (v, r) = (e.eval(&[0.5]), e.eval_reference(&[0.5]));
    assert_eq!((v, r), (0.0, 0.0));
}
