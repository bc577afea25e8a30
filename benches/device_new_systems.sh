#!/usr/bin/env bash
# The GPU runs of AMG, bidomain, cubature, UQ and the distributed backend (issues 16-19),
# on the device machine from the repository root after `cargo xtask gpu-pack` here:
#   bash benches/device_new_systems.sh tests     # the cross-backend tests of those crates
#   bash benches/device_new_systems.sh bench     # CPU vs GPU vs peers, one table at the end
#   bash benches/device_new_systems.sh amg       # AMG on laplace3d:200: smoother choices,
#                                                #   cycle time vs floor, CuPy and PyAMG peers
#   bash benches/device_new_systems.sh cubature  # seed 004 Table III, breadth-first with
#                                                #   --split-aim 0 and 0.5, and two-phase
#   bash benches/device_new_systems.sh amggs     # Gauss-Seidel smoothing configurations
#                                                #   (AMG_GS), cycle vs floor, PCG, CuPy CG
#   bash benches/device_new_systems.sh cubbest   # Table III at each case's best options of the
#                                                #   sweep, with the rounds' evaluation time
#   bash benches/device_new_systems.sh amgaims   # issue 16's laplace3d:200 aims in one call (R)
#   bash benches/device_new_systems.sh amgprof   # each kernel of a V-cycle timed by ncu (AMG_PROF)
#   bash benches/device_new_systems.sh amgsetup  # AMG setup on the host (16 cores) vs the device,
#                                                #   per phase, on the benchmark matrices
#   bash benches/device_new_systems.sh amgbig    # seed 002's table, ~4e6-unknown 2x2 systems, PyAMG RS
#   bash benches/device_new_systems.sh cubsweep  # Table III at a few options each (CUB_SWEEP)
#   bash benches/device_new_systems.sh cubpeers  # Table III with Python cubature, torchquad, CuPy
#   bash benches/device_new_systems.sh cubtensor # gpuq's product Gauss-Legendre at the CuPy peer's m
#   bash benches/device_new_systems.sh fig2      # seed 004's Figure 2 (speed-up vs tolerance)
#   bash benches/device_new_systems.sh psd       # the PSD rank-1 kernel vs CuPy and cuBLAS zherk
#   bash benches/device_new_systems.sh uqpeers   # (i), (iii) and (v) on both backends vs CuPy
#   bash benches/device_new_systems.sh uqcpu     # UQ on gpuq's CPU backend and CUDA vs NumPy/SciPy
#   bash benches/device_new_systems.sh seedtables # seed 001's Tables 2-5 and 7 (benches/seed001_tables.sh)
#   bash benches/device_new_systems.sh mpi       # gpuq solve under mpirun, 1 and 2 ranks on
#                                                #   the GPU(s) and on CPU ranks (needs
#                                                #   gpu-pack/gpuq-mpi.xz, see docs/benchmarks.md)
# Peers: PyAMG (wheel carried in .whl/), CuPy (on the image). Logs to $OUT/logs-WHAT.tgz.
set -u
WHAT="${1:-tests}"
bash gpu-pack/run.sh unpack || exit 1
PACK=/tmp/gpuq-pack; G="$PACK/gpuq"
LOGS=/tmp/gpuq-device-logs; mkdir -p "$LOGS"
export GPUQ_BIN="$G"
# cuFFT (the convolution of UQ procedure (iii)) is loaded at run time.
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
TABLE=""
row() { TABLE="$TABLE$(printf '%-46s %s' "$1" "$2")\n"; printf 'ROW %-46s %s\n' "$1" "$2"; }
# j FILE KEY...: the values of top-level JSON keys (dotted paths allowed), space separated.
j() { python3 - "$@" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"(no json: {e.__class__.__name__})"); sys.exit()
out = []
for k in sys.argv[2:]:
    v = d
    for p in k.split("."):
        v = v.get(p) if isinstance(v, dict) else None
    out.append(f"{k.split('.')[-1]}={v:.4g}" if isinstance(v, float) else f"{k.split('.')[-1]}={v}")
