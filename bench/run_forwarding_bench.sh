#!/usr/bin/env bash
# run_forwarding_bench.sh — UDP forwarding benchmark of the userspace relay against nginx's
# UDP stream proxy and nftables DNAT, all measured in one run on one namespace topology.
# Results and method: docs/benchmarks.md.
#
#   client ns  198.19.1.2 ──veth── 198.19.1.1 (VIP :3478)  relay ns  198.19.2.1 ──veth── 198.19.2.2:40000  sink ns
#
# Systems, one after the other, each with the same load (bench/udp_blast.cpp):
#   direct  no middlebox: client -> 198.19.2.2:40000, routed by the relay namespace's kernel
#           (the baseline that "added" latency and CPU are computed against)
#   relay   rtcedge-relay --mode userspace on the VIP, endpoint 1 = the sink (PROXY v2 framed,
#           UDP GSO towards the sink: docs/wire-format.md, "Padding (NOOP TLV)")
#   relay-nogso  the same with --gso false: one datagram per message (not in the default set)
#   nginx   Debian nginx, stream module: "listen VIP:3478 udp reuseport", proxy_pass the sink,
#           2 workers pinned like the relay's (worker_cpu_affinity auto), one session per flow
#   nft     nftables DNAT VIP:3478 -> sink in the relay namespace (kernel forwarding)
#   xdp     rtcedge-relay --mode xdp: the relay's XDP program on both relay-namespace veths
#           forwards VIP:3478 -> sink from 198.19.2.1:3479 (xdp.return_port) with the PROXY v2
#           header; for this phase only, xdp_pass.bpf.o sits on the peer ends (a frame
#           redirected into a veth is delivered only when the receiver runs XDP) and TX
#           checksum offload is off on the four veths (docs/operations.md, "The XDP data path")
#
# Needs root (namespaces, raw sockets). Touches nothing outside its own namespaces, which it
# removes on exit, failure or Ctrl-C (with the xdp system also its bpffs pins,
# /sys/fs/bpf/rtce-bench-<pid>, via `rtcedge-relay detach`). Only 198.19.0.0/16 addresses are used; IPv6 is
# disabled in the namespaces so that no link-local traffic is sent either.
#
# Usage: sudo bench/run_forwarding_bench.sh [options]
#   --build-dir DIR   where bin/rtcedge-relay and bin/udp_blast are (default: <repo>/build)
#   --rates LIST      offered packets/s per phase, 'max' = as fast as the sender thread can
#                     (default 20000,50000,75000,100000,125000,max); the first is the latency rate
#   --duration S      measurement window per phase (default 4)
#   --warmup S        sending before each window (default 0.5)
#   --flows N         client flows (default 1000)
#   --payload B       UDP payload bytes (default 200)
#   --systems LIST    subset/order of: direct relay relay-nogso nginx nft xdp (default: all but
#                     relay-nogso)
#   --relay-args "…"  extra rtcedge-relay flags (e.g. "--pin-cpus false")
#   --veth MODE       plain (default: a veth delivers inside the sender's syscall) or napi
#                     (GRO + threaded NAPI on the receiving ends: receive runs in a kthread)
#   --nginx-proxy-responses N   set nginx's proxy_responses (default: unset = unlimited;
#                     0 ends the session after every datagram)
#   --nice N          nice value of everything the benchmark runs (default -10, so that other
#                     load on a shared machine disturbs it less; 0 = leave it)
#   --sink-gro on|off UDP_GRO on the sink's socket (default on, as a transceiver's media socket:
#                     the relay's UDP GSO runs then arrive whole; nothing else sends GSO)
#   --raw             also print every RESULT line
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$REPO/build"
RATES="20000,50000,75000,100000,125000,max"
DURATION=4
WARMUP=0.5
FLOWS=1000
PAYLOAD=200
SYSTEMS="direct relay nginx nft xdp"
RELAY_ARGS=""
RAW=0
VETH=plain
NGINX_RESPONSES=""
NICE=-10
SINK_GRO=on
CMDLINE="$0 $*"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --rates) RATES="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --flows) FLOWS="$2"; shift 2 ;;
    --payload) PAYLOAD="$2"; shift 2 ;;
    --systems) SYSTEMS="$2"; shift 2 ;;
    --relay-args) RELAY_ARGS="$2"; shift 2 ;;
    --raw) RAW=1; shift ;;
    --veth) VETH="$2"; shift 2 ;;
    --nginx-proxy-responses) NGINX_RESPONSES="$2"; shift 2 ;;
    --nice) NICE="$2"; shift 2 ;;
    --sink-gro) SINK_GRO="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_forwarding_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[[ "$VETH" == plain || "$VETH" == napi ]] || { echo "run_forwarding_bench.sh: --veth is plain or napi" >&2; exit 2; }
