//! BLAS-1 kernels against the CPU backend, all four scalars, awkward sizes.

use crate::common::{random_vec, RandomScalar};
use crate::{gpu, two_gamma};
use gpuq::core::{Backend, Complex32, Complex64, RealScalar, Scalar};
use gpuq::cpu::{CpuBackend, CpuVector};
use gpuq::cuda::CudaVector;
use gpuq::krylov::gmres_kernels::gs_extra;
use gpuq::krylov::{
    BicgstabKernels, BicgstablKernels, CgKernels, GmresKernels, QmrKernels, TfqmrKernels,
};
use proptest::prelude::*;

const SIZES: &[usize] = &[0, 1, 31, 32, 33, 255, 256, 257, 1007, 65_537, 1_048_579];

fn close<T: Scalar>(what: &str, got: &[T], want: &[T], bound: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let d = (*g - *w).magnitude().to_f64_lossless();
        assert!(
            d <= bound(i),
            "{what}[{i}]: gpu {g} cpu {w} differ by {d:e} > {:e}",
            bound(i)
        );
    }
}

/// [`close`] with every element's bound `factor` eps times the largest
/// magnitude in `want` (at least 1): the steps of a method, whose rounding
/// scales with the vectors.
fn close_to_scale<T: Scalar>(what: &str, got: Vec<T>, want: Vec<T>, factor: f64) {
    let eps = T::Real::eps().to_f64_lossless();
    let scale = want
        .iter()
        .map(|z| z.magnitude().to_f64_lossless())
        .fold(1.0, f64::max);
    close(what, &got, &want, |_| factor * eps * scale);
}

/// The device's and the CPU's scalar slots `slots` agree within `rel (|cpu| +
/// scale_n)` (`scale_n`: n times the inputs' magnitudes): a reduction's own rounding (relative to the sum of |terms|, at most
/// the value plus n times the inputs' magnitudes) plus that of its inputs' steps.
#[allow(clippy::too_many_arguments)]
fn slots_close<T: Scalar>(
    step: &str,
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    scg: &CudaVector<T>,
    scc: &CpuVector<T>,
    slots: &[usize],
    rel: f64,
    scale_n: f64,
) {
    let (sgh, sch) = (g.download(scg).unwrap(), c.download(scc).unwrap());
    for &k in slots {
        let d = (sgh[k] - sch[k]).magnitude().to_f64_lossless();
        let bound = rel * (sch[k].magnitude().to_f64_lossless() + scale_n) + 1e-300;
        assert!(d <= bound, "{step}: slot {k}: {} vs {}", sgh[k], sch[k]);
    }
}

fn check_blas1<T: RandomScalar>(n: usize, seed: u64) {
    let Some(g) = gpu("blas1") else { return };
    let c = CpuBackend::new();
    let eps = T::Real::eps().to_f64_lossless();
    let (xs, ys): (Vec<T>, Vec<T>) = (random_vec(n, seed), random_vec(n, seed + 1));
    let (a, b) = (T::random_scalar(seed + 2), T::random_scalar(seed + 3));
    let (xg, xc) = (g.upload(&xs).unwrap(), c.upload(&xs).unwrap());
    let elementwise = |i: usize, s: &[T], t: &[T]| {
        2.0 * eps
            * ((a * s[i]).magnitude().to_f64_lossless() + (b * t[i]).magnitude().to_f64_lossless())
            * 2.0
    };

    // round trip, zeros, fill
    assert_eq!(g.download(&xg).unwrap(), xs);
    assert!(g
        .download(&g.zeros::<T>(n).unwrap())
        .unwrap()
        .iter()
        .all(|v| v.is_zero_value()));
    let mut f = g.zeros::<T>(n).unwrap();
    g.fill(&mut f, a).unwrap();
    assert!(g.download(&f).unwrap().iter().all(|&v| v == a));

    // copy, scal
    let mut yg = g.upload(&ys).unwrap();
    g.copy(&xg, &mut yg).unwrap();
    assert_eq!(g.download(&yg).unwrap(), xs);
    let (mut sg, mut sc) = (g.upload(&xs).unwrap(), c.upload(&xs).unwrap());
    g.scal(a, &mut sg).unwrap();
    c.scal(a, &mut sc).unwrap();
    close(
        "scal",
        &g.download(&sg).unwrap(),
        &c.download(&sc).unwrap(),
        |i| elementwise(i, &xs, &xs),
    );

    // axpy, axpby, mul
    let (mut yg, mut yc) = (g.upload(&ys).unwrap(), c.upload(&ys).unwrap());
    g.axpy(a, &xg, &mut yg).unwrap();
    c.axpy(a, &xc, &mut yc).unwrap();
    close(
        "axpy",
        &g.download(&yg).unwrap(),
        &c.download(&yc).unwrap(),
        |i| elementwise(i, &xs, &ys),
    );
    let (mut yg, mut yc) = (g.upload(&ys).unwrap(), c.upload(&ys).unwrap());
    g.axpby(a, &xg, b, &mut yg).unwrap();
    c.axpby(a, &xc, b, &mut yc).unwrap();
    close(
        "axpby",
        &g.download(&yg).unwrap(),
        &c.download(&yc).unwrap(),
        |i| elementwise(i, &xs, &ys),
    );
    let (yg, yc) = (g.upload(&ys).unwrap(), c.upload(&ys).unwrap());
    let (mut zg, mut zc) = (g.zeros::<T>(n).unwrap(), c.zeros::<T>(n).unwrap());
    g.mul_elementwise(&xg, &yg, &mut zg).unwrap();
    c.mul_elementwise(&xc, &yc, &mut zc).unwrap();
    close(
        "mul",
        &g.download(&zg).unwrap(),
        &c.download(&zc).unwrap(),
        |i| 4.0 * eps * (xs[i] * ys[i]).magnitude().to_f64_lossless(),
    );

    // dots and norm: bound from the sum of |terms|
    let abs_sum: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (x.magnitude() * y.magnitude()).to_f64_lossless())
        .sum();
    let bound = two_gamma(n, eps, T::IS_COMPLEX) * abs_sum;
    for (name, gv, cv) in [
        ("dotc", g.dotc(&xg, &yg).unwrap(), c.dotc(&xc, &yc).unwrap()),
        ("dotu", g.dotu(&xg, &yg).unwrap(), c.dotu(&xc, &yc).unwrap()),
    ] {
        let d = (gv - cv).magnitude().to_f64_lossless();
        assert!(
            d <= bound,
            "{name} n={n}: gpu {gv} cpu {cv} differ by {d:e} > {bound:e}"
        );
    }
    let (ng, nc) = (
        g.nrm2(&xg).unwrap().to_f64_lossless(),
        c.nrm2(&xc).unwrap().to_f64_lossless(),
    );
    assert!(
        (ng - nc).abs() <= two_gamma(n, eps, T::IS_COMPLEX) * nc + f64::MIN_POSITIVE,
        "nrm2 n={n}: {ng} vs {nc}"
    );

    // determinism: the same reduction twice gives the same bits
    assert_eq!(g.dotc(&xg, &yg).unwrap(), g.dotc(&xg, &yg).unwrap());
    assert_eq!(g.nrm2(&xg).unwrap(), g.nrm2(&xg).unwrap());
    // the device-resident variants give the same bits
    let mut d = g.zeros::<T>(1).unwrap();
    g.dotc_on_device(&xg, &yg, &mut d).unwrap();
    assert_eq!(g.download(&d).unwrap()[0], g.dotc(&xg, &yg).unwrap());
    let mut ss = g.zeros::<T::Real>(1).unwrap();
    g.squared_norm_on_device(&xg, &mut ss).unwrap();
    let nrm = g.nrm2(&xg).unwrap();
    assert_eq!(
        gpuq::core::num_traits::Float::sqrt(g.download(&ss).unwrap()[0]),
        nrm
    );

    check_fused_cg_steps(g, &c, &xs, &ys, a, b);
    check_cg_slot_steps(g, &c, &xs, &ys);

    // shape errors, not panics
    let short = g.upload(&xs[..n.saturating_sub(1)]).unwrap();
    if n > 0 {
        assert!(g.dotc(&short, &yg).is_err());
        let mut yg2 = g.upload(&ys).unwrap();
        assert!(g.axpy(a, &short, &mut yg2).is_err());
    }
}

