//! Each rule integrates every monomial up to its degree exactly on random boxes,
//! and each null rule gives zero on the monomials of its degree.

use gpuq_cubature::rules::{build, RuleKind};
use gpuq_kernels::cubature::integrand::Integrand;
use gpuq_kernels::cubature::rule::{evaluate, symmetric_sum, Rule};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Monomial(Vec<u32>);

impl Integrand for Monomial {
    fn eval(&self, x: &[f64]) -> f64 {
        x.iter()
            .zip(&self.0)
            .map(|(v, &p)| v.powi(p as i32))
            .product()
    }
}

/// All exponent vectors of total degree <= d in n variables.
fn monomials(n: usize, d: u32) -> Vec<Vec<u32>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in 0..=d {
        for mut rest in monomials(n - 1, d - p) {
            rest.insert(0, p);
            out.push(rest);
        }
    }
    out
}

fn exact(a: &[f64], b: &[f64], p: &[u32]) -> f64 {
    (0..a.len())
        .map(|i| {
            let k = p[i] as i32 + 1;
            (b[i].powi(k) - a[i].powi(k)) / k as f64
        })
        .product()
}

/// Null rule `k` (1..=4) applied to f on the box.
fn null_rule(rule: &Rule, f: &Monomial, c: &[f64], h: &[f64], k: usize) -> f64 {
    let vol: f64 = h.iter().product();
    let s: f64 = (0..rule.generators as usize)
        .map(|j| rule.w[k][j] * symmetric_sum(f, &rule.g[j][..c.len()], c, h))
        .sum();
    vol * s
}

fn check(kind: RuleKind, n: usize, sample: Option<usize>, rng: &mut ChaCha8Rng) {
    let rule = build(kind, n).unwrap();
    let d = rule.degree;
    let a: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..0.5)).collect();
    let b: Vec<f64> = a.iter().map(|v| v + rng.random_range(0.3..1.5)).collect();
    let c: Vec<f64> = a.iter().zip(&b).map(|(x, y)| 0.5 * (x + y)).collect();
    let h: Vec<f64> = a.iter().zip(&b).map(|(x, y)| 0.5 * (y - x)).collect();
    let mut all = monomials(n, d);
    if let Some(m) = sample {
        // Keep the powers of single variables, plus a random sample.
        let mut keep: Vec<Vec<u32>> = all
            .iter()
            .filter(|p| {
                // Powers of the first and the last variable (the rules are
                // symmetric), including the constant.
                p.iter().filter(|&&e| e > 0).count() <= 1
                    && p[1..p.len() - 1].iter().all(|&e| e == 0)
            })
            .cloned()
            .collect();
        for _ in 0..m {
            keep.push(all[rng.random_range(0..all.len())].clone());
        }
        all = keep;
    }
    for p in &all {
        let f = Monomial(p.clone());
        let want = exact(&a, &b, p);
        let got = evaluate(&rule, &f, &c, &h).estimate;
        let scale = 1.0 + want.abs();
        assert!(
            (got - want).abs() <= 1e-11 * scale * (1u64 << n.min(12)) as f64,
            "{kind:?} n={n} monomial {p:?}: {got} vs {want}"
        );
        if rule.error_kind == 0 && n <= 8 {
            let deg: u32 = p.iter().sum();
            // Null rules 1, 2 have degree d - 2; 3: d - 4; 4: d - 6.
            for (k, nd) in [(1, d - 2), (2, d - 2), (3, d - 4), (4, d - 6)] {
                if deg <= nd {
                    let z = null_rule(&rule, &f, &c, &h, k);
                    assert!(
                        z.abs() <= 1e-10 * scale * (1u64 << n.min(12)) as f64,
                        "{kind:?} n={n} null rule {k} on {p:?}: {z}"
                    );
                }
            }
        }
    }
}

