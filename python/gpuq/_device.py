"""CUDA arrays in place: :func:`gpuq.solve` on CuPy arrays and ``cupyx.scipy.sparse``
matrices (or any array with ``__cuda_array_interface__``), the solution a CuPy array on
the arrays' device, written there by gpuq.

What is copied, all on the device: A's row pointers widened to int64 (gpuq's CSR kernels
read 64-bit offsets, CuPy stores 32-bit ones), A's values or b when their dtype is not the
compute type, x0 into the new x, and for ``method="qmr"`` A^T, for ``precond="jacobi"``
D^-1. The column indices, A's values and b are read in place. Host copies: none of A, b or
x; the check of A's arrays reads five numbers back; a SciPy A is uploaded, as in the NumPy
path. The report's ``transfers`` count the backend's copies during the call.

``precond="amg"`` (real matrices; the solve in float64): the hierarchy is built on the
device from a CuPy A where it is (A's arrays copied there into the setup's layout, the
input checks on the device: no host copy of A), or from a SciPy A uploaded; the method
then runs on A in place with the cycle as preconditioner. The near-null space ``B`` (or
``coords``) is a NumPy array; given vectors are tested against A on the host (A's one
download in that case).
"""

from __future__ import annotations

import numpy as np

from . import _gpuq
from ._report import SolveReport
from ._sparse import as_vector, compute_dtype, csr_arrays, on_device


def check_interfaces(**arrays) -> None:
    """Reads the ``__cuda_array_interface__`` of every array given that has one: a
    ``ValueError`` for a malformed one (version, typestr, strides, data, stream)."""
    for name, a in arrays.items():
        if a is not None and hasattr(a, "__cuda_array_interface__"):
            _gpuq.cuda_array(a, name)


def _cupy():
    """CuPy, which allocates x and converts the inputs on the device."""
    try:
        import cupy
        import cupyx.scipy.sparse
    except ImportError as e:
        raise ImportError(
            "CUDA arrays are used through CuPy, which is not installed "
            "(pip install cupy-cuda12x or cupy-cuda13x)"
        ) from e
    return cupy, cupyx.scipy.sparse


def _device_of(cp, csp, arrays) -> int:
    """The CUDA device all the device arrays among ``arrays`` are on (a ``ValueError``
    when they are on several)."""
    devices = set()
    for a in arrays:
        if csp.issparse(a):
            devices.add(a.data.device.id)
        elif on_device(a):
            devices.add(cp.asarray(a).device.id)
    if len(devices) > 1:
        raise ValueError(
            f"the CUDA arrays are on devices {sorted(devices)}: put them on one device"
        )
    return devices.pop()


def _check_csr(cp, shape, indptr, indices, nnz: int, what: str) -> None:
    """The checks the kernels rely on, for CSR arrays on the device: row pointers from 0
    to nnz and non-decreasing, column indices in [0, ncols). One read of five numbers."""
    n, m = shape
    if indices.size != nnz:
        raise ValueError(f"{what}: {indices.size} column indices for {nnz} values")
    parts = [indptr[:1], indptr[-1:]]
    if n:
        parts.append((cp.diff(indptr) < 0).any().reshape(1))
    if nnz:
        parts += [indices.min().reshape(1), indices.max().reshape(1)]
    v = cp.concatenate([p.astype(cp.int64) for p in parts]).get()
    if v[0] != 0 or v[1] != nnz:
        raise ValueError(f"{what}: indptr must run from 0 to nnz = {nnz}, not {v[0]} to {v[1]}")
    if n and v[2]:
        raise ValueError(f"{what}: indptr decreases")
    if nnz and (v[-2] < 0 or v[-1] >= m):
        raise ValueError(
            f"{what}: column indices run from {v[-2]} to {v[-1]}, outside [0, {m})"
        )


def _device_csr(cp, A, dtype, what: str):
    """``(indptr, indices, data)`` of the CuPy CSR matrix ``A`` as ``solve_cuda`` reads
    them: int64 row pointers (a device copy), int32 column indices and values of
    ``dtype`` (A's own when they are those types), checked."""
    if A.indices.dtype != np.int32:
        if A.indices.size and int(A.indices.max()) >= 2**31:
            raise ValueError(f"{what}: column indices beyond int32")
        indices = A.indices.astype(cp.int32)
    else:
        indices = cp.ascontiguousarray(A.indices)
    data = cp.ascontiguousarray(A.data, dtype=dtype)
    indptr = A.indptr.astype(cp.int64)
    _check_csr(cp, A.shape, indptr, indices, data.size, what)
    return indptr, indices, data


