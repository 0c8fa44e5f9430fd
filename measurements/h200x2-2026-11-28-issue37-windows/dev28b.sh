#!/usr/bin/env bash
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
build/kprof run -q -o /tmp/ddp2 -- python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/zoo/ddp_train.py --steps 5 > /tmp/ddp2.txt 2>&1; echo "ddp2 rc=$?" >> $R/log.txt
python3 scripts/memory_check.py build/kprof /tmp/ddp2 > $R/ddp2_check.txt 2>&1; echo "check rc=$?" >> $R/ddp2_check.txt; build/kprof report --by memory /tmp/ddp2 2>&1 | head -40 > $R/ddp2_report.txt
ctest --test-dir build -L gpu -E "GpuCaptureFaults\.(CompiledReduceOverheadLoop|RandomWindows|MatrixOfWindowsAroundGraphs|DormantWindowBeforeTheContextOpensNothing)|GpuDistributed|GpuDoctor|GpuOnDemand|GpuMemory" -j1 --timeout 200 > /tmp/suite.txt 2>&1
grep -E "tests passed|\*\*\*|Failed" /tmp/suite.txt > $R/suite.txt; tail -40 /tmp/suite.txt >> $R/suite.txt
echo "suite $((SECONDS-s))s" >> $R/log.txt
OUT=/tmp/cost2 TIMEOUT=120 scripts/zoo_cost.sh build/kprof llama_train 3 "notorchmem default" 2> /dev/null
cat /tmp/cost2/*/summary.txt /tmp/cost2/*/runs.tsv > $R/cost_b.txt
echo "done $((SECONDS-s))s" >> $R/log.txt
cat $R/log.txt $R/ddp2_check.txt; grep -E "tests passed|\*\*\*" $R/suite.txt; cat $R/cost_b.txt
