#!/usr/bin/env bash
# test.sh — installs what the tests need, builds, and runs every test (units, fuzzers,
# namespace integration), then the sanitizer stage (scripts/sanitize.sh: a unit-test and fuzzer
# subset under ASan + UBSan in build-asan/; RTCEDGE_SKIP_SANITIZE=1 skips it). The README's test
# command; .ci/run calls it. Fails when either stage fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
status=0
(cd build && ctest --output-on-failure --timeout 300 "$@") || status=$?
if [[ ${RTCEDGE_SKIP_SANITIZE:-0} != 1 ]]; then
  scripts/sanitize.sh || status=1
fi
exit "$status"
