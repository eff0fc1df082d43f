#!/usr/bin/python3
"""run_browser_e2e_xdp.py — the browser end-to-end test with media through the relay's XDP path.

    client ns                        relay ns                                 xcvr ns
    node + headless Chromium  --->   rc0 VIP 198.18.255.100:3478   [XDP]
    (browser_e2e.mjs)         UDP    rx0 198.18.1.1 (XDP return port)  --->  rtcedge-transceiver
    127.0.0.1:P  (HTTP splice) ---------------- TCP, relay ns ------------>  198.18.1.2:8080

The three namespaces come from tests/integration/netns_topology.py (prepare_for_xdp: xdp_pass
on the peers, TX checksum offload off, forwarding for bpf_fib_lookup, warm neighbours).
rtcedge-relay runs in the relay namespace with --mode xdp attached natively to rc0/rx0; the
transceiver runs in relay mode (the VIP is its only candidate, direct datagrams refused);
Chromium (via node browser_e2e.mjs) runs inside the client namespace.

Signaling: a TCP splice in this process listens on 127.0.0.1 in the client namespace and
connects to the transceiver's HTTP address from the relay namespace (a reverse proxy beside
the relay, as signaling would sit behind an HTTPS load balancer in production). The page is
then a loopback origin, which Chromium treats as a secure context (getUserMedia needs one),
and no route joins the client and transceiver prefixes: the test checks that neither end can
route to the other, so UDP can only go client -> VIP -> transceiver through the relay. The
relay's counters then prove it was the XDP program, not the userspace workers: XDP forwarded
at least every datagram the transceiver received and sent (RTP and RTCP included), and the
userspace workers received and forwarded none.

Exit codes: 0 pass, 1 fail (also when chromium, node, playwright-core or a build product is
missing), 77 skipped (not root, no netns, no native XDP on veth; the reason is printed). Namespaces, processes and bpffs pins are removed
on every exit path (netns_topology's registry; a SIGKILLed run is swept by the next one).
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import run_browser_e2e as e2e  # noqa: E402  (BROWSER_E2E)
from rtcetest import core, outcome  # noqa: E402
from rtcetest import netns as harness  # noqa: E402

VIP_PORT = 3478
XDP_RETURN_PORT = 3479
MEDIA_PORT = 40000
HTTP_PORT = 8080
RELAY_ADMIN_PORT = 9478
CLUSTER = 0
ENDPOINT = 1
PIN_PATH = "%s/%s%d-e2e" % (nt.BPFFS, nt.NS_PREFIX, os.getpid())  # swept by nt.sweep_stale if we die
C2T, T2C = "client_to_transceiver", "transceiver_to_client"
XDP_FORWARDED = ("forwarded", "forwarded_new_flow")
# XDP reasons folded into the shared rtcedge_relay_received_packets_total (test_relay_netns.py).
XDP_FOLDED = XDP_FORWARDED + ("hint_rejected", "return_malformed", "return_no_flow", "return_wrong_sender")

log = core.log_to("run_browser_e2e_xdp")


def prerequisites(args):
    """Raises outcome.Unavailable (skip) or outcome.SetupError (fail) when this test cannot run."""
    harness.require_executables(args)
    outcome.require_netns()
    outcome.require_native_xdp(args.xdp_pass_obj)
    outcome.require_browser(args.chromium, args.node)


def assert_no_route(ns, dst):
    r = nt.run(["ip", "-n", ns, "route", "get", dst], check=False)
    if r.returncode == 0:
        raise AssertionError("%s can route to %s (%s): media could bypass the relay" % (ns, dst, r.stdout.strip()))


def xdp_count(m, reason, direction):
    return m.get("rtcedge_relay_xdp_packets_total", reason=reason, direction=direction)


def relay_figures(before, after):
    """Per direction: what XDP forwarded, what the userspace workers received and forwarded,
    and every XDP reason that moved."""
    def delta(fn):
        return fn(after) - fn(before)

    out = {}
    for d in (C2T, T2C):
        xdp_fwd = delta(lambda m: sum(xdp_count(m, r, d) for r in XDP_FORWARDED))
        user_rx = delta(lambda m: m.get("rtcedge_relay_received_packets_total", direction=d)
                        - sum(xdp_count(m, r, d) for r in XDP_FOLDED))
        user_fwd = delta(lambda m: m.get("rtcedge_relay_forwarded_packets_total", direction=d)) - xdp_fwd
        reasons = {}
        for (name, labels), v in after.samples.items():
            lab = dict(labels)
            if name == "rtcedge_relay_xdp_packets_total" and lab.get("direction") == d:
                moved = v - before.get(name, **lab)
                if moved:
                    reasons[lab["reason"]] = int(moved)
        out[d] = {"xdp_forwarded": int(xdp_fwd), "userspace_received": int(user_rx),
                  "userspace_forwarded": int(user_fwd), "xdp_reasons": reasons}
    out["flows_created"] = int(prom_metrics.delta(before, after, "rtcedge_relay_flows_created_total"))
    out["xdp_new_flows"] = int(prom_metrics.delta(before, after, "rtcedge_relay_xdp_packets_total",
                                                  reason="forwarded_new_flow", direction=C2T))
    out["dropped"] = {dict(k[1]).get("reason"): int(v - before.get(k[0], **dict(k[1])))
                      for k, v in after.samples.items()
                      if k[0] == "rtcedge_relay_dropped_packets_total" and v != before.get(k[0], **dict(k[1]))}
    return out


def run_test(args, workdir, results):
    check = harness.checker(results, log)
    t0 = time.monotonic()
    topo = nt.Topology(tag="e2e").create()
    topo.prepare_for_xdp(args.xdp_pass_obj)
    assert_no_route(topo.client, nt.XCVR_V4)
    assert_no_route(topo.xcvr, nt.CLIENT_V4)
    check("client and transceiver namespaces cannot route to each other", True)

    keys = os.path.join(workdir, "hint-keys.yaml")
    with open(keys, "wb") as f:
        subprocess.run([args.relay_bin, "hint", "keygen"], stdout=f, check=True, timeout=10)

    # ---- relay: XDP on both of its veths, one endpoint (the transceiver's worker 0)
    if os.path.exists(PIN_PATH):
        nt.remove_pins(PIN_PATH)
    nt.register_cleanup(lambda: nt.detach_pins(args.relay_bin, PIN_PATH, log))
    relay = harness.Service("relay", topo.relay, [
        args.relay_bin, "--mode", "xdp",
        "--listen", "%s:%d" % (nt.VIP_V4, VIP_PORT),
        "--workers", "1", "--pin-cpus", "false", "--cluster-id", str(CLUSTER),
        "--hint-key-file", keys,
        "--endpoints", "%d=%s:%d" % (ENDPOINT, nt.XCVR_V4, MEDIA_PORT),
        "--admin-listen", "127.0.0.1:%d" % RELAY_ADMIN_PORT,
        "--xdp-interfaces", "rc0,rx0",
        "--xdp-relay-address4", nt.RELAY_XCVR_V4, "--xdp-relay-address6", nt.RELAY_XCVR_V6,
        "--xdp-return-port", str(XDP_RETURN_PORT), "--xdp-pin-path", PIN_PATH,
    ], workdir, keep_mounts=True, log=log)  # setns only: `ip netns exec` would hide /sys/fs/bpf
    results["logs"] = {"relay": relay.log_path}
    relay.wait_http("127.0.0.1", RELAY_ADMIN_PORT, "/readyz")
    for dev in ("rc0", "rx0"):
        attached = topo.xdp_attached(topo.relay, dev)
        if not check("XDP program attached natively on %s" % dev, attached and attached.get("mode") == 1,
                     attached and {"mode": attached.get("mode"), "prog_id": (attached.get("prog") or {}).get("id")}):
            return

    def relay_metrics():
        status, body = nt.http_get_in(topo.relay, "127.0.0.1", RELAY_ADMIN_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("relay GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    # ---- transceiver: relay mode, the VIP as its only candidate, framed datagrams from rx0's prefix
    xcvr = harness.Service("transceiver", topo.xcvr, [
        args.transceiver_bin,
        "--http-listen", "%s:%d" % (nt.XCVR_V4, HTTP_PORT),
        "--http-allow-public-without-keys", "true",
        "--workers", "1",
        "--media-listen", nt.XCVR_V4, "--media-base-port", str(MEDIA_PORT),
        "--relay-vips", "%s:%d" % (nt.VIP_V4, VIP_PORT),
        "--relay-sources", "198.18.1.0/24",
        "--direct-enabled", "false",
        "--hint-key-file", keys, "--hint-cluster-id", str(CLUSTER), "--hint-endpoint-base-id", str(ENDPOINT),
        "--backend-echo-mode", "loopback",
        "--sessions-drain-timeout", "1s",
    ], workdir, log=log)
    results["logs"]["transceiver"] = xcvr.log_path
    xcvr.wait_http(nt.XCVR_V4, HTTP_PORT, "/metrics")

    def xcvr_metrics():
        status, body = nt.http_get_in(topo.xcvr, nt.XCVR_V4, HTTP_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("transceiver GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    splice = nt.HttpSplice(topo.client, topo.relay, (nt.XCVR_V4, HTTP_PORT))
    nt.register_cleanup(splice.close)
    url = "http://127.0.0.1:%d" % splice.port
    results["url_in_client_ns"] = url
    results["setup_s"] = round(time.monotonic() - t0, 2)

    relay_before, xcvr_before = relay_metrics(), xcvr_metrics()
    check("relay reports mode xdp", relay_before.get("rtcedge_relay_mode", mode="xdp") == 1)

    # ---- the browser, inside the client namespace (chromium inherits it from node)
    tone_wav = os.path.join(workdir, "tone.wav")
    subprocess.run([sys.executable, os.path.join(HERE, "generate_tone.py"), tone_wav], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    argv = [args.node, e2e.BROWSER_E2E, "--url", url, "--expect-path", "relay", "--timeout-s",
            str(int(args.timeout_s)), "--tone-wav", tone_wav, "--chromium", args.chromium]
    if args.screenshot:
        argv += ["--screenshot", os.path.abspath(args.screenshot)]
    log("run browser_e2e in %s: %s" % (topo.client, " ".join(argv)))
    t_browser = time.monotonic()
    browser_rc, summary = harness.run_json_client(topo.client, argv, args.timeout_s + 45, "browser_e2e", log)
    results["browser_s"] = round(time.monotonic() - t_browser, 2)
    results["browser"] = summary
    check("browser_e2e.mjs passed (tone back, RTT, connected, path relay, session ended)",
          browser_rc == 0, {"exit": browser_rc,
                                    "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")],
                                    "error": summary.get("error")})
    relay.check_alive()
    xcvr.check_alive()

    # ---- which data path carried the media
    relay_after, xcvr_after = relay_metrics(), xcvr_metrics()
    fig = relay_figures(relay_before, relay_after)

    def xd(name, **labels):
        return int(prom_metrics.delta(xcvr_before, xcvr_after, name, **labels))

    xc = {"datagrams_in": xd("rtcedge_transceiver_datagrams_total", direction="in"),
          "datagrams_out": xd("rtcedge_transceiver_datagrams_total", direction="out"),
          "rtp_in": xd("rtcedge_transceiver_rtp_packets_total", kind="rtp", direction="in"),
          "rtp_out": xd("rtcedge_transceiver_rtp_packets_total", kind="rtp", direction="out"),
          "rtcp_in": xd("rtcedge_transceiver_rtp_packets_total", kind="rtcp", direction="in"),
          "rtcp_out": xd("rtcedge_transceiver_rtp_packets_total", kind="rtcp", direction="out"),
          "dropped": {dict(k[1]).get("reason"): int(v - xcvr_before.get(k[0], **dict(k[1])))
                      for k, v in xcvr_after.samples.items()
                      if k[0] == "rtcedge_transceiver_datagrams_dropped_total"
                      and v != xcvr_before.get(k[0], **dict(k[1]))}}
    results["relay"] = fig
    results["transceiver"] = xc
    bs = summary.get("browser_stats") or {}
    check("the transceiver received RTP (>= 50 packets)", xc["rtp_in"] >= 50, xc["rtp_in"])
    check("XDP created the session's flow", fig["xdp_new_flows"] >= 1, fig["xdp_new_flows"])
    check("XDP forwarded client->transceiver >= every datagram the transceiver received (RTP+RTCP+STUN+DTLS)",
          fig[C2T]["xdp_forwarded"] >= max(xc["datagrams_in"], xc["rtp_in"] + xc["rtcp_in"], bs.get("packetsSent", 0)),
          {"xdp": fig[C2T]["xdp_forwarded"], "transceiver_in": xc["datagrams_in"], "rtp_in": xc["rtp_in"],
           "browser_packets_sent": bs.get("packetsSent")})
    check("XDP forwarded transceiver->client >= every datagram the transceiver sent (RTP+RTCP+STUN+DTLS)",
          fig[T2C]["xdp_forwarded"] >= max(xc["datagrams_out"], xc["rtp_out"] + xc["rtcp_out"],
                                           bs.get("packetsReceived", 0)),
          {"xdp": fig[T2C]["xdp_forwarded"], "transceiver_out": xc["datagrams_out"], "rtp_out": xc["rtp_out"],
           "browser_packets_received": bs.get("packetsReceived")})
    for d in (C2T, T2C):
        check("userspace relay received and forwarded nothing (%s)" % d,
              fig[d]["userspace_received"] == 0 and fig[d]["userspace_forwarded"] == 0,
              {"received": fig[d]["userspace_received"], "forwarded": fig[d]["userspace_forwarded"]})
    # flows_created_total folds in XDP's forwarded_new_flow.
    check("userspace relay created no flow", fig["flows_created"] == fig["xdp_new_flows"],
          {"flows_created_total": fig["flows_created"], "xdp_new_flows": fig["xdp_new_flows"]})
    # pass_not_ours is traffic not addressed to the VIP or the return port (the splice's TCP,
    # neighbour discovery): every other reason would mean XDP passed up or dropped media.
    others = {"%s/%s" % (d, r): n for d in (C2T, T2C) for r, n in fig[d]["xdp_reasons"].items()
              if r not in XDP_FORWARDED + ("pass_not_ours",)}
    check("XDP passed up or dropped no datagram for the VIP or the return port", not others, others)
    check("relay dropped nothing", not fig["dropped"], fig["dropped"])
    # unknown_tuple: the browser's last packets after Hang up reach a session already removed.
    late = xc["dropped"].get("unknown_tuple", 0)
    bad = {r: n for r, n in xc["dropped"].items() if r != "unknown_tuple"}
    check("transceiver dropped no framed datagram (a few late ones after Hang up allowed)", not bad and late <= 5,
          xc["dropped"])

    # ---- orderly stop: transceiver, relay (its pins stay), then detach
    splice.close()
    rc = xcvr.stop()
    check("transceiver exits 0 on SIGTERM", rc == 0, rc)
    rc = relay.stop()
    check("relay exits 0 on SIGTERM", rc == 0, rc)
    nt.detach_pins(args.relay_bin, PIN_PATH, log)
    check("detach removed the pins and the XDP links",
          not os.path.exists(PIN_PATH) and not any(topo.xdp_attached(topo.relay, d) for d in ("rc0", "rx0")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", required=True)
    ap.add_argument("--relay-bin", required=True)
    ap.add_argument("--xdp-pass-obj", help="default: ../bpf/xdp_pass.bpf.o next to the relay's bin/")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--node", default="node")
    ap.add_argument("--timeout-s", type=float, default=40, help="browser_e2e.mjs --timeout-s")
    ap.add_argument("--screenshot", help="PNG of the demo page while connected")
    ap.add_argument("--keep-workdir", action="store_true", help="keep logs and tone.wav for inspection")
    args = ap.parse_args()
    harness.default_xdp_pass_obj(args)
    results = {"checks": []}
    return harness.netns_main(args, results, run_test, lambda: prerequisites(args), log, "rtcedge-e2e-xdp-")


if __name__ == "__main__":
    sys.exit(main())
