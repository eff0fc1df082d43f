#!/usr/bin/env bash
# run_connect_bench.sh — time to connected, p50/p99, of four WebRTC clients against a "before"
# and an "after" rtcedge-transceiver binary in one run, on loopback, directly and through the
# userspace relay; and a long-call check: does a call whose client sends no STUN once
# connected (Pion-like, audio both ways) outlive sessions.consent_timeout? Method and
# results: docs/benchmarks.md ("Time to connected").
#
#   clients                                  time to connected = offer POST ->
#   loadgen-pion     rtce_session_loadgen --client-profile pion    DTLS connected (and first echo)
#   loadgen-browser  rtce_session_loadgen --client-profile browser DTLS connected (and first echo)
#   aiortc           tests/transceiver/interop/aiortc_client.py    connectionState connected
#   chromium         bench/session_loadgen/chromium_connect.mjs    connectionState connected (and first RTP)
#
# Every client runs its calls one after the other (the loadgen paced at 20 setups/s), so the
# figures are protocol round trips, not queueing. The transceiver uses the embedded echo
# (loopback, no delay) so "first echo" is setup plus one frame.
#
# Usage:
#   bench/run_connect_bench.sh --before-bin BIN [--after-bin BIN] [options]
#   bench/run_connect_bench.sh long-call [--transceiver BIN] [--mode direct|relay]   # CTest
#
#   --before-bin BIN     transceiver binary measured as "before" (default <build-dir>/bin/rtcedge-transceiver)
#   --after-bin BIN      the "after" one (omit: the table has a before column only)
#   --build-dir DIR      where bin/ holds rtcedge-relay and rtce_session_loadgen (default <repo>/build)
#   --runs N             calls per client, mode and binary (default 30 loadgen, 10 aiortc / chromium)
#   --slow-runs N        calls for aiortc and chromium (default 10)
#   --clients LIST       subset of: loadgen-pion loadgen-browser aiortc chromium (default all available)
#   --modes LIST         subset of: direct relay (default "direct relay")
#   --consent-timeout S  sessions.consent_timeout of the long-call check (default 3)
#   --long-call-consent M  the long-call client's --consent-checks (default none; periodic is the
#                        control that shows the check can pass)
#   --out DIR            results (default /tmp/rtce-connect-bench): one JSON per point, table.md
#
# long-call: one pion-profile session with --consent-checks none for 2 x consent-timeout;
# exit 0 only if it is still connected and echoing at the end (and the transceiver counted
# no consent_expired). Needs: jq, curl; node + chromium and python3-aiortc for those clients.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$REPO/build"
BEFORE="" AFTER="" TRANSCEIVER=""
OUT=/tmp/rtce-connect-bench
RUNS=30
SLOW_RUNS=10
CLIENTS="loadgen-pion loadgen-browser aiortc chromium"
MODES="direct relay"
CONSENT_TIMEOUT=3
LONG_CALL=0
LONG_MODE=direct
LONG_CONSENT=none

while [[ $# -gt 0 ]]; do
  case "$1" in
    --before-bin) BEFORE="$2"; shift 2 ;;
    --after-bin) AFTER="$2"; shift 2 ;;
    --transceiver) TRANSCEIVER="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --slow-runs) SLOW_RUNS="$2"; shift 2 ;;
    --clients) CLIENTS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --mode) LONG_MODE="$2"; shift 2 ;;
    --consent-timeout) CONSENT_TIMEOUT="$2"; shift 2 ;;
    --long-call-consent) LONG_CONSENT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    long-call) LONG_CALL=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

BIN="$BUILD_DIR/bin"
RELAY="$BIN/rtcedge-relay"
LOADGEN="$BIN/rtce_session_loadgen"
AIORTC="$REPO/tests/transceiver/interop/aiortc_client.py"
CHROMIUM_SCRIPT="$REPO/bench/session_loadgen/chromium_connect.mjs"
BEFORE="${BEFORE:-${TRANSCEIVER:-$BIN/rtcedge-transceiver}}"
for b in "$BEFORE" ${AFTER:+"$AFTER"} "$RELAY" "$LOADGEN"; do
  [[ -x "$b" ]] || { echo "missing $b (cmake --build $BUILD_DIR --target rtcedge-transceiver rtcedge-relay rtce_session_loadgen)" >&2; exit 2; }
done
for tool in jq curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done

# The scratch folder, log(), cleanup, ports and the relay/transceiver pair: shared with
# run_session_bench.sh.
source "$REPO/bench/stack_lib.sh"
stack_setup connect-bench