[[ "$SINK_GRO" == on || "$SINK_GRO" == off ]] || { echo "run_forwarding_bench.sh: --sink-gro is on or off" >&2; exit 2; }

RELAY_BIN="$BUILD_DIR/bin/rtcedge-relay"
BLAST_BIN="$BUILD_DIR/bin/udp_blast"
NGINX_MODULE=/usr/lib/nginx/modules/ngx_stream_module.so
XDP_PASS_OBJ="$BUILD_DIR/bpf/xdp_pass.bpf.o"
BPFFS=/sys/fs/bpf

die() { echo "run_forwarding_bench.sh: $*" >&2; exit 1; }
[[ $EUID -eq 0 ]] || die "needs root (network namespaces, raw sockets)"
[[ -x "$RELAY_BIN" && -x "$BLAST_BIN" ]] || die "build first: ninja -C $BUILD_DIR rtcedge-relay udp_blast ($RELAY_BIN, $BLAST_BIN)"
for tool in ip nft nginx curl nstat ss awk; do command -v "$tool" >/dev/null || die "'$tool' is missing"; done
[[ -f "$NGINX_MODULE" ]] || die "$NGINX_MODULE is missing: apt-get install -y nginx-light libnginx-mod-stream"
WANT_XDP=0
[[ " $SYSTEMS " == *" xdp "* ]] && WANT_XDP=1
if [[ $WANT_XDP -eq 1 ]]; then
  for tool in ethtool nsenter; do command -v "$tool" >/dev/null || die "'$tool' is missing (xdp system)"; done
  [[ -f "$XDP_PASS_OBJ" ]] || die "$XDP_PASS_OBJ is missing: ninja -C $BUILD_DIR (bpf/CMakeLists.txt builds it)"
  # The relay pins its maps and links on a bpf filesystem; mount one at the standard place
  # when nothing is mounted there (the mount stays: it is the standard location).
  if ! awk -v m="$BPFFS" '$2 == m && $3 == "bpf" {f=1} END {exit !f}' /proc/self/mounts; then
    mount -t bpf bpf "$BPFFS" || die "no bpf filesystem on $BPFFS and cannot mount one"
  fi
fi

PREFIX="rtce-bench-$$"
NS_C="$PREFIX-client"
NS_R="$PREFIX-relay"
NS_S="$PREFIX-sink"
CLIENT_IP=198.19.1.2
VIP_IP=198.19.1.1
RELAY_SINK_SIDE_IP=198.19.2.1
SINK_IP=198.19.2.2
VIP_PORT=3478
SINK_PORT=40000
ADMIN=127.0.0.1:19478   # inside the relay namespace's own loopback
TMP="$(mktemp -d /tmp/rtce-bench.XXXXXX)"
RESULTS="$TMP/results.txt"
: >"$RESULTS"
MBOX_PID=""
BLAST_PID=""
PIN_PATH="$BPFFS/$PREFIX"   # unique per run (our pid); only ever this directory is removed
XDP_ACTIVE=0

cleanup() {
  set +e
  if [[ -n "$BLAST_PID" ]]; then kill "$BLAST_PID" 2>/dev/null; wait "$BLAST_PID" 2>/dev/null; fi
  if [[ -n "$MBOX_PID" ]]; then kill "$MBOX_PID" 2>/dev/null; wait "$MBOX_PID" 2>/dev/null; fi
  ip netns exec "$NS_R" nft delete table ip rtcebench 2>/dev/null
  if [[ -e "$PIN_PATH" ]]; then
    "$RELAY_BIN" detach --pin-path "$PIN_PATH" >/dev/null 2>&1
    rm -rf "$PIN_PATH"
  fi
  for ns in "$NS_C" "$NS_R" "$NS_S"; do
    # Anything still running in a namespace we made (only ours: the name holds our pid).
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "run_forwarding_bench.sh: interrupted" >&2; exit 130' INT TERM

nsx() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }

