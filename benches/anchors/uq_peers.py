#!/usr/bin/env python3
"""CuPy peers for gpuq's UQ procedures (seed 001), timed on the GPU in the same run,
and with `--xp numpy` the same array programs as NumPy/SciPy peers on the CPU
(`numpy.fft`, `scipy.signal.lfilter`, batched `numpy.linalg.solve`; the fused
kernels and cuBLAS are CuPy only).

* `sdof`: the nonlinear SDOF oscillator m x'' + c x' + sgn(x')|x'|^0.5 + k x =
  A [sin t + eps_t] (m = 2, c = 1.6, k = 62.84, dt = 0.01, 1000 RK4 steps), one
  array element per sample, every RK4 stage written as CuPy elementwise array
  operations (the "vectorised NumPy on the GPU" form a user writes first), white
  noise N(0,1)/sqrt(dt) held over each step, mean and variance of x at every step
  (a reduction per step, as gpuq's streamed statistics).
* `sdof-fused`: the same with one `cupy.ElementwiseKernel` per RK4 step (the noise
  still drawn by `cupy.random`), the strongest CuPy form short of a raw CUDA kernel.
* `psd`: S_xx(w_f) = s_f h_f h_f^H, an n x n complex matrix per frequency for nf
  frequencies (n = 512, nf = 201 by default), as one CuPy broadcast multiply and as
  one cuBLAS `zherk` (k = 1, `cublasZherk_v2` called through ctypes on the
  image's libcublas, with a handle of its own) per frequency;
  the floor is the 16 n^2 nf bytes written (zherk writes one triangle: half).

Timing: `time.perf_counter` around device-synchronised calls, one warm-up run.
Prints one JSON object on stdout.

* `expectation`: E[q^T q] by the tensor Gauss-Hermite rule (6^10 nodes by default), as
  CuPy array operations and as one fused `ElementwiseKernel`.
* `convolution`: AR(1) loads by `cupyx.scipy.signal.lfilter`, then `cupy.fft`
  rfft / product / irfft of length 2 N_t (8192 steps, 1000 samples by default),
  then what gpuq reports: mean and standard deviation over the samples at every
  step and each sample's peak |y|.
* `static`: the cantilever of (i) (128 DOFs, 64 Hermite elements, E = I = L = 1)
  with independent lognormal element moduli (cov 0.1) and a normal tip load
  (mean 1, std 0.1), 10^5 samples, mean and std of the tip deflection: (a) the
  banded Cholesky vectorised over the samples (one CuPy array operation per
  band entry and row, band stored row by row with the samples contiguous) and
  (b) the seed's dense path, `cupy.linalg.solve` on batches of 10^4 dense K.

Usage: python3 benches/anchors/uq_peers.py [--samples N] [--psd-n N] [--psd-freqs NF]
       [--what sdof,sdof-fused,psd,expectation,convolution,static] [--xp cupy|numpy]
"""
import argparse
import json
import sys
import time

# The array module: CuPy on the GPU (the default), or NumPy/SciPy on the CPU
# (`--xp numpy`), set by main(). The fused kernels and cuBLAS are CuPy only.
xp = None
XP = "cupy"


