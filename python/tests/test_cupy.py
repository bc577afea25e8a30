"""gpuq.solve on CuPy arrays, in place on the GPU: the solution a CuPy array on the
arrays' device, no host copy of A, b or x (the report's transfer counters), streams
respected. Skipped without CuPy or a CUDA device."""

import numpy as np
import pytest
import scipy.sparse as sp

import gpuq

from conftest import laplace2d

cp = pytest.importorskip("cupy")
csp = pytest.importorskip("cupyx.scipy.sparse")


def _devices() -> int:
    try:
        return cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError:
        return 0


pytestmark = pytest.mark.skipif(
    _devices() == 0 or "cuda" not in gpuq.backends(), reason="no CUDA device"
)

M = 48  # laplace2d(M): n = 2304 unknowns, 11,328 entries


def problem(dtype=np.float64):
    """A on the host and on the device (cupyx CSR), x_true and b = A x_true on both."""
    a = laplace2d(M).astype(dtype)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(a.shape[0])
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(a.shape[0])
    x = x.astype(dtype)
    b = a @ x
    return a, csp.csr_matrix(a), x, b, cp.asarray(b)


def true_residual(A, x, b) -> float:
    return float(cp.linalg.norm(b - A @ x) / cp.linalg.norm(b))


def check_in_place(device, host, a, b):
    """The copies of a solve on CUDA arrays (report `device`) against the same solve from
    SciPy/NumPy data (`host`, A = `a`, b = `b` on the host): nothing of n values went up,
    and the device solve spared A's and b's uploads and x's download (the scalars the
    iterations read back are the same)."""
    t, h = device.transfers, host.transfers
    assert device.iterations == host.iterations
    assert t["bytes_up"] < b.nbytes, t
    assert h["bytes_up"] - t["bytes_up"] >= a.data.nbytes + a.indices.nbytes + b.nbytes, (t, h)
    assert h["bytes_down"] - t["bytes_down"] >= b.nbytes, (t, h)


@pytest.mark.parametrize(
    "dtype, method, tol",
    [
        (np.float64, "cg", 1e-10),
        (np.float32, "cg", 1e-4),
        (np.complex128, "bicgstab", 1e-10),
        (np.complex64, "gmres:40", 1e-4),
    ],
)
def test_a_cupy_matrix_and_vector_are_solved_in_place(dtype, method, tol):
    a, A, x_true, b_host, b = problem(dtype)
    n = a.shape[0]
    x, report = gpuq.solve(A, b, method=method, tol=tol)
    assert isinstance(x, cp.ndarray) and x.dtype == dtype and x.shape == (n,)
    assert x.device.id == b.device.id
    assert report.converged, report
    assert report.backend.startswith("cuda") and report.layout == "csr"
    assert true_residual(A, x, b) <= 2 * tol
    # The same solve from NumPy data moves A and b up and x down.
    x_host, host = gpuq.solve(a, b_host, method=method, tol=tol, backend="cuda", layout="csr")
    check_in_place(report, host, a, b_host)
    np.testing.assert_allclose(x.get(), x_host, rtol=0, atol=50 * tol * np.abs(x_host).max())


def test_the_inputs_are_left_as_they_were():
    a, A, _, _, b = problem()
    x0 = cp.ones(a.shape[0])
    copies = [v.copy() for v in (A.data, A.indices, A.indptr, b, x0)]
    x, report = gpuq.solve(A, b, x0=x0, tol=1e-10)
    assert report.converged
    assert x.data.ptr not in (b.data.ptr, x0.data.ptr)
    for before, after in zip(copies, (A.data, A.indices, A.indptr, b, x0)):
        assert bool((before == after).all())


def test_an_initial_guess_on_the_device_is_used():
    _, A, x_true, _, b = problem()
    cold = gpuq.solve(A, b, tol=1e-10)[1]
    x0 = cp.asarray(x_true) + 1e-6
    x, warm = gpuq.solve(A, b, x0=x0, tol=1e-10)
    assert warm.converged and warm.iterations < cold.iterations
    assert true_residual(A, x, b) <= 1e-10


