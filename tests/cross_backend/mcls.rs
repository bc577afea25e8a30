//! Monte Carlo walks: the same seed gives the same walks on both backends.
//!
//! Every history draws its numbers from ChaCha8 stream (seed, history id) on both
//! backends and runs the same walk code, so the moves made must be equal exactly
//! and each entry's sum may differ only by the order of its additions. That
//! order moves a sum by at most `2 gamma_k sum |terms|` (k = the run's tallies);
//! here every weight factor is below 1 in magnitude, so we take
//! `sum |terms| <= 1000 max |x|` as the scale. A single differing history would
//! move an entry by a whole score over about 20 n histories, orders of magnitude
//! above that tolerance.

use crate::{gpu, two_gamma};
use gpuq::cpu::CpuBackend;
use gpuq::mcls::{Estimator, Layout, Mapping, McMethod, McOptions, MonteCarlo};
use gpuq::sparse::Coo;
use gpuq::sparse::Csr;

/// A nonsymmetric diagonally dominant system with rho(H) = 0.85 (upwind 1D).
fn system(n: usize) -> Csr<f64> {
    let mut coo = Coo::new(n, n);
    for i in 0..n {
        coo.push(i, i, 2.0 / 0.85).unwrap();
        if i > 0 {
            coo.push(i, i - 1, -1.3).unwrap();
        }
        if i + 1 < n {
            coo.push(i, i + 1, -0.7).unwrap();
        }
        if i + 7 < n {
            coo.push(i, i + 7, 0.05).unwrap();
        }
    }
    Csr::from_coo(&coo).unwrap()
}

#[test]
fn walks_match_the_cpu() {
    let Some(g) = gpu("walks_match_the_cpu") else {
        return;
    };
    let cpu = CpuBackend::new();
    for n in [1usize, 37, 1000] {
        let a = system(n);
        let b: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 13) as f64 - 6.0 + 0.5)
            .collect();
        for layout in [Layout::Soa, Layout::Aos] {
            let on_cpu = MonteCarlo::new(&cpu, &a, layout).unwrap();
            let on_gpu = MonteCarlo::new(g, &a, layout).unwrap();
            for method in [McMethod::Forward, McMethod::Adjoint] {
                for estimator in [Estimator::Collision, Estimator::Expected] {
                    for mapping in [Mapping::ThreadPerEntry, Mapping::ThreadPerHistory] {
                        if method == McMethod::Adjoint && mapping == Mapping::ThreadPerHistory {
                            continue;
                        }
                        for (max_steps, cutoff) in [(10_000, 1e-9), (25, 0.0)] {
                            let o = McOptions {
                                method,
                                estimator,
                                layout,
                                mapping,
                                histories: 20 * n as u64 + 3,
                                max_steps,
                                cutoff,
                                seed: 42,
                                batches: 3,
                                tolerance: None,
                            };
                            let c = on_cpu.solve(&b, &o).unwrap();
                            let d = on_gpu.solve(&b, &o).unwrap();
                            let what = format!("n {n} {o:?}");
                            assert_eq!(c.steps, d.steps, "{what}: moves differ");
                            assert_eq!(c.histories, d.histories, "{what}");
                            let k = (c.steps + c.histories) as usize;
                            let scale = c.x.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                            let tol = two_gamma(k, f64::EPSILON, false) * scale * 1e3;
                            for i in 0..n {
                                assert!(
                                    (c.x[i] - d.x[i]).abs() <= tol,
                                    "{what}: entry {i}: cpu {} gpu {} (tol {tol:e})",
                                    c.x[i],
                                    d.x[i]
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "walks_match_the_cpu: forward and adjoint, both estimators, layouts and mappings agree"
    );
}

#[test]
fn walk_data_with_a_column_out_of_range_is_refused() {
    let Some(g) = gpu("walk_data_with_a_column_out_of_range_is_refused") else {
        return;
    };
    // Two states; entry 1 moves to state 2, which does not exist: the kernels
    // would index with it unchecked, so the upload must refuse it.
    let ptr = [0u32, 1, 2];
    let (cdf, w, h) = ([1.0; 2], [0.5; 2], [0.5; 2]);
    let col = [1u32, 2];
    assert!(matches!(
        g.upload_walks_soa(&ptr, &cdf, &w, &h, &col),
        Err(gpuq::core::Error::InvalidArgument(_))
    ));
    let records: Vec<gpuq_kernels::walk::Record> = col
        .iter()
        .map(|&c| gpuq_kernels::walk::Record {
            h: 0.5,
            cdf: 1.0,
            w: 0.5,
            col: c,
            pad: 0,
        })
        .collect();
    assert!(matches!(
        g.upload_walks_aos(&ptr, &records),
        Err(gpuq::core::Error::InvalidArgument(_))
    ));
    // Row starts that do not end at the number of entries are refused as well.
    assert!(g
        .upload_walks_soa(&[0, 1, 3], &cdf, &w, &h, &[1, 0])
        .is_err());
    // The valid data is accepted.
    assert!(g.upload_walks_soa(&ptr, &cdf, &w, &h, &[1, 0]).is_ok());
}
