#!/usr/bin/python3
"""test_stun_flood_netns.py — a spoofed-source STUN flood into the relay, on the userspace
and the XDP data path in turn, while an established flow keeps its media (issue 16 §3,
first bullet). Needs root: it builds the client/relay/transceiver namespaces of
netns_topology.py; otherwise it exits 77 saying why. The XDP run (the program attached
natively to the relay namespace's veths, as in test_relay_netns.py) is skipped, saying why,
when xdp_pass.bpf.o or a bpf filesystem is missing.

The flood (spoofed_stun_flood.py, in the client namespace) sends for FLOOD_S seconds, as
fast as one Python thread writes to a raw socket, datagrams from random sources in
198.18.0.0/15: Binding requests with random ufrags, with forged hints, with two valid hints
replayed (the session's own and another one), and random bytes. Meanwhile a "session" (a
client socket that authenticated one Binding request through the relay with the fake
transceiver) sends 50 datagrams a second, which the fake transceiver echoes. Asserted:

  - no flow state from the flood beyond the documented bound: flows created <= the two
    replayed hints x flows.max_per_hint x the limit windows the flood spans (random and
    forged hints create none; hint_rejected and hint_flow_limit count them);
  - the session's flow survives: its echoes come back during the flood and (>= 95 %) after;
  - the relay's RSS does not grow with the flood (no per-packet state).
Printed (not asserted — performance is never asserted by a timed test): the flood's rate,
what the relay received, its CPU, and the session's loss before, during and after.

Standard library only."""

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support", "py"))
sys.path.insert(0, HERE)
import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import stun_codec as stun  # noqa: E402
from rtcetest import core  # noqa: E402

SKIP = 77
PWD = "rtce-flood-test-pwd-0123456789"
CLUSTER, EP_PORT, VIP_PORT, RETURN_PORT, ADMIN_PORT, XDP_RETURN_PORT = 7, 40001, 3478, 40100, 9478, 40200  # inside our own namespaces
FLOOD_S = 8.0
LIMIT_WINDOW_S = 10
MAX_PER_HINT = 8
MEDIA_PPS = 50
RSS_GROWTH_BOUND_KIB = 8 * 1024


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def user_system_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


class Session:
    """A client flow through the relay: one authenticated check, then a numbered stream."""

    def __init__(self, topo, ufrag):
        self.sock = nt.socket_in(topo.client, socket.AF_INET)
        self.sock.bind((nt.CLIENT_V4, 0))
        self.sock.settimeout(0.2)
        self.vip = (nt.VIP_V4, VIP_PORT)
        deadline = time.monotonic() + 10
        while True:  # the relay and the fake transceiver may still be binding
            _, req = stun.binding_request(ufrag, "cli1", PWD)
            self.sock.sendto(req, self.vip)
            try:
                data, _ = self.sock.recvfrom(2048)
                if stun.looks_like_stun(data) and stun.parse(data).msg_type == stun.BINDING_SUCCESS:
                    break
            except socket.timeout:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the session's check was never answered through the relay")
        self.sent_at = {}  # seq -> monotonic send time
        self.received = set()
        self.stop = threading.Event()
        self.rx = threading.Thread(target=self._receive, daemon=True)
        self.rx.start()

    def _receive(self):
        while not self.stop.is_set():
            try:
                data, _ = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            if data.startswith(b"EP1:\x80") and len(data) >= 9:
                self.received.add(struct.unpack("!I", data[5:9])[0])

    def send(self, seq):
        self.sent_at[seq] = time.monotonic()
        self.sock.sendto(b"\x80" + struct.pack("!I", seq) + b"\0" * 155, self.vip)  # a 160-byte Opus frame

    def loss(self, seqs):
        seqs = list(seqs)
        return (1 - len([s for s in seqs if s in self.received]) / len(seqs)) if seqs else 0.0


def xdp_unavailable_reason(args):
    if not args.xdp_pass_obj or not os.path.exists(args.xdp_pass_obj):
        # A missing build product is a setup failure, never a skip.
        raise SystemExit("FAIL: no xdp_pass.bpf.o (pass --xdp-pass-obj; bpf/CMakeLists.txt builds it)")
    return nt.ensure_bpffs()


def run(args):
    reason = nt.netns_unavailable_reason()
    if reason:
        print("SKIPPED: STUN flood test: %s" % reason)
        return SKIP
    nt.install_signal_cleanup()
    nt.sweep_stale()
    failures = []
    for mode in args.modes.split(","):
        if mode == "xdp":
            reason = xdp_unavailable_reason(args)
            if reason:
                print("SKIPPED: the XDP data path under flood: %s" % reason)
                continue
        run_mode(args, mode, failures)
    return 1 if failures else 0


