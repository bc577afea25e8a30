//! Integrands evaluated per point, identically on both backends.
//!
//! [`Integrand`] is the interface the rules call; [`Builtin`] holds the
//! integrands compiled into the PTX, chosen by a kind id (`F1` ... `SUM_OF_SQUARES`),
//! with up to [`MAX_DIM`] difficulty parameters `a` and shifts `u`.
//!
//! Adding a device integrand: give it the next kind id (a constant here, below
//! [`KINDS`], which grows by one), add its arm to [`Builtin::eval`] (its
//! parameters in `a` and `u`), add its name to `gpuq_cubature::func::NAMES`, and
//! run `cargo xtask ptx`; the kernels of `device/cubature.rs` then evaluate it by
//! its id on the device, and the CPU runs the same arm. On the CPU any Rust
//! closure is an integrand already (`gpuq_cubature::Func::Closure`).

use super::math::{abs, asin, cos, exp, sin};

/// Most dimensions a rule, a box or a built-in integrand supports.
pub const MAX_DIM: usize = 16;

/// A function on R^n the rules integrate.
pub trait Integrand {
    /// f(x), `x.len()` the dimension.
    fn eval(&self, x: &[f64]) -> f64;
}

/// Defines `gpuq_integrand(x: *const f64, n: u32) -> f64`, the function the
/// CUDA backend links with its rule kernels, as `$f`'s [`Integrand::eval`]:
/// the way a Rust user brings an integrand to the GPU. In a `no_std` crate
/// that depends on `gpuq-kernels`, built for `nvptx64-nvidia-cuda` to PTX as
/// `examples/rust-integrand` shows, write `gpuq_kernels::export_integrand!(MyF);`
/// (under `#[cfg(target_arch = "nvptx64")]`), then give the PTX to
/// `gpuq_cubature::UserCode::ptx`; the same type serves the host as a closure.
#[macro_export]
macro_rules! export_integrand {
    ($f:expr) => {
        /// The integrand the CUDA backend links with its rule kernels.
        ///
        /// # Safety
        /// `x` points to `n` readable values (the rule kernels' call).
        #[no_mangle]
        pub unsafe extern "C" fn gpuq_integrand(x: *const f64, n: u32) -> f64 {
            // SAFETY: the caller's contract above.
            let x = unsafe { core::slice::from_raw_parts(x, n as usize) };
            $crate::cubature::integrand::Integrand::eval(&$f, x)
        }
    };
}

/// f1 = 1 / (0.1 + cos^2(sum x_i^2)).
pub const F1: u32 = 0;
/// f2 = cos(prod_i cos(4^i x_i)), i = 1..n. (For n > 10 on [0, 1]^n the inner
/// arguments pass 2^20 pi / 2, where the shared `cos` loses digits: about 1e-9
/// absolute at n = 12.)
pub const F2: u32 = 1;
/// f3 = sin(prod_i i asin(x_i^i)), i = 1..n.
pub const F3: u32 = 2;
/// f4 = sin(prod_i asin(x_i)).
pub const F4: u32 = 3;
/// f5 = sum_i cos(10 x_i) / (2 beta), beta = sin(10) / 10.
pub const F5: u32 = 4;
/// Genz oscillatory: cos(2 pi u_1 + sum a_i x_i).
pub const GENZ_OSCILLATORY: u32 = 5;
/// Genz product peak: prod 1 / (a_i^-2 + (x_i - u_i)^2).
pub const GENZ_PRODUCT_PEAK: u32 = 6;
/// Genz corner peak: (1 + sum a_i x_i)^-(n+1).
pub const GENZ_CORNER_PEAK: u32 = 7;
/// Genz Gaussian: exp(-sum a_i^2 (x_i - u_i)^2).
pub const GENZ_GAUSSIAN: u32 = 8;
/// Genz C0: exp(-sum a_i |x_i - u_i|).
pub const GENZ_C0: u32 = 9;
/// Genz discontinuous: 0 if x_1 > u_1 or x_2 > u_2, else exp(sum a_i x_i).
pub const GENZ_DISCONTINUOUS: u32 = 10;
/// q^T q.
pub const SUM_OF_SQUARES: u32 = 11;
/// Number of built-in kinds (ids are 0..KINDS).
pub const KINDS: u32 = 12;

