#!/usr/bin/env bash
# On-demand capture on a GPU (issue 35; docs/capture.md "On demand", docs/benchmarks.md). Needs a
# GPU; exit 77 (ctest: skipped) without one. Checks, each a line "PASS|FAIL what" in OUT/summary.txt:
#  1. kernels/on_demand_steps under --on-demand: three windows asked in a row (5 steps, 0.2 s,
#     3 steps): each holds exactly its steps' kernels (7 step_kernel and 1000 graph_node a step);
#  2. errors of kprof capture (no such run, a run that has ended);
#  3. a job that exits mid-window keeps what was recorded;
#  4. a 2-rank DDP job (tests/gpu/scripts/ddp_steps.py, with PyTorch): both ranks record the same
#     steps ("idx N" ranges);
#  5. an on-demand window of 3 steps reports what a --capture window of 3 steps does (the graph
#     program: calls; the program without graphs: calls and hints);
#  6. --capture nvtx:step --capture-count 3, dormant until each push: each window one step exactly,
#     with graphs and without.
# Then, with MEASURE=1, ROUNDS interleaved rounds of the dormant cost: the host time of a 1000-node
# cudaGraphLaunch (kernels/graph_replay 1000 100) plain / --on-demand never asked / --capture
# nvtx:never (dormant: kprof's NVTX handlers watch, no CUPTI); the 1M-kernel storm (plain, on
# demand, nvtx:never); NVTX push+pop (plain, on demand, watched by an nvtx:never trigger); and,
# after three windows (on demand; and --capture nvtx:step --capture-count 3, trigger_after.tsv),
# the host time of kernel launches and NVTX pairs of a program without graphs (CUPTI detached) and
# of graph launches of one with graphs (CUPTI detached too), each against the same program plain
# over the same steps (after_windows.tsv).
#   scripts/on_demand_check.sh OUT [BUILD=build] [ROUNDS=5]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: on_demand_check.sh OUT [BUILD] [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-5}
. scripts/on_demand_lib.sh
HANG_LOG="$SUM"
: > "$SUM"
csv_cols() {  # csv_cols I J...: those columns of CSV on stdin, tab-separated (names hold commas)
  python3 -c 'import csv, sys
for row in csv.reader(sys.stdin): print("\t".join(row[int(i)] for i in sys.argv[1:]))' "$@"
}
max_ns() {  # max_ns RUN WINDOW KERNEL: the longest launch of KERNEL in that window
  "$K" report "$1" --window "$2" --by kernel --format csv --top 0 --no-hints 2>/dev/null |
    csv_cols 0 7 | awk -F'\t' -v k="$3" 'index($1, k"(")==1 {print $2; f=1} END {if (!f) print 0}'
}
calls() {  # calls RUN WINDOW KERNEL: the calls of KERNEL in that window (--by kernel csv)
  "$K" report "$1" --window "$2" --by kernel --format csv --top 0 --no-hints 2>/dev/null |
    sed 's/^"//; s/([^)]*)"*,/(),/' |
    awk -F, -v k="$3" 'index($1, k"(")==1 {print $2; f=1} END {if (!f) print 0}'
}

# 1. Three windows in a row.
R="$OUT/steps"
rm -rf "$R"
ON_DEMAND_TIMES="$OUT/steps_times.txt" "$K" run -o "$R" --quiet --calibrate off --on-demand -- \
  "$S" 1500 7 1000 5 > "$OUT/steps_run.log" 2>&1 &
run=$!
wait_agents "$R" 1
sleep 1
"$K" capture "$R" --timeout 30 --step-range step --steps 5 > "$OUT/steps_capture1.txt" 2>&1
c1=$?
sleep 0.5
"$K" capture "$R" --timeout 30 --duration 0.2 > "$OUT/steps_capture2.txt" 2>&1
c2=$?
sleep 0.5
"$K" capture "$R" --timeout 30 --step-range step --steps 3 > "$OUT/steps_capture3.txt" 2>&1
c3=$?
finish $run steps
rc=$?
cat "$OUT"/steps_capture*.txt
check run-exit "$rc" "kprof run exited $rc"
check capture-exits "$(( c1 + c2 + c3 ))" "kprof capture exits $c1 $c2 $c3"
for w in 1 3; do
  want=$([ $w = 1 ] && echo 5 || echo 3)
  sk=$(calls "$R" $w step_kernel); gn=$(calls "$R" $w graph_node)
  ids=$(idx_ranges "$R" $w)
  n=$(echo "$ids" | grep -o idx | wc -l)
  check "window$w-exact" "$([ "$sk" = $((7 * want)) ] && [ "$gn" = $((1000 * want)) ] && [ "$n" = "$want" ]; echo $?)" \
    "step_kernel=$sk graph_node=$gn steps: $ids"
