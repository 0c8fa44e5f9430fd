#!/usr/bin/env python3
"""kprof's op table against PyTorch's own (issue 34, "op parity with key_averages"): per op, the
calls and the GPU time kprof gives it in the measured loop (window.rN.json: `kprof run --capture
nvtx:measured`, then `kprof report --format json`) against torch.profiler's key_averages of the
same loop in other runs of the same workload (profiler.rN.ops.json: count and self device time),
both written by scripts/zoo_cost.sh. Medians over the rounds of each side.

    scripts/pytorch_ops_parity_kineto.py DIR/WORKLOAD [--tolerance 0.02]

Prints every op with GPU time on either side: calls, GPU time, their ratio; then the ops whose
calls differ or whose GPU time is further apart than the tolerance, with the spread (min..max) of
each side's own rounds, and exits 1 if there are any (0 when all agree).
"""
import glob
import json
import os
import statistics
import sys


def kprof_ops(path):
    with open(path) as f:
        doc = json.load(f)
    return {r["key"]: (r["calls"], r["gpu_ns"] / 1e3) for r in doc["ops"]}


def kineto_ops(path):
    with open(path) as f:
        rows = json.load(f)
    out = {}
    for r in rows:
        if not r.get("device_type", "DeviceType.CPU").endswith("CPU"):
            continue  # kernels: the ops' device time holds them
        calls, us = out.get(r["key"], (0, 0.0))
        out[r["key"]] = (calls + r["count"], us + r["self_device_us"])
    return out


def rounds(folder, pattern, load):
    runs = [load(p) for p in sorted(glob.glob(os.path.join(folder, pattern)))]
    if not runs:
        sys.exit("no %s in %s" % (pattern, folder))
    return runs


def median_of(runs, op):
    calls = [r.get(op, (0, 0.0))[0] for r in runs]
    us = [r.get(op, (0, 0.0))[1] for r in runs]
    return statistics.median(calls), statistics.median(us), (min(us), max(us))


def main():
    args = sys.argv[1:]
    tol = 0.02
    if "--tolerance" in args:
        i = args.index("--tolerance")
        tol = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    folder = args[0]
    ks = rounds(folder, "window.r*.json", kprof_ops)
    ts = rounds(folder, "profiler.r*.ops.json", kineto_ops)
    ops = sorted({op for r in ks + ts for op, (_, us) in r.items() if us > 0})
    print("%s: %d kprof rounds, %d torch.profiler rounds, %d ops with GPU time"
          % (os.path.basename(folder.rstrip("/")), len(ks), len(ts), len(ops)))
    print("%-48s %8s %8s %11s %11s %7s" % ("op", "calls k", "calls t", "kprof us", "torch us",
                                           "ratio"))
    apart = []
    sums = [0.0, 0.0]
    for op in ops:
        kc, ku, kspread = median_of(ks, op)
        tc, tu, tspread = median_of(ts, op)
        sums[0] += ku
        sums[1] += tu
        ratio = ku / tu if tu else float("inf")
        print("%-48s %8d %8d %11.1f %11.1f %7.4f" % (op[:48], kc, tc, ku, tu, ratio))
        if kc != tc or abs(ratio - 1) > tol:
            apart.append((op, kc, tc, ratio, kspread, tspread))
    print("all ops: kprof %.1f us, torch.profiler %.1f us, ratio %.4f"
          % (sums[0], sums[1], sums[0] / sums[1] if sums[1] else float("nan")))
    for op, kc, tc, ratio, kspread, tspread in apart:
        print("APART %s: calls %d / %d, GPU ratio %.4f; kprof rounds %.1f..%.1f us, torch %.1f..%.1f"
              % (op, kc, tc, ratio, kspread[0], kspread[1], tspread[0], tspread[1]))
    print("%d of %d ops agree (calls equal, GPU time within %.0f%%)"
          % (len(ops) - len(apart), len(ops), tol * 100))
    return 1 if apart else 0


if __name__ == "__main__":
    sys.exit(main())
