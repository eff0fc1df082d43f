#!/usr/bin/env bash
# run_session_bench.sh — session capacity of one transceiver core, measured with real WebRTC
# clients (bench/session_loadgen.cpp) on loopback. Results and method:
# docs/benchmarks.md ("Transceiver sessions").
#
#   rtce_session_loadgen (CPU 1) ──UDP──> rtcedge-relay VIP (CPU 1, userspace) ──PROXY v2──> rtcedge-transceiver (CPU 0, 1 worker)
#                                 <──────────────────────────────────────────────────────────  echo backend in-process
#
# Phases (each point starts a fresh relay + transceiver, so RSS starts from the same base):
#   capacity  for transcoding (Opus complexity 0, echo loopback 100 ms) and passthrough
#             (audio.opus_passthrough): the largest N for which >= 99 % of N sessions keep
#             their p99 echoed-frame interval within 20 +- 5 ms (doubling, then bisection);
#             in relay mode, and in direct mode (no relay: its cost is then off CPU 1)
#   setups    a burst of --burst sessions, rate limit raised, no audio: setups/s achieved and
#             setups per transceiver CPU-second
#   profile   (when perf works) a flat cpu-clock profile of the transceiver at the
#             transcoding and passthrough targets
#
# Every run stops by itself: points last <= ~20 s, the whole script ~10 minutes. Only
# 127.0.0.1 is used. Needs: taskset, jq, curl; perf optional.
#
# Usage: bench/run_session_bench.sh [options] [smoke]
#   smoke               3 sessions through relay + transceiver, exit 1 unless all connect and
#                       hear authenticated echo (a CTest candidate; ~10 s)
#   --build-dir DIR     where bin/ is (default <repo>/build)
#   --transceiver BIN   transceiver binary (default <build-dir>/bin/rtcedge-transceiver)
#   --out DIR           results (default /tmp/rtce-session-bench); one JSON per point
#   --seconds S         measurement window per point (default 8)
#   --modes LIST        subset of: relay direct (default "relay direct")
#   --phases LIST       subset of: capacity setups profile (default all)
#   --quick             fewer bisection steps (coarser N)
#   --client-profile P  browser (default) | pion: how the load generator's clients run ICE
#                       (bench/session_loadgen/client_ice_agent.h)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$REPO/build"
TRANSCEIVER=""
OUT=/tmp/rtce-session-bench
SECONDS_PER_POINT=8
MODES="relay direct"
PHASES="capacity setups profile"
QUICK=0
SMOKE=0
BURST=500
TX_CPU=0
LG_CPU=1
CLIENT_PROFILE=browser

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --transceiver) TRANSCEIVER="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --seconds) SECONDS_PER_POINT="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --phases) PHASES="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --client-profile) CLIENT_PROFILE="$2"; shift 2 ;;
    smoke) SMOKE=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

BIN="$BUILD_DIR/bin"
TRANSCEIVER="${TRANSCEIVER:-$BIN/rtcedge-transceiver}"
RELAY="$BIN/rtcedge-relay"
LOADGEN="$BIN/rtce_session_loadgen"
for b in "$TRANSCEIVER" "$RELAY" "$LOADGEN"; do
  [[ -x "$b" ]] || { echo "missing $b (ninja -C $BUILD_DIR rtcedge-transceiver rtcedge-relay rtce_session_loadgen)" >&2; exit 2; }
done
for tool in taskset jq curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
if [[ $(nproc) -lt 2 ]]; then TX_CPU=0; LG_CPU=0; fi

# The scratch folder, log(), cleanup, ports and the relay/transceiver pair: shared with
# run_connect_bench.sh. The relay runs on the load generator's CPU.
source "$REPO/bench/stack_lib.sh"
stack_setup session-bench
RELAY_CPU="$LG_CPU"

