//! Values of expressions with known closed forms, the precedence rules, the
//! printing of trees, and the shape of the CUDA C.

use gpuq_expr::{Ast, BinOp, Expr, Func, LoopKind, UnaryFunc, CUDA_ENTRY};
use std::f64::consts::{E, PI};

/// The compiled value, checked against the reference walk bit for bit.
fn value(text: &str, x: &[f64]) -> f64 {
    let f = Expr::parse(text, x.len()).unwrap_or_else(|e| panic!("{text}: {e}"));
    let v = f.eval(x);
    let r = f.eval_reference(x);
    assert!(
        v.to_bits() == r.to_bits() || (v.is_nan() && r.is_nan()),
        "{text}: eval {v} vs reference {r}"
    );
    v
}

#[test]
fn products_sums_and_gaussians() {
    let points = [[0.1, 0.7, 0.3], [0.0, 1.0, 0.5], [0.99, 0.25, 0.125]];
    for x in points {
        assert_eq!(value("x1*x2", &x), x[0] * x[1]);
        assert_eq!(value("x1 * x2 * x3", &x), x[0] * x[1] * x[2]);
        let s = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
        let g = value("exp(-sum(i, 1, n, x[i]^2))", &x);
        assert!((g - (-s).exp()).abs() <= 1e-15 * (-s).exp(), "{g}");
        assert_eq!(value("sum(i, 1, n, x[i]^2)", &x), s);
        assert_eq!(value("prod(i, 1, n, x[i])", &x), x[0] * x[1] * x[2]);
        // x[n + 1 - i] runs backwards: a different order of the same terms.
        assert_eq!(
            value("sum(i, 1, n, x[n + 1 - i])", &x),
            (x[2] + x[1]) + x[0]
        );
        assert_eq!(
            value("sum(i, 1, n, sum(j, 1, i, x[j]))", &x),
            ((x[0] + (x[0] + x[1])) + ((x[0] + x[1]) + x[2]))
        );
        assert_eq!(value("min(x1, x2, x3)", &x), x[0].min(x[1]).min(x[2]));
        assert_eq!(value("max(x3, x1, x2)", &x), x[0].max(x[1]).max(x[2]));
        assert_eq!(value("x1^0", &x), 1.0);
        assert_eq!(value("x2^1", &x), x[1]);
        assert_eq!(value("x2^3", &x), x[1] * x[1] * x[1]);
        assert_eq!(value("x2^-2", &x), 1.0 / (x[1] * x[1]));
        assert_eq!(value("pow(x3, 0.5)", &x), x[2].sqrt());
        assert_eq!(value("+x1 - -x2", &x), x[0] + x[1]);
    }
}

#[test]
fn constants_the_dimension_and_empty_loops() {
    let x = [0.3, 0.6, 0.9, 0.2];
    assert_eq!(value("pi", &x), PI);
    assert_eq!(value("e", &x), E);
    assert_eq!(value("n", &x), 4.0);
    assert_eq!(value("sum(i, 1, n, i)", &x), 10.0);
    assert_eq!(value("prod(i, 1, n, i)", &x), 24.0);
    assert_eq!(value("sum(i, 3, 2, x1)", &x), 0.0);
    assert_eq!(value("prod(i, 5, 1, x1)", &x), 1.0);
    assert_eq!(value("sum(i, 2, 2, x[i])", &x), 0.6);
    assert_eq!(value("sum(i, -2, 2, i^2)", &x), 10.0);
    assert_eq!(
        value("prod(i, 1, n - 1, x[i + 1] - x[i])", &x),
        (0.6 - 0.3) * (0.9 - 0.6) * (0.2 - 0.9)
    );
    assert_eq!(value("atan2(1, 1)", &x), PI / 4.0);
    assert_eq!(value("log(e)", &x), 1.0);
    assert_eq!(value("log10(1000)", &x), 3.0);
    assert_eq!(value("abs(-3) + floor(2.7)", &x), 5.0);
    assert_eq!(value("sqrt(16) * erf(0)", &x), 0.0);
    assert_eq!(value("1.5e1 + .5 + 2.", &x), 17.5);
    assert!(value("1 / 0", &x).is_infinite());
    assert!(value("0 / 0 + x1", &x).is_nan());
    assert!(value("asin(1.5)", &x).is_nan());
}

