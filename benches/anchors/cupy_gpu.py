#!/usr/bin/env python3
"""CuPy/cuSPARSE anchor for the GPU benchmarks (benches/gpu.rs runs it in the same
session and prints the ratios).

Builds the same matrices as gpuq's bench: `laplace3d:M` (7-point Dirichlet
Laplacian, x fastest) in f64 and complex f64, and `helmholtz3d:N` = laplace3d:N -
(0.5 + 0.05i) I for N = 14, 27, 52. Times, with CUDA events (median of 7 samples
of back-to-back calls, about 20 ms each, after a warm-up):

* a device-to-device copy of 10^8 f64 (`cupy.copyto`), as GB/s of bytes read
  plus written;
* `A @ x` on each matrix (cuSPARSE SpMV through cupyx.scipy.sparse.csr_matrix);
* one iteration of `cupyx.scipy.sparse.linalg.cg` on laplace3d:M (plain CG): the
  difference of a 220- and a 20-iteration run, divided by 200.

Prints one JSON object on stdout (seconds, and GB/s for the copy).

Usage: python3 benches/anchors/cupy_gpu.py [M]   (default M = 200)
"""
import json
import sys

import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.scipy.sparse.linalg as cspla
import numpy as np
import scipy.sparse as sp


def laplace3d(m, dtype=np.float64):
    one = sp.identity(m, format="csr")
    t = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1], format="csr")
    a = sp.kron(sp.kron(one, one), t) + sp.kron(sp.kron(one, t), one) + sp.kron(sp.kron(t, one), one)
    a = a.tocsr().astype(dtype)
    a.sort_indices()
    return a


def helmholtz3d(m):
    a = laplace3d(m, np.complex128)
    a = (a - (0.5 + 0.05j) * sp.identity(a.shape[0], format="csr", dtype=np.complex128)).tocsr()
    a.sort_indices()
    return a


def median_time(f):
    """Median seconds per call (CUDA events around back-to-back calls)."""
    f()
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    f()
    stop.record()
    stop.synchronize()
    once = cp.cuda.get_elapsed_time(start, stop) / 1e3
    reps = int(min(max(0.02 / max(once, 1e-7), 1), 2000))
    samples = []
    for _ in range(7):
        start.record()
        for _ in range(reps):
            f()
        stop.record()
        stop.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / reps)
    samples.sort()
    return samples[3]


def spmv_time(a_host):
    a = csp.csr_matrix(a_host)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, a.shape[1])
    if np.iscomplexobj(a_host.data):
        x = x + 1j * rng.uniform(-1, 1, a.shape[1])
    x = cp.asarray(x)
    return median_time(lambda: a @ x)


def cg_iteration(a_host):
    a = csp.csr_matrix(a_host)
    b = cp.asarray(np.random.default_rng(4).uniform(-1, 1, a.shape[0]))

    def run(iters):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        try:
            cspla.cg(a, b, tol=1e-30, atol=0.0, maxiter=iters)
        except TypeError:  # newer CuPy renames tol to rtol
            cspla.cg(a, b, rtol=1e-30, atol=0.0, maxiter=iters)
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / 1e3

    run(10)
    short = sorted(run(20) for _ in range(3))[1]
    long = sorted(run(220) for _ in range(3))[1]
    return (long - short) / 200.0


def main():
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    out = {"cupy": cp.__version__, "m": m}

    n = 10**8
    src = cp.random.random(n)
    dst = cp.empty_like(src)
    t = median_time(lambda: cp.copyto(dst, src))
    out["copy_gbs"] = 16 * n / t / 1e9
    del src, dst

    lap = laplace3d(m)
    out["spmv_laplace3d_f64_s"] = spmv_time(lap)
    out["spmv_laplace3d_c64_s"] = spmv_time(lap.astype(np.complex128))
    for hm in (14, 27, 52):
        out[f"spmv_helmholtz3d_{hm}_s"] = spmv_time(helmholtz3d(hm))
    out["cg_iteration_s"] = cg_iteration(lap)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
