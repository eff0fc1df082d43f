#!/usr/bin/env bash
# demo.sh — the main job: the rtcedge stack on loopback with embedded defaults (no Redis).
# Installs packages, builds the two binaries (not the tests), then runs until Ctrl-C:
#   rtcedge-relay        VIP 127.0.0.1:3478 UDP, and TCP for ICE-TCP (callers whose network drops
#                        UDP; the chart uses TCP 443), userspace data path, admin http://127.0.0.1:9478
#   rtcedge-transceiver  http://127.0.0.1:8080 (demo page, signaling, /metrics), 2 workers
#                        (endpoints 1 and 2 on 127.0.0.1:40000-40001) behind the relay,
#                        embedded echo backend (loopback, 500 ms)
# Open the printed URL in a browser on this machine, press Talk, hear yourself back.
# Options: --check  prove the path once with a real WebRTC client (aiortc) and exit.
set -euo pipefail
cd "$(dirname "$0")/.."
check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

scripts/install-deps.sh
scripts/build.sh rtcedge-relay rtcedge-transceiver >/dev/null

demo=build/demo
mkdir -p "$demo"
[[ -f $demo/hint-keys.yaml ]] || build/bin/rtcedge-relay hint keygen --id 1 >"$demo/hint-keys.yaml"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

wait_ready() {  # url name: up to 10 s
  for _ in $(seq 1 100); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "demo: $2 did not become ready ($1); its log is in $demo/" >&2
  exit 1
}

build/bin/rtcedge-relay --hint-key-file "$demo/hint-keys.yaml" --listen 127.0.0.1:3478 --ice-tcp-port 3478 \
  --endpoints '1=127.0.0.1:40000,2=127.0.0.1:40001' --admin-listen 127.0.0.1:9478 --workers 1 \
  --pin-cpus false >"$demo/relay.log" 2>&1 &
pids+=($!)
wait_ready http://127.0.0.1:9478/readyz relay
build/bin/rtcedge-transceiver --http-listen 127.0.0.1:8080 --workers 2 --media-base-port 40000 \
  --relay-vips 127.0.0.1:3478 --relay-tcp-port 3478 --hint-key-file "$demo/hint-keys.yaml" >"$demo/transceiver.log" 2>&1 &
pids+=($!)
wait_ready http://127.0.0.1:8080/readyz transceiver

if [[ $check_only == 1 ]]; then
  echo "== a real WebRTC client (aiortc) through the relay: a 440 Hz tone must come back =="
  /usr/bin/python3 tests/transceiver/interop/aiortc_client.py --url http://127.0.0.1:8080 --seconds 3 \
    --expect-echo --include-loopback yes | tail -8
  echo "== relay and transceiver metrics (non-zero) =="
  curl -s 127.0.0.1:9478/metrics | grep -v '^#' | grep -E 'forwarded|flows' | grep -v ' 0$' || true
  curl -s 127.0.0.1:8080/metrics | grep -v '^#' | grep -E 'sessions_(created|connected|ended)' | grep -v ' 0$' || true
  exit 0
fi
cat <<TXT

rtcedge demo stack is running (logs in $demo/):
  demo page      http://127.0.0.1:8080/   press Talk, hear yourself back after 500 ms
  transceiver    http://127.0.0.1:8080/metrics
  relay          VIP udp and tcp 127.0.0.1:3478, http://127.0.0.1:9478/metrics
Ctrl-C stops everything.
TXT
wait
