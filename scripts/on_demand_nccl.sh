#!/usr/bin/env bash
# Issue 35 on two GPUs with NCCL (docs/capture.md "On demand", "Dormant"): a 2-rank DDP job
# (tests/gpu/scripts/ddp_steps.py, DDP_BACKEND=nccl, rank R on cuda:R). Needs two GPUs and
# PyTorch; exit 77 without them. Each check a line "PASS|FAIL what" in OUT/summary.txt:
#  1. --on-demand, kprof capture --step-range step --steps 3, twice: in each window both ranks
#     hold the same 3 steps ("idx N") and the same number of NCCL kernels (one all-reduce a step);
#  2. --capture nvtx:step --capture-count 3 (dormant until the push): each rank 3 windows holding
#     steps 0, 1 and 2, and 3 NCCL kernels.
#   scripts/on_demand_nccl.sh OUT [BUILD=build]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: on_demand_nccl.sh OUT [BUILD]}
BUILD=${2:-build}
. scripts/on_demand_lib.sh
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "fewer than two GPUs: skipped"; exit 77; }
python3 -c "import torch; assert torch.cuda.device_count() >= 2" 2>/dev/null ||
  { echo "no PyTorch with two GPUs: skipped"; exit 77; }
HANG_LOG="$SUM"
: > "$SUM"
nccl_kernels() {  # nccl_kernels FILE WINDOW: calls of kernels whose name starts with nccl
  "$K" report "$1" --window "$2" --by kernel --format csv --top 0 --no-hints 2>/dev/null |
    python3 -c 'import csv, sys
print(sum(int(r[1]) for r in csv.reader(sys.stdin) if r and r[0].startswith("nccl")))'
}
export DDP_BACKEND=nccl

# 1. On demand, two windows.
R="$OUT/od"
start_ddp "$R" 4000 "$OUT/od_run.log"
for w in 1 2; do
  "$K" capture "$R" --timeout 60 --step-range step --steps 3 > "$OUT/od_capture$w.txt" 2>&1
  echo "capture $w exit $?" >> "$OUT/od_capture$w.txt"
  sleep 1
done
finish $run od
rc=$?
cat "$OUT"/od_capture*.txt
check od-run-exit "$rc" "kprof run exited $rc"
for w in 1 2; do
  ids=(); nk=()
  for f in "$R"/kprof.rank*.kprof; do ids+=("$(idx_ranges "$f" $w)"); nk+=("$(nccl_kernels "$f" $w)"); done
  check "od-window$w-same-steps" "$([ ${#ids[@]} = 2 ] && [ "${ids[0]}" = "${ids[1]}" ] &&
    [ "$(echo "${ids[0]}" | grep -o idx | wc -l)" = 3 ] && [ "${nk[0]:-0}" = "${nk[1]:-x}" ] &&
    [ "${nk[0]:-0}" -gt 0 ]; echo $?)" "rank0: ${ids[0]:-} nccl ${nk[0]:-}; rank1: ${ids[1]:-} nccl ${nk[1]:-}"
done

# 2. Dormant --capture nvtx:step.
R2="$OUT/trigger"
rm -rf "$R2"
timeout 300 "$K" run -o "$R2" --quiet --calibrate off --pytorch off --capture nvtx:step \
  --capture-count 3 -- python3 tests/gpu/scripts/ddp_steps.py 60 > "$OUT/trigger_run.log" 2>&1
rc=$?
detail="exit $rc;"
bad=$rc
for f in "$R2"/kprof.rank*.kprof; do
  for w in 1 2 3; do
    id=$(idx_ranges "$f" $w); nk=$(nccl_kernels "$f" $w)
    detail="$detail $(basename "$f" .kprof | cut -d. -f2) w$w: ${id}nccl $nk;"
    { [ "$id" = "idx $((w - 1)) " ] && [ "$nk" -gt 0 ]; } || bad=1
  done
done
[ "$(ls "$R2"/kprof.rank*.kprof 2>/dev/null | wc -l)" = 2 ] || bad=1
check trigger-nccl "$([ "$bad" = 0 ]; echo $?)" "$detail"
echo "failures: $fails" | tee -a "$SUM"
[ "$fails" = 0 ]
