#!/usr/bin/env bash
# User integrands on the GPU (issue 29): the device driver of one system, run from the
# repository root on the device machine after `cargo xtask gpu-pack` here (carry .whl
# for the torchquad peer):
#   bash benches/cubature_user.sh          # tests, then the benchmarks; a table last
#   bash benches/cubature_user.sh tests    # the CUDA tests of gpuq-cubature, gpuq-expr, gpuq-uq, the CLI
#   bash benches/cubature_user.sh bench    # Table III built-in vs expression, tensor rules vs
#                                          # CuPy and torchquad, compile times, throughput
# Logs go to $OUT/logs-cubature-user.tgz when $OUT is set.
set -u
WHAT="${1:-all}"
bash gpu-pack/run.sh unpack >/dev/null || exit 1
G=/tmp/gpuq-pack/gpuq
LOGS=/tmp/gpuq-user-logs; mkdir -p "$LOGS"
export GPUQ_BIN="$G"
# NVRTC (user integrands) and cuFFT are loaded at run time.
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# A fresh disk cache, so that the first compile is measured.
export GPUQ_CACHE_DIR="$LOGS/cache"; rm -rf "$GPUQ_CACHE_DIR"
TABLE=""
row() { TABLE="$TABLE$(printf '%-44s %s' "$1" "$2")\n"; printf 'ROW %-44s %s\n' "$1" "$2"; }
# j FILE KEY...: top-level JSON values, space separated (floats to 4 digits).
j() { python3 - "$@" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"(no json: {e.__class__.__name__})"); sys.exit()
out = []
for k in sys.argv[2:]:
    v = d.get(k)
    if isinstance(v, list):
        v = "[" + ",".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in v) + "]"
    out.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
print(" ".join(out))
PY
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /'

if [ "$WHAT" = all ] || [ "$WHAT" = tests ]; then
    for t in /tmp/gpuq-pack/test-gpuq-cubature-* /tmp/gpuq-pack/test-gpuq-expr-* /tmp/gpuq-pack/test-gpuq-cli-test-integrate /tmp/gpuq-pack/test-gpuq-uq-*; do
        name=$(basename "$t")
        timeout 400 "$t" >"$LOGS/$name.log" 2>&1
        rc=$?
        counts=$(grep -E '^test result:' "$LOGS/$name.log" | awk '{p+=$4; f+=$6} END {printf "%d passed, %d failed", p, f}')
        row "$name" "rc=$rc $counts skipped=$(grep -c 'skipped (no CUDA' "$LOGS/$name.log")"
        [ $rc -ne 0 ] && grep -E "panicked|^---- |assert|left|right" "$LOGS/$name.log" | head -16
    done
fi

if [ "$WHAT" = all ] || [ "$WHAT" = bench ]; then
    # Seed 004's Table III at each case's best options (docs/benchmarks.md, issue 17), the
    # built-in against the same function as an expression, same method and options. The
    # first expression run compiles (compile_s, fresh disk cache), later ones load the cubin.
    F1='1/(0.1 + cos(sum(i, 1, n, x[i]^2))^2)'
    F2='cos(prod(i, 1, n, cos(4^i * x[i])))'
    F3='sin(prod(i, 1, n, i * asin(x[i]^i)))'
    F4='sin(prod(i, 1, n, asin(x[i])))'
    F5='sum(i, 1, n, cos(10 * x[i])) / (2 * -0.054402111088937)'
    while read -r f n tol m ib mb; do
        eval "ex=\$$(echo "$f" | tr a-z A-Z)"
        common=(--dim "$n" --tol "$tol" --method "$m" --initial-boxes "$ib" --max-boxes "$mb"
                --max-evals 20000000000 --backend cuda --repeat 5 --json)
        timeout 120 "$G" integrate --integrand "$f" "${common[@]}" >"$LOGS/t3-$f-builtin.json" 2>&1
        timeout 120 "$G" integrate --expr "$ex" "${common[@]}" >"$LOGS/t3-$f-expr.json" 2>&1
        row "T3 $f n=$n $tol $m builtin" "$(j "$LOGS/t3-$f-builtin.json" estimate evaluations evaluate_s repeat_time_s)"
        row "T3 $f n=$n $tol $m expr" "$(j "$LOGS/t3-$f-expr.json" estimate evaluations evaluate_s repeat_time_s compile_s module)"
    done <<'CASES'
