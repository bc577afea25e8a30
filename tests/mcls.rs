//! Monte Carlo linear solvers on the CPU: the random streams equal rand_chacha's,
//! the error falls like 1/sqrt(histories), forward and adjoint agree within their
//! standard errors, the expected-value estimator has the smaller variance, MCSA
//! reaches 1e-8, rho(H) >= 1 and bad input give errors, and results do not depend
//! on the thread count or the layout.

mod common;

use common::random_vec;
use gpuq::core::Error;
use gpuq::cpu::CpuBackend;
use gpuq::mcls::{
    mcsa, solve, Estimator, Layout, McMethod, McOptions, McResult, McsaOptions, MonteCarlo,
};
use gpuq::sparse::{generators, Coo, Csr};
use gpuq_kernels::chacha;
use rand::{RngCore, SeedableRng};

/// A diagonally dominant nonsymmetric system of size n with rho(H) about `rho`:
/// the 1D Laplacian shifted so that 2 / (2 + s) = rho, with an upwind skew.
fn system(n: usize, rho: f64) -> Csr<f64> {
    let shift = 2.0 / rho - 2.0;
    let mut coo = Coo::new(n, n);
    for i in 0..n {
        coo.push(i, i, 2.0 + shift).unwrap();
        if i > 0 {
            coo.push(i, i - 1, -1.2).unwrap();
        }
        if i + 1 < n {
            coo.push(i, i + 1, -0.8).unwrap();
        }
    }
    Csr::from_coo(&coo).unwrap()
}

/// A COO matrix from (row, column, value) triplets.
fn triplets(nrows: usize, ncols: usize, t: Vec<(usize, usize, f64)>) -> Result<Coo<f64>, Error> {
    let mut coo = Coo::new(nrows, ncols);
    for (i, j, v) in t {
        coo.push(i, j, v)?;
    }
    Ok(coo)
}

/// b = A x for a random x; returns (x, b).
fn known(a: &Csr<f64>, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let x: Vec<f64> = random_vec(a.nrows(), seed);
    let b = a.mul_vec(&x).unwrap();
    (x, b)
}

fn rms(u: &[f64], v: &[f64]) -> f64 {
    (u.iter().zip(v).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / u.len() as f64).sqrt()
}

fn mean_var(r: &McResult) -> f64 {
    let se = r.std_error.as_ref().expect("batches give a standard error");
    se.iter().map(|s| s * s).sum::<f64>() / se.len() as f64
}

#[test]
fn streams_equal_rand_chacha() {
    for (seed, stream) in [
        (0u64, 0u64),
        (1, 7),
        (0xdead_beef_1234, 1 << 40),
        (u64::MAX, 3),
    ] {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        let mut reference = rand_chacha::ChaCha8Rng::from_seed(key);
        reference.set_stream(stream);
        let mut ours = chacha::Stream::new(chacha::key_from_seed(seed), stream);
        for k in 0..100 {
            assert_eq!(
                ours.next_u32(),
                reference.next_u32(),
                "seed {seed} stream {stream} word {k}"
            );
        }
        // And block by block, at an arbitrary counter.
        reference.set_word_pos(16 * 12345);
        let block =
            chacha::block::<{ chacha::CHACHA8 }>(&chacha::key_from_seed(seed), 12345, stream);
        for (k, w) in block.iter().enumerate() {
            assert_eq!(*w, reference.next_u32(), "block word {k}");
        }
    }
}

#[test]
fn spectral_radii_match_the_seed() {
    let cpu = CpuBackend::new();
    let a = generators::seed000_laplace2d_900::<f64>();
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    // Seed 000 tables: rho(H) = 0.994869, rho(H^) = 0.99447.
    assert!(
        (mc.setup().rho_h.value - 0.994869).abs() < 1e-5,
        "{:?}",
        mc.setup().rho_h
    );
    assert!((mc.setup().rho_hat_forward.value - 0.99447).abs() < 1e-5);
    let a = generators::laplace1d::<f64>(200, 0.5);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    let exact = 2.0 * (std::f64::consts::PI / 201.0).cos() / 2.5;
    assert!(
        (mc.setup().rho_h.value - exact).abs() < 1e-4,
        "{:?} vs {exact}",
        mc.setup().rho_h
    );
}

