#!/usr/bin/env bash
# The workload zoo (examples/zoo/workloads.txt) under every kprof mode: what passes, what fails
# and how, and what default tracing costs. Runs on a GPU machine; needs no network.
#   OUT=DIR scripts/zoo_matrix.sh KPROF [ROUNDS=3] [WORKLOAD_REGEX=.]
# KPROF: the kprof binary (build/kprof). Each line of the workload file is
# `name<TAB>kind<TAB>command` (kind python, cpp or ddp; the command relative to the repository
# root, split on blanks, no shell quoting); names matching WORKLOAD_REGEX (bash =~, searched)
# are run. Per workload, in DIR/NAME/:
#   plain.rN, default.rN  ROUNDS interleaved rounds (plain.r1, default.r1, plain.r2, ...): the
#                         command alone, and `KPROF run -o default.rN --force -q`; the loop_s
#                         the workload prints is in its .out.
#   sampled, replay       `--metrics sampled`, `--metrics replay`
#   node, stack, capture  `--graph-trace node`, `--pytorch stack` (python and ddp only; cpp:
#                         stack.na), `--capture nvtx:measured`
#                         Each into CELL.run (-q), then `KPROF report CELL.run` as CELL.json
#                         (--format json), CELL.txt (table) and CELL.kernels.json (--by kernel
#                         --format json --top 0); default.r1 gets the same three.
#   html                  `KPROF report default.r1 --html html.html` (stdout: html.out)
#   sqlite                `KPROF export default.r1 --sqlite sqlite.sqlite`
#   diff                  `KPROF diff default.r1 default.r2`: table (diff.out) and JSON
#                         (diff.json; `result` is the verdict). Exit 1 is a regression, not a
#                         crash (docs/ci.md); diff.na when ROUNDS < 2.
# Every command (each kprof run, report, export and diff, and each plain run) is a step under
# `timeout -k 30 $TIMEOUT` (TIMEOUT=300 s) with its stdout in STEP.out (or the file it writes,
# such as CELL.json), stderr in STEP.err, exit status in STEP.rc and wall seconds in STEP.wall;
# a step that ran out of time also leaves STEP.timeout (a hang; its rc is timeout's, 124 or
# 137). A failing step never stops the matrix. DIR/NAME/kind and DIR/NAME/command say what ran.
# At the end (also when interrupted) DIR/matrix.tsv: one row per step (workload, cell, step,
# rc, wall_s, loop_s, timeout, stdout, stderr, output; paths relative to DIR).
# scripts/zoo_report.py DIR turns it into the pass/fail table.
# Knobs: ZOO (the workload file, default examples/zoo/workloads.txt), STEPS (appends
# `--steps STEPS` to every command), TIMEOUT, CELLS (default "sampled replay node stack capture
# html sqlite diff"; plain and default always run), LANES=1 (the untimed cells in three lanes at
# once: sampled then replay, node then stack, capture; the timed rounds still run alone).
# Device time: only the ROUNDS plain/default pairs repeat; every other cell runs once.
set -euo pipefail
: "${OUT:?set OUT to the output folder}"
if [ $# -lt 1 ]; then
  echo "usage: OUT=DIR $0 KPROF [ROUNDS] [WORKLOAD_REGEX]" >&2
  exit 2
fi
KPROF=$1
ROUNDS=${2:-3}
REGEX=${3:-.}
TIMEOUT=${TIMEOUT:-300}
CELLS=${CELLS:-sampled replay node stack capture html sqlite diff}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZOO=${ZOO:-$ROOT/examples/zoo/workloads.txt}

# Absolute paths before moving to the repository root (the commands are relative to it).
case $KPROF in */*) KPROF=$(cd "$(dirname "$KPROF")" && pwd)/$(basename "$KPROF") ;; esac
[ -x "$KPROF" ] || command -v "$KPROF" > /dev/null || { echo "$KPROF: not executable" >&2; exit 2; }
case $ZOO in /*) ;; *) ZOO=$PWD/$ZOO ;; esac
[ -r "$ZOO" ] || { echo "$ZOO: no workload file" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer: $ROUNDS" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"

ROWS=$OUT/.matrix.rows
: > "$ROWS"
write_matrix() {
  {
    printf 'workload\tcell\tstep\trc\twall_s\tloop_s\ttimeout\tstdout\tstderr\toutput\n'
    cat "$ROWS"
  } > "$OUT/matrix.tsv"
}
trap write_matrix EXIT

now() { date +%s.%N; }
log() { echo "[zoo $(date +%H:%M:%S)] $*" >&2; }

# step W CELL STEP STDOUT OUTPUT -- COMMAND...: runs COMMAND in the timeout, stdout into
# DIR/W/STDOUT, and records STEP.{err,rc,wall[,timeout]} and a row of the matrix. OUTPUT names
# the file or directory the step makes besides its stdout ("" when none). Never fails.
step() {
  local w=$1 cell=$2 name=$3 stdout=$4 output=$5
  shift 6
  local d=$OUT/$w rc=0 t0 t1 wall loop="" to=""
  rm -f "$d/$name.timeout" "$d/$name.na"
  t0=$(now)
  timeout -k 30 "$TIMEOUT" "$@" > "$d/$stdout" 2> "$d/$name.err" < /dev/null || rc=$?
  t1=$(now)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  # timeout's 124 (TERM sufficed) or 137 (KILL after -k) once the limit has passed.
  if [ "$rc" = 124 ] ||
    { [ "$rc" = 137 ] && awk -v s="$wall" -v l="$TIMEOUT" 'BEGIN { exit !(s >= l) }'; }; then
    echo "$TIMEOUT" > "$d/$name.timeout"
    to=hang
  fi
  echo "$rc" > "$d/$name.rc"
  echo "$wall" > "$d/$name.wall"
  loop=$(grep -ao 'loop_s=[0-9.eE+-]*' "$d/$stdout" 2> /dev/null | tail -n 1 | cut -d= -f2 || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$cell" "$name" "$rc" "$wall" "$loop" \
    "$to" "$w/$stdout" "$w/$name.err" "${output:+$w/$output}" >> "$ROWS"
  log "$w $name: rc=$rc ${wall}s${loop:+ loop_s=$loop}${to:+ TIMEOUT}"
  return 0
}

# na W CELL REASON: the cell does not apply (CELL.na holds why).
na() {
  rm -f "$OUT/$1/$2".{rc,wall,timeout,out,err}
  echo "$3" > "$OUT/$1/$2.na"
  printf '%s\t%s\t%s\t\t\t\t\t\t\t\n' "$1" "$2" "$2" >> "$ROWS"
  log "$1 $2: n/a ($3)"
}

# reports W CELL RUN_DIR: the JSON summary, the table and the kernel view of a run.
reports() {
  local w=$1 cell=$2 run=$3
  step "$w" "$cell" "$cell.json" "$cell.json" "" -- "$KPROF" report "$run" --format json
  step "$w" "$cell" "$cell.txt" "$cell.txt" "" -- "$KPROF" report "$run"
  step "$w" "$cell" "$cell.kernels.json" "$cell.kernels.json" "" -- \
    "$KPROF" report "$run" --by kernel --format json --top 0
}

has_cell() { [[ " $CELLS " == *" $1 "* ]]; }

workloads=0
while IFS=$'\t' read -r name kind cmd || [ -n "${name:-}" ]; do
  [[ -z ${name// /} || $name == \#* ]] && continue
  if [ -z "${cmd:-}" ] || [[ ! $kind =~ ^(python|cpp|ddp)$ ]]; then
    log "skipping malformed line: $name"
    continue
  fi
  [[ $name =~ $REGEX ]] || continue
  if [[ ! $name =~ ^[A-Za-z0-9_.+-]+$ ]]; then
    log "skipping workload with an unusable name: $name"
    continue
  fi
  workloads=$((workloads + 1))
  d=$OUT/$name
  mkdir -p "$d"
  echo "$kind" > "$d/kind"
  echo "$cmd" > "$d/command"
  read -r -a argv <<< "$cmd"
  [ -n "${STEPS:-}" ] && argv+=(--steps "$STEPS")
  log "$name ($kind): ${argv[*]}"

  for r in $(seq 1 "$ROUNDS"); do
    step "$name" plain "plain.r$r" "plain.r$r.out" "" -- "${argv[@]}"
    step "$name" default "default.r$r" "default.r$r.out" "default.r$r" -- \
      "$KPROF" run -o "$d/default.r$r" --force -q -- "${argv[@]}"
  done
  reports "$name" default "$d/default.r1"

  # run_cell CELL: one kprof mode into CELL.run, and its reports.
  run_cell() {
    local cell=$1 opts
    has_cell "$cell" || return 0
    case $cell in
      sampled) opts=(--metrics sampled) ;;
      replay) opts=(--metrics replay) ;;
      node) opts=(--graph-trace node) ;;
      stack) opts=(--pytorch stack) ;;
      capture) opts=(--capture nvtx:measured) ;;
    esac
    if [ "$cell" = stack ] && [ "$kind" = cpp ]; then
      na "$name" stack "cpp workload: --pytorch applies to Python programs"
      return 0
    fi
    step "$name" "$cell" "$cell" "$cell.out" "$cell.run" -- \
      "$KPROF" run "${opts[@]}" -o "$d/$cell.run" --force -q -- "${argv[@]}"
    reports "$name" "$cell" "$d/$cell.run"
  }
  if [ "${LANES:-0}" = 1 ]; then
    # Three lanes at once on the one GPU (these cells are not timed against each other): the
    # counters' cells one after the other (the profiler serves one at a time), node and stack,
    # and capture.
    (run_cell sampled; run_cell replay) &
    (run_cell node; run_cell stack) &
    (run_cell capture) &
    wait
  else
    for cell in sampled replay node stack capture; do run_cell "$cell"; done
  fi

  if has_cell html; then
    step "$name" html html html.out html.html -- \
      "$KPROF" report "$d/default.r1" --html "$d/html.html" --force
  fi
  if has_cell sqlite; then
    step "$name" sqlite sqlite sqlite.out sqlite.sqlite -- \
      "$KPROF" export "$d/default.r1" --sqlite "$d/sqlite.sqlite" --force
  fi
  if has_cell diff; then
    if [ "$ROUNDS" -lt 2 ]; then
      na "$name" diff "ROUNDS=1: one default run, nothing to compare"
    else
      step "$name" diff diff diff.out "" -- "$KPROF" diff "$d/default.r1" "$d/default.r2"
      step "$name" diff diff.json diff.json "" -- \
        "$KPROF" diff "$d/default.r1" "$d/default.r2" --format json
    fi
  fi
done < "$ZOO"

[ "$workloads" -gt 0 ] || log "no workload of $ZOO matches '$REGEX'"
log "done: $workloads workloads; $OUT/matrix.tsv; scripts/zoo_report.py $OUT"
