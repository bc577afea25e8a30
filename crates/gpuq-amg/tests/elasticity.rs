//! Block AMG on 2D elasticity (two unknowns per node): PCG + AMG needs at most
//! a third of the iterations of PCG with 2x2-block Jacobi, with the default
//! near-null space (the two translations) and with the three rigid-body modes;
//! 3D elasticity with block 3 and its six rigid-body modes, clamped by
//! elimination or by identity rows, or floating.

mod common;

use common::*;
use gpuq_amg::{rigid_body_modes, AmgOptions, Coarsening};
use gpuq_cpu::CpuBackend;
use gpuq_krylov::BlockJacobi2;
use gpuq_sparse::elasticity::elasticity2d;
use gpuq_sparse::elasticity3d::Elasticity3d;
use gpuq_sparse::generators::ProblemSpec;
use gpuq_sparse::{Csr, Layout};

#[test]
fn block_amg_beats_block_jacobi_threefold_on_elasticity() {
    let n = 24;
    let (a, b) = elasticity2d::<f64>(n).unwrap();
    let cpu = CpuBackend::new();
    let bj = BlockJacobi2::new(&cpu, &a).unwrap();
    let (_, rj) = pcg(&cpu, &a, &b, &bj);
    assert!(rj.converged);
    let coords = ProblemSpec::Elasticity2d { n }.node_coordinates().unwrap();
    let rbm = rigid_body_modes(&coords).unwrap();
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
        let (_, m) = amg(&cpu, &a, &o, Layout::Bsr { b: 2 });
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

/// 3D elasticity (`elasticity3d:N`, P1 tetrahedra on a perturbed mesh) and its
/// six rigid-body modes from the node coordinates.
fn elasticity3d(n: usize) -> (Csr<f64>, Vec<f64>, Vec<Vec<f64>>) {
    let p = Elasticity3d::new(n).unwrap();
    let modes = rigid_body_modes(&p.free_coordinates()).unwrap();
    (p.stiffness(), p.load(), modes)
}

#[test]
fn block3_with_rigid_body_modes_solves_3d_elasticity_in_few_iterations() {
    let (a, b, modes) = elasticity3d(12);
    let cpu = CpuBackend::new();
    // Block 1 with the block default's smoother (one Jacobi sweep).
    let scalar = AmgOptions {
        smoother: Some(gpuq_amg::Smoother::Jacobi),
        ..AmgOptions::default()
    };
    let (_, m) = amg(&cpu, &a, &scalar, Layout::Csr);
    let (_, r1) = pcg(&cpu, &a, &b, &m);
    let o = AmgOptions {
        block: 3,
        near_null_space: Some(modes.clone()),
        ..AmgOptions::default()
    };
    let (h, m) = amg(&cpu, &a, &o, Layout::Csr);
    assert_eq!(h.levels()[1].block, 6);
    let (x, r) = pcg(&cpu, &a, &b, &m);
    println!(
        "elasticity3d:12 block 1 {} block 3 + modes {}",
        r1.iterations, r.iterations
    );
    assert!(r.converged);
    assert!(true_residual(&a, &x, &b) <= 1e-8);
    assert!(
        3 * r.iterations <= r1.iterations && r.iterations <= 40,
        "block 3 with modes {} vs scalar {}",
        r.iterations,
        r1.iterations
    );
    // The modes given as a near-null space are the rigid-body modes of the
    // coordinates: the same hierarchy and iterations through either door.
    let given = AmgOptions {
        near_null_space: Some(modes),
        ..o.clone()
    };
    let (_, m2) = amg(&cpu, &a, &given, Layout::Csr);
    assert_eq!(pcg(&cpu, &a, &b, &m2).1.iterations, r.iterations);
}

#[test]
fn a_floating_structure_with_its_modes_is_solved_in_the_range() {
    // No clamp: A is singular, its kernel the six modes; the setup finds them
    // among the given vectors, so the right-hand side is made consistent.
    let p = Elasticity3d::new(6).unwrap();
    let a = p.unconstrained_stiffness::<f64>();
    let modes = rigid_body_modes(&p.all_coordinates()).unwrap();
    let o = AmgOptions {
        block: 3,
        near_null_space: Some(modes),
        ..AmgOptions::default()
    };
    let cpu = CpuBackend::new();
    let (h, m) = amg(&cpu, &a, &o, Layout::Csr);
    assert_eq!(h.null_space().len(), 6);
    let mut b = vector(a.nrows(), 0.37);
    h.project(&mut b);
    let (mut x, r) = pcg(&cpu, &a, &b, &m);
    assert!(r.converged && r.iterations <= 60, "{}", r.iterations);
    h.project(&mut x);
    assert!(true_residual(&a, &x, &b) <= 1e-8);
}

#[test]
fn dirichlet_rows_left_in_the_matrix_and_zero_rows() {
    // Clamp by identity rows (and zeroed columns) instead of elimination.
    let p = Elasticity3d::new(6).unwrap();
    let full = p.unconstrained_stiffness::<f64>();
    let x = p.all_coordinates();
    let fixed: Vec<bool> = (0..full.nrows()).map(|r| x[0][r / 3] == 0.0).collect();
    let mut coo = gpuq_sparse::Coo::new(full.nrows(), full.ncols());
    for i in 0..full.nrows() {
        let (c, v) = full.row(i);
        for (&j, &y) in c.iter().zip(v) {
            let j = j as usize;
            if !fixed[i] && !fixed[j] {
                coo.push(i, j, y).unwrap();
            }
        }
        if fixed[i] {
            coo.push(i, i, 1.0).unwrap();
        }
    }
    let a = Csr::from_coo(&coo).unwrap();
    let modes = rigid_body_modes(&x).unwrap();
    let o = AmgOptions {
        block: 3,
        near_null_space: Some(modes),
        ..AmgOptions::default()
    };
    let cpu = CpuBackend::new();
    let (_, m) = amg(&cpu, &a, &o, Layout::Csr);
    let b = a.mul_vec(&vector(a.nrows(), 0.53)).unwrap();
    let (x, r) = pcg(&cpu, &a, &b, &m);
    assert!(r.converged && r.iterations <= 40, "{}", r.iterations);
    assert!(true_residual(&a, &x, &b) <= 1e-8);
    // A row of zeros (a node with no stiffness) is a clear error naming the node, 1-based
    // (row 8 of the file is the second unknown of node 3).
    let mut coo = gpuq_sparse::Coo::new(a.nrows(), a.ncols());
    for i in 0..a.nrows() {
        let (c, v) = a.row(i);
        for (&j, &y) in c.iter().zip(v) {
            if i != 7 && j != 7 {
                coo.push(i, j as usize, y).unwrap();
            }
        }
    }
    let z = Csr::from_coo(&coo).unwrap();
    let e = gpuq_amg::Hierarchy::build(&z, &o).unwrap_err().to_string();
    assert!(e.contains("node 3") && e.contains("1-based"), "{e}");
}

#[test]
fn bad_block_sizes_and_near_null_spaces_are_errors() {
    let (a, _, modes) = elasticity3d(2);
    let build = |o: AmgOptions| gpuq_amg::Hierarchy::build(&a, &o).map(|_| ());
    for block in [0, 9] {
        let e = build(AmgOptions {
            block,
            ..AmgOptions::default()
        });
        assert!(e.unwrap_err().to_string().contains("block size"));
    }
    // 54 unknowns: a block of 4 does not divide them.
    let e = build(AmgOptions {
        block: 4,
        ..AmgOptions::default()
    });
    assert!(e.unwrap_err().to_string().contains("does not divide"));
    let short: Vec<Vec<f64>> = modes.iter().map(|v| v[1..].to_vec()).collect();
    let e = build(AmgOptions {
        block: 3,
        near_null_space: Some(short),
        ..AmgOptions::default()
    });
    assert!(e.unwrap_err().to_string().contains("has 53 entries"));
    let nine = vec![modes[0].clone(); 9];
    let e = build(AmgOptions {
        block: 3,
        near_null_space: Some(nine),
        ..AmgOptions::default()
    });
    assert!(e.unwrap_err().to_string().contains("1 to 8"));
}