# ---- topology -------------------------------------------------------------------------
for ns in "$NS_C" "$NS_R" "$NS_S"; do
  ip netns add "$ns"
  nsx "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  nsx "$ns" ip link set lo up
done
# Device names carry our pid too, because kernel NAPI threads are named after them
# ("napi/<dev>-<id>", cut to 15 characters): b<pid>c client, b<pid>r / b<pid>q relay, b<pid>s sink.
DEV_C="b$$c"; DEV_R0="b$$r"; DEV_R1="b$$q"; DEV_S="b$$s"
ip link add "$DEV_C" netns "$NS_C" type veth peer name "$DEV_R0" netns "$NS_R"
ip link add "$DEV_R1" netns "$NS_R" type veth peer name "$DEV_S" netns "$NS_S"
nsx "$NS_C" ip addr add "$CLIENT_IP/24" dev "$DEV_C"
nsx "$NS_R" ip addr add "$VIP_IP/24" dev "$DEV_R0"
nsx "$NS_R" ip addr add "$RELAY_SINK_SIDE_IP/24" dev "$DEV_R1"
nsx "$NS_S" ip addr add "$SINK_IP/24" dev "$DEV_S"
nsx "$NS_C" ip link set "$DEV_C" up
nsx "$NS_R" ip link set "$DEV_R0" up
nsx "$NS_R" ip link set "$DEV_R1" up
nsx "$NS_S" ip link set "$DEV_S" up
nsx "$NS_C" ip route add default via "$VIP_IP"
nsx "$NS_S" ip route add default via "$RELAY_SINK_SIDE_IP"
nsx "$NS_R" sysctl -qw net.ipv4.ip_forward=1
# Static neighbours: no ARP on the measured path, and none for the first packets to wait on.
mac() { nsx "$1" cat "/sys/class/net/$2/address"; }
nsx "$NS_C" ip neigh replace "$VIP_IP" lladdr "$(mac "$NS_R" "$DEV_R0")" dev "$DEV_C" nud permanent
nsx "$NS_R" ip neigh replace "$CLIENT_IP" lladdr "$(mac "$NS_C" "$DEV_C")" dev "$DEV_R0" nud permanent
nsx "$NS_R" ip neigh replace "$SINK_IP" lladdr "$(mac "$NS_S" "$DEV_S")" dev "$DEV_R1" nud permanent
nsx "$NS_S" ip neigh replace "$RELAY_SINK_SIDE_IP" lladdr "$(mac "$NS_R" "$DEV_R1")" dev "$DEV_S" nud permanent
KTHREADS=""
if [[ "$VETH" == napi ]]; then
  # Receive in a NAPI kernel thread per receiving veth end, as a NIC's receive runs apart
  # from the sender, instead of inside the sender's sendmsg (the veth default).
  # (veth only takes the NAPI path when the sending end has no TSO feature.)
  nsx "$NS_C" ethtool -K "$DEV_C" tso off >/dev/null
  nsx "$NS_R" ethtool -K "$DEV_R1" tso off >/dev/null
  for pair in "$NS_R:$DEV_R0" "$NS_S:$DEV_S"; do
    ns="${pair%%:*}"; dev="${pair#*:}"
    nsx "$ns" ethtool -K "$dev" gro on
    nsx "$ns" sh -c "echo 1 > /sys/class/net/$dev/threaded"
  done
  sleep 0.2
  for comm_file in /proc/[0-9]*/comm; do
    read -r comm <"$comm_file" 2>/dev/null || continue
    case "$comm" in "napi/$DEV_R0-"* | "napi/$DEV_S-"*)
      pid="${comm_file#/proc/}"; KTHREADS="${KTHREADS:+$KTHREADS,}${pid%/comm}" ;;
    esac
  done
  [[ -n "$KTHREADS" ]] || die "no NAPI threads for $DEV_R0/$DEV_S"
  # shellcheck disable=SC2086  # one argument per pid
  renice -n "$NICE" -p ${KTHREADS//,/ } >/dev/null
fi

"$RELAY_BIN" hint keygen >"$TMP/hint-keys.yaml"

# ---- machine --------------------------------------------------------------------------
CPU_MODEL="$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
echo "## Machine"
echo
echo "- nproc: $(nproc); CPU: $CPU_MODEL; $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "- kernel: $(uname -sr); $(grep -qi hypervisor /proc/cpuinfo && echo 'virtual machine (hypervisor flag set)' || echo 'bare metal')"
echo "- $(nginx -v 2>&1 | sed 's#nginx version: ##'); $(nft --version); relay: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet HEAD -- loader wire common bpf 2>/dev/null || echo ' (+local changes)')"
echo "- veth mode: $VETH; sink UDP_GRO: $SINK_GRO; benchmark processes at nice $NICE"
echo "- load: $FLOWS flows, $PAYLOAD-byte UDP payloads, rates $RATES, ${WARMUP}s warm-up + ${DURATION}s window per rate"
echo "- command: $CMDLINE"
echo

# ---- middleboxes ----------------------------------------------------------------------
wait_udp_bound() {
  for _ in $(seq 100); do
    if nsx "$NS_R" ss -Hlun "sport = :$VIP_PORT" | grep -q .; then return 0; fi
    sleep 0.05
  done
  die "nothing bound $VIP_IP:$VIP_PORT in $NS_R"
}

start_relay() {
  local extra="${1:-}"
  local workers="--workers 2"   # one per CPU of this machine, like nginx's worker_processes 2
  [[ "$RELAY_ARGS" == *--workers* ]] && workers=""
  # Not through nsx: `ip netns exec` execs the command, so $! is the relay itself.
  # shellcheck disable=SC2086  # RELAY_ARGS is a list of flags
  nice -n "$NICE" ip netns exec "$NS_R" "$RELAY_BIN" --listen "$VIP_IP:$VIP_PORT" --endpoints "1=$SINK_IP:$SINK_PORT" \
    --hint-key-file "$TMP/hint-keys.yaml" --admin-listen "$ADMIN" $workers $RELAY_ARGS $extra \
    >"$TMP/relay.log" 2>&1 &
  MBOX_PID=$!
  for _ in $(seq 100); do
    if nsx "$NS_R" curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1; then WATCH="$MBOX_PID"; return 0; fi
    kill -0 "$MBOX_PID" 2>/dev/null || { cat "$TMP/relay.log" >&2; die "rtcedge-relay exited"; }
    sleep 0.05
  done
  die "rtcedge-relay not ready"
}

start_nginx() {
  mkdir -p "$TMP/nginx/logs"
  cat >"$TMP/nginx/nginx.conf" <<EOF
load_module $NGINX_MODULE;
worker_processes 2;
worker_cpu_affinity auto;
worker_rlimit_nofile 65536;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 16384; }
stream {
  server {
    # reuseport: one socket per worker (nginx's recommended UDP setup); buffers as the relay asks
    listen $VIP_IP:$VIP_PORT udp reuseport rcvbuf=4194304 sndbuf=4194304;
    proxy_pass $SINK_IP:$SINK_PORT;
    # A WebRTC flow is long-lived and bidirectional: keep one session per client flow
    # (proxy_responses 0 would close the session after every datagram).
    proxy_timeout 60s;
    ${NGINX_RESPONSES:+proxy_responses $NGINX_RESPONSES;}
  }
}
EOF
  nice -n "$NICE" ip netns exec "$NS_R" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" >"$TMP/nginx/logs/stdout.log" 2>&1 &
  MBOX_PID=$!
  wait_udp_bound
  sleep 0.2
  WATCH="$MBOX_PID$(pgrep -P "$MBOX_PID" | sed 's/^/,/' | tr -d '\n')"
}

