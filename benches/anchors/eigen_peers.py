#!/usr/bin/env python3
"""Peers of gpuq's lowest modes of a pencil (K, M) read from Matrix Market files:

* SciPy's `eigsh(K, k, M, sigma=0)`: shift-invert Lanczos with a sparse LU of K
  (SuperLU) and ARPACK, on the host (`--eigsh`);
* CuPy's `lobpcg` (cupyx.scipy.sparse.linalg) on the GPU from a random block of k + g
  columns (g as gpuq's guard vectors), preconditioned by Jacobi (CuPy has no AMG),
  stopped at `--maxiter` iterations or its tolerance (`--cupy`).

For each: the time, and the largest relative residual |K x - l M x| / (l |M x|) of the
k modes it returns (computed here, the same measure gpuq reports), and the lowest and
highest eigenvalue. One JSON object on stdout; progress on stderr.

Usage: python3 benches/anchors/eigen_peers.py K.mtx M.mtx --modes 50 [--eigsh] [--cupy]
       [--maxiter 500] [--tol 1e-8]
"""
import argparse
import json
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def relative_residuals(k, m, vals, vecs):
    kx, mx = k @ vecs, m @ vecs
    r = np.linalg.norm(kx - mx * vals, axis=0)
    return r / (np.abs(vals) * np.linalg.norm(mx, axis=0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stiffness")
    ap.add_argument("mass")
    ap.add_argument("--modes", type=int, default=50)
    ap.add_argument("--eigsh", action="store_true")
    ap.add_argument("--cupy", action="store_true")
    ap.add_argument("--maxiter", type=int, default=500)
    ap.add_argument("--tol", type=float, default=1e-8)
    args = ap.parse_args()
    out = {}
    t = time.perf_counter()
    k = sp.csr_matrix(scipy.io.mmread(args.stiffness))
    m = sp.csr_matrix(scipy.io.mmread(args.mass))
    out["read_s"] = time.perf_counter() - t
    n = k.shape[0]
    print(f"read {n} DOFs, {k.nnz} nonzeros in {out['read_s']:.1f} s", file=sys.stderr)
    want = args.modes
    if args.cupy:
        try:
            import cupy as cp
            import cupyx.scipy.sparse as csp
            import cupyx.scipy.sparse.linalg as cla
            kd, md = csp.csr_matrix(k), csp.csr_matrix(m)
            inv = 1.0 / kd.diagonal()
            jac = cla.LinearOperator((n, n), matvec=lambda x: inv * x if x.ndim == 1 else inv[:, None] * x,
                                     matmat=lambda x: inv[:, None] * x, dtype=np.float64)
            guard = min(16, max(2, (want + 3) // 4))
            x0 = cp.asarray(np.random.default_rng(1).standard_normal((n, want + guard)))
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            vals, vecs, hist = cla.lobpcg(kd, x0, B=md, M=jac, tol=args.tol, maxiter=args.maxiter,
                                          largest=False, retResidualNormsHistory=True)
            cp.cuda.Device().synchronize()
            s = time.perf_counter() - t
            order = cp.argsort(vals)[:want]
            v, x = cp.asnumpy(vals[order]), cp.asnumpy(vecs[:, order])
            rel = relative_residuals(k, m, v, x)
            out["cupy_lobpcg"] = {"time_s": s, "iterations": len(hist), "max_rel_residual": float(rel.max()),
                                  "lowest": float(v.min()), "highest": float(v.max())}
            print(f"cupy lobpcg {s:.2f} s, {len(hist)} iterations, worst residual {rel.max():.1e}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001
            out["cupy_lobpcg"] = {"failed": f"{e.__class__.__name__}: {e}"}
    if args.eigsh:
        t = time.perf_counter()
        vals, vecs = spla.eigsh(sp.csc_matrix(k), k=want, M=sp.csc_matrix(m), sigma=0.0, which="LM")
        s = time.perf_counter() - t
        rel = relative_residuals(k, m, vals, vecs)
        out["scipy_eigsh"] = {"time_s": s, "max_rel_residual": float(rel.max()),
                              "lowest": float(vals.min()), "highest": float(vals.max())}
        print(f"scipy eigsh {want} modes {s:.2f} s, worst residual {rel.max():.1e}", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
