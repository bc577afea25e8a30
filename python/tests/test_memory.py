"""Memory over a long session: no growth over 1000 solves (on every backend), and a
device out of memory raised as MemoryError, after which the device is usable again and
gpuq holds none of what the failed call took (CuPy can allocate it)."""

import os

import numpy as np
import pytest
import scipy.sparse as sp

import gpuq

from conftest import laplace2d


def _rss_bytes() -> int:
    """The process's resident memory (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_no_memory_growth_over_1000_solves(backend):
    a = laplace2d(40)
    b = np.ones(a.shape[0])
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend=backend)

    def solves(count):
        for k in range(count):
            if k % 2:
                x, report = gpuq.solve(a, b, precond="jacobi", tol=1e-3, backend=backend)
                assert report.converged
            else:
                x = ml.solve(b, tol=1e-3)
            assert x.shape == b.shape

    # The allocator's and the backend's caches fill during the first calls.
    solves(100)
    before = _rss_bytes()
    solves(1000)
    grown = _rss_bytes() - before
    # A leak of a vector (12.8 KB) on either path would pass 1 MB six times over.
    assert grown < 1 << 20, f"resident memory grew by {grown / 2**20:.2f} MiB over 1000 solves"


def _cuda_devices() -> int:
    if "cuda" not in gpuq.backends():
        return 0
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


@pytest.mark.skipif(_cuda_devices() == 0, reason="no CUDA device (or no CuPy)")
def test_device_out_of_memory_is_memory_error_and_the_device_recovers():
    import cupy as cp

    n = 1_000_000
    a = sp.diags(np.linspace(1.0, 2.0, n)).tocsr()
    b = np.ones(n)
    x, report = gpuq.solve(a, b, method="gmres:30", backend="cuda")
    assert report.converged
    # The first solve's GMRES(30) work vectors (about 250 MB) stay in gpuq's pool.
    free_before = cp.cuda.runtime.memGetInfo()[0]
    # GMRES(m) keeps m basis vectors on the device: 40000 of 10^6 doubles are 320 GB.
    with pytest.raises(MemoryError, match="device memory"):
        gpuq.solve(a, b, method="gmres:40000", backend="cuda")
    # The out-of-memory error gave gpuq's cached memory back to the driver.
    free_after = cp.cuda.runtime.memGetInfo()[0]
    assert free_after > free_before + (128 << 20), (free_before, free_after)
    filler = cp.empty(free_after // 2, dtype=cp.uint8)
    del filler
    cp.get_default_memory_pool().free_all_blocks()
    x, report = gpuq.solve(a, b, method="gmres:30", backend="cuda")
    assert report.converged and np.allclose(a @ x, b, rtol=1e-6)