start_nft() {
  nsx "$NS_R" nft -f - <<EOF
table ip rtcebench {
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr $VIP_IP udp dport $VIP_PORT dnat to $SINK_IP:$SINK_PORT
  }
}
EOF
  WATCH=""
}

XDP_VETHS=()  # "ns:dev" of the four veth ends
start_xdp() {
  XDP_VETHS=("$NS_C:$DEV_C" "$NS_R:$DEV_R0" "$NS_R:$DEV_R1" "$NS_S:$DEV_S")
  XDP_ACTIVE=1
  # Receivers of redirected frames need an XDP program of their own (XDP_PASS does).
  nsx "$NS_C" ip link set dev "$DEV_C" xdpdrv obj "$XDP_PASS_OBJ" sec xdp
  nsx "$NS_S" ip link set dev "$DEV_S" xdpdrv obj "$XDP_PASS_OBJ" sec xdp
  # Partial (offloaded) UDP checksums would be wrong after the program's rewrite.
  local pair
  for pair in "${XDP_VETHS[@]}"; do nsx "${pair%%:*}" ethtool -K "${pair#*:}" tx off >/dev/null; done
  # bpf_fib_lookup needs forwarding on the ingress interface (ip_forward=1 sets all of them);
  # the neighbours are static (nud permanent), so the first packet already takes XDP.
  [[ "$(nsx "$NS_R" sysctl -n net.ipv4.conf.$DEV_R0.forwarding)" == 1 ]] || die "forwarding is off on $DEV_R0"
  [[ ! -e "$PIN_PATH" ]] || die "$PIN_PATH exists already"
  local workers="--workers 2"
  [[ "$RELAY_ARGS" == *--workers* ]] && workers=""
  # nsenter --net: setns(2) only, then exec (so $! is the relay). `ip netns exec` would
  # remount /sys for the namespace and hide the bpf filesystem the relay pins into.
  # shellcheck disable=SC2086  # RELAY_ARGS is a list of flags
  nice -n "$NICE" nsenter --net="/run/netns/$NS_R" "$RELAY_BIN" --mode xdp \
    --listen "$VIP_IP:$VIP_PORT" --endpoints "1=$SINK_IP:$SINK_PORT" \
    --xdp-interfaces "$DEV_R0,$DEV_R1" --xdp-relay-address4 "$RELAY_SINK_SIDE_IP" --xdp-pin-path "$PIN_PATH" \
    --hint-key-file "$TMP/hint-keys.yaml" --admin-listen "$ADMIN" $workers $RELAY_ARGS \
    >"$TMP/relay-xdp.log" 2>&1 &
  MBOX_PID=$!
  local ready=0
  for _ in $(seq 200); do
    if nsx "$NS_R" curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "$MBOX_PID" 2>/dev/null || { cat "$TMP/relay-xdp.log" >&2; die "rtcedge-relay --mode xdp exited"; }
    sleep 0.05
  done
  [[ $ready -eq 1 ]] || { cat "$TMP/relay-xdp.log" >&2; die "rtcedge-relay --mode xdp not ready"; }
  # (Whole outputs into variables, then grep: `cmd | grep -q` fails under pipefail when
  # grep exits early and cmd gets SIGPIPE.)
  local out; out="$(nsx "$NS_R" curl -sf "http://$ADMIN/metrics" || true)"
  grep -q '^rtcedge_relay_mode{mode="xdp"} 1' <<<"$out" \
    || { cat "$TMP/relay-xdp.log" >&2; die "the relay did not report rtcedge_relay_mode{mode=\"xdp\"} 1"; }
  out="$(nsx "$NS_R" ip -d link show dev "$DEV_R0")"
  grep -q 'prog/xdp' <<<"$out" || die "no XDP program on $DEV_R0"
  WATCH="$MBOX_PID"
}

