#!/usr/bin/env bash
# The run of 2026-11-26 (docs/benchmarks.md, "What sampling costs, and where", item 8), as carried
# to the H100 from .carry/ and run from the repository root: its output is 9-op-names-*.
# Where op names cost on the PyTorch loop: PyTorch's NVTX mode with no tool attached (kprof's
# layer on PYTHONPATH, NVTX calls going nowhere) against plain, kprof --pytorch off and kprof.
set -u
O=${OUT:-/tmp/out}
nvidia-smi -L > $O/head.txt
printf 'variant\tround\tloop_s\n' > $O/names.tsv
for round in 0 1 2 3 4; do
  for v in plain names-no-tool kprof-off kprof; do
    case $v in
      plain) pre=() ;;
      names-no-tool) pre=(env PYTHONPATH=build/python KPROF_PYTORCH=auto) ;;
      kprof-off) pre=(build/kprof run --quiet --force --pytorch off -o /tmp/nr) ;;
      kprof) pre=(build/kprof run --quiet --force -o /tmp/nr) ;;
    esac
    timeout 60 "${pre[@]}" python3 examples/train_mlp.py --steps 800 --warmup 3 > $O/n-$v-$round.log 2>&1
    [ $round = 0 ] && continue
    printf '%s\t%s\t%s\n' $v $round "$(grep -o 'loop_s=[0-9.]*' $O/n-$v-$round.log | cut -d= -f2)" >> $O/names.tsv
  done
done
grep -h "kprof.pytorch\|left off" $O/n-names-no-tool-1.log | head -3 >> $O/head.txt
cat $O/names.tsv >> $O/head.txt
tar -C $O -cJf $O/logs.tar.xz $(cd $O && ls n-*.log) && rm -f $O/n-*.log