@pytest.mark.parametrize("method", ["qmr", "tfqmr", "bicgstab-l:2", "gmres"])
@pytest.mark.parametrize("precond", ["none", "jacobi"])
def test_every_method_and_jacobi_run_on_a_cupy_matrix(method, precond):
    a, A, _, b_host, b = problem()
    options = dict(method=method, precond=precond, tol=1e-9, maxiter=5000)
    x, report = gpuq.solve(A, b, **options)
    assert report.converged, report
    assert report.preconditioner == precond
    assert true_residual(A, x, b) <= 1e-9
    host = gpuq.solve(a, b_host, backend="cuda", layout="csr", **options)[1]
    check_in_place(report, host, a, b_host)


def test_a_scipy_matrix_with_a_cupy_vector_uploads_a_only():
    a, A, _, b_host, b = problem()
    x, report = gpuq.solve(a, b, tol=1e-10)
    assert isinstance(x, cp.ndarray) and report.converged
    assert true_residual(A, x, b) <= 1e-10
    t = report.transfers
    h = gpuq.solve(a, b_host, tol=1e-10, backend="cuda")[1].transfers
    assert t["bytes_up"] >= a.data.nbytes  # A went up
    assert h["bytes_up"] - t["bytes_up"] >= b_host.nbytes  # b did not
    assert h["bytes_down"] - t["bytes_down"] >= b_host.nbytes  # nor did x come down
    for precond in ("jacobi", "block2"):
        x, report = gpuq.solve(a, b, precond=precond, tol=1e-10)
        assert report.converged and report.preconditioner == precond
        assert true_residual(A, x, b) <= 1e-10


def test_amg_on_a_cupy_matrix_is_built_on_the_device():
    a, A, _, b_host, b = problem()
    x, report = gpuq.solve(A, b, precond="amg", tol=1e-10)
    assert isinstance(x, cp.ndarray) and x.dtype == np.float64 and report.converged
    assert report.preconditioner == "amg, f32 cycle"
    assert report.to_dict()["amg"]["levels"][0]["rows"] == a.shape[0]
    assert true_residual(A, x, b) <= 1e-10
    # The same iterations as from SciPy data; A never crossed to the host or back (the
    # traffic is the smoother's n-sized diagonals and the coarse levels).
    host = gpuq.solve(a, b_host, precond="amg", tol=1e-10, backend="cuda")[1]
    assert abs(report.iterations - host.iterations) <= 1, (report.iterations, host.iterations)
    t = report.transfers
    assert t["bytes_up"] + t["bytes_down"] < a.data.nbytes + a.indices.nbytes, t
    # float32 data is solved in float64; a SciPy A with a CuPy b; complex is refused.
    x32, r32 = gpuq.solve(A.astype(cp.float32), b.astype(cp.float32), precond="amg", tol=1e-6)
    assert r32.converged and x32.dtype == np.float64
    xs, rs = gpuq.solve(a, b, precond="amg", tol=1e-10)
    assert rs.converged and true_residual(A, xs, b) <= 1e-10
    with pytest.raises(ValueError, match="real matrices"):
        gpuq.solve(A.astype(cp.complex128), b, precond="amg")


def test_amg_on_a_singular_cupy_matrix_projects_its_null_space():
    a, _, x_true, _, _ = problem()
    # Pure Neumann: every row sums to zero, the constants span the null space.
    a = (a - sp.diags(np.asarray(a.sum(axis=1)).ravel())).tocsr()
    x_true = x_true - x_true.mean()
    A, b = csp.csr_matrix(a), cp.asarray(a @ x_true)
    b_before = b.copy()
    x, report = gpuq.solve(A, b, precond="amg", tol=1e-9)
    assert report.converged and report.to_dict()["amg"]["null_space_dim"] == 1
    assert bool((b == b_before).all())  # b is projected in a copy
    assert abs(float(x.sum())) <= 1e-8 * float(cp.abs(x).sum())
    np.testing.assert_allclose(x.get(), x_true, atol=1e-6 * np.abs(x_true).max())


def test_a_cupy_matrix_with_a_numpy_vector_returns_numpy():
    a, A, _, b_host, _ = problem()
    x, report = gpuq.solve(A, b_host, tol=1e-10)
    assert isinstance(x, np.ndarray) and report.converged
    assert np.linalg.norm(b_host - a @ x) <= 1e-10 * np.linalg.norm(b_host)


