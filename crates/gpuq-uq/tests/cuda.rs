//! The UQ procedures on the CUDA backend against the CPU backend (same seeds,
//! same samples). Every test prints a line and passes when there is no CUDA
//! driver or device.

#![cfg(feature = "cuda")]

use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_uq::sdof::{linear_discrete_variance, linear_stationary_variance};
use gpuq_uq::{sdof_monte_carlo, BoucWen, HistogramSpec, Initial, Precision, SdofProblem};
use std::sync::OnceLock;

/// The device, or `None` (and one line on stdout) when there is none.
pub fn gpu(test: &str) -> Option<&'static CudaBackend> {
    static GPU: OnceLock<Option<CudaBackend>> = OnceLock::new();
    let g = GPU
        .get_or_init(|| match CudaBackend::new(0) {
            Ok(g) => Some(g),
            Err(gpuq_core::Error::NoCudaDevice(_)) => None,
            Err(e) => panic!("the CUDA backend failed to start: {e}"),
        })
        .as_ref();
    if g.is_none() {
        println!("{test}: skipped (no CUDA device)");
    }
    g
}

fn problem(precision: Precision) -> SdofProblem {
    SdofProblem {
        steps: 200,
        precision,
        keep: 40,
        histogram: Some(HistogramSpec {
            steps: vec![50, 200],
            lo: -0.3,
            hi: 0.3,
            bins: 12,
        }),
        ..SdofProblem::seed001()
    }
}

fn cpu_and_gpu_agree(precision: Precision, tol: f64) {
    let Some(g) = gpu("sdof_cpu_and_gpu_agree") else {
        return;
    };
    let p = problem(precision);
    let samples = 3001;
    let c = sdof_monte_carlo(&CpuBackend::new(), &p, samples, 17).unwrap();
    let d = sdof_monte_carlo(g, &p, samples, 17).unwrap();
    // The same samples: trajectories agree to rounding (bitwise when the device
    // evaluates the shared arithmetic exactly as the host does).
    let mut max_traj = 0.0f64;
    for (a, b) in c.trajectories.iter().zip(&d.trajectories) {
        for (x, y) in a.iter().zip(b) {
            max_traj = max_traj.max((x - y).abs());
        }
    }
    println!("{precision:?}: largest trajectory difference {max_traj:e}");
    assert!(max_traj <= tol, "{max_traj}");
    // Moments: only the order of the sums differs.
    for j in 0..=p.steps {
        let scale = c.variance[j].sqrt() + 1e-12;
        assert!(
            (c.mean[j] - d.mean[j]).abs() <= tol + 1e-12 * scale,
            "mean at {j}"
        );
        assert!(
            (c.variance[j] - d.variance[j]).abs() <= 10.0 * tol * scale + 1e-12 * c.variance[j],
            "variance at {j}"
        );
    }
    for (hc, hd) in c.histograms.iter().zip(&d.histograms) {
        assert_eq!(hd.iter().sum::<u64>(), samples);
        let moved: u64 = hc.iter().zip(hd).map(|(a, b)| a.abs_diff(*b)).sum();
        assert!(moved <= 2, "{hc:?} vs {hd:?}");
    }
}

#[test]
fn sdof_f64_cpu_and_gpu_agree() {
    cpu_and_gpu_agree(Precision::F64, 1e-12);
}

#[test]
fn sdof_f32_cpu_and_gpu_agree() {
    cpu_and_gpu_agree(Precision::F32, 1e-5);
}

