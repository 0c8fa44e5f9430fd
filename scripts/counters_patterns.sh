#!/usr/bin/env bash
# Hardware counters on launch patterns nobody tuned them for (issue 32): every mode of
# kernels/launch_patterns under `--metrics replay` and `--metrics sampled`, each run's JSON
# summary and kernel view kept, and how long each took against the program alone. Then PM
# sampling's loss at shorter intervals (KPROF_COUNTERS_DEBUG=1 says each decode's holes).
#   OUT=DIR scripts/counters_patterns.sh BUILD [MODES] [INTERVALS]
# BUILD: the build folder (kprof, kernels/launch_patterns). MODES: default "sgemm bf16 small
# names medium tiny graph". INTERVALS (µs): default "10 20 50 100 200", on `medium` and `tiny`.
# Per mode in DIR: MODE.plain.wall, MODE.{replay,sampled}.{run/,json,kernels.json,txt,err,wall};
# interval runs as interval/MODE.US.*. scripts/zoo_report.py's checks read the same JSON.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
BUILD=${1:?usage: OUT=DIR $0 BUILD [MODES] [INTERVALS]}
MODES=${2:-sgemm bf16 small names medium tiny graph}
INTERVALS=${3:-10 20 50 100 200}
KPROF=$BUILD/kprof
PROG=$BUILD/kernels/launch_patterns
mkdir -p "$OUT/interval"

timed() {  # timed WALLFILE CMD...: runs CMD, writes its wall seconds, returns its status
  local wall=$1 t0 rc
  shift
  t0=$(date +%s.%N)
  "$@"
  rc=$?
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }' > "$wall"
  return $rc
}

report() {  # report RUN PREFIX
  "$KPROF" report "$1" --format json > "$2.json" 2>> "$2.err"
  "$KPROF" report "$1" --by kernel --format json --top 0 > "$2.kernels.json" 2>> "$2.err"
  "$KPROF" report "$1" --by kernel > "$2.txt" 2>> "$2.err"
}

for mode in $MODES; do
  echo "== $mode" >&2
  timed "$OUT/$mode.plain.wall" "$PROG" "$mode" > "$OUT/$mode.plain.out" 2>&1
  for m in replay sampled; do
    timed "$OUT/$mode.$m.wall" "$KPROF" run -q --force -o "$OUT/$mode.$m.run" --metrics "$m" \
      -- "$PROG" "$mode" > "$OUT/$mode.$m.out" 2> "$OUT/$mode.$m.err"
    echo "$?" > "$OUT/$mode.$m.rc"
    report "$OUT/$mode.$m.run" "$OUT/$mode.$m"
  done
done

for mode in medium tiny; do
  for us in $INTERVALS; do
    p=$OUT/interval/$mode.$us
    KPROF_COUNTERS_DEBUG=1 timed "$p.wall" "$KPROF" run -q --force -o "$p.run" --metrics sampled \
      --metrics-interval "$us" -- "$PROG" "$mode" > "$p.out" 2> "$p.err"
    echo "$?" > "$p.rc"
    report "$p.run" "$p"
  done
done
echo "done: $OUT" >&2
