#!/usr/bin/env python3
"""The 2-core table of `benches/fem.sh cpu` (issue 47): for every system, the
median over the rounds of gpuq's setup + solve (its `--json` report) and of
PyAMG's (peers.py's), taken in alternation so both meet the same load, and
their ratio.

    python cpu_table.py OUTDIR ROUNDS SYSTEM...
"""
import json
import statistics
import sys


def main():
    out, rounds, systems = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print("| system | gpuq: it, setup + solve s (median) | PyAMG: it, setup + solve s (median) "
          "| vs PyAMG (median; min-max over rounds) |")
    print("| --- | --- | --- | ---: |")
    for s in systems:
        g, p = [], []
        for r in range(1, rounds + 1):
            d = json.load(open(f"{out}/{s}-gpuq-{r}.json"))
            g.append((d["iterations"], d["amg_setup_s"], d["time_s"]))
            q = json.load(open(f"{out}/{s}-pyamg-{r}.json"))["results"][s]["pyamg"]
            p.append((q["iters"], q["setup_s"], q["solve_s"]))
        gt = [x[1] + x[2] for x in g]
        pt = [x[1] + x[2] for x in p]
        ratios = [b / a for a, b in zip(gt, pt)]

        def med(rows, k):
            return statistics.median(x[k] for x in rows)

        print(f"| {s} | {g[0][0]}, {med(g, 1):.3f} + {med(g, 2):.3f} = {statistics.median(gt):.3f} "
              f"| {p[0][0]}, {med(p, 1):.3f} + {med(p, 2):.3f} = {statistics.median(pt):.3f} "
              f"| {statistics.median(pt) / statistics.median(gt):.1f}x "
              f"({min(ratios):.1f}-{max(ratios):.1f}) |")


if __name__ == "__main__":
    main()
