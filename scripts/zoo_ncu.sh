#!/usr/bin/env bash
# kprof's counters against Nsight Compute on zoo kernels of different character (issue 32's
# acceptance: within 3 points of `ncu --section SpeedOfLight --clock-control none`). For each
# (workload, kernel) pair below: `kprof run --metrics replay --metrics-kernels REGEX
# --metrics-launches 1` and `ncu --clock-control none --kernel-name regex:REGEX --launch-count 1`
# with the metrics kprof replays, each on the first launch of that kernel; then
# scripts/counters_report.py's comparison table per pair.
#   OUT=DIR scripts/zoo_ncu.sh [BUILD=build] [PAIRS_REGEX=.]
# Runs on a GPU machine with ncu (NCU=path to override; NCU_ARGS=extra ncu options, such as
# "--cache-control none"); each pair takes two runs of its workload.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
BUILD=${1:-build}
ONLY=${2:-.}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)}
[ -n "$NCU" ] || { echo "ncu not found" >&2; exit 2; }
# The metrics kprof replays, as ncu names them.
# shellcheck source=scripts/ncu_metrics.sh
. scripts/ncu_metrics.sh
METRICS=$NCU_REPLAY_METRICS

# name|kernel regex (ECMAScript for kprof, ncu's regex: for ncu)|command (few steps: one launch
# of each kernel is measured)
PAIRS=(
  "cupy_sgemm|gemm|python3 examples/zoo/cupy_kernels.py --steps 2 --warmup 1"
  "cupy_axpby|axpby|python3 examples/zoo/cupy_kernels.py --steps 2 --warmup 1"
  "cupy_sum|cupy_sum|python3 examples/zoo/cupy_kernels.py --steps 2 --warmup 1"
  "cupy_stencil|zoo_stencil5|python3 examples/zoo/cupy_kernels.py --steps 2 --warmup 1"
  "triton_matmul|matmul_kernel|python3 examples/zoo/triton_kernels.py --steps 2 --warmup 1"
  "triton_layernorm|layernorm_kernel|python3 examples/zoo/triton_kernels.py --steps 2 --warmup 1"
  "nanogpt_softmax|cunn_SoftMaxForward|python3 examples/zoo/nanogpt_train.py --steps 2 --warmup 1"
  "llama_nvjet|nvjet|python3 examples/zoo/llama_train.py --steps 2 --warmup 1"
)

for pair in "${PAIRS[@]}"; do
  IFS='|' read -r name regex cmd <<< "$pair"
  [[ $name =~ $ONLY ]] || continue
  read -r -a argv <<< "$cmd"
  echo "== $name" >&2
  d=$OUT/$name
  mkdir -p "$d"
  "$BUILD/kprof" run --quiet --force --metrics replay --metrics-kernels "$regex" \
    --metrics-launches 1 -o "$d/replay" -- "${argv[@]}" > "$d/replay.log" 2>&1
  "$BUILD/kprof" report "$d/replay" --by kernel --format json > "$d/cc-replay.json" 2>> "$d/replay.log"
  # shellcheck disable=SC2086  # NCU_ARGS: extra ncu options, split on blanks
  "$NCU" --clock-control none ${NCU_ARGS:-} --csv --page raw --metrics "$METRICS" \
    --kernel-name "regex:$regex" --launch-count 1 "${argv[@]}" > "$d/ncu.csv" 2> "$d/ncu.log"
  python3 scripts/counters_report.py "$d" > "$d/table.md" 2>> "$d/replay.log"
  cat "$d/table.md"
done
