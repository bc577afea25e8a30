#!/usr/bin/env python3
"""Peer runs for gpuq's cubature benchmark (issue 17): seed 004's integrands f1-f5 on
[0, 1]^n with

* the Python `cubature` package (Steven G. Johnson's h-adaptive Genz-Malik code, the
  `cubature` wheel) on the CPU, vectorised NumPy integrands, one process, at the
  requested relative tolerance and at most `--max-evals` evaluations;
* torchquad's Gauss-Legendre product rule on the GPU (PyTorch, float64): m points per
  axis for m = 2, 3, ... until the true error meets the tolerance or the grid passes
  `--max-points` points;
* a product Gauss-Legendre rule written in CuPy (the flat point index decoded into
  per-axis digits, chunks of 2^24 points, one fused elementwise kernel per chunk and a
  sum), with the same m search.

The definitions are the issue's (they match `gpuq_kernels::cubature::integrand`):
f1 = 1/(0.1 + cos^2(sum x_i^2)); f2 = cos(prod_i cos(4^i x_i)); f3 = sin(prod_i i
asin(x_i^i)); f4 = sin(prod_i asin(x_i)); f5 = sum_i cos(10 x_i) / (2 beta), beta =
-0.054402111088937. True errors are against `--ref` (the references of
`gpuq_cubature::reference`; f5: n/2) when given.

Timing: wall clock around the integration (`time.perf_counter`), GPU work bracketed by
a device synchronisation; the GPU rules run once to warm up (kernel compilation) at
the smallest m first.

Prints one JSON object on stdout (`runs`: one object per case and peer); progress goes
to stderr.

Usage: python3 benches/anchors/cub_peers.py [--max-evals 1e8] [--max-points 4e8]
       [--skip-cubature] [--skip-gpu] CASE [CASE ...], CASE = fK:N:TOL[:REF]
"""
import argparse
import json
import math
import sys
import time

import numpy as np

BETA = -0.054402111088937


def f_numpy(k, x):
    """x: (points, n) array."""
    n = x.shape[1]
    if k == 1:
        s = np.sum(x * x, axis=1)
        return 1.0 / (0.1 + np.cos(s) ** 2)
    if k == 2:
        p = np.ones(x.shape[0])
        for i in range(n):
            p = p * np.cos(4.0 ** (i + 1) * x[:, i])
        return np.cos(p)
    if k == 3:
        p = np.ones(x.shape[0])
        for i in range(n):
            p = p * (i + 1) * np.arcsin(np.clip(x[:, i] ** (i + 1), -1.0, 1.0))
        return np.sin(p)
    if k == 4:
        return np.sin(np.prod(np.arcsin(np.clip(x, -1.0, 1.0)), axis=1))
    if k == 5:
        return np.sum(np.cos(10.0 * x), axis=1) / (2.0 * BETA)
    raise ValueError(k)


def f_array(xp, k, cols):
    """cols: list of n arrays (one per axis), xp = numpy, cupy or torch."""
    n = len(cols)
    cos, sin = xp.cos, xp.sin
    asin = xp.arcsin if hasattr(xp, "arcsin") else xp.asin
    if k == 1:
        s = cols[0] * cols[0]
        for c in cols[1:]:
            s = s + c * c
        return 1.0 / (0.1 + cos(s) ** 2)
    if k == 2:
        p = cos(4.0 * cols[0])
        for i in range(1, n):
            p = p * cos(4.0 ** (i + 1) * cols[i])
        return cos(p)
    if k == 3:
        p = 1.0 * asin(cols[0])
        for i in range(1, n):
            p = p * (i + 1) * asin(cols[i] ** (i + 1))
        return sin(p)
    if k == 4:
        p = asin(cols[0])
        for c in cols[1:]:
            p = p * asin(c)
        return sin(p)
    if k == 5:
        s = cos(10.0 * cols[0])
        for c in cols[1:]:
            s = s + cos(10.0 * c)
        return s / (2.0 * BETA)
    raise ValueError(k)


def gauss_legendre01(m):
    x, w = np.polynomial.legendre.leggauss(m)
    return 0.5 * (x + 1.0), 0.5 * w


