#!/usr/bin/env bash
# Everything the multi-GPU work (issue 13, docs/distributed.md) needs from a machine with two
# GPUs, in one batch that ends inside one device command (600 s; the steps share a budget of
# DDP_SESSION_BUDGET=560 s):
#   1. env.txt        GPUs, driver, torch, CUDA and NCCL versions, which launchers exist
#   2. dist_tests.log ctest -R GpuDistributed -V (tests/gpu/distributed_test.cpp), 330 s at most
#   3. fixtures       tests/fixtures/gpu/ddp_straggler, ddp_balanced, ddp_capture3: the runs of
#                     the tests a, b and c (taken from the test runs of step 2 when they
#                     completed, else recorded again with the same commands); `kprof report` of
#                     each into reports.txt, `kprof report --format json` of each into the tarball
#   4. ddp_overhead.tsv  the balanced job 3 times plain (torchrun alone) and 3 times under
#                     kprof run, interleaved: wall time and each rank's median step
#   5. ddp_fixtures.tar.xz  the three fixture directories and the JSON reports
# plus summary.txt (a line per step) and session.log (the commands' output): 7 files in OUT (the
# device returns at most 8). Each step has its own timeout; one failing does not stop the others.
#
#   scripts/ddp_session.sh OUT [BUILD=build]
#
# The exact commands, from a build made here (the test binaries were configured at /work/main,
# whose build/ they name: the script makes /work/main point at the tree it runs in):
#   here:    flock /tmp/kprof-build.lock ninja -C build && scripts/gpu_carry.sh build .carry/build
#   device:  run(kind nvidia-h100-x2, carry [".carry"], timeout_s 600):
#              ln -sfn .carry/build build && scripts/ddp_session.sh $OUT
set -uo pipefail
OUT=${1:?usage: scripts/ddp_session.sh OUT [BUILD=build]}
BUILD=${2:-build}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
# The test binaries were configured at /work/main; make that path valid here.
if [ "$(readlink -f /work/main 2>/dev/null)" != "$(readlink -f "$ROOT")" ]; then
  if [ ! -e /work/main ] || [ -L /work/main ]; then
    mkdir -p /work && ln -sfn "$ROOT" /work/main
  else
    echo "warning: /work/main is a directory other than $ROOT: the tests use it" >&2
  fi
fi
[ -d /opt/torch/.venv/bin ] && PATH=/opt/torch/.venv/bin:$PATH
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
# NVLink multicast must stay off on these machines (examples/ddp_train.py sets them too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

BUDGET=${DDP_SESSION_BUDGET:-560}
LOG=$OUT/session.log
: > "$OUT/summary.txt"
: > "$LOG"
WORK=$(mktemp -d /tmp/ddp-session.XXXXXX)
SCRIPT=examples/ddp_train.py
FIX=tests/fixtures/gpu

note() { echo "$*" | tee -a "$OUT/summary.txt"; }
# limit WANT [RESERVE]: WANT seconds, or what the budget has left after RESERVE (at least 1).
limit() {
  local want=$1 left=$((BUDGET - SECONDS - ${2:-0}))
  ((left < want)) && want=$left
  ((want < 1)) && want=1
  echo "$want"
}
if command -v torchrun > /dev/null; then
  TORCHRUN=(torchrun)
else
  TORCHRUN=(python3 -m torch.distributed.run)
fi
# ddp PORT ARGS...: sets DDP to the 2-rank job as the tests start it.
ddp() {
  local port=$1
  shift
  DDP=("${TORCHRUN[@]}" --nproc_per_node=2 --master_port="$port" "$SCRIPT" "$@")
}

# 1. The machine.
{
  echo "== $(date -u +%FT%TZ) $(hostname) root=$ROOT build=$BUILD"
  timeout 30 nvidia-smi -L
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.mem \
    --format=csv
  timeout 30 nvidia-smi topo -m
  timeout 60 python3 -c 'import torch, torch.distributed as d
v = torch.cuda.nccl.version()
print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl",
      ".".join(map(str, v)) if isinstance(v, tuple) else v, "gpus", torch.cuda.device_count(),
      "nccl available", d.is_nccl_available())'
  echo "python3: $(command -v python3)"
  echo "torchrun: $(command -v torchrun || echo none)"
  echo "mpirun: $(command -v mpirun || echo none)"
  echo "srun: $(command -v srun || echo none)"
  command -v mpirun > /dev/null && timeout 20 mpirun --version 2>&1 | head -n 3
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_'
  "$BUILD/kprof" --version 2>&1 | head -n 1
} > "$OUT/env.txt" 2>&1
note "env: $(grep -c '^GPU ' "$OUT/env.txt") GPUs; $(grep -m1 '^torch ' "$OUT/env.txt");" \
  "mpirun: $(sed -n 's/^mpirun: //p' "$OUT/env.txt"), srun: $(sed -n 's/^srun: //p' "$OUT/env.txt")"

# 2. The tests (fresh runs: markers of earlier runs go).
rm -f "$BUILD"/gpu-test-runs/dist_*.done
T0=$SECONDS
timeout --kill-after=15 "$(limit 330 150)" \
  ctest --test-dir "$BUILD" -R GpuDistributed -V > "$OUT/dist_tests.log" 2>&1
