//! `Expr::eval` against the hand-written built-ins f1-f5 (`Builtin::eval`),
//! each over the same 4096 pseudo-random points of [0, 1]^n.

use criterion::{criterion_group, criterion_main, Criterion};
use gpuq_expr::Expr;
use gpuq_kernels::cubature::integrand::{Builtin, Integrand, F1, F2, F3, F4, F5, MAX_DIM};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::hint::black_box;

/// (name, kind, dimension, expression) of f1-f5.
const FORMS: [(&str, u32, usize, &str); 5] = [
    ("f1", F1, 7, "1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)"),
    ("f2", F2, 5, "cos(prod(i, 1, n, cos(4^i * x[i])))"),
    ("f3", F3, 5, "sin(prod(i, 1, n, i * asin(x[i]^i)))"),
    ("f4", F4, 6, "sin(prod(i, 1, n, asin(x[i])))"),
    (
        "f5",
        F5,
        8,
        "sum(i, 1, n, cos(10 * x[i])) / (2 * -0.054402111088937)",
    ),
];

const POINTS: usize = 4096;

/// Sum of f over the points (flat, `dim` values each).
fn total(f: &impl Integrand, points: &[f64], dim: usize) -> f64 {
    points.chunks_exact(dim).map(|x| f.eval(black_box(x))).sum()
}

fn bench(c: &mut Criterion) {
    for (name, kind, dim, text) in FORMS {
        let mut rng = ChaCha8Rng::seed_from_u64(2024);
        let points: Vec<f64> = (0..POINTS * dim).map(|_| rng.random::<f64>()).collect();
        let expr = Expr::parse(text, dim).expect("f1-f5 parse");
        let builtin = Builtin {
            kind,
            dim: dim as u32,
            a: [0.0; MAX_DIM],
            u: [0.0; MAX_DIM],
        };
        assert_eq!(
            total(&expr, &points, dim).to_bits(),
            total(&builtin, &points, dim).to_bits()
        );
        let mut group = c.benchmark_group(name);
        group.bench_function("builtin", |b| b.iter(|| total(&builtin, &points, dim)));
        group.bench_function("expr", |b| b.iter(|| total(&expr, &points, dim)));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
