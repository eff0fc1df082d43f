#!/usr/bin/env bash
# test.sh — installs what the tests need, builds, and runs every test (units, fuzzers,
# namespace integration), then the sanitizer stage (scripts/sanitize.sh: a unit-test and fuzzer
# subset under ASan + UBSan in build-asan/; RTCEDGE_SKIP_SANITIZE=1 skips it). The README's test
# command; .ci/run calls it. Fails when either stage fails.
# ctest runs $(nproc) tests at a time (RTCEDGE_TEST_JOBS=N to change it): tests that must not
# overlap carry RUN_SERIAL (network namespaces, XDP, fixed ports in a namespace) or a
# RESOURCE_LOCK (chromium) in their CMakeLists.txt; every other test binds only ports the
# kernel picks and files of its own. Arguments go to ctest (-R REGEX, -L LABEL, -j N).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
status=0
(cd build && ctest --output-on-failure --timeout 300 -j "${RTCEDGE_TEST_JOBS:-$(nproc)}" "$@") || status=$?
ctest_status=$status
if [[ ${RTCEDGE_SKIP_SANITIZE:-0} != 1 ]]; then
  scripts/sanitize.sh || status=1
fi
# A CI log is read from its end: the failed tests' last output lines again, after the
# sanitizer stage's own output.
if [[ $ctest_status != 0 && -s build/Testing/Temporary/LastTestsFailed.log ]]; then
  while IFS=: read -r _ name; do
    echo "== last output lines of the failed test ${name}"
    awk -v name="$name" '$0 ~ "^[0-9]+/[0-9]+ Test: " name "$" {on = 1; next}
                         on && /^<end of output>$/ {exit} on' build/Testing/Temporary/LastTest.log | tail -n 80
  done < build/Testing/Temporary/LastTestsFailed.log
fi
exit "$status"
