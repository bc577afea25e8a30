//! Each rank's rows of a generated stencil problem, built in place: no rank
//! holds the whole matrix.

use crate::halo::{task_slices, TASK_ROWS};
use crate::partition::RowPartition;
use gpuq_core::{Error, RealScalar, Result, Scalar};
use gpuq_sparse::generators::ProblemSpec;
use gpuq_sparse::par_row_pointers;
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::ops::Range;

/// A 7-point stencil on a grid of `dims` points (x fastest): `lower` for the
/// neighbours before a point, `upper` for those after, `diag` on the diagonal.
struct Stencil<T> {
    dims: [usize; 3],
    diag: T,
    lower: T,
    upper: T,
}

impl<T: Scalar> Stencil<T> {
    /// The stencil of `spec`, with the values `gpuq_sparse::generators` uses
    /// (so the rows are bit for bit those of the whole matrix), or `None` for
    /// a problem that is not a stencil (finite elements, bidomain).
    fn of(spec: &ProblemSpec) -> Result<Option<Self>> {
        let one = T::from_f64(-1.0);
        let grid = |dims, diag| Stencil {
            dims,
            diag,
            lower: one,
            upper: one,
        };
        Ok(Some(match *spec {
            ProblemSpec::Laplace1d { n, shift } => grid([n, 1, 1], T::from_f64(2.0 + shift)),
            ProblemSpec::Laplace2d { m } => grid([m, m, 1], T::from_f64(4.0)),
            ProblemSpec::Laplace3d { m } => grid([m, m, m], T::from_f64(6.0)),
            ProblemSpec::ConvDiff2d { m, wind } => {
                let c = wind / (m as f64 + 1.0);
                Stencil {
                    dims: [m, m, 1],
                    diag: T::from_f64(4.0 + 2.0 * c),
                    lower: T::from_f64(-1.0 - c),
                    upper: T::from_f64(-1.0),
                }
            }
            ProblemSpec::Helmholtz3d { m, kh, damping } => {
                if !T::IS_COMPLEX && damping != 0.0 {
                    return Err(Error::InvalidArgument(format!(
                        "helmholtz3d with damping {damping} needs a complex scalar type, not {}",
                        T::KIND.name()
                    )));
                }
                let k2 = kh * kh;
                let sigma = T::from_parts(
                    <T::Real as RealScalar>::of_f64(k2),
                    <T::Real as RealScalar>::of_f64(k2 * damping),
                );
                grid([m, m, m], T::from_f64(6.0) - sigma)
            }
            _ => return Ok(None),
        }))
    }

    /// The number of unknowns.
    fn size(&self) -> usize {
        self.dims.iter().product()
    }

    /// Rows `range` (global columns), in increasing column order per row.
    fn rows(&self, range: Range<usize>) -> Result<Csr<T>> {
        let [mx, my, mz] = self.dims;
        let (sx, sy) = (1usize, mx);
        let sz = mx * my;
        let entry = (std::mem::size_of::<T>() + std::mem::size_of::<u32>()) as u128;
        gpuq_core::memory::check_host_memory(
            &format!("this rank's {} rows of the stencil", range.len()),
            7 * range.len() as u128 * entry,
        )?;
        // Row lengths, their prefix sums, then the rows written by tasks of
        // rows in parallel (each task its own slices).
        let point = |i: usize| (i % mx, (i / mx) % my, i / sz);
        let first_row = range.start;
        let ptr = par_row_pointers(range.len(), |k| {
            let (x, y, z) = point(first_row + k);
            1 + usize::from(z > 0)
                + usize::from(y > 0)
                + usize::from(x > 0)
                + usize::from(x + 1 < mx)
                + usize::from(y + 1 < my)
                + usize::from(z + 1 < mz)
        });
        let nnz = ptr[range.len()];
        let (mut cols, mut vals) = (vec![0u32; nnz], vec![T::zero(); nnz]);
        let (col_tasks, val_tasks) = (task_slices(&mut cols, &ptr), task_slices(&mut vals, &ptr));
        col_tasks
            .into_par_iter()
            .zip(val_tasks)
            .enumerate()
            .for_each(|(t, (c, v))| {
                let first = t * TASK_ROWS;
                let mut at = 0;
                for k in first..(first + TASK_ROWS).min(range.len()) {
                    let i = range.start + k;
                    let (x, y, z) = point(i);
                    let mut push = |j: usize, value: T| {
                        c[at] = j as u32;
                        v[at] = value;
                        at += 1;
                    };
                    if z > 0 {
                        push(i - sz, self.lower);
                    }
                    if y > 0 {
                        push(i - sy, self.lower);
                    }
                    if x > 0 {
                        push(i - sx, self.lower);
                    }
                    push(i, self.diag);
                    if x + 1 < mx {
                        push(i + sx, self.upper);
                    }
                    if y + 1 < my {
                        push(i + sy, self.upper);
                    }
                    if z + 1 < mz {
                        push(i + sz, self.upper);
                    }
                }
            });
        Csr::try_new(range.len(), self.size(), ptr, cols, vals)
    }
}

