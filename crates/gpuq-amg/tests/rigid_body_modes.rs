//! Rigid-body modes from coordinates are the kernel of unconstrained
//! elasticity (A B = 0 to rounding) in 2D and 3D, and the tentative
//! prolongator reproduces the near-null space exactly on every level.

use gpuq_amg::prolong::tentative;
use gpuq_amg::{rigid_body_modes, AmgOptions, Hierarchy};
use gpuq_sparse::elasticity::Elasticity2d;
use gpuq_sparse::elasticity3d::Elasticity3d;
use gpuq_sparse::Csr;

/// max_i |(A v)_i| over max |a_ij| max |v_j|.
fn relative_image(a: &Csr<f64>, v: &[f64]) -> f64 {
    let av = a.mul_vec(v).unwrap();
    let amax = a.values().iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let vmax = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    av.iter().fold(0.0f64, |m, x| m.max(x.abs())) / (amax * vmax)
}

#[test]
fn rigid_body_modes_span_the_kernel_of_unconstrained_elasticity() {
    let p = Elasticity3d::new(5).unwrap();
    let a = p.unconstrained_stiffness::<f64>();
    let modes = rigid_body_modes(&p.all_coordinates()).unwrap();
    assert_eq!(modes.len(), 6);
    for (m, v) in modes.iter().enumerate() {
        assert_eq!(v.len(), a.nrows());
        let r = relative_image(&a, v);
        assert!(r < 1e-13, "3D mode {m}: |A b| = {r}");
    }
    let n = 6;
    let a = Elasticity2d::new(n)
        .unwrap()
        .unconstrained_stiffness::<f64>();
    let h = 1.0 / n as f64;
    let grid = |f: fn(usize, usize) -> usize| -> Vec<f64> {
        (0..=n)
            .flat_map(|iy| (0..=n).map(move |ix| f(ix, iy) as f64 * h))
            .collect()
    };
    let modes = rigid_body_modes(&[grid(|ix, _| ix), grid(|_, iy| iy)]).unwrap();
    assert_eq!(modes.len(), 3);
    for (m, v) in modes.iter().enumerate() {
        let r = relative_image(&a, v);
        assert!(r < 1e-13, "2D mode {m}: |A b| = {r}");
    }
    // On the clamped system they are not: A is definite.
    let p = Elasticity3d::new(3).unwrap();
    let modes = rigid_body_modes(&p.free_coordinates()).unwrap();
    let a = p.stiffness::<f64>();
    assert!(modes.iter().all(|v| relative_image(&a, v) > 1e-3));
}

#[test]
fn the_tentative_prolongator_reproduces_the_modes_on_every_level() {
    let p = Elasticity3d::new(8).unwrap();
    let a = p.stiffness::<f64>();
    let modes = rigid_body_modes(&p.free_coordinates()).unwrap();
    let o = AmgOptions {
        block: 3,
        near_null_space: Some(modes.clone()),
        coarse_size: 30,
        ..AmgOptions::default()
    };
    let h = Hierarchy::build(&a, &o).unwrap();
    let levels = h.levels();
    assert!(levels.len() >= 3, "{} levels", levels.len());
    assert_eq!(levels[0].block, 3);
    assert!(levels[1..].iter().all(|l| l.block == 6));
    let mut b = modes;
    for (k, level) in levels.iter().enumerate().take(levels.len() - 1) {
        let agg = level.aggregate_of.as_ref().unwrap().host().unwrap();
        let naggs = levels[k + 1].a.nrows() / 6;
        let t = tentative(agg, naggs, level.block, &b).unwrap();
        assert_eq!(t.zero_columns, 0, "level {k}");
        for (v, c) in b.iter().zip(&t.coarse_null) {
            let back = t.p.mul_vec(c).unwrap();
            let scale = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let err = back
                .iter()
                .zip(v)
                .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
            assert!(err <= 1e-12 * scale, "level {k}: |P_T B_c - B| = {err}");
        }
        b = t.coarse_null;
    }
}
