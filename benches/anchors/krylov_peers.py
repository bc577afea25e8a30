#!/usr/bin/env python3
"""Peer runs for gpuq's Krylov benchmark (benches/krylov.rs writes the systems to
a directory, runs this script on it and prints the peers' table).

Input, in DIR (little-endian): `systems.json` =
`{"systems": [{"name", "n", "nnz", "prefix"}, ...], "rtol", "max_iter",
"restart", "repeats"}` and, per system, `<prefix>_indptr.bin` (int64, n + 1),
`<prefix>_indices.bin` (int32, nnz), `<prefix>_data.bin` (complex128, nnz) and
`<prefix>_rhs.bin` (complex128, n): complex symmetric indefinite CSR matrices.

Every solve uses a Jacobi preconditioner (M x = diag(A)^-1 * x, elementwise),
x0 = 0 (the solvers' default) and stops at ||b - A x|| <= rtol ||b|| (atol = 0):

* CPU, SciPy (`scipy.sparse.linalg`): `bicgstab`, `gmres` (restart = `restart`),
  and `tfqmr` and `qmr` where this SciPy has them. `qmr` takes the CSR matrix
  itself (it also multiplies by A^H) with M1 = I and M2 = Jacobi (a right
  preconditioner).
* GPU, CuPy (`cupyx.scipy.sparse.linalg`): `gmres` (restart = `restart`), `cgs`,
  and `bicgstab` where this CuPy has it. A goes to the GPU once per system as a
  `cupyx.scipy.sparse.csr_matrix`, b as a cupy array, M as a cupyx
  `LinearOperator`.

Iterations are counted with the solvers' callbacks: one per iteration, except
SciPy's `gmres` (`callback_type='pr_norm'`: one per inner iteration) and CuPy's
`gmres` (one per restart cycle; its cycles always run all `restart` inner
steps, so inner iterations = cycles x restart). `maxiter` is `max_iter` except
for `gmres`: SciPy's counts restart cycles (ceil(max_iter / restart) passed),
CuPy's counts inner iterations in steps of `restart` (ceil(max_iter / restart)
x restart passed), so both allow the same number of cycles. Each run also
counts the products with A (and A^H) in one untimed solve through a counting
wrapper (`matvecs`).

Timing: wall clock (`time.perf_counter`) around the solver call only (GPU calls
bracketed by `cupy.cuda.Device().synchronize()`): one untimed counting solve,
one warm-up solve, then `repeats` timed solves; `time_s` is their median. The
true relative residual ||b - A x|| / ||b|| of the last timed solve is recomputed
on the host in complex128; `converged` is that <= 1.01 rtol.

Prints one JSON object on stdout: `scipy_version`, `cupy_version` (null without
CuPy), `gpu` (null when the GPU part is skipped), `runs` (one object per library,
method and system) and `notes`; progress and warnings go to stderr.

Usage: python3 benches/anchors/krylov_peers.py DIR
"""
import contextlib
import inspect
import json
import math
import os
import statistics
import sys
import time
import traceback

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def log(msg):
    print(f"krylov_peers: {msg}", file=sys.stderr, flush=True)


def load_system(directory, entry):
    """The CSR matrix (int32 indices, sorted) and the right-hand side of one system."""
    n, nnz, prefix = int(entry["n"]), int(entry["nnz"]), entry["prefix"]

    def read(suffix, dtype, count):
        path = os.path.join(directory, f"{prefix}_{suffix}.bin")
        arr = np.fromfile(path, dtype=dtype)
        if arr.size != count:
            raise ValueError(f"{path}: {arr.size} values, expected {count}")
        return arr

    indptr = read("indptr", "<i8", n + 1)
    indices = read("indices", "<i4", nnz)
    data = read("data", "<c16", nnz)
    rhs = read("rhs", "<c16", n)
    if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
        raise ValueError(f"{prefix}: inconsistent indptr")
    if nnz < 2**31:
        indptr = indptr.astype(np.int32)
    a = sp.csr_matrix((data.astype(np.complex128), indices, indptr), shape=(n, n))
    a.sort_indices()
    return a, rhs.astype(np.complex128)


def inverse_diagonal(a, notes, name):
    d = a.diagonal()
    zero = d == 0
    if np.any(zero):
        notes.append(f"{name}: {int(zero.sum())} zero diagonal entries, Jacobi uses 1 there")
        d = np.where(zero, 1.0, d)
    return (1.0 / d).astype(np.complex128)


