"""Algebraic multigrid with PyAMG's interface, on any gpuq backend.

>>> import gpuq.amg, scipy.sparse as sp, numpy as np
>>> A = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(1000, 1000), format="csr")
>>> ml = gpuq.amg.smoothed_aggregation_solver(A, backend="cpu")
>>> x = ml.solve(np.ones(1000), tol=1e-8)
>>> bool(np.linalg.norm(np.ones(1000) - A @ x) <= 1e-8 * np.sqrt(1000))
True

The hierarchy is built once (on the GPU with ``backend="cuda"``, setup included) and its
cycle stays resident on the backend: ``ml.solve`` runs gpuq's preconditioned Krylov
method there, ``ml.aspreconditioner()`` gives SciPy's solvers the cycle. CuPy arrays are
not taken here yet (a ``TypeError``; :func:`gpuq.solve` takes them in place).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from . import _gpuq
from ._report import SolveReport
from ._sparse import block_size, bsr_arrays, csr_arrays, optional_vector, refuse_cupy, vector

__all__ = ["smoothed_aggregation_solver", "MultilevelSolver", "Level", "rigid_body_modes"]

# PyAMG's accelerators by gpuq's method names.
_ACCEL = {
    "cg": "cg",
    "pcg": "cg",
    "gmres": "gmres",
    "fgmres": "gmres",
    "bicgstab": "bicgstab",
    "tfqmr": "tfqmr",
    "qmr": "qmr",
}


def rigid_body_modes(coords) -> np.ndarray:
    """The rigid body modes of nodes at ``coords`` (an (nodes, d) array, d = 2 or 3): an
    (d * nodes, 3 or 6) array, the near-null space of 2-D or 3-D linear elasticity with
    the unknowns numbered node by node (x, y[, z] of node 0, then node 1, ...). Centred on
    the nodes' mean, so a floating structure's modes are well conditioned. Cost: O(nodes).
    """
    c = np.ascontiguousarray(np.asarray(coords, dtype=np.float64))
    if c.ndim != 2:
        raise ValueError(f"coords must be an (nodes, d) array, not shape {c.shape}")
    return _gpuq.rigid_body_modes(c)


def _strength(strength) -> float:
    """gpuq's strength threshold eps from a number (eps itself) or PyAMG's
    ('symmetric', {'theta': t}): gpuq's test e_ij^2 >= eps e_ii e_jj (e the block norms)
    is PyAMG's e_ij >= theta sqrt(e_ii e_jj) with eps = theta^2."""
    if strength is None:
        return 0.001
    if isinstance(strength, (int, float)):
        return float(strength)
    if isinstance(strength, tuple) and len(strength) == 2 and strength[0] == "symmetric":
        return float(strength[1].get("theta", 0.0)) ** 2
    if strength == "symmetric":
        return 0.0
    raise ValueError(
        f"strength {strength!r}: a threshold, 'symmetric' or ('symmetric', {{'theta': t}})"
    )


def _params(
    n: int,
    block: Optional[int] = None,
    B=None,
    coords=None,
    strength=None,
    smoother: Optional[str] = None,
    coarse_smoother: Optional[str] = None,
    sweeps: int = 1,
    coarse_sweeps: Optional[int] = None,
    max_coarse: int = 100,
    max_levels: int = 25,
    cycle: str = "V",
    jacobi_damping: Optional[float] = None,
    cycle_precision: Optional[str] = None,
    setup: str = "backend",
    coarsening: str = "sa",
) -> "_gpuq.AmgParams":
    """The Rust core's AMG options from the Python spelling."""
    block = 1 if block is None else int(block)
    if B is not None and coords is not None:
        raise ValueError("give B (the near-null space) or coords (its rigid body modes), not both")
    if coords is not None:
        B = rigid_body_modes(coords)
    if B is not None:
        refuse_cupy(B)
        B = np.asarray(B, dtype=np.float64)
        if B.ndim == 1:
            B = B[:, None]
        if B.ndim != 2 or B.shape[0] != n:
            raise ValueError(f"B must be an ({n}, k) array, not shape {B.shape}")
        B = np.ascontiguousarray(B)
    return _gpuq.AmgParams(
        block=block,
        near_null_space=B,
        coarsening=coarsening,
        strength=_strength(strength),
        smoother=smoother,
        coarse_smoother=coarse_smoother,
        sweeps=int(sweeps),
        coarse_sweeps=coarse_sweeps,
        coarse_size=int(max_coarse),
        max_levels=int(max_levels),
        cycle=str(cycle).lower(),
        jacobi_damping=jacobi_damping,
        cycle_precision=cycle_precision,
        setup=setup,
    )