#[test]
fn cuhre_rules_are_exact_to_their_degree() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    check(RuleKind::Cuhre, 2, None, &mut rng);
    check(RuleKind::Cuhre, 3, None, &mut rng);
    check(RuleKind::Cuhre, 4, None, &mut rng);
    check(RuleKind::Cuhre, 5, Some(300), &mut rng);
    for n in [6, 8] {
        check(RuleKind::Cuhre, n, Some(60), &mut rng);
    }
    check(RuleKind::Cuhre, 11, Some(10), &mut rng);
    check(RuleKind::Cuhre, 15, Some(2), &mut rng);
}

#[test]
fn degree9_rule_is_exact_for_small_n() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    check(RuleKind::Degree9, 2, None, &mut rng);
    check(RuleKind::Degree9, 3, None, &mut rng);
}

#[test]
fn genz_malik_is_exact_to_degree_7() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for n in 2..=5 {
        check(RuleKind::GenzMalik7, n, None, &mut rng);
    }
    check(RuleKind::GenzMalik7, 9, Some(60), &mut rng);
    check(RuleKind::GenzMalik7, 15, Some(3), &mut rng);
}

#[test]
fn point_counts_match_the_publications() {
    let pts = |k, n| build(k, n).unwrap().points as u64;
    assert_eq!(pts(RuleKind::Cuhre, 2), 65);
    assert_eq!(pts(RuleKind::Cuhre, 3), 127);
    for n in 4..=15u64 {
        let want = 1 + 8 * n + 6 * n * (n - 1) + 4 * n * (n - 1) * (n - 2) / 3 + (1 << n);
        assert_eq!(pts(RuleKind::Cuhre, n as usize), want);
        let gm = (1 << n) + 2 * n * n + 2 * n + 1;
        assert_eq!(pts(RuleKind::GenzMalik7, n as usize), gm);
    }
    assert!(build(RuleKind::Cuhre, 1).is_err());
    assert!(build(RuleKind::Cuhre, 17).is_err());
}

/// The lanes' evaluation (a warp's order on the device) is the same rule:
/// its table lists every point past the centre and the single-axis ones, and
/// on random boxes it gives the sequential evaluation's estimate, error and
/// split axis up to the order of the sums.
#[test]
fn lane_evaluation_is_the_sequential_rule_reordered() {
    use gpuq_cubature::rules::build_lanes;
    use gpuq_kernels::cubature::lanes::evaluate_lanes;
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    // A smooth integrand with no symmetry, so every point matters.
    struct Wavy;
    impl Integrand for Wavy {
        fn eval(&self, x: &[f64]) -> f64 {
            x.iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64 * v + 0.3).sin() * (1.0 + v * v))
                .product::<f64>()
                .exp()
        }
    }
    for (kind, n) in [
        (RuleKind::Cuhre, 2),
        (RuleKind::Cuhre, 3),
        (RuleKind::Cuhre, 4),
        (RuleKind::Cuhre, 9),
        (RuleKind::Degree9, 2),
        (RuleKind::GenzMalik7, 6),
        (RuleKind::Cuhre, 16),
    ] {
        let lanes = build_lanes(kind, n).unwrap();
        let rule = &lanes.rule;
        assert_eq!(
            lanes.table.len() as u64,
            rule.points as u64 - 1 - 4 * n as u64,
            "{kind:?} n={n}"
        );
        for _ in 0..20 {
            let c: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let h: Vec<f64> = (0..n).map(|_| rng.random_range(0.01..0.5)).collect();
            let a = evaluate(rule, &Wavy, &c, &h);
            let b = evaluate_lanes(rule, &lanes.table, &Wavy, &c, &h);
            let scale = a.estimate.abs().max(1e-300);
            assert!(
                (a.estimate - b.estimate).abs() <= 1e-12 * scale,
                "{kind:?} n={n}: {a:?} vs {b:?}"
            );
            assert!(
                (a.error - b.error).abs() <= 1e-9 * scale + 1e-6 * a.error,
                "{kind:?} n={n}: {a:?} vs {b:?}"
            );
            assert_eq!(a.axis, b.axis, "{kind:?} n={n}");
        }
    }
}
