//! Reductions and whole solves give bitwise the same results whatever the thread count.

mod common;

use common::*;
use gpuq::core::{Backend, Complex64, LinearOperator};
use gpuq::cpu::CpuBackend;
use gpuq::krylov::{cg, CgKernels, Jacobi, KrylovOptions};
use gpuq::sparse::{generators, Layout, MatrixOperator, SparseBackend};

const N: usize = 100_003; // several reduction blocks and a ragged tail

fn results_on(threads: usize) -> (f64, f64, Complex64, Complex64, f64, f64, f64) {
    let be = CpuBackend::with_threads(threads).unwrap();
    assert_eq!(be.threads(), threads);
    let x = be.upload(&random_vec::<f64>(N, 1)).unwrap();
    let y = be.upload(&random_vec::<f64>(N, 2)).unwrap();
    let zc = be.upload(&random_vec::<Complex64>(N, 3)).unwrap();
    let wc = be.upload(&random_vec::<Complex64>(N, 4)).unwrap();
    let a = generators::laplace1d::<f64>(N, 0.1);
    let m = be.upload_matrix(&a, Layout::Csr).unwrap();
    let mut q = be.zeros::<f64>(N).unwrap();
    let pq = be.spmv_dotc(&m, &x, &mut q).unwrap();
    let mut r = be.upload(&random_vec::<f64>(N, 5)).unwrap();
    let rr = be.cg_update_residual(0.37, &x, &mut r).unwrap();
    (
        be.dotc(&x, &y).unwrap(),
        be.nrm2(&x).unwrap(),
        be.dotc(&zc, &wc).unwrap(),
        be.dotu(&zc, &wc).unwrap(),
        pq,
        rr,
        be.nrm2(&zc).unwrap(),
    )
}

#[test]
fn reductions_do_not_depend_on_thread_count() {
    let reference = results_on(1);
    for t in [2, 3, 7] {
        let got = results_on(t);
        // Bitwise: compare the bit patterns, not within a tolerance.
        assert_eq!(
            format!("{:?}", got),
            format!("{:?}", reference),
            "{t} threads"
        );
        assert_eq!(got.0.to_bits(), reference.0.to_bits());
    }
}

#[test]
fn cg_is_bitwise_reproducible_across_thread_counts() {
    let a = generators::laplace2d::<f64>(60);
    let b: Vec<f64> = random_vec(a.nrows(), 9);
    let solve = |threads: usize| {
        let be = CpuBackend::with_threads(threads).unwrap();
        let op = MatrixOperator::new(&be, &a, Layout::Csr).unwrap();
        let m = Jacobi::new(&be, &a).unwrap();
        let bv = be.upload(&b).unwrap();
        let mut x = be.zeros::<f64>(a.nrows()).unwrap();
        let report = cg(
            &be,
            &op,
            Some(&m as &dyn LinearOperator<_, _>),
            &bv,
            &mut x,
            &KrylovOptions::default(),
        )
        .unwrap();
        (report.iterations, be.download(&x).unwrap())
    };
    let (it1, x1) = solve(1);
    for t in [2, 5] {
        let (it, x) = solve(t);
        assert_eq!(it, it1);
        assert!(x.iter().zip(&x1).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