class Level:
    """One level of the hierarchy: ``n`` (rows), ``nnz``, ``block`` (unknowns per node),
    ``colors`` (of the Gauss-Seidel smoother, 0 without)."""

    def __init__(self, info: Dict[str, Any]):
        self.n = info["rows"]
        self.nnz = info["nnz"]
        self.block = info["block"]
        self.colors = info.get("colors", 0)

    def __repr__(self) -> str:
        return f"Level(n={self.n}, nnz={self.nnz}, block={self.block})"


class MultilevelSolver:
    """A smoothed-aggregation hierarchy and its cycle, resident on a gpuq backend.

    Made by :func:`smoothed_aggregation_solver`. ``solve`` solves with it,
    ``aspreconditioner`` lends the cycle to SciPy, ``levels``, ``operator_complexity()``,
    ``grid_complexity()`` and ``print(ml)`` describe it, ``update_values`` takes new values
    on the same sparsity pattern.
    """

    def __init__(self, hierarchy: "_gpuq.AmgHierarchy"):
        self._h = hierarchy
        self._info = json.loads(hierarchy.info_json())

    @property
    def backend(self) -> str:
        """Where the cycle lives: ``cpu`` or ``cuda``."""
        return self._h.backend

    @property
    def levels(self) -> List[Level]:
        """The levels, finest first."""
        return [Level(level) for level in self._info["levels"]]

    @property
    def info(self) -> Dict[str, Any]:
        """The hierarchy as gpuq reports it (``gpuq amg-info --json``'s fields)."""
        return dict(self._info)

    def operator_complexity(self) -> float:
        """The levels' nonzeros summed, over the finest level's."""
        return float(self._info["operator_complexity"])

    def grid_complexity(self) -> float:
        """The levels' rows summed, over the finest level's."""
        return float(self._info["grid_complexity"])

    @property
    def shape(self):
        n = self._h.n
        return (n, n)

    def solve(
        self,
        b,
        x0=None,
        tol: float = 1e-8,
        maxiter: Optional[int] = None,
        accel: Optional[str] = "cg",
        residuals: Optional[list] = None,
        return_report: bool = False,
        atol: float = 0.0,
    ):
        """Solves A x = b to ``||b - A x|| <= tol ||b||`` (the true residual).

        ``accel`` is the Krylov method preconditioned by one cycle per iteration (``cg``,
        ``gmres``, ``bicgstab``, ``tfqmr``, ``qmr``), run by gpuq on the hierarchy's
        backend; ``None`` iterates the cycle alone (stationary, as PyAMG's default; at most
        ``maxiter`` cycles, 100 by default). ``residuals``, a list, receives the residual norms
        ||b - A x||, the initial one first (PyAMG's meaning). Returns x (a NumPy array), or
        ``(x, report)`` with ``return_report=True``. A solve that does not converge returns
        its last iterate (see the report's ``status``); after a breakdown x is None.
        """
        n = self._h.n
        b = vector(b, n, np.float64, "b")
        x0 = optional_vector(x0, n, np.float64, "x0")
        if accel is None:
            x, text = self._h.iterate(b, x0, tol, atol, maxiter)
            report = SolveReport._from_json(text)
        else:
            method = _ACCEL.get(str(accel).lower())
            if method is None:
                raise ValueError(f"accel {accel!r}: one of {sorted(_ACCEL)} or None")
            x, text = self._h.solve(b, x0, method, tol, atol, maxiter)
            report = SolveReport._from_json(text)
        if residuals is not None:
            scale = float(np.linalg.norm(b)) or 1.0
            residuals.extend(h * scale for h in report.residual_history)
        return (x, report) if return_report else x

    def aspreconditioner(self, cycle: str = "V") -> spla.LinearOperator:
        """The cycle as a SciPy ``LinearOperator`` (one application per ``matvec``), for
        ``scipy.sparse.linalg.cg(A, b, M=ml.aspreconditioner())`` and the like. ``cycle``
        must be the hierarchy's own (set when it was built)."""
        if str(cycle).lower() != self._info["cycle"]:
            raise ValueError(
                f"cycle {cycle!r}: this hierarchy was built for {self._info['cycle'].upper()} "
                "cycles (smoothed_aggregation_solver(..., cycle=...))"
            )
        n = self._h.n
        cycle_of = self._h.cycle

        def matvec(r):
            return cycle_of(np.ascontiguousarray(np.ravel(r), dtype=np.float64))

        return spla.LinearOperator((n, n), matvec=matvec, rmatvec=matvec, dtype=np.float64)

    def update_values(self, A) -> None:
        """New values of A on the same sparsity pattern: the hierarchy keeps its aggregates
        and redoes the numeric setup (prolongators, Galerkin products, spectral estimates,
        smoother data) on the backend it was built on, then its cycle is remade. (A
        hierarchy of the seed's coarsening is set up again.)"""
        shape, indptr, indices, data = csr_arrays(A, np.float64)
        if shape != self.shape:
            raise ValueError(f"A is {shape}, the hierarchy's matrix {self.shape}")
        self._h.update_values(data)
        self._info = json.loads(self._h.info_json())

    def __repr__(self) -> str:
        info = self._info
        lines = [
            "MultilevelSolver (gpuq, smoothed aggregation)",
            f"Backend: {self.backend}; cycle {info['cycle'].upper()} in "
            f"{info.get('cycle_precision', 'f64')}; smoother {info['smoother']}",
            f"Number of Levels:     {len(info['levels'])}",
            f"Operator Complexity: {self.operator_complexity():6.3f}",
            f"Grid Complexity:     {self.grid_complexity():6.3f}",
            f"Setup time:          {info['setup_s']:.4f} s",
            "  level   unknowns     nonzeros  block",
        ]
        for i, level in enumerate(info["levels"]):
            lines.append(f"  {i:>5} {level['rows']:>10} {level['nnz']:>12} {level['block']:>6}")
        return "\n".join(lines)