stop_xdp() {
  [[ $XDP_ACTIVE -eq 1 ]] || return 0
  # The pinned links outlive the relay process (by design): detach, or the next system
  # would still be forwarded by the program.
  "$RELAY_BIN" detach --pin-path "$PIN_PATH" >"$TMP/detach.log" 2>&1 || { cat "$TMP/detach.log" >&2; }
  rm -rf "$PIN_PATH"
  local out; out="$(nsx "$NS_R" ip -d link show dev "$DEV_R0")"
  grep -q 'prog/xdp' <<<"$out" && die "XDP still attached to $DEV_R0 after detach"
  nsx "$NS_C" ip link set dev "$DEV_C" xdpdrv off
  nsx "$NS_S" ip link set dev "$DEV_S" xdpdrv off
  local pair
  for pair in "${XDP_VETHS[@]}"; do nsx "${pair%%:*}" ethtool -K "${pair#*:}" tx on >/dev/null; done
  XDP_ACTIVE=0
}

stop_middlebox() {
  if [[ -n "$MBOX_PID" ]]; then kill "$MBOX_PID" 2>/dev/null || true; wait "$MBOX_PID" 2>/dev/null || true; MBOX_PID=""; fi
  stop_xdp
  nsx "$NS_R" nft delete table ip rtcebench 2>/dev/null || true
  for _ in $(seq 50); do
    [[ -z "$(ip netns pids "$NS_R")" ]] && return 0
    sleep 0.1
  done
  die "processes still running in $NS_R: $(ip netns pids "$NS_R" | tr '\n' ' ')"
}

