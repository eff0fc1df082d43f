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
--scenario redis-outage (issue 28 §3): relay with registry, flow store and registry.cache_file,
  transceivers A and B registered through redis-server, --sessions-per established sessions on
  each; then redis-server is SIGKILLed for --outage seconds (no persistence: it comes back
  empty). During the outage: a new session every --new-session-interval (one aiortc process,
  chaos_outage.py; each must connect and echo the tone, on hints alone; connect times kept), B
  drained by SIGTERM at --drain-at of the outage (exit 0 within sessions.drain_timeout, its
  sessions end `drained`, new sessions move to A on its 503), the relay stopped cleanly and
  started again at --restart-at with the same configuration (ready from its cache file with
  Redis down; the established flows come back at their next STUN consent check, the gap is
  measured), /healthz and /readyz of every process polled every 0.5 s. Checks: A's established
  sessions keep their audio over the whole outage (frames lost and the longest gap, the
  restart's gap apart) and after Redis returns. After the return (watched --converge-s):
  time until the live transceivers are registered again and the relay's view (its cache
  file and rtcedge_relay_endpoints) matches Redis, until rtcedge_relay_flow_store_up is 1
  and the live flows are in the store again, and Redis's load per second for
  --load-samples s (commands/s without this harness's own polls, connected_clients, calls
  per command): no thundering herd.
--scenario redis-failover --topology sentinel|cluster (issue 28 §3): a Redis Sentinel group
  (1 replica, 3 sentinels) or a Redis Cluster (3 masters, a replica each) from rtcetest.redis,
  run in the relay's namespace (its nodes bind and announce 127.0.0.1; every port is forwarded
  from the transceivers' namespace by chaos_outage.TcpForward, so everyone dials the same
  addresses); relay (registry, flow store, registry.cache_file) and transceivers A and B on it
  through redis+sentinel:// / redis+cluster://, --sessions-per established sessions on each and
  the prober's new session every --new-session-interval from 1 s before the kill. Events: the
  master SIGKILLed (Cluster: the master owning most established flow keys); --restart-after s
  later the relay SIGKILLed and started again (cache kept); Cluster: then the 3 slots around
  an established session's flow key migrated to another master, and the relay restarted again.
  Checks: the replica took over and a flow written after the kill is readable from the store
  (GET on the master of its slot) within --failover-bound; every established session keeps its
  audio around each event and over the run (relay restarts aside; frames lost and the longest
  gap, as the kill scenario); after each relay restart rtcedge_relay_flows_recovered_total >=
  the established sessions and every one echoes again within --max-recovery-s of the SIGKILL
  (aiortc's consent check comes every 5 s: only the flow store brings a flow back sooner); every
  new session connected and echoed the tone; the relay never lost an endpoint; transceivers
  ended sessions only by DELETE.

Prints one JSON summary with the figures (and, with --table, a Markdown table). Exit codes:
0 pass, 1 fail (also when aiortc/numpy, tc, nft or redis-server is missing), 77 skipped (not
root, no netns; --impair-with netem on a kernel without sch_netem).
Namespaces and processes are removed on every exit path (netns_topology's registry).
"""

import argparse
import binascii
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

import chaos_outage  # noqa: E402
import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import run_browser_e2e_xdp as bx  # noqa: E402  (its ports and assert_no_route)
from rtcetest import core, outcome  # noqa: E402
from rtcetest import netns as harness  # noqa: E402
from rtcetest.core import machine  # noqa: E402

CLIENT = os.path.join(HERE, "chaos_aiortc_client.py")
PROBER = os.path.join(HERE, "chaos_outage.py")
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



def establish_sessions(env, args, session_s, client_args=()):
    """--sessions-per aiortc sessions on each transceiver (client_args: the client's own options),
    for session_s; the clients once every one echoes (None after 40 s)."""
    clients = []
    for name in ("a", "b"):
        for i in range(args.sessions_per):
            clients.append(env.start_client("%s%d" % (name, i), name, session_s, list(client_args)))

    def all_echoing():
        for c in clients:
            if c["proc"].poll() is not None:
                raise RuntimeError("client %s exited early:\n%s" % (c["tag"], core.tail(env.logs["client-" + c["tag"]])))
        if not all(os.path.exists(c["ready"]) for c in clients):
            return False
        return all(env.xcvr_metrics(n).get("rtcedge_transceiver_rtp_packets_total", kind="rtp", direction="out")
                   >= 100 * args.sessions_per for n in ("a", "b"))

    return clients if core.poll_until(all_echoing, 40.0, 0.1) else None


def read_probes(jsonl):
    """The prober's JSON lines (one per new session), in session order; none if it wrote nothing."""
    if not os.path.exists(jsonl):
        return []
    with open(jsonl) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda p: p["n"])


def start_prober(env, args, count):
    """The prober (`count` new sessions, one every --new-session-interval), started and waiting
    for its go file. Returns (process, its JSON-lines output, the go file, the URLs file it
    reads before each session)."""
    urls = os.path.join(env.workdir, "prober-urls.txt")
    with open(urls, "w") as f:
        f.write("%s\n%s\n" % (env.url("a"), env.url("b")))
    jsonl = os.path.join(env.workdir, "prober.jsonl")
    pready, pgo = os.path.join(env.workdir, "prober.ready"), os.path.join(env.workdir, "prober.go")
    plog = open(os.path.join(env.workdir, "prober.log"), "wb")
    prober = nt.start_in_netns(env.topo.client, ["/usr/bin/python3", PROBER, "--urls-file", urls, "--count", str(count),
                                                 "--interval-s", "%g" % args.new_session_interval, "--hold-s", "2",
                                                 "--jsonl-out", jsonl, "--ready-file", pready, "--go-file", pgo],
                               stdout=plog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    plog.close()
    env.logs["prober"] = os.path.join(env.workdir, "prober.log")
    if not core.poll_until(lambda: os.path.exists(pready) or prober.poll() is not None, 30.0, 0.1) \
            or prober.poll() is not None:
        raise RuntimeError("the prober did not start:\n" + core.tail(env.logs["prober"]))
    return prober, jsonl, pgo, urls

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
    if args.scenario in ("kill", "redis-outage", "redis-failover"):
        outcome.require_redis()
    if args.scenario in ("redis-outage", "redis-failover"):
        outcome.require_tool("ss", "iproute2")


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

    def start_relay(self, extra, name="relay"):
        argv = [self.args.relay_bin, "--listen", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT), "--workers", "1",
                "--pin-cpus", "false", "--cluster-id", str(bx.CLUSTER), "--hint-key-file", self.keys,
                "--admin-listen", "127.0.0.1:%d" % bx.RELAY_ADMIN_PORT] + extra
        self.relay = harness.Service(name, self.topo.relay, argv, self.workdir, log=log)
        self.logs[name] = self.relay.log_path
        self.relay.wait_http("127.0.0.1", bx.RELAY_ADMIN_PORT, "/metrics")

    def relay_metrics(self):
        status, body = nt.http_get_in(self.topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("relay GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    def start_transceiver(self, name, http_port, media_port, extra, drain_timeout="1s"):
        argv = [self.args.transceiver_bin, "--http-listen", "%s:%d" % (nt.XCVR_V4, http_port),
                "--http-allow-public-without-keys", "true", "--workers", "1",
                "--media-listen", nt.XCVR_V4, "--media-base-port", str(media_port),
                "--relay-vips", "%s:%d" % (nt.VIP_V4, bx.VIP_PORT), "--relay-sources", "198.18.1.0/24",
                "--direct-enabled", "false", "--hint-key-file", self.keys, "--hint-cluster-id", str(bx.CLUSTER),
                "--backend-echo-mode", "loopback", "--sessions-drain-timeout", drain_timeout] + extra
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
    def __init__(self, ns, workdir, name="redis"):
        self.ns = ns
        self.log_path = os.path.join(workdir, "%s.log" % name)
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
    clients = establish_sessions(env, args, args.seconds, ["--consent-interval-s", "%g" % interval,
                                                          "--consent-failures", str(failures)])
    if not check("every session connected and echoing on both transceivers", clients is not None):
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

    results_by = {c["tag"]: env.finish_client(c, args.seconds + 60) for c in clients}
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


# ---------------------------------------------------------------------------- Redis outage

def client_ports(ns, pid):
    """The local UDP ports of process `pid` inside `ns` (its ICE host candidates)."""
    r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-H", "-u", "-a", "-n", "-p"], capture_output=True,
                       text=True, timeout=10)
    ports = set()
    for line in r.stdout.splitlines():
        if "pid=%d," % pid in line:
            local = line.split()[3]
            ports.add(int(local.rsplit(":", 1)[1]))
    return ports


def pctl(values, p):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    return values[min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))]


def relay_warnings(path):
    """{message: count} of the relay's warning and error lines (timestamps dropped)."""
    out = {}
    for line in open(path, errors="replace").read().splitlines():
        parts = line.split(" ", 3)  # <time> <level> [<thread>] <message>
        if len(parts) == 4 and parts[1] in ("warning", "error", "critical"):
            msg = "%s %s" % (parts[1], re.sub(r"\d+", "N", parts[3])[:200])
            out[msg] = out.get(msg, 0) + 1
    return out


def sleep_until(t, watch):
    """Sleeps until monotonic t, checking every 0.5 s that the processes in `watch` live."""
    while True:
        for svc in watch():
            svc.check_alive()
        left = t - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.5, left))


