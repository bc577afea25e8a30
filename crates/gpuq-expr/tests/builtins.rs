//! The expression forms of the built-in integrands f1-f5 give the built-ins'
//! bits on [0, 1]^n, faces and one ulp past them included.

use gpuq_expr::Expr;
use gpuq_kernels::cubature::integrand::{Builtin, Integrand, F1, F2, F3, F4, F5, MAX_DIM};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// (kind, dimension, expression) of f1-f5.
const FORMS: [(u32, usize, &str); 5] = [
    (F1, 7, "1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)"),
    (F2, 5, "cos(prod(i, 1, n, cos(4^i * x[i])))"),
    (F3, 5, "sin(prod(i, 1, n, i * asin(x[i]^i)))"),
    (F4, 6, "sin(prod(i, 1, n, asin(x[i])))"),
    (
        F5,
        8,
        "sum(i, 1, n, cos(10 * x[i])) / (2 * -0.054402111088937)",
    ),
];

/// Points of [0, 1]^dim: random ones, and ones whose coordinates sit on the
/// faces 0 and 1 or one ulp above 1.
fn points(dim: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<f64>> {
    let above_one = f64::from_bits(1.0f64.to_bits() + 1);
    let specials = [0.0, 1.0, above_one, 0.5, f64::EPSILON];
    let mut pts: Vec<Vec<f64>> = (0..500)
        .map(|_| (0..dim).map(|_| rng.random::<f64>()).collect())
        .collect();
    for &s in &specials {
        pts.push(vec![s; dim]);
        for _ in 0..20 {
            pts.push(
                (0..dim)
                    .map(|_| {
                        if rng.random::<bool>() {
                            specials[rng.random_range(0..specials.len())]
                        } else {
                            rng.random::<f64>()
                        }
                    })
                    .collect(),
            );
        }
    }
    pts
}

#[test]
fn f1_to_f5_match_the_builtins_bit_for_bit() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (kind, dim, text) in FORMS {
        let expr = Expr::parse(text, dim).unwrap();
        let builtin = Builtin {
            kind,
            dim: dim as u32,
            a: [0.0; MAX_DIM],
            u: [0.0; MAX_DIM],
        };
        for x in points(dim, &mut rng) {
            let want = builtin.eval(&x);
            let got = expr.eval(&x);
            let reference = expr.eval_reference(&x);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{text} at {x:?}: {got} vs {want}"
            );
            assert_eq!(
                reference.to_bits(),
                want.to_bits(),
                "reference, {text} at {x:?}"
            );
            assert_eq!(Integrand::eval(&expr, &x).to_bits(), want.to_bits());
        }
    }
}
