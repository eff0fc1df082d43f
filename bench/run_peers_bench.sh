#!/usr/bin/env bash
# run_peers_bench.sh — the floor and the peers in the same run (issue 25 §1): one command
# measures, with the same clients, packets and rates, what a voice session costs on
#
#   floor        rtce_floor_echo (bench/floor_echo.cpp): UDP batches + one hash lookup +
#                SRTP-shaped AES-128-GCM open and seal per packet, nothing else
#   pion         rtce_pion_echo (bench/pion/echo): a Pion WebRTC echo server, Pion defaults
#   passthrough  rtcedge-transceiver --audio-opus-passthrough true (echo backend, 100 ms)
#   transcoding  rtcedge-transceiver, Opus complexity 0 (echo backend, loopback 100 ms)
#
# with two clients: rtce_session_loadgen (C++, the transceiver's own components; against the
# floor it skips signaling, ICE and DTLS and sends the same SRTP keyed with a pre-shared
# key: --floor) and rtce_pion_client (bench/pion/client: Pion PeerConnections; it cannot
# drive the floor, which speaks no ICE or DTLS). Every server runs alone on CPU 0 (taskset),
# the client on CPU 1; the transceiver in direct mode (--workers 1, no relay), like the
# other two. Per point: fresh server -> setup -> 2 s warm-up -> --seconds window -> teardown.
# Over the window: server CPU (utime+stime), context switches of each server thread
# (/proc/<pid>/task/*/status), VmRSS against the idle process, echoed frames, and a
# `perf record -e cpu-clock` of the server pid for the scheduler share. Then
# bench/peers_report.py prints the Markdown tables (per point, and the ratios).
# Results and method: docs/benchmarks.md ("Floor and peers").
#
# Every run stops by itself (each client and server has its own time limit; the default
# run is ~5 minutes), uses only 127.0.0.1, and stops what it started on exit or error.
#
# Usage: bench/run_peers_bench.sh [options] [smoke]
#   smoke                 3 sessions for ~3 s: loadgen -> floor, loadgen -> Pion echo, Pion
#                         client -> Pion echo; exit 1 unless every session heard its echo
#                         (CTest: peers_bench_smoke). Fails when the Pion binaries are missing.
#   --build-dir DIR       where bin/ is (default <repo>/build)
#   --out DIR             results (default /tmp/rtce-peers-bench)
#   --seconds S           measurement window per point (default 8)
#   --sessions "N..."     sessions per point for rtce_session_loadgen (default "100 500")
#   --pion-sessions "N.." sessions per point for rtce_pion_client (default "100")
#   --targets "T..."      subset of: floor pion passthrough transcoding (default all)
#   --clients "C..."      subset of: loadgen pion (default both)
#   --transcoding-max N   transcoding only at N <= this (default 150: one core's worth)
#   --rounds R            repeat every point R times, interleaved; the tables take medians
#   --no-perf             no perf record (no scheduler share)
#   --baseline BIN        also run target `baseline`: passthrough on another transceiver
#                         binary (the build before a change), interleaved with the rest, so
#                         the report has before/after ratios from the same run
#   --nice N              run servers and clients at this nice value (default 0; -10 keeps
#                         a shared machine's other jobs from starving them; needs root)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARGS="$*"
BUILD_DIR="$REPO/build"
OUT=/tmp/rtce-peers-bench
SECONDS_PER_POINT=8
LG_SESSIONS="100 500"
PION_SESSIONS="100"
TARGETS="floor pion passthrough transcoding"
CLIENTS="loadgen pion"
TRANSCODING_MAX=150
ROUNDS=1
PERF=1
NICE=0
BASELINE=""
SMOKE=0
SRV_CPU=0
CL_CPU=1
# The floor's pre-shared SRTP master keys (client key||salt, then the server's): a bench
# constant, like the fixed keys of a test vector.
FLOOR_KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b808182838485868788898a8b8c8d8e8f909192939495969798999a9b

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --seconds) SECONDS_PER_POINT="$2"; shift 2 ;;
    --sessions) LG_SESSIONS="$2"; shift 2 ;;
    --pion-sessions) PION_SESSIONS="$2"; shift 2 ;;
    --targets) TARGETS="$2"; shift 2 ;;
    --clients) CLIENTS="$2"; shift 2 ;;
    --transcoding-max) TRANSCODING_MAX="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --no-perf) PERF=0; shift ;;
    --nice) NICE="$2"; shift 2 ;;
    --baseline) BASELINE="$2"; shift 2 ;;
    smoke) SMOKE=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

