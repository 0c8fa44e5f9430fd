#!/usr/bin/env bash
# Start-up and re-attachment cases of on-demand capture (docs/capture.md "On demand"), one line
# each in OUT/probe.txt: where the window was asked for, kprof run's exit status, kprof capture's
# answer, the program's last error line. Needs a GPU (exit 77 without one).
#   scripts/on_demand_probe.sh OUT [BUILD=build] [ROUNDS=3]
#   startup-init         a duration window asked for 0.3 s after the agent is there (while CUDA
#                        may still be initialising)
#   startup-capture      ... half-way through the graph's stream capture (2 s after start)
#   startup-instantiate  ... between the capture and the instantiation
#   startup-steps        a step window asked for during the capture (CUPTI attaches there, the
#                        window opens at a later step)
#   startup-now          a duration window asked for as soon as the process is there
#   detach-nograph       a program without graphs (CUPTI detached after each window, the
#                        default): three windows of 0.2 s in a row
#   detach-steps         the same, windows of 5 steps, 0.2 s and 3 steps
#   graph-detach         a program with graphs: CUPTI detached after each window too (the GPU
#                        work's records held on until the detachment)
#   nohold               KPROF_ON_DEMAND_DETACH=nohold: those records switched off as each window
#                        closes (docs/capture.md: the graph's next launch after detaching faults)
#                        (docs/capture.md: the next launch of the graph faults)
# Then dormant.tsv: ROUNDS interleaved rounds of on_demand_steps (NVTX on) plain and under
# --on-demand never asked: the host time of a 1000-node graph launch and of an NVTX push+pop.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: on_demand_probe.sh OUT [BUILD] [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-3}
. scripts/on_demand_lib.sh
P="$OUT/probe.txt"
: > "$P"
line() {  # line NAME RC
  printf "%s\trun=%s\tcapture=[%s]\tprogram=[%s]\n" "$1" "$2" \
    "$(tr '\n' ' ' < "$OUT/$1_capture.txt")" "$(grep -v '^kprof' "$OUT/$1_run.log" | tail -2 | tr '\n' ' ')" | tee -a "$P"
}
startup() {  # startup NAME PAUSE PAUSE_MS WAIT_S CAPTURE-ARGS...
  local name=$1 pause=$2 pause_ms=$3 wait_s=$4; shift 4
  local R="$OUT/$name"
  rm -rf "$R"
  ON_DEMAND_PAUSE=$pause ON_DEMAND_PAUSE_MS=$pause_ms "$K" run -o "$R" --quiet --calibrate off --on-demand -- \
    "$S" 200 7 1000 5 > "$OUT/${name}_run.log" 2>&1 &
  local run=$!
  wait_agents "$R" 1
  sleep "$wait_s"
  "$K" capture "$R" --timeout 30 "$@" > "$OUT/${name}_capture.txt" 2>&1
  finish $run "$name"
  line "$name" $?
}
startup startup-init capture 1500 0.3 --duration 0.3
startup startup-capture capture 5000 2 --duration 0.3
startup startup-instantiate instantiate 5000 2 --duration 0.3
startup startup-steps capture 5000 2 --step-range step --steps 3
for i in 1 2 3; do startup startup-now$i none 0 0 --duration 0.3; done
detach() {  # detach NAME STEPS? [ENV...]
  local name=$1 steps=$2; shift 2
  local R="$OUT/$name"
  rm -rf "$R"
  env "$@" ON_DEMAND_TIMES="$OUT/${name}_times.txt" "$K" run -o "$R" --quiet \
    --calibrate off --on-demand -- "$S" 800 7 1000 5 > "$OUT/${name}_run.log" 2>&1 &
  local run=$!
  wait_agents "$R" 1
  sleep 1
  : > "$OUT/${name}_capture.txt"
  for w in 1 2 3; do
    local args=(--duration 0.2)
    [ "$steps" = steps ] && [ $w = 1 ] && args=(--step-range step --steps 5)
    [ "$steps" = steps ] && [ $w = 3 ] && args=(--step-range step --steps 3)
    "$K" capture "$R" --timeout 20 "${args[@]}" >> "$OUT/${name}_capture.txt" 2>&1
    echo "exit=$?" >> "$OUT/${name}_capture.txt"
    sleep 0.7
  done
  finish $run "$name"
  line "$name" $?
}
for i in 1 2; do
  detach detach-nograph$i - ON_DEMAND_NO_GRAPH=1
  detach detach-steps$i steps ON_DEMAND_NO_GRAPH=1
  detach graph-detach$i - ON_DEMAND_UNUSED=1
  detach nohold$i - KPROF_ON_DEMAND_DETACH=nohold
done
f() { grep -o "$1=[0-9.]*" | cut -d= -f2; }
printf "round\tplain_launch_us\tdormant_launch_us\tplain_nvtx_ns\tdormant_nvtx_ns\n" > "$OUT/dormant.tsv"
for r in $(seq 1 "$ROUNDS"); do
  a=$(ON_DEMAND_NVTX=1 "$S" 300 7 1000 2 2>/dev/null)
  b=$(ON_DEMAND_NVTX=1 "$K" run -o "$OUT/dormant$r" --force --quiet --calibrate off --on-demand -- "$S" 300 7 1000 2 2>/dev/null)
  printf "%s\t%s\t%s\t%s\t%s\n" "$r" "$(echo "$a" | f host_launch_us)" "$(echo "$b" | f host_launch_us)" \
    "$(echo "$a" | f nvtx_ns)" "$(echo "$b" | f nvtx_ns)" >> "$OUT/dormant.tsv"
done
cat "$OUT/dormant.tsv"
exit 0
