#!/usr/bin/env bash
# The AMG setup on the device and time to solution (issue 31), one call on the GPU
# machine (nvidia-h100-x1). Built here first, without a full gpu-pack:
#   cargo build --release -p gpuq-cli --features mpi && xz -c target/release/gpuq > gpu-pack/gpuq-mpi.xz
#   cargo test --release -p gpuq-amg --features cuda --no-run   # then, per test binary NAME-HASH
#   xz -c target/release/deps/NAME-HASH > gpu-pack/t-NAME.xz     # (setup_on_device, pcg, hierarchy, ...)
# then there (carry gpu-pack): bash benches/amg_setup_device.sh
# 1. the gpuq-amg device tests carried as gpu-pack/t-*.xz;
# 2. laplace3d:200, b = 1, CG to 1e-8: `gpuq solve --precond amg --backend cuda` with the
#    defaults (five runs, the last with GPUQ_AMG_TRACE=1: the setup's steps), with the
#    Gauss-Seidel/Chebyshev options, the Jacobi PCG, and CuPy's CG + Jacobi
#    (benches/anchors/amg_peers.py) in the same call;
# 3. elasticity2d:1414 and bidomain3d:200 (block 2, b = A 1): AMG-PCG and Jacobi PCG;
# 4. R A P: gpuq's Galerkin phase (two processes of four setups each: the first setup
#    of a process grows the memory pool (cold), the three after reuse it (warm),
#    `amg-info --repeat-setup 4`) against CuPy's SpGEMM, cold and warm, on gpuq's own
#    matrices (`amg-info --save-levels`, benches/anchors/galerkin_peers.py).
set -u
G=/tmp/gpuq; xz -dc gpu-pack/gpuq-mpi.xz > $G; chmod +x $G
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
for t in gpu-pack/t-*.xz; do
  [ -e "$t" ] || continue
  b=/tmp/$(basename $t .xz); xz -dc $t > $b; chmod +x $b
  timeout 240 $b > $b.log 2>&1; echo "TEST $(basename $b) rc=$? $(grep -E '^test result' $b.log | tr '\n' ' ')"
  grep -E "panicked|^---- |FAILED" $b.log | head -8
done
python3 -c "
with open('/tmp/ones200.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix array real general\n8000000 1\n')
    f.write('1\n' * 8000000)
"
report() {
  python3 -c "
import json; d=json.load(open('$1')); a=d.get('amg') or {}; t=a.get('timings') or {}
setup=d['setup_time_s']; print('$2 setup %.4f (amg %.4f, cycle %.4f) solve %.4f total %.4f it %d %s rel %.3g | %s' % (setup, d.get('amg_setup_s', 0), a.get('cycle_setup_s', 0), d['time_s'], setup+d['time_s'], d['iterations'], d['status'], d['relative_residual'], ' '.join(f'{k[:-2]} {v:.3f}' for k,v in t.items())))" 2>&1 | tail -c 700
}
S="solve --generate laplace3d:200 --rhs /tmp/ones200.mtx --method cg --tol 1e-8 --json"
for rep in 1 2 3 4 5; do
  if [ $rep = 5 ]; then export GPUQ_AMG_TRACE=1; fi
  timeout 120 $G $S --precond amg --backend cuda > /tmp/s.json 2>/tmp/s.err
  grep amg-trace /tmp/s.err | grep -v "cycle level [1-9]\|level [2-9] \|smoother's inverse" | head -40
  report /tmp/s.json "AMG defaults"
done
unset GPUQ_AMG_TRACE
for rep in 1 2; do
  timeout 120 $G $S --precond amg --backend cuda --amg-smoother gs --amg-coarse-smoother chebyshev:3 --amg-precision f32 --layout sell:32:1 > /tmp/g.json 2>/dev/null
  report /tmp/g.json "AMG gs+cheb3"
done
timeout 120 $G $S --precond jacobi --backend cuda > /tmp/j.json 2>/dev/null
report /tmp/j.json "JACOBI"
timeout 200 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs --skip-pyamg laplace3d:200 > /tmp/peers.json 2>/tmp/peers.err
python3 -c "
import json; r=json.load(open('/tmp/peers.json'))['runs']
for x in r: print('PEER', x.get('library'), 'solve', x.get('solve_s'), 'it', x.get('iterations'))" 2>&1 | tail -3
for spec in "elasticity2d:1414 2" "bidomain3d:200 2"; do
  set -- $spec
  for p in amg jacobi; do
    timeout 200 $G solve --generate $1 --block $2 --method cg --tol 1e-8 --json --precond $p --backend cuda > /tmp/e.json 2>/tmp/e.err
    report /tmp/e.json "$1 $p"
  done
done
L=/tmp/d2; mkdir -p $L
for spec in laplace3d:100 laplace3d:150 laplace3d:200; do
  for rep in 1 2; do
    timeout 200 $G amg-info --generate $spec --amg-setup cuda --backend cuda --json --repeat-setup 4 > $L/lv.json 2>$L/lv.err
    python3 -c "
import json; d=json.load(open('$L/lv.json')); r=d['repeat_setup']
print('GPUQ RAP $spec galerkin_s cold %.4f warm %s (setup total cold %.3f warm %s)' % (r[0]['galerkin_s'], ' '.join('%.4f' % t['galerkin_s'] for t in r[1:]), r[0]['total_s'], ' '.join('%.3f' % t['total_s'] for t in r[1:])))"
  done
  rm -rf $L/lv; timeout 200 $G amg-info --generate $spec --amg-setup cuda --backend cuda --json --save-levels $L/lv > $L/lv.json 2>$L/lv.err || { echo "save-levels failed: $(tail -c 200 $L/lv.err)"; continue; }
  timeout 200 python3 benches/anchors/galerkin_peers.py $L/lv > $L/gp.json 2>$L/gp.err
  python3 -c "
import json; d=json.load(open('$L/gp.json')); print('CUPY RAP $spec cold %.4f warm %.4f' % (d['total_cold_s'], d['total_warm_s']), [(x['rows'], round(x['warm_s'],4), x['max_rel_diff_vs_gpuq']) for x in d['levels']])" 2>&1 | tail -c 500
done
# 5. with NCU=1: device time per setup kernel of one `amg-info` on laplace3d:200 (Nsight
#    Compute, summed per kernel name, largest first).
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  timeout 400 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    $G amg-info --generate laplace3d:200 --amg-setup cuda --backend cuda --json > /tmp/ncu.csv 2>/dev/null
  python3 - <<'PY'
import csv, collections
t, n = collections.Counter(), collections.Counter()
rows = [r for r in csv.reader(open('/tmp/ncu.csv')) if len(r) > 10]
h = rows[0]; ki, vi, ui = h.index('Kernel Name'), h.index('Metric Value'), h.index('Metric Unit')
for r in rows[1:]:
    v = float(r[vi].replace(',', '')); v *= {'nsecond': 1e-6, 'ns': 1e-6, 'usecond': 1e-3, 'us': 1e-3, 'msecond': 1, 'ms': 1}[r[ui]]
    k = r[ki].split('(')[0]; t[k] += v; n[k] += 1
print('NCU total %.1f ms' % sum(t.values()))
for k, v in t.most_common(14): print('NCU %-28s %8.2f ms %4d launches' % (k, v, n[k]))
PY
fi