if [[ -n "$BASELINE" && " $TARGETS " != *" baseline "* ]]; then TARGETS="$TARGETS baseline"; fi
[[ -z "$BASELINE" || -x "$BASELINE" ]] || { echo "--baseline $BASELINE: not an executable" >&2; exit 2; }
BIN="$BUILD_DIR/bin"
TRANSCEIVER="$BIN/rtcedge-transceiver"
RELAY="$BIN/rtcedge-relay"  # stack_lib.sh makes the hint keys with it
LOADGEN="$BIN/rtce_session_loadgen"
FLOOR="$BIN/rtce_floor_echo"
PION_ECHO="$BIN/rtce_pion_echo"
PION_CLIENT="$BIN/rtce_pion_client"
for b in "$TRANSCEIVER" "$RELAY" "$LOADGEN" "$FLOOR"; do
  [[ -x "$b" ]] || { echo "missing $b (scripts/build.sh rtcedge-transceiver rtcedge-relay rtce_session_loadgen rtce_floor_echo)" >&2; exit 1; }
done
for b in "$PION_ECHO" "$PION_CLIENT"; do
  # Not a skip: scripts/install-deps.sh installs what builds them.
  [[ -x "$b" ]] || { echo "missing $b: apt-get install golang-go golang-github-pion-webrtc.v3-dev (scripts/install-deps.sh), then scripts/build.sh rtce_pion_echo rtce_pion_client" >&2; exit 1; }
done
for tool in taskset curl /usr/bin/python3; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
if [[ $(nproc) -lt 2 ]]; then SRV_CPU=0; CL_CPU=0; fi

source "$REPO/bench/stack_lib.sh"
stack_setup peers-bench
"$LOADGEN" --write-opus-frame "$WORK/opus-frame.bin"  # the Pion client sends the same bytes

# start_server TARGET: the server on SRV_CPU; sets TX_PID (stack_lib.sh stops it), and
# URL (signaling) or FLOOR_ADDR.
start_server() {
  local target="$1"
  stack_ports
  case "$target" in
    floor)
      nice -n "$NICE" taskset -c "$SRV_CPU" "$FLOOR" --listen "127.0.0.1:$MEDIA_PORT" --key "$FLOOR_KEY" --max-seconds 600 \
        > "$WORK/transceiver.log" 2>&1 &
      TX_PID=$!
      FLOOR_ADDR="127.0.0.1:$MEDIA_PORT"
      for _ in $(seq 100); do
        grep -q '^ready' "$WORK/transceiver.log" 2>/dev/null && return 0
        kill -0 "$TX_PID" 2>/dev/null || break
        sleep 0.1
      done
      log "floor echo did not start: $(cat "$WORK/transceiver.log")"; return 1 ;;
    pion)
      start_transceiver nice -n "$NICE" taskset -c "$SRV_CPU" "$PION_ECHO" --listen "127.0.0.1:$HTTP_PORT" --max-lifetime 10m ;;
    passthrough|transcoding|baseline)
      local binary="$TRANSCEIVER"
      [[ "$target" == baseline ]] && binary="$BASELINE"
      local tx=(nice -n "$NICE" taskset -c "$SRV_CPU" "$binary" --http-listen "127.0.0.1:$HTTP_PORT" --workers 1
                --media-listen 127.0.0.1 --media-base-port "$MEDIA_PORT" --hint-key-file "$WORK/hint-keys.yaml"
                --sessions-setup-rate 100000 --sessions-setup-burst 100000 --sessions-max-per-worker 20000
                --backend-echo-mode loopback --backend-echo-delay 100ms --log-level warn)
      if [[ "$target" != transcoding ]]; then tx+=(--audio-opus-passthrough true); else tx+=(--audio-opus-complexity 0); fi
      start_transceiver "${tx[@]}" ;;
    *) log "unknown target $target"; return 1 ;;
  esac
}

# run_client CLIENT TARGET N SECONDS WARMUP LABEL [extra client flags...]: one client run
# against the started server; its JSON is $OUT/LABEL.json. Returns the client's exit status.
run_client() {
  local client="$1" target="$2" n="$3" seconds="$4" warmup="$5" label="$6"; shift 6
  local rate=$(( n > 400 ? 400 : (n < 50 ? 50 : n) )) cmd
  if [[ "$client" == loadgen ]]; then
    cmd=(nice -n "$NICE" taskset -c "$CL_CPU" "$LOADGEN" --sessions "$n" --seconds "$seconds" --warmup "$warmup" --setup-rate "$rate"
         --setup-concurrency 4 --server-pid "$TX_PID" --json-out "$OUT/$label.json" --label "$label")
    if [[ "$target" == floor ]]; then cmd+=(--floor "$FLOOR_ADDR" --floor-key "$FLOOR_KEY"); else cmd+=(--url "$URL"); fi
  else
    # Pion's setup costs more CPU per session on both sides: a gentler ramp.
    cmd=(nice -n "$NICE" taskset -c "$CL_CPU" "$PION_CLIENT" -url "$URL" -sessions "$n" -seconds "$seconds" -warmup "$warmup"
         -setup-rate "$(( rate / 2 ))" -setup-concurrency 4 -opus-frame "$WORK/opus-frame.bin"
         -server-pid "$TX_PID" -json-out "$OUT/$label.json" -label "$label")
  fi
  timeout 150 "${cmd[@]}" "$@" > "$OUT/$label.txt" 2> "$OUT/$label.err"
}

