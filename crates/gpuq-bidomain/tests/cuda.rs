//! The time stepper on the CUDA backend against the CPU backend. Skips (and
//! passes) without a CUDA driver or device.

use gpuq_bidomain::{amg, amg_options, block_jacobi, BidomainConfig, Simulation, Tissue};
use gpuq_core::Backend;
use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_sparse::Layout;
use std::sync::OnceLock;

/// The device under test, shared by the tests (one context, the PTX loaded
/// once), or `None` (and one line on stdout) when there is none.
fn gpu(test: &str) -> Option<&'static CudaBackend> {
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

/// Runs `steps` steps on both backends and compares v_m, phi_e and the
/// activation times. The two PCG runs sum in different orders, so each step's
/// solutions differ by about the solver tolerance times the size of the
/// right-hand side; the tolerances below are a few hundred times that.
fn compare(tissue: Tissue, steps: usize, use_amg: bool, layout: Layout) {
    let Some(gpu) = gpu("bidomain cpu vs cuda") else {
        return;
    };
    let cpu = CpuBackend::new();
    let mut config = BidomainConfig::new(tissue);
    config.dt = 0.1;
    config.solver.rtol = 1e-10;
    config.layout = layout;
    let mut a = Simulation::new(&cpu, config.clone(), &mut |b, m| {
        if use_amg {
            amg(b, m, &amg_options(), layout)
        } else {
            block_jacobi(b, m)
        }
    })
    .unwrap();
    let mut b = Simulation::new(gpu, config, &mut |b, m| {
        if use_amg {
            amg(b, m, &amg_options(), layout)
        } else {
            block_jacobi(b, m)
        }
    })
    .unwrap();
    let ra = a.run(steps, &mut |_| {}).unwrap();
    let rb = b.run(steps, &mut |_| {}).unwrap();
    assert_eq!(rb.setup.backend, gpu.name());
    let (sa, sb) = (a.state().unwrap(), b.state().unwrap());
    for (x, y) in sa.vm.iter().zip(&sb.vm) {
        assert!((x - y).abs() < 1e-4, "v_m: cpu {x} cuda {y}");
    }
    for (x, y) in sa.phi_e.iter().zip(&sb.phi_e) {
        assert!((x - y).abs() < 1e-4, "phi_e: cpu {x} cuda {y}");
    }
    for (x, y) in sa.activation.iter().zip(&sb.activation) {
        assert!(
            x.is_nan() && y.is_nan() || (x - y).abs() < 1e-4,
            "activation: cpu {x} cuda {y}"
        );
    }
    let (ia, ib) = (ra.total_iterations as f64, rb.total_iterations as f64);
    assert!((ia - ib).abs() <= 0.05 * ia + steps as f64, "{ia} vs {ib}");
}

#[test]
fn sheet_on_cuda_matches_cpu() {
    compare(Tissue::square(16).unwrap(), 60, false, Layout::Csr);
}

#[test]
fn slab_on_cuda_matches_cpu() {
    compare(Tissue::slab(12).unwrap(), 30, false, Layout::Csr);
}

#[test]
fn amg_preconditioned_steps_on_cuda_match_cpu() {
    compare(Tissue::square(24).unwrap(), 40, true, Layout::Csr);
}

#[test]
fn amg_on_bsr2_slab_on_cuda_matches_cpu() {
    compare(Tissue::slab(12).unwrap(), 20, true, Layout::Bsr { b: 2 });
}

