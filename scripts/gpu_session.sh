#!/usr/bin/env bash
# Everything that needs the GPU, in one batch (device time is scarce): the GPU test suite, the
# fixture recordings, the CI-regression acceptance (kprof diff), the agent overhead benchmark and
# an nsys comparison. Writes logs and a tarball of recordings under OUT.
#   scripts/gpu_session.sh OUT [BUILD_DIR=build] [STEPS="tests fixtures diff bench nsys"]
# Each step has its own time limit so that one failure does not cost the others.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_session.sh OUT [BUILD_DIR] [STEPS]}
BUILD=${2:-build}
STEPS=${3:-"tests fixtures diff bench nsys demo"}  # also: default, outputs, experiments
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
ROOT=$PWD
# The test binaries were configured at /work/main; make that path valid here.
if [ "$ROOT" != /work/main ] && [ ! -e /work/main ]; then
  mkdir -p /work && ln -sfn "$ROOT" /work/main
fi
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
{
  nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())'
} > "$OUT/env.txt" 2>&1

step() { [[ " $STEPS " == *" $1 "* ]]; }

if step tests; then
  rm -f "$BUILD/gpu-test-runs/fault-matrix.txt"
  timeout 480 ctest --test-dir "$BUILD" -L gpu --output-on-failure -j1 > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests: rc=$?" | tee -a "$OUT/summary.txt"
  tail -n 25 "$OUT/gpu_tests.log" >> "$OUT/summary.txt"
  # The fault matrix's outcomes (tests/gpu/fault_test.cpp), for docs/reliability.md.
  cp "$BUILD/gpu-test-runs/fault-matrix.txt" "$OUT/" 2>/dev/null || true
fi

if step fixtures; then
  rm -rf tests/fixtures/gpu examples/default-run
  timeout 300 scripts/record_fixtures.sh "$BUILD" tests/fixtures/gpu > "$OUT/fixtures.log" 2>&1
  echo "fixtures: rc=$?" | tee -a "$OUT/summary.txt"
fi
if step fixtures || step default; then
  rm -rf examples/default-run
  mkdir -p examples tests/fixtures/gpu
  timeout 60 "$BUILD/kprof" run --quiet -o examples/default-run -- python3 examples/train_mlp.py \
    > "$OUT/default_run.log" 2>&1
  echo "default-run: rc=$?" | tee -a "$OUT/summary.txt"
  tar czf "$OUT/recordings.tgz" tests/fixtures/gpu examples/default-run 2>>"$OUT/summary.txt"
fi

if step diff; then
  D=/tmp/kprof-diff
  rm -rf "$D"
  {
    for side in base same; do
      "$BUILD/kprof" run --quiet --repeat 5 -o "$D/$side" -- "$BUILD/kernels/train_step" 50 0
    done
    "$BUILD/kprof" run --quiet --repeat 5 -o "$D/slow10" -- "$BUILD/kernels/train_step" 50 10
    echo "== kprof diff base same (expect exit 0)"
    "$BUILD/kprof" diff "$D/base" "$D/same"; echo "exit=$?"
    echo "== kprof diff base slow10 (expect exit 1, naming attention_like)"
    "$BUILD/kprof" diff "$D/base" "$D/slow10"; echo "exit=$?"
    "$BUILD/kprof" diff "$D/base" "$D/slow10" --format md; echo "exit=$?"
    echo "== kprof check against a budget written from base"
    "$BUILD/kprof" check "$D/base" --write-budget "$D/budget.json"; echo "exit=$?"
    "$BUILD/kprof" check "$D/same" --budget "$D/budget.json"; echo "exit=$?"
  } > "$OUT/diff.log" 2>&1
  grep -E "^(==|exit=)" "$OUT/diff.log" >> "$OUT/summary.txt"
fi

if step bench; then
  timeout 400 scripts/bench_overhead.sh "$BUILD" 1000000 5 /tmp/kprof-bench > "$OUT/bench.log" 2>&1
  echo "bench: rc=$?" | tee -a "$OUT/summary.txt"
  grep -vE "^run " "$OUT/bench.log" | tail -n 20 >> "$OUT/summary.txt"
fi

if step nsys; then
  NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -n 1)
  if [ -n "$NSYS" ]; then
    for i in 1 2 3; do
      "$BUILD/kernels/kernel_storm" 1000000 | grep wall_s | sed "s/^/plain $i /"
      timeout 120 "$NSYS" profile -t cuda --sample=none --cpuctxsw=none -o /tmp/nsys-storm-$i -f true \
        "$BUILD/kernels/kernel_storm" 1000000 2>&1 | grep wall_s | sed "s/^/nsys $i /"
      "$BUILD/kprof" run --quiet -o /tmp/kprof-nsys-$i --force -- "$BUILD/kernels/kernel_storm" 1000000 \
        | grep wall_s | sed "s/^/kprof $i /"
    done >> "$OUT/bench.log" 2>&1
  else
    echo "nsys not found" >> "$OUT/bench.log"
  fi
