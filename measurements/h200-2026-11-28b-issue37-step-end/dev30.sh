#!/usr/bin/env bash
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
nvidia-smi -L > $R/log.txt
# 1. A 2-rank DDP job: categories vs PyTorch's peaks, owners of the driver-level peak
build/kprof run -q -o /tmp/ddp2 -- python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/zoo/ddp_train.py --steps 5 > /tmp/ddp2.out 2>&1; echo "ddp2 rc=$?" >> $R/log.txt
python3 scripts/memory_check.py build/kprof /tmp/ddp2 > $R/ddp2_check.txt 2>&1; echo "check rc=$?" >> $R/ddp2_check.txt
build/kprof report --by memory /tmp/ddp2 > $R/ddp2_memory.txt 2>&1
build/kprof report /tmp/ddp2 2>&1 | grep -A7 "memory-leak\|allocator-fragmentation\|activation-memory\|fp32-optimizer-state\|held-across-steps" > $R/ddp2_hints.txt
echo "ddp $((SECONDS-s))s" >> $R/log.txt
# 2. GpuMemory on the final code
ctest --test-dir build -R GpuMemory -j1 --timeout 200 -V > /tmp/gm.txt 2>&1
grep -E "tests passed|Failed|\[ hint|\[ torch categories \] max|Failure|Expected|evaluates|Which is|Passed|\*\*\*|Test #" /tmp/gm.txt > $R/gpumemory.txt
echo "gpumemory $((SECONDS-s))s" >> $R/log.txt
cat $R/log.txt $R/ddp2_check.txt $R/gpumemory.txt; grep -n "not recorded" $R/ddp2_memory.txt | head
