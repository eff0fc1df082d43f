#!/usr/bin/python3
"""run_global_sim.py — the global relay simulated end to end: clients enter at a nearby ingress
relay and their sessions are owned by a far cluster (issue 13 §2, docs/global-relay.md,
Simulation).

The topology is tests/integration/global_sim_topology.py: a client namespace whose access link
(a delay wire, ACCESS ms each way) reaches its provider's router, next to relay C (ingress
only); C's backbone link (BACKBONE ms) reaches the relays of clusters A and B; from the same
router a slower "public path" (PUBLIC ms) reaches A's VIP directly. Transceiver A runs in relay mode behind relay A; the HTTP splice plays
the geo-aware front door (it sets X-Rtcedge-Region: near-c), so transceiver A's answer names
C's VIP first (relay.ingress_regions) and its own VIP after it.

Clients, one after the other, from the client namespace:
  - aiortc (chaos_aiortc_client.py, run by this file with --as-aiortc-client, which times every
    STUN transaction aioice completes on its first try and keeps the answer SDP);
  - headless Chromium (browser_e2e.mjs: the demo page, the echoed tone, getStats).
Checks, per client: the echoed 440 Hz tone; the answer named C's VIP first (aiortc: the SDP;
Chromium: the selected pair's remote candidate; both: the transceiver's
ingress_selected_total{how="header"}); the media went C -> A (the selected remote is VIP C);
the RTT of the selected path, measured by ICE's STUN checks and consent (aiortc: the
transactions to VIP C; Chromium: the candidate pair's currentRoundTripTime), is at least the
modelled 2 x (ACCESS + BACKBONE) - 1 ms (the delay wires are on the path) and below the public
path's 2 x (ACCESS + PUBLIC) (it is the ingress path, crossed once): bounds only a broken path
crosses, since a busy machine legitimately adds tens of ms to the stack's own RTT. The precise
figure is bench/global_relay_bench.py's. Relays: C's
role="ingress" and A's role="owner" counters moved both ways (userspace mode); in XDP mode
C's XDP program created the flows and forwarded at least what A's owner role carried, A's
XDP program did the owner role (rtcedge_relay_xdp_role_packets_total{role="owner"}), and
C's userspace workers saw none of it. Then two cheap failure cases: a forwarded datagram to
A's peers.listen from relay B's address (not in A's peers.trusted: peer_untrusted, no flow,
no answer) and a hint of a cluster nobody serves sent to C (a counted hint rejection, no flow,
nothing reaches A).

Exit codes: 0 pass, 1 fail (also when chromium, node, playwright-core, python3-aiortc, ethtool
or a build product is missing), 77 skipped (not root, no netns; --relay-mode xdp also without
native XDP on veth). Namespaces,
processes, wires and pins are removed on every exit path.
"""

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "support", "py"))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))
sys.path.insert(0, HERE)

from rtcetest import core, outcome  # noqa: E402
C2T, T2C = "client_to_transceiver", "transceiver_to_client"
XDP_FORWARDED = ("forwarded", "forwarded_new_flow")


log = core.log_to("run_global_sim")


# ---------------------------------------------------------------------------- aiortc client

