"""gpuq.uq on a user's model: the static response against its closed form."""

import numpy as np
import pytest
import scipy.sparse as sp

import gpuq
import gpuq.uq


def chain(n):
    """A chain of n unit springs, DOF 0 to be clamped: K SPD once it is fixed."""
    main = np.full(n, 2.0)
    main[-1] = 1.0
    return sp.diags([-np.ones(n - 1), main, -np.ones(n - 1)], [-1, 0, 1], format="csr")


def test_a_random_load_gives_the_closed_form_statistics():
    K = chain(20)
    r = gpuq.uq.static_response(K, 1.0, outputs=[19, 10], load_std=0.1, fixed_dofs=[0],
                                samples=4000, seed=3)
    assert r.samples == 4000 and r.converged
    for out in r.outputs:
        assert out["exact_mean"] is not None
        se = out["exact_std"] / np.sqrt(r.samples)
        assert abs(out["mean"] - out["exact_mean"]) < 5 * se
        assert out["std"] == pytest.approx(out["exact_std"], rel=0.1)
    again = gpuq.uq.static_response(K, 1.0, outputs=[19, 10], load_std=0.1, fixed_dofs=[0],
                                    samples=4000, seed=3)
    assert again.outputs == r.outputs


def test_a_random_stiffness_is_solved_per_sample_to_its_tolerance():
    K = chain(30)
    r = gpuq.uq.static_response(K, 1.0, outputs=[29], fixed_dofs=[0],
                                terms=[(K, ("uniform", 0.0, 0.5))], samples=200, tol=1e-10)
    assert r.converged and r.max_residual <= 1e-10
    out = r.outputs[0]
    # u = K0^-1 f / (1 + theta): between the deterministic answer and 1/1.5 of it.
    u0 = gpuq.uq.static_response(K, 1.0, outputs=[29], fixed_dofs=[0], samples=10).outputs[0]
    assert u0["exact_mean"] / 1.5 < out["mean"] < u0["exact_mean"]


def test_bad_models_are_clear_exceptions():
    K = chain(10)
    with pytest.raises(ValueError, match="10 entries"):
        gpuq.uq.static_response(K, np.ones(9), outputs=[9], fixed_dofs=[0])
    with pytest.raises(ValueError, match="theta"):
        gpuq.uq.static_response(K, 1.0, outputs=[9], fixed_dofs=[0], terms=[(K, "beta:1:2")])
    with pytest.raises(ValueError, match="symmetric"):
        gpuq.uq.static_response(sp.random(10, 10, density=0.5, random_state=1) + sp.eye(10),
                                1.0, outputs=[9])
