#!/usr/bin/env bash
# Time to solution and defaults (issue 31): the device driver of one system, run from the
# repository root on the device machine after `cargo xtask gpu-pack` here (carry .whl for
# PyAMG):
#   bash benches/time_to_solution.sh
# In one call: the cross-backend test binary (the accuracy-limit and device-memory tests
# among them); laplace3d:200 with b = 1 to 1e-8 by gpuq's AMG-PCG with no option but
# `--precond amg --backend cuda` (twice), with the best options measured before (twice),
# gpuq's Jacobi PCG (defaults: `--layout auto`), CuPy's CG + Jacobi and PyAMG's smoothed
# aggregation (benches/anchors/amg_peers.py); the residual-replacement case of the issue
# (elasticity2d:256, block Jacobi, 1e-12) on both backends; then, when TTS_CUBATURE names
# a file of `gpuq integrate` argument lines, each line with `--backend cuda --json`.
# A table (setup, solve, total seconds) last; logs to $OUT/logs-tts.tgz when $OUT is set.
set -u
bash gpu-pack/run.sh unpack >/dev/null || exit 1
P=/tmp/gpuq-pack; G=$P/gpuq
L=/tmp/gpuq-tts; rm -rf "$L"; mkdir -p "$L"
export GPUQ_BIN="$G"
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
PYTAG=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
pip install -q --no-deps --target /tmp/pylib .whl/pyamg-*-"$PYTAG"-*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
TABLE=""
row() { TABLE="$TABLE$(printf '%-46s %s' "$1" "$2")\n"; printf 'ROW %-46s %s\n' "$1" "$2"; }
# setup, solve, total seconds and the counters of a gpuq JSON report.
tts() { python3 - "$1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"(no json: {e.__class__.__name__})"); sys.exit()
setup = d.get("amg_setup_s", d.get("setup_time_s", 0.0))
amg = d.get("amg", {})
print(f"setup {setup:.4f} solve {d['time_s']:.4f} total {setup + d['time_s']:.4f} | {d['iterations']} it, "
      f"true {d['relative_residual']:.2e}, {d['status']}, layout {d.get('layout')}, "
      f"cycle {amg.get('cycle_precision', '-')}, damping {amg.get('jacobi_damping', '-')}")
PY
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | sed 's/^/device: /'
python3 -c "import sys; print('python', sys.version.split()[0])"
timeout 400 "$P"/test-gpuq-test-cross_backend >"$L/cross_backend.log" 2>&1
row "cross_backend tests" "rc=$? $(grep -E '^test result:' "$L/cross_backend.log" | awk '{p+=$4; f+=$6} END {printf "%d passed, %d failed", p, f}')"
grep -E "panicked|^---- |Cg:|Bicgstab:|Tfqmr:|Qmr:|Gmres" "$L/cross_backend.log" | head -20
python3 -c "
with open('$L/ones200.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix array real general\n8000000 1\n')
    f.write('1\n' * 8000000)
"
S="solve --generate laplace3d:200 --rhs $L/ones200.mtx --method cg --tol 1e-8 --json"
for rep in 1 2; do
    timeout 120 "$G" $S --precond amg --backend cuda >"$L/amg-default-$rep.json" 2>"$L/amg-default-$rep.err"
    row "gpuq amg, defaults (run $rep)" "$(tts "$L/amg-default-$rep.json")"
done
for rep in 1 2; do
    timeout 120 "$G" $S --precond amg --amg-smoother gs --amg-coarse-smoother chebyshev:3 --amg-precision f32 \
        --layout sell:32:1 --backend cuda >"$L/amg-best-$rep.json" 2>"$L/amg-best-$rep.err"
    row "gpuq amg, gs+cheb3 f32 sell (run $rep)" "$(tts "$L/amg-best-$rep.json")"
done
timeout 120 "$G" $S --precond jacobi --backend cuda >"$L/jacobi.json" 2>"$L/jacobi.err"
row "gpuq jacobi pcg, defaults" "$(tts "$L/jacobi.json")"
timeout 300 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs laplace3d:200 >"$L/peers.json" 2>"$L/peers.err"
python3 - "$L/peers.json" <<'PY' | while IFS='|' read -r name text; do row "$name" "$text"; done
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["runs"]
except Exception as e:
    print(f"peers|(no json: {e.__class__.__name__})"); sys.exit()
for r in runs:
    if "solve_s" not in r:
        print(f"{r.get('library')}|failed: {str(r.get('error'))[:150]}")
        continue
    setup = r.get("setup_s", 0.0) or 0.0
    print(f"{r['library']}|setup {setup:.4f} solve {r['solve_s']:.4f} total {setup + r['solve_s']:.4f} | {r.get('iterations')} it")
PY
for b in cpu cuda; do
    timeout 200 "$G" solve --generate elasticity2d:256 --method cg --precond block2 --tol 1e-12 --backend $b --json \
        >"$L/accuracy-$b.json" 2>"$L/accuracy-$b.err"
    row "elasticity2d:256 block2 1e-12 ($b)" "rc=$? $(python3 -c "
import json; d = json.load(open('$L/accuracy-$b.json'))
print(d['status'], d['converged'], 'true', f\"{d['relative_residual']:.2e}\", 'recurrence', f\"{d['recurrence_residual']:.2e}\", d['residual_replacements'], 'replacements', d['iterations'], 'it')" 2>&1 | tail -c 200)"
done
if [ -n "${TTS_CUBATURE:-}" ] && [ -f "$TTS_CUBATURE" ]; then
    k=0
    while read -r line; do
        [ -z "$line" ] && continue
        k=$((k + 1))
        timeout 120 "$G" integrate $line --backend cuda --json >"$L/cub-$k.json" 2>"$L/cub-$k.err"
        row "integrate $line" "rc=$? $(python3 -c "
import json; d = json.load(open('$L/cub-$k.json'))
print({k: d.get(k) for k in ('method', 'method_used', 'converged', 'stop', 'reason', 'evaluations', 'error', 'time_s')})" 2>&1 | tail -c 260)"
    done <"$TTS_CUBATURE"
fi
printf '\n== summary\n%b' "$TABLE"
[ -n "${OUT:-}" ] && tar -czf "$OUT/logs-tts.tgz" -C /tmp gpuq-tts 2>/dev/null
exit 0
