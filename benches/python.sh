#!/usr/bin/env bash
# Issue 49: the Python package on the GPU machine, one call. Built here (benches/lib.sh):
# gpu-pack/gpuq.xz (the release CLI), and in .whl the gpuq wheel
# (`cd python && maturin build --release -o ../.whl`) beside pyamg's and scikit-fem's.
# There (carry gpu-pack and .whl): bash benches/python.sh [SCALE] runs the package's
# tests on every backend (CUDA included), then benches/fem/python_api.py on the
# systems of benches/fem/systems.py: gpuq through PyAMG's interface and through
# gpuq.solve, on the GPU and on the host's cores, against PyAMG and CuPy's CG + Jacobi
# in the same process. The table last.
set -u
. benches/lib.sh
SCALE=${1:-1}
D=/tmp/fem$SCALE
unpack_gpuq
# The CLI's AMG solve runs through gpuq::solver (the library's): on the GPU with its
# defaults (f32 cycle for block 1), and block 3 with rigid body modes.
for spec in "laplace3d:100" "elasticity3d:32 --block 3"; do
  $G solve --generate $spec --precond amg --backend cuda --json > /tmp/r.json 2>/tmp/r.err \
    || head -c 300 /tmp/r.err
  report /tmp/r.json "cli $spec | gpu |"
done
run_carried_tests
install_wheels || exit 1
python3 -c "import gpuq; print('gpuq', gpuq.__version__, 'backends', gpuq.backends())"
(cd python/tests && GPUQ_BIN=$G timeout 300 python3 -m pytest -q -p no:cacheprovider -rfEs 2>&1 | tail -12)
python3 benches/fem/systems.py --out $D --scale $SCALE | tail -3
(cd benches/fem && timeout 400 python3 python_api.py $D)
