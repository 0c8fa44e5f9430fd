#!/usr/bin/env bash
mkdir -p .carry && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
nvidia-smi -L > $R/log.txt
# 1. GpuMemory (the planted hints, OOMs, categories)
ctest --test-dir build -R GpuMemory -j1 --timeout 200 --output-on-failure > /tmp/gm.txt 2>&1
grep -E "tests passed|Failed|\[ hint|Failure|Expected|evaluates|Which is|Passed|\*\*\*" /tmp/gm.txt > $R/gpumemory.txt
echo "gpumemory $((SECONDS-s))s" >> $R/log.txt
# 2. categories with windows: zoo training steps, memory_train, a 1-rank DDP job
rec() { n=$1; shift; build/kprof run -q -o /tmp/m_$n -- "$@" > /tmp/m_$n.out 2>&1; echo "$n rc=$?" >> $R/log.txt; }
rec nanogpt python3 examples/zoo/nanogpt_train.py --steps 10
rec llama python3 examples/zoo/llama_train.py --steps 10
rec memtrain python3 tests/gpu/scripts/memory_train.py --steps 8
rec ddp1 python3 examples/zoo/ddp_train.py --steps 3
python3 scripts/memory_check.py build/kprof /tmp/m_nanogpt /tmp/m_llama /tmp/m_memtrain /tmp/m_ddp1 > $R/memory_check.txt 2>&1; echo "check rc=$?" >> $R/memory_check.txt
for n in nanogpt llama ddp1; do echo "== $n"; build/kprof report /tmp/m_$n 2>&1 | sed -n '/^Device memory/,/^Top kernels/p'; build/kprof report /tmp/m_$n 2>&1 | grep -A6 "allocator-fragmentation\|activation-memory\|memory-leak"; done > $R/sections.txt
echo "categories $((SECONDS-s))s" >> $R/log.txt
# 3. cost: nanogpt, 5 interleaved rounds
OUT=/tmp/cost scripts/zoo_cost.sh build/kprof nanogpt_train 5 "notorchmem default" 2> /dev/null
cat /tmp/cost/*/summary.txt /tmp/cost/*/runs.tsv > $R/cost_a.txt
echo "done $((SECONDS-s))s" >> $R/log.txt
cat $R/log.txt $R/gpumemory.txt $R/memory_check.txt $R/cost_a.txt
