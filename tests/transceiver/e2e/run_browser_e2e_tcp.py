#!/usr/bin/python3
"""run_browser_e2e_tcp.py — a browser on a network that drops UDP connects over ICE-TCP.

    client ns                        relay ns                                  xcvr ns
    node + headless browser  --->    rc0 VIP 198.18.255.100  UDP 3478, TCP 443
    nft: every UDP datagram          rx0 198.18.1.1  ------ PROXY v2 DGRAM/STREAM ---->  rtcedge-transceiver
    the namespace sends dropped      (XDP or userspace data path)                        198.18.1.2
    127.0.0.1:P (HTTP splice) ---------------- TCP, relay ns ------------------------>  :8080

The three namespaces come from tests/support/py/netns_topology.py. rtcedge-relay runs in the
relay namespace (--mode userspace, or --mode xdp attached natively to rc0/rx0) with
ice_tcp.port 443; the transceiver in relay mode answers with the VIP's UDP candidate and its
passive TCP twin (relay.tcp_port 443). The browser (browser_e2e.mjs: the demo page, Talk, a
tone echoed back) runs in the client namespace.

Round `udp` (with --compare-udp): UDP open; the browser must still choose UDP. Round `tcp`: an
nftables table in the client namespace drops every UDP datagram it sends (its counter must
move: the browser tried UDP), the relay and the transceiver keep theirs; the browser must
connect over TCP and hear its tone back, the transceiver's session must say transport tcp,
and the relay's ICE-TCP counters must account for the media. Time to connected and the
pair RTT of both rounds go into the summary (docs/benchmarks.md, "ICE-TCP").

Exit codes: 0 pass, 1 fail (also when a browser, node or a build product is missing), 77
skipped (not root, no netns, no nftables, no native XDP on veth for --mode xdp). Namespaces
(with their nftables tables), processes and bpffs pins are removed on every exit path.
"""

import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import run_browser_e2e as e2e  # noqa: E402  (BROWSER_E2E)
from rtcetest import core, outcome  # noqa: E402
from rtcetest import netns as harness  # noqa: E402
# The XDP browser test's stack, in the same topology.
from run_browser_e2e_xdp import (CLUSTER, ENDPOINT, HTTP_PORT, MEDIA_PORT, RELAY_ADMIN_PORT,  # noqa: E402
                                 VIP_PORT, XDP_RETURN_PORT)

TCP_PORT = 443
PIN_PATH = "%s/%s%d-tcp" % (nt.BPFFS, nt.NS_PREFIX, os.getpid())  # swept by nt.sweep_stale if we die
NFT_TABLE = "rtce_block_udp"

log = core.log_to("run_browser_e2e_tcp")


def prerequisites(args):
    harness.require_executables(args)
    outcome.require_netns()
    if args.mode == "xdp":
        outcome.require_native_xdp(args.xdp_pass_obj)
    if args.browser == "chromium":
        outcome.require_browser(args.chromium, args.node)
    elif not os.access(args.firefox, os.X_OK):
        raise outcome.SetupError("no Firefox at %s (scripts/install-deps.sh installs firefox-esr)" % args.firefox)
    if subprocess.run(["nft", "--version"], capture_output=True).returncode != 0:
        raise outcome.Unavailable("no nft (nftables)")


def block_udp(ns):
    """Drops every UDP datagram `ns` sends (output hook), counted; removed with the namespace."""
    rules = ("table inet %s {\n chain out {\n  type filter hook output priority 0; policy accept;\n"
             "  meta l4proto udp counter drop\n }\n}\n" % NFT_TABLE)
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules.encode(), check=True, timeout=10)


def udp_dropped(ns):
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "inet", NFT_TABLE],
                         capture_output=True, text=True, timeout=10).stdout
    for line in out.splitlines():
        if "counter packets" in line:
            return int(line.split("counter packets")[1].split()[0])
    return 0


