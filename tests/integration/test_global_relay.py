#!/usr/bin/python3
"""test_global_relay.py — the global relay's userspace data path with real processes on
loopback (issue 13; docs/global-relay.md). No root needed.

    client ──> relay A (cluster 1, ingress)  VIP 127.0.0.1:VA
                 │ hint names cluster 2: PROXY v2 (client, VA) + payload
                 v
               relay B (cluster 2, owner)    peers.listen 127.0.0.2:PB, trusts 127.0.0.1/32
                 │ the same datagram, unchanged
                 v
               fake transceiver EP7          (tests/integration/fake_transceiver.py)

Cluster 2 signs its hints with its own keys; relay A holds them (peers.clusters
hint_key_file). Checked: the client's check and its media cross both relays and come back
from the VIP it used; the transceiver sees the client and VIP A as if the client had come to
it directly; the role counters of both relays; a forwarded datagram from outside
peers.trusted, a hint for a cluster nobody serves and a hint of cluster 2 signed with the
wrong keys each make a counted drop and no flow; an ICE-TCP connection at the ingress reaches
the owner cluster as PROXY v2 STREAM datagrams and its replies come back as frames.

GlobalRelayFailureTest (a CTest entry of its own; a real redis-server on a free loopback
port as the flow store; a missing redis-server fails them, install-deps.sh installs it): the failure cases of
docs/global-relay.md. The client streams media (one datagram per 20 ms) and, in the
owner-restart case, a consent check every 2.5 s, like Chromium:
  (a) the ingress relay restarted mid-call: it recovers the flow from the store, and the
      media reaches the transceiver again with no check sent since the restart;
  (b) the owning cluster's relay restarted: with a flow store of its own it recovers its
      owner flow (the record names the ingress relay it comes from) and media resumes with
      no check sent; without one, after the client's next check; so it does when the ingress
      restarts on another return address (peer_wrong_sender);
  (c) a reload moves cluster 2's relay: a live flow and a recovered one follow it, and a
      relay restarted after the move recovers its flows to the new address.
Each prints the measured gap.

Exit 0 pass, 1 fail, 77 every selected case skipped.
"""

import argparse
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support", "py"))
sys.path.insert(0, HERE)
import prom_metrics  # noqa: E402
from rtcetest import core  # noqa: E402
from rtcetest.core import wait_for  # noqa: E402
import proxy_v2  # noqa: E402
import stun_codec as stun  # noqa: E402

ARGS = None
PWD = "global-relay-test-pwd-0123"


def free_port(kind=socket.SOCK_DGRAM, host="127.0.0.1"):
    return core.free_port(kind, host)


def http_get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return r.read().decode()


class Process:
    def __init__(self, name, argv, tmp):
        self.name = name
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def alive(self):
        if self.proc.poll() is not None:
            raise AssertionError("%s exited with %d:\n%s" % (self.name, self.proc.returncode, self.text()[-3000:]))
        return True

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


class Relay(Process):
    def __init__(self, name, tmp, keys, cluster, extra, vip_port=None):
        self.vip_port, self.admin = vip_port or free_port(), free_port(socket.SOCK_STREAM)
        argv = [ARGS.relay, "--hint-key-file", keys, "--listen", "127.0.0.1:%d" % self.vip_port,
                "--admin-listen", "127.0.0.1:%d" % self.admin, "--workers", "1", "--pin-cpus", "false",
                "--cluster-id", str(cluster)] + extra
        super().__init__(name, argv, tmp)

    def ready(self):
        self.alive()
        try:
            return http_get(self.admin, "/readyz").startswith("ready")
        except OSError:
            return False

    def metrics(self):
        return prom_metrics.parse(http_get(self.admin, "/metrics"))


