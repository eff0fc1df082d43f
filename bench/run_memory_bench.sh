#!/usr/bin/env bash
# run_memory_bench.sh — memory per call (issue 25 §3): the transceiver's RSS growth per added
# session, audio-only passthrough, transcoding, and with the oai-events data channel, for one
# or two transceiver binaries in the same run (a branch point's "before" and this tree's
# "after"), then the heap by component (rtce_session_memory). Results and method:
# docs/benchmarks.md ("Memory per call").
#
#   rtce_session_loadgen (CPU 1) ──UDP──> rtcedge-transceiver (CPU 0, 1 worker, direct mode)
#                                          embedded echo backend, loopback 100 ms
#
# A point: fresh transceiver -> N sessions set up (<= 400/s) -> 2 s warm-up -> --seconds of
# audio both ways (50 packets/s each way per session) -> VmRSS read at the end of the window
# against VmRSS of the idle process -> DELETE, stop. "KiB per session" is that growth / N; the
# marginal figure is the growth between two N of the same mode / their difference, which
# leaves out what the first session pays once (thread-local buffers, OpenSSL and usrsctp
# globals, the allocator's first arena growth). The frames column tells whether the point
# kept up: a transceiver that falls behind grows its queues (the echo delay line, the playout
# queue) towards their bounds, which is not what a call costs.
#
# Points (--points): passthrough 100 500 1000, transcoding 50 100 200 (Opus complexity 0; 200
# needs more than this machine's one core, see the frames column), and passthrough with the
# data channel (--data-channel: POST /v1/realtime/calls, m=application, oai-events open) at
# 100 500. Every run stops by itself (each point <= ~40 s) and uses only 127.0.0.1.
#
# Usage: bench/run_memory_bench.sh [options] [smoke]
#   smoke              3 audio-only sessions and 3 with oai-events against --after, exit 1
#                      unless all connect, echo and open their channel (CTest memory_bench_smoke)
#   --build-dir DIR    where bin/ is (default <repo>/build): the load generator, rtce_session_memory
#   --after BIN        transceiver measured as "after" (default <build-dir>/bin/rtcedge-transceiver)
#   --before BIN       transceiver measured as "before" (e.g. a build of the branch point); optional
#   --out DIR          results (default /tmp/rtce-memory-bench); report.md there
#   --seconds S        window per point (default 6)
#   --rounds R         repeat every point R times, before and after interleaved (default 1)
#   --points "P..."    subset, each MODE:N with MODE passthrough|transcoding|datachannel
#   --nice N           run transceiver and load generator at this nice value (default 0; -10
#                      keeps a shared machine's other jobs from starving them; needs root)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$REPO/build"
AFTER=""
BEFORE=""
OUT=/tmp/rtce-memory-bench
SECONDS_PER_POINT=6
ROUNDS=1
POINTS="passthrough:100 passthrough:500 passthrough:1000 transcoding:50 transcoding:100 transcoding:200 datachannel:100 datachannel:500"
NICE=0
SMOKE=0
TX_CPU=0
LG_CPU=1

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --after) AFTER="$2"; shift 2 ;;
    --before) BEFORE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --seconds) SECONDS_PER_POINT="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --points) POINTS="$2"; shift 2 ;;
    --nice) NICE="$2"; shift 2 ;;
    smoke) SMOKE=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

BIN="$BUILD_DIR/bin"
AFTER="${AFTER:-$BIN/rtcedge-transceiver}"
RELAY="$BIN/rtcedge-relay"  # stack_lib.sh makes the hint keys with it
LOADGEN="$BIN/rtce_session_loadgen"
MEMORY="$BIN/rtce_session_memory"
for b in "$AFTER" "$RELAY" "$LOADGEN" ${BEFORE:+"$BEFORE"}; do
  [[ -x "$b" ]] || { echo "missing $b (scripts/build.sh rtcedge-transceiver rtcedge-relay rtce_session_loadgen rtce_session_memory)" >&2; exit 2; }
done
for tool in taskset jq curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
if [[ $(nproc) -lt 2 ]]; then TX_CPU=0; LG_CPU=0; fi

source "$REPO/bench/stack_lib.sh"
stack_setup memory-bench

