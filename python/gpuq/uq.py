"""Uncertainty quantification: expectations of functions of standard normal variables.

``gpuq.uq.expectation(g, dim, points=5)`` is E[g(q)] for q ~ N(0, I_dim) by the tensor
Gauss-Hermite rule with ``points`` per axis (``points ** dim`` evaluations), g an
expression in ``x1..xn``, a built-in integrand's name, or a Python function of an
``(m, dim)`` array of points returning ``m`` values (called in batches).

``gpuq.uq.static_response(K, load_mean, outputs, ...)`` samples the static response of
your model (SciPy matrices): random loads and a random stiffness K0 + sum theta_k K_k, the
statistics of the output DOFs; ``gpuq.uq.psd(K, M, load_shape, outputs, frequencies, ...)``
its response PSD (modal or direct); ``gpuq.uq.convolution(K, M, load_shape, outputs, ...)``
its random response in time to an AR(1) load, by FFT convolution on any backend;
``gpuq.uq.sdof(m, c, k, ...)`` the Monte Carlo of a (nonlinear) oscillator on any backend.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import numpy as np

from . import _gpuq
from ._report import Report

__all__ = [
    "expectation",
    "ExpectationResult",
    "static_response",
    "StaticResult",
    "psd",
    "PsdResult",
    "sdof",
    "SdofResult",
    "convolution",
    "ConvolutionResult",
]


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


class StaticResult(Report):
    """A random static response: ``samples``, ``outputs`` (per output DOF a dict with
    ``dof``, ``mean``, ``std``, ``q05``, ``q50``, ``q95`` and, for a deterministic
    stiffness, ``exact_mean`` and ``exact_std``), ``converged`` (every sample's solve met
    ``tol``), ``max_residual``, ``iterations`` (fewest, mean, most CG iterations per
    sample, for a random stiffness), ``factor_s``, ``solve_s``."""

    _SHOWN = ("samples", "converged", "max_residual", "solve_s")


def _theta(dist) -> str:
    """A coefficient's distribution as the core spells it."""
    if isinstance(dist, str):
        return dist
    kind, a, b = dist
    return f"{kind}:{float(a)!r}:{float(b)!r}"


def static_response(
    K,
    load_mean,
    outputs: Sequence[int],
    *,
    load_std=None,
    load_factor=None,
    terms: Sequence = (),
    fixed_dofs: Sequence[int] = (),
    samples: int = 1000,
    seed: int = 1,
    design: str = "mc",
    tol: float = 1e-8,
) -> StaticResult:
    """Samples the static response K(theta) u = f of your model.

    ``K``: the stiffness (any SciPy sparse matrix, symmetric), on all DOFs; ``fixed_dofs``
    the constrained ones, eliminated. ``load_mean``: the mean load (a vector, or one number
    for every DOF); ``load_std``: deviations of independent Gaussian loads per DOF (vector or
    number); ``load_factor``: an (n, r) matrix L of a correlated part L eta. ``terms``:
    random stiffness K = K0 + sum theta_k K_k as ``[(K_k, dist), ...]`` with ``dist``
    ``"uniform:LO:HI"``, ``"normal:MEAN:STD"``, ``"lognormal:MU:SIGMA"`` or a tuple such as
    ``("uniform", 0.0, 0.5)``. ``outputs``: the DOFs (full numbering) whose statistics are
    returned. ``design``: ``mc``, ``lhs`` or ``sobol``. The same ``seed`` gives the same
    samples as ``gpuq uq static`` with the same model. Runs on the host (the device path of
    a user's model is not written yet).
    """
    from ._sparse import csr_arrays

    shape, *k = csr_arrays(K, np.float64)
    n = shape[0]

    def full(v, name):
        a = np.asarray(v, dtype=np.float64)
        if a.ndim == 0:
            return [float(a)] * n
        if a.shape != (n,):
            raise ValueError(f"{name} must have {n} entries or be one number, not shape {a.shape}")
        return [float(t) for t in a]

    def matrix(A):
        s, *arrays = csr_arrays(A, np.float64)
        return (s, *arrays)

    text = _gpuq.uq_static_response(
        (shape, *k),
        full(load_mean, "load_mean"),
        [int(d) for d in outputs],
        None if load_std is None else full(load_std, "load_std"),
        None if load_factor is None else matrix(load_factor),
        [(matrix(Kk), _theta(dist)) for Kk, dist in terms],
        [int(d) for d in fixed_dofs],
        int(samples),
        int(seed),
        design,
        float(tol),
    )
    return StaticResult._from_json(text)