def tolerance_kwargs(func, rtol):
    """`rtol=` or `tol=` (whichever the signature has, rtol first), and atol=0."""
    params = inspect.signature(func).parameters
    kw = {"rtol" if "rtol" in params else "tol": rtol}
    if "atol" in params:
        kw["atol"] = 0.0
    return kw


def true_residual(a, b, x):
    x = np.asarray(x, dtype=np.complex128).ravel()
    return float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))


def finite_or_none(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def clean(obj):
    """Replace NaN/inf by null so that the output is strict JSON."""
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clean(v) for v in obj]
    return finite_or_none(obj)


def thread_note():
    env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
           if k in os.environ}
    text = (f"threads: SciPy's sparse matvec (A @ x) and NumPy's elementwise vector "
            f"operations are single-threaded; this machine has {os.cpu_count()} logical CPUs; "
            f"thread limits in the environment: {env or 'none'}")
    try:
        import threadpoolctl

        pools = [f"{p.get('internal_api')} {p.get('num_threads')} threads"
                 for p in threadpoolctl.threadpool_info()]
        text += f"; BLAS/OpenMP pools (used by norms and dot products): {', '.join(pools) or 'none'}"
    except ImportError:
        text += "; BLAS pool sizes unknown (threadpoolctl not installed)"
    return text


def measure(solve, iterations_of, repeats, sync=None):
    """Warm-up solve, then `repeats` timed solves. Returns per-run lists and the last x."""
    solve()
    times, iters, infos, x = [], [], [], None
    for _ in range(repeats):
        if sync:
            sync()
        t0 = time.perf_counter()
        x, info, count = solve()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
        iters.append(iterations_of(count))
        infos.append(int(info))
    return times, iters, infos, x


def make_record(library, method, name, a, unit):
    return {"library": library, "method": method, "system": name,
            "n": int(a.shape[0]), "nnz": int(a.nnz), "iterations": None,
            "iteration_unit": unit, "matvecs": None, "time_s": None,
            "time_per_iteration_s": None, "times_s": None, "info": None,
            "true_relative_residual": None, "converged": False, "error": None}


def fill_record(rec, a, b, rtol, times, iters, infos, x, matvecs):
    t = statistics.median(times)
    it = statistics.median_low(iters)
    rel = true_residual(a, b, x)
    rec.update({"iterations": int(it), "matvecs": matvecs, "time_s": t,
                "time_per_iteration_s": t / it if it > 0 else None, "times_s": times,
                "info": infos[-1], "true_relative_residual": rel,
                "converged": bool(rel <= 1.01 * rtol)})
    if len(set(iters)) > 1:
        rec["iterations_per_repeat"] = iters
    if len(set(infos)) > 1:
        rec["info_per_repeat"] = infos


# ---------------------------------------------------------------- CPU (SciPy)

def scipy_methods(notes):
    methods = ["bicgstab", "gmres"]
    for extra in ("tfqmr", "qmr"):
        if hasattr(spla, extra):
            methods.append(extra)
        else:
            notes.append(f"scipy {scipy.__version__} has no {extra}: skipped")
    return methods


