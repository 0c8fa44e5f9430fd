#!/usr/bin/env bash
# The host time of a 1000-node cudaGraphLaunch (kernels/graph_replay 1000 100) while kprof waits
# for a window, ROUNDS interleaved rounds of plain / kprof run --on-demand (never asked) / kprof
# run --capture nvtx:never, and the GPU time of a launch plain and under nvtx:never: OUT/graph.tsv
# (docs/benchmarks.md "Dormant --capture nvtx:NAME"). Needs a GPU; exit 77 without one.
#   scripts/dormant_graph_rounds.sh OUT [BUILD=build] [ROUNDS=15]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: dormant_graph_rounds.sh OUT [BUILD] [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-15}
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mkdir -p "$OUT"
K="$BUILD/kprof"
G=("$BUILD/kernels/graph_replay" 1000 100)
us() { grep -o 'host_launch_us=[0-9.]*' | cut -d= -f2; }
gpu() { grep -o 'gpu_launch_us=[0-9.]*' | cut -d= -f2; }
printf "round\tplain_us\ton_demand_us\tnvtx_never_us\tplain_gpu_us\tnvtx_never_gpu_us\n" > "$OUT/graph.tsv"
for r in $(seq 1 "$ROUNDS"); do
  a=$("${G[@]}")
  b=$("$K" run -o "$OUT/runs/od$r" --force --quiet --calibrate off --on-demand -- "${G[@]}" 2>/dev/null)
  c=$("$K" run -o "$OUT/runs/nn$r" --force --quiet --calibrate off --capture nvtx:never -- "${G[@]}" 2>/dev/null)
  printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$(echo "$a" | us)" "$(echo "$b" | us)" "$(echo "$c" | us)" \
    "$(echo "$a" | gpu)" "$(echo "$c" | gpu)" >> "$OUT/graph.tsv"
done
python3 - "$OUT/graph.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
for i, name in enumerate(rows[0][1:], 1):
    v = [float(r[i]) for r in rows[1:] if r[i]]
    if v: print(f"{name}: median {statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
PY