done
sk=$(calls "$R" 2 step_kernel)
check window2-duration "$([ "$sk" -gt 0 ]; echo $?)" "step_kernel=$sk in 0.2 s"
# Each graph_node lasts about 0.9 us: none of a window may last 100 us (the last launch of a
# window once took the end times of a later launch).
longest=$(for w in 1 2 3; do max_ns "$R" $w graph_node; done | sort -n | tail -1)
check node-durations "$([ "${longest:-0}" -lt 100000 ]; echo $?)" "longest graph_node ${longest} ns"
grep -h "opened" "$OUT"/steps_capture*.txt | sed 's/.*opened \(.*\) after.*/\1/' > "$OUT/open_after.txt"
"$K" report "$R" > "$OUT/steps_report.txt" 2>&1

# 2. Errors: no such run, a run that has ended, a plain run directory.
"$K" capture "$OUT/nope" > "$OUT/err1.txt" 2>&1; e1=$?
"$K" capture "$R" > "$OUT/err2.txt" 2>&1; e2=$?
check capture-errors "$([ $e1 = 2 ] && [ $e2 = 2 ]; echo $?)" "$(cat "$OUT/err1.txt" "$OUT/err2.txt" | tr '\n' '|')"

# 3. A job that exits mid-window.
R2="$OUT/midexit"
rm -rf "$R2"
"$K" run -o "$R2" --quiet --calibrate off --on-demand -- "$S" 300 7 1000 5 > "$OUT/midexit_run.log" 2>&1 &
run=$!
wait_agents "$R2" 1
"$K" capture "$R2" --timeout 40 --duration 30 > "$OUT/midexit_capture.txt" 2>&1
finish $run midexit
sk=$(calls "$R2" 1 step_kernel)
check exit-mid-window "$([ "$sk" -gt 0 ]; echo $?)" "step_kernel=$sk; $(tr '\n' ' ' < "$OUT/midexit_capture.txt")"

# 4. Two DDP ranks record the same steps.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  R3="$OUT/ddp"
  start_ddp "$R3" 3000 "$OUT/ddp_run.log"
  "$K" capture "$R3" --timeout 60 --step-range step --steps 3 > "$OUT/ddp_capture.txt" 2>&1
  dc=$?
  finish $run ddp
  cat "$OUT/ddp_capture.txt"
  ids=()
  for f in "$R3"/kprof.rank*.kprof; do ids+=("$(idx_ranges "$f" 1)"); done
  check ddp-same-steps "$([ $dc = 0 ] && [ ${#ids[@]} = 2 ] && [ "${ids[0]}" = "${ids[1]}" ] &&
    [ "$(echo "${ids[0]}" | grep -o idx | wc -l)" = 3 ]; echo $?)" "rank0: ${ids[0]:-} rank1: ${ids[1]:-}"
fi