#[test]
fn user_set_oscillators_agree_on_both_backends() {
    let Some(g) = gpu("user_set_oscillators_agree_on_both_backends") else {
        return;
    };
    let hysteretic = BoucWen {
        alpha: 0.2,
        a: 1.0,
        beta: 0.4,
        gamma: 0.3,
        n: 1.5,
    };
    for (name, p) in [
        (
            "duffing, exponent 0.7, random start",
            SdofProblem {
                duffing: 40.0,
                exponent: 0.7,
                omega: 2.5,
                initial: Initial {
                    x0: 0.05,
                    v0: 0.0,
                    x0_std: 0.02,
                    v0_std: 0.1,
                },
                ..problem(Precision::F64)
            },
        ),
        (
            "bouc-wen",
            SdofProblem {
                bouc_wen: Some(hysteretic),
                amplitude: 30.0,
                ..problem(Precision::F64)
            },
        ),
        (
            "bouc-wen f32",
            SdofProblem {
                bouc_wen: Some(hysteretic),
                amplitude: 30.0,
                ..problem(Precision::F32)
            },
        ),
    ] {
        let c = sdof_monte_carlo(&CpuBackend::new(), &p, 1500, 8).unwrap();
        let d = sdof_monte_carlo(g, &p, 1500, 8).unwrap();
        let tol = if p.precision == Precision::F64 {
            1e-12
        } else {
            1e-4
        };
        for (a, b) in c.trajectories.iter().zip(&d.trajectories) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= tol * (1.0 + x.abs()), "{name}: {x} vs {y}");
            }
        }
        for j in 0..=p.steps {
            assert!(
                (c.mean[j] - d.mean[j]).abs() <= tol * (1.0 + c.mean[j].abs()),
                "{name}: mean at {j}"
            );
        }
    }
}

#[test]
fn sdof_latin_hypercube_cpu_and_gpu_agree() {
    let Some(g) = gpu("sdof_latin_hypercube_cpu_and_gpu_agree") else {
        return;
    };
    for precision in [Precision::F64, Precision::F32] {
        let mut p = problem(precision);
        p.design = gpuq_uq::Design::LatinHypercube;
        let c = sdof_monte_carlo(&CpuBackend::new(), &p, 777, 3).unwrap();
        let d = sdof_monte_carlo(g, &p, 777, 3).unwrap();
        let tol = if precision == Precision::F64 {
            1e-12
        } else {
            1e-5
        };
        for (a, b) in c.trajectories.iter().zip(&d.trajectories) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= tol, "{x} vs {y}");
            }
        }
        for j in 0..=p.steps {
            assert!((c.mean[j] - d.mean[j]).abs() <= tol + 1e-12);
        }
    }
}

#[test]
fn sdof_gpu_linear_variance_matches_the_closed_form() {
    let Some(g) = gpu("sdof_gpu_linear_variance_matches_the_closed_form") else {
        return;
    };
    for precision in [Precision::F64, Precision::F32] {
        let p = SdofProblem {
            g: 0.0,
            precision,
            ..SdofProblem::seed001()
        };
        let samples = 200_000;
        let r = sdof_monte_carlo(g, &p, samples, 5).unwrap();
        let exact = linear_stationary_variance(p.amplitude, p.c, p.k);
        let discrete = linear_discrete_variance(&p, p.steps);
        let sigma = (2.0 / samples as f64).sqrt();
        let v = r.variance[p.steps];
        println!(
            "{precision:?}: variance {v} (discrete {discrete}, continuous {exact}), {} s",
            r.time_s
        );
        assert!((v / discrete - 1.0).abs() < 4.0 * sigma + 1e-3);
    }
}

#[test]
fn sdof_gpu_handles_ragged_and_empty_runs() {
    let Some(g) = gpu("sdof_gpu_handles_ragged_and_empty_runs") else {
        return;
    };
    let p = problem(Precision::F64);
    for samples in [0, 1, 31, 33] {
        let c = sdof_monte_carlo(&CpuBackend::new(), &p, samples, 1).unwrap();
        let d = sdof_monte_carlo(g, &p, samples, 1).unwrap();
        assert_eq!(c.trajectories.len(), d.trajectories.len());
        for j in 0..=p.steps {
            assert!((c.mean[j] - d.mean[j]).abs() < 1e-12);
        }
    }
}

fn static_problem(cov: Option<f64>) -> gpuq_uq::StaticProblem {
    let mut beam = gpuq_uq::Beam::unit(24).unwrap();
    beam.length = 2.0;
    beam.modulus = 200e9;
    beam.inertia = 4e-6;
    gpuq_uq::StaticProblem {
        dof: beam.tip(),
        beam,
        load_mean: 1000.0,
        load_std: 150.0,
        modulus_cov: cov,
        design: gpuq_uq::Design::MonteCarlo,
        solver: gpuq_uq::StaticSolver::Band,
    }
}