def test_other_cupy_formats_and_dense_matrices_are_converted_on_the_device():
    a, A, _, _, b = problem()
    for other in (A.tocsc(), A.tocoo(), cp.asarray(a.toarray())):
        x, report = gpuq.solve(other, b, tol=1e-10)
        assert report.converged and true_residual(A, x, b) <= 1e-10


def test_the_arrays_streams_are_respected():
    a, A, x_true, _, _ = problem()
    with cp.cuda.Stream(non_blocking=True):
        # b is made on this stream right before the call: gpuq's stream must wait for it.
        for _ in range(3):
            b = A @ cp.asarray(x_true)
            x, report = gpuq.solve(A, b, tol=1e-10)
            # and CuPy's stream sees x once the call returns
            assert report.converged and true_residual(A, x, b) <= 1e-10


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@pytest.mark.parametrize("stream", ["new", "null", "per-thread"])
def test_gpuq_waits_for_the_work_queued_on_the_arrays_stream(stream):
    """b is written on CuPy's stream behind a kernel that spins for about 0.1 s: read
    without waiting, b would still be zeros (and x zero). A is SciPy's: the check of a
    CuPy matrix's arrays reads on CuPy's stream, which would wait in gpuq's stead."""
    a, A, x_true, _, b_true = problem()
    spin = cp.RawKernel(SPIN, "spin")
    streams = {
        "new": lambda: cp.cuda.Stream(non_blocking=True),
        "null": lambda: cp.cuda.Stream.null,
        "per-thread": lambda: cp.cuda.Stream.ptds,
    }
    with streams[stream]():
        b = cp.zeros_like(b_true)
        spin((1,), (1,), (np.int64(200_000_000),))
        b[...] = b_true
        x, report = gpuq.solve(a, b, tol=1e-10)
        assert report.converged and true_residual(A, x, b_true) <= 1e-10


def test_another_producers_cuda_arrays_are_taken():
    torch = pytest.importorskip("torch")
    a, A, _, _, b = problem()
    bt = torch.as_tensor(b.get(), device="cuda")
    x, report = gpuq.solve(A, bt, tol=1e-10)
    assert isinstance(x, cp.ndarray) and report.converged
    assert true_residual(A, x, b) <= 1e-10


def test_cuda_arrays_with_the_cpu_backend_or_a_bad_layout_are_refused():
    _, A, _, _, b = problem()
    with pytest.raises(ValueError, match="backend must be 'cuda' or 'auto'"):
        gpuq.solve(A, b, backend="cpu")
    with pytest.raises(ValueError, match="in place, in CSR"):
        gpuq.solve(A, b, layout="sell")
    with pytest.raises(ValueError, match="block2"):
        gpuq.solve(A, b, precond="block2")


def test_a_bad_cupy_matrix_is_refused_before_the_kernels_read_it():
    _, A, _, _, b = problem()
    bad = A.copy()
    bad.indices[3] = A.shape[1] + 5
    with pytest.raises(ValueError, match="column indices"):
        gpuq.solve(bad, b)
    with pytest.raises(ValueError, match="row 1 "):
        zero = A.copy()
        zero.data[0] = 0.0  # laplace2d's first entry is the diagonal of row 1
        gpuq.solve(zero, b, precond="jacobi")


@pytest.mark.skipif(_devices() < 2, reason="one CUDA device")
def test_arrays_on_two_devices_are_refused_and_device_one_is_used():
    _, A, _, b_host, b = problem()
    with pytest.raises(ValueError, match="devices \\[0, 1\\]"):
        with cp.cuda.Device(1):
            gpuq.solve(A, cp.asarray(b_host))
    with cp.cuda.Device(1):
        A1, b1 = csp.csr_matrix(A.get()), cp.asarray(b_host)
    x, report = gpuq.solve(A1, b1, tol=1e-10)
    assert x.device.id == 1 and report.converged and report.backend.endswith("1")


def test_sparse_a_in_scipy_and_x0_on_the_device():
    a, _, x_true, b_host, _ = problem()
    x, report = gpuq.solve(sp.csr_matrix(a), b_host, x0=cp.zeros(a.shape[0]), tol=1e-10)
    assert isinstance(x, np.ndarray) and report.converged
