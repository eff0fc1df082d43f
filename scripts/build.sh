#!/usr/bin/env bash
# build.sh — configure and build everything into build/ (binaries in build/bin/).
# clang is the compiler so that the libFuzzer targets build in the same tree.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE="${RTCEDGE_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build build --parallel "$(nproc)"