print(" ".join(out))
PY
}
# ones200: b = 1 for laplace3d:200 (8e6 rows) as a Matrix Market array in $LOGS/ones200.mtx
# (the generator's own b = A 1 is solved by one AMG cycle).
ones200() { python3 -c "
n = 200 ** 3
with open('$LOGS/ones200.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix array real general\n' + str(n) + ' 1\n')
    f.write('1\n' * n)"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /'

if [ "$WHAT" = tests ]; then
    for t in "$PACK"/test-gpuq-amg-* "$PACK"/test-gpuq-bidomain-* "$PACK"/test-gpuq-cubature-* \
             "$PACK"/test-gpuq-uq-* "$PACK"/test-gpuq-dist-* "$PACK"/test-gpuq-krylov-* "$PACK"/test-gpuq-cli-*; do
        name=$(basename "$t")
        timeout 300 "$t" --nocapture >"$LOGS/$name.log" 2>&1
        rc=$?
        counts=$(grep -E '^test result:' "$LOGS/$name.log" | awk '{p+=$4; f+=$6} END {printf "%d passed, %d failed", p, f}')
        sk=$(grep -ci 'skipped' "$LOGS/$name.log")
        row "$name" "rc=$rc $counts skipped-lines=$sk"
        [ $rc -ne 0 ] && grep -E "panicked|^---- |assert" "$LOGS/$name.log" | head -12
    done
    # seed 004's Table III cases on the GPU (ignored by default: long on a CPU)
    for t in "$PACK"/test-gpuq-cubature-*cross_backend*; do
        timeout 240 "$t" --ignored --nocapture >"$LOGS/table3.log" 2>&1
        row "cubature Table III (--ignored)" "rc=$? $(grep -E '^test result:' "$LOGS/table3.log")"
        grep -iE "f[1-5].*(s|err)" "$LOGS/table3.log" | head -12
    done
fi

if [ "$WHAT" = bench ]; then
    pip install -q --no-deps --target /tmp/pylib .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
    # AMG-PCG on laplace3d:200 (8e6 rows) with b = ones (b = A * ones, the generator's
    # default, is solved by one smoothed-aggregation cycle), on the GPU, and the peers
    ones200
    for cfg in "sa jacobi 1 csr" "sa jacobi 1 sell" "sa chebyshev 1 sell" "sa chebyshev 2 sell" "seed jacobi 1 sell" "seed chebyshev 1 sell"; do
        set -- $cfg
        out="$LOGS/amg-$1-$2-$3-$4.json"
        timeout 120 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond amg \
            --amg $1 --amg-smoother $2 --amg-sweeps $3 --layout $4 --backend cuda --tol 1e-8 --json >"$out" 2>"$out.err"
        row "amg $1 $2x$3 $4 laplace3d:200 cuda" "$(j "$out" iterations amg_setup_s time_s relative_residual amg.operator_complexity)"
    done
    timeout 60 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond jacobi --layout sell --backend cuda --tol 1e-8 --json >"$LOGS/jac-cuda.json" 2>&1
    row "jacobi pcg laplace3d:200 cuda" "$(j "$LOGS/jac-cuda.json" iterations time_s)"
    timeout 240 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs laplace3d:200 >"$LOGS/amg-peers.json" 2>"$LOGS/amg-peers.err"
    python3 -c "
import json; d=json.load(open('$LOGS/amg-peers.json'))
print('versions', d['versions'])
for r in d['runs']: print('peer', {k: (round(v,4) if isinstance(v,float) else v) for k,v in r.items()})" 2>&1 | head -8
    # 2D elasticity (two unknowns per node): AMG with 2x2 blocks vs 2x2-block Jacobi
    "$G" generate elasticity2d:256 --out "$LOGS/el.mtx" --rhs-out "$LOGS/el_b.mtx" >"$LOGS/el-gen.log" 2>&1
    for be in cpu cuda; do
        for pc in "amg --block 2" "block2"; do
            out="$LOGS/el-$be-${pc%% *}.json"
            timeout 60 "$G" solve "$LOGS/el.mtx" --rhs "$LOGS/el_b.mtx" --method cg --precond $pc --backend $be --tol 1e-8 --json >"$out" 2>&1
            row "elasticity2d:256 cg $pc $be" "$(j "$out" iterations time_s relative_residual)"
        done
    done
    # SDOF Monte Carlo, 10^7 samples, f64 and f32, with the kernel's ingredient costs
    for p in f64 f32; do
        timeout 120 "$G" uq sdof --samples 10000000 --precision $p --backend cuda --kernel-costs --json >"$LOGS/sdof-$p.json" 2>"$LOGS/sdof-$p.err"
        row "sdof 1e7 $p cuda" "$(j "$LOGS/sdof-$p.json" time_s steps_per_s final_variance)"
        python3 -c "import json; print('kernel_costs $p', json.load(open('$LOGS/sdof-$p.json'))['kernel_costs'])"
    done
    timeout 60 "$G" uq sdof --samples 100000 --backend cpu --json >"$LOGS/sdof-cpu.json" 2>&1
    row "sdof 1e5 f64 cpu (16 cores)" "$(j "$LOGS/sdof-cpu.json" time_s steps_per_s final_variance)"
    timeout 150 python3 benches/anchors/uq_peers.py --samples 10000000 --psd-n 512 --psd-freqs 201 >"$LOGS/uq-peers.json" 2>"$LOGS/uq-peers.err"
    python3 -c "
import json; d=json.load(open('$LOGS/uq-peers.json'))
for r in d['runs']: print('peer', r)" 2>&1 | tail -8
    # the other procedures, both backends
    for be in cpu cuda; do
        timeout 60 "$G" uq static --dofs 128 --samples 100000 --modulus-cov 0.1 --backend $be --json >"$LOGS/static-$be.json" 2>&1
        row "uq static 128 dofs 1e5 samples cov $be" "$(j "$LOGS/static-$be.json" time_s mean std)"
        timeout 60 "$G" uq psd --dofs 512 --freq-range 0:100:201 --full --backend $be --json >"$LOGS/psd-$be.json" 2>&1
        row "uq psd 512 dofs 201 freqs full $be" "$(j "$LOGS/psd-$be.json" full_s cheap_outputs_s full_bytes rank1_kernel_s rank1_kernel_gbps)"
        timeout 60 "$G" uq convolution --dofs 64 --steps 8192 --samples 1000 --backend $be --json >"$LOGS/conv-$be.json" 2>&1
        row "uq convolution 8192 x 1000 $be" "$(j "$LOGS/conv-$be.json" time_s setup_s fft)"
        timeout 60 "$G" uq expectation --dim 10 --points 6 --backend $be --json >"$LOGS/exp-$be.json" 2>&1
        row "uq expectation GH 6^10 $be" "$(j "$LOGS/exp-$be.json" time_s estimate exact)"
    done
    # seed 004 Table III on the GPU, two-phase and breadth-first
    for c in "f1 7 1e-5" "f2 5 1e-2" "f3 5 1e-2" "f4 6 1e-5" "f5 8 1e-7"; do
        set -- $c
        for m in two-phase breadth-first; do
            timeout 60 "$G" integrate --integrand $1 --dim $2 --tol $3 --method $m --backend cuda --max-evals 20000000000 --json >"$LOGS/int-$1-$m.json" 2>&1
            row "integrate $1 n=$2 $3 $m cuda" "$(j "$LOGS/int-$1-$m.json" time_s estimate error evaluations converged)"
        done
    done
    # bidomain: 100 steps on a 128^2 grid, AMG built once
    for be in cpu cuda; do
        timeout 120 "$G" bidomain --grid 128 --steps 100 --backend $be --json >"$LOGS/bido-$be.json" 2>&1
        row "bidomain 128^2 100 steps $be" "$(j "$LOGS/bido-$be.json" total_s setup.precond_s total_iterations activated_fraction)"
    done
fi
if [ "$WHAT" = amg ]; then
    pip install -q --no-deps --target /tmp/pylib .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
    for t in "$PACK"/test-gpuq-amg-*; do
        timeout 300 "$t" >"$LOGS/$(basename "$t").log" 2>&1
        row "$(basename "$t")" "rc=$? $(grep -E '^test result:' "$LOGS/$(basename "$t").log" | awk '{p+=$4; f+=$6} END {printf "%d passed, %d failed", p, f}')"
    done
    ones200
    # one V-cycle against its floor (the copy rate measured in the same process)
    CYC=("jacobi 1 sell" "jacobi 1 csr" "chebyshev:2 1 sell" "chebyshev:3 1 sell")
    SOL=("jacobi 1 sell" "jacobi 1 csr" "jacobi 2 sell" "chebyshev:2 1 sell" "chebyshev:3 1 sell" "l1 1 sell")
    # AMG_QUICK=1: three configurations, no peers
    if [ -n "${AMG_QUICK:-}" ]; then
        CYC=("jacobi 1 sell" "jacobi 1 csr" "chebyshev:3 1 sell"); SOL=("${CYC[@]}")
    fi
    for cfg in "${CYC[@]}"; do
        set -- $cfg
        out="$LOGS/cyc-$1-$2-$3.json"
        timeout 120 "$G" amg-info --generate laplace3d:200 --amg-smoother $1 --amg-sweeps $2 --layout $3 --backend cuda --bench-cycles 50 --json >"$out" 2>"$out.err"
        row "v-cycle sa $1x$2 $3 laplace3d:200 cuda" "$(j "$out" cycle_bench.cycle_s cycle_bench.floor_s cycle_bench.ratio cycle_bench.copy_bytes_per_s operator_complexity)"
    done
    for cfg in "${SOL[@]}"; do
        set -- $cfg
        out="$LOGS/amg-$1-$2-$3.json"
        timeout 120 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond amg \
            --amg-smoother $1 --amg-sweeps $2 --layout $3 --backend cuda --tol 1e-8 --json >"$out" 2>"$out.err"
        row "pcg amg sa $1x$2 $3 laplace3d:200 cuda" "$(j "$out" iterations time_s amg_setup_s relative_residual)"
    done
    timeout 60 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond jacobi --layout sell --backend cuda --tol 1e-8 --json >"$LOGS/jac-cuda.json" 2>&1
    row "pcg jacobi sell laplace3d:200 cuda" "$(j "$LOGS/jac-cuda.json" iterations time_s)"
    [ -z "${AMG_QUICK:-}" ] && timeout 300 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs laplace3d:200 >"$LOGS/amg-peers.json" 2>"$LOGS/amg-peers.err" \
        && python3 -c "
import json; d=json.load(open('$LOGS/amg-peers.json'))
print('versions', d['versions'])
for r in d['runs']: print('peer', {k: (round(v,4) if isinstance(v,float) else v) for k,v in r.items()})" 2>&1 | head -8
fi

if [ "$WHAT" = amgsetup ]; then
    ones200
    for t in "$PACK"/test-gpuq-amg-*; do
        name=$(basename "$t")
        timeout 200 "$t" --nocapture >"$LOGS/$name.log" 2>&1
        row "$name" "rc=$? $(grep -E '^test result:' "$LOGS/$name.log" | tail -1)"
        grep -E "bit for bit|to rounding|panicked" "$LOGS/$name.log" | head -12
    done
    for cfg in "laplace3d:100 1" "laplace3d:200 1" "elasticity2d:1414 2" "bidomain3d:200 2"; do
        set -- $cfg
        for s in cpu cuda cuda; do
            out="$LOGS/setup-${1%%:*}-$s.json"
            timeout 150 "$G" amg-info --generate $1 --block $2 --amg-setup $s --backend cuda --json >"$out" 2>"$out.err"
            row "setup $1 on $s" "$(j "$out" timings.total_s timings.upload_s timings.strength_s timings.aggregation_s timings.prolongation_s timings.galerkin_s timings.smoother_s timings.coarse_s operator_complexity)"
        done
    done
    for s in cpu cuda; do
        out="$LOGS/solve-setup-$s.json"
        timeout 120 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond amg \
            --amg-jacobi-damping 1.7 --layout sell --amg-precision f32 --backend cuda --amg-setup $s --tol 1e-8 --json >"$out" 2>"$out.err"
        row "solve laplace3d:200 amg setup on $s" "$(j "$out" iterations amg_setup_s time_s relative_residual)"
    done
fi

if [ "$WHAT" = amggs ]; then
    # Gauss-Seidel smoothing on laplace3d:200 (AMG_GS: "smoother coarse-smoother layout
    # [cycle-precision [jacobi-damping]]" rows; a coarse smoother of "-" means the same as
    # the finest; the cycle's precision defaults to f64), each cycle against its floor
    # and PCG to 1e-8, then Jacobi PCG and CuPy CG + Jacobi in the same call
    ones200
    IFS=';' read -ra CFGS <<<"${AMG_GS:-gs - sell;jacobi - sell}"
    for cfg in "${CFGS[@]}"; do
        set -- $cfg
        co=(); [ "$2" != - ] && co=(--amg-coarse-smoother "$2")
        co+=(--amg-precision "${4:-f64}")
        [ -n "${5:-}" ] && co+=(--amg-jacobi-damping "$5")
        tag="$1-$2-$3-${4:-f64}${5:+-d$5}"
        timeout 120 "$G" amg-info --generate laplace3d:200 --amg-smoother $1 "${co[@]}" --layout $3 --backend cuda --bench-cycles 50 --json >"$LOGS/cyc-$tag.json" 2>"$LOGS/cyc-$tag.err"
        row "v-cycle $tag cuda" "$(j "$LOGS/cyc-$tag.json" cycle_bench.cycle_s cycle_bench.floor_s cycle_bench.ratio cycle_bench.copy_bytes_per_s)"
        for rep in 1 2; do
            timeout 120 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond amg \
                --amg-smoother $1 "${co[@]}" --layout $3 --backend cuda --tol 1e-8 --json >"$LOGS/amg-$tag.json" 2>"$LOGS/amg-$tag.err"
            row "pcg amg $tag cuda (run $rep)" "$(j "$LOGS/amg-$tag.json" iterations time_s amg_setup_s relative_residual)"
        done
    done
    timeout 60 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond jacobi --layout sell --backend cuda --tol 1e-8 --json >"$LOGS/jac-cuda.json" 2>&1
    row "pcg jacobi sell laplace3d:200 cuda" "$(j "$LOGS/jac-cuda.json" iterations time_s)"
    timeout 120 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-pyamg laplace3d:200 >"$LOGS/cupy-cg.json" 2>"$LOGS/cupy-cg.err"
    row "cupy cg jacobi laplace3d:200" "$(python3 -c "import json; print([(r['library'], round(r['solve_s'],4), r['iterations']) for r in json.load(open('$LOGS/cupy-cg.json'))['runs']])" 2>&1 | tail -c 200)"
fi

if [ "$WHAT" = amgaims ]; then
    # Issue 16's laplace3d:200 aims in one call: gpuq's AMG-PCG configurations (two runs
    # each), the recommended cycle against its floor, gpuq's Jacobi PCG, then PyAMG's
    # smoothed aggregation and CuPy's CG + Jacobi (benches/anchors/amg_peers.py); the 2x2
    # systems with block Jacobi and with Gauss-Seidel / Chebyshev-3 smoothing.
    pip install -q --no-deps --target /tmp/pylib .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
    ones200
    GSC="--amg-smoother gs --amg-coarse-smoother chebyshev:3"
    k=0
    for cfg in "$GSC --amg-precision f32 --layout sell:32:1" "$GSC --amg-precision f64 --layout sell:32:1" \
               "--layout sell:32:1" "$GSC --amg-precision f32" ""; do
        k=$((k + 1))
        for rep in 1 2; do
            timeout 120 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond amg $cfg \
                --backend cuda --tol 1e-8 --json >"$LOGS/aims-$k.json" 2>"$LOGS/aims-$k.err"
            row "pcg amg [$cfg] run $rep" "$(j "$LOGS/aims-$k.json" iterations time_s amg_setup_s relative_residual)"
        done
    done
    timeout 120 "$G" amg-info --generate laplace3d:200 $GSC --amg-precision f32 --layout sell:32:1 --backend cuda \
        --bench-cycles 50 --json >"$LOGS/aims-cycle.json" 2>&1
    row "v-cycle gs/chebyshev:3 f32 sell:32:1" "$(j "$LOGS/aims-cycle.json" cycle_bench.cycle_s cycle_bench.floor_s cycle_bench.ratio)"
    timeout 60 "$G" solve --generate laplace3d:200 --rhs "$LOGS/ones200.mtx" --method cg --precond jacobi --layout sell \
        --backend cuda --tol 1e-8 --json >"$LOGS/aims-jac.json" 2>&1
    row "pcg jacobi sell" "$(j "$LOGS/aims-jac.json" iterations time_s)"
    for sys in elasticity2d:1414 bidomain3d:200; do
        for cfg in "" "$GSC --amg-precision f32" "--amg-precision f32"; do
            k=$((k + 1))
            timeout 150 "$G" solve --generate $sys --method cg --precond amg --block 2 $cfg --stagnation-window 0 \
                --layout sell:32:1 --backend cuda --tol 1e-8 --json >"$LOGS/aims-$k.json" 2>"$LOGS/aims-$k.err"
            row "$sys block 2 [$cfg]" "$(j "$LOGS/aims-$k.json" iterations time_s amg_setup_s relative_residual)"
        done
    done
    timeout 300 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones --skip-rs laplace3d:200 \
        >"$LOGS/aims-peers.json" 2>"$LOGS/aims-peers.err"
    row "peers" "$(python3 -c "import json; print([(r['library'], round(r['solve_s'], 4), r['iterations']) for r in json.load(open('$LOGS/aims-peers.json'))['runs']])" 2>&1 | tail -c 200)"
fi

if [ "$WHAT" = amgprof ]; then
    # Each kernel of one V-cycle on laplace3d:200, timed by Nsight Compute (gpu__time_duration,
    # clocks and caches left alone), grouped by kernel and grid: where the cycle's time goes.
    # AMG_PROF: the amg-info options of the cycle (default: Gauss-Seidel / Chebyshev-3, f64).
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    IFS=';' read -ra PROFS <<<"${AMG_PROF:---amg-smoother gs --amg-coarse-smoother chebyshev:3 --amg-precision f64}"
    for p in "${PROFS[@]}"; do
        tag=$(echo "$p" | tr -c 'a-z0-9' '_' | cut -c1-60)
        timeout 300 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
            "$G" amg-info --generate laplace3d:200 $p --layout sell:32:1 --amg-setup cpu --backend cuda \
            --bench-cycles 1 >"$LOGS/ncu-$tag.csv" 2>"$LOGS/ncu-$tag.err"
        echo "== $p (rc=$?)"
        python3 - "$LOGS/ncu-$tag.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows: print("no ncu rows"); sys.exit()
h = rows[0]; rows = [dict(zip(h, r)) for r in rows[1:] if len(r) == len(h)]
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
agg = collections.OrderedDict(); total = 0.0
for r in rows:
    us = float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1.0)
    key = (r["Kernel Name"][:32], r["Grid Size"])
    c, t = agg.get(key, (0, 0.0)); agg[key] = (c + 1, t + us); total += us
