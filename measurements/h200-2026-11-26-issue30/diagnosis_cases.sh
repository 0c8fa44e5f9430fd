#!/usr/bin/env bash
# Diagnosis of issue 30 (not committed): which CUPTI sequence crashes graph launches.
cd "$(dirname "$0")/.."
B=build; K=$B/kprof; GW=$B/kernels/graph_windows
O=${OUT:-/tmp/out}; mkdir -p $O
nvidia-smi -L
run() {  # tag variant mode args... -- program...
  local tag=$1 var=$2 mode=$3; shift 3
  local d=/tmp/runs/$tag; rm -rf $d
  local t0=$(date +%s.%N)
  KPROF_EXP=$var KPROF_AGENT_BACKTRACE=1 timeout 60 $K run -o $d --quiet --graph-trace $mode "$@" >/tmp/o.txt 2>/tmp/e.txt
  local rc=$?
  local t1=$(date +%s.%N)
  local line=$(grep -h "graph_windows:\|graph_replay:\|compiled_infer" /tmp/o.txt /tmp/e.txt | head -2 | tr '\n' ' ')
  local err=$(grep -h "kprof agent\|kprof capture\|Segmentation\|signal" /tmp/e.txt | sort | uniq -c | head -4 | tr '\n' ';')
  local sm=$(python3 exp/summ.py $d $K 2>&1 | tail -1)
  printf "%-28s %-20s %-5s rc=%-3s %5.1fs | %s | %s | %s\n" "$tag" "$var" "$mode" "$rc" "$(echo "$t1-$t0"|bc)" "$line" "$sm" "$err" | tee -a $O/diag.txt
  if [ $rc -ge 128 ]; then echo "---- $tag stderr" >> $O/crash.txt; head -c 3000 /tmp/e.txt >> $O/crash.txt; fi
}
P="--nodes 20 --launches 60 --eager 50"
declare -A CASES=(
 [c1_ctx_eager]="--trigger api --open ctx --close eager"
 [c2_ctx_capture]="--trigger api --open ctx --close capture"
 [c3_ctx_captured]="--trigger api --open ctx --close captured"
 [c4_ctx_inst]="--trigger api --open ctx --close instantiated"
 [c5_ctx_l5]="--trigger api --open ctx --close launch:5"
 [c6_inst_l5]="--trigger api --open instantiated --close launch:5"
 [c7_l3_l8]="--trigger api --open launch:3 --close launch:8"
 [c8_l3_exit]="--trigger api --open launch:3 --close exit"
 [c9_cap_l5]="--trigger api --open capture --close launch:5"
 [n7_l3_l8]="--trigger nvtx --open launch:3 --close launch:8"
)
ORDER="c1_ctx_eager c2_ctx_capture c3_ctx_captured c4_ctx_inst c5_ctx_l5 c6_inst_l5 c7_l3_l8 c8_l3_exit c9_cap_l5 n7_l3_l8"
capopt() { case $1 in n*) echo "--capture nvtx:window";; *) echo "--capture cuda-profiler-api";; esac; }
echo "== plain" | tee -a $O/diag.txt
$GW $P --trigger api --open launch:3 --close launch:8 | tee -a $O/diag.txt
for var in base; do for mode in graph node; do
  for c in $ORDER; do run "$c" $var $mode $(capopt $c) -- $GW $P ${CASES[$c]}; done
  run t1_dur0.2 $var $mode --duration 0.2 -- $GW --nodes 20 --launches 400 --sleep-us 500
  run t2_dur0.05 $var $mode --duration 0.05 -- $GW --nodes 20 --launches 400 --sleep-us 500
  run t3_del.25_dur.05 $var $mode --delay 0.25 --duration 0.05 -- $GW --nodes 20 --launches 400 --sleep-us 500
  run t4_del.4_dur.1 $var $mode --delay 0.4 --duration 0.1 -- $GW --nodes 20 --launches 400 --sleep-us 500
done; done
for var in apiorder nodevgraph keepgraph keepgpu apiorder,nodevgraph; do for mode in graph node; do
  for c in c1_ctx_eager c4_ctx_inst c5_ctx_l5 c6_inst_l5 c7_l3_l8 n7_l3_l8; do run "$c" $var $mode $(capopt $c) -- $GW $P ${CASES[$c]}; done
  run t1_dur0.2 $var $mode --duration 0.2 -- $GW --nodes 20 --launches 400 --sleep-us 500
  run t3_del.25_dur.05 $var $mode --delay 0.25 --duration 0.05 -- $GW --nodes 20 --launches 400 --sleep-us 500
done; done
echo "== cost: 1000-node graph, 100 launches, host us per cudaGraphLaunch" | tee -a $O/diag.txt
GR="$B/kernels/graph_replay 1000 100"
for r in 1 2; do
  echo "plain: $($GR)" | tee -a $O/diag.txt
  for v in base nodevgraph nographcb keepgraph nodevgraph,nographcb; do
    run cost_delay600 $v graph --delay 600 -- $GR
  done
  run cost_whole base graph -- $GR
  run cost_whole nodevgraph graph -- $GR
done
