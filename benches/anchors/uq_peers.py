#!/usr/bin/env python3
"""CuPy peers for gpuq's UQ procedures (seed 001), timed on the GPU in the same run.

* `sdof`: the nonlinear SDOF oscillator m x'' + c x' + sgn(x')|x'|^0.5 + k x =
  A [sin t + eps_t] (m = 2, c = 1.6, k = 62.84, dt = 0.01, 1000 RK4 steps), one
  array element per sample, every RK4 stage written as CuPy elementwise array
  operations (the "vectorised NumPy on the GPU" form a user writes first), white
  noise N(0,1)/sqrt(dt) held over each step, mean and variance of x at every step
  (a reduction per step, as gpuq's streamed statistics).
* `sdof-fused`: the same with one `cupy.ElementwiseKernel` per RK4 step (the noise
  still drawn by `cupy.random`), the strongest CuPy form short of a raw CUDA kernel.
* `psd`: the rank-1 Hermitian update S += s H H^H of an n x n complex matrix per
  frequency, as cuBLAS `zherk` (through `cupy.cublas.syrk` is real-only, so a
  k = 1 `zgemm` of H and H^H via `cupy.matmul` with a scaled copy) and as a CuPy
  elementwise outer product; bytes moved per update: 2 * 16 n^2 (read and write S).

Timing: `time.perf_counter` around device-synchronised calls, one warm-up run.
Prints one JSON object on stdout.

Usage: python3 benches/anchors/uq_peers.py [--samples 10000000] [--psd-n 2000]
"""
import argparse
import json
import sys
import time

import cupy as cp


def sdof_vectorised(samples, dtype, steps=1000, dt=0.01, seed=1):
    m, c, k, a = 2.0, 1.6, 62.84, 1.0
    x = cp.zeros(samples, dtype)
    v = cp.zeros(samples, dtype)
    rng = cp.random.default_rng(seed)
    means = cp.empty(steps + 1, dtype)
    varis = cp.empty(steps + 1, dtype)
    means[0] = 0
    varis[0] = 0
    scale = dtype(1.0 / dt**0.5)

    def acc(t, x, v, f):
        return (f - c * v - cp.sign(v) * cp.sqrt(cp.abs(v)) - k * x) / m

    for i in range(steps):
        t = i * dt
        eps = rng.standard_normal(samples, dtype=dtype) * scale
        f0 = a * (cp.sin(dtype(t)) + eps)
        fh = a * (cp.sin(dtype(t + dt / 2)) + eps)
        f1 = a * (cp.sin(dtype(t + dt)) + eps)
        k1x, k1v = v, acc(t, x, v, f0)
        k2x = v + dt / 2 * k1v
        k2v = acc(t, x + dt / 2 * k1x, k2x, fh)
        k3x = v + dt / 2 * k2v
        k3v = acc(t, x + dt / 2 * k2x, k3x, fh)
        k4x = v + dt * k3v
        k4v = acc(t, x + dt * k3x, k4x, f1)
        x = x + dt / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        v = v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        means[i + 1] = x.mean()
        varis[i + 1] = x.var()
    return means, varis


_STEP = None


def sdof_fused(samples, dtype, steps=1000, dt=0.01, seed=1):
    global _STEP
    if _STEP is None:
        _STEP = cp.ElementwiseKernel(
            "T eps, T s0, T sh, T s1, T dt",
            "T x, T v",
            """
            const T m = 2.0, c = 1.6, k = 62.84;
            T f0 = s0 + eps, fh = sh + eps, f1 = s1 + eps;
            #define ACC(X, V, F) (((F) - c * (V) - copysign(sqrt(fabs(V)), (V)) - k * (X)) / m)
            T k1x = v, k1v = ACC(x, v, f0);
            T k2x = v + dt / 2 * k1v, k2v = ACC(x + dt / 2 * k1x, k2x, fh);
            T k3x = v + dt / 2 * k2v, k3v = ACC(x + dt / 2 * k2x, k3x, fh);
            T k4x = v + dt * k3v, k4v = ACC(x + dt * k3x, k4x, f1);
            x = x + dt / 6 * (k1x + 2 * k2x + 2 * k3x + k4x);
            v = v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v);
            """,
            "sdof_rk4_step",
        )
    x = cp.zeros(samples, dtype)
    v = cp.zeros(samples, dtype)
    rng = cp.random.default_rng(seed)
    means = cp.empty(steps + 1, dtype)
    varis = cp.empty(steps + 1, dtype)
    means[0] = 0
    varis[0] = 0
    scale = dtype(1.0 / dt**0.5)
    for i in range(steps):
        t = i * dt
        eps = rng.standard_normal(samples, dtype=dtype) * scale
        _STEP(eps, dtype(cp.sin(t).item()), dtype(cp.sin(t + dt / 2).item()),
              dtype(cp.sin(t + dt).item()), dtype(dt), x, v)
        means[i + 1] = x.mean()
        varis[i + 1] = x.var()
    return means, varis


def timed(fn, *args, reps=1):
    fn(*args)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn(*args)
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / reps, out


def psd_runs(n, updates=20):
    rng = cp.random.default_rng(3)
    h = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(cp.complex128)
    s = cp.zeros((n, n), cp.complex128)
    hh = h.reshape(n, 1)
    hc = hh.conj().T

    def gemm():
        for _ in range(updates):
            # S += 0.5 h h^H: a k = 1 complex GEMM with beta = 1 (cuBLAS zgemm)
            s[...] += cp.matmul(hh * 0.5, hc)
        return s

    def outer():
        for _ in range(updates):
            s[...] += 0.5 * hh * hc
        return s

    out = {}
    for name, fn in [("cupy-matmul-add", gemm), ("cupy-outer-add", outer)]:
        secs, _ = timed(fn)
        out[name] = secs / updates
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=10_000_000)
    p.add_argument("--psd-n", type=int, default=2000)
    p.add_argument("--what", default="sdof,sdof-fused,psd")
    a = p.parse_args()
    runs = []
    what = a.what.split(",")
    for dtype in (cp.float64, cp.float32):
        for name, fn in [("sdof", sdof_vectorised), ("sdof-fused", sdof_fused)]:
            if name not in what:
                continue
            print(f"{name} {dtype.__name__} {a.samples}", file=sys.stderr)
            secs, (means, varis) = timed(fn, a.samples, dtype)
            runs.append({"peer": f"cupy {name}", "precision": dtype.__name__,
                         "samples": a.samples, "time_s": secs,
                         "final_mean": float(means[-1]), "final_variance": float(varis[-1])})
    if "psd" in what:
        for name, secs in psd_runs(a.psd_n).items():
            runs.append({"peer": name, "n": a.psd_n, "time_per_update_s": secs,
                         "bytes_floor": 2 * 16 * a.psd_n**2})
    print(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