print(f"{len(rows)} launches, {total:.1f} us in all (two cycles, the copies and norms included)")
for (name, grid), (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:40]:
    print(f"{name:32s} grid {grid:16s} x{c:3d} {t:9.1f} us  {t / c:8.1f} us each")
PY
    done
fi

if [ "$WHAT" = cubbest ]; then
    for c in "f1 7 1e-5 two-phase 65536 262144" "f2 5 1e-2 breadth-first 1024 262144" \
             "f3 5 1e-2 breadth-first 16384 262144" "f4 6 1e-5 breadth-first 1024 262144" \
             "f5 8 1e-7 breadth-first 16384 1048576"; do
        set -- $c
        out="$LOGS/best-$1.json"
        timeout 60 "$G" integrate --integrand $1 --dim $2 --tol $3 --method $4 --initial-boxes $5 --max-boxes $6 --backend cuda --max-evals 20000000000 --json >"$out" 2>&1
        row "integrate $1 n=$2 $3 $4 IB $5 MB $6 cuda" "$(j "$out" time_s evaluate_s error evaluations rounds converged)"
    done
fi

if [ "$WHAT" = amgbig ]; then
    # seed 002's table (its elasticity problem of 862,515 nodes: elasticity2d:929 has
    # 863,041 nodes, 2 unknowns each), PCG with 2x2-block Jacobi and with block AMG, on the
    # CPU backend with 1, 4 and 16 threads (block Jacobi: 16) and on the GPU; then elasticity2d and
    # bidomain3d at about 4e6 unknowns; then PyAMG (SA and Ruge-Stuben) on laplace3d:100
    pip install -q --no-deps --target /tmp/pylib .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
    for pc in ${AMGBIG_PRECONDS:-block2 amg}; do
        [ "$pc" = amg ] && pc="amg --block 2"
        ths="1 4 16"; [ "$pc" = block2 ] && ths=16
        for th in $ths; do
            out="$LOGS/seed002-${pc%% *}-$th.json"
            RAYON_NUM_THREADS=$th timeout 120 "$G" solve --generate elasticity2d:929 --method cg --precond $pc --stagnation-window 0 --backend cpu --tol 1e-8 --json >"$out" 2>"$out.err"
            row "seed002 elasticity2d:929 ${pc%% *} cpu x$th" "$(j "$out" iterations time_s amg_setup_s relative_residual)"
        done
        out="$LOGS/seed002-${pc%% *}-cuda.json"
        timeout 120 "$G" solve --generate elasticity2d:929 --method cg --precond $pc --stagnation-window 0 --layout sell:32:1 --backend cuda --tol 1e-8 --json >"$out" 2>"$out.err"
        row "seed002 elasticity2d:929 ${pc%% *} cuda" "$(j "$out" iterations time_s amg_setup_s relative_residual)"
    done
    for sys in elasticity2d:1414 bidomain3d:126; do
        for cfg in "amg --block 2:cuda" "amg --block 2:cpu" "block2:cuda"; do
            pc="${cfg%%:*}"; be="${cfg##*:}"
            out="$LOGS/big-${sys%%:*}-${pc%% *}-$be.json"
            timeout 150 "$G" solve --generate $sys --method cg --precond $pc --stagnation-window 0 --layout sell:32:1 --backend $be --tol 1e-8 --json >"$out" 2>"$out.err"
            row "$sys ${pc%% *} $be" "$(j "$out" n iterations time_s amg_setup_s relative_residual amg.operator_complexity)"
        done
    done
    timeout 240 python3 benches/anchors/amg_peers.py --rtol 1e-8 --rhs-ones laplace3d:100 >"$LOGS/amg-peers-100.json" 2>"$LOGS/amg-peers-100.err"
    python3 -c "