# start_stack BIN MODE(direct|relay) [extra transceiver flags...]; sets URL.
start_stack() {
  local bin="$1" mode="$2"; shift 2
  stack_ports
  local tx=("$bin" --http-listen "127.0.0.1:$HTTP_PORT" --workers 1 --media-listen 127.0.0.1
            --media-base-port "$MEDIA_PORT" --hint-key-file "$WORK/hint-keys.yaml"
            --sessions-setup-rate 1000 --sessions-setup-burst 1000
            --backend-echo-mode loopback --backend-echo-delay 0ms --log-level warn)
  if [[ "$mode" == relay ]]; then
    start_relay "$MEDIA_PORT"
    tx+=(--relay-vips "$RELAY_VIP")
  fi
  start_transceiver "${tx[@]}" "$@"
}

# ---------------------------------------------------------------- long call
# One pion-profile session, no STUN after nomination, for 2 x the consent timeout.
long_call() {  # bin mode label -> exit status 0 = survived
  local bin="$1" mode="$2" label="$3" rc=0
  start_stack "$bin" "$mode" --sessions-consent-timeout "${CONSENT_TIMEOUT}s"
  timeout 60 "$LOADGEN" --url "$URL" --sessions 1 --seconds $(( 2 * CONSENT_TIMEOUT )) --warmup 0 \
    --client-profile pion --consent-checks "$LONG_CONSENT" --expect-alive-at-end --transceiver-pid "$TX_PID" \
    --json-out "$OUT/$label.json" --label "$label" > "$OUT/$label.txt" 2> "$OUT/$label.err" || rc=$?
  stop_stack
  [[ -s "$OUT/$label.json" ]] || { log "$label: no result (loadgen exit $rc): $(tail -3 "$OUT/$label.err")"; return 1; }
  local expired
  expired=$(jq -r '[.transceiver_metrics | to_entries[] | select(.key | test("consent_expired")) | .value] | add // 0' "$OUT/$label.json")
  log "$label: $(jq -r '"connected \(.sessions_connected)/1, echoing at the end \(.sessions_alive_at_end), STUN after ICE connected \(.stun_sent_after_ice_connected), failures \(.failure_reasons)"' "$OUT/$label.json"), transceiver consent_expired $expired"
  (( rc == 0 )) && [[ "$expired" == 0 ]]
}

if (( LONG_CALL )); then
  if long_call "$BEFORE" "$LONG_MODE" "long-call-$LONG_MODE"; then
    log "PASS: the session outlived sessions.consent_timeout=${CONSENT_TIMEOUT}s with media both ways (client consent checks: $LONG_CONSENT)"
    exit 0
  fi
  log "FAIL: the session did not survive $(( 2 * CONSENT_TIMEOUT )) s (consent_timeout ${CONSENT_TIMEOUT}s, client consent checks: $LONG_CONSENT)"
  exit 1
fi

# ---------------------------------------------------------------- time to connected
have_client() {
  case "$1" in
    loadgen-*) return 0 ;;
    aiortc) /usr/bin/python3 -c "import aiortc" 2>/dev/null ;;
    chromium) command -v node >/dev/null && [[ -x /usr/bin/chromium ]] &&
                [[ -d "$REPO/tests/golden/tools/node_modules/playwright-core" ]] ;;
    *) return 1 ;;
  esac
}

# measure CLIENT -> writes $OUT/<point>.samples: one "connected_ms first_echo_ms" line per call
measure() {
  local client="$1" point="$2"
  local samples="$OUT/$point.samples"
  : > "$samples"
  case "$client" in
    loadgen-pion|loadgen-browser)
      timeout 120 "$LOADGEN" --url "$URL" --sessions "$RUNS" --seconds 1 --warmup 0.5 --setup-rate 20 \
        --setup-concurrency 1 --client-profile "${client#loadgen-}" --transceiver-pid "$TX_PID" \
        --json-out "$OUT/$point.json" --label "$point" > "$OUT/$point.txt" 2> "$OUT/$point.err" || true
      [[ -s "$OUT/$point.json" ]] && jq -r '.sessions[] | "\(.dtls_connected_ms // "-") \(.first_echo_ms // "-")"' \
        "$OUT/$point.json" > "$samples"
      ;;
    aiortc)
      for i in $(seq "$SLOW_RUNS"); do
        timeout 60 /usr/bin/python3 "$AIORTC" --url "$URL" --seconds 1.2 --skip-s 1.0 > "$WORK/aiortc.json" \
          2>> "$OUT/$point.err" || true
        # aiortc exposes no RTP arrival hook: no first-echo figure (n/a, not a failure).
        jq -r '"\(.post_to_connected_ms // "-") n/a"' "$WORK/aiortc.json" >> "$samples" 2>/dev/null || echo "- n/a" >> "$samples"
        cat "$WORK/aiortc.json" >> "$OUT/$point.json" 2>/dev/null || true
      done
      ;;
    chromium)
      timeout 180 node "$CHROMIUM_SCRIPT" --url "$URL" --runs "$SLOW_RUNS" > "$OUT/$point.json" 2> "$OUT/$point.err" || true
      jq -r '.runs[] | "\(.connected_ms // "-") \(.first_rtp_ms // "-")"' "$OUT/$point.json" > "$samples" 2>/dev/null || true
      ;;
  esac
}

