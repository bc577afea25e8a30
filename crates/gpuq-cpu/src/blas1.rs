//! BLAS-1 on the CPU: the [`Backend`] implementation of [`CpuBackend`].

use crate::reduce::{block_reduce, lane_sum, BLOCK};
use crate::{CpuBackend, CpuVector};
use gpuq_core::DeviceVector;
use gpuq_core::{check_same_len, Backend, Result, Scalar, Stats};
use rayon::prelude::*;

/// Applies `f(x_chunk, y_chunk)` over matching fixed-size chunks in parallel.
fn zip_chunks<T: Scalar>(x: &[T], y: &mut [T], f: impl Fn(&[T], &mut [T]) + Sync) {
    y.par_chunks_mut(BLOCK)
        .zip(x.par_chunks(BLOCK))
        .for_each(|(yc, xc)| f(xc, yc));
}

/// The Euclidean norm, with a scaled second pass when the plain sum of squares
/// overflows or underflows.
fn norm2<T: Scalar>(x: &[T]) -> T::Real {
    let n = x.len();
    let ss = block_reduce(n, |r| {
        let xs = &x[r];
        lane_sum(xs.len(), |k| xs[k].abs_sqr())
    });
    crate::reduce::norm_from_squares(x, ss)
}

impl Backend for CpuBackend {
    type Vector<T: Scalar> = CpuVector<T>;

    fn name(&self) -> String {
        "cpu".into()
    }

    fn upload<T: Scalar>(&self, host: &[T]) -> Result<CpuVector<T>> {
        self.stats.upload(std::mem::size_of_val(host));
        Ok(CpuVector(host.to_vec()))
    }

    fn download<T: Scalar>(&self, v: &CpuVector<T>) -> Result<Vec<T>> {
        self.stats.download(std::mem::size_of_val(v.as_slice()));
        Ok(v.0.clone())
    }

    fn zeros<T: Scalar>(&self, n: usize) -> Result<CpuVector<T>> {
        Ok(CpuVector(vec![T::zero(); n]))
    }

    fn fill<T: Scalar>(&self, x: &mut CpuVector<T>, value: T) -> Result<()> {
        self.run("fill", || {
            x.0.par_chunks_mut(BLOCK).for_each(|c| c.fill(value))
        });
        Ok(())
    }

    fn copy<T: Scalar>(&self, x: &CpuVector<T>, y: &mut CpuVector<T>) -> Result<()> {
        check_same_len("copy", x.len(), y.len())?;
        self.run("copy", || {
            zip_chunks(&x.0, &mut y.0, |a, b| b.copy_from_slice(a))
        });
        Ok(())
    }

    fn scal<T: Scalar>(&self, alpha: T, x: &mut CpuVector<T>) -> Result<()> {
        self.run("scal", || {
            x.0.par_chunks_mut(BLOCK)
                .for_each(|c| c.iter_mut().for_each(|v| *v *= alpha))
        });
        Ok(())
    }

    fn axpy<T: Scalar>(&self, alpha: T, x: &CpuVector<T>, y: &mut CpuVector<T>) -> Result<()> {
        check_same_len("axpy", x.len(), y.len())?;
        self.run("axpy", || {
            zip_chunks(&x.0, &mut y.0, |a, b| {
                b.iter_mut().zip(a).for_each(|(yi, &xi)| *yi += alpha * xi)
            })
        });
        Ok(())
    }

    fn axpby<T: Scalar>(
        &self,
        alpha: T,
        x: &CpuVector<T>,
        beta: T,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("axpby", x.len(), y.len())?;
        self.run("axpby", || {
            zip_chunks(&x.0, &mut y.0, |a, b| {
                b.iter_mut()
                    .zip(a)
                    .for_each(|(yi, &xi)| *yi = alpha * xi + beta * *yi)
            })
        });
        Ok(())
    }

