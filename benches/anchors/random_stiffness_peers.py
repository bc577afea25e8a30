#!/usr/bin/env python3
"""SciPy's answer to a random-stiffness static response, K(theta) = K + sum_k theta_k K_k
(Matrix Market files), theta_k uniform on [LO, HI], load f = 1 on every DOF: per sample
the matrix assembled (`K + sum theta_k K_k`) and solved by `scipy.sparse.linalg.cg` with a
Jacobi preconditioner to the relative residual `--tol` (a sparse LU of a 3D model of this
size does not fit the time). Times `--samples` samples and reports the time per sample
(assembly and solve) and the first output's values. One JSON object on stdout.

Usage: python3 benches/anchors/random_stiffness_peers.py K.mtx T1.mtx,T2.mtx,...
       [--samples 3] [--lo 0] [--hi 1] [--tol 1e-8] [--output 0]
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
    ap.add_argument("terms")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--lo", type=float, default=0.0)
    ap.add_argument("--hi", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--output", type=int, default=0)
    args = ap.parse_args()
    k = sp.csr_matrix(scipy.io.mmread(args.stiffness))
    terms = [sp.csr_matrix(scipy.io.mmread(t)) for t in args.terms.split(",")]
    n = k.shape[0]
    f = np.ones(n)
    rng = np.random.default_rng(1)
    times, its, values = [], [], []
    for _ in range(args.samples):
        t = time.perf_counter()
        theta = rng.uniform(args.lo, args.hi, len(terms))
        a = k.copy()
        for th, kk in zip(theta, terms):
            a = a + th * kk
        d = a.diagonal()
        jac = spla.LinearOperator((n, n), matvec=lambda x: x / d, dtype=np.float64)
        count = [0]

        def cb(_x):
            count[0] += 1
        u, info = spla.cg(a, f, rtol=args.tol, M=jac, callback=cb, maxiter=20000)
        times.append(time.perf_counter() - t)
        its.append(count[0])
        values.append(float(u[args.output]))
        print(f"sample: {times[-1]:.2f} s, {count[0]} iterations, info {info}", file=sys.stderr)
    print(json.dumps({"per_sample_s": float(np.mean(times)), "iterations": its,
                      "values": values, "samples": args.samples}))


if __name__ == "__main__":
    main()
