#!/usr/bin/env bash
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
nvidia-smi -L > $R/log.txt; git log --oneline -1 >> $R/log.txt 2>/dev/null
# 1. GpuMemory
ctest --test-dir build -R GpuMemory -j1 --timeout 200 -V > /tmp/gm.txt 2>&1
grep -E "tests passed|Failed|\[ hint|\[ step end|\[ torch categories \] max|Failure|Expected|evaluates|Which is|Passed|\*\*\*|Test #" /tmp/gm.txt > $R/gpumemory.txt
echo "gpumemory $((SECONDS-s))s" >> $R/log.txt
# 2. DDP on 2 GPUs, zoo training steps: categories, owners, step end, hints
rec() { n=$1; shift; build/kprof run -q -o /tmp/m_$n -- "$@" > /tmp/m_$n.out 2>&1; echo "$n rc=$?" >> $R/log.txt; }
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then rec ddp2 python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/zoo/ddp_train.py --steps 5; else rec ddp2 python3 examples/zoo/ddp_train.py --steps 3; fi
rec nanogpt python3 examples/zoo/nanogpt_train.py --steps 10
rec llama python3 examples/zoo/llama_train.py --steps 10
rec memtrain python3 tests/gpu/scripts/memory_train.py --steps 8
rec hold python3 tests/gpu/scripts/memory_train.py --steps 6 --hold
python3 scripts/memory_check.py build/kprof /tmp/m_ddp2 /tmp/m_nanogpt /tmp/m_llama /tmp/m_memtrain > $R/memory_check.txt 2>&1; echo "check rc=$?" >> $R/memory_check.txt
for n in ddp2 nanogpt llama memtrain hold; do echo "== $n"; build/kprof report /tmp/m_$n > /tmp/rep_$n.txt 2>&1; sed -n '/^Device memory/,/^Top kernels/p' /tmp/rep_$n.txt; grep -B1 -A7 "memory-leak\|allocator-fragmentation\|activation-memory\|fp32-optimizer-state\|held-across-steps" /tmp/rep_$n.txt; done > $R/sections.txt
build/kprof report --by memory /tmp/m_ddp2 > $R/ddp2_memory.txt 2>&1
echo "zoo $((SECONDS-s))s" >> $R/log.txt
cat $R/log.txt $R/gpumemory.txt $R/memory_check.txt
