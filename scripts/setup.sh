#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for kprof: installs the missing Debian packages,
# configures and builds. Idempotent: re-running only rebuilds what changed.
#   scripts/setup.sh [BUILD_DIR]           (default: build) README's first command: only what
#       `kprof run` and `kprof report` need. Packages: the compiler, CMake, Ninja and the
#       libraries kprof links (CLI11, nlohmann-json, fmt, zlib, SQLite). Builds kprof, the agent
#       (libkprof_agent.so, where the CUDA toolkit with CUPTI is found) and the PyTorch layer
#       (BUILD_DIR/python); no tests, fuzz replays or kernels/ workloads.
#   scripts/setup.sh --tests [BUILD_DIR]   README's test command (CI): every package (GoogleTest,
#       Python, Chromium and ChromeDriver, cmark-gfm, clang-format, clang and libFuzzer) and every
#       target: the tests, the fuzz corpus replays and, with nvcc, the kernels/ workloads.
# The flag decides what BUILD_DIR is configured for, both ways: the same tree set up minimal and
# then with --tests is reconfigured with the tests on, and back (nothing is rebuilt for the switch;
# test binaries built earlier stay in the tree, as they were: run the tests after --tests).
# kprof's libraries are unity builds in both (KPROF_UNITY_BUILD, CMakeLists.txt): half the CPU
# time of the first build, but an edit recompiles its batch of files; KPROF_UNITY_BUILD=OFF in the
# environment compiles file by file.
# Environment: KPROF_WERROR=ON for warnings as errors (CI), CMAKE_BUILD_TYPE (default Release),
# KPROF_UNITY_BUILD (default ON).
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=0
BUILD_DIR=""
for arg in "$@"; do
  case "$arg" in
    --tests) TESTS=1 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "usage: scripts/setup.sh [--tests] [BUILD_DIR]" >&2; exit 2 ;;
    *) if [ -n "$BUILD_DIR" ]; then
         echo "usage: scripts/setup.sh [--tests] [BUILD_DIR]" >&2; exit 2
       fi
       BUILD_DIR=$arg ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build}

# What the kprof executable, the agent and the PyTorch layer (a copied file) need to build.
PACKAGES=(cmake g++ ninja-build libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
          libsqlite3-dev)
if ((TESTS)); then
  PACKAGES+=(pkg-config googletest libgtest-dev clang-format python3
             chromium chromium-driver cmark-gfm  # browser tests, Markdown hostile-output test
             clang libclang-rt-dev)  # clang and libFuzzer: scripts/fuzz.sh (docs/fuzzing.md)
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "setup: note: no CUDA toolkit found (/usr/local/cuda): building the CLI and analysis only;"
  echo "       the agent (libkprof_agent.so) and kernels/ need the CUDA toolkit with CUPTI."
fi
export PATH=/usr/local/cuda/bin:$PATH
# The golden outputs (tests/golden/out/*.gz) shown decoded by git diff (.gitattributes there).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git config diff.gzip.textconv "gzip -dc" || true
fi

# Both options are given every time: -D overrides what an earlier run left in the cache.
# KPROF_CPU_ONLY=ON keeps the CUDA language and kernels/ out; the agent is plain C++ against
# CUPTI's headers and is still built where CUPTI is found.
if ((TESTS)); then
  MODE=(-DKPROF_BUILD_TESTS=ON -DKPROF_CPU_ONLY=OFF)
else
  MODE=(-DKPROF_BUILD_TESTS=OFF -DKPROF_CPU_ONLY=ON)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja "${MODE[@]}" \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DKPROF_UNITY_BUILD="${KPROF_UNITY_BUILD:-ON}" -DKPROF_WERROR="${KPROF_WERROR:-OFF}" >/dev/null
if ((TESTS)); then
  cmake --build "$BUILD_DIR" -j"$(nproc)"
  echo "setup: built $BUILD_DIR: kprof, the tests, the fuzz replays and workloads"
else
  targets=(kprof)
  # (grep -q in a pipe: SIGPIPE, pipefail)
  if grep -q '^kprof_agent:' <<<"$(cmake --build "$BUILD_DIR" --target help)"; then
    targets+=(kprof_agent)
  fi
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"
  echo "setup: built $BUILD_DIR/kprof${targets[1]:+ and $BUILD_DIR/libkprof_agent.so}" \
       "(the tests: scripts/setup.sh --tests $BUILD_DIR)"
fi
