"""gpuq.amg: PyAMG's interface on gpuq's smoothed aggregation."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import gpuq
import gpuq.amg
from conftest import laplace2d


def test_solve_fills_residuals_as_pyamg_does(known, backend):
    a, x, b = known
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend=backend)
    residuals = []
    y = ml.solve(b, tol=1e-10, residuals=residuals)
    assert residuals[0] == pytest.approx(np.linalg.norm(b))
    assert residuals[-1] <= 1e-9 * np.linalg.norm(b)
    assert len(residuals) < 30
    assert np.linalg.norm(b - a @ y) <= 1e-10 * np.linalg.norm(b) * 1.01
    # The hierarchy is reused: a second right-hand side, the same iterations.
    y2, report = ml.solve(2 * b, tol=1e-10, return_report=True)
    assert report.iterations == len(residuals) - 1
    np.testing.assert_allclose(y2, 2 * y, rtol=1e-8)


def test_the_cycle_preconditions_scipys_solvers(known, backend):
    a, x, b = known
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend=backend)
    m = ml.aspreconditioner()
    counts = {}
    for name, solver in [("cg", spla.cg), ("gmres", spla.gmres)]:
        it = []
        kw = {"callback_type": "legacy"} if name == "gmres" else {}
        y, info = solver(a, b, M=m, rtol=1e-8, callback=lambda *_: it.append(1), **kw)
        assert info == 0
        assert np.linalg.norm(b - a @ y) <= 1e-8 * np.linalg.norm(b) * 1.01
        counts[name] = len(it)
    assert counts["cg"] < 25


def test_stationary_cycling_and_other_accelerators(known):
    a, x, b = known
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend="cpu")
    for accel in [None, "gmres", "bicgstab"]:
        res = []
        y = ml.solve(b, tol=1e-8, accel=accel, maxiter=300, residuals=res)
        assert np.linalg.norm(b - a @ y) <= 1e-8 * np.linalg.norm(b) * 1.01, accel
        assert res[0] == pytest.approx(np.linalg.norm(b))
    with pytest.raises(ValueError, match="accel"):
        ml.solve(b, accel="minres")


def test_levels_complexities_and_summary(known):
    a, _, _ = known
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend="cpu", max_coarse=50)
    levels = ml.levels
    assert levels[0].n == a.shape[0] and levels[0].nnz == a.nnz
    assert levels[-1].n <= 50 or len(levels) == 25
    oc = sum(level.nnz for level in levels) / levels[0].nnz
    assert ml.operator_complexity() == pytest.approx(oc)
    assert 1.0 < ml.grid_complexity() < 2.0
    text = repr(ml)
    assert "Number of Levels" in text and "Operator Complexity" in text


def test_update_values_rebuilds_for_new_values(known):
    a, x, b = known
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend="cpu")
    scaled = (3.0 * a).tocsr()
    ml.update_values(scaled)
    y = ml.solve(b, tol=1e-10)
    np.testing.assert_allclose(y, x / 3.0, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError):
        ml.update_values(laplace2d(5))


def test_update_values_keeps_the_aggregates(backend):
    m = 24
    a = laplace2d(m)
    ml = gpuq.amg.smoothed_aggregation_solver(a, backend=backend)
    sizes = [level.n for level in ml.levels]
    # The same pattern, the couplings between grid rows 1000x weaker: a fresh setup
    # aggregates along the strong direction only, so its levels differ.
    a2 = a.copy()
    rows = np.repeat(np.arange(a2.shape[0]), np.diff(a2.indptr))
    a2.data[np.abs(rows - a2.indices) == m] *= 1e-3
    off = rows != a2.indices
    a2.data[~off] = np.bincount(rows[off], weights=np.abs(a2.data[off]),
                                minlength=a2.shape[0]) + 1e-2
    fresh = gpuq.amg.smoothed_aggregation_solver(a2, backend=backend)
    assert [level.n for level in fresh.levels] != sizes
    ml.update_values(a2)
    assert [level.n for level in ml.levels] == sizes
    x = np.linspace(1.0, 2.0, a2.shape[0])
    b = a2 @ x
    y = ml.solve(b, tol=1e-10, maxiter=500)
    assert np.linalg.norm(b - a2 @ y) <= 1e-9 * np.linalg.norm(b)


def test_the_near_null_space_given_or_from_coordinates():
    # Two unknowns per node (block 2): kron(L, I2) has the constant per component as its
    # near-null space; B given as those two vectors gives the default's iterations.
    m = 16
    a = sp.kron(laplace2d(m), sp.eye(2)).tocsr()
    b = a @ np.random.default_rng(2).standard_normal(a.shape[0])
    n = a.shape[0]
    default = gpuq.amg.smoothed_aggregation_solver(a.tobsr(blocksize=(2, 2)), backend="cpu")
    assert default.levels[0].block == 2
    B = np.zeros((n, 2))
    B[0::2, 0] = 1.0
    B[1::2, 1] = 1.0
    given = gpuq.amg.smoothed_aggregation_solver(a, B=B, block=2, backend="cpu")
    _, r1 = default.solve(b, return_report=True)
    _, r2 = given.solve(b, return_report=True)
    assert r1.converged and r2.converged
    assert r1.iterations == r2.iterations
    # Rigid body modes from coordinates: 3 in 2-D, the translations constant per component.
    coords = np.random.default_rng(3).random((10, 2))
    modes = gpuq.amg.rigid_body_modes(coords)
    assert modes.shape == (20, 3)
    np.testing.assert_allclose(modes[0::2, 0], modes[0, 0])
    np.testing.assert_allclose(modes[1::2, 1], modes[1, 1])
    with pytest.raises(ValueError):
        gpuq.amg.rigid_body_modes(np.zeros((4, 5)))
    with pytest.raises(ValueError, match="not both"):
        gpuq.amg.smoothed_aggregation_solver(a, B=B, coords=coords, block=2)


def test_a_bsr_matrix_is_read_as_its_csr_form():
    # 3 x 3 blocks, some stored entries zero: the hierarchy and the solve equal those of
    # SciPy's tocsr(), also for blocks stored out of order and on update_values.
    m = 10
    rng = np.random.default_rng(4)
    coupling = sp.random(3, 3, density=0.6, random_state=5).toarray() + np.eye(3) * 4.0
    a = (sp.kron(laplace2d(m), sp.eye(3)) + sp.kron(sp.eye(m * m), coupling + coupling.T)).tocsr()
    bsr = a.tobsr(blocksize=(3, 3))
    b = rng.standard_normal(a.shape[0])
    from_csr = gpuq.amg.smoothed_aggregation_solver(bsr.tocsr(), block=3, backend="cpu")
    from_bsr = gpuq.amg.smoothed_aggregation_solver(bsr, backend="cpu")
    assert [l.nnz for l in from_bsr.levels] == [l.nnz for l in from_csr.levels]
    assert from_bsr.levels[0].nnz == bsr.nnz
    np.testing.assert_array_equal(from_bsr.solve(b), from_csr.solve(b))
    # The same blocks, each block row's stored in reverse order.
    order = np.concatenate([
        np.arange(bsr.indptr[i], bsr.indptr[i + 1])[::-1] for i in range(bsr.shape[0] // 3)
    ])
    shuffled = sp.bsr_matrix(
        (bsr.data[order], bsr.indices[order], bsr.indptr), shape=bsr.shape
    )
    shuffled.has_sorted_indices = False
    again = gpuq.amg.smoothed_aggregation_solver(shuffled, backend="cpu")
    np.testing.assert_array_equal(again.solve(b), from_csr.solve(b))
    from_bsr.update_values(bsr * 2.0)
    np.testing.assert_allclose(from_bsr.solve(b), from_csr.solve(b) / 2.0, rtol=1e-6)


def test_pyamg_options_gpuq_does_not_take_are_refused():
    with pytest.raises(TypeError, match="presmoother"):
        gpuq.amg.smoothed_aggregation_solver(laplace2d(4), presmoother=("gauss_seidel", {}))
    ml = gpuq.amg.smoothed_aggregation_solver(
        laplace2d(8), strength=("symmetric", {"theta": 0.0}), backend="cpu"
    )
    assert ml.info["strength"] == 0.0
    # PyAMG's theta bounds |a_ij| / sqrt(a_ii a_jj); gpuq's eps bounds its square.
    ml = gpuq.amg.smoothed_aggregation_solver(
        laplace2d(8), strength=("symmetric", {"theta": 0.25}), backend="cpu"
    )
    assert ml.info["strength"] == pytest.approx(0.0625)
    with pytest.raises(ValueError, match="complex"):
        gpuq.amg.smoothed_aggregation_solver(laplace2d(4).astype(complex))
