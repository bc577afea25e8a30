"""Monte Carlo linear solvers: forward and adjoint Neumann-Ulam estimates, and MCSA.

For real matrices whose Jacobi iteration matrix I - D^-1 A has spectral radius below 1
(gpuq estimates it and warns otherwise).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _gpuq
from ._report import MonteCarloReport
from ._sparse import csr_arrays, refuse_cupy, vector

__all__ = ["solve"]


def solve(
    A,
    b,
    method: str = "mcsa",
    histories: int = 100_000,
    tol: Optional[float] = None,
    seed: int = 1,
    batches: int = 10,
    estimator: Optional[str] = None,
    backend: str = "auto",
    *,
    cutoff: float = 1e-9,
    max_steps: int = 10_000,
    maxiter: int = 1000,
    stagnation_window: int = 20,
):
    """Solves A x = b by Monte Carlo; returns ``(x, report)``.

    ``method``: ``mcsa`` (Monte Carlo synthetic acceleration: a solve to ``tol``, default
    1e-8, with ``histories`` per correction), ``mc-forward`` or ``mc-adjoint`` (an estimate
    from ``histories`` histories with its standard error; held to ``tol`` only when given:
    without it the status is ``estimate``, or ``inaccurate`` when the relative residual
    exceeds 1). ``estimator``: ``collision`` or ``expected`` (default: ``expected`` for
    MCSA, else ``collision``). The same ``seed`` gives the same estimate on every backend.
    """
    refuse_cupy(A, b)
    shape, indptr, indices, data = csr_arrays(A, np.float64)
    if shape[0] != shape[1]:
        raise ValueError(f"A must be square, not {shape[0]} x {shape[1]}")
    if np.iscomplexobj(np.asarray(b)):
        raise ValueError("the Monte Carlo methods take real systems")
    bv = vector(b, shape[0], np.float64, "b")
    x, text = _gpuq.mc_solve(
        shape,
        indptr,
        indices,
        data,
        bv,
        method,
        int(histories),
        tol,
        int(seed),
        int(batches),
        estimator,
        float(cutoff),
        int(max_steps),
        int(maxiter),
        int(stagnation_window),
        backend,
    )
    return x, MonteCarloReport._from_json(text)