#[test]
fn static_cpu_and_gpu_solve_the_same_samples() {
    let Some(g) = gpu("static_cpu_and_gpu_solve_the_same_samples") else {
        return;
    };
    use gpuq_uq::{Design, StaticSolver};
    // The beam: a deterministic modulus through the adjoint on the host, a
    // random one through the band kernel on the device.
    for (cov, design) in [
        (None, Design::MonteCarlo),
        (Some(0.25), Design::LatinHypercube),
        (None, Design::Sobol),
    ] {
        let mut p = static_problem(cov);
        p.design = design;
        let c = gpuq_uq::static_response(&CpuBackend::new(), &p, 3000, 4).unwrap();
        let d = gpuq_uq::static_response(g, &p, 3000, 4).unwrap();
        assert_eq!(c.values, d.values);
        let (mean, std) = p.tip_moments();
        assert!((d.mean - mean).abs() < 4.0 * std / 3000f64.sqrt());
    }
    // A model through AMG-PCG on the device: deterministic K (one adjoint
    // solve per output) and a random K (one solve per sample), the same
    // statistics as the CPU backend's solves.
    use gpuq_sparse::generators::laplace2d;
    use gpuq_uq::model::{Damping, Model};
    use gpuq_uq::{static_response_on, ModelStatic, StaticOptions, Theta};
    let model = Model::new(laplace2d::<f64>(40), None, Damping::None, &[]).unwrap();
    let n = model.dofs();
    let scaled = laplace2d::<f64>(40);
    for terms in [
        Vec::new(),
        vec![(scaled, Theta::Uniform { lo: -0.3, hi: 0.3 })],
    ] {
        let problem = ModelStatic {
            model: &model,
            load_mean: vec![1.0; n],
            load_std: Some(vec![0.2; n]),
            load_factor: None,
            terms,
            outputs: vec![n / 2, n / 3],
            design: Design::MonteCarlo,
            tol: 1e-12,
        };
        let options = StaticOptions {
            samples: 200,
            seed: 5,
            solver: StaticSolver::Pcg,
        };
        let c = static_response_on(&CpuBackend::new(), &problem, &options).unwrap();
        let d = static_response_on(g, &problem, &options).unwrap();
        assert!(c.converged && d.converged);
        for (a, b) in c.outputs.iter().zip(&d.outputs) {
            for (x, y) in [
                (a.mean, b.mean),
                (a.std, b.std),
                (a.q05, b.q05),
                (a.q95, b.q95),
            ] {
                assert!(((x - y) / x).abs() < 1e-10, "{x} vs {y}");
            }
        }
        println!(
            "static model {} terms: PCG iterations {:?} (CPU {:?}), {} s on the device",
            problem.terms.len(),
            d.iterations,
            c.iterations,
            d.solve_s
        );
    }
}

