# Shared by scripts/on_demand_check.sh, on_demand_nccl.sh and on_demand_probe.sh (sourced once OUT
# and BUILD are set): the programs, the GPU's presence (exit 77 without one), the waits, and the
# checks' summary (OUT/summary.txt, a line "PASS|FAIL what" each, the failures counted in fails).
K="$BUILD/kprof"
S="$BUILD/kernels/on_demand_steps"
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mkdir -p "$OUT"
GDB=$(command -v gdb || command -v cuda-gdb || echo gdb)
# finish PID NAME: kprof run's status once it ends (60 s at most); a hang leaves the threads'
# stacks in OUT/NAME_stacks.txt, is killed, and says so (also into HANG_LOG when set): 124.
finish() {
  for _ in $(seq 1 600); do kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }; sleep 0.1; done
  for p in $(pgrep -P "$1"); do
    { echo "== $p"; tr '\0' ' ' < "/proc/$p/cmdline"; echo
      "$GDB" -batch -p "$p" -ex "thread apply all bt" 2>&1 | grep -v "^\[New LWP" | head -300; } >> "$OUT/$2_stacks.txt"
    kill -9 "$p"
  done
  wait "$1"
  echo "HANG $2 (stacks in $2_stacks.txt)" | tee -a "${HANG_LOG:-/dev/null}"
  return 124
}
# wait_agents RUN N: until N processes of RUN are dormant (60 s at most; false then).
wait_agents() {
  for _ in $(seq 1 3000); do
    [ "$(grep -l 'state=dormant' "$1"/control/*.agent 2>/dev/null | wc -l)" -ge "$2" ] && return 0
    sleep 0.02
  done
  return 1
}
SUM="$OUT/summary.txt"
fails=0
check() {  # check NAME CONDITION-RESULT(0/1) DETAIL
  if [ "$2" = 0 ]; then echo "PASS $1 $3" | tee -a "$SUM"; else
    echo "FAIL $1 $3" | tee -a "$SUM"; fails=$((fails + 1)); fi
}
idx_ranges() {  # idx_ranges FILE WINDOW: the "idx N" range names of that window, sorted
  "$K" report "$1" --window "$2" --by range-path --format csv --top 0 --no-hints 2>/dev/null |
    grep -o 'idx [0-9]*' | sort -u | tr '\n' ' '
}
# start_ddp RUN STEPS LOG: a 2-rank DDP job (tests/gpu/scripts/ddp_steps.py; DDP_BACKEND as
# exported) under kprof run --on-demand in the background, its pid in `run`, once both ranks are
# dormant and a few seconds on (PyTorch's import and the process group).
start_ddp() {
  rm -rf "$1"
  "$K" run -o "$1" --quiet --calibrate off --pytorch off --on-demand -- \
    python3 tests/gpu/scripts/ddp_steps.py "$2" > "$3" 2>&1 &
  run=$!
  wait_agents "$1" 2
  sleep 8
}