def run_redis_outage(args, env, results, check):
    out_s = args.outage
    ttl_s = args.ttl
    cluster = bx.CLUSTER
    redis = Redis(env.topo.xcvr, env.workdir)
    env.logs["redis"] = redis.log_path
    cache = os.path.join(env.workdir, "registry-cache.txt")
    refresh_s = args.flow_store_ttl / 3.0
    relay_extra = ["--registry-redis-url", redis.url, "--registry-ttl", "%gs" % ttl_s,
                   "--registry-cache-file", cache, "--flow-store-redis-url", redis.url,
                   "--flow-store-ttl", "%gs" % args.flow_store_ttl]
    results["config"] = {"outage_s": out_s, "registry_ttl_s": ttl_s, "flow_store_ttl_s": args.flow_store_ttl,
                         "flow_store_refresh_s": round(refresh_s, 2), "consent_timeout_s": args.consent_timeout,
                         "drain_timeout_s": args.drain_timeout, "sessions_per_transceiver": args.sessions_per,
                         "relay_mode": "userspace", "client_consent": "aiortc default (5 s +-20 %, 6 failures)"}
    env.start_relay(relay_extra)
    common = ["--registry-redis-url", redis.url, "--registry-ttl", "%gs" % ttl_s,
              "--sessions-consent-timeout", "%gs" % args.consent_timeout]
    drain = "%gs" % args.drain_timeout
    env.start_transceiver("a", HTTP_A, MEDIA_A, common + ["--registry-pod-identity", "outage-a"], drain_timeout=drain)
    env.start_transceiver("b", HTTP_B, MEDIA_B, common + ["--registry-pod-identity", "outage-b"], drain_timeout=drain)
    rc = chaos_outage.RespClient(env.topo.xcvr, nt.XCVR_V4, REDIS_PORT)

    def registered():
        reg = rc.registry(cluster)
        return reg if len(reg) == 2 and env.relay_metrics().get("rtcedge_relay_endpoints") == 2 \
            and chaos_outage.read_registry_cache(cache) == reg else None

    reg = core.poll_until(registered, 15.0, interval=0.1)
    if not check("both transceivers registered through Redis; the relay routes to them and cached them", reg,
                 {"redis": rc.registry(cluster), "cache": chaos_outage.read_registry_cache(cache)}):
        return
    ids = {name: [i for i, a in reg.items() if a.endswith(":%d" % port)] for name, port in (("a", MEDIA_A),
                                                                                        ("b", MEDIA_B))}
    results["endpoint_ids"] = ids

    # Established sessions: long enough for the outage, the relay restart and the convergence.
    session_s = out_s + args.converge_s + 20
    clients = establish_sessions(env, args, session_s)
    if not check("every established session connected and echoing on both transceivers", clients is not None):
        return
    # Each client's flow key in the store (written when the relay created the flow).
    vip = "%s:%d" % (nt.VIP_V4, bx.VIP_PORT)
    for c in clients:
        c["ports"] = client_ports(env.topo.client, c["proc"].pid)

    def flow_key_of(c):
        for p in c["ports"]:
            for k in rc.cmd("KEYS", "rtce:c%d:flow:*:%d|%s" % (cluster, p, vip)) or []:
                return k
        return None

    keys = {c["tag"]: core.poll_until(lambda: flow_key_of(c), 5.0, 0.1) for c in clients}
    check("every established session's flow is in the flow store before the outage", all(keys.values()), keys)

    # The prober: a new session a second from the kill until --after-s past Redis's return.
    count = min(args.max_new_sessions, int((out_s + args.after_s) / args.new_session_interval))
    prober, jsonl, pgo, urls = start_prober(env, args, count)

    poller = chaos_outage.HealthPoller({
        "relay": (env.topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT),
        "transceiver-a": (env.topo.xcvr, nt.XCVR_V4, HTTP_A),
        "transceiver-b": (env.topo.xcvr, nt.XCVR_V4, HTTP_B)}, interval=0.5).start()
    relay_m0 = env.relay_metrics()
    a_m0 = env.xcvr_metrics("a")

    # ---- the outage
    rc.close()
    killed_at = time.monotonic()
    redis.proc.send_signal(signal.SIGKILL)
    redis.proc.wait(timeout=5)
    nt.forget_process(redis.proc)
    open(pgo, "w").close()
    log("SIGKILLed redis-server; outage of %g s" % out_s)
    ev = {"killed_at": killed_at}
    live = {"a": env.xcvrs["a"], "b": env.xcvrs["b"]}

    def watch():
        return list(live.values()) + [env.relay]

    # Drain transceiver b.
    sleep_until(killed_at + args.drain_at * out_s, watch)
    b_before = env.xcvr_metrics("b")
    results["drain"] = {"sessions_active_at_signal": int(b_before.get("rtcedge_transceiver_sessions_active_total"))}
    ev["drain_at"] = time.monotonic()
    env.xcvrs["b"].proc.send_signal(signal.SIGTERM)
    del live["b"]
    log("SIGTERM to transceiver b (drain, %s)" % drain)
    try:
        brc = env.xcvrs["b"].proc.wait(timeout=args.drain_timeout + 15)
    except subprocess.TimeoutExpired:
        brc = None
    ev["b_exited_at"] = time.monotonic()
    nt.forget_process(env.xcvrs["b"].proc)
    poller.stop_target("transceiver-b")
    with open(urls, "w") as f:
        f.write("%s\n" % env.url("a"))
    results["drain"].update({"exit_code": brc, "exit_after_s": round(ev["b_exited_at"] - ev["drain_at"], 2)})
    blog = open(env.xcvrs["b"].log_path, errors="replace").read()
    results["drain"]["log"] = [l.split(" ", 3)[-1] for l in blog.splitlines()
                               if "drain" in l or "ended" in l or "stopped" in l or "registry" in l][-12:]
    check("drain: transceiver b exited 0 within sessions.drain_timeout (%s) + %g s" % (drain, args.slack),
          brc == 0 and ev["b_exited_at"] - ev["drain_at"] <= args.drain_timeout + args.slack, results["drain"])

    # Restart the relay (clean stop, same configuration, cache file kept).
    sleep_until(killed_at + args.restart_at * out_s, watch)
    before_restart = env.relay_metrics()
    ev["relay_stop_at"] = time.monotonic()
    rrc = env.relay.stop()
    ev["relay_exited_at"] = time.monotonic()
    env.start_relay(relay_extra, name="relay-restarted")
    ev["relay_started_at"] = time.monotonic()

    def ready():
        try:
            return nt.http_get_in(env.topo.relay, "127.0.0.1", bx.RELAY_ADMIN_PORT, "/readyz", timeout=0.5)[0] == 200
        except OSError:
            return False

    is_ready = core.poll_until(ready, 10.0, 0.02)
    ev["relay_ready_at"] = time.monotonic()
    rlog = open(env.relay.log_path, errors="replace").read()
    m = env.relay_metrics()
    restart = {"exit_code": rrc, "stop_s": round(ev["relay_exited_at"] - ev["relay_stop_at"], 3),
               "start_to_ready_s": round(ev["relay_ready_at"] - ev["relay_exited_at"], 3),
               "endpoints_after": m.get("rtcedge_relay_endpoints"),
               "flow_store_up_after": m.get("rtcedge_relay_flow_store_up"),
               "flows_before": before_restart.get("rtcedge_relay_flows_active"),
               "cache_log": [l.split(" ", 3)[-1] for l in rlog.splitlines() if "cache" in l]}
    results["relay_restart"] = restart
    check("relay restart: exit 0, ready (/readyz 200) with Redis down, routing from its cache (%d endpoints)"
          % len(reg), rrc == 0 and is_ready and m.get("rtcedge_relay_endpoints") == len(reg)
          and any("from the cache" in l for l in restart["cache_log"]), restart)

    # ---- Redis returns, empty
    sleep_until(killed_at + out_s, watch)
    ev["redis_restart_at"] = time.monotonic()
    redis = Redis(env.topo.xcvr, env.workdir, name="redis-2")
    env.logs["redis-2"] = redis.log_path
    back = time.monotonic()
    ev["redis_back_at"] = back
    log("redis-server back (empty) %.2f s after the kill" % (back - killed_at))
    rc = chaos_outage.RespClient(env.topo.xcvr, nt.XCVR_V4, REDIS_PORT)
    live_ids = {i: a for i, a in reg.items() if i in ids["a"]}
    conv = {}
    samples = []
    flips = []
    # Redis's own count minus this harness's commands (its registry and EXISTS polls, INFO).
    own0 = rc.own()
    prev = {"t": back, "cmds": int(rc.info("stats").get("total_commands_processed", 0)) - own0}
    min_endpoints = None
    next_sample = back + 1.0
    last_ok = None
    while time.monotonic() < back + args.converge_s:
        for svc in watch():
            svc.check_alive()
        now = time.monotonic()
        redis_reg = rc.registry(cluster)
        cached = chaos_outage.read_registry_cache(cache)
        m = env.relay_metrics()
        eps = m.get("rtcedge_relay_endpoints")
        if min_endpoints is None or eps < min_endpoints:
            min_endpoints = eps
            conv["relay_endpoints_min"] = {"value": eps, "t_s": round(now - back, 3)}
        ok = redis_reg == live_ids and cached == redis_reg and m.get("rtcedge_relay_endpoints") == len(live_ids)
        if ok and "registered_s" not in conv:
            conv["registered_s"] = round(now - back, 3)
        if redis_reg == live_ids and "transceivers_registered_s" not in conv:
            conv["transceivers_registered_s"] = round(now - back, 3)
        if ok != last_ok:
            flips.append({"t_s": round(now - back, 3), "match": ok, "redis": redis_reg, "relay_cache": cached,
                          "relay_endpoints": m.get("rtcedge_relay_endpoints")})
            last_ok = ok
        if m.get("rtcedge_relay_flow_store_up") == 1 and "flow_store_up_s" not in conv:
            conv["flow_store_up_s"] = round(now - back, 3)
        if "flows_rewritten_s" not in conv:
            present = [t for t, k in keys.items() if t.startswith("a") and k and rc.cmd("EXISTS", k) == 1]
            if len(present) == args.sessions_per:
                conv["flows_rewritten_s"] = round(now - back, 3)
        if now >= next_sample and len(samples) < args.load_samples:
            own = rc.own()
            stats = rc.info("stats")
            clients_info = rc.info("clients")
            cmds = int(stats.get("total_commands_processed", 0)) - own
            samples.append({"t_s": round(now - back, 2), "commands": cmds - prev["cmds"],
                            "per_s": round((cmds - prev["cmds"]) / (now - prev["t"]), 1),
                            "instantaneous_ops_per_sec_incl_harness": int(stats.get("instantaneous_ops_per_sec", 0)),
                            "connected_clients": int(clients_info.get("connected_clients", 0))})
            prev = {"t": now, "cmds": cmds}
            next_sample += 1.0
            if len(samples) == args.load_samples:
                conv["commandstats_first_%ds" % args.load_samples] = rc.commandstats()
        time.sleep(0.1)
    conv["commandstats_whole_window"] = rc.commandstats()
    conv["harness_own_commands"] = dict(rc.sent)
    rlines = open(env.relay.log_path, errors="replace").read().splitlines()
    conv["relay_log"] = [l for l in rlines if "registry" in l or "flow store" in l][:30]
    conv["flow_keys_at_end"] = rc.scan_count("rtce:c%d:flow:*" % cluster)
    conv["registry_match_changes"] = flips
    conv["redis_load_per_s"] = samples
    results["convergence"] = conv
    m_end = env.relay_metrics()
    check("convergence: every live transceiver registered again and the relay's view (cache file, "
          "rtcedge_relay_endpoints) matches within registry.ttl + 3 s (%.0f s)" % (ttl_s + 3),
          conv.get("registered_s") is not None and conv["registered_s"] <= ttl_s + 3 + args.slack, conv.get("registered_s"))
    check("convergence: the relay kept routing to the live transceivers while they registered again "
          "(rtcedge_relay_endpoints never below %d)" % len(live_ids),
          min_endpoints is not None and min_endpoints >= len(live_ids), conv.get("relay_endpoints_min"))
    check("convergence: the relay's registry view never differed from Redis once it matched",
          sum(1 for f in flips if f["match"]) <= 1 and (not flips or flips[-1]["match"]), flips)
    check("convergence: rtcedge_relay_flow_store_up 1 within 2 s backoff + %g s" % args.slack,
          conv.get("flow_store_up_s") is not None and conv["flow_store_up_s"] <= 2 + args.slack, conv.get("flow_store_up_s"))
    check("convergence: the live established flows are in the store again within flow_store.refresh_interval "
          "(%.1f s) + %g s" % (refresh_s, args.slack),
          conv.get("flows_rewritten_s") is not None and conv["flows_rewritten_s"] <= refresh_s + args.slack,
          conv.get("flows_rewritten_s"))
    peak = max((s["per_s"] for s in samples), default=None)
    results["redis_peak_commands_per_s"] = peak
    check("no thundering herd: at most %d commands/s in the first %d s" % (args.max_redis_cmds_per_s, len(samples)),
          peak is not None and peak <= args.max_redis_cmds_per_s, samples)

    # ---- results
    try:
        prober.wait(timeout=60)
    except subprocess.TimeoutExpired:
        nt.stop_process(prober)
    nt.forget_process(prober)
    poller.stop()
    results["events_s"] = {k: round(v - killed_at, 3) for k, v in ev.items()}
    results_by = {c["tag"]: env.finish_client(c, session_s + 60) for c in clients}
    gap_lo, gap_hi = ev["relay_stop_at"] - 0.5, ev["relay_ready_at"] + 15.0
    sessions = []
    for tag, r in sorted(results_by.items()):
        frames = r.get("frames") or []
        row = {"session": tag, "transceiver": tag[0], "connected": r.get("connected"), "error": r.get("error"),
               "state_before_delete": (r.get("session") or {}).get("state"), "client_end": r.get("client_end_cause"),
               "client_end_after_kill_s": round(r["client_ended_at"] - killed_at, 2) if r.get("client_ended_at") else None}
        if tag[0] == "a":
            g_at, g_ms = chaos_outage.longest_gap(frames, gap_lo, gap_hi)
            row["restart_gap_ms"] = g_ms
            row["restart_gap_after_ready_ms"] = round((g_at + g_ms / 1000.0 - ev["relay_ready_at"]) * 1000)
            pre = chaos_outage.frame_figures(frames, killed_at, g_at)
            post = chaos_outage.frame_figures(frames, g_at + g_ms / 1000.0, back)
            whole = chaos_outage.frame_figures(frames, killed_at, back)
            row["outage"] = whole
            row["outage_without_restart"] = {"lost": pre["lost"] + post["lost"],
                                             "expected": pre["expected"] + post["expected"],
                                             "max_gap_ms": max(pre["max_gap_ms"], post["max_gap_ms"])}
            row["after_redis_back"] = chaos_outage.frame_figures(frames, back, back + args.converge_s)
            row["tone_fraction"] = r.get("window_tone_fraction")
            wo = row["outage_without_restart"]
            check("established %s keeps its audio over the outage, relay restart aside (lost %d of %d, max gap %d ms)"
                  % (tag, wo["lost"], wo["expected"], wo["max_gap_ms"]),
                  r.get("connected") and not r.get("error") and "client_ended_at" not in r
                  and row["state_before_delete"] == "connected"
                  and wo["lost"] <= args.max_survivor_loss + 0.01 * wo["expected"]
                  and wo["max_gap_ms"] <= args.max_survivor_gap_ms, row)
            check("established %s: the relay restart cost one consent check at most (gap %d ms <= %d)"
                  % (tag, g_ms, args.max_restart_gap_ms), g_ms <= args.max_restart_gap_ms, g_ms)
            ab = row["after_redis_back"]
            check("established %s keeps its audio once Redis is back (lost %d of %d, max gap %d ms)"
                  % (tag, ab["lost"], ab["expected"], ab["max_gap_ms"]),
                  ab["lost"] <= args.max_survivor_loss and ab["max_gap_ms"] <= args.max_survivor_gap_ms, ab)
        else:
            row["before_drain"] = chaos_outage.frame_figures(frames, killed_at, ev["drain_at"])
            row["client_end_after_drain_s"] = (round(r["client_ended_at"] - ev["drain_at"], 2)
                                               if r.get("client_ended_at") else None)
            last = frames[-1][0] if frames else None
            row["last_echo_after_drain_s"] = round(last - ev["drain_at"], 2) if last else None
            bd = row["before_drain"]
            check("drained %s: audio until the drain (lost %d of %d, max gap %d ms), then ended by the drain "
                  "(last echo %s s after SIGTERM)" % (tag, bd["lost"], bd["expected"], bd["max_gap_ms"],
                                                     row["last_echo_after_drain_s"]),
                  bd["lost"] <= args.max_survivor_loss + 0.01 * bd["expected"]
                  and bd["max_gap_ms"] <= args.max_survivor_gap_ms and last is not None
                  and last - ev["drain_at"] <= args.drain_timeout + args.slack, row)
        sessions.append(row)
    results["sessions"] = sessions

    # New sessions, one a second.
    probes = read_probes(jsonl)

    def phase(p):
        t = p["start"]
        if t >= back:
            return "after_redis_back"
        if ev["relay_stop_at"] - 3 <= t <= ev["relay_ready_at"] + 1:
            return "around_relay_restart"
        return "outage"

    byphase = {}
    bad = []
    for p in probes:
        p["phase"] = phase(p)
        ok = p.get("connect_ms") is not None and not p.get("error") and p.get("tone_fraction", 0) >= args.min_tone_fraction
        p["ok"] = ok
        byphase.setdefault(p["phase"], []).append(p)
        if not ok:
            bad.append({k: p.get(k) for k in ("n", "phase", "tried", "error", "connect_ms", "echo_frames",
                                              "tone_fraction")} | {"start_s": round(p["start"] - killed_at, 2)})
    ns = {}
    for ph, ps in byphase.items():
        cms = [p.get("connect_ms") for p in ps if p.get("connect_ms") is not None]
        ns[ph] = {"sessions": len(ps), "ok": sum(p["ok"] for p in ps), "connect_ms_p50": pctl(cms, 50),
                  "connect_ms_p99": pctl(cms, 99), "connect_ms_max": max(cms) if cms else None,
                  "tone_fraction_min": min((p.get("tone_fraction", 0) for p in ps), default=None),
                  "retried_to_next_url": sum(1 for p in ps if len(p.get("tried") or []) > 1)}
    results["new_sessions"] = {"planned": count, "started": len(probes), "by_phase": ns, "failed": bad[:30]}
    check("new sessions: %d of %d planned started, each connected and echoed the tone (>= %.0f %% of frames)"
          % (len(probes), count, args.min_tone_fraction * 100), len(probes) == count and not bad, ns)

    # Health.
    def excused(name, path, t):
        if name == "relay":
            return ev["relay_stop_at"] - 0.1 <= t <= ev["relay_ready_at"] + 0.1
        if name == "transceiver-b":
            return t >= ev["drain_at"] and (path == "/readyz" or t >= ev["b_exited_at"] - 1.0)
        return False

    polls, unexpected, expected = poller.summary(excused)
    results["health"] = {"polls": polls, "unexpected": [dict(u, t=round(u["t"] - killed_at, 2)) for u in unexpected][:40],
                         "expected": len(expected),
                         "expected_examples": [dict(u, t=round(u["t"] - killed_at, 2)) for u in expected][:6]}
    check("/healthz and /readyz of the relay and the transceivers answered 200 at every poll (relay restart and "
          "b's drain aside)", not unexpected and polls, results["health"]["unexpected"])

    # What the relay counted over the run (the restarted relay's counters start at 0).
    drops = {k: int(v) for k, v in m_end.by_label("rtcedge_relay_dropped_packets_total", "reason").items() if v}
    results["relay_after_restart"] = {
        "dropped_packets": drops,
        "flows_created": m_end.get("rtcedge_relay_flows_created_total"),
        "flows_endpoint_gone": m_end.get("rtcedge_relay_flows_endpoint_gone_total"),
        "flow_store_puts": m_end.get("rtcedge_relay_flow_store_puts_total"),
        "flow_store_lookups": {k: int(v) for k, v in m_end.by_label("rtcedge_relay_flow_store_lookups_total", "result").items()},
        "flow_store_events": {k: int(v) for k, v in m_end.by_label("rtcedge_relay_flow_store_events_total", "event").items()},
        "flows_recovered": m_end.get("rtcedge_relay_flows_recovered_total"),
        "endpoints": m_end.get("rtcedge_relay_endpoints")}
    results["relay_before_restart"] = {
        "dropped_packets_during_outage": {k: int(v - relay_m0.get("rtcedge_relay_dropped_packets_total", reason=k))
                                          for k, v in before_restart.by_label("rtcedge_relay_dropped_packets_total",
                                                                              "reason").items()
                                          if v - relay_m0.get("rtcedge_relay_dropped_packets_total", reason=k)},
        "flow_store_events_during_outage": {
            k: int(v - relay_m0.get("rtcedge_relay_flow_store_events_total", event=k))
            for k, v in before_restart.by_label("rtcedge_relay_flow_store_events_total", "event").items()}}
    results["relay_warnings"] = {"before_restart": relay_warnings(env.logs["relay"]),
                                 "after_restart": relay_warnings(env.logs["relay-restarted"])}
    results["transceiver_warnings"] = {n: relay_warnings(svc.log_path) for n, svc in env.xcvrs.items()}
    a_end = env.xcvr_metrics("a")
    ends = {r: n - int(a_m0.get("rtcedge_transceiver_sessions_ended_total", reason=r))
            for r, n in ended_reasons(a_end).items()}
    results["transceiver_a_sessions_ended"] = {r: n for r, n in ends.items() if n}
    results["transceiver_a_drops"] = {
        r: int(v - a_m0.get("rtcedge_transceiver_datagrams_dropped_total", reason=r))
        for r, v in a_end.by_label("rtcedge_transceiver_datagrams_dropped_total", "reason").items()
        if v - a_m0.get("rtcedge_transceiver_datagrams_dropped_total", reason=r)}
    bad_ends = {r: n for r, n in results["transceiver_a_sessions_ended"].items() if r != "deleted"}
    check("transceiver a ended sessions only by DELETE", not bad_ends, results["transceiver_a_sessions_ended"])
    rc.close()
    if args.table:
        print_outage_table(args, results)


