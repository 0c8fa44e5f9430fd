#!/usr/bin/env bash
# What kprof costs on a zoo workload, measured alone: its counters (issue 32's acceptance: replay
# <= 2x the program alone, sampling <= 1.1x kprof without counters) and its PyTorch op names
# against torch.profiler's (issue 34; docs/benchmarks.md "PyTorch op names at less than
# torch.profiler's cost"). ROUNDS interleaved rounds, each running, one after the other and never
# beside anything else:
#   plain      the command alone
#   default    kprof run -q (for PyTorch: ops and modules from kprof's op observer)
#   sampled    kprof run -q --metrics sampled
#   replay     kprof run -q --metrics replay
#   nosource   kprof run -q with KPROF_ALLOC_SOURCE=0 (no allocating library: what it costs)
#   notorchmem kprof run -q with KPROF_PYTORCH_MEMORY=0 (no PyTorch memory categories)
#   off        kprof run -q --pytorch off: kprof's tracing, no op names
#   offkinds   the same, recording only the floor's kinds (--kinds kernel,memcpy,memset,sync)
#   nvtx       kprof run -q with PyTorch's NVTX mode instead of the observer (KPROF_PYTORCH_OPS=nvtx)
#   window     kprof run -q --capture nvtx:measured: the measured loop alone, what torch.profiler
#              sees (for the op parity: scripts/pytorch_ops_parity_kineto.py DIR/WORKLOAD)
#   profiler   torch.profiler (CPU and CUDA activities) around the measured loop, no kprof; its
#              per-op totals (key_averages) in DIR/WORKLOAD/profiler.rN.ops.json
#   floor      the bare CUPTI agent (scripts/bench/floor_agent.cpp, libkprof_floor_agent.so next
#              to KPROF) with kernels, copies, memsets and syncs only: CUPTI's own cost
#   floorall   the same agent with every kind kprof records (API records, NVTX, memory, ...)
# and per run the whole command's wall seconds and the loop_s the workload prints (its measured
# steps). Then per configuration the medians and their ratios to plain and to default; with
# `profiler` among them, what each adds over plain as a share of what torch.profiler adds (of the
# medians, and paired within each round, the machine's speed moving between rounds).
#   OUT=DIR [DEADLINE=S] [STEPS=N] scripts/zoo_cost.sh KPROF WORKLOAD [ROUNDS=5] [CONFIGS]
# CONFIGS default "plain default sampled replay"; DEADLINE=S: no round starts S seconds or more
# after the script did (a lease's limit); STEPS=N: --steps N to the workload.
# WORKLOAD: a name in examples/zoo/workloads.txt (ZOO= to use another file). Results:
# DIR/WORKLOAD/CONFIG.rN.{out,err,rc,wall}, DIR/WORKLOAD/runs.tsv, DIR/WORKLOAD/summary.txt, and
# the op tables of default and window runs (kprof report --format json) as CONFIG.rN.json.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
[ $# -ge 2 ] || { echo "usage: OUT=DIR $0 KPROF WORKLOAD [ROUNDS] [CONFIGS]" >&2; exit 2; }
KPROF=$1
NAME=$2
ROUNDS=${3:-5}
CONFIGS=${4:-plain default sampled replay}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZOO=${ZOO:-$ROOT/examples/zoo/workloads.txt}
case $KPROF in */*) KPROF=$(cd "$(dirname "$KPROF")" && pwd)/$(basename "$KPROF") ;; esac
[ -x "$KPROF" ] || { echo "$KPROF: not executable" >&2; exit 2; }
FLOOR=$(dirname "$KPROF")/libkprof_floor_agent.so
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer: $ROUNDS" >&2; exit 2; }
cmd=$(awk -F'\t' -v w="$NAME" '$1 == w { print $3 }' "$ZOO")
[ -n "$cmd" ] || { echo "$NAME: not in $ZOO" >&2; exit 2; }
read -r -a argv <<< "$cmd"
argv+=(${STEPS:+--steps "$STEPS"})
mkdir -p "$OUT/$NAME"
D=$(cd "$OUT/$NAME" && pwd)
cd "$ROOT" || exit 2
TSV=$D/runs.tsv
printf 'config\tround\trc\twall_s\tloop_s\n' > "$TSV"
KINDS=kernel,memcpy,memset,sync
run=/tmp/zoo_cost.$$
for ((r = 1; r <= ROUNDS; ++r)); do
  if [ -n "${DEADLINE:-}" ] && ((SECONDS >= DEADLINE)); then
    echo "[cost] $NAME: deadline reached after $((r - 1)) rounds" >&2
    break
  fi
  for c in $CONFIGS; do
    case $c in
      plain) pre=() ;;
      default) pre=("$KPROF" run -q --force -o "$run" --) ;;
      sampled) pre=("$KPROF" run -q --force --metrics sampled -o "$run" --) ;;
      replay) pre=("$KPROF" run -q --force --metrics replay -o "$run" --) ;;
      nosource) pre=(env KPROF_ALLOC_SOURCE=0 "$KPROF" run -q --force -o "$run" --) ;;
      notorchmem) pre=(env KPROF_PYTORCH_MEMORY=0 "$KPROF" run -q --force -o "$run" --) ;;
      off) pre=("$KPROF" run -q --force --pytorch off -o "$run" --) ;;
      offkinds) pre=("$KPROF" run -q --force --pytorch off --kinds "$KINDS" -o "$run" --) ;;
      nvtx) pre=(env KPROF_PYTORCH_OPS=nvtx "$KPROF" run -q --force -o "$run" --) ;;
      window) pre=("$KPROF" run -q --force --capture nvtx:measured -o "$run" --) ;;
      profiler) pre=(env "ZOO_TORCH_PROFILER=$D/profiler.r$r.ops.json") ;;
      floor) pre=(env "CUDA_INJECTION64_PATH=$FLOOR" "KPROF_KINDS=$KINDS") ;;
      floorall) pre=(env "CUDA_INJECTION64_PATH=$FLOOR") ;;
      *) echo "unknown configuration: $c" >&2; exit 2 ;;
    esac
    s=$(date +%s.%N)
    timeout -k 30 "${TIMEOUT:-300}" "${pre[@]}" "${argv[@]}" > "$D/$c.r$r.out" 2> "$D/$c.r$r.err"
    rc=$?
    wall=$(awk -v a="$(date +%s.%N)" -v b="$s" 'BEGIN { printf "%.3f", a - b }')
    loop=$(grep -o 'loop_s=[0-9.]*' "$D/$c.r$r.out" | tail -n 1 | cut -d= -f2)
    echo "$rc" > "$D/$c.r$r.rc"
    echo "$wall" > "$D/$c.r$r.wall"
    printf '%s\t%s\t%s\t%s\t%s\n' "$c" "$r" "$rc" "$wall" "${loop:-}" >> "$TSV"
    if { [ "$c" = default ] || [ "$c" = window ]; } && [ -d "$run" ]; then
      "$KPROF" report "$run" --format json --no-hints > "$D/$c.r$r.json" 2>> "$D/$c.r$r.err"
    fi
    rm -rf "$run"
    echo "[cost] $NAME $c r$r: rc=$rc wall ${wall}s loop_s=${loop:-?}" >&2
  done
done
python3 "$ROOT/scripts/zoo_cost_summary.py" "$TSV" "$NAME" > "$D/summary.txt"
cat "$D/summary.txt"