/// The band strategy of a random K on the device (`uq_band_static_f64`, one
/// thread per sample) against the CPU backend's Rayon loop: the same kernels-rs
/// function, plain IEEE operations (no FMA in the PTX), so the same bits.
#[test]
fn band_kernel_cpu_and_gpu_give_the_same_bits() {
    let Some(g) = gpu("band_kernel_cpu_and_gpu_give_the_same_bits") else {
        return;
    };
    use gpuq_sparse::generators::laplace2d;
    use gpuq_sparse::{Coo, Csr};
    use gpuq_uq::model::{Damping, Model};
    use gpuq_uq::{static_response_on, Design, ModelStatic, StaticOptions, StaticSolver, Theta};
    // The beam with random element moduli (w = 3, one lognormal per element),
    // every design; 70,000 samples span several device batches.
    for (design, samples) in [
        (Design::MonteCarlo, 70_000),
        (Design::LatinHypercube, 3000),
        (Design::Sobol, 3000),
    ] {
        let mut p = static_problem(Some(0.2));
        p.design = design;
        let c = gpuq_uq::static_response(&CpuBackend::new(), &p, samples, 8).unwrap();
        let d = gpuq_uq::static_response(g, &p, samples, 8).unwrap();
        assert_eq!(c.values, d.values, "{design:?}");
        assert_eq!((c.mean, c.std), (d.mean, d.std));
        assert!(c.converged && d.converged && d.failed == 0);
    }
    // A banded model that is not the beam: laplace2d:9 (w = 9) with a fixed
    // DOF, a normal and a lognormal term, a rank-2 factor and independent loads.
    let model = Model::new(laplace2d::<f64>(9), None, Damping::None, &[4]).unwrap();
    let n = model.dofs();
    let mut diag = Coo::new(n, n);
    let mut factor = Coo::new(n, 2);
    for i in 0..n {
        // Small beside laplace2d:9's lowest eigenvalue (0.196) times the
        // lognormal term's smallest factor, so every sample's K stays SPD.
        diag.push(i, i, 0.05 + 0.001 * i as f64).unwrap();
        factor.push(i, i % 2, 0.1 + 0.001 * i as f64).unwrap();
    }
    let problem = ModelStatic {
        model: &model,
        load_mean: (0..n).map(|i| 1.0 + 0.01 * i as f64).collect(),
        load_std: Some(vec![0.2; n]),
        load_factor: Some(Csr::from_coo(&factor).unwrap()),
        terms: vec![
            (
                Csr::from_coo(&diag).unwrap(),
                Theta::Normal {
                    mean: 0.0,
                    std: 0.05,
                },
            ),
            (
                model.k.clone(),
                Theta::Lognormal {
                    mu: -0.05,
                    sigma: 0.3,
                    shift: -1.0,
                },
            ),
        ],
        outputs: vec![0, 40, 80],
        design: Design::MonteCarlo,
        tol: 1e-10,
    };
    let options = StaticOptions {
        samples: 5000,
        seed: 3,
        solver: StaticSolver::Auto,
    };
    let c = static_response_on(&CpuBackend::new(), &problem, &options).unwrap();
    let d = static_response_on(g, &problem, &options).unwrap();
    assert_eq!(d.solver, StaticSolver::Band);
    assert_eq!(c.values, d.values);
    assert_eq!(c.outputs, d.outputs);
    assert_eq!(c.max_residual, d.max_residual);
    assert!(c.converged && d.converged);
    println!(
        "band kernel: {} samples of {n} DOFs in {} s on the device, {} s on the CPU",
        options.samples, d.solve_s, c.solve_s
    );
}

#[test]
fn psd_rank1_cpu_and_gpu_agree() {
    let Some(g) = gpu("psd_rank1_cpu_and_gpu_agree") else {
        return;
    };
    use gpuq_core::Backend;
    use gpuq_uq::eigen::ModeOptions;
    use gpuq_uq::psd_model::{response_psd_full, LoadPsd, ModelPsd};
    use gpuq_uq::Ar1;
    let beam = gpuq_uq::Beam::unit(40).unwrap();
    let model = beam.model().unwrap();
    let mut shape = vec![0.0; model.dofs()];
    shape[beam.tip()] = 1.0;
    let p = ModelPsd {
        model: &model,
        load_shape: shape,
        outputs: vec![beam.tip()],
        frequencies: (0..7).map(|i| 1.5 * i as f64).collect(),
        load: LoadPsd::Ar1(Ar1 {
            phi: 0.9,
            sigma: 1.0,
            dt: 0.01,
        }),
        modes: ModeOptions {
            count: 0,
            ..ModeOptions::default()
        },
    };
    let cpu = CpuBackend::new();
    let c = cpu.download(&response_psd_full(&cpu, &p).unwrap()).unwrap();
    let d = g.download(&response_psd_full(g, &p).unwrap()).unwrap();
    assert_eq!(c.len(), d.len());
    let worst = c
        .iter()
        .zip(&d)
        .map(|(a, b)| (a - b).norm() / a.norm().max(1e-300))
        .fold(0.0f64, f64::max);
    println!("psd rank-1: largest relative difference {worst:e}");
    assert!(worst <= 1e-15);
    // The device's matrices exactly Hermitian too (the shared entry).
    let n = model.dofs();
    for m in d.chunks(n * n) {
        for i in 0..n {
            for j in 0..n {
                assert_eq!(m[i * n + j], m[j * n + i].conj());
            }
        }
    }
}

