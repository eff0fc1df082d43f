# stack_lib.sh — sourced by run_session_bench.sh and run_connect_bench.sh: stopping the
# transceiver/relay pair they start (TX_PID, RELAY_PID), free loopback ports, and a
# deadline-bounded wait for an HTTP endpoint. Uses the caller's log().
# shellcheck shell=bash

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
