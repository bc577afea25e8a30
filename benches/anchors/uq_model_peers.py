#!/usr/bin/env python3
"""Peer runs for gpuq's UQ on a user's model (issue 30), on the matrices gpuq wrote:

* static: SciPy's sparse LU (`splu`, the symmetric ordering MMD_AT_PLUS_A) of K, then
  one solve with S right-hand sides f = mu + std * Z (Z standard normal), the mean and
  standard deviation of the outputs;
* static, GPU: CuPy's CG (cupyx.scipy.sparse.linalg.cg) per sample to the same relative
  residual, on a few samples (the time per sample is reported);
* modes: SciPy's `eigsh(K, k, M, sigma=0)` (shift-invert: a sparse LU of K and ARPACK).

Prints one JSON object on stdout; progress on stderr.

Usage: python3 benches/anchors/uq_model_peers.py K.mtx M.mtx --samples S --outputs 1,2
       [--modes K] [--cupy-samples N] [--skip-eigsh]
"""
import argparse
import json
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stiffness")
    ap.add_argument("mass")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--outputs", default="0")
    ap.add_argument("--mean", type=float, default=1.0)
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--modes", type=int, default=50)
    ap.add_argument("--cupy-samples", type=int, default=5)
    ap.add_argument("--skip-eigsh", action="store_true")
    args = ap.parse_args()
    out = {}
    t = time.perf_counter()
    k = sp.csc_matrix(scipy.io.mmread(args.stiffness))
    m = sp.csc_matrix(scipy.io.mmread(args.mass))
    out["read_s"] = time.perf_counter() - t
    n = k.shape[0]
    outputs = [int(v) for v in args.outputs.split(",")]
    print(f"read {n} DOFs, {k.nnz} nonzeros in {out['read_s']:.1f} s", file=sys.stderr)

    t = time.perf_counter()
    lu = spla.splu(k, permc_spec="MMD_AT_PLUS_A")
    factor_s = time.perf_counter() - t
    print(f"scipy splu factor {factor_s:.2f} s, fill {lu.L.nnz + lu.U.nnz}", file=sys.stderr)
    rng = np.random.default_rng(1)
    t = time.perf_counter()
    values = []
    block = 100
    for first in range(0, args.samples, block):
        count = min(block, args.samples - first)
        f = args.mean + args.std * rng.standard_normal((n, count))
        u = lu.solve(f)
        values.append(u[outputs, :])
    solve_s = time.perf_counter() - t
    v = np.concatenate(values, axis=1)
    out["scipy_static"] = {
        "factor_s": factor_s, "solve_s": solve_s, "time_s": factor_s + solve_s,
        "fill_nonzeros": int(lu.L.nnz + lu.U.nnz),
        "mean": v.mean(axis=1).tolist(), "std": v.std(axis=1, ddof=1).tolist(),
    }
    print(f"scipy splu {factor_s:.2f} s, {args.samples} solves {solve_s:.2f} s", file=sys.stderr)

    try:
        import cupy as cp
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cspla
        kd = csp.csr_matrix(sp.csr_matrix(k))
        times = []
        iters = []
        for s in range(args.cupy_samples + 1):
            f = cp.asarray(args.mean + args.std * rng.standard_normal(n))
            count = [0]

            def cb(_x):
                count[0] += 1

            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            try:
                cspla.cg(kd, f, rtol=1e-10, maxiter=20000, callback=cb)
            except TypeError:  # CuPy before the SciPy 1.12 spelling
                cspla.cg(kd, f, tol=1e-10, maxiter=20000, callback=cb)
            cp.cuda.Device().synchronize()
            if s > 0:  # the first run compiles CuPy's kernels
                times.append(time.perf_counter() - t)
                iters.append(count[0])
        out["cupy_cg"] = {"per_sample_s": float(np.mean(times)), "iterations": iters,
                          "samples_timed": len(times),
                          "estimate_for_samples_s": float(np.mean(times)) * args.samples}
        print(f"cupy cg {np.mean(times):.3f} s per sample", file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        out["cupy_cg"] = {"failed": f"{e.__class__.__name__}: {e}"}

    if not args.skip_eigsh:
        t = time.perf_counter()
        vals, _ = spla.eigsh(k, k=args.modes, M=m, sigma=0.0, which="LM")
        eig_s = time.perf_counter() - t
        out["scipy_eigsh"] = {"time_s": eig_s, "lowest": float(np.min(vals)),
                              "highest": float(np.max(vals))}
        print(f"scipy eigsh {args.modes} modes {eig_s:.2f} s", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