fi
if step demo; then
  # What a user sees: a crash keeps its partial results and its exit status; PyTorch with NVTX.
  {
    echo "== kprof run -- kernels/crash abort 50"
    "$BUILD/kprof" run --top 3 -o /tmp/kprof-demo-crash --force -- "$BUILD/kernels/crash" abort 50
    echo "exit=$?"
    echo "== kprof run -- python3 tests/gpu/scripts/torch_nvtx.py"
    "$BUILD/kprof" run --top 5 -o /tmp/kprof-demo-torch --force -- python3 tests/gpu/scripts/torch_nvtx.py
    echo "exit=$?"
  } > "$OUT/demo.log" 2>&1
  grep -E "^(==|exit=)" "$OUT/demo.log" >> "$OUT/summary.txt"
fi

if step outputs; then
  # HTML report and SQLite export of real runs (issue 9): a 1M-kernel run and the PyTorch
  # default run; times of `report --html` and `export --sqlite` (3 each); the nsys-schema kernel
  # query on kprof's export; and, if this nsys can export, the same query on nsys's own export of
  # the same program.
  O=/tmp/kprof-outputs
  rm -rf "$O"; mkdir -p "$O"
  TIMEFORMAT="%R"
  {
    echo "== kprof run --html -- kernel_storm 1000000"
    "$BUILD/kprof" run --quiet -o "$O/storm" --html "$O/storm.html" -- "$BUILD/kernels/kernel_storm" 1000000
    echo "exit=$?"
    ls -l "$O/storm" "$O/storm.html"
    for i in 1 2 3; do
      echo "report_html_s $i $( { time "$BUILD/kprof" report "$O/storm" --html "$O/storm.html" --force >/dev/null 2>&1; } 2>&1 )"
      rm -f "$O/storm.sqlite"
      echo "export_sqlite_s $i $( { time "$BUILD/kprof" export "$O/storm" --sqlite "$O/storm.sqlite" >/dev/null 2>&1; } 2>&1 )"
    done
    ls -l "$O/storm.sqlite"
    echo "== kprof run --html -- python3 examples/train_mlp.py"
    "$BUILD/kprof" run --quiet -o "$O/train" --html "$O/train.html" -- python3 examples/train_mlp.py
    echo "exit=$?"
    "$BUILD/kprof" export "$O/train" --sqlite "$O/train.sqlite"; echo "exit=$?"
    for db in "$O/storm.sqlite" "$O/train.sqlite"; do
      python3 scripts/nsys_kernel_summary.py "$db" > "$db.kernels.txt"; echo "query $db exit=$?"
      head -n 5 "$db.kernels.txt"
    done
    NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -n 1)
    if [ -n "$NSYS" ]; then
      echo "== nsys profile + export of kernel_storm 10000 (the same query on nsys's own export)"
      timeout 120 "$NSYS" profile -t cuda,nvtx --sample=none --cpuctxsw=none -o "$O/nsys-storm" -f true \
        "$BUILD/kernels/kernel_storm" 10000 > "$O/nsys.log" 2>&1; echo "nsys profile exit=$?"
      timeout 120 "$NSYS" export --type sqlite -o "$O/nsys-storm.sqlite" -f true "$O/nsys-storm.nsys-rep" \
        >> "$O/nsys.log" 2>&1; echo "nsys export exit=$?"
      tail -n 5 "$O/nsys.log"
      if [ -s "$O/nsys-storm.sqlite" ]; then
        python3 scripts/nsys_kernel_summary.py "$O/nsys-storm.sqlite"; echo "nsys query exit=$?"
        "$BUILD/kprof" run --quiet -o "$O/storm10k" -- "$BUILD/kernels/kernel_storm" 10000
        "$BUILD/kprof" export "$O/storm10k" --sqlite "$O/storm10k.sqlite"
        python3 scripts/nsys_kernel_summary.py "$O/storm10k.sqlite"; echo "kprof query exit=$?"
        python3 scripts/nsys_kernel_summary.py --schema "$O/nsys-storm.sqlite" > "$OUT/nsys_schema.txt"
      fi
    fi
  } > "$OUT/outputs.log" 2>&1
  gzip -c "$O/storm.html" > "$OUT/storm1m.html.gz"
  cp "$O/train.html" "$OUT/train.html"
  gzip -c "$O/train.sqlite" > "$OUT/train.sqlite.gz"
  grep -E "^(==|exit=|report_html_s|export_sqlite_s|query|nsys)" "$OUT/outputs.log" >> "$OUT/summary.txt"
fi

if step experiments; then
  # Ad-hoc investigations; what they show goes into the code and docs, not into tests.
  [ -x scripts/gpu_experiments.sh ] && timeout 300 scripts/gpu_experiments.sh "$BUILD" \
    > "$OUT/experiments.log" 2>&1
  echo "experiments: rc=$?" >> "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
