"""gpuq.solve on SciPy matrices of every format and scalar type, against known solutions."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import gpuq
from conftest import laplace2d


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "dense"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_every_format_and_scalar_type_finds_the_known_solution(fmt, dtype, backend):
    a = laplace2d(12).astype(dtype)
    if np.iscomplexobj(a):
        a = a + 0.5j * sp.eye(a.shape[0], dtype=dtype)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(a.shape[0]).astype(dtype)
    b = a @ x
    A = a.toarray() if fmt == "dense" else a.asformat(fmt)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    method = "cg" if not np.iscomplexobj(a) else "bicgstab"
    y, report = gpuq.solve(A, b, method=method, precond="jacobi", tol=tol, backend=backend)
    assert y.dtype == np.dtype(dtype)
    assert report.converged, report
    true = np.linalg.norm(b - a @ y) / np.linalg.norm(b)
    assert true <= 2 * tol
    assert report.relative_residual == pytest.approx(true, rel=0.1, abs=tol / 100)
    assert rel(y, x) < 1e3 * tol


@pytest.mark.parametrize(
    "method", ["cg", "bicgstab", "bicgstab-l:4", "tfqmr", "qmr", "gmres:20"]
)
def test_every_method_converges(method, known):
    a, x, b = known
    y, report = gpuq.solve(a, b, method=method, tol=1e-9, backend="cpu")
    assert report.converged and report.status == "converged"
    assert rel(y, x) < 1e-6


def test_amg_takes_fewer_iterations_and_reports_its_hierarchy(known, backend):
    a, x, b = known
    _, plain = gpuq.solve(a, b, backend=backend)
    y, amg = gpuq.solve(a, b, precond="amg", backend=backend)
    assert amg.converged and amg.iterations < plain.iterations / 3
    assert rel(y, x) < 1e-6
    levels = amg.amg["levels"]
    assert len(levels) >= 2 and levels[0]["rows"] == a.shape[0]
    assert amg.amg_setup_s > 0


def test_an_initial_guess_is_used_and_the_tolerance_stays_relative_to_b(known):
    a, x, b = known
    _, cold = gpuq.solve(a, b, tol=1e-10, backend="cpu")
    y, warm = gpuq.solve(a, b, tol=1e-10, x0=x + 1e-6, backend="cpu")
    assert warm.converged and warm.iterations < cold.iterations
    assert np.linalg.norm(b - a @ y) <= 1e-10 * np.linalg.norm(b) * 1.01


def test_a_solve_that_misses_its_tolerance_is_a_report_not_an_exception(known):
    a, _, b = known
    y, report = gpuq.solve(a, b, maxiter=3, backend="cpu")
    assert not report.converged and report.status == "max_iterations"
    assert report.iterations == 3 and y is not None


def test_bad_input_is_a_clear_exception():
    a = laplace2d(4)
    b = np.ones(16)
    with pytest.raises(ValueError, match="16 entries"):
        gpuq.solve(a, np.ones(15))
    with pytest.raises(ValueError, match="square"):
        gpuq.solve(a[:8], np.ones(8))
    nan = b.copy()
    nan[3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        gpuq.solve(a, nan)
    with pytest.raises(ValueError, match="unknown method 'ilu'"):
        gpuq.solve(a, b, method="ilu")
    with pytest.raises(ValueError, match="available: none, jacobi, block2, amg"):
        gpuq.solve(a, b, precond="ilu")
    with pytest.raises(TypeError, match="only precond='amg'"):
        gpuq.solve(a, b, block=2)
    with pytest.raises(ValueError, match="block size 3"):
        gpuq.solve(a, b, precond="amg", block=3)
    with pytest.raises(ValueError, match="complex"):
        gpuq.solve(a.astype(complex), b, precond="amg")
    with pytest.raises(TypeError, match="dtype"):
        gpuq.solve(a, np.array(["a"] * 16))


@pytest.mark.skipif("cuda" in gpuq.backends(), reason="a CUDA device is present")
def test_cuda_without_a_device_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        gpuq.solve(laplace2d(4), np.ones(16), backend="cuda")


def test_the_report_has_the_fields_of_the_cli_json(known, tmp_path):
    a, _, b = known
    _, report = gpuq.solve(a, b, precond="jacobi", backend="cpu")
    fields = report.to_dict()
    for key in ["status", "converged", "iterations", "relative_residual", "residual_history",
                "time_s", "setup_time_s", "method", "preconditioner", "backend", "layout",
                "tolerance", "scalar", "n", "stats"]:
        assert key in fields, key
    assert fields["residual_history"][0] == pytest.approx(1.0)
    cli = os.environ.get("GPUQ_BIN") or shutil.which("gpuq")
    if cli is None:
        pytest.skip("no gpuq binary to compare with (set GPUQ_BIN)")
    import scipy.io

    scipy.io.mmwrite(str(tmp_path / "A.mtx"), a)
    scipy.io.mmwrite(str(tmp_path / "b.mtx"), b[:, None])
    out = subprocess.run(
        [cli, "solve", str(tmp_path / "A.mtx"), "--rhs", str(tmp_path / "b.mtx"),
         "--precond", "jacobi", "--json"],
        check=True, capture_output=True, text=True,
    )
    theirs = json.loads(out.stdout)
    # The CLI's fields, and two of the binding's own: the breakdown's message and the
    # transfers of the whole call.
    assert set(fields) - {"stopped", "transfers"} <= set(theirs)
    assert set(fields["transfers"]) == {"uploads", "bytes_up", "downloads", "bytes_down"}
    assert theirs["iterations"] == fields["iterations"]
    assert theirs["relative_residual"] == pytest.approx(fields["relative_residual"], rel=1e-6)


def test_int32_and_int64_indices_give_the_same_solve(known):
    a, x, b = known
    wide = a.copy()
    wide.indices = wide.indices.astype(np.int64)
    wide.indptr = wide.indptr.astype(np.int64)
    narrow = a.copy()
    narrow.indices = narrow.indices.astype(np.int32)
    narrow.indptr = narrow.indptr.astype(np.int32)
    y1, r1 = gpuq.solve(wide, b, precond="amg", backend="cpu")
    y2, r2 = gpuq.solve(narrow, b, precond="amg", backend="cpu")
    np.testing.assert_array_equal(y1, y2)
    assert r1.iterations == r2.iterations
