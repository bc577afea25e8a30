"""Conversions of the caller's matrices and vectors to what the Rust core takes."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import scipy.sparse as sp

from . import _gpuq

#: The scalar types gpuq computes in.
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def is_cupy(x) -> bool:
    """Whether ``x`` is a CuPy array or a CuPy sparse matrix."""
    module = type(x).__module__
    return module.startswith("cupy") or module.startswith("cupyx")


def on_device(x) -> bool:
    """Whether ``x`` is a CUDA array: it has ``__cuda_array_interface__`` (CuPy's arrays,
    Numba's, PyTorch's CUDA tensors) or is a CuPy sparse matrix."""
    return x is not None and (hasattr(x, "__cuda_array_interface__") or is_cupy(x))


def refuse_cupy(*arrays) -> None:
    """CUDA arrays (CuPy's) are taken in place by :func:`gpuq.solve` only: elsewhere a
    clear error rather than a silent host copy."""
    if any(on_device(a) for a in arrays):
        raise TypeError(
            "CuPy (CUDA) arrays are taken in place by gpuq.solve only: here pass "
            "SciPy/NumPy data (for example A.get() and b.get())"
        )


def compute_dtype(*dtypes) -> np.dtype:
    """The scalar type to compute in: the inputs' common type, integers and bools as
    float64; an error for anything else."""
    dtype = np.result_type(*dtypes)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype.type not in DTYPES:
        raise TypeError(f"unsupported dtype {dtype}: float32, float64, complex64 or complex128")
    return dtype


def csr_arrays(A, dtype=None) -> Tuple[Tuple[int, int], np.ndarray, np.ndarray, np.ndarray]:
    """``(shape, indptr, indices, data)`` of ``A`` in canonical CSR (sorted, no duplicates;
    the index arrays int32 or int64 as SciPy holds them):
    any SciPy sparse matrix or array (CSR, CSC, COO, BSR, ...: SciPy's vectorised
    conversion, no Python loop) or a dense 2-D NumPy array, in ``dtype`` when given."""
    refuse_cupy(A)
    if not sp.issparse(A):
        A = np.asarray(A)
        if A.ndim != 2:
            raise ValueError(f"A must be a 2-D matrix, not an array of shape {A.shape}")
        A = sp.csr_matrix(A)
    A = A.tocsr()
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    data = A.data if dtype is None else A.data.astype(dtype, copy=False)
    return (
        (int(A.shape[0]), int(A.shape[1])),
        _index(A.indptr),
        _index(A.indices),
        np.ascontiguousarray(data),
    )


def bsr_arrays(A, dtype) -> Optional[Tuple[Tuple[int, int], int, np.ndarray, np.ndarray, np.ndarray]]:
    """``(shape, r, indptr, indices, blocks)`` of a SciPy BSR matrix with square r x r
    blocks, 1 < r <= gpuq's ``MAX_BSR_BLOCK`` (8), in canonical form (sorted block columns, no duplicates), ``blocks`` its
    stored blocks flattened (a view when they are contiguous ``dtype``): the Rust core
    expands them to CSR on all threads, where SciPy's ``tocsr`` is one pass on one core.
    None for any other matrix."""
    r = block_size(A)
    if r is None or r == 1 or r > _gpuq.MAX_BSR_BLOCK:
        return None
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    data = np.ascontiguousarray(A.data, dtype=dtype).reshape(-1)
    return (int(A.shape[0]), int(A.shape[1])), r, _index(A.indptr), _index(A.indices), data


def _index(a: np.ndarray) -> np.ndarray:
    """A contiguous int32 or int64 index array: SciPy's own when it is one (no copy)."""
    if a.dtype in (np.int32, np.int64):
        return np.ascontiguousarray(a)
    return np.ascontiguousarray(a, dtype=np.int64)


def as_vector(xp, v, n: int, dtype, name: str):
    """``v`` as a contiguous 1-D array of module ``xp`` (NumPy or CuPy) of ``n`` entries of
    ``dtype`` (an (n, 1) column is taken too): ``v`` itself when it is one."""
    a = xp.asarray(v)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name} must have {n} entries, not shape {a.shape}")
    return xp.ascontiguousarray(a, dtype=dtype)


def vector(v, n: int, dtype, name: str) -> np.ndarray:
    """``v`` as a contiguous 1-D NumPy array of ``n`` entries of ``dtype`` (an (n, 1)
    column is taken too); CuPy arrays are refused here."""
    refuse_cupy(v)
    return as_vector(np, v, n, dtype, name)


def optional_vector(v, n: int, dtype, name: str) -> Optional[np.ndarray]:
    """:func:`vector` of ``v``, or None."""
    return None if v is None else vector(v, n, dtype, name)


def block_size(A) -> Optional[int]:
    """The block size of a BSR matrix with square blocks, else None."""
    if sp.issparse(A) and A.format == "bsr":
        r, c = A.blocksize
        if r == c:
            return int(r)
    return None
