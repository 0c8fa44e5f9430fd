#!/usr/bin/env bash
# On-demand capture on a GPU (issue 35; docs/capture.md "On demand", docs/benchmarks.md). Needs a
# GPU; exit 77 (ctest: skipped) without one. Checks, each a line "PASS|FAIL what" in OUT/summary.txt:
#  1. kernels/on_demand_steps under --on-demand: three windows asked in a row (5 steps, 0.2 s,
#     3 steps): each holds exactly its steps' kernels (7 step_kernel and 1000 graph_node a step);
#  2. a job that exits mid-window keeps what was recorded;
#  3. a 2-rank DDP job (tests/gpu/scripts/ddp_steps.py, with PyTorch): both ranks record the same
#     steps ("idx N" ranges).
# Then, with MEASURE=1, ROUNDS interleaved rounds of the dormant cost: the host time of a 1000-node
# cudaGraphLaunch (kernels/graph_replay 1000 100) plain / --on-demand never asked / --capture
# nvtx:never; the 1M-kernel storm; NVTX push+pop; and launches before and after windows.
#   scripts/on_demand_check.sh OUT [BUILD=build] [ROUNDS=5]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: on_demand_check.sh OUT [BUILD] [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-5}
K="$BUILD/kprof"
S="$BUILD/kernels/on_demand_steps"
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mkdir -p "$OUT"
SUM="$OUT/summary.txt"
: > "$SUM"
fails=0
check() {  # check NAME CONDITION-RESULT(0/1) DETAIL
  if [ "$2" = 0 ]; then echo "PASS $1 $3" | tee -a "$SUM"; else
    echo "FAIL $1 $3" | tee -a "$SUM"; fails=$((fails + 1)); fi
}
calls() {  # calls RUN WINDOW KERNEL: the calls of KERNEL in that window (--by kernel csv)
  "$K" report "$1" --window "$2" --by kernel --format csv --top 0 --no-hints 2>/dev/null |
    sed 's/^"//; s/([^)]*)"*,/(),/' |
    awk -F, -v k="$3" 'index($1, k"(")==1 {print $2; f=1} END {if (!f) print 0}'
}
idx_ranges() {  # idx_ranges FILE WINDOW: the "idx N" range names of that window, sorted
  "$K" report "$1" --window "$2" --by range-path --format csv --top 0 --no-hints 2>/dev/null |
    grep -o 'idx [0-9]*' | sort -u | tr '\n' ' '
}
finish() {  # finish PID NAME: waits for kprof run (60 s at most); a hang leaves the stacks and is killed
  for _ in $(seq 1 600); do kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }; sleep 0.1; done
  for p in $(pgrep -P "$1"); do
    { echo "== $p"; cat /proc/$p/cmdline | tr '\0' ' '; echo;
      gdb -batch -p "$p" -ex "thread apply all bt" 2>&1 | grep -v "^\[New LWP" | head -300; } >> "$OUT/$2_stacks.txt"
    kill -9 "$p"
  done
  wait "$1"
  echo "HANG $2 (stacks in $2_stacks.txt)" | tee -a "$SUM"
  return 124
}
wait_agents() {  # wait_agents RUN N: until N processes are dormant in RUN/control
  for _ in $(seq 1 600); do
    [ "$(grep -l 'state=dormant' "$1"/control/*.agent 2>/dev/null | wc -l)" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
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
  rm -rf "$R3"
  "$K" run -o "$R3" --quiet --calibrate off --pytorch off --on-demand -- \
    python3 tests/gpu/scripts/ddp_steps.py 3000 > "$OUT/ddp_run.log" 2>&1 &
  run=$!
  wait_agents "$R3" 2
  sleep 8
  "$K" capture "$R3" --timeout 60 --step-range step --steps 3 > "$OUT/ddp_capture.txt" 2>&1
  dc=$?
  finish $run ddp
  cat "$OUT/ddp_capture.txt"
  ids=()
  for f in "$R3"/kprof.rank*.kprof; do ids+=("$(idx_ranges "$f" 1)"); done
  check ddp-same-steps "$([ $dc = 0 ] && [ ${#ids[@]} = 2 ] && [ "${ids[0]}" = "${ids[1]}" ] &&
    [ "$(echo "${ids[0]}" | grep -o idx | wc -l)" = 3 ]; echo $?)" "rank0: ${ids[0]:-} rank1: ${ids[1]:-}"
fi

if [ "${MEASURE:-0}" = 1 ]; then
  G=("$BUILD/kernels/graph_replay" 1000 100)
  us() { grep -o 'host_launch_us=[0-9.]*' | cut -d= -f2; }
  printf "round\tplain\ton_demand\tnvtx_never\n" > "$OUT/graph_dormant.tsv"
  printf "round\tplain_s\ton_demand_s\n" > "$OUT/storm.tsv"
  printf "round\tplain_ns\ton_demand_ns\tafter_windows_ns\n" > "$OUT/nvtx.tsv"
  printf "round\tplain\ton_demand\n" > "$OUT/graph_no_nvtx.tsv"
  for r in $(seq 1 "$ROUNDS"); do
    a=$("${G[@]}" | us)
    b=$("$K" run -o "$OUT/m/od$r" --force --quiet --calibrate off --on-demand -- "${G[@]}" 2>/dev/null | us)
    c=$("$K" run -o "$OUT/m/nn$r" --force --quiet --calibrate off --capture nvtx:never -- "${G[@]}" 2>/dev/null | us)
    printf "%s\t%s\t%s\t%s\n" "$r" "$a" "$b" "$c" >> "$OUT/graph_dormant.tsv"
    t0=$(date +%s.%N); "$BUILD/kernels/kernel_storm" 1000000 > /dev/null; t1=$(date +%s.%N)
    "$K" run -o "$OUT/m/st$r" --force --quiet --calibrate off --on-demand -- "$BUILD/kernels/kernel_storm" 1000000 > /dev/null 2>&1
    t2=$(date +%s.%N)
    awk -v r="$r" -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {printf "%s\t%.3f\t%.3f\n", r, b - a, c - b}' >> "$OUT/storm.tsv"
    p=$(ON_DEMAND_NVTX=1 "$S" 20 0 10 1 | grep -o 'nvtx_ns=[0-9.]*' | cut -d= -f2)
    o=$(ON_DEMAND_NVTX=1 "$K" run -o "$OUT/m/nv$r" --force --quiet --calibrate off --on-demand -- "$S" 20 0 10 1 2>/dev/null | grep -o 'nvtx_ns=[0-9.]*' | cut -d= -f2)
    # After windows: the process of check 1's kind, three windows, then its NVTX pairs.
    rm -rf "$OUT/m/aw$r"
    ON_DEMAND_NVTX=1 ON_DEMAND_TIMES="$OUT/m/aw${r}_times.txt" "$K" run -o "$OUT/m/aw$r" --quiet --calibrate off --on-demand -- "$S" 800 7 1000 5 > "$OUT/m/aw$r.log" 2>&1 &
    run=$!
    wait_agents "$OUT/m/aw$r" 1
    sleep 0.5
    for _ in 1 2 3; do "$K" capture "$OUT/m/aw$r" --timeout 20 --step-range step --steps 3 >> "$OUT/m/aw${r}_capture.txt" 2>&1; sleep 0.2; done
    finish $run aw$r
    # A process that never reaches NVTX: the graph launch dormant, plain and on demand.
    q=$(ON_DEMAND_NO_NVTX=1 "$S" 200 7 1000 1 | us)
    qo=$(ON_DEMAND_NO_NVTX=1 "$K" run -o "$OUT/m/nn2$r" --force --quiet --calibrate off --on-demand -- "$S" 200 7 1000 1 2>/dev/null | us)
    printf "%s\t%s\t%s\n" "$r" "$q" "$qo" >> "$OUT/graph_no_nvtx.tsv"
    aw=$(grep -o 'nvtx_after_ns=[0-9.]*' "$OUT/m/aw$r.log" | cut -d= -f2)
    printf "%s\t%s\t%s\t%s\n" "$r" "$p" "$o" "$aw" >> "$OUT/nvtx.tsv"
  done
  cat "$OUT/graph_dormant.tsv" "$OUT/graph_no_nvtx.tsv" "$OUT/storm.tsv" "$OUT/nvtx.tsv"
fi
echo "failures: $fails" | tee -a "$SUM"
[ "$fails" = 0 ]
