//! `gpuq info`.

use gpuq_cuda::CudaBackend;
use std::process::ExitCode;

/// Prints the version, the backends and what they run on.
pub fn run() -> gpuq_core::Result<ExitCode> {
    println!("gpuq {}", env!("CARGO_PKG_VERSION"));
    println!("backends:");
    println!(
        "  cpu   available (Rayon, {} threads)",
        rayon::current_num_threads()
    );
    match CudaBackend::new(0) {
        Ok(g) => {
            let i = g.info();
            println!(
                "  cuda  available: device {} {}, compute capability {}.{}, {:.1} GiB, {} SMs",
                i.ordinal,
                i.name,
                i.compute_capability.0,
                i.compute_capability.1,
                i.total_memory as f64 / (1u64 << 30) as f64,
                i.multiprocessors
            );
        }
        Err(e) => println!("  cuda  not available ({e})"),
    }
    Ok(ExitCode::SUCCESS)
}
