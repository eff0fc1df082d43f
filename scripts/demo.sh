#!/usr/bin/env bash
# demo.sh — the main job: the rtcedge demo stack on loopback with embedded defaults (no
# Redis). Installs packages, builds, then runs until Ctrl-C:
#   rtcedge-relay on 127.0.0.1:3478 (VIP), admin on 127.0.0.1:9478
#   a stand-in transceiver with endpoints 1 and 2 (tests/integration/fake_transceiver.py)
# and proves the path once with scripts/demo_probe.py.
# Options: --check  run the probe and exit (0 if the path works).
set -euo pipefail
cd "$(dirname "$0")/.."
check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

scripts/install-deps.sh
scripts/build.sh >/dev/null

demo=build/demo
mkdir -p "$demo"
[[ -f $demo/hint-keys.yaml ]] || build/bin/rtcedge-relay hint keygen --id 1 >"$demo/hint-keys.yaml"
pwd_demo=rtcedge-demo-ice-password-0001
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

/usr/bin/python3 tests/integration/fake_transceiver.py --bind ::1 --endpoint EP1=40001 --endpoint EP2=40002 \
  --pwd "$pwd_demo" --max-seconds 86400 >"$demo/transceiver.log" 2>&1 &
pids+=($!)
build/bin/rtcedge-relay --hint-key-file "$demo/hint-keys.yaml" --listen 127.0.0.1:3478 \
  --endpoints '1=[::1]:40001,2=[::1]:40002' --admin-listen 127.0.0.1:9478 --workers 2 &
pids+=($!)

for _ in $(seq 1 50); do  # up to 5 s for the relay to be ready
  curl -sf 127.0.0.1:9478/readyz >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf 127.0.0.1:9478/readyz >/dev/null || { echo "demo: relay did not become ready" >&2; exit 1; }

ufrag=$(build/bin/rtcedge-relay hint encode --key-file "$demo/hint-keys.yaml" --cluster 0 --endpoint 2)
echo
echo "== a session whose server ufrag $ufrag names endpoint 2 =="
/usr/bin/python3 scripts/demo_probe.py --vip 127.0.0.1:3478 --ufrag "$ufrag" --pwd "$pwd_demo"
echo
echo "== relay metrics (non-zero) =="
curl -s 127.0.0.1:9478/metrics | grep -v '^#' | grep -v ' 0$'
[[ $check_only == 1 ]] && exit 0
cat <<TXT

The demo stack is running. Try:
  build/bin/rtcedge-relay hint decode --key-file $demo/hint-keys.yaml $ufrag
  curl -s 127.0.0.1:9478/metrics | grep rtcedge_relay_dropped
Ctrl-C stops everything.
TXT
wait
