#!/usr/bin/env bash
# Issue 37, the mapping call's caller over CUPTI's library and probes retried: two GPUs.
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
nvidia-smi -L > $R/log.txt
ctest --test-dir build -R "GpuDistributed.EveryRanksDriverLevelPeakHasAnOwner" -j1 --timeout 240 -V > /tmp/gd.txt 2>&1
grep -E "tests passed|Failed|pid .* rank|MiB|Failure|Expected|Which is|Passed|\*\*\*" /tmp/gd.txt | head -60 > $R/gpudist.txt
build/kprof run -q -o /tmp/ddp2 -- python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/zoo/ddp_train.py --steps 5 > /tmp/ddp2.out 2>&1; echo "ddp2 rc=$?" >> $R/log.txt
python3 scripts/memory_check.py build/kprof /tmp/ddp2 > $R/ddp2_check.txt 2>&1; echo "check rc=$?" >> $R/ddp2_check.txt
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True build/kprof run -q -o /tmp/exp -- python3 tests/gpu/scripts/memory_train.py --steps 4 > /tmp/exp.out 2>&1; echo "expandable rc=$?" >> $R/log.txt
python3 scripts/memory_check.py build/kprof /tmp/exp > $R/expandable_check.txt 2>&1; echo "check rc=$?" >> $R/expandable_check.txt
build/kprof report --by memory /tmp/exp > $R/expandable_memory.txt 2>&1
for z in nanogpt_train llama_train; do build/kprof run -q -o /tmp/$z -- python3 examples/zoo/$z.py > /tmp/$z.out 2>&1; echo "$z rc=$?" >> $R/log.txt; done
python3 scripts/memory_check.py build/kprof /tmp/nanogpt_train /tmp/llama_train > $R/zoo_check.txt 2>&1; echo "check rc=$?" >> $R/zoo_check.txt
echo "owners $((SECONDS-s))s" >> $R/log.txt
ctest --test-dir build -R GpuMemory -j1 --timeout 300 -V > /tmp/gm.txt 2>&1
grep -E "tests passed|Failed|\[ hint|\[ vmm|\[ expandable|\[ torch categories \] max|Failure|Expected|evaluates|Which is|Passed|\*\*\*|Test #" /tmp/gm.txt > $R/gpumemory.txt
echo "end $((SECONDS-s))s" >> $R/log.txt
cat $R/log.txt $R/gpudist.txt $R/ddp2_check.txt $R/expandable_check.txt $R/zoo_check.txt $R/gpumemory.txt | grep -v "Test command" | head -150; head -12 $R/expandable_memory.txt
