#!/usr/bin/env bash
# The distributed solves under MPI (crates/gpuq-dist, feature `mpi`): builds the
# mpi_solve example and runs it on 1 to 4 ranks with OpenMPI's mpirun
# (oversubscribed, as root in CI). Each run checks CG, BiCGSTAB and GMRES
# (with and without preconditioning) against the serial solve and exits
# non-zero on a mismatch. Needs openmpi-bin, libopenmpi-dev and libclang-dev
# (rsmpi's bindings are generated at build time).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi-tests: mpirun not found (apt-get install -y openmpi-bin libopenmpi-dev libclang-dev)" >&2
    exit 1
fi

echo "== clippy and build: gpuq-dist --features mpi"
cargo clippy -p gpuq-dist --features mpi --all-targets -- -D warnings
cargo build -p gpuq-dist --features mpi --example mpi_solve
echo "== the launch's share of the node's CPUs (gpuq-dist --features mpi, unit tests)"
cargo test -q -p gpuq-dist --features mpi --lib affinity
target_dir="${CARGO_TARGET_DIR:-target}"
binary="$target_dir/debug/examples/mpi_solve"

passed=0
for ranks in 1 2 3 4; do
    echo "== mpirun -n $ranks mpi_solve"
    timeout 300 mpirun -n "$ranks" --oversubscribe --allow-run-as-root "$binary"
    passed=$((passed + 1))
done

echo "== gpuq solve under mpirun (gpuq-cli --features mpi) against the serial CLI"
cargo build -p gpuq-cli --features mpi
gpuq="$target_dir/debug/gpuq"
field() { # field NAME < json: the number after "NAME":
    sed -n "s/^ *\"$1\": *\([-0-9.e+]*\),*$/\1/p"
}
for problem in "laplace3d:12 --method cg --precond jacobi" \
               "convdiff2d:24 --method bicgstab --precond block2" \
               "convdiff2d:24 --method gmres:20 --precond none"; do
    # shellcheck disable=SC2086
    serial=$("$gpuq" solve --generate $problem --json | field iterations)
    for ranks in 1 2 3 4; do
        # shellcheck disable=SC2086
        report=$(timeout 300 mpirun -n "$ranks" --oversubscribe --allow-run-as-root \
            "$gpuq" solve --generate $problem --json)
        its=$(field iterations <<<"$report")
        got_ranks=$(field ranks <<<"$report")
        converged=$(grep -c '"converged": true' <<<"$report" || true)
        diff=$((its > serial ? its - serial : serial - its))
        if [ "$converged" != 1 ] || [ "$got_ranks" != "$ranks" ] || [ "$diff" -gt 1 ]; then
            echo "mpi-tests: $problem on $ranks ranks: $its iterations (serial $serial), ranks $got_ranks, converged $converged" >&2
            exit 1
        fi
        echo "ok: $problem on $ranks ranks: $its iterations (serial $serial)"
        passed=$((passed + 1))
    done
done

echo "== AMG-PCG and Monte Carlo under mpirun against the serial CLI"
# A right-hand side outside AMG's near-null space (b = A 1 would take one cycle).
rhs="$target_dir/mpi-tests-rhs.mtx"
awk 'BEGIN { n = 16 * 16 * 16; print "%%MatrixMarket matrix array real general"; print n, 1;
             for (i = 0; i < n; i++) printf "%.17g\n", 1 + sin(0.37 * i) }' > "$rhs"