#[test]
fn error_falls_like_one_over_sqrt_histories() {
    let cpu = CpuBackend::new();
    let a = system(40, 0.7);
    let (x, b) = known(&a, 3);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    for method in [McMethod::Adjoint, McMethod::Forward] {
        let counts = [2_000u64, 8_000, 32_000, 128_000];
        let mut points = vec![];
        for &h in &counts {
            // Mean squared error over independent seeds.
            let mse: f64 = (0..6)
                .map(|s| {
                    let o = McOptions {
                        method,
                        histories: h,
                        seed: 100 + s,
                        ..Default::default()
                    };
                    rms(&mc.solve(&b, &o).unwrap().x, &x).powi(2)
                })
                .sum::<f64>()
                / 6.0;
            points.push(((h as f64).ln(), 0.5 * mse.ln()));
        }
        let slope = fit_slope(&points);
        assert!(
            (-0.65..=-0.35).contains(&slope),
            "{method:?}: slope {slope} from {points:?}"
        );
    }
}

/// Least-squares slope of y against x.
fn fit_slope(p: &[(f64, f64)]) -> f64 {
    let n = p.len() as f64;
    let (mx, my) = (
        p.iter().map(|q| q.0).sum::<f64>() / n,
        p.iter().map(|q| q.1).sum::<f64>() / n,
    );
    let sxy: f64 = p.iter().map(|q| (q.0 - mx) * (q.1 - my)).sum();
    let sxx: f64 = p.iter().map(|q| (q.0 - mx).powi(2)).sum();
    sxy / sxx
}