/// The two per-node kernels against the CPU passes on states across the whole
/// action potential: the same arithmetic, so equal up to fused multiply-adds.
#[test]
fn per_node_kernels_match_the_cpu() {
    use gpuq_bidomain::{AlievPanfilov, BidomainKernels};
    use gpuq_kernels::ionic::BidomainStep;
    let Some(gpu) = gpu("per-node kernels") else {
        return;
    };
    let cpu = CpuBackend::new();
    let n = 1000;
    let x: Vec<f64> = (0..2 * n)
        .map(|i| {
            if i % 2 == 0 {
                0.1 * i as f64
            } else {
                -85.0 + 0.11 * i as f64
            }
        })
        .collect();
    let w: Vec<f64> = (0..n).map(|k| (k % 17) as f64 * 0.1).collect();
    let mass: Vec<f64> = (0..n).map(|k| 0.01 + (k % 3) as f64 * 0.005).collect();
    let stim: Vec<f64> = (0..n).map(|k| f64::from(u8::from(k < 50))).collect();
    let p = BidomainStep {
        model: AlievPanfilov::STANDARD.into(),
        cm: 0.01,
        chi: 140.0,
        dt: 0.05,
        kappa: 28.0,
        current: 200.0,
    };
    let close = |a: &[f64], b: &[f64], what: &str| {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * (1.0 + x.abs());
            assert!(ok, "{what}[{i}]: cpu {x} cuda {y}");
        }
    };
    let on_cpu = || {
        let xv = cpu.upload(&x).unwrap();
        let (mut wv, mut rv) = (cpu.upload(&w).unwrap(), cpu.zeros(2 * n).unwrap());
        let (mv, sv) = (cpu.upload(&mass).unwrap(), cpu.upload(&stim).unwrap());
        cpu.bidomain_ionic(&p, &xv, &mut wv, &mv, &sv, &mut rv)
            .unwrap();
        (cpu.download(&wv).unwrap(), cpu.download(&rv).unwrap())
    };
    let on_gpu = || {
        let xv = gpu.upload(&x).unwrap();
        let (mut wv, mut rv) = (gpu.upload(&w).unwrap(), gpu.zeros(2 * n).unwrap());
        let (mv, sv) = (gpu.upload(&mass).unwrap(), gpu.upload(&stim).unwrap());
        gpu.bidomain_ionic(&p, &xv, &mut wv, &mv, &sv, &mut rv)
            .unwrap();
        (gpu.download(&wv).unwrap(), gpu.download(&rv).unwrap())
    };
    let ((wc, rc), (wg, rg)) = (on_cpu(), on_gpu());
    close(&wc, &wg, "w");
    close(&rc, &rg, "rhs");
    // Activation: half the nodes cross -40 mV in this step.
    let v_old: Vec<f64> = (0..n).map(|k| -60.0 + 0.02 * k as f64).collect();
    let act: Vec<f64> = (0..n)
        .map(|k| if k % 10 == 0 { 0.5 } else { f64::NAN })
        .collect();
    let mut results = Vec::new();
    for backend_is_gpu in [false, true] {
        let (v, a) = if backend_is_gpu {
            let xv = gpu.upload(&x).unwrap();
            let (mut vv, mut av) = (gpu.upload(&v_old).unwrap(), gpu.upload(&act).unwrap());
            gpu.bidomain_activation(2.0, 0.05, -40.0, &xv, &mut vv, &mut av)
                .unwrap();
            (gpu.download(&vv).unwrap(), gpu.download(&av).unwrap())
        } else {
            let xv = cpu.upload(&x).unwrap();
            let (mut vv, mut av) = (cpu.upload(&v_old).unwrap(), cpu.upload(&act).unwrap());
            cpu.bidomain_activation(2.0, 0.05, -40.0, &xv, &mut vv, &mut av)
                .unwrap();
            (cpu.download(&vv).unwrap(), cpu.download(&av).unwrap())
        };
        results.push((v, a));
    }
    close(&results[0].0, &results[1].0, "v_old");
    close(&results[0].1, &results[1].1, "activation");
    assert!(results[0].1.iter().any(|t| !t.is_nan() && *t > 2.0));
    // Mismatched lengths are errors, not launches.
    let xv = gpu.upload(&x[..10]).unwrap();
    let (mut vv, mut av) = (gpu.upload(&v_old).unwrap(), gpu.upload(&act).unwrap());
    assert!(gpu
        .bidomain_activation(2.0, 0.05, -40.0, &xv, &mut vv, &mut av)
        .is_err());
}

/// The calibrated conductivities conduct at the target speeds through the
/// CUDA backend's time stepping: thin strips on the device (the cases of
/// `calibration.rs`'s CPU strip test: Mitchell-Schaeffer at 0.1 and 0.2 mm on
/// strips of 20 ms times the target, Aliev-Panfilov at 0.2 mm on 60 ms), within
/// 5% of the targets and 1% of the same strip on the CPU backend.
#[test]
fn calibrated_strips_on_cuda_conduct_at_the_target_speeds() {
    use gpuq_bidomain::calibrate::{strip_cv, Direction, StripOutcome};
    use gpuq_bidomain::{
        calibrate, AlievPanfilov, CalibrationOptions, CvTarget, Membrane, MitchellSchaeffer,
    };
    let Some(gpu) = gpu("calibrated strips") else {
        return;
    };
    let cpu = CpuBackend::new();
    let ms: Membrane = MitchellSchaeffer::STANDARD.into();
    let ap: Membrane = AlievPanfilov::STANDARD.into();
    for (model, h, strip_ms) in [(ms, 0.1, 20.0), (ms, 0.2, 20.0), (ap, 0.2, 60.0)] {
        let mut tissue = Tissue::square(8).unwrap();
        tissue.h = h;
        let mut c = BidomainConfig::new(tissue);
        c.dt = 0.1;
        c.ionic = model;
        let run = calibrate(&c, CvTarget::default(), &CalibrationOptions::default())
            .unwrap()
            .apply(c);
        for (direction, goal) in [(Direction::Along, 0.6), (Direction::Across, 0.2)] {
            let length = strip_ms * goal;
            let what = format!("{} {h} mm {direction:?}", model.name());
            let on = |b: StripOutcome| match b {
                StripOutcome::Measured(cv) => cv,
                other => panic!("{what}: {other:?}"),
            };
            let g = on(strip_cv(gpu, &run, direction, length, 200.0).unwrap());
            let k = on(strip_cv(&cpu, &run, direction, length, 200.0).unwrap());
            println!("{what}: cuda {g:.4}, cpu {k:.4} m/s");
            assert!((g / goal - 1.0).abs() <= 0.05, "{what}: cuda {g}");
            assert!((g / k - 1.0).abs() <= 0.01, "{what}: cuda {g} cpu {k}");
        }
    }
}

