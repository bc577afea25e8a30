//! Test problems and helpers shared by the integration tests.
#![allow(dead_code)]

use gpuq_amg::{Amg, AmgKernels, AmgOptions, CycleOptions, Hierarchy};
use gpuq_core::{Backend, LinearOperator, SolveReport};
use gpuq_krylov::{cg, CgKernels, KrylovOptions};
use gpuq_sparse::{Coo, Csr, Layout, MatrixOperator, SparseBackend};

/// The graph Laplacian of an m x m grid (5-point, pure Neumann): singular,
/// positive semidefinite, null space the constants.
pub fn neumann2d(m: usize) -> Csr<f64> {
    let n = m * m;
    let mut coo = Coo::new(n, n);
    for y in 0..m {
        for x in 0..m {
            let i = y * m + x;
            let mut nb = Vec::new();
            if x + 1 < m {
                nb.push(i + 1);
            }
            if y + 1 < m {
                nb.push(i + m);
            }
            for j in nb {
                coo.push(i, i, 1.0).unwrap();
                coo.push(j, j, 1.0).unwrap();
                coo.push(i, j, -1.0).unwrap();
                coo.push(j, i, -1.0).unwrap();
            }
        }
    }
    Csr::from_coo(&coo).unwrap()
}

/// A coupled 2x2-block system, node by node: [[L + c I, -c I], [-c I, L + 2c I]]
/// with L the 2D Dirichlet Laplacian of an m x m grid (symmetric positive definite).
pub fn coupled2d(m: usize, c: f64) -> Csr<f64> {
    let l = gpuq_sparse::generators::laplace2d::<f64>(m);
    let n = l.nrows();
    let mut coo = Coo::new(2 * n, 2 * n);
    for i in 0..n {
        let (cols, vals) = l.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let j = j as usize;
            coo.push(2 * i, 2 * j, v).unwrap();
            coo.push(2 * i + 1, 2 * j + 1, 0.5 * v).unwrap();
        }
        coo.push(2 * i, 2 * i, c).unwrap();
        coo.push(2 * i + 1, 2 * i + 1, 2.0 * c).unwrap();
        coo.push(2 * i, 2 * i + 1, -c).unwrap();
        coo.push(2 * i + 1, 2 * i, -c).unwrap();
    }
    Csr::from_coo(&coo).unwrap()
}

/// A smooth-ish pseudo-random vector of length n.
pub fn vector(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as f64 + 1.0) * seed).sin() + 0.3 * ((i as f64) * 0.7 * seed).cos())
        .collect()
}

/// ||b - A x|| / ||b||, computed on the host.
pub fn true_residual(a: &Csr<f64>, x: &[f64], b: &[f64]) -> f64 {
    let ax = a.mul_vec(x).unwrap();
    let r: f64 = ax.iter().zip(b).map(|(p, q)| (q - p) * (q - p)).sum();
    let nb: f64 = b.iter().map(|q| q * q).sum();
    (r / nb).sqrt()
}

/// PCG on `backend` with the given preconditioner (or plain Jacobi when
/// `amg` is `None`), from x = 0; returns x and the report.
pub fn pcg<B: CgKernels + SparseBackend>(
    backend: &B,
    a: &Csr<f64>,
    b: &[f64],
    m: &dyn LinearOperator<B, f64>,
) -> (Vec<f64>, SolveReport) {
    let op = MatrixOperator::new(backend, a, Layout::Csr).unwrap();
    let bv = backend.upload(b).unwrap();
    let mut x = backend.zeros::<f64>(a.nrows()).unwrap();
    let report = cg(
        backend,
        &op,
        Some(m),
        &bv,
        &mut x,
        &KrylovOptions::default(),
    )
    .unwrap();
    (backend.download(&x).unwrap(), report)
}

/// Builds the hierarchy and the cycle on `backend`.
pub fn amg<B: AmgKernels>(
    backend: &B,
    a: &Csr<f64>,
    o: &AmgOptions,
    layout: Layout,
) -> (Hierarchy, Amg<B, f64>) {
    let h = Hierarchy::build(a, o).unwrap();
    let m = Amg::new(backend, &h, &CycleOptions { layout }).unwrap();
    (h, m)
}

/// y = M x on the host through the backend.
pub fn apply<B: Backend>(backend: &B, m: &dyn LinearOperator<B, f64>, x: &[f64]) -> Vec<f64> {
    let xv = backend.upload(x).unwrap();
    let mut y = backend.zeros::<f64>(x.len()).unwrap();
    m.apply(&xv, &mut y).unwrap();
    backend.download(&y).unwrap()
}

pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// The device under test, or `None` (and one line on stdout) when there is none.
#[cfg(feature = "cuda")]
pub fn gpu(test: &str) -> Option<&'static gpuq_cuda::CudaBackend> {
    use gpuq_cuda::CudaBackend;
    use std::sync::OnceLock;
    static GPU: OnceLock<Option<CudaBackend>> = OnceLock::new();
    let g = GPU
        .get_or_init(|| match CudaBackend::new(0) {
            Ok(g) => Some(g),
            Err(gpuq_core::Error::NoCudaDevice(_)) => None,
            Err(e) => panic!("the CUDA backend failed to start: {e}"),
        })
        .as_ref();
    if g.is_none() {
        println!("{test}: skipped (no CUDA device)");
    }
    g
}
