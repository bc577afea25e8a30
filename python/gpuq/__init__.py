"""gpuq: GPU-accelerated sparse linear solvers, algebraic multigrid, Monte Carlo linear
solvers and adaptive cubature, written in Rust, on the CPU or a CUDA GPU.

* :func:`solve`: ``x, report = gpuq.solve(A, b, method="cg", precond="amg")`` for a SciPy
  sparse matrix and a NumPy vector, real or complex, float32 or float64; or in place on the
  GPU for a ``cupyx.scipy.sparse`` matrix and CuPy vectors (x then a CuPy array);
* :mod:`gpuq.amg`: PyAMG's interface (``smoothed_aggregation_solver``, ``ml.solve``,
  ``ml.aspreconditioner``) on any backend;
* :func:`integrate`: adaptive cubature of an expression or a built-in integrand;
* :mod:`gpuq.montecarlo`: Monte Carlo estimates and MCSA;
* :mod:`gpuq.uq`: expectations of functions of standard normal variables;
* :func:`backends`: which backends this machine has.

Every call releases the GIL while gpuq works. Errors are ``ValueError`` (the input),
``MemoryError`` (not enough host or device memory) or ``RuntimeError`` (the device).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import numpy as np

from . import _gpuq
from ._report import IntegrationResult, MonteCarloReport, Report, SolveReport
from ._sparse import compute_dtype, csr_arrays, on_device, optional_vector, vector

__version__ = _gpuq.__version__

__all__ = [
    "solve",
    "integrate",
    "backends",
    "Report",
    "SolveReport",
    "IntegrationResult",
    "MonteCarloReport",
    "amg",
    "montecarlo",
    "uq",
]

#: The Krylov methods of :func:`solve` (``bicgstab-l:L`` and ``gmres:M`` take a parameter).
METHODS = tuple(_gpuq.METHODS)
#: The preconditioners of :func:`solve`.
PRECONDITIONERS = tuple(_gpuq.PRECONDITIONERS)


def backends() -> list:
    """The backends this machine can run: ``["cpu"]``, or ``["cpu", "cuda"]`` when a CUDA
    device is present (the driver is opened at run time, as by the CLI)."""
    return list(_gpuq.backends())


def solve(
    A,
    b,
    method: str = "cg",
    precond: str = "none",
    tol: float = 1e-8,
    maxiter: Optional[int] = None,
    x0=None,
    backend: str = "auto",
    *,
    atol: float = 0.0,
    stagnation_window: int = 500,
    layout: str = "auto",
    **amg_options,
):
    """Solves A x = b; returns ``(x, report)``.

    ``A``: a SciPy sparse matrix or array of any format (CSR, CSC, COO, BSR, ...; converted
    to CSR by SciPy, no Python loop) or a dense 2-D array; ``b`` (and ``x0``): NumPy
    vectors. The computation runs in the common type of A and b: float32, float64,
    complex64 or complex128 (integers as float64). ``method``: ``cg``, ``bicgstab``,
    ``bicgstab-l[:L]``, ``tfqmr``, ``qmr`` or ``gmres[:M]``. ``precond``: ``none``,
    ``jacobi``, ``block2`` (2x2-block Jacobi) or ``amg`` (real matrices; the AMG options of
    :func:`gpuq.amg.smoothed_aggregation_solver` as keywords: ``block=``, ``B=`` or
    ``near_null_space=``, ``coords=``, ``smoother=``, ...). ``tol``/``atol``: the true
    residual must meet ``||b - A x|| <= max(tol ||b||, atol)``. ``maxiter``: iteration cap
    (default 10 n, at least 100). ``backend``: ``cpu``, ``cuda`` or ``auto`` (CUDA when a
    device is present). ``layout``: the matrix storage on the backend (``auto``, ``csr``,
    ``sell``, ``sell:C:SIGMA``, ``bsr:B``).

    ``x`` is a NumPy array of the compute type (None after a breakdown); ``report`` a
    :class:`SolveReport` (``report.converged``, ``report.status``, ``report.iterations``,
    ``report.relative_residual``, ``report.time_s``, ``report.transfers``, ...,
    ``report.to_dict()``). A solve that misses its tolerance is not an exception: look at
    ``report.converged``.

    CUDA arrays are used in place: when A is a ``cupyx.scipy.sparse`` matrix (CSR; other
    formats are converted on the device) or a 2-D CuPy array, or b or x0 a CuPy array (or
    any array with ``__cuda_array_interface__``), the solve runs on their CUDA device
    (``backend`` ``cuda`` or ``auto``; ``cpu`` is a ``ValueError``), reading A's column
    indices and values and b where they are, and writing the solution into a CuPy array
    allocated on that device (x0 copied into it): ``x`` is that CuPy array when b is a CUDA
    array (else a NumPy array). No host copy of A, b or x is made; A's row pointers are
    widened to int64 on the device. gpuq's stream waits for the stream each array names
    (CuPy's current stream) before reading, and the call returns once x is written. With
    CUDA arrays: ``precond`` ``none``, ``jacobi`` or ``amg`` (``block2`` too for a SciPy A;
    ``amg`` in float64, its hierarchy built on the device from a CuPy A where it is), every
    method, ``layout`` ``auto`` or ``csr`` for a CuPy A (used in place in CSR), any layout
    for a SciPy A (uploaded).
    """
    name = method.split(":")[0]
    if name not in METHODS and name != "pcg":
        raise ValueError(f"unknown method {method!r} (available: {', '.join(METHODS)})")
    if precond not in PRECONDITIONERS:
        raise ValueError(
            f"unknown preconditioner {precond!r} (available: {', '.join(PRECONDITIONERS)})"
        )
    if any(on_device(v) for v in (A, b, x0)):
        from ._device import solve as solve_on_device

        return solve_on_device(
            A, b, x0, method, precond, tol, maxiter, backend, atol, stagnation_window,
            layout, amg_options,
        )
    b_array = np.asarray(b)
    dtype = compute_dtype(getattr(A, "dtype", np.float64), b_array.dtype)
    shape, indptr, indices, data = csr_arrays(A, dtype)
    if shape[0] != shape[1]:
        raise ValueError(f"A must be square, not {shape[0]} x {shape[1]}")
    bv = vector(b_array, shape[0], dtype, "b")
    xv = optional_vector(x0, shape[0], dtype, "x0")
    params = None
    if precond == "amg":
        from .amg import _params
        from ._sparse import block_size

        if "near_null_space" in amg_options:
            amg_options["B"] = amg_options.pop("near_null_space")
        amg_options.setdefault("block", block_size(A))
        params = _params(shape[0], **amg_options)
    elif amg_options:
        raise TypeError(
            "options that only precond='amg' takes: " + ", ".join(sorted(amg_options))
        )
    x, text = _gpuq.solve(
        shape,
        indptr,
        indices,
        data,
        bv,
        xv,
        method,
        precond,
        float(tol),
        float(atol),
        maxiter,
        int(stagnation_window),
        backend,
        layout,
        params,
    )
    return x, SolveReport._from_json(text)


def integrate(
    f: Union[str, Callable[[np.ndarray], np.ndarray]],
    dim: int,
    lo: Union[float, Sequence[float]] = 0.0,
    hi: Union[float, Sequence[float]] = 1.0,
    rel_tol: float = 1e-3,
    abs_tol: float = 0.0,
    method: str = "auto",
    backend: str = "auto",
    max_time: Optional[float] = None,
    *,
    rule: str = "cuhre",
    max_evals: int = 0,
    a: Sequence[float] = (),
    u: Sequence[float] = (),
) -> IntegrationResult:
    """Integrates ``f`` over the box [lo, hi]^dim (or the box of the per-axis bounds).

    ``f``: an expression in ``x1..xn`` (or ``x[i]``), e.g. ``"exp(-sum(i, 1, n, x[i]^2))"``,
    compiled to closures on the CPU and to CUDA C by NVRTC on the GPU; or the name of a
    built-in (``f1``..``f5``, ``genz-oscillatory``, ``genz-product-peak``,
    ``genz-corner-peak``, ``genz-gaussian``, ``genz-c0``, ``genz-discontinuous``,
    ``sum-of-squares``; their parameters ``a`` and ``u``); or a Python function of an
    ``(m, dim)`` float64 array of points returning ``m`` values, called once per round of
    boxes on the host (whatever the backend; ``method="auto"`` is then ``breadth-first``,
    which evaluates whole rounds; an exception it raises is raised again, a NaN or a wrong
    shape is a ``ValueError``). ``method``: ``auto``, ``cuhre``, ``two-phase``, ``breadth-first``,
    ``gauss-legendre:N``, ``gauss-legendre:auto`` or ``gauss-hermite:N``. ``max_evals``: 0
    for about a minute of the backend's throughput. ``max_time``: seconds (the estimate so
    far is returned when it passes).

    Returns an :class:`IntegrationResult` (``.estimate``, ``.error``, ``.converged``,
    ``.evaluations``, ``.status``).
    """
    dim = int(dim)
    function = None
    if callable(f):
        function = _batch_function(f)
    elif not isinstance(f, str):
        raise TypeError(f"f must be an expression, a built-in's name or a callable, not {type(f)}")

    def bounds(v, name):
        arr = np.atleast_1d(np.asarray(v, dtype=np.float64))
        if arr.size == 1:
            arr = np.full(dim, float(arr[0]))
        if arr.shape != (dim,):
            raise ValueError(f"{name} must be a number or {dim} numbers")
        return [float(t) for t in arr]

    if function is not None:
        expr, builtin = None, None
    elif f in _BUILTINS:
        expr, builtin = None, f
    else:
        expr, builtin = f, None
    text = _gpuq.integrate(
        dim,
        bounds(lo, "lo"),
        bounds(hi, "hi"),
        expr,
        builtin,
        [float(t) for t in a],
        [float(t) for t in u],
        float(rel_tol),
        float(abs_tol),
        method,
        rule,
        int(max_evals),
        max_time,
        backend,
        function,
    )
    return IntegrationResult._from_json(text)


_BUILTINS = frozenset(_gpuq.BUILTINS)


def _batch_function(user):
    """``user`` (a function of an (m, dim) array) as the core calls it: its values as a
    contiguous float64 vector of m entries, a ValueError for another shape."""

    def function(x):
        values = np.asarray(user(x), dtype=np.float64)
        if values.shape not in ((x.shape[0],), (x.shape[0], 1)):
            raise ValueError(
                f"the integrand returned shape {values.shape} for {x.shape[0]} points "
                f"(expected ({x.shape[0]},))"
            )
        return np.ascontiguousarray(values.reshape(-1))

    return function

from . import amg, montecarlo, uq  # noqa: E402  (they import this module's helpers)
