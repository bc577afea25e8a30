//! The memory-traffic floor of one cycle: the bytes its steps must move if
//! every matrix is read once per product and every vector operand is read or
//! written once per step, with nothing cached between steps. Dividing by a
//! measured copy rate gives the time a bandwidth-bound cycle cannot beat, the
//! yardstick of `gpuq amg-info --bench-cycles`.

use crate::coloring::symmetric_order;
use crate::hierarchy::Hierarchy;
use crate::options::{CycleKind, Smoother};

/// Bytes of one product with a matrix of `nnz` stored entries: each entry's
/// value and 32-bit column index (row pointers and the gathered vector are
/// counted by the caller).
fn matrix_bytes(nnz: usize, scalar: f64) -> f64 {
    nnz as f64 * (scalar + 4.0)
}

/// The floor of one cycle of `h` (its options' smoother, sweeps and cycle
/// kind) with scalars of `scalar_bytes` bytes. Per level of n rows with A, R,
/// P and the next level's n_c rows:
///
/// * a Jacobi-type sweep: A once, x, b and the diagonal read, x written
///   (the first, from zero, reads only b and the diagonal);
/// * Gauss-Seidel per application: the colours' updates in symmetric order,
///   each reading the colour's scaled rows and, per row, the selection's
///   index and value, b and x, and writing x (the first from zero instead
///   zeroes x and reads no matrix);
/// * Chebyshev of degree d per application, as the fused passes of
///   [`crate::AmgKernels`] run it: the start (A, x, b and the diagonal
///   read, r and d written; from zero no A and no x), then d - 1 steps,
///   each A once, d_old, the diagonal, r and x read, r, d_new and x written
///   (the first step from zero writes x without reading it);
/// * the residual (A, x and b read, r written), the restriction (R, r read,
///   the coarse right-hand side written) and the prolongation (P, the coarse
///   iterate read, x read and written);
/// * on the coarsest level, one product with its stored inverse.
///
/// A W-cycle visits level l 2^l times. O(levels).
pub fn cycle_floor_bytes(h: &Hierarchy, scalar_bytes: usize) -> f64 {
    let s = scalar_bytes as f64;
    let o = h.options();
    let levels = h.levels();
    let mut total = 0.0;
    let mut visits = 1.0;
    for (k, l) in levels.iter().enumerate() {
        let n = l.a.nrows() as f64;
        let a = matrix_bytes(l.a.nnz(), s);
        if k + 1 == levels.len() {
            total += visits * (matrix_bytes(h.coarse_solve().nnz(), s) + 2.0 * n * s);
            break;
        }
        let nc = levels[k + 1].a.nrows() as f64;
        let (r, p) = (
            l.r.as_ref().map_or(0.0, |m| matrix_bytes(m.nnz(), s)),
            l.p.as_ref().map_or(0.0, |m| matrix_bytes(m.nnz(), s)),
        );
        let nu = o.sweeps_of(k) as f64;
        let smoothing = match o.smoother_of(k) {
            Smoother::Chebyshev { degree } => {
                // a start from zero moves 4 vector passes, one from x A and
                // 5; then degree - 1 steps of A and 7 passes
                let steps = (degree as f64 - 1.0) * (a + 7.0 * n * s);
                let (from_zero, from_x) = (3.0 * n * s + steps, a + 5.0 * n * s + steps);
                from_zero + (2.0 * nu - 1.0) * from_x
            }
            Smoother::GaussSeidel => {
                let colors = l.smoother.as_ref().map_or(&[][..], |d| &d.colors[..]);
                let update = |c: usize| {
                    let sc = &colors[c].scaled;
                    matrix_bytes(sc.nnz(), s) + sc.nrows() as f64 * (4.0 + 4.0 * s)
                };
                let step: f64 = symmetric_order(colors.len()).map(update).sum();
                2.0 * nu * step
                    - colors.first().map_or(0.0, |c| {
                        // from zero: no matrix and no read of x, but x zeroed
                        matrix_bytes(c.scaled.nnz(), s) + c.scaled.nrows() as f64 * s - n * s
                    })
            }
            _ => (3.0 * n * s + (nu - 1.0) * (a + 4.0 * n * s)) + nu * (a + 4.0 * n * s),
        };
        let transfer = (a + 3.0 * n * s) + (r + n * s + nc * s) + (p + nc * s + 2.0 * n * s);
        total += visits * (smoothing + transfer);
        if o.cycle == CycleKind::W && k + 2 < levels.len() {
            visits *= 2.0;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::AmgOptions;
    use gpuq_sparse::generators::laplace3d;

    #[test]
    fn floor_counts_the_finest_level_and_grows_with_sweeps() {
        let a = laplace3d::<f64>(12);
        let h1 = Hierarchy::build(&a, &AmgOptions::default()).unwrap();
        let f1 = cycle_floor_bytes(&h1, 8);
        // at least two products with A (residual and post-sweep) on level 0
        assert!(f1 > 2.0 * a.nnz() as f64 * 12.0, "{f1}");
        let h2 = Hierarchy::build(
            &a,
            &AmgOptions {
                sweeps: 2,
                ..AmgOptions::default()
            },
        )
        .unwrap();
        let f2 = cycle_floor_bytes(&h2, 8);
        assert!(f2 > f1 + 2.0 * a.nnz() as f64 * 12.0, "{f2} vs {f1}");
        assert!(cycle_floor_bytes(&h1, 4) < f1);
    }
}
