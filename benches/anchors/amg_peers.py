#!/usr/bin/env python3
"""Peer runs for gpuq's AMG benchmark: PyAMG on the CPU and CuPy CG + Jacobi on the GPU.

Each system is either built here (`laplace3d:M`: the 7-point Dirichlet Laplacian with
x fastest, exactly gpuq's generator) or read from a Matrix Market file (`FILE.mtx`,
with an optional right-hand side `FILE_b.mtx` beside it; 2x2-block systems from
`gpuq generate elasticity2d:N` or `bidomain3d:N`). Without a right-hand side,
b = A * ones, as `gpuq solve` does.

Per system, stopping at ||b - A x|| <= rtol ||b|| from x0 = 0:

* PyAMG smoothed aggregation (`smoothed_aggregation_solver`, its defaults; with
  `B` = the constant per block component for block systems) and Ruge-Stuben
  (`ruge_stuben_solver`), each as the V-cycle preconditioner of SciPy's CG: setup time,
  solve time, iterations, operator and grid complexity, levels;
* CuPy `cupyx.scipy.sparse.linalg.cg` with a Jacobi preconditioner on the GPU:
  solve time and iterations (when CuPy and a GPU are present).

Timing: wall clock (`time.perf_counter`), GPU calls bracketed by a device
synchronisation; one warm-up for CuPy. The true relative residual is recomputed
in float64 on the host.

Prints one JSON object on stdout (`runs`: one object per library, method and system);
progress goes to stderr.

Usage: python3 benches/anchors/amg_peers.py [--rtol 1e-8] [--block B] [--rhs-ones] [--skip-rs] [--skip-pyamg] SYSTEM [SYSTEM ...]
"""
import argparse
import json
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp


def laplace3d(m):
    one = sp.identity(m, format="csr")
    t = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1], format="csr")
    a = sp.kron(sp.kron(one, one), t) + sp.kron(sp.kron(one, t), one) + sp.kron(sp.kron(t, one), one)
    a = a.tocsr().astype(np.float64)
    a.sort_indices()
    return a


def load(spec, rhs_ones=False):
    if spec.startswith("laplace3d:"):
        a = laplace3d(int(spec.split(":")[1]))
        return a, np.ones(a.shape[0]) if rhs_ones else a @ np.ones(a.shape[0])
    a = scipy.io.mmread(spec).tocsr().astype(np.float64)
    a.sort_indices()
    rhs = spec[:-4] + "_b.mtx"
    try:
        b = np.asarray(scipy.io.mmread(rhs), dtype=np.float64).ravel()
    except (OSError, ValueError):
        b = a @ np.ones(a.shape[0])
    return a, b


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def pyamg_run(name, a, b, rtol, block):
    import pyamg

    t0 = time.perf_counter()
    if name == "pyamg-sa":
        if block > 1:
            nb = np.zeros((a.shape[0], block))
            for c in range(block):
                nb[c::block, c] = 1.0
            ml = pyamg.smoothed_aggregation_solver(a, B=nb)
        else:
            ml = pyamg.smoothed_aggregation_solver(a)
    else:
        ml = pyamg.ruge_stuben_solver(a)
    setup = time.perf_counter() - t0
    # SciPy's CG with the hierarchy's V-cycle as M: PyAMG's own `accel="cg"`
    # unpacks five values from SciPy's `make_system`, which now returns four.
    import inspect

    import scipy.sparse.linalg as spla

    iters = [0]

    def count(_xk):
        iters[0] += 1

    kw = {"rtol" if "rtol" in inspect.signature(spla.cg).parameters else "tol": rtol, "atol": 0.0}
    t0 = time.perf_counter()
    x, _ = spla.cg(a, b, M=ml.aspreconditioner(cycle="V"), maxiter=1000, callback=count, **kw)
    solve = time.perf_counter() - t0
    rel = float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))
    return {
        "setup_s": setup,
        "solve_s": solve,
        "iterations": iters[0],
        "relative_residual": rel,
        "levels": len(ml.levels),
        "operator_complexity": float(ml.operator_complexity()),
        "grid_complexity": float(ml.grid_complexity()),
    }


def cupy_run(a, b, rtol):
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cspla

    ad = csp.csr_matrix(a)
    bd = cp.asarray(b)
    dinv = 1.0 / ad.diagonal()
    m = cspla.LinearOperator(a.shape, matvec=lambda x: dinv * x, dtype=np.float64)
    iters = [0]

    def count(_):
        iters[0] += 1

    import inspect

    kw = {"rtol" if "rtol" in inspect.signature(cspla.cg).parameters else "tol": rtol, "atol": 0.0}
    cspla.cg(ad, bd, maxiter=20000, M=m, **kw)  # warm-up
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    x, _ = cspla.cg(ad, bd, maxiter=20000, M=m, callback=count, **kw)
    cp.cuda.Device().synchronize()
    solve = time.perf_counter() - t0
    xh = cp.asnumpy(x)
    rel = float(np.linalg.norm(b - a @ xh) / np.linalg.norm(b))
    return {"solve_s": solve, "iterations": iters[0], "relative_residual": rel}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rtol", type=float, default=1e-8)
    p.add_argument("--block", type=int, default=1)
    p.add_argument("--no-gpu", action="store_true")
    p.add_argument("--skip-rs", action="store_true")
    p.add_argument("--skip-pyamg", action="store_true", help="CuPy only")
    p.add_argument("--rhs-ones", action="store_true",
                   help="b = ones for generated systems (A * ones is solved exactly by one SA cycle)")
    p.add_argument("systems", nargs="+")
    args = p.parse_args()
    runs = []
    for spec in args.systems:
        log(f"amg_peers: {spec}")
        a, b = load(spec, args.rhs_ones)
        base = {"system": spec, "n": a.shape[0], "nnz": int(a.nnz)}
        methods = [] if args.skip_pyamg else ["pyamg-sa"] + ([] if args.skip_rs else ["pyamg-rs"])
        for name in methods:
            try:
                runs.append({**base, "library": name, **pyamg_run(name, a, b, args.rtol, args.block)})
            except Exception as e:  # noqa: BLE001 - a peer's failure is data
                runs.append({**base, "library": name, "error": repr(e)})
            log(f"  {runs[-1]}")
        if not args.no_gpu:
            try:
                runs.append({**base, "library": "cupy-cg-jacobi", **cupy_run(a, b, args.rtol)})
            except Exception as e:  # noqa: BLE001
                runs.append({**base, "library": "cupy-cg-jacobi", "error": repr(e)})
            log(f"  {runs[-1]}")
    versions = {}
    for mod in ("scipy", "pyamg", "cupy"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            versions[mod] = None
    print(json.dumps({"versions": versions, "rtol": args.rtol, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
