#!/usr/bin/env bash
# The final code: the expandable-segments test, then the GPU suite.
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
ctest --test-dir build -R "GpuMemory.(Expandable|VirtualMemory)" -j1 --timeout 200 -V > /tmp/ge.txt 2>&1
grep -E "tests passed|Failed|\[ expandable|\[ vmm|Failure|Expected|Which is|Passed|\*\*\*" /tmp/ge.txt > $R/expandable_test.txt
ctest --test-dir build -L gpu -E "GpuCaptureFaults\.(CompiledReduceOverheadLoop|RandomWindows|MatrixOfWindowsAroundGraphs|DormantWindowBeforeTheContextOpensNothing)|GpuDistributed|GpuDoctor|GpuOnDemand|GpuMemory" -j1 --timeout 200 > $R/suite.txt 2>&1
echo "end $((SECONDS-s))s" >> $R/suite.txt
cat $R/expandable_test.txt; grep -E "tests passed|\(Failed\)|Timeout" $R/suite.txt; tail -2 $R/suite.txt