def print_outage_table(args, res):
    cfg = res["config"]
    print("\nRedis down for %g s (SIGKILL, restarted empty), userspace relay with registry + flow store + "
          "registry.cache_file; registry.ttl %gs, flow_store.ttl %gs; %d established sessions per transceiver; "
          "a new session every %g s" % (cfg["outage_s"], cfg["registry_ttl_s"], cfg["flow_store_ttl_s"],
                                        cfg["sessions_per_transceiver"], args.new_session_interval))
    print("machine: %s\n" % machine())
    chaos_outage.print_outage_tables(res)


# ---------------------------------------------------------------------------- Redis failover

class RedisDeployment:
    """A Redis Sentinel group (1 replica, 3 sentinels) or a Redis Cluster (3 masters, a replica
    each) from rtcetest.redis, run inside the relay's namespace (its nodes bind and announce
    127.0.0.1), every port forwarded from the transceivers' namespace (chaos_outage.TcpForward),
    so the relay and both transceivers reach the same addresses."""

    def __init__(self, topology, relay_ns, xcvr_ns):
        from rtcetest import redis as rr  # imported where used, as test_relay_netns.py does
        self.rr, self.topology = rr, topology
        self.relay_ns, self.xcvr_ns = relay_ns, xcvr_ns
        prefix = ["ip", "netns", "exec", relay_ns]
        if topology == "sentinel":
            self.g = rr.RedisSentinelGroup(replicas=1, sentinels=3, master_name="rtce", prefix=prefix)
        else:
            self.g = rr.RedisClusterNodes(masters=3, replicas_per_master=1, prefix=prefix)
        self.forwards = []
        nt.register_cleanup(self.stop)

    def start(self):
        self.g.start(timeout=30)
        ports = ([n.port for n in self.g.data_nodes] + [s.port for s in self.g.sentinels]
                 if self.topology == "sentinel" else [n.port for n in self.g.nodes])
        self.forwards = [chaos_outage.TcpForward(self.xcvr_ns, self.relay_ns, p) for p in ports]
        return self

    def url(self):
        return self.g.url()

    def stop(self):
        for f in self.forwards:
            f.close()
        self.forwards = []
        self.g.stop()

    def nodes(self):
        return self.g.data_nodes if self.topology == "sentinel" else self.g.nodes

    def masters(self):
        """Ports of the live masters: the one the sentinels name, or the Cluster's."""
        if self.topology == "sentinel":
            p = self.g.master_port()
            return [p] if p else []
        return [port for _, port, live, ranges in self.g._parse_nodes(self.g._nodes_text()) if live and ranges
                and self.node(port) is not None and self.node(port).running]

    def node(self, port):
        return next((n for n in self.nodes() if n.port == port), None)

    def keys(self, pattern):
        """Every key matching `pattern` on the live masters (KEYS on each; small test data)."""
        out = set()
        for port in self.masters():
            n = self.node(port)
            text = n.cli("KEYS", pattern) if n is not None else None
            if text and not text.startswith(("ERR", "MOVED", "CLUSTERDOWN", "LOADING")):
                out.update(text.split("\n"))
        return out

    def readable(self, key):
        """GET through the master serving the key (the Cluster: the master of its slot)."""
        port = self.g.master_port() if self.topology == "sentinel" else self.g.master_of_slot(key_slot(key))
        n = self.node(port)
        v = n.cli("GET", key) if n is not None and n.running else None
        return bool(v) and not v.startswith(("MOVED", "ASK", "ERR", "CLUSTERDOWN", "LOADING", "READONLY"))


