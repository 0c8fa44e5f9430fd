#!/usr/bin/env bash
# Issue 11 acceptance: per-op GPU time inside train_step, plain `kprof run` (auto) against the
# script's own emit_nvtx(), 5 interleaved runs each (docs/benchmarks.md). On a GPU machine:
#   OUT=DIR scripts/pytorch_ops_parity.sh      then scripts/pytorch_ops_parity.py DIR
set -u
K=${K:-build/kprof}; MLP=examples/train_mlp.py; O=$OUT/cmp; mkdir -p $O
for i in 1 2 3 4 5; do
  $K run --quiet -o /tmp/a$i -- python3 $MLP > /dev/null 2>&1; echo "auto $i rc=$?"
  $K report /tmp/a$i --by range-path --format json --no-hints > $O/auto_$i.json
  $K run --quiet --pytorch off -o /tmp/e$i -- python3 $MLP --emit-nvtx > /dev/null 2>&1; echo "emit $i rc=$?"
  $K report /tmp/e$i --by range-path --format json --no-hints > $O/emit_$i.json
done
ls -la $O
