#!/usr/bin/env bash
# Issue 34, first look on one H200: the op observer built there and run (smoke, meta, the
# clock offset), the GPU tests of the PyTorch layer, and where kprof's tracing goes on the
# small decoder (scripts/pytorch_cost.sh, 3 rounds of every configuration).
mkdir -p .carry && rm -rf .carry/build && tar xJf .carry/b.txz -C .carry
ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPROF_CACHE_DIR=/tmp/kcache
R=$OUT/r; mkdir -p $R; s=$SECONDS
{ nvidia-smi -L; python3 -c "import torch,sys,sysconfig;print(torch.__version__, sys.executable, sysconfig.get_paths()['include'])"
  which c++ g++; c++ --version | head -1; ls /usr/local/cuda/include/nvtx3/nvToolsExt.h
  ls "$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/include" | head -40; } > $R/env.txt 2>&1
DEC=(python3 examples/zoo/nanogpt_train.py --layers 4 --width 512 --heads 8 --batch 16)
meta() { build/kprof export "$1" --sqlite /tmp/m.sqlite > /dev/null 2>&1
  python3 -c "import sqlite3;c=sqlite3.connect('/tmp/m.sqlite');[print(*r) for r in c.execute(\"select key,value from KPROF_META where key like 'op_%' or key like 'pytorch%' or key like 'self_cost%'\")]"; }
build/kprof run -o /tmp/obs -- "${DEC[@]}" --steps 5 > $R/smoke.txt 2>&1; echo "smoke rc=$? $((SECONDS-s))s" >> $R/log.txt
meta /tmp/obs >> $R/log.txt
KPROF_PYTORCH_OPS=nvtx build/kprof run -o /tmp/nv -- "${DEC[@]}" --steps 5 > $R/smoke_nvtx.txt 2>&1; echo "nvtx rc=$? $((SECONDS-s))s" >> $R/log.txt
ls /tmp/kcache/pytorch-ops/*/ >> $R/log.txt 2>&1; cat /tmp/kcache/pytorch-ops/*/*.failed >> $R/log.txt 2>&1
ctest --test-dir build -R "Gpu\.(PyTorch|TorchProfilerInside)" -j1 --timeout 300 --output-on-failure > $R/tests.txt 2>&1
echo "tests $((SECONDS-s))s" >> $R/log.txt
OUT=$R/cost scripts/pytorch_cost.sh build decoder_small 3 > /dev/null 2>&1
echo "cost $((SECONDS-s))s" >> $R/log.txt
tar czf $OUT/cost.tgz -C $R cost gpu-test-runs 2>/dev/null; tar czf $OUT/runs.tgz /tmp/obs /tmp/nv build/gpu-test-runs 2>/dev/null
cat $R/log.txt; grep -E "tests passed|Failed|\*\*\*" $R/tests.txt; cat $R/cost/decoder_small/summary.txt
head -40 $R/smoke.txt | cut -c1-160; grep -B3 -A12 "Failure" $R/tests.txt | head -80
