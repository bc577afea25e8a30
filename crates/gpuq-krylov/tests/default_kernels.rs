//! Every Krylov method on a backend that implements only the core operations:
//! `Plain` forwards `Backend` and `SparseBackend` to the CPU backend and takes
//! every solver-owned kernel trait with its default methods. Its solves must
//! follow the CPU backend's (fused) ones: iteration counts within 1, solutions
//! equal to rounding.

use gpuq_core::{Backend, Complex64, RealScalar, Result, Scalar, Stats};
use gpuq_cpu::{CpuBackend, CpuVector};
use gpuq_krylov::{
    solve_csr, BicgstabKernels, BicgstablKernels, CgKernels, GmresKernels, KrylovOptions, Method,
    Preconditioner, QmrKernels, ReplayByRerun, SolverConfig, TfqmrKernels,
};
use gpuq_sparse::{generators, Csr, Layout, SparseBackend};

/// The CPU backend seen through its core operations only.
#[derive(Clone)]
struct Plain(CpuBackend);

impl Backend for Plain {
    type Vector<T: Scalar> = CpuVector<T>;

    fn name(&self) -> String {
        "plain".into()
    }
    fn upload<T: Scalar>(&self, host: &[T]) -> Result<CpuVector<T>> {
        self.0.upload(host)
    }
    fn download<T: Scalar>(&self, v: &CpuVector<T>) -> Result<Vec<T>> {
        self.0.download(v)
    }
    fn zeros<T: Scalar>(&self, n: usize) -> Result<CpuVector<T>> {
        self.0.zeros(n)
    }
    fn fill<T: Scalar>(&self, x: &mut CpuVector<T>, value: T) -> Result<()> {
        self.0.fill(x, value)
    }
    fn copy<T: Scalar>(&self, x: &CpuVector<T>, y: &mut CpuVector<T>) -> Result<()> {
        self.0.copy(x, y)
    }
    fn scal<T: Scalar>(&self, alpha: T, x: &mut CpuVector<T>) -> Result<()> {
        self.0.scal(alpha, x)
    }
    fn axpy<T: Scalar>(&self, alpha: T, x: &CpuVector<T>, y: &mut CpuVector<T>) -> Result<()> {
        self.0.axpy(alpha, x, y)
    }
    fn axpby<T: Scalar>(
        &self,
        alpha: T,
        x: &CpuVector<T>,
        beta: T,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        self.0.axpby(alpha, x, beta, y)
    }
    fn mul_elementwise<T: Scalar>(
        &self,
        x: &CpuVector<T>,
        y: &CpuVector<T>,
        z: &mut CpuVector<T>,
    ) -> Result<()> {
        self.0.mul_elementwise(x, y, z)
    }
    fn dotc<T: Scalar>(&self, x: &CpuVector<T>, y: &CpuVector<T>) -> Result<T> {
        self.0.dotc(x, y)
    }
    fn dotu<T: Scalar>(&self, x: &CpuVector<T>, y: &CpuVector<T>) -> Result<T> {
        self.0.dotu(x, y)
    }
    fn nrm2<T: Scalar>(&self, x: &CpuVector<T>) -> Result<T::Real> {
        self.0.nrm2(x)
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
    fn reset_stats(&self) {
        self.0.reset_stats()
    }
}

impl SparseBackend for Plain {
    type Matrix<T: Scalar> = <CpuBackend as SparseBackend>::Matrix<T>;

    fn upload_matrix<T: Scalar>(&self, a: &Csr<T>, layout: Layout) -> Result<Self::Matrix<T>> {
        self.0.upload_matrix(a, layout)
    }
    fn spmv<T: Scalar>(
        &self,
        alpha: T,
        a: &Self::Matrix<T>,
        x: &CpuVector<T>,
        beta: T,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        self.0.spmv(alpha, a, x, beta, y)
    }
}

impl ReplayByRerun for Plain {}
impl CgKernels for Plain {}
impl BicgstabKernels for Plain {}
impl BicgstablKernels for Plain {}
impl TfqmrKernels for Plain {}
impl QmrKernels for Plain {}
impl GmresKernels for Plain {}

const METHODS: [Method; 7] = [
    Method::Cg,
    Method::Bicgstab,
    Method::BicgstabL { l: 1 },
    Method::BicgstabL { l: 4 },
    Method::Tfqmr,
    Method::Qmr,
    Method::Gmres { restart: 12 },
];

/// Solves on the CPU backend and on `Plain` and compares.
fn same_solve<T: Scalar>(a: &Csr<T>, b: &[T], method: Method, precond: Preconditioner) {
    let config = SolverConfig {
        method,
        precond,
        options: KrylovOptions {
            rtol: 1e-10,
            max_iter: Some(2000),
            ..KrylovOptions::default()
        },
        layout: Layout::Csr,
    };
    let what = format!("{method:?} {precond:?} on {} rows", b.len());
    let (xc, rc) = solve_csr(&CpuBackend::new(), a, b, &config).unwrap();
    let (xp, rp) = solve_csr(&Plain(CpuBackend::new()), a, b, &config).unwrap();
    assert!(rc.converged && rp.converged, "{what}: {rc:?} / {rp:?}");
    assert!(
        rc.iterations.abs_diff(rp.iterations) <= 1,
        "{what}: {} vs {} iterations",
        rc.iterations,
        rp.iterations
    );
    let scale = xc
        .iter()
        .map(|v| v.magnitude().to_f64_lossless())
        .fold(0.0, f64::max);
    let diff = xc
        .iter()
        .zip(&xp)
        .map(|(u, v)| (*u - *v).magnitude().to_f64_lossless())
        .fold(0.0, f64::max);
    assert!(diff <= 1e-8 * scale, "{what}: solutions differ by {diff:e}");
}

fn rhs<T: Scalar>(n: usize) -> Vec<T> {
    (0..n)
        .map(|i| T::from_f64(1.0 + ((i * 7) % 11) as f64 / 11.0))
        .collect()
}

#[test]
fn every_method_on_default_kernels_follows_the_cpu_on_a_laplacian() {
    let a = generators::laplace2d::<f64>(12);
    let b = rhs(a.nrows());
    for method in METHODS {
        for precond in [Preconditioner::None, Preconditioner::Jacobi] {
            same_solve(&a, &b, method, precond);
        }
    }
}

#[test]
fn the_nonsymmetric_methods_on_default_kernels_follow_the_cpu_on_convection() {
    let a = generators::convdiff2d::<f64>(10, 0.8);
    let b = rhs(a.nrows());
    for method in &METHODS[1..] {
        same_solve(&a, &b, *method, Preconditioner::Block2);
    }
}

#[test]
fn complex_systems_on_default_kernels_follow_the_cpu() {
    let a = generators::helmholtz3d::<Complex64>(5, 0.5, 0.3).unwrap();
    let b = rhs(a.nrows());
    for method in &METHODS[1..] {
        same_solve(&a, &b, *method, Preconditioner::Jacobi);
    }
}
