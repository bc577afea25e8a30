//! A test backend that keeps every procedure trait's default body (the
//! sequential host fallback), with vectors and BLAS-1 forwarded to the CPU
//! backend.

/// Implements `gpuq_core::Backend` for a unit struct by forwarding to
/// `gpuq_cpu::CpuBackend`.
macro_rules! forward_backend {
    ($t:ident) => {
        impl gpuq_core::Backend for $t {
            type Vector<T: gpuq_core::Scalar> =
                <gpuq_cpu::CpuBackend as gpuq_core::Backend>::Vector<T>;
            fn name(&self) -> String {
                "sequential".into()
            }
            fn upload<T: gpuq_core::Scalar>(&self, h: &[T]) -> gpuq_core::Result<Self::Vector<T>> {
                gpuq_cpu::CpuBackend::new().upload(h)
            }
            fn download<T: gpuq_core::Scalar>(
                &self,
                v: &Self::Vector<T>,
            ) -> gpuq_core::Result<Vec<T>> {
                gpuq_cpu::CpuBackend::new().download(v)
            }
            fn zeros<T: gpuq_core::Scalar>(&self, n: usize) -> gpuq_core::Result<Self::Vector<T>> {
                gpuq_cpu::CpuBackend::new().zeros(n)
            }
            fn fill<T: gpuq_core::Scalar>(
                &self,
                x: &mut Self::Vector<T>,
                v: T,
            ) -> gpuq_core::Result<()> {
                gpuq_cpu::CpuBackend::new().fill(x, v)
            }
            fn copy<T: gpuq_core::Scalar>(
                &self,
                x: &Self::Vector<T>,
                y: &mut Self::Vector<T>,
            ) -> gpuq_core::Result<()> {
                gpuq_cpu::CpuBackend::new().copy(x, y)
            }
            fn scal<T: gpuq_core::Scalar>(
                &self,
                a: T,
                x: &mut Self::Vector<T>,
            ) -> gpuq_core::Result<()> {
                gpuq_cpu::CpuBackend::new().scal(a, x)
            }
            fn axpy<T: gpuq_core::Scalar>(
                &self,
                a: T,
                x: &Self::Vector<T>,
                y: &mut Self::Vector<T>,
            ) -> gpuq_core::Result<()> {
                gpuq_cpu::CpuBackend::new().axpy(a, x, y)
            }
            fn axpby<T: gpuq_core::Scalar>(
                &self,
                a: T,
                x: &Self::Vector<T>,
                b: T,
                y: &mut Self::Vector<T>,
            ) -> gpuq_core::Result<()> {
                gpuq_cpu::CpuBackend::new().axpby(a, x, b, y)
            }
            fn mul_elementwise<T: gpuq_core::Scalar>(
                &self,
                x: &Self::Vector<T>,
                y: &Self::Vector<T>,
                z: &mut Self::Vector<T>,
            ) -> gpuq_core::Result<()> {
                gpuq_cpu::CpuBackend::new().mul_elementwise(x, y, z)
            }
            fn dotc<T: gpuq_core::Scalar>(
                &self,
                x: &Self::Vector<T>,
                y: &Self::Vector<T>,
            ) -> gpuq_core::Result<T> {
                gpuq_cpu::CpuBackend::new().dotc(x, y)
            }
            fn dotu<T: gpuq_core::Scalar>(
                &self,
                x: &Self::Vector<T>,
                y: &Self::Vector<T>,
            ) -> gpuq_core::Result<T> {
                gpuq_cpu::CpuBackend::new().dotu(x, y)
            }
            fn nrm2<T: gpuq_core::Scalar>(
                &self,
                x: &Self::Vector<T>,
            ) -> gpuq_core::Result<T::Real> {
                gpuq_cpu::CpuBackend::new().nrm2(x)
            }
            fn stats(&self) -> gpuq_core::Stats {
                gpuq_cpu::CpuBackend::new().stats()
            }
            fn reset_stats(&self) {}
        }
    };
}

pub(crate) use forward_backend;