def scipy_runs(name, a, b, dinv, cfg, methods):
    n = a.shape[0]
    rtol, max_iter, restart, repeats = cfg["rtol"], cfg["max_iter"], cfg["restart"], cfg["repeats"]
    jacobi = spla.LinearOperator((n, n), matvec=lambda x: dinv * x.reshape(-1),
                                 rmatvec=lambda x: dinv.conj() * x.reshape(-1), dtype=np.complex128)
    identity = spla.LinearOperator((n, n), matvec=lambda x: x.reshape(-1),
                                   rmatvec=lambda x: x.reshape(-1), dtype=np.complex128)
    ah = None
    runs = []
    for method in methods:
        func = getattr(spla, method)
        params = inspect.signature(func).parameters
        unit = "iteration"
        kw = tolerance_kwargs(func, rtol)
        if method == "gmres":
            kw.update(restart=restart, maxiter=math.ceil(max_iter / restart))
            if "callback_type" in params:
                kw["callback_type"] = "pr_norm"
                unit = "inner iteration"
            else:
                unit = "callback call (this SciPy's gmres has no callback_type)"
        else:
            kw["maxiter"] = max_iter
        if method == "qmr":
            kw.update(M1=identity, M2=jacobi)
        else:
            kw["M"] = jacobi
        if method == "tfqmr":
            unit = "iteration (SciPy's tfqmr counts half-steps: one A product each)"
        rec = make_record("scipy", method, name, a, unit)

        def solve(op=a):
            count = [0]

            def callback(_):
                count[0] += 1

            x, info = func(op, b, callback=callback, **kw)
            return x, info, count[0]

        try:
            # untimed solve through a wrapper that counts the products with A (and A^H)
            products = [0]

            def mv(x):
                products[0] += 1
                return a @ x.reshape(-1)

            def rmv(x):
                nonlocal ah
                products[0] += 1
                if ah is None:
                    ah = a.conj().T.tocsr()
                return ah @ x.reshape(-1)

            counting = spla.LinearOperator((n, n), matvec=mv, rmatvec=rmv, dtype=np.complex128)
            solve(counting)
            times, iters, infos, x = measure(solve, lambda c: c, repeats)
            fill_record(rec, a, b, rtol, times, iters, infos, x, products[0])
        except Exception as e:  # record and go on
            rec["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
        log(f"scipy {method} on {name}: {rec['iterations']} it, {rec['time_s']} s, "
            f"res {rec['true_relative_residual']}, info {rec['info']}"
            + (f", error {rec['error']}" if rec["error"] else ""))
        runs.append(rec)
    return runs


# ---------------------------------------------------------------- GPU (CuPy)

def open_cupy(notes):
    """(cupy module, cupyx sparse, cupyx sparse linalg, version, device text) or Nones."""
    try:
        import cupy as cp
    except Exception as e:
        notes.append(f"GPU part skipped: cannot import cupy ({type(e).__name__}: {e})")
        return None, None, None, None, None
    version = cp.__version__
    try:
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cspla

        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        dev = props["name"]
        dev = dev.decode() if isinstance(dev, bytes) else str(dev)
        cp.zeros(1).sum()  # touches the device
        gpu = f"{dev} (CUDA runtime {cp.cuda.runtime.runtimeGetVersion()})"
    except Exception as e:
        notes.append(f"GPU part skipped: cupy {version} present but unusable ({type(e).__name__}: {e})")
        return None, None, None, version, None
    return cp, csp, cspla, version, gpu


def cupy_methods(cspla, notes):
    methods = ["gmres", "cgs"]
    if hasattr(cspla, "bicgstab"):
        methods.append("bicgstab")
    else:
        notes.append("this CuPy has no cupyx.scipy.sparse.linalg.bicgstab: skipped")
    return methods


def cupy_gmres_maxiter_is_inner(cspla):
    """Every CuPy gmres so far counts maxiter in inner iterations (`iters += restart`)."""
    try:
        src = inspect.getsource(cspla.gmres)
    except (OSError, TypeError):
        return True
    return "+= restart" in src


def cupy_runs(cp, csp, cspla, name, a, b, dinv, cfg, methods, notes):
    n = a.shape[0]
    rtol, max_iter, restart, repeats = cfg["rtol"], cfg["max_iter"], cfg["restart"], cfg["repeats"]
    restart_eff = min(restart, n)
    sync = cp.cuda.Device().synchronize
    a_gpu = csp.csr_matrix(a)
    b_gpu = cp.asarray(b)
    dinv_gpu = cp.asarray(dinv)
    jacobi = cspla.LinearOperator((n, n), matvec=lambda x: dinv_gpu * x.reshape(-1),
                                  dtype=np.complex128)
    runs = []
    for method in methods:
        func = getattr(cspla, method)
        params = inspect.signature(func).parameters
        kw = tolerance_kwargs(func, rtol)
        kw["M"] = jacobi
        unit = "iteration"
        iterations_of = lambda c: c  # noqa: E731
        if method == "gmres":
            cycles = math.ceil(max_iter / restart)
            kw["restart"] = restart
            if cupy_gmres_maxiter_is_inner(cspla):
                kw["maxiter"] = cycles * restart_eff
            else:
                kw["maxiter"] = cycles
                notes.append("this CuPy's gmres seems to count maxiter in cycles; passed ceil(max_iter/restart)")
            if "callback_type" in params:
                kw["callback_type"] = "pr_norm"
            unit = ("inner iteration (= restart cycles x restart: CuPy's gmres calls back once "
                    "per cycle and always runs full cycles)")
            iterations_of = lambda c: c * restart_eff  # noqa: E731
        else:
            kw["maxiter"] = max_iter
        rec = make_record("cupy", method, name, a, unit)

        def solve(op=a_gpu):
            count = [0]

            def callback(_):
                count[0] += 1

            x, info = func(op, b_gpu, callback=callback, **kw)
            return x, info, count[0]

        try:
            products = [0]

            def mv(x):
                products[0] += 1
                return a_gpu @ x.reshape(-1)

            counting = cspla.LinearOperator((n, n), matvec=mv, dtype=np.complex128)
            solve(counting)
            sync()
            times, iters, infos, x = measure(solve, iterations_of, repeats, sync=sync)
            fill_record(rec, a, b, rtol, times, iters, infos, cp.asnumpy(x), products[0])
            if method == "gmres":
                rec["cycles"] = rec["iterations"] // restart_eff
        except Exception as e:  # record and go on
            rec["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
        log(f"cupy {method} on {name}: {rec['iterations']} it, {rec['time_s']} s, "
            f"res {rec['true_relative_residual']}, info {rec['info']}"
            + (f", error {rec['error']}" if rec["error"] else ""))
        runs.append(rec)
    del a_gpu, b_gpu, dinv_gpu, jacobi
    cp.get_default_memory_pool().free_all_blocks()
    return runs


# ---------------------------------------------------------------- main

def run(directory):
    with open(os.path.join(directory, "systems.json")) as f:
        spec = json.load(f)
    cfg = {"rtol": float(spec.get("rtol", 1e-9)), "max_iter": int(spec.get("max_iter", 1000)),
           "restart": int(spec.get("restart", 30)), "repeats": max(1, int(spec.get("repeats", 3)))}
    notes = [
        thread_note(),
        "all runs: Jacobi M = diag(A)^-1, x0 = 0, atol = 0, stop at ||b - A x|| <= rtol ||b|| "
        "(each solver's own residual estimate; true_relative_residual is recomputed)",
        "scipy qmr: M1 = identity, M2 = Jacobi (right preconditioning); each iteration also "
        "multiplies by A^H",
        "scipy gmres: left preconditioned, inner loop watches the preconditioned residual, "
        "restart cycles end on the true residual",
        "matvecs: products with A (and A^H for qmr) in one untimed solve through a counting wrapper",
    ]
    out = {"scipy_version": scipy.__version__, "numpy_version": np.__version__,
           "cupy_version": None, "gpu": None, **cfg, "runs": [], "notes": notes}

    cpu_methods = scipy_methods(notes)
    cp, csp, cspla, out["cupy_version"], out["gpu"] = open_cupy(notes)
    gpu_methods = cupy_methods(cspla, notes) if cp is not None else []
    if cp is not None:
        notes.append("cupy cgs uses the unconjugated product r0^T r (cupy.dot) for complex data")
        if cupy_gmres_maxiter_is_inner(cspla):
            notes.append("cupy gmres: maxiter counts inner iterations (in steps of restart), "
                         "so ceil(max_iter/restart) x restart was passed (the same cycles as SciPy)")

    for entry in spec["systems"]:
        name = entry["name"]
        try:
            a, b = load_system(directory, entry)
        except Exception as e:
            notes.append(f"{name}: cannot load ({type(e).__name__}: {e})")
            traceback.print_exc(file=sys.stderr)
            continue
        dinv = inverse_diagonal(a, notes, name)
        log(f"{name}: n = {a.shape[0]}, nnz = {a.nnz}")
        out["runs"] += scipy_runs(name, a, b, dinv, cfg, cpu_methods)
        if cp is not None:
            try:
                out["runs"] += cupy_runs(cp, csp, cspla, name, a, b, dinv, cfg, gpu_methods, notes)
            except Exception as e:
                notes.append(f"{name}: GPU runs failed ({type(e).__name__}: {e})")
                traceback.print_exc(file=sys.stderr)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the JSON
        out = run(sys.argv[1])
    print(json.dumps(clean(out), allow_nan=False))


if __name__ == "__main__":
    main()