def smoothed_aggregation_solver(
    A,
    B=None,
    *,
    coords=None,
    block: Optional[int] = None,
    strength=None,
    smoother: Optional[str] = None,
    coarse_smoother: Optional[str] = None,
    sweeps: int = 1,
    coarse_sweeps: Optional[int] = None,
    max_levels: int = 25,
    max_coarse: int = 100,
    cycle: str = "V",
    jacobi_damping: Optional[float] = None,
    cycle_precision: Optional[str] = None,
    setup: str = "backend",
    backend: str = "auto",
    layout: str = "auto",
    **pyamg_options,
) -> MultilevelSolver:
    """Builds gpuq's smoothed-aggregation hierarchy of the real matrix ``A``.

    ``A``: a SciPy sparse matrix (CSR, BSR with square blocks, or any format SciPy converts
    to CSR) or a dense array; a BSR matrix's blocks are expanded to CSR by gpuq on all
    threads (every stored entry kept, as SciPy's ``tocsr`` keeps them). ``B``: the near-null space, an (n, k) array as PyAMG takes it
    (default: the constant vector per unknown of a block); or ``coords``, the (nodes, d)
    coordinates whose rigid body modes gpuq builds. ``block``: unknowns per node (default:
    a BSR matrix's block size, else 1). ``strength``: gpuq's strength threshold eps (a
    connection is strong when e_ij^2 >= eps e_ii e_jj, e the block norms; default 0.001),
    or PyAMG's ``('symmetric', {'theta': t})``, the same test with eps = t^2. ``smoother``/``coarse_smoother``: ``jacobi``,
    ``l1``, ``chebyshev``, ``chebyshev:D`` or ``gs`` (default by backend and block size).
    ``cycle``: ``V`` or ``W``. ``backend``: ``cpu``, ``cuda`` or ``auto``; ``setup``:
    ``backend`` (the hierarchy built there, on the GPU for ``cuda``) or ``host``.

    PyAMG options gpuq does not take (``presmoother``, ``aggregate``, ``smooth``,
    ``improve_candidates``, ...) are refused by name rather than ignored. Cost: the setup,
    O(nnz) per level.
    """
    if pyamg_options:
        raise TypeError(
            "options gpuq's smoothed_aggregation_solver does not take: "
            + ", ".join(sorted(pyamg_options))
        )
    refuse_cupy(A)
    if np.iscomplexobj(A.data if sp.issparse(A) else np.asarray(A)):
        raise ValueError("A is complex: gpuq's AMG takes real matrices")
    bsr = bsr_arrays(A, np.float64)
    if bsr is not None:
        shape, blocksize, indptr, indices, data = bsr
    else:
        (shape, indptr, indices, data), blocksize = csr_arrays(A, np.float64), 1
    if shape[0] != shape[1]:
        raise ValueError(f"A must be square, not {shape[0]} x {shape[1]}")
    block = block if block is not None else block_size(A)
    params = _params(
        shape[0],
        block=block,
        B=B,
        coords=coords,
        strength=strength,
        smoother=smoother,
        coarse_smoother=coarse_smoother,
        sweeps=sweeps,
        coarse_sweeps=coarse_sweeps,
        max_coarse=max_coarse,
        max_levels=max_levels,
        cycle=cycle,
        jacobi_damping=jacobi_damping,
        cycle_precision=cycle_precision,
        setup=setup,
    )
    h = _gpuq.AmgHierarchy(shape, indptr, indices, data, params, backend, layout, blocksize)
    return MultilevelSolver(h)
