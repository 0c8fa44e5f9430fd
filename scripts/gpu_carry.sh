#!/usr/bin/env bash
# Assembles what a GPU machine needs from a build made here, small enough to travel with the
# working tree (the device tool's carry, docs/benchmarks.md "Method"): kprof, the agent, the
# PyTorch layer, the kernels/ workloads, the GPU test binary and the CTest files, so that
#   ln -sfn .carry/build build && mkdir -p /work && ln -sfn "$PWD" /work/main &&
#   ctest --test-dir build -L gpu
# runs the GPU suite there (the test binaries name /work/main/build, where they were built).
#   scripts/gpu_carry.sh [BUILD_DIR=build] [DEST=.carry/build]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DEST=${2:-.carry/build}
rm -rf "$DEST"
mkdir -p "$DEST/kernels" "$DEST/tests"
cp -a "$BUILD/kprof" "$BUILD/libkprof_agent.so" "$BUILD/python" "$DEST/"
[ -f "$BUILD/kprof-calibrate" ] && cp -a "$BUILD/kprof-calibrate" "$DEST/"
[ -f "$BUILD/libkprof_floor_agent.so" ] && cp -a "$BUILD/libkprof_floor_agent.so" "$DEST/"
find "$BUILD/kernels" -maxdepth 1 -type f -perm -u+x -exec cp -a {} "$DEST/kernels/" \;
cp -a "$BUILD/tests/kprof_gpu_tests" "$DEST/tests/"
(cd "$BUILD" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' \
  -o -name '*_tests.cmake' \) -not -path './CMakeFiles/*') | while read -r f; do
  mkdir -p "$DEST/$(dirname "$f")"
  cp "$BUILD/$f" "$DEST/$f"
done
du -sh "$DEST"
