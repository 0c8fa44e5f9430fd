#!/usr/bin/env bash
# CUDA-graph launch cost (issue 10): kernels/graph_replay NODES LAUNCHES (one graph of NODES tiny
# kernels, launched LAUNCHES times; it prints the median host time of one cudaGraphLaunch and the
# median GPU time of one launch, from events) without a profiler, under kprof in both graph modes
# and under nsys in both, ROUNDS interleaved rounds. Then the same for PyTorch's
# torch.cuda.graph replay (tests/gpu/scripts/torch_graph.py). Needs a GPU.
#   scripts/bench_graphs.sh [BUILD=build] [ROUNDS=5] [NODES=1000] [LAUNCHES=1000] [WORK=/tmp/kprof-bench-graphs]
# Prints one line per run ("TOOL ROUND graph_replay: ... host_launch_us=H gpu_launch_us=G") and
# the medians per tool with their ratios to the plain runs.
set -uo pipefail
BUILD=${1:-build}
ROUNDS=${2:-5}
NODES=${3:-1000}
LAUNCHES=${4:-1000}
WORK=${5:-/tmp/kprof-bench-graphs}
cd "$(dirname "$0")/.."
mkdir -p "$WORK"
NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -n 1)
APP=("$BUILD/kernels/graph_replay" "$NODES" "$LAUNCHES")
TORCH=(python3 tests/gpu/scripts/torch_graph.py 200)
LOG="$WORK/runs.txt"
: > "$LOG"
run_all() {  # $1 = label prefix, rest = program
  local pre=$1
  shift
  local r
  for r in $(seq 1 "$ROUNDS"); do
    "$@" | sed "s/^/${pre}plain $r /" >> "$LOG"
    for mode in graph node; do
      "$BUILD/kprof" run --quiet --force --graph-trace $mode -o "$WORK/kprof-$mode" -- "$@" \
        | sed "s/^/${pre}kprof-$mode $r /" >> "$LOG"
      if [ -n "$NSYS" ]; then
        timeout 300 "$NSYS" profile -t cuda,nvtx --cuda-graph-trace=$mode --sample=none \
          --cpuctxsw=none -o "$WORK/nsys-$mode" -f true "$@" 2>/dev/null \
          | grep -E "^(graph_replay|torch_graph):" | sed "s/^/${pre}nsys-$mode $r /" >> "$LOG"
      fi
    done
  done
}
run_all "" "${APP[@]}"
run_all "torch-" "${TORCH[@]}"
cat "$LOG"
python3 - "$LOG" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool = line.split()[0]
    for key in ("host_launch_us", "gpu_launch_us", "replay_us"):
        m = re.search(key + r"=([0-9.]+)", line)
        if m:
            rows.setdefault((tool, key), []).append(float(m.group(1)))
for (tool, key), v in sorted(rows.items()):
    base_tool = "torch-plain" if tool.startswith("torch-") else "plain"
    base = statistics.median(rows.get((base_tool, key), [float("nan")]))
    med = statistics.median(v)
    print(f"median {tool:18s} {key:15s} {med:10.2f}  x{med / base:6.2f}  runs={len(v)} "
          f"min={min(v):.2f} max={max(v):.2f}")
PY