class PsdResult(Report):
    """A response PSD: ``frequencies`` (rad/s), ``outputs`` (per output DOF a dict with
    ``dof``, ``psd`` (S_yy per frequency) and ``rms``), ``cross`` (per frequency the
    outputs' cross-PSD matrix as ``re`` and ``im`` lists; :meth:`cross_psd` as one complex
    array), ``modes`` (the modal basis' summary, None for the direct solve), ``eig_s``,
    ``time_s``."""

    _SHOWN = ("time_s", "eig_s")

    def cross_psd(self) -> np.ndarray:
        """S_xy(w) as a complex array of shape (frequencies, outputs, outputs): rows and
        columns in the order of ``outputs``, Hermitian at each frequency, the outputs'
        PSDs on the diagonal."""
        return np.array([np.asarray(m["re"]) + 1j * np.asarray(m["im"]) for m in self.cross])

    def psd(self, dof: int) -> np.ndarray:
        """S_yy(w) of output ``dof`` as an array over ``frequencies``."""
        for out in self.outputs:
            if out["dof"] == dof:
                return np.asarray(out["psd"])
        raise KeyError(f"DOF {dof} is not an output")


def psd(
    K,
    M,
    load_shape,
    outputs: Sequence[int],
    frequencies,
    *,
    damping=None,
    rayleigh=None,
    modal_damping: Union[float, None] = None,
    load_psd: str = "white:1",
    modes: int = 20,
    eigensolver: str = "auto",
    fixed_dofs: Sequence[int] = (),
    seed: int = 1,
    block: int = 1,
    backend: str = "auto",
) -> PsdResult:
    """The response PSD S_yy(w) of your model's ``outputs`` under a load ``p f(t)``.

    ``K``, ``M``: stiffness and mass (SciPy sparse, symmetric, on all DOFs; ``fixed_dofs``
    eliminated). ``load_shape``: p on all DOFs. ``frequencies``: circular frequencies
    (rad/s), increasing. ``load_psd``: the PSD of f, ``white:S0``, ``ar1:PHI:SIGMA:DT`` or
    ``kanai-tajimi:S0:WG:ZG``. Damping: one of a matrix ``damping`` (C), ``rayleigh=(a, b)``
    (a M + b K) or ``modal_damping`` (one ratio in every mode). ``modes``: modes kept (the
    lowest of (K, M) by ``eigensolver``: ``lanczos``, shift-invert with the Cholesky factor
    of K on the host; ``lobpcg``, preconditioned by AMG cycles of K (``block`` unknowns per
    node: 2 or 3 for elasticity) on the backend; ``auto``, LOBPCG on a GPU and Lanczos on
    the CPU), 0 for a direct solve at each frequency. ``backend``: ``auto``, ``cpu`` or
    ``cuda`` (the modes by LOBPCG and the cross-PSDs run there).
    """
    from ._sparse import csr_arrays

    def matrix(A):
        s, *arrays = csr_arrays(A, np.float64)
        return (s, *arrays)

    k = matrix(K)
    text = _gpuq.uq_psd(
        k,
        matrix(M),
        [float(t) for t in np.asarray(load_shape, dtype=np.float64).ravel()],
        [int(d) for d in outputs],
        [float(w) for w in np.asarray(frequencies, dtype=np.float64).ravel()],
        None if damping is None else matrix(damping),
        None if rayleigh is None else (float(rayleigh[0]), float(rayleigh[1])),
        None if modal_damping is None else float(modal_damping),
        load_psd,
        int(modes),
        eigensolver,
        [int(d) for d in fixed_dofs],
        int(seed),
        int(block),
        backend,
    )
    return PsdResult._from_json(text)


class SdofResult(Report):
    """The SDOF Monte Carlo: ``samples``, ``times``, ``mean`` and ``variance`` of x at each
    time (NumPy arrays), ``trajectories`` (the first ``keep`` samples'), ``time_s``."""

    _SHOWN = ("samples", "time_s")

    def __init__(self, fields):
        super().__init__(fields)
        for key in ("times", "mean", "variance"):
            self._fields[key] = np.asarray(self._fields[key])