def as_aiortc_client(argv):
    """chaos_aiortc_client.py with two additions in its JSON: every STUN transaction aioice
    completed on its first try (remote address, RTT ms) and the answer SDP."""
    import aioice.stun
    import chaos_aiortc_client as cc

    samples, answers = [], []
    orig_run = aioice.stun.Transaction.run

    async def timed_run(self):
        t0 = time.monotonic()
        res = await orig_run(self)
        if getattr(self, "_Transaction__tries", 0) == 1:
            addr = getattr(self, "_Transaction__addr", None)
            samples.append([list(addr) if addr else None, round((time.monotonic() - t0) * 1000, 3)])
        return res
    aioice.stun.Transaction.run = timed_run

    orig_http = cc.ac.http

    async def http(method, url, *a, **kw):
        status, headers, body = await orig_http(method, url, *a, **kw)
        if method == "POST":
            answers.append(body.decode("utf-8", "replace"))
        return status, headers, body
    cc.ac.http = http

    sys.argv = [os.path.join(HERE, "chaos_aiortc_client.py")] + argv
    rc = cc.main()
    out = argv[argv.index("--json-out") + 1]
    with open(out) as f:
        result = json.load(f)
    result["stun_rtts"] = samples
    result["answer_sdp"] = answers[0] if answers else None
    with open(out + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(out + ".tmp", out)
    return rc


# ---------------------------------------------------------------------------- the test

def prerequisites(args):
    """Raises outcome.Unavailable (skip) or outcome.SetupError (fail) when this test cannot run."""
    outcome.require_executables(transceiver_bin=args.transceiver_bin, relay_bin=args.relay_bin)
    outcome.require_netns()
    outcome.require_tool("ethtool", "ethtool (the topology turns veth offloads off)")
    outcome.require_browser(args.chromium, args.node)
    outcome.require_aiortc()
    if args.relay_mode == "xdp":
        outcome.require_native_xdp(args.xdp_pass_obj)


def metric_sum(m, name, **labels):
    want = set(labels.items())
    return sum(v for (n, lab), v in m.samples.items() if n == name and want <= set(lab))


def delta(before, after, name, **labels):
    return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)


def owner_packets(m0, m1, direction):
    """Datagrams relay A's owner role carried in one direction: its userspace workers'
    (rtcedge_relay_role_packets_total) plus its XDP program's (rtcedge_relay_xdp_role_packets_total,
    XDP mode)."""
    return int(delta(m0, m1, "rtcedge_relay_role_packets_total", role="owner", direction=direction)
               + delta(m0, m1, "rtcedge_relay_xdp_role_packets_total", role="owner", direction=direction))


