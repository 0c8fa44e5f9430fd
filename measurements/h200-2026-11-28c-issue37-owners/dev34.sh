#!/usr/bin/env bash
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True KPROF_DEBUG_CALLERS=1 build/kprof run -q -o /tmp/exp -- python3 tests/gpu/scripts/memory_train.py --steps 2 > $R/exp.txt 2>&1
grep kprof-debug $R/exp.txt | sed 's/corr [0-9]*//; s/bytes [0-9]*/bytes N/' | sort | uniq -c | sort -rn > $R/exp_uniq.txt
KPROF_DEBUG_CALLERS=1 build/kprof run -q -o /tmp/vmm -- build/kernels/vmm_owner 4 10 > $R/vmm.txt 2>&1
grep kprof-debug $R/vmm.txt | sed 's/corr [0-9]*//' | sort | uniq -c | sort -rn > $R/vmm_uniq.txt
wc -l $R/*.txt; cut -c1-1500 $R/exp_uniq.txt | head -30; cut -c1-1200 $R/vmm_uniq.txt | head -10