/// CG's fused steps on the device against the CPU backend's.
fn check_fused_cg_steps<T: RandomScalar>(
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    xs: &[T],
    ys: &[T],
    a: T,
    b: T,
) {
    let n = xs.len();
    let eps = T::Real::eps().to_f64_lossless();
    // r = r - a q, returns ||r||^2
    let (mut rg, mut rc) = (g.upload(ys).unwrap(), c.upload(ys).unwrap());
    let (qg, qc) = (g.upload(xs).unwrap(), c.upload(xs).unwrap());
    let sg = CgKernels::cg_update_residual(g, a, &qg, &mut rg).unwrap();
    let sc = CgKernels::cg_update_residual(c, a, &qc, &mut rc).unwrap();
    let (r_g, r_c) = (g.download(&rg).unwrap(), c.download(&rc).unwrap());
    close("cg_update_residual", &r_g, &r_c, |i| {
        4.0 * eps * ((a * xs[i]).magnitude() + ys[i].magnitude()).to_f64_lossless()
    });
    // ||r||^2 from slightly different r: relative bound on the sum of squares.
    let (sg, sc) = (sg.to_f64_lossless(), sc.to_f64_lossless());
    let rel = two_gamma(n, eps, T::IS_COMPLEX) + 16.0 * eps;
    assert!(
        (sg - sc).abs() <= rel * sc + f64::MIN_POSITIVE,
        "cg_update_residual n={n}: {sg} vs {sc}"
    );
    // x = x + a p; p = z + b p
    let (mut xg, mut xc) = (g.upload(xs).unwrap(), c.upload(xs).unwrap());
    let (mut pg, mut pc) = (g.upload(ys).unwrap(), c.upload(ys).unwrap());
    let (zg, zc) = (g.upload(xs).unwrap(), c.upload(xs).unwrap());
    CgKernels::cg_update_xp(g, a, b, &zg, &mut pg, &mut xg).unwrap();
    CgKernels::cg_update_xp(c, a, b, &zc, &mut pc, &mut xc).unwrap();
    close(
        "cg_update_xp (x)",
        &g.download(&xg).unwrap(),
        &c.download(&xc).unwrap(),
        |i| 4.0 * eps * ((a * ys[i]).magnitude() + xs[i].magnitude()).to_f64_lossless(),
    );
    close(
        "cg_update_xp (p)",
        &g.download(&pg).unwrap(),
        &c.download(&pc).unwrap(),
        |i| 4.0 * eps * ((b * ys[i]).magnitude() + xs[i].magnitude()).to_f64_lossless(),
    );
}

/// CG's steps with backend-resident scalars, device against CPU: from the
/// same scalar array, r's update (with and without a diagonal scaling z = d r)
/// within a few rounding errors, ||r||^2 and r^H z in their slots, then x's
/// and p's update.
fn check_cg_slot_steps<T: RandomScalar>(
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    xs: &[T],
    ys: &[T],
) {
    use gpuq::krylov::kernels::{cg_alpha, cg_next_slot, CG_LEN, PQ, RHO, RNORM2};
    let n = xs.len();
    let eps = T::Real::eps().to_f64_lossless();
    let mut start = vec![T::zero(); CG_LEN];
    start[PQ] = T::from_f64(2.5);
    start[RHO[1]] = T::from_f64(0.75);
    let alpha = cg_alpha(start[RHO[1]], start[PQ]);
    let ds: Vec<T> = (0..n).map(|i| T::from_f64(1.0 + (i % 5) as f64)).collect();
    let (dg, dc) = (g.upload(&ds).unwrap(), c.upload(&ds).unwrap());
    let rel = two_gamma(n, eps, T::IS_COMPLEX) + 16.0 * eps;
    for scaled in [false, true] {
        let (mut scg, mut scc) = (g.upload(&start).unwrap(), c.upload(&start).unwrap());
        let (mut rg, mut rc) = (g.upload(ys).unwrap(), c.upload(ys).unwrap());
        let (qg, qc) = (g.upload(xs).unwrap(), c.upload(xs).unwrap());
        let (mut zg, mut zc) = (g.zeros::<T>(n).unwrap(), c.zeros::<T>(n).unwrap());
        let sg = scaled.then_some((&dg, &mut zg));
        CgKernels::cg_residual_slots(g, &mut scg, RHO[1], &qg, &mut rg, sg).unwrap();
        let sc = scaled.then_some((&dc, &mut zc));
        CgKernels::cg_residual_slots(c, &mut scc, RHO[1], &qc, &mut rc, sc).unwrap();
        let bound = |i: usize| {
            4.0 * eps * ((alpha * xs[i]).magnitude() + ys[i].magnitude()).to_f64_lossless()
        };
        close(
            "cg_residual_slots (r)",
            &g.download(&rg).unwrap(),
            &c.download(&rc).unwrap(),
            bound,
        );
        if scaled {
            close(
                "cg_residual_slots (z)",
                &g.download(&zg).unwrap(),
                &c.download(&zc).unwrap(),
                |i| 6.0 * bound(i) * ds[i].magnitude().to_f64_lossless(),
            );
        }
        let (hg, hc) = (g.download(&scg).unwrap(), c.download(&scc).unwrap());
        for slot in [RNORM2, cg_next_slot(RHO[1])] {
            let (vg, vc) = (
                hg[slot].magnitude().to_f64_lossless(),
                hc[slot].magnitude().to_f64_lossless(),
            );
            assert!(
                (vg - vc).abs() <= 2.0 * rel * vc + f64::MIN_POSITIVE,
                "cg_residual_slots slot {slot} n={n} scaled={scaled}: {vg} vs {vc}"
            );
        }
        assert_eq!(hg[PQ], start[PQ]);
        assert_eq!(hg[RHO[1]], start[RHO[1]]);
        // x = x_in + alpha p, p = z + beta p, from the CPU's slots on both
        let (sg, s_c) = (g.upload(&hc).unwrap(), c.upload(&hc).unwrap());
        let (xig, xic) = (g.upload(xs).unwrap(), c.upload(xs).unwrap());
        let (mut xg, mut xc) = (g.zeros::<T>(n).unwrap(), c.zeros::<T>(n).unwrap());
        let (mut pg, mut pc) = (g.upload(ys).unwrap(), c.upload(ys).unwrap());
        CgKernels::cg_xp_slots(g, &sg, RHO[1], &qg, &mut pg, &xig, &mut xg).unwrap();
        CgKernels::cg_xp_slots(c, &s_c, RHO[1], &qc, &mut pc, &xic, &mut xc).unwrap();
        close(
            "cg_xp_slots (x)",
            &g.download(&xg).unwrap(),
            &c.download(&xc).unwrap(),
            |i| 4.0 * eps * ((alpha * ys[i]).magnitude() + xs[i].magnitude()).to_f64_lossless(),
        );
        let beta = (hc[cg_next_slot(RHO[1])] / hc[RHO[1]])
            .magnitude()
            .to_f64_lossless();
        close(
            "cg_xp_slots (p)",
            &g.download(&pg).unwrap(),
            &c.download(&pc).unwrap(),
            |i| {
                4.0 * eps
                    * (beta * ys[i].magnitude().to_f64_lossless()
                        + xs[i].magnitude().to_f64_lossless())
            },
        );
        // a rho slot that is not one of CG's is an error, not a launch
        assert!(CgKernels::cg_xp_slots(g, &sg, PQ, &qg, &mut pg, &xig, &mut xg).is_err());
    }
    // a breakdown (p^H A p not positive): zero step, x = x_in exactly, even
    // where p is not finite
    if n > 0 {
        let mut broken = start.clone();
        broken[PQ] = T::from_f64(-1.0);
        let mut ps = ys.to_vec();
        ps[0] = T::from_f64(f64::INFINITY);
        for (be, what) in [(true, "gpu"), (false, "cpu")] {
            let x = if be {
                let (sg, zg, xig) = (
                    g.upload(&broken).unwrap(),
                    g.upload(xs).unwrap(),
                    g.upload(xs).unwrap(),
                );
                let (mut pg, mut xg) = (g.upload(&ps).unwrap(), g.zeros::<T>(n).unwrap());
                CgKernels::cg_xp_slots(g, &sg, RHO[1], &zg, &mut pg, &xig, &mut xg).unwrap();
                g.download(&xg).unwrap()
            } else {
                let (sc, zc, xic) = (
                    c.upload(&broken).unwrap(),
                    c.upload(xs).unwrap(),
                    c.upload(xs).unwrap(),
                );
                let (mut pc, mut xc) = (c.upload(&ps).unwrap(), c.zeros::<T>(n).unwrap());
                CgKernels::cg_xp_slots(c, &sc, RHO[1], &zc, &mut pc, &xic, &mut xc).unwrap();
                c.download(&xc).unwrap()
            };
            assert_eq!(x, xs, "{what}: a zero step changed x");
        }
    }
}