# 5. An on-demand window of 3 steps against the same 3 steps taken with --capture nvtx:three, a
#    range around steps 5 to 7 (ON_DEMAND_OUTER=5), and --graph-trace node (on demand records
#    graphs per node). a) The graph program (window 3 of check 1): the same kernel calls and range
#    calls (step numbers and the range "three" aside). Its hints are not compared: a 1000-node
#    graph launch recorded per node costs the host 0.2 ms once CUPTI has seen the graph and
#    1.4-1.7 ms for the first launches after CUPTI attached, which the dormant --capture window
#    holds (it attaches at its own push) and the on-demand one does not (attached before its
#    step), and the host-gap hints follow kprof's own cost there (docs/capture.md "Dormant").
#    b) The program without graphs: the same calls, the same top hint, and the same hints among
#    those pricing 5% of the window or more on either side (below that, whether a gap-priced hint
#    fires follows the host's timing: one of two runs differed by gpu-idle-gaps alone).
summary() {  # summary RUN [WINDOW...]: kernel calls, range calls (idx N as idx), "hint ID PCT"
  { "$K" report "$@" --by kernel --format csv --top 0 --no-hints | csv_cols 0 1
    "$K" report "$@" --by range-path --format csv --top 0 --no-hints | csv_cols 0 1 |
      sed 's/idx [0-9]*/idx/g; s#^three/##' | grep -v '^three' | sort
    "$K" report "$@" --format json | python3 -c 'import json, sys
for h in json.load(sys.stdin).get("hints", []): print("hint", h["id"], round(h.get("est_saving_pct", 0), 1))'
  } 2>/dev/null
}
compare() {  # compare A B HINTS(0/1): 0 when the summaries agree
  python3 - "$1" "$2" "$3" <<'PY'
import sys
a, b = ([l.split() for l in open(f).read().splitlines() if l.strip()] for f in sys.argv[1:3])
rows = lambda s: [l for l in s if l[0] != "hint"]
hints = lambda s: [(l[1], float(l[2])) for l in s if l[0] == "hint"]
ha, hb = hints(a), hints(b)
big = {i for i, p in ha + hb if p >= 5}
ok = rows(a) == rows(b) and rows(a) != []
if sys.argv[3] == "1":
    ok = ok and bool(ha[:1] and hb[:1] and ha[0][0] == hb[0][0]) and \
        big <= {i for i, _ in ha} and big <= {i for i, _ in hb}
print(0 if ok else 1)
PY
}
R5="$OUT/capture3"
rm -rf "$R5"
ON_DEMAND_OUTER=5 "$K" run -o "$R5" --quiet --calibrate off --capture nvtx:three --graph-trace node \
  -- "$S" 12 7 1000 5 > "$OUT/capture3_run.log" 2>&1
summary "$R" --window 3 > "$OUT/on_demand3.summary"
summary "$R5" > "$OUT/capture3.summary"
check same-as-capture-graph "$(compare "$OUT/on_demand3.summary" "$OUT/capture3.summary" 0)" \
  "$(diff "$OUT/on_demand3.summary" "$OUT/capture3.summary" | head -10 | tr '\n' '|')"
R5b="$OUT/nograph_od"
rm -rf "$R5b" "$OUT/nograph_capture3"
ON_DEMAND_NO_GRAPH=1 "$K" run -o "$R5b" --quiet --calibrate off --on-demand -- "$S" 1000 7 1000 5 \
  > "$OUT/nograph_od_run.log" 2>&1 &
run=$!
wait_agents "$R5b" 1
sleep 0.5
"$K" capture "$R5b" --timeout 30 --step-range step --steps 3 > "$OUT/nograph_od_capture.txt" 2>&1
finish $run nograph_od
# (The reference is attached from the start, KPROF_DORMANT=0: a dormant --capture attaches CUPTI
# inside the push of "three", which stalls that thread (cupti_attach_max_us in the run's meta),
# and this program, which waits until each step has lasted 5 ms, makes up for it by not waiting
# in step 5: its window then has one host gap after a wait, not two.)
ON_DEMAND_NO_GRAPH=1 ON_DEMAND_OUTER=5 KPROF_DORMANT=0 "$K" run -o "$OUT/nograph_capture3" --quiet \
  --calibrate off --capture nvtx:three -- "$S" 12 7 1000 5 > "$OUT/nograph_capture3_run.log" 2>&1
summary "$R5b" --window 1 > "$OUT/nograph_on_demand3.summary"
summary "$OUT/nograph_capture3" > "$OUT/nograph_capture3.summary"
check same-as-capture-nograph \
  "$(compare "$OUT/nograph_on_demand3.summary" "$OUT/nograph_capture3.summary" 1)" \
  "$(diff "$OUT/nograph_on_demand3.summary" "$OUT/nograph_capture3.summary" | head -10 | tr '\n' '|')"

# 6. --capture nvtx:step --capture-count 3, dormant until the push (docs/capture.md "Dormant"):
#    each window exactly one step, with graphs and without (CUPTI detached after each window,
#    attached again at the next push; with graphs, the run exits 0: no fault after detaching).
for kind in graph nograph; do
  R6="$OUT/trigger_$kind"
  rm -rf "$R6"
  env "$([ $kind = nograph ] && echo ON_DEMAND_NO_GRAPH=1 || echo ON_DEMAND_UNUSED=1)" \
    "$K" run -o "$R6" --quiet --calibrate off --capture nvtx:step --capture-count 3 -- \
    "$S" 20 7 1000 1 > "$OUT/trigger_$kind.log" 2>&1
  rc=$?
  want_gn=$([ $kind = nograph ] && echo 0 || echo 1000)
  bad=$rc
  detail="exit $rc; step_kernel/graph_node/steps:"
  for w in 1 2 3; do
    sk=$(calls "$R6" $w step_kernel); gn=$(calls "$R6" $w graph_node)
    n=$(idx_ranges "$R6" $w | grep -o idx | wc -l)
    detail="$detail w$w $sk/$gn/$n"
    { [ "$sk" = 7 ] && [ "$gn" = "$want_gn" ] && [ "$n" = 1 ]; } || bad=1
  done
  check "trigger-$kind-exact" "$([ "$bad" = 0 ]; echo $?)" "$detail"
