#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ (clang, ASan + UBSan) and fuzzes each one for a
# fixed time, then prints per target: executions, exec/s, coverage (cov/ft) and findings
# (docs/fuzzing.md). New crashes, leaks, timeouts and OOMs go to fuzz/findings/<target>/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 180 s; all targets)
# Environment: FUZZ_JOBS=N fuzzes N targets at once (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-180}
shift || true
ALL=(run_file chrome_trace budget summary cli)
TARGETS=("${@:-${ALL[@]}}")
BUILD=build-fuzz
JOBS=${FUZZ_JOBS:-1}

declare -A MAX_LEN=([run_file]=262144 [chrome_trace]=262144 [budget]=4096 [summary]=16384
                    [cli]=1024)
declare -A DICT=([run_file]="" [chrome_trace]=fuzz/json.dict [budget]=fuzz/json.dict
                 [summary]=fuzz/json.dict [cli]=fuzz/cli.dict)

CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DKPROF_FUZZ=ON -DKPROF_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g" >/dev/null
cmake --build "$BUILD" --target "${TARGETS[@]/#/kprof_fuzz_}"

fuzz_one() {
  # Absolute paths: the cli target changes its working directory to its scratch directory.
  local t=$1 work="$PWD/$BUILD/corpus/$1" findings="$PWD/fuzz/findings/$1"
  local log="$BUILD/logs/$1.log"
  mkdir -p "$work" "$findings" "$(dirname "$log")" "fuzz/regressions/$t"
  local dict=()
  [ -n "${DICT[$t]}" ] && dict=(-dict="$PWD/${DICT[$t]}")
  # The first corpus directory receives the new inputs; the committed seeds stay as they are.
  "$BUILD/fuzz/kprof_fuzz_$t" "$work" "$PWD/fuzz/corpus/$t" "$PWD/fuzz/regressions/$t" "${dict[@]}" \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
    -max_len="${MAX_LEN[$t]}" -close_fd_mask=3 -print_final_stats=1 \
    -artifact_prefix="$findings/" >"$log" 2>&1 &
  local pid=$!
  wait "$pid" || true
  # libFuzzer ends with _Exit (time up, crash): the target's scratch directory stays behind.
  rm -rf "${TMPDIR:-/tmp}/kprof-fuzz.$pid"
}

running=0
for t in "${TARGETS[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= JOBS)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

printf '%-13s %8s %10s %8s %8s %8s  %s\n' target seconds execs exec/s cov ft findings
for t in "${TARGETS[@]}"; do
  log="$BUILD/logs/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  found=$(grep -oE "(crash|leak|timeout|oom)-[0-9a-f]+" "$log" | sort -u | tr '\n' ' ' || true)
  printf '%-13s %8s %10s %8s %8s %8s  %s\n' "$t" "$SECONDS_PER_TARGET" "${execs:-?}" \
    "${rate:-?}" "${cov:-?}" "${ft:-?}" "${found:-none}"
done
echo "logs: $BUILD/logs/; findings: fuzz/findings/ (minimise: docs/fuzzing.md)"
