#!/usr/bin/env python3
"""cuSPARSE on a block matrix, for the block table of `benches/gpu.rs`.

Usage: cusparse_bsr.py BASE B. Reads the CSR arrays BASE.ptr (int64), BASE.col
(uint32) and BASE.val (float64) that the Rust bench wrote, and times y = A x
on the GPU in two ways: CuPy's CSR SpMV (`cupyx.scipy.sparse.csr_matrix @ x`,
cuSPARSE's generic SpMV) and the BSR product `cusparseDbsrmv` with B x B blocks
(row-major blocks from SciPy's `tobsr`), called through ctypes on CuPy's arrays.
Timing as the Rust bench (`cupy_gpu.median_time`): a warm-up call, reps calls
per sample (a sample about 20 ms), median of 7 samples, CUDA events. Prints one JSON object: csr_s,
bsrmv_s (seconds per call), nnzb and max_rel_diff (the two products' largest
difference relative to the largest entry).
"""
import ctypes
import glob
import json
import sys

import cupy as cp
import cupyx.scipy.sparse as cps
import numpy as np
import scipy.sparse as sp

from cupy_gpu import median_time  # the same timing as the other GPU anchors


def cusparse_library():
    for d in ["/usr/local/cuda-13.0/targets/x86_64-linux/lib", "/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"]:
        for path in sorted(glob.glob(f"{d}/libcusparse.so*")):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return ctypes.CDLL("libcusparse.so")


def main():
    base, b = sys.argv[1], int(sys.argv[2])
    ptr = np.fromfile(base + ".ptr", dtype=np.int64)
    col = np.fromfile(base + ".col", dtype=np.uint32).astype(np.int32)
    val = np.fromfile(base + ".val", dtype=np.float64)
    n = len(ptr) - 1
    a = sp.csr_matrix((val, col, ptr), shape=(n, n))
    x = cp.asarray(np.random.default_rng(3).uniform(-1.0, 1.0, n))

    ad = cps.csr_matrix(a)
    y_csr = ad @ x
    csr_s = median_time(lambda: ad @ x)

    bsr = a.tobsr(blocksize=(b, b))
    bsr.sort_indices()
    vals = cp.asarray(np.ascontiguousarray(bsr.data))
    bptr = cp.asarray(bsr.indptr.astype(np.int32))
    bcol = cp.asarray(bsr.indices.astype(np.int32))
    mb, nnzb = n // b, bsr.indices.size
    y = cp.zeros(n)

    lib = cusparse_library()
    vp = ctypes.c_void_p
    handle, descr = vp(), vp()
    assert lib.cusparseCreate(ctypes.byref(handle)) == 0
    assert lib.cusparseSetStream(handle, vp(cp.cuda.get_current_stream().ptr)) == 0
    assert lib.cusparseCreateMatDescr(ctypes.byref(descr)) == 0
    lib.cusparseDbsrmv.argtypes = [vp, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int, vp, vp, vp, vp, vp, ctypes.c_int, vp, vp, vp]
    alpha, beta = ctypes.c_double(1.0), ctypes.c_double(0.0)
    ROW, NON_TRANSPOSE = 0, 0

    def bsrmv():
        status = lib.cusparseDbsrmv(handle, ROW, NON_TRANSPOSE, mb, mb, nnzb,
                                    ctypes.addressof(alpha), descr, vals.data.ptr, bptr.data.ptr,
                                    bcol.data.ptr, b, x.data.ptr, ctypes.addressof(beta), y.data.ptr)
        assert status == 0, f"cusparseDbsrmv status {status}"

    bsrmv()
    cp.cuda.Device().synchronize()
    scale = float(cp.abs(y_csr).max())
    diff = float(cp.abs(y - y_csr).max()) / scale
    bsrmv_s = median_time(bsrmv)
    print(json.dumps({"csr_s": csr_s, "bsrmv_s": bsrmv_s, "nnzb": int(nnzb), "max_rel_diff": diff}))


if __name__ == "__main__":
    main()
