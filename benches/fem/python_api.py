#!/usr/bin/env python3
"""gpuq's Python package against PyAMG and CuPy in one process (issue 49).

For every system of `systems.py` (DIR/manifest.json), the same call a PyAMG user makes,
with the import changed: `ml = smoothed_aggregation_solver(A, B=B)` (A as BSR with the
node block size, B the rigid body modes for elasticity) then
`ml.solve(b, tol=1e-8, accel="cg", residuals=res)`, timed for gpuq on each backend this
machine has and for PyAMG; and `gpuq.solve(A, b, precond="amg")` (hierarchy and solve in
one call) beside CuPy's CG + Jacobi from host data (peers.py). Every solve's true relative
residual is checked. Prints one line per run and a table last.

    python python_api.py DIR [--only NAME] [--no-pyamg]
"""
import argparse
import json
import os
import time

import numpy as np

import gpuq
import gpuq.amg
from peers import TOL, load, rel_residual, run_cupy_jacobi_cg, run_pyamg


def run_gpuq_pyamg_interface(A, b, B, block_size, backend):
    """PyAMG's two calls on gpuq: the hierarchy, then a CG solve with it."""
    M = A.tobsr(blocksize=(block_size, block_size)) if block_size > 1 else A
    t0 = time.perf_counter()
    ml = gpuq.amg.smoothed_aggregation_solver(M, B=B, backend=backend)
    t1 = time.perf_counter()
    residuals = []
    x = ml.solve(b, tol=TOL, accel="cg", residuals=residuals)
    t2 = time.perf_counter()
    return dict(iters=len(residuals) - 1, setup_s=t1 - t0, solve_s=t2 - t1,
                total_s=t2 - t0, rel_res=rel_residual(A, x, b), levels=len(ml.levels),
                operator_complexity=ml.operator_complexity())


def run_gpuq_solve(A, b, B, block_size, backend):
    """One call: gpuq.solve with AMG (its report's own setup and solve times)."""
    t0 = time.perf_counter()
    x, report = gpuq.solve(A, b, precond="amg", tol=TOL, backend=backend,
                           block=block_size, B=B)
    t1 = time.perf_counter()
    return dict(iters=report.iterations, setup_s=report.amg_setup_s, solve_s=report.time_s,
                total_s=t1 - t0, rel_res=rel_residual(A, x, b), status=report.status)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--only")
    ap.add_argument("--no-pyamg", action="store_true")
    args = ap.parse_args()
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    rows = []
    for name, entry in manifest["systems"].items():
        if args.only and name != args.only:
            continue
        A, b, B = load(args.dir, entry)
        bs = entry["block_size"]
        runs = {}
        for backend in gpuq.backends():
            # A first call per backend opens it (the driver, the PTX) outside the timing.
            gpuq.solve(A[:100, :100], np.ones(100), backend=backend)
            runs[f"gpuq {backend} (PyAMG interface)"] = run_gpuq_pyamg_interface(A, b, B, bs, backend)
            runs[f"gpuq {backend} (gpuq.solve)"] = run_gpuq_solve(A, b, B, bs, backend)
        if not args.no_pyamg:
            p = run_pyamg(A, b, B, bs, 1000)
            p["total_s"] = p["setup_s"] + p["solve_s"]
            runs["PyAMG"] = p
        c = run_cupy_jacobi_cg(A, b, 20000)
        if c:
            runs["CuPy CG + Jacobi"] = dict(iters=c["iters"], setup_s=c["upload_s"],
                                            solve_s=c["solve_s"], total_s=c["total_s"],
                                            rel_res=c["rel_res"])
        for label, r in runs.items():
            print(f"{name} | {label} | it {r['iters']} | setup {r['setup_s']:.3f} | "
                  f"solve {r['solve_s']:.3f} | total {r['total_s']:.3f} | rel {r['rel_res']:.1e}",
                  flush=True)
            rows.append((name, A.shape[0], label, r))
    print()
    print("| system | n | run | it | setup s | solve s | total s | true rel res |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, n, label, r in rows:
        print(f"| {name} | {n} | {label} | {r['iters']} | {r['setup_s']:.3f} | "
              f"{r['solve_s']:.3f} | {r['total_s']:.3f} | {r['rel_res']:.1e} |")


if __name__ == "__main__":
    main()