def relay_restart_round(args, topo, url, tone_wav, workdir, results, check, relay, start_relay):
    """UDP still dropped: a call over TCP, then the relay restarts mid-call (SIGTERM, which
    closes its connections, and a new process). `page`: the demo page (browser_e2e.mjs
    --interrupt-dir) must get its path back by itself, through its own ICE restart, and its
    recovery time is recorded. ice_restart_e2e.mjs measures the media gap for the other two:
    `rebind` = no signaling (the browser must reconnect its TCP candidate by itself: Chromium
    does not), `restart` = an ICE restart over PATCH once the relay is back. Returns the new
    relay."""
    handover_dir = os.path.join(workdir, "handover")
    os.makedirs(handover_dir, exist_ok=True)
    state = {}
    stop = threading.Event()

    def restarter():
        req = os.path.join(handover_dir, "move-request.1")
        while not os.path.exists(req):
            if stop.wait(0.01):
                return
        try:
            t0 = time.monotonic()
            state["old_rc"] = relay.stop()
            state["relay"] = start_relay("relay-restarted")
            state["outage_ms"] = round((time.monotonic() - t0) * 1000)
        except Exception as e:  # reported as a failed check below
            state["error"] = "%s: %s" % (type(e).__name__, e)
        with open(os.path.join(handover_dir, "moved.1"), "w") as f:
            f.write("ok\n")
        # The new relay was started from this thread, whose end would kill it
        # (PR_SET_PDEATHSIG follows the thread): it lives as long as the test does.
        threading.Event().wait()

    th = threading.Thread(target=restarter, name="relay-restarter", daemon=True)
    th.start()
    if args.relay_restart == "page":
        argv = [args.node, e2e.BROWSER_E2E, "--url", url, "--expect-path", "relay", "--timeout-s",
                str(int(args.timeout_s) + 30), "--tone-wav", tone_wav, "--chromium", args.chromium,
                "--interrupt-dir", handover_dir]
    else:
        argv = [args.node, os.path.join(HERE, "ice_restart_e2e.mjs"), "--url", url, "--expect-path", "relay",
                "--timeout-s", str(int(args.timeout_s) + 30), "--tone-wav", tone_wav, "--chromium", args.chromium,
                "--allow-loopback", "no", "--handover-dir", handover_dir, "--moves", "1"]
    if args.relay_restart == "rebind":
        argv.append("--rebind")
    log("relay restart round (%s): %s" % (args.relay_restart, " ".join(argv)))
    rc, summary = harness.run_json_client(topo.client, argv, args.timeout_s + 75, "ice_restart_e2e", log)
    stop.set()
    after = metrics(topo.relay, "127.0.0.1", RELAY_ADMIN_PORT) if "relay" in state else None
    results["relay_restart_new_relay"] = after and {
        "tcp_accepted": after.get("rtcedge_relay_tcp_connections_accepted_total"),
        "tcp_frames_in": after.get("rtcedge_relay_tcp_frames_total", direction="client_to_transceiver"),
        "closed": {dict(k[1]).get("reason"): int(v) for k, v in after.samples.items()
                   if k[0] == "rtcedge_relay_tcp_closed_total" and v},
        "dropped": {dict(k[1]).get("reason"): int(v) for k, v in after.samples.items()
                    if k[0] == "rtcedge_relay_dropped_packets_total" and v}}
    results["relay_restart"] = {"how": args.relay_restart, "outage_ms": state.get("outage_ms"),
                                "gap_ms": summary.get("gap_ms"), "moves": summary.get("moves"),
                                "page_recovery": summary.get("recovery"),
                                "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")]}
    check("relay restart: the old relay exited 0 and a new one is ready", "error" not in state and
          state.get("old_rc") == 0 and "relay" in state, state.get("error") or state.get("old_rc"))
    check("relay restart (%s): the call came back over TCP, echo heard, gap measured" % args.relay_restart, rc == 0,
          results["relay_restart"])
    return state.get("relay") or relay


def setup(args, workdir):
    """The three namespaces (prepared for XDP with --mode xdp), a hint key file and the relay's
    argv (args: relay_bin, mode, xdp_pass_obj): (topology, key file, relay argv). Also used by
    ../realtime_e2e/run_realtime_e2e.py --block-udp."""
    topo = nt.Topology(tag="tcp").create()
    if args.mode == "xdp":
        topo.prepare_for_xdp(args.xdp_pass_obj)
    keys = os.path.join(workdir, "hint-keys.yaml")
    with open(keys, "wb") as f:
        subprocess.run([args.relay_bin, "hint", "keygen"], stdout=f, check=True, timeout=10)

    relay_argv = [
        args.relay_bin, "--mode", args.mode,
        "--listen", "%s:%d" % (nt.VIP_V4, VIP_PORT), "--ice-tcp-port", str(TCP_PORT),
        "--workers", "1", "--pin-cpus", "false", "--cluster-id", str(CLUSTER),
        "--hint-key-file", keys,
        "--endpoints", "%d=%s:%d" % (ENDPOINT, nt.XCVR_V4, MEDIA_PORT),
        "--admin-listen", "127.0.0.1:%d" % RELAY_ADMIN_PORT,
    ]
    if args.mode == "xdp":
        if os.path.exists(PIN_PATH):
            nt.remove_pins(PIN_PATH)
        nt.register_cleanup(lambda: nt.detach_pins(args.relay_bin, PIN_PATH, log))
        relay_argv += ["--xdp-interfaces", "rc0,rx0",
                       "--xdp-relay-address4", nt.RELAY_XCVR_V4, "--xdp-relay-address6", nt.RELAY_XCVR_V6,
                       "--xdp-return-port", str(XDP_RETURN_PORT), "--xdp-pin-path", PIN_PATH]
    return topo, keys, relay_argv


