#!/usr/bin/env bash
# Fuzzes the Matrix Market reader and the expression parser (issue 48) for a
# fixed budget: the cargo-fuzz targets of fuzz/ (`matrix_market`: every
# gpuq_sparse::matrix_market parser on arbitrary bytes, f64 and Complex<f64>;
# `expr`: gpuq_expr::Expr::parse, eval, eval_reference and cuda_source), one
# after the other, starting from the seeds in fuzz/corpus/<target>/. Run from
# anywhere, on the host (no GPU needed):
#   bash benches/fuzz.sh                        # both targets, 120 s each
#   SECONDS_PER_TARGET=300 bash benches/fuzz.sh expr
# Settings (environment): SECONDS_PER_TARGET (120), MAX_LEN (input bytes, 4096),
# RSS_LIMIT_MB (2048; also the largest single allocation), TIMEOUT_S (one input, 30:
# the slowest legitimate expressions, 10^6 nodes once unrolled, take about 7 s under ASan),
# CARGO_TARGET_DIR (default fuzz/target), BUILD_STD=1 to rebuild the standard
# library with the sanitizer (installs the nightly's rust-src). Installs the nightly
# toolchain and cargo-fuzz when missing. Inputs found while fuzzing go to
# fuzz/corpus-run/<target>/ (not committed). Exits 1 when a target crashes, times
# out or runs out of memory, after printing the path of the input that did it
# (fuzz/artifacts/<target>/): reproduce with
#   cargo +nightly fuzz run --fuzz-dir fuzz <target> <that file>
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${SECONDS_PER_TARGET:-120}"
MAX_LEN="${MAX_LEN:-4096}"
RSS_LIMIT_MB="${RSS_LIMIT_MB:-2048}"
TIMEOUT_S="${TIMEOUT_S:-30}"
TARGET_DIR="${CARGO_TARGET_DIR:-fuzz/target}"
if [ "$#" -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=(matrix_market expr)
fi

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
BUILD_FLAGS=()
if [ "${BUILD_STD:-0}" = 1 ]; then
  if ! rustup +nightly component list --installed | grep -q '^rust-src'; then
    rustup component add rust-src --toolchain nightly
  fi
  BUILD_FLAGS+=(--build-std)
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

FUZZ=(cargo +nightly fuzz)
failed=()
for t in "${TARGETS[@]}"; do
  "${FUZZ[@]}" build --fuzz-dir fuzz --target-dir "$TARGET_DIR" "${BUILD_FLAGS[@]}" "$t"
  work="fuzz/corpus-run/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  marker="$(mktemp)"
  echo "== $t: ${SECONDS_PER_TARGET} s"
  status=0
  "${FUZZ[@]}" run --fuzz-dir fuzz --target-dir "$TARGET_DIR" "${BUILD_FLAGS[@]}" "$t" \
    "$work" "fuzz/corpus/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -max_len="$MAX_LEN" \
    -rss_limit_mb="$RSS_LIMIT_MB" -timeout="$TIMEOUT_S" -print_final_stats=1 ||
    status=$?
  found="$(find "$artifacts" -type f -newer "$marker")"
  rm -f "$marker"
  if [ "$status" -ne 0 ] || [ -n "$found" ]; then
    echo "== $t FAILED (exit status $status); input(s):"
    echo "${found:-  (none written: see the log above)}"
    failed+=("$t")
  else
    echo "== $t: no crash in ${SECONDS_PER_TARGET} s"
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzzing found failures in: ${failed[*]}"
  exit 1
fi
echo "fuzzing: no failures in ${TARGETS[*]}"