# start_stack MODE(relay|direct) AUDIO(transcoding|passthrough) [extra transceiver flags...]
start_stack() {
  local mode="$1" audio="$2"; shift 2
  stack_ports
  local tx=(taskset -c "$TX_CPU" "$TRANSCEIVER" --http-listen "127.0.0.1:$HTTP_PORT" --workers 1
            --media-listen 127.0.0.1 --media-base-port "$MEDIA_PORT" --hint-key-file "$WORK/hint-keys.yaml"
            --sessions-setup-rate 100000 --sessions-setup-burst 100000 --sessions-max-per-worker 20000
            --backend-echo-mode loopback --backend-echo-delay 100ms --log-level warn)
  if [[ "$audio" == passthrough ]]; then tx+=(--audio-opus-passthrough true); else tx+=(--audio-opus-complexity 0); fi
  if [[ "$mode" == relay ]]; then
    # Every load-generator session comes from 127.0.0.1: no per-prefix flow bound here.
    start_relay "$MEDIA_PORT" --flows-max-per-source-prefix 0
    tx+=(--relay-vips "$RELAY_VIP")
  fi
  start_transceiver "${tx[@]}" "$@"
}

# run_point MODE AUDIO N LABEL [loadgen flags...]: sets JSON to the result's path (no
# subshell, so the EXIT trap always knows which processes to stop).
run_point() {
  local mode="$1" audio="$2" n="$3" label="$4"; shift 4
  JSON="$OUT/$label.json"
  rm -f "$JSON"
  start_stack "$mode" "$audio"
  local rate=$(( n > 400 ? 400 : (n < 50 ? 50 : n) ))
  local lg=(taskset -c "$LG_CPU" "$LOADGEN" --url "$URL" --sessions "$n" --seconds "$SECONDS_PER_POINT" --warmup 2
            --setup-rate "$rate" --setup-concurrency 4 --client-profile "$CLIENT_PROFILE"
            --transceiver-pid "$TX_PID" --json-out "$JSON" --label "$label")
  [[ -n "$RELAY_PID" ]] && lg+=(--relay-pid "$RELAY_PID")
  timeout 90 "${lg[@]}" "$@" > "$OUT/$label.txt" 2> "$OUT/$label.err" || true
  cp "$WORK/transceiver.log" "$OUT/$label.transceiver.log" 2>/dev/null || true
  if [[ -n "$RELAY_PID" ]]; then
    curl -fsS --max-time 2 "$RELAY_ADMIN/metrics" 2>/dev/null | grep -E '^rtcedge_relay_(received|forwarded|dropped)_packets_total' \
      | grep -v ' 0$' > "$OUT/$label.relay-metrics.txt" || true
  fi
  stop_stack
}

passes() {  # json: >= 99 % of the requested sessions keep p99 within the band
  [[ -s "$1" ]] && jq -e '.fraction_p99_within_band >= 0.99' "$1" >/dev/null
}

summary_line() {  # json
  jq -r '"N=\(.sessions_requested) connected=\(.sessions_connected) in-band=\(.fraction_p99_within_band*100|floor)% p99=\(.frame_interval_ms.p99) max=\(.frame_interval_ms.max) frames=\(.frames_received_ratio*100|floor)% tx=\(.cpu_window.transceiver_cores) relay=\(.cpu_window.relay_cores) lg=\(.cpu_window.loadgen_cores) KiB/session=\(.transceiver_kib_per_session)"' "$1" 2>/dev/null || echo "no result"
}

# search MODE AUDIO START CAP: the largest passing N, doubling from START then bisecting.
search() {
  local mode="$1" audio="$2" n="$3" cap="$4" lo=0 hi=0
  while :; do
    run_point "$mode" "$audio" "$n" "cap-$mode-$audio-$n"
    log "$mode $audio: $(summary_line "$JSON") -> $(passes "$JSON" && echo pass || echo FAIL)"
    if passes "$JSON"; then
      lo=$n
      (( n >= cap )) && break
      n=$(( n * 2 > cap ? cap : n * 2 ))
    else
      hi=$n; break
    fi
  done
  if (( hi > 0 && lo == 0 )); then  # the start already failed: halve until a pass
    n=$(( hi / 2 ))
    while (( n >= 10 )); do
      run_point "$mode" "$audio" "$n" "cap-$mode-$audio-$n"
      log "$mode $audio: $(summary_line "$JSON") -> $(passes "$JSON" && echo pass || echo FAIL)"
      if passes "$JSON"; then lo=$n; break; fi
      hi=$n; n=$(( n / 2 ))
    done
  fi
  local precision=$(( QUICK ? 10 : 20 ))  # stop when hi - lo <= lo / precision
  while (( hi > 0 && lo > 0 && hi - lo > (lo / precision > 5 ? lo / precision : 5) )); do
    n=$(( (lo + hi) / 2 ))
    run_point "$mode" "$audio" "$n" "cap-$mode-$audio-$n"
    log "$mode $audio: $(summary_line "$JSON") -> $(passes "$JSON" && echo pass || echo FAIL)"
    if passes "$JSON"; then lo=$n; else hi=$n; fi
  done
  echo "$mode $audio $lo $hi" >> "$OUT/capacity.txt"
  log "$mode $audio: largest passing N = $lo (first failing N = ${hi:-none})"
}