import json; d=json.load(open('$LOGS/amg-peers-100.json'))
for r in d['runs']: print('peer', {k: (round(v,4) if isinstance(v,float) else v) for k,v in r.items()})" 2>&1 | head -8
    python3 -c "
n = 100 ** 3
with open('$LOGS/ones100.mtx', 'w') as f:
    f.write('%%MatrixMarket matrix array real general\n' + str(n) + ' 1\n')
    f.write('1\n' * n)"
    for cfg in "cuda f64" "cuda f32" "cpu f64"; do
        set -- $cfg
        out="$LOGS/amg100-$1-$2.json"
        timeout 60 "$G" solve --generate laplace3d:100 --rhs "$LOGS/ones100.mtx" --method cg --precond amg --amg-precision $2 --layout sell:32:1 --backend $1 --tol 1e-8 --json >"$out" 2>"$out.err"
        row "laplace3d:100 amg $1 $2" "$(j "$out" iterations time_s amg_setup_s relative_residual)"
    done
fi

if [ "$WHAT" = amgbig2 ]; then
    # the block-Jacobi rows of amgbig without the stagnation stop, and bidomain3d:200
    # (201^2 x 51 nodes, 4.1e6 unknowns)
    for be in "cpu 16" "cuda"; do
        set -- $be
        out="$LOGS/seed002-block2-${2:-$1}.json"
        RAYON_NUM_THREADS=${2:-16} timeout 120 "$G" solve --generate elasticity2d:929 --method cg --precond block2 --stagnation-window 0 --layout sell:32:1 --backend $1 --tol 1e-8 --json >"$out" 2>"$out.err"
        row "seed002 elasticity2d:929 block2 $1 ${2:-}" "$(j "$out" iterations time_s relative_residual)"
    done
    for cfg in "elasticity2d:1414 block2 cuda" "bidomain3d:200 amg cuda" "bidomain3d:200 amg cpu" "bidomain3d:200 block2 cuda"; do
        set -- $cfg
        pc=$2; [ "$pc" = amg ] && pc="amg --block 2"
        out="$LOGS/big-$1-$2-$3.json"
        timeout 150 "$G" solve --generate $1 --method cg --precond $pc --stagnation-window 0 --layout sell:32:1 --backend $3 --tol 1e-8 --json >"$out" 2>"$out.err"
        row "$1 $2 $3" "$(j "$out" n iterations time_s amg_setup_s relative_residual amg.operator_complexity)"
    done
