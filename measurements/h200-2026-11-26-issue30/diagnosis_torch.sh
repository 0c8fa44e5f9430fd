#!/usr/bin/env bash
# Diagnosis part 2 (torch.compile reduce-overhead loop).
cd "$(dirname "$0")/.."
B=build; K=$B/kprof
O=${OUT:-/tmp/out}; mkdir -p $O
export PYTHONUNBUFFERED=1
PY=/opt/torch/.venv/bin/python3; [ -x $PY ] || PY=python3
S=tests/gpu/scripts/compiled_infer.py
run() {
  local tag=$1 var=$2 mode=$3; shift 3
  local d=/tmp/runs/$tag; rm -rf $d
  local t0=$(date +%s.%N)
  KPROF_EXP=$var KPROF_AGENT_BACKTRACE=1 KPROF_CAPTURE_DEBUG=1 timeout 240 $K run -o $d --quiet --graph-trace $mode "$@" >/tmp/o.txt 2>/tmp/e.txt
  local rc=$?
  local t1=$(date +%s.%N)
  local line=$(grep -h "compiled_infer" /tmp/o.txt /tmp/e.txt | head -2 | tr '\n' ' ')
  local err=$(grep -h "kprof agent\|Segmentation\|signal" /tmp/e.txt | sort | uniq -c | head -4 | tr '\n' ';')
  local cap=$(grep -h "kprof capture" /tmp/e.txt | head -3 | tr '\n' ';')
  local sm=$(python3 exp/summ.py $d $K 2>&1 | tail -1)
  printf "%-22s %-18s %-5s rc=%-3s %5.1fs | %s | %s | %s | %s\n" "$tag" "$var" "$mode" "$rc" "$(echo "$t1-$t0"|bc)" "$line" "$sm" "$err" "$cap" | tee -a $O/diag2.txt
  if [ $rc -ge 128 ]; then echo "---- $tag $var stderr" >> $O/crash2.txt; tail -c 4000 /tmp/e.txt >> $O/crash2.txt; fi
}
t0=$(date +%s); $PY $S 300 | tee -a $O/diag2.txt; echo "plain (cold compile) $(( $(date +%s)-t0 ))s" | tee -a $O/diag2.txt
t0=$(date +%s); $PY $S 300 | tee -a $O/diag2.txt; echo "plain (warm) $(( $(date +%s)-t0 ))s" | tee -a $O/diag2.txt
run whole base graph -- $PY $S 300
run nvtx50 base graph --capture nvtx:iter --capture-count 50 -- $PY $S 300
for v in ${VARS:-keepgraph keepgpu nodevgraph apiorder}; do
  run nvtx50 $v graph --capture nvtx:iter --capture-count 50 -- $PY $S 300
done
run delay_dur base graph --delay 12 --duration 1 -- $PY $S 30000
run delay_dur keepgpu graph --delay 12 --duration 1 -- $PY $S 30000