def key_slot(key):
    """Redis Cluster's slot of a key without a hash tag: CRC16/XMODEM mod 16384."""
    return binascii.crc_hqx(key.encode(), 0) % 16384


def run_redis_failover(args, env, results, check):
    topo = args.topology
    ttl_s = args.ttl
    cluster = bx.CLUSTER
    dep = RedisDeployment(topo, env.topo.relay, env.topo.xcvr)
    t0 = time.monotonic()
    dep.start()
    results["redis"] = {"topology": topo, "url": dep.url(), "start_s": round(time.monotonic() - t0, 2),
                        "nodes": [n.port for n in dep.nodes()], "masters": dep.masters(),
                        "where": "relay namespace (127.0.0.1), forwarded from the transceivers' namespace"}
    url = dep.url()
    cache = os.path.join(env.workdir, "registry-cache.txt")
    relay_extra = ["--registry-redis-url", url, "--registry-ttl", "%gs" % ttl_s, "--registry-cache-file", cache,
                   "--flow-store-redis-url", url, "--flow-store-ttl", "%gs" % args.flow_store_ttl,
                   "--flow-store-refresh-interval", "%gs" % args.flow_store_refresh]
    results["config"] = {"topology": topo, "registry_ttl_s": ttl_s, "flow_store_ttl_s": args.flow_store_ttl,
                         "flow_store_refresh_s": args.flow_store_refresh, "consent_timeout_s": args.consent_timeout,
                         "sessions_per_transceiver": args.sessions_per, "relay_mode": "userspace",
                         "client_consent": "aiortc default (5 s +-20 %, 6 failures)"}
    env.start_relay(relay_extra)
    common = ["--registry-redis-url", url, "--registry-ttl", "%gs" % ttl_s,
              "--sessions-consent-timeout", "%gs" % args.consent_timeout]
    env.start_transceiver("a", HTTP_A, MEDIA_A, common + ["--registry-pod-identity", "failover-a"])
    env.start_transceiver("b", HTTP_B, MEDIA_B, common + ["--registry-pod-identity", "failover-b"])

    def registered():
        c = chaos_outage.read_registry_cache(cache)
        return c if c and len(c) == 2 and env.relay_metrics().get("rtcedge_relay_endpoints") == 2 else None

    reg = core.poll_until(registered, 20.0, interval=0.1)
    if not check("both transceivers registered through Redis (%s); the relay routes to them and cached them" % topo,
                 reg, {"cache": chaos_outage.read_registry_cache(cache),
                       "endpoints": env.relay_metrics().get("rtcedge_relay_endpoints")}):
        return

    # Timeline from the kill: events, then the sessions run on a few seconds.
    plan = [("kill_master", 0.0), ("relay_restart_1", args.restart_after)]
    if topo == "cluster":
        plan += [("migrate", args.restart_after + 8.0), ("relay_restart_2", args.restart_after + 14.0)]
    run_s = plan[-1][1] + 10.0
    session_s = run_s + 14.0  # room for an overrunning migration (the sessions must outlive the last restart)
    clients = establish_sessions(env, args, session_s)
    if not check("every established session connected and echoing on both transceivers", clients is not None):
        return
    vip = "%s:%d" % (nt.VIP_V4, bx.VIP_PORT)
    pattern = "rtce:c%d:flow:*" % cluster
    for c in clients:
        c["ports"] = client_ports(env.topo.client, c["proc"].pid)

    def flow_key_of(c):
        for k in dep.keys(pattern):
            if any(k.endswith(":%d|%s" % (p, vip)) for p in c["ports"]):
                return k
        return None

    keys = {c["tag"]: core.poll_until(lambda: flow_key_of(c), 5.0, 0.1) for c in clients}
    if not check("every established session's flow is in the flow store", all(keys.values()), keys):
        return
    results["established_flow_keys"] = {t: {"key": k, "slot": key_slot(k)} for t, k in keys.items()}

    # The prober: a new session a second from the kill to the end.
    count = min(args.max_new_sessions, int(run_s / args.new_session_interval))
    prober, jsonl, pgo, urls = start_prober(env, args, count)

    # The victim: the master; in the Cluster the master owning most established flow keys.
    keys_before = dep.keys(pattern)
    if topo == "sentinel":
        victim = dep.g.master_port()
        owners = {}
    else:
        owners = {}
        for t, k in keys.items():
            owners.setdefault(dep.g.master_of_slot(key_slot(k)), []).append(t)
        victim = max(owners, key=lambda p: len(owners[p]))
    results["victim"] = {"port": victim, "flow_keys_by_master": {str(p): ts for p, ts in owners.items()}}
    # The Cluster: the killed master's slots (a new flow in one of them waits for the failover;
    # elsewhere it is written at once).
    victim_ranges = [r for _, port, _, ranges in dep.g._parse_nodes(dep.g._nodes_text()) if port == victim
                     for r in ranges] if topo == "cluster" else []
    endpoint_min = {"value": None}
    ev = {}

    def watch_relay():
        for svc in list(env.xcvrs.values()) + [env.relay]:
            svc.check_alive()
        try:
            eps = env.relay_metrics().get("rtcedge_relay_endpoints")
        except (OSError, RuntimeError):
            return
        if endpoint_min["value"] is None or eps < endpoint_min["value"]:
            endpoint_min.update(value=eps, t_s=round(time.monotonic() - ev["kill_master"], 2))

    open(pgo, "w").close()
    time.sleep(1.0)  # a new session or two before the kill
    ev["kill_master"] = time.monotonic()
    if topo == "sentinel":
        killed = dep.g.kill_master()
    else:
        killed = victim
        dep.g.kill(dep.g.index_of_port(victim))
    log("SIGKILLed the Redis %s master on port %d" % (topo, killed))

    # Failover, and a flow written after the kill readable from the store.
    fo = {}
    last_victim_poll = [0.0]

    def victim_slot_flow():
        """Cluster: kill -> a flow written after the kill in one of the killed master's slots
        readable (recorded, not checked: the prober's flows land there one time in three)."""
        if not victim_ranges or "new_flow_in_killed_slots_readable_s" in fo \
                or time.monotonic() - last_victim_poll[0] < 0.5:
            return
        last_victim_poll[0] = time.monotonic()
        for k in sorted(dep.keys(pattern) - keys_before):
            sl = key_slot(k)
            if any(a <= sl <= b for a, b in victim_ranges) and dep.readable(k):
                fo.update(new_flow_in_killed_slots_readable_s=round(time.monotonic() - ev["kill_master"], 3),
                          new_flow_in_killed_slots_key=k)
                return

    def failover_done():
        watch_relay()
        now = time.monotonic()
        if "promoted_s" not in fo:
            if topo == "sentinel":
                p = dep.g.master_port()
                if p and p != killed and dep.node(p).role() == "master":
                    fo.update(promoted_s=round(now - ev["kill_master"], 3), new_master=p)
            else:
                owner = dep.g.master_of_slot(key_slot(keys[owners[victim][0]]))
                if owner and owner != killed:
                    fo.update(promoted_s=round(now - ev["kill_master"], 3), new_master=owner)
        victim_slot_flow()
        if "new_flow_readable_s" not in fo:
            fresh = sorted(dep.keys(pattern) - keys_before)
            for k in fresh:
                if dep.readable(k):
                    fo.update(new_flow_readable_s=round(time.monotonic() - ev["kill_master"], 3), new_flow_key=k)
                    break
        return "promoted_s" in fo and "new_flow_readable_s" in fo

    core.poll_until(failover_done, args.failover_bound + 5, 0.1)
    results["failover"] = fo
    check("%s failover: a replica took over" % topo, "promoted_s" in fo, fo)
    check("a flow written after the kill is readable from the store within %g s" % args.failover_bound,
          fo.get("new_flow_readable_s") is not None and fo["new_flow_readable_s"] <= args.failover_bound, fo)

    restarts = []

    def restart_relay(label):
        """SIGKILL + start, the cache file kept; then until flows_recovered_total covers the
        established sessions (the echo's gap comes from the clients' frames afterwards)."""
        before = env.relay_metrics()
        r = {"label": label, "flows_active_before": before.get("rtcedge_relay_flows_active"),
             "killed_relay": {  # what the relay that ran through the events counted
                 "flow_store_events": {k: int(v) for k, v in before.by_label("rtcedge_relay_flow_store_events_total",
                                                                             "event").items() if v},
                 "flow_store_puts": before.get("rtcedge_relay_flow_store_puts_total"),
                 "flow_store_up": before.get("rtcedge_relay_flow_store_up"),
                 "dropped_packets": {k: int(v) for k, v in before.by_label("rtcedge_relay_dropped_packets_total",
                                                                           "reason").items() if v}}}
        ev[label] = time.monotonic()
        env.relay.proc.send_signal(signal.SIGKILL)
        env.relay.proc.wait(timeout=5)
        nt.forget_process(env.relay.proc)
        killed_at = time.monotonic()
        env.start_relay(relay_extra, name="relay-" + label)
        r["started_s"] = round(time.monotonic() - killed_at, 3)
        rec = {}

        def recovered():
            m = env.relay_metrics()
            n = m.get("rtcedge_relay_flows_recovered_total")
            rec["n"], rec["m"] = n, m
            return n >= len(clients)

        ok = core.poll_until(recovered, 10.0, 0.02)
        r["flows_recovered_total_reached_s"] = round(time.monotonic() - killed_at, 3) if ok else None
        time.sleep(1.0)
        m = env.relay_metrics()
        r.update({"killed_at": killed_at, "flows_recovered_total": m.get("rtcedge_relay_flows_recovered_total"),
                  "flow_store_lookups": {k: int(v) for k, v in m.by_label(
                      "rtcedge_relay_flow_store_lookups_total", "result").items() if v},
                  "flow_store_up": m.get("rtcedge_relay_flow_store_up"),
                  "endpoints": m.get("rtcedge_relay_endpoints"),
                  "flows_active": m.get("rtcedge_relay_flows_active")})
        restarts.append(r)
        return r

    def until(t):
        while time.monotonic() < t:
            watch_relay()
            victim_slot_flow()
            time.sleep(0.25)

    shift = 0.0  # an event that overran (a slow migration) pushes the later ones
    for label, at in plan[1:]:
        until(ev["kill_master"] + at + shift)
        if label.startswith("relay_restart"):
            restart_relay(label)
        elif label == "migrate":
            # A slot range holding an established session's flow key, to another live master.
            tag = sorted(keys)[0]
            slot = key_slot(keys[tag])
            src = dep.g.master_of_slot(slot)
            dst = next(p for p in dep.masters() if p != src)
            first, last = max(0, slot - 1), min(16383, slot + 1)
            ev["migrate"] = time.monotonic()
            try:
                dep.g.migrate_slots(first, last, dep.g.index_of_port(dst), timeout=20)
                err = None
            except AssertionError as e:
                err = str(e)
            done = ev["migrate_done"] = time.monotonic()
            shift = max(0.0, done + 4.0 - (ev["kill_master"] + plan[-1][1]))
            results["migration"] = {"session": tag, "key": keys[tag], "slots": [first, last], "from": src, "to": dst,
                                    "took_s": round(done - ev["migrate"], 3), "error": err,
                                    "owner_after": dep.g.master_of_slot(slot),
                                    "key_readable_after": dep.readable(keys[tag])}
            check("migrated slots %d-%d (session %s's flow key) from %d to %d under live calls"
                  % (first, last, tag, src, dst), err is None and results["migration"]["owner_after"] == dst,
                  results["migration"])
    until(ev["kill_master"] + run_s + shift)
    ev["end"] = time.monotonic()
    if shift:
        log("the events overran by %.1f s" % shift)
    results["relay_endpoints_min"] = endpoint_min
    check("the relay kept routing to both transceivers through the events (rtcedge_relay_endpoints never below 2)",
          endpoint_min["value"] == 2, endpoint_min)

    # ---- results
    try:
        prober.wait(timeout=40)
    except subprocess.TimeoutExpired:
        nt.stop_process(prober)
    nt.forget_process(prober)
    results["events_s"] = {k: round(v - ev["kill_master"], 3) for k, v in ev.items()}
    results_by = {c["tag"]: env.finish_client(c, session_s + 60) for c in clients}
    # A relay restart's gap is measured on its own: the event windows and the whole run leave
    # out [SIGKILL - 0.3 s, SIGKILL + max(3 s, its longest echo gap + 1 s)].
    excl = [(r["killed_at"] - 0.3, r["killed_at"] + 3.0) for r in restarts]

    def figures_without(frames, lo, hi):
        segs = [(lo, hi)]
        for a, b in excl:
            segs = [piece for x, y in segs for piece in ((x, min(y, a)), (max(x, b), y)) if piece[1] > piece[0]]
        figs = [chaos_outage.frame_figures(frames, x, y) for x, y in segs]
        return {"lost": sum(f["lost"] for f in figs), "expected": sum(f["expected"] for f in figs),
                "max_gap_ms": max((f["max_gap_ms"] for f in figs), default=0)}

    sessions = []
    for tag, r in sorted(results_by.items()):
        frames = r.get("frames") or []
        row = {"session": tag, "transceiver": tag[0], "connected": r.get("connected"), "error": r.get("error"),
               "state_before_delete": (r.get("session") or {}).get("state"), "client_end": r.get("client_end_cause"),
               "tone_fraction": r.get("window_tone_fraction"), "events": {}}
        ok = r.get("connected") and not r.get("error") and "client_ended_at" not in r \
            and row["state_before_delete"] == "connected"
        for label, t in ev.items():
            if label.startswith("relay_restart") or label.endswith("_done") or label == "end":
                continue
            f = figures_without(frames, t - 1.0, (ev.get(label + "_done") or t) + 4.0)
            row["events"][label] = f
            ok = ok and f["lost"] <= args.max_survivor_loss + 0.01 * f["expected"] \
                and f["max_gap_ms"] <= args.max_survivor_gap_ms
        row["run_without_restarts"] = figures_without(frames, ev["kill_master"] - 1.0, ev["end"])
        rw = row["run_without_restarts"]
        ok = ok and rw["lost"] <= args.max_survivor_loss + 0.01 * rw["expected"] \
            and rw["max_gap_ms"] <= args.max_survivor_gap_ms
        row["restarts"] = {}
        for rs in restarts:
            g_at, g_ms = chaos_outage.longest_gap(frames, rs["killed_at"] - 0.3, rs["killed_at"] + 12.0)
            row["restarts"][rs["label"]] = {"gap_ms": g_ms,
                                            "echo_again_after_kill_s": round(g_at + g_ms / 1000.0 - rs["killed_at"], 3)}
        sessions.append(row)
        check("established %s keeps its audio across the Redis events (%s; whole run, relay restarts aside: lost "
              "%d of %d, max gap %d ms)" % (tag, ", ".join("%s lost %d / gap %d ms" % (k, v["lost"], v["max_gap_ms"])
                                                          for k, v in row["events"].items()),
                                            rw["lost"], rw["expected"], rw["max_gap_ms"]), ok, row)
    results["sessions"] = sessions
    for rs in restarts:
        label = rs["label"]
        figs = [s["restarts"][label]["echo_again_after_kill_s"] for s in sessions]
        rs["every_session_echoes_again_s"] = max(figs) if figs else None
        rs["gap_ms_max"] = max(s["restarts"][label]["gap_ms"] for s in sessions) if sessions else None
        rs["killed_at_s"] = round(rs.pop("killed_at") - ev["kill_master"], 3)
        check("%s: flow recovery works (rtcedge_relay_flows_recovered_total %s >= %d established sessions; every one "
              "echoes again %s s after the SIGKILL, bound %g s, under the 5 s consent check)"
              % (label, rs["flows_recovered_total"], len(clients), rs["every_session_echoes_again_s"],
                 args.max_recovery_s),
              (rs["flows_recovered_total"] or 0) >= len(clients) and rs["every_session_echoes_again_s"] is not None
              and rs["every_session_echoes_again_s"] <= args.max_recovery_s, rs)
    results["relay_restarts"] = restarts

    probes = read_probes(jsonl)
    bad, cms = [], []
    for p in probes:
        p["around_relay_restart"] = any(ev[k] - 3 <= p["start"] <= ev[k] + 3 for k in ev if k.startswith("relay_restart"))
        # A session whose 2 s hold straddles the relay's restart loses part of its echo: it must
        # connect and echo, the tone fraction is held to the bound only away from the restarts.
        p["ok"] = p.get("connect_ms") is not None and not p.get("error") and (p.get("echo_frames") or 0) > 0 and (
            p["around_relay_restart"] or p.get("tone_fraction", 0) >= args.min_tone_fraction)
        if p.get("connect_ms") is not None:
            cms.append(p["connect_ms"])
        if not p["ok"]:
            bad.append({k: p.get(k) for k in ("n", "tried", "error", "connect_ms", "echo_frames", "tone_fraction",
                                              "around_relay_restart")} | {"start_s": round(p["start"] - ev["kill_master"], 2)})
    results["new_sessions"] = {"planned": count, "started": len(probes), "ok": sum(p["ok"] for p in probes),
                               "connect_ms_p50": pctl(cms, 50), "connect_ms_p99": pctl(cms, 99),
                               "connect_ms_max": max(cms) if cms else None,
                               "connect_ms_by_start_s": [[round(p["start"] - ev["kill_master"], 1), p.get("connect_ms")]
                                                         for p in probes],
                               "failed": bad[:30]}
    check("new sessions: %d of %d planned started, each connected and echoed the tone" % (len(probes), count),
          len(probes) == count and not bad, results["new_sessions"])

    m_end = env.relay_metrics()
    results["relay"] = {
        "flow_store_events_last_relay": {k: int(v) for k, v in m_end.by_label("rtcedge_relay_flow_store_events_total",
                                                                              "event").items() if v},
        "dropped_packets_last_relay": {k: int(v) for k, v in m_end.by_label("rtcedge_relay_dropped_packets_total",
                                                                           "reason").items() if v},
        "flow_store_puts_last_relay": m_end.get("rtcedge_relay_flow_store_puts_total"),
        "flow_store_up": m_end.get("rtcedge_relay_flow_store_up"),
        "warnings": {name: relay_warnings(path) for name, path in env.logs.items() if name.startswith("relay")}}
    results["transceiver_warnings"] = {n: relay_warnings(svc.log_path) for n, svc in env.xcvrs.items()}
    for n in ("a", "b"):
        ends = {r: v for r, v in ended_reasons(env.xcvr_metrics(n)).items() if r != "deleted"}
        check("transceiver %s ended sessions only by DELETE" % n, not ends, ends)
    check("the relay's flow store is up at the end (rtcedge_relay_flow_store_up 1)", m_end.get("rtcedge_relay_flow_store_up") == 1,
          m_end.get("rtcedge_relay_flow_store_up"))
    if args.table:
        print_failover_table(args, results)


