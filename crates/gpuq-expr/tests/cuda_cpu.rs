//! The CUDA C of expressions, compiled for the CPU by the system's C++
//! compiler (with `__device__` defined away and the `gpuq_*` functions from
//! `<cmath>`), agrees with `Expr::eval`. The C library's functions differ
//! from the shared ones by ulps, so the comparison is to 1e-13 relative (with
//! an absolute floor of 1e-14 for values near zero); NaN must meet NaN and
//! infinities must be equal. Without a C++ compiler the test says so and
//! passes.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};

use gpuq_expr::{Expr, CUDA_ENTRY};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// (dimension, expression): f1-f5 and expressions using every function and
/// operator, integer powers, long folds, and folded infinities and NaN.
const CASES: &[(usize, &str)] = &[
    (7, "1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)"),
    (5, "cos(prod(i, 1, n, cos(4^i * x[i])))"),
    (5, "sin(prod(i, 1, n, i * asin(x[i]^i)))"),
    (6, "sin(prod(i, 1, n, asin(x[i])))"),
    (8, "sum(i, 1, n, cos(10 * x[i])) / (2 * -0.054402111088937)"),
    (3, "exp(-sum(i, 1, n, x[i]^2))"),
    (3, "sin(x1) + cos(x2) * tan(x3) + 3 - asin(x1) / (acos(x2) + 1) + atan(x3)"),
    (3, "atan2(x1 - 0.5, x2 - 0.3) + sinh(x1) - cosh(x2) * tanh(x3) - 4"),
    (3, "exp(x1) + log(x2 + 0.5) + log10(x3 + 1) + sqrt(x1) + abs(x2 - 0.5) + floor(4 * x3) + erf(x1 - x2) + 2"),
    (3, "pow(x1, x2) + pow(x2 + 0.1, -1.5) + x3^0.5 + (x1 + 1)^-3 + min(x1, x2, x3) - max(x1, 0.5, x3) + 1"),
    (4, "prod(i, 1, n, 1 + x[i]^i) / sum(j, 1, n, j * x[n + 1 - j] + 0.25)"),
    (3, "-x1^2 - (-x2)^3 + 2^-x3 + 1e-3 * 2.5E+2 / .5 + (x1 + 2)^70 / 3^70"),
    (12, "sum(i, 1, n, x[i] * i) + prod(i, 1, n, 1 + x[i] / 8) - sum(i, 1, 0, x1)"),
    (2, "x1 + 1 / 0"),
    (2, "x1 - x2 + 0 * (1 / 0)"),
    (2, "sum(i, 1, 3, sum(j, 1, 2, x[j]^i * pi / e)) + n"),
    (1, "2 * 3 + pi"),
];

/// The harness: `__device__` defined away, the `gpuq_*` functions from
/// `<cmath>` (pow with the shared integer rule, asin/acos clamped as the shared
/// ones), then each expression's source with its entry renamed.
fn harness(sources: &[String]) -> String {
    let mut c = String::from(
        r#"#include <cmath>
#include <cstdio>
#include <cstring>
#define __device__
static double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, sizeof d); return d; }
static double unit(double x) {
    const double slack = 1.0 + 1.0 / 1099511627776.0;
    if (x > 1.0) return x <= slack ? 1.0 : NAN;
    if (x < -1.0) return x >= -slack ? -1.0 : NAN;
    return x;
}
extern "C" double gpuq_sin(double a) { return std::sin(a); }
extern "C" double gpuq_cos(double a) { return std::cos(a); }
extern "C" double gpuq_tan(double a) { return std::tan(a); }
extern "C" double gpuq_asin(double a) { return std::asin(unit(a)); }
extern "C" double gpuq_acos(double a) { return std::acos(unit(a)); }
extern "C" double gpuq_atan(double a) { return std::atan(a); }
extern "C" double gpuq_atan2(double y, double x) { return std::atan2(y, x); }
extern "C" double gpuq_sinh(double a) { return std::sinh(a); }
extern "C" double gpuq_cosh(double a) { return std::cosh(a); }
extern "C" double gpuq_tanh(double a) { return std::tanh(a); }
extern "C" double gpuq_exp(double a) { return std::exp(a); }
extern "C" double gpuq_log(double a) { return std::log(a); }
extern "C" double gpuq_log10(double a) { return std::log10(a); }
extern "C" double gpuq_sqrt(double a) { return std::sqrt(a); }
extern "C" double gpuq_abs(double a) { return std::fabs(a); }
extern "C" double gpuq_floor(double a) { return std::floor(a); }
extern "C" double gpuq_erf(double a) { return std::erf(a); }
extern "C" double gpuq_min(double a, double b) { return std::fmin(a, b); }
extern "C" double gpuq_max(double a, double b) { return std::fmax(a, b); }
extern "C" double gpuq_pow(double a, double b) {
    if (b == std::floor(b) && std::fabs(b) < 9007199254740992.0) {
        double m = std::fabs(b), p = 1.0;
        if (m > 64.0) {
            p = std::pow(a, m);
        } else if (m > 0.0) {
            p = a;
            for (int i = 1; i < (int)m; i++) p *= a;
        }
        return b < 0.0 ? 1.0 / p : p;
    }
    if (b == 0.5) return std::sqrt(a);
    return std::pow(a, b);
}
"#,
    );
    for (i, src) in sources.iter().enumerate() {
        let _ = writeln!(
            c,
            "#define {CUDA_ENTRY} integrand_{i}\n{src}#undef {CUDA_ENTRY}"
        );
    }
    c.push_str("typedef double (*Integrand)(const double*, unsigned int);\n");
    c.push_str("static const Integrand integrands[] = {");
    for i in 0..sources.len() {
        let _ = write!(c, "integrand_{i}, ");
    }
    c.push_str(
        r#"};
// Reads lines "case dim x_1 ... x_dim" (bit patterns in hex) and prints f(x)'s bits.
int main() {
    unsigned k, d;
    while (std::scanf("%u %u", &k, &d) == 2) {
        double x[64];
        for (unsigned i = 0; i < d; i++) {
            unsigned long long b;
            if (std::scanf("%llx", &b) != 1) return 1;
            std::memcpy(&x[i], &b, sizeof b);
        }
        double v = integrands[k](x, d);
        unsigned long long b;
        std::memcpy(&b, &v, sizeof b);
        std::printf("%llx\n", b);
    }
    return 0;
}
"#,
    );
    c
}

