#!/usr/bin/env bash
# A random stiffness on a 10^6-DOF model (issue 51, item 6): the device driver of one
# system, run from the repository root on the device machine after packing the release
# CLI here (gpu-pack/gpuq.xz; optionally an older CLI as gpu-pack/gpuq-before.xz to run
# side by side). K = laplace3d:RS_N (default 100: 10^6 DOFs) from `gpuq generate`; RS_TERMS
# terms (default 10) K_k = K's principal block on slab k of the rows (one random
# coefficient per slab of the body), theta_k uniform on [0, 1]; load 1 on every DOF;
# AMG-PCG (`--solver pcg`) to 1e-8. gpuq on the GPU (RS_SAMPLES, default 1000) and on the
# host's cores (RS_HOST_SAMPLES, default 50), then SciPy's CG + Jacobi per sample
# (benches/anchors/random_stiffness_peers.py, RS_SCIPY_SAMPLES, default 2). A table last.
set -u
source benches/lib.sh
unpack_gpuq | sed 's/^/device: /'
echo "host: $(nproc) cores"
W=/tmp/gpuq-rs; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
N="${RS_N:-100}"; T="${RS_TERMS:-10}"
"$G" generate "laplace3d:$N" --out "$W/K.mtx" 2>"$W/gen.err"
python3 - "$W" "$T" <<'PY'
import sys
import numpy as np
import scipy.io, scipy.sparse as sp
w, t = sys.argv[1], int(sys.argv[2])
k = sp.coo_matrix(scipy.io.mmread(f"{w}/K.mtx"))
n = k.shape[0]
slab = np.minimum(np.arange(n) * t // n, t - 1)
for s in range(t):
    keep = (slab[k.row] == s) & (slab[k.col] == s)
    m = sp.coo_matrix((k.data[keep], (k.row[keep], k.col[keep])), shape=k.shape)
    scipy.io.mmwrite(f"{w}/T{s + 1}.mtx", m, symmetry="symmetric")
PY
TERMS=$(seq -s, -f "$W/T%g.mtx" 1 "$T")
DOFS=$(grep -v '^%' "$W/K.mtx" | head -1 | awk '{print $1}')
OUTS="$((DOFS / 2 + N * N / 2 + N / 2)),100"
row "model" "laplace3d:$N, $DOFS DOFs, $T slab terms, outputs $OUTS"
static() {  # binary label backend samples
  timeout "${RS_STEP_S:-200}" "$1" uq static --stiffness "$W/K.mtx" --stiffness-terms "$TERMS" --theta uniform:0:1 \
    --load-mean 1 --load-std 0 --outputs "$OUTS" --samples "$4" --solver pcg --backend "$3" --json >"$W/$2.json" 2>"$W/$2.err"
  row "$2 ($4 samples)" "rc=$? $(json_fields "$W/$2.json" time_s setup_s solve_s iterations.1 outputs.0.mean outputs.0.std max_residual)"
}
static "$G" "gpuq cuda" cuda "${RS_SAMPLES:-1000}"
static "$G" "gpuq cuda, same samples as host" cuda "${RS_HOST_SAMPLES:-50}"
if [ -e gpu-pack/gpuq-before.xz ]; then
  xz -dc gpu-pack/gpuq-before.xz > /tmp/gpuq-before && chmod +x /tmp/gpuq-before
  static /tmp/gpuq-before "before: term by term, cuda" cuda "${RS_HOST_SAMPLES:-50}"
fi
static "$G" "gpuq cpu (16 cores)" cpu "${RS_HOST_SAMPLES:-50}"
timeout "${RS_PEER_S:-240}" python3 benches/anchors/random_stiffness_peers.py "$W/K.mtx" "$TERMS" \
  --samples "${RS_SCIPY_SAMPLES:-2}" >"$W/scipy.json" 2>"$W/scipy.err"
row "scipy cg + jacobi per sample" "rc=$? $(json_fields "$W/scipy.json" per_sample_s iterations.0)"
tail -n 2 "$W"/*.err | grep -v '^$' | head -30
printf '\n== summary\n'
printf "$TABLE"