/// BiCGSTAB's steps with backend-resident scalars, device against CPU: the same
/// scalar array `sc` on both, each step's vectors within a few rounding errors
/// of the coefficients' terms, and the reductions written into the slots.
fn check_bicgstab_steps<T: RandomScalar>(
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    n: usize,
    seed: u64,
) {
    use gpuq::krylov::bicgstab_kernels::{LEN, RHO, RNORM2, SNORM2, TS, TT};
    let eps = T::Real::eps().to_f64_lossless();
    let vecs: Vec<Vec<T>> = (0..6).map(|k| random_vec::<T>(n, seed + k)).collect();
    let mut sc_host: Vec<T> = random_vec::<T>(LEN, seed + 99);
    // The norms' slots are real.
    for k in [TT, SNORM2, RNORM2] {
        sc_host[k] = T::from_real(sc_host[k].magnitude() + T::Real::of_f64(0.5));
    }
    let up = |v: &[T]| (g.upload(v).unwrap(), c.upload(v).unwrap());
    let (mut scg, mut scc) = up(&sc_host);
    let loose = |what: &str, gv: Vec<T>, cv: Vec<T>| close_to_scale(what, gv, cv, 64.0);
    // p step, then s step, then x/r step (with and without shat).
    let (rg, rc) = up(&vecs[0]);
    let (vg, vc) = up(&vecs[1]);
    let (mut pg, mut pc) = up(&vecs[2]);
    // With a diagonal scaling folded in: M p = d p in the same pass.
    let (dg, dc) = up(&vecs[3]);
    let (mut dpg, mut dpc) = up(&vecs[4]);
    BicgstabKernels::bicgstab_p(g, &scg, &rg, &vg, &mut pg, Some((&dg, &mut dpg))).unwrap();
    BicgstabKernels::bicgstab_p(c, &scc, &rc, &vc, &mut pc, Some((&dc, &mut dpc))).unwrap();
    loose(
        "bicgstab_p",
        g.download(&pg).unwrap(),
        c.download(&pc).unwrap(),
    );
    loose(
        "bicgstab_p (scaled)",
        g.download(&dpg).unwrap(),
        c.download(&dpc).unwrap(),
    );
    // A fresh scalar array (all zero but rho) with p and v zero gives p = r.
    let mut fresh = vec![T::zero(); LEN];
    fresh[RHO] = sc_host[RHO];
    let zero = vec![T::zero(); n];
    let (fg, fc) = up(&fresh);
    let (zg, zc) = up(&zero);
    let (mut p0g, mut p0c) = up(&zero);
    BicgstabKernels::bicgstab_p(g, &fg, &rg, &zg, &mut p0g, None).unwrap();
    BicgstabKernels::bicgstab_p(c, &fc, &rc, &zc, &mut p0c, None).unwrap();
    assert_eq!(c.download(&p0c).unwrap(), vecs[0]);
    assert_eq!(g.download(&p0g).unwrap(), vecs[0]);
    let (mut sg, mut s_c) = up(&vecs[0]);
    BicgstabKernels::bicgstab_s(g, &scg, &vg, &mut sg, Some((&dg, &mut dpg))).unwrap();
    BicgstabKernels::bicgstab_s(c, &scc, &vc, &mut s_c, Some((&dc, &mut dpc))).unwrap();
    loose(
        "bicgstab_s",
        g.download(&sg).unwrap(),
        c.download(&s_c).unwrap(),
    );
    loose(
        "bicgstab_s (scaled)",
        g.download(&dpg).unwrap(),
        c.download(&dpc).unwrap(),
    );
    let (tg, tc) = up(&vecs[3]);
    let (shg, shc) = up(&vecs[4]);
    BicgstabKernels::bicgstab_tt(g, &tg, &sg, &mut scg).unwrap();
    BicgstabKernels::bicgstab_tt(c, &tc, &s_c, &mut scc).unwrap();
    let rel = two_gamma(n, eps, T::IS_COMPLEX) + 64.0 * eps;
    let slots_agree = |scg: &CudaVector<T>, scc: &CpuVector<T>, slots: &[usize], scale: f64| {
        let step = format!("bicgstab n={n}");
        slots_close(&step, g, c, scg, scc, slots, 4.0 * rel, scale * n as f64);
    };
    slots_agree(&scg, &scc, &[SNORM2, TS, TT], 1.0);
    let (r0g, r0c) = up(&vecs[1]);
    // x = x_in + ...: the previous iterate comes from its own vector.
    let (xin_g, xin_c) = up(&vecs[5]);
    for shat in [false, true] {
        let (mut xg, mut xc) = up(&vecs[2]);
        let (mut r2g, mut r2c) = (
            g.upload(&g.download(&sg).unwrap()).unwrap(),
            c.upload(&c.download(&s_c).unwrap()).unwrap(),
        );
        let (sh_g, sh_c) = if shat {
            (Some(&shg), Some(&shc))
        } else {
            (None, None)
        };
        let t2 = T::Real::of_f64(0.0);
        let xr_g = (&xin_g, &mut xg, &mut r2g);
        BicgstabKernels::bicgstab_xr(
            g, &mut scg, t2, &pg, sh_g, &tg, &r0g, xr_g.0, xr_g.1, xr_g.2,
        )
        .unwrap();
        let xr_c = (&xin_c, &mut xc, &mut r2c);
        BicgstabKernels::bicgstab_xr(
            c, &mut scc, t2, &pc, sh_c, &tc, &r0c, xr_c.0, xr_c.1, xr_c.2,
        )
        .unwrap();
        loose(
            "bicgstab_xr (x)",
            g.download(&xg).unwrap(),
            c.download(&xc).unwrap(),
        );
        loose(
            "bicgstab_xr (r)",
            g.download(&r2g).unwrap(),
            c.download(&r2c).unwrap(),
        );
        // r = s - omega t has magnitudes up to about 1 + |omega|.
        // (With n = 0 both products vanish and omega is zero.)
        let omega = (scc.as_slice()[TS] / scc.as_slice()[TT])
            .magnitude()
            .to_f64_lossless();
        let omega = if omega.is_finite() { omega } else { 0.0 };
        slots_agree(&scg, &scc, &[RHO, RNORM2], (1.0 + omega) * (1.0 + omega));
    }
    // A slot outside the array is an error, not a crash.
    assert!(BicgstabKernels::dotc_to_slot(g, &tg, &sg, &mut scg, LEN).is_err());
    assert!(BicgstabKernels::dotc_to_slot(c, &tc, &s_c, &mut scc, LEN).is_err());
}

