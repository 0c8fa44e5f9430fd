#!/usr/bin/env bash
# What PyTorch's op names cost under kprof, on a GPU machine (docs/benchmarks.md, "What sampling
# costs, and where", item 9): CUPTI's NVTX injection with marker records (kprof's default) and
# without them (--kinds without nvtx: the injection stays, no record is made), in
#  - scripts/nvtx_micro.py: 200,000 push/pop pairs from Python, one name for all and a name each;
#  - examples/train_mlp.py --steps 800 --warmup 3: the loop's time and the whole command's, a
#    round 0 uncounted, then ROUNDS interleaved rounds of plain, kprof --pytorch off, kprof and
#    kprof without marker records.
#   OUT=DIR scripts/nvtx_cost.sh [BUILD=build] [ROUNDS=4]
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${2:-4}
O=${OUT:-/tmp/nvtx-cost}
mkdir -p "$O"
K="$BUILD/kprof"
NON="kernel,memcpy,memset,sync,runtime,driver,memory,overhead"
nvidia-smi -L > "$O/head.txt"
git log --oneline -1 >> "$O/head.txt" 2>/dev/null
printf 'variant\tround\tmode\tns\n' > "$O/micro.tsv"
for round in $(seq 1 3); do
  for v in plain kprof kprof-nomarkers; do
    case $v in
      plain) pre=() ;;
      kprof) pre=("$K" run --quiet --force --pytorch off -o /tmp/nvtx-cost-m) ;;
      kprof-nomarkers) pre=("$K" run --quiet --force --pytorch off --kinds $NON -o /tmp/nvtx-cost-m) ;;
    esac
    timeout 120 "${pre[@]}" python3 scripts/nvtx_micro.py > "$O/m-$v-$round.log" 2>&1
    grep '^micro' "$O/m-$v-$round.log" | while read -r _ mode ns; do
      printf '%s\t%s\t%s\t%s\n' $v $round $mode $ns >> "$O/micro.tsv"
    done
  done
done
printf 'variant\tround\tloop_s\twall_s\n' > "$O/names.tsv"
for round in $(seq 0 "$ROUNDS"); do
  for v in plain kprof-off kprof kprof-nomarkers; do
    case $v in
      plain) pre=() ;;
      kprof-off) pre=("$K" run --quiet --force --pytorch off -o /tmp/nvtx-cost-n) ;;
      kprof) pre=("$K" run --quiet --force -o /tmp/nvtx-cost-n) ;;
      kprof-nomarkers) pre=("$K" run --quiet --force --kinds $NON -o /tmp/nvtx-cost-n) ;;
    esac
    s=$EPOCHREALTIME
    timeout 90 "${pre[@]}" python3 examples/train_mlp.py --steps 800 --warmup 3 > "$O/n-$v-$round.log" 2>&1
    e=$EPOCHREALTIME
    [ "$round" = 0 ] && continue
    printf '%s\t%s\t%s\t%s\n' $v $round "$(grep -o 'loop_s=[0-9.]*' "$O/n-$v-$round.log" | cut -d= -f2)" \
      "$(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.3f", b-a}')" >> "$O/names.tsv"
  done
done
python3 - "$O" <<'PY'
import collections, statistics as st, sys
d = sys.argv[1]
def rows(f):
    return [l.split('\t') for l in open(f"{d}/{f}").read().splitlines()[1:] if l]
m = collections.defaultdict(list)
for v, _, mode, ns in rows("micro.tsv"):
    m[(v, mode)].append(int(ns))
print("push+pop from Python, ns a pair (medians of 3; 'loop' is the Python loop alone)")
for (v, mode), xs in sorted(m.items()):
    print(f"  {v:16s} {mode:7s} {st.median(xs):6.0f}  runs {xs}")
n = collections.defaultdict(lambda: ([], []))
for v, _, lp, w in rows("names.tsv"):
    if lp:
        n[v][0].append(float(lp)); n[v][1].append(float(w))
b, bw = st.median(n["plain"][0]), st.median(n["plain"][1])
print("train_mlp.py --steps 800: loop and whole command, medians")
for v, (lp, w) in n.items():
    print(f"  {v:16s} loop {st.median(lp):.3f} s {st.median(lp)/b:.2f}x   whole {st.median(w):.3f} s "
          f"{st.median(w)/bw:.3f}x   loops {lp} wholes {w}")
PY
