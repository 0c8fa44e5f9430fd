#!/usr/bin/env bash
# What a closed capture window costs (issue 13, docs/capture.md, docs/benchmarks.md "Capture
# windows"): kernels/kernel_storm COUNT (1,000,000 tiny kernels) run ROUNDS interleaved times
# plain, under `kprof run` (everything recorded) and under `kprof run --capture nvtx:never` (a
# window that never opens: CUPTI's NVTX callbacks on, every activity kind off).
#   OUT=DIR scripts/capture_bench.sh [BUILD_DIR=build] [ROUNDS=5] [COUNT=1000000]
# DIR/cost.tsv (workload, variant, round, wall_s of the whole command, exit status), the format
# scripts/counters_report.py DIR makes the medians and ratios of; DIR/program.tsv the same with
# the program's own wall time (kernel_storm prints it: CUDA's start to its exit).
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
BUILD=${1:-build}
ROUNDS=${2:-5}
COUNT=${3:-1000000}
mkdir -p "$OUT"
now() { date +%s.%N; }
printf 'workload\tvariant\tround\twall_s\trc\n' > "$OUT/cost.tsv"
printf 'workload\tvariant\tround\twall_s\trc\n' > "$OUT/program.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for variant in plain kprof closed; do
    case $variant in
      plain) pre=() ;;
      kprof) pre=("$BUILD/kprof" run --quiet --force -o "$OUT/run") ;;
      closed) pre=("$BUILD/kprof" run --quiet --force --capture nvtx:never -o "$OUT/run") ;;
    esac
    t0=$(now)
    timeout 120 "${pre[@]}" "$BUILD/kernels/kernel_storm" "$COUNT" > "$OUT/$variant.log" 2>&1
    rc=$?
    t1=$(now)
    printf 'storm\t%s\t%s\t%s\t%s\n' "$variant" "$round" \
      "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rc" >> "$OUT/cost.tsv"
    prog=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' "$OUT/$variant.log" | tail -n 1)
    printf 'storm\t%s\t%s\t%s\t%s\n' "$variant" "$round" "$prog" "$rc" >> "$OUT/program.tsv"
    if [ "$variant" = closed ]; then
      "$BUILD/kprof" report "$OUT/run" --format json > "$OUT/closed-$round.json" 2>/dev/null
    fi
  done
done
rm -rf "$OUT/run"