def sdof_vectorised(samples, dtype, steps=1000, dt=0.01, seed=1):
    m, c, k, a = 2.0, 1.6, 62.84, 1.0
    x = xp.zeros(samples, dtype)
    v = xp.zeros(samples, dtype)
    rng = xp.random.default_rng(seed)
    means = xp.empty(steps + 1, dtype)
    varis = xp.empty(steps + 1, dtype)
    means[0] = 0
    varis[0] = 0
    scale = dtype(1.0 / dt**0.5)

    def acc(t, x, v, f):
        return (f - c * v - xp.sign(v) * xp.sqrt(xp.abs(v)) - k * x) / m

    for i in range(steps):
        t = i * dt
        eps = rng.standard_normal(samples, dtype=dtype) * scale
        f0 = a * (xp.sin(dtype(t)) + eps)
        fh = a * (xp.sin(dtype(t + dt / 2)) + eps)
        f1 = a * (xp.sin(dtype(t + dt)) + eps)
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
        _STEP = xp.ElementwiseKernel(
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
    x = xp.zeros(samples, dtype)
    v = xp.zeros(samples, dtype)
    rng = xp.random.default_rng(seed)
    means = xp.empty(steps + 1, dtype)
    varis = xp.empty(steps + 1, dtype)
    means[0] = 0
    varis[0] = 0
    scale = dtype(1.0 / dt**0.5)
    for i in range(steps):
        t = i * dt
        eps = rng.standard_normal(samples, dtype=dtype) * scale
        _STEP(eps, dtype(xp.sin(t).item()), dtype(xp.sin(t + dt / 2).item()),
              dtype(xp.sin(t + dt).item()), dtype(dt), x, v)
        means[i + 1] = x.mean()
        varis[i + 1] = x.var()
    return means, varis


def sync():
    if XP == "cupy":
        xp.cuda.Device().synchronize()


def timed(fn, *args, reps=1):
    fn(*args)
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn(*args)
    sync()
    return (time.perf_counter() - t0) / reps, out


def zherk_peer(h, s, out, n, nf):
    """One cuBLAS `zherk` (k = 1) per frequency writing S_xx(w_f) = s_f h_f h_f^H
    into out[f] (one triangle), called through ctypes."""
    import ctypes
    import glob

    def load_cublas():
        names = ["libcublas.so", "libcublas.so.13", "libcublas.so.12"]
        names += sorted(glob.glob("/usr/local/cuda*/targets/x86_64-linux/lib/libcublas.so*"))
        names += sorted(glob.glob("/usr/local/cuda*/lib64/libcublas.so*"))
        for name in names:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
        raise OSError("libcublas not found")

    lib = load_cublas()
    vp, ci = ctypes.c_void_p, ctypes.c_int
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
    lib.cublasZherk_v2.argtypes = [vp, ci, ci, ci, ci, vp, vp, ci, vp, vp, ci]
    handle = vp()
    if lib.cublasCreate_v2(ctypes.byref(handle)) != 0:
        raise RuntimeError("cublasCreate failed")
    upper, op_n = 1, 0  # CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N
    s_host = xp.asnumpy(s)  # CuPy only (this peer is skipped with --xp numpy)
    alphas = [ctypes.c_double(float(v)) for v in s_host]
    beta = ctypes.c_double(0.0)

    def herk():
        # column-major C = alpha A A^H with A the n x 1 column h_f, on the
        # legacy default stream (CuPy's too)
        for f in range(nf):
            st = lib.cublasZherk_v2(handle, upper, op_n, n, 1, ctypes.addressof(alphas[f]),
                                    h[f].data.ptr, n, ctypes.addressof(beta), out[f].data.ptr, n)
            if st != 0:
                raise RuntimeError(f"cublasZherk_v2 returned {st}")
        return out
    return herk


def psd_runs(n, nf):
    """S_xx(w_f) = s_f h_f h_f^H for nf frequencies (n x n complex each, written
    once: 16 n^2 nf bytes, the floor), as CuPy broadcasting and as one cuBLAS
    `zherk` per frequency (k = 1; it writes one triangle, half the bytes)."""
    rng = xp.random.default_rng(3)
    h = (rng.standard_normal((nf, n)) + 1j * rng.standard_normal((nf, n))).astype(xp.complex128)
    s = rng.random(nf) + 0.5
    out = xp.empty((nf, n, n), xp.complex128)

    def broadcast():
        xp.multiply((s[:, None] * h)[:, :, None], h.conj()[:, None, :], out=out)
        return out

    res = {}
    peers = [(f"{XP}-broadcast", broadcast)]
    if XP == "cupy":
        try:
            peers.append(("cublas-zherk-loop", zherk_peer(h, s, out, n, nf)))
        except Exception as e:  # noqa: BLE001 - a peer's failure is data
            res["cublas-zherk-loop"] = repr(e)
    for name, fn in peers:
        try:
            secs = min(timed(fn)[0] for _ in range(5))
            res[name] = secs
        except Exception as e:  # noqa: BLE001 - a peer's failure is data
            res[name] = repr(e)
    return res


def expectation_runs(dim, pts):
    """E[q^T q] for q ~ N(0, I_dim) by the tensor Gauss-Hermite rule of pts points
    per axis (pts^dim nodes, the flat index decoded into digits): as CuPy array
    operations (one pass per axis) and as one fused ElementwiseKernel plus a sum."""
    import numpy as np

    x, w = np.polynomial.hermite_e.hermegauss(pts)
    w = w / w.sum()
    xd, wd = xp.asarray(x), xp.asarray(w)
    total = pts**dim

    def vectorised():
        idx = xp.arange(total, dtype=xp.int64)
        acc_w = xp.ones(total)
        acc_f = xp.zeros(total)
        for _ in range(dim):
            digit = idx % pts
            idx //= pts
            acc_w *= wd[digit]
            acc_f += xd[digit] ** 2
        return float((acc_w * acc_f).sum())

    kern = []

    def fused():
        if not kern:
            kern.append(xp.ElementwiseKernel(
                "int64 idx, raw float64 xs, raw float64 ws, int32 dim, int32 pts", "float64 out",
                """long long k = idx; double wp = 1.0, f = 0.0;
           for (int d = 0; d < dim; ++d) { int j = k % pts; k /= pts;
             wp *= ws[j]; f += xs[j] * xs[j]; }
           out = wp * f;""", "gh_tensor"))
        out = kern[0](xp.arange(total, dtype=xp.int64), xd, wd, xp.int32(dim), xp.int32(pts))
        return float(out.sum())

    res = {}
    for name, fn in [(f"{XP}-gh-vectorised", vectorised)] + ([("cupy-gh-fused", fused)] if XP == "cupy" else []):
        try:
            secs, val = timed(fn)
            res[name] = (min(secs, *(timed(fn)[0] for _ in range(2))), val)
        except Exception as e:  # noqa: BLE001 - a peer's failure is data
            res[name] = (repr(e), None)
    return res


def convolution_runs(steps, samples, phi=0.9):
    """The FFT convolution of (iii) for `samples` AR(1) load records of `steps`
    points with one kernel: the loads by `cupyx.scipy.signal.lfilter` from
    normal draws, then `cupy.fft.rfft` of length 2 steps, the product with the
    kernel's spectrum and `irfft`."""
    if XP == "cupy":
        from cupyx.scipy import signal
    else:
        from scipy import signal

    rng = xp.random.default_rng(5)
    h = xp.exp(-0.01 * xp.arange(steps)) * xp.sin(0.3 * xp.arange(steps))
    hs = xp.fft.rfft(h, 2 * steps)

    def run():
        e = rng.standard_normal((samples, steps))
        f = signal.lfilter(xp.array([1.0]), xp.array([1.0, -phi]), e, axis=1)
        y = xp.fft.irfft(xp.fft.rfft(f, 2 * steps, axis=1) * hs, 2 * steps, axis=1)[:, :steps]
        return y.mean(axis=0), y.std(axis=0, ddof=1), xp.abs(y).max(axis=1)

    try:
        return {f"{XP}-fft-convolution": min(timed(run)[0] for _ in range(3))}
    except Exception as e:  # noqa: BLE001 - a peer's failure is data
        return {f"{XP}-fft-convolution": repr(e)}


def static_runs(samples, dofs=128, cov=0.1, load_mean=1.0, load_std=0.1, dense_batch=10_000):
    """Random static response of the cantilever (procedure (i)), see the module notes."""
    import math

    ne = dofs // 2
    n = dofs
    h = 1.0 / ne
    s2 = math.log(1.0 + cov * cov)
    mu, sig = -0.5 * s2, math.sqrt(s2)
    a = 1.0 / h**3
    # Element stiffness of E I = 1 (scaled per element by its modulus).
    ke = [[a * v for v in row] for row in [[12.0, 6 * h, -12.0, 6 * h],
                                           [6 * h, 4 * h * h, -6 * h, 2 * h * h],
                                           [-12.0, -6 * h, 12.0, -6 * h],
                                           [6 * h, 2 * h * h, -6 * h, 4 * h * h]]]
    rng = xp.random.default_rng(3)

    def band(E, count):
        # B[i, d] = K[i, i - d] of every sample (the fixed end's two DOFs removed).
        B = xp.zeros((n, 4, count))
        for ai in range(4):
            for bi in range(ai + 1):
                d = ai - bi
                e0 = 1 if bi < 2 else 0  # first element whose both DOFs are free
                rows = slice(2 * e0 + ai - 2, 2 * ne + ai - 2, 2)
                B[rows, d, :] += ke[ai][bi] * E[e0:, :]
        return B

    def banded():
        E = xp.exp(mu + sig * rng.standard_normal((ne, samples)))
        P = load_mean + load_std * rng.standard_normal(samples)
        B = band(E, samples)
        for j in range(n):
            for k in range(max(0, j - 3), j):
                B[j, 0] -= B[j, j - k] ** 2
            B[j, 0] = xp.sqrt(B[j, 0])
            for i in range(j + 1, min(n, j + 4)):
                v = B[i, i - j]
                for k in range(max(0, i - 3), j):
                    v = v - B[i, i - k] * B[j, j - k]
                B[i, i - j] = v / B[j, 0]
        y = xp.zeros((n, samples))
        y[n - 2] = P
        for i in range(n):
            v = y[i]
            for k in range(max(0, i - 3), i):
                v = v - B[i, i - k] * y[k]
            y[i] = v / B[i, 0]
        for i in range(n - 1, -1, -1):
            v = y[i]
            for k in range(i + 1, min(n, i + 4)):
                v = v - B[k, k - i] * y[k]
            y[i] = v / B[i, 0]
        tip = y[n - 2]
        return float(tip.mean()), float(tip.std(ddof=1))

    def dense():
        tips = []
        done = 0
        while done < samples:
            c = min(dense_batch, samples - done)
            E = xp.exp(mu + sig * rng.standard_normal((ne, c)))
            P = load_mean + load_std * rng.standard_normal(c)
            B = band(E, c)
            K = xp.zeros((c, n, n))
            idx = xp.arange(n)
            for d in range(4):
                i = idx[d:]
                K[:, i, i - d] = B[d:, d, :].T
                K[:, i - d, i] = B[d:, d, :].T
            f = xp.zeros((c, n))
            f[:, n - 2] = P
            tips.append(xp.linalg.solve(K, f[..., None])[:, n - 2, 0])
            done += c
        tip = xp.concatenate(tips)
        return float(tip.mean()), float(tip.std(ddof=1))

    res = {}
    for name, fn in [(f"{XP}-static-banded-vectorised", banded), (f"{XP}-static-dense-batched", dense)]:
        try:
            secs, val = timed(fn)
            res[name] = (min(secs, timed(fn)[0]), val)
        except Exception as e:  # noqa: BLE001 - a peer's failure is data
            res[name] = (repr(e), None)
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=10_000_000)
    p.add_argument("--psd-n", type=int, default=512)
    p.add_argument("--psd-freqs", type=int, default=201)
    p.add_argument("--what", default="sdof,sdof-fused,psd")
    p.add_argument("--gh-dim", type=int, default=10)
    p.add_argument("--gh-points", type=int, default=6)
    p.add_argument("--conv-steps", type=int, default=8192)
    p.add_argument("--conv-samples", type=int, default=1000)
    p.add_argument("--static-samples", type=int, default=100_000)
    p.add_argument("--xp", choices=["cupy", "numpy"], default="cupy",
                   help="CuPy on the GPU, or NumPy/SciPy on the CPU (no fused kernels, no cuBLAS)")
    a = p.parse_args()
    global xp, XP
    XP = a.xp
    if XP == "cupy":
        import cupy as xp
    else:
        import numpy as xp
    runs = []
    what = a.what.split(",")
    for dtype in (xp.float64, xp.float32):
        for name, fn in [("sdof", sdof_vectorised), ("sdof-fused", sdof_fused)]:
            if name not in what or (XP == "numpy" and name == "sdof-fused"):
                continue
            print(f"{name} {dtype.__name__} {a.samples}", file=sys.stderr)
            secs, (means, varis) = timed(fn, a.samples, dtype)
            runs.append({"peer": f"{XP} {name}", "precision": dtype.__name__,
                         "samples": a.samples, "time_s": secs,
                         "final_mean": float(means[-1]), "final_variance": float(varis[-1])})
    if "psd" in what:
        for name, secs in psd_runs(a.psd_n, a.psd_freqs).items():
            runs.append({"peer": name, "n": a.psd_n, "freqs": a.psd_freqs, "time_s": secs,
                         "bytes_floor": 16 * a.psd_n**2 * a.psd_freqs})
    if "expectation" in what:
        for name, (secs, val) in expectation_runs(a.gh_dim, a.gh_points).items():
            runs.append({"peer": name, "dim": a.gh_dim, "points": a.gh_points,
                         "time_s": secs, "estimate": val})
    if "convolution" in what:
        for name, secs in convolution_runs(a.conv_steps, a.conv_samples).items():
            runs.append({"peer": name, "steps": a.conv_steps, "samples": a.conv_samples,
                         "time_s": secs})
    if "static" in what:
        for name, (secs, val) in static_runs(a.static_samples).items():
            runs.append({"peer": name, "samples": a.static_samples, "time_s": secs,
                         "tip_mean_std": val})
    print(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
