#!/usr/bin/env bash
# UQ on a user's model (issue 30): the device driver of one system, run from the repository
# root on the device machine after `cargo xtask gpu-pack` here:
#   bash benches/uq_model.sh gpuq     # the model tests, then gpuq's runs; a table last
#   bash benches/uq_model.sh peers    # SciPy and CuPy on the same model
#   bash benches/uq_model.sh all      # both (over 10 minutes at the default size)
# The model: elasticity2d:N (2 N (N + 1) DOFs, UQ_MODEL_N, default 707: about 10^6) and a
# unit lumped mass M = I, written as Matrix Market files by gpuq. gpuq's static response
# (UQ_SAMPLES load samples, K deterministic), its 50 lowest modes with the modal PSD over
# 1000 frequencies, and its modal convolution on the GPU, against SciPy (splu with many
# right-hand sides, eigsh shift-invert) and CuPy's CG: benches/anchors/uq_model_peers.py.
# UQ_MODES=0 skips the modes (gpuq's PSD and convolution, SciPy's eigsh); UQ_TESTS=0 the tests.
# Logs go to $OUT/logs-uq-model.tgz when $OUT is set.
set -u
WHAT="${1:-all}"
bash gpu-pack/run.sh unpack >/dev/null || exit 1
G=/tmp/gpuq-pack/gpuq
W=/tmp/gpuq-uq-model; rm -rf "$W"; mkdir -p "$W"
export GPUQ_BIN="$G"
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
N="${UQ_MODEL_N:-707}"; S="${UQ_SAMPLES:-1000}"
TABLE=""
row() { TABLE="$TABLE$(printf '%-34s %s' "$1" "$2")\n"; printf 'ROW %-34s %s\n' "$1" "$2"; }
j() { python3 - "$@" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"(no json: {e.__class__.__name__})"); sys.exit()
out = []
for k in sys.argv[2:]:
    v = d
    for p in k.split("."):
        v = v[int(p)] if isinstance(v, list) else (v.get(p) if isinstance(v, dict) else None)
    out.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
print(" ".join(out))
PY
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | sed 's/^/device: /'
echo "host: $(nproc) cores"
if [ "$WHAT" != peers ] && [ "${UQ_TESTS:-1}" = 1 ]; then
    for t in /tmp/gpuq-pack/test-gpuq-uq-* /tmp/gpuq-pack/test-gpuq-cli-test-uq; do
        timeout 300 "$t" >"$W/$(basename "$t").log" 2>&1
        row "$(basename "$t")" "rc=$? $(grep -E '^test result:' "$W/$(basename "$t").log" | awk '{p+=$4; f+=$6} END {printf "%d passed, %d failed", p, f}')"
    done
fi
"$G" generate "elasticity2d:$N" --out "$W/K.mtx" 2>"$W/gen.err"
DOFS=$(grep -v '^%' "$W/K.mtx" | head -1 | awk '{print $1}')
python3 - "$W/M.mtx" "$DOFS" <<'PY'
import sys
n = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    f.write("%%MatrixMarket matrix coordinate real symmetric\n")
    f.write(f"{n} {n} {n}\n")
    f.write("".join(f"{i} {i} 1\n" for i in range(1, n + 1)))
PY
OUTS="$((DOFS / 2)),$((DOFS - 1))"
row "model" "elasticity2d:$N, $DOFS DOFs, outputs $OUTS"
if [ "$WHAT" != peers ]; then
TIMEV=""; [ -x /usr/bin/time ] && TIMEV="/usr/bin/time -v"
timeout "${UQ_STEP_S:-200}" $TIMEV "$G" uq static --stiffness "$W/K.mtx" --load-mean 1 --load-std 0.1 --outputs "$OUTS" \
    --samples "$S" --json >"$W/static.json" 2>"$W/static.err"
row "gpuq static (host, $S samples)" "$(j "$W/static.json" factor_s solve_s time_s setup_s outputs.0.mean outputs.0.exact_mean outputs.0.std outputs.0.exact_std)"
row "gpuq static peak memory" "$(grep 'Maximum resident' "$W/static.err" | awk '{print $NF/1e6 " GB"}')"
if [ "${UQ_MODES:-1}" = 1 ]; then
timeout "${UQ_STEP_S:-200}" "$G" uq psd --stiffness "$W/K.mtx" --mass "$W/M.mtx" --modal-damping 0.02 --modes 50 --load-dofs "$((DOFS / 2))" \
    --outputs "$OUTS" --freq-range 0:0.1:1000 --json >"$W/psd.json" 2>"$W/psd.err"
row "gpuq 50 modes + PSD (host)" "$(j "$W/psd.json" eig_s time_s modes.iterations modes.max_residual modes.omega.0 modes.omega.49)"
timeout "${UQ_STEP_S:-200}" "$G" uq convolution --stiffness "$W/K.mtx" --mass "$W/M.mtx" --modal-damping 0.02 --modes 20 --load-dofs "$((DOFS / 2))" \
    --outputs "$OUTS" --steps 8192 --samples "$S" --backend cuda --repeat 3 --json >"$W/conv.json" 2>"$W/conv.err"
row "gpuq modal convolution (cuda)" "$(j "$W/conv.json" setup_s time_s first_s outputs.0.final_std)"
fi
fi
if [ "$WHAT" != gpuq ]; then
timeout "${UQ_PEERS_S:-540}" python3 benches/anchors/uq_model_peers.py "$W/K.mtx" "$W/M.mtx" --samples "$S" --outputs "$OUTS" \
    --modes 50 $([ "${UQ_MODES:-1}" = 1 ] || echo --skip-eigsh) >"$W/peers.json" 2>"$W/peers.err"
row "scipy splu + solves" "$(j "$W/peers.json" scipy_static.factor_s scipy_static.solve_s scipy_static.time_s scipy_static.mean.0 scipy_static.std.0)"
row "cupy cg per sample" "$(j "$W/peers.json" cupy_cg.per_sample_s cupy_cg.estimate_for_samples_s)"
row "scipy eigsh 50 modes" "$(j "$W/peers.json" scipy_eigsh.time_s scipy_eigsh.lowest read_s)"
fi
tail -3 "$W/peers.err" "$W/static.err" "$W/psd.err" "$W/conv.err" 2>/dev/null | grep -v '^$' | head -20
[ -n "${OUT:-}" ] && tar -czf "$OUT/logs-uq-model.tgz" -C "$W" --exclude '*.mtx' . 2>/dev/null
printf '\n== summary\n'
printf "$TABLE"