fi

if [ "$WHAT" = cubsweep ]; then
    # Table III with the warp-per-box evaluation: each case at a few initial partitions,
    # box caps and split aims (CUB_SWEEP="fK N TOL METHOD IB MB AIM;..." overrides).
    SWEEP="${CUB_SWEEP:-f1 7 1e-5 two-phase 65536 262144 0.5;f1 7 1e-5 breadth-first 65536 1048576 0;f2 5 1e-2 breadth-first 1024 262144 0.5;f3 5 1e-2 breadth-first 16384 262144 0.5;f3 5 1e-2 breadth-first 16384 1048576 0;f4 6 1e-5 breadth-first 1024 262144 0.5;f4 6 1e-5 breadth-first 4096 1048576 0;f5 8 1e-7 breadth-first 16384 1048576 0.5;f5 8 1e-7 breadth-first 16384 1048576 0;f5 8 1e-7 breadth-first 65536 1048576 0.5;f5 8 1e-7 breadth-first 65536 2097152 0;f5 8 1e-7 two-phase 65536 1048576 0.5}"
    IFS=';' read -ra CFGS <<<"$SWEEP"
    for c in "${CFGS[@]}"; do
        set -- $c
        out="$LOGS/sw-$1-$4-$5-$6-$7.json"
        timeout 60 "$G" integrate --integrand $1 --dim $2 --tol $3 --method $4 --initial-boxes $5 --max-boxes $6 --split-aim $7 --backend cuda --max-evals 20000000000 --repeat 3 --json >"$out" 2>&1
        row "integrate $1 n=$2 $3 $4 IB $5 MB $6 aim $7" "$(j "$out" time_s evaluate_s error estimate evaluations rounds converged repeat_time_s)"
    done
fi

if [ "$WHAT" = cubpeers ]; then
    # the Table III cases with the Python cubature package (CPU), torchquad and a CuPy
    # product Gauss-Legendre rule (GPU)
    pip install -q --no-deps --target /tmp/pylib .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/pylib
    timeout 420 python3 benches/anchors/cub_peers.py --max-evals 5e7 --max-points 4e8 ${CUB_PEERS_ARGS:-} \
        f1:7:1e-5:3.2165870516874071209 f2:5:1e-2:0.98240473724646061423 f3:5:1e-2:0.0488022 \
        f4:6:1e-5:0.033357220109209012666 f5:8:1e-7 >"$LOGS/cub-peers.json" 2>"$LOGS/cub-peers.err"
    python3 - "$LOGS/cub-peers.json" <<'PY' | while read -r l; do row "${l%%|*}" "${l#*|}"; done
import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    print(f"peer {r['integrand']} n={r['dim']} {r['rel_tol']} {r['peer'][:30]}|"
          + " ".join(f"{k}={r[k]:.4g}" if isinstance(r.get(k), float) else f"{k}={r.get(k)}"
                     for k in ("time_s", "evaluations", "true_rel_error", "converged", "points_per_axis", "failed") if k in r))
PY
fi