def start_transceiver(args, topo, keys, workdir, results, echo_mode="loopback", extra=()):
    """The transceiver in relay mode in topo.xcvr: the VIP's UDP candidate and its passive TCP
    twin (relay.tcp_port TCP_PORT), the echo backend in echo_mode, then `extra` flags; ready."""
    xcvr = harness.Service("transceiver", topo.xcvr, [
        args.transceiver_bin,
        "--http-listen", "%s:%d" % (nt.XCVR_V4, HTTP_PORT),
        "--http-allow-public-without-keys", "true",
        "--workers", "1",
        "--media-listen", nt.XCVR_V4, "--media-base-port", str(MEDIA_PORT),
        "--relay-vips", "%s:%d" % (nt.VIP_V4, VIP_PORT), "--relay-tcp-port", str(TCP_PORT),
        "--relay-sources", "198.18.1.0/24",
        "--direct-enabled", "false",
        "--hint-key-file", keys, "--hint-cluster-id", str(CLUSTER), "--hint-endpoint-base-id", str(ENDPOINT),
        "--backend-echo-mode", echo_mode,
        "--sessions-drain-timeout", "1s",
    ] + list(extra), workdir, log=log)
    results.setdefault("logs", {})["transceiver"] = xcvr.log_path
    xcvr.wait_http(nt.XCVR_V4, HTTP_PORT, "/metrics")
    return xcvr


def metrics(ns, host, port):
    status, body = nt.http_get_in(ns, host, port, "/metrics")
    if status != 200:
        raise RuntimeError("GET http://%s:%d/metrics in %s: HTTP %d" % (host, port, ns, status))
    return prom_metrics.parse(body)


def counters(topo):
    """The relay's and the transceiver's metrics now, for tcp_figures."""
    return metrics(topo.relay, "127.0.0.1", RELAY_ADMIN_PORT), metrics(topo.xcvr, nt.XCVR_V4, HTTP_PORT)


def tcp_figures(before, after):
    """What moved between two counters(): the transceiver's RTP, the relay's ICE-TCP accepts and frames."""
    (relay_before, xcvr_before), (relay_after, xcvr_after) = before, after
    return {
        "xcvr_rtp_in": int(prom_metrics.delta(xcvr_before, xcvr_after, "rtcedge_transceiver_rtp_packets_total",
                                              kind="rtp", direction="in")),
        "xcvr_rtp_out": int(prom_metrics.delta(xcvr_before, xcvr_after, "rtcedge_transceiver_rtp_packets_total",
                                               kind="rtp", direction="out")),
        "tcp_accepted": int(prom_metrics.delta(relay_before, relay_after,
                                               "rtcedge_relay_tcp_connections_accepted_total")),
        "tcp_frames_in": int(prom_metrics.delta(relay_before, relay_after, "rtcedge_relay_tcp_frames_total",
                                                direction="client_to_transceiver")),
        "tcp_frames_out": int(prom_metrics.delta(relay_before, relay_after, "rtcedge_relay_tcp_frames_total",
                                                 direction="transceiver_to_client")),
    }


def stop_stack(args, topo, results, check, relay, xcvr, splice):
    """The end of a run: the relay's closed connections by reason, both services still alive,
    the splice closed, both exit 0 on SIGTERM, the XDP pins detached."""
    relay_end = metrics(topo.relay, "127.0.0.1", RELAY_ADMIN_PORT)
    results["relay_tcp_closed"] = {dict(k[1]).get("reason"): int(v) for k, v in relay_end.samples.items()
                                   if k[0] == "rtcedge_relay_tcp_closed_total" and v}
    relay.check_alive()
    xcvr.check_alive()
    splice.close()
    check("transceiver exits 0 on SIGTERM", xcvr.stop() == 0)
    check("relay exits 0 on SIGTERM", relay.stop() == 0)
    if args.mode == "xdp":
        nt.detach_pins(args.relay_bin, PIN_PATH, log)


def check_tcp_round(check, fig, dropped):
    """The checks of a round with the client's UDP dropped: fig = tcp_figures() + the session's
    transport; dropped = udp_dropped() after the round."""
    check("tcp: the browser's UDP was dropped (it tried)", dropped > 0, dropped)
    check("tcp: the transceiver's session ran over TCP", fig["transport"] == "tcp", fig["transport"])
    check("tcp: the relay accepted the browser's ICE-TCP connection", fig["tcp_accepted"] >= 1, fig["tcp_accepted"])
    check("tcp: the transceiver received RTP (>= 50 packets)", fig["xcvr_rtp_in"] >= 50, fig["xcvr_rtp_in"])
    check("tcp: the relay carried at least the transceiver's RTP both ways as frames",
          fig["tcp_frames_in"] >= fig["xcvr_rtp_in"] and fig["tcp_frames_out"] >= fig["xcvr_rtp_out"],
          {k: fig[k] for k in ("tcp_frames_in", "tcp_frames_out", "xcvr_rtp_in", "xcvr_rtp_out")})