f1 7 1e-5 two-phase 65536 262144
f2 5 1e-2 breadth-first 1024 262144
f3 5 1e-2 breadth-first 16384 262144
f4 6 1e-5 breadth-first 1024 262144
f5 8 1e-7 breadth-first 16384 1048576
CASES
    # A second process finds the expression's cubin on disk.
    timeout 60 "$G" integrate --expr "$F5" --dim 8 --tol 1e-3 --backend cuda --json >"$LOGS/disk.json" 2>&1
    row "f5 expr, second process" "$(j "$LOGS/disk.json" compile_s module setup_s)"
    # The product Gauss-Legendre rule at the peers' points per axis (the m with which CuPy
    # met the tolerance): built-in, expression, then CuPy and torchquad below.
    for c in "f1 7 8" "f2 5 5" "f4 6 26" "f5 8 10"; do
        set -- $c
        eval "ex=\$$(echo "$1" | tr a-z A-Z)"
        timeout 60 "$G" integrate --integrand "$1" --dim "$2" --method gauss-legendre:"$3" --backend cuda --repeat 5 --json >"$LOGS/gl-$1-builtin.json" 2>&1
        timeout 60 "$G" integrate --expr "$ex" --dim "$2" --method gauss-legendre:"$3" --backend cuda --repeat 5 --json >"$LOGS/gl-$1-expr.json" 2>&1
        row "GL $1 n=$2 m=$3 builtin" "$(j "$LOGS/gl-$1-builtin.json" estimate evaluations repeat_time_s)"
        row "GL $1 n=$2 m=$3 expr" "$(j "$LOGS/gl-$1-expr.json" estimate evaluations repeat_time_s)"
    done
    pip install -q --no-deps --target /tmp/pylib .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
    timeout 300 python3 benches/anchors/cub_peers.py --skip-cubature --max-points 4e8 \
        f1:7:1e-5:3.2165870516874071209 f2:5:1e-2:0.98240473724646061423 \
        f4:6:1e-5:0.033357220109209012666 f5:8:1e-7 >"$LOGS/peers.json" 2>"$LOGS/peers.err"
    python3 - "$LOGS/peers.json" <<'PY' | while read -r l; do row "${l%%|*}" "${l#*|}"; done
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["runs"]
except Exception as e:
    print(f"peers|failed: {e}"); sys.exit()
for r in runs:
    print(f"peer {r['integrand']} n={r['dim']} {r['peer'][:12]}|"
          + " ".join(f"{k}={r[k]:.4g}" if isinstance(r.get(k), float) else f"{k}={r.get(k)}"
                     for k in ("points_per_axis", "time_s", "true_rel_error") if k in r))
PY
    # Throughput: evaluations per second of the evaluation kernels (f5, n = 8).
    python3 - "$LOGS" <<'PY' | while read -r l; do row "${l%%|*}" "${l#*|}"; done
import json, sys
d = sys.argv[1]
for tag in ("builtin", "expr"):
    try:
        t3 = json.load(open(f"{d}/t3-f5-{tag}.json"))
        gl = json.load(open(f"{d}/gl-f5-{tag}.json"))
    except Exception as e:
        print(f"throughput f5 {tag}|failed: {e}"); continue
    print(f"throughput f5 {tag}|rounds {t3['evaluations'] / t3['evaluate_s']:.3e}/s "
          f"tensor {gl['evaluations'] / min(gl['repeat_time_s']):.3e}/s")
PY
fi

[ -n "${OUT:-}" ] && tar -czf "$OUT/logs-cubature-user.tgz" -C "$LOGS" . 2>/dev/null
printf '\n== summary (%s)\n' "$WHAT"
printf "$TABLE"