if [ "$WHAT" = cubtensor ]; then
    # gpuq's product Gauss-Legendre rule on the GPU at the points per axis with which the
    # CuPy peer met the Table III tolerances (f1: 8, f2: 5, f5: 10) or stopped (f4: 26)
    for c in "f1 7 8" "f2 5 5" "f4 6 26" "f5 8 10"; do
        set -- $c
        out="$LOGS/tensor-$1.json"
        timeout 60 "$G" integrate --integrand $1 --dim $2 --method gauss-legendre:$3 --backend cuda --repeat 3 --json >"$out" 2>&1
        row "integrate $1 n=$2 gauss-legendre:$3 cuda" "$(j "$out" time_s estimate evaluations repeat_time_s)"
    done
    # the rising-order rule (its own error estimate) on the Table III cases
    for c in "f1 7 1e-5" "f2 5 1e-2" "f3 5 1e-2" "f4 6 1e-5" "f5 8 1e-7"; do
        set -- $c
        out="$LOGS/tensor-auto-$1.json"
        timeout 60 "$G" integrate --integrand $1 --dim $2 --tol $3 --method gauss-legendre:auto --max-evals 20000000000 --backend cuda --repeat 3 --json >"$out" 2>&1
        row "integrate $1 n=$2 $3 gauss-legendre:auto cuda" "$(j "$out" time_s estimate error evaluations rounds converged repeat_time_s)"
    done
fi

if [ "$WHAT" = fig2 ]; then
    # seed 004's Figure 2: time against relative tolerance per dimension, sequential
    # CUHRE on one core (12 runs at a time), two-phase on the CPU (16 threads), two-phase
    # and breadth-first on the GPU; every run capped at 1e8 evaluations as the seed's.
    FIG="${FIG2_CASES:-f1 5;f1 6;f1 7;f1 8;f2 4;f2 5;f3 4;f3 5;f4 5;f4 6;f4 7;f5 6;f5 7;f5 8}"
    TOLS="${FIG2_TOLS:-1e-3 1e-5 1e-7}"
    IFS=';' read -ra FC <<<"$FIG"
    : >"$LOGS/fig2-jobs"
    for c in "${FC[@]}"; do set -- $c; for t in $TOLS; do echo "$1 $2 $t" >>"$LOGS/fig2-jobs"; done; done
    [ "${FIG2_SEQ:-1}" = 1 ] && xargs -P 12 -L 1 sh -c 'timeout 30 "$0" integrate --integrand $1 --dim $2 --tol $3 --method cuhre --backend cpu --max-evals 100000000 --json >"'"$LOGS"'/fig2-$1-$2-$3-cuhre-cpu.json" 2>&1' "$G" <"$LOGS/fig2-jobs"
    while read -r f n t; do
        for mb in ${FIG2_METHODS:-two-phase/cuda breadth-first/cuda gauss-legendre:auto/cuda two-phase/cpu}; do
            m=${mb%/*}; be=${mb#*/}
            timeout 30 "$G" integrate --integrand $f --dim $n --tol $t --method $m --backend $be --max-evals 100000000 --json >"$LOGS/fig2-$f-$n-$t-$m-$be.json" 2>&1
        done
    done <"$LOGS/fig2-jobs"
    python3 - "$LOGS" <<'PY' | while read -r l; do row "${l%%|*}" "${l#*|}"; done
import json, sys, os
logs = sys.argv[1]
def load(f, n, t, m):
    try:
        d = json.load(open(os.path.join(logs, f"fig2-{f}-{n}-{t}-{m}.json")))
        return d if d.get("converged") else None
    except Exception:
        return None
for line in open(os.path.join(logs, "fig2-jobs")):
    f, n, t = line.split()
    seq = load(f, n, t, "cuhre-cpu")
    cells = []
    for m in ("two-phase-cpu", "two-phase-cuda", "breadth-first-cuda", "gauss-legendre:auto-cuda"):
        d = load(f, n, t, m)
        if seq and d:
            cells.append(f"{m}={seq['time_s'] / d['time_s']:.3g}x")
        else:
            cells.append(f"{m}=-")
    s = f"{seq['time_s']:.4g}s/{seq['evaluations']:.3g}" if seq else "not converged"
    print(f"fig2 {f} n={n} {t}|seq {s} " + " ".join(cells))
PY
fi

if [ "$WHAT" = cubature ]; then
    for c in "f1 7 1e-5" "f2 5 1e-2" "f3 5 1e-2" "f4 6 1e-5" "f5 8 1e-7"; do
        set -- $c
        for m in "two-phase 0.5" "breadth-first 0" "breadth-first 0.5"; do
            set -- $c $m
            out="$LOGS/int-$1-$4-$5.json"
            timeout 60 "$G" integrate --integrand $1 --dim $2 --tol $3 --method $4 --split-aim $5 --backend cuda --max-evals 20000000000 --json >"$out" 2>&1
            row "integrate $1 n=$2 $3 $4 aim=$5 cuda" "$(j "$out" time_s error evaluations rounds converged)"
        done
    done
fi

if [ "$WHAT" = psd ]; then
    timeout 60 "$G" uq psd --dofs 512 --freq-range 0:100:201 --full --backend cuda --json >"$LOGS/psd-cuda.json" 2>&1
    row "uq psd 512 dofs 201 freqs rank-1 kernel cuda" "$(j "$LOGS/psd-cuda.json" rank1_kernel_s rank1_kernel_gbps full_bytes)"
    timeout 120 python3 benches/anchors/uq_peers.py --what psd --psd-n 512 --psd-freqs 201 >"$LOGS/psd-peers.json" 2>"$LOGS/psd-peers.err"
    row "psd peers (s)" "$(python3 -c "import json; print(json.load(open('$LOGS/psd-peers.json'))['runs'])" 2>&1 | tail -c 300)"
fi

if [ "$WHAT" = uqpeers ]; then
    for be in cpu cuda; do
        timeout 60 "$G" uq expectation --dim 10 --points 6 --repeat 3 --backend $be --json >"$LOGS/exp-$be.json" 2>&1
        row "uq expectation GH 6^10 $be" "$(j "$LOGS/exp-$be.json" time_s first_s estimate exact)"
        timeout 60 "$G" uq convolution --dofs 64 --steps 8192 --samples 1000 --repeat 3 --backend $be --json >"$LOGS/conv-$be.json" 2>&1
        row "uq convolution 8192 x 1000 $be" "$(j "$LOGS/conv-$be.json" time_s first_s setup_s final_tip_std peak_tip_mean fft)"
        timeout 60 "$G" uq static --dofs 128 --samples 100000 --modulus-cov 0.1 --backend $be --json >"$LOGS/static-$be.json" 2>&1
        row "uq static 128 dofs 1e5 samples cov 0.1 $be" "$(j "$LOGS/static-$be.json" time_s mean std)"
    done
    timeout 60 "$G" uq convolution --dofs 64 --steps 8192 --samples 10000 --repeat 3 --backend cuda --json >"$LOGS/conv-big.json" 2>&1
    row "uq convolution 8192 x 10000 cuda" "$(j "$LOGS/conv-big.json" time_s first_s final_tip_std)"
    timeout 300 python3 benches/anchors/uq_peers.py --what expectation,convolution,static >"$LOGS/uqp.json" 2>"$LOGS/uqp.err"
    timeout 120 python3 benches/anchors/uq_peers.py --what convolution --conv-samples 10000 >"$LOGS/uqp-big.json" 2>>"$LOGS/uqp.err"
    python3 -c "
