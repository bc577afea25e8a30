"""Type stubs of the extension module gpuq._gpuq (the Rust half of the package). Use the
Python API (gpuq.solve, gpuq.amg, gpuq.integrate, gpuq.montecarlo): these are its
building blocks, taking SciPy's CSR arrays and returning JSON reports."""

from typing import Callable, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str
#: The names of the built-in integrands.
BUILTINS: List[str]
#: The Krylov methods (gmres and bicgstab-l also as NAME:PARAMETER).
METHODS: List[str]
#: The largest block size of gpuq's block sparse rows (BSR matrices with larger blocks
#: are converted to CSR by SciPy).
MAX_BSR_BLOCK: int
#: The preconditioners of solve.
PRECONDITIONERS: List[str]

def backends() -> List[str]:
    """The backends this machine can run: "cpu", and "cuda" when a device is present."""

def rigid_body_modes(coords: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The (d nodes, 3 or 6) rigid body modes of nodes at coords (nodes, d)."""

def solve(
    shape: Tuple[int, int],
    indptr: npt.NDArray[np.integer],
    indices: npt.NDArray[np.integer],
    data: npt.NDArray,
    b: npt.NDArray,
    x0: Optional[npt.NDArray] = None,
    method: str = "cg",
    precond: str = "none",
    tol: float = 1e-8,
    atol: float = 0.0,
    maxiter: Optional[int] = None,
    stagnation_window: int = 500,
    backend: str = "auto",
    layout: str = "auto",
    amg: Optional[AmgParams] = None,
) -> Tuple[Optional[npt.NDArray], str]:
    """Solves A x = b (CSR arrays; data, b, x0 of one of float32, float64, complex64,
    complex128); returns x (None after a breakdown) and the report as JSON text."""

def cuda_array(obj: object, name: str = "array") -> Tuple[str, List[int]]:
    """Reads and checks obj.__cuda_array_interface__ (versions 2 and 3: a C-contiguous,
    unmasked array of a little-endian numeric type); its typestr and shape, a ValueError
    naming `name` otherwise."""

def solve_cuda(
    device: int,
    shape: Tuple[int, int],
    indptr: object,
    indices: object,
    data: object,
    b: object,
    x: object,
    transpose: Optional[Tuple[object, object, object]] = None,
    inv_diag: Optional[object] = None,
    method: str = "cg",
    precond: str = "none",
    tol: float = 1e-8,
    atol: float = 0.0,
    maxiter: Optional[int] = None,
    stagnation_window: int = 500,
    layout: str = "auto",
    amg: Optional[AmgParams] = None,
) -> Tuple[bool, str]:
    """Solves A x = b on CUDA device `device`, b and x CUDA arrays (x, the initial guess,
    overwritten with the solution); A as CSR arrays on that device (int64 indptr, int32
    indices, data of b's type; `transpose`: A^T's arrays, for QMR; `inv_diag`: D^-1, for
    Jacobi), which the caller has checked (the kernels read them unchecked), or as SciPy's
    arrays on the host; `precond="amg"` with `amg` its options (float64: the hierarchy
    built on the device from A where it is). Returns whether x holds the iterate (not
    after a breakdown) and the report as JSON text."""

def integrate(
    dim: int,
    lo: List[float],
    hi: List[float],
    expr: Optional[str] = None,
    builtin_name: Optional[str] = None,
    a: List[float] = ...,
    u: List[float] = ...,
    rel_tol: float = 1e-3,
    abs_tol: float = 0.0,
    method: str = "auto",
    rule: str = "cuhre",
    max_evals: int = 0,
    max_time: Optional[float] = None,
    backend: str = "auto",
    callable: Optional[Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]] = None,
) -> str:
    """Integrates an expression, a built-in or a batch callable over [lo, hi]; the report
    as JSON text."""

def uq_expectation(
    dim: int,
    points: int = 5,
    expr: Optional[str] = None,
    builtin_name: Optional[str] = None,
    a: List[float] = ...,
    u: List[float] = ...,
    backend: str = "auto",
    callable: Optional[Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]] = None,
) -> str:
    """E[g(q)], q ~ N(0, I), by the tensor Gauss-Hermite rule; the report as JSON text."""

def uq_static_response(
    k: Tuple[Tuple[int, int], npt.NDArray[np.integer], npt.NDArray[np.integer], npt.NDArray[np.float64]],
    load_mean: List[float],
    outputs: List[int],
    load_std: Optional[List[float]] = None,
    load_factor: Optional[Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray]] = None,
    terms: List[Tuple[Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray], str]] = ...,
    fixed: List[int] = ...,
    samples: int = 1000,
    seed: int = 1,
    design: str = "mc",
    tol: float = 1e-8,
) -> str:
    """The random static response of a model (CSR tuples); its statistics as JSON text."""

def uq_psd(
    k: Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray],
    m: Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray],
    load_shape: List[float],
    outputs: List[int],
    frequencies: List[float],
    damping: Optional[Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray]] = None,
    rayleigh: Optional[Tuple[float, float]] = None,
    modal_damping: Optional[float] = None,
    load_psd: str = "white:1",
    modes: int = 20,
    eigensolver: str = "auto",
    fixed: List[int] = ...,
    seed: int = 1,
    block: int = 1,
    backend: str = "auto",
) -> str:
    """The response PSD of a model (CSR tuples) on a backend; the result as JSON text."""

def uq_sdof(
    m: float,
    c: float,
    k: float,
    samples: int = 10000,
    steps: int = 1000,
    dt: float = 0.01,
    amplitude: float = 1.0,
    noise: bool = True,
    omega: float = 1.0,
    g: float = 0.0,
    exponent: float = 0.5,
    duffing: float = 0.0,
    initial: Tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
    precision: str = "f64",
    design: str = "mc",
    keep: int = 0,
    seed: int = 1,
    backend: str = "auto",
) -> str:
    """The SDOF Monte Carlo on a backend; the statistics as JSON text."""

def uq_convolution(
    k: Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray],
    m: Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray],
    load_shape: List[float],
    outputs: List[int],
    phi: float,
    sigma: float,
    dt: float,
    steps: int = 1024,
    samples: int = 100,
    damping: Optional[Tuple[Tuple[int, int], npt.NDArray, npt.NDArray, npt.NDArray]] = None,
    rayleigh: Optional[Tuple[float, float]] = None,
    modal_damping: Optional[float] = None,
    modes: int = 20,
    eigensolver: str = "auto",
    fixed: List[int] = ...,
    seed: int = 1,
    keep: int = 0,
    block: int = 1,
    backend: str = "auto",
) -> str:
    """A model's random response to an AR(1) load by FFT convolution; JSON text."""

def mc_solve(
    shape: Tuple[int, int],
    indptr: npt.NDArray[np.integer],
    indices: npt.NDArray[np.integer],
    data: npt.NDArray[np.float64],
    b: npt.NDArray[np.float64],
    method: str = "mcsa",
    histories: int = 100000,
    tol: Optional[float] = None,
    seed: int = 1,
    batches: int = 10,
    estimator: Optional[str] = None,
    cutoff: float = 1e-9,
    max_steps: int = 10000,
    maxiter: int = 1000,
    stagnation_window: int = 20,
    backend: str = "auto",
) -> Tuple[Optional[npt.NDArray[np.float64]], str]:
    """A Monte Carlo estimate (mc-forward, mc-adjoint) or an MCSA solve; x and the report
    as JSON text."""

class AmgParams:
    """The options of gpuq's smoothed-aggregation AMG."""

    def __init__(
        self,
        block: int = 1,
        near_null_space: Optional[npt.NDArray[np.float64]] = None,
        coarsening: str = "sa",
        strength: float = 0.001,
        smoother: Optional[str] = None,
        coarse_smoother: Optional[str] = None,
        sweeps: int = 1,
        coarse_sweeps: Optional[int] = None,
        coarse_size: int = 100,
        max_levels: int = 25,
        cycle: str = "v",
        jacobi_damping: Optional[float] = None,
        cycle_precision: Optional[str] = None,
        setup: str = "backend",
    ) -> None: ...

class AmgHierarchy:
    """An AMG hierarchy of a real matrix and its cycle, resident on a backend."""

    backend: str
    n: int

    def __init__(
        self,
        shape: Tuple[int, int],
        indptr: npt.NDArray[np.integer],
        indices: npt.NDArray[np.integer],
        data: npt.NDArray[np.float64],
        params: AmgParams,
        backend: str = "auto",
        layout: str = "auto",
        blocksize: int = 1,
    ) -> None: ...
    def solve(
        self,
        b: npt.NDArray[np.float64],
        x0: Optional[npt.NDArray[np.float64]] = None,
        method: str = "cg",
        tol: float = 1e-8,
        atol: float = 0.0,
        maxiter: Optional[int] = None,
        stagnation_window: int = 500,
    ) -> Tuple[Optional[npt.NDArray[np.float64]], str]:
        """Solves A x = b preconditioned by the cycle; x and the report as JSON text."""
    def iterate(
        self,
        b: npt.NDArray[np.float64],
        x0: Optional[npt.NDArray[np.float64]] = None,
        tol: float = 1e-8,
        atol: float = 0.0,
        maxiter: Optional[int] = None,
    ) -> Tuple[Optional[npt.NDArray[np.float64]], str]:
        """Iterates the cycle alone (stationary); x and the report as JSON text."""
    def cycle(self, r: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """One cycle: z = M^-1 r."""
    def update_values(self, data: npt.NDArray[np.float64]) -> None:
        """New values on the same pattern: the aggregates kept, the numeric setup redone."""
    def info_json(self) -> str:
        """The hierarchy's levels, complexities and choices as JSON text."""
