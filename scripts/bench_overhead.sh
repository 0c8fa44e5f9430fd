#!/usr/bin/env bash
# Agent overhead on a storm of tiny kernels (needs a GPU). Interleaves RUNS runs each of:
#   plain  : kernels/kernel_storm COUNT
#   floor  : the same under the floor agent (same CUPTI kinds and API filters, only counts)
#   kprof  : the same under `kprof run --quiet`
# and prints medians of the program's own wall time and peak RSS (VmHWM, printed by the program
# after the profiler's exit flush), the ratios, and kprof's record/drop counts.
#   scripts/bench_overhead.sh [BUILD_DIR=build] [COUNT=1000000] [RUNS=5] [OUT_DIR=/tmp/kprof-bench]
set -euo pipefail
BUILD=${1:-build}
COUNT=${2:-1000000}
RUNS=${3:-5}
OUT=${4:-/tmp/kprof-bench}
mkdir -p "$OUT"
STORM="$BUILD/kernels/kernel_storm"
FLOOR="$(realpath "$BUILD/libkprof_floor_agent.so")"
: > "$OUT/samples.tsv"
for i in $(seq 1 "$RUNS"); do
  for mode in plain floor kprof; do
    case $mode in
      plain) line=$("$STORM" "$COUNT" | grep wall_s) ;;
      floor) line=$(CUDA_INJECTION64_PATH="$FLOOR" "$STORM" "$COUNT" 2>"$OUT/floor.err" | grep wall_s) ;;
      kprof)
        rm -rf "$OUT/run"
        t0=$(date +%s%N)
        line=$("$BUILD/kprof" run --quiet -o "$OUT/run" -- "$STORM" "$COUNT" | grep wall_s)
        t1=$(date +%s%N)
        echo "kprof_total_s $(( (t1 - t0) / 1000000 ))e-3" >> "$OUT/totals.txt"
        ;;
    esac
    wall=$(sed -E 's/.*wall_s=([0-9.]+).*/\1/' <<<"$line")
    rss=$(sed -E 's/.*peak_rss_kb=([0-9]+).*/\1/' <<<"$line")
    printf '%s\t%s\t%s\t%s\n' "$i" "$mode" "$wall" "$rss" >> "$OUT/samples.tsv"
    echo "run $i $mode wall_s=$wall peak_rss_kb=$rss" >&2
  done
done
"$BUILD/kprof" report "$OUT/run" --by kernel --format json > "$OUT/last_run.json"
python3 - "$OUT" "$COUNT" <<'PY'
import json, statistics, sys
out, count = sys.argv[1], int(sys.argv[2])
rows = [l.split("\t") for l in open(f"{out}/samples.tsv").read().split("\n") if l]
med = {}
for mode in ("plain", "floor", "kprof"):
    w = [float(r[2]) for r in rows if r[1] == mode]
    m = [int(r[3]) for r in rows if r[1] == mode]
    med[mode] = (statistics.median(w), statistics.median(m), w)
rep = json.load(open(f"{out}/last_run.json"))
s = rep["summary"]
print(f"| mode | median wall (s) | runs (s) | median peak RSS (MB) |")
print(f"|---|---|---|---|")
for mode in ("plain", "floor", "kprof"):
    w, m, ws = med[mode]
    print(f"| {mode} | {w:.3f} | {' '.join(f'{x:.3f}' for x in ws)} | {m/1024:.1f} |")
print()
print(f"kprof / plain wall: {med['kprof'][0]/med['plain'][0]:.3f}x")
print(f"kprof / floor wall: {med['kprof'][0]/med['floor'][0]:.3f}x")
print(f"floor / plain wall: {med['floor'][0]/med['plain'][0]:.3f}x")
print(f"kprof peak RSS growth over plain: {(med['kprof'][1]-med['plain'][1])/1024:.1f} MB")
print(f"kernels recorded (last kprof run): {s['kernels']} of {count}; dropped records: {s['dropped_records']}; missing timestamps: {s['missing_timestamps']}")
PY
