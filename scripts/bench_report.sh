#!/usr/bin/env bash
# Benchmark of `kprof report` on a large Chrome trace: reader + analysis throughput and memory.
#
# Generates (once) a ~1 GB PyTorch-profiler-like trace with scripts/bench/gen_trace.py, runs
# `kprof report FILE --format json` three times under /usr/bin/time -v, and prints one markdown
# table row: file size, median wall time, MB/s, peak RSS and RSS as a fraction of the file size.
#
# usage: scripts/bench_report.sh [KPROF_BINARY] [TRACE_FILE] [SIZE_MB]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
kprof=${1:-$root/build/kprof}
trace=${2:-${TMPDIR:-/tmp}/kprof-bench-trace.json}
size_mb=${3:-1024}

[[ -x $kprof ]] || { echo "bench_report: $kprof not found (build first)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_report: /usr/bin/time (GNU time) is required" >&2; exit 1; }

if [[ ! -s $trace ]]; then
  echo "generating $trace (${size_mb} MB)..." >&2
  python3 "$root/scripts/bench/gen_trace.py" "$trace" --mb "$size_mb"
fi
bytes=$(stat -c %s "$trace")

walls=() rss=()
for i in 1 2 3; do
  log=$(mktemp)
  /usr/bin/time -v "$kprof" report "$trace" --format json >/dev/null 2>"$log" || {
    cat "$log" >&2
    rm -f "$log"
    exit 1
  }
  w=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log")
  # h:mm:ss or m:ss.cc -> seconds
  walls+=("$(awk -v t="$w" 'BEGIN { n = split(t, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s }')")
  rss+=("$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")")
  rm -f "$log"
done

median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
wall=$(median "${walls[@]}")
peak_kb=$(median "${rss[@]}")
awk -v b="$bytes" -v w="$wall" -v r="$peak_kb" 'BEGIN {
  mb = b / 1e6
  printf "| file MB | wall s (median of 3) | MB/s | peak RSS MB | RSS / file |\n"
  printf "|---|---|---|---|---|\n"
  printf "| %.0f | %.2f | %.0f | %.0f | %.3f |\n", mb, w, mb / w, r / 1024, (r * 1024) / b
}'