import json
for f in ['$LOGS/uqp.json', '$LOGS/uqp-big.json']:
    for r in json.load(open(f))['runs']: print('peer', r)" 2>&1 | tail -8
    tail -3 "$LOGS/uqp.err"
fi

if [ "$WHAT" = uqcpu ]; then
    # gpuq's CPU backend (all cores) and CUDA against NumPy/SciPy on the same CPU, the sizes
    # of the uqpeers/bench rows (SDOF at 10^5 samples: NumPy's vectorised RK4 is slow)
    for be in cpu cuda; do
        timeout 60 "$G" uq static --dofs 128 --samples 100000 --modulus-cov 0.1 --backend $be --json >"$LOGS/static-$be.json" 2>&1
        row "uq static 128 dofs 1e5 samples cov 0.1 $be" "$(j "$LOGS/static-$be.json" time_s mean std)"
        timeout 60 "$G" uq psd --dofs 512 --freq-range 0:100:201 --full --backend $be --json >"$LOGS/psd-$be.json" 2>&1
        row "uq psd 512 dofs 201 freqs full $be" "$(j "$LOGS/psd-$be.json" full_s)"
        timeout 60 "$G" uq convolution --dofs 64 --steps 8192 --samples 1000 --repeat 3 --backend $be --json >"$LOGS/conv-$be.json" 2>&1
        row "uq convolution 8192 x 1000 $be" "$(j "$LOGS/conv-$be.json" time_s final_tip_std)"
        timeout 120 "$G" uq sdof --samples 100000 --backend $be --json >"$LOGS/sdof-$be.json" 2>&1
        row "uq sdof 1e5 f64 $be" "$(j "$LOGS/sdof-$be.json" time_s final_variance)"
        timeout 60 "$G" uq expectation --dim 10 --points 6 --repeat 3 --backend $be --json >"$LOGS/exp-$be.json" 2>&1
        row "uq expectation GH 6^10 $be" "$(j "$LOGS/exp-$be.json" time_s estimate)"
    done
    timeout 400 python3 benches/anchors/uq_peers.py --xp numpy --what sdof,psd,expectation,convolution,static \
        --samples 100000 >"$LOGS/numpy.json" 2>"$LOGS/numpy.err"
    python3 -c "
import json
for r in json.load(open('$LOGS/numpy.json'))['runs']: print('peer', r)" 2>&1 | tail -8
    tail -3 "$LOGS/numpy.err"
fi

if [ "$WHAT" = seedtables ]; then
    bash benches/seed001_tables.sh "$G" >"$LOGS/seedtables.log" 2>&1
    sed -n '/== seed 001 tables/,$p' "$LOGS/seedtables.log"
fi

