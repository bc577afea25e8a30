#!/usr/bin/env bash
# Issue 50, input at scale: reading matrix and vector files on the GPU machine's host, one
# call: gpuq's one-process readers (the `mm_read` bench of gpuq-sparse: Matrix Market and
# PETSc binary, the bytes to CSR) against SciPy's mmread and fast_matrix_market on the same
# files, then every rank reading its own rows under mpirun (CPU ranks, `input_s` of the
# distributed solve's report: A and b) for 1, 2 and 4 ranks, Matrix Market and PETSc.
# Built here: gpu-pack/gpuq.xz (release CLI with --features mpi, to write the files and
# run the ranks), gpu-pack/mm-new.xz (cargo build --release -p gpuq-sparse --bench
# mm_read), the wheel of fast_matrix_market in .whl. There (carry gpu-pack and .whl):
# bash benches/mm_read.sh. Each reader runs twice (the second, with the file in the page
# cache, is the one reported); a table last.
set -u
. benches/lib.sh
unpack_gpuq
install_wheels || exit 1
D=/tmp/mmr; mkdir -p $D
awk 'BEGIN { n = 27000000; print "%%MatrixMarket matrix array real general"; print n, 1;
             for (i = 0; i < n; i++) printf "%.17g\n", 1 + sin(0.37 * i) }' > $D/v27.mtx
$G generate laplace3d:200 --out $D/A.mtx --rhs-out $D/b.mtx 2> /dev/null
$G generate laplace3d:200 --format petsc --out $D/A.petsc --rhs-out $D/b.petsc 2> /dev/null
ls -la $D
xz -dc gpu-pack/mm-new.xz > /tmp/mm-new && chmod +x /tmp/mm-new
R="mpirun --allow-run-as-root --oversubscribe --bind-to none"
for run in 1 2; do
  echo "RUN $run"
  echo "gpuq vector v27.mtx: $(/tmp/mm-new vector $D/v27.mtx)"
  echo "gpuq matrix A.mtx: $(/tmp/mm-new matrix $D/A.mtx)"
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
  for fmt in mtx petsc; do
    for n in 1 2 4; do
      $R -n $n $G solve $D/A.$fmt --rhs $D/b.$fmt --method cg --max-iter 1 --json > /tmp/r.json 2> /tmp/r.err
      python3 -c "
import json
d = json.load(open('/tmp/r.json'))
print('RANKS $fmt %d ranks: input_s %.3f (n %d)' % (d['ranks'], d['input_s'], d['n']))" \
        || head -c 400 /tmp/r.err
    done
  done
done
nproc
