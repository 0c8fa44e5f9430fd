#!/usr/bin/env bash
# Does a program that launches CUDA graphs get its own speed back after kprof's windows? (issue 35;
# docs/capture.md "On demand", docs/benchmarks.md "After windows, with graphs".) ROUNDS
# interleaved rounds of kernels/on_demand_steps 300 7 1000 1 (each step 7 kernels and one launch
# of a 1000-node graph): plain; under --capture nvtx:step --capture-count 3 (dormant: windows at
# steps 0-2, CUPTI detached after each); and the same with KPROF_ON_DEMAND_DETACH=0 (CUPTI stays
# attached after the windows). Per run, the median host time of the graph launch (the
# cudaGraphLaunch call alone) over steps 20 and later, and the exit status: OUT/after.tsv, then
# the medians over the rounds. Needs a GPU; exit 77 without one.
#   scripts/graph_after_windows.sh OUT [BUILD=build] [ROUNDS=9]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: graph_after_windows.sh OUT [BUILD] [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-9}
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mkdir -p "$OUT/runs"
K="$BUILD/kprof"
P=("$BUILD/kernels/on_demand_steps" 300 7 1000 1)
after() {  # after TIMES: the median graph launch time over steps 20 and later
  awk '$1 >= 20 {print $2}' "$1" | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
printf "round\tplain_us\tdetached_us\tattached_us\tdetached_rc\tattached_rc\n" > "$OUT/after.tsv"
for r in $(seq 1 "$ROUNDS"); do
  ON_DEMAND_TIMES="$OUT/runs/p$r.txt" "${P[@]}" > /dev/null 2>&1
  ON_DEMAND_TIMES="$OUT/runs/d$r.txt" "$K" run -o "$OUT/runs/d$r" --force --quiet --calibrate off \
    --capture nvtx:step --capture-count 3 -- "${P[@]}" > "$OUT/runs/d$r.log" 2>&1
  d=$?
  KPROF_ON_DEMAND_DETACH=0 ON_DEMAND_TIMES="$OUT/runs/a$r.txt" "$K" run -o "$OUT/runs/a$r" --force \
    --quiet --calibrate off --capture nvtx:step --capture-count 3 -- "${P[@]}" > "$OUT/runs/a$r.log" 2>&1
  a=$?
  printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$(after "$OUT/runs/p$r.txt")" "$(after "$OUT/runs/d$r.txt")" \
    "$(after "$OUT/runs/a$r.txt")" "$d" "$a" >> "$OUT/after.tsv"
done
python3 - "$OUT/after.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
med = {}
for i, name in enumerate(rows[0][1:4], 1):
    v = [float(r[i]) for r in rows[1:] if r[i]]
    med[name] = statistics.median(v) if v else float("nan")
    print(f"{name}: median {med[name]:.2f} us over {len(v)} rounds (min {min(v):.2f}, max {max(v):.2f})" if v else f"{name}: none")
fails = sum(1 for r in rows[1:] if r[4] != "0")
print(f"detached/plain {med['detached_us'] / med['plain_us']:.2f}x; attached/plain "
      f"{med['attached_us'] / med['plain_us']:.2f}x; detached runs that failed: {fails}")
PY
