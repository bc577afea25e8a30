//! BiCGSTAB(l)'s steps with the method's scalars kept on the backend.
//!
//! The scalars live in a backend vector `sc` of [`len`]`(l)` slots (names in
//! [`gpuq_kernels::slots::bicgstabl`]). Every vector step is `y = sc[a] x +
//! sc[b] y` with slot indices as arguments (negated copies of the
//! coefficients are kept for that; several pairs may go in one step), dot
//! products land in slots followed by the guarded quotients that use them
//! ([`Ratio`]), and the minimal-residual solve is one small step over the slot
//! array, so a cycle takes no value from the host and can be recorded and
//! replayed ([`crate::Replay`]); the method reads `sc` once per cycle. A vanished quantity leaves a breakdown code
//! in `sc[FLAG]`, after which the vector steps do nothing: the vectors stay as
//! they were at the breakdown. The CPU implements every step
//! directly, CUDA in one kernel each (`CudaBackend::axpby_slots` and the
//! others); any other backend gets default methods built from its BLAS-1
//! operations, which do the slot arithmetic on the host (a download, and an
//! upload when slots change, of the [`len`]`(l)` scalars per step). Costs are
//! per call for vectors of n elements.

use crate::bicgstab_kernels::guarded_quotient;
use crate::kernels::{start_slots, update_slots};
use crate::Replay;
use gpuq_core::{check_indices, check_same_len, Backend, DeviceVector, Result, Scalar};
use gpuq_cpu::reduce::BLOCK;
use gpuq_cpu::{CpuBackend, CpuVector};
pub use gpuq_kernels::slots::bicgstabl::*;
use rayon::prelude::*;

/// The steps of [`crate::bicgstab_l()`] a backend implements, with the scalars
/// in `sc` (a vector of [`len`]`(l)` elements on the backend).
///
/// Every method has a default built from [`Backend`] operations (so `impl
/// BicgstablKernels for MyBackend {}` runs [`crate::bicgstab_l()`]), with the
/// slot arithmetic of the CPU's steps done on the host copy of `sc`.
pub trait BicgstablKernels: Replay {
    /// The start of a solve: every slot zero but [`ONE`] = 1, [`RHO0`] = 1,
    /// [`OMEGA`] = 1 and [`NEG_OMEGA`] = -1 (no transfer). Default: one upload.
    fn bicgstabl_start<T: Scalar>(&self, sc: &mut Self::Vector<T>, l: usize) -> Result<()> {
        start_slots(self, "bicgstabl_start", sc, len(l), start_values)
    }

    /// `sc[k] = x^H y`, then the guarded quotients `then` in order (at most
    /// [`MAX_RATIOS`]; each v = sc\[a\] sc\[b\] / sc\[c\], zero when sc\[c\] vanished,
    /// into sc\[out\] with -v into sc\[neg_out\]; a vanished sc\[check\] records
    /// `code` in sc[FLAG] unless a breakdown is recorded already). 2 n reads,
    /// no download. Default: `dotc`, then the quotients on the host between a
    /// download and an upload of `sc`.
    fn dotc_into_slot<T: Scalar>(
        &self,
        x: &Self::Vector<T>,
        y: &Self::Vector<T>,
        sc: &mut Self::Vector<T>,
        k: usize,
        then: &[Ratio],
    ) -> Result<()> {
        check_indices("dotc_into_slot", sc.len(), &[k, FLAG])?;
        check_ratios(then, sc.len())?;
        let v = self.dotc(x, y)?;
        update_slots(self, sc, |s| {
            s[k] = v;
            for r in then {
                apply_ratio(s, r);
            }
        })
    }