#[test]
fn a_models_psd_on_the_gpu_is_the_cpus() {
    let Some(g) = gpu("a_models_psd_on_the_gpu_is_the_cpus") else {
        return;
    };
    use gpuq_uq::eigen::ModeOptions;
    use gpuq_uq::psd_model::{model_psd_on, LoadPsd, ModelPsd};
    let beam = gpuq_uq::Beam::unit(40).unwrap();
    let model = beam.model().unwrap();
    let mut shape = vec![0.0; model.dofs()];
    shape[beam.tip()] = 1.0;
    shape[7] = -0.5;
    for count in [0, 6] {
        let p = ModelPsd {
            model: &model,
            load_shape: shape.clone(),
            outputs: vec![beam.tip(), 11, 20],
            frequencies: (0..9).map(|i| 2.0 * i as f64).collect(),
            load: LoadPsd::parse("kanai-tajimi:0.5:10:0.3").unwrap(),
            modes: ModeOptions {
                count,
                ..ModeOptions::default()
            },
        };
        let c = model_psd_on(&CpuBackend::new(), &p).unwrap();
        let d = model_psd_on(g, &p).unwrap();
        assert_eq!(c.outputs, d.outputs, "{count} modes: the outputs' PSDs");
        assert_eq!(c.cross, d.cross, "{count} modes: the cross-PSDs");
        for (m, o) in d.cross.iter().zip(0..) {
            for x in 0..3 {
                assert_eq!(m.re[x][x], d.outputs[x].psd[o]);
                assert_eq!(m.im[x][x], 0.0);
            }
        }
    }
    println!("a model's PSD: the GPU's cross-PSDs equal the CPU's bit for bit");
}

#[test]
fn tensor_expectation_on_the_gpu_is_n() {
    let Some(g) = gpu("tensor_expectation_on_the_gpu_is_n") else {
        return;
    };
    use gpuq_cubature::{builtin, Func};
    use gpuq_kernels::cubature::integrand::SUM_OF_SQUARES;
    for dim in [3, 8] {
        let f = builtin(SUM_OF_SQUARES, dim, &[], &[]).unwrap();
        let d = gpuq_uq::tensor_expectation(g, dim, 4, Func::Builtin(f)).unwrap();
        let c = gpuq_uq::tensor_expectation(&CpuBackend::new(), dim, 4, Func::Builtin(f)).unwrap();
        println!(
            "tensor GH dim {dim}: gpu {} cpu {} ({} points, {} s)",
            d.estimate, c.estimate, d.points, d.time_s
        );
        assert!((d.estimate - dim as f64).abs() < 1e-12 * dim as f64);
        assert!((d.estimate - c.estimate).abs() < 1e-12 * dim as f64);
    }
}

#[test]
fn sdof_kernel_costs_run() {
    let Some(g) = gpu("sdof_kernel_costs_run") else {
        return;
    };
    for precision in [Precision::F64, Precision::F32] {
        let p = SdofProblem {
            precision,
            ..SdofProblem::seed001()
        };
        let c = gpuq_uq::sdof::sdof_kernel_costs(g, &p, 100_000, 2).unwrap();
        println!("{precision:?}: {c:?}");
        for t in [
            c.rk4_arithmetic_s,
            c.square_roots_s,
            c.normals_s,
            c.steps_without_statistics_s,
            c.full_s,
        ] {
            assert!(t > 0.0 && t.is_finite());
        }
    }
}