def run_test(args, workdir, results):
    check = harness.checker(results, log)
    topo, keys, relay_argv = setup(args, workdir)

    def start_relay(name):
        r = harness.Service(name, topo.relay, relay_argv, workdir, keep_mounts=args.mode == "xdp", log=log)
        results.setdefault("logs", {})[name] = r.log_path
        r.wait_http("127.0.0.1", RELAY_ADMIN_PORT, "/readyz")
        return r

    relay = start_relay("relay")

    xcvr = start_transceiver(args, topo, keys, workdir, results)

    splice = nt.HttpSplice(topo.client, topo.relay, (nt.XCVR_V4, HTTP_PORT))
    nt.register_cleanup(splice.close)
    url = "http://127.0.0.1:%d" % splice.port
    tone_wav = os.path.join(workdir, "tone.wav")
    subprocess.run([sys.executable, os.path.join(HERE, "generate_tone.py"), tone_wav], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)

    def browser_round(name):
        argv = [args.node, e2e.BROWSER_E2E, "--url", url, "--expect-path", "relay", "--timeout-s",
                str(int(args.timeout_s)), "--tone-wav", tone_wav, "--rtt-sample-s", "2"]
        argv += (["--chromium", args.chromium] if args.browser == "chromium"
                 else ["--browser", "firefox", "--firefox", args.firefox])
        log("round %s: %s" % (name, " ".join(argv)))
        before = counters(topo)
        rc, summary = harness.run_json_client(topo.client, argv, args.timeout_s + 45, "browser_e2e", log)
        after = counters(topo)
        server = summary.get("server_session") or {}
        samples = sorted(summary.get("pair_rtt_samples_ms") or [])
        fig = {
            "browser_passed": rc == 0,
            "transport": server.get("transport"),
            "time_to_connected_ms": summary.get("time_to_connected_wall_ms"),
            "ice_connected_ms": (summary.get("page_timings") or {}).get("iceConnectedMs"),
            "pair_rtt_median_ms": samples[len(samples) // 2] if samples else None,
            "server_rtt_ms": server.get("rtt_ms"),
            **tcp_figures(before, after),
        }
        results.setdefault("rounds", {})[name] = fig
        check("%s: browser_e2e.mjs passed (tone back, RTT, connected, path relay, session ended)" % name, rc == 0,
              {"exit": rc, "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")],
               "error": summary.get("error")})
        return fig

    if args.compare_udp:
        fig = browser_round("udp")
        check("udp: with UDP open the browser chose UDP", fig["transport"] == "udp", fig["transport"])

    block_udp(topo.client)
    fig = browser_round("tcp")
    dropped = udp_dropped(topo.client)
    results["udp_datagrams_dropped"] = dropped
    check_tcp_round(check, fig, dropped)
    if args.relay_restart != "none":
        relay = relay_restart_round(args, topo, url, tone_wav, workdir, results, check, relay, start_relay)
    stop_stack(args, topo, results, check, relay, xcvr, splice)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", required=True)
    ap.add_argument("--relay-bin", required=True)
    ap.add_argument("--mode", choices=("userspace", "xdp"), default="userspace")
    ap.add_argument("--browser", choices=("chromium", "firefox"), default="chromium")
    ap.add_argument("--compare-udp", action="store_true",
                    help="first a round with UDP open (the browser must choose UDP): both rounds' figures")
    ap.add_argument("--relay-restart", choices=("none", "page", "rebind", "restart"), default="none",
                    help="after the TCP round, restart the relay mid-call (Chromium): page = the demo page must "
                         "come back by itself (its ICE restart); rebind = no signaling; restart = an ICE restart "
                         "over PATCH once the relay is back; the recovery time or media gap is measured")
    ap.add_argument("--xdp-pass-obj", help="default: ../bpf/xdp_pass.bpf.o next to the relay's bin/")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--firefox", default="/usr/bin/firefox-esr")
    ap.add_argument("--node", default="node")
    ap.add_argument("--timeout-s", type=float, default=40, help="browser_e2e.mjs --timeout-s")
    ap.add_argument("--keep-workdir", action="store_true", help="keep logs and tone.wav for inspection")
    args = ap.parse_args()
    harness.default_xdp_pass_obj(args)
    results = {"checks": [], "mode": args.mode, "browser": args.browser}
    return harness.netns_main(args, results, run_test, lambda: prerequisites(args), log, "rtcedge-e2e-tcp-")


if __name__ == "__main__":
    sys.exit(main())
