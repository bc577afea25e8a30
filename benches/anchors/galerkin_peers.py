#!/usr/bin/env python3
"""The Galerkin products of an AMG hierarchy with CuPy (cuSPARSE SpGEMM), on the
matrices gpuq built: `gpuq amg-info --generate SPEC --save-levels DIR` writes each
level's A{l}.mtx and P{l}.mtx; for every level with a prolongator this script times
R = P^T (a transpose to CSR), A P and R (A P) on the GPU, the same steps as gpuq's
`galerkin_s` phase, and checks that R A P equals the next level's A.

Timing: wall clock with a device synchronisation after each repetition; the first
(cold: cuSPARSE handles, plans) and the best of REPS warm repetitions are reported.
Prints one JSON object on stdout.

Usage: python3 benches/anchors/galerkin_peers.py DIR [--reps 3]
"""
import argparse
import json
import os
import time

import cupy as cp
import cupyx.scipy.sparse as csp
import scipy.io
import scipy.sparse as sp


def load(path):
    return sp.csr_matrix(scipy.io.mmread(path))


def galerkin(a, p):
    r = p.T.tocsr()
    return r @ (a @ p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    levels = []
    l = 0
    while os.path.exists(os.path.join(args.dir, f"P{l}.mtx")):
        a = csp.csr_matrix(load(os.path.join(args.dir, f"A{l}.mtx")))
        p = csp.csr_matrix(load(os.path.join(args.dir, f"P{l}.mtx")))
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        c = galerkin(a, p)
        cp.cuda.Device().synchronize()
        cold = time.perf_counter() - t
        warm = []
        for _ in range(args.reps):
            t = time.perf_counter()
            c = galerkin(a, p)
            cp.cuda.Device().synchronize()
            warm.append(time.perf_counter() - t)
        want = load(os.path.join(args.dir, f"A{l + 1}.mtx"))
        got = c.get()
        diff = abs(got - want).max() if got.nnz else 0.0
        scale = abs(want).max() if want.nnz else 1.0
        levels.append({
            "level": l, "rows": a.shape[0], "nnz_a": int(a.nnz), "nnz_p": int(p.nnz),
            "nnz_rap": int(c.nnz), "cold_s": cold, "warm_s": min(warm),
            "max_rel_diff_vs_gpuq": float(diff / scale),
        })
        l += 1
    print(json.dumps({
        "library": "cupy " + cp.__version__,
        "levels": levels,
        "total_cold_s": sum(x["cold_s"] for x in levels),
        "total_warm_s": sum(x["warm_s"] for x in levels),
    }))


if __name__ == "__main__":
    main()
