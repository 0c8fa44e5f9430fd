#!/usr/bin/env bash
# Issue 34, third run on one H200 (dev02 ran out of its 600 s inside the decoder's rounds: each
# run took ~16 s there): the small decoder, plain / torch.profiler / kprof --pytorch off / kprof
# (observer), interleaved rounds until 330 s have passed (5 at most).
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
OUT=/tmp/c DEADLINE=330 scripts/pytorch_cost.sh build decoder_small 5 "plain profiler off auto" > $OUT/cost.log 2>&1
cp /tmp/c/decoder_small/summary.txt /tmp/c/decoder_small/runs.tsv $OUT/
tar czf $OUT/cost.tgz -C /tmp/c decoder_small
cat $OUT/summary.txt; tail -3 $OUT/cost.log
