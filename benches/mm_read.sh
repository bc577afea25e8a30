#!/usr/bin/env bash
# Issue 50, input at scale: reading Matrix Market files on the GPU machine's host,
# gpuq's reader before and after the parallel parser against SciPy's mmread and
# fast_matrix_market, one call. Built here: gpu-pack/gpuq.xz (release CLI, to
# write the matrix), gpu-pack/mm-new.xz and gpu-pack/mm-old.xz (the release
# `mm_read` bench of gpuq-sparse, cargo build --release -p gpuq-sparse --bench
# mm_read, at this commit and at the commit before the parallel parser), and
# the wheel of fast_matrix_market in .whl. There (carry gpu-pack and .whl):
# bash benches/mm_read.sh. Prints one line per reader and file, each run twice
# (the second with the file in the page cache is the one reported).
set -u
. benches/lib.sh
unpack_gpuq
install_wheels || exit 1
D=/tmp/mmr; mkdir -p $D
awk 'BEGIN { n = 27000000; print "%%MatrixMarket matrix array real general"; print n, 1;
             for (i = 0; i < n; i++) printf "%.17g\n", 1 + sin(0.37 * i) }' > $D/v27.mtx
$G generate laplace3d:200 --out $D/A.mtx > /dev/null
ls -la $D
for v in old new; do xz -dc gpu-pack/mm-$v.xz > /tmp/mm-$v && chmod +x /tmp/mm-$v; done
for run in 1 2; do
  for v in old new; do
    echo "gpuq-$v $(/tmp/mm-$v vector $D/v27.mtx)"
    echo "gpuq-$v $(/tmp/mm-$v matrix $D/A.mtx)"
  done
  python3 - $D/v27.mtx $D/A.mtx <<'PY'
import sys, time
import fast_matrix_market as fmm
import scipy, scipy.io
for path in sys.argv[1:]:
    t = time.perf_counter(); a = scipy.io.mmread(path); ts = time.perf_counter() - t
    t = time.perf_counter(); b = fmm.mmread(path); tf = time.perf_counter() - t
    extra = ""
    if hasattr(b, "tocsr"):
        t = time.perf_counter(); b.tocsr(); extra = " (+ tocsr %.3f)" % (time.perf_counter() - t)
    print("peers %s: scipy %s mmread %.3f, fast_matrix_market %s mmread %.3f%s"
          % (path, scipy.__version__, ts, fmm.__version__, tf, extra))
PY
done
nproc
