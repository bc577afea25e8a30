"""gpuq.integrate against closed forms; gpuq.montecarlo's statuses."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import gpuq
from conftest import laplace2d


def test_expressions_give_their_closed_forms(backend):
    r = gpuq.integrate("exp(-x1 - x2 - x3)", 3, rel_tol=1e-9, backend=backend)
    exact = (1 - math.exp(-1)) ** 3
    assert r.converged and abs(r.estimate - exact) <= 1e-8 * exact
    assert r.error <= 1e-9 * exact * 10
    r = gpuq.integrate("x1 * x2", 2, lo=[0, 0], hi=[2, 3], rel_tol=1e-10, backend=backend)
    assert r.estimate == pytest.approx(9.0, rel=1e-10)


def test_builtins_and_methods():
    r = gpuq.integrate("sum-of-squares", 3, rel_tol=1e-8, method="cuhre", backend="cpu")
    assert r.estimate == pytest.approx(1.0, rel=1e-8)
    r = gpuq.integrate("x1^2", 1 + 1, method="gauss-legendre:auto", rel_tol=1e-12, backend="cpu")
    assert r.estimate == pytest.approx(1 / 3, rel=1e-10)


def test_bad_integrands_are_clear_exceptions():
    with pytest.raises(ValueError, match="column"):
        gpuq.integrate("exp(x1", 2)
    with pytest.raises(ValueError, match="NaN"):
        gpuq.integrate("log(x1 - 1)", 2, backend="cpu")
    with pytest.raises(ValueError, match="shape"):
        gpuq.integrate(lambda x: x, 2, backend="cpu")
    with pytest.raises(ZeroDivisionError):
        gpuq.integrate(lambda x: 1 / 0, 2, backend="cpu")
    with pytest.raises(ValueError, match="NaN"):
        gpuq.integrate(lambda x: np.where(x[:, 0] > 2.0, 0.0, np.nan), 2, backend="cpu")
    with pytest.raises(ValueError, match="lo"):
        gpuq.integrate("x1", 2, lo=[0, 0, 0])


def test_python_callables_are_evaluated_in_batches(backend):
    calls = []

    def f(x):
        calls.append(x.shape)
        return np.exp(-x[:, 0] - x[:, 1] - x[:, 2])

    r = gpuq.integrate(f, 3, rel_tol=1e-9, backend=backend)
    exact = (1 - math.exp(-1)) ** 3
    assert r.converged and abs(r.estimate - exact) <= 1e-8 * exact
    assert all(len(s) == 2 and s[1] == 3 for s in calls)
    assert len(calls) <= r.rounds + 1 and r.evaluations > 100 * len(calls)
    same = gpuq.integrate("exp(-x1 - x2 - x3)", 3, rel_tol=1e-9, method="breadth-first",
                          backend="cpu")
    assert r.estimate == pytest.approx(same.estimate, rel=1e-12)


def test_a_cap_is_a_status_not_an_exception():
    r = gpuq.integrate("abs(x1 - 0.3) ^ 0.1", 3, rel_tol=1e-14, max_evals=20000, backend="cpu")
    assert not r.converged and r.status == "evaluation-cap"


def test_monte_carlo_estimates_and_mcsa():
    a = (laplace2d(10) + 4.0 * sp.eye(100)).tocsr()
    x = np.random.default_rng(4).standard_normal(100)
    b = a @ x
    y, report = gpuq.montecarlo.solve(a, b, method="mcsa", tol=1e-8, backend="cpu")
    assert report.converged and np.linalg.norm(y - x) / np.linalg.norm(x) < 1e-6
    y, report = gpuq.montecarlo.solve(a, b, method="mc-forward", histories=200000, backend="cpu")
    assert report.status == "estimate" and 0 < report.relative_residual < 1
    assert len(report.std_error) == 100
    y2, again = gpuq.montecarlo.solve(a, b, method="mc-forward", histories=200000, backend="cpu")
    np.testing.assert_array_equal(y, y2)
    _, held = gpuq.montecarlo.solve(a, b, method="mc-adjoint", histories=1000, tol=1e-12)
    assert held.status == "not_converged"


def test_expectations_of_normal_variables(backend):
    # E[q1^2 + q2^2 + q3^2] = 3; E[exp(0.1 q1) q2^2] = exp(0.005).
    r = gpuq.uq.expectation("sum-of-squares", 3, points=4, backend=backend)
    assert r.estimate == pytest.approx(3.0, rel=1e-12) and r.points == 64
    r = gpuq.uq.expectation("exp(0.1 * x1) * x2^2", 2, points=12, backend=backend)
    assert r.estimate == pytest.approx(math.exp(0.005), rel=1e-10)
    r = gpuq.uq.expectation(lambda q: q[:, 0] ** 4, 1, points=5, backend=backend)
    assert r.estimate == pytest.approx(3.0, rel=1e-12)
    with pytest.raises(ValueError):
        gpuq.uq.expectation("x1", 2, points=0)