#[test]
fn signed_zeros_are_kept() {
    let zero = |text: &str, x: f64| value(text, &[x]).to_bits();
    assert_eq!(zero("1 - x1", 1.0), 0.0f64.to_bits());
    assert_eq!(zero("-(x1 - 1)", 1.0), (-0.0f64).to_bits());
    assert_eq!(zero("x1 * -0", 1.0), (-0.0f64).to_bits());
    assert_eq!(zero("0 - x1", 0.0), 0.0f64.to_bits());
    assert_eq!(zero("-x1", 0.0), (-0.0f64).to_bits());
    assert_eq!(zero("sum(i, 1, 2, -x1)", 0.0), (-0.0f64).to_bits());
    assert_eq!(zero("sum(i, 1, 0, -x1)", 0.0), 0.0f64.to_bits());
}

#[test]
fn precedence_and_associativity() {
    let x = [2.0, 3.0];
    assert_eq!(value("2^3^2", &x), 512.0);
    assert_eq!(value("(2^3)^2", &x), 64.0);
    assert_eq!(value("-x1^2", &x), -4.0);
    assert_eq!(value("(-x1)^2", &x), 4.0);
    assert_eq!(value("2^-1", &x), 0.5);
    assert_eq!(value("-2^-2", &x), -0.25);
    assert_eq!(value("1 - 2 - 3", &x), -4.0);
    assert_eq!(value("8 / 4 / 2", &x), 1.0);
    assert_eq!(value("1 + 2 * 3", &x), 7.0);
    assert_eq!(value("2 * -x2", &x), -6.0);
    assert_eq!(value("x1 - -x2 * 2", &x), 8.0);
    assert_eq!(value("x1^x2^0", &x), 2.0);
}

#[test]
fn expressions_are_shareable_values() {
    fn shareable<T: Send + Sync + Clone + std::fmt::Debug + 'static>(_: &T) {}
    let f = Expr::parse("sum(i, 1, n, x[i])", 2).unwrap();
    shareable(&f);
    let g = f.clone();
    let h = std::thread::spawn(move || g.eval(&[1.0, 2.0]))
        .join()
        .unwrap();
    assert_eq!(h, 3.0);
    assert!(format!("{f:?}").contains("sum(i, 1, n, x[i])"));
    // Through the cubature interface.
    let i: &dyn gpuq_kernels::cubature::integrand::Integrand = &f;
    assert_eq!(i.eval(&[0.5, 0.25]), 0.75);
}

#[test]
fn short_points_give_nan_and_long_ones_are_cut() {
    let f = Expr::parse("x1 + x3", 3).unwrap();
    assert!(f.eval(&[1.0, 2.0]).is_nan());
    assert!(f.eval_reference(&[]).is_nan());
    assert_eq!(f.eval(&[1.0, 2.0, 3.0, 100.0]), 4.0);
    assert_eq!(f.eval_reference(&[1.0, 2.0, 3.0, 100.0]), 4.0);
    assert_eq!(f.dim(), 3);
    assert_eq!(f.text(), "x1 + x3");
}

