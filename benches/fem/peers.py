#!/usr/bin/env python3
"""Peer measurements on the systems of `systems.py` (issue 47).

For every system in DIR/manifest.json:

* PyAMG: `smoothed_aggregation_solver` with its defaults, as a PyAMG user would
  call it: for elasticity B = the rigid body modes (B.mtx) and A as BSR with the
  node block size; then `ml.solve(b, tol=1e-8, accel='cg')` from x0 = 0. PyAMG's
  CG stops when ||r|| < tol ||b||. Iterations are len(residuals) - 1.
* CuPy (only where `import cupy` works): CG with a Jacobi preconditioner
  (`cupyx.scipy.sparse.linalg.cg`, M = D^-1 as a LinearOperator) to 1e-8, timed
  with device synchronisation after one untimed warm-up call: the upload of A and
  b from SciPy/NumPy (`upload_s`), the solve (`solve_s`) and x back (`total_s`
  holds all three: the end-to-end time a CuPy user with host data meets).

Every solve reports the true relative residual ||b - A x|| / ||b||.

    python peers.py DIR [--json OUT] [--only NAME] [--maxiter N] [--no-pyamg]
"""
import argparse
import json
import os
import time

import numpy as np
import pyamg
import scipy
import scipy.io
import scipy.sparse as sp

TOL = 1e-8


def load(folder, entry):
    def read(key):
        return scipy.io.mmread(os.path.join(folder, entry["files"][key]), spmatrix=False)

    A = sp.csr_array(read("A"))
    b = np.asarray(read("b")).ravel()
    B = np.asarray(read("B")) if "B" in entry["files"] else None
    return A, b, B


def rel_residual(A, x, b):
    return float(np.linalg.norm(b - A @ x) / np.linalg.norm(b))


def run_pyamg(A, b, B, block_size, maxiter):
    """Default smoothed aggregation + CG; returns a dict of results."""
    M = A.tobsr(blocksize=(block_size, block_size)) if block_size > 1 else A
    np.random.seed(0)  # PyAMG's spectral radius estimates start from np.random
    t0 = time.perf_counter()
    ml = pyamg.smoothed_aggregation_solver(M, B=B)
    t1 = time.perf_counter()
    residuals = []
    x = ml.solve(b, x0=np.zeros_like(b), tol=TOL, maxiter=maxiter, accel="cg",
                 residuals=residuals)
    t2 = time.perf_counter()
    return dict(iters=len(residuals) - 1, setup_s=t1 - t0, solve_s=t2 - t1,
                rel_res=rel_residual(A, x, b), levels=len(ml.levels),
                operator_complexity=ml.operator_complexity(),
                grid_complexity=ml.grid_complexity(),
                coarse_n=ml.levels[-1].A.shape[0])


def run_cupy_jacobi_cg(A, b, maxiter):
    """Jacobi-preconditioned CG on the GPU with CuPy; None without CuPy."""
    try:
        import cupy as cp
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cla
    except Exception:
        return None
    def upload():
        Ad = csp.csr_matrix(A)
        bd = cp.asarray(b)
        dinv = 1.0 / Ad.diagonal()
        M = cla.LinearOperator(A.shape, matvec=lambda r: dinv * r, dtype=A.dtype)
        return Ad, bd, M

    Ad, bd, M = upload()
    # CuPy 14 names the relative tolerance rtol (older releases: tol).
    try:
        cla.cg(Ad, bd, rtol=TOL, maxiter=2, M=M)  # warm-up: kernel compilation
        tol = dict(rtol=TOL)
    except TypeError:
        tol = dict(tol=TOL)
        cla.cg(Ad, bd, maxiter=2, M=M, **tol)
    iters = [0]

    def count(_):
        iters[0] += 1

    # Timed: A and b from the host (a second upload, the context warm), the
    # solve, x back to the host.
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    Ad, bd, M = upload()
    cp.cuda.Device().synchronize()
    t1 = time.perf_counter()
    xd, _ = cla.cg(Ad, bd, maxiter=maxiter, M=M, callback=count, **tol)
    cp.cuda.Device().synchronize()
    t2 = time.perf_counter()
    x = cp.asnumpy(xd)
    t3 = time.perf_counter()
    return dict(iters=iters[0], solve_s=t2 - t1, upload_s=t1 - t0,
                download_s=t3 - t2, total_s=t3 - t0,
                rel_res=rel_residual(A, x, b),
                device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode())


def table(results):
    """Markdown table of all results."""
    lines = ["| system | n | nnz | bs | PyAMG it | setup s | solve s | rel res | "
             "levels | op cx | CuPy Jacobi-CG it | solve s | rel res |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        p, c = r.get("pyamg"), r.get("cupy_jacobi_cg")
        cpu = (f"{p['iters']} | {p['setup_s']:.3f} | {p['solve_s']:.3f} | "
               f"{p['rel_res']:.1e} | {p['levels']} | {p['operator_complexity']:.2f}"
               if p else "- | - | - | - | - | -")
        gpu = (f"{c['iters']} | {c['solve_s']:.3f} | {c['rel_res']:.1e}" if c
               else "- | - | -")
        lines.append(
            f"| {name} | {r['n']} | {r['nnz']} | {r['block_size']} | {cpu} | {gpu} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="folder written by systems.py")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--only", help="one system only")
    ap.add_argument("--maxiter", type=int, default=1000,
                    help="PyAMG CG iterations at most (CuPy gets 20x this)")
    ap.add_argument("--no-pyamg", action="store_true", help="CuPy only")
    args = ap.parse_args()

    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    results = {}
    for name, entry in manifest["systems"].items():
        if args.only and name != args.only:
            continue
        A, b, B = load(args.dir, entry)
        r = dict(n=A.shape[0], nnz=A.nnz, block_size=entry["block_size"])
        if not args.no_pyamg:
            r["pyamg"] = run_pyamg(A, b, B, entry["block_size"], args.maxiter)
        r["cupy_jacobi_cg"] = run_cupy_jacobi_cg(A, b, 20 * args.maxiter)
        print(name, json.dumps(r), flush=True)
        results[name] = r
    out = {"versions": {"pyamg": pyamg.__version__, "scipy": scipy.__version__,
                        "numpy": np.__version__}, "tol": TOL, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print()
    print(table(results))


if __name__ == "__main__":
    main()