    /// `y = sc[ka] x + sc[kb] y` (3 n element moves), or nothing once
    /// `sc[FLAG]` records a breakdown (the vectors stay as they were then).
    /// Default: `sc` downloaded, then `axpby`.
    fn axpby_slots<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        ka: usize,
        x: &Self::Vector<T>,
        kb: usize,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_same_len("axpby_slots", x.len(), y.len())?;
        check_indices("axpby_slots", sc.len(), &[ka, kb, FLAG])?;
        let s = self.download(sc)?;
        if !s[FLAG].is_zero_value() {
            return Ok(());
        }
        self.axpby(s[ka], x, s[kb], y)
    }

    /// `ys[p] = sc[ka] xs[p] + sc[kb] ys[p]` for every pair (as
    /// [`BicgstablKernels::axpby_slots`] each; a backend may run them in one
    /// pass). 3 n element moves a pair. Default: `sc` downloaded once, then
    /// one `axpby` a pair.
    fn axpby_slots_many<T: Scalar>(
        &self,
        sc: &Self::Vector<T>,
        ka: usize,
        xs: &[Self::Vector<T>],
        kb: usize,
        ys: &mut [Self::Vector<T>],
    ) -> Result<()> {
        check_same_len("axpby_slots_many (pairs)", xs.len(), ys.len())?;
        check_indices("axpby_slots_many", sc.len(), &[ka, kb, FLAG])?;
        for (x, y) in xs.iter().zip(ys.iter()) {
            check_same_len("axpby_slots_many", x.len(), y.len())?;
        }
        let s = self.download(sc)?;
        if !s[FLAG].is_zero_value() {
            return Ok(());
        }
        for (x, y) in xs.iter().zip(ys.iter_mut()) {
            self.axpby(s[ka], x, s[kb], y)?;
        }
        Ok(())
    }

    /// The minimal-residual solve of a cycle: gamma, -gamma and gamma'' from
    /// the tau and gamma' slots, omega = gamma_l (flagged when it vanished).
    /// O(l^2). Default: on the host between a download and an upload of `sc`.
    fn bicgstabl_mr<T: Scalar>(&self, sc: &mut Self::Vector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_mr", len(l), sc.len())?;
        update_slots(self, sc, |s| minimal_residual(s, l))
    }
}

/// The slots of a fresh scalar array ([`BicgstablKernels::bicgstabl_start`]).
fn start_values<T: Scalar>(s: &mut [T]) {
    s.fill(T::zero());
    s[ONE] = T::one();
    s[RHO0] = T::one();
    s[OMEGA] = T::one();
    s[NEG_OMEGA] = -T::one();
}

/// [`BicgstablKernels::bicgstabl_mr`] on a host slot array (the twin of the
/// device's).
fn minimal_residual<T: Scalar>(s: &mut [T], l: usize) {
    let g = |j: usize| coef(l, 0, j);
    s[g(l)] = s[coef(l, 2, l)];
    for j in (1..l).rev() {
        let mut v = s[coef(l, 2, j)];
        for i in j + 1..=l {
            v -= s[tau(l, j, i)] * s[g(i)];
        }
        s[g(j)] = v;
    }
    for j in 1..l {
        let mut v = s[g(j + 1)];
        for i in j + 1..l {
            v += s[tau(l, j, i)] * s[g(i + 1)];
        }
        s[coef(l, 4, j)] = v;
    }
    for j in 1..=l {
        s[coef(l, 1, j)] = -s[g(j)];
    }
    let omega = s[g(l)];
    if vanished(omega) && s[FLAG].is_zero_value() {
        s[FLAG] = T::from_f64(f64::from(OMEGA_VANISHED));
    }
    s[OMEGA] = omega;
    s[NEG_OMEGA] = -omega;
}

/// Zero, or not finite.
fn vanished<T: Scalar>(v: T) -> bool {
    v.is_zero_value() || !v.is_finite_value()
}

/// The quotient v = sc\[a\] sc\[b\] / sc\[c\], or without a check.
pub const fn ratio(a: usize, b: usize, c: usize, out: usize, neg_out: usize) -> Ratio {
    Ratio {
        a: a as u32,
        b: b as u32,
        c: c as u32,
        out: out as u32,
        neg_out: neg_out as u32,
        check: NO_CHECK,
        code: 0,
    }
}

/// [`ratio`] that records `code` when sc\[`check`\] vanished.
pub const fn checked_ratio(
    (a, b, c): (usize, usize, usize),
    out: usize,
    neg_out: usize,
    check: usize,
    code: u32,
) -> Ratio {
    Ratio {
        check: check as u32,
        code,
        ..ratio(a, b, c, out, neg_out)
    }
}

/// Errors unless `then` has at most [`MAX_RATIOS`] quotients whose slots are
/// below `len`.
fn check_ratios(then: &[Ratio], len: usize) -> Result<()> {
    if Ratios::new(then).is_none() {
        return Err(gpuq_core::Error::InvalidArgument(format!(
            "dotc_into_slot: {} quotients (at most {MAX_RATIOS})",
            then.len()
        )));
    }
    for r in then {
        check_indices("dotc_into_slot (quotients)", len, &r.slots())?;
    }
    Ok(())
}

