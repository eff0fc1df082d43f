# stack_lib.sh — sourced by run_session_bench.sh and run_connect_bench.sh: the transceiver/relay
# pair they start on loopback and everything around it: the scratch folder with hint keys and
# the EXIT/INT/TERM cleanup (stack_setup, which also defines log()), free loopback ports, the
# relay in front of the transceiver (start_relay), the transceiver (start_transceiver), a
# deadline-bounded wait for an HTTP endpoint, and stopping both (TX_PID, RELAY_PID).
# The caller sets RELAY (the relay binary) and OUT (its results folder) first.
# shellcheck shell=bash

# stack_setup NAME: mkdir OUT, WORK=/tmp/rtce-NAME.XXXXXX with hint-keys.yaml, log() as [NAME],
# and the traps that stop the stack and remove WORK.
stack_setup() {
  STACK_NAME="$1"
  mkdir -p "$OUT"
  WORK="$(mktemp -d "/tmp/rtce-$STACK_NAME.XXXXXX")"
  "$RELAY" hint keygen > "$WORK/hint-keys.yaml"
  TX_PID="" RELAY_PID=""
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}

log() { echo "[$STACK_NAME] $*" >&2; }

cleanup() { stop_stack; rm -rf "$WORK"; }

stop_stack() {
  for pid in $TX_PID $RELAY_PID; do kill "$pid" 2>/dev/null || true; done
  for pid in $TX_PID $RELAY_PID; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  TX_PID="" RELAY_PID=""
}

free_port() {  # $1 = tcp|udp
  /usr/bin/python3 -c "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM if sys.argv[1]=='udp' else socket.SOCK_STREAM); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])" "$1"
}

wait_http() {  # url pid: polls with a deadline (10 s), fails early when the process died
  for _ in $(seq 100); do
    curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { log "process $2 exited; see $WORK"; return 1; }
    sleep 0.1
  done
  log "$1 not ready"; return 1
}

# stack_ports: HTTP_PORT (tcp) and MEDIA_PORT (udp) free, URL the transceiver's HTTP address.
stack_ports() {
  HTTP_PORT=$(free_port tcp); MEDIA_PORT=$(free_port udp)
  URL="http://127.0.0.1:$HTTP_PORT"
}

# start_relay MEDIA_PORT [relay flags...]: the userspace relay (one worker; on CPU RELAY_CPU
# when set) in front of endpoint 1 at 127.0.0.1:MEDIA_PORT; sets RELAY_PID, RELAY_VIP
# (host:port, for --relay-vips) and RELAY_ADMIN (its admin URL) once /healthz answers.
start_relay() {
  local media_port="$1"; shift
  local vip_port admin_port wrap=()
  vip_port=$(free_port udp); admin_port=$(free_port tcp)
  RELAY_VIP="127.0.0.1:$vip_port"
  RELAY_ADMIN="http://127.0.0.1:$admin_port"
  [[ -n "${RELAY_CPU:-}" ]] && wrap=(taskset -c "$RELAY_CPU")
  "${wrap[@]}" "$RELAY" --hint-key-file "$WORK/hint-keys.yaml" --listen "$RELAY_VIP" \
    --endpoints "1=127.0.0.1:$media_port" --admin-listen "127.0.0.1:$admin_port" --workers 1 \
    --pin-cpus false "$@" --log-level warn > "$WORK/relay.log" 2>&1 &
  RELAY_PID=$!
  wait_http "$RELAY_ADMIN/healthz" "$RELAY_PID"
}

# start_transceiver ARGV...: runs the transceiver command line, sets TX_PID, waits for $URL/healthz.
start_transceiver() {
  "$@" > "$WORK/transceiver.log" 2>&1 &
  TX_PID=$!
  wait_http "$URL/healthz" "$TX_PID"
}
