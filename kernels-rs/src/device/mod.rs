//! Device code: the prelude and the PTX entry points (compiled for nvptx64 only).
//! With the feature `user-integrand` only the cubature kernels of user
//! integrands are built (`user_cubature`, the second PTX module).

/// Declares the modules of the main PTX module, left out of the user
/// integrands' build.
macro_rules! main_module {
    ($($m:ident),+ $(,)?) => {
        $(
            #[cfg(not(feature = "user-integrand"))]
            mod $m;
        )+
    };
}

main_module!(
    amg,
    amg_setup,
    bicgstabl,
    bidomain,
    blas1,
    block,
    gram_schmidt,
    halo,
    krylov,
    mcls,
    qmr,
    spmv,
    tfqmr,
    uq,
    uq_convolution,
);
mod cubature;
pub mod prelude;
#[cfg(feature = "user-integrand")]
mod user_cubature;

/// A kernel never panics by design (every index is checked against the sizes it is
/// given); should a core routine panic anyway, the thread traps and the launch
/// fails with a device error the host reports.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { core::arch::nvptx::trap() }
}
