#!/usr/bin/env python3
"""Per-iteration kernel time from benches/cupti_trace.c's files (one per process).

    python3 benches/trace_summary.py MARKER trace-*.tsv

MARKER is a kernel launched once per iteration (cg_xp_slots_f64 for CG on the
device path, convert_f64_f32 for PCG with the f32 AMG cycle). For each file:
the mean time between consecutive markers (the first and last intervals left
out), the time some kernel was running, and each kernel's mean time and count
per iteration by stream (on the compute stream the time a kernel waited after
the previous one ended is a gap: a halo or a reduction not hidden).
"""
import collections
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            kind, _dev, stream, start, end, name = line.rstrip("\n").split("\t", 5)
            if "ncclDevKernel_" in name:
                name = "nccl_" + name.split("ncclDevKernel_")[1].split("24ncclDev")[0]
            rows.append((int(start), int(end), int(stream), kind, name))
    rows.sort()
    return rows


def summary(path, marker):
    rows = load(path)
    marks = [r[0] for r in rows if r[4] == marker]
    spans = list(zip(marks[1:-1], marks[2:]))
    if not spans:
        print(f"{path}: fewer than three '{marker}' kernels")
        return
    per = collections.Counter()
    count = collections.Counter()
    busy = 0
    for a, b in spans:
        inside = [r for r in rows if a <= r[0] < b]
        end = a
        for s, e, stream, kind, name in inside:
            busy += max(0, min(e, b) - max(s, end))
            end = max(end, min(e, b))
            per[(stream, kind, name)] += e - s
            count[(stream, kind, name)] += 1
    n = len(spans)
    span = sum(b - a for a, b in spans) / n
    print(f"{path}: {len(marks)} markers, {span / 1e3:.1f} us per iteration, "
          f"kernels running {busy / n / 1e3:.1f} us")
    for key, ns in per.most_common():
        stream, kind, name = key
        print(f"  {ns / n / 1e3:9.1f} us  x{count[key] / n:5.1f}  stream {stream} {kind} {name}")


if __name__ == "__main__":
    for p in sys.argv[2:]:
        summary(p, sys.argv[1])
