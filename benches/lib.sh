# Shared by the device drivers (benches/*.sh), sourced from the repository root
# on the GPU machine. Binaries built here travel xz-compressed in gpu-pack/:
#   gpu-pack/gpuq.xz     the release CLI (cargo build --release -p gpuq-cli)
#   gpu-pack/t-NAME.xz   test binaries (cargo test --profile gpu-test -p CRATE --no-run)
# and Python wheels in .whl/ (README of the device tool).

export NCCL_NVLS_ENABLE=0
G=/tmp/gpuq

# Unpacks the CLI into $G and prints the GPU's name.
unpack_gpuq() {
  xz -dc gpu-pack/gpuq.xz > "$G" && chmod +x "$G"
  nvidia-smi --query-gpu=name --format=csv,noheader
}

# Runs every carried test binary (gpu-pack/t-*.xz): one line per binary with its
# exit status and cargo's summary, then the first failures.
run_carried_tests() {
  for t in gpu-pack/t-*.xz; do
    [ -e "$t" ] || continue
    local b=/tmp/$(basename "$t" .xz)
    xz -dc "$t" > "$b"; chmod +x "$b"
    GPUQ_BIN=$G GPUQ_REPO=$PWD timeout 300 "$b" > "$b.log" 2>&1
    echo "TEST $(basename "$b") rc=$? $(grep -E '^test result' "$b.log" | tr '\n' ' ')"
    grep -E "panicked|^---- |FAILED" "$b.log" | head -8
  done
}

# Installs the carried wheels (.whl) into /tmp/site and puts it on PYTHONPATH.
install_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
}

# One line of a gpuq JSON solve report ($1) under the label $2: status, iterations,
# true residual, AMG setup, solve and their sum in seconds.
report() {
  python3 -c "
import json, sys
try:
    d = json.load(open('$1'))
except Exception as e:
    print('$2 FAILED', e); sys.exit()
s = d.get('amg_setup_s', d.get('setup_time_s', 0))
print('$2 %s it %d rel %.2e setup %.3f solve %.3f total %.3f' % (d['status'], d['iterations'], d['relative_residual'], s, d['time_s'], s + d['time_s']))"
}

# The summary table a driver prints last: `row LABEL TEXT` prints "ROW label text" now and
# keeps the line for `printf "$TABLE"` at the end.
TABLE=""
row() { TABLE="$TABLE$(printf '%-40s %s' "$1" "$2")\n"; printf 'ROW %-40s %s\n' "$1" "$2"; }

# Fields of a gpuq JSON report: `json_fields FILE KEY...`, each KEY dotted (list indices as
# numbers, e.g. modes.omega.0); prints key=value pairs on one line.
json_fields() {
  python3 - "$@" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("(no json)", e); sys.exit()
out = []
for k in sys.argv[2:]:
    v = d
    for p in k.split("."):
        v = v[int(p)] if isinstance(v, list) else (v or {}).get(p)
    out.append(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}")
print(" ".join(out))
PY
}
