#!/usr/bin/python3
"""run_chaos_netns.py — chaos with real processes (issue 16 §2): uplink impairment, and a
transceiver SIGKILLed under live sessions.

    client ns                         relay ns                            xcvr ns
    aiortc clients (chaos_aiortc_     rc0 VIP 198.18.255.100:3478         rtcedge-transceiver A
    client.py), tone at 440 Hz  --->  rtcedge-relay (userspace)    --->   (B too, --scenario kill)
    127.0.0.1:P (HTTP splice) -------------- TCP, relay ns ----------->   198.18.1.2:8080(/8081)
                                                                          redis-server (kill)

--scenario impairment: one transceiver (echo backend), one session per impairment of
  --impairments (loss 1/5/10 %, jitter, reordering, duplication; see chaos_aiortc_client.py),
  each impaired on the client's uplink for --seconds. Checks per impairment: the session
  stayed connected for the whole window (the transceiver ended no session except by the
  final DELETE), the jitter-buffer counters of that session moved as the impairment implies
  (lost, and concealed or fec_recovered, with loss; reordered or late with reordering /
  jitter; nothing required with duplication alone), and the echo
  still carries the tone (fraction of 20 ms frames with the tone, and the tone SNR, against
  --min-tone-fraction). tc netem is used when the kernel has sch_netem; otherwise the same
  model runs in the client's send path (the report says which).
--scenario kill: two transceivers (two endpoints) registered through a real redis-server
  (registry.ttl --ttl on relay and transceivers), --sessions-per sessions on each; once every
  session echoes, B is SIGKILLed. Checks: A's sessions keep their audio across the kill
  (frames lost in [kill - 1 s, kill + 3 s] and the longest gap), B's clients see their
  sessions end within sessions.consent_timeout (their RFC 7675 consent, shortened to match;
  the figure is kill -> the client's ICE closed), the relay drops B's endpoint within
  registry.ttl + 1 s (rtcedge_relay_endpoints, flows_endpoint_gone_total) and logs it, and A
  ended no session except by the final DELETE.

Prints one JSON summary with the figures (and, with --table, a Markdown table). Exit codes:
0 pass, 1 fail (also when aiortc/numpy, tc, nft or redis-server is missing), 77 skipped (not
root, no netns; --impair-with netem on a kernel without sch_netem).
Namespaces and processes are removed on every exit path (netns_topology's registry).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import run_browser_e2e_xdp as bx  # noqa: E402  (its ports and assert_no_route)
from rtcetest import core, outcome  # noqa: E402
from rtcetest import netns as harness  # noqa: E402
from rtcetest.core import machine  # noqa: E402

CLIENT = os.path.join(HERE, "chaos_aiortc_client.py")
IMPAIRMENTS = {
    "none": "none",
    "loss1": "loss=1",
    "loss5": "loss=5",
    "loss10": "loss=10",
    "jitter30": "delay=40,jitter=30",
    "reorder": "reorder=25,gap=20",
    "duplicate": "duplicate=10",
}
REDIS_PORT = 26380
MEDIA_A, MEDIA_B = 40000, 40100
HTTP_A, HTTP_B = 8080, 8081


log = core.log_to("run_chaos_netns")


def metric_sum(m, name, **labels):
    want = set(labels.items())
    return sum(v for (n, lab), v in m.samples.items() if n == name and want <= set(lab))


def prerequisites(args):
    """Raises outcome.Unavailable (skip) or outcome.SetupError (fail) when this test cannot run."""
    harness.require_executables(args)
    outcome.require_netns()
    outcome.require_aiortc()
    if args.scenario == "impairment":
        outcome.require_tool("tc", "iproute2")
        if args.impair_with == "nft":
            outcome.require_tool("nft", "nftables")
    if args.scenario == "kill":
        outcome.require_redis()


class Env:
    """Namespaces, a hint key, a userspace relay, transceivers and HTTP splices to them."""

    def __init__(self, args, workdir):
        self.args, self.workdir = args, workdir
        self.topo = nt.Topology(tag="chaos").create()
        bx.assert_no_route(self.topo.client, nt.XCVR_V4)
        self.keys = os.path.join(workdir, "hint-keys.yaml")
        with open(self.keys, "wb") as f:
            subprocess.run([args.relay_bin, "hint", "keygen"], stdout=f, check=True, timeout=10)
        self.logs = {}
        self.xcvrs = {}
        self.splices = {}

    def start_relay(self, extra):
        argv = [self.args.relay_bin, "--listen", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT), "--workers", "1",
                "--pin-cpus", "false", "--cluster-id", str(bx.CLUSTER), "--hint-key-file", self.keys,
                "--admin-listen", "127.0.0.1:%d" % bx.RELAY_ADMIN_PORT] + extra
        self.relay = harness.Service("relay", self.topo.relay, argv, self.workdir, log=log)
        self.logs["relay"] = self.relay.log_path
        self.relay.wait_http("127.0.0.1", bx.RELAY_ADMIN_PORT, "/metrics")

    def relay_metrics(self):
        status, body = nt.http_get_in(self.topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("relay GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    def start_transceiver(self, name, http_port, media_port, extra):
        argv = [self.args.transceiver_bin, "--http-listen", "%s:%d" % (nt.XCVR_V4, http_port),
                "--http-allow-public-without-keys", "true", "--workers", "1",
                "--media-listen", nt.XCVR_V4, "--media-base-port", str(media_port),
                "--relay-vips", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT), "--relay-sources", "198.18.1.0/24",
                "--direct-enabled", "false", "--hint-key-file", self.keys, "--hint-cluster-id", str(bx.CLUSTER),
                "--backend-echo-mode", "loopback", "--sessions-drain-timeout", "1s"] + extra
        svc = harness.Service("transceiver-" + name, self.topo.xcvr, argv, self.workdir, log=log)
        self.logs["transceiver-" + name] = svc.log_path
        svc.http_port = http_port
        svc.wait_http(nt.XCVR_V4, http_port, "/metrics")
        self.xcvrs[name] = svc
        splice = nt.HttpSplice(self.topo.client, self.topo.relay, (nt.XCVR_V4, http_port))
        nt.register_cleanup(splice.close)
        self.splices[name] = splice
        return svc

    def xcvr_metrics(self, name):
        status, body = nt.http_get_in(self.topo.xcvr, nt.XCVR_V4, self.xcvrs[name].http_port, "/metrics")
        if status != 200:
            raise RuntimeError("transceiver %s GET /metrics: HTTP %d" % (name, status))
        return prom_metrics.parse(body)

    def url(self, name):
        return "http://127.0.0.1:%d" % self.splices[name].port

    def start_client(self, tag, xcvr, seconds, extra):
        out = os.path.join(self.workdir, "client-%s.json" % tag)
        ready = os.path.join(self.workdir, "client-%s.ready" % tag)
        argv = ["/usr/bin/python3", CLIENT, "--url", self.url(xcvr), "--seconds", "%g" % seconds,
                "--json-out", out, "--ready-file", ready] + extra
        logf = open(os.path.join(self.workdir, "client-%s.log" % tag), "wb")
        proc = nt.start_in_netns(self.topo.client, argv, stdout=logf, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        logf.close()
        self.logs["client-" + tag] = os.path.join(self.workdir, "client-%s.log" % tag)
        return {"tag": tag, "proc": proc, "out": out, "ready": ready, "xcvr": xcvr}

    def finish_client(self, c, timeout):
        try:
            c["proc"].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            nt.stop_process(c["proc"])
        nt.forget_process(c["proc"])
        try:
            with open(c["out"]) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            return {"error": "no result from the client (%s); log:\n%s"
                    % (e, core.tail(self.logs["client-" + c["tag"]]))}


def ended_reasons(m):
    return {r: int(v) for r, v in m.by_label("rtcedge_transceiver_sessions_ended_total", "reason").items() if v}


# ---------------------------------------------------------------------------- impairment

def expected_movement(imp):
    """The jitter-buffer outcomes an impairment must move. A lost frame whose successor is
    buffered is decoded through libopus's FEC path and counted fec_recovered even when the
    client sent no in-band FEC (libopus then conceals inside that call); otherwise it is
    counted concealed. So loss moves `lost` and one of the two."""
    if imp.get("loss"):
        return ["lost", "concealed|fec_recovered"]
    if imp.get("reorder") or imp.get("jitter"):
        return ["reordered|late"]
    return []


def run_impairment(args, env, results, check):
    ok, why = outcome.netem_works(env.topo.client, "cl0")
    impair_with = "netem" if ok else "shim"
    if args.impair_with != "auto":
        impair_with = args.impair_with
        if impair_with == "netem" and not ok:
            raise outcome.Unavailable(why)
    results["impair_with"] = impair_with
    if impair_with == "shim":
        results["impair_with_why"] = "tc netem unavailable (%s): the netem model runs in the client's send path" % why
        log(results["impair_with_why"])
    env.start_relay(["--endpoints", "%d=%s:%d" % (bx.ENDPOINT, nt.XCVR_V4, MEDIA_A)])
    env.start_transceiver("a", HTTP_A, MEDIA_A, ["--hint-endpoint-base-id", str(bx.ENDPOINT)]
                          + (["--audio-jitter-delay", args.jitter_delay] if args.jitter_delay else []))
    results["audio_jitter_delay"] = args.jitter_delay or "40ms (default)"
    names = args.impairments.split(",")
    for n in names:
        if n not in IMPAIRMENTS:
            raise SystemExit("unknown impairment %r (known: %s)" % (n, ", ".join(IMPAIRMENTS)))
    # netem shapes the whole link: one impaired session at a time. The shim impairs only its
    # own client, so the sessions may run side by side (--parallel; a shorter test, but on a
    # loaded machine the Python clients then compete for CPU, which shows as echo gaps).
    size = 1 if impair_with in ("netem", "nft") else max(1, args.parallel or len(names))
    groups = [names[i:i + size] for i in range(0, len(names), size)]
    results["sessions_side_by_side"] = size
    before = env.xcvr_metrics("a")
    rows = []
    for group in groups:
        clients = [env.start_client(n, "a", args.seconds + args.impair_after_s,
                                    ["--impair", IMPAIRMENTS[n], "--impair-with", impair_with,
                                     "--impair-after-s", "%g" % args.impair_after_s, "--seed", str(i + 1)])
                   for i, n in enumerate(group)]
        for c in clients:
            r = env.finish_client(c, args.seconds + args.impair_after_s + 60)
            rows.append((c["tag"], r))
    after = env.xcvr_metrics("a")
    env.xcvrs["a"].check_alive()
    ends = {r: n - int(before.get("rtcedge_transceiver_sessions_ended_total", reason=r))
            for r, n in ended_reasons(after).items()}
    ends = {r: n for r, n in ends.items() if n}
    results["sessions_ended"] = ends
    check("the transceiver ended sessions only by the final DELETE", set(ends) <= {"deleted"}
          and ends.get("deleted", 0) == len(rows), ends)
    table = []
    for tag, r in rows:
        sess = r.get("session") or {}
        jb = sess.get("jitter_buffer") or {}
        imp = (r.get("impairment") or {}).get("model") or {}
        row = {"impairment": tag, "model": IMPAIRMENTS[tag], "connected": r.get("connected"),
               "error": r.get("error"), "state_before_delete": sess.get("state"),
               "client_end": r.get("client_end_cause"), "window_s": r.get("window_s"),
               "impairer": r.get("impairer"), "jitter_buffer": jb, "impair_with": results["impair_with"],
               "rtcp_loss": round(sess["loss"], 4) if isinstance(sess.get("loss"), float) else sess.get("loss"),
               "jitter_ms": sess.get("jitter_ms"), "rtp_packets_received": sess.get("rtp_packets_received"),
               "echo_frames": r.get("window_frames"), "echo_frames_expected": r.get("window_frames_expected"),
               "tone_fraction": r.get("window_tone_fraction"), "max_gap_ms": r.get("window_max_gap_ms"),
               "tone_snr_db": (r.get("window_tone") or {}).get("tone_snr_db"),
               "dominant_hz": (r.get("window_tone") or {}).get("dominant_hz")}
        table.append(row)
        check("%s: connected and impaired for the whole window" % tag,
              r.get("connected") and not r.get("error") and "client_ended_at" not in r
              and sess.get("state") == "connected" and (r.get("window_s") or 0) >= 0.9 * args.seconds,
              {k: row[k] for k in ("connected", "error", "state_before_delete", "client_end", "window_s")})
        for want in expected_movement(imp):
            moved = {o: jb.get(o, 0) for o in want.split("|")}
            check("%s: jitter buffer %s moved" % (tag, want), any(v > 0 for v in moved.values()), jb)
        check("%s: the echo carries the tone (>= %.0f %% of 20 ms frames, SNR >= %g dB)"
              % (tag, args.min_tone_fraction * 100, args.min_snr_db),
              (row["tone_fraction"] or 0) >= args.min_tone_fraction and (row["tone_snr_db"] or -99) >= args.min_snr_db,
              {"tone_fraction": row["tone_fraction"], "tone_snr_db": row["tone_snr_db"]})
    results["impairments"] = table
    jb_total = {o: int(after.get("rtcedge_transceiver_jitter_buffer_frames_total", outcome=o)
                       - before.get("rtcedge_transceiver_jitter_buffer_frames_total", outcome=o))
                for o in ("lost", "fec_recovered", "concealed", "late", "reordered")}
    results["jitter_buffer_metric_delta"] = jb_total
    # A duplicated SRTP packet is refused by SRTP replay protection before the jitter buffer.
    drops = {r: int(after.get("rtcedge_transceiver_datagrams_dropped_total", reason=r)
                    - before.get("rtcedge_transceiver_datagrams_dropped_total", reason=r))
             for r in after.by_label("rtcedge_transceiver_datagrams_dropped_total", "reason")}
    results["transceiver_drops"] = {r: n for r, n in drops.items() if n}
    duplicated = sum((t["impairer"] or {}).get("duplicated", 0) for t in table)
    if impair_with in ("shim", "nft") and duplicated:
        check("duplicated datagrams were dropped as SRTP replays (srtp_failed), not played",
              drops.get("srtp_failed", 0) >= 0.8 * duplicated,
              {"duplicated": duplicated, "srtp_failed": drops.get("srtp_failed", 0)})
    check("rtcedge_transceiver_jitter_buffer_frames_total moved with the sessions' counters",
          sum(jb_total.values()) >= sum(sum((t["jitter_buffer"] or {}).values()) for t in table) > 0, jb_total)
    if args.table:
        print_impairment_table(results, table)


def print_impairment_table(results, table):
    print("\nNetwork impairment on the client's uplink (%s), %s per impairment, aiortc 1.4 client, "
          "echo backend, userspace relay" % (results["impair_with"], "%gs" % table[0]["window_s"] if table else "?"))
    print("machine: %s\n" % machine())
    print("| impairment | uplink datagrams dropped / dup / delayed | jb lost | jb concealed | jb reordered | jb late "
          "| jb fec_recovered | RTCP loss | echo frames / expected | frames with tone | tone SNR (dB) | max gap (ms) "
          "| session |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t in table:
        jb, im = t["jitter_buffer"] or {}, t["impairer"] or {}
        print("| %s (`%s`) | %s / %s / %s | %s | %s | %s | %s | %s | %s | %s / %s | %.1f %% | %s | %s | %s |" % (
            t["impairment"], t["model"], im.get("dropped", "-"), im.get("duplicated", "-"), im.get("delayed", "-"),
            jb.get("lost"), jb.get("concealed"), jb.get("reordered"), jb.get("late"), jb.get("fec_recovered"),
            t["rtcp_loss"], t["echo_frames"], t["echo_frames_expected"], 100 * (t["tone_fraction"] or 0),
            t["tone_snr_db"], t["max_gap_ms"],
            "up" if t["state_before_delete"] == "connected" else t["state_before_delete"]))


# ---------------------------------------------------------------------------- kill -9

class Redis:
    def __init__(self, ns, workdir):
        self.ns = ns
        self.log_path = os.path.join(workdir, "redis.log")
        with open(self.log_path, "wb") as out:
            self.proc = nt.start_in_netns(ns, ["redis-server", "--port", str(REDIS_PORT), "--bind", nt.XCVR_V4,
                                               "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                                          stdout=out, stderr=subprocess.STDOUT)
        if not core.poll_until(lambda: self.cli("PING") == "PONG", 10.0, interval=0.1):
            raise RuntimeError("redis-server did not answer PING:\n" + core.tail(self.log_path))

    @property
    def url(self):
        return "redis://%s:%d" % (nt.XCVR_V4, REDIS_PORT)

    def cli(self, *args):
        r = subprocess.run(["ip", "netns", "exec", self.ns, "redis-cli", "-h", nt.XCVR_V4, "-p", str(REDIS_PORT)]
                           + list(args), capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None


def frames_between(frames, lo, hi):
    return [f for f in frames if lo <= f[0] < hi]


def run_kill(args, env, results, check):
    ttl_s = args.ttl
    consent_s = args.consent_timeout
    redis = Redis(env.topo.xcvr, env.workdir)
    env.logs["redis"] = redis.log_path
    reg = ["--registry-redis-url", redis.url, "--registry-ttl", "%gs" % ttl_s]
    env.start_relay(reg)
    common = reg + ["--sessions-consent-timeout", "%gs" % consent_s]
    env.start_transceiver("a", HTTP_A, MEDIA_A, common + ["--registry-pod-identity", "chaos-a"])
    env.start_transceiver("b", HTTP_B, MEDIA_B, common + ["--registry-pod-identity", "chaos-b"])
    m = core.poll_until(lambda: (lambda m: m if m.get("rtcedge_relay_endpoints") == 2 else None)(env.relay_metrics()),
                      15.0, interval=0.1)
    check("the relay routes to both registered transceivers", m is not None,
          env.relay_metrics().get("rtcedge_relay_endpoints"))
    if m is None:
        return
    # Client consent: a check every interval, closed after `failures` unanswered ones; each
    # unanswered check takes its interval plus aioice's 0.5 s transaction timeout.
    interval = 0.25
    failures = max(1, int((consent_s - 0.5) / (interval + 0.5)))
    results["client_consent"] = {"interval_s": interval, "failures": failures,
                                 "expires_after_s": round(failures * (interval + 0.5), 2)}
    session_s = args.seconds
    clients = []
    for name in ("a", "b"):
        for i in range(args.sessions_per):
            clients.append(env.start_client("%s%d" % (name, i), name, session_s,
                                            ["--consent-interval-s", "%g" % interval,
                                             "--consent-failures", str(failures)]))
    # Every client connected and the echo flowing on both transceivers (condition, not a sleep).
    def all_echoing():
        for c in clients:
            if c["proc"].poll() is not None:
                raise RuntimeError("client %s exited early:\n%s" % (c["tag"], core.tail(env.logs["client-" + c["tag"]])))
        if not all(os.path.exists(c["ready"]) for c in clients):
            return False
        return all(env.xcvr_metrics(n).get("rtcedge_transceiver_rtp_packets_total", kind="rtp", direction="out")
                   >= 100 * args.sessions_per for n in ("a", "b"))

    if not check("every session connected and echoing on both transceivers", core.poll_until(all_echoing, 40.0, 0.1)):
        return
    a_before = env.xcvr_metrics("a")
    relay_before = env.relay_metrics()
    killed_at = time.monotonic()
    env.xcvrs["b"].proc.send_signal(signal.SIGKILL)
    env.xcvrs["b"].proc.wait(timeout=5)
    nt.forget_process(env.xcvrs["b"].proc)
    log("SIGKILLed transceiver b (pid %d)" % env.xcvrs["b"].proc.pid)

    # The relay: endpoint gone within registry.ttl + 1 s.
    left = {}

    def endpoint_left():
        m = env.relay_metrics()
        if m.get("rtcedge_relay_endpoints") == 1 and "at" not in left:
            left["at"] = time.monotonic()
        gone = metric_sum(m, "rtcedge_relay_flows_endpoint_gone_total") - metric_sum(
            relay_before, "rtcedge_relay_flows_endpoint_gone_total")
        if gone >= 1 and "gone_at" not in left:
            left["gone_at"] = time.monotonic()
            left["flows_endpoint_gone"] = int(gone)
        return "at" in left and "gone_at" in left

    core.poll_until(endpoint_left, ttl_s + 10.0, interval=0.05)
    results["relay_endpoint_left_after_s"] = round(left["at"] - killed_at, 3) if "at" in left else None
    results["relay_flows_endpoint_gone"] = left.get("flows_endpoint_gone")
    check("the relay dropped the dead endpoint within registry.ttl + 1 s (%.1f s)" % (ttl_s + 1),
          "at" in left and left["at"] - killed_at <= ttl_s + 1.0 + args.slack,
          {"after_s": results["relay_endpoint_left_after_s"], "slack_s": args.slack})
    check("flows_endpoint_gone_total moved by the dead endpoint's flows (%d)" % args.sessions_per,
          (left.get("flows_endpoint_gone") or 0) >= args.sessions_per, left.get("flows_endpoint_gone"))
    relay_log = open(env.relay.log_path, errors="replace").read()
    check("the relay logged the endpoint leaving", "left" in relay_log and "registry: endpoint" in relay_log,
          [l for l in relay_log.splitlines() if "registry: endpoint" in l][-3:])

    results_by = {c["tag"]: env.finish_client(c, session_s + 60) for c in clients}
    a_after = env.xcvr_metrics("a")
    env.xcvrs["a"].check_alive()
    sessions = []
    for tag, r in sorted(results_by.items()):
        frames = r.get("frames") or []
        win = frames_between(frames, killed_at - 1.0, killed_at + 3.0)
        gaps = [b[0] - a[0] for a, b in zip(win, win[1:])]
        # The same 4 s later, far from the kill: what this machine's load alone costs.
        ref = frames_between(frames, killed_at + 3.0, killed_at + 7.0)
        row = {"session": tag, "transceiver": tag[0], "connected": r.get("connected"), "error": r.get("error"),
               "frames_in_kill_window": len(win), "frames_expected": 200,
               "max_gap_ms_in_kill_window": round(max(gaps) * 1000) if gaps else None,
               "frames_in_reference_window": len(ref) if tag[0] == "a" else None,
               "client_end": r.get("client_end_cause"),
               "client_end_after_kill_s": (round(r["client_ended_at"] - killed_at, 3)
                                           if r.get("client_ended_at") else None),
               "last_echo_after_kill_s": round(frames[-1][0] - killed_at, 3) if frames else None,
               "state_before_delete": (r.get("session") or {}).get("state")}
        sessions.append(row)
        if tag[0] == "a":
            lost = max(0, 200 - len(win))
            row["frames_lost_across_kill"] = lost
            check("survivor %s keeps its audio across the kill (lost %d of 200 frames, max gap %s ms)"
                  % (tag, lost, row["max_gap_ms_in_kill_window"]),
                  r.get("connected") and not r.get("error") and "client_ended_at" not in r
                  and row["state_before_delete"] == "connected" and lost <= args.max_survivor_loss
                  and (row["max_gap_ms_in_kill_window"] or 1e9) <= args.max_survivor_gap_ms, row)
        else:
            check("killed %s: the client saw its session end within the consent timeout (%.1f s)" % (tag, consent_s),
                  row["client_end_after_kill_s"] is not None
                  and row["client_end_after_kill_s"] <= consent_s + args.slack, row)
    results["sessions"] = sessions
    ends = {r: n - int(a_before.get("rtcedge_transceiver_sessions_ended_total", reason=r))
            for r, n in ended_reasons(a_after).items()}
    ends = {r: n for r, n in ends.items() if n}
    results["survivor_sessions_ended"] = ends
    check("the survivor ended its sessions only by the final DELETE",
          set(ends) <= {"deleted"} and ends.get("deleted", 0) == args.sessions_per, ends)
    if args.table:
        print("\nSIGKILL of one of two transceivers (registry.ttl %gs, sessions.consent_timeout %gs, %d sessions each)"
              % (ttl_s, consent_s, args.sessions_per))
        print("machine: %s\n" % machine())
        print("relay dropped the endpoint %.2f s after the kill; flows removed: %s\n"
              % (results["relay_endpoint_left_after_s"] or float("nan"), results["relay_flows_endpoint_gone"]))
        print("| session | transceiver | echo frames in [kill-1s, kill+3s] / 200 | max gap (ms) "
              "| reference: frames in [kill+3s, kill+7s] / 200 | client saw the end (s after kill) |")
        print("|---|---|---|---|---|---|")
        for s in sessions:
            print("| %s | %s | %s | %s | %s | %s |" % (
                s["session"], "survivor" if s["transceiver"] == "a" else "killed", s["frames_in_kill_window"],
                s["max_gap_ms_in_kill_window"], s["frames_in_reference_window"] or "-",
                s["client_end_after_kill_s"] or "-"))


def run_test(args, workdir, results):
    check = harness.checker(results, log)
    env = Env(args, workdir)
    results["logs"] = env.logs
    try:
        if args.scenario == "impairment":
            run_impairment(args, env, results, check)
        else:
            run_kill(args, env, results, check)
    finally:
        for s in env.splices.values():
            s.close()
        for name, svc in env.xcvrs.items():
            if svc.proc.poll() is None:
                check("transceiver %s exits 0 on SIGTERM" % name, svc.stop() == 0)
        if getattr(env, "relay", None):
            check("relay exits 0 on SIGTERM", env.relay.stop() == 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", required=True)
    ap.add_argument("--relay-bin", required=True)
    ap.add_argument("--scenario", choices=["impairment", "kill"], required=True)
    ap.add_argument("--impairments", default="loss5,jitter30,reorder,duplicate", help="from: " + ", ".join(IMPAIRMENTS))
    ap.add_argument("--impair-with", choices=["auto", "netem", "shim", "nft"], default="auto",
                    help="auto: netem when the kernel has it, else shim; nft: loss and duplicate only, in the kernel")
    ap.add_argument("--impair-after-s", type=float, default=1.5)
    ap.add_argument("--jitter-delay", help="impairment: the transceiver's audio.jitter_delay (e.g. 100ms)")
    ap.add_argument("--parallel", type=int, default=0, help="impairment: sessions side by side (0 = all)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="impairment: the impaired window (default 8); kill: session length (default 12)")
    ap.add_argument("--min-tone-fraction", type=float, default=0.6)
    ap.add_argument("--min-snr-db", type=float, default=3.0)
    ap.add_argument("--sessions-per", type=int, default=2, help="kill: sessions on each transceiver")
    ap.add_argument("--ttl", type=float, default=1.0, help="kill: registry.ttl (s)")
    ap.add_argument("--consent-timeout", type=float, default=3.0, help="kill: sessions.consent_timeout (s)")
    ap.add_argument("--slack", type=float, default=1.5, help="kill: extra seconds allowed on a loaded machine")
    ap.add_argument("--max-survivor-loss", type=int, default=20, help="kill: frames of 200 a survivor may miss")
    ap.add_argument("--max-survivor-gap-ms", type=float, default=400)
    ap.add_argument("--table", action="store_true", help="also print the figures as a Markdown table")
    ap.add_argument("--keep-workdir", action="store_true")
    args = ap.parse_args()
    if args.seconds is None:
        args.seconds = 8.0 if args.scenario == "impairment" else 12.0
    if not (1 <= args.sessions_per <= 8 and 2 <= args.seconds <= 300):
        ap.error("--sessions-per 1..8, --seconds 2..300")
    results = {"scenario": args.scenario, "checks": []}
    return harness.netns_main(args, results, run_test, lambda: prerequisites(args), log, "rtcedge-chaos-")


if __name__ == "__main__":
    sys.exit(main())
