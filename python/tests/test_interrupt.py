"""Ctrl-C during a long call: the library stops at its next step and the call raises
KeyboardInterrupt; the next call runs normally."""

import os
import signal
import threading
import time

import pytest

import gpuq
from conftest import laplace2d


@pytest.fixture(autouse=True)
def keyboard_interrupt_on_sigint():
    # A process started in the background by a non-interactive shell inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler: install it here.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_a_long_integration_with_keyboard_interrupt():
    # Far longer than the signal's delay on any machine: a tolerance no run meets.
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            gpuq.integrate("abs(x1 - 0.3)^0.1 * x2", 5, rel_tol=1e-15, method="cuhre",
                           max_time=120, backend="cpu")
    finally:
        timer.cancel()
    assert time.monotonic() - start < 60
    r = gpuq.integrate("x1 * x2", 2, rel_tol=1e-10, backend="cpu")
    assert r.converged and r.status == "converged"
    _, report = gpuq.solve(laplace2d(8), [1.0] * 64, backend="cpu")
    assert report.converged
