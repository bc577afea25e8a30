//! Device code: the prelude and the PTX entry points (compiled for nvptx64 only).

mod amg;
mod amg_setup;
mod bicgstabl;
mod bidomain;
mod blas1;
mod cubature;
mod gram_schmidt;
mod krylov;
mod mcls;
pub mod prelude;
mod qmr;
mod spmv;
mod tfqmr;
mod uq;
mod uq_convolution;

/// A kernel never panics by design (every index is checked against the sizes it is
/// given); should a core routine panic anyway, the thread traps and the launch
/// fails with a device error the host reports.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { core::arch::nvptx::trap() }
}
