#!/usr/bin/env bash
# Records the GPU fixtures used by the CPU tests (tests/fixtures/gpu/<name>/) and the bundled
# default run (examples/default-run/). Needs a GPU; run from the repository root after a build:
#   scripts/record_fixtures.sh [BUILD_DIR=build] [DEST=tests/fixtures/gpu] [graphs]
# With "graphs", only the CUDA-graph fixtures (issue 10) are recorded.
# Each fixture is a kprof run directory; the workloads are the kernels/ programs with small,
# fixed arguments so the files stay small. Re-running replaces them.
set -euo pipefail
BUILD=${1:-build}
DEST=${2:-tests/fixtures/gpu}
PY=${PYTHON:-python3}
mkdir -p "$DEST"
record() {  # name program args...
  local name=$1
  shift
  rm -rf "${DEST:?}/$name"
  # shellcheck disable=SC2086 # RECORD_OPTS: kprof run options, word-split on purpose
  if "$BUILD/kprof" run --quiet ${RECORD_OPTS:-} -o "$DEST/$name" -- "$@" > "$DEST/$name.log" 2>&1; then
    echo "recorded $name"
  else
    echo "recorded $name (program exit status $?)"
  fi
  mv "$DEST/$name.log" "$DEST/$name/program.log"
}
K="$BUILD/kernels"
# CUDA graphs: 100-node graph launched 20 times, 50 eager kernels after, in both modes; the same
# graph captured and instantiated again before every launch; the other ways to launch a graph;
# PyTorch's torch.cuda.graph.
graphs() {
  RECORD_OPTS="--graph-trace graph" record graph_replay_graph "$K/graph_replay" 100 20 steady 50
  # The same by an agent of format 1.2 (no clone records in graph mode), beside the 1.1 one.
  RECORD_OPTS="--graph-trace graph" record graph_replay_graph_f12 "$K/graph_replay" 100 20 steady 50
  RECORD_OPTS="--graph-trace node" record graph_replay_node "$K/graph_replay" 100 20 steady 50
  RECORD_OPTS="--graph-trace graph" record graph_recapture "$K/graph_replay" 100 20 recapture 50
  # cuGraphLaunch, a graph launched from the device, a conditional WHILE node.
  for mode in graph node; do
    RECORD_OPTS="--graph-trace $mode" record graph_kinds_$mode "$K/graph_kinds" 3 5
  done
  if "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    for mode in graph node; do
      RECORD_OPTS="--graph-trace $mode" record torch_graph_$mode "$PY" tests/gpu/scripts/torch_graph.py 20
      RECORD_OPTS="--graph-trace $mode" record torch_compile_$mode "$PY" tests/gpu/scripts/torch_graph.py 50 --compile
    done
  fi
}
if [ "${3:-}" = graphs ]; then
  graphs
  du -sh "$DEST"/*graph* | sort -h
  exit 0
fi
graphs
record vector_add "$K/vector_add" 1048576
record memcpy_kinds "$K/memcpy_kinds" 8388608
record memset "$K/memset"
record sync_kinds "$K/sync_kinds"
record nvtx_threads "$K/nvtx_threads" 3
RECORD_OPTS="--graph-trace node" record graph_launch "$K/graph_launch" 5
record crash_abort "$K/crash" abort 50
record storm_2k "$K/kernel_storm" 2000
# The planted-hint workloads, with fewer iterations than their defaults where the recording would
# otherwise be megabytes (the planted bottleneck still dominates; the CPU tests check that).
for prog in "$K"/hint_* "$K"/healthy_gemm; do
  [ -x "$prog" ] || continue
  name=$(basename "$prog")
  case $name in
    hint_launch_bound) args=(5000) ;;
    hint_small_transfers) args=(100) ;;
    hint_memory_bound_chain) args=(300) ;;
    hint_excessive_sync) args=(400) ;;
    hint_alloc_churn) args=(300) ;;
    hint_host_after_wait) args=(300) ;;
    *) args=() ;;
  esac
  record "$name" "$prog" "${args[@]}"
done
record train_step "$K/train_step" 20 0
# Issue 37: a planted out-of-memory failure (exits 3): the failed call and its owners.
record memory_oom_exit "$K/oom_planted" exit
# Issue 15: cuDNN's attention planning per new key length (shape-setup), with an unprofiled run
# of the same script beside it (plain.txt: each length's first call against the others).
if "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  record pytorch_decode_shapes "$PY" tests/gpu/scripts/decode_shapes.py 64 4
  # Issue 37: a step's FP32 logits kept into the next step (held-across-steps, step-end view).
  record memory_torch_hold "$PY" tests/gpu/scripts/memory_train.py --steps 6 --hold
  "$PY" tests/gpu/scripts/decode_shapes.py 64 4 > "$DEST/pytorch_decode_shapes/plain.txt" 2>&1
fi
# kprof diff on real runs: 5 runs of train_step, 5 more, and 5 with attention_like 10% slower.
for side in base same slow10; do
  rm -rf "${DEST:?}/diff/$side"
  slow=0
  [ "$side" = slow10 ] && slow=10
  "$BUILD/kprof" run --quiet --repeat 5 -o "$DEST/diff/$side" -- "$K/train_step" 50 "$slow" >/dev/null
done
if "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  record torch_nvtx "$PY" tests/gpu/scripts/torch_nvtx.py
fi
du -sh "$DEST"/* | sort -h | tail -n 30