#[test]
fn convolution_cpu_and_gpu_agree() {
    use gpuq_uq::convolution::{ConvolutionKernels, Kernels};
    use gpuq_uq::psd::Ar1;
    let Some(g) = gpu("convolution_cpu_and_gpu_agree") else {
        return;
    };
    // Two outputs: a damped oscillator's kernel and a multiple of it.
    let load = Ar1 {
        phi: 0.8,
        sigma: 1.0,
        dt: 0.01,
    };
    let steps = 300;
    let g0 = gpuq_uq::convolution_model::mode_kernel(6.0, 0.05, 1.0, load.dt, steps);
    let kern = vec![g0.clone(), g0.iter().map(|v| -3.0 * v).collect()];
    let mut k = Kernels::new(&kern, &load, steps);
    // Three batches (the last one ragged), each folded group by group.
    k.chunk = 64;
    let (samples, keep) = (150, 70);
    let c = CpuBackend::new().convolve(&k, 7, samples, keep).unwrap();
    let d = g.convolve(&k, 7, samples, keep).unwrap();
    let scale = c.histories.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let close = |a: &[f64], b: &[f64], tol: f64, what: &str| {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol, "{what}[{i}]: {x} vs {y}");
        }
    };
    close(&c.histories, &d.histories, 1e-12 * scale, "histories");
    close(&c.peaks, &d.peaks, 1e-12 * scale, "peaks");
    close(&c.mean, &d.mean, 1e-12 * scale, "mean");
    close(&c.m2, &d.m2, 1e-11 * scale * scale * samples as f64, "m2");
    assert_eq!(d.peaks.len(), samples * 2);
    // One batch on the device: the same statistics up to rounding.
    k.chunk = 4096;
    let one = g.convolve(&k, 7, samples, 0).unwrap();
    close(&one.mean, &d.mean, 1e-12 * scale, "mean, one batch");
    assert!(one.histories.is_empty());
}

#[test]
fn linear_samples_on_the_gpu_are_the_cpus() {
    let Some(g) = gpu("linear_samples_on_the_gpu_are_the_cpus") else {
        return;
    };
    use gpuq_uq::linear_samples::LinearSampleKernels;
    // Many normals per sample (a partial last block), three outputs, samples
    // from an offset: the device's warp sums against the host's block order.
    for (len, count) in [(100_007usize, 64usize), (5, 3000), (16 * 32, 7)] {
        let coef: Vec<Vec<f64>> = (0..3)
            .map(|o| {
                (0..len)
                    .map(|k| ((k * 7 + o * 13) % 17) as f64 / 17.0 - 0.4)
                    .collect()
            })
            .collect();
        let base = [1.0, -0.5, 1e3];
        let c = CpuBackend::new()
            .linear_samples(42, 1000, count, &base, &coef)
            .unwrap();
        let d = g.linear_samples(42, 1000, count, &base, &coef).unwrap();
        assert_eq!(c.len(), d.len());
        let scale = (len as f64).sqrt();
        let worst = c
            .iter()
            .zip(&d)
            .map(|(a, b)| (a - b).abs() / scale)
            .fold(0.0f64, f64::max);
        println!("linear samples ({len} normals, {count} samples): largest difference {worst:e} of sqrt(len)");
        assert!(worst <= 1e-13, "{len}: {worst:e}");
    }
}

#[test]
fn block_products_on_the_gpu_are_the_cpus() {
    let Some(g) = gpu("block_products_on_the_gpu_are_the_cpus") else {
        return;
    };
    use gpuq_core::Backend;
    use gpuq_uq::EigenKernels;
    // Tiles and column groups cut: p = 70 (> 64), q = 17 (> 16), n not a
    // multiple of the staged rows.
    let n = 10_007;
    let col = |j: usize, s: f64| -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7 + j * 13) as f64 * 0.37 + s).sin())
            .collect()
    };
    let x: Vec<Vec<f64>> = (0..70).map(|j| col(j, 0.0)).collect();
    let y: Vec<Vec<f64>> = (0..17).map(|j| col(j, 1.0)).collect();
    let cpu = CpuBackend::new();
    let (xc, yc): (Vec<_>, Vec<_>) = (
        x.iter().map(|v| cpu.upload(v).unwrap()).collect(),
        y.iter().map(|v| cpu.upload(v).unwrap()).collect(),
    );
    let (xg, yg): (Vec<_>, Vec<_>) = (
        x.iter().map(|v| g.upload(v).unwrap()).collect(),
        y.iter().map(|v| g.upload(v).unwrap()).collect(),
    );
    let a = cpu.block_gram(&xc, &yc).unwrap();
    let b = EigenKernels::block_gram(g, &xg, &yg).unwrap();
    let mut worst = 0.0f64;
    for i in 0..70 {
        for j in 0..17 {
            worst = worst.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    println!("block_gram: largest difference {worst:e}");
    assert!(worst <= 1e-10);
    // Z = -0.5 Z + X C and Z = X C.
    let c = faer::Mat::from_fn(70, 17, |i, j| ((i + 3 * j) as f64 * 0.11).cos());
    for beta in [-0.5, 0.0] {
        let mut zc: Vec<_> = y.iter().map(|v| cpu.upload(v).unwrap()).collect();
        let mut zg: Vec<_> = y.iter().map(|v| g.upload(v).unwrap()).collect();
        cpu.block_combine(&xc, c.as_ref(), beta, &mut zc).unwrap();
        EigenKernels::block_combine(g, &xg, c.as_ref(), beta, &mut zg).unwrap();
        for (u, v) in zc.iter().zip(&zg) {
            let (u, v) = (cpu.download(u).unwrap(), g.download(v).unwrap());
            let d = u
                .iter()
                .zip(&v)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f64::max);
            assert!(d <= 1e-12, "beta {beta}: {d:e}");
        }
    }
}