if [ "$WHAT" = mpi ]; then
    # MPI_RUNS: "GRID RANKS BACKEND METHOD [PRECOND [COMM]]" rows separated by ';' (PRECOND
    # jacobi by default, or amg: the distributed AMG; COMM auto by default, nvlink, nccl or
    # mpi;
    # default rows: laplace3d:200, CG, 1 and 2 ranks on CUDA and CPU); with two or more
    # GPUs, gpuq-dist's device tests (gpu-pack/test-gpuq-dist-cuda.xz, the NCCL halo and
    # solves against one GPU) run first, and the link between GPUs 0 and 1 and the host
    # staging path are measured in the same call (PyTorch copies). MPI_TRACE (below): kernel
    # timelines of chosen runs.
    M=/tmp/gpuq-mpi
    xz -dc gpu-pack/gpuq-mpi.xz >"$M" && chmod +x "$M" || exit 1
    export NCCL_NVLS_ENABLE=0
    R="mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE"
    nvidia-smi -L
    if [ -f gpu-pack/test-gpuq-dist-cuda.xz ]; then
        T=/tmp/test-gpuq-dist-cuda
        xz -dc gpu-pack/test-gpuq-dist-cuda.xz >"$T" && chmod +x "$T"
        timeout "${RUN_TIMEOUT:-300}" "$T" --test-threads=1 --nocapture >"$LOGS/test-dist-cuda.log" 2>&1
        row "gpuq-dist device tests (rc $?)" "$(grep -E '^test result' "$LOGS/test-dist-cuda.log")"
        grep -E "skipped|panicked|FAILED" "$LOGS/test-dist-cuda.log" | head -5
    fi
    if [ -f gpu-pack/comm-bench.xz ] && [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
        # NCCL's and MPI's latency and bandwidth as a solve meets them (the
        # gpuq-dist example comm_bench): an 8-byte all-reduce, halos of K f64.
        CB=/tmp/comm-bench
        xz -dc gpu-pack/comm-bench.xz >"$CB" && chmod +x "$CB"
        # COMM_BENCH: "RANKS:K" pairs (default 2 ranks, K = 1, 90000, 10^6).
        for rk in ${COMM_BENCH:-2:1 2:90000 2:1000000}; do
            n=${rk%%:*} k=${rk#*:}
            [ "$(nvidia-smi -L | wc -l)" -ge "$n" ] || continue
            timeout "${RUN_TIMEOUT:-300}" $R -n "$n" "$CB" "$k" 2000 >"$LOGS/comm-bench-$n-$k.log" 2>&1
            while read -r line; do row "comm_bench $n ranks K=$k" "$line"; done < <(grep ":" "$LOGS/comm-bench-$n-$k.log" | grep -v "^comm_bench")
        done
    fi
    if [ -n "${MPI_CHECKS:-}" ] && [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
        # MPI_CHECKS: "ARGS" rows separated by ';' (gpuq solve arguments): the serial CPU
        # solve, then mpirun -n 2 on two GPUs; the row gives both iteration counts and
        # residuals and max |x_gpus - x_serial| / max |x_serial| (`--out` of each).
        rhs16="/tmp/rhs-16.mtx"
        awk 'BEGIN { n = 16 * 16 * 16; print "%%MatrixMarket matrix array real general"; print n, 1;
                     for (i = 0; i < n; i++) printf "%.17g\n", 1 + sin(0.37 * i) }' >"$rhs16"
        IFS=';' read -ra CHECKS <<<"$MPI_CHECKS"
        for args in "${CHECKS[@]}"; do
            args="${args//RHS16/$rhs16}"
            # shellcheck disable=SC2086
            "$M" solve $args --backend cpu --json --out /tmp/x-serial.mtx >"$LOGS/check-serial.json" 2>&1
            # shellcheck disable=SC2086
            timeout "${RUN_TIMEOUT:-300}" $R -n 2 "$M" solve $args --backend cuda --comm "${CHECK_COMM:-auto}" --json --out /tmp/x-gpus.mtx >"$LOGS/check-gpus.json" 2>"$LOGS/check-gpus.err"
            row "check $args" "serial $(j "$LOGS/check-serial.json" iterations relative_residual) | 2 GPUs $(j "$LOGS/check-gpus.json" gpus comm iterations relative_residual converged) | dx $(python3 - <<'PY'
import numpy as np
def read(p):
    with open(p) as f:
        rows = [l for l in f if not l.startswith('%')]
    return np.array([float(v) for v in rows[1:]])
try:
    a, b = read('/tmp/x-serial.mtx'), read('/tmp/x-gpus.mtx')
    print(f"{np.abs(b - a).max() / np.abs(a).max():.2e}")
except Exception as e:
    print(f"(no x: {e.__class__.__name__})")
PY
)"
            grep -v "^$" "$LOGS/check-gpus.err" | tail -3
            rm -f /tmp/x-serial.mtx /tmp/x-gpus.mtx
        done
    fi
    IFS=';' read -ra RUNS <<<"${MPI_RUNS:-laplace3d:200 1 cuda cg;laplace3d:200 2 cuda cg;laplace3d:200 1 cpu cg;laplace3d:200 2 cpu cg}"
    for run in "${RUNS[@]}"; do
        set -- $run
        pc="${5:-jacobi}"
        cm="${6:-auto}"
        out="$LOGS/mpi-${1#*:}-$2-$3-$4-$pc-$cm.json"
        # AMG's near-null space holds the generated b = A 1: AMG rows solve b = 1 instead
        # (laplace3d grids; the file is written once per grid).
        rhs=()
        if [ "$pc" = amg ] && [ "${1%%:*}" = laplace3d ]; then
            f="/tmp/ones-${1#*:}.mtx"
            [ -f "$f" ] || awk -v n=$(( ${1#*:} ** 3 )) 'BEGIN { print "%%MatrixMarket matrix array real general"; print n, 1; for (i = 0; i < n; i++) print 1 }' >"$f"
            rhs=(--rhs "$f")
        fi
        # RANKS 0: the one-process solve (no mpirun), the baseline of the rows after it.
        if [ "$2" = 0 ]; then launch=("$M"); else launch=($R -n "$2" "$M"); fi
        comm=(--comm "$cm")
        [ "$2" = 0 ] && comm=()
        timeout "${RUN_TIMEOUT:-300}" "${launch[@]}" solve --generate $1 "${rhs[@]}" --method $4 --precond $pc --backend $3 "${comm[@]}" --tol 1e-8 --json >"$out" 2>"$out.err"
        row "mpirun -n $2 $4 $pc $1 $3 $cm" "$(j "$out" ranks gpus comm iterations time_s setup_time_s relative_residual halo_s collective_s)"
        grep -v "^$" "$out.err" | tail -3
    done
    if [ -n "${MPI_TRACE:-}" ]; then
        # MPI_TRACE: "NAME:RANKS:PRECOND" words (RANKS 0 = one process): laplace3d:300 solved
        # as in MPI_RUNS with every kernel and copy recorded by benches/cupti_trace.c (CUPTI,
        # loaded through CUDA_INJECTION64_PATH), one file per process in $OUT/traces.tar.xz;
        # read them with benches/trace_summary.py.
        CU=/usr/local/cuda-13.0/targets/x86_64-linux
        gcc -O2 -shared -fPIC -o /tmp/libtrace.so benches/cupti_trace.c -I$CU/include \
            -DKREC=CUpti_ActivityKernel10 -DMREC=CUpti_ActivityMemcpy6 -L$CU/lib -l:"$(basename "$(ls $CU/lib/libcupti.so* | head -1)")" -Wl,-rpath,$CU/lib || exit 1
        TR=/tmp/gpuq-traces; mkdir -p "$TR"
        for t in $MPI_TRACE; do
            IFS=: read -r name n pc <<<"$t"
            f="/tmp/ones-300.mtx"
            [ -f "$f" ] || awk -v n=27000000 'BEGIN { print "%%MatrixMarket matrix array real general"; print n, 1; for (i = 0; i < n; i++) print 1 }' >"$f"
            rhs=(); [ "$pc" = amg ] && rhs=(--rhs "$f")
            if [ "$n" = 0 ]; then launch=("$M"); comm=(); else launch=($R -x CUDA_INJECTION64_PATH -x CUPTI_TRACE_DIR -n "$n" "$M"); comm=(--comm nccl); fi
            mkdir -p "$TR/$name"
            CUDA_INJECTION64_PATH=/tmp/libtrace.so CUPTI_TRACE_DIR="$TR/$name" timeout "${RUN_TIMEOUT:-300}" "${launch[@]}" solve --generate laplace3d:300 "${rhs[@]}" \
                --method cg --precond "$pc" --backend cuda "${comm[@]}" --tol 1e-8 --json >"$TR/$name/run.json" 2>"$TR/$name/err"
            row "traced $name ($n ranks, $pc)" "$(j "$TR/$name/run.json" iterations time_s)"
        done
        [ -n "${OUT:-}" ] && tar cJf "$OUT/traces.tar.xz" -C "$TR" .
    fi
    if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
        row "links (GB/s)" "$(python3 - <<'PY'
import torch, time
n = 1 << 27  # 1 GiB of f64
def rate(dst, src, reps=10):
    dst.copy_(src); torch.cuda.synchronize(0); torch.cuda.synchronize(1)
    t = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    torch.cuda.synchronize(0); torch.cuda.synchronize(1)
    return 8 * n * reps / (time.perf_counter() - t) / 1e9
a = torch.ones(n, dtype=torch.float64, device="cuda:0")
b = torch.empty(n, dtype=torch.float64, device="cuda:1")
h = torch.empty(n, dtype=torch.float64, pin_memory=True)
print(f"gpu0->gpu1 {rate(b, a):.1f} gpu0->pinned host {rate(h, a):.1f} pinned host->gpu1 {rate(b, h):.1f}")
PY
)"
    fi
fi
[ -n "${OUT:-}" ] && tar czf "$OUT/logs-$WHAT.tgz" -C "$LOGS" .
echo
echo "== summary ($WHAT)"
printf "$TABLE"
