//! Cross-backend tests: every CUDA operation against the CPU oracle.
//!
//! All tests live in this one binary (so `cargo xtask gpu-pack` ships one file).
//! Without a CUDA driver or device each test prints one line saying it was skipped
//! and passes; `no_device_is_a_clear_error` checks the error path instead.
//!
//! Tolerances come from the rounding error of the operation (Higham, "Accuracy and
//! Stability of Numerical Algorithms", ch. 3): a sum of `k` products computed in any
//! order has error at most `gamma_k * sum |terms|` with `gamma_k = k eps / (1 - k eps)`,
//! so two different summation orders differ by at most `2 gamma_k sum |terms|`.
//! Complex products add a factor 2 (each product has four real products and two
//! sums). Elementwise kernels may contract `a x + y` into one fused multiply-add on
//! the GPU, so they differ by at most `2 eps (|a x| + |y|)` per element.

#[path = "../common/mod.rs"]
mod common;

mod blas1;
mod mcls;
mod solvers;
mod spmv;

use gpuq::cuda::CudaBackend;
use std::sync::OnceLock;

/// The device under test, or `None` (and one line on stdout) when there is none.
pub fn gpu(test: &str) -> Option<&'static CudaBackend> {
    static GPU: OnceLock<Option<CudaBackend>> = OnceLock::new();
    // Only a missing driver or device skips; any other failure (the driver
    // rejecting the PTX, say) is a failure of every GPU test.
    let g = GPU
        .get_or_init(|| match CudaBackend::new(0) {
            Ok(g) => Some(g),
            Err(gpuq::core::Error::NoCudaDevice(_)) => None,
            Err(e) => panic!("the CUDA backend failed to start: {e}"),
        })
        .as_ref();
    if g.is_none() {
        println!("{test}: skipped (no CUDA device)");
    }
    g
}

/// `2 gamma_k` for `k` terms in precision `eps`, doubled for complex types.
pub fn two_gamma(k: usize, eps: f64, complex: bool) -> f64 {
    let ke = (k as f64 + 2.0) * eps;
    2.0 * ke / (1.0 - ke) * if complex { 2.0 } else { 1.0 }
}

/// A backend of its own for a test that reads the transfer counters, which the
/// shared one accumulates from every test running in parallel.
pub fn private_gpu(test: &str) -> Option<CudaBackend> {
    gpu(test)?;
    Some(CudaBackend::new(0).expect("a second handle on the device opens"))
}

/// The device's memory is known, and work larger than it is refused with the
/// bytes it needs and the bytes the device has, before and at allocation.
#[test]
fn too_large_for_the_device_is_a_clear_error() {
    use gpuq::core::{Backend, Error};
    let Some(g) = private_gpu("device memory") else {
        return;
    };
    let (free, total) = g
        .device_memory()
        .unwrap()
        .expect("a GPU reports its memory");
    assert!(free <= total && total == g.info().total_memory as u64);
    match g.check_fits("a test problem", total + 1) {
        Err(e @ Error::DeviceMemory { .. }) => {
            let m = e.to_string();
            assert!(m.contains("a test problem") && m.contains("GiB"), "{m}");
        }
        other => panic!("expected DeviceMemory, got {other:?}"),
    }
    match g.zeros::<f64>(total as usize / 8 + 1) {
        Err(Error::DeviceMemory { needed, .. }) => assert!(needed > total),
        Err(e) => panic!("expected DeviceMemory, got {e}"),
        Ok(_) => panic!("allocated more than the device's memory"),
    }
    // The device still works after the refusal.
    let v = g.upload(&[1.0f64, 2.0]).unwrap();
    assert_eq!(g.download(&v).unwrap(), vec![1.0, 2.0]);
}

#[test]
fn no_device_is_a_clear_error() {
    // Ordinal 999 exists on no machine; without a driver the error comes earlier.
    match CudaBackend::new(999) {
        Err(gpuq::core::Error::NoCudaDevice(msg)) => assert!(!msg.is_empty()),
        other => panic!("expected NoCudaDevice, got {other:?}"),
    }
    if let Some(g) = gpu("no_device_is_a_clear_error (device info)") {
        let info = g.info();
        assert!(
            info.multiprocessors > 0 && info.total_memory > 0,
            "{info:?}"
        );
        println!("device: {info:?}");
    }
}
