//! An integrand written in Rust for gpuq's CUDA backend: the way a Rust user
//! brings their own function to the GPU without writing C.
//!
//! 1. Write a `no_std` crate that depends on `gpuq-kernels` and implement
//!    [`Integrand`] for your type, using `gpuq_kernels::cubature::functions`
//!    (or `gpuq_kernels::cubature::math`) for elementary functions: `core`
//!    has none on the device, and these compute the same bits on the host.
//! 2. Export it for the device with `gpuq_kernels::export_integrand!(YourType)`
//!    under `#[cfg(target_arch = "nvptx64")]`: it defines `gpuq_integrand`,
//!    the function gpuq's rule kernels call.
//! 3. Build PTX with the nightly toolchain, as `cargo xtask ptx` does for this
//!    crate (it is one of the modules listed in `xtask/src/main.rs`):
//!    ```sh
//!    rustup component add rust-src --toolchain nightly
//!    RUSTFLAGS=-Zcross-crate-inline-threshold=always cargo +nightly rustc --release \
//!        --manifest-path examples/rust-integrand/Cargo.toml \
//!        --target nvptx64-nvidia-cuda -Zbuild-std=core -- --emit=asm -C target-cpu=sm_80
//!    # the PTX is target/nvptx64-nvidia-cuda/release/deps/rust_integrand-*.s
//!    ```
//!    (`-Zcross-crate-inline-threshold=always` compiles what the crate uses of
//!    `gpuq-kernels` into its own PTX: `--emit=asm` links nothing.)
//! 4. Integrate: `UserCode::ptx(&ptx_text, n)?.with_host(&|x| Bump.eval(x))`
//!    as a `Func::Code` on the CUDA backend (the host function serves the CPU
//!    backend), or from the CLI `gpuq integrate --ptx rust_integrand.ptx --dim N`.
//!
//! The committed `rust_integrand.ptx` is this crate's build, checked fresh by
//! `cargo xtask ptx --check`; gpuq's CUDA tests integrate it on the GPU
//! against its closed form and against the CPU backend.

#![no_std]

use gpuq_kernels::cubature::functions::exp;
use gpuq_kernels::cubature::integrand::Integrand;

/// An anisotropic Gaussian bump centred in the unit cube:
/// f(x) = exp(-sum_k k (x_k - 1/2)^2), k = 1..n. Its integral over [0, 1]^n is
/// prod_k sqrt(pi / k) erf(sqrt(k) / 2). Cost: 3 n flops and one `exp`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bump;

impl Integrand for Bump {
    #[inline]
    fn eval(&self, x: &[f64]) -> f64 {
        let mut s = 0.0;
        let mut k = 0.0;
        for &xi in x {
            k += 1.0;
            let d = xi - 0.5;
            s += k * d * d;
        }
        exp(-s)
    }
}

#[cfg(target_arch = "nvptx64")]
gpuq_kernels::export_integrand!(Bump);
