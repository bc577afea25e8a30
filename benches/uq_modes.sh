#!/usr/bin/env bash
# The lowest modes of a 10^6-DOF pencil on the GPU (issue 51): the device driver of one
# system, run from the repository root on the device machine after packing the release
# CLI here (gpu-pack/gpuq.xz, benches/lib.sh) and any test binaries (gpu-pack/t-*.xz):
#   bash benches/uq_modes.sh gpuq    # the carried tests, gpuq's LOBPCG on the GPU (and
#                                    # MODES_HOST=1: Lanczos on the host's cores)
#   bash benches/uq_modes.sh cupy    # gpuq on the GPU, then CuPy's lobpcg (Jacobi)
#   bash benches/uq_modes.sh eigsh   # SciPy's eigsh shift-invert (several minutes)
# The pencil: MODES_SYSTEM (default elasticity2d:707, 1,001,112 DOFs, 2 unknowns per
# node: MODES_BLOCK=2) written by gpuq, M = I; MODES modes (default 50), tolerance 1e-8.
# The gpuq run is `gpuq uq psd` with 50 modes and 1000 frequencies: the JSON's eig_s is
# the eigensolver's time, time_s the whole procedure.
set -u
WHAT="${1:-gpuq}"
source benches/lib.sh
unpack_gpuq | sed 's/^/device: /'
echo "host: $(nproc) cores"
W=/tmp/gpuq-modes; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
SYS="${MODES_SYSTEM:-elasticity2d:707}"; BLOCK="${MODES_BLOCK:-2}"; MODES="${MODES:-50}"
[ "$WHAT" = gpuq ] && run_carried_tests
"$G" generate "$SYS" --out "$W/K.mtx" 2>"$W/gen.err"
N=$(grep -v '^%' "$W/K.mtx" | head -1 | awk '{print $1}')
python3 -c "
import sys
n = $N
with open('$W/M.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix coordinate real symmetric\n')
    f.write('%d %d %d\n' % (n, n, n))
    f.write(''.join('%d %d 1\n' % (i, i) for i in range(1, n + 1)))"
row "pencil" "$SYS, $N DOFs, M = I, $MODES modes"
psd() {  # backend eigensolver
  timeout "${MODES_STEP_S:-240}" "$G" uq psd --stiffness "$W/K.mtx" --mass "$W/M.mtx" --modal-damping 0.02 \
    --modes "$MODES" --eigensolver "$2" --block "$BLOCK" --load-dofs "$((N / 2))" --outputs "$((N / 2)),$((N - 1))" \
    --freq-range 0:0.1:1000 --backend "$1" --json >"$W/psd-$1.json" 2>"$W/psd-$1.err"
  row "gpuq $2 + PSD ($1)" "rc=$? $(json_fields "$W/psd-$1.json" eig_s time_s modes.iterations modes.max_residual modes.omega.0 modes.omega.$((MODES - 1)))"
}
psd cuda lobpcg
# The host's own method (MODES_HOST=1): shift-invert Lanczos with the Cholesky factor.
[ "$WHAT" = gpuq ] && [ "${MODES_HOST:-0}" = 1 ] && psd cpu lanczos
if [ "$WHAT" = cupy ]; then
  timeout "${MODES_PEER_S:-300}" python3 benches/anchors/eigen_peers.py "$W/K.mtx" "$W/M.mtx" --modes "$MODES" --cupy \
    --maxiter "${CUPY_MAXITER:-500}" >"$W/cupy.json" 2>"$W/cupy.err"
  row "cupy lobpcg (jacobi)" "rc=$? $(json_fields "$W/cupy.json" cupy_lobpcg.time_s cupy_lobpcg.iterations cupy_lobpcg.max_rel_residual cupy_lobpcg.lowest cupy_lobpcg.highest cupy_lobpcg.failed)"
fi
if [ "$WHAT" = eigsh ]; then
  timeout "${MODES_PEER_S:-540}" python3 benches/anchors/eigen_peers.py "$W/K.mtx" "$W/M.mtx" --modes "$MODES" --eigsh \
    >"$W/eigsh.json" 2>"$W/eigsh.err"
  row "scipy eigsh (shift-invert)" "rc=$? $(json_fields "$W/eigsh.json" scipy_eigsh.time_s scipy_eigsh.max_rel_residual scipy_eigsh.lowest scipy_eigsh.highest)"
fi
tail -n 3 "$W"/*.err | grep -v '^$' | head -30
printf '\n== summary\n'
printf "$TABLE"
