//! Checks on the integration box and the initial l^n partition.

use crate::func::Func;
use crate::kernels::Boxes;
use gpuq_core::{Error, Result};

/// Checks that `lo`, `hi` describe a finite box with lo < hi on every axis, of
/// the integrand's dimension (unless it is a closure); returns n.
pub fn check_box(f: &Func<'_>, lo: &[f64], hi: &[f64]) -> Result<usize> {
    let n = lo.len();
    if hi.len() != n {
        return Err(Error::shape("integration box", n, hi.len()));
    }
    if let Some(d) = f.dim() {
        if d != n {
            return Err(Error::shape(
                "integration box",
                format!("{d} axes (the integrand's dimension)"),
                n,
            ));
        }
    }
    for i in 0..n {
        if !(lo[i].is_finite() && hi[i].is_finite() && lo[i] < hi[i]) {
            let why = if lo[i].is_infinite() || hi[i].is_infinite() {
                " (the adaptive and Gauss-Legendre rules need finite bounds: map an infinite range onto a finite one, or use gauss-hermite for expectations under a standard normal)"
            } else {
                ""
            };
            return Err(Error::InvalidArgument(format!(
                "axis {}: need finite lo < hi, got [{}, {}]{why}",
                i + 1,
                lo[i],
                hi[i]
            )));
        }
    }
    Ok(n)
}

/// INIT-PARTITION: the box split into l equal parts along every axis, l the
/// largest integer with l^n <= `max_boxes` (at least 1). Boxes in row-major
/// order of their per-axis indices (axis 0 fastest). Cost: O(l^n n).
pub fn initial_partition(lo: &[f64], hi: &[f64], max_boxes: usize) -> Boxes {
    let n = lo.len();
    let mut l = 1usize;
    while (l + 1)
        .checked_pow(n as u32)
        .is_some_and(|v| v <= max_boxes)
    {
        l += 1;
    }
    let count = l.pow(n as u32);
    let mut out = Boxes::new(n);
    let mut c = vec![0.0; n];
    let mut h = vec![0.0; n];
    for idx in 0..count {
        let mut r = idx;
        for i in 0..n {
            let d = r % l;
            r /= l;
            let w = (hi[i] - lo[i]) / l as f64;
            h[i] = 0.5 * w;
            c[i] = lo[i] + (d as f64 + 0.5) * w;
        }
        out.push(&c, &h);
    }
    out
}
