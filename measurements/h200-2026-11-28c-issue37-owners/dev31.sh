#!/usr/bin/env bash
# Issue 37: who made the DDP job's unowned memory (two GPUs).
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
nvidia-smi -L > $R/log.txt
python3 -c "import torch; print('nccl', torch.cuda.nccl.version())" >> $R/log.txt 2>&1
# 1. The zoo's 2-rank DDP job: owners of each rank's driver-level peak
build/kprof run -q -o /tmp/ddp2 -- python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/zoo/ddp_train.py --steps 5 > /tmp/ddp2.out 2>&1; echo "ddp2 rc=$?" >> $R/log.txt
python3 scripts/memory_check.py build/kprof /tmp/ddp2 > $R/ddp2_check.txt 2>&1; echo "check rc=$?" >> $R/ddp2_check.txt
build/kprof report --by memory /tmp/ddp2 > $R/ddp2_memory.txt 2>&1
build/kprof export /tmp/ddp2 --sqlite /tmp/ddp2.sqlite > /dev/null 2>&1
python3 scripts/probes/memory_unowned.py /tmp/ddp2.sqlite 300 > $R/ddp2_unowned.txt 2>&1
python3 - > $R/ddp2_calls.txt 2>&1 <<'PY'
import sqlite3
db = sqlite3.connect("/tmp/ddp2.sqlite")
names = dict(db.execute("SELECT id, value FROM StringIds"))
from collections import Counter
c = Counter()
for (n,) in db.execute("SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
    v = names.get(n, "?")
    if v.startswith("cuMem"): c[v] += 1
print(c)
PY
echo "ddp $((SECONDS-s))s" >> $R/log.txt
# 2. The GPU test of the same on the GPU tests' own DDP job
ctest --test-dir build -R "GpuDistributed.EveryRanksDriverLevelPeakHasAnOwner" -j1 --timeout 240 -V > /tmp/gd.txt 2>&1
grep -E "tests passed|Failed|pid .* rank|MiB|Failure|Expected|Which is|Passed|\*\*\*" /tmp/gd.txt | head -80 > $R/gpudist.txt
echo "gpudist $((SECONDS-s))s" >> $R/log.txt
cat $R/log.txt $R/ddp2_check.txt $R/ddp2_calls.txt $R/gpudist.txt; head -40 $R/ddp2_unowned.txt; grep -n "NCCL\|not recorded" $R/ddp2_memory.txt | head
# 3. fp32-optimizer-state against bf16 moments (one GPU), and the step-end fixture
ctest --test-dir build -R "GpuMemory.Fp32OptimizerState" -j1 --timeout 300 -V > /tmp/fp.txt 2>&1
grep -E "tests passed|Failed|\[ hint|Failure|Expected|Which is|Passed|\*\*\*|kprof|max_alloc" /tmp/fp.txt | head -40 > $R/fp32state.txt
echo "fp32 $((SECONDS-s))s" >> $R/log.txt
F=$R/fixtures; mkdir -p $F
build/kprof run --quiet -o $F/memory_torch_hold -- python3 tests/gpu/scripts/memory_train.py --steps 6 --hold > $F/hold.log 2>&1; echo "hold rc=$?" >> $R/log.txt
mv $F/hold.log $F/memory_torch_hold/program.log
du -sh $F/memory_torch_hold >> $R/log.txt
echo "end $((SECONDS-s))s" >> $R/log.txt
cat $R/fp32state.txt; tail -4 $R/log.txt