# start_tx BIN MODE(passthrough|transcoding): a fresh transceiver on TX_CPU; sets TX_PID and URL.
start_tx() {
  local bin="$1" audio="$2"
  stack_ports
  local tx=(nice -n "$NICE" taskset -c "$TX_CPU" "$bin" --http-listen "127.0.0.1:$HTTP_PORT" --workers 1
            --media-listen 127.0.0.1 --media-base-port "$MEDIA_PORT" --hint-key-file "$WORK/hint-keys.yaml"
            --sessions-setup-rate 100000 --sessions-setup-burst 100000 --sessions-max-per-worker 20000
            --backend-echo-mode loopback --backend-echo-delay 100ms --log-level warn)
  if [[ "$audio" == transcoding ]]; then tx+=(--audio-opus-complexity 0); else tx+=(--audio-opus-passthrough true); fi
  start_transceiver "${tx[@]}"
}

# point WHICH(before|after) MODE N ROUND: one run; its JSON is $OUT/WHICH-MODE-N-rROUND.json.
point() {
  local which="$1" mode="$2" n="$3" round="$4" bin audio extra=()
  bin="$AFTER"; [[ "$which" == before ]] && bin="$BEFORE"
  audio="$mode"; [[ "$mode" == datachannel ]] && { audio=passthrough; extra=(--data-channel); }
  local label="$which-$mode-$n-r$round"
  start_tx "$bin" "$audio"
  local rate=$(( n > 400 ? 400 : (n < 50 ? 50 : n) ))
  timeout 120 nice -n "$NICE" taskset -c "$LG_CPU" "$LOADGEN" --url "$URL" --sessions "$n" \
    --seconds "$SECONDS_PER_POINT" --warmup 2 --setup-rate "$rate" --setup-concurrency 4 \
    --transceiver-pid "$TX_PID" --json-out "$OUT/$label.json" --label "$label" "${extra[@]}" \
    > "$OUT/$label.txt" 2> "$OUT/$label.err" || log "$label: load generator exited $?"
  stop_stack
  printf '%s\t%s\t%s\t%s\t%s\n' "$which" "$mode" "$n" "$round" "$label" >> "$OUT/points.tsv"
  jq -r '"\(.label): \(.sessions_connected)/\(.sessions_requested) connected, RSS \(.transceiver_rss_kib.before) -> \(.transceiver_rss_kib.after) KiB = \(.transceiver_kib_per_session * 10 | round / 10) KiB/session, frames \(.frames_received_ratio * 1000 | round / 10) %\(if .data_channels_open then ", oai-events open \(.data_channels_open)" else "" end)"' \
    "$OUT/$label.json" >&2 2>/dev/null || log "$label: no result"
}

if (( SMOKE )); then
  rc=0
  for extra in "" "--data-channel"; do
    start_tx "$AFTER" passthrough
    # shellcheck disable=SC2086
    timeout 60 "$LOADGEN" --url "$URL" --sessions 3 --seconds 2 --warmup 1 --expect-all-connected \
      --transceiver-pid "$TX_PID" --label "memory-smoke$extra" $extra > "$WORK/smoke.txt" 2>&1 || { rc=1; cat "$WORK/smoke.txt" >&2; }
    stop_stack
  done
  exit $rc
fi

mkdir -p "$OUT"
: > "$OUT/points.tsv"
{
  echo "model=$(lscpu | sed -n 's/^Model name: *//p')"
  echo "cpus=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "glibc=$(ldd --version | head -1 | awk '{print $NF}')"
  echo "openssl=$(openssl version | awk '{print $2}')"
  echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "after=$AFTER"
  echo "before=${BEFORE:-none}"
  echo "seconds=$SECONDS_PER_POINT nice=$NICE rounds=$ROUNDS"
} > "$OUT/machine.txt"
log "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); transceiver on CPU $TX_CPU, load generator on CPU $LG_CPU; results in $OUT"
START=$(date +%s)
for round in $(seq "$ROUNDS"); do
  for spec in $POINTS; do
    mode="${spec%%:*}" n="${spec##*:}"
    [[ -n "$BEFORE" ]] && point before "$mode" "$n" "$round"
    point after "$mode" "$n" "$round"
  done
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
log "done in $(( $(date +%s) - START )) s"

