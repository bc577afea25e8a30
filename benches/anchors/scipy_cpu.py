#!/usr/bin/env python3
"""SciPy anchor for the CPU benchmarks: the same matrix as gpuq's `laplace3d:M`
(7-point Dirichlet Laplacian, lexicographic order x fastest), timed on this machine.

Prints one JSON object: copy GB/s (numpy copyto, 2 * 8 n bytes), SpMV ms and GB/s
(same minimal byte formula as benches/cpu_spmv_cg.rs, but SciPy's int32 indices
give the same 12 nnz + ... count), and `scipy.sparse.linalg.cg` ms per iteration
(plain CG, no preconditioner, fixed iteration count via maxiter and rtol tiny).

Usage: python3 benches/anchors/scipy_cpu.py [M]   (default M = 100)
"""
import json
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def laplace3d(m):
    one = sp.identity(m, format="csr")
    t = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1], format="csr")
    a = sp.kron(sp.kron(one, one), t) + sp.kron(sp.kron(one, t), one) + sp.kron(sp.kron(t, one), one)
    a = a.tocsr()
    a.sort_indices()
    return a


def best_of(f, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]  # median


def main():
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    a = laplace3d(m)
    n = a.shape[0]
    x = np.ones(n)
    y = np.empty(n)

    nc = 1 << 24
    src, dst = np.ones(nc), np.empty(nc)
    t_copy = best_of(lambda: np.copyto(dst, src), 30)

    t_spmv = best_of(lambda: a.dot(x), 30)
    spmv_bytes = 12 * a.nnz + 8 * (n + 1) + 16 * n

    b = a @ np.random.default_rng(0).standard_normal(n)
    iters = 30

    def run_cg():
        spla.cg(a, b, rtol=1e-300, atol=0.0, maxiter=iters)

    t_cg = best_of(run_cg, 5) / iters

    print(json.dumps({
        "scipy": scipy.__version__,
        "numpy": np.__version__,
        "m": m,
        "n": n,
        "nnz": int(a.nnz),
        "copy_gbs": 16 * nc / t_copy / 1e9,
        "spmv_ms": 1e3 * t_spmv,
        "spmv_gbs": spmv_bytes / t_spmv / 1e9,
        "cg_ms_per_iter": 1e3 * t_cg,
    }))


if __name__ == "__main__":
    main()
