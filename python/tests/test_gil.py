"""The GIL is released while gpuq works: a Python thread keeps running during a solve and
an integration (with the GIL held for the whole call it could not run at all)."""

import threading

import numpy as np

import gpuq

from conftest import laplace2d


def _progress_during(call) -> int:
    """How many steps a counting Python thread makes while ``call()`` runs."""
    count = [0]
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=counter)
    thread.start()
    try:
        while count[0] == 0:
            pass
        before = count[0]
        call()
        during = count[0] - before
    finally:
        stop.set()
        thread.join()
    return during


def test_a_solve_lets_other_python_threads_run(backend):
    a = laplace2d(120)
    b = np.ones(a.shape[0])

    def solve():
        _, report = gpuq.solve(a, b, precond="jacobi", tol=1e-12, backend=backend)
        assert report.converged

    assert _progress_during(solve) > 1000


def test_an_integration_lets_other_python_threads_run():
    def integrate():
        r = gpuq.integrate("abs(x1 - 0.3)^0.1 * x2 * cos(x3 + x4)", 4, rel_tol=1e-5, backend="cpu")
        assert r.converged

    assert _progress_during(integrate) > 1000
