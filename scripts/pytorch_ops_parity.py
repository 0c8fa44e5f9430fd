#!/usr/bin/env python3
"""Issue 11 acceptance, read side: per-op GPU time inside "train_step" of plain `kprof run`
(auto_N.json) against the script's own emit_nvtx() (emit_N.json), from the range-path JSON
reports scripts/pytorch_ops_parity.sh writes (gzipped or not). Prints, per op, the median over
the runs of each side and their ratio, then the ops further apart than 1% with the spread (min to
max) of each side's own runs: a difference inside that spread is run-to-run noise, not naming.
    scripts/pytorch_ops_parity.py DIR"""
import glob
import gzip
import json
import os
import statistics
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def step_ops(doc):
    ops = {}
    for row in doc["rows"]:
        key = row["key"]
        if not key.startswith("train_step/"):
            continue
        op = key[key.rfind("/") + 1:]
        calls, gpu = ops.get(op, (0, 0))
        ops[op] = (calls + row["calls"], gpu + row["gpu_ns"])
    return ops


def side(directory, name):
    runs = [step_ops(load(p)) for p in sorted(glob.glob(os.path.join(directory, name + "_*.json*")))]
    if not runs:
        sys.exit("no %s_N.json in %s" % (name, directory))
    return runs


auto, emit = side(sys.argv[1], "auto"), side(sys.argv[1], "emit")
ops = sorted(set().union(*auto, *emit))
print("%d auto runs, %d emit_nvtx runs, %d ops inside train_step" % (len(auto), len(emit), len(ops)))
print("%-40s %8s %8s %12s %12s %8s" % ("op", "calls a", "calls e", "auto us", "emit us", "ratio"))
apart = []
for op in ops:
    a = [r.get(op, (0, 0)) for r in auto]
    e = [r.get(op, (0, 0)) for r in emit]
    ga = statistics.median(g for _, g in a)
    ge = statistics.median(g for _, g in e)
    ratio = ga / ge if ge else float("inf") if ga else 1.0
    print("%-40s %8d %8d %12.1f %12.1f %8.4f" % (op[:40], statistics.median(c for c, _ in a),
                                                statistics.median(c for c, _ in e), ga / 1e3,
                                                ge / 1e3, ratio))
    if ga + ge > 0 and abs(ratio - 1) > 0.01:
        apart.append(op)
total_a = statistics.median(sum(g for _, g in r.values()) for r in auto)
total_e = statistics.median(sum(g for _, g in r.values()) for r in emit)
print("all ops: auto %.1f us, emit_nvtx %.1f us, ratio %.4f" % (total_a / 1e3, total_e / 1e3,
                                                                 total_a / total_e))
print("further apart than 1%%: %s" % (", ".join(apart) if apart else "none"))
for op in apart:
    for name, runs in (("auto", auto), ("emit_nvtx", emit)):
        g = sorted(r.get(op, (0, 0))[1] for r in runs)
        print("  %s %s: runs %s us; spread %.1f%% of the median" %
              (op, name, " ".join("%.1f" % (x / 1e3) for x in g),
               100.0 * (g[-1] - g[0]) / statistics.median(g) if statistics.median(g) else 0.0))