if (( SMOKE )); then
  rc=0
  for spec in "loadgen floor" "loadgen pion" "pion pion"; do
    read -r client target <<< "$spec"
    start_server "$target"
    if [[ "$client" == loadgen ]]; then extra=(--expect-all-connected); else extra=(-expect-all-connected); fi
    if run_client "$client" "$target" 3 3 1 "smoke-$client-$target" "${extra[@]}"; then
      log "smoke $client -> $target: every session heard its echo"
    else
      rc=1; log "smoke $client -> $target FAILED:"; cat "$OUT/smoke-$client-$target.txt" "$OUT/smoke-$client-$target.err" >&2 || true
    fi
    stop_stack
  done
  exit $rc
fi

perf_ok=0
if (( PERF )) && command -v perf >/dev/null && perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1; then perf_ok=1; fi

# The machine, as the report prints it.
{
  echo "model=$(lscpu | sed -n 's/^Model name: *//p')"
  echo "cpus=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "hypervisor=$(lscpu | sed -n 's/^Hypervisor vendor: *//p')"
  echo "virtual=$(grep -qw hypervisor /proc/cpuinfo && echo yes || echo no)"
  echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "go=$(go version 2>/dev/null | awk '{print $3}')"
  echo "pion=$(dpkg-query -W -f='${Version}' golang-github-pion-webrtc.v3-dev 2>/dev/null)"
  echo "commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)"
  echo "perf=$perf_ok"
  echo "seconds=$SECONDS_PER_POINT"
  echo "nice=$NICE"
  echo "command=bench/run_peers_bench.sh $ARGS"
} > "$OUT/machine.txt"
: > "$OUT/points.tsv"
log "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), kernel $(uname -r); servers on CPU $SRV_CPU, clients on CPU $CL_CPU"
log "results in $OUT"
START=$(date +%s)

# point CLIENT TARGET N ROUND
point() {
  local client="$1" target="$2" n="$3" round="$4"
  local label="$client-$target-$n-r$round" extra=()
  start_server "$target"
  if (( perf_ok )); then
    # Over the window only, with call chains (bench/peers_report.py says why); perf itself
    # runs on the client's CPU (it inherits the client's taskset).
    local wc="perf record -q -g -e cpu-clock -F 999 -p $TX_PID -o $WORK/$label.perf -- sleep $SECONDS_PER_POINT >/dev/null 2>&1"
    if [[ "$client" == loadgen ]]; then extra=(--window-command "$wc"); else extra=(-window-command "$wc"); fi
  fi
  run_client "$client" "$target" "$n" "$SECONDS_PER_POINT" 2 "$label" "${extra[@]}" || log "$label: client exited $?"
  stop_stack  # the floor prints its counters on SIGTERM
  cp "$WORK/transceiver.log" "$OUT/$label.server.log" 2>/dev/null || true
  if (( perf_ok )) && [[ -s "$WORK/$label.perf" ]]; then
    perf script -i "$WORK/$label.perf" -F ip,sym,dso 2>/dev/null \
      | /usr/bin/python3 "$REPO/bench/peers_report.py" --out "$OUT" --perf-summary "$label" || true
    perf report -i "$WORK/$label.perf" --stdio --no-children --sort sym --percent-limit 0.5 2>/dev/null \
      | grep -E '^ +[0-9.]+%' > "$OUT/$label.perf-sym.txt" || true
    rm -f "$WORK/$label.perf"
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$client" "$target" "$n" "$round" "$label" >> "$OUT/points.tsv"
  /usr/bin/python3 "$REPO/bench/peers_report.py" --out "$OUT" --line "$label" >&2 || true
}

for round in $(seq "$ROUNDS"); do
  for client in $CLIENTS; do
    if [[ "$client" == loadgen ]]; then sizes="$LG_SESSIONS"; else sizes="$PION_SESSIONS"; fi
    for n in $sizes; do
      for target in $TARGETS; do
        [[ "$client" == pion && "$target" == floor ]] && continue  # the floor speaks no ICE/DTLS
        [[ "$target" == transcoding ]] && (( n > TRANSCODING_MAX )) && continue
        point "$client" "$target" "$n" "$round"
      done
    done
  done
done

# What transcoding should add to passthrough: the same Opus work stand-alone, on the server's CPU.
if [[ " $TARGETS " == *" transcoding "* && -x "$BIN/rtce_opus_cost" ]]; then
  nice -n "$NICE" taskset -c "$SRV_CPU" "$BIN/rtce_opus_cost" --frame "$WORK/opus-frame.bin" --rate 16000 \
    --complexity 0 --bitrate 32000 > "$OUT/opus-cost.json" || log "rtce_opus_cost failed"
fi
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
log "done in $(( $(date +%s) - START )) s"
/usr/bin/python3 "$REPO/bench/peers_report.py" --out "$OUT" | tee "$OUT/report.md"