note "dist tests: rc=$? in $((SECONDS - T0)) s"
grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|tests failed' "$OUT/dist_tests.log" \
  | sed 's/^ */  /' >> "$OUT/summary.txt"

# 3. Fixtures: the test runs a, b, c where they completed, else recorded again.
mkdir -p "$FIX" "$WORK/reports"
# fixture NAME TEST_RUN PORT KPROF_OPTIONS... -- JOB_ARGS... (TEST_RUN: the test's dist_NAME)
fixture() {
  local name=$1 port=$3 dest=$FIX/$1 src=$BUILD/gpu-test-runs/dist_$2 how rc=0
  shift 3
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  rm -rf "$dest"
  if [ -d "$src" ] && [ "$src.done" -nt "$OUT/env.txt" ] && grep -qx 'status 0' "$src.done"; then
    cp -a "$src" "$dest"
    how="from the test run"
  else
    ddp "$port" "$@"
    echo "== $name: kprof run ${opts[*]} -- ${DDP[*]}" >> "$LOG"
    timeout --kill-after=15 "$(limit 90 150)" "$BUILD/kprof" run -o "$dest" --quiet "${opts[@]}" \
      -- "${DDP[@]}" >> "$LOG" 2>&1
    rc=$?
    how="recorded again"
  fi
  {
    echo "=================== $name ($how)"
    timeout 60 "$BUILD/kprof" report "$dest"
  } >> "$OUT/reports.txt" 2>&1
  timeout 60 "$BUILD/kprof" report "$dest" --format json > "$WORK/reports/$name.json" 2>> "$LOG"
  local json_rc=$?
  note "fixture $name: rc=$rc ($how), $(du -sh "$dest" 2> /dev/null | cut -f1)," \
    "json report rc=$json_rc"
}
T0=$SECONDS
: > "$OUT/reports.txt"
fixture ddp_straggler straggler 29531 -- --steps 50 --straggler-rank 1 --straggler-ms 20
fixture ddp_balanced balanced 29532 -- --steps 50
fixture ddp_capture3 capture3 29533 --capture nvtx:step --capture-count 3 -- --steps 50
note "fixtures: $((SECONDS - T0)) s"

# 4. Overhead: the balanced job plain and under kprof run, interleaved.
T0=$SECONDS
printf 'round\tmode\trc\twall_s\trank0_median_step_ms\trank1_median_step_ms\n' \
  > "$OUT/ddp_overhead.tsv"
for round in 1 2 3; do
  for mode in plain kprof; do
    t=$(limit 120 40)
    if ((t < 45)); then
      note "overhead: round $round $mode skipped (budget left: $((BUDGET - SECONDS)) s)"
      continue
    fi
    port=$((29540 + 2 * round))
    [ "$mode" = kprof ] && port=$((port + 1))
    run_log=$WORK/overhead-$round-$mode.log
    if [ "$mode" = plain ]; then
      cmd=()
    else
      cmd=("$BUILD/kprof" run -o "$WORK/overhead-$round" --quiet --)
    fi
    ddp "$port" --steps 50
    start=$(date +%s.%N)
    timeout --kill-after=15 "$t" "${cmd[@]}" "${DDP[@]}" > "$run_log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    m0=$(sed -n 's/^rank 0: .*median step \([0-9.]*\) ms.*/\1/p' "$run_log" | head -n 1)
    m1=$(sed -n 's/^rank 1: .*median step \([0-9.]*\) ms.*/\1/p' "$run_log" | head -n 1)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$mode" "$rc" \
      "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')" \
      "${m0:-NA}" "${m1:-NA}" >> "$OUT/ddp_overhead.tsv"
    { echo "== overhead round $round $mode rc=$rc"; tail -n 5 "$run_log"; } >> "$LOG"
    rm -rf "$WORK/overhead-$round"
  done
done
note "overhead: $((SECONDS - T0)) s"
sed 's/^/  /' "$OUT/ddp_overhead.tsv" >> "$OUT/summary.txt"

# 5. The fixtures and the JSON reports, for tests/fixtures/gpu (the device returns files of
# 16 MiB at most: a larger tarball is split in parts of 15 MiB).
T0=$SECONDS
XZ_OPT="-6 -T0" timeout "$(limit 60)" tar -cJf "$OUT/ddp_fixtures.tar.xz" \
  "$FIX"/ddp_straggler "$FIX"/ddp_balanced "$FIX"/ddp_capture3 -C "$WORK" reports 2>> "$LOG"
rc=$?
size=$(stat -c %s "$OUT/ddp_fixtures.tar.xz" 2> /dev/null || echo 0)
if ((size > 16000000)); then
  split -b 15M -d "$OUT/ddp_fixtures.tar.xz" "$OUT/ddp_fixtures.tar.xz.part" \
    && rm -f "$OUT/ddp_fixtures.tar.xz"
  note "tarball: $size bytes, split: $(cd "$OUT" && echo ddp_fixtures.tar.xz.part*)"
fi
note "tarball: rc=$rc, $size bytes, $((SECONDS - T0)) s; session $SECONDS s"
rm -rf "$WORK"
