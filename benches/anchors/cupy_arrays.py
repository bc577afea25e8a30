"""A CuPy user's solve (issue 49): gpuq.solve on CuPy arrays in place against CuPy's own CG
with a Jacobi preconditioner, the same matrix and right-hand side on the device, CG to 1e-8,
both warm (one solve first), times from the call to x on the device (synchronised).

Run on the GPU machine with the gpuq wheel installed: python3 benches/anchors/cupy_arrays.py
Prints one line per problem and solver, then the ratios; gpuq's report must show no host copy
(its `transfers`: nothing up or down but scalars). Also gpuq.solve(..., precond="amg") on the
same CuPy arrays (the hierarchy built on the device from A where it is), setup included.
"""
import time

import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.scipy.sparse.linalg as cla
import numpy as np
import scipy.sparse as sp

import gpuq

TOL = 1e-8


def laplace3d(n):
    """The 7-point Laplacian on an n^3 grid (Dirichlet), SciPy CSR."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.eye(n)
    return (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i)
            + sp.kron(sp.kron(i, i), t)).tocsr()


def timed(f):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    out = f()
    cp.cuda.Device().synchronize()
    return out, time.perf_counter() - t0


def cupy_cg(A, b):
    dinv = 1.0 / A.diagonal()
    M = cla.LinearOperator(A.shape, matvec=lambda r: dinv * r, dtype=A.dtype)
    iters = [0]

    def count(_):
        iters[0] += 1

    x, info = cla.cg(A, b, rtol=TOL, maxiter=20000, M=M, callback=count)
    return x, iters[0]


def main():
    rows = []
    for n in (100, 160):
        A = csp.csr_matrix(laplace3d(n))
        b = cp.ones(A.shape[0])
        gpuq.solve(A, b, method="cg", precond="jacobi", tol=TOL)  # warm-up
        cupy_cg(A, b)
        for _ in range(2):
            (x, rep), tg = timed(lambda: gpuq.solve(A, b, method="cg", precond="jacobi", tol=TOL))
            rg = float(cp.linalg.norm(b - A @ x) / cp.linalg.norm(b))
            (xc, itc), tc = timed(lambda: cupy_cg(A, b))
            rc = float(cp.linalg.norm(b - A @ xc) / cp.linalg.norm(b))
            print(f"laplace3d:{n} gpuq  it {rep.iterations:5d} rel {rg:.2e} {tg:.4f} s "
                  f"transfers {rep.to_dict().get('transfers')} x on {type(x).__module__}")
            print(f"laplace3d:{n} cupy  it {itc:5d} rel {rc:.2e} {tc:.4f} s")
            (xa, ra), ta = timed(lambda: gpuq.solve(A, b, method="cg", precond="amg", tol=TOL))
            rel = float(cp.linalg.norm(b - A @ xa) / cp.linalg.norm(b))
            t = ra.to_dict().get("transfers")
            print(f"laplace3d:{n} gpuq-amg it {ra.iterations:5d} rel {rel:.2e} {ta:.4f} s "
                  f"(setup {ra.amg_setup_s:.4f}) transfers {t}")
            rows.append((n, tg, tc, ta))
    for n, tg, tc, ta in rows:
        print(f"RATIO laplace3d:{n} CuPy CG+Jacobi / gpuq = {tc / tg:.2f}x, "
              f"/ gpuq AMG (setup included) = {tc / ta:.2f}x")


if __name__ == "__main__":
    main()