def run_cubature(k, n, tol, max_evals):
    from cubature import cubature

    count = [0]

    def f(x):
        x = np.atleast_2d(x)
        count[0] += x.shape[0]
        return f_numpy(k, x)

    t = time.perf_counter()
    val, err = cubature(f, n, 1, np.zeros(n), np.ones(n), relerr=tol, abserr=0.0,
                        maxEval=int(max_evals), vectorized=True)
    dt = time.perf_counter() - t
    return {"estimate": float(val[0]), "error_estimate": float(err[0]), "time_s": dt,
            "evaluations": count[0], "converged": bool(err[0] <= tol * abs(val[0]))}


def sync_cupy():
    import cupy
    cupy.cuda.Device().synchronize()


def cupy_gl(k, n, m):
    """Product Gauss-Legendre with m points per axis, in chunks of the flat index."""
    import cupy as cp
    x, w = gauss_legendre01(m)
    dx, dw = cp.asarray(x), cp.asarray(w)
    total = m ** n
    chunk = 1 << 24
    acc = cp.zeros((), dtype=cp.float64)
    for start in range(0, total, chunk):
        idx = cp.arange(start, min(start + chunk, total), dtype=cp.int64)
        cols, weight = [], cp.ones(idx.shape[0])
        for _ in range(n):
            d = idx % m
            idx = idx // m
            cols.append(dx[d])
            weight = weight * dw[d]
        acc += cp.sum(weight * f_array(cp, k, cols))
    return float(acc)


def torchquad_gl(k, n, m):
    import torch
    from torchquad import GaussLegendre, set_up_backend
    set_up_backend("torch", data_type="float64")

    def f(x):
        return f_array(torch, k, [x[:, i] for i in range(n)])

    return float(GaussLegendre().integrate(f, dim=n, N=m ** n,
                                           integration_domain=[[0.0, 1.0]] * n,
                                           backend="torch"))


def search_m(name, rule, k, n, tol, ref, max_points, sync):
    """Smallest m (points per axis) whose estimate is within tol of ref."""
    rule(k, n, 2)
    sync()
    out = None
    m = 2
    while m ** n <= max_points:
        t = time.perf_counter()
        val = rule(k, n, m)
        sync()
        dt = time.perf_counter() - t
        rel = abs(val - ref) / abs(ref) if ref is not None else None
        out = {"peer": name, "points_per_axis": m, "evaluations": m ** n, "estimate": val,
               "time_s": dt, "true_rel_error": rel,
               "converged": rel is not None and rel <= tol}
        print(f"  {name} m={m}: {val} rel {rel} {dt:.3f}s", file=sys.stderr)
        if out["converged"] or ref is None or dt > 20.0:
            break
        m += 1 if m < 8 else 2
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--max-evals", type=float, default=1e8)
    ap.add_argument("--max-points", type=float, default=4e8)
    ap.add_argument("--skip-cubature", action="store_true")
    ap.add_argument("--skip-gpu", action="store_true")
    args = ap.parse_args()
    runs = []
    for case in args.cases:
        parts = case.split(":")
        k, n, tol = int(parts[0][1:]), int(parts[1]), float(parts[2])
        ref = float(parts[3]) if len(parts) > 3 else (n / 2 if k == 5 else None)
        base = {"integrand": f"f{k}", "dim": n, "rel_tol": tol, "reference": ref}
        if not args.skip_cubature:
            print(f"cubature f{k} n={n} tol={tol}", file=sys.stderr)
            r = run_cubature(k, n, tol, args.max_evals)
            if ref is not None:
                r["true_rel_error"] = abs(r["estimate"] - ref) / abs(ref)
            runs.append({**base, "peer": "python-cubature (h-adaptive Genz-Malik, CPU)", **r})
        if not args.skip_gpu:
            import torch
            for name, rule, sync in [
                ("torchquad GaussLegendre (GPU)", torchquad_gl, torch.cuda.synchronize),
                ("CuPy product Gauss-Legendre (GPU)", cupy_gl, sync_cupy),
            ]:
                try:
                    r = search_m(name, rule, k, n, tol, ref, args.max_points, sync)
                except Exception as e:  # a peer that fails is reported, not fatal
                    r = {"peer": name, "failed": f"{e.__class__.__name__}: {e}"}
                runs.append({**base, **(r or {"peer": name, "failed": "no m tried"})})
    json.dump({"runs": runs}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
