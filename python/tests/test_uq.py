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


def test_the_psd_of_one_oscillator_is_its_transfer_function_squared():
    k, m, c = 4.0, 1.0, 0.3
    K, M, C = (sp.csr_matrix([[v]]) for v in (k, m, c))
    w = np.linspace(0.0, 5.0, 51)
    r = gpuq.uq.psd(K, M, [1.0], [0], w, damping=C, load_psd="white:2", modes=0)
    exact = 2.0 / ((k - m * w**2) ** 2 + (c * w) ** 2)
    np.testing.assert_allclose(r.psd(0), exact, rtol=1e-10)
    np.testing.assert_allclose(r.frequencies, w)
    assert r.outputs[0]["rms"] > 0


def test_the_modal_psd_agrees_with_the_direct_solve():
    n = 12
    K = chain(n)
    M = sp.eye(n, format="csr")
    w = np.linspace(0.05, 3.0, 60)
    shape = np.zeros(n)
    shape[-1] = 1.0
    args = dict(rayleigh=(0.01, 0.02), fixed_dofs=[0], load_psd="white:1")
    direct = gpuq.uq.psd(K, M, shape, [n - 1, 5], w, modes=0, **args)
    modal = gpuq.uq.psd(K, M, shape, [n - 1, 5], w, modes=n - 1, **args)
    for dof in (n - 1, 5):
        np.testing.assert_allclose(modal.psd(dof), direct.psd(dof), rtol=1e-6)
    # The cross-PSDs: Hermitian, the PSDs on the diagonal, coherence 1, modal = direct.
    s = direct.cross_psd()
    assert s.shape == (60, 2, 2)
    np.testing.assert_allclose(s, np.conj(np.swapaxes(s, 1, 2)))
    np.testing.assert_allclose(s[:, 1, 1].real, direct.psd(5))
    np.testing.assert_allclose(abs(s[:, 0, 1]) ** 2, s[:, 0, 0].real * s[:, 1, 1].real, rtol=1e-10)
    np.testing.assert_allclose(modal.cross_psd(), s, rtol=1e-6, atol=1e-9 * abs(s).max())
    with pytest.raises(ValueError, match="one damping"):
        gpuq.uq.psd(K, M, shape, [1], w, rayleigh=(0.1, 0.1), modal_damping=0.02)
    with pytest.raises(ValueError, match="eigensolver"):
        gpuq.uq.psd(K, M, shape, [1], w, eigensolver="arpack")


def test_lobpcg_on_the_backend_finds_lanczos_modes(backend):
    # A membrane of 25 x 25 nodes (625 DOFs: above the dense solver's 400) with uneven
    # masses, so that no eigenvalue repeats: LOBPCG with AMG on the backend against
    # shift-invert Lanczos on the host, the same modes and the same PSDs.
    m = 25
    lap = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])
    K = (sp.kron(lap, sp.eye(m)) + sp.kron(sp.eye(m), lap)).tocsr()
    M = sp.diags(1.0 + 0.3 * np.sin(0.7 * np.arange(m * m))).tocsr()
    shape = np.zeros(m * m)
    shape[m * m // 2] = 1.0
    w = np.linspace(0.0, 1.0, 41)
    args = dict(modal_damping=0.02, modes=10, load_psd="white:1")
    lanczos = gpuq.uq.psd(K, M, shape, [m * m // 2, 30], w, eigensolver="lanczos", **args)
    lobpcg = gpuq.uq.psd(K, M, shape, [m * m // 2, 30], w, eigensolver="lobpcg",
                         backend=backend, **args)
    np.testing.assert_allclose(lobpcg.modal["omega"], lanczos.modal["omega"], rtol=1e-8)
    assert lobpcg.modal["max_residual"] <= 1e-8 and lobpcg.modal["iterations"] > 0
    np.testing.assert_allclose(lobpcg.psd(30), lanczos.psd(30), rtol=1e-6)
    with pytest.raises(ValueError, match="block"):
        gpuq.uq.psd(K, M, shape, [1], w, eigensolver="lobpcg", block=2, backend=backend,
                    **args)


def test_the_linear_oscillator_reaches_its_stationary_variance(backend):
    m, c, k = 1.0, 2.0, 10.0
    r = gpuq.uq.sdof(m, c, k, samples=2000, steps=1000, dt=0.01, backend=backend)
    assert r.samples == 2000 and r.mean.shape == (1001,)
    # The sine's response is deterministic: the variance is the noise's, A^2 / (2 c k) for
    # unit-intensity white noise, once stationary (the time constant 2m/c is 1 s of 10).
    assert r.variance[-1] == pytest.approx(1.0 / (2 * c * k), rel=0.1)
    same = gpuq.uq.sdof(m, c, k, samples=2000, steps=1000, dt=0.01, backend="cpu")
    np.testing.assert_allclose(r.variance, same.variance, rtol=1e-9, atol=1e-15)
    # Without the noise every sample is the same: zero variance, the sine's mean response.
    det = gpuq.uq.sdof(m, c, k, samples=3, steps=100, noise=False, backend=backend)
    assert np.max(det.mean**2) > 0
    assert np.max(det.variance) <= 1e-12 * np.max(det.mean**2)
    with pytest.raises(ValueError):
        gpuq.uq.sdof(-1.0, c, k)


def test_the_convolution_of_a_model_in_time(backend):
    n = 8
    K = chain(n)
    M = sp.eye(n, format="csr")
    shape = np.zeros(n)
    shape[-1] = 1.0
    args = dict(phi=0.5, sigma=1.0, dt=0.05, steps=512, samples=200, rayleigh=(0.05, 0.05),
                fixed_dofs=[0], modes=n - 1)
    r = gpuq.uq.convolution(K, M, shape, [n - 1, 3], backend=backend, **args)
    assert r.mean.shape == (2, 512) and r.std.shape == (2, 512) and r.peaks.shape == (200, 2)
    # A zero-mean load: the mean response is within a few standard errors of 0.
    assert np.all(np.abs(r.mean[:, -1]) < 5 * r.std[:, -1] / np.sqrt(200))
    assert np.all(r.std[:, -1] > 0) and np.all(r.peaks >= 0)
    # The loaded end moves more than a DOF nearer the clamp.
    assert r.std[0, -1] > r.std[1, -1]
    cpu = gpuq.uq.convolution(K, M, shape, [n - 1, 3], backend="cpu", **args)
    np.testing.assert_allclose(r.std, cpu.std, rtol=1e-6, atol=1e-12)
    quiet = gpuq.uq.convolution(K, M, shape, [n - 1], backend=backend,
                                **dict(args, sigma=0.0))
    assert np.max(np.abs(quiet.std)) == 0.0 and np.max(np.abs(quiet.mean)) == 0.0