if (( SMOKE )); then
  start_stack relay transcoding
  rc=0
  timeout 60 "$LOADGEN" --url "$URL" --sessions 3 --seconds 3 --warmup 1 --expect-all-connected \
    --client-profile "$CLIENT_PROFILE" --transceiver-pid "$TX_PID" --relay-pid "$RELAY_PID" \
    --label "smoke-$CLIENT_PROFILE" || rc=$?
  exit $rc
fi

log "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); transceiver on CPU $TX_CPU, loadgen + relay on CPU $LG_CPU"
log "results in $OUT"
: > "$OUT/capacity.txt"
START=$(date +%s)

if [[ " $PHASES " == *" capacity "* ]]; then
  for mode in $MODES; do
    search "$mode" transcoding 100 1600
    search "$mode" passthrough 500 4000
  done
fi

if [[ " $PHASES " == *" setups "* ]]; then
  for mode in $MODES; do
    start_stack "$mode" transcoding
    lg=(taskset -c "$LG_CPU" "$LOADGEN" --url "$URL" --sessions "$BURST" --seconds 1 --warmup 0 --setup-rate 0
        --setup-concurrency 4 --no-audio --transceiver-pid "$TX_PID" --json-out "$OUT/setups-$mode.json" --label "setups-$mode")
    [[ -n "$RELAY_PID" ]] && lg+=(--relay-pid "$RELAY_PID")
    timeout 60 "${lg[@]}" > "$OUT/setups-$mode.txt" 2>&1 || true
    stop_stack
    jq -r '"setups \(.label): \(.sessions_connected)/\(.sessions_requested) in \(.setup_span_s) s = \(.setup_rate_per_s) /s; transceiver \(.cpu_setup.transceiver_cores) cores over \(.cpu_setup.wall_s) s; ttc p50 \(.time_to_connected_ms.p50) p99 \(.time_to_connected_ms.p99) ms"' \
      "$OUT/setups-$mode.json" >&2 || true
  done
fi

if [[ " $PHASES " == *" profile "* ]] && command -v perf >/dev/null && perf record -e cpu-clock -o /dev/null -- true 2>/dev/null; then
  for spec in "transcoding 150" "passthrough 1500"; do
    read -r audio n <<< "$spec"
    start_stack relay "$audio"
    taskset -c "$LG_CPU" "$LOADGEN" --url "$URL" --sessions "$n" --seconds 8 --warmup 1 --setup-rate 400 \
      --setup-concurrency 4 --transceiver-pid "$TX_PID" --json-out "$OUT/profile-$audio.json" --label "profile-$audio" \
      > "$OUT/profile-$audio.txt" 2>&1 &
    lg_pid=$!
    # Record inside the measurement window: after the setup ramp and warm-up.
    sleep $(( n / 400 + 3 ))
    perf record -e cpu-clock -F 2000 -p "$TX_PID" -o "$WORK/perf.data" -- sleep 4 > /dev/null 2>&1 || true
    wait "$lg_pid" || true
    perf report -i "$WORK/perf.data" --stdio --no-children --sort dso,symbol --percent-limit 1 2>/dev/null \
      | grep -v '^$' | head -60 > "$OUT/profile-$audio.perf.txt" || true
    perf report -i "$WORK/perf.data" --stdio --no-children --sort dso 2>/dev/null | grep -v '^$' | head -25 \
      > "$OUT/profile-$audio.dso.txt" || true
    stop_stack
    log "profile $audio at $n sessions: $OUT/profile-$audio.perf.txt"
  done
fi

log "done in $(( $(date +%s) - START )) s"
echo "# capacity (mode audio largest-pass first-fail)"; cat "$OUT/capacity.txt"
