//! A stop request ([`gpuq_core::interrupt`], Ctrl-C in the CLI) ends a Monte Carlo estimate
//! after its first batch: the estimate of that batch, the histories it ran and the status
//! `Interrupted`. (A test binary of its own: the request is process-wide.)

use gpuq_cpu::CpuBackend;
use gpuq_mcls::{McMethod, McOptions, McStatus};
use gpuq_sparse::generators::laplace1d;

#[test]
fn a_stop_request_ends_the_estimate_after_its_first_batch() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    // Diagonally dominant (shift 2): rho(I - D^-1 A) = 1/2, short walks.
    let a = laplace1d::<f64>(50, 2.0);
    let b = vec![1.0; 50];
    for method in [McMethod::Forward, McMethod::Adjoint] {
        let opts = McOptions {
            method,
            histories: 50_000,
            batches: 10,
            ..McOptions::default()
        };
        gpuq_core::interrupt::request();
        let r = gpuq_mcls::solve(&cpu, &a, &b, &opts).unwrap();
        gpuq_core::interrupt::clear();
        assert_eq!(r.status, McStatus::Interrupted, "{method:?}");
        assert_eq!(r.status.name(), "interrupted");
        assert!(!r.status.is_success());
        assert_eq!(r.batches, 1, "{method:?}");
        assert_eq!(
            r.histories, 5_000,
            "{method:?}: a tenth of the histories ran"
        );
        assert!(
            r.relative_residual < 1.0,
            "{method:?}: {}",
            r.relative_residual
        );
        let full = gpuq_mcls::solve(&cpu, &a, &b, &opts).unwrap();
        assert_eq!(full.batches, 10, "{method:?}: cleared");
        assert_eq!(full.histories, 50_000, "{method:?}");
    }
}
