#!/bin/bash
# Issue 31 (part 2) on the GPU machine, after `cargo xtask gpu-pack` here:
#   bash benches/cubature_defaults.sh
# 1. the cubature tests that need the device: the second phase's kernel (roots and a
#    tolerance per box) against the CPU bit for bit, and seed 004's Table III with the
#    defaults (--ignored: method auto, the backend's cap);
# 2. every Table III case (and f5 at n = 8 to 1e-6) with nothing but the integrand,
#    dimension, tolerance and backend: `gpuq integrate ... --backend cuda` (auto, the
#    backend's cap), then the same with --method two-phase and --method breadth-first.
# One line per run: time_s, evaluations, converged, stop_reason, method_used.
set -u
bash gpu-pack/run.sh unpack || exit 1
PACK=/tmp/gpuq-pack; G="$PACK/gpuq"
export GPUQ_BIN="$G"
LOGS=/tmp/gpuq-device-logs; mkdir -p "$LOGS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /'
for t in "$PACK"/test-gpuq-cubature-*cross_backend* "$PACK"/test-gpuq-cubature-*user_integrands_cuda* "$PACK"/test-gpuq-cli-*integrate*; do
    name=$(basename "$t")
    timeout 300 "$t" --nocapture >"$LOGS/$name.log" 2>&1
    echo "TEST $name rc=$? $(grep -E '^test result:' "$LOGS/$name.log" | tr '\n' ' ')"
    grep -E "panicked|^---- " "$LOGS/$name.log" | head -8
done
for t in "$PACK"/test-gpuq-cubature-*cross_backend*; do
    timeout 300 "$t" --ignored --nocapture seed_table3_cases_with_the_defaults >"$LOGS/table3-defaults.log" 2>&1
    echo "TEST table3 defaults rc=$? $(grep -E '^test result:' "$LOGS/table3-defaults.log")"
    grep -E "^f[1-5] |panicked" "$LOGS/table3-defaults.log"
done
for c in "f1 7 1e-5" "f2 5 1e-2" "f3 5 1e-2" "f4 6 1e-5" "f5 8 1e-7" "f5 8 1e-6"; do
    set -- $c
    for m in auto two-phase breadth-first; do
        out="$LOGS/int-$1-$2-$3-$m.json"
        timeout 300 "$G" integrate --integrand $1 --dim $2 --tol $3 --method $m --backend cuda --json >"$out" 2>&1
        echo "RUN $1 n=$2 $3 $m rc=$? $(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
print(' '.join(f'{k}={d[k]}' for k in ['method_used', 'time_s', 'evaluations', 'rounds', 'converged', 'stop_reason', 'estimate', 'error', 'max_evals']))" "$out" 2>&1 | tail -c 400)"
    done
done