#[test]
fn lobpcg_on_the_gpu_is_the_cpus() {
    let Some(g) = gpu("lobpcg_on_the_gpu_is_the_cpus") else {
        return;
    };
    use gpuq_uq::eigen::ModeOptions;
    use gpuq_uq::lobpcg::lobpcg_on;
    let k = gpuq_sparse::generators::laplace3d::<f64>(20);
    let n = k.nrows();
    let masses: Vec<f64> = (0..n).map(|i| 1.0 + 0.3 * (i as f64 * 0.7).sin()).collect();
    let m = gpuq_sparse::Csr::try_from(&{
        let mut c = gpuq_sparse::Coo::new(n, n);
        for (i, &v) in masses.iter().enumerate() {
            c.push(i, i, v).unwrap();
        }
        c
    })
    .unwrap();
    let opts = ModeOptions {
        count: 12,
        tol: 1e-9,
        dense_below: 0,
        ..ModeOptions::default()
    };
    let c = lobpcg_on(&CpuBackend::new(), &k, &m, &opts).unwrap();
    let d = lobpcg_on(g, &k, &m, &opts).unwrap();
    println!(
        "lobpcg: {} iterations on the CPU, {} on the GPU; lambda_1 {} / {}",
        c.iterations, d.iterations, c.values[0], d.values[0]
    );
    for (a, b) in c.values.iter().zip(&d.values) {
        assert!((a - b).abs() <= 1e-9 * a, "{a} vs {b}");
    }
    assert!(d.residuals.iter().all(|&r| r <= 1e-9));
}

#[test]
fn auto_modes_of_a_fine_beam_fall_back_to_lanczos_on_the_gpu() {
    let Some(g) = gpu("auto_modes_of_a_fine_beam_fall_back_to_lanczos_on_the_gpu") else {
        return;
    };
    use gpuq_uq::eigen::{modes, modes_on, EigenMethod, ModeOptions};
    // The unit cantilever at 1000 DOFs: LOBPCG breaks down on it (its
    // residuals stall far above 1e-8); `Auto` on the GPU then runs Lanczos.
    let beam = gpuq_uq::Beam::unit(500).unwrap();
    let model = beam.model().unwrap();
    let (k, m) = (&model.k, model.m.as_ref().unwrap());
    let opts = ModeOptions {
        count: 8,
        dense_below: 0,
        ..ModeOptions::default()
    };
    assert_eq!(opts.method, EigenMethod::Auto);
    let on_gpu = modes_on(g, k, m, &opts).unwrap();
    assert_eq!(on_gpu.solver, "lanczos");
    let lanczos = modes(
        k,
        m,
        &ModeOptions {
            method: EigenMethod::Lanczos,
            ..opts
        },
    )
    .unwrap();
    for (a, b) in on_gpu.values.iter().zip(&lanczos.values) {
        assert!((a - b).abs() <= 1e-9 * b, "{a} vs {b}");
    }
}