# The distributed levels smooth with Jacobi (the serial default for block 1 is Chebyshev):
# both runs are given the same smoother. 3D elasticity: 3 unknowns per node kept on one
# rank, its six rigid-body modes from the generator's coordinates. With --amg-agglomerate the
# 407-row level 1 moves onto two ranks of three or four. QMR applies the cycle's transpose:
# the distributed setup checks A's symmetry across ranks for it.
for problem in "laplace3d:16 --rhs $rhs --precond amg --amg-smoother jacobi --amg-gather-below 200" \
               "laplace3d:16 --rhs $rhs --precond amg --amg-smoother jacobi --amg-gather-below 150 --amg-agglomerate" \
               "laplace3d:16 --rhs $rhs --precond amg --amg-smoother l1 --amg-sweeps 2" \
               "laplace3d:16 --rhs $rhs --method qmr --precond amg --amg-smoother jacobi --amg-gather-below 200" \
               "elasticity3d:6 --block 3 --precond amg --amg-smoother jacobi" \
               "laplace2d:12 --method mcsa"; do
    # shellcheck disable=SC2086
    serial=$("$gpuq" solve --generate $problem --json | field iterations)
    for ranks in 1 2 3 4; do
        # shellcheck disable=SC2086
        report=$(timeout 300 mpirun -n "$ranks" --oversubscribe --allow-run-as-root \
            "$gpuq" solve --generate $problem --json)
        its=$(field iterations <<<"$report")
        residual=$(field relative_residual <<<"$report")
        converged=$(grep -c '"converged": true' <<<"$report" || true)
        # An AMG solve reports its setup under the one-process report's name too.
        if [[ "$problem" == *"precond amg"* ]] && ! grep -q '"amg_setup_s"' <<<"$report"; then
            echo "mpi-tests: $problem on $ranks ranks: no amg_setup_s in the report" >&2
            exit 1
        fi
        # Within 20% of the serial count (aggregates stop at rank boundaries),
        # and the true residual at the tolerance (1e-8).
        if [ "$converged" != 1 ] || [ $((its * 10)) -gt $((serial * 12)) ] ||
            ! awk -v r="$residual" 'BEGIN { exit !(r <= 1e-8) }'; then
            echo "mpi-tests: $problem on $ranks ranks: $its iterations (serial $serial), residual $residual, converged $converged" >&2
            exit 1
        fi
        echo "ok: $problem on $ranks ranks: $its iterations (serial $serial), true residual $residual"
        passed=$((passed + 1))
    done
done
echo "== files read by every rank (Matrix Market by byte ranges, PETSc binary by row blocks)"
# The same system in both formats: each rank's rows are the serial reader's, so the runs on
# one rank count agree to the bit (iterations and residual) and with the serial CLI.
files="$target_dir/mpi-tests-files"
mkdir -p "$files"
for fmt in mtx petsc; do
    "$gpuq" generate convdiff2d:24 --format $fmt --out "$files/A.$fmt" --rhs-out "$files/b.$fmt" 2>/dev/null
    "$gpuq" generate elasticity3d:5 --format $fmt --out "$files/E.$fmt" --rhs-out "$files/e.$fmt" \
        --coords-out "$files/X.mtx" 2>/dev/null
done
for case in "A|--method bicgstab --precond jacobi" \
            "E|--method cg --precond amg --amg-smoother jacobi --block 3 --coords $files/X.mtx"; do
    m=${case%%|*}; opts=${case#*|}; v=$(tr 'AE' 'be' <<<"$m")
    # shellcheck disable=SC2086
    serial=$("$gpuq" solve "$files/$m.mtx" --rhs "$files/$v.mtx" $opts --json | field iterations)
    for ranks in 1 2 3; do
        got=()
        for fmt in mtx petsc; do
            # shellcheck disable=SC2086
            report=$(timeout 300 mpirun -n "$ranks" --oversubscribe --allow-run-as-root \
                "$gpuq" solve "$files/$m.$fmt" --rhs "$files/$v.$fmt" $opts --json)
            got+=("$(field iterations <<<"$report") $(field relative_residual <<<"$report")")
            if [ "$(grep -c '"converged": true' <<<"$report" || true)" != 1 ]; then
                echo "mpi-tests: $m.$fmt on $ranks ranks did not converge" >&2
                exit 1
            fi
        done
        its=${got[0]%% *}
        if [ "${got[0]}" != "${got[1]}" ] || [ $((its * 10)) -gt $((serial * 12)) ]; then
            echo "mpi-tests: $m on $ranks ranks: mtx '${got[0]}', petsc '${got[1]}' (serial $serial iterations)" >&2
            exit 1
        fi
        echo "ok: $m.mtx and $m.petsc on $ranks ranks: ${got[0]} (serial $serial iterations)"
        passed=$((passed + 1))
    done
done
# mc-forward: the same seed gives the one-rank estimate (the same moves).
serial=$("$gpuq" solve --generate laplace2d:12 --method mc-forward --histories 20000 --json | field steps)
for ranks in 2 3; do
    steps=$(timeout 300 mpirun -n "$ranks" --oversubscribe --allow-run-as-root \
        "$gpuq" solve --generate laplace2d:12 --method mc-forward --histories 20000 --json | field steps)
    if [ "$steps" != "$serial" ]; then
        echo "mpi-tests: mc-forward on $ranks ranks: $steps moves, serial $serial" >&2
        exit 1
    fi
    echo "ok: mc-forward on $ranks ranks: $steps moves (serial $serial)"
    passed=$((passed + 1))
done
echo "mpi-tests: $passed passed, 0 failed"