/// The number of unknowns of a stencil problem (`None` for other problems).
pub fn stencil_size(spec: &ProblemSpec) -> Option<usize> {
    // The complex type accepts every stencil (a damped shift needs it).
    Stencil::<gpuq_core::Complex64>::of(spec)
        .ok()
        .flatten()
        .map(|s| s.size())
}

/// Rank `rank`'s rows of the stencil problem `spec` (1D/2D/3D Laplacians,
/// convection-diffusion, the shifted 3D Laplacian), built in place with the
/// values of `gpuq_sparse::generators`, and their rows of b = A x* where
/// `solution(range)` gives the entries `range` of x* (the rank's columns,
/// ghosts included: `|r| gpuq_sparse::reference::random_vector(seed, r)` for
/// the seeded random x*), summed as `Csr::mul_vec` does. `None` for a problem
/// that is not a stencil. Errors when the partition does not cover the
/// problem. O(the rank's nnz).
#[allow(clippy::type_complexity)]
pub fn generated_rows<T: Scalar>(
    spec: &ProblemSpec,
    partition: &RowPartition,
    rank: usize,
    solution: impl FnOnce(Range<usize>) -> Vec<T>,
) -> Result<Option<(Csr<T>, Vec<T>)>> {
    let Some(stencil) = Stencil::<T>::of(spec)? else {
        return Ok(None);
    };
    if partition.rows() != stencil.size() {
        return Err(Error::InvalidArgument(format!(
            "the partition covers {} rows, the problem has {}",
            partition.rows(),
            stencil.size()
        )));
    }
    let rows = stencil.rows(partition.range(rank))?;
    let cols = rows.col_idx();
    let first = cols.iter().min().map_or(0, |&j| j as usize);
    let last = cols.iter().max().map_or(0, |&j| j as usize + 1);
    let x = solution(first..last.max(first));
    let b = (0..rows.nrows())
        .map(|i| {
            let (cols, vals) = rows.row(i);
            cols.iter()
                .zip(vals)
                .map(|(&j, &a)| a * x[j as usize - first])
                .sum()
        })
        .collect();
    Ok(Some((rows, b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows_of;
    use gpuq_core::Complex64;

    fn same_as_whole<T: Scalar>(spec: &str) {
        let spec = ProblemSpec::parse(spec).unwrap();
        let whole: Csr<T> = spec.build().unwrap().matrix;
        let n = whole.nrows();
        assert_eq!(stencil_size(&spec), Some(n));
        let x: Vec<T> = gpuq_sparse::reference::random_vector(5, 0..n);
        let b = whole.mul_vec(&x).unwrap();
        let p = RowPartition::contiguous(n, 3).unwrap();
        for rank in 0..3 {
            let solution = |r| gpuq_sparse::reference::random_vector(5, r);
            let (rows, br) = generated_rows::<T>(&spec, &p, rank, solution)
                .unwrap()
                .unwrap();
            assert_eq!(rows, rows_of(&whole, &p, rank).unwrap());
            assert_eq!(br, b[p.range(rank)].to_vec());
        }
    }

    #[test]
    fn stencil_rows_are_the_generators_rows() {
        same_as_whole::<f64>("laplace1d:10:0.5");
        same_as_whole::<f64>("laplace2d:5");
        same_as_whole::<f32>("laplace3d:4");
        // more rows per rank than a task of rows
        same_as_whole::<f64>("laplace3d:24");
        same_as_whole::<f64>("convdiff2d:6:3");
        same_as_whole::<Complex64>("helmholtz3d:4:0.7:0.2");
    }

    #[test]
    fn other_problems_and_wrong_partitions_are_refused() {
        let ones = |r: Range<usize>| vec![1.0; r.len()];
        let fem = ProblemSpec::parse("helmholtz-cylinder:0").unwrap();
        let p = RowPartition::contiguous(10, 2).unwrap();
        assert!(generated_rows::<f64>(&fem, &p, 0, ones).unwrap().is_none());
        assert_eq!(stencil_size(&fem), None);
        let lap = ProblemSpec::parse("laplace2d:4").unwrap();
        assert!(generated_rows::<f64>(&lap, &p, 0, ones).is_err());
        let damped = ProblemSpec::parse("helmholtz3d:3:0.5:0.1").unwrap();
        let p27 = RowPartition::contiguous(27, 2).unwrap();
        assert!(generated_rows::<f64>(&damped, &p27, 0, ones).is_err());
    }
}
