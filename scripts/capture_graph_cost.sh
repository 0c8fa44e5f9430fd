#!/usr/bin/env bash
# What a CUDA graph launch costs the program's thread with kprof waiting for a capture window
# (docs/benchmarks.md, "Capture windows and CUDA graphs"): kernels/graph_replay (a 1000-node
# graph launched 100 times, the median host time of one cudaGraphLaunch) plain, under kprof with
# a window that never opens (--delay 600, --capture nvtx:never) and under kprof recording
# everything, ROUNDS interleaved rounds. Needs a GPU.
#   scripts/capture_graph_cost.sh [BUILD_DIR=build] [ROUNDS=3]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${2:-3}
GR=("$BUILD/kernels/graph_replay" 1000 100)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
us() { grep -o 'host_launch_us=[0-9.]*' | cut -d= -f2; }
printf "round\tplain\tdelay600\tnvtx_never\twhole\n"
for r in $(seq 1 "$ROUNDS"); do
  plain=$("${GR[@]}" | us)
  delay=$("$BUILD/kprof" run -o "$TMP/d$r" --quiet --delay 600 -- "${GR[@]}" 2>/dev/null | us)
  never=$("$BUILD/kprof" run -o "$TMP/n$r" --quiet --capture nvtx:never -- "${GR[@]}" 2>/dev/null | us)
  whole=$("$BUILD/kprof" run -o "$TMP/w$r" --quiet -- "${GR[@]}" 2>/dev/null | us)
  printf "%s\t%s\t%s\t%s\t%s\n" "$r" "$plain" "$delay" "$never" "$whole"
done
