#!/usr/bin/env bash
# The AMG setup on the device (issue 31), one call on the GPU machine after
# `cargo xtask gpu-pack` here:  bash benches/amg_setup_device.sh
# 1. the gpuq-amg device tests (the resident hierarchy's kernels and cycle against the
#    host's, update_values) and seed 004's Table III with the cubature defaults;
# 2. `gpuq amg-info --amg-setup cuda` per problem: the setup per phase;
# 3. laplace3d:200, b = 1, 1e-8: `gpuq solve --precond amg --backend cuda` (twice), the
#    Jacobi PCG and CuPy's CG + Jacobi (benches/anchors/amg_peers.py) in the same call;
# 4. f1 (n = 7, 1e-5) with the cubature defaults;
# 5. R A P: gpuq's Galerkin phase against CuPy's SpGEMM on gpuq's own matrices
#    (`amg-info --save-levels`, benches/anchors/galerkin_peers.py).
set -u
bash gpu-pack/run.sh unpack >/dev/null || exit 1
P=/tmp/gpuq-pack; G=$P/gpuq; L=/tmp/d2; mkdir -p $L
export GPUQ_BIN="$G"
nvidia-smi --query-gpu=name --format=csv,noheader
for t in "$P"/test-gpuq-amg-*setup_on_device* "$P"/test-gpuq-amg-*pcg* "$P"/test-gpuq-amg-*hierarchy*; do
  timeout 200 "$t" --nocapture > $L/$(basename $t).log 2>&1
  echo "TEST $(basename $t) rc=$? $(grep -E '^test result' $L/$(basename $t).log | tr '\n' ' ')"
  grep -E "panicked|^---- |bit for bit|to rounding|equals" $L/$(basename $t).log | head -12
done
for t in "$P"/test-gpuq-cubature-*cross_backend*; do
  timeout 200 "$t" --ignored --nocapture seed_table3_cases_with_the_defaults > $L/t3.log 2>&1
  echo "TEST table3 defaults rc=$? $(grep -E '^test result' $L/t3.log)"; grep -E "^f[1-5] |panicked" $L/t3.log
done
python3 -c "
with open('/tmp/ones200.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix array real general\n8000000 1\n')
    f.write('1\n' * 8000000)
"
for spec in "laplace3d:200 1" "elasticity2d:1414 2" "bidomain3d:200 2"; do
  set -- $spec
  timeout 200 $G amg-info --generate $1 --block $2 --amg-setup cuda --backend cuda --json > $L/ai.json 2>$L/ai.err
  python3 -c "
import json; d=json.load(open('$L/ai.json')); t=d.get('timings') or d['hierarchy']['timings']
print('AMGINFO $1', ' '.join(f'{k[:-2]} {v:.3f}' for k,v in t.items()))" 2>&1 | tail -c 400
done
S="solve --generate laplace3d:200 --rhs /tmp/ones200.mtx --method cg --tol 1e-8 --json"
for rep in 1 2; do
  timeout 120 $G $S --precond amg --backend cuda > $L/s.json 2>$L/s.err
  python3 -c "
import json; d=json.load(open('$L/s.json')); a=d['amg']; t=a['timings']
print('SOLVE amg_setup_s %.4f cycle_setup_s %.4f solver_upload %.4f solve %.4f total %.4f it %d %s | hierarchy %s' % (d['amg_setup_s'], a['cycle_setup_s'], d['setup_time_s']-d['amg_setup_s'], d['time_s'], d['setup_time_s']+d['time_s'], d['iterations'], d['status'], ' '.join(f'{k[:-2]} {v:.3f}' for k,v in t.items())))" 2>&1 | tail -c 600
done
timeout 120 $G $S --precond jacobi --backend cuda > $L/j.json 2>$L/j.err
python3 -c "
import json; d=json.load(open('$L/j.json')); print('JACOBI upload %.4f solve %.4f it %d' % (d['setup_time_s'], d['time_s'], d['iterations']))"
timeout 200 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs --skip-pyamg laplace3d:200 > $L/peers.json 2>$L/peers.err
python3 -c "
import json; r=json.load(open('$L/peers.json'))['runs']
for x in r: print('PEER', x.get('library'), x.get('method'), 'solve', x.get('solve_s'), 'it', x.get('iterations'))" 2>&1 | tail -5
timeout 60 $G integrate --integrand f1 --dim 7 --rel-tol 1e-5 --backend cuda --json > $L/f1.json 2>&1
python3 -c "
import json; d=json.load(open('$L/f1.json')); print('F1', d['method_used'], d['time_s'], d['evaluations'], d['converged'], d['estimate'])"
# R A P: gpuq's Galerkin phase against CuPy's SpGEMM on gpuq's matrices
for spec in laplace3d:100 laplace3d:150; do
  rm -rf $L/lv; timeout 200 $G amg-info --generate $spec --amg-setup cuda --backend cuda --json --save-levels $L/lv > $L/lv.json 2>$L/lv.err || { echo "save-levels failed: $(tail -c 200 $L/lv.err)"; continue; }
  python3 -c "
import json; d=json.load(open('$L/lv.json')); t=d.get('timings') or d['hierarchy']['timings']; print('GPUQ RAP $spec galerkin_s %.4f (setup total %.3f)' % (t['galerkin_s'], t['total_s']))"
  timeout 200 python3 benches/anchors/galerkin_peers.py $L/lv > $L/gp.json 2>$L/gp.err
  python3 -c "
import json; d=json.load(open('$L/gp.json')); print('CUPY RAP $spec cold %.4f warm %.4f' % (d['total_cold_s'], d['total_warm_s']), [(x['rows'], round(x['warm_s'],4), x['max_rel_diff_vs_gpuq']) for x in d['levels']])" 2>&1 | tail -c 500
done
