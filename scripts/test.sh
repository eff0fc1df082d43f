#!/usr/bin/env bash
# test.sh — installs what the tests need, builds, and runs every test (units, fuzzers,
# namespace integration). The README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 300 "$@"
