#!/usr/bin/env bash
# What kprof's counters cost on a zoo workload, measured alone (issue 32's acceptance: replay
# <= 2x the program alone, sampling <= 1.1x kprof without counters). ROUNDS interleaved rounds,
# each running, one after the other and never beside anything else:
#   plain    the command alone
#   default  kprof run -q (no counters)
#   sampled  kprof run -q --metrics sampled
#   replay   kprof run -q --metrics replay
#   nosource kprof run -q with KPROF_ALLOC_SOURCE=0 (no allocating library: what it costs)
#   notorchmem kprof run -q with KPROF_PYTORCH_MEMORY=0 (no PyTorch memory categories)
# and per run the whole command's wall seconds and the loop_s the workload prints (its measured
# steps). Then per configuration the medians, and their ratios to plain and to default.
#   OUT=DIR scripts/zoo_cost.sh KPROF WORKLOAD [ROUNDS=5] [CONFIGS="plain default sampled replay"]
# WORKLOAD: a name in examples/zoo/workloads.txt (ZOO= to use another file). Results:
# DIR/WORKLOAD/CONFIG.rN.{out,err,rc,wall}, DIR/WORKLOAD/runs.tsv and DIR/WORKLOAD/summary.txt.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
[ $# -ge 2 ] || { echo "usage: OUT=DIR $0 KPROF WORKLOAD [ROUNDS] [CONFIGS]" >&2; exit 2; }
KPROF=$1
NAME=$2
ROUNDS=${3:-5}
CONFIGS=${4:-plain default sampled replay}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZOO=${ZOO:-$ROOT/examples/zoo/workloads.txt}
case $KPROF in */*) KPROF=$(cd "$(dirname "$KPROF")" && pwd)/$(basename "$KPROF") ;; esac
[ -x "$KPROF" ] || { echo "$KPROF: not executable" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer: $ROUNDS" >&2; exit 2; }
cmd=$(awk -F'\t' -v w="$NAME" '$1 == w { print $3 }' "$ZOO")
[ -n "$cmd" ] || { echo "$NAME: not in $ZOO" >&2; exit 2; }
read -r -a argv <<< "$cmd"
mkdir -p "$OUT/$NAME"
D=$(cd "$OUT/$NAME" && pwd)
cd "$ROOT" || exit 2
TSV=$D/runs.tsv
printf 'config\tround\trc\twall_s\tloop_s\n' > "$TSV"
for ((r = 1; r <= ROUNDS; ++r)); do
  for c in $CONFIGS; do
    case $c in
      plain) pre=() ;;
      default) pre=("$KPROF" run -q --force -o "/tmp/zoo_cost.$$" --) ;;
      sampled) pre=("$KPROF" run -q --force --metrics sampled -o "/tmp/zoo_cost.$$" --) ;;
      replay) pre=("$KPROF" run -q --force --metrics replay -o "/tmp/zoo_cost.$$" --) ;;
      nosource) pre=(env KPROF_ALLOC_SOURCE=0 "$KPROF" run -q --force -o "/tmp/zoo_cost.$$" --) ;;
      notorchmem) pre=(env KPROF_PYTORCH_MEMORY=0 "$KPROF" run -q --force -o "/tmp/zoo_cost.$$" --) ;;
      *) echo "unknown configuration: $c" >&2; exit 2 ;;
    esac
    s=$(date +%s.%N)
    timeout -k 30 "${TIMEOUT:-300}" "${pre[@]}" "${argv[@]}" > "$D/$c.r$r.out" 2> "$D/$c.r$r.err"
    rc=$?
    wall=$(awk -v a="$(date +%s.%N)" -v b="$s" 'BEGIN { printf "%.3f", a - b }')
    loop=$(grep -o 'loop_s=[0-9.]*' "$D/$c.r$r.out" | tail -n 1 | cut -d= -f2)
    echo "$rc" > "$D/$c.r$r.rc"
    echo "$wall" > "$D/$c.r$r.wall"
    printf '%s\t%s\t%s\t%s\t%s\n' "$c" "$r" "$rc" "$wall" "${loop:-}" >> "$TSV"
    rm -rf "/tmp/zoo_cost.$$"
    echo "[cost] $NAME $c r$r: rc=$rc wall ${wall}s loop_s=${loop:-?}" >&2
  done
done
python3 - "$TSV" "$NAME" > "$D/summary.txt" << 'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
by = {}
for c, r, rc, wall, loop in rows:
    if rc != "0":
        by.setdefault(c, {}).setdefault("failed", []).append(r)
        continue
    d = by.setdefault(c, {})
    d.setdefault("wall", []).append(float(wall))
    if loop:
        d.setdefault("loop", []).append(float(loop))
med = {c: {k: statistics.median(v) for k, v in d.items() if k != "failed" and v} for c, d in by.items()}
print(f"{sys.argv[2]}: medians of {max(len(d.get('wall', [])) for d in by.values())} rounds")
print(f"{'config':8} {'wall_s':>8} {'loop_s':>8} {'wall/plain':>10} {'loop/plain':>10} {'wall/default':>12} {'loop/default':>12}  failed")
for c, m in med.items():
    def ratio(k, base):
        b = med.get(base, {}).get(k)
        return f"{m[k] / b:.2f}x" if k in m and b else "-"
    print(f"{c:8} {m.get('wall', float('nan')):8.2f} {m.get('loop', float('nan')):8.3f} "
          f"{ratio('wall', 'plain'):>10} {ratio('loop', 'plain'):>10} {ratio('wall', 'default'):>12} "
          f"{ratio('loop', 'default'):>12}  {','.join(by[c].get('failed', [])) or '-'}")
EOF
cat "$D/summary.txt"
