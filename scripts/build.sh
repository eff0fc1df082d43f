#!/usr/bin/env bash
# build.sh — configure and build everything into build/ (binaries in build/bin/).
# clang is the compiler so that the libFuzzer targets build in the same tree.
#
#   scripts/build.sh                      every target (what scripts/test.sh runs)
#   scripts/build.sh TARGET...            only these targets and what they need, in the same
#                                         build/ (scripts/demo.sh: the two binaries); a later
#                                         full build reuses every object they built
#   RTCEDGE_BUILD_JOBS=N                  parallel jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache (install-deps.sh) with paths taken relative to the checkout: a second clone, such as
# CI's clean clone, reuses the objects of the first instead of a full rebuild.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE="${RTCEDGE_BUILD_TYPE:-RelWithDebInfo}" "${launcher[@]}" >/dev/null
targets=()
[[ $# -gt 0 ]] && targets=(--target "$@")
cmake --build build --parallel "${RTCEDGE_BUILD_JOBS:-$(nproc)}" "${targets[@]}"
