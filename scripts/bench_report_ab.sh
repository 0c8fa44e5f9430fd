#!/usr/bin/env bash
# Side-by-side benchmark of two kprof binaries on one large trace: `kprof report TRACE --format
# json` run A B A B ... N times each, interleaved so that both see the same machine; prints the
# median wall time, MB/s and peak RSS of each and their ratio.
#
# usage: scripts/bench_report_ab.sh KPROF_A KPROF_B [TRACE_FILE] [RUNS=5]
#   (the trace is generated once by scripts/bench_report.sh's generator when missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a=${1:?usage: bench_report_ab.sh KPROF_A KPROF_B [TRACE] [RUNS]}
b=${2:?usage: bench_report_ab.sh KPROF_A KPROF_B [TRACE] [RUNS]}
trace=${3:-${TMPDIR:-/tmp}/kprof-bench-trace.json}
runs=${4:-5}
[[ -x /usr/bin/time ]] || { echo "bench_report_ab: /usr/bin/time (GNU time) is required" >&2; exit 1; }
if [[ ! -s $trace ]]; then
  echo "generating $trace (1024 MB)..." >&2
  python3 "$root/scripts/bench/gen_trace.py" "$trace" --mb 1024
fi
bytes=$(stat -c %s "$trace")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((i = 1; i <= runs; i++)); do
  for side in A B; do
    bin=$a
    [[ $side == B ]] && bin=$b
    /usr/bin/time -f "$side %e %M" "$bin" report "$trace" --format json 2>>"$log" >/dev/null
  done
done
awk -v b="$bytes" -v A="$a" -v B="$b" '
  $1 == "A" || $1 == "B" { w[$1] = w[$1] " " $2; r[$1] = r[$1] " " $3 }
  function median(s,   n, v, i, j, t) {
    n = split(s, v, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  END {
    printf "| binary | wall s (runs) | median wall s | MB/s | median peak RSS MB | RSS / file |\n|---|---|---|---|---|---|\n"
    for (k = 0; k < 2; k++) {
      s = k ? "B" : "A"; name = k ? B : A
      mw = median(w[s]); mr = median(r[s])
      printf "| %s | %s | %.2f | %.0f | %.0f | %.3f |\n", name, w[s], mw, b / 1e6 / mw, mr / 1024, mr * 1024 / b
      med[s] = mw; rss[s] = mr
    }
    printf "\nB / A wall: %.3fx; B / A peak RSS: %.3fx\n", med["B"] / med["A"], rss["B"] / rss["A"]
  }' "$log"
