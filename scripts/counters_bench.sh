#!/usr/bin/env bash
# Hardware counters on the GPU (issue 12, docs/counters.md, docs/benchmarks.md "Hardware
# counters"): kprof's replayed counters against Nsight Compute on the same kernels, PM sampling
# on them, and what each mode costs.
#   OUT=DIR scripts/counters_bench.sh [BUILD_DIR=build] [ROUNDS=5] [PHASES="ncu cost"]
# ncu:  kernels/counter_characters 1 under `kprof run --metrics replay` (every kernel, one
#       launch each) and under `ncu --clock-control none` with the same metric names (kprof does
#       not lock clocks either); DIR/cc-replay.json and DIR/ncu.csv, compared by
#       scripts/counters_report.py DIR. Also --metrics sampled (DIR/cc-sampled.json).
# cost: ROUNDS interleaved rounds of each workload (kernels/train_step TRAIN_STEPS=20000 and
#       examples/train_mlp.py --steps MLP_STEPS=800) plain, under `kprof run`, `--metrics
#       sampled` and `--metrics replay` (top 10): DIR/cost.tsv (workload, variant, round, wall_s
#       of the whole command, exit status) and each counted run's report; ONLY="train_step"
#       and VARIANTS="plain sampled" narrow it (also sampled-base: BASE_BUILD's kprof and
#       agent; sampled-noeval: KPROF_COUNTERS_EVALUATE=0; sampled-noprep: KPROF_PM_PREPARE=0)
#       (DIR/cost-WORKLOAD-VARIANT-ROUND.json); medians by scripts/counters_report.py DIR.
#       kprof-off and sampled-off: the same with --pytorch off (no op names: what tracing and
#       sampling cost without PyTorch's own NVTX mode). A round 0 of every variant runs first and
#       is not counted (WARMUP=0: none): it fills the page cache with Python's and torch's files,
#       whose first reads made the first counted runs slower. The loop's own time, where the
#       workload prints one (loop_s=, examples/train_mlp.py), is the TSV's loop_s column.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
BUILD=${1:-build}
ROUNDS=${2:-5}
PHASES=${3:-ncu cost}
K=$BUILD/kernels
PY=${PYTHON:-python3}
mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)}
# The metrics kprof replays (scripts/ncu_metrics.sh), and ncu's counterparts of those PM
# sampling takes (SampledMetrics; scripts/counters_report.py's SAMPLED_COLUMNS), for ncu.
# shellcheck source=scripts/ncu_metrics.sh
. "$(dirname "$0")/ncu_metrics.sh"
METRICS=$NCU_REPLAY_METRICS,sm__inst_executed.avg.pct_of_peak_sustained_elapsed,\
lts__t_sectors.avg.pct_of_peak_sustained_elapsed

now() { date +%s.%N; }

if [[ " $PHASES " == *" ncu "* ]]; then
  "$BUILD/kprof" run --quiet --force --metrics replay --metrics-kernels . --metrics-launches 1 \
    -o "$OUT/cc-replay" -- "$K/counter_characters" 1 > "$OUT/cc-replay.log" 2>&1
  "$BUILD/kprof" report "$OUT/cc-replay" --by kernel --format json > "$OUT/cc-replay.json"
  "$BUILD/kprof" report "$OUT/cc-replay" --by kernel > "$OUT/cc-replay.txt"
  "$BUILD/kprof" run --quiet --force --metrics sampled --metrics-interval 100 \
    -o "$OUT/cc-sampled" -- "$K/counter_characters" 3 > "$OUT/cc-sampled.log" 2>&1
  "$BUILD/kprof" report "$OUT/cc-sampled" --by kernel --format json > "$OUT/cc-sampled.json"
  "$BUILD/kprof" report "$OUT/cc-sampled" --by kernel > "$OUT/cc-sampled.txt"
  if [ -n "$NCU" ]; then
    "$NCU" --clock-control none --csv --page raw --metrics "$METRICS" \
      "$K/counter_characters" 1 > "$OUT/ncu.csv" 2> "$OUT/ncu.log"
  else
    echo "ncu not found" > "$OUT/ncu.log"
  fi
