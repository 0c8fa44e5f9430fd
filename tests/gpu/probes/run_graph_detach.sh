#!/usr/bin/env bash
# Builds tests/gpu/probes/cupti_graph_detach.cu and runs every MODE x DETACH in its own process,
# each ROUNDS times (default 3): which CUPTI state makes a graph's launch fault after detaching,
# and what a launch costs then (docs/capture.md "On demand").
#   [MODES="none kernel ..."] [DETACHES="finalize soft"] \
#   tests/gpu/probes/run_graph_detach.sh OUT_DIR [ROUNDS]
set -uo pipefail
OUT=${1:?OUT_DIR}
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$OUT"
# (CUPTI lies in lib/ or extras/CUPTI/lib64, its header in include/ or extras/CUPTI/include)
LIB=$(dirname "$(find -L "$CUDA/" -name libcupti.so -print -quit)")
INC=$(dirname "$(find -L "$CUDA/" -name cupti.h -print -quit)")
nvcc -O2 -std=c++17 -o "$OUT/cupti_graph_detach" "$HERE/cupti_graph_detach.cu" \
  -I"$INC" -L"$LIB" -lcupti -lcuda -Xlinker -rpath -Xlinker "$LIB" || exit 1
for r in $(seq "$ROUNDS"); do
  for mode in ${MODES:-none api kernel graphtrace resource all}; do
    for detach in ${DETACHES:-finalize soft finalize_upload}; do
      timeout 60 "$OUT/cupti_graph_detach" "$mode" "$detach" 2>&1 | tail -1
      echo "  rc=${PIPESTATUS[0]}"
    done
  done
done | tee "$OUT/graph_detach.txt"