def print_failover_table(args, res):
    cfg, fo = res["config"], res.get("failover", {})
    print("\nRedis %s: master SIGKILLed mid-call%s; userspace relay with registry + flow store + registry.cache_file "
          "on it (registry.ttl %gs, flow_store.ttl %gs, refresh %gs); %d established sessions per transceiver; a new "
          "session every %g s" % (cfg["topology"], ", then a slot range migrated" if cfg["topology"] == "cluster" else "",
                                  cfg["registry_ttl_s"], cfg["flow_store_ttl_s"], cfg["flow_store_refresh_s"],
                                  cfg["sessions_per_transceiver"], args.new_session_interval))
    print("machine: %s\n" % machine())
    print("events (s after the kill): %s\n" % ", ".join("%s %s" % kv for kv in res.get("events_s", {}).items()))
    evs = [e for e in res.get("events_s", {}) if not e.startswith("relay_restart") and not e.endswith("_done")
           and e != "end"]
    rls = [r["label"] for r in res.get("relay_restarts", [])]
    print("| established session | " + " | ".join("%s: lost / expected, longest gap (ms)" % e for e in evs)
          + " | whole run, relay restarts aside | " + " | ".join("%s: gap (ms), echo again (s)" % l for l in rls) + " |")
    print("|---|" + "---|" * (len(evs) + 1 + len(rls)))
    for s in res.get("sessions", []):
        rw = s["run_without_restarts"]
        print("| %s | " % s["session"] + " | ".join("%d / %d, %d" % (s["events"][e]["lost"], s["events"][e]["expected"],
                                                                     s["events"][e]["max_gap_ms"]) for e in evs)
              + " | %d / %d, %d | " % (rw["lost"], rw["expected"], rw["max_gap_ms"])
              + " | ".join("%d, %s" % (s["restarts"][l]["gap_ms"], s["restarts"][l]["echo_again_after_kill_s"])
                           for l in rls) + " |")
    ns = res.get("new_sessions", {})
    print("\n| measure | value |")
    print("|---|---|")
    rows = [("failover: kill -> replica promoted (s)", fo.get("promoted_s")),
            ("kill -> a flow written after the kill readable in Redis (s)", fo.get("new_flow_readable_s")),
            ("kill -> a flow written after the kill in one of the killed master's slots readable (s)",
             fo.get("new_flow_in_killed_slots_readable_s", "-" if cfg["topology"] == "sentinel" else "none seen")),
            ("new sessions started / connected and echoed", "%s / %s" % (ns.get("started"), ns.get("ok"))),
            ("new sessions connect p50 / p99 / max (ms)", "%s / %s / %s" % (ns.get("connect_ms_p50"),
                                                                            ns.get("connect_ms_p99"),
                                                                            ns.get("connect_ms_max"))),
            ("relay endpoints, lowest during the run", (res.get("relay_endpoints_min") or {}).get("value"))]
    if res.get("migration"):
        mg = res["migration"]
        rows.append(("migration of slots %d-%d (%s's flow key) %d -> %d (s)" % (mg["slots"][0], mg["slots"][1],
                                                                                 mg["session"], mg["from"], mg["to"]),
                     mg["took_s"]))
    for r in res.get("relay_restarts", []):
        rows += [("%s (at %s s): SIGKILL -> /metrics up (s)" % (r["label"], r["killed_at_s"]), r["started_s"]),
                 ("%s: SIGKILL -> every established session echoes again (s)" % r["label"],
                  r["every_session_echoes_again_s"]),
                 ("%s: rtcedge_relay_flows_recovered_total (>= %d) / reached after (s)"
                  % (r["label"], 2 * cfg["sessions_per_transceiver"]),
                  "%s / %s" % (r["flows_recovered_total"], r["flows_recovered_total_reached_s"]))]
    for label, v in rows:
        print("| %s | %s |" % (label, v))


