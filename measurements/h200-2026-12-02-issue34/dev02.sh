#!/usr/bin/env bash
# Issue 34, second run on one H200: compiled code's ranges under the observer (ITT state at the
# first torch.compile), the observer's op parity with NVTX mode, then the cost on the small
# decoder (every configuration that counts, 5 rounds, with the --capture window for the parity
# with torch.profiler's key_averages) and on nanoGPT (4 configurations, 5 rounds).
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
python3 -c "import torch; print('itt', torch._C._itt.is_available())" > $R/log.txt 2>&1
ctest --test-dir build -R "Gpu\.(PyTorchCompiledRegionsAndSourceLines|PyTorchOpObserverNamesTheOpsOfNvtxMode)" -j1 --timeout 300 --output-on-failure > $R/tests.txt 2>&1
echo "tests $((SECONDS-s))s" >> $R/log.txt
OUT=$R/cost scripts/pytorch_cost.sh build decoder_small 5 "plain profiler floor off auto window" > /dev/null 2>&1
echo "decoder $((SECONDS-s))s" >> $R/log.txt
python3 scripts/pytorch_ops_parity_kineto.py $R/cost/decoder_small > $R/parity.txt 2>&1; echo "parity rc=$?" >> $R/log.txt
OUT=$R/cost scripts/pytorch_cost.sh build nanogpt_train 5 "plain profiler off auto" > /dev/null 2>&1
echo "nanogpt $((SECONDS-s))s" >> $R/log.txt
tar czf $OUT/cost.tgz -C $R cost; tar czf $OUT/runs.tgz build/gpu-test-runs/pytorch_compile build/gpu-test-runs/pytorch_stack 2>/dev/null
cat $R/log.txt; grep -E "tests passed|Failed|\*\*\*" $R/tests.txt; grep -B3 -A14 "Failure" $R/tests.txt | head -50
cat $R/cost/decoder_small/summary.txt $R/cost/nanogpt_train/summary.txt; head -3 $R/parity.txt; grep -E "APART|agree|all ops" $R/parity.txt | head -30
