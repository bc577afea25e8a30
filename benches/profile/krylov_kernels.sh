#!/usr/bin/env bash
# Where one Krylov iteration's time goes on the GPU, for every method on the
# largest soft-walled cylinder (helmholtz-cylinder:2:soft, Jacobi, SELL-32-1).
# Run on the GPU machine from the repository root after `cargo xtask gpu-pack`:
#   bash benches/profile/krylov_kernels.sh [METHOD...]
# 1. steady-state cost per iteration: the CLI's solve time at two iteration caps,
#    (t(hi) - t(lo)) / (hi - lo), so set-up and the final residual drop out;
# 2. Nsight Compute (ncu) on a window of launches well inside the solve: each
#    kernel's duration and DRAM bytes, with the caches as the kernel before left
#    them (--cache-control none); their sum against (1) is the time the device
#    spends between kernels and waiting for the host.
# Writes the raw ncu CSV to $OUT (when set) and prints a table per method.
set -u
PACK=gpu-pack
T=/tmp/gpuq-prof; rm -rf "$T"; mkdir -p "$T"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
METHODS=("$@"); [ ${#METHODS[@]} -eq 0 ] && METHODS=(bicgstab tfqmr qmr bicgstab-l:8 gmres:150)
"$PACK/gpuq" generate helmholtz-cylinder:2:soft --out "$T/a.mtx" --rhs-out "$T/b.mtx" >/dev/null || exit 1
solve() { "$PACK/gpuq" solve "$T/a.mtx" --rhs "$T/b.mtx" --precond jacobi --backend cuda \
    --layout sell:32:1 --tol 1e-9 --json "$@"; }
field() { grep -oE "\"$1\": *[^,}]*" | head -1 | grep -oE '[^ :]+$'; }
for m in "${METHODS[@]}"; do
    lo=20; hi=120; [ "$m" = bicgstab-l:8 ] && { lo=4; hi=20; }
    solve --method "$m" --max-iter $lo >/dev/null 2>&1   # warm-up: module load, JIT
    t1=$(solve --method "$m" --max-iter $lo 2>/dev/null | field time_s)
    t2=$(solve --method "$m" --max-iter $hi 2>/dev/null | field time_s)
    per=$(awk -v a="$t1" -v b="$t2" -v l=$lo -v h=$hi 'BEGIN { printf "%.2f", 1e6 * (b - a) / (h - l) }')
    tag=${m//:/-}
    if [ -n "$NCU" ]; then
        timeout 100 "$NCU" --clock-control none --cache-control none --launch-skip 400 --launch-count 60 --csv --page raw --print-units base \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
            "$PACK/gpuq" solve "$T/a.mtx" --rhs "$T/b.mtx" --precond jacobi --backend cuda \
            --layout sell:32:1 --tol 1e-9 --method "$m" --max-iter $hi >"$T/$tag.csv" 2>"$T/$tag.err"
        [ -n "${OUT:-}" ] && cp "$T/$tag.csv" "$OUT/ncu-$tag.csv"
    fi
    echo "== $m: steady state $per us per iteration (caps $lo and $hi)"
    python3 - "$T/$tag.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if not rows: print("  (no ncu data)"); sys.exit()
h = rows[0]; data = [dict(zip(h, r)) for r in rows[2:] if r[0].isdigit()]
k = lambda r, m: float(r[m].replace(',', '')) if r.get(m) else 0.0
agg = collections.OrderedDict()
for r in data:
    name = r['Kernel Name'].split('(')[0]
    a = agg.setdefault(name, [0, 0.0, 0.0])
    a[0] += 1; a[1] += k(r, 'gpu__time_duration.sum'); a[2] += k(r, 'dram__bytes_read.sum') + k(r, 'dram__bytes_write.sum')
unit = rows[1][h.index('gpu__time_duration.sum')]
tot = sum(a[1] for a in agg.values())
print(f"  {len(data)} kernels profiled, duration unit {unit}, total {tot:.0f}")
for name, (c, t, b) in agg.items():
    print(f"  {name:28s} x{c:3d}  mean {t / c:9.0f}  dram MB {b / c / 1e6:7.2f}")
PY
done
