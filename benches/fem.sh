#!/usr/bin/env bash
# Issue 47: AMG on finite-element systems assembled by scikit-fem on unstructured
# meshes (benches/fem/systems.py), one call on the GPU machine: gpuq on the GPU and
# on the host's cores against PyAMG's smoothed aggregation and CuPy's CG + Jacobi
# (benches/fem/peers.py), CG to 1e-8, the rigid-body modes from the coordinates
# for elasticity (`--block d --coords X.mtx`; PyAMG gets the same modes as B).
# Built here (see benches/lib.sh): gpu-pack/gpuq.xz, gpu-pack/t-*.xz for the
# gpuq-amg device tests; the wheels of pyamg 5.4.1 and scikit-fem 12.0.2 in .whl.
# There (carry gpu-pack and .whl): bash benches/fem.sh [SCALE] (default 1: about 2e5
# unknowns per system). Prints one line per run; the peers' table last.
# On a machine without a GPU: PYTHON=venv/bin/python3 [ROUNDS=3] bash benches/fem.sh cpu DIR
# runs gpuq's CPU backend (GPUQ, default target/release/gpuq; its defaults) and PyAMG on the systems in DIR,
# alternating, and prints the medians over the rounds.
set -u
. benches/lib.sh
if [ "${1:-}" = cpu ]; then
  # ROUNDS rounds (default 3), each running every system once with gpuq and once with
  # PyAMG, so both meet the same load; the table of medians last (fem/cpu_table.py).
  D=$2; PY=${PYTHON:-python3}; ROUNDS=${ROUNDS:-3}; O=$(mktemp -d)
  systems=$($PY -c "import json; print(' '.join(json.load(open('$D/manifest.json'))['systems']))")
  for r in $(seq "$ROUNDS"); do
    for s in $systems; do
      bs=$($PY -c "import json; print(json.load(open('$D/manifest.json'))['systems']['$s']['block_size'])")
      extra=""
      [ "$bs" -gt 1 ] && extra="--block $bs --coords $D/$s/X.mtx"
      ${GPUQ:-target/release/gpuq} solve $D/$s/A.mtx --rhs $D/$s/b.mtx --method cg --precond amg \
        --tol 1e-8 --json $extra > $O/$s-gpuq-$r.json
      report $O/$s-gpuq-$r.json "$s | cpu default | round $r |"
      $PY benches/fem/peers.py $D --only $s --json $O/$s-pyamg-$r.json > $O/$s-pyamg-$r.log
      head -1 $O/$s-pyamg-$r.log
    done
  done
  $PY benches/fem/cpu_table.py $O "$ROUNDS" $systems
  exit
fi
SCALE=${1:-1}
D=/tmp/fem$SCALE
unpack_gpuq
run_carried_tests
install_wheels || exit 1
python3 benches/fem/systems.py --out $D --scale $SCALE --keep | tail -8
systems=$(python3 -c "import json; print(' '.join(json.load(open('$D/manifest.json'))['systems']))")
for s in $systems; do
  bs=$(python3 -c "import json; print(json.load(open('$D/manifest.json'))['systems']['$s']['block_size'])")
  extra=""
  [ "$bs" -gt 1 ] && extra="--block $bs --coords $D/$s/X.mtx"
  S="solve $D/$s/A.mtx --rhs $D/$s/b.mtx --method cg --precond amg --tol 1e-8 --json $extra"
  # SMOOTHERS=1: every smoother on both backends (the comparison of
  # docs/benchmarks.md); by default the defaults only.
  configs=("cpu default|--backend cpu" "gpu default|--backend cuda")
  [ "${SMOOTHERS:-0}" = 1 ] && configs=(
    "cpu jacobi|--backend cpu --amg-smoother jacobi"
    "cpu cheb2|--backend cpu --amg-smoother chebyshev:2"
    "cpu cheb3|--backend cpu --amg-smoother chebyshev:3"
    "cpu gs|--backend cpu --amg-smoother gs"
    "gpu jacobi|--backend cuda --amg-smoother jacobi"
    "gpu cheb2|--backend cuda --amg-smoother chebyshev:2"
    "gpu cheb3|--backend cuda --amg-smoother chebyshev:3"
    "gpu gs+cheb3|--backend cuda --amg-smoother gs --amg-coarse-smoother chebyshev:3")
  for cfg in "${configs[@]}"; do
    label=${cfg%%|*}; args=${cfg#*|}
    timeout 120 $G $S $args > /tmp/r.json 2>/tmp/r.err || head -c 300 /tmp/r.err
    report /tmp/r.json "$s | $label |"
  done
done
# Larger systems of gpuq's own generator (its rigid-body modes with --block 3), on the GPU.
for n in 64 96; do
  for cfg in "default|"; do
    label=${cfg%%|*}; args=${cfg#*|}
    timeout 200 $G solve --generate elasticity3d:$n --block 3 --method cg --precond amg --tol 1e-8 \
      --json --backend cuda $args > /tmp/r.json 2>/tmp/r.err || head -c 300 /tmp/r.err
    report /tmp/r.json "elasticity3d:$n | gpu $label |"
  done
done
timeout 400 python3 benches/fem/peers.py $D --json /tmp/peers.json | tail -8
python3 -c "
import json
for k, v in json.load(open('/tmp/peers.json'))['results'].items():
    c = v['cupy_jacobi_cg']
    print('CUPY %-16s it %5d upload %.4f solve %.4f total %.4f' % (k, c['iters'], c['upload_s'], c['solve_s'], c['total_s']))"
cp /tmp/peers.json ${OUT:-/tmp}/peers.json 2>/dev/null
