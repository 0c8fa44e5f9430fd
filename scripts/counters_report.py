#!/usr/bin/env python3
"""Tables from scripts/counters_bench.sh's output folder (docs/benchmarks.md, "Hardware counters").

    scripts/counters_report.py DIR

cost: DIR/cost.tsv (workload, variant, round, wall_s, rc[, loop_s]): the median wall time of
      each workload and variant over its rounds, with each run's, and its ratio to plain, to kprof
      without counters and to kprof --pytorch off; then the same of the loop's own time where
      the workload printed one; runs that failed are left out and counted.
ncu:  DIR/cc-replay.json (`kprof report --by kernel --format json` of the replayed run) against
      DIR/ncu.csv (`ncu --csv --page raw`): per kernel name, kprof's and Nsight Compute's
      throughputs (the first launch of each name in ncu's list), and the largest gap in points;
      then DIR/cc-sampled.json (PM sampling, GPU-wide samples inside each kernel) against the
      same ncu rows, metric by metric as sampling measures them (SAMPLED_COLUMNS).
program: DIR/program.tsv (scripts/capture_bench.sh), as cost, with the program's own wall time.
Prints Markdown; a part whose files are missing is skipped.
"""
import csv
import json
import os
import statistics
import sys

NCU_COLUMNS = [  # (kprof's JSON key, ncu's metric, column title)
    ("sm_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM %"),
    ("mem_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory %"),
    ("dram_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM %"),
    ("l2_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 %"),
    ("tensor_pct", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
     "Tensor %"),
]
SAMPLED_COLUMNS = [  # what PM sampling measures (src/format/metrics.cpp) and ncu's counterpart
    ("sm_pct", "sm__inst_executed.avg.pct_of_peak_sustained_elapsed", "SM inst %"),
    ("dram_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM %"),
    ("tensor_pct", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "Tensor %"),
    ("l2_pct", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed", "L2 sectors %"),
    ("occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "Occupancy %"),
]


def cost_table(path, column="wall_s", what="median wall s", heading=None):
    runs, failed = {}, 0
    with open(path) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["rc"] != "0" or (column == "wall_s" and not row["wall_s"]):
                failed += 1
                continue
            if row.get(column):  # a workload that prints no loop time has none
                runs.setdefault(row["workload"], {}).setdefault(row["variant"], []).append(
                    float(row[column]))
    if column == "wall_s" and failed:
        print(f"{failed} run(s) failed and are left out.\n")
    if not runs:
        return
    if heading:
        print(heading + "\n")
    print(f"| workload | variant | runs | {what} | x plain | x kprof | x kprof-off |")
    print("|---|---|---|---|---|---|---|")
    for workload, variants in runs.items():
        med = {v: statistics.median(w) for v, w in variants.items()}
        for variant, walls in variants.items():
            m = med[variant]
            cells = []
            for base in ("plain", "kprof", "kprof-off"):
                ok = base in med and variant != base and (base == "plain" or variant != "plain")
                cells.append(f"{m / med[base]:.3f}" if ok else "-")
            each = " ".join(f"{w:.2f}" for w in walls)
            print(f"| {workload} | {variant} | {len(walls)} ({each}) | {m:.3f} | " +
                  " | ".join(cells) + " |")
    print()


def base_name(name):
    """A kernel's function name without its namespaces, template arguments and parameters, as
    kprof (`void at::native::(anonymous namespace)::f<8, c10::BFloat16>(...)`) and ncu
    (`void unnamed>::f<8, BFloat16>(...)`) both write it: `f`."""
    name = name.replace("(anonymous namespace)", "anon").removeprefix("void ")
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=len(name))
    return name[:cut].rsplit("::", 1)[-1].strip()


def ncu_table(json_path, csv_path, columns):
    with open(json_path) as f:
        kprof = {k["name"]: k for k in json.load(f)["counters"]["kernels"]}
    with open(csv_path) as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    head, data = rows[0], rows[2:]  # the second row holds the units
    name_at = head.index("Kernel Name")
    ncu = {}
    for row in data:
        ncu.setdefault(row[name_at], row)  # the first launch of each name
    print("| kernel | class | " + " | ".join(f"{t} kprof / ncu" for _, _, t in columns) +
          " | largest gap (pp) |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    for name, k in kprof.items():
        # ncu shortens names (`unnamed>::`, no `c10::`): the function's own name, where one row
        # has it; else the longest prefix before the parameters.
        same = [r for n, r in ncu.items() if base_name(n) == base_name(name)]
        row = same[0] if len(same) == 1 else next(
            (r for n, r in ncu.items() if base_name(n) == base_name(name) and
             n.startswith(name.split("(")[0].rstrip("…"))), None)
        if row is None:
            continue
        cells, gap = [], 0.0
        for key, metric, _ in columns:
            ours = k.get(key)
            theirs = float(row[head.index(metric)]) if metric in head else None
            if ours is None or theirs is None:
                cells.append("-")
                continue
            gap = max(gap, abs(ours - theirs))
            cells.append(f"{ours:.1f} / {theirs:.1f}")
        print(f"| `{name[:40]}` | {k.get('bound', '')} | " + " | ".join(cells) + f" | {gap:.2f} |")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    if os.path.exists(os.path.join(out, "cost.tsv")):
        cost_table(os.path.join(out, "cost.tsv"))
        cost_table(os.path.join(out, "cost.tsv"), "loop_s", "median loop s",
                   "The loop's own time (loop_s, where the workload prints it):")
    if os.path.exists(os.path.join(out, "program.tsv")):  # scripts/capture_bench.sh
        print("The program's own wall time:\n")
        cost_table(os.path.join(out, "program.tsv"))
    replay, ncu = os.path.join(out, "cc-replay.json"), os.path.join(out, "ncu.csv")
    if os.path.exists(replay) and os.path.exists(ncu):
        print("Replay against ncu:\n")
        ncu_table(replay, ncu, NCU_COLUMNS)
        print()
    sampled = os.path.join(out, "cc-sampled.json")
    if os.path.exists(sampled) and os.path.exists(ncu):
        print("PM sampling against ncu:\n")
        ncu_table(sampled, ncu, SAMPLED_COLUMNS)


if __name__ == "__main__":
    main()