# stats SAMPLES COLUMN -> "p50 / p99 (n)" over the numeric values, nearest rank; failures counted.
stats() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import math, sys
vals, failed = [], 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 2: continue
    v = f[int(sys.argv[2])]
    if v == "n/a": continue
    try: vals.append(float(v))
    except ValueError: failed += 1
def pct(q):
    s = sorted(vals)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]
out = f"{pct(0.5):.1f} / {pct(0.99):.1f} (n={len(vals)})" if vals else ("-" if failed else "n/a")
if failed: out += f", {failed} failed"
print(out)
EOF
}

MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
log "machine: $MACHINE"
log "results in $OUT"
declare -A CONNECTED ECHO PHASES
BINS=(before)
[[ -n "$AFTER" ]] && BINS+=(after)
AVAILABLE=""
for client in $CLIENTS; do
  if have_client "$client"; then AVAILABLE+=" $client"; else log "skipping $client (not installed)"; fi
done
START=$(date +%s)
for which in "${BINS[@]}"; do
  bin="$BEFORE"; [[ "$which" == after ]] && bin="$AFTER"
  for mode in $MODES; do
    start_stack "$bin" "$mode"
    for client in $AVAILABLE; do
      point="$which-$mode-$client"
      measure "$client" "$point"
      CONNECTED[$point]=$(stats "$OUT/$point.samples" 0)
      ECHO[$point]=$(stats "$OUT/$point.samples" 1)
      log "$point: connected ${CONNECTED[$point]} ms, first echo ${ECHO[$point]} ms"
      if [[ "$client" == loadgen-pion && -s "$OUT/$point.json" ]]; then
        PHASES[$point]=$(jq -r '"first STUN success \(.time_to_ice_ms.p50 * 10 | round / 10), ICE connected (nominated) \(.time_to_ice_connected_ms.p50 * 10 | round / 10), DTLS connected \(.time_to_connected_ms.p50 * 10 | round / 10); DTLS datagrams dropped before ICE connected: \(.dtls_dropped_before_ice) over \(.sessions_requested) calls; STUN sent after ICE connected: \(.stun_sent_after_ice_connected); server checks answered: \(.stun_requests_answered)"' "$OUT/$point.json")
        log "$point phases (p50 ms): ${PHASES[$point]}"
      fi
    done
    stop_stack
  done
done

declare -A SURVIVED
for which in "${BINS[@]}"; do
  bin="$BEFORE"; [[ "$which" == after ]] && bin="$AFTER"
  for mode in $MODES; do
    if long_call "$bin" "$mode" "$which-$mode-long-call"; then SURVIVED[$which-$mode]=yes; else SURVIVED[$which-$mode]=NO; fi
  done
done

{
  echo "Machine: $MACHINE. Before: \`$BEFORE\`${AFTER:+; after: \`$AFTER\`}. Calls one at a time; times from the offer POST, ms."
  echo
  header="| client | path | before: connected p50 / p99 | before: first echo p50 / p99 |"
  sep="|---|---|---|---|"
  if [[ -n "$AFTER" ]]; then
    header+=" after: connected p50 / p99 | after: first echo p50 / p99 |"; sep+="---|---|"
  fi
  echo "$header"; echo "$sep"
  for client in $AVAILABLE; do
    for mode in $MODES; do
      row="| $client | $mode | ${CONNECTED[before-$mode-$client]} | ${ECHO[before-$mode-$client]} |"
      [[ -n "$AFTER" ]] && row+=" ${CONNECTED[after-$mode-$client]} | ${ECHO[after-$mode-$client]} |"
      echo "$row"
    done
  done
  echo
  for which in "${BINS[@]}"; do
    for mode in $MODES; do
      [[ -n "${PHASES[$which-$mode-loadgen-pion]:-}" ]] && echo "- loadgen-pion, $which, $mode, p50 ms: ${PHASES[$which-$mode-loadgen-pion]}"
    done
  done
  echo
  echo "Long call: loadgen-pion, --consent-checks none, $(( 2 * CONSENT_TIMEOUT )) s call, sessions.consent_timeout ${CONSENT_TIMEOUT}s — still connected and echoing at the end?"
  echo
  echo "| path | before |${AFTER:+ after |}"
  echo "|---|---|${AFTER:+---|}"
  for mode in $MODES; do
    echo "| $mode | ${SURVIVED[before-$mode]} |${AFTER:+ ${SURVIVED[after-$mode]} |}"
  done
} > "$OUT/table.md"
log "done in $(( $(date +%s) - START )) s"
cat "$OUT/table.md"
