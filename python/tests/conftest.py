"""Shared fixtures: test problems with known solutions, and the backends to run on."""

import numpy as np
import pytest
import scipy.sparse as sp

import gpuq


def laplace2d(m: int) -> sp.csr_matrix:
    """The 5-point Laplacian on an m x m grid (Dirichlet), SPD."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    i = sp.eye(m)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


@pytest.fixture(params=gpuq.backends())
def backend(request):
    """Every backend this machine has: the CPU, and CUDA where a device is present."""
    return request.param


@pytest.fixture
def known():
    """A 2-D Laplacian, a random solution and its right-hand side."""
    a = laplace2d(24)
    x = np.random.default_rng(7).standard_normal(a.shape[0])
    return a, x, a @ x
