#!/usr/bin/env bash
# Estimates against fixes (issue 15, docs/hints.md "Estimates against fixes"), the GPU half: for
# every priced rule, its planted workload and the workload's fixed twin (--fixed: the problem
# removed the way the hint's fix says), and for the joint figure the default workload
# (examples/train_mlp.py) and its all-fixed twin.
#   OUT=DIR scripts/hint_savings.sh [BUILD_DIR=build] [ROUNDS=5] [RECORDED=3] [RULES...]
# Per rule, ROUNDS interleaved rounds of (planted, fixed) without a profiler, then RECORDED runs of
# the planted workload under `kprof run` (kept, for the estimates) and one of the fixed twin.
# RULE@LABEL: another workload for the same rule (its own row).
# Writes DIR/savings.tsv (rule, variant, mode, round, wall_s, exit status) and the recordings
# under DIR/rec/RULE/{planted-N,fixed-1}; scripts/hint_savings.py reads both (on any machine) and
# writes the table. Each program prints its timed part as wall_s= (loop_s= for PyTorch).
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
BUILD=${1:-build}
ROUNDS=${2:-5}
RECORDED=${3:-3}
shift $(($# < 3 ? $# : 3))
K=$BUILD/kernels
PY=${PYTHON:-python3}
TSV=$OUT/savings.tsv
mkdir -p "$OUT/rec"
[ -s "$TSV" ] || printf 'rule\tvariant\tmode\tround\twall_s\trc\n' > "$TSV"

# rule | kprof run options | planted command (the fixed twin adds --fixed, except where named)
WORKLOADS=(
  "launch-bound||$K/hint_launch_bound 10000 3"
  "launch-bound@storm||$K/hint_launch_bound 150000 0"
  "sync-readback||$K/hint_sync_readback 20000"
  "excessive-sync||$K/hint_excessive_sync 400"
  "pageable-memcpy||$K/hint_pageable_memcpy 40 64"
  "small-transfers||$K/hint_small_transfers 150"
  "alloc-churn||$K/hint_alloc_churn 300"
  "gpu-idle-gaps||$K/hint_gpu_idle_gaps 60 8"
  "no-copy-compute-overlap||$K/hint_no_overlap 300"
  "underfilled-grid||$K/hint_underfilled_grid 200"
  "fp32-gemm||$K/hint_fp32_gemm 150"
  "memory-bound-chain||$K/hint_memory_bound_chain 300"
  "graph-recapture|--graph-trace graph|$K/graph_replay 100 100 recapture 50"
  "host-work-after-sync||$K/hint_host_after_wait 2000"
  "shape-setup||$K/hint_shape_setup 200 4"
  "joint:readback||$K/hint_launch_bound 5000 0 --readback"
  "joint:train_mlp||$PY examples/train_mlp.py --warmup 3"
  "joint:train_mlp-pytorch-off|--pytorch off|$PY examples/train_mlp.py --warmup 3"
)

wall_of() {  # the timed part a workload printed: wall_s=X or loop_s=X
  sed -nE 's/.*(wall_s|loop_s)=([0-9.]+).*/\2/p' "$1" | tail -n 1
}

fixed_cmd() {  # the fixed twin of a planted command line
  case $1 in
    *graph_replay*) echo "${1/recapture/steady}" ;;
    *) echo "$1 --fixed" ;;
  esac
}

run_plain() {  # rule variant round cmd...
  local rule=$1 variant=$2 round=$3 log
  shift 3
  log=$(mktemp)
  timeout 120 "$@" > "$log" 2>&1
  local rc=$?
  printf '%s\t%s\tplain\t%s\t%s\t%s\n' "$rule" "$variant" "$round" "$(wall_of "$log")" "$rc" >> "$TSV"
  [ "$rc" = 0 ] || { echo "== $rule $variant plain $round rc=$rc"; tail -n 5 "$log"; }
  rm -f "$log"
}

run_kprof() {  # rule variant round opts cmd...
  local rule=$1 variant=$2 round=$3 opts=$4 dir
  shift 4
  dir=$OUT/rec/${rule//:/_}/$variant-$round
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  # shellcheck disable=SC2086 # opts: kprof run options, word-split on purpose
  timeout 180 "$BUILD/kprof" run --quiet $opts -o "$dir" -- "$@" > "$dir.log" 2>&1
  local rc=$?
  printf '%s\t%s\tkprof\t%s\t%s\t%s\n' "$rule" "$variant" "$round" "$(wall_of "$dir.log")" "$rc" >> "$TSV"
  [ "$rc" = 0 ] || { echo "== $rule $variant kprof $round rc=$rc"; tail -n 5 "$dir.log"; }
  mkdir -p "$dir" && mv "$dir.log" "$dir/program.log"
}

for w in "${WORKLOADS[@]}"; do
  IFS='|' read -r rule opts cmd <<< "$w"
  if (($#)) && [[ " $* " != *" $rule "* ]]; then continue; fi
  fixed=$(fixed_cmd "$cmd")
  start=$SECONDS
  if [[ $rule != *pytorch-off ]]; then  # the plain runs of train_mlp are taken once
    # WARMUP (default 1) unrecorded rounds first: a fresh machine's first runs fill caches
    # (NVRTC's, cuBLAS's, the page cache) that the measured rounds would otherwise pay unevenly.
    for _ in $(seq "${WARMUP:-1}"); do
      # shellcheck disable=SC2086
      timeout 120 $cmd > /dev/null 2>&1
      # shellcheck disable=SC2086
      timeout 120 $fixed > /dev/null 2>&1
    done
    for r in $(seq "$ROUNDS"); do
      # shellcheck disable=SC2086
      run_plain "$rule" planted "$r" $cmd
      # shellcheck disable=SC2086
      run_plain "$rule" fixed "$r" $fixed
    done
  fi
  for r in $(seq "$RECORDED"); do
    # shellcheck disable=SC2086
    run_kprof "$rule" planted "$r" "$opts" $cmd
  done
  # shellcheck disable=SC2086
  run_kprof "$rule" fixed 1 "$opts" $fixed
  echo "$rule: $((SECONDS - start)) s"
done