class TwoClusterStage(unittest.TestCase):
    """The loopback stage of the global relay tests (here and test_global_relay_registry.py):
    a scratch folder (self.tmp) with the hint keys of clusters 1 and 2 (self.keys1, self.keys2),
    the fake transceiver serving endpoint 7 (self.ep_port), hints, client sockets, and
    exchanges with the ingress relay's VIP (self.vip, set by the test's setUp)."""

    def make_stage(self, tmp_prefix):
        self.tmp = tempfile.mkdtemp(prefix=tmp_prefix)
        if not os.environ.get("RTCE_KEEP_TMP"):  # RTCE_KEEP_TMP=1 keeps the logs of a failed run
            self.addCleanup(shutil.rmtree, self.tmp, True)
        self.keys1 = os.path.join(self.tmp, "cluster1.yaml")
        self.keys2 = os.path.join(self.tmp, "cluster2.yaml")
        for path, key_id in ((self.keys1, 1), (self.keys2, 2)):
            with open(path, "w") as f:
                subprocess.run([ARGS.relay, "hint", "keygen", "--id", str(key_id)], stdout=f, check=True, timeout=10)

    def start_fake_transceiver(self):
        self.ep_port = free_port()
        self.transceiver = Process("fake-transceiver", [
            sys.executable, os.path.join(HERE, "fake_transceiver.py"), "--endpoint", "EP7=%d" % self.ep_port,
            "--pwd", PWD, "--max-seconds", "120"], self.tmp)
        self.addCleanup(self.transceiver.stop)

    def mint(self, cluster, endpoint, keys):
        return subprocess.run([ARGS.relay, "hint", "encode", "--key-file", keys, "--cluster", str(cluster),
                               "--endpoint", str(endpoint)], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()

    def client(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        self.addCleanup(s.close)
        return s

    def exchange(self, sock, data, timeout=3.0):
        """Sends data to the VIP; returns the first datagram back (payload, source), or None.
        Resent every 0.5 s within the deadline: UDP, and the first packet crosses two relays."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.sendto(data, self.vip)
            ready, _, _ = select.select([sock], [], [], min(0.5, max(0.0, deadline - time.monotonic())))
            if ready:
                return sock.recvfrom(65536)
        return None

    def quiet(self, sock, seconds=0.5):
        ready, _, _ = select.select([sock], [], [], seconds)
        return not ready


class GlobalRelayTest(TwoClusterStage):
    def setUp(self):
        self.make_stage("rtce-global-")
        self.start_fake_transceiver()
        self.peer_port = free_port(host="127.0.0.2")
        self.owner = Relay("relay-b-owner", self.tmp, self.keys2, 2, [
            "--endpoints", "7=127.0.0.1:%d" % self.ep_port, "--peers-listen", "127.0.0.2:%d" % self.peer_port,
            "--peers-trusted", "127.0.0.1/32"])
        self.addCleanup(self.owner.stop)
        with open(os.path.join(self.tmp, "ingress.yaml"), "w") as f:
            json.dump({"peers": {"clusters": [{"cluster": 2, "address": "127.0.0.2:%d" % self.peer_port,
                                               "hint_key_file": self.keys2}]}}, f)  # JSON is YAML
        self.ingress = Relay("relay-a-ingress", self.tmp, self.keys1, 1,
                             ["--config", os.path.join(self.tmp, "ingress.yaml")])
        self.addCleanup(self.ingress.stop)
        wait_for(lambda: self.owner.ready() and self.ingress.ready(), 15, "both relays ready")
        self.vip = ("127.0.0.1", self.ingress.vip_port)

    def test_a_flow_of_another_cluster_crosses_both_relays_and_comes_back_from_the_vip(self):
        client = self.client()
        ufrag = self.mint(2, 7, self.keys2)
        txid, request = stun.binding_request(ufrag, "cli1", PWD)
        got = self.exchange(client, request)
        self.assertIsNotNone(got, "no answer through the two relays")
        data, src = got
        self.assertEqual(src, self.vip, "the answer did not come from the VIP the client used")
        msg = stun.parse(data)
        self.assertEqual(msg.msg_type, stun.BINDING_SUCCESS)
        self.assertTrue(msg.integrity_ok(PWD.encode()))
        # The transceiver saw the client itself (XOR-MAPPED-ADDRESS from the PROXY header).
        self.assertEqual(msg.xor_mapped_address(), client.getsockname())
        self.assertEqual(msg.get(stun.ATTR_SOFTWARE), b"rtce-fake-transceiver EP7")

        for i in range(5):
            payload = b"\x80\x6f" + bytes([0, i]) + b"media-%d" % i
            got = self.exchange(client, payload)
            self.assertIsNotNone(got, "media %d not echoed" % i)
            self.assertEqual(got, (b"EP7:" + payload, self.vip))

        def counted():
            a, b = self.ingress.metrics(), self.owner.metrics()
            ok = all(m.get("rtcedge_relay_role_packets_total", role=role, direction=d) >= 6
                     for m, role in ((a, "ingress"), (b, "owner"))
                     for d in ("client_to_transceiver", "transceiver_to_client"))
            return (a, b) if ok else None
        a, b = wait_for(counted, 5, "role counters of both relays")
        self.assertEqual(a.get("rtcedge_relay_role_packets_total", role="local", direction="client_to_transceiver"), 0)
        self.assertEqual(b.get("rtcedge_relay_role_packets_total", role="local", direction="client_to_transceiver"), 0)
        self.assertEqual(a.get("rtcedge_relay_flows_active"), 1)
        self.assertEqual(b.get("rtcedge_relay_flows_active"), 1)
        # The ingress's view of cluster 2's relay: traffic both ways, and a recent reply.
        for d in ("client_to_transceiver", "transceiver_to_client"):
            self.assertGreaterEqual(a.get("rtcedge_relay_peer_packets_total", cluster="2", direction=d), 6, d)
        age = a.get("rtcedge_relay_peer_last_reply_age_seconds", cluster="2", default=None)
        self.assertIsNotNone(age)
        self.assertTrue(0 <= age < 10, age)

    def test_an_ice_tcp_connection_at_the_ingress_reaches_the_owner_cluster(self):
        """ICE-TCP through the global relay: the ingress relay terminates the connection and
        carries its frames to the owner cluster's relay as PROXY v2 STREAM datagrams on the
        peer leg; the owner forwards them unchanged; replies come back as frames."""
        tcp_port = free_port(socket.SOCK_STREAM)
        with open(os.path.join(self.tmp, "ingress-tcp.yaml"), "w") as f:
            json.dump({"ice_tcp": {"port": tcp_port},
                       "peers": {"clusters": [{"cluster": 2, "address": "127.0.0.2:%d" % self.peer_port,
                                               "hint_key_file": self.keys2}]}}, f)
        ingress = Relay("relay-a-ingress-tcp", self.tmp, self.keys1, 1,
                        ["--config", os.path.join(self.tmp, "ingress-tcp.yaml")])
        self.addCleanup(ingress.stop)
        wait_for(ingress.ready, 15, "the ICE-TCP ingress relay ready")
        conn = socket.create_connection(("127.0.0.1", tcp_port), timeout=5)
        self.addCleanup(conn.close)

        def frame(payload):
            return struct.pack("!H", len(payload)) + payload

        def read_frame():
            def exactly(n):
                buf = b""
                while len(buf) < n:
                    chunk = conn.recv(n - len(buf))
                    if not chunk:
                        raise AssertionError("the relay closed the connection")
                    buf += chunk
                return buf
            (n,) = struct.unpack("!H", exactly(2))
            return exactly(n)

        ufrag = self.mint(2, 7, self.keys2)
        _, request = stun.binding_request(ufrag, "cli1", PWD)
        conn.sendall(frame(request))
        msg = stun.parse(read_frame())
        self.assertEqual(msg.msg_type, stun.BINDING_SUCCESS)
        self.assertEqual(msg.get(stun.ATTR_SOFTWARE), b"rtce-fake-transceiver EP7")
        self.assertEqual(msg.xor_mapped_address(), conn.getsockname(), "the transceiver saw the TCP client")
        payloads = [b"\x80\x6f" + bytes([0, i]) + b"tcp-media-%d" % i for i in range(5)]
        conn.sendall(b"".join(frame(p) for p in payloads))  # several frames in one segment
        for p in payloads:
            self.assertEqual(read_frame(), b"EP7:" + p)
        def tcp_events():
            # The fake transceiver logs each datagram after it answered it: wait for the line.
            seen = [json.loads(line) for line in self.transceiver.text().splitlines() if line.startswith("{")]
            events = [e for e in seen if e.get("transport") == "tcp"]
            return events if len(events) >= 6 else None
        tcp_events = wait_for(tcp_events, 5, "the transceiver to log six STREAM-framed datagrams")
        self.assertEqual(len(tcp_events), 6)
        self.assertEqual(tcp_events[0]["vip"], ["127.0.0.1", tcp_port])

        def counted():
            a, b = ingress.metrics(), self.owner.metrics()
            ok = (a.get("rtcedge_relay_tcp_frames_total", direction="client_to_transceiver") == 6
                  and a.get("rtcedge_relay_tcp_frames_total", direction="transceiver_to_client") == 6
                  and b.get("rtcedge_relay_role_packets_total", role="owner", direction="client_to_transceiver") >= 6)
            return (a, b) if ok else None
        a, b = wait_for(counted, 5, "the ingress's TCP frames and the owner's role counters")
        self.assertEqual(a.get("rtcedge_relay_tcp_connections_active"), 1)
        self.assertEqual(a.get("rtcedge_relay_role_packets_total", role="ingress", direction="client_to_transceiver"), 6)
        conn.close()
        wait_for(lambda: ingress.metrics().get("rtcedge_relay_tcp_closed_total", reason="client_closed") == 1, 5,
                 "the ingress counted the closed connection")

    def test_a_peer_that_never_answered_reports_no_reply(self):
        self.assertEqual(self.ingress.metrics().get("rtcedge_relay_peer_last_reply_age_seconds", cluster="2"), -1)

    def test_forwarded_datagrams_from_outside_peers_trusted_are_dropped(self):
        ufrag = self.mint(2, 7, self.keys2)
        _, request = stun.binding_request(ufrag, "cli2", PWD)
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(stranger.close)
        stranger.bind(("127.0.0.99", 0))
        framed = proxy_v2.encode(("127.0.0.1", 40999), self.vip) + request
        before = self.owner.metrics()
        for _ in range(3):
            stranger.sendto(framed, ("127.0.0.2", self.peer_port))
        after = wait_for(lambda: (lambda m: m if prom_metrics.delta(
            before, m, "rtcedge_relay_dropped_packets_total", reason="peer_untrusted") >= 3 else None)(
            self.owner.metrics()), 5, "peer_untrusted drops")
        self.assertEqual(after.get("rtcedge_relay_flows_active"), 0)
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_forwarded_packets_total",
                                            direction="client_to_transceiver"), 0)
        self.assertTrue(self.quiet(stranger), "the owner answered an untrusted sender")

    def test_hints_nobody_serves_or_signed_with_the_wrong_keys_leave_no_state(self):
        client = self.client()
        before = self.ingress.metrics()
        for ufrag in (self.mint(5, 7, self.keys1),   # a cluster nobody serves (a key A holds)
                      self.mint(2, 7, self.keys1)):  # cluster 2, signed with cluster 1's keys
            _, request = stun.binding_request(ufrag, "cli3", PWD)
            client.sendto(request, self.vip)
        after = wait_for(lambda: (lambda m: m if prom_metrics.delta(
            before, m, "rtcedge_relay_dropped_packets_total", reason="hint_rejected") >= 2 else None)(
            self.ingress.metrics()), 5, "two hint_rejected drops")
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_hint_failures_total",
                                            reason="wrong_cluster"), 1)
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_hint_failures_total",
                                            reason="unknown_key"), 1)
        self.assertEqual(after.get("rtcedge_relay_flows_active"), 0)
        self.assertEqual(self.owner.metrics().get("rtcedge_relay_received_packets_total",
                                                  direction="client_to_transceiver"), 0)
        self.assertTrue(self.quiet(client), "the ingress answered a rejected hint")


class Redis(Process):
    """A private redis-server on a free loopback port; nothing persists."""

    def __init__(self, tmp, port=None):
        self.port = port or free_port(socket.SOCK_STREAM)
        super().__init__("redis", ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", tmp], tmp)
        wait_for(lambda: self.alive() and self.command("PING") == "PONG", 10, "redis-server answering PING")

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def command(self, *args):
        """One command over RESP; a bulk/simple string reply as str, nil as None."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as c:
                c.sendall(b"*%d\r\n" % len(args) + b"".join(
                    b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args))
                reply = b""
                while not reply.endswith(b"\r\n") or (reply.startswith(b"$") and reply.count(b"\r\n") < 2
                                                       and not reply.startswith(b"$-1")):
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
        except OSError:
            return None
        if reply.startswith(b"+"):
            return reply[1:-2].decode()
        if reply.startswith(b"$-1"):
            return None
        if reply.startswith(b"$"):
            return reply.split(b"\r\n")[1].decode()
        return reply.decode(errors="replace")


class MediaStream:
    """The client's side of a call: one media datagram every 20 ms (sequence numbered, so
    each echo is matched to its send) and, optionally, a Binding request every
    check_interval seconds, from one socket to the VIP, for at most max_seconds. Records
    when each echo came back."""

    def __init__(self, sock, vip, ufrag, check_interval=None, max_seconds=30.0):
        self.sock, self.vip, self.ufrag = sock, vip, ufrag
        self.check_interval, self.max_seconds = check_interval, max_seconds
        self.echoes = {}       # seq -> monotonic time of its echo
        self.checks_sent = []  # monotonic times
        self.checks_answered = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(timeout=5)

    @staticmethod
    def payload(seq):
        return b"\x80\x6f" + seq.to_bytes(4, "big") + b"media"

    def run(self):
        start = time.monotonic()
        seq, next_send, next_check = 0, start, start + (self.check_interval or 0)
        while not self.stop_event.is_set() and time.monotonic() - start < self.max_seconds:
            now = time.monotonic()
            if now >= next_send:
                self.sock.sendto(self.payload(seq), self.vip)
                seq += 1
                next_send += 0.02
            if self.check_interval and now >= next_check:
                _, request = stun.binding_request(self.ufrag, "cli-fail", PWD)
                self.sock.sendto(request, self.vip)
                self.checks_sent.append(now)
                next_check += self.check_interval
            ready, _, _ = select.select([self.sock], [], [], max(0.0, min(next_send, next_check if
                                                                        self.check_interval else next_send)
                                                                - time.monotonic()))
            while ready:
                data, src = self.sock.recvfrom(65536)
                if src == self.vip and data.startswith(b"EP7:\x80\x6f"):
                    self.echoes.setdefault(int.from_bytes(data[6:10], "big"), time.monotonic())
                elif src == self.vip:
                    self.checks_answered += 1
                ready, _, _ = select.select([self.sock], [], [], 0)

    def echoed_since(self, t):
        return [at for at in self.echoes.values() if at >= t]

    def lost(self):
        """Media datagrams sent between the first and the last echoed one and never echoed."""
        return max(self.echoes) - min(self.echoes) + 1 - len(self.echoes) if self.echoes else None

    def outage_after(self, t):
        """The longest wait between two echoes from just before t on: the media outage (echoes
        of datagrams sent before t may still arrive after it)."""
        times = sorted(at for at in self.echoes.values() if at >= t - 0.5)
        return max((b - a for a, b in zip(times, times[1:])), default=None)


def print_outage(what, stream, stopped, up=None, first=None):
    """Prints the measured gap of a restart at `stopped`: the stream's media outage and loss
    and, when the relay was ready again at `up`, stop to /readyz and /readyz to the first echo."""
    line = "\n[measured] %s: media outage %.0f ms, %d datagrams of 20 ms lost" % (
        what, stream.outage_after(stopped) * 1e3, stream.lost())
    if up is not None:
        line += " (stop to /readyz: %.0f ms; first echo %.0f ms after /readyz)" % ((up - stopped) * 1e3,
                                                                                (first - up) * 1e3)
    print(line, file=sys.stderr)


class TransceiverLog:
    """The fake transceiver's JSON event lines, read from its log from a mark on."""

    def __init__(self, path):
        self.path = path

    def mark(self):
        return os.path.getsize(self.path)

    def events_since(self, mark):
        with open(self.path) as f:
            f.seek(mark)
            return [json.loads(line) for line in f.read().splitlines() if line.startswith("{")]


class GlobalRelayFailureTest(GlobalRelayTest):
    """The ingress relay keeps its ingress flows in a real Redis (flow_store.redis_url), with
    a fixed return_listen, so that a restarted ingress sends from the address the owner's
    flow remembers."""

    def setUp(self):
        self.make_stage("rtce-global-fail-")
        self.redis = Redis(self.tmp)
        self.addCleanup(self.redis.stop)
        self.start_fake_transceiver()
        self.tlog = TransceiverLog(self.transceiver.log_path)
        self.peer_port = free_port(host="127.0.0.2")
        self.owner = self.start_owner()
        self.return_port = free_port()
        self.ingress_config = os.path.join(self.tmp, "ingress.yaml")
        self.write_ingress_config("127.0.0.2:%d" % self.peer_port)
        self.vip_port = free_port()
        self.ingress = self.start_ingress()
        wait_for(lambda: self.owner.ready(), 15, "owner relay ready")
        self.vip = ("127.0.0.1", self.vip_port)

    def start_owner(self, flow_store=False):
        owner = Relay("relay-b-owner", self.tmp, self.keys2, 2, [
            "--endpoints", "7=127.0.0.1:%d" % self.ep_port, "--peers-listen", "127.0.0.2:%d" % self.peer_port,
            "--peers-trusted", "127.0.0.1/32"] + (["--flow-store-redis-url", self.redis.url] if flow_store else []))
        self.addCleanup(owner.stop)
        return owner

    @contextlib.contextmanager
    def media_flowing(self, client, ufrag, check_interval=None):
        """A MediaStream of the call echoing through both relays; (the stream, the time it
        did) inside, the stream stopped after."""
        with MediaStream(client, self.vip, ufrag, check_interval=check_interval) as stream:
            wait_for(lambda: len(stream.echoes) >= 10, 5, "media through both relays")
            yield stream, time.monotonic()

    def restart_owner(self, flow_store=False, what="owner relay ready again"):
        """Stops the owner relay and starts it again; the time it was ready."""
        self.owner.stop()
        self.owner = self.start_owner(flow_store=flow_store)
        wait_for(self.owner.ready, 15, what)
        return time.monotonic()

    def write_ingress_config(self, cluster2_address):
        with open(self.ingress_config + ".new", "w") as f:
            json.dump({"return_listen": "[::]:%d" % self.return_port,
                       "flow_store": {"redis_url": self.redis.url},
                       "peers": {"clusters": [{"cluster": 2, "address": cluster2_address,
                                               "hint_key_file": self.keys2}]}}, f)
        os.replace(self.ingress_config + ".new", self.ingress_config)

    def start_ingress(self):
        relay = Relay("relay-a-ingress", self.tmp, self.keys1, 1, ["--config", self.ingress_config],
                      vip_port=self.vip_port)
        self.addCleanup(relay.stop)
        wait_for(relay.ready, 15, "ingress relay ready")
        return relay

    def restart_ingress(self):
        self.ingress.stop()
        self.ingress = self.start_ingress()
        return time.monotonic()

    def call(self, sock):
        """A check through both relays, then the flow's record in the store."""
        ufrag = self.mint(2, 7, self.keys2)
        _, request = stun.binding_request(ufrag, "cli-fail", PWD)
        got = self.exchange(sock, request)
        self.assertIsNotNone(got, "no answer to the first check")
        self.assertEqual(stun.parse(got[0]).msg_type, stun.BINDING_SUCCESS)
        key = "rtce:c1:flow:127.0.0.1:%d|127.0.0.1:%d" % (sock.getsockname()[1], self.vip_port)
        record = wait_for(lambda: self.redis.command("GET", key), 5, "the ingress flow's record in the store")
        self.assertEqual(record, "c2", "an ingress flow's record names its cluster")
        return ufrag

    def assert_recovered_before_any_check(self, relay, role, stream, events, client):
        """`relay` (restarted) recovered the client's flow from the store: no check was sent
        or reached the transceiver, which saw the client's media first; the relay made no flow
        of its own and forwarded the replies in `role`."""
        self.assertFalse(stream.checks_sent, "the stream sent a check")
        self.assertEqual([e for e in events if e["event"] == "stun"], [], "a check reached the transceiver")
        self.assertEqual(events[0]["event"], "data")
        self.assertEqual(tuple(events[0]["client"]), client.getsockname())
        m = relay.metrics()
        self.assertGreaterEqual(m.get("rtcedge_relay_flows_recovered_total"), 1)
        self.assertGreaterEqual(m.get("rtcedge_relay_flow_store_lookups_total", result="found"), 1)
        self.assertEqual(m.get("rtcedge_relay_flows_created_total"), 0, "the restarted %s made a flow" % role)
        self.assertGreaterEqual(m.get("rtcedge_relay_role_packets_total", role=role,
                                      direction="transceiver_to_client"), 1)

    def test_a_restarted_ingress_relay_forwards_media_again_before_any_check(self):
        client = self.client()
        ufrag = self.call(client)
        with self.media_flowing(client, ufrag) as (stream, stopped):
            mark = self.tlog.mark()
            up = self.restart_ingress()
            first = wait_for(lambda: stream.echoed_since(up), 5, "media echoed after the restart")
            events = wait_for(lambda: [e for e in self.tlog.events_since(mark) if e["event"] == "data"] and
                              self.tlog.events_since(mark), 5, "media at the transceiver")
        self.assert_recovered_before_any_check(self.ingress, "ingress", stream, events, client)
        print_outage("ingress restart", stream, stopped, up, min(first))

    def test_an_ingress_restarted_on_another_return_address_waits_for_the_next_check(self):
        # The owner's flow belongs to the old return address: media from the new one is
        # peer_wrong_sender until a verified check moves the flow (the trust model).
        client = self.client()
        ufrag = self.call(client)
        with self.media_flowing(client, ufrag, check_interval=2.5) as (stream, stopped):
            self.return_port = free_port()
            self.write_ingress_config("127.0.0.2:%d" % self.peer_port)
            up = self.restart_ingress()
            first = min(wait_for(lambda: stream.echoed_since(up), 6, "media echoed after the restart"))
            checks = list(stream.checks_sent)
        self.assertTrue(any(up <= c <= first for c in checks), "media resumed before any check")
        self.assertGreaterEqual(self.owner.metrics().get("rtcedge_relay_dropped_packets_total",
                                                         reason="peer_wrong_sender"), 1)
        self.assertGreaterEqual(self.ingress.metrics().get("rtcedge_relay_flows_recovered_total"), 1)
        print_outage("ingress restart on another return port (check every 2.5 s)", stream, stopped)

    def test_a_restarted_owner_relay_with_a_flow_store_takes_media_again_before_any_check(self):
        self.restart_owner(flow_store=True, what="owner relay ready with a flow store")
        client = self.client()
        ufrag = self.call(client)
        # Cluster 2's record of the same flow: its endpoint and the ingress relay it comes via.
        key = "rtce:c2:flow:127.0.0.1:%d|127.0.0.1:%d" % (client.getsockname()[1], self.vip_port)
        record = wait_for(lambda: self.redis.command("GET", key), 5, "the owner flow's record in the store")
        self.assertEqual(record, "o7@127.0.0.1:%d" % self.return_port)
        with self.media_flowing(client, ufrag) as (stream, stopped):
            mark = self.tlog.mark()
            up = self.restart_owner(flow_store=True)
            first = min(wait_for(lambda: stream.echoed_since(up), 5, "media echoed after the owner restart"))
            events = wait_for(lambda: [e for e in self.tlog.events_since(mark) if e["event"] == "data"] and
                              self.tlog.events_since(mark), 5, "media at the transceiver")
        self.assert_recovered_before_any_check(self.owner, "owner", stream, events, client)
        print_outage("owner restart with a flow store", stream, stopped, up, first)

    def test_a_restarted_owner_relay_takes_media_again_after_the_next_check(self):
        client = self.client()
        ufrag = self.call(client)
        with self.media_flowing(client, ufrag, check_interval=2.5) as (stream, stopped):
            up = self.restart_owner()
            first = min(wait_for(lambda: stream.echoed_since(up), 6, "media echoed after the owner restart"))
            checks = list(stream.checks_sent)
        # The owner lost its flow: media is refused until a check makes it again.
        self.assertTrue(any(up <= c <= first for c in checks), "media resumed before any check")
        m = self.owner.metrics()
        self.assertGreaterEqual(m.get("rtcedge_relay_dropped_packets_total", reason="no_flow"), 1)
        self.assertGreaterEqual(m.get("rtcedge_relay_flows_created_total"), 1)
        print_outage("owner restart (check every 2.5 s)", stream, stopped, up, first)

    def test_a_reload_moving_the_clusters_relay_takes_live_and_recovered_flows_with_it(self):
        recovered, live = self.client(), self.client()
        self.call(recovered)
        self.restart_ingress()
        media = MediaStream.payload(1)
        self.assertEqual(self.exchange(recovered, media), (b"EP7:" + media, self.vip), "not recovered")
        self.call(live)
        self.assertEqual(self.ingress.metrics().get("rtcedge_relay_flows_recovered_total"), 1)

        # Cluster 2's relay moves to 127.0.0.3 (here a plain socket that answers like one).
        moved = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(moved.close)
        moved.bind(("127.0.0.3", 0))
        before = self.ingress.metrics().get("rtcedge_relay_config_reloads_total", result="ok")
        self.write_ingress_config("127.0.0.3:%d" % moved.getsockname()[1])
        self.ingress.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.ingress.metrics().get("rtcedge_relay_config_reloads_total", result="ok") > before,
                 5, "the reload")

        def arrives_at_the_new_address(sock, payload):
            sock.sendto(payload, self.vip)
            ready, _, _ = select.select([moved], [], [], 2.0)
            self.assertTrue(ready, "nothing reached the new address of cluster 2's relay")
            data, sender = moved.recvfrom(65536)
            hdr, off = proxy_v2.parse(data)
            self.assertEqual((hdr.client, hdr.vip, data[off:]), (sock.getsockname(), self.vip, payload))
            # Its reply, framed, comes back to the client from the VIP.
            moved.sendto(data[:off] + b"from-new-relay", sender)
            ready, _, _ = select.select([sock], [], [], 2.0)
            self.assertTrue(ready, "the new relay's reply did not reach the client")
            self.assertEqual(sock.recvfrom(65536), (b"from-new-relay", self.vip))

        for sock in (recovered, live):
            arrives_at_the_new_address(sock, MediaStream.payload(2))
        # A relay restarted after the move recovers its flows to where cluster 2 is now.
        self.restart_ingress()
        arrives_at_the_new_address(live, MediaStream.payload(3))
        self.assertEqual(self.ingress.metrics().get("rtcedge_relay_flows_recovered_total"), 1)

    # The plain cases of GlobalRelayTest run in that class.
    test_a_flow_of_another_cluster_crosses_both_relays_and_comes_back_from_the_vip = None
    test_a_peer_that_never_answered_reports_no_reply = None
    test_forwarded_datagrams_from_outside_peers_trusted_are_dropped = None
    test_hints_nobody_serves_or_signed_with_the_wrong_keys_leave_no_state = None


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ARGS, rest = ap.parse_known_args()
    prog = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    result = prog.result
    sys.exit(0 if result.wasSuccessful() else 1)