def run_test(args, workdir, results):
    check = harness.checker(results, log)
    env = Env(args, workdir)
    results["logs"] = env.logs
    try:
        if args.scenario == "impairment":
            run_impairment(args, env, results, check)
        elif args.scenario == "redis-outage":
            run_redis_outage(args, env, results, check)
        elif args.scenario == "redis-failover":
            run_redis_failover(args, env, results, check)
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
    ap.add_argument("--scenario", choices=["impairment", "kill", "redis-outage", "redis-failover"], required=True)
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
    ap.add_argument("--ttl", type=float, default=None, help="registry.ttl (s; kill 1, redis-outage 3)")
    ap.add_argument("--consent-timeout", type=float, default=None,
                    help="sessions.consent_timeout (s; kill 3, redis-outage 15: above a relay restart's gap)")
    ap.add_argument("--outage", type=float, default=60.0, help="redis-outage: seconds redis-server stays down")
    ap.add_argument("--drain-at", type=float, default=0.3, help="redis-outage: drain b at this fraction of the outage")
    ap.add_argument("--restart-at", type=float, default=0.5,
                    help="redis-outage: restart the relay at this fraction of the outage")
    ap.add_argument("--drain-timeout", type=float, default=5.0, help="redis-outage: b's sessions.drain_timeout (s)")
    ap.add_argument("--flow-store-ttl", type=float, default=None,
                    help="redis-outage: flow_store.ttl (s); the refresh is a third of it")
    ap.add_argument("--converge-s", type=float, default=30.0, help="redis-outage: seconds watched after Redis returns")
    ap.add_argument("--after-s", type=float, default=10.0,
                    help="redis-outage: new sessions go on this long after Redis returns")
    ap.add_argument("--new-session-interval", type=float, default=1.0, help="redis-outage: seconds between new sessions")
    ap.add_argument("--max-new-sessions", type=int, default=1000, help="redis-outage: bound on new sessions")
    ap.add_argument("--load-samples", type=int, default=10, help="redis-outage: INFO samples, one a second")
    ap.add_argument("--max-redis-cmds-per-s", type=int, default=500,
                    help="redis-outage: the thundering-herd bound on Redis's commands/s after its return")
    ap.add_argument("--max-restart-gap-ms", type=float, default=7500,
                    help="redis-outage: an established session's gap across the relay restart (aiortc's consent "
                         "check comes every 5 s +-20 %%)")
    ap.add_argument("--slack", type=float, default=1.5, help="kill: extra seconds allowed on a loaded machine")
    ap.add_argument("--max-survivor-loss", type=int, default=20, help="kill: frames of 200 a survivor may miss")
    ap.add_argument("--max-survivor-gap-ms", type=float, default=None,
                    help="kill: 400; redis-outage: 600 (seven processes share the CPUs there)")
    ap.add_argument("--topology", choices=["sentinel", "cluster"], default="sentinel",
                    help="redis-failover: a Sentinel group (1 replica, 3 sentinels) or a Cluster (3 masters + replicas)")
    ap.add_argument("--restart-after", type=float, default=8.0,
                    help="redis-failover: the relay is SIGKILLed and restarted this long after the master's kill")
    ap.add_argument("--failover-bound", type=float, default=10.0,
                    help="redis-failover: kill -> a flow written after it readable in Redis (s)")
    ap.add_argument("--max-recovery-s", type=float, default=2.5,
                    help="redis-failover: relay SIGKILL -> every established session echoes again (s; aiortc's "
                         "consent check comes every 5 s, so a working flow store must beat it)")
    ap.add_argument("--flow-store-refresh", type=float, default=2.0, help="redis-failover: flow_store.refresh_interval (s)")
    ap.add_argument("--table", action="store_true", help="also print the figures as a Markdown table")
    ap.add_argument("--keep-workdir", action="store_true")
    args = ap.parse_args()
    if args.seconds is None:
        args.seconds = 8.0 if args.scenario == "impairment" else 12.0
    if args.max_survivor_gap_ms is None:
        args.max_survivor_gap_ms = 600.0 if args.scenario in ("redis-outage", "redis-failover") else 400.0
    if args.ttl is None:
        args.ttl = {"redis-outage": 3.0, "redis-failover": 10.0}.get(args.scenario, 1.0)
    if args.flow_store_ttl is None:
        args.flow_store_ttl = 20.0 if args.scenario == "redis-failover" else 30.0
    if args.consent_timeout is None:
        args.consent_timeout = 15.0 if args.scenario in ("redis-outage", "redis-failover") else 3.0
    if args.scenario == "redis-outage" and not (20 <= args.outage <= 3600 and 0 < args.drain_at < args.restart_at < 0.9):
        ap.error("--outage 20..3600, 0 < --drain-at < --restart-at < 0.9")
    if not (1 <= args.sessions_per <= 8 and 2 <= args.seconds <= 300):
        ap.error("--sessions-per 1..8, --seconds 2..300")
    results = {"scenario": args.scenario, "checks": []}
    return harness.netns_main(args, results, run_test, lambda: prerequisites(args), log, "rtcedge-chaos-")


if __name__ == "__main__":
    sys.exit(main())
