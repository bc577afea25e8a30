"""The GIL is released while gpuq works: a Python thread keeps running through the middle
of a solve and of an integration. (Were the GIL held for a whole call, the thread could
run only at its ends.)"""

import threading
import time

import numpy as np

import gpuq

from conftest import laplace2d


def _runs_through_the_middle_of(call) -> None:
    """Asserts that a Python thread, stamping the time every millisecond, stamps inside
    the middle half of ``call()``'s run, which must last at least 40 ms."""
    stamps = []
    stop = threading.Event()

    def stamper():
        last = 0.0
        while not stop.is_set():
            now = time.perf_counter()
            if now - last >= 1e-3:
                stamps.append(now)
                last = now

    thread = threading.Thread(target=stamper)
    thread.start()
    try:
        while not stamps:
            time.sleep(1e-3)
        start = time.perf_counter()
        call()
        end = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    assert end - start >= 0.04, f"the call took {end - start:.3f} s: too short to tell"
    quarter = (end - start) / 4
    inside = [t for t in stamps if start + quarter <= t <= end - quarter]
    assert len(inside) >= 5, f"{len(inside)} stamps in the middle of a {end - start:.3f} s call"


def test_a_solve_lets_other_python_threads_run(backend):
    a = laplace2d(160)
    b = np.ones(a.shape[0])

    def solve():
        _, report = gpuq.solve(a, b, precond="jacobi", tol=1e-12, backend=backend)
        assert report.converged

    _runs_through_the_middle_of(solve)


def test_an_integration_lets_other_python_threads_run():
    def integrate():
        r = gpuq.integrate("abs(x1 - 0.3)^0.1 * x2 * cos(x3 + x4)", 4, rel_tol=1e-6,
                           backend="cpu")
        assert r.converged

    _runs_through_the_middle_of(integrate)
