#!/usr/bin/env bash
# Sanitizer build and tests (docs/reliability.md). CI runs `scripts/sanitize.sh address` after
# the normal build and tests; a developer can run either mode the same way.
#   scripts/sanitize.sh [address|thread] [BUILD_DIR]
#   address (default): ASan + UBSan, tree build-asan: builds everything but the CUDA workloads and
#            the agent (KPROF_CPU_ONLY) and runs every CPU test (ctest -L cpu, and -L fuzz where
#            those tests exist); never the gpu or browser labels.
#   thread:  TSan, tree build-tsan: builds only the agent writer's thread test (with the op rings and PM sampling's decoding
#            thread, AgentPeriodicThread) and runs it.
# Environment: KPROF_WERROR=ON for warnings as errors (CI); JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-address}
case "$MODE" in
  address) SANITIZE=address,undefined; DEFAULT_DIR=build-asan ;;
  thread) SANITIZE=thread; DEFAULT_DIR=build-tsan ;;
  *) echo "usage: scripts/sanitize.sh [address|thread] [BUILD_DIR]" >&2; exit 2 ;;
esac
BUILD_DIR=${2:-$DEFAULT_DIR}
JOBS=${JOBS:-$(nproc)}
SUPP="$PWD/scripts/sanitizers"

# -O1 -g: usable stacks at a fraction of -O0's test time; assertions stay on.
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DKPROF_SANITIZE="$SANITIZE" -DKPROF_CPU_ONLY=ON \
  -DKPROF_WERROR="${KPROF_WERROR:-OFF}" >/dev/null

# Every finding fails its test, with a stack.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp
export LSAN_OPTIONS=suppressions=$SUPP/lsan.supp
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp

start=$(date +%s)
if [ "$MODE" = address ]; then
  cmake --build "$BUILD_DIR" -j"$JOBS"
  built=$(date +%s)
  labels=cpu
  if ctest --test-dir "$BUILD_DIR" -N -L fuzz 2>/dev/null | grep -q "Total Tests: [1-9]"; then
    labels='cpu|fuzz'
  fi
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" -L "$labels" -LE 'browser|gpu'
else
  targets=$(cmake --build "$BUILD_DIR" --target help)  # (grep -q in a pipe: SIGPIPE, pipefail)
  if ! grep -q kprof_agent_writer_tests <<<"$targets"; then
    echo "sanitize: thread: skipped: the agent writer's test needs CUPTI's headers (CUDA toolkit)"
    exit 0
  fi
  cmake --build "$BUILD_DIR" -j"$JOBS" --target kprof_agent_writer_tests
  built=$(date +%s)
  # Only this binary's tests: the others were not built in this tree.
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" -L cpu -R '^(AgentWriter|AgentSignals|AgentPeriodicThread|OpRings)\.'
fi
end=$(date +%s)
echo "sanitize: $MODE: build $((built - start)) s, tests $((end - built)) s ($BUILD_DIR)"
