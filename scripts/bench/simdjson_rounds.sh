#!/usr/bin/env bash
# Interleaved rounds of every reader variant of scripts/bench/simdjson_reader.cpp on one trace
# (docs/benchmarks.md, issue 8): within each round the variants alternate, so that a machine
# shared with other work slows them alike. Prints one line per run, then a markdown table of the
# medians.
#   scripts/bench/simdjson_rounds.sh [BUILD_DIR] [TRACE] [ROUNDS]
set -euo pipefail
build=${1:-build}
trace=${2:-${TMPDIR:-/tmp}/kprof-bench-trace.json}
rounds=${3:-7}
variants=(
  "kprof_bench_simdjson hand -"
  "kprof_bench_simdjson scan swar"
  "kprof_bench_simdjson scan avx2"
  "kprof_bench_simdjson simdjson-event swar"
  "kprof_bench_simdjson simdjson-batch swar"
  "kprof_bench_simdjson simdjson-event avx2"
  "kprof_bench_simdjson simdjson-batch avx2"
  "kprof_bench_simdjson simdjson-validated avx2"
  "kprof_bench_simdjson_native simdjson-batch avx2"
  "kprof_bench_simdjson_native simdjson-validated avx2"
)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((i = 1; i <= rounds; i++)); do
  for v in "${variants[@]}"; do
    read -r binary mode scan <<<"$v"
    line=$(KPROF_BENCH_SCAN=$scan "$build/$binary" "$mode" "$trace")
    echo "$binary scan=$scan $line" | tee -a "$log"
  done
done

bytes=$(stat -c %s "$trace")
echo
echo "| binary | mode | scan | wall s (median of $rounds) | M events/s | MB/s | peak RSS MB |"
echo "|---|---|---|---|---|---|---|"
# Median of the values of KEY=VALUE fields named $1 in the lines on stdin.
median() {
  tr ' ' '\n' | sed -n "s/^$1=//p" | sort -g |
    awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
for v in "${variants[@]}"; do
  read -r binary mode scan <<<"$v"
  runs=$(grep "^$binary scan=$scan $mode " "$log")
  events=$(head -1 <<<"$runs" | tr ' ' '\n' | sed -n 's/^events=//p')
  awk -v s="$(median s <<<"$runs")" -v rss="$(median peak_rss_MB <<<"$runs")" -v ev="$events" \
    -v b="$bytes" -v row="| $binary | $mode | $scan" 'BEGIN {
      printf "%s | %.2f | %.2f | %.0f | %.0f |\n", row, s, ev / s / 1e6, b / 1e6 / s, rss }'
done