def xdp_moved(before, after):
    """{direction/reason: n} of every rtcedge_relay_xdp_packets_total sample that moved."""
    out = {}
    for (name, labels), v in after.samples.items():
        if name == "rtcedge_relay_xdp_packets_total":
            lab = dict(labels)
            d = v - before.get(name, **lab)
            if d:
                out["%s/%s" % (lab.get("direction"), lab.get("reason"))] = int(d)
    return out


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def mint(relay_bin, keys, cluster, endpoint):
    return subprocess.run([relay_bin, "hint", "encode", "--key-file", keys, "--cluster", str(cluster),
                           "--endpoint", str(endpoint)], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


def run_test(args, workdir, results):
    import global_sim_topology as gs
    import netns_topology as nt
    import proxy_v2
    import run_browser_e2e as e2e
    import stun_codec as stun
    from rtcetest import netns as harness

    check = harness.checker(results, log)

    t0 = time.monotonic()
    sim = gs.GlobalSim(tag="gsim", access_ms=args.access_ms, backbone_ms=args.backbone_ms, public_ms=args.public_ms,
                       jitter_ms=args.jitter_ms, loss_pct=args.loss_pct, workdir=workdir).create()
    results["logs"] = {}
    if args.relay_mode == "xdp":
        sim.prepare_for_xdp(args.xdp_pass_obj)
    sim.start_wires(max_seconds=args.budget_s + 60)
    results["logs"].update(sim.logs())
    sim.warm_neighbours()
    sim.start_relays(args.relay_bin, args.relay_mode)
    results["logs"].update(sim.logs())
    if args.relay_mode == "xdp":
        for dev in ("c_acc", "c_bb"):
            info = json.loads(nt.run(["ip", "-n", sim.ns["relay_c"], "-j", "link", "show", "dev", dev]).stdout)[0]
            if not check("relay C's XDP program attached natively on %s" % dev,
                         (info.get("xdp") or {}).get("mode") == 1, info.get("xdp")):
                return
    sim.start_transceivers(args.transceiver_bin)
    results["logs"].update(sim.logs())
    splice = sim.http_splice_to_a("near-c")
    url = "http://127.0.0.1:%d" % splice.port
    modelled, public = sim.modelled_rtt_ms("ingress"), sim.modelled_rtt_ms("public")
    results["model"] = {"access_ms": args.access_ms, "backbone_ms": args.backbone_ms, "public_ms": args.public_ms,
                        "jitter_ms": args.jitter_ms, "loss_pct": args.loss_pct,
                        "modelled_rtt_ms": modelled, "public_rtt_ms": public}
    results["setup_s"] = round(time.monotonic() - t0, 2)
    for r in ("a", "c"):
        check("relay %s reports mode %s" % (r.upper(), args.relay_mode),
              sim.relay_metrics(r).get("rtcedge_relay_mode", mode=args.relay_mode) == 1)
    vip_c = "%s:%d" % (gs.VIP_C_V4, gs.VIP_PORT)

    tone_wav = os.path.join(workdir, "tone.wav")
    subprocess.run([sys.executable, os.path.join(HERE, "generate_tone.py"), tone_wav], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)

    def snapshot():
        return {"a": sim.relay_metrics("a"), "c": sim.relay_metrics("c"), "xa": sim.transceiver_metrics("a")}

    def relay_checks(client, before, after):
        # A's owner role: its workers (userspace) or its XDP program (XDP mode) carried it.
        """The path through C (ingress) and A (owner), by the relays' own counters."""
        a0, a1, c0, c1 = before["a"], after["a"], before["c"], after["c"]
        fig = {"owner_a": {d: owner_packets(a0, a1, d) for d in (C2T, T2C)},
               "owner_a_xdp": {d: int(delta(a0, a1, "rtcedge_relay_xdp_role_packets_total", role="owner",
                                            direction=d)) for d in (C2T, T2C)},
               "ingress_c_userspace": {d: int(delta(c0, c1, "rtcedge_relay_role_packets_total", role="ingress",
                                                    direction=d)) for d in (C2T, T2C)},
               "c_peer_a": {d: int(delta(c0, c1, "rtcedge_relay_peer_packets_total", cluster=str(gs.CLUSTER_A),
                                         direction=d)) for d in (C2T, T2C)},
               "c_xdp": xdp_moved(c0, c1),
               "c_flows_created": int(delta(c0, c1, "rtcedge_relay_flows_created_total")),
               "a_flows_created": int(delta(a0, a1, "rtcedge_relay_flows_created_total")),
               "ingress_selected_header": int(delta(before["xa"], after["xa"],
                                                    "rtcedge_transceiver_ingress_selected_total", how="header")),
               "xa_rtp_in": int(delta(before["xa"], after["xa"], "rtcedge_transceiver_rtp_packets_total",
                                      kind="rtp", direction="in"))}
        results.setdefault("relays", {})[client] = fig
        check("%s: transceiver A chose the ingress by the front door's header (ingress_selected_total{how=header})"
              % client, fig["ingress_selected_header"] == 1, fig["ingress_selected_header"])
        check("%s: relay A's owner role carried the media both ways (>= 50 packets each)" % client,
              all(v >= 50 for v in fig["owner_a"].values()), fig["owner_a"])
        if args.relay_mode == "userspace":
            check("%s: relay C's ingress role carried the media both ways (>= 50 packets each)" % client,
                  all(v >= 50 for v in fig["ingress_c_userspace"].values()), fig["ingress_c_userspace"])
            check("%s: relay C counted its peer, cluster A, both ways" % client,
                  all(v >= 50 for v in fig["c_peer_a"].values()), fig["c_peer_a"])
        else:
            check("%s: relay A's XDP program did the owner role both ways (>= 50 packets each)" % client,
                  all(v >= 50 for v in fig["owner_a_xdp"].values()), fig["owner_a_xdp"])
            x = fig["c_xdp"]
            new_flows = x.get("%s/forwarded_new_flow" % C2T, 0)
            fwd = {d: sum(x.get("%s/%s" % (d, r), 0) for r in XDP_FORWARDED) for d in (C2T, T2C)}
            fig["c_xdp_forwarded"] = fwd
            check("%s: relay C's XDP program created the ingress flow (forwarded_new_flow)" % client,
                  new_flows >= 1, x)
            check("%s: relay C's XDP program forwarded at least what A's owner role carried, both ways" % client,
                  fwd[C2T] >= fig["owner_a"][C2T] and fwd[T2C] >= fig["owner_a"][T2C] and fwd[C2T] >= 50,
                  {"xdp": fwd, "owner_a": fig["owner_a"]})
            check("%s: no userspace worker of relay C handled the flow (role counters, peer counters 0)" % client,
                  not any(fig["ingress_c_userspace"].values()) and not any(fig["c_peer_a"].values()),
                  {"role": fig["ingress_c_userspace"], "peer": fig["c_peer_a"]})
            check("%s: relay C created no flow outside XDP" % client,
                  fig["c_flows_created"] == new_flows, {"flows_created": fig["c_flows_created"], "xdp": new_flows})

    def rtt_check(client, rtts, how):
        med = median(rtts)
        results.setdefault("rtt", {})[client] = {
            "how": how, "samples": len(rtts), "median_ms": med and round(med, 2),
            "min_ms": rtts and round(min(rtts), 2), "max_ms": rtts and round(max(rtts), 2),
            "modelled_ms": modelled, "excess_ms": med and round(med - modelled, 2)}
        # Bounds a busy machine cannot cross (it adds to the stack's RTT, never takes the wires'
        # delay away, and adds far less than the public path's extra 2 x (PUBLIC - BACKBONE)):
        # below the modelled RTT, media bypassed the delay wires; at the public path's RTT or
        # above, the selected path is not the single crossing of the ingress path.
        check("%s: RTT of the selected path (%s) is in [the modelled %.0f ms - 1, the public path's %.0f ms)"
              % (client, how, modelled, public),
              med is not None and modelled - 1 <= med < public, results["rtt"][client])

    # ---- aiortc
    before = snapshot()
    out = os.path.join(workdir, "aiortc.json")
    argv = ["/usr/bin/python3", os.path.abspath(__file__), "--as-aiortc-client", "--url", url, "--json-out", out,
            "--seconds", str(args.aiortc_seconds), "--consent-interval-s", "1", "--connect-timeout-s", "20"]
    log("run the aiortc client in %s" % sim.ns["client"])
    proc = nt.start_in_netns(sim.ns["client"], argv, stdout=subprocess.DEVNULL, stderr=None,
                             stdin=subprocess.DEVNULL)
    try:
        proc.wait(timeout=args.aiortc_seconds + 60)
    except subprocess.TimeoutExpired:
        nt.stop_process(proc)
    nt.forget_process(proc)
    try:
        with open(out) as f:
            ar = json.load(f)
    except (OSError, ValueError) as e:
        ar = {"error": "no result: %s" % e}
    sdp = ar.pop("answer_sdp", None) or ""
    stun_rtts = ar.pop("stun_rtts", [])
    ar.pop("frames", None)
    results["aiortc"] = ar
    check("aiortc: connected, no error", ar.get("connected") and "error" not in ar,
          {"error": ar.get("error"), "states": ar.get("states")})
    cands = [ln.split()[4:6] for ln in sdp.splitlines() if ln.startswith("a=candidate:")]
    results["aiortc_answer_candidates"] = [":".join(c) for c in cands]
    check("aiortc: the answer names C's VIP first, A's VIP after it",
          [":".join(c) for c in cands[:2]] == [vip_c, "%s:%d" % (gs.VIP_A_V4, gs.VIP_PORT)],
          results["aiortc_answer_candidates"])
    tone = ar.get("window_tone") or {}
    check("aiortc: the echoed tone is 440 Hz (+-3 %%) with SNR > 3 dB in >= 50 %% of the frames",
          abs((tone.get("dominant_hz") or 0) - 440) <= 13.2 and (tone.get("tone_snr_db") or -99) > 3
          and (ar.get("window_tone_fraction") or 0) >= 0.5,
          {"tone": tone, "tone_fraction": ar.get("window_tone_fraction")})
    to_c = [r for addr, r in stun_rtts if addr and "%s:%d" % tuple(addr) == vip_c]
    by_addr = {}
    for addr, r in stun_rtts:
        if addr:
            by_addr.setdefault("%s:%d" % tuple(addr), []).append(r)
    results["aiortc_stun_rtts_ms"] = by_addr
    rtt_check("aiortc", to_c, "aioice's first-try STUN transactions to VIP C: checks and consent")
    after = snapshot()
    relay_checks("aiortc", before, after)

    # ---- Chromium
    before = after
    argv = [args.node, e2e.BROWSER_E2E, "--url", url, "--expect-path", "relay", "--timeout-s",
            str(int(args.browser_timeout_s)), "--tone-wav", tone_wav, "--chromium", args.chromium,
            "--allow-loopback", "no", "--rtt-sample-s", str(args.browser_rtt_sample_s)]
    log("run browser_e2e in %s" % sim.ns["client"])
    browser_rc, summary = harness.run_json_client(sim.ns["client"], argv, args.browser_timeout_s + 45, "browser_e2e", log)
    summary.pop("chromium_args", None)
    results["chromium"] = {k: summary.get(k) for k in ("passed", "error", "browser_stats", "audio", "page_timings")}
    check("chromium: browser_e2e.mjs passed (tone back, connected, path relay, session ended)",
          browser_rc == 0, {"exit": browser_rc, "error": summary.get("error"),
                                    "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")]})
    bs = summary.get("browser_stats") or {}
    check("chromium: the selected pair's remote candidate is C's VIP",
          (bs.get("remoteCandidate") or "").startswith(vip_c + " "), bs.get("remoteCandidate"))
    rtt_check("chromium", [v for v in summary.get("pair_rtt_samples_ms") or [] if isinstance(v, (int, float))],
              "the selected candidate pair's currentRoundTripTime (STUN checks and consent), polled every "
              "100 ms for %g s" % args.browser_rtt_sample_s)
    after = snapshot()
    relay_checks("chromium", before, after)

    # ---- a forwarded datagram from outside A's peers.trusted (relay B's address)
    keys = sim.keys
    ufrag = mint(args.relay_bin, keys["a"], gs.CLUSTER_A, gs.ENDPOINT_A)
    _, request = stun.binding_request(ufrag, "forg", "forged-pwd-0123456789ab")
    framed = proxy_v2.encode((gs.CLIENT_C_V4, 40999), (gs.VIP_C_V4, gs.VIP_PORT)) + request
    a0 = sim.relay_metrics("a")
    stranger = nt.socket_in(sim.ns["relay_b"], socket.AF_INET)
    try:
        stranger.bind((gs.RELAY_B_BB_V4, 0))
        for _ in range(3):
            stranger.sendto(framed, (gs.RELAY_A_BB_V4, gs.PEER_PORT))
        a1 = gs.poll_until(lambda: (lambda m: m if delta(a0, m, "rtcedge_relay_dropped_packets_total",
                                                         reason="peer_untrusted") >= 3 else None)(
            sim.relay_metrics("a")), 5) or sim.relay_metrics("a")
        answered = bool(select.select([stranger], [], [], 0.3)[0])
    finally:
        stranger.close()
    f = {"peer_untrusted": int(delta(a0, a1, "rtcedge_relay_dropped_packets_total", reason="peer_untrusted")),
         "flows_created": int(delta(a0, a1, "rtcedge_relay_flows_created_total")),
         "owner_c2t": owner_packets(a0, a1, C2T),
         "answered": answered}
    results["forged_forward"] = f
    check("forged forward from outside peers.trusted: 3 x peer_untrusted at A, no flow, nothing forwarded, no answer",
          f["peer_untrusted"] >= 3 and f["flows_created"] == 0 and f["owner_c2t"] == 0 and not answered, f)

    # ---- a hint for a cluster nobody serves, at C (signed with C's own keys: wrong_cluster)
    ufrag = mint(args.relay_bin, keys["c"], 9, 1)
    _, request = stun.binding_request(ufrag, "nobo", "nobody-pwd-0123456789ab")
    c0, a0 = sim.relay_metrics("c"), sim.relay_metrics("a")
    cli = nt.socket_in(sim.ns["client"], socket.AF_INET)
    try:
        cli.bind((gs.CLIENT_C_V4, 0))
        for _ in range(3):
            cli.sendto(request, (gs.VIP_C_V4, gs.VIP_PORT))

        def rejected(m):
            # rtcedge_relay_dropped_packets_total folds in XDP's own drops.
            return delta(c0, m, "rtcedge_relay_dropped_packets_total", reason="hint_rejected")
        c1 = gs.poll_until(lambda: (lambda m: m if rejected(m) >= 3 else None)(sim.relay_metrics("c")), 5) \
            or sim.relay_metrics("c")
        answered = bool(select.select([cli], [], [], 0.3)[0])
    finally:
        cli.close()
    a1 = sim.relay_metrics("a")
    f = {"hint_rejected": int(rejected(c1)),
         "wrong_cluster": int(delta(c0, c1, "rtcedge_relay_hint_failures_total", reason="wrong_cluster")),
         "c_flows_created": int(delta(c0, c1, "rtcedge_relay_flows_created_total")),
         "a_received_from_peers": owner_packets(a0, a1, C2T),
         "answered": answered, "c_xdp": xdp_moved(c0, c1)}
    results["nobody_serves"] = f
    check("a hint of cluster 9 (nobody serves it) at C: 3 counted rejections (wrong_cluster), no flow, nothing "
          "reaches A, no answer",
          f["hint_rejected"] >= 3 and f["c_flows_created"] == 0 and f["a_received_from_peers"] == 0 and not answered,
          f)
    if args.relay_mode == "xdp":
        check("the XDP program rejected that hint itself (xdp hint_rejected)",
              f["c_xdp"].get("%s/hint_rejected" % C2T, 0) >= 3, f["c_xdp"])
    else:
        check("relay C's worker counted wrong_cluster for that hint", f["wrong_cluster"] >= 3, f)

    # ---- the wires carried it all, and dropped nothing
    splice.close()
    for name in ("a", "b"):
        rc = sim.transceivers[name].stop()
        check("transceiver %s exits 0 on SIGTERM" % name.upper(), rc == 0, rc)
    for name in ("c", "a", "b"):
        rc = sim.relays[name].stop()
        check("relay %s exits 0 on SIGTERM" % name.upper(), rc == 0, rc)
    wires = sim.stop_wires()
    results["wires"] = {n: {d: {k: c[d][k] for k in ("forwarded", "lost", "queue_full", "send_errors", "max_late_us",
                                                       "late_over_1ms", "max_late_at_s")}
                            for d in ("a_to_b", "b_to_a")} if c else None for n, c in wires.items()}
    check("the wires dropped nothing (no queue_full, no send error)",
          all(c and all(c[d]["queue_full"] == 0 and c[d]["send_errors"] == 0 for d in ("a_to_b", "b_to_a"))
              for c in wires.values()), results["wires"])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--as-aiortc-client":
        return as_aiortc_client(sys.argv[2:])
    from rtcetest import netns as harness

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", required=True)
    ap.add_argument("--relay-bin", required=True)
    ap.add_argument("--relay-mode", choices=["userspace", "xdp"], default="userspace")
    ap.add_argument("--xdp-pass-obj", help="default: ../bpf/xdp_pass.bpf.o next to the relay's bin/")
    ap.add_argument("--access-ms", type=float, default=10.0, help="client <-> ingress C, one way")
    ap.add_argument("--backbone-ms", type=float, default=25.0, help="C <-> clusters A and B, one way")
    ap.add_argument("--public-ms", type=float, default=60.0,
                    help="the client's router <-> A's VIP over the public internet, one way (after the access link)")
    ap.add_argument("--jitter-ms", type=float, default=0.0,
                    help="every wire, each way: uniform jitter (exploration; the CTests run without)")
    ap.add_argument("--loss-pct", type=float, default=0.0, help="every wire, each way: Bernoulli loss (exploration)")
    ap.add_argument("--aiortc-seconds", type=float, default=6.0)
    ap.add_argument("--browser-timeout-s", type=float, default=40.0)
    ap.add_argument("--browser-rtt-sample-s", type=float, default=5.0)
    ap.add_argument("--budget-s", type=float, default=150.0, help="the wires' lifetime bound")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--node", default="node")
    ap.add_argument("--keep-workdir", action="store_true")
    args = ap.parse_args()
    harness.default_xdp_pass_obj(args)
    if args.public_ms <= args.backbone_ms:
        ap.error("--public-ms must exceed --backbone-ms (the ingress path is the better one)")
    results = {"relay_mode": args.relay_mode, "checks": []}
    return harness.netns_main(args, results, run_test, lambda: prerequisites(args), log, "rtcedge-global-sim-")


if __name__ == "__main__":
    sys.exit(main())