def sdof(
    m: float,
    c: float,
    k: float,
    *,
    samples: int = 10_000,
    steps: int = 1000,
    dt: float = 0.01,
    amplitude: float = 1.0,
    noise: bool = True,
    omega: float = 1.0,
    g: float = 0.0,
    exponent: float = 0.5,
    duffing: float = 0.0,
    initial=(0.0, 0.0, 0.0, 0.0),
    precision: str = "f64",
    design: str = "mc",
    keep: int = 0,
    seed: int = 1,
    backend: str = "auto",
) -> SdofResult:
    """Monte Carlo of the oscillator m x'' + c x' + g sgn(x')|x'|^exponent + k x + duffing x^3
    = amplitude (sin(omega t) + w(t)), w white noise of unit intensity (left out with
    ``noise=False``), from ``initial`` = (x0, v0, std of x0, std of v0): ``samples`` paths of
    ``steps`` RK4 steps of ``dt`` on ``backend`` (the GPU runs a path per thread; the same
    ``seed`` gives the same paths on every backend). ``precision``: f32 or f64 (statistics
    summed in f64); ``design``: ``mc`` or ``lhs``.
    """
    text = _gpuq.uq_sdof(
        float(m),
        float(c),
        float(k),
        int(samples),
        int(steps),
        float(dt),
        float(amplitude),
        bool(noise),
        float(omega),
        float(g),
        float(exponent),
        float(duffing),
        tuple(float(t) for t in initial),
        precision,
        design,
        int(keep),
        int(seed),
        backend,
    )
    return SdofResult._from_json(text)


class ConvolutionResult(Report):
    """A model's random response in time: ``mean`` and ``std`` as (outputs, steps) arrays,
    ``peaks`` as a (samples, outputs) array of each sample's largest |response|,
    ``histories`` (the first ``keep`` samples'), ``modal`` (the modes used), ``time_s``."""

    _SHOWN = ("time_s",)

    def __init__(self, fields):
        response = fields.pop("response")
        fields.update(response)
        super().__init__(fields)
        steps = self._fields["steps"]
        self._fields["mean"] = np.asarray(self._fields["mean"]).reshape(-1, steps)
        self._fields["std"] = np.asarray(self._fields["std"]).reshape(-1, steps)
        outputs = self._fields["mean"].shape[0]
        self._fields["peaks"] = np.asarray(self._fields["peaks"]).reshape(-1, outputs)


def convolution(
    K,
    M,
    load_shape,
    outputs: Sequence[int],
    *,
    phi: float,
    sigma: float,
    dt: float,
    steps: int = 1024,
    samples: int = 100,
    damping=None,
    rayleigh=None,
    modal_damping: Union[float, None] = None,
    modes: int = 20,
    eigensolver: str = "auto",
    fixed_dofs: Sequence[int] = (),
    seed: int = 1,
    keep: int = 0,
    block: int = 1,
    backend: str = "auto",
) -> ConvolutionResult:
    """The response of your model's ``outputs`` to the load ``p f(t)`` in time, f the AR(1)
    process f_j = phi f_(j-1) + sigma e_j with time step ``dt``: ``samples`` load samples
    over ``steps`` steps, each output the convolution of the load with ``modes`` modal
    kernels (FFTs on the backend). Matrices, damping, ``eigensolver`` and ``block`` as
    :func:`psd` takes them.
    """
    from ._sparse import csr_arrays

    def matrix(A):
        s, *arrays = csr_arrays(A, np.float64)
        return (s, *arrays)

    text = _gpuq.uq_convolution(
        matrix(K),
        matrix(M),
        [float(t) for t in np.asarray(load_shape, dtype=np.float64).ravel()],
        [int(d) for d in outputs],
        float(phi),
        float(sigma),
        float(dt),
        int(steps),
        int(samples),
        None if damping is None else matrix(damping),
        None if rayleigh is None else (float(rayleigh[0]), float(rayleigh[1])),
        None if modal_damping is None else float(modal_damping),
        int(modes),
        eigensolver,
        [int(d) for d in fixed_dofs],
        int(seed),
        int(keep),
        int(block),
        backend,
    )
    return ConvolutionResult._from_json(text)
