#!/usr/bin/env bash
# Seed 001's Tables 2-5 and 7 redone with gpuq's CLI: each row timed on the CPU backend
# with one Rayon thread (the seed's single core), on all the host's cores, and on CUDA,
# at the seed's sizes and at 10-100x larger ones. Prints the seed's three gains per row:
#   S_MC = t(1 core) / t(all cores), S_GS = t(1 core) / t(GPU), S_GM = t(all cores) / t(GPU).
# Times are the JSON's own (`time_s`, or `full_s` for the PSD: the procedure without the
# process start). Rows whose single-core run would take minutes run on all cores and the
# GPU only (S_MC and S_GS then read "-").
# Usage (device machine, after `cargo xtask gpu-pack` here):
#   bash benches/seed001_tables.sh [GPUQ_BINARY]
set -u
G="${1:-${GPUQ_BIN:-/tmp/gpuq-pack/gpuq}}"
LOGS=/tmp/gpuq-seed001; mkdir -p "$LOGS"
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
key() { python3 -c "import json,sys
try: print(json.load(open(sys.argv[1]))[sys.argv[2]])
except Exception: print('nan')" "$1" "$2"; }
ratio() { python3 -c "import sys
a, b = (float(v) for v in sys.argv[1:3])
print(f'{a / b:.1f}' if a == a and b == b and b > 0 else '-')" "$1" "$2"; }
printf '%-8s %-44s %10s %10s %10s %7s %8s %7s\n' table row t1_s tall_s tgpu_s S_MC S_GS S_GM >"$LOGS/table.txt"
# row TABLE LABEL FIELD SINGLE(yes/no) ARGS...: one row of the gains.
row() {
    local table="$1" label="$2" field="$3" single="$4"
    shift 4
    local t1=nan
    if [ "$single" = yes ]; then
        RAYON_NUM_THREADS=1 timeout 300 "$G" "$@" --backend cpu --json >"$LOGS/r.json" 2>"$LOGS/r.err"
        t1=$(key "$LOGS/r.json" "$field")
    fi
    timeout 300 "$G" "$@" --backend cpu --json >"$LOGS/r.json" 2>"$LOGS/r.err"
    local tall; tall=$(key "$LOGS/r.json" "$field")
    timeout 300 "$G" "$@" --backend cuda --json >"$LOGS/r.json" 2>"$LOGS/r.err"
    local tg; tg=$(key "$LOGS/r.json" "$field")
    printf '%-8s %-44s %10.4g %10.4g %10.4g %7s %8s %7s\n' "$table" "$label" "$t1" "$tall" "$tg" \
        "$(ratio "$t1" "$tall")" "$(ratio "$t1" "$tg")" "$(ratio "$tall" "$tg")" | tee -a "$LOGS/table.txt"
}
# Table 2 (Example 1): static tip load, 1000 samples (the seed's), shared K: banded Cholesky
# factored once; then 100x the samples with a lognormal modulus (one factorisation per sample).
for d in 128 512 2048 8192 16384; do
    row T2 "static dofs=$d samples=1000" time_s yes uq static --dofs "$d" --samples 1000
done
for d in 2048 16384; do
    row T2 "static dofs=$d samples=1e5 modulus-cov=0.1" time_s yes uq static --dofs "$d" --samples 100000 --modulus-cov 0.1
done
# Table 3 (Example 2): the full response PSD matrices, 11 frequencies (16 n^2 bytes each).
for d in 100 500 1000 5000 10000; do
    single=yes; [ "$d" -ge 10000 ] && single=no
    row T3 "psd dofs=$d freqs=11 full" full_s "$single" uq psd --dofs "$d" --freq-range 0:100:11 --full
done
# Table 4 (Example 3): FFT convolution, the seed's N_t and DOFs, 1000 samples; then 10x.
for c in "1024 60" "1024 124" "1024 252" "8192 64" "8192 128" "8192 256"; do
    set -- $c
    row T4 "convolution nt=$1 dofs=$2 samples=1000" time_s yes uq convolution --steps "$1" --dofs "$2" --samples 1000
done
row T4 "convolution nt=8192 dofs=256 samples=1e4" time_s no uq convolution --steps 8192 --dofs 256 --samples 10000
# Table 5 (Example 4): the SDOF Monte Carlo, f32 and f64, samples 10^3 .. 10^5 (the seed's)
# and 10^6, 10^7 (100x).
for p in f32 f64; do
    for s in 1000 10000 100000 1000000 10000000; do
        single=yes; [ "$s" -gt 100000 ] && single=no
        row T5 "sdof $p samples=$s" time_s "$single" uq sdof --samples "$s" --precision "$p"
    done
done
# Table 7 (Example 5): tensor Gauss-Hermite, N_a = 4 (the seed's), dimensions 6..15.
for n in 6 8 10 12 14 15; do
    row T7 "expectation gh N_a=4 dim=$n" time_s yes uq expectation --dim "$n" --points 4
done
echo
echo "== seed 001 tables ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null), $(nproc) cores)"
cat "$LOGS/table.txt"
