#!/usr/bin/python3
"""run_handover_netns.py — network handover mid-call: the client's address changes, the call goes on.

    client ns                              relay ns                        xcvr ns
    node + headless Chromium   --->  rc0 VIP 198.18.255.100:3478
    cl0 198.18.0.2 (A)  --move-->        rx0 198.18.1.1          --->   rtcedge-transceiver
        198.18.0.3 (B)                   (userspace or XDP relay)        198.18.1.2
    127.0.0.1:P (HTTP splice) ------------ TCP, relay ns ------------>  198.18.1.2:8080

--relay-mode none: no relay process; the relay namespace is a router (ip_forward) and the
client reaches the transceiver's own address (direct mode, the answer's candidate
198.18.1.2:40000) itself.

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
  --variant recall      no handover: --recalls times, hang up and call again on the same page
                        and network (the alternative a handover is judged against).
--moves N: N changes in the one call, alternating A -> B, B -> A, ... (the driver's
move-request.<i> / moved.<i>), each measured on its own (the summary's client.moves[]);
bench/handover_bench.py runs 20. --restart-after-s S: the page restarts S after the old address
is gone instead of at once (to tell Chromium's view of its networks from the restart itself).
Checks: the echo is heard after the move, the gap (gap_ms, from the driver's 20 ms samples),
the relay created a flow for B and expired A's (flows.idle_timeout shortened to 2 s so the
test waits on it, not on the 30 s default), the transceiver session stayed the same session.

aiortc is not used as the client: aioice binds its sockets to the addresses it gathered once
and has no restart API, so an address change leaves it sending from an address that is gone.

Exit codes: 0 pass, 1 fail (also when chromium, node, playwright-core, nft or a build product
is missing), 77 skipped (not root, no netns; --relay-mode xdp also without native XDP on veth). Namespaces, processes and pins are
removed on every exit path.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import run_browser_e2e_xdp as bx  # noqa: E402  (its ports and pin path)
from rtcetest import core, outcome  # noqa: E402
from rtcetest import netns as harness  # noqa: E402

ICE_RESTART_E2E = os.path.join(HERE, "ice_restart_e2e.mjs")
CLIENT_B_V4 = "198.18.0.3"
FLOW_IDLE_S = 2


log = core.log_to("run_handover_netns")


def metric_sum(m, name, **labels):
    """Sum of every sample of `name` whose labels include `labels` (Metrics.get wants them all)."""
    want = set(labels.items())
    return sum(v for (n, lab), v in m.samples.items() if n == name and want <= set(lab))


def has_addr(endpoint, ip):
    """Whether an address:port string (the session's client_address) is on `ip`."""
    return bool(endpoint) and re.search(r"(^|[^0-9.])%s([^0-9.]|$)" % re.escape(ip), endpoint) is not None


def media_target(relay_mode):
    """The address the client sends media to, and the source ports of what comes back."""
    if relay_mode == "none":
        return nt.XCVR_V4, (bx.MEDIA_PORT,)
    return nt.VIP_V4, (bx.VIP_PORT, bx.XDP_RETURN_PORT)


def move_client_address(topo, relay_mode, old, new, overlap_s):
    """old -> new on the client's veth, make-before-break as a phone going from Wi-Fi to
    cellular: new is up `overlap_s` before old goes (Chromium learns networks from netlink, and
    a restart gathers only the networks it knows by then)."""
    t0 = time.monotonic()
    nt.run(["ip", "-n", topo.client, "addr", "add", new + "/24", "dev", "cl0"])
    if overlap_s > 0:
        time.sleep(overlap_s)  # the scenario's overlap, not a wait for a condition
    nt.run(["ip", "-n", topo.client, "addr", "del", old + "/24", "dev", "cl0"])
    target, _ = media_target(relay_mode)
    nt.run(["ip", "-n", topo.client, "route", "replace", target + "/32", "via", nt.RELAY_LINK_V4, "dev", "cl0"])
    return time.monotonic() - t0


def rebind_client_address(topo, relay_mode, wire):
    """A NAT rebinding: Chromium keeps A, the network now shows it as `wire` (stateless nft
    rewrite in the client namespace, no conntrack; wire == A takes the rewrite away), and the
    previous mapping is dead (datagrams to it dropped). The relay namespace learns B's MAC
    statically, as a router would by ARP. One nft transaction, so there is no instant with
    neither mapping or both."""
    t0 = time.monotonic()
    mac = json.loads(nt.run(["ip", "-n", topo.client, "-j", "link", "show", "dev", "cl0"]).stdout)[0]["address"]
    nt.run(["ip", "-n", topo.relay, "neigh", "replace", CLIENT_B_V4, "lladdr", mac, "dev", "rc0", "nud", "permanent"])
    target, ports = media_target(relay_mode)
    v = {"a": nt.CLIENT_V4, "b": CLIENT_B_V4, "ports": ", ".join(str(p) for p in ports), "target": target}
    if wire == nt.CLIENT_V4:
        body = """  chain pre {
    type filter hook prerouting priority -300; policy accept;
    ip daddr %(b)s udp sport { %(ports)s } drop
  }
""" % v
    else:
        body = """  chain pre {
    type filter hook prerouting priority -300; policy accept;
    ip daddr %(a)s udp sport { %(ports)s } drop
    ip daddr %(b)s notrack ip daddr set %(a)s
  }
  chain out {
    type filter hook output priority -300; policy accept;
    ip saddr %(a)s ip daddr %(target)s notrack ip saddr set %(b)s
  }
""" % v
    # "table; delete table" makes the delete succeed whether or not the table exists.
    rules = "table ip rtce_rebind\ndelete table ip rtce_rebind\ntable ip rtce_rebind {\n%s}\n" % body
    r = subprocess.run(["ip", "netns", "exec", topo.client, "nft", "-f", "-"], input=rules, text=True,
                       capture_output=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError("nft: %s" % r.stderr.strip())
    return time.monotonic() - t0


def prerequisites(args):
    """Raises outcome.Unavailable (skip) or outcome.SetupError (fail) when this test cannot run."""
    harness.require_executables(args)
    outcome.require_netns()
    if args.variant == "rebind":
        outcome.require_tool("nft", "nftables (the rebind variant rewrites addresses with it)")
    if args.relay_mode == "xdp":
        outcome.require_native_xdp(args.xdp_pass_obj)
    outcome.require_browser(args.chromium, args.node)


def run_test(args, workdir, results):
    check = harness.checker(results, log)

    topo = nt.Topology(tag="ho").create()
    # Deleting a primary address deletes its secondaries unless they are promoted.
    nt.run(["ip", "netns", "exec", topo.client, "sysctl", "-qw",
            "net.ipv4.conf.all.promote_secondaries=1", "net.ipv4.conf.cl0.promote_secondaries=1"])
    if args.relay_mode == "xdp":
        topo.prepare_for_xdp(args.xdp_pass_obj)
    direct = args.relay_mode == "none"
    if direct:
        # The relay namespace becomes the client's router to the transceiver.
        nt.run(["ip", "netns", "exec", topo.relay, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        nt.run(["ip", "-n", topo.client, "route", "add", nt.XCVR_V4 + "/32", "via", nt.RELAY_LINK_V4, "dev", "cl0"])
        nt.run(["ip", "-n", topo.xcvr, "route", "add", "198.18.0.0/24", "via", nt.RELAY_XCVR_V4, "dev", "xc0"])
    else:
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
        nt.register_cleanup(lambda: nt.detach_pins(args.relay_bin, bx.PIN_PATH, bx.log))
        relay_argv += ["--mode", "xdp", "--pin-cpus", "false", "--xdp-interfaces", "rc0,rx0",
                       "--xdp-relay-address4", nt.RELAY_XCVR_V4, "--xdp-relay-address6", nt.RELAY_XCVR_V6,
                       "--xdp-return-port", str(bx.XDP_RETURN_PORT), "--xdp-pin-path", bx.PIN_PATH]
        keep_mounts = True  # setns only: `ip netns exec` would hide /sys/fs/bpf
    results["logs"] = {}
    relay = None
    if not direct:
        relay = harness.Service("relay", topo.relay, relay_argv, workdir, keep_mounts=keep_mounts, log=log)
        results["logs"]["relay"] = relay.log_path
        relay.wait_http("127.0.0.1", bx.RELAY_ADMIN_PORT, "/readyz")

    def relay_metrics():
        status, body = nt.http_get_in(topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("relay GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    path_args = (["--direct-enabled", "true"] if direct else
                 ["--relay-vips", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT), "--relay-sources", "198.18.1.0/24",
                  "--direct-enabled", "false"])
    xcvr = harness.Service("transceiver", topo.xcvr, [
        args.transceiver_bin,
        "--http-listen", "%s:%d" % (nt.XCVR_V4, bx.HTTP_PORT),
        "--http-allow-public-without-keys", "true",
        "--workers", "1",
        "--media-listen", nt.XCVR_V4, "--media-base-port", str(bx.MEDIA_PORT),
    ] + path_args + [
        "--hint-key-file", keys, "--hint-cluster-id", str(bx.CLUSTER), "--hint-endpoint-base-id", str(bx.ENDPOINT),
        "--backend-echo-mode", "loopback",
        "--sessions-drain-timeout", "1s",
    ] + (["--backend-echo-delay", args.echo_delay] if args.echo_delay else []), workdir, log=log)
    results["logs"]["transceiver"] = xcvr.log_path
    xcvr.wait_http(nt.XCVR_V4, bx.HTTP_PORT, "/metrics")

    splice = nt.HttpSplice(topo.client, topo.relay, (nt.XCVR_V4, bx.HTTP_PORT))
    nt.register_cleanup(splice.close)
    url = "http://127.0.0.1:%d" % splice.port

    # ---- the mover: waits for the driver's request i, changes the address, answers; the
    # address alternates A -> B -> A ... (addresses[i] is the one after move i)
    handover_dir = os.path.join(workdir, "handover")
    os.mkdir(handover_dir)
    moves = 0 if args.variant == "recall" else args.moves
    addresses = [nt.CLIENT_V4 if i % 2 == 0 else CLIENT_B_V4 for i in range(moves + 1)]
    moved = {"done": 0, "ip_s": []}
    stop = threading.Event()

    def mover():
        for i in range(1, moves + 1):
            req = os.path.join(handover_dir, "move-request.%d" % i)
            while not os.path.exists(req):
                if stop.wait(0.01):
                    return
            try:
                if i == 1 and not direct:
                    moved["relay_before"] = relay_metrics()
                if args.variant == "rebind":
                    moved["ip_s"].append(rebind_client_address(topo, args.relay_mode, addresses[i]))
                else:
                    moved["ip_s"].append(move_client_address(topo, args.relay_mode, addresses[i - 1], addresses[i],
                                                             args.overlap_s))
                    if args.restart_after_s > 0:
                        time.sleep(args.restart_after_s)  # the scenario: the app restarts this late
                moved["done"] = i
            except Exception as e:  # reported as a failed check below
                moved["error"] = "move %d: %s: %s" % (i, type(e).__name__, e)
            with open(os.path.join(handover_dir, "moved.%d" % i), "w") as f:
                f.write("ok\n")
            if "error" in moved:
                return

    th = threading.Thread(target=mover, name="mover", daemon=True)
    th.start()

    tone_wav = os.path.join(workdir, "tone.wav")
    subprocess.run([sys.executable, os.path.join(HERE, "generate_tone.py"), tone_wav], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    argv = [args.node, ICE_RESTART_E2E, "--url", url, "--expect-path", "direct" if direct else "relay",
            "--timeout-s", str(int(args.timeout_s)), "--tone-wav", tone_wav, "--chromium", args.chromium,
            "--allow-loopback", "no"]
    if args.variant == "recall":
        argv += ["--recalls", str(args.recalls)]
    else:
        argv += ["--handover-dir", handover_dir, "--moves", str(moves), "--move-interval-s", str(args.move_interval_s)]
    if args.variant == "no-restart":
        argv.append("--no-restart")
    elif args.variant == "rebind":
        argv.append("--rebind")
    log("run ice_restart_e2e in %s: %s" % (topo.client, " ".join(argv)))
    browser_rc, summary = harness.run_json_client(topo.client, argv, args.timeout_s + 45, "ice_restart_e2e", log)
    stop.set()
    th.join(timeout=5)
    results["client"] = summary
    results["gap_ms"] = summary.get("gap_ms")
    if moves:
        check("the client address moved A -> B" if moves == 1 else "the client address moved %d times" % moves,
              moved["done"] == moves and "error" not in moved,
              moved.get("error") or {"moves": moved["done"], "move_ms": [round(t * 1000, 1) for t in moved["ip_s"]]})
    check("ice_restart_e2e.mjs passed (echo after the move, gap measured)" if moves else
          "ice_restart_e2e.mjs passed (every recall connected and echoed)", browser_rc == 0,
          {"exit": browser_rc, "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")],
           "error": summary.get("error")})
    seen = [summary.get("client_address_before"), summary.get("client_address_after")]
    if moves:
        new_addr = addresses[moves]
        check("the transceiver's session client_address moved to the new address (%s)" % new_addr if moves == 1 else
              "after the last move the session's client_address is %s" % new_addr,
              has_addr(seen[0], nt.CLIENT_V4) and has_addr(seen[1], new_addr), seen)
    if moves > 1:
        per_move = [m.get("client_address") for m in summary.get("moves", [])]
        check("after each move the session's client_address was that move's address",
              len(per_move) == moves and all(has_addr(a, addresses[i + 1]) for i, a in enumerate(per_move)),
              per_move)
    if relay:
        relay.check_alive()
    xcvr.check_alive()

    # ---- the relay: a flow for each new address, the old ones expired
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

        # The call has ended by now (the driver hung up), so the last flow goes idle as well;
        # the check is that each move's old flow expired (one expiry per move) and each new
        # address got a flow.
        want = max(1, moved["done"])
        f = core.poll_until(lambda: (lambda v: v if v["created"] >= want and v["expired"] >= want else None)(flows()),
                          FLOW_IDLE_S * 3 + 5, interval=0.2) or flows()
        results["relay_flows_since_move"] = f
        check("relay created a flow for the new client address" if want == 1 else
              "relay created a flow for each of the %d new client addresses" % want, f["created"] >= want, f)
        check("relay expired a flow after the move (the old address's)" if want == 1 else
              "relay expired %d flows after the moves (the old addresses')" % want, f["expired"] >= want, f)
        if args.relay_mode == "xdp":
            check("the XDP program made the new address's flow", f["xdp_new_flows"] >= 1, f)

    # For the record (and a failure's diagnosis): what the transceiver and the relay dropped.
    try:
        status, body = nt.http_get_in(topo.xcvr, nt.XCVR_V4, bx.HTTP_PORT, "/metrics")
        if status == 200:
            drops = prom_metrics.parse(body).by_label("rtcedge_transceiver_datagrams_dropped_total", "reason")
            results["transceiver_drops"] = {k: v for k, v in drops.items() if v}
        if relay:
            rm = relay_metrics()
            results["relay_drops"] = {k: v for k, v in rm.by_label("rtcedge_relay_dropped_packets_total", "reason").items()
                                      if v}
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
    if relay:
        check("relay exits 0 on SIGTERM", relay.stop() == 0)
    if args.relay_mode == "xdp":
        nt.detach_pins(args.relay_bin, bx.PIN_PATH, bx.log)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", required=True)
    ap.add_argument("--relay-bin", required=True)
    ap.add_argument("--variant", choices=["restart", "rebind", "no-restart", "recall"], default="restart",
                    help="restart: A -> B on the veth, then pc.restartIce() over PATCH; rebind: a NAT rebinding "
                         "(Chromium keeps A, the network rewrites it to B), no signaling; no-restart: A -> B with "
                         "no restart (Chromium does not re-gather without one: expected to fail); recall: no "
                         "handover, hang up and call again --recalls times")
    ap.add_argument("--relay-mode", choices=["userspace", "xdp", "none"], default="userspace",
                    help="none: no relay, the client reaches the transceiver's address (direct mode)")
    ap.add_argument("--moves", type=int, default=1, help="address changes in the one call (A -> B, B -> A, ...)")
    ap.add_argument("--move-interval-s", type=float, default=0,
                    help="at least this long between the starts of two moves (restarts: 3 in a burst, then 1 per 10 s)")
    ap.add_argument("--echo-delay", help="the transceiver's backend.echo_delay (default: its own, 500ms); the bench "
                    "uses 0ms so that a recall's time to the first echo is the call's, not the echo's")
    ap.add_argument("--recalls", type=int, default=3, help="--variant recall: how many times to hang up and call again")
    ap.add_argument("--overlap-s", type=float, default=1.0,
                    help="restart/no-restart: how long B and A are both up before A is removed")
    ap.add_argument("--restart-after-s", type=float, default=0,
                    help="restart: how long after the old address is gone the page restarts ICE (default at once)")
    ap.add_argument("--xdp-pass-obj", help="default: ../bpf/xdp_pass.bpf.o next to the relay's bin/")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--node", default="node")
    ap.add_argument("--timeout-s", type=float, default=60, help="ice_restart_e2e.mjs --timeout-s")
    ap.add_argument("--keep-workdir", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.moves <= 100 or not 1 <= args.recalls <= 100:
        ap.error("--moves and --recalls must be 1..100")
    harness.default_xdp_pass_obj(args)
    results = {"variant": args.variant, "relay_mode": args.relay_mode, "checks": []}
    return harness.netns_main(args, results, run_test, lambda: prerequisites(args), log, "rtcedge-handover-")


if __name__ == "__main__":
    sys.exit(main())