fi

if [[ " $PHASES " == *" cost "* ]]; then
  TSV=$OUT/cost.tsv
  printf 'workload\tvariant\tround\twall_s\trc\tloop_s\n' > "$TSV"
  WORKLOADS=(
    "train_step|$K/train_step ${TRAIN_STEPS:-20000}"
    "train_mlp|$PY examples/train_mlp.py --steps ${MLP_STEPS:-800} --warmup 3"
  )
  first_round=1
  [ "${WARMUP:-1}" = 0 ] || first_round=0
  for round in $(seq "$first_round" "$ROUNDS"); do
    for w in "${WORKLOADS[@]}"; do
      name=${w%%|*}
      cmd=${w#*|}
      [[ " ${ONLY:-train_step train_mlp} " == *" $name "* ]] || continue
      for variant in ${VARIANTS:-plain kprof sampled replay}; do
        case $variant in
          plain) pre=() ;;
          kprof) pre=("$BUILD/kprof" run --quiet --force -o "$OUT/cost-run") ;;
          sampled) pre=("$BUILD/kprof" run --quiet --force --metrics sampled -o "$OUT/cost-run") ;;
          kprof-off) pre=("$BUILD/kprof" run --quiet --force --pytorch off -o "$OUT/cost-run") ;;
          sampled-off) pre=("$BUILD/kprof" run --quiet --force --pytorch off --metrics sampled
            -o "$OUT/cost-run") ;;
          replay) pre=("$BUILD/kprof" run --quiet --force --metrics replay -o "$OUT/cost-run") ;;
          # The same with another build's kprof and agent (BASE_BUILD), side by side.
          sampled-base) pre=(env KPROF_AGENT="${BASE_BUILD:?set BASE_BUILD}/libkprof_agent.so"
            "$BASE_BUILD/kprof" run --quiet --force --metrics sampled -o "$OUT/cost-run") ;;
          # Sampling that decodes but evaluates nothing (KPROF_COUNTERS_EVALUATE=0).
          sampled-noeval) pre=(env KPROF_COUNTERS_EVALUATE=0 "$BUILD/kprof" run --quiet --force
            --metrics sampled -o "$OUT/cost-run") ;;
          # Sampling with every set-up step in the first context (KPROF_PM_PREPARE=0).
          sampled-noprep) pre=(env KPROF_PM_PREPARE=0 "$BUILD/kprof" run --quiet --force
            --metrics sampled -o "$OUT/cost-run") ;;
          # Sampling without the counter availability query (KPROF_PM_AVAILABILITY=0).
          sampled-noavail) pre=(env KPROF_PM_AVAILABILITY=0 "$BUILD/kprof" run --quiet --force
            --metrics sampled -o "$OUT/cost-run") ;;
          # Sampling every 1000 us instead of 200.
          sampled-i1000) pre=("$BUILD/kprof" run --quiet --force --metrics sampled
            --metrics-interval 1000 -o "$OUT/cost-run") ;;
          *) echo "unknown variant $variant" >&2; exit 2 ;;
        esac
        t0=$(now)
        # shellcheck disable=SC2086 # cmd: the workload's command line, word-split on purpose
        timeout 90 "${pre[@]}" $cmd > "$OUT/cost-$name-$variant-$round.log" 2>&1
        rc=$?
        t1=$(now)
        [ "$round" = 0 ] && continue  # the uncounted warm-up round
        loop=$(grep -o 'loop_s=[0-9.]*' "$OUT/cost-$name-$variant-$round.log" | tail -n 1 | cut -d= -f2)
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$variant" "$round" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rc" "$loop" >> "$TSV"
        if [[ " replay sampled sampled-base sampled-off " == *" $variant "* ]]; then
          "$BUILD/kprof" report "$OUT/cost-run" --by kernel --format json > "$OUT/cost-$name-$variant-$round.json" 2>/dev/null
        fi
      done
    done
  done
  rm -rf "$OUT/cost-run"
fi
