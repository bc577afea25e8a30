"""The GIL is released while gpuq works: a Python thread keeps running through the middle
of a solve and of an integration. (Were the GIL held for a whole call, the thread could
run only at its ends.)"""

import threading
import time

import numpy as np

import gpuq

from conftest import laplace2d


def _runs_through_the_middle_of(calls) -> None:
    """Asserts that a Python thread, stamping the time every millisecond, stamps inside
    the middle half of a call's run: the first of ``calls`` (each larger than the one
    before) that lasts at least 40 ms on this machine."""
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
        for call in calls:
            start = time.perf_counter()
            call()
            end = time.perf_counter()
            if end - start >= 0.04:
                break
    finally:
        stop.set()
        thread.join()
    assert end - start >= 0.04, f"the largest call took {end - start:.3f} s: too short to tell"
    quarter = (end - start) / 4
    inside = [t for t in stamps if start + quarter <= t <= end - quarter]
    assert len(inside) >= 5, f"{len(inside)} stamps in the middle of a {end - start:.3f} s call"


def test_a_solve_lets_other_python_threads_run(backend):
    def solve(m):
        a = laplace2d(m)
        b = np.ones(a.shape[0])
        return lambda: gpuq.solve(a, b, precond="jacobi", tol=1e-12, backend=backend)

    _runs_through_the_middle_of(solve(m) for m in (160, 320, 640, 1280))


def test_an_integration_lets_other_python_threads_run():
    def integrate(tol):
        f = "abs(x1 - 0.3)^0.1 * x2 * cos(x3 + x4)"
        return lambda: gpuq.integrate(f, 4, rel_tol=tol, backend="cpu", max_time=10)

    _runs_through_the_middle_of(integrate(10.0**-k) for k in range(6, 14))
