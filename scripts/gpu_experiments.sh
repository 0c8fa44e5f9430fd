#!/usr/bin/env bash
# Investigations run on the GPU machine by scripts/gpu_session.sh (step "experiments").
# Current: (1) a heap corruption at exit of examples/train_mlp.py under kprof, bisected by
# activity kinds; (2) peak RSS of the 1M-kernel storm against CUPTI's device buffer size.
set -uo pipefail
BUILD=${1:-build}
K=$BUILD/kprof
echo "== train_mlp plain"
python3 examples/train_mlp.py; echo "rc=$?"
for kinds in all kernel,runtime kernel,runtime,nvtx kernel,runtime,memory kernel,runtime,memcpy,memset,sync,driver,overhead; do
  echo "== train_mlp kinds=$kinds"
  rm -rf /tmp/exp-mlp
  $K run --quiet --kinds "$kinds" -o /tmp/exp-mlp -- python3 examples/train_mlp.py 2>&1 | tail -n 3
  echo "rc=${PIPESTATUS[0]}"
done
echo "== train_mlp all, MALLOC_CHECK_=3"
rm -rf /tmp/exp-mlp
MALLOC_CHECK_=3 $K run --quiet -o /tmp/exp-mlp -- python3 examples/train_mlp.py 2>&1 | tail -n 3
echo "== storm RSS by device buffer MB (kprof) and host buffer MB"
for cfg in "16 4" "8 4" "4 4" "4 2" "2 2"; do
  set -- $cfg
  rm -rf /tmp/exp-storm
  line=$(KPROF_DEVICE_BUFFER_MB=$1 KPROF_BUFFER_MB=$2 $K run --quiet -o /tmp/exp-storm -- \
    "$BUILD/kernels/kernel_storm" 1000000 | grep wall_s)
  drops=$($K report /tmp/exp-storm --format json | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["kernels"], s["dropped_records"], s["missing_timestamps"])')
  echo "device_mb=$1 host_mb=$2 $line kernels/dropped/missing=$drops"
done
for mb in 16 4; do
  line=$(KPROF_DEVICE_BUFFER_MB=$mb CUDA_INJECTION64_PATH=$(realpath "$BUILD/libkprof_floor_agent.so") \
    "$BUILD/kernels/kernel_storm" 1000000 2>&1 | tr '\n' ' ')
  echo "floor device_mb=$mb $line"
done
"$BUILD/kernels/kernel_storm" 1000000