# The report: per point the medians over rounds; marginal = growth between consecutive N.
{
  echo "Machine: $(sed -n 's/^model=//p' "$OUT/machine.txt"), $(nproc) CPUs; load average $(sed -n 's/^loadavg_start=//p' "$OUT/machine.txt") -> $(sed -n 's/^loadavg_end=//p' "$OUT/machine.txt"); window ${SECONDS_PER_POINT} s, nice $NICE, $ROUNDS round(s)."
  echo
  echo "| mode | N | connected (before / after) | frames echoed (before / after) | KiB per session, before | KiB per session, after | marginal KiB per added session, before / after | oai-events: KiB more than audio-only, before / after |"
  echo "|---|---|---|---|---|---|---|---|"
  /usr/bin/python3 - "$OUT" <<'EOF'
import json, os, statistics, sys
out = sys.argv[1]
runs = {}
for line in open(os.path.join(out, "points.tsv")):
    which, mode, n, rnd, label = line.split()
    path = os.path.join(out, label + ".json")
    if not os.path.exists(path):
        continue
    j = json.load(open(path))
    rss = j.get("transceiver_rss_kib", {})
    if not rss.get("before") or not rss.get("after") or rss["before"] < 0 or not j["sessions_connected"]:
        continue
    runs.setdefault((mode, int(n), which), []).append(
        (rss["after"] - rss["before"], j["sessions_connected"], j["frames_received_ratio"], j.get("data_channels_open")))
# Medians over the rounds that kept up (>= 99 % of the frames echoed: a transceiver that falls
# behind grows its queues, see above); when none did, over all rounds, marked with a dagger.
KEPT_UP = 0.99
point, overloaded = {}, set()
for k, v in runs.items():
    kept = [r for r in v if r[2] >= KEPT_UP]
    if not kept:
        kept = v
        overloaded.add(k)
    point[k] = (statistics.median(r[0] for r in kept), min(r[1] for r in kept),
                statistics.median(r[2] for r in kept), kept[0][3])
def fmt(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"
order = {"passthrough": 0, "transcoding": 1, "datachannel": 2}
keys = sorted({(m, n) for (m, n, _) in point}, key=lambda k: (order.get(k[0], 9), k[1]))
prev = {}
for mode, n in keys:
    cells = {}
    for which in ("before", "after"):
        p = point.get((mode, n, which))
        if p is None:
            cells[which] = None
            continue
        growth, conn, frames, dc = p
        marginal = None
        if (mode, which) in prev:
            pn, pg = prev[(mode, which)]
            marginal = (growth - pg) / (n - pn)
        prev[(mode, which)] = (n, growth)
        more = None
        audio = point.get(("passthrough", n, which))
        if mode == "datachannel" and audio:
            more = growth / conn - audio[0] / audio[1]
        cells[which] = dict(conn=f"{conn}" + (f" ({dc} ch)" if dc is not None else ""), frames=frames * 100,
                            per=growth / conn, marginal=marginal, more=more,
                            mark="†" if (mode, n, which) in overloaded else "")
    b, a = cells["before"], cells["after"]
    get = lambda c, k: None if c is None else c[k]
    label = "passthrough + oai-events" if mode == "datachannel" else mode
    print(f"| {label} | {n} | {get(b, 'conn') or '–'} / {get(a, 'conn') or '–'} | "
          f"{fmt(get(b, 'frames'))}{get(b, 'mark') or ''} / {fmt(get(a, 'frames'))}{get(a, 'mark') or ''} % | "
          f"{fmt(get(b, 'per'))} | **{fmt(get(a, 'per'))}** | "
          f"{fmt(get(b, 'marginal'))} / {fmt(get(a, 'marginal'))} | {fmt(get(b, 'more'))} / {fmt(get(a, 'more'))} |")
EOF
  echo
  echo "Rounds that echoed < 99 % of the frames are left out of a point's median; † marks a point where no round kept up (median of all)."
  if [[ -x "$MEMORY" ]]; then
    echo
    "$MEMORY" --count 200
  fi
} | tee "$OUT/report.md"
