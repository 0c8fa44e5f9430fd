#!/usr/bin/env bash
# The GPU suite on the final code.
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
ctest --test-dir build -L gpu -E "GpuCaptureFaults\.(CompiledReduceOverheadLoop|RandomWindows|MatrixOfWindowsAroundGraphs|DormantWindowBeforeTheContextOpensNothing)|GpuDistributed|GpuDoctor|GpuOnDemand|GpuMemory" -j1 --timeout 200 > $R/suite.txt 2>&1
echo "suite $((SECONDS-s))s" >> $R/suite.txt
tail -15 $R/suite.txt
