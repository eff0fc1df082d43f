#!/usr/bin/python3
"""run_handover_netns.py — network handover mid-call: the client's address changes, the call goes on.

    client ns                              relay ns                        xcvr ns
    node + headless Chromium   --->  rc0 VIP 198.18.255.100:3478
    cl0 198.18.0.2 (A)  --move-->        rx0 198.18.1.1          --->   rtcedge-transceiver
        198.18.0.3 (B)                   (userspace or XDP relay)        198.18.1.2
    127.0.0.1:P (HTTP splice) ------------ TCP, relay ns ------------>  198.18.1.2:8080

The namespaces, the HTTP splice and the XDP preparation are run_browser_e2e_xdp.py's
(tests/integration/netns_topology.py). Chromium runs ice_restart_e2e.mjs --handover-dir in the
client namespace; when it asks (DIR/move-request), this script adds B to cl0 and deletes A
(promote_secondaries keeps B and the VIP route), then answers DIR/moved. Chromium sees the
network change (netlink), gathers B, and:
  --variant restart     restarts ICE over PATCH (new ufrag/pwd) from B;
  --variant rebind      (no signaling) a NAT rebinding instead: Chromium keeps A, nftables in
                        the client namespace rewrites A to B on the wire and A's mapping dies;
                        the server must follow B on Chromium's next valid check (path change);
  --variant no-restart  A -> B with no restart: Chromium (GATHER_ONCE) never gathers B and
                        goes disconnected; kept to show that, not a CTest.
Checks: the echo is heard after the move, the gap (gap_ms, from the driver's 20 ms samples),
the relay created a flow for B and expired A's (flows.idle_timeout shortened to 2 s so the
test waits on it, not on the 30 s default), the transceiver session stayed the same session.

aiortc is not used as the client: aioice binds its sockets to the addresses it gathered once
and has no restart API, so an address change leaves it sending from an address that is gone.

Exit codes: 0 pass, 1 fail, 77 skipped (not root, no netns, no chromium / node /
playwright-core; --relay-mode xdp also without XDP). Namespaces, processes and pins are
removed on every exit path.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))
sys.path.insert(0, HERE)

import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import run_browser_e2e as e2e  # noqa: E402
import run_browser_e2e_xdp as bx  # noqa: E402  (Service, HttpSplice, http_get_in, wait_http, ...)

SKIP = 77
ICE_RESTART_E2E = os.path.join(HERE, "ice_restart_e2e.mjs")
CLIENT_B_V4 = "198.18.0.3"
FLOW_IDLE_S = 2


def log(msg):
    print("[run_handover_netns] %s" % msg, file=sys.stderr, flush=True)


def metric_sum(m, name, **labels):
    """Sum of every sample of `name` whose labels include `labels` (Metrics.get wants them all)."""
    want = set(labels.items())
    return sum(v for (n, lab), v in m.samples.items() if n == name and want <= set(lab))


def move_client_address(topo, overlap_s):
    """A -> B on the client's veth, make-before-break as a phone going from Wi-Fi to cellular:
    B is up `overlap_s` before A goes (Chromium learns networks from netlink, and a restart
    gathers only the networks it knows by then)."""
    t0 = time.monotonic()
    nt.run(["ip", "-n", topo.client, "addr", "add", CLIENT_B_V4 + "/24", "dev", "cl0"])
    if overlap_s > 0:
        time.sleep(overlap_s)  # the scenario's overlap, not a wait for a condition
    nt.run(["ip", "-n", topo.client, "addr", "del", nt.CLIENT_V4 + "/24", "dev", "cl0"])
    nt.run(["ip", "-n", topo.client, "route", "replace", nt.VIP_V4 + "/32", "via", nt.RELAY_LINK_V4, "dev", "cl0"])
    return time.monotonic() - t0


def rebind_client_address(topo):
    """A NAT rebinding: Chromium keeps A, the network now shows it as B (stateless nft rewrite
    in the client namespace, no conntrack), and A's old mapping is dead (datagrams to A
    dropped). The relay namespace learns B's MAC statically, as a router would by ARP."""
    t0 = time.monotonic()
    mac = json.loads(nt.run(["ip", "-n", topo.client, "-j", "link", "show", "dev", "cl0"]).stdout)[0]["address"]
    nt.run(["ip", "-n", topo.relay, "neigh", "replace", CLIENT_B_V4, "lladdr", mac, "dev", "rc0", "nud", "permanent"])
    rules = """table ip rtce_rebind {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    ip daddr %(a)s udp sport { %(vip)d, %(ret)d } drop
    ip daddr %(b)s notrack ip daddr set %(a)s
  }
  chain out {
    type filter hook output priority -300; policy accept;
    ip saddr %(a)s ip daddr %(vipa)s notrack ip saddr set %(b)s
  }
}
""" % {"a": nt.CLIENT_V4, "b": CLIENT_B_V4, "vip": bx.VIP_PORT, "ret": bx.XDP_RETURN_PORT, "vipa": nt.VIP_V4}
    r = subprocess.run(["ip", "netns", "exec", topo.client, "nft", "-f", "-"], input=rules, text=True,
                       capture_output=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError("nft: %s" % r.stderr.strip())
    return time.monotonic() - t0


def unavailable_reason(args):
    reason = nt.netns_unavailable_reason()
    if reason:
        return reason
    if args.variant == "rebind" and not shutil.which("nft", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        return "nft not found (the rebind variant rewrites addresses with nftables)"
    if args.relay_mode == "xdp":
        return bx.unavailable_reason(args)
    if not (os.path.isfile(args.chromium) and os.access(args.chromium, os.X_OK)):
        return "chromium not found at %s" % args.chromium
    if not shutil.which(args.node):
        return "node not found (%s)" % args.node
    if not os.path.isdir(e2e.PLAYWRIGHT_CORE) and not os.environ.get("PLAYWRIGHT_CORE"):
        return "playwright-core not installed (%s; run npm ci in tests/golden/tools)" % e2e.PLAYWRIGHT_CORE
    return None


def run_test(args, workdir, results):
    checks = results["checks"]

    def check(name, ok, detail=None):
        checks.append({"name": name, "ok": bool(ok), "detail": detail})
        log("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if detail is None else ": %s" % (detail,)))
        return ok

    topo = nt.Topology(tag="ho").create()
    # Deleting a primary address deletes its secondaries unless they are promoted.
    nt.run(["ip", "netns", "exec", topo.client, "sysctl", "-qw",
            "net.ipv4.conf.all.promote_secondaries=1", "net.ipv4.conf.cl0.promote_secondaries=1"])
    if args.relay_mode == "xdp":
        try:
            topo.prepare_for_xdp(args.xdp_pass_obj)
        except RuntimeError as e:
            raise bx.SkipTest("cannot prepare the veths for XDP: %s" % e)
    bx.assert_no_route(topo.client, nt.XCVR_V4)

    keys = os.path.join(workdir, "hint-keys.yaml")
    with open(keys, "wb") as f:
        subprocess.run([args.relay_bin, "hint", "keygen"], stdout=f, check=True, timeout=10)

    relay_argv = [args.relay_bin, "--listen", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT), "--workers", "1",
                  "--cluster-id", str(bx.CLUSTER), "--hint-key-file", keys,
                  "--endpoints", "%d=%s:%d" % (bx.ENDPOINT, nt.XCVR_V4, bx.MEDIA_PORT),
                  "--admin-listen", "127.0.0.1:%d" % bx.RELAY_ADMIN_PORT,
                  "--flows-idle-timeout", "%ds" % FLOW_IDLE_S]
    keep_mounts = False
    if args.relay_mode == "xdp":
        if os.path.exists(bx.PIN_PATH):
            nt.remove_pins(bx.PIN_PATH)
        nt.register_cleanup(lambda: bx.detach_pins(args.relay_bin))
        relay_argv += ["--mode", "xdp", "--pin-cpus", "false", "--xdp-interfaces", "rc0,rx0",
                       "--xdp-relay-address4", nt.RELAY_XCVR_V4, "--xdp-relay-address6", nt.RELAY_XCVR_V6,
                       "--xdp-return-port", str(bx.XDP_RETURN_PORT), "--xdp-pin-path", bx.PIN_PATH]
        keep_mounts = True  # setns only: `ip netns exec` would hide /sys/fs/bpf
    relay = bx.Service("relay", topo.relay, relay_argv, workdir, keep_mounts=keep_mounts)
    results["logs"] = {"relay": relay.log_path}
    bx.wait_http(relay, topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT, "/readyz")

    def relay_metrics():
        status, body = bx.http_get_in(topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("relay GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    xcvr = bx.Service("transceiver", topo.xcvr, [
        args.transceiver_bin,
        "--http-listen", "%s:%d" % (nt.XCVR_V4, bx.HTTP_PORT),
        "--http-allow-public-without-keys", "true",
        "--workers", "1",
        "--media-listen", nt.XCVR_V4, "--media-base-port", str(bx.MEDIA_PORT),
        "--relay-vips", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT),
        "--relay-sources", "198.18.1.0/24",
        "--direct-enabled", "false",
        "--hint-key-file", keys, "--hint-cluster-id", str(bx.CLUSTER), "--hint-endpoint-base-id", str(bx.ENDPOINT),
        "--backend-echo-mode", "loopback",
        "--sessions-drain-timeout", "1s",
    ], workdir)
    results["logs"]["transceiver"] = xcvr.log_path
    bx.wait_http(xcvr, topo.xcvr, nt.XCVR_V4, bx.HTTP_PORT, "/metrics")

    splice = bx.HttpSplice(topo.client, topo.relay, (nt.XCVR_V4, bx.HTTP_PORT))
    nt.register_cleanup(splice.close)
    url = "http://127.0.0.1:%d" % splice.port

    # ---- the mover: waits for the driver's request, changes the address, answers
    handover_dir = os.path.join(workdir, "handover")
    os.mkdir(handover_dir)
    moved = {}
    stop = threading.Event()

    def mover():
        req = os.path.join(handover_dir, "move-request")
        while not stop.wait(0.01):
            if os.path.exists(req):
                try:
                    moved["relay_before"] = relay_metrics()
                    if args.variant == "rebind":
                        moved["ip_s"] = rebind_client_address(topo)
                    else:
                        moved["ip_s"] = move_client_address(topo, args.overlap_s)
                    moved["at"] = time.monotonic()
                except Exception as e:  # reported as a failed check below
                    moved["error"] = "%s: %s" % (type(e).__name__, e)
                with open(os.path.join(handover_dir, "moved"), "w") as f:
                    f.write("ok\n")
                return

    th = threading.Thread(target=mover, name="mover", daemon=True)
    th.start()

    tone_wav = os.path.join(workdir, "tone.wav")
    subprocess.run([sys.executable, os.path.join(HERE, "generate_tone.py"), tone_wav], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    argv = [args.node, ICE_RESTART_E2E, "--url", url, "--expect-path", "relay", "--timeout-s",
            str(int(args.timeout_s)), "--tone-wav", tone_wav, "--chromium", args.chromium,
            "--allow-loopback", "no", "--handover-dir", handover_dir]
    if args.variant == "no-restart":
        argv.append("--no-restart")
    elif args.variant == "rebind":
        argv.append("--rebind")
    log("run ice_restart_e2e in %s: %s" % (topo.client, " ".join(argv)))
    browser = nt.start_in_netns(topo.client, argv, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL)
    try:
        out, _ = browser.communicate(timeout=args.timeout_s + 45)
    except subprocess.TimeoutExpired:
        nt.stop_process(browser)
        out = b""
        log("ice_restart_e2e did not finish within %.0f s" % (args.timeout_s + 45))
    nt.forget_process(browser)
    stop.set()
    th.join(timeout=5)
    try:
        summary = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        summary = {"raw_stdout": out.decode("utf-8", "replace")[-2000:]}
    results["client"] = summary
    results["gap_ms"] = summary.get("gap_ms")
    check("the client address moved A -> B", "at" in moved and "error" not in moved,
          moved.get("error") or {"move_ms": round(moved.get("ip_s", 0) * 1000, 1)})
    check("ice_restart_e2e.mjs passed (echo after the move, gap measured)", browser.returncode == 0,
          {"exit": browser.returncode, "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")],
           "error": summary.get("error")})
    new_addr = CLIENT_B_V4
    seen = [summary.get("client_address_before"), summary.get("client_address_after")]
    check("the transceiver's session client_address moved to the new address (%s)" % new_addr,
          seen[0] and new_addr not in seen[0] and seen[1] and new_addr in seen[1], seen)
    relay.check_alive()
    xcvr.check_alive()

    # ---- the relay: a flow for B, A's expired
    if "relay_before" in moved:
        before = moved["relay_before"]

        def flows():
            m = relay_metrics()
            return {"created": int(metric_sum(m, "rtcedge_relay_flows_created_total")
                                   - metric_sum(before, "rtcedge_relay_flows_created_total")),
                    "expired": int(metric_sum(m, "rtcedge_relay_flows_expired_total")
                                   - metric_sum(before, "rtcedge_relay_flows_expired_total")),
                    "active": int(metric_sum(m, "rtcedge_relay_flows_active")),
                    "xdp_new_flows": int(metric_sum(m, "rtcedge_relay_xdp_packets_total", reason="forwarded_new_flow")
                                         - metric_sum(before, "rtcedge_relay_xdp_packets_total",
                                                      reason="forwarded_new_flow"))}

        # The call has ended by now (the driver hung up), so B's flow goes idle as well; the
        # check is that A's flow expired: at least one expiry, and B's flow was created.
        f = bx.poll_until(lambda: (lambda v: v if v["created"] >= 1 and v["expired"] >= 1 else None)(flows()),
                          FLOW_IDLE_S * 3 + 5, interval=0.2) or flows()
        results["relay_flows_since_move"] = f
        check("relay created a flow for the new client address", f["created"] >= 1, f)
        check("relay expired a flow after the move (the old address's)", f["expired"] >= 1, f)
        if args.relay_mode == "xdp":
            check("the XDP program made the new address's flow", f["xdp_new_flows"] >= 1, f)

    # For the record (and a failure's diagnosis): what the transceiver and the relay dropped.
    try:
        status, body = bx.http_get_in(topo.xcvr, nt.XCVR_V4, bx.HTTP_PORT, "/metrics")
        if status == 200:
            drops = prom_metrics.parse(body).by_label("rtcedge_transceiver_datagrams_dropped_total", "reason")
            results["transceiver_drops"] = {k: v for k, v in drops.items() if v}
        rm = relay_metrics()
        results["relay_drops"] = {k: v for k, v in rm.by_label("rtcedge_relay_dropped_packets_total", "reason").items() if v}
        results["relay_xdp"] = {k: v for k, v in rm.by_label("rtcedge_relay_xdp_packets_total", "reason").items() if v}
    except Exception as e:  # diagnostics only
        results["drops_error"] = repr(e)
    if args.relay_mode == "xdp":
        # A reply to an on-link address the relay host never sent to has no neighbour entry:
        # the program passes it up, and a worker must send it (which resolves the neighbour).
        rm = relay_metrics()
        passed = metric_sum(rm, "rtcedge_relay_xdp_packets_total", reason="pass_no_neigh",
                            direction="transceiver_to_client")
        sent = metric_sum(rm, "rtcedge_relay_xdp_passed_up_returns_total")
        results["xdp_passed_up_replies"] = {"passed_up": passed, "sent_by_workers": sent}
        check("every reply XDP passed up for want of a neighbour was sent by a worker",
              sent >= passed, results["xdp_passed_up_replies"])
    splice.close()
    check("transceiver exits 0 on SIGTERM", xcvr.stop() == 0)
    check("relay exits 0 on SIGTERM", relay.stop() == 0)
    if args.relay_mode == "xdp":
        bx.detach_pins(args.relay_bin)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", required=True)
    ap.add_argument("--relay-bin", required=True)
    ap.add_argument("--variant", choices=["restart", "rebind", "no-restart"], default="restart",
                    help="restart: A -> B on the veth, then pc.restartIce() over PATCH; rebind: a NAT rebinding "
                         "(Chromium keeps A, the network rewrites it to B), no signaling; no-restart: A -> B with "
                         "no restart (Chromium does not re-gather without one: expected to fail)")
    ap.add_argument("--relay-mode", choices=["userspace", "xdp"], default="userspace")
    ap.add_argument("--overlap-s", type=float, default=1.0,
                    help="restart/no-restart: how long B and A are both up before A is removed")
    ap.add_argument("--xdp-pass-obj", help="default: ../bpf/xdp_pass.bpf.o next to the relay's bin/")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--node", default="node")
    ap.add_argument("--timeout-s", type=float, default=60, help="ice_restart_e2e.mjs --timeout-s")
    ap.add_argument("--keep-workdir", action="store_true")
    args = ap.parse_args()
    if not args.xdp_pass_obj:
        args.xdp_pass_obj = os.path.normpath(os.path.join(os.path.dirname(args.relay_bin), "../bpf/xdp_pass.bpf.o"))
    for flag, path in (("--transceiver-bin", args.transceiver_bin), ("--relay-bin", args.relay_bin)):
        if not os.access(path, os.X_OK):
            raise SystemExit("error: %s %s is not an executable" % (flag, path))
    reason = unavailable_reason(args)
    if reason:
        print("SKIP: %s" % reason, flush=True)
        return SKIP

    nt.sweep_stale()
    nt.install_signal_cleanup()
    workdir = tempfile.mkdtemp(prefix="rtcedge-handover-") if args.keep_workdir else nt.make_scratch_dir()
    results = {"variant": args.variant, "relay_mode": args.relay_mode, "checks": []}
    t0 = time.monotonic()
    code = 1
    try:
        run_test(args, workdir, results)
        code = 0 if results["checks"] and all(c["ok"] for c in results["checks"]) else 1
    except bx.SkipTest as e:
        print("SKIP: %s" % e, flush=True)
        code = SKIP
    except Exception as e:
        results["error"] = "%s: %s" % (type(e).__name__, e)
        log("error: %s" % results["error"])
    finally:
        if code == 1:
            for name, path in (results.get("logs") or {}).items():
                sys.stderr.write("----- %s log (tail) -----\n%s\n" % (name, e2e.tail(path)))
        nt.cleanup_all()
        if args.keep_workdir:
            log("workdir kept: %s" % workdir)
    leftovers = [n for n in nt.list_namespaces() if n.startswith("%s%d-" % (nt.NS_PREFIX, os.getpid()))]
    if leftovers or os.path.exists(bx.PIN_PATH):
        results.setdefault("error", "left behind: namespaces %s, pins %s" % (leftovers, os.path.exists(bx.PIN_PATH)))
        code = 1
    results["total_s"] = round(time.monotonic() - t0, 2)
    results["passed"] = code == 0
    if code != SKIP:
        print(json.dumps(results, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
