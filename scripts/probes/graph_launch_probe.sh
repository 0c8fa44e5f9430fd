#!/usr/bin/env bash
# Runs scripts/probes/graph_launch_probe.cu on a GPU: every variant once in full (full_*.txt, for
# FULL variants), then the timing variants in ROUNDS interleaved rounds, with and without
# PROBE_EVENTS (timing.txt). Output under OUT (default .).
#   OUT=dir FULL="node graph" TIMED="none graph" ROUNDS=3 scripts/probes/graph_launch_probe.sh
set -u
OUT=${OUT:-.}
FULL=${FULL:-"none node graph gtonly quiet quietgt apionly hw devgraph"}
TIMED=${TIMED:-"none apionly registered cbonly eager quiet graph gtonly"}
ROUNDS=${ROUNDS:-3}
cd "$(dirname "$0")"
nvcc -std=c++17 -rdc=true -arch=sm_90 -o "$OUT/glp" graph_launch_probe.cu -lcupti -lcuda -lcudadevrt \
  -L/usr/local/cuda/extras/CUPTI/lib64 -I/usr/local/cuda/extras/CUPTI/include || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
for v in $FULL; do timeout 60 "$OUT/glp" "$v" > "$OUT/full_$v.txt" 2>&1; done
for r in $(seq 1 "$ROUNDS"); do
  for v in $TIMED; do
    timeout 60 "$OUT/glp" "$v" | grep TIMING
    PROBE_EVENTS=1 timeout 60 "$OUT/glp" "$v" | grep TIMING
  done
done > "$OUT/timing.txt" 2>&1
rm "$OUT/glp"