done

if [ "${MEASURE:-0}" = 1 ]; then
  G=("$BUILD/kernels/graph_replay" 1000 100)
  us() { grep -o 'host_launch_us=[0-9.]*' | cut -d= -f2; }
  med() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
  col_after() {  # col_after TIMES COLUMN FROM: the median of COLUMN over the steps after FROM
    awk -v c="$2" -v f="$3" '$1 > f {print $c}' "$1" | med
  }
  gpu() { grep -o 'gpu_launch_us=[0-9.]*' | cut -d= -f2; }
  printf "round\tplain\ton_demand\tnvtx_never\tplain_gpu_us\ton_demand_gpu_us\n" > "$OUT/graph_dormant.tsv"
  printf "round\tplain_s\ton_demand_s\tnvtx_never_s\n" > "$OUT/storm.tsv"
  printf "round\tplain_ns\ton_demand_ns\tnvtx_watching_ns\n" > "$OUT/nvtx.tsv"
  printf "round\tplain\ton_demand\n" > "$OUT/graph_no_nvtx.tsv"
  printf "round\tkernels_plain_us\tkernels_after_us\tnvtx_plain_ns\tnvtx_after_ns\n" > "$OUT/trigger_after.tsv"
  printf "round\tkernels_plain_us\tkernels_after_us\tnvtx_plain_ns\tnvtx_after_ns\tgraph_plain_us\tgraph_after_us\n" > "$OUT/after_windows.tsv"
  for r in $(seq 1 "$ROUNDS"); do
    a=$("${G[@]}")
    b=$("$K" run -o "$OUT/m/od$r" --force --quiet --calibrate off --on-demand -- "${G[@]}" 2>/dev/null)
    c=$("$K" run -o "$OUT/m/nn$r" --force --quiet --calibrate off --capture nvtx:never -- "${G[@]}" 2>/dev/null | us)
    printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$(echo "$a" | us)" "$(echo "$b" | us)" "$c" \
      "$(echo "$a" | gpu)" "$(echo "$b" | gpu)" >> "$OUT/graph_dormant.tsv"
    # (the program's own wall time, its exit flush included: not kprof run's start and report)
    wall() { grep -o 'wall_s=[0-9.]*' | cut -d= -f2; }
    t1=$("$BUILD/kernels/kernel_storm" 1000000 | wall)
    t2=$("$K" run -o "$OUT/m/st$r" --force --quiet --calibrate off --on-demand -- "$BUILD/kernels/kernel_storm" 1000000 2>/dev/null | wall)
    t3=$("$K" run -o "$OUT/m/stn$r" --force --quiet --calibrate off --capture nvtx:never -- "$BUILD/kernels/kernel_storm" 1000000 2>/dev/null | wall)
    printf "%s\t%s\t%s\t%s\n" "$r" "$t1" "$t2" "$t3" >> "$OUT/storm.tsv"
    p=$(ON_DEMAND_NVTX=1 "$S" 20 0 10 1 | grep -o 'nvtx_ns=[0-9.]*' | cut -d= -f2)
    o=$(ON_DEMAND_NVTX=1 "$K" run -o "$OUT/m/nv$r" --force --quiet --calibrate off --on-demand -- "$S" 20 0 10 1 2>/dev/null | grep -o 'nvtx_ns=[0-9.]*' | cut -d= -f2)
    w=$(ON_DEMAND_NVTX=1 "$K" run -o "$OUT/m/nw$r" --force --quiet --calibrate off --capture nvtx:never -- "$S" 20 0 10 1 2>/dev/null | grep -o 'nvtx_ns=[0-9.]*' | cut -d= -f2)
    printf "%s\t%s\t%s\t%s\n" "$r" "$p" "$o" "$w" >> "$OUT/nvtx.tsv"
    # After windows. A program without graphs (CUPTI detached after each window): three 3-step
    # windows, then its kernel launches and NVTX pairs, against the same program plain over the
    # same steps. A program with graphs (CUPTI detached too): its graph launches after them.
    for kind in nograph graph; do
      env_graph=$([ $kind = nograph ] && echo ON_DEMAND_NO_GRAPH=1 || echo ON_DEMAND_UNUSED=1)
      env "$env_graph" ON_DEMAND_NVTX=1 ON_DEMAND_TIMES="$OUT/m/pl${kind}${r}_times.txt" "$S" 800 7 1000 5 > "$OUT/m/pl${kind}$r.log" 2>&1
      R4="$OUT/m/aw${kind}$r"
      rm -rf "$R4"
      env "$env_graph" ON_DEMAND_NVTX=1 ON_DEMAND_TIMES="${R4}_times.txt" "$K" run -o "$R4" --quiet --calibrate off --on-demand -- "$S" 800 7 1000 5 > "$R4.log" 2>&1 &
      run=$!
      wait_agents "$R4" 1
      sleep 0.5
      for _ in 1 2 3; do "$K" capture "$R4" --timeout 20 --step-range step --steps 3 >> "${R4}_capture.txt" 2>&1; sleep 0.2; done
      finish $run "aw${kind}$r"
      last=$(idx_ranges "$R4" 3 | grep -o '[0-9]*' | tail -1)
      eval "last_$kind=\${last:-0}"
    done
    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" \
      "$(col_after "$OUT/m/plnograph${r}_times.txt" 3 $((last_nograph + 2)))" \
      "$(col_after "$OUT/m/awnograph${r}_times.txt" 3 $((last_nograph + 2)))" \
      "$(grep -o 'nvtx_after_ns=[0-9.]*' "$OUT/m/plnograph$r.log" | cut -d= -f2)" \
      "$(grep -o 'nvtx_after_ns=[0-9.]*' "$OUT/m/awnograph$r.log" | cut -d= -f2)" \
      "$(col_after "$OUT/m/plgraph${r}_times.txt" 2 $((last_graph + 2)))" \
      "$(col_after "$OUT/m/awgraph${r}_times.txt" 2 $((last_graph + 2)))" >> "$OUT/after_windows.tsv"
    # --capture nvtx:step --capture-count 3 on the program without graphs: after its three
    # windows (steps 0-2; CUPTI detached, kprof's NVTX handlers gone), kernel launches and NVTX
    # pairs against the same program plain over the same steps (trigger_after.tsv).
    RT="$OUT/m/tr$r"
    rm -rf "$RT"
    ON_DEMAND_NO_GRAPH=1 ON_DEMAND_NVTX=1 ON_DEMAND_TIMES="${RT}_times.txt" "$K" run -o "$RT" --quiet --calibrate off \
      --capture nvtx:step --capture-count 3 -- "$S" 800 7 1000 5 > "$RT.log" 2>&1
    printf "%s\t%s\t%s\t%s\t%s\n" "$r" \
      "$(col_after "$OUT/m/plnograph${r}_times.txt" 3 5)" "$(col_after "${RT}_times.txt" 3 5)" \
      "$(grep -o 'nvtx_after_ns=[0-9.]*' "$OUT/m/plnograph$r.log" | cut -d= -f2)" \
      "$(grep -o 'nvtx_after_ns=[0-9.]*' "$RT.log" | cut -d= -f2)" >> "$OUT/trigger_after.tsv"
    # A process that never reaches NVTX: the graph launch dormant, plain and on demand.
    q=$(ON_DEMAND_NO_NVTX=1 "$S" 200 7 1000 1 | us)
    qo=$(ON_DEMAND_NO_NVTX=1 "$K" run -o "$OUT/m/nn2$r" --force --quiet --calibrate off --on-demand -- "$S" 200 7 1000 1 2>/dev/null | us)
    printf "%s\t%s\t%s\n" "$r" "$q" "$qo" >> "$OUT/graph_no_nvtx.tsv"
  done
  cat "$OUT/graph_dormant.tsv" "$OUT/graph_no_nvtx.tsv" "$OUT/storm.tsv" "$OUT/nvtx.tsv" "$OUT/after_windows.tsv" \
    "$OUT/trigger_after.tsv"
fi
echo "failures: $fails" | tee -a "$SUM"
[ "$fails" = 0 ]