    fn mul_elementwise<T: Scalar>(
        &self,
        x: &CpuVector<T>,
        y: &CpuVector<T>,
        z: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("mul_elementwise", x.len(), y.len())?;
        check_same_len("mul_elementwise", x.len(), z.len())?;
        self.run("mul_elementwise", || {
            z.0.par_chunks_mut(BLOCK)
                .zip(x.0.par_chunks(BLOCK).zip(y.0.par_chunks(BLOCK)))
                .for_each(|(zc, (xc, yc))| {
                    for ((zi, &xi), &yi) in zc.iter_mut().zip(xc).zip(yc) {
                        *zi = xi * yi;
                    }
                })
        });
        Ok(())
    }

    fn dotc<T: Scalar>(&self, x: &CpuVector<T>, y: &CpuVector<T>) -> Result<T> {
        check_same_len("dotc", x.len(), y.len())?;
        Ok(self.run("dotc", || {
            block_reduce(x.len(), |r| {
                let (xs, ys) = (&x.0[r.clone()], &y.0[r]);
                lane_sum(xs.len(), |k| xs[k].conj() * ys[k])
            })
        }))
    }

    fn dotu<T: Scalar>(&self, x: &CpuVector<T>, y: &CpuVector<T>) -> Result<T> {
        check_same_len("dotu", x.len(), y.len())?;
        Ok(self.run("dotu", || {
            block_reduce(x.len(), |r| {
                let (xs, ys) = (&x.0[r.clone()], &y.0[r]);
                lane_sum(xs.len(), |k| xs[k] * ys[k])
            })
        }))
    }

    fn nrm2<T: Scalar>(&self, x: &CpuVector<T>) -> Result<T::Real> {
        Ok(self.run("nrm2", || norm2(&x.0)))
    }

    fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    fn reset_stats(&self) {
        self.stats.reset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_core::Complex64;

    #[test]
    fn blas1_by_hand() {
        let b = CpuBackend::new();
        let x = b.upload(&[1.0, 2.0, 3.0]).unwrap();
        let mut y = b.upload(&[1.0, 1.0, 1.0]).unwrap();
        b.axpy(2.0, &x, &mut y).unwrap();
        assert_eq!(y.as_slice(), &[3.0, 5.0, 7.0]);
        b.axpby(1.0, &x, -1.0, &mut y).unwrap();
        assert_eq!(y.as_slice(), &[-2.0, -3.0, -4.0]);
        assert_eq!(b.dotc(&x, &y).unwrap(), -20.0);
        assert_eq!(b.nrm2(&b.upload(&[3.0, 4.0]).unwrap()).unwrap(), 5.0);
        let short = b.upload(&[1.0]).unwrap();
        assert!(b.axpy(1.0, &short, &mut y).is_err());
    }

    #[test]
    fn complex_dots() {
        let b = CpuBackend::new();
        let i = Complex64::new(0.0, 1.0);
        let x = b.upload(&[i]).unwrap();
        assert_eq!(b.dotc(&x, &x).unwrap(), Complex64::new(1.0, 0.0));
        assert_eq!(b.dotu(&x, &x).unwrap(), Complex64::new(-1.0, 0.0));
    }

    #[test]
    fn nrm2_survives_overflow_and_underflow() {
        let b = CpuBackend::new();
        let big = b.upload(&[3e200f64, 4e200]).unwrap();
        assert!((b.nrm2(&big).unwrap() / 5e200 - 1.0).abs() < 1e-15);
        let small = b.upload(&[3e-200f64, 4e-200]).unwrap();
        assert!((b.nrm2(&small).unwrap() / 5e-200 - 1.0).abs() < 1e-15);
        assert_eq!(b.nrm2(&b.zeros::<f64>(5).unwrap()).unwrap(), 0.0);
        assert!(b
            .nrm2(&b.upload(&[f64::NAN, 1.0]).unwrap())
            .unwrap()
            .is_nan());
    }
}
