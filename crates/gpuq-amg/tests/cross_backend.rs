//! The cycle on the CUDA backend against the CPU: the same hierarchy (built
//! once on the host), the cycle applied to a vector agreeing to rounding, and
//! PCG + AMG iteration counts within 2. Each test skips (passing, one line on
//! stdout) without a CUDA driver or device.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use gpuq_amg::{
    Amg, AmgKernels, AmgOptions, Coarsening, CycleKind, CycleOptions, Hierarchy, MixedAmg, Smoother,
};
use gpuq_cpu::CpuBackend;
use gpuq_cuda::CudaBackend;
use gpuq_sparse::generators::laplace3d;
use gpuq_sparse::{Csr, Layout};

/// Near-null-space vectors, or `None` for the setup's default.
type NearNullSpace = Option<Vec<Vec<f64>>>;

/// The problems with their block size and near-null space: a 3D Laplacian
/// (block 1), a coupled 2x2-block system, and 3D elasticity (block 3) with
/// its six rigid-body modes (coarse levels of six unknowns per node).
fn problems() -> Vec<(Csr<f64>, usize, NearNullSpace)> {
    let e = gpuq_sparse::elasticity3d::Elasticity3d::new(6).unwrap();
    let modes = gpuq_amg::rigid_body_modes(&e.free_coordinates()).unwrap();
    vec![
        (laplace3d::<f64>(14), 1, None),
        (coupled2d(24, 0.05), 2, None),
        (e.stiffness(), 3, Some(modes)),
    ]
}

fn layouts(block: usize) -> Vec<Layout> {
    let mut l = vec![Layout::Csr, Layout::Sell { c: 32, sigma: 256 }];
    if block >= 2 {
        // each level in its own node blocks (3 x 3, then 6 x 6 below with
        // six rigid body modes)
        l.push(Layout::Bsr { b: block });
    }
    l
}

