"""Uncertainty quantification: expectations of functions of standard normal variables.

``gpuq.uq.expectation(g, dim, points=5)`` is E[g(q)] for q ~ N(0, I_dim) by the tensor
Gauss-Hermite rule with ``points`` per axis (``points ** dim`` evaluations), g an
expression in ``x1..xn``, a built-in integrand's name, or a Python function of an
``(m, dim)`` array of points returning ``m`` values (called in batches). The static
response, PSD, convolution and SDOF procedures of ``gpuq uq`` are not in the Python
package yet.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import numpy as np

from . import _gpuq
from ._report import Report

__all__ = ["expectation", "ExpectationResult"]


class ExpectationResult(Report):
    """An expectation: ``estimate``, ``points`` (evaluations), ``time_s``."""

    _SHOWN = ("estimate", "points", "time_s")


def expectation(
    g: Union[str, Callable[[np.ndarray], np.ndarray]],
    dim: int,
    points: int = 5,
    backend: str = "auto",
    *,
    a: Sequence[float] = (),
    u: Sequence[float] = (),
) -> ExpectationResult:
    """E[g(q)], q ~ N(0, I_dim), by the tensor Gauss-Hermite rule with ``points`` per axis
    (1..64 per axis, 1..16 axes): exact for polynomials of degree below ``2 points`` in
    each variable. ``g``: an expression (compiled for the GPU on ``backend="cuda"``), a
    built-in's name (parameters ``a``, ``u``), or a Python function of an ``(m, dim)``
    array (evaluated on the host in batches). A NaN or infinite value is a ``ValueError``.
    """
    from . import _BUILTINS, _batch_function

    expr = builtin = function = None
    if callable(g):
        function = _batch_function(g)
    elif isinstance(g, str) and g in _BUILTINS:
        builtin = g
    elif isinstance(g, str):
        expr = g
    else:
        raise TypeError(f"g must be an expression, a built-in's name or a callable, not {type(g)}")
    text = _gpuq.uq_expectation(
        int(dim),
        int(points),
        expr,
        builtin,
        [float(t) for t in a],
        [float(t) for t in u],
        backend,
        function,
    )
    return ExpectationResult._from_json(text)