#[test]
fn bicgstab_steps_match_the_cpu() {
    let Some(g) = gpu("bicgstab_steps_match_the_cpu") else {
        return;
    };
    let c = CpuBackend::new();
    for (k, n) in [0usize, 1, 31, 1000, 100_003].into_iter().enumerate() {
        check_bicgstab_steps::<f64>(g, &c, n, 10 * k as u64);
        check_bicgstab_steps::<Complex64>(g, &c, n, 10 * k as u64 + 5);
        check_bicgstab_steps::<f32>(g, &c, n, 10 * k as u64 + 7);
    }
}

/// An orthonormal basis of `k` vectors of length `n` (classical Gram-Schmidt
/// twice, in f64 on the host), as scalars of `T`.
fn orthonormal<T: RandomScalar>(n: usize, k: usize, seed: u64) -> Vec<Vec<T>> {
    let to64 = |v: &T| Complex64::new(v.re().to_f64_lossless(), v.im().to_f64_lossless());
    let mut out: Vec<Vec<Complex64>> = Vec::new();
    for j in 0..k {
        let mut v: Vec<Complex64> = random_vec::<T>(n, seed + j as u64)
            .iter()
            .map(to64)
            .collect();
        if !T::IS_COMPLEX {
            v.iter_mut().for_each(|z| z.im = 0.0);
        }
        for _ in 0..2 {
            for q in &out {
                let h: Complex64 = q.iter().zip(&v).map(|(a, b)| a.conj() * b).sum();
                v.iter_mut().zip(q).for_each(|(vi, qi)| *vi -= h * qi);
            }
        }
        let norm = v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        v.iter_mut().for_each(|z| *z /= norm);
        out.push(v);
    }
    out.iter()
        .map(|v| {
            v.iter()
                .map(|z| T::from_parts(T::Real::of_f64(z.re), T::Real::of_f64(z.im)))
                .collect()
        })
        .collect()
}

/// GMRES's Gram-Schmidt steps against the CPU's, for `used` orthonormal basis
/// vectors around the chunk size of 8: the inner products within the bound of
/// two summation orders (`2 gamma_n sum |v_i| |w_i|`); rho and t_k, the new
/// basis vector and the next u within what those differences allow; the
/// combination within `4 (k + 1) eps` per term.
fn check_gram_schmidt<T: RandomScalar>(n: usize, used: usize, seed: u64) {
    let Some(g) = gpu("gram_schmidt") else { return };
    let c = CpuBackend::new();
    let eps = T::Real::eps().to_f64_lossless();
    let capacity = used + 1;
    let mut vs: Vec<Vec<T>> = orthonormal(n, used, seed);
    vs.push(vec![T::zero(); n]);
    let (us, zs): (Vec<T>, Vec<T>) = (random_vec(n, seed + 100), random_vec(n, seed + 101));
    let mut bg: Vec<_> = vs.iter().map(|v| g.upload(v).unwrap()).collect();
    let mut bc: Vec<_> = vs.iter().map(|v| c.upload(v).unwrap()).collect();
    let (mut ug, mut uc) = (g.upload(&us).unwrap(), c.upload(&us).unwrap());
    let (zg, zc) = (g.upload(&zs).unwrap(), c.upload(&zs).unwrap());
    let e = gs_extra(capacity);
    let (mut gsg, mut gsc) = (g.zeros::<T>(e + 2).unwrap(), c.zeros::<T>(e + 2).unwrap());
    GmresKernels::gs_dots(g, &bg, used, &ug, Some(&zg), &mut gsg).unwrap();
    GmresKernels::gs_dots(&c, &bc, used, &uc, Some(&zc), &mut gsc).unwrap();
    let (hg, hc) = (g.download(&gsg).unwrap(), c.download(&gsc).unwrap());
    let complex = T::IS_COMPLEX;
    let kv = used + 1;
    let dot_bound = |v: &[T], w: &[T]| -> f64 {
        let scale: f64 = v
            .iter()
            .zip(w)
            .map(|(a, b)| (a.magnitude() * b.magnitude()).to_f64_lossless())
            .sum();
        two_gamma(n, eps, complex) * scale
    };
    let bounds: Vec<f64> = (0..2 * kv)
        .map(|j| {
            let v = if j % kv < used { &vs[j % kv] } else { &us };
            dot_bound(v, if j < kv { &us } else { &zs })
        })
        .collect();
    let what = format!("gs_dots n {n} used {used}");
    close(&what, &hg[..2 * kv], &hc[..2 * kv], |j| bounds[j]);
    // rho^2 = u^H u - ||s||^2 and t_k = (u^H z - s^H t) / rho inherit the
    // inner products' differences (and their own rounding).
    let rho_c = hc[e + 1].re().to_f64_lossless();
    let mag = |j: usize| hc[j].magnitude().to_f64_lossless();
    let d_rho2 = bounds[used] + (0..used).map(|j| 2.0 * mag(j) * bounds[j]).sum::<f64>();
    let rho2_scale = mag(used) + (0..used).map(|j| mag(j) * mag(j)).sum::<f64>();
    let rho_bound = (d_rho2 + 8.0 * (used as f64 + 2.0) * eps * rho2_scale) / rho_c.max(1e-300);
    let rho_g = hg[e + 1].re().to_f64_lossless();
    assert!(
        (rho_g - rho_c).abs() <= rho_bound,
        "{what}: rho {rho_g} vs {rho_c} (bound {rho_bound:e})"
    );
    let st_bound = bounds[kv + used]
        + (0..used)
            .map(|j| mag(j) * bounds[kv + j] + mag(kv + j) * bounds[j])
            .sum::<f64>();
    let st_scale = mag(kv + used) + (0..used).map(|j| mag(j) * mag(kv + j)).sum::<f64>();
    let tk_c = hc[e].magnitude().to_f64_lossless();
    let tk_bound = (st_bound + 8.0 * (used as f64 + 2.0) * eps * st_scale) / rho_c.max(1e-300)
        + tk_c * rho_bound / rho_c.max(1e-300);
    close(
        &format!("{what} (t_k)"),
        &hg[e..e + 1],
        &hc[e..e + 1],
        |_| tk_bound,
    );
    // The update: every element of q and u moves by the coefficients'
    // differences times the basis, plus its own rounding.
    GmresKernels::gs_update(g, &mut bg, used, &gsg, &mut ug, &zg).unwrap();
    GmresKernels::gs_update(&c, &mut bc, used, &gsc, &mut uc, &zc).unwrap();
    let (qg, qc) = (
        g.download(&bg[used]).unwrap(),
        c.download(&bc[used]).unwrap(),
    );
    let q_bound: Vec<f64> = (0..n)
        .map(|i| {
            let terms = us[i].magnitude().to_f64_lossless()
                + (0..used)
                    .map(|j| mag(j) * vs[j][i].magnitude().to_f64_lossless())
                    .sum::<f64>();
            let from_s: f64 = (0..used)
                .map(|j| bounds[j] * vs[j][i].magnitude().to_f64_lossless())
                .sum();
            let q = qc[i].magnitude().to_f64_lossless();
            (4.0 * (used as f64 + 2.0) * eps * terms + from_s) / rho_c.max(1e-300)
                + q * rho_bound / rho_c.max(1e-300)
        })
        .collect();
    close(&format!("{what} (q)"), &qg, &qc, |i| q_bound[i]);
    let (u2g, u2c) = (g.download(&ug).unwrap(), c.download(&uc).unwrap());
    let u_bound: Vec<f64> = (0..n)
        .map(|i| {
            let terms = zs[i].magnitude().to_f64_lossless()
                + (0..used)
                    .map(|j| mag(kv + j) * vs[j][i].magnitude().to_f64_lossless())
                    .sum::<f64>()
                + tk_c * qc[i].magnitude().to_f64_lossless();
            let from_t: f64 = (0..used)
                .map(|j| bounds[kv + j] * vs[j][i].magnitude().to_f64_lossless())
                .sum::<f64>()
                + tk_bound * qc[i].magnitude().to_f64_lossless()
                + tk_c * q_bound[i];
            let u = u2c[i].magnitude().to_f64_lossless();
            (4.0 * (used as f64 + 3.0) * eps * terms + from_t) / rho_c.max(1e-300)
                + u * rho_bound / rho_c.max(1e-300)
        })
        .collect();
    close(&format!("{what} (u)"), &u2g, &u2c, |i| u_bound[i]);
    // The combination of the basis.
    let y: Vec<T> = random_vec(used, seed + 200);
    let (mut wg, mut wc) = (g.zeros::<T>(n).unwrap(), c.zeros::<T>(n).unwrap());
    GmresKernels::gs_combine(g, &bg, &y, &mut wg).unwrap();
    GmresKernels::gs_combine(&c, &bc, &y, &mut wc).unwrap();
    let w_bound: Vec<f64> = (0..n)
        .map(|i| {
            4.0 * (used as f64 + 1.0)
                * eps
                * (0..used)
                    .map(|j| (y[j] * vs[j][i]).magnitude().to_f64_lossless())
                    .sum::<f64>()
        })
        .collect();
    close(
        &format!("gs_combine n {n} k {used}"),
        &g.download(&wg).unwrap(),
        &c.download(&wc).unwrap(),
        |i| w_bound[i],
    );
}

