#!/usr/bin/env bash
# Issue 47: the default smoother (Chebyshev of degree 3) against the previous default
# (one damped-Jacobi sweep: 1.7 and an f32 cycle on a GPU for block 1) on the systems of
# the earlier AMG benchmarks, one call on the GPU machine: laplace3d:200 with b = 1 (and
# CuPy's CG + Jacobi, benches/anchors/amg_peers.py), elasticity2d:1414 with its
# rigid-body modes and bidomain3d:200 (block 2, b = A 1), elasticity3d:96 (block 3, its
# modes); then the setup's steps (GPUQ_AMG_TRACE=1) on a system of 2 x 10^5 rows, where
# the setup is most of the time. Built here as benches/lib.sh says; carry gpu-pack.
# There: bash benches/amg_defaults.sh
set -u
. benches/lib.sh
unpack_gpuq
run_carried_tests
python3 -c "
with open('/tmp/ones200.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix array real general\n8000000 1\n')
    f.write('1\n' * 8000000)
"
run() { # label, then the solve's arguments
  local label=$1; shift
  timeout 200 $G solve --method cg --tol 1e-8 --json --precond amg --backend cuda "$@" > /tmp/r.json 2>/tmp/r.err \
    || head -c 300 /tmp/r.err
  report /tmp/r.json "$label |"
}
for rep in 1 2; do
  run "laplace3d:200 | default" --generate laplace3d:200 --rhs /tmp/ones200.mtx
  run "laplace3d:200 | jacobi" --generate laplace3d:200 --rhs /tmp/ones200.mtx --amg-smoother jacobi
done
run "laplace3d:200 | cpu default" --generate laplace3d:200 --rhs /tmp/ones200.mtx --backend cpu
run "laplace3d:200 | cpu jacobi" --generate laplace3d:200 --rhs /tmp/ones200.mtx --backend cpu --amg-smoother jacobi
for spec in "elasticity2d:1414 2" "bidomain3d:200 2" "elasticity3d:96 3"; do
  set -- $spec
  run "$1 | default" --generate $1 --block $2
  run "$1 | jacobi" --generate $1 --block $2 --amg-smoother jacobi
done
GPUQ_AMG_TRACE=1 timeout 100 $G solve --generate laplace3d:57 --method cg --precond amg --backend cuda \
  --json > /tmp/t.json 2>/tmp/t.err
grep amg-trace /tmp/t.err | head -60
report /tmp/t.json "laplace3d:57 | default |"
timeout 200 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs --skip-pyamg laplace3d:200 \
  > /tmp/peers.json 2>/tmp/peers.err
python3 -c "
import json; r=json.load(open('/tmp/peers.json'))['runs']
for x in r: print('PEER', x.get('library'), 'solve', x.get('solve_s'), 'it', x.get('iterations'))" 2>&1 | tail -3