def run_mode(args, mode, failures):
    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL (%s): %s" % (mode, what))

    with nt.Topology("flood-" + mode[:2]) as topo:
        scratch = nt.make_scratch_dir()
        pin_path = "%s/%s%d-flood" % (nt.BPFFS, nt.NS_PREFIX, os.getpid())
        if mode == "xdp":
            topo.prepare_for_xdp(args.xdp_pass_obj)

            def detach():
                if os.path.exists(pin_path):
                    subprocess.run([args.relay, "detach", "--pin-path", pin_path], capture_output=True, timeout=10)
                    nt.remove_pins(pin_path)
            nt.register_cleanup(detach)
        keys = os.path.join(scratch, "keys.yaml")
        with open(keys, "w") as f:
            subprocess.run([args.relay, "hint", "keygen", "--id", "1"], stdout=f, check=True, timeout=10)
        # Anything the relay might send to a spoofed source leaves toward the client
        # namespace, which does not forward it: no reply can reach a real host.
        nt.run(["ip", "-n", topo.relay, "route", "add", "198.18.0.0/15", "via", nt.CLIENT_V4, "dev", "rc0"])

        def mint():
            return subprocess.run([args.relay, "hint", "encode", "--key-file", keys, "--cluster", str(CLUSTER),
                                   "--endpoint", "1"], capture_output=True, text=True, check=True,
                                  timeout=10).stdout.strip()
        nt.start_in_netns(topo.xcvr, ["/usr/bin/python3", os.path.join(HERE, "fake_transceiver.py"),
                                      "--endpoint", "EP1=%d" % EP_PORT, "--pwd", PWD, "--max-seconds", "120"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = open(os.path.join(scratch, "relay.log"), "w")
        relay = nt.start_in_netns(topo.relay, [
            args.relay, "--listen", "%s:%d" % (nt.VIP_V4, VIP_PORT), "--return-listen", "[::]:%d" % RETURN_PORT,
            "--workers", "1", "--pin-cpus", "false", "--cluster-id", str(CLUSTER), "--hint-key-file", keys,
            "--endpoints", "1=%s:%d" % (nt.XCVR_V4, EP_PORT), "--admin-listen", "127.0.0.1:%d" % ADMIN_PORT,
            "--flows-max-per-hint", str(MAX_PER_HINT), "--flows-limit-window", "%ds" % LIMIT_WINDOW_S,
            "--mode", mode] + ([] if mode == "userspace" else [
                "--xdp-interfaces", "rc0,rx0", "--xdp-relay-address4", nt.RELAY_XCVR_V4,
                "--xdp-relay-address6", nt.RELAY_XCVR_V6, "--xdp-return-port", str(XDP_RETURN_PORT),
                "--xdp-pin-path", pin_path]),
            keep_mounts=True, stdout=log, stderr=subprocess.STDOUT)

        def metrics():
            sock = nt.socket_in(topo.relay, socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.settimeout(2)
                sock.connect(("127.0.0.1", ADMIN_PORT))
                status, body = prom_metrics.fetch(sock, "127.0.0.1", "/metrics", 2)
                return prom_metrics.parse(body) if status == 200 else None
            except OSError:
                return None
            finally:
                sock.close()
        deadline = time.monotonic() + 15
        while metrics() is None:
            if relay.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the relay did not start (exit %s)" % relay.poll())
            time.sleep(0.05)  # poll interval of a deadline-bounded wait

        session_ufrag, other_ufrag = mint(), mint()
        session = Session(topo, session_ufrag)
        seq = 0
        period = 1.0 / MEDIA_PPS

        def stream(seconds, until=None):
            nonlocal seq
            first, t_next, t_end = seq, time.monotonic(), time.monotonic() + seconds
            while time.monotonic() < t_end and (until is None or until()):
                session.send(seq)
                seq += 1
                t_next += period
                time.sleep(max(0.0, t_next - time.monotonic()))  # the stream's 20 ms pacing
            return range(first, seq)

        cpu_idle0, t_idle0 = proc_cpu_seconds(relay.pid), time.monotonic()
        before_seqs = stream(2.0)
        m0, cpu0, rss0 = metrics(), proc_cpu_seconds(relay.pid), rss_kib(relay.pid)
        us0 = user_system_seconds(relay.pid)
        idle_cpu_share = (cpu0 - cpu_idle0) / (time.monotonic() - t_idle0)  # the baseline: the session alone
        flood = nt.start_in_netns(topo.client, [
            "/usr/bin/python3", os.path.join(HERE, "spoofed_stun_flood.py"), "--dst", "%s:%d" % (nt.VIP_V4, VIP_PORT),
            "--avoid", "198.18.0.0/24", "--avoid", "198.18.1.0/24", "--avoid", "198.18.255.0/24",
            "--valid-ufrag", session_ufrag, "--valid-ufrag", other_ufrag, "--seconds", str(FLOOD_S)],
            stdout=subprocess.PIPE, text=True)
        t_flood = time.monotonic()
        during_seqs = stream(FLOOD_S + 5, until=lambda: flood.poll() is None)
        flood_wall = time.monotonic() - t_flood
        out = json.loads(flood.stdout.read() or "{}")
        flood.wait(timeout=10)
        nt.forget_process(flood)
        m1, cpu1, rss1 = metrics(), proc_cpu_seconds(relay.pid), rss_kib(relay.pid)
        us1 = user_system_seconds(relay.pid)
        after_seqs = stream(2.0)
        wait_until = time.monotonic() + 1.0
        while time.monotonic() < wait_until and not all(s in session.received for s in after_seqs):
            time.sleep(0.05)  # the last echoes' way back, bounded
        session.stop.set()

        sent = out.get("sent", 0)
        received = (prom_metrics.delta(m0, m1, "rtcedge_relay_received_packets_total", direction="client_to_transceiver")
                    - len(during_seqs))
        xdp = {}  # what the XDP program decided, by reason (client to transceiver)
        for (name, labels), v in m1.samples.items():
            lab = dict(labels)
            if name == "rtcedge_relay_xdp_packets_total" and lab.get("direction") == "client_to_transceiver":
                xdp[lab["reason"]] = int(v - m0.samples.get((name, labels), 0))
        xdp = {k: v for k, v in xdp.items() if v}
        if mode == "xdp":  # every datagram met the program first: its decisions count them all
            received = sum(xdp.values()) - len(during_seqs)
        created = prom_metrics.delta(m0, m1, "rtcedge_relay_flows_created_total")
        windows = int(flood_wall // LIMIT_WINDOW_S) + 2  # a flood may straddle window boundaries
        bound = 2 * MAX_PER_HINT * windows
        check(sent > 0, "the flood sent nothing: %r" % out)
        check(received > 1000, "the relay received only %d flood datagrams" % received)
        check(created <= bound, "the flood created %d flows (bound %d)" % (created, bound))
        check(m1.get("rtcedge_relay_flows_active") <= 1 + bound, "flows active %d" % m1.get("rtcedge_relay_flows_active"))
        check(prom_metrics.delta(m0, m1, "rtcedge_relay_hint_failures_total", reason="bad_mac") > 0
              or m1.dropped("hint_rejected") > m0.dropped("hint_rejected"), "no forged hint was rejected")
        check(m1.dropped("hint_flow_limit") > m0.dropped("hint_flow_limit"), "the replayed hints were not limited")
        check(session.loss(during_seqs) < 1.0, "the session got nothing back during the flood")
        check(session.loss(after_seqs) <= 0.05, "the session lost %.0f%% after the flood" % (100 * session.loss(after_seqs)))
        check(rss1 - rss0 < RSS_GROWTH_BOUND_KIB, "relay RSS grew by %d KiB" % (rss1 - rss0))
        cpu = cpu1 - cpu0
        drops = {r: int(prom_metrics.delta(m0, m1, "rtcedge_relay_dropped_packets_total", reason=r))
                 for r in ("hint_rejected", "hint_flow_limit", "source_prefix_flow_limit", "no_flow", "stun_malformed")}
        print("\nspoofed STUN flood into the %s relay (1 worker; %s, %d CPUs shared; veths in namespaces)"
              % (mode, core.cpu_model(), os.cpu_count()))
        rows = [
            ("flood sent", "%d datagrams in %.1f s (%.0f/s), %d send errors" % (
                sent, out.get("seconds", 0), sent / max(out.get("seconds", 1), 1e-9), out.get("errors", 0))),
            ("relay received", "%d (%.0f%% of sent)" % (received, 100 * received / max(sent, 1))),
            ("relay CPU during the flood", "%.2f s in %.1f s (%.0f%% of one CPU; %.0f%% with the session alone), "
             "%.2f µs per datagram received" % (cpu, flood_wall, 100 * cpu / flood_wall, 100 * idle_cpu_share,
                                                1e6 * cpu / max(received, 1))),
            # System time includes softirq work (XDP, the veth's receive path) that the kernel
            # charges to whichever task it interrupted.
            ("relay CPU user / system", "%.2f / %.2f s" % (us1[0] - us0[0], us1[1] - us0[1])),
            ("flows created by the flood", "%d (bound %d = 2 hints × %d × %d windows)" % (
                created, bound, MAX_PER_HINT, windows)),
            ("drops", ", ".join("%s %d" % kv for kv in drops.items() if kv[1])),
            ("relay RSS before / after", "%d / %d KiB" % (rss0, rss1)),
            ("XDP program's decisions", ", ".join("%s %d" % kv for kv in sorted(xdp.items())) or "-"),
            ("session loss before / during / after", "%.1f%% / %.1f%% / %.1f%% (%d pps, %d/%d/%d datagrams)" % (
                100 * session.loss(before_seqs), 100 * session.loss(during_seqs), 100 * session.loss(after_seqs),
                MEDIA_PPS, len(before_seqs), len(during_seqs), len(after_seqs))),
        ]
        for what, value in rows:
            print("| %-38s | %s |" % (what, value))
        nt.stop_process(relay)
        nt.forget_process(relay)
        if mode == "xdp":
            detach()  # the links and pins go with the relay, not with the namespaces
            print("(XDP: the program runs in the kernel's receive path, so most of its CPU is not the relay process's)")
        if failures:
            sys.stdout.write(open(os.path.join(scratch, "relay.log")).read()[-2000:])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--xdp-pass-obj", help="xdp_pass.bpf.o for the veth peers (the XDP run)")
    ap.add_argument("--modes", default="userspace,xdp")
    sys.exit(run(ap.parse_args()))