/// beta of f5 as the issue gives it (sin(10) / 10).
pub const F5_BETA: f64 = -0.054402111088937;

/// A built-in integrand: its kind, dimension and parameters. `#[repr(C)]`, no
/// padding, so the host uploads it as bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Builtin {
    /// One of the kind constants of this module.
    pub kind: u32,
    /// Dimension n (1..=MAX_DIM).
    pub dim: u32,
    /// Difficulty parameters a_1..a_n (Genz families).
    pub a: [f64; MAX_DIM],
    /// Shift parameters u_1..u_n (Genz families).
    pub u: [f64; MAX_DIM],
}

/// x clamped to [-1, 1]: points of boxes refined down to a few ulps next to the
/// cube's face can round past it, where asin has no value.
#[inline(always)]
fn unit(x: f64) -> f64 {
    if x > 1.0 {
        1.0
    } else if x < -1.0 {
        -1.0
    } else {
        x
    }
}

impl Integrand for Builtin {
    #[inline]
    fn eval(&self, x: &[f64]) -> f64 {
        // At most MAX_DIM coordinates (bounds the parameter reads, so the
        // indexing below cannot fail).
        let x = &x[..x.len().min(MAX_DIM)];
        let n = x.len();
        if n == 0 {
            return f64::NAN;
        }
        match self.kind {
            F1 => {
                let mut s = 0.0;
                for &xi in x {
                    s += xi * xi;
                }
                let c = cos(s);
                1.0 / (0.1 + c * c)
            }
            F2 => {
                let mut p = 1.0;
                let mut scale = 1.0;
                for &xi in x {
                    scale *= 4.0;
                    p *= cos(scale * xi);
                }
                cos(p)
            }
            F3 => {
                let mut p = 1.0;
                for (i, &xi) in x.iter().enumerate() {
                    let mut pw = xi;
                    for _ in 0..i {
                        pw *= xi;
                    }
                    p *= (i + 1) as f64 * asin(unit(pw));
                }
                sin(p)
            }
            F4 => {
                let mut p = 1.0;
                for &xi in x {
                    p *= asin(unit(xi));
                }
                sin(p)
            }
            F5 => {
                let mut s = 0.0;
                for &xi in x {
                    s += cos(10.0 * xi);
                }
                s / (2.0 * F5_BETA)
            }
            GENZ_OSCILLATORY => {
                let mut s = core::f64::consts::TAU * self.u[0];
                for (ai, xi) in self.a.iter().zip(x) {
                    s += ai * xi;
                }
                cos(s)
            }
            GENZ_PRODUCT_PEAK => {
                let mut p = 1.0;
                for ((ai, ui), xi) in self.a.iter().zip(&self.u).zip(x) {
                    let d = xi - ui;
                    p *= 1.0 / (1.0 / (ai * ai) + d * d);
                }
                p
            }
            GENZ_CORNER_PEAK => {
                let mut s = 1.0;
                for (ai, xi) in self.a.iter().zip(x) {
                    s += ai * xi;
                }
                let mut p = 1.0;
                for _ in 0..=n {
                    p *= s;
                }
                1.0 / p
            }
            GENZ_GAUSSIAN => {
                let mut s = 0.0;
                for ((ai, ui), xi) in self.a.iter().zip(&self.u).zip(x) {
                    let d = xi - ui;
                    s += ai * ai * d * d;
                }
                exp(-s)
            }
            GENZ_C0 => {
                let mut s = 0.0;
                for ((ai, ui), xi) in self.a.iter().zip(&self.u).zip(x) {
                    s += ai * abs(xi - ui);
                }
                exp(-s)
            }
            GENZ_DISCONTINUOUS => {
                if x[0] > self.u[0] || (n > 1 && x[1] > self.u[1 % MAX_DIM]) {
                    return 0.0;
                }
                let mut s = 0.0;
                for (ai, xi) in self.a.iter().zip(x) {
                    s += ai * xi;
                }
                exp(s)
            }
            SUM_OF_SQUARES => {
                let mut s = 0.0;
                for &xi in x {
                    s += xi * xi;
                }
                s
            }
            _ => f64::NAN,
        }
    }
}
