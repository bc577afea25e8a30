//! Block AMG on 2D elasticity (two unknowns per node): PCG + AMG needs at most
//! a third of the iterations of PCG with 2x2-block Jacobi, with the default
//! near-null space (the two translations) and with the three rigid-body modes.

mod common;

use common::*;
use gpuq_amg::{AmgOptions, Coarsening};
use gpuq_cpu::CpuBackend;
use gpuq_krylov::BlockJacobi2;
use gpuq_sparse::elasticity::{elasticity2d, elasticity2d_rigid_body_modes};
use gpuq_sparse::Layout;

#[test]
fn block_amg_beats_block_jacobi_threefold_on_elasticity() {
    let n = 24;
    let (a, b) = elasticity2d::<f64>(n).unwrap();
    let cpu = CpuBackend::new();
    let bj = BlockJacobi2::new(&cpu, &a).unwrap();
    let (_, rj) = pcg(&cpu, &a, &b, &bj);
    assert!(rj.converged);
    let rbm = elasticity2d_rigid_body_modes(n).unwrap();
    for (coarsening, nns) in [
        (Coarsening::SmoothedAggregation, None),
        (Coarsening::SmoothedAggregation, Some(rbm)),
        (Coarsening::Seed, None),
    ] {
        let with_rbm = nns.is_some();
        let o = AmgOptions {
            coarsening,
            block: 2,
            near_null_space: nns,
            ..AmgOptions::default()
        };
        let (_, m) = amg(&cpu, &a, &o, Layout::Bsr2);
        let (x, r) = pcg(&cpu, &a, &b, &m);
        println!(
            "{coarsening:?} rbm {with_rbm}: {} vs block2 {}",
            r.iterations, rj.iterations
        );
        assert!(r.converged);
        assert!(true_residual(&a, &x, &b) <= 1e-8);
        assert!(
            3 * r.iterations <= rj.iterations,
            "{coarsening:?} (rigid-body modes: {with_rbm}): {} vs block2 {}",
            r.iterations,
            rj.iterations
        );
    }
}