#[test]
fn forward_and_adjoint_agree_within_their_errors() {
    let cpu = CpuBackend::new();
    let a = system(30, 0.8);
    let (x, b) = known(&a, 5);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    let run = |method| {
        mc.solve(
            &b,
            &McOptions {
                method,
                histories: 60_000,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let (f, ad) = (run(McMethod::Forward), run(McMethod::Adjoint));
    let (sf, sa) = (f.std_error.unwrap(), ad.std_error.unwrap());
    for i in 0..30 {
        let sigma = (sf[i].powi(2) + sa[i].powi(2)).sqrt();
        assert!(
            (f.x[i] - ad.x[i]).abs() < 5.0 * sigma,
            "entry {i}: {} vs {} (sigma {sigma})",
            f.x[i],
            ad.x[i]
        );
        // Each also brackets the true solution.
        assert!(
            (f.x[i] - x[i]).abs() < 5.0 * sf[i] + 1e-12,
            "forward entry {i}"
        );
        assert!(
            (ad.x[i] - x[i]).abs() < 5.0 * sa[i] + 1e-12,
            "adjoint entry {i}"
        );
    }
}

#[test]
fn expected_value_estimator_has_smaller_variance() {
    let cpu = CpuBackend::new();
    let a = system(30, 0.8);
    let (_, b) = known(&a, 9);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    for method in [McMethod::Forward, McMethod::Adjoint] {
        let var = |estimator| {
            let o = McOptions {
                method,
                estimator,
                histories: 60_000,
                batches: 20,
                ..Default::default()
            };
            mean_var(&mc.solve(&b, &o).unwrap())
        };
        let (c, e) = (var(Estimator::Collision), var(Estimator::Expected));
        assert!(
            e < c,
            "{method:?}: expected-value variance {e} not below collision {c}"
        );
    }
}

#[test]
fn fixed_length_and_cutoff_both_stop_histories() {
    let cpu = CpuBackend::new();
    let a = system(20, 0.9);
    let (x, b) = known(&a, 2);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    let o = McOptions {
        histories: 2_000,
        max_steps: 7,
        cutoff: 0.0,
        ..Default::default()
    };
    let r = mc.solve(&b, &o).unwrap();
    assert_eq!(
        r.steps,
        7 * 2_000,
        "every history runs exactly max_steps moves"
    );
    // Truncated at 7 moves the estimate is biased: sum_{m<=7} H^m b^ misses 0.9^8 of x.
    assert!(rms(&r.x, &x) > 0.05);
    let o = McOptions {
        histories: 2_000,
        max_steps: 100_000,
        cutoff: 1e-6,
        ..Default::default()
    };
    let r = mc.solve(&b, &o).unwrap();
    let per = r.steps as f64 / 2_000.0;
    assert!(
        per > 20.0 && per < 1_000.0,
        "cutoff 1e-6 at rho 0.9: {per} moves per history"
    );
}

#[test]
fn mcsa_reaches_1e_minus_8() {
    let cpu = CpuBackend::new();
    for (n, rho) in [(500, 0.5), (2_000, 0.9)] {
        let a = system(n, rho);
        let (x, b) = known(&a, 11);
        let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
        let mut opts = McsaOptions::default();
        opts.inner.histories = 2 * n as u64;
        let (xs, report) = mcsa(&mc, &b, &opts).unwrap();
        assert!(
            report.converged && report.relative_residual <= 1e-8,
            "{report:?}"
        );
        let fresh = a.mul_vec(&xs).unwrap();
        let res = fresh
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q).powi(2))
            .sum::<f64>()
            .sqrt()
            / b.iter().map(|q| q * q).sum::<f64>().sqrt();
        assert!(
            (res - report.relative_residual).abs() <= 1e-12,
            "reported residual is the true one"
        );
        assert!(rms(&xs, &x) < 1e-6);
        // Pure Monte Carlo with the same histories stalls at its statistical error.
        let pure = mc.solve(&b, &opts.inner).unwrap();
        assert!(pure.relative_residual > 1e-4, "{}", pure.relative_residual);
    }
}

#[test]
fn mcsa_iteration_cap_is_not_converged() {
    let cpu = CpuBackend::new();
    let a = system(200, 0.9);
    let (_, b) = known(&a, 1);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    let opts = McsaOptions {
        max_iterations: 2,
        ..Default::default()
    };
    // As with the Krylov solvers: the cap is not an error, the report says so.
    let (x, r) = mcsa(&mc, &b, &opts).unwrap();
    assert!(!r.converged);
    assert_eq!(r.iterations, 2);
    assert_eq!(r.residual_history.len(), 3);
    assert!(r.relative_residual > opts.tolerance);
    // The reported residual is the true one of the returned x.
    let ax = a.mul_vec(&x).unwrap();
    let res: f64 = b
        .iter()
        .zip(&ax)
        .map(|(b, y)| (b - y).powi(2))
        .sum::<f64>()
        .sqrt();
    let bn: f64 = b.iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!((res / bn - r.relative_residual).abs() <= 1e-12 * (1.0 + res / bn));
}

#[test]
fn divergent_series_is_an_error() {
    let cpu = CpuBackend::new();
    // H = [[0, -2], [-2, 0]]: rho(H) = 2.
    let a = Csr::from_coo(
        &triplets(
            2,
            2,
            vec![(0, 0, 1.0), (0, 1, 2.0), (1, 0, 2.0), (1, 1, 1.0)],
        )
        .unwrap(),
    )
    .unwrap();
    match MonteCarlo::new(&cpu, &a, Layout::Soa) {
        Err(Error::Precondition { reason, .. }) => assert!(reason.contains("diverges"), "{reason}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("rho(H) = 2 accepted"),
    }
    // The unshifted 1D Laplacian has rho(H) = cos(pi/(n+1)) < 1: accepted, and its
    // variance matrix equals |H|, so no warning.
    let a = generators::laplace1d::<f64>(10, 0.0);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    assert!(mc.setup().warnings.is_empty());
}

#[test]
fn infinite_variance_is_a_warning() {
    // Rows with mixed magnitudes: the variance matrix H^_sj = |H_sj| * rowsum
    // exceeds 1 in spectral radius while rho(H) < 1 (a 2-cycle through a heavy
    // and a light entry).
    let a = Csr::from_coo(
        &triplets(
            3,
            3,
            vec![
                (0, 0, 1.0),
                (0, 1, 0.9),
                (0, 2, 0.09),
                (1, 0, 0.9),
                (1, 1, 1.0),
                (2, 0, 0.9),
                (2, 2, 1.0),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    let cpu = CpuBackend::new();
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    assert!(mc.setup().rho_h.value < 1.0, "{:?}", mc.setup().rho_h);
    assert!(!mc.setup().warnings.is_empty(), "{:?}", mc.setup());
}

#[test]
fn bad_input_is_an_error() {
    let cpu = CpuBackend::new();
    let rect = Csr::from_coo(&triplets(2, 3, vec![(0, 0, 1.0), (1, 1, 1.0)]).unwrap()).unwrap();
    assert!(matches!(
        MonteCarlo::new(&cpu, &rect, Layout::Soa),
        Err(Error::Precondition { .. })
    ));
    let zero_diag =
        Csr::from_coo(&triplets(2, 2, vec![(0, 1, 1.0), (1, 1, 1.0)]).unwrap()).unwrap();
    assert!(matches!(
        MonteCarlo::new(&cpu, &zero_diag, Layout::Soa),
        Err(Error::Precondition { .. })
    ));
    let a = system(10, 0.5);
    let mc = MonteCarlo::new(&cpu, &a, Layout::Soa).unwrap();
    let o = McOptions::default();
    assert!(matches!(
        mc.solve(&[1.0; 9], &o),
        Err(Error::ShapeMismatch { .. })
    ));
    let mut b = vec![1.0; 10];
    b[4] = f64::NAN;
    assert!(matches!(
        mc.solve(&b, &o),
        Err(Error::NonFinite { index: 4, .. })
    ));
    // b finite but b / d not: the largest f64 over a diagonal entry of 0.25
    // overflows.
    let small = Csr::from_coo(
        &triplets(
            2,
            2,
            vec![(0, 0, 0.25), (0, 1, 0.1), (1, 0, 0.1), (1, 1, 1.0)],
        )
        .unwrap(),
    )
    .unwrap();
    let mc_small = MonteCarlo::new(&cpu, &small, Layout::Soa).unwrap();
    assert!(matches!(
        mc_small.solve(&[f64::MAX, 1.0], &o),
        Err(Error::NonFinite { index: 0, .. })
    ));
    // A source of the wrong length is an error, not a panic.
    assert!(matches!(
        gpuq::mcls::Source::new(mc.setup(), vec![1.0; 3]),
        Err(Error::ShapeMismatch { .. })
    ));
    // Too few power iterations to settle rho(H): a warning says the check is uncertain.
    let unsettled = gpuq::mcls::McSetup::with_power_iterations(&a, 5).unwrap();
    assert!(!unsettled.rho_h.settled);
    assert!(
        unsettled
            .warnings
            .iter()
            .any(|w| w.contains("did not settle")),
        "{:?}",
        unsettled.warnings
    );
    for bad in [
        McOptions { histories: 0, ..o },
        McOptions { batches: 0, ..o },
        McOptions {
            cutoff: f64::NAN,
            ..o
        },
        McOptions { cutoff: 1.5, ..o },
    ] {
        assert!(
            matches!(mc.solve(&[1.0; 10], &bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    // b = 0 gives x = 0 without walking.
    let r = mc.solve(&[0.0; 10], &o).unwrap();
    assert!(r.x.iter().all(|&v| v == 0.0) && r.histories == 0);
}

#[test]
fn results_do_not_depend_on_threads_or_layout() {
    let a = system(300, 0.9);
    let (_, b) = known(&a, 4);
    let run = |threads: usize, layout, method, estimator| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let o = McOptions {
                method,
                estimator,
                layout,
                histories: 20_000,
                ..Default::default()
            };
            solve(&CpuBackend::new(), &a, &b, &o).unwrap()
        })
    };
    for method in [McMethod::Forward, McMethod::Adjoint] {
        for estimator in [Estimator::Collision, Estimator::Expected] {
            let one = run(1, Layout::Soa, method, estimator);
            let three = run(3, Layout::Aos, method, estimator);
            assert_eq!(one.x, three.x, "{method:?} {estimator:?}");
            assert_eq!(one.steps, three.steps);
            assert_eq!(one.std_error, three.std_error);
        }
    }
}