udp_drops() {  # receive-buffer drops in the relay namespace
  nsx "$NS_R" nstat -asz UdpRcvbufErrors 2>/dev/null | awk '$1=="UdpRcvbufErrors" {print $2; f=1} END {if (!f) print 0}'
}

run_system() {
  local sys="$1" dst="$VIP_IP:$VIP_PORT"
  WATCH=""
  [[ -z "$(ip netns pids "$NS_R")" ]] || die "$NS_R is not idle before $sys"
  case "$sys" in
    direct) dst="$SINK_IP:$SINK_PORT" ;;
    relay) start_relay ;;
    relay-nogso) start_relay "--gso false" ;;
    nginx) start_nginx ;;
    nft) start_nft ;;
    xdp) start_xdp ;;
    *) die "unknown system '$sys'" ;;
  esac
  local drops_before; drops_before="$(udp_drops)"
  echo "running $sys ..." >&2
  # In the background + wait, so that a signal to this script runs the cleanup trap at once.
  nice -n "$NICE" "$BLAST_BIN" --label "$sys" --client-netns "$NS_C" --sink-netns "$NS_S" \
    --src "$CLIENT_IP" --dst "$dst" --sink "$SINK_IP:$SINK_PORT" --flows "$FLOWS" --payload "$PAYLOAD" \
    --hint-key-file "$TMP/hint-keys.yaml" --cluster 0 --endpoint 1 \
    --rates "$RATES" --warmup "$WARMUP" --duration "$DURATION" --sink-gro "$([[ $SINK_GRO == on ]] && echo true || echo false)" \
    ${WATCH:+--watch-pid "$WATCH"} ${KTHREADS:+--kernel-pid "$KTHREADS"} \
    >"$TMP/blast-$sys.txt" &
  BLAST_PID=$!
  wait "$BLAST_PID" || die "udp_blast failed for $sys"
  BLAST_PID=""
  cat "$TMP/blast-$sys.txt" >>"$RESULTS"
  if [[ $RAW -eq 1 ]]; then cat "$TMP/blast-$sys.txt" >&2; fi
  local drops_after; drops_after="$(udp_drops)"
  echo "NOTE $sys socket_rcvbuf_drops_in_relay_ns=$((drops_after - drops_before))" >>"$RESULTS"
  if [[ "$sys" == relay || "$sys" == relay-nogso ]]; then
    nsx "$NS_R" curl -sf "http://$ADMIN/metrics" >"$TMP/relay-metrics.txt" || true
    awk '/^rtcedge_relay_(flows_created_total|forwarded_packets_total\{direction="client|gso_)/ {print "NOTE relay " $1 "=" $2}
         /^rtcedge_relay_dropped_packets_total/ && $2 > 0 {print "NOTE relay " $1 "=" $2}' \
      "$TMP/relay-metrics.txt" | sed "s/^NOTE relay /NOTE $sys /" >>"$RESULTS"
  fi
  if [[ "$sys" == xdp ]]; then
    # Who forwarded: the XDP program's own counters, and what the userspace workers received
    # (the shared received counter minus the XDP reasons folded into it).
    nsx "$NS_R" curl -sf "http://$ADMIN/metrics" >"$TMP/xdp-metrics.txt" || die "no /metrics from the XDP relay"
    local sink_rx; sink_rx="$(awk '/^RESULT / {for (i = 1; i <= NF; i++) if ($i ~ /^(received|framed)=/) {split($i, kv, "="); if (kv[1] == "framed") f = kv[2]}} END {print f + 0}' "$TMP/blast-$sys.txt")"
    awk -v sink_framed="$sink_rx" '
      function lbl(s, k,   re) { re = k "=\"[^\"]*\""; if (match(s, re)) return substr(s, RSTART + length(k) + 2, RLENGTH - length(k) - 3); return "" }
      /^rtcedge_relay_xdp_packets_total\{/ { r = lbl($1, "reason"); xdp[r] += $2; if ($2 > 0) print "NOTE xdp " $1 "=" $2
        if (r ~ /^(forwarded|forwarded_new_flow|hint_rejected|return_malformed|return_no_flow|return_wrong_sender)$/) folded += $2 }
      /^rtcedge_relay_received_packets_total\{/ { rx += $2 }
      /^rtcedge_relay_mode\{/ && $2 == 1 { mode = lbl($1, "mode") }
      END {
        fw = xdp["forwarded"] + xdp["forwarded_new_flow"]
        printf "NOTE xdp relay mode=%s; XDP program forwarded %d packets (forwarded %d + forwarded_new_flow %d), sink got %d PROXY v2 framed ones in all phases; userspace workers received %d (received_packets_total %d - XDP-folded %d); passed up to userspace by XDP: %d\n",
          mode, fw, xdp["forwarded"], xdp["forwarded_new_flow"], sink_framed, rx - folded, rx, folded, xdp["pass_to_userspace"] + 0
      }' "$TMP/xdp-metrics.txt" >>"$RESULTS"
  fi
  stop_middlebox
  sleep 0.3
}

for sys in $SYSTEMS; do run_system "$sys"; done

# ---- report ---------------------------------------------------------------------------
NPROC="$(nproc)" awk -v systems="$SYSTEMS" '
function kv(line, key,   re) {
  re = " " key "=[^ ]*"
  if (match(line, re)) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
  return ""
}
function fmt_pps(x) { return sprintf("%d", x + 0.5) }
# One row of the targets table: label, m[a] / m[b] and whether it reaches the target ratio.
function target_row(label, m, a, b, target,   x) {
  if (!((a in m) && (b in m) && m[b] > 0)) return
  x = m[a] / m[b]
  printf "| %s (%s / %s pps) | %.2fx | >= %sx | %s |\n", label, fmt_pps(m[a]), fmt_pps(m[b]), x, target, (x >= target ? "yes" : "**no**")
}
/^RESULT / {
  s = kv($0, "label"); r = kv($0, "rate")
  key = s SUBSEP r
  offered[key] = kv($0, "offered_pps"); fwd[key] = kv($0, "fwd_pps"); loss[key] = kv($0, "loss_pct")
  p50[key] = kv($0, "p50_us"); p99[key] = kv($0, "p99_us"); bench[key] = kv($0, "bench_ms_per_mpkt")
  mbox[key] = kv($0, "mbox_ms_per_mpkt")
  other_ms += kv($0, "other_cpu_ms"); window_s += kv($0, "window_s"); phases++
  if (!(r in seen_rate)) { seen_rate[r] = 1; rates[++nr] = r }
  if (fwd[key] + 0 > best[s] + 0) { best[s] = fwd[key]; best_rate[s] = r }
  if (loss[key] + 0 < 0.1 && fwd[key] + 0 > clean[s] + 0) clean[s] = fwd[key]
}
/^NOTE / { notes[++nn] = substr($0, 6) }
END {
  ns = split(systems, sys, " ")
  print "## Results"
  print ""
  print "forwarded = packets sent inside the window that reached the sink / window; latency = sink receive time minus the"
  print "send time in the payload; CPU = utime+stime of udp_blast (sender+sink), the middlebox processes and the"
  print "ksoftirqd/NAPI threads per million forwarded packets; added = minus direct at the same offered rate."
  print ""
  print "| system @ offered rate | offered pps | forwarded pps | loss % | p50 us | p99 us | CPU ms/Mpkt | added CPU ms/Mpkt | middlebox process CPU ms/Mpkt | relay / system pps |"
  print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for (i = 1; i <= nr; i++) for (j = 1; j <= ns; j++) {
    key = sys[j] SUBSEP rates[i]
    if (!(key in fwd)) continue
    rk = "relay" SUBSEP rates[i]; dk = "direct" SUBSEP rates[i]
    ratio = (rk in fwd && fwd[key] > 0) ? sprintf("%.2f", fwd[rk] / fwd[key]) : "-"
    added = (dk in fwd && sys[j] != "direct") ? sprintf("%+.0f", bench[key] - bench[dk]) : "-"
    mb = (mbox[key] + 0 > 0) ? sprintf("%.0f", mbox[key]) : "-"
    printf "| %s @ %s | %s | %s | %.2f | %.1f | %.1f | %.0f | %s | %s | %s |\n", sys[j], rates[i], fmt_pps(offered[key]),
      fmt_pps(fwd[key]), loss[key], p50[key], p99[key], bench[key], added, mb, ratio
  }
  print ""
  print "## Ratios and targets"
  print ""
  print "Peak = the highest forwarded rate of a system over all offered rates of this run; loss-free = the highest"
  print "forwarded rate among the phases where it lost less than 0.1% (RFC 2544 style throughput, at this sweep'"'"'s resolution)."
  print ""
  print "| comparison | measured | target | met |"
  print "|---|---:|---:|---|"
  target_row("relay peak / nginx peak", best, "relay", "nginx", 2)
  target_row("relay peak / nftables DNAT peak", best, "relay", "nft", 0.5)
  target_row("relay loss-free / nginx loss-free", clean, "relay", "nginx", 2)
  target_row("relay loss-free / nftables DNAT loss-free", clean, "relay", "nft", 0.5)
  target_row("relay-nogso peak / nginx peak", best, "relay-nogso", "nginx", 2)
  target_row("relay-nogso loss-free / nginx loss-free", clean, "relay-nogso", "nginx", 2)
  if (("relay" in best) && ("relay-nogso" in best) && best["relay-nogso"] > 0)
    printf "| relay peak / relay-nogso peak: what GSO buys (%s / %s pps) | %.2fx | - | - |\n", fmt_pps(best["relay"]), fmt_pps(best["relay-nogso"]), best["relay"] / best["relay-nogso"]
  target_row("xdp peak / relay peak", best, "xdp", "relay", 3)
  target_row("xdp loss-free / relay loss-free", clean, "xdp", "relay", 3)
  if (("xdp" in best) && ("direct" in best) && best["direct"] > 0)
    printf "| xdp peak / direct path peak (%s / %s pps) | %.2fx | - | - |\n", fmt_pps(best["xdp"]), fmt_pps(best["direct"]), best["xdp"] / best["direct"]
  if ("direct" in best) printf "| direct path peak (no middlebox: the ceiling of this harness) | %s pps | - | - |\n", fmt_pps(best["direct"])
  lr = rates[1]; dk = "direct" SUBSEP lr
  if (dk in fwd) {
    print ""
    printf "Added by each middlebox over the direct path at %s pps (difference of percentiles):\n", lr
    print ""
    print "| system | p50 us | p99 us | added p50 us | added p99 us |"
    print "|---|---:|---:|---:|---:|"
    for (j = 1; j <= ns; j++) {
      key = sys[j] SUBSEP lr
      if (!(key in fwd)) continue
      if (sys[j] == "direct") { printf "| direct | %.1f | %.1f | - | - |\n", p50[key], p99[key]; continue }
      printf "| %s | %.1f | %.1f | %+.1f | %+.1f |\n", sys[j], p50[key], p99[key], p50[key] - p50[dk], p99[key] - p99[dk]
    }
  }
  if (("xdp" in best) && ("relay" in best) && ("direct" in best)) {
    print ""
    print "XDP vs userspace relay per offered rate. CPU = the whole benchmark'"'"'s CPU (softirq included: it is charged to"
    print "the sender, ksoftirqd or NAPI threads, all counted) per million forwarded packets; added = minus direct at the"
    print "same offered rate, i.e. what the middlebox costs; target: xdp added <= 1/3 of relay added."
    print ""
    print "| offered rate | relay pps | xdp pps | xdp / relay pps | relay CPU ms/Mpkt | xdp CPU ms/Mpkt | relay added | xdp added | xdp added / relay added | <= 1/3 |"
    print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    for (i = 1; i <= nr; i++) {
      rk = "relay" SUBSEP rates[i]; xk = "xdp" SUBSEP rates[i]; dk = "direct" SUBSEP rates[i]
      if (!(rk in fwd) || !(xk in fwd) || !(dk in fwd)) continue
      ra = bench[rk] - bench[dk]; xa = bench[xk] - bench[dk]
      q = (ra > 0) ? sprintf("%.2f", xa / ra) : "-"
      printf "| %s | %s | %s | %.2f | %.0f | %.0f | %+.0f | %+.0f | %s | %s |\n", rates[i], fmt_pps(fwd[rk]), fmt_pps(fwd[xk]),
        (fwd[rk] > 0 ? fwd[xk] / fwd[rk] : 0), bench[rk], bench[xk], ra, xa, q, (ra > 0 && xa <= ra / 3 ? "yes" : "**no**")
    }
  }
  print ""
  print "Notes from the run:"
  print ""
  if (window_s > 0) printf "- CPU used by other processes on the machine during the windows: %.0f ms per second (of %d)\n", other_ms / window_s, 1000 * ENVIRON["NPROC"]
  for (i = 1; i <= nn; i++) print "- " notes[i]
}' "$RESULTS"
if [[ $RAW -eq 1 ]]; then echo; echo '```'; grep '^RESULT' "$RESULTS"; echo '```'; fi