/// Both membrane models' per-node kernels on the device against the CPU
/// passes (the kernel takes the model's id and parameters).
#[test]
fn mitchell_schaeffer_kernel_matches_the_cpu() {
    use gpuq_bidomain::{BidomainKernels, MitchellSchaeffer};
    use gpuq_kernels::ionic::BidomainStep;
    let Some(gpu) = gpu("mitchell-schaeffer kernel") else {
        return;
    };
    let cpu = CpuBackend::new();
    let n = 1000;
    let x: Vec<f64> = (0..2 * n)
        .map(|i| {
            if i % 2 == 0 {
                0.0
            } else {
                -85.0 + 0.055 * i as f64
            }
        })
        .collect();
    let w: Vec<f64> = (0..n).map(|k| (k % 11) as f64 * 0.1).collect();
    let mass = vec![0.01; n];
    let stim: Vec<f64> = (0..n).map(|k| f64::from(u8::from(k < 50))).collect();
    let p = BidomainStep {
        model: MitchellSchaeffer::STANDARD.into(),
        cm: 0.01,
        chi: 140.0,
        dt: 0.05,
        kappa: 28.0,
        current: 200.0,
    };
    let mut out = Vec::new();
    for on_gpu in [false, true] {
        let (wv, rv) = if on_gpu {
            let xv = gpu.upload(&x).unwrap();
            let (mut wv, mut rv) = (gpu.upload(&w).unwrap(), gpu.zeros(2 * n).unwrap());
            let (mv, sv) = (gpu.upload(&mass).unwrap(), gpu.upload(&stim).unwrap());
            gpu.bidomain_ionic(&p, &xv, &mut wv, &mv, &sv, &mut rv)
                .unwrap();
            (gpu.download(&wv).unwrap(), gpu.download(&rv).unwrap())
        } else {
            let xv = cpu.upload(&x).unwrap();
            let (mut wv, mut rv) = (cpu.upload(&w).unwrap(), cpu.zeros(2 * n).unwrap());
            let (mv, sv) = (cpu.upload(&mass).unwrap(), cpu.upload(&stim).unwrap());
            cpu.bidomain_ionic(&p, &xv, &mut wv, &mv, &sv, &mut rv)
                .unwrap();
            (cpu.download(&wv).unwrap(), cpu.download(&rv).unwrap())
        };
        out.push((wv, rv));
    }
    for (a, b) in out[0]
        .0
        .iter()
        .zip(&out[1].0)
        .chain(out[0].1.iter().zip(&out[1].1))
    {
        assert!((a - b).abs() <= 1e-12 * (1.0 + a.abs()), "cpu {a} cuda {b}");
    }
    // The gate moved both ways: closing above v_gate, opening below.
    assert!(out[0].0.iter().zip(&w).any(|(new, old)| new < old));
    assert!(out[0].0.iter().zip(&w).any(|(new, old)| new > old));
}

/// A Mitchell-Schaeffer sheet on the device against the CPU backend.
#[test]
fn mitchell_schaeffer_sheet_on_cuda_matches_cpu() {
    use gpuq_bidomain::MitchellSchaeffer;
    let Some(gpu) = gpu("mitchell-schaeffer sheet") else {
        return;
    };
    let cpu = CpuBackend::new();
    let mut config = BidomainConfig::new(Tissue::square(16).unwrap());
    config.dt = 0.1;
    config.solver.rtol = 1e-10;
    config.ionic = MitchellSchaeffer::STANDARD.into();
    let mut a = Simulation::new(&cpu, config.clone(), &mut |b, m| block_jacobi(b, m)).unwrap();
    let mut b = Simulation::new(gpu, config, &mut |b, m| block_jacobi(b, m)).unwrap();
    a.run(60, &mut |_| {}).unwrap();
    b.run(60, &mut |_| {}).unwrap();
    let (sa, sb) = (a.state().unwrap(), b.state().unwrap());
    for (x, y) in sa.vm.iter().zip(&sb.vm) {
        assert!((x - y).abs() < 1e-4, "v_m: cpu {x} cuda {y}");
    }
    for (x, y) in sa.activation.iter().zip(&sb.activation) {
        assert!(
            x.is_nan() && y.is_nan() || (x - y).abs() < 1e-4,
            "activation: cpu {x} cuda {y}"
        );
    }
    assert!(sa.activation.iter().filter(|t| !t.is_nan()).count() > 20);
}