#[test]
fn cycle_agrees_with_cpu() {
    let Some(g) = gpu("cycle_agrees_with_cpu") else {
        return;
    };
    let cpu = CpuBackend::new();
    for (a, block, near_null_space) in problems() {
        for smoother in [
            Smoother::Jacobi,
            Smoother::L1Jacobi,
            Smoother::Chebyshev { degree: 3 },
            Smoother::GaussSeidel,
        ] {
            for coarsening in [Coarsening::SmoothedAggregation, Coarsening::Seed] {
                let o = AmgOptions {
                    block,
                    smoother: Some(smoother),
                    coarsening,
                    sweeps: 2,
                    near_null_space: near_null_space.clone(),
                    ..AmgOptions::default()
                };
                let h = Hierarchy::build(&a, &o).unwrap();
                let x = vector(a.nrows(), 0.61);
                for layout in layouts(block) {
                    let c = CycleOptions { layout };
                    let on_cpu = Amg::<CpuBackend, f64>::new(&cpu, &h, &c).unwrap();
                    let on_gpu = Amg::<CudaBackend, f64>::new(g, &h, &c).unwrap();
                    let (y1, y2) = (apply(&cpu, &on_cpu, &x), apply(g, &on_gpu, &x));
                    let scale = y1.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    for (i, (p, q)) in y1.iter().zip(&y2).enumerate() {
                        assert!(
                            (p - q).abs() <= 1e-10 * scale,
                            "{o:?} {layout:?}: y[{i}] cpu {p} gpu {q}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn pcg_amg_iterations_agree_with_cpu() {
    let Some(g) = gpu("pcg_amg_iterations_agree_with_cpu") else {
        return;
    };
    let cpu = CpuBackend::new();
    for (a, block, near_null_space) in problems() {
        for coarsening in [Coarsening::SmoothedAggregation, Coarsening::Seed] {
            let o = AmgOptions {
                block,
                coarsening,
                near_null_space: near_null_space.clone(),
                cycle: if block == 2 {
                    CycleKind::W
                } else {
                    CycleKind::V
                },
                ..AmgOptions::default()
            };
            let h = Hierarchy::build(&a, &o).unwrap();
            let x_true = vector(a.nrows(), 0.917);
            let b = a.mul_vec(&x_true).unwrap();
            for layout in layouts(block) {
                let c = CycleOptions { layout };
                let m1 = Amg::<CpuBackend, f64>::new(&cpu, &h, &c).unwrap();
                let m2 = Amg::<CudaBackend, f64>::new(g, &h, &c).unwrap();
                let (_, r1) = pcg(&cpu, &a, &b, &m1);
                let (x2, r2) = pcg(g, &a, &b, &m2);
                assert!(r2.converged, "{o:?} {layout:?}");
                assert!(true_residual(&a, &x2, &b) <= 1e-8);
                assert!(
                    r1.iterations.abs_diff(r2.iterations) <= 2,
                    "{o:?} {layout:?}: cpu {} gpu {}",
                    r1.iterations,
                    r2.iterations
                );
            }
        }
    }
}

#[test]
fn singular_neumann_on_gpu() {
    let Some(g) = gpu("singular_neumann_on_gpu") else {
        return;
    };
    let a = neumann2d(40);
    let h = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
    let m = Amg::<CudaBackend, f64>::new(g, &h, &CycleOptions::default()).unwrap();
    let mut b: Vec<f64> = vector(a.nrows(), 0.41).iter().map(|v| v + 0.5).collect();
    h.project(&mut b);
    let (mut x, rep) = pcg(g, &a, &b, &m);
    assert!(rep.converged && rep.iterations < 40, "{}", rep.iterations);
    h.project(&mut x);
    assert!(true_residual(&a, &x, &b) <= 1e-8);
}

#[test]
fn f32_cycle_agrees_with_cpu() {
    let Some(g) = gpu("f32_cycle_agrees_with_cpu") else {
        return;
    };
    let cpu = CpuBackend::new();
    let a = laplace3d::<f64>(12);
    let h = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
    let c = CycleOptions::default();
    let m1 = Amg::<CpuBackend, f32>::new(&cpu, &h, &c).unwrap();
    let m2 = Amg::<CudaBackend, f32>::new(g, &h, &c).unwrap();
    let x: Vec<f32> = vector(a.nrows(), 0.3).iter().map(|&v| v as f32).collect();
    let y1 = apply32(&cpu, &m1, &x);
    let y2 = apply32(g, &m2, &x);
    let scale = y1.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    for (p, q) in y1.iter().zip(&y2) {
        assert!((p - q).abs() <= 1e-3 * scale, "{p} vs {q}");
    }
}

/// y = M x in f32 through the backend.
fn apply32<B: gpuq_core::Backend>(
    backend: &B,
    m: &dyn gpuq_core::LinearOperator<B, f32>,
    x: &[f32],
) -> Vec<f32> {
    let xv = backend.upload(x).unwrap();
    let mut y = backend.zeros::<f32>(x.len()).unwrap();
    m.apply(&xv, &mut y).unwrap();
    backend.download(&y).unwrap()
}

/// The fused CUDA step against the same formulas on the host: the residual
/// b - A x and the Jacobi iterate x + omega d (b - A x), on CSR and SELL (with
/// a sorting window, so the permuted store is exercised); BSR2 declines.
#[test]
fn fused_sweep_matches_host() {
    let Some(g) = gpu("fused_sweep_matches_host") else {
        return;
    };
    use gpuq_core::Backend;
    use gpuq_sparse::SparseBackend;
    let a = laplace3d::<f64>(11);
    let n = a.nrows();
    let x: Vec<f64> = (0..n)
        .map(|i| ((i * 37 % 101) as f64) / 50.0 - 1.0)
        .collect();
    let b: Vec<f64> = (0..n).map(|i| ((i * 13 % 29) as f64) / 7.0).collect();
    let d: Vec<f64> = (0..n)
        .map(|i| {
            let (c, v) = a.row(i);
            let aii = c
                .iter()
                .zip(v)
                .find(|(&j, _)| j as usize == i)
                .map(|(_, &v)| v);
            1.0 / aii.unwrap_or(1.0)
        })
        .collect();
    let omega = 0.6;
    let mut ax = vec![0.0; n];
    for (i, axi) in ax.iter_mut().enumerate() {
        let (c, v) = a.row(i);
        *axi = c.iter().zip(v).map(|(&j, &aij)| aij * x[j as usize]).sum();
    }
    let (xd, bd, dd) = (
        g.upload(&x).unwrap(),
        g.upload(&b).unwrap(),
        g.upload(&d).unwrap(),
    );
    for layout in [Layout::Csr, Layout::Sell { c: 32, sigma: 64 }] {
        let ad = g.upload_matrix(&a, layout).unwrap();
        let mut out = g.zeros::<f64>(n).unwrap();
        assert!(g.amg_sweep(&ad, 0.0, &bd, &xd, None, &mut out).unwrap());
        let r = g.download(&out).unwrap();
        assert!(g
            .amg_sweep(&ad, omega, &bd, &xd, Some(&dd), &mut out)
            .unwrap());
        let j = g.download(&out).unwrap();
        for i in 0..n {
            let ri = b[i] - ax[i];
            assert!(
                (r[i] - ri).abs() <= 1e-12 * (1.0 + ri.abs()),
                "{layout:?} r[{i}]"
            );
            let ji = x[i] + omega * d[i] * ri;
            assert!(
                (j[i] - ji).abs() <= 1e-12 * (1.0 + ji.abs()),
                "{layout:?} x[{i}]"
            );
        }
    }
    let c = coupled2d(6, 0.05);
    let (cx, cb) = (
        g.upload(&vec![1.0; c.nrows()]).unwrap(),
        g.zeros(c.nrows()).unwrap(),
    );
    let cd = g.upload_matrix(&c, Layout::Bsr { b: 2 }).unwrap();
    let mut out = g.zeros::<f64>(c.nrows()).unwrap();
    assert!(!g.amg_sweep(&cd, 0.0, &cb, &cx, None, &mut out).unwrap());
    let bad = g.zeros::<f64>(n + 1).unwrap();
    let ad = g.upload_matrix(&a, Layout::Csr).unwrap();
    assert!(g.amg_sweep(&ad, 0.0, &bad, &xd, None, &mut out).is_err());
}

#[test]
fn mixed_precision_cycle_and_conversions_agree_with_cpu() {
    let Some(g) = gpu("mixed_precision_cycle_and_conversions_agree_with_cpu") else {
        return;
    };
    let cpu = CpuBackend::new();
    for (a, block, near_null_space) in problems() {
        let o = AmgOptions {
            block,
            smoother: Some(Smoother::GaussSeidel),
            near_null_space,
            ..AmgOptions::default()
        };
        let h = Hierarchy::build(&a, &o).unwrap();
        let x = vector(a.nrows(), 0.29);
        for layout in layouts(block) {
            let c = CycleOptions { layout };
            let on_cpu = MixedAmg::<CpuBackend, f64, f32>::new(&cpu, &h, &c).unwrap();
            let on_gpu = MixedAmg::<CudaBackend, f64, f32>::new(g, &h, &c).unwrap();
            let (y1, y2) = (apply(&cpu, &on_cpu, &x), apply(g, &on_gpu, &x));
            let scale = y1.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (i, (p, q)) in y1.iter().zip(&y2).enumerate() {
                assert!(
                    (p - q).abs() <= 1e-5 * scale,
                    "{layout:?}: y[{i}] cpu {p} gpu {q}"
                );
            }
        }
    }
    // The conversions themselves: rounding to f32 and back, real and complex,
    // bit for bit as on the CPU; a pair that is no change of precision errors.
    use gpuq_core::{Backend, Complex32, Complex64};
    let v: Vec<f64> = vector(1000, 0.37).iter().map(|x| x * 1e3).collect();
    let d = g.upload(&v).unwrap();
    let mut s = g.zeros::<f32>(v.len()).unwrap();
    g.amg_convert(&d, &mut s).unwrap();
    let back: Vec<f32> = g.download(&s).unwrap();
    assert!(back
        .iter()
        .zip(&v)
        .all(|(p, q)| p.to_bits() == (*q as f32).to_bits()));
    let mut w = g.zeros::<f64>(v.len()).unwrap();
    g.amg_convert(&s, &mut w).unwrap();
    assert_eq!(
        g.download(&w).unwrap(),
        back.iter().map(|&p| p as f64).collect::<Vec<_>>()
    );
    let c: Vec<Complex64> = v.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect();
    let cd = g.upload(&c).unwrap();
    let mut cs = g.zeros::<Complex32>(c.len()).unwrap();
    g.amg_convert(&cd, &mut cs).unwrap();
    let got = g.download(&cs).unwrap();
    assert!(got
        .iter()
        .zip(&c)
        .all(|(p, q)| p.re == q.re as f32 && p.im == q.im as f32));
    let mut same = g.zeros::<f64>(v.len()).unwrap();
    assert!(g.amg_convert(&d, &mut same).is_err());
}
