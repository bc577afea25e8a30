//! Integrands evaluated a batch of points at a time ([`Func::Batch`](crate::Func::Batch)):
//! a function of an (m x n) array of points that returns m values, such as a NumPy
//! function called from Python, where one call per point would cost far more than the
//! arithmetic.
//!
//! The rules ask for one point at a time, so a batch integrand is applied in two passes
//! over the same work: the first records every point the work asks for (each distinct
//! point once, returning 0), one call of the batch function evaluates them all, and the
//! second pass runs the work again with the values looked up by the points' bits (the
//! rules compute the same points bit for bit both times). Adaptive work inside one call
//! (the per-box CUHRE of the second phase, sequential CUHRE) asks, in its second pass, for
//! points the first did not see: those are evaluated one at a time, correctly but slowly,
//! so the methods that evaluate whole rounds (breadth-first, the Gauss rules) suit batch
//! integrands best.

use crate::func::NonFinite;
use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::Integrand;
use std::collections::HashMap;
use std::sync::Mutex;

/// A batch integrand: `f(points, values)` fills `values[i]` with the integrand at point
/// `i`, `points` holding the m points row-major (m x n, n the dimension) and `values` m
/// entries. An error stops the integration with it.
pub type BatchFn<'a> = &'a (dyn Fn(&[f64], &mut [f64]) -> Result<()> + Sync);

/// The points a pass asked for: each distinct one once, in the order first asked.
#[derive(Default)]
pub struct Recorder {
    seen: Mutex<Points>,
}

#[derive(Default)]
struct Points {
    index: HashMap<Vec<u64>, usize>,
    flat: Vec<f64>,
}

fn key(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

impl Integrand for Recorder {
    /// Records `x`; 0. O(n) and a lock.
    fn eval(&self, x: &[f64]) -> f64 {
        if let Ok(mut p) = self.seen.lock() {
            let next = p.index.len();
            if let std::collections::hash_map::Entry::Vacant(slot) = p.index.entry(key(x)) {
                slot.insert(next);
                p.flat.extend_from_slice(x);
            }
        }
        0.0
    }
}

impl Recorder {
    /// Evaluates every recorded point with one call of `f`, for the second pass. An error
    /// of `f` (or a lock poisoned by a panic) goes to `seen` and every value is NaN.
    pub fn evaluate<'a>(self, f: BatchFn<'a>, seen: &'a NonFinite) -> Replay<'a> {
        let points = self.seen.into_inner().unwrap_or_default();
        let mut values = vec![0.0; points.index.len()];
        if !values.is_empty() {
            if let Err(e) = f(&points.flat, &mut values) {
                seen.fail(e);
                values.fill(f64::NAN);
            }
        }
        Replay {
            index: points.index,
            values,
            f,
            seen,
        }
    }
}

/// The values of the recorded points, looked up by the points' bits; a point not recorded
/// is evaluated alone.
pub struct Replay<'a> {
    index: HashMap<Vec<u64>, usize>,
    values: Vec<f64>,
    f: BatchFn<'a>,
    seen: &'a NonFinite,
}

impl Integrand for Replay<'_> {
    /// The recorded value of `x`, else one call of the batch function. O(n).
    fn eval(&self, x: &[f64]) -> f64 {
        if let Some(&i) = self.index.get(&key(x)) {
            return self.values[i];
        }
        let mut v = [0.0];
        match (self.f)(x, &mut v) {
            Ok(()) => v[0],
            Err(e) => {
                self.seen.fail(e);
                f64::NAN
            }
        }
    }
}

/// The error a batch function gives when it returns the wrong number of values.
pub fn wrong_count(expected: usize, found: usize) -> Error {
    Error::shape(
        "batch integrand",
        format!("{expected} values"),
        format!("{found}"),
    )
}