/// The first of `c++` and `g++` that runs.
fn compiler() -> Option<&'static str> {
    ["c++", "g++"].into_iter().find(|cc| {
        Command::new(cc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Points of [0, 1]^dim: random ones and the cube's faces.
fn points(dim: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<f64>> {
    let mut pts: Vec<Vec<f64>> = (0..300)
        .map(|_| (0..dim).map(|_| rng.random::<f64>()).collect())
        .collect();
    pts.push(vec![0.0; dim]);
    pts.push(vec![1.0; dim]);
    pts.push((0..dim).map(|i| (i % 2) as f64).collect());
    pts
}

fn agree(got: f64, want: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.is_infinite() || want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= 1e-13 * got.abs().max(want.abs()) + 1e-14
}

#[test]
fn cuda_source_compiled_for_the_cpu_agrees_with_eval() {
    let Some(cc) = compiler() else {
        eprintln!("note: no C++ compiler (c++ or g++) on PATH; the CUDA C was not compiled");
        return;
    };
    let exprs: Vec<Expr> = CASES
        .iter()
        .map(|&(dim, text)| Expr::parse(text, dim).unwrap_or_else(|e| panic!("{text}: {e}")))
        .collect();
    let sources: Vec<String> = exprs.iter().map(Expr::cuda_source).collect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpuq-expr-cuda-cpu");
    std::fs::create_dir_all(&dir).unwrap();
    let cpp = dir.join("harness.cpp");
    let exe = dir.join("harness");
    std::fs::write(&cpp, harness(&sources)).unwrap();
    let build = Command::new(cc)
        .args(["-std=c++17", "-O0", "-ffp-contract=off", "-o"])
        .arg(&exe)
        .arg(&cpp)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{cc} failed on {}:\n{}",
        cpp.display(),
        String::from_utf8_lossy(&build.stderr)
    );

    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut input = String::new();
    let mut queries = Vec::new();
    for (k, e) in exprs.iter().enumerate() {
        for x in points(e.dim(), &mut rng) {
            let _ = write!(input, "{k} {}", e.dim());
            for v in &x {
                let _ = write!(input, " {:x}", v.to_bits());
            }
            input.push('\n');
            queries.push((k, x));
        }
    }
    let mut run = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    run.stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success());
    let answers: Vec<f64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| f64::from_bits(u64::from_str_radix(l, 16).unwrap()))
        .collect();
    assert_eq!(answers.len(), queries.len());
    for ((k, x), got) in queries.iter().zip(answers) {
        let want = exprs[*k].eval(x);
        assert!(
            agree(got, want),
            "{}: C {got:e} vs eval {want:e} at {x:?}\n{}",
            CASES[*k].1,
            sources[*k]
        );
    }
}