#[test]
fn gram_schmidt_steps_match_the_cpu() {
    if gpu("gram_schmidt_steps_match_the_cpu").is_none() {
        return;
    }
    for (i, n) in [0usize, 1, 33, 1000, 65_537].into_iter().enumerate() {
        for used in [0usize, 1, 7, 8, 9, 17] {
            if used > n {
                continue;
            }
            let seed = 1000 * i as u64 + 10 * used as u64;
            check_gram_schmidt::<f64>(n, used, seed);
            check_gram_schmidt::<Complex64>(n, used, seed + 1);
            check_gram_schmidt::<f32>(n, used, seed + 2);
            check_gram_schmidt::<Complex32>(n, used, seed + 3);
        }
    }
    // The basis' address table is cached: steps that alternate between two
    // live bases of the same length must each use their own addresses.
    let g = gpu("gram_schmidt_steps_match_the_cpu").unwrap();
    let c = CpuBackend::new();
    let bases: Vec<Vec<Vec<f64>>> = (7u64..9)
        .map(|seed| (0..3).map(|j| random_vec(500, seed * 10 + j)).collect())
        .collect();
    let on_gpu: Vec<Vec<_>> = bases
        .iter()
        .map(|b| b.iter().map(|v| g.upload(v).unwrap()).collect())
        .collect();
    let on_cpu: Vec<Vec<_>> = bases
        .iter()
        .map(|b| b.iter().map(|v| c.upload(v).unwrap()).collect())
        .collect();
    let e = gs_extra(3);
    for round in 0..4 {
        let which = round % 2;
        let us = random_vec::<f64>(500, 70 + round as u64);
        let (ug, uc) = (g.upload(&us).unwrap(), c.upload(&us).unwrap());
        let (mut gsg, mut gsc) = (
            g.zeros::<f64>(e + 2).unwrap(),
            c.zeros::<f64>(e + 2).unwrap(),
        );
        GmresKernels::gs_dots(g, &on_gpu[which], 3, &ug, None, &mut gsg).unwrap();
        GmresKernels::gs_dots(&c, &on_cpu[which], 3, &uc, None, &mut gsc).unwrap();
        let (hg, hc) = (g.download(&gsg).unwrap(), c.download(&gsc).unwrap());
        for (x, y) in hg[..4].iter().zip(&hc[..4]) {
            assert!(
                (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                "round {round}: {x} vs {y}"
            );
        }
    }
}

/// A random scalar for the coefficients.
trait RandomCoefficient: RandomScalar {
    fn random_scalar(seed: u64) -> Self {
        random_vec::<Self>(1, seed)[0]
    }
}
impl<T: RandomScalar> RandomCoefficient for T {}

#[test]
fn blas1_fixed_sizes_all_scalars() {
    for &n in SIZES {
        check_blas1::<f32>(n, 10 + n as u64);
        check_blas1::<f64>(n, 20 + n as u64);
        check_blas1::<Complex32>(n, 30 + n as u64);
        check_blas1::<Complex64>(n, 40 + n as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn blas1_random_sizes(n in 0usize..20_000, seed in any::<u64>()) {
        check_blas1::<f64>(n, seed);
        check_blas1::<Complex64>(n, seed);
    }
}

/// A recorded launch sequence replays the same work: three replays of
/// `y += 2 x` add 6 x, count three launches, and call the body once; a body
/// that downloads cannot be recorded, and the backend works on afterwards.
#[test]
fn recorded_launches_replay_the_same_work() {
    // A backend of its own: other tests' work on the shared one would join the
    // capture.
    let Some(g) = crate::private_gpu("recorded_launches_replay_the_same_work") else {
        return;
    };
    let g = &g;
    let n = 10_001;
    let xs: Vec<f64> = random_vec(n, 3);
    let ys: Vec<f64> = random_vec(n, 4);
    let x = g.upload(&xs).unwrap();
    let mut y = g.upload(&ys).unwrap();
    let mut recording = None;
    let mut calls = 0;
    let before = g.stats();
    for _ in 0..3 {
        let mut body = || {
            calls += 1;
            g.axpy(2.0, &x, &mut y)
        };
        // SAFETY: the body enqueues one axpy on x and y, which outlive the
        // recording, with a constant coefficient; it neither downloads nor waits.
        unsafe { g.replay(&mut recording, &mut body) }.unwrap();
    }
    assert_eq!(calls, 1);
    let stats = g.stats().since(&before);
    assert_eq!(stats.launches, 3);
    assert_eq!(stats.ops.get("axpy"), Some(&3));
    let got = g.download(&y).unwrap();
    for i in 0..n {
        let want = ys[i] + 2.0 * xs[i] + 2.0 * xs[i] + 2.0 * xs[i];
        assert!((got[i] - want).abs() <= 1e-14 * (1.0 + want.abs()), "{i}");
    }
    let mut bad = None;
    // SAFETY: the body breaks the contract on purpose (it downloads); the
    // capture must turn that into an error.
    let err = unsafe { g.replay(&mut bad, &mut || g.nrm2(&x).map(|_| ())) };
    assert!(err.is_err() && bad.is_none(), "{err:?}");
    let again = g.download(&x).unwrap();
    assert_eq!(again, xs);
}

/// TFQMR's steps with backend-resident scalars, device against CPU: the same
/// scalar array on both, every step's vectors within a few rounding errors of
/// their terms' scale, and the slots the reductions and recurrences write.
fn check_tfqmr_steps<T: RandomScalar>(
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    n: usize,
    seed: u64,
) {
    use gpuq::krylov::tfqmr_kernels::{ETA, LEN, RHO, RHO_NEXT, SIGMA, TAU2, THETA2};
    let eps = T::Real::eps().to_f64_lossless();
    let vecs: Vec<Vec<T>> = (0..8).map(|k| random_vec::<T>(n, seed + k)).collect();
    let mut sc_host: Vec<T> = random_vec::<T>(LEN, seed + 99);
    // theta^2 and tau^2 are real and positive.
    for k in [THETA2, TAU2] {
        sc_host[k] = T::from_real(sc_host[k].magnitude() + T::Real::of_f64(0.5));
    }
    let up = |v: &[T]| (g.upload(v).unwrap(), c.upload(v).unwrap());
    let (mut scg, mut scc) = up(&sc_host);
    let loose = |what: &str, gv: Vec<T>, cv: Vec<T>| close_to_scale(what, gv, cv, 256.0);
    let rel = two_gamma(n, eps, T::IS_COMPLEX) + 256.0 * eps;
    let slots_agree = |scg: &CudaVector<T>, scc: &CpuVector<T>, slots: &[usize], step: &str| {
        let step = format!("{step} n={n}");
        slots_close(&step, g, c, scg, scc, slots, 8.0 * rel, n as f64);
    };
    let (rsg, rsc) = up(&vecs[0]);
    let (vg, vc) = up(&vecs[1]);
    TfqmrKernels::tfqmr_sigma(g, &rsg, &vg, &mut scg).unwrap();
    TfqmrKernels::tfqmr_sigma(c, &rsc, &vc, &mut scc).unwrap();
    slots_agree(&scg, &scc, &[SIGMA, RHO, RHO_NEXT], "tfqmr_sigma");
    assert_eq!(c.download(&scc).unwrap()[RHO], sc_host[RHO_NEXT]);
    let (ueg, uec) = up(&vecs[2]);
    let (mut uog, mut uoc) = up(&vecs[3]);
    TfqmrKernels::tfqmr_odd(g, &scg, &ueg, &vg, &mut uog).unwrap();
    TfqmrKernels::tfqmr_odd(c, &scc, &uec, &vc, &mut uoc).unwrap();
    loose(
        "tfqmr_odd",
        g.download(&uog).unwrap(),
        c.download(&uoc).unwrap(),
    );
    let (amg, amc) = up(&vecs[4]);
    let (mut wg, mut wc) = up(&vecs[5]);
    let (mut mdg, mut mdc) = up(&vecs[6]);
    let (mut xg, mut xc) = up(&vecs[7]);
    let xin = up(&vecs[0]);
    // Two half-steps (the second reads the first's theta^2 and eta), with mu
    // the u itself (no preconditioner) in the second.
    for (k, mu) in [(&amg, &amc), (&uog, &uoc)].into_iter().enumerate() {
        TfqmrKernels::tfqmr_half(g, &mut scg, &amg, mu.0, &mut wg, &mut mdg).unwrap();
        TfqmrKernels::tfqmr_half(c, &mut scc, &amc, mu.1, &mut wc, &mut mdc).unwrap();
        loose(
            "tfqmr_half (w)",
            g.download(&wg).unwrap(),
            c.download(&wc).unwrap(),
        );
        loose(
            "tfqmr_half (md)",
            g.download(&mdg).unwrap(),
            c.download(&mdc).unwrap(),
        );
        slots_agree(&scg, &scc, &[THETA2, TAU2, ETA], &format!("tfqmr_half {k}"));
        // The first half-step's x comes from another vector, the second's is
        // updated in place.
        let from = (k == 0).then_some(&xin);
        TfqmrKernels::tfqmr_x(g, &scg, &mdg, from.map(|v| &v.0), &mut xg).unwrap();
        TfqmrKernels::tfqmr_x(c, &scc, &mdc, from.map(|v| &v.1), &mut xc).unwrap();
        loose(
            "tfqmr_x",
            g.download(&xg).unwrap(),
            c.download(&xc).unwrap(),
        );
    }
    TfqmrKernels::tfqmr_rho(g, &rsg, &wg, &mut scg).unwrap();
    TfqmrKernels::tfqmr_rho(c, &rsc, &wc, &mut scc).unwrap();
    slots_agree(&scg, &scc, &[RHO_NEXT], "tfqmr_rho");
    let (mut ue2g, mut ue2c) = up(&vecs[2]);
    TfqmrKernels::tfqmr_even(g, &scg, &wg, &uog, &mut ue2g).unwrap();
    TfqmrKernels::tfqmr_even(c, &scc, &wc, &uoc, &mut ue2c).unwrap();
    loose(
        "tfqmr_even",
        g.download(&ue2g).unwrap(),
        c.download(&ue2c).unwrap(),
    );
    let (mut v2g, mut v2c) = up(&vecs[1]);
    TfqmrKernels::tfqmr_v(g, &scg, &amg, &wg, &mut v2g).unwrap();
    TfqmrKernels::tfqmr_v(c, &scc, &amc, &wc, &mut v2c).unwrap();
    loose(
        "tfqmr_v",
        g.download(&v2g).unwrap(),
        c.download(&v2c).unwrap(),
    );
    // A scalar array of the wrong length is an error, not a crash.
    let short = g.upload(&sc_host[..LEN - 1]).unwrap();
    assert!(TfqmrKernels::tfqmr_x(g, &short, &mdg, None, &mut xg).is_err());
}

#[test]
fn tfqmr_steps_match_the_cpu() {
    let Some(g) = gpu("tfqmr_steps_match_the_cpu") else {
        return;
    };
    let c = CpuBackend::new();
    for (k, n) in [1usize, 31, 1000, 100_003].into_iter().enumerate() {
        check_tfqmr_steps::<f64>(g, &c, n, 20 * k as u64);
        check_tfqmr_steps::<Complex64>(g, &c, n, 20 * k as u64 + 5);
        check_tfqmr_steps::<f32>(g, &c, n, 20 * k as u64 + 7);
    }
}

/// QMR's steps with backend-resident scalars, device against CPU: the same
/// scalar array on both, every step's vectors within a few rounding errors of
/// their scale, and the slots the reductions and the rotation write.
fn check_qmr_steps<T: RandomScalar>(
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    n: usize,
    seed: u64,
) {
    use gpuq::krylov::qmr_kernels::{
        CARRY, DELTA, EPS, ETA, GAMMA, LEN, RHO, RHO_NEXT, RNORM2, THETA, XI,
    };
    let eps = T::Real::eps().to_f64_lossless();
    let vecs: Vec<Vec<T>> = (0..10).map(|k| random_vec::<T>(n, seed + k)).collect();
    let mut sc_host: Vec<T> = random_vec::<T>(LEN, seed + 99);
    // The norms and the rotation's angles are real and positive.
    for k in [RHO, XI, THETA, GAMMA] {
        sc_host[k] = T::from_real(sc_host[k].magnitude() + T::Real::of_f64(0.5));
    }
    let up = |v: &[T]| (g.upload(v).unwrap(), c.upload(v).unwrap());
    let (mut scg, mut scc) = up(&sc_host);
    let loose = |what: &str, gv: Vec<T>, cv: Vec<T>| close_to_scale(what, gv, cv, 256.0);
    let rel = two_gamma(n, eps, T::IS_COMPLEX) + 256.0 * eps;
    let slots_agree = |scg: &CudaVector<T>, scc: &CpuVector<T>, slots: &[usize], step: &str| {
        let step = format!("{step} n={n}");
        slots_close(&step, g, c, scg, scc, slots, 16.0 * rel, n as f64);
    };
    let (mut vg, mut vc) = up(&vecs[0]);
    let (mut wg, mut wc) = up(&vecs[1]);
    let (mut zg, mut zc) = up(&vecs[2]);
    // With z, then with z = w.
    QmrKernels::qmr_scale(g, &mut scg, &mut vg, &mut wg, Some(&mut zg)).unwrap();
    QmrKernels::qmr_scale(c, &mut scc, &mut vc, &mut wc, Some(&mut zc)).unwrap();
    slots_agree(&scg, &scc, &[DELTA], "qmr_scale");
    loose(
        "qmr_scale (z)",
        g.download(&zg).unwrap(),
        c.download(&zc).unwrap(),
    );
    QmrKernels::qmr_scale(g, &mut scg, &mut vg, &mut wg, None).unwrap();
    QmrKernels::qmr_scale(c, &mut scc, &mut vc, &mut wc, None).unwrap();
    slots_agree(&scg, &scc, &[DELTA], "qmr_scale (z = w)");
    loose(
        "qmr_scale (v)",
        g.download(&vg).unwrap(),
        c.download(&vc).unwrap(),
    );
    loose(
        "qmr_scale (w)",
        g.download(&wg).unwrap(),
        c.download(&wc).unwrap(),
    );
    let (yg, yc) = up(&vecs[3]);
    let (mut pg, mut pc) = up(&vecs[4]);
    let (mut qg, mut qc) = up(&vecs[5]);
    QmrKernels::qmr_pq(g, &scg, &yg, &zg, &mut pg, &mut qg).unwrap();
    QmrKernels::qmr_pq(c, &scc, &yc, &zc, &mut pc, &mut qc).unwrap();
    loose(
        "qmr_pq (p)",
        g.download(&pg).unwrap(),
        c.download(&pc).unwrap(),
    );
    loose(
        "qmr_pq (q)",
        g.download(&qg).unwrap(),
        c.download(&qc).unwrap(),
    );
    let (apg, apc) = up(&vecs[6]);
    QmrKernels::qmr_eps(g, &qg, &apg, &mut scg).unwrap();
    QmrKernels::qmr_eps(c, &qc, &apc, &mut scc).unwrap();
    slots_agree(&scg, &scc, &[EPS], "qmr_eps");
    QmrKernels::qmr_v(g, &mut scg, &apg, &mut vg).unwrap();
    QmrKernels::qmr_v(c, &mut scc, &apc, &mut vc).unwrap();
    slots_agree(&scg, &scc, &[RHO_NEXT], "qmr_v");
    loose("qmr_v", g.download(&vg).unwrap(), c.download(&vc).unwrap());
    QmrKernels::qmr_w(g, &scg, &apg, &mut wg).unwrap();
    QmrKernels::qmr_w(c, &scc, &apc, &mut wc).unwrap();
    loose("qmr_w", g.download(&wg).unwrap(), c.download(&wc).unwrap());
    QmrKernels::qmr_rotation(g, &wg, &mut scg).unwrap();
    QmrKernels::qmr_rotation(c, &wc, &mut scc).unwrap();
    slots_agree(
        &scg,
        &scc,
        &[RHO, XI, THETA, GAMMA, ETA, CARRY],
        "qmr_rotation",
    );
    let (mut dg, mut dc) = up(&vecs[7]);
    let (mut sg, mut s_c) = up(&vecs[8]);
    // x = x_in + d: the previous iterate comes from its own vector.
    let (xin_g, xin_c) = up(&vecs[9]);
    let (mut xg, mut xc) = up(&vecs[1]);
    let (mut rg, mut rc) = up(&vecs[0]);
    let (dsg, dsc) = ((&mut dg, &mut sg), (&mut dc, &mut s_c));
    QmrKernels::qmr_update(
        g, &mut scg, &pg, &apg, dsg.0, dsg.1, &xin_g, &mut xg, &mut rg,
    )
    .unwrap();
    QmrKernels::qmr_update(
        c, &mut scc, &pc, &apc, dsc.0, dsc.1, &xin_c, &mut xc, &mut rc,
    )
    .unwrap();
    loose(
        "qmr_update (x)",
        g.download(&xg).unwrap(),
        c.download(&xc).unwrap(),
    );
    loose(
        "qmr_update (r)",
        g.download(&rg).unwrap(),
        c.download(&rc).unwrap(),
    );
    slots_agree(&scg, &scc, &[RNORM2], "qmr_update");
    // A vanished delta zeroes the update: x stays as it was.
    let mut bad = c.download(&scc).unwrap();
    bad[DELTA] = T::zero();
    let (mut badg, mut badc) = up(&bad);
    QmrKernels::qmr_rotation(g, &wg, &mut badg).unwrap();
    QmrKernels::qmr_rotation(c, &wc, &mut badc).unwrap();
    let x_before = c.download(&xin_c).unwrap();
    let (dsg, dsc) = ((&mut dg, &mut sg), (&mut dc, &mut s_c));
    QmrKernels::qmr_update(
        g, &mut badg, &pg, &apg, dsg.0, dsg.1, &xin_g, &mut xg, &mut rg,
    )
    .unwrap();
    QmrKernels::qmr_update(
        c, &mut badc, &pc, &apc, dsc.0, dsc.1, &xin_c, &mut xc, &mut rc,
    )
    .unwrap();
    assert_eq!(c.download(&xc).unwrap(), x_before);
    loose(
        "qmr_update after a breakdown (x)",
        g.download(&xg).unwrap(),
        x_before,
    );
}

#[test]
fn qmr_steps_match_the_cpu() {
    let Some(g) = gpu("qmr_steps_match_the_cpu") else {
        return;
    };
    let c = CpuBackend::new();
    for (k, n) in [1usize, 31, 1000, 100_003].into_iter().enumerate() {
        check_qmr_steps::<f64>(g, &c, n, 30 * k as u64);
        check_qmr_steps::<Complex64>(g, &c, n, 30 * k as u64 + 5);
        check_qmr_steps::<f32>(g, &c, n, 30 * k as u64 + 7);
    }
}

/// BiCGSTAB(l)'s slot steps, device against CPU: the start, dots into slots,
/// `y = sc[a] x + sc[b] y`, the guarded quotient with its breakdown flag, and
/// the minimal-residual solve; a slot outside the array is an error.
fn check_bicgstabl_steps<T: RandomScalar>(
    g: &gpuq::cuda::CudaBackend,
    c: &CpuBackend,
    n: usize,
    seed: u64,
) {
    use gpuq::krylov::bicgstabl_kernels::{
        checked_ratio, coef, len, ratio, tau, DISCARD, DOT, FLAG, ONE, RHO0, RHO_VANISHED,
    };
    let l = 4;
    let eps = T::Real::eps().to_f64_lossless();
    let (mut scg, mut scc) = (g.zeros::<T>(len(l)).unwrap(), c.zeros::<T>(len(l)).unwrap());
    BicgstablKernels::bicgstabl_start(g, &mut scg, l).unwrap();
    BicgstablKernels::bicgstabl_start(c, &mut scc, l).unwrap();
    assert_eq!(g.download(&scg).unwrap(), c.download(&scc).unwrap());
    // Random values in every slot but the flag, the same on both.
    let mut sc_host: Vec<T> = random_vec(len(l), seed + 50);
    sc_host[FLAG] = T::zero();
    sc_host[ONE] = T::one();
    let (mut scg, mut scc) = (g.upload(&sc_host).unwrap(), c.upload(&sc_host).unwrap());
    let xs: Vec<T> = random_vec(n, seed);
    let ys: Vec<T> = random_vec(n, seed + 1);
    let (xg, xc) = (g.upload(&xs).unwrap(), c.upload(&xs).unwrap());
    let (mut yg, mut yc) = (g.upload(&ys).unwrap(), c.upload(&ys).unwrap());
    BicgstablKernels::axpby_slots(g, &scg, RHO0, &xg, DOT, &mut yg).unwrap();
    BicgstablKernels::axpby_slots(c, &scc, RHO0, &xc, DOT, &mut yc).unwrap();
    let scale = (sc_host[RHO0].magnitude() + sc_host[DOT].magnitude()).to_f64_lossless();
    close(
        "axpby_slots",
        &g.download(&yg).unwrap(),
        &c.download(&yc).unwrap(),
        |i| 4.0 * eps * scale * (xs[i].magnitude() + ys[i].magnitude()).to_f64_lossless(),
    );
    BicgstablKernels::dotc_into_slot(g, &xg, &yg, &mut scg, DOT, &[]).unwrap();
    BicgstablKernels::dotc_into_slot(c, &xc, &yc, &mut scc, DOT, &[]).unwrap();
    // Batched updates, across the 16 pairs of one launch: as one at a time.
    for pairs in [3usize, 17] {
        let xs_many: Vec<Vec<T>> = (0..pairs)
            .map(|p| random_vec(n, seed + 60 + p as u64))
            .collect();
        let ys_many: Vec<Vec<T>> = (0..pairs)
            .map(|p| random_vec(n, seed + 90 + p as u64))
            .collect();
        let xgm: Vec<_> = xs_many.iter().map(|v| g.upload(v).unwrap()).collect();
        let xcm: Vec<_> = xs_many.iter().map(|v| c.upload(v).unwrap()).collect();
        let mut ygm: Vec<_> = ys_many.iter().map(|v| g.upload(v).unwrap()).collect();
        let mut ycm: Vec<_> = ys_many.iter().map(|v| c.upload(v).unwrap()).collect();
        BicgstablKernels::axpby_slots_many(g, &scg, RHO0, &xgm, ONE, &mut ygm).unwrap();
        BicgstablKernels::axpby_slots_many(c, &scc, RHO0, &xcm, ONE, &mut ycm).unwrap();
        for p in 0..pairs {
            close(
                &format!("axpby_slots_many pair {p} of {pairs}"),
                &g.download(&ygm[p]).unwrap(),
                &c.download(&ycm[p]).unwrap(),
                |i| {
                    let terms =
                        (xs_many[p][i].magnitude() + ys_many[p][i].magnitude()).to_f64_lossless();
                    4.0 * eps * scale * terms
                },
            );
        }
    }
    let (sg, s_c) = (g.download(&scg).unwrap(), c.download(&scc).unwrap());
    let bound = 4.0 * (two_gamma(n, eps, T::IS_COMPLEX) + 16.0 * eps) * (n as f64 + 1.0) * scale;
    assert!(
        (sg[DOT] - s_c[DOT]).magnitude().to_f64_lossless() <= bound,
        "dotc_into_slot"
    );
    // The same slot values on both from here on, so the one-thread steps must
    // agree to rounding.
    let mut sc_host = s_c.clone();
    sc_host[coef(l, 2, 3)] = T::zero();
    let (mut scg, mut scc) = (g.upload(&sc_host).unwrap(), c.upload(&sc_host).unwrap());
    // A dot product into a slot no quotient reads, then a plain quotient and
    // one by a vanished checked slot: it flags the breakdown and the quotient
    // is zero (tau_33, tau_44: slots the solve does not read).
    let then = [
        ratio(DOT, RHO0, ONE, tau(l, 1, 2), tau(l, 2, 1)),
        checked_ratio(
            (DOT, ONE, coef(l, 2, 3)),
            tau(l, 3, 3),
            tau(l, 4, 4),
            coef(l, 2, 3),
            RHO_VANISHED,
        ),
    ];
    BicgstablKernels::dotc_into_slot(g, &xg, &yg, &mut scg, DISCARD, &then).unwrap();
    BicgstablKernels::dotc_into_slot(c, &xc, &yc, &mut scc, DISCARD, &then).unwrap();
    BicgstablKernels::bicgstabl_mr(g, &mut scg, l).unwrap();
    BicgstablKernels::bicgstabl_mr(c, &mut scc, l).unwrap();
    let (sg, s_c) = (g.download(&scg).unwrap(), c.download(&scc).unwrap());
    assert_eq!(s_c[FLAG], T::from_f64(f64::from(RHO_VANISHED)));
    assert_eq!(s_c[tau(l, 3, 3)], T::zero());
    let big = s_c
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != DISCARD)
        .map(|(_, v)| v.magnitude().to_f64_lossless())
        .fold(1.0, f64::max);
    let (mut sg, mut s_c) = (sg, s_c);
    // The dot products themselves were compared above.
    sg[DISCARD] = T::zero();
    s_c[DISCARD] = T::zero();
    close("dot_ratios' quotients and bicgstabl_mr", &sg, &s_c, |_| {
        1e3 * eps * big * big
    });
    // Slots outside the array are errors, not reads out of bounds.
    assert!(BicgstablKernels::axpby_slots(g, &scg, len(l), &xg, ONE, &mut yg).is_err());
    assert!(BicgstablKernels::dotc_into_slot(g, &xg, &yg, &mut scg, len(l), &[]).is_err());
    let far = [checked_ratio((ONE, ONE, ONE), DOT, DOT, len(l), 1)];
    assert!(BicgstablKernels::dotc_into_slot(g, &xg, &yg, &mut scg, DOT, &far).is_err());
    assert!(BicgstablKernels::bicgstabl_mr(g, &mut scg, l + 1).is_err());
}

#[test]
fn bicgstabl_steps_match_the_cpu() {
    let Some(g) = gpu("bicgstabl_steps_match_the_cpu") else {
        return;
    };
    let c = CpuBackend::new();
    for (k, n) in [1usize, 31, 1000, 100_003].into_iter().enumerate() {
        check_bicgstabl_steps::<f64>(g, &c, n, 40 * k as u64);
        check_bicgstabl_steps::<Complex64>(g, &c, n, 40 * k as u64 + 5);
    }
}