/// One [`Ratio`] on the host's slot array (the twin of the device's).
fn apply_ratio<T: Scalar>(s: &mut [T], r: &Ratio) {
    let at = |k: u32| k as usize;
    if r.check != NO_CHECK && vanished(s[at(r.check)]) && s[FLAG].is_zero_value() {
        s[FLAG] = T::from_f64(f64::from(r.code));
    }
    let v = guarded_quotient(s[at(r.a)] * s[at(r.b)], s[at(r.c)]);
    s[at(r.out)] = v;
    s[at(r.neg_out)] = -v;
}

impl BicgstablKernels for CpuBackend {
    fn bicgstabl_start<T: Scalar>(&self, sc: &mut CpuVector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_start", len(l), sc.len())?;
        start_values(sc.as_mut_slice());
        Ok(())
    }

    fn dotc_into_slot<T: Scalar>(
        &self,
        x: &CpuVector<T>,
        y: &CpuVector<T>,
        sc: &mut CpuVector<T>,
        k: usize,
        then: &[Ratio],
    ) -> Result<()> {
        check_indices("dotc_into_slot", sc.len(), &[k, FLAG])?;
        check_ratios(then, sc.len())?;
        sc.as_mut_slice()[k] = self.dotc(x, y)?;
        for r in then {
            apply_ratio(sc.as_mut_slice(), r);
        }
        Ok(())
    }

    fn axpby_slots<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        ka: usize,
        x: &CpuVector<T>,
        kb: usize,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("axpby_slots", x.len(), y.len())?;
        check_indices("axpby_slots", sc.len(), &[ka, kb, FLAG])?;
        if !sc.as_slice()[FLAG].is_zero_value() {
            return Ok(());
        }
        let (a, b) = (sc.as_slice()[ka], sc.as_slice()[kb]);
        let x = x.as_slice();
        self.run("axpby_slots", || {
            y.as_mut_slice()
                .par_chunks_mut(BLOCK)
                .zip(x.par_chunks(BLOCK))
                .for_each(|(yc, xc)| {
                    for (yi, &xi) in yc.iter_mut().zip(xc) {
                        *yi = a * xi + b * *yi;
                    }
                })
        });
        Ok(())
    }

    fn axpby_slots_many<T: Scalar>(
        &self,
        sc: &CpuVector<T>,
        ka: usize,
        xs: &[CpuVector<T>],
        kb: usize,
        ys: &mut [CpuVector<T>],
    ) -> Result<()> {
        check_same_len("axpby_slots_many (pairs)", xs.len(), ys.len())?;
        for (x, y) in xs.iter().zip(ys.iter_mut()) {
            self.axpby_slots(sc, ka, x, kb, y)?;
        }
        Ok(())
    }

    fn bicgstabl_mr<T: Scalar>(&self, sc: &mut CpuVector<T>, l: usize) -> Result<()> {
        check_same_len("bicgstabl_mr", len(l), sc.len())?;
        minimal_residual(sc.as_mut_slice(), l);
        Ok(())
    }
}

/// The CUDA backend runs each step as one kernel (see
/// `CudaBackend::axpby_slots` and the others).
#[cfg(feature = "cuda")]
impl BicgstablKernels for gpuq_cuda::CudaBackend {
    fn bicgstabl_start<T: Scalar>(
        &self,
        sc: &mut gpuq_cuda::CudaVector<T>,
        l: usize,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstabl_start(self, sc, l)
    }

    fn dotc_into_slot<T: Scalar>(
        &self,
        x: &gpuq_cuda::CudaVector<T>,
        y: &gpuq_cuda::CudaVector<T>,
        sc: &mut gpuq_cuda::CudaVector<T>,
        k: usize,
        then: &[Ratio],
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::dotc_into_slot(self, x, y, sc, k, then)
    }

