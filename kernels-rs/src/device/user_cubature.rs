//! The cubature kernels of user integrands: the rule kernels of
//! `device/cubature.rs` with the integrand an external function,
//! `gpuq_integrand(const double *x, unsigned n)`, that this module declares and
//! does not define. `cargo xtask ptx` builds this module alone (feature
//! `user-integrand`) into `gpuq_user_cubature.ptx`; at run time the CUDA backend
//! links it with the PTX that defines `gpuq_integrand` (NVRTC's, from an
//! expression or the user's CUDA C, or a Rust user's own) into one module.
//!
//! Each evaluation checks its value: the first NaN or infinite value a launch
//! meets is recorded in `diag` (diag[0] counts the non-finite values as `u64`,
//! diag[1] is the first one's value, diag[2..2 + n] its point), so the host can
//! stop the run naming the point.
//!
//! The module also exports the elementary functions of integrand expressions
//! (`gpuq_sin`, ... from [`crate::cubature::functions`]), which the CUDA C
//! generated from an expression calls: an expression then computes the same
//! bits as on the CPU.

use super::cubature::{evaluate, local, tensor};
use super::prelude::atomic_add_u64;
use crate::cubature::functions as fx;
use crate::cubature::integrand::{Integrand, MAX_DIM};
use crate::cubature::lanes::RulePoint;
use crate::cubature::rule::{LocalOutcome, Rule};

extern "C" {
    /// The user's integrand at x (n coordinates), linked in at run time.
    fn gpuq_integrand(x: *const f64, n: u32) -> f64;
}

/// The linked integrand, recording the first non-finite value in `diag`.
struct Linked {
    diag: *mut f64,
}

impl Integrand for Linked {
    #[inline(always)]
    fn eval(&self, x: &[f64]) -> f64 {
        // SAFETY: x holds x.len() values; the linked function reads that many.
        let v = unsafe { gpuq_integrand(x.as_ptr(), x.len() as u32) };
        if !v.is_finite() {
            // SAFETY (caller of the kernels): diag holds 2 + MAX_DIM values.
            unsafe { record(self.diag, x, v) };
        }
        v
    }
}

/// Counts a non-finite value; the first thread to count writes it and its point.
#[inline(never)]
unsafe fn record(diag: *mut f64, x: &[f64], v: f64) {
    if atomic_add_u64(diag.cast::<u64>(), 1) == 0 {
        *diag.add(1) = v;
        for (i, &xi) in x.iter().take(MAX_DIM).enumerate() {
            *diag.add(2 + i) = xi;
        }
    }
}

/// `cub_evaluate` with the linked integrand (diag: 2 + MAX_DIM values).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn cubu_evaluate(
    rule: *const Rule,
    diag: *mut f64,
    table: *const RulePoint,
    points: usize,
    boxes: usize,
    center: *const f64,
    half: *const f64,
    out: *mut f64,
) {
    let f = Linked { diag };
    evaluate(&*rule, &f, table, points, boxes, center, half, out);
}

/// `cub_local` with the linked integrand.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn cubu_local(
    rule: *const Rule,
    diag: *mut f64,
    boxes: usize,
    center: *const f64,
    half: *const f64,
    roots: *const f64,
    tols: *const f64,
    max_evals: u64,
    out: *mut LocalOutcome,
) {
    let f = Linked { diag };
    local(&*rule, &f, boxes, center, half, roots, tols, max_evals, out);
}

/// `cub_tensor` with the linked integrand of `dim` axes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn cubu_tensor(
    dim: usize,
    diag: *mut f64,
    nodes: *const f64,
    weights: *const f64,
    na: usize,
    total: u64,
    partials: *mut f64,
) {
    let f = Linked { diag };
    tensor(&f, dim, nodes, weights, na, total, partials);
}

/// Exports `gpuq_NAME(args) = functions::NAME(args)` for the linked code.
macro_rules! export {
    ($($sym:ident = $f:ident($($a:ident),+);)+) => {
        $(
            #[doc = concat!("`functions::", stringify!($f), "` for linked device code.")]
            #[no_mangle]
            pub extern "C" fn $sym($($a: f64),+) -> f64 {
                fx::$f($($a),+)
            }
        )+
    };
}

export! {
    gpuq_sin = sin(x);
    gpuq_cos = cos(x);
    gpuq_tan = tan(x);
    gpuq_asin = asin(x);
    gpuq_acos = acos(x);
    gpuq_atan = atan(x);
    gpuq_atan2 = atan2(y, x);
    gpuq_sinh = sinh(x);
    gpuq_cosh = cosh(x);
    gpuq_tanh = tanh(x);
    gpuq_exp = exp(x);
    gpuq_log = log(x);
    gpuq_log10 = log10(x);
    gpuq_sqrt = sqrt(x);
    gpuq_abs = abs(x);
    gpuq_floor = floor(x);
    gpuq_erf = erf(x);
    gpuq_min = min(a, b);
    gpuq_max = max(a, b);
    gpuq_pow = pow(a, b);
}
