//! What the user-integrand tests of both backends share: f1-f5 as expressions,
//! closed-form cases, random boxes, and a CUDA C bump with its integral.

#![allow(dead_code)]

use gpuq_cubature::{Boxes, Options};
use gpuq_kernels::cubature::integrand as k;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// f1-f5 as expressions (the dimension-generic forms of the built-ins).
pub const F_EXPRESSIONS: [(u32, &str); 5] = [
    (k::F1, "1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)"),
    (k::F2, "cos(prod(i, 1, n, cos(4^i * x[i])))"),
    (k::F3, "sin(prod(i, 1, n, i * asin(x[i]^i)))"),
    (k::F4, "sin(prod(i, 1, n, asin(x[i])))"),
    (
        k::F5,
        "sum(i, 1, n, cos(10 * x[i])) / (2 * -0.054402111088937)",
    ),
];

/// erf(1).
const ERF_1: f64 = 0.842_700_792_949_714_9;

/// Expressions over the unit cube with their integrals: (text, n, value).
pub fn closed_forms() -> [(&'static str, usize, f64); 4] {
    let gauss_1d = std::f64::consts::PI.sqrt() / 2.0 * ERF_1;
    [
        ("cos(x1) * cos(x2) * cos(x3)", 3, 1f64.sin().powi(3)),
        ("prod(i, 1, n, cos(x[i]))", 4, 1f64.sin().powi(4)),
        ("exp(-sum(i, 1, n, x[i]^2))", 3, gauss_1d.powi(3)),
        (
            "1 + x1*x2 - x[3]^3/2 + exp(x2)",
            3,
            1.0 + 0.25 - 0.125 + (1f64.exp() - 1.0),
        ),
    ]
}

/// Options with a relative tolerance and an evaluation cap.
pub fn opts(rel_tol: f64, max_evals: u64) -> Options {
    Options {
        rel_tol,
        max_evals,
        ..Options::default()
    }
}

/// `count` random boxes inside the unit cube, and the cube itself (whose
/// points reach 0 and 1).
pub fn random_boxes(n: usize, count: usize, rng: &mut ChaCha8Rng) -> Boxes {
    let mut b = Boxes::new(n);
    for _ in 0..count {
        let c: Vec<f64> = (0..n).map(|_| rng.random_range(0.1..0.9)).collect();
        let h: Vec<f64> = (0..n).map(|_| rng.random_range(0.01..0.1)).collect();
        b.push(&c, &h);
    }
    b.push(&vec![0.5; n], &vec![0.5; n]);
    b
}

/// A seeded generator.
pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// The Rust example's bump exp(-sum_k k (x_k - 1/2)^2) in CUDA C, with
/// gpuq's `exp` (so it computes the example's bits).
pub const BUMP_CUDA_C: &str = r#"
extern "C" __device__ double gpuq_exp(double);
extern "C" __device__ double gpuq_integrand(const double* x, unsigned int n) {
    double s = 0.0;
    for (unsigned int k = 0; k < n; ++k) { double d = x[k] - 0.5; s += (k + 1.0) * d * d; }
    return gpuq_exp(-s);
}
"#;

/// The bump's integral over [0, 1]^n: prod_k sqrt(pi / k) erf(sqrt(k) / 2).
pub fn bump_integral(n: usize) -> f64 {
    (1..=n)
        .map(|k| {
            let k = k as f64;
            (std::f64::consts::PI / k).sqrt()
                * gpuq_kernels::cubature::functions::erf(k.sqrt() / 2.0)
        })
        .product()
}