#[test]
fn trees_and_their_printing() {
    let num = |v: f64| Box::new(Ast::Num(v));
    let ast = |text: &str| Expr::parse(text, 3).unwrap().ast().clone();
    assert_eq!(
        ast("2^3^2"),
        Ast::Binary(
            BinOp::Pow,
            num(2.0),
            Box::new(Ast::Binary(BinOp::Pow, num(3.0), num(2.0)))
        )
    );
    assert_eq!(
        ast("-x1^2"),
        Ast::Neg(Box::new(Ast::Binary(
            BinOp::Pow,
            Box::new(Ast::Coord(1)),
            num(2.0)
        )))
    );
    assert_eq!(
        ast("sum(i, 1, n, x[i])"),
        Ast::Loop {
            kind: LoopKind::Sum,
            index: "i".into(),
            from: num(1.0),
            to: Box::new(Ast::Dim),
            body: Box::new(Ast::CoordAt(Box::new(Ast::Index("i".into())))),
        }
    );
    assert_eq!(
        ast("min(pi, e, cos(x2))"),
        Ast::Call(
            Func::Min,
            vec![
                Ast::Pi,
                Ast::E,
                Ast::Call(Func::Unary(UnaryFunc::Cos), vec![Ast::Coord(2)])
            ]
        )
    );
    for (text, printed) in [
        ("2^3^2", "2^3^2"),
        ("(2^3)^2", "(2^3)^2"),
        ("(-2)^2", "(-2)^2"),
        ("2^-1", "2^-1"),
        ("-(x1 + x2)", "-(x1 + x2)"),
        ("- - x1", "-(-x1)"),
        ("x1 - (x2 - x3)", "x1 - (x2 - x3)"),
        ("(x1 - x2) - x3", "x1 - x2 - x3"),
        ("x1 / (x2 * x3)", "x1 / (x2 * x3)"),
        ("2 * -0.054402111088937", "2 * -0.054402111088937"),
        ("1e-300 + 2.5E+20 + 0.1", "1e-300 + 2.5e20 + 0.1"),
        ("x[ n+1-1 ]", "x[n + 1 - 1]"),
        (
            "prod(k,1,2,atan2(k, x[k]))",
            "prod(k, 1, 2, atan2(k, x[k]))",
        ),
        ("+x1", "x1"),
    ] {
        let f = Expr::parse(text, 3).unwrap();
        assert_eq!(f.ast().to_string(), printed, "{text}");
        assert_eq!(Expr::parse(printed, 3).unwrap().ast(), f.ast(), "{text}");
    }
}

#[test]
fn cuda_source_shape() {
    let f = Expr::parse("1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)", 7).unwrap();
    let src = f.cuda_source();
    let first = src.lines().next().unwrap();
    assert!(
        first.starts_with("//") && first.contains("dimension 7"),
        "{first}"
    );
    assert!(first.contains("1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)"));
    assert!(src.contains("extern \"C\" __device__ double gpuq_cos(double);"));
    assert!(src.contains(&format!(
        "extern \"C\" __device__ double {CUDA_ENTRY}(const double* x, unsigned int n)"
    )));
    assert!(src.contains("(void)n;"));
    assert!(src.contains("(x[6] * x[6])"));
    assert!(!src.contains("#include"));
    // Only the functions used are declared, and CUDA's own are never called.
    assert!(!src.contains("gpuq_sin"));
    let body = src.split_once('\n').unwrap().1;
    assert!(!body.contains(" cos(") && !body.contains("(cos("), "{src}");
    // Integer powers are written-out chains of one value; other powers call
    // gpuq_pow; constants read back exactly as doubles.
    let src = Expr::parse("sin(x1 + x2)^3 + x2^-2 + x1^2.5 + 1/0 - 3", 2)
        .unwrap()
        .cuda_source();
    assert!(src.contains("((t1 * t1) * t1)"), "{src}");
    assert!(src.contains("1.0 / (x[1] * x[1])"), "{src}");
    assert!(src.contains("gpuq_pow(x[0], 2.5)"), "{src}");
    assert!(
        src.contains("__longlong_as_double((long long)0x7ff0000000000000ULL)"),
        "{src}"
    );
    assert!(src.contains("extern \"C\" __device__ double gpuq_pow(double, double);"));
    // A constant expression returns its literal.
    let src = Expr::parse("2 * 3", 1).unwrap().cuda_source();
    assert!(src.contains("return 6.0;"), "{src}");
    // Newlines in the text stay out of the comment line.
    let src = Expr::parse("x1\n+ x1", 1).unwrap().cuda_source();
    assert!(src.lines().next().unwrap().ends_with("x1 + x1"), "{src}");
}
