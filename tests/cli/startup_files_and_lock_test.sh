#!/usr/bin/env bash
# startup_files_and_lock_test.sh — what the relay and the transceiver do with the files an
# operator points them at, and with a second relay on a VIP that is already served:
#   - a key or config file that is /dev/zero, a FIFO or too large is refused at once
#     (exit 2, "configuration error"), never read without bound or waited on;
#   - unknown fields in a key file, an unreadable file (with its errno text);
#   - a key file other users can read or write is warned about;
#   - a second relay on a served VIP exits 1 naming the holder's pid, unless
#     --join-existing, and then both instances log the join.
set -uo pipefail
relay=${1:?usage: startup_files_and_lock_test.sh path/to/rtcedge-relay path/to/rtcedge-transceiver}
transceiver=${2:?usage: startup_files_and_lock_test.sh path/to/rtcedge-relay path/to/rtcedge-transceiver}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
passed=0
failed=0
fail() { echo "FAIL $1"; [[ -n ${2:-} ]] && echo "$2" | tail -20 | sed 's/^/    /'; failed=$((failed + 1)); }
pass() { echo "ok   $1"; passed=$((passed + 1)); }
check() {  # check NAME EXPECTED_CODE ACTUAL_CODE OUTPUT [PATTERN]
  local name=$1 want=$2 got=$3 out=${4:-} pattern=${5:-}
  if [[ $got -ne $want ]]; then fail "$name: exit $got, want $want" "$out"; return; fi
  if [[ -n $pattern ]] && ! grep -Eq -- "$pattern" <<<"$out"; then fail "$name: output does not match /$pattern/" "$out"; return; fi
  pass "$name"
}
# run_bounded NAME SECONDS CMD...: runs CMD with a deadline; sets out/code; a hang is a failure
# (timeout exits 124 after SIGTERM, 137 if SIGTERM did not stop it either).
run_bounded() {
  local seconds=$1; shift
  out=$(timeout -k 1 "$seconds" "$@" 2>&1 </dev/null); code=$?
}
free_udp_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for_log() {  # wait_for_log FILE PATTERN SECONDS: 0 once FILE matches
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
start_relay() {  # start_relay LOG ARGS...: background relay on $vip_port with $key_file; its pid in $started
  local log=$1; shift
  "$relay" --listen "127.0.0.1:$vip_port" --return-listen "[::]:0" --workers 1 --pin-cpus false \
    --admin-listen 127.0.0.1:0 --hint-key-file "$key_file" --endpoints "1=127.0.0.1:40000" "$@" >"$log" 2>&1 &
  started=$!
  pids+=("$started")
}
stop_relay() {  # stop_relay PID: SIGTERM, exit code within 5 s (or 124)
  kill -TERM "$1" 2>/dev/null
  local deadline=$((SECONDS + 5))
  while kill -0 "$1" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
  if kill -0 "$1" 2>/dev/null; then kill -KILL "$1"; wait "$1" 2>/dev/null; return 124; fi
  wait "$1"
}

"$relay" hint keygen --id 1 >"$work/keys.yaml"
chmod 600 "$work/keys.yaml"
key_file=$work/keys.yaml
mkfifo "$work/fifo"
head -c $((70 * 1024)) /dev/zero | tr '\0' '#' >"$work/big-keys.yaml"
{ cat "$work/keys.yaml"; head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' '#'; } >"$work/big-config.yaml"

# --- files that must be refused at once, by both binaries -------------------------------
for bin in relay transceiver; do
  exe=${!bin}
  run_bounded 5 "$exe" --hint-key-file /dev/zero
  check "$bin: key file /dev/zero refused" 2 $code "$out" "configuration error: hint key file '/dev/zero': is a character device"
  run_bounded 5 "$exe" --hint-key-file "$work/fifo"
  check "$bin: key file FIFO refused without waiting for a writer" 2 $code "$out" "configuration error: hint key file .*fifo': is a FIFO"
  run_bounded 5 "$exe" --hint-key-file "$work/big-keys.yaml"
  check "$bin: oversized key file refused" 2 $code "$out" "configuration error: hint key file .*is 71680 bytes, too large \(the limit is 65536 bytes\)"
  run_bounded 5 "$exe" --config /dev/zero
  check "$bin: config /dev/zero refused" 2 $code "$out" "configuration error: config file '/dev/zero': is a character device"
  run_bounded 5 "$exe" --config "$work/fifo"
  check "$bin: config FIFO refused" 2 $code "$out" "configuration error: config file .*fifo': is a FIFO"
  run_bounded 5 "$exe" --config "$work/big-config.yaml"
  check "$bin: oversized config refused" 2 $code "$out" "configuration error: config file .*too large \(the limit is 1048576 bytes\)"
  run_bounded 5 "$exe" --config "$work/missing.yaml"
  check "$bin: missing config names the errno" 2 $code "$out" "config file .*missing.yaml': cannot open: No such file or directory"
  run_bounded 5 "$exe" --config "$work"
  check "$bin: a directory as config refused" 2 $code "$out" "config file .*: is a directory"
  printf 'keys:\n  - id: 1\n    secret: 00112233445566778899aabbccddeeff\n    sercet: typo\n' >"$work/extra-field.yaml"
  run_bounded 5 "$exe" --hint-key-file "$work/extra-field.yaml"
  check "$bin: unknown field in a key is refused" 2 $code "$out" "configuration error: .*keys\[0\]: unknown field 'sercet'"
  printf 'keys:\n  - id: 1\n    secret: 00112233445566778899aabbccddeeff\nkey_rotation: weekly\n' >"$work/extra-top.yaml"
  run_bounded 5 "$exe" --hint-key-file "$work/extra-top.yaml"
  check "$bin: unknown top-level field in the key file is refused" 2 $code "$out" "unknown field 'key_rotation' \(expected 'keys'\)"
  printf 'keys:\n  - id: 1\n    secret: {nested: map}\n' >"$work/map-secret.yaml"
  run_bounded 5 "$exe" --hint-key-file "$work/map-secret.yaml"
  check "$bin: a non-scalar secret is a configuration error" 2 $code "$out" "configuration error: .*secret: must be 32 hex characters"
done
run_bounded 5 "$transceiver" --dtls-certificate /dev/zero --dtls-private-key "$work/fifo"
check "transceiver: DTLS certificate /dev/zero refused" 2 $code "$out" "configuration error: DTLS certificate file '/dev/zero': is a character device"
: >"$work/cert.pem"
run_bounded 5 "$transceiver" --dtls-certificate "$work/cert.pem" --dtls-private-key "$work/fifo"
check "transceiver: DTLS private key FIFO refused" 2 $code "$out" "configuration error: DTLS private key file .*fifo': is a FIFO"
echo "keys: [{id: 1, secret: 0011}]" >"$work/bad.yaml"
run_bounded 5 "$relay" --hint-key-file "$work/bad.yaml" --admin-listen 127.0.0.1:0 --listen "127.0.0.1:$(free_udp_port)"
check "relay: bad key file is a configuration error (exit 2, not 1)" 2 $code "$out" "rtcedge-relay: configuration error: hint key file .*32 hex characters"

# --- a key file other users can read: the relay starts and warns ------------------------
vip_port=$(free_udp_port)
cp "$work/keys.yaml" "$work/open-keys.yaml"
chmod 644 "$work/open-keys.yaml"
key_file=$work/open-keys.yaml start_relay "$work/open.log"
open_pid=$started
if wait_for_log "$work/open.log" "relay up" 10; then
  out=$(cat "$work/open.log")
  check "relay: world-readable key file is warned about" 0 0 "$out" "warn.*hint key file .*open-keys.yaml' is readable by every user \(mode 0644\); it holds a secret"
else
  fail "relay with a world-readable key file did not start" "$(cat "$work/open.log")"
fi
stop_relay "$open_pid"; check "relay with a warned key file stops on SIGTERM" 0 $? ""
start_relay "$work/private.log"
private_pid=$started
wait_for_log "$work/private.log" "relay up" 10
out=$(cat "$work/private.log")
! grep -q "hint key file .* is" <<<"$out"; check "relay: a mode 0600 key file gets no warning" 0 $? "$out"
stop_relay "$private_pid"

# --- one relay per VIP -------------------------------------------------------------------
vip_port=$(free_udp_port)
start_relay "$work/first.log"
first=$started
if ! wait_for_log "$work/first.log" "relay up" 10; then fail "first relay did not start" "$(cat "$work/first.log")"; fi
start=$SECONDS
run_bounded 10 "$relay" --listen "127.0.0.1:$vip_port" --return-listen "[::]:0" --workers 1 --pin-cpus false \
  --admin-listen 127.0.0.1:0 --hint-key-file "$work/keys.yaml" --endpoints "1=127.0.0.1:40000"
check "second relay on a served VIP is refused" 1 $code "$out" \
  "cannot start: VIP 127.0.0.1:$vip_port is already served by another rtcedge-relay \(pid $first\).*--join-existing true"
((SECONDS - start <= 5)); check "the refusal comes at once" 0 $? "took $((SECONDS - start)) s"
sleep 0.3  # the holder logs a join within its 200 ms read; a refusal must log nothing
! grep -q "joined" "$work/first.log"; check "a refused instance is not reported as joined" 0 $? "$(cat "$work/first.log")"
start_relay "$work/joiner.log" --join-existing true
joiner=$started
if wait_for_log "$work/joiner.log" "relay up" 10; then
  check "with --join-existing the second instance starts and says it joins" 0 0 "$(cat "$work/joiner.log")" \
    "warn.*JOINING: VIP 127.0.0.1:$vip_port is already served by another rtcedge-relay \(pid $first\)"
else
  fail "joining relay did not start" "$(cat "$work/joiner.log")"
fi
wait_for_log "$work/first.log" "joined" 5
check "the serving relay logs the joiner" 0 0 "$(cat "$work/first.log")" \
  "warn.*another rtcedge-relay \(pid $joiner\) joined VIP 127.0.0.1:$vip_port"
stop_relay "$joiner"; check "joiner stops on SIGTERM" 0 $? ""
stop_relay "$first"; check "first relay stops on SIGTERM" 0 $? ""
# The lock goes with the process, even on SIGKILL: the VIP can be served again at once.
start_relay "$work/killed.log"
killed=$started
wait_for_log "$work/killed.log" "relay up" 10
kill -KILL "$killed"; wait "$killed" 2>/dev/null
start_relay "$work/after-kill.log"
after=$started
wait_for_log "$work/after-kill.log" "relay up" 10; check "after SIGKILL the VIP is free again" 0 $? "$(cat "$work/after-kill.log")"
stop_relay "$after"
# Another VIP port is another lock.
vip_port=$(free_udp_port)
start_relay "$work/other.log"
other=$started
wait_for_log "$work/other.log" "relay up" 10; check "a relay on another VIP is not refused" 0 $? "$(cat "$work/other.log")"
stop_relay "$other"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