def solve(
    A,
    b,
    x0,
    method: str,
    precond: str,
    tol: float,
    maxiter,
    backend: str,
    atol: float,
    stagnation_window: int,
    layout: str,
    amg_options: dict,
):
    """:func:`gpuq.solve` when A, b or x0 is a CUDA array (see the module docs)."""
    check_interfaces(A=A, b=b, x0=x0)
    if backend == "cpu":
        raise ValueError(
            "A, b or x0 is a CUDA array (__cuda_array_interface__ or a CuPy sparse matrix): "
            "it is used in place on the GPU, so backend must be 'cuda' or 'auto', not 'cpu' "
            "(or pass NumPy/SciPy data, for example b.get())"
        )
    if backend not in ("cuda", "auto"):
        raise ValueError(f"unknown backend '{backend}' (available: cpu, cuda, auto)")
    if amg_options and precond != "amg":
        raise TypeError(
            "options that only precond='amg' takes: " + ", ".join(sorted(amg_options))
        )
    cp, csp = _cupy()
    device = _device_of(cp, csp, (A, b, x0))
    with cp.cuda.Device(device):
        return _solve_on(
            cp, csp, device, A, b, x0, method, precond, tol, maxiter, atol,
            stagnation_window, layout, amg_options,
        )


def _amg_dtype(dtype):
    """float64 for AMG (its hierarchy and cycle are real; the solve runs in float64), a
    ``ValueError`` for complex data."""
    if np.dtype(dtype).kind == "c":
        raise ValueError("precond='amg' takes real matrices (use jacobi or none)")
    return np.dtype(np.float64)


def _solve_on(
    cp, csp, device, A, b, x0, method, precond, tol, maxiter, atol, stagnation_window, layout,
    amg_options,
):
    """:func:`solve` with CuPy's current device ``device``."""
    b_array = cp.asarray(b)
    on_gpu = csp.issparse(A) or on_device(A)
    amg = precond == "amg"
    transpose = inv_diag = None
    if on_gpu:
        if not csp.issparse(A):
            dense = cp.asarray(A)
            if dense.ndim != 2:
                raise ValueError(f"A must be a 2-D matrix, not an array of shape {dense.shape}")
            A = csp.csr_matrix(dense)
        A = A.tocsr()
        dtype = compute_dtype(A.dtype, b_array.dtype)
        if amg:
            dtype = _amg_dtype(dtype)
        shape = (int(A.shape[0]), int(A.shape[1]))
        if shape[0] != shape[1]:
            raise ValueError(f"A must be square, not {shape[0]} x {shape[1]}")
        indptr, indices, data = _device_csr(cp, A, dtype, "A")
        # A with the compute type's values, sharing the arrays.
        typed = csp.csr_matrix((data, A.indices, A.indptr), shape=shape)
        if method.split(":")[0] == "qmr":
            transpose = _device_csr(cp, typed.transpose().tocsr(), dtype, "A^T")
        if precond == "jacobi":
            inv_diag = _inverse_diagonal(cp, typed.diagonal())
    else:
        dtype = compute_dtype(getattr(A, "dtype", np.float64), b_array.dtype)
        if amg:
            dtype = _amg_dtype(dtype)
        shape, indptr, indices, data = csr_arrays(A, dtype)
        if shape[0] != shape[1]:
            raise ValueError(f"A must be square, not {shape[0]} x {shape[1]}")
    n = shape[0]
    params = None
    if amg:
        from .amg import _params
        from ._sparse import block_size

        if "near_null_space" in amg_options:
            amg_options["B"] = amg_options.pop("near_null_space")
        amg_options.setdefault("block", block_size(A))
        params = _params(n, **amg_options)
    bv = as_vector(cp, b_array, n, dtype, "b")
    if x0 is None:
        x = cp.zeros(n, dtype=dtype)
    else:
        x = cp.array(as_vector(cp, x0, n, dtype, "x0"), copy=True)
    ok, text = _gpuq.solve_cuda(
        device,
        shape,
        indptr,
        indices,
        data,
        bv,
        x,
        transpose,
        inv_diag,
        method,
        precond,
        float(tol),
        float(atol),
        maxiter,
        int(stagnation_window),
        layout,
        params,
    )
    report = SolveReport._from_json(text)
    if not ok:
        return None, report
    return (x if on_device(b) else x.get()), report


def _inverse_diagonal(cp, d):
    """D^-1 for Jacobi, on the device; a ``ValueError`` naming the first zero or
    non-finite diagonal entry (one read of the count, and of the entry when there is
    one)."""
    bad = cp.flatnonzero((d == 0) | ~cp.isfinite(d))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"jacobi: the diagonal entry of row {i + 1} (1-based) is {d[i].item()}"
        )
    return 1 / d