    fn axpby_slots<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        ka: usize,
        x: &gpuq_cuda::CudaVector<T>,
        kb: usize,
        y: &mut gpuq_cuda::CudaVector<T>,
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::axpby_slots(self, sc, ka, x, kb, y)
    }

    fn axpby_slots_many<T: Scalar>(
        &self,
        sc: &gpuq_cuda::CudaVector<T>,
        ka: usize,
        xs: &[gpuq_cuda::CudaVector<T>],
        kb: usize,
        ys: &mut [gpuq_cuda::CudaVector<T>],
    ) -> Result<()> {
        gpuq_cuda::CudaBackend::axpby_slots_many(self, sc, ka, xs, kb, ys)
    }

    fn bicgstabl_mr<T: Scalar>(&self, sc: &mut gpuq_cuda::CudaVector<T>, l: usize) -> Result<()> {
        gpuq_cuda::CudaBackend::bicgstabl_mr(self, sc, l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vanished_check_flags_once_and_zeroes_the_quotient() {
        let cpu = CpuBackend::new();
        let l = 2;
        let mut sc = cpu.zeros::<f64>(len(l)).unwrap();
        cpu.bicgstabl_start(&mut sc, l).unwrap();
        let x = cpu.upload(&[1.0, 2.0]).unwrap();
        // DOT = 3, then 3 * 1 / 1 into BETA, -3 into NEG_BETA; nothing vanished.
        let then = [checked_ratio((DOT, ONE, ONE), BETA, NEG_BETA, ONE, 7)];
        cpu.dotc_into_slot(&x, &cpu.upload(&[1.0, 1.0]).unwrap(), &mut sc, DOT, &then)
            .unwrap();
        assert_eq!(
            (
                sc.as_slice()[BETA],
                sc.as_slice()[NEG_BETA],
                sc.as_slice()[FLAG]
            ),
            (3.0, -3.0, 0.0)
        );
        // RHO1 = x^H 0 vanishes: the division by it gives zero, and the first
        // code sticks.
        let zero = cpu.upload(&[0.0, 0.0]).unwrap();
        let then = [
            checked_ratio((DOT, ONE, RHO1), ALPHA, NEG_ALPHA, RHO1, RHO_VANISHED),
            checked_ratio((DOT, ONE, RHO1), ALPHA, NEG_ALPHA, RHO1, GAMMA_VANISHED),
        ];
        cpu.dotc_into_slot(&x, &zero, &mut sc, RHO1, &then).unwrap();
        assert_eq!(sc.as_slice()[ALPHA], 0.0);
        assert_eq!(sc.as_slice()[FLAG], f64::from(RHO_VANISHED));
        let bad = [ratio(len(l), ONE, ONE, ALPHA, NEG_ALPHA)];
        assert!(cpu.dotc_into_slot(&x, &zero, &mut sc, DOT, &bad).is_err());
        assert!(cpu
            .dotc_into_slot(&x, &zero, &mut sc, DOT, &[then[0]; 5])
            .is_err());
    }

    #[test]
    fn the_minimal_residual_solve_matches_the_recurrences() {
        let cpu = CpuBackend::new();
        let l = 3;
        let mut sc = cpu.zeros::<f64>(len(l)).unwrap();
        cpu.bicgstabl_start(&mut sc, l).unwrap();
        let s = sc.as_mut_slice();
        // gamma' = (_, 1, 2, 4); tau_12 = 0.5, tau_13 = 0.25, tau_23 = 2.
        for (j, v) in [(1, 1.0), (2, 2.0), (3, 4.0)] {
            s[coef(l, 2, j)] = v;
        }
        s[tau(l, 1, 2)] = 0.5;
        s[tau(l, 1, 3)] = 0.25;
        s[tau(l, 2, 3)] = 2.0;
        cpu.bicgstabl_mr(&mut sc, l).unwrap();
        let s = sc.as_slice();
        // gamma_3 = 4; gamma_2 = 2 - 2 * 4 = -6; gamma_1 = 1 - 0.5 * -6 - 0.25 * 4 = 3.
        assert_eq!(
            [s[coef(l, 0, 1)], s[coef(l, 0, 2)], s[coef(l, 0, 3)]],
            [3.0, -6.0, 4.0]
        );
        assert_eq!(s[coef(l, 1, 2)], 6.0);
        // gamma''_1 = gamma_2 + tau_12 gamma_3 = -6 + 0.5 * 4 = -4; gamma''_2 = gamma_3 = 4.
        assert_eq!([s[coef(l, 4, 1)], s[coef(l, 4, 2)]], [-4.0, 4.0]);
        assert_eq!((s[OMEGA], s[NEG_OMEGA], s[FLAG]), (4.0, -4.0, 0.0));
    }
}
