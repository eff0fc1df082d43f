#!/usr/bin/env bash
# hint_tool_test.sh — the operator's `rtcedge-relay hint` commands and the relay's
# start-up errors, as an operator would type them: outputs, JSON and exit codes.
set -uo pipefail
relay=${1:?usage: hint_tool_test.sh path/to/rtcedge-relay}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() {  # check NAME EXPECTED_CODE ACTUAL_CODE [OUTPUT PATTERN]
  local name=$1 want=$2 got=$3 out=${4:-} pattern=${5:-}
  if [[ $got -ne $want ]]; then
    echo "FAIL $name: exit $got, want $want"; echo "$out" | sed 's/^/    /'; failed=$((failed + 1)); return
  fi
  if [[ -n $pattern ]] && ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output does not match /$pattern/"; echo "$out" | sed 's/^/    /'; failed=$((failed + 1)); return
  fi
  echo "ok   $name"; passed=$((passed + 1))
}

out=$("$relay" hint keygen --id 3 2>&1 >"$work/keys.yaml"); check "keygen" 0 $? "$out"
out=$(cat "$work/keys.yaml"); check "keygen writes id and a 32-hex secret" 0 0 "$out" 'secret: [0-9a-f]{32}$'
ufrag=$("$relay" hint encode --key-file "$work/keys.yaml" --cluster 7 --endpoint 4242 2>&1); code=$?
check "encode" 0 $code "$ufrag" '^[A-Za-z0-9+/]{16}$'
second=$("$relay" hint encode --key-file "$work/keys.yaml" --cluster 7 --endpoint 4242 2>&1)
[[ $second != "$ufrag" ]]; check "encode uses a fresh nonce" 0 $? "$ufrag $second"
out=$("$relay" hint decode --key-file "$work/keys.yaml" "$ufrag" 2>&1); code=$?
check "decode valid" 0 $code "$out" '"valid":true'
check "decode fields" 0 0 "$out" '"cluster_id":7.*"endpoint_id":4242.*"key_id":3'
out=$("$relay" hint decode --key-file "$work/keys.yaml" "$ufrag:clientufrag" 2>&1); code=$?
check "decode accepts a whole USERNAME" 0 $code "$out" '"valid":true'
last=${ufrag: -1}; repl=A; [[ $last == A ]] && repl=B
out=$("$relay" hint decode --key-file "$work/keys.yaml" "${ufrag:0:15}$repl" 2>&1); code=$?
check "decode forged MAC" 1 $code "$out" '"valid":false.*"result":"bad_mac"|"result":"bad_mac".*"valid":false'
"$relay" hint keygen --id 3 >"$work/other.yaml"
out=$("$relay" hint decode --key-file "$work/other.yaml" "$ufrag" 2>&1); code=$?
check "decode with another key" 1 $code "$out" '"bad_mac"'
out=$("$relay" hint decode --key-file "$work/keys.yaml" 'not-a-hint' 2>&1); code=$?
check "decode garbage" 1 $code "$out" '"bad_length"'
out=$("$relay" hint decode --key-file "$work/missing.yaml" "$ufrag" 2>&1); code=$?
check "decode missing key file" 2 $code "$out" "missing.yaml.*cannot open"
echo "keys: [{id: 1, secret: 0011}]" >"$work/bad.yaml"
out=$("$relay" hint encode --key-file "$work/bad.yaml" --cluster 1 --endpoint 1 2>&1); code=$?
check "encode bad key file" 2 $code "$out" "32 hex characters"
out=$("$relay" hint encode --key-file "$work/keys.yaml" --cluster 256 --endpoint 1 2>&1); code=$?
check "encode cluster out of range" 2 $code "$out" "cluster"
out=$("$relay" hint encode --cluster 1 --endpoint 1 2>&1); code=$?
check "encode without key file" 2 $code "$out" "key-file"
out=$("$relay" hint 2>&1); code=$?
check "hint without subcommand" 2 $code "$out" "subcommand"
out=$("$relay" hint keygen --id 16 2>&1); code=$?
check "keygen id out of range" 2 $code "$out" "id"
out=$("$relay" --flows-capacity lots --hint-key-file "$work/keys.yaml" 2>&1); code=$?
check "relay bad flag value" 2 $code "$out" "'flows.capacity' \(from flag --flows-capacity\).*not a non-negative integer"
out=$(RTCEDGE_RELAY_LISTEN=nowhere "$relay" --hint-key-file "$work/keys.yaml" 2>&1); code=$?
check "relay bad env value" 2 $code "$out" "'listen' \(from env RTCEDGE_RELAY_LISTEN\)"
printf 'hint_key_file: %s\nflows:\n  capacty: 5\n' "$work/keys.yaml" >"$work/relay.yaml"
out=$("$relay" --config "$work/relay.yaml" 2>&1); code=$?
check "relay unknown config key" 2 $code "$out" "unknown key 'flows.capacty'"
out=$("$relay" 2>&1); code=$?
check "relay without key file" 2 $code "$out" "'hint_key_file'.*required"
out=$("$relay" --mode xdp --hint-key-file "$work/keys.yaml" 2>&1); code=$?
check "relay xdp mode without interfaces" 2 $code "$out" "'xdp.interfaces'.*needs at least one interface"
out=$("$relay" --mode xdp --xdp-interfaces rtce-nosuch0 --xdp-pin-path "$work/pins" --admin-listen 127.0.0.1:0 \
  --hint-key-file "$work/keys.yaml" 2>&1); code=$?
check "relay xdp mode on a missing interface" 1 $code "$out" "no interface named 'rtce-nosuch0'|needs root"
out=$("$relay" --mode xdp --xdp-interfaces lo --xdp-relay-address4 ::1 --hint-key-file "$work/keys.yaml" 2>&1); code=$?
check "relay xdp bad relay address" 2 $code "$out" "'xdp.relay_address4'.*not a concrete IPv4"
out=$("$relay" detach --pin-path "$work/nothing-here" 2>&1); code=$?
check "detach with nothing pinned" 1 $code "$out" "nothing pinned"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
