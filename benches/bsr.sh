#!/usr/bin/env bash
# Issue 47: block sparse rows with b x b blocks, one call on the GPU machine.
# Built here (see benches/lib.sh): gpu-pack/gpuq.xz (release CLI), gpu-pack/t-*.xz
# (the cross-backend SpMV and AMG tests), gpu-pack/b-gpu.xz (the release `gpu`
# bench: cargo build --release --features cuda --bench gpu -p gpuq).
# There (carry gpu-pack): bash benches/bsr.sh. Prints the tests' lines, the AMG
# solves with the default storage and with each level in its node blocks
# (--layout bsr:3), then the SpMV table against cuSPARSE last.
set -u
. benches/lib.sh
unpack_gpuq
run_carried_tests
for n in 48 64; do
  for layout in auto bsr:3; do
    for backend in cuda; do
      timeout 300 $G solve --generate elasticity3d:$n --block 3 --method cg --precond amg \
        --tol 1e-8 --json --backend $backend --layout $layout > /tmp/r.json 2>/tmp/r.err \
        || head -c 300 /tmp/r.err
      report /tmp/r.json "elasticity3d:$n | $backend $layout |"
    done
  done
done
for layout in auto bsr:3; do
  timeout 300 $G solve --generate elasticity3d:32 --block 3 --method cg --precond amg \
    --tol 1e-8 --json --backend cpu --layout $layout > /tmp/r.json 2>/tmp/r.err || head -c 300 /tmp/r.err
  report /tmp/r.json "elasticity3d:32 | cpu $layout |"
done
xz -dc gpu-pack/b-gpu.xz > /tmp/bench-gpu && chmod +x /tmp/bench-gpu
/tmp/bench-gpu --block-only
