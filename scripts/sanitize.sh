#!/usr/bin/env bash
# sanitize.sh — the ASan + UBSan stage of CI: configures build-asan/ (-DRTCE_SANITIZE=ON, every
# target and library instrumented), builds a subset of the unit tests and fuzzers, and runs
# them with leak detection on and UBSan fatal. Any finding fails the script.
#
#   scripts/sanitize.sh            the CI subset (docs/security.md (Sanitizers and fuzzing): what and why)
#   scripts/sanitize.sh --full     every gtest target that needs no root, netns or browser, and
#                                  every fuzzer
#   options: --build-dir DIR (default build-asan), --jobs N, --fuzz-seconds S (default 5)
#
# The subset is chosen by measured cost (docs/security.md (Sanitizers and fuzzing)): the parsers and state
# machines that see network, client or operator input, whose tests run in-process.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-asan
jobs=$(nproc)
fuzz_seconds=5
full=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --full) full=1 ;;
    --build-dir) build_dir=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --fuzz-seconds) fuzz_seconds=$2; shift ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# The CI subset, chosen by measured cost (docs/security.md (Sanitizers and fuzzing)): the gtests of wire/ and
# the relay core, the shared HTTP server and UDP plumbing, and the transceiver's parsers and
# state machines (ICE, DTLS, SRTP, SDP, RTP, data channels, realtime, the Peer); the fuzzers that are
# cheap to build (the others already run under ASan + UBSan in the main build's ctest, with
# the sources under test instrumented).
subset=(
  rtce_wire_tests
  rtce_relay_core_tests
  rtce_http_tests
  rtce_common_tests
  rtce_ice_tests
  rtce_dtls_tests
  rtce_srtp_tests
  rtce_sdp_tests
  rtce_sdpfrag_tests
  rtce_rtp_tests
  rtce_datachannel_tests
  rtce_realtime_tests
  rtce_peer_tests
)
subset_fuzzers=(fuzz_stun fuzz_hint fuzz_proxy_v2 fuzz_hint_keys fuzz_rtp_rtcp fuzz_dcep fuzz_multipart fuzz_opus_decode)
# --full adds the targets that link a whole binary's library (relay, transceiver service) or
# start servers of their own, and every fuzzer: they cost most of the build time.
extra=(
  rtce_unit_tests
  rtce_audio_tests
  rtce_call_tests
  rtce_backend_tests
  rtce_transceiver_vocab_tests
  rtce_transceiver_config_tests
  rtce_realtime_signaling_tests
  rtce_redis_sync_tests
  rtce_srtp_libsrtp_tests
)
gtests=("${subset[@]}")
if [[ $full == 1 ]]; then
  gtests+=("${extra[@]}")
fi

launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRTCE_SANITIZE=ON -DRTCE_FUZZ_SECONDS="$fuzz_seconds" "${launcher[@]}" >/dev/null

# Every fuzzer CTest knows (label fuzz) with --full; their test names are their target names.
if [[ $full == 1 ]]; then
  mapfile -t fuzzers < <(cd "$build_dir" && ctest -N -L fuzz | sed -n 's/^ *Test *#[0-9]*: \(fuzz_[A-Za-z0-9_]*\)$/\1/p')
else
  fuzzers=("${subset_fuzzers[@]}")
fi
fuzz_regex="^($(IFS='|'; echo "${fuzzers[*]}"))\$"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Reports name files and lines only when the sanitizers find a symbolizer.
if [[ -z ${ASAN_SYMBOLIZER_PATH:-} ]]; then
  for s in /usr/lib/llvm-*/bin/llvm-symbolizer; do
    [[ -x $s ]] && export ASAN_SYMBOLIZER_PATH=$s
  done
fi
# Test discovery runs each binary at build time, under the same options.
cmake --build "$build_dir" --parallel "$jobs" --target "${gtests[@]}" "${fuzzers[@]}"

failed=()
for t in "${gtests[@]}"; do
  echo "== $t"
  if ! (cd "$build_dir" && timeout 600 "bin/$t" --gtest_brief=1); then
    failed+=("$t")
  fi
done
echo "== fuzz smoke runs (${#fuzzers[@]} fuzzers, ${fuzz_seconds} s each)"
if ! (cd "$build_dir" && ctest -R "$fuzz_regex" --output-on-failure --timeout 300 -j "$jobs"); then
  failed+=(fuzz-smoke)
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "sanitize.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "sanitize.sh: ${#gtests[@]} gtest targets and ${#fuzzers[@]} fuzzers clean under ASan + UBSan"
