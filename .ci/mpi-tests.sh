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
echo "mpi-tests: $passed passed, 0 failed"
