#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for kprof: installs the missing Debian packages,
# configures and builds. Idempotent: re-running only rebuilds what changed.
#   scripts/setup.sh [BUILD_DIR]        (default: build)
# Environment: KPROF_WERROR=ON for warnings as errors (CI), CMAKE_BUILD_TYPE (default Release).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

PACKAGES=(cmake g++ ninja-build pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev
          googletest libgtest-dev zlib1g-dev libsqlite3-dev clang-format python3
          chromium chromium-driver cmark-gfm
          clang libclang-rt-dev)  # clang and libFuzzer: scripts/fuzz.sh (docs/fuzzing.md)
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

cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DKPROF_WERROR="${KPROF_WERROR:-OFF}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: built $BUILD_DIR/kprof"
